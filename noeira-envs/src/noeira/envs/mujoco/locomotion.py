"""gymnasium's MuJoCo locomotion envs (v5), batched: HalfCheetah, Hopper, Walker2d, Ant,
Humanoid, Swimmer.

Each follows its ``gymnasium/envs/mujoco/*_v5.py`` term by term (same model file, frame
skip, observation, reward terms, health rules, reset noise, defaults of the keyword
arguments); on the ``mujoco`` engine in float64 the numbers match gymnasium's step by
step. Forward velocity is the change of a position over ``dt`` (the root ``qpos[0]``,
Ant's main body frame, Humanoid's centre of mass); the "healthy" terms and termination
read the state after the step.
"""

from __future__ import annotations

import math

import attrs
import torch
from torch import Tensor

from noeira.core import Backend
from noeira.envs.mujoco.base import MujocoConfig, MujocoEnv

__all__ = ["Ant", "HalfCheetah", "Hopper", "Humanoid", "Swimmer", "Walker2d"]


def _sumsq(x: Tensor) -> Tensor:
    """``[N, ...] -> [N]`` sum of squares over all but the first dim."""
    return x.square().flatten(1).sum(1)


def _inside(x: Tensor, lo: float, hi: float) -> Tensor:
    """``lo < x < hi`` (gymnasium's strict bounds)."""
    return (x > lo) & (x < hi)


class HalfCheetah(MujocoEnv):
    """``HalfCheetah-v5``: obs ``[N, 17]`` (``qpos[1:]``, ``qvel``), action ``[N, 6]`` in [-1, 1];
    reward ``w_f * x_vel - w_c * |a|^2``; never terminates."""

    name = "halfcheetah"

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "half_cheetah.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 5
        """MuJoCo substeps per env step."""
        forward_reward_weight: float = 1.0
        """Weight of the forward velocity reward."""
        ctrl_cost_weight: float = 0.1
        """Weight of the control cost |a|^2."""
        reset_noise_scale: float = 0.1
        """qpos0 + U(-s, s), qvel s * N(0, 1) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x position out of the observation."""

    @property
    def obs_dim(self) -> int:
        return self.model.nq + self.model.nv - int(self.config.exclude_current_positions_from_observation)

    def _observation(self) -> Tensor:
        skip = int(self.config.exclude_current_positions_from_observation)
        return torch.cat([self.physics.qpos[:, skip:], self.physics.qvel], dim=1)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c, qpos = self.config, self.physics.qpos
        x_before = qpos[:, 0].clone()
        a = self._simulate(action)
        x_velocity = (qpos[:, 0] - x_before) / self.dt
        reward = c.forward_reward_weight * x_velocity - c.ctrl_cost_weight * _sumsq(a)
        return reward, torch.zeros_like(reward, dtype=torch.bool)

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        s, m = self.config.reset_noise_scale, self.model
        return self.init_qpos + self._uniform(-s, s, m.nq), self.init_qvel + self._normal(s, m.nv)


class _Planar(MujocoEnv):
    """Hopper and Walker2d: planar walkers with a health rule on height and angle."""

    @property
    def obs_dim(self) -> int:
        return self.model.nq + self.model.nv - int(self.config.exclude_current_positions_from_observation)

    def _observation(self) -> Tensor:
        skip = int(self.config.exclude_current_positions_from_observation)
        return torch.cat([self.physics.qpos[:, skip:], self.physics.qvel.clamp(-10, 10)], dim=1)

    def _healthy(self) -> Tensor:
        c, qpos = self.config, self.physics.qpos
        return _inside(qpos[:, 1], *c.healthy_z_range) & _inside(qpos[:, 2], *c.healthy_angle_range)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c, qpos = self.config, self.physics.qpos
        x_before = qpos[:, 0].clone()
        a = self._simulate(action)
        x_velocity = (qpos[:, 0] - x_before) / self.dt
        healthy = self._healthy()
        reward = (c.forward_reward_weight * x_velocity + c.healthy_reward * healthy.to(qpos.dtype)
                  - c.ctrl_cost_weight * _sumsq(a))
        return reward, ~healthy & c.terminate_when_unhealthy

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        s, m = self.config.reset_noise_scale, self.model
        return self.init_qpos + self._uniform(-s, s, m.nq), self.init_qvel + self._uniform(-s, s, m.nv)


