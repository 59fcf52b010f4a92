"""Shared pieces of the classic-control envs: the config fields every one has and the
batched-env scaffolding on top of :class:`noeira.core.TensorEnv`.

The state is kept as ``self.s`` ``[state_dim, N]``: one contiguous row per state variable, so
each elementwise op of the physics reads and writes dense memory (a ``[N, state_dim]``
layout would make every column a strided view, several times slower in eager mode).
``get_state``/``set_state`` exchange ``[N, state_dim]`` in gymnasium's ``env.unwrapped.state``
layout, so a state can be set in both and compared.
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, ConfigError, Space, TensorEnv

__all__ = ["ClassicConfig", "ClassicEnv", "parse_dtype"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def parse_dtype(name: str) -> torch.dtype:
    """``"float32"`` / ``"float64"`` -> the torch dtype; anything else is a ConfigError."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ConfigError(f"env.dtype: expected one of {sorted(_DTYPES)}, got {name!r}") from None


@attrs.frozen
class ClassicConfig:
    """Keys every classic-control env takes."""

    dtype: str = "float32"
    """Float dtype of state, observations and rewards: float32 | float64 (float64 matches
    gymnasium's numpy arithmetic step for step)."""
    validate_actions: bool = False
    """Check every action's shape, dtype and range before stepping (syncs with the host:
    for debugging, not for speed or graph capture)."""


class ClassicEnv(TensorEnv):
    """A TensorEnv whose physical state is ``self.s`` ``[state_dim, N]`` (see the module
    docstring); subclasses write ``_sample_initial_state``, ``_advance`` and ``_observe``."""

    state_dim: int

    def __init__(
        self,
        config: ClassicConfig,
        *,
        num_envs: int,
        backend: Backend,
        seed: int | None,
        observation_space: Space,
        action_space: Space,
        max_episode_steps: int,
    ) -> None:
        dtype = parse_dtype(config.dtype)
        super().__init__(
            num_envs,
            backend,
            observation_space,
            action_space,
            max_episode_steps,
            seed=seed,
            capture_safe=True,
            dtype=dtype,
            validate_actions=config.validate_actions,
        )
        self.config = config
        self.s = torch.zeros((self.state_dim, num_envs), dtype=dtype, device=self.device)
        self._no_termination = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._reset_envs(self._all)
        self._observe(self._result.obs)

    def _uniform(self, low: Tensor | float, high: Tensor | float, shape: tuple[int, ...]) -> Tensor:
        """Uniform samples in ``[low, high)`` from the env's generator (gymnasium's
        ``np_random.uniform`` in distribution)."""
        u = torch.rand(shape, generator=self.generator, dtype=self.dtype, device=self.device)
        return low + u * (high - low)

    def _reset_envs(self, mask: Tensor) -> None:
        fresh = self._sample_initial_state()
        torch.where(mask, fresh, self.s, out=self.s)  # mask [N] broadcasts over the rows

    def _sample_initial_state(self) -> Tensor:
        """A fresh state ``[state_dim, N]`` for every env (the caller keeps the masked ones)."""
        raise NotImplementedError

    def get_state(self) -> Tensor:
        """A copy of the state ``[N, state_dim]`` in gymnasium's ``unwrapped.state`` layout."""
        return self.s.T.clone(memory_format=torch.contiguous_format)

    def _set_state(self, state: Tensor) -> None:
        self.s.copy_(state.T)

    def _float_action(self, action: Tensor) -> Tensor:
        """A Box action ``[N, 1]`` as ``[N]`` in the env's dtype."""
        return action.reshape(self.num_envs).to(self.dtype)
