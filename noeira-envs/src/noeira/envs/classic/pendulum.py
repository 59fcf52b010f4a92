"""Pendulum, batched in torch: gymnasium's ``Pendulum-v1`` for ``N`` envs at once.

Torque ``u`` clipped to ``[-2, 2]``; ``thdot += (3 g / (2 l) sin(th) + 3 / (m l^2) u) dt``
clipped to ``[-8, 8]``, then ``th += thdot dt`` (semi-implicit Euler, ``dt = 0.05``);
reward ``-(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2)`` on the state before the step;
observation ``[cos th, sin th, thdot]``; never terminates, truncated at 200 steps; reset
uniform ``th in (-pi, pi)``, ``thdot in (-1, 1)``. In float64 the numbers match gymnasium's.
"""

from __future__ import annotations

import math

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box
from noeira.envs.classic._base import ClassicConfig, ClassicEnv, parse_dtype
from noeira.envs.classic.render import Canvas

__all__ = ["Pendulum", "angle_normalize"]


def angle_normalize(x: Tensor) -> Tensor:
    """Wrap angles into ``[-pi, pi)`` (numpy's floor-mod, as torch.remainder)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(ClassicEnv):
    """``num_envs`` pendulums. State ``[N, 2]``: th, thdot (gymnasium's ``unwrapped.state``).
    Observation ``[N, 3]``, action ``[N, 1]`` float torque in ``[-2, 2]`` (clipped)."""

    name = "pendulum"
    state_dim = 2

    @attrs.frozen
    class Config(ClassicConfig):
        g: float = 10.0
        """Gravity (gymnasium's ``g`` option)."""
        max_episode_steps: int = 200
        """Truncation step limit."""

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    m = 1.0
    l = 1.0  # noqa: E741 (gymnasium's name)
    reset_low, reset_high = (-math.pi, -1.0), (math.pi, 1.0)

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        dtype, dev = parse_dtype(config.dtype), backend.device
        self.g = config.g
        high = torch.tensor([1.0, 1.0, self.max_speed], dtype=dtype)
        super().__init__(
            config,
            num_envs=num_envs,
            backend=backend,
            seed=seed,
            observation_space=Box(-high, high, dtype=dtype, device=dev),
            action_space=Box(-self.max_torque, self.max_torque, shape=(1,), dtype=dtype, device=dev),
            max_episode_steps=config.max_episode_steps,
        )

    def _physics(self, action: Tensor) -> tuple[Tensor, Tensor]:
        th, thdot = self.s.unbind(0)
        u = torch.clamp(self._float_action(action), -self.max_torque, self.max_torque)
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
        g, m, length, dt = self.g, self.m, self.l, self.dt
        newthdot = thdot + (3 * g / (2 * length) * torch.sin(th) + 3.0 / (m * length**2) * u) * dt
        newthdot = torch.clamp(newthdot, -self.max_speed, self.max_speed)
        th.add_(newthdot * dt)  # in place on the state rows (costs used the old ones)
        thdot.copy_(newthdot)
        return -costs, self._no_termination

    def _observe(self, out: Tensor) -> None:
        th, thdot = self.s.unbind(0)
        torch.stack([torch.cos(th), torch.sin(th), thdot], dim=1, out=out)

    # -- render: gymnasium's scene, 500 x 500 ----------------------------------------------
    render_size = (500, 500)
    render_fps = 30
    ROD_RGB, AXLE_RGB = (204, 77, 77), (0, 0, 0)

    def _draw(self, canvas: Canvas, s: Tensor) -> None:
        scale, mid = canvas.width / 4.4, canvas.width / 2  # +-2.2 units across
        half, angle = 0.1 * scale, s[0] + math.pi / 2  # th = 0 upright, counterclockwise
        end_x, end_y = mid + self.l * scale * torch.cos(angle), mid + self.l * scale * torch.sin(angle)
        canvas.paint(canvas.rod(mid, mid, angle, self.l * scale, half), self.ROD_RGB)
        canvas.paint(canvas.circle(mid, mid, half) | canvas.circle(end_x, end_y, half), self.ROD_RGB)
        canvas.paint(canvas.circle(mid, mid, 0.05 * scale), self.AXLE_RGB)
