"""The env ``dataset``: a LeRobot v3 dataset replayed open loop, so a policy learnt from a
robot's recordings (no simulator to run it in) trains and evaluates through the same driver.

Each env replays whole episodes, env ``i`` episodes ``i, i + N, i + 2N, ...`` (cycling). The
observation is the recorded ``observation`` feature of the current frame, whatever the action;
the reward scores the action against the one recorded at that frame: ``-mean((a - a*)^2)``
for a continuous action (so an episode's return is minus the summed squared error), ``1`` for
the recorded discrete action, else ``0``. An episode terminates after its last frame.

``noeira train agent=act dataset=PATH`` picks this env by itself for a dataset that was not
recorded in one of noeira's simulators (``robot_type`` other than ``noeira:<env>``).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch
from torch import Tensor

from noeira.core.contracts import Backend
from noeira.core.dataset.format import DatasetError
from noeira.core.envbase import TensorEnv
from noeira.core.spaces import Box, Discrete

__all__ = ["DatasetEnv", "load_columns"]


def load_columns(path: str, observation: str, action: str) -> dict[str, Any]:
    """The observation and action of every frame of the dataset at ``path`` as numpy arrays
    (a camera as ``[F, 3, H, W]`` uint8), each frame's episode bounds, the feature entries and fps."""
    from noeira.core.dataset.reader import LeRobotDataset

    ds = LeRobotDataset(path)
    for key, what in ((observation, "observation"), (action, "action")):
        if key not in ds.features:
            raise DatasetError(f"{path}: no feature {key!r} for the {what} (features: {', '.join(ds.features)})")
    if len(ds) == 0:
        raise DatasetError(f"{path}: holds no frames")
    obs = ds.video_frames(observation) if ds.features[observation]["dtype"] == "video" else ds.column(observation)
    act = ds.column(action)
    if ds.features[action]["dtype"] in ("video", "string", "bool"):
        raise DatasetError(f"{path}: feature {action!r} ({ds.features[action]['dtype']}) cannot be an action")
    return {"obs": obs, "action": act, "start": ds.frame_episode_start, "end": ds.frame_episode_end,
            "obs_feature": ds.features[observation], "action_feature": ds.features[action], "fps": ds.fps,
            "episodes": ds.num_episodes}


class DatasetEnv(TensorEnv):
    """See the module docstring."""

    name = "dataset"

    @attrs.frozen
    class Config:
        path: str = ""
        """The LeRobot v3 dataset to replay (dataset=PATH fills it in)."""
        observation: str = "observation.state"
        """The feature that is the observation (a vector, or a camera: [3, H, W] uint8)."""
        action: str = "action"
        """The feature holding the recorded actions."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        if not config.path:
            raise DatasetError("env.path: the dataset env replays a dataset: pass dataset=PATH (or env.path=PATH)")
        cols = load_columns(config.path, config.observation, config.action)
        dev = backend.device
        self.frames_obs = torch.as_tensor(cols["obs"], device=dev)
        if self.frames_obs.is_floating_point():
            self.frames_obs = self.frames_obs.float()
        act = cols["action"]
        self.discrete = np.issubdtype(act.dtype, np.integer)
        if self.discrete:
            act = act.reshape(-1)
            action_space: Any = Discrete(int(act.max()) + 1, device=dev)
        else:
            act = act.reshape(act.shape[0], -1).astype(np.float32)
            action_space = Box(torch.as_tensor(act.min(0)), torch.as_tensor(act.max(0)), dtype=torch.float32, device=dev)
        self.frames_action = torch.as_tensor(act, device=dev)
        self.frame_end = torch.as_tensor(cols["end"], device=dev)
        starts = np.unique(cols["start"])
        self.episode_start = torch.as_tensor(starts, device=dev)
        self.num_episodes = int(starts.shape[0])
        self.render_fps = cols["fps"]
        shape = tuple(self.frames_obs.shape[1:])
        obs_space = (Box(0, 255, shape=shape, dtype=torch.uint8, device=dev) if self.frames_obs.dtype == torch.uint8
                     else Box(-float("inf"), float("inf"), shape=shape, dtype=torch.float32, device=dev))
        longest = int((torch.as_tensor(cols["end"]) - torch.as_tensor(cols["start"])).max())
        super().__init__(num_envs, backend, obs_space, action_space, max_episode_steps=longest + 1, seed=seed)
        self.pos = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self.next_episode = torch.arange(num_envs, dtype=torch.int64, device=dev) % self.num_episodes

    def _reset_envs(self, mask: Tensor) -> None:
        start = self.episode_start[self.next_episode]
        self.pos.copy_(torch.where(mask, start, self.pos))
        self.next_episode.copy_(torch.where(mask, (self.next_episode + self.num_envs) % self.num_episodes,
                                            self.next_episode))

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        recorded = self.frames_action[self.pos]
        if self.discrete:
            reward = (action.reshape(-1).long() == recorded).float()
        else:
            reward = -(action.reshape(recorded.shape).float() - recorded).square().mean(-1)
        self.pos.add_(1)
        terminated = self.pos >= self.frame_end[self.pos - 1]
        return reward, terminated

    def _observe(self, out: Tensor) -> None:
        out.copy_(self.frames_obs[self.pos.clamp(max=self.frames_obs.shape[0] - 1)])

    def get_state(self) -> dict[str, Tensor]:
        return {"pos": self.pos.clone(), "next_episode": self.next_episode.clone()}

    def _set_state(self, state: dict[str, Tensor]) -> None:  # type: ignore[override]
        self.pos.copy_(state["pos"])
        self.next_episode.copy_(state["next_episode"])
