"""CartPole, batched in torch: gymnasium's ``CartPole-v1`` for ``N`` envs at once.

Same physics as gymnasium (Barto, Sutton & Anderson 1983; explicit Euler with
``tau = 0.02``), same observation ``[x, x_dot, theta, theta_dot]``, reward ``+1`` on every
step including the terminating one (``sutton_barto_reward``: ``0`` per step, ``-1`` on the
terminating step), termination at ``|x| > 2.4`` or ``|theta| > 12 deg``, truncation at 500
steps, reset uniform in ``(-0.05, 0.05)^4``. Action ``1`` pushes right, anything else left
(as gymnasium's ``force_mag if action == 1 else -force_mag``).

Gymnasium's ``steps_beyond_terminated`` (reward ``0`` when stepping past termination) never
applies here: an env that terminates is reset in the same step. In float64 every number
matches gymnasium's numpy arithmetic (the expressions below keep its order of operations).
"""

from __future__ import annotations

import math

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, Discrete
from noeira.envs.classic._base import ClassicConfig, ClassicEnv, parse_dtype
from noeira.envs.classic.render import Canvas

__all__ = ["CartPole"]


class CartPole(ClassicEnv):
    """``num_envs`` cart-poles. State ``[N, 4]``: x, x_dot, theta, theta_dot (gymnasium's
    ``unwrapped.state``). Observation ``[N, 4]`` (the state), action ``[N]`` int in {0, 1}."""

    name = "cartpole"
    state_dim = 4

    @attrs.frozen
    class Config(ClassicConfig):
        sutton_barto_reward: bool = False
        """Reward 0 per step and -1 on the terminating step (gymnasium's option)."""
        max_episode_steps: int = 500
        """Truncation step limit (500 = CartPole-v1, 200 = CartPole-v0)."""

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    reset_low, reset_high = (-0.05,) * 4, (0.05,) * 4

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        dtype, dev = parse_dtype(config.dtype), backend.device
        high = torch.tensor(
            [self.x_threshold * 2, math.inf, self.theta_threshold_radians * 2, math.inf], dtype=torch.float32
        ).to(dtype)  # gymnasium's float32 bounds
        super().__init__(
            config,
            num_envs=num_envs,
            backend=backend,
            seed=seed,
            observation_space=Box(-high, high, dtype=dtype, device=dev),
            action_space=Discrete(2, device=dev),
            max_episode_steps=config.max_episode_steps,
        )
        self._reward = torch.ones(num_envs, dtype=dtype, device=dev)

    def _physics(self, action: Tensor) -> tuple[Tensor, Tensor]:
        x, x_dot, theta, theta_dot = self.s.unbind(0)
        # +force_mag where action == 1, else -force_mag (both exact in float32 and float64)
        force = (action == 1).to(self.dtype) * (2 * self.force_mag) - self.force_mag
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * torch.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * torch.square(costheta) / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        # explicit Euler, in place on the state rows: each position moves with its velocity
        # before that velocity is updated (the accelerations were computed from the old state)
        x.add_(self.tau * x_dot)
        x_dot.add_(self.tau * xacc)
        theta.add_(self.tau * theta_dot)
        theta_dot.add_(self.tau * thetaacc)
        terminated = (
            (x < -self.x_threshold)
            | (x > self.x_threshold)
            | (theta < -self.theta_threshold_radians)
            | (theta > self.theta_threshold_radians)
        )
        if self.config.sutton_barto_reward:
            return -terminated.to(self.dtype), terminated
        return self._reward, terminated

    def _observe(self, out: Tensor) -> None:
        out.copy_(self.s.T)

    # -- render: gymnasium's scene, 600 x 400 ----------------------------------------------
    render_size = (400, 600)
    render_fps = 50
    POLE_RGB, AXLE_RGB, CART_RGB = (202, 152, 101), (129, 132, 203), (0, 0, 0)

    def _draw(self, canvas: Canvas, s: Tensor) -> None:
        scale = canvas.width / (2 * self.x_threshold)  # the track spans +-x_threshold
        pole_len, pole_half, cart_w, cart_h, cart_y = scale * 2 * self.length, 5.0, 50.0, 30.0, 100.0
        cart_x = s[0] * scale + canvas.width / 2
        axle_y = cart_y + cart_h / 4
        canvas.paint(canvas.hline(cart_y), self.CART_RGB)  # the track
        canvas.paint(canvas.box(cart_x, cart_y, 0.0, (-cart_w / 2, cart_w / 2), (-cart_h / 2, cart_h / 2)), self.CART_RGB)
        # theta = 0 upright, positive leaning right: the pole's direction is pi/2 - theta
        canvas.paint(canvas.rod(cart_x, axle_y, math.pi / 2 - s[2], pole_len - pole_half, pole_half, back=pole_half),
                     self.POLE_RGB)
        canvas.paint(canvas.circle(cart_x, axle_y, pole_half), self.AXLE_RGB)
