"""``reach``: push a point mass on a plane to a target, on a physics engine found by name.

The world is one MJCF model (:data:`MODEL`): a ball of 1 kg on two slide joints (x, y) with
damping, driven by two motors. The env asks the ``noeira.physics`` registry for the engine
named by ``env.physics`` (this package imports no engine): ``pointmass``, the example engine
in ``examples/plugins/physics``, steps it in torch on any device and can be recorded in a CUDA
graph; ``mujoco`` (noeira-physics) steps the same model in MuJoCo on CPU threads, to the same
numbers.

Spaces (one env; ``N = num_envs``):

- observation ``Box(-inf, inf, (6,))`` float32: position ``(x, y)``, velocity ``(vx, vy)`` and
  the target relative to the ball ``(tx - x, ty - y)``;
- action ``Box(-1, 1, (2,))``: the motors' controls (the engine clamps them to the box).

Reward per step: ``-|target - position| - control_cost * |action|^2``. An episode terminates
when the ball is within ``radius`` of the target, and is truncated after
``max_episode_steps``. Start and target are uniform in ``[-1, 1]^2``. State (``get_state``):
``{"qpos": [N, 2], "qvel": [N, 2], "target": [N, 2]}``. Per-episode statistic ``reached``
(1 where the episode ended at the target), reported as ``episode_reached``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, TensorEnv, contracts, make_physics

__all__ = ["MODEL", "Reach"]

TIMESTEP = 0.01
MODEL = f"""
<mujoco model="reach">
  <option timestep="{TIMESTEP}" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="ball">
      <joint name="x" type="slide" axis="1 0 0" damping="1"/>
      <joint name="y" type="slide" axis="0 1 0" damping="1"/>
      <geom type="sphere" size="0.05" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="x" gear="1" ctrlrange="-1 1"/>
    <motor joint="y" gear="1" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""
"""The world: gravity is along z, across both joints, so it does not move the ball."""


class Reach(TensorEnv):
    """See the module docstring. Built as ``Reach(config, num_envs=N, backend=backend, seed=s)``."""

    name = "reach"
    episode_stat_keys = ("reached",)

    @attrs.frozen
    class Config:
        physics: str = "pointmass"
        """Physics engine, by name in the noeira.physics registry: pointmass (acme-pointmass) | mujoco (noeira-physics)."""
        physics_options: dict[str, Any] = attrs.field(factory=dict)
        """The engine's own config keys (pointmass: dtype; mujoco: nthread)."""
        frame_skip: int = attrs.field(default=5, validator=attrs.validators.ge(1))
        """Physics substeps per env step (each 0.01 s)."""
        max_episode_steps: int = attrs.field(default=100, validator=attrs.validators.ge(1))
        """Truncation step limit."""
        radius: float = attrs.field(default=0.1, validator=attrs.validators.gt(0))
        """How close to the target ends the episode (metres)."""
        control_cost: float = attrs.field(default=0.01, validator=attrs.validators.ge(0))
        """Weight of |action|^2 in the reward."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        self.physics = make_physics(config.physics, MODEL, num_worlds=num_envs, backend=backend,
                                    **config.physics_options)
        dev = backend.device
        super().__init__(
            num_envs, backend,
            observation_space=Box(-float("inf"), float("inf"), shape=(6,), device=dev),
            action_space=Box(-1.0, 1.0, shape=(2,), device=dev),
            max_episode_steps=config.max_episode_steps, seed=seed,
            # recordable exactly when the engine's step is (pointmass: yes; mujoco: no, it syncs)
            capture_safe=contracts.physics_capture_safe(self.physics),
        )
        self.target = torch.zeros(num_envs, 2, device=dev)
        self.reached = torch.zeros(num_envs, dtype=torch.bool, device=dev)

    @property
    def render_fps(self) -> float:
        """One frame per env step."""
        return 1.0 / (TIMESTEP * self.config.frame_skip)

    # -- the four methods TensorEnv asks for ---------------------------------------------
    def _reset_envs(self, mask: Tensor) -> None:
        # fresh values for every env, taken where mask [N] is True: no branch, no host sync
        start = torch.rand(self.num_envs, 2, generator=self.generator, device=self.device) * 2 - 1
        target = torch.rand(self.num_envs, 2, generator=self.generator, device=self.device) * 2 - 1
        self.target.copy_(torch.where(mask[:, None], target, self.target))
        p = self.physics
        rows = mask.to(p.device)
        p.reset(rows)  # zero velocity, control and time in the ended worlds
        p.qpos.copy_(torch.where(rows[:, None], start.to(p.device, p.dtype), p.qpos))

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        p = self.physics
        p.ctrl.copy_(action.to(p.device, p.dtype))  # the engine clamps to ctrlrange; the cost sees the raw action
        p.step(self.config.frame_skip)
        distance = torch.linalg.vector_norm(p.qpos.to(self.device, torch.float32) - self.target, dim=1)
        torch.lt(distance, self.config.radius, out=self.reached)
        reward = -distance - self.config.control_cost * action.float().square().sum(1)
        return reward, self.reached

    def _observe(self, out: Tensor) -> None:
        p = self.physics
        position = p.qpos.to(self.device, out.dtype)
        out[:, 0:2] = position
        out[:, 2:4] = p.qvel.to(self.device, out.dtype)
        out[:, 4:6] = self.target - position

    def get_state(self) -> dict[str, Tensor]:
        p = self.physics
        return {"qpos": p.qpos.to(self.device), "qvel": p.qvel.to(self.device), "target": self.target}

    def _set_state(self, state: dict[str, Tensor]) -> None:
        self.physics.qpos.copy_(state["qpos"])
        self.physics.qvel.copy_(state["qvel"])
        self.target.copy_(state["target"])

    # -- optional ------------------------------------------------------------------------
    def _episode_values(self) -> dict[str, Tensor]:
        return {"reached": self.reached.float()}  # read at the step an episode ends

    def render(self, size: int = 64) -> Tensor:
        """``[N, size, size, 3]`` uint8 frames of the arena ``[-1.2, 1.2]^2`` seen from above:
        the target a green disc of ``radius``, the ball a red one."""
        axis = torch.linspace(-1.2, 1.2, size, device=self.device)
        y, x = torch.meshgrid(-axis, axis, indexing="ij")  # image rows go down, y goes up
        grid = torch.stack([x, y], dim=-1)  # [H, W, 2]
        ball = self.physics.qpos.to(self.device, torch.float32)

        def disc(centre: Tensor, radius: float) -> Tensor:  # [N, 2] -> [N, H, W] bool
            return torch.linalg.vector_norm(grid[None] - centre[:, None, None, :], dim=-1) < radius

        frame = torch.full((self.num_envs, size, size, 3), 40, dtype=torch.uint8, device=self.device)
        frame[disc(self.target, self.config.radius)] = torch.tensor([60, 180, 75], dtype=torch.uint8, device=self.device)
        frame[disc(ball, 0.05)] = torch.tensor([230, 25, 75], dtype=torch.uint8, device=self.device)
        return frame

    def close(self) -> None:
        contracts.close_physics(self.physics)  # the mujoco engine ends its worker threads
