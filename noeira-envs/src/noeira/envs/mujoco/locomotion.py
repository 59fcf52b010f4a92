"""gymnasium's MuJoCo locomotion envs (v5), batched: HalfCheetah, Hopper, Walker2d, Ant,
Humanoid, Swimmer.

Each follows its ``gymnasium/envs/mujoco/*_v5.py`` term by term (same model file, frame
skip, observation, reward terms, health rules, reset noise, defaults of the keyword
arguments); on the ``mujoco`` engine in float64 the numbers match gymnasium's step by
step. Forward velocity is the change of a position over ``dt`` (the root ``qpos[0]``,
Ant's main body frame, Humanoid's centre of mass); the "healthy" terms and termination
read the state after the step. The step they share (observation head, reward sum,
termination) is ``_Locomotion``'s; each env names its position, health rule, contact cost
and extra observations.
"""

from __future__ import annotations

import math
from types import MappingProxyType

import attrs
import torch
from torch import Tensor

from noeira.core import Backend
from noeira.envs.mujoco.base import MujocoConfig, MujocoEnv, sumsq

__all__ = ["Ant", "HalfCheetah", "Hopper", "Humanoid", "Swimmer", "Walker2d"]


def _inside(x: Tensor, lo: float, hi: float) -> Tensor:
    """``lo < x < hi`` (gymnasium's strict bounds)."""
    return (x > lo) & (x < hi)


class _Locomotion(MujocoEnv):
    """What the six share. Observation ``qpos[:, k:]``, ``qvel`` (clipped to ``qvel_clip``),
    then ``_extra_observation()``, where ``k`` root position coordinates are left out when
    ``exclude_current_positions_from_observation``. Reward ``w_f * x_vel [+ healthy_reward *
    healthy] - w_c * |a|^2 [- _contact_cost()]`` (summed in that order), ``x_vel`` the change
    of ``_x()`` over ``dt``; terminates when not ``_healthy()`` and
    ``terminate_when_unhealthy``; an env without a health rule never terminates."""

    excluded_root_coords: int = 1
    """Root position coordinates ``exclude_current_positions_from_observation`` leaves out."""
    reward_terms = ("reward_forward", "reward_ctrl")
    end_values = ("x_position",)
    qvel_clip: float | None = None
    """The observation's ``qvel`` is clipped to ``[-qvel_clip, qvel_clip]``."""
    render_track_body = 1  # the camera follows the root body
    render_camera = MappingProxyType({"distance": 4.0, "elevation": -20.0})

    @property
    def obs_dim(self) -> int:
        return self.model.nq + self.model.nv - self._excluded()

    def _excluded(self) -> int:
        return self.excluded_root_coords * int(self.config.exclude_current_positions_from_observation)

    def _extra_observation(self) -> list[Tensor]:
        """``[N, *]`` parts appended after ``qvel`` (obs_dim counts them)."""
        return []

    def _observation_parts(self) -> list[Tensor]:
        p, clip = self.physics, self.qvel_clip
        qvel = p.qvel if clip is None else p.qvel.clamp(-clip, clip)
        return [p.qpos[:, self._excluded():], qvel, *self._extra_observation()]

    def _x(self) -> Tensor:
        """``[N]`` the x position whose velocity is rewarded: the root's ``qpos[0]``."""
        return self.physics.qpos[:, 0]

    def _healthy(self) -> Tensor | None:
        """``[N]`` bool, the state after the step; ``None``: no health rule."""
        return None

    def _contact_cost(self) -> Tensor | None:
        """``[N]`` the contact cost; ``None``: none."""
        return None

    def _end_values(self) -> dict[str, Tensor]:
        return {"x_position": self.physics.qpos[:, 0]}

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        c = self.config
        x_before = self._x().clone()
        a = self._simulate(action)
        x_velocity = (self._x() - x_before) / self.dt
        healthy = self._healthy()
        forward = c.forward_reward_weight * x_velocity
        ctrl_cost = c.ctrl_cost_weight * sumsq(a)
        contact_cost = self._contact_cost()
        reward, terms = forward, [forward, -ctrl_cost]  # in reward_terms' order
        if healthy is not None:
            survive = c.healthy_reward * healthy.to(self.physics.dtype)
            reward = reward + survive
            terms.append(survive)
        reward = reward - ctrl_cost
        if contact_cost is not None:
            reward = reward - contact_cost
            terms.append(-contact_cost)
        self._add_terms(*terms)
        if healthy is None:
            return reward, torch.zeros_like(reward, dtype=torch.bool)
        return reward, ~healthy & c.terminate_when_unhealthy