class Hopper(_Planar):
    """``Hopper-v5``: obs ``[N, 11]`` (``qpos[1:]``, ``clip(qvel, -10, 10)``), action ``[N, 3]``;
    reward ``w_f * x_vel + healthy_reward * healthy - w_c * |a|^2``; terminates when unhealthy
    (``state[2:]``, height or angle out of range)."""

    name = "hopper"

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "hopper.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 4
        """MuJoCo substeps per env step."""
        forward_reward_weight: float = 1.0
        """Weight of the forward velocity reward."""
        ctrl_cost_weight: float = 1e-3
        """Weight of the control cost |a|^2."""
        healthy_reward: float = 1.0
        """Reward per step while healthy."""
        terminate_when_unhealthy: bool = True
        """End the episode when unhealthy."""
        healthy_state_range: tuple[float, float] = (-100.0, 100.0)
        """Healthy while every element of concat(qpos, qvel)[2:] lies strictly inside."""
        healthy_z_range: tuple[float, float] = (0.7, math.inf)
        """Healthy while the torso height lies strictly inside."""
        healthy_angle_range: tuple[float, float] = (-0.2, 0.2)
        """Healthy while the torso angle lies strictly inside."""
        reset_noise_scale: float = 5e-3
        """qpos0 + U(-s, s), qvel U(-s, s) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x position out of the observation."""

    def _healthy(self) -> Tensor:
        lo, hi = self.config.healthy_state_range
        state = torch.cat([self.physics.qpos, self.physics.qvel], dim=1)[:, 2:]
        return super()._healthy() & _inside(state, lo, hi).all(dim=1)


class Walker2d(_Planar):
    """``Walker2d-v5`` (model ``walker2d_v5.xml``): obs ``[N, 17]``, action ``[N, 6]``; reward
    and termination as Hopper's, health on height and angle only."""

    name = "walker2d"

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "walker2d_v5.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 4
        """MuJoCo substeps per env step."""
        forward_reward_weight: float = 1.0
        """Weight of the forward velocity reward."""
        ctrl_cost_weight: float = 1e-3
        """Weight of the control cost |a|^2."""
        healthy_reward: float = 1.0
        """Reward per step while healthy."""
        terminate_when_unhealthy: bool = True
        """End the episode when unhealthy."""
        healthy_z_range: tuple[float, float] = (0.8, 2.0)
        """Healthy while the torso height lies strictly inside."""
        healthy_angle_range: tuple[float, float] = (-1.0, 1.0)
        """Healthy while the torso angle lies strictly inside."""
        reset_noise_scale: float = 5e-3
        """qpos0 + U(-s, s), qvel U(-s, s) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x position out of the observation."""


