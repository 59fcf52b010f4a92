"""Shared bookkeeping for batched tensor envs: buffers, autoreset, time limit, episode stats.

A subclass writes the physics; this class does the rest, capture-safe (masks with
``torch.where``, in-place writes into buffers allocated once, no host sync)::

    class MyEnv(TensorEnv):
        def _reset_envs(self, mask):   # write fresh state where mask [N] is True
        def _advance(self, action):    # step the state; return (reward [N], terminated [N])
        def _observe(self, out):       # write the observation into out [N, *obs_shape]
        def get_state(self) / set_state(self, state)

An env that is not capture-safe (it syncs with the host anyway) observes once per step when
no env finished: the observation after the step is then the final one, copied. So
``_observe`` must read the state only, which ``_reset_envs`` of an all-False mask leaves.
"""

from __future__ import annotations

import torch
from torch import Tensor

from noeira.core.contracts import Backend, EnvSpec, StepResult
from noeira.core.errors import ConfigError
from noeira.core.spaces import Box, Discrete, MultiDiscrete, Space

__all__ = ["TensorEnv", "check_action"]


def check_action(space: Space, action: Tensor, num_envs: int) -> None:
    """Raise a one-line ``ValueError`` when ``action`` does not fit ``space`` for ``num_envs``
    envs (shape, dtype, range). Off the hot path: it syncs with the host."""
    want = (num_envs, *space.shape)
    if not isinstance(action, Tensor):
        raise ValueError(f"action must be a torch.Tensor, got {type(action).__name__}")
    if tuple(action.shape) != want:
        raise ValueError(f"action shape {tuple(action.shape)} != expected {want}")
    if isinstance(space, Box):
        if not action.is_floating_point():
            raise ValueError(f"action dtype {action.dtype} is not floating point for {space}")
    elif action.is_floating_point():
        raise ValueError(f"action dtype {action.dtype} is not an integer dtype for {space}")
    if isinstance(space, (Discrete, MultiDiscrete)) and not space.contains(action.to(space.device)):
        raise ValueError(f"action out of range for {space}")


class TensorEnv:
    """Base for batched envs whose state is torch tensors. See the module docstring."""

    name: str = "env"

    def __init__(
        self,
        num_envs: int,
        backend: Backend,
        observation_space: Space,
        action_space: Space,
        max_episode_steps: int | None,
        seed: int | None = None,
        capture_safe: bool = True,
        dtype: torch.dtype = torch.float32,
        validate_actions: bool = False,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"env.num_envs: must be an integer >= 1, got {num_envs!r}")
        self.num_envs, self.backend, self.device = num_envs, backend, backend.device
        self.dtype = dtype
        self.observation_space, self.action_space = observation_space, action_space
        self.max_episode_steps, self.capture_safe = max_episode_steps, capture_safe
        self.validate_actions = validate_actions
        self.generator = backend.generator(seed)
        n, dev = num_envs, self.device
        obs_shape = observation_space.shape
        obs_dtype = observation_space.dtype
        self._result = StepResult(
            obs=torch.zeros((n, *obs_shape), dtype=obs_dtype, device=dev),
            reward=torch.zeros(n, dtype=dtype, device=dev),
            terminated=torch.zeros(n, dtype=torch.bool, device=dev),
            truncated=torch.zeros(n, dtype=torch.bool, device=dev),
            final_obs=torch.zeros((n, *obs_shape), dtype=obs_dtype, device=dev),
        )
        self.elapsed = torch.zeros(n, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, dtype=torch.float64 if dtype == torch.float64 else torch.float32, device=dev)
        self.episode_length = torch.zeros(n, dtype=torch.int64, device=dev)
        self._stats = torch.zeros(3, dtype=torch.float64, device=dev)  # return_sum, length_sum, count
        self._all = torch.ones(n, dtype=torch.bool, device=dev)

    # -- what a subclass writes ------------------------------------------------------------
    def _reset_envs(self, mask: Tensor) -> None:
        raise NotImplementedError

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def _observe(self, out: Tensor) -> None:
        raise NotImplementedError

    def get_state(self) -> Tensor:
        raise NotImplementedError

    def _set_state(self, state: Tensor) -> None:
        raise NotImplementedError

    # -- the contract ----------------------------------------------------------------------
    @property
    def spec(self) -> EnvSpec:
        return EnvSpec(
            name=self.name,
            num_envs=self.num_envs,
            observation_space=self.observation_space,
            action_space=self.action_space,
            device=self.device,
            max_episode_steps=self.max_episode_steps,
            capture_safe=self.capture_safe,
        )

    @property
    def obs(self) -> Tensor:
        return self._result.obs

    def reset(self, seed: int | None = None) -> Tensor:
        if seed is not None:
            self.generator.manual_seed(seed)
        self._reset_envs(self._all)
        self.elapsed.zero_()
        self.episode_return.zero_()
        self.episode_length.zero_()
        self._observe(self._result.obs)
        return self._result.obs

    def set_state(self, state: Tensor) -> None:
        state = torch.as_tensor(state, device=self.device)
        want = tuple(self.get_state().shape)
        if tuple(state.shape) != want:
            raise ValueError(f"{self.name}.set_state: state shape {tuple(state.shape)} != {want}")
        self._set_state(state.to(self.get_state().dtype))
        self._observe(self._result.obs)

    def step(self, action: Tensor) -> StepResult:
        if self.validate_actions:
            check_action(self.action_space, action, self.num_envs)
        r = self._result
        reward, terminated = self._advance(action)
        r.reward.copy_(reward)
        r.terminated.copy_(terminated)
        self.elapsed += 1
        if self.max_episode_steps is not None:
            torch.ge(self.elapsed, self.max_episode_steps, out=r.truncated)
        self._observe(r.final_obs)
        done = r.terminated | r.truncated
        self.episode_return += r.reward
        self.episode_length += 1
        d = done.to(self._stats.dtype)
        self._stats += torch.stack(
            [(self.episode_return * d).sum(), (self.episode_length * d).sum(), d.sum()]
        ).to(self._stats.dtype)
        self.episode_return.masked_fill_(done, 0)
        self.episode_length.masked_fill_(done, 0)
        self.elapsed.masked_fill_(done, 0)
        self._reset_envs(done)
        if self.capture_safe or bool(done.any()):
            self._observe(r.obs)
        else:  # nothing was reset: the state is the one just observed (this env syncs anyway)
            r.obs.copy_(r.final_obs)
        return r

    def pop_episode_stats(self) -> dict[str, Tensor]:
        s = self._stats.clone()
        self._stats.zero_()
        return {"return_sum": s[0], "length_sum": s[1], "count": s[2]}

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, device={self.device})"
