"""Acrobot, batched in torch: gymnasium's ``Acrobot-v1`` for ``N`` envs at once.

Two links, torque ``{-1, 0, +1}`` on the joint between them (action ``0, 1, 2``). The
dynamics are Sutton's (``book_or_nips="book"``, gymnasium's default, or ``"nips"``),
integrated with one classic Runge-Kutta-4 step of ``dt = 0.2``; then both angles wrap to
``[-pi, pi]`` and the velocities clip to ``4 pi`` / ``9 pi``. Terminated when the free end
is a link's length above the pivot (``-cos th1 - cos(th1 + th2) > 1``); reward ``-1`` per step,
``0`` on the terminating one; truncated at 500 steps. Observation
``[cos th1, sin th1, cos th2, sin th2, dth1, dth2]``; reset uniform in ``(-0.1, 0.1)^4``
rounded to float32 (as gymnasium's). The arithmetic follows gymnasium's expressions, so
float64 matches it to the last bits.
"""

from __future__ import annotations

from math import pi

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, ConfigError, Discrete
from noeira.envs.classic._base import ClassicConfig, ClassicEnv, parse_dtype
from noeira.envs.classic.render import Canvas

__all__ = ["Acrobot", "wrap_angle"]


def wrap_angle(x: Tensor, m: float, big_m: float, unrolled: int = 4) -> Tensor:
    """gymnasium's ``wrap``: add or subtract ``big_m - m`` until ``x`` is in ``[m, big_m]``.

    The loop is unrolled ``unrolled`` times (bitwise gymnasium's repeated subtraction; one
    step of the acrobot moves an angle by less than two turns), then any rest is removed
    in one go, so there is no data-dependent control flow."""
    diff = big_m - m
    for _ in range(unrolled):
        x = torch.where(x > big_m, x - diff, x)
    x = torch.where(x > big_m, x - torch.ceil((x - big_m) / diff) * diff, x)
    for _ in range(unrolled):
        x = torch.where(x < m, x + diff, x)
    return torch.where(x < m, x + torch.ceil((m - x) / diff) * diff, x)


