"""gymnasium's MuJoCo classic envs (v5), batched: InvertedPendulum, InvertedDoublePendulum,
Reacher. Each follows its ``gymnasium/envs/mujoco/*_v5.py`` term by term; on the
``mujoco`` engine in float64 the numbers match gymnasium's step by step. The reward's terms
(Reacher's and InvertedDoublePendulum's, named as in gymnasium's ``info``) are summed per
episode into the driver's metrics.
"""

from __future__ import annotations

import math
from types import MappingProxyType

import attrs
import torch
from torch import Tensor

from noeira.envs.mujoco.base import MujocoConfig, MujocoEnv, sumsq

__all__ = ["InvertedDoublePendulum", "InvertedPendulum", "Reacher"]


class InvertedPendulum(MujocoEnv):
    """``InvertedPendulum-v5``: obs ``[N, 4]`` (``qpos``, ``qvel``), action ``[N, 1]`` in [-3, 3];
    reward 1 per step while the pole stays within 0.2 rad, which ends the episode."""

    name = "inverted-pendulum"

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "inverted_pendulum.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 2
        """MuJoCo substeps per env step."""
        reset_noise_scale: float = 0.01
        """qpos0 + U(-s, s), qvel U(-s, s) at reset."""

    @property
    def obs_dim(self) -> int:
        return self.model.nq + self.model.nv

    def _observation_parts(self) -> list[Tensor]:
        return [self.physics.qpos, self.physics.qvel]

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        self._simulate(action)
        qpos = self.physics.qpos
        terminated = ~self._finite() | (qpos[:, 1].abs() > 0.2)
        return (~terminated).to(qpos.dtype), terminated


class InvertedDoublePendulum(MujocoEnv):
    """``InvertedDoublePendulum-v5``: obs ``[N, 9]`` (cart position, sin and cos of the hinge
    angles, ``clip(qvel, -10, 10)``, the cart's clipped constraint force), action ``[N, 1]``;
    reward ``healthy_reward * alive - 0.01 x^2 - (y - 2)^2 - 0.001 v1^2 - 0.005 v2^2`` from
    the tip site ``(x, y)``; terminates when ``y <= 1``."""

    name = "inverted-double-pendulum"
    render_camera = MappingProxyType({"distance": 3.5, "lookat": (0.0, 0.0, 0.6), "elevation": -10.0})
    fields = ("site_xpos", "qfrc_constraint")
    reward_terms = ("reward_survive", "distance_penalty", "velocity_penalty")
    qvel_noise = "normal"

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "inverted_double_pendulum.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 5
        """MuJoCo substeps per env step."""
        healthy_reward: float = 10.0
        """Reward per step while alive."""
        reset_noise_scale: float = 0.1
        """qpos0 + U(-s, s), qvel s * N(0, 1) at reset."""

    @property
    def obs_dim(self) -> int:
        return 1 + 2 * (self.model.nq - 1) + self.model.nv + 1

    def _observation_parts(self) -> list[Tensor]:
        p = self.physics
        return [p.qpos[:, :1], p.qpos[:, 1:].sin(), p.qpos[:, 1:].cos(), p.qvel.clamp(-10, 10),
                self._f["qfrc_constraint"][:, :1].clamp(-10, 10)]

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        self._simulate(action)
        tip, qvel = self._f["site_xpos"][:, 0], self.physics.qvel
        x, y = tip[:, 0], tip[:, 2]
        terminated = y <= 1
        v1, v2 = qvel[:, 1], qvel[:, 2]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2
        alive_bonus = self.config.healthy_reward * (~terminated).to(x.dtype)
        self._add_terms(alive_bonus, -dist_penalty, -vel_penalty)
        return alive_bonus - dist_penalty - vel_penalty, terminated


class Reacher(MujocoEnv):
    """``Reacher-v5``: obs ``[N, 10]`` (cos, sin of the arm angles, target position, arm
    velocities, fingertip - target in the plane), action ``[N, 2]`` in [-1, 1]; reward
    ``-w_d |fingertip - target| - w_c |a|^2``; never terminates, truncated at 50 steps.
    The target is drawn uniformly in the disc of radius 0.2 (gymnasium draws it by rejection
    from the square; here by radius and angle, the same distribution, with no loop)."""

    name = "reacher"
    render_camera = MappingProxyType({"distance": 0.9, "elevation": -70.0})
    fields = ("xpos",)
    reward_terms = ("reward_dist", "reward_ctrl")

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "reacher.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 2
        """MuJoCo substeps per env step."""
        reward_dist_weight: float = 1.0
        """Weight of the fingertip-target distance."""
        reward_control_weight: float = 1.0
        """Weight of the control cost |a|^2."""
        max_episode_steps: int = 50
        """Truncation step limit."""

    def __init__(self, config: Config, *, num_envs: int, backend: object, seed: int | None) -> None:
        super().__init__(config, num_envs=num_envs, backend=backend, seed=seed)  # type: ignore[arg-type]
        self._fingertip = self.model.body("fingertip").id
        self._target = self.model.body("target").id

    @property
    def obs_dim(self) -> int:
        return 10

    def _vec(self) -> Tensor:
        xpos = self._f["xpos"]
        return xpos[:, self._fingertip] - xpos[:, self._target]

    def _observation_parts(self) -> list[Tensor]:
        qpos, qvel = self.physics.qpos, self.physics.qvel
        theta = qpos[:, :2]
        return [theta.cos(), theta.sin(), qpos[:, 2:], qvel[:, :2], self._vec()[:, :2]]

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c = self.config
        a = self._simulate(action)
        reward_dist = -torch.linalg.vector_norm(self._vec(), dim=1) * c.reward_dist_weight
        reward_ctrl = -sumsq(a) * c.reward_control_weight
        reward = reward_dist + reward_ctrl
        self._add_terms(reward_dist, reward_ctrl)
        return reward, torch.zeros_like(reward, dtype=torch.bool)

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        m = self.model
        qpos = self.init_qpos + self._uniform(-0.1, 0.1, m.nq)
        radius = 0.2 * self._uniform(0.0, 1.0, 1).sqrt()
        angle = self._uniform(0.0, 2 * math.pi, 1)
        qpos = torch.cat([qpos[:, :-2], radius * angle.cos(), radius * angle.sin()], dim=1)
        qvel = self.init_qvel + self._uniform(-0.005, 0.005, m.nv)
        qvel = torch.cat([qvel[:, :-2], torch.zeros_like(qvel[:, -2:])], dim=1)
        return qpos, qvel
