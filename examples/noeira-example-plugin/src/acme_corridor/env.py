"""A batched corridor: walk right to the goal.

State: the position of each agent, ``[N, 1]`` float in ``{0, …, length - 1}``.
Observation: ``Box(0, 1, (2,))`` — position / (length - 1) and a constant 1.
Action: ``Discrete(2)``: 0 left, 1 right. Reward: +1 at the right end (terminated), −0.01
otherwise. Truncated after ``4 * length`` steps.
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, Discrete, TensorEnv


class Corridor(TensorEnv):
    name = "corridor"

    @attrs.frozen
    class Config:
        length: int = attrs.field(default=8, validator=attrs.validators.ge(2))
        """Cells in the corridor (the goal is the last)."""
        random_start: bool = True
        """Start at a uniform random cell left of the goal (else at cell 0)."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        dev = backend.device
        super().__init__(
            num_envs, backend,
            observation_space=Box(0.0, 1.0, shape=(2,), device=dev),
            action_space=Discrete(2, device=dev),
            max_episode_steps=4 * config.length, seed=seed,
        )
        self.pos = torch.zeros(num_envs, 1, device=dev)
        self._start = torch.zeros(num_envs, 1, device=dev)

    def _reset_envs(self, mask: Tensor) -> None:
        if self.config.random_start:
            u = torch.rand(self.num_envs, 1, generator=self.generator, device=self.device)
            torch.floor(u * (self.config.length - 1), out=self._start)
        self.pos.copy_(torch.where(mask[:, None], self._start, self.pos))

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        move = action.to(self.pos.dtype)[:, None] * 2 - 1
        self.pos.copy_((self.pos + move).clamp(0, self.config.length - 1))
        at_goal = self.pos[:, 0] >= self.config.length - 1
        reward = torch.where(at_goal, 1.0, -0.01)
        return reward, at_goal

    def _observe(self, out: Tensor) -> None:
        out[:, 0] = self.pos[:, 0] / (self.config.length - 1)
        out[:, 1] = 1.0

    def get_state(self) -> Tensor:
        return self.pos

    def _set_state(self, state: Tensor) -> None:
        self.pos.copy_(state)