class Acrobot(ClassicEnv):
    """``num_envs`` acrobots. State ``[N, 4]``: th1, th2, dth1, dth2 (gymnasium's
    ``unwrapped.state``). Observation ``[N, 6]``, action ``[N]`` int in {0, 1, 2}."""

    name = "acrobot"
    state_dim = 4

    @attrs.frozen
    class Config(ClassicConfig):
        book_or_nips: str = "book"
        """Dynamics: "book" (Sutton & Barto; gymnasium's default) or "nips" (Sutton 1996)."""
        max_episode_steps: int = 500
        """Truncation step limit."""

    dt = 0.2
    LINK_LENGTH_1 = 1.0
    LINK_LENGTH_2 = 1.0
    LINK_MASS_1 = 1.0
    LINK_MASS_2 = 1.0
    LINK_COM_POS_1 = 0.5
    LINK_COM_POS_2 = 0.5
    LINK_MOI = 1.0
    MAX_VEL_1 = 4 * pi
    MAX_VEL_2 = 9 * pi
    reset_low, reset_high = (-0.1,) * 4, (0.1,) * 4
    reset_float32 = True  # gymnasium draws in float64 and keeps float32

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        if config.book_or_nips not in ("book", "nips"):
            raise ConfigError(f"env.book_or_nips: expected 'book' or 'nips', got {config.book_or_nips!r}")
        dtype, dev = parse_dtype(config.dtype), backend.device
        high = torch.tensor([1.0, 1.0, 1.0, 1.0, self.MAX_VEL_1, self.MAX_VEL_2], dtype=torch.float32).to(dtype)
        super().__init__(
            config,
            num_envs=num_envs,
            backend=backend,
            seed=seed,
            observation_space=Box(-high, high, dtype=dtype, device=dev),
            action_space=Discrete(3, device=dev),
            max_episode_steps=config.max_episode_steps,
        )
        self._book = config.book_or_nips == "book"
        self._reward = torch.full((num_envs,), -1.0, dtype=dtype, device=dev)

    def _dsdt(self, s: Tensor, a: Tensor) -> Tensor:
        """Time derivative of the state ``[4, N]`` under torque ``a`` ``[N]`` (gymnasium's
        ``_dsdt``, the same expressions in the same order)."""
        m1, m2 = self.LINK_MASS_1, self.LINK_MASS_2
        l1 = self.LINK_LENGTH_1
        lc1, lc2 = self.LINK_COM_POS_1, self.LINK_COM_POS_2
        I1 = I2 = self.LINK_MOI  # noqa: N806 (the book's names)
        g = 9.8
        theta1, theta2, dtheta1, dtheta2 = s.unbind(0)
        cos, sin = torch.cos, torch.sin
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos(theta2)) + I1 + I2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos(theta2)) + I2
        phi2 = m2 * lc2 * g * cos(theta1 + theta2 - pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * dtheta2**2 * sin(theta2)
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin(theta2)
            + (m1 * lc1 + m2 * l1) * g * cos(theta1 - pi / 2)
            + phi2
        )
        if self._book:
            ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin(theta2) - phi2) / (
                m2 * lc2**2 + I2 - d2**2 / d1
            )
        else:
            ddtheta2 = (a + d2 / d1 * phi1 - phi2) / (m2 * lc2**2 + I2 - d2**2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return torch.stack([dtheta1, dtheta2, ddtheta1, ddtheta2])

    def _physics(self, action: Tensor) -> tuple[Tensor, Tensor]:
        torque = (action - 1).to(self.dtype)  # AVAIL_TORQUE = [-1, 0, +1]
        y0 = self.s
        dt = self.dt
        dt2 = dt / 2.0
        k1 = self._dsdt(y0, torque)
        k2 = self._dsdt(y0 + dt2 * k1, torque)
        k3 = self._dsdt(y0 + dt2 * k2, torque)
        k4 = self._dsdt(y0 + dt * k3, torque)
        ns = y0 + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        th1, th2, dth1, dth2 = ns.unbind(0)
        s0, s1, s2, s3 = self.s.unbind(0)
        s0.copy_(wrap_angle(th1, -pi, pi))
        s1.copy_(wrap_angle(th2, -pi, pi))
        torch.clamp(dth1, -self.MAX_VEL_1, self.MAX_VEL_1, out=s2)
        torch.clamp(dth2, -self.MAX_VEL_2, self.MAX_VEL_2, out=s3)
        terminated = -torch.cos(s0) - torch.cos(s1 + s0) > 1.0
        return torch.where(terminated, 0.0, self._reward), terminated

    def _observe(self, out: Tensor) -> None:
        s0, s1, s2, s3 = self.s.unbind(0)
        torch.stack([torch.cos(s0), torch.sin(s0), torch.cos(s1), torch.sin(s1), s2, s3], dim=1, out=out)



    # -- render: gymnasium's scene, 500 x 500 ----------------------------------------------
    render_size = (500, 500)
    render_fps = 15
    LINK_RGB, JOINT_RGB, LINE_RGB = (0, 204, 204), (204, 204, 0), (0, 0, 0)

    def _draw(self, canvas: Canvas, s: Tensor) -> None:
        bound = self.LINK_LENGTH_1 + self.LINK_LENGTH_2 + 0.2
        scale, mid = canvas.width / (2 * bound), canvas.width / 2
        # the goal: the free end a link's length above the pivot
        canvas.paint(canvas.hline(mid + self.LINK_LENGTH_1 * scale, x0=0.0, x1=float(canvas.width)), self.LINE_RGB)
        th1, th12 = s[0], s[0] + s[1]  # angles from straight down, counterclockwise
        jx, jy = mid + self.LINK_LENGTH_1 * scale * torch.sin(th1), mid - self.LINK_LENGTH_1 * scale * torch.cos(th1)
        half = 0.1 * scale
        for (x, y), th, length in (((mid, mid), th1, self.LINK_LENGTH_1), ((jx, jy), th12, self.LINK_LENGTH_2)):
            canvas.paint(canvas.rod(x, y, th - pi / 2, length * scale, half), self.LINK_RGB)
            canvas.paint(canvas.circle(x, y, half), self.JOINT_RGB)