class HalfCheetah(_Locomotion):
    """``HalfCheetah-v5``: obs ``[N, 17]`` (``qpos[1:]``, ``qvel``), action ``[N, 6]`` in [-1, 1];
    reward ``w_f * x_vel - w_c * |a|^2``; never terminates."""

    name = "halfcheetah"
    qvel_noise = "normal"

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


class _Planar(_Locomotion):
    """Hopper and Walker2d: planar walkers with a health rule on height and angle, and the
    same keys and defaults but for the model and the health ranges."""

    qvel_clip = 10.0
    reward_terms = ("reward_forward", "reward_ctrl", "reward_survive")

    @attrs.frozen
    class Config(MujocoConfig):
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
        reset_noise_scale: float = 5e-3
        """qpos0 + U(-s, s), qvel U(-s, s) at reset."""
        exclude_current_positions_from_observation: bool = True
        """Leave the root x position out of the observation."""

    def _healthy(self) -> Tensor:
        c, qpos = self.config, self.physics.qpos
        return _inside(qpos[:, 1], *c.healthy_z_range) & _inside(qpos[:, 2], *c.healthy_angle_range)


class Hopper(_Planar):
    """``Hopper-v5``: obs ``[N, 11]`` (``qpos[1:]``, ``clip(qvel, -10, 10)``), action ``[N, 3]``;
    reward ``w_f * x_vel + healthy_reward * healthy - w_c * |a|^2``; terminates when unhealthy
    (``state[2:]``, height or angle out of range). Reset noise ``U(-s, s)``."""

    name = "hopper"

    @attrs.frozen
    class Config(_Planar.Config):
        """Hopper's keys (the reward weights, frame skip, reset noise: ``_Planar.Config``)."""

        xml_file: str = "hopper.xml"
        """Model: a file of gymnasium's assets, or a path."""
        healthy_state_range: tuple[float, float] = (-100.0, 100.0)
        """Healthy while every element of concat(qpos, qvel)[2:] lies strictly inside."""
        healthy_z_range: tuple[float, float] = (0.7, math.inf)
        """Healthy while the torso height lies strictly inside."""
        healthy_angle_range: tuple[float, float] = (-0.2, 0.2)
        """Healthy while the torso angle lies strictly inside."""

    def _healthy(self) -> Tensor:
        lo, hi = self.config.healthy_state_range
        state = torch.cat([self.physics.qpos, self.physics.qvel], dim=1)[:, 2:]
        return super()._healthy() & _inside(state, lo, hi).all(dim=1)


class Walker2d(_Planar):
    """``Walker2d-v5`` (model ``walker2d_v5.xml``): obs ``[N, 17]``, action ``[N, 6]``; reward
    and termination as Hopper's, health on height and angle only."""

    name = "walker2d"

    @attrs.frozen
    class Config(_Planar.Config):
        """Walker2d's keys (the reward weights, frame skip, reset noise: ``_Planar.Config``)."""

        xml_file: str = "walker2d_v5.xml"
        """Model: a file of gymnasium's assets, or a path."""
        healthy_z_range: tuple[float, float] = (0.8, 2.0)
        """Healthy while the torso height lies strictly inside."""
        healthy_angle_range: tuple[float, float] = (-1.0, 1.0)
        """Healthy while the torso angle lies strictly inside."""


