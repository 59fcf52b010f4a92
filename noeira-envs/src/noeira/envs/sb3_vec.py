"""A noeira ``BatchedEnv`` as a Stable-Baselines3 ``VecEnv`` (``noeira.envs.to_sb3``).

SB3's own convention is noeira's: an env that ends is reset in the same step; its last
observation is ``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``
says whether the time limit (and not a terminal state) ended it. ``dones = terminated |
truncated``. Observations are numpy float32 (or float64 for a float64 env); actions come as
numpy and go to the env's device. Wrap it in ``VecMonitor`` for episode statistics.
Needs ``stable-baselines3`` (imported only when used).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3.common.vec_env import VecEnv

from noeira.core import BatchedEnv
from noeira.envs.gymnasium_vector import to_gymnasium_space

__all__ = ["NoeiraSB3VecEnv"]


class NoeiraSB3VecEnv(VecEnv):
    """``env`` (``N`` envs) through SB3's ``VecEnv``: ``reset() -> obs [N, ...]``,
    ``step(actions [N, ...]) -> (obs, rewards [N], dones [N], infos: list of N dicts)``."""

    def __init__(self, env: BatchedEnv) -> None:
        self.env = env
        self.render_mode = None
        super().__init__(env.num_envs, to_gymnasium_space(env.observation_space), to_gymnasium_space(env.action_space))
        self._actions: Any = None

    def reset(self) -> np.ndarray:
        seed = self._seeds[0]  # one generator drives every env: the first seed seeds it
        obs = self.env.reset(seed=seed)
        self._reset_seeds()
        self._reset_options()
        return obs.detach().cpu().numpy().copy()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        action = torch.as_tensor(np.asarray(self._actions), device=self.env.device).to(self.env.action_space.dtype)
        if action.dim() == 2 and self.env.action_space.shape == ():  # SB3 may hand discrete actions as [N, 1]
            action = action.reshape(-1)
        r = self.env.step(action)
        obs = r.obs.detach().cpu().numpy().copy()
        rewards = r.reward.detach().cpu().numpy().astype(np.float32)
        terminated, truncated = r.terminated.cpu().numpy(), r.truncated.cpu().numpy()
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            final = r.final_obs.detach().cpu().numpy()
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = final[i].copy()
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, rewards, dones, infos

    def close(self) -> None:
        self.env.close()

    # SB3 asks sub-envs for attributes; a batched env has one set, shared by all of them
    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name, None) if attr_name == "render_mode" else getattr(self.env, attr_name)
                for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        out = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [out for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