class Ant(MujocoEnv):
    """``Ant-v5``: obs ``[N, 105]`` (``qpos[2:]``, ``qvel``, clipped ``cfrc_ext[1:]``), action
    ``[N, 8]``; reward ``w_f * x_vel + healthy_reward * healthy - w_c * |a|^2 - w_contact *
    |clip(cfrc_ext)|^2``, the velocity of the main body's frame; terminates when the state is
    not finite or the torso height leaves ``healthy_z_range`` (inclusive bounds)."""

    name = "ant"
    fields = ("xpos", "cfrc_ext")
    rne_post_constraint = True

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "ant.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 5
        """MuJoCo substeps per env step."""
        forward_reward_weight: float = 1.0
        """Weight of the forward velocity reward."""
        ctrl_cost_weight: float = 0.5
        """Weight of the control cost |a|^2."""
        contact_cost_weight: float = 5e-4
        """Weight of the contact cost |clip(cfrc_ext)|^2."""
        healthy_reward: float = 1.0
        """Reward per step while healthy."""
        main_body: int = 1
        """Body id whose frame's x velocity is rewarded (1: the torso)."""
        terminate_when_unhealthy: bool = True
        """End the episode when unhealthy."""
        healthy_z_range: tuple[float, float] = (0.2, 1.0)
        """Healthy while the torso height lies inside (bounds included)."""
        contact_force_range: tuple[float, float] = (-1.0, 1.0)
        """Clip of the external contact forces, in the cost and the observation."""
        reset_noise_scale: float = 0.1
        """qpos0 + U(-s, s), qvel s * N(0, 1) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x, y position out of the observation."""
        include_cfrc_ext_in_observation: bool = True
        """Append the clipped external contact forces of the bodies (not the world)."""

    @property
    def obs_dim(self) -> int:
        c, m = self.config, self.model
        return (m.nq + m.nv - 2 * int(c.exclude_current_positions_from_observation)
                + 6 * (m.nbody - 1) * int(c.include_cfrc_ext_in_observation))

    def _contact_forces(self) -> Tensor:
        return self._f["cfrc_ext"].clamp(*self.config.contact_force_range)

    def _observation(self) -> Tensor:
        c, p = self.config, self.physics
        parts = [p.qpos[:, 2 * int(c.exclude_current_positions_from_observation):], p.qvel]
        if c.include_cfrc_ext_in_observation:
            parts.append(self._contact_forces()[:, 1:].flatten(1))
        return torch.cat(parts, dim=1)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c, p, xpos = self.config, self.physics, self._f["xpos"]
        xy_before = xpos[:, c.main_body, :2].clone()
        a = self._simulate(action)
        x_velocity = (xpos[:, c.main_body, 0] - xy_before[:, 0]) / self.dt
        lo, hi = c.healthy_z_range
        state = torch.cat([p.qpos, p.qvel], dim=1)
        z = p.qpos[:, 2]
        healthy = torch.isfinite(state).all(dim=1) & (z >= lo) & (z <= hi)
        reward = (c.forward_reward_weight * x_velocity + c.healthy_reward * healthy.to(p.dtype)
                  - c.ctrl_cost_weight * _sumsq(a) - c.contact_cost_weight * _sumsq(self._contact_forces()))
        return reward, ~healthy & c.terminate_when_unhealthy

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        s, m = self.config.reset_noise_scale, self.model
        return self.init_qpos + self._uniform(-s, s, m.nq), self.init_qvel + self._normal(s, m.nv)