class Ant(_Locomotion):
    """``Ant-v5``: obs ``[N, 105]`` (``qpos[2:]``, ``qvel``, clipped ``cfrc_ext[1:]``), action
    ``[N, 8]``; reward ``w_f * x_vel + healthy_reward * healthy - w_c * |a|^2 - w_contact *
    |clip(cfrc_ext)|^2``, the velocity of the main body's frame; terminates when the state is
    not finite or the torso height leaves ``healthy_z_range`` (inclusive bounds)."""

    name = "ant"
    reward_terms = ("reward_forward", "reward_ctrl", "reward_survive", "reward_contact")
    fields = ("xpos", "cfrc_ext")
    rne_post_constraint = True
    excluded_root_coords = 2
    qvel_noise = "normal"

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
        return super().obs_dim + 6 * (self.model.nbody - 1) * int(self.config.include_cfrc_ext_in_observation)

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        super().__init__(config, num_envs=num_envs, backend=backend, seed=seed)
        self._clipped = torch.empty_like(self._f["cfrc_ext"])  # reused: no fresh [N, nbody, 6] a step

    def _contact_forces(self) -> Tensor:
        """``[N, nbody, 6]`` the clipped contact forces, in a buffer rewritten by each call."""
        lo, hi = self.config.contact_force_range
        return torch.clamp(self._f["cfrc_ext"], lo, hi, out=self._clipped)

    def _extra_observation(self) -> list[Tensor]:
        return [self._contact_forces()[:, 1:].flatten(1)] if self.config.include_cfrc_ext_in_observation else []

    def _x(self) -> Tensor:
        return self._f["xpos"][:, self.config.main_body, 0]

    def _healthy(self) -> Tensor:
        p, (lo, hi) = self.physics, self.config.healthy_z_range
        z = p.qpos[:, 2]
        return self._finite() & (z >= lo) & (z <= hi)

    def _contact_cost(self) -> Tensor:
        return self.config.contact_cost_weight * sumsq(self._contact_forces())


class Humanoid(_Locomotion):
    """``Humanoid-v5``: obs ``[N, 348]`` (``qpos[2:]``, ``qvel``, ``cinert[1:]``, ``cvel[1:]``,
    ``qfrc_actuator[6:]``, ``cfrc_ext[1:]``), action ``[N, 17]`` in [-0.4, 0.4]; reward
    ``w_f * x_vel(centre of mass) + healthy_reward * healthy - w_c * |ctrl|^2 -
    clip(w_contact * |cfrc_ext|^2)``; terminates when the torso height leaves
    ``healthy_z_range``."""

    name = "humanoid"
    reward_terms = ("reward_forward", "reward_ctrl", "reward_survive", "reward_contact")
    fields = ("xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext")
    rne_post_constraint = True
    excluded_root_coords = 2

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
        return (super().obs_dim
                + 10 * nb * int(c.include_cinert_in_observation) + 6 * nb * int(c.include_cvel_in_observation)
                + (m.nv - 6) * int(c.include_qfrc_actuator_in_observation)
                + 6 * nb * int(c.include_cfrc_ext_in_observation))

    def _extra_observation(self) -> list[Tensor]:
        c, f = self.config, self._f
        parts = []
        if c.include_cinert_in_observation:
            parts.append(f["cinert"][:, 1:].flatten(1))
        if c.include_cvel_in_observation:
            parts.append(f["cvel"][:, 1:].flatten(1))
        if c.include_qfrc_actuator_in_observation:
            parts.append(f["qfrc_actuator"][:, 6:])
        if c.include_cfrc_ext_in_observation:
            parts.append(f["cfrc_ext"][:, 1:].flatten(1))
        return parts

    def _x(self) -> Tensor:
        """The centre of mass."""
        return (self._f["xipos"][:, :, 0] * self._mass).sum(1) / self._mass.sum()

    def _healthy(self) -> Tensor:
        return _inside(self.physics.qpos[:, 2], *self.config.healthy_z_range)

    def _contact_cost(self) -> Tensor:
        c = self.config
        return (c.contact_cost_weight * sumsq(self._f["cfrc_ext"])).clamp(*c.contact_cost_range)


class Swimmer(_Locomotion):
    """``Swimmer-v5``: obs ``[N, 8]`` (``qpos[2:]``, ``qvel``), action ``[N, 2]``; reward
    ``w_f * x_vel - w_c * |a|^2``; never terminates."""

    name = "swimmer"
    render_camera = MappingProxyType({"distance": 4.0, "elevation": -60.0})  # from above: it swims in the plane
    excluded_root_coords = 2

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
