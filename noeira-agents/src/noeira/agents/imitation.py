"""What the imitation agents (``bc``, ``act``) share, as functions and small modules: reading
demonstrations from a LeRobot v3 dataset onto the device, checking them against the env's
spaces, normalisation kept as buffers (so it is in the checkpoint and in an exported policy),
LeRobot's action chunks, an image encoder trained from scratch, and dropout from a device generator.

Demonstrations are every frame of the dataset: the observation feature (a vector, or a camera
``[3, H, W]`` uint8) and the action feature, with each frame's episode end so a chunk of ``K``
actions starting at frame ``i`` reads frames ``i .. i+K-1`` clamped to the episode's last frame
and marks the clamped ones as padding (LeRobot's ``delta_timestamps`` rule).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch
from torch import Tensor, nn

from noeira.core.contracts import EnvSpec
from noeira.core.errors import UserError
from noeira.core.spaces import Box, Discrete

__all__ = ["ConvEncoder", "Demonstrations", "Normalizer", "action_chunks", "dropout", "load_demonstrations"]


@attrs.define
class Demonstrations:
    """Frames on the device: ``obs [F, *obs_shape]`` (float32, or uint8 images), ``actions
    [F, A]`` (float32) or ``[F]`` (int64, discrete), ``episode_end [F]`` (one past the last frame
    of each frame's episode)."""

    obs: Tensor
    actions: Tensor
    episode_end: Tensor
    fps: int
    episodes: int
    observation_feature: dict[str, Any]
    action_feature: dict[str, Any]

    @property
    def frames(self) -> int:
        return int(self.obs.shape[0])


def load_demonstrations(path: str, spec: EnvSpec, observation: str, action: str, device: torch.device) -> Demonstrations:
    """Read the dataset at ``path`` and check that it fits the env ``spec``: the observation
    feature's shape is the env's observation shape, the action feature fits its action space.
    A mismatch is a one-line :class:`UserError` naming both."""
    from noeira.core.dataset.replay import load_columns

    cols = load_columns(path, observation, action)
    obs = torch.as_tensor(cols["obs"])
    want = tuple(spec.observation_space.shape)
    if tuple(obs.shape[1:]) != want:
        raise UserError(f"dataset {path}: feature {observation!r} has shape {list(obs.shape[1:])}, but env "
                        f"{spec.name!r} observes {list(want)}; train in the env the dataset was recorded in (env=NAME), "
                        "or pick the feature with agent.observation_feature")
    act = np.asarray(cols["action"])
    space = spec.action_space
    if isinstance(space, Discrete):
        if not np.issubdtype(act.dtype, np.integer) or act.reshape(act.shape[0], -1).shape[1] != 1:
            raise UserError(f"dataset {path}: feature {action!r} ({act.dtype}, shape {list(act.shape[1:])}) is not one "
                            f"discrete action per frame, as env {spec.name!r} takes")
        act = act.reshape(-1) - space.start
        if act.min() < 0 or act.max() >= space.n:
            raise UserError(f"dataset {path}: actions in {action!r} run {act.min() + space.start}..{act.max() + space.start},"
                            f" outside env {spec.name!r}'s {space!r}")
        actions = torch.as_tensor(act, dtype=torch.int64)
    elif isinstance(space, Box) and len(space.shape) == 1:
        act = act.reshape(act.shape[0], -1)
        if act.shape[1] != space.shape[0]:
            raise UserError(f"dataset {path}: feature {action!r} has {act.shape[1]} values per frame, but env "
                            f"{spec.name!r} takes actions of shape {list(space.shape)}")
        actions = torch.as_tensor(act.astype(np.float32))
    else:
        raise UserError(f"env {spec.name!r}: action space {space!r} is not supported by imitation agents "
                        "(a vector Box or Discrete)")
    obs = obs if obs.dtype == torch.uint8 else obs.float()
    return Demonstrations(obs.to(device), actions.to(device), torch.as_tensor(cols["end"]).to(device), int(cols["fps"]),
                          int(cols["episodes"]), dict(cols["obs_feature"]), dict(cols["action_feature"]))


class Normalizer(nn.Module):
    """``(x - mean) / std`` with the statistics as buffers (saved with the policy); ``fit`` sets
    them from data (a std below ``eps`` counts as 1: a constant input stays 0)."""

    def __init__(self, shape: tuple[int, ...], device: torch.device, eps: float = 1e-6) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, device=device))
        self.register_buffer("std", torch.ones(shape, device=device))
        self.eps = eps

    @torch.no_grad()
    def fit(self, x: Tensor) -> None:
        x = x.float().reshape(x.shape[0], *self.mean.shape)
        self.mean.copy_(x.mean(0))
        std = x.std(0, unbiased=False)
        self.std.copy_(torch.where(std < self.eps, torch.ones_like(std), std))

    def forward(self, x: Tensor) -> Tensor:
        return (x.float() - self.mean) / self.std

    def inverse(self, y: Tensor) -> Tensor:
        return y * self.std + self.mean


def action_chunks(actions: Tensor, episode_end: Tensor, idx: Tensor, horizon: int) -> tuple[Tensor, Tensor]:
    """The ``horizon`` actions from each frame ``idx [B]``: ``([B, horizon, ...], pad [B, horizon])``,
    offsets past the episode's end read its last frame and are marked in ``pad``."""
    offsets = torch.arange(horizon, device=idx.device)
    want = idx.unsqueeze(1) + offsets
    end = episode_end[idx].unsqueeze(1)
    pad = want >= end
    return actions[torch.minimum(want, end - 1)], pad


def dropout(x: Tensor, p: float, generator: torch.Generator | None, training: bool) -> Tensor:
    """Inverted dropout with the mask drawn from ``generator`` (capture-safe, seeded), the identity
    when not ``training`` or ``p == 0``."""
    if not training or p <= 0:
        return x
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    return x * keep.to(x.dtype) / (1.0 - p)


class ConvEncoder(nn.Module):
    """A camera frame ``[B, 3, H, W]`` uint8 -> a feature map ``[B, channels, h, w]`` (four strided
    3x3 convolutions with ReLU, ``h ~ H / 16``), trained from scratch: no pretrained weights."""

    def __init__(self, channels: int = 64, device: torch.device | str = "cpu") -> None:
        super().__init__()
        widths = (32, 32, 64, channels)
        layers: list[nn.Module] = []
        c = 3
        for w in widths:
            layers += [nn.Conv2d(c, w, 3, stride=2, padding=1), nn.ReLU()]
            c = w
        self.net = nn.Sequential(*layers[:-1]).to(device)  # no ReLU on the last map: it becomes tokens / features
        self.channels = channels

    def forward(self, image: Tensor) -> Tensor:
        return self.net(image.float() / 255.0 - 0.5)

    def output_shape(self, hw: tuple[int, int]) -> tuple[int, int]:
        h, w = hw
        for _ in range(4):
            h, w = (h + 1) // 2, (w + 1) // 2
        return h, w