class Humanoid(MujocoEnv):
    """``Humanoid-v5``: obs ``[N, 348]`` (``qpos[2:]``, ``qvel``, ``cinert[1:]``, ``cvel[1:]``,
    ``qfrc_actuator[6:]``, ``cfrc_ext[1:]``), action ``[N, 17]`` in [-0.4, 0.4]; reward
    ``w_f * x_vel(centre of mass) + healthy_reward * healthy - w_c * |ctrl|^2 -
    clip(w_contact * |cfrc_ext|^2)``; terminates when the torso height leaves
    ``healthy_z_range``."""

    name = "humanoid"
    fields = ("xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext")
    rne_post_constraint = True

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "humanoid.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 5
        """MuJoCo substeps per env step."""
        forward_reward_weight: float = 1.25
        """Weight of the forward velocity reward (of the centre of mass)."""
        ctrl_cost_weight: float = 0.1
        """Weight of the control cost |ctrl|^2."""
        contact_cost_weight: float = 5e-7
        """Weight of the contact cost |cfrc_ext|^2."""
        contact_cost_range: tuple[float, float] = (-math.inf, 10.0)
        """Clip of the contact cost."""
        healthy_reward: float = 5.0
        """Reward per step while healthy."""
        terminate_when_unhealthy: bool = True
        """End the episode when unhealthy."""
        healthy_z_range: tuple[float, float] = (1.0, 2.0)
        """Healthy while the torso height lies strictly inside."""
        reset_noise_scale: float = 1e-2
        """qpos0 + U(-s, s), qvel U(-s, s) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x, y position out of the observation."""
        include_cinert_in_observation: bool = True
        """Append the bodies' com-based inertia (cinert[1:])."""
        include_cvel_in_observation: bool = True
        """Append the bodies' com-based velocity (cvel[1:])."""
        include_qfrc_actuator_in_observation: bool = True
        """Append the actuator forces of the joints (qfrc_actuator[6:])."""
        include_cfrc_ext_in_observation: bool = True
        """Append the bodies' external contact forces (cfrc_ext[1:])."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        super().__init__(config, num_envs=num_envs, backend=backend, seed=seed)
        self._mass = torch.as_tensor(self.model.body_mass).to(self.physics.device, self.physics.dtype)

    @property
    def obs_dim(self) -> int:
        c, m = self.config, self.model
        nb = m.nbody - 1
        return (m.nq + m.nv - 2 * int(c.exclude_current_positions_from_observation)
                + 10 * nb * int(c.include_cinert_in_observation) + 6 * nb * int(c.include_cvel_in_observation)
                + (m.nv - 6) * int(c.include_qfrc_actuator_in_observation)
                + 6 * nb * int(c.include_cfrc_ext_in_observation))

    def _mass_center_x(self) -> Tensor:
        return (self._f["xipos"][:, :, 0] * self._mass).sum(1) / self._mass.sum()

    def _observation(self) -> Tensor:
        c, p, f = self.config, self.physics, self._f
        parts = [p.qpos[:, 2 * int(c.exclude_current_positions_from_observation):], p.qvel]
        if c.include_cinert_in_observation:
            parts.append(f["cinert"][:, 1:].flatten(1))
        if c.include_cvel_in_observation:
            parts.append(f["cvel"][:, 1:].flatten(1))
        if c.include_qfrc_actuator_in_observation:
            parts.append(f["qfrc_actuator"][:, 6:])
        if c.include_cfrc_ext_in_observation:
            parts.append(f["cfrc_ext"][:, 1:].flatten(1))
        return torch.cat(parts, dim=1)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c, p = self.config, self.physics
        x_before = self._mass_center_x()
        a = self._simulate(action)
        x_velocity = (self._mass_center_x() - x_before) / self.dt
        healthy = _inside(p.qpos[:, 2], *c.healthy_z_range)
        contact_cost = (c.contact_cost_weight * _sumsq(self._f["cfrc_ext"])).clamp(*c.contact_cost_range)
        reward = (c.forward_reward_weight * x_velocity + c.healthy_reward * healthy.to(p.dtype)
                  - c.ctrl_cost_weight * _sumsq(a) - contact_cost)
        return reward, ~healthy & c.terminate_when_unhealthy

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        s, m = self.config.reset_noise_scale, self.model
        return self.init_qpos + self._uniform(-s, s, m.nq), self.init_qvel + self._uniform(-s, s, m.nv)


class Swimmer(MujocoEnv):
    """``Swimmer-v5``: obs ``[N, 8]`` (``qpos[2:]``, ``qvel``), action ``[N, 2]``; reward
    ``w_f * x_vel - w_c * |a|^2``; never terminates."""

    name = "swimmer"

    @attrs.frozen
    class Config(MujocoConfig):
        xml_file: str = "swimmer.xml"
        """Model: a file of gymnasium's assets, or a path."""
        frame_skip: int = 4
        """MuJoCo substeps per env step."""
        forward_reward_weight: float = 1.0
        """Weight of the forward velocity reward."""
        ctrl_cost_weight: float = 1e-4
        """Weight of the control cost |a|^2."""
        reset_noise_scale: float = 0.1
        """qpos0 + U(-s, s), qvel U(-s, s) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x, y position out of the observation."""

    @property
    def obs_dim(self) -> int:
        return self.model.nq + self.model.nv - 2 * int(self.config.exclude_current_positions_from_observation)

    def _observation(self) -> Tensor:
        skip = 2 * int(self.config.exclude_current_positions_from_observation)
        return torch.cat([self.physics.qpos[:, skip:], self.physics.qvel], dim=1)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c, qpos = self.config, self.physics.qpos
        x_before = qpos[:, 0].clone()
        a = self._simulate(action)
        x_velocity = (qpos[:, 0] - x_before) / self.dt
        reward = c.forward_reward_weight * x_velocity - c.ctrl_cost_weight * _sumsq(a)
        return reward, torch.zeros_like(reward, dtype=torch.bool)

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        s, m = self.config.reset_noise_scale, self.model
        return self.init_qpos + self._uniform(-s, s, m.nq), self.init_qvel + self._uniform(-s, s, m.nv)
