"""A memory task with dict state: remember a cue seen only at the first step.

Each episode walks ``length`` cells to the right by itself. At the first step the
observation shows a cue, -1 or +1 (uniform); afterwards the cue reads 0. At the last cell
the action is the answer: ``1`` for +1, ``0`` for -1; a right answer earns +1, a wrong one
-1, and the episode terminates. Actions before the last cell do nothing. A feed-forward
policy can only guess (mean return 0); a recurrent one can carry the cue (return 1).

Observation: ``Box(-1, 1, (3,))`` — position / (length - 1), the cue (first step only), and
1.0 at the last cell. Action: ``Discrete(2)``. State (a dict, as ``get_state`` returns it):
``pos [N]`` int64 cells walked, ``cue [N]`` int64 in {0, 1}. Per-episode statistic:
``correct`` (1.0 when the answer was right), reported as ``episode_correct``.
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, Discrete, TensorEnv


class CueCorridor(TensorEnv):
    name = "cue-corridor"
    episode_stat_keys = ("correct",)

    @attrs.frozen
    class Config:
        length: int = attrs.field(default=4, validator=attrs.validators.ge(2))
        """Cells to walk; the answer is given at the last one (the cue must be kept length - 1 steps)."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        dev = backend.device
        super().__init__(
            num_envs, backend,
            observation_space=Box(-1.0, 1.0, shape=(3,), device=dev),
            action_space=Discrete(2, device=dev),
            max_episode_steps=None, seed=seed,
        )
        self.pos = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self.cue = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self.correct = torch.zeros(num_envs, device=dev)
        self._fresh_cue = torch.zeros(num_envs, dtype=torch.int64, device=dev)

    def _reset_envs(self, mask: Tensor) -> None:
        torch.randint(0, 2, (self.num_envs,), generator=self.generator, device=self.device, out=self._fresh_cue)
        self.cue.copy_(torch.where(mask, self._fresh_cue, self.cue))
        self.pos.masked_fill_(mask, 0)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        at_end = self.pos >= self.config.length - 1
        right = action.to(torch.int64) == self.cue
        self.correct.copy_((at_end & right).float())
        reward = torch.where(at_end, torch.where(right, 1.0, -1.0), 0.0)
        self.pos.add_(1)
        return reward, at_end

    def _observe(self, out: Tensor) -> None:
        out[:, 0] = self.pos.clamp(max=self.config.length - 1).float() / (self.config.length - 1)
        out[:, 1] = torch.where(self.pos == 0, (self.cue * 2 - 1).float(), 0.0)
        out[:, 2] = (self.pos >= self.config.length - 1).float()

    def _episode_values(self) -> dict[str, Tensor]:
        return {"correct": self.correct}

    def get_state(self) -> dict[str, Tensor]:
        return {"pos": self.pos, "cue": self.cue}

    def _set_state(self, state: dict[str, Tensor]) -> None:
        self.pos.copy_(state["pos"])
        self.cue.copy_(state["cue"])
