"""Mountain car, batched in torch: gymnasium's ``MountainCar-v0`` (discrete push) and
``MountainCarContinuous-v0`` (continuous force) for ``N`` envs at once.

``velocity += push - 0.0025 cos(3 position)``, clipped to ``[-0.07, 0.07]``;
``position += velocity``, clipped to ``[-1.2, 0.6]``; hitting the left wall stops the car.
Terminated at the goal (``position >= 0.5`` discrete / ``0.45`` continuous, and
``velocity >= goal_velocity``). Reset: position uniform in ``(-0.6, -0.4)``, velocity 0.

- ``mountaincar``: action ``0, 1, 2`` pushes ``-0.001, 0, +0.001``; reward ``-1`` per step;
  truncated at 200 steps.
- ``mountaincar-continuous``: action ``[N, 1]`` clipped to ``[-1, 1]``, force ``0.0015``
  per unit; reward ``100`` at the goal minus ``0.1 action^2`` (of the unclipped action, as
  gymnasium); truncated at 999 steps. gymnasium stores this env's state as float32 after
  every step; so do we (in float64 mode the step is computed in float64 and the state is
  rounded to float32, which is gymnasium's float64-action path).
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, Discrete
from noeira.envs.classic._base import ClassicConfig, ClassicEnv, parse_dtype
from noeira.envs.classic.render import Canvas

__all__ = ["MountainCar", "MountainCarContinuous"]


class _MountainCarBase(ClassicEnv):
    """State ``[N, 2]``: position, velocity (gymnasium's ``unwrapped.state``)."""

    state_dim = 2
    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_position: float
    gravity = 0.0025
    reset_low, reset_high = (-0.6, 0.0), (-0.4, 0.0)  # velocity starts at 0

    def __init__(self, config: ClassicConfig, *, num_envs: int, backend: Backend, seed: int | None,
                 action_space_for: object) -> None:
        dtype, dev = parse_dtype(config.dtype), backend.device
        self.goal_velocity = config.goal_velocity  # type: ignore[attr-defined]
        low = torch.tensor([self.min_position, -self.max_speed], dtype=torch.float32).to(dtype)
        high = torch.tensor([self.max_position, self.max_speed], dtype=torch.float32).to(dtype)
        super().__init__(
            config,
            num_envs=num_envs,
            backend=backend,
            seed=seed,
            observation_space=Box(low, high, dtype=dtype, device=dev),
            action_space=action_space_for(dtype, dev),  # type: ignore[operator]
            max_episode_steps=config.max_episode_steps,  # type: ignore[attr-defined]
        )

    def _move(self, velocity: Tensor, position: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Clip, integrate, stop at the left wall; returns (position, velocity, at goal)."""
        velocity = torch.clamp(velocity, -self.max_speed, self.max_speed)
        position = torch.clamp(position + velocity, self.min_position, self.max_position)
        # clamp leaves exactly min_position at the wall, so <= is gymnasium's ==
        velocity = torch.where((position <= self.min_position) & (velocity < 0), 0.0, velocity)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        return position, velocity, terminated

    def _observe(self, out: Tensor) -> None:
        out.copy_(self.s.T)

    # -- render: gymnasium's scene, 600 x 400 ----------------------------------------------
    render_size = (400, 600)
    render_fps = 30
    HILL_RGB, CAR_RGB, WHEEL_RGB, FLAG_RGB = (0, 0, 0), (0, 0, 0), (128, 128, 128), (204, 204, 0)

    @staticmethod
    def _height(x: Tensor | float) -> Tensor:
        return torch.sin(3 * torch.as_tensor(x)) * 0.45 + 0.55

    def _draw(self, canvas: Canvas, s: Tensor) -> None:
        scale = canvas.width / (self.max_position - self.min_position)
        # the hill: y = height(x), 1.5 px thick across the curve
        wx = canvas.x / scale + self.min_position
        slope = 3 * 0.45 * torch.cos(3 * wx)
        hill = (canvas.y - self._height(wx) * scale).abs() <= 1.0 * torch.sqrt(1 + slope**2)
        canvas.paint(hill.expand(canvas.n, -1, -1), self.HILL_RGB)
        # the flag at the goal
        fx = (self.goal_position - self.min_position) * scale
        fy = float(self._height(self.goal_position)) * scale
        canvas.paint(canvas.box(fx, fy, 0.0, (-1.0, 1.0), (0.0, 50.0)).expand(canvas.n, -1, -1), self.HILL_RGB)
        canvas.paint(canvas.triangle([(fx, fy + 50), (fx, fy + 40), (fx + 25, fy + 45)]).expand(canvas.n, -1, -1),
                     self.FLAG_RGB)
        # the car, 40 x 20 at 10 px clearance, turned as gymnasium turns it (cos 3 position)
        pos = s[0]
        cx, cy, ang = (pos - self.min_position) * scale, self._height(pos) * scale, torch.cos(3 * pos)
        clearance, w, h = 10.0, 40.0, 20.0
        canvas.paint(canvas.box(cx, cy, ang, (-w / 2, w / 2), (clearance, clearance + h)), self.CAR_RGB)
        c, sn = torch.cos(ang), torch.sin(ang)
        for off in (w / 4, -w / 4):  # the wheels
            canvas.paint(canvas.circle(cx + off * c - clearance * sn, cy + off * sn + clearance * c, h / 2.5),
                         self.WHEEL_RGB)


class MountainCar(_MountainCarBase):
    """``num_envs`` mountain cars, discrete push. Observation ``[N, 2]`` (the state),
    action ``[N]`` int in {0, 1, 2}."""

    name = "mountaincar"
    goal_position = 0.5
    force = 0.001

    @attrs.frozen
    class Config(ClassicConfig):
        goal_velocity: float = 0.0
        """Minimum velocity at the goal for the episode to end (gymnasium's option)."""
        max_episode_steps: int = 200
        """Truncation step limit."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        super().__init__(config, num_envs=num_envs, backend=backend, seed=seed,
                         action_space_for=lambda dtype, dev: Discrete(3, device=dev))
        self._reward = torch.full((num_envs,), -1.0, dtype=self.dtype, device=self.device)

    def _physics(self, action: Tensor) -> tuple[Tensor, Tensor]:
        position, velocity = self.s.unbind(0)
        push = (action - 1).to(self.dtype) * self.force
        velocity = velocity + (push + torch.cos(3 * position) * (-self.gravity))
        position, velocity, terminated = self._move(velocity, position)
        self.s[0].copy_(position)
        self.s[1].copy_(velocity)
        return self._reward, terminated


class MountainCarContinuous(_MountainCarBase):
    """``num_envs`` mountain cars, continuous force. Observation ``[N, 2]`` (the state),
    action ``[N, 1]`` float in ``[-1, 1]`` (clipped)."""

    name = "mountaincar-continuous"
    goal_position = 0.45
    power = 0.0015
    min_action = -1.0
    max_action = 1.0

    @attrs.frozen
    class Config(ClassicConfig):
        goal_velocity: float = 0.0
        """Minimum velocity at the goal for the episode to end (gymnasium's option)."""
        max_episode_steps: int = 999
        """Truncation step limit."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        super().__init__(
            config, num_envs=num_envs, backend=backend, seed=seed,
            action_space_for=lambda dtype, dev: Box(self.min_action, self.max_action, shape=(1,), dtype=dtype, device=dev),
        )

    def _physics(self, action: Tensor) -> tuple[Tensor, Tensor]:
        position, velocity = self.s.unbind(0)
        a = self._float_action(action)
        force = torch.clamp(a, self.min_action, self.max_action)
        velocity = velocity + (force * self.power - 0.0025 * torch.cos(3 * position))
        position, velocity, terminated = self._move(velocity, position)
        if self.dtype != torch.float32:  # gymnasium keeps this env's state in float32
            position, velocity = position.float(), velocity.float()
        self.s[0].copy_(position)
        self.s[1].copy_(velocity)
        reward = terminated.to(self.dtype) * 100.0 - a**2 * 0.1
        return reward, terminated
