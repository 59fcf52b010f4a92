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
from noeira.envs.classic.render import Canvas

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
    docstring); subclasses set ``state_dim`` and ``reset_low``/``reset_high`` and write
    ``_physics`` and ``_observe``.

    Reset states are drawn for every env at the start of each step into a buffer (one
    generator call per step, fixed shapes); the envs that end in the step keep their draw.
    One draw per step also keeps ``torch.compile`` to one graph break around it.
    """

    state_dim: int
    reset_low: tuple[float, ...]
    reset_high: tuple[float, ...]
    """Reset state uniform in ``[reset_low, reset_high)`` per variable (gymnasium's bounds)."""
    reset_float32: bool = False
    """Round reset states to float32 (gymnasium's Acrobot keeps them so)."""

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
        if max_episode_steps < 1:
            raise ConfigError(f"env.max_episode_steps: must be >= 1, got {max_episode_steps}")
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
        self._fresh = torch.zeros_like(self.s)  # reset draws, written in place every step
        low = torch.tensor(self.reset_low, dtype=dtype, device=self.device).unsqueeze(1)
        high = torch.tensor(self.reset_high, dtype=dtype, device=self.device).unsqueeze(1)
        self._reset_low, self._reset_span = low, high - low
        self._no_termination = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.reset(seed)

    def _draw_reset_states(self) -> None:
        """A fresh state for every env into ``self._fresh`` ``[state_dim, N]``: numpy's
        ``uniform(low, high) = low + (high - low) * random()``, from ``self.generator``."""
        self._fresh.uniform_(0.0, 1.0, generator=self.generator)
        self._fresh.mul_(self._reset_span).add_(self._reset_low)
        if self.reset_float32 and self.dtype != torch.float32:
            self._fresh.copy_(self._fresh.float())

    def reset(self, seed: int | None = None) -> Tensor:
        if seed is not None:
            self.generator.manual_seed(seed)
        self._draw_reset_states()
        return super().reset()

    def _reset_envs(self, mask: Tensor) -> None:
        # the draws of this step (or of reset); envs not in mask keep their state
        torch.where(mask, self._fresh, self.s, out=self.s)  # mask [N] broadcasts over the rows

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        self._draw_reset_states()
        return self._physics(action)

    def _physics(self, action: Tensor) -> tuple[Tensor, Tensor]:
        """Step ``self.s`` in place under ``action``; return (reward [N], terminated [N])."""
        raise NotImplementedError

    def get_state(self) -> Tensor:
        """A copy of the state ``[N, state_dim]`` in gymnasium's ``unwrapped.state`` layout."""
        return self.s.T.clone(memory_format=torch.contiguous_format)

    def _set_state(self, state: Tensor) -> None:
        self.s.copy_(state.T)

    render_size: tuple[int, int] = (400, 600)
    """Frame height and width of :meth:`render` (gymnasium's)."""
    render_fps: float = 30
    """Frames per second of a video of this env (gymnasium's ``metadata["render_fps"]``)."""

    @torch.no_grad()
    def render(self) -> Tensor:
        """RGB frames of every env ``[N, H, W, 3]`` uint8: gymnasium's scene of the current
        state, drawn in torch (:mod:`noeira.envs.classic.render`)."""
        canvas = Canvas(self.num_envs, *self.render_size, self.device)
        self._draw(canvas, self.s.float())
        return canvas.frames()

    def _draw(self, canvas: Canvas, s: Tensor) -> None:
        """Draw the state ``s`` ``[state_dim, N]`` (float32) onto ``canvas``."""
        raise NotImplementedError(f"{self.name} cannot render")

    def _float_action(self, action: Tensor) -> Tensor:
        """A Box action ``[N, 1]`` as ``[N]`` in the env's dtype."""
        return action.reshape(self.num_envs).to(self.dtype)
