"""A noeira ``BatchedEnv`` as a gymnasium ``VectorEnv``, for code written against gymnasium.

Autoreset convention: **same step** (``metadata["autoreset_mode"] ==
AutoresetMode.SAME_STEP``), noeira's own. When sub-env ``i`` terminates or truncates,
``step`` returns the first observation of its next episode in ``obs[i]``; the observation
the step reached is ``info["final_obs"][i]`` and ``info["_final_obs"][i]`` is True. As in
gymnasium's sync/async vector envs in this mode, ``info["final_obs"]`` is an object array of
``num_envs`` entries (``None`` where the env did not end) with ``numpy=True``; with
``numpy=False`` it is the full ``[N, *obs_shape]`` tensor (rows valid where the mask is
True). Rewards, terminated and truncated belong to the step that ended the episode.
``gymnasium.wrappers.vector.RecordEpisodeStatistics`` supports this mode; gymnasium's vector
observation wrappers insist on next-step autoreset and refuse it.

``numpy=True`` (default): observations float32/float64 numpy arrays, actions taken as
numpy or torch. ``numpy=False``: torch tensors on the env's device (copies, so they are
yours to keep), for torch code that wants gymnasium's interface without host copies.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from noeira.core import BatchedEnv, Box, Discrete, MultiDiscrete, Space

__all__ = ["NoeiraVectorEnv", "to_gymnasium_space"]


def to_gymnasium_space(space: Space) -> gym.Space[Any]:
    """A noeira space (of one env) as the gymnasium space."""
    if isinstance(space, Box):
        dtype = np.float64 if space.dtype == torch.float64 else np.float32
        return gym.spaces.Box(space.low.cpu().numpy().astype(dtype), space.high.cpu().numpy().astype(dtype),
                              dtype=dtype)
    if isinstance(space, Discrete):
        return gym.spaces.Discrete(space.n, start=space.start)
    if isinstance(space, MultiDiscrete):
        return gym.spaces.MultiDiscrete(space.nvec.cpu().numpy())
    raise TypeError(f"no gymnasium equivalent for {space!r}")


class NoeiraVectorEnv(VectorEnv):
    """``env`` (a noeira BatchedEnv of ``N`` envs) through gymnasium's VectorEnv API.

    ``reset(seed)`` -> ``(obs [N, ...], {})``; ``step(actions [N, ...])`` ->
    ``(obs, reward [N], terminated [N], truncated [N], info)``; see the module docstring
    for the autoreset convention."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env: BatchedEnv, numpy: bool = True) -> None:
        self.env, self.numpy = env, numpy
        self.num_envs = env.num_envs
        self.single_observation_space = to_gymnasium_space(env.observation_space)
        self.single_action_space = to_gymnasium_space(env.action_space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._action_dtype = env.action_space.dtype
        self.spec = None

    def _out(self, x: torch.Tensor) -> Any:
        return x.detach().cpu().numpy().copy() if self.numpy else x.clone()

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every env; ``seed`` an int (a list takes its first entry: one generator
        drives all envs). ``options`` are not supported."""
        if options:
            raise ValueError("NoeiraVectorEnv.reset: options are not supported")
        if isinstance(seed, (list, tuple)):
            seed = seed[0]
        if seed is not None:
            self._np_random, self._np_random_seed = np.random.default_rng(seed), seed
        return self._out(self.env.reset(seed=seed)), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        action = torch.as_tensor(np.asarray(actions) if not isinstance(actions, torch.Tensor) else actions,
                                 device=self.env.device).to(self._action_dtype)
        r = self.env.step(action)
        done = r.terminated | r.truncated
        info: dict[str, Any] = {}
        if self.numpy:
            mask = done.cpu().numpy()
            if mask.any():
                final = r.final_obs.cpu().numpy()
                objs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(mask):
                    objs[i] = final[i].copy()
                info = {"final_obs": objs, "_final_obs": mask}
        else:
            # no host sync: always hand over the mask and the whole final_obs tensor
            info = {"final_obs": r.final_obs.clone(), "_final_obs": done}
        return self._out(r.obs), self._out(r.reward), self._out(r.terminated), self._out(r.truncated), info

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"NoeiraVectorEnv({self.env!r}, numpy={self.numpy})"
