"""A cue corridor (``t-maze``): the T-maze of Bakker (NIPS 2001), the classic test of a
recurrent policy. A cue at the start says which way to turn at the far end of a corridor whose
cells all look alike."""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend
from noeira.envs.memory._base import MemoryEnv

__all__ = ["TMaze"]


class TMaze(MemoryEnv):
    """``t-maze``: the agent starts at cell 0 of a corridor of ``length`` cells leading to a
    junction (cell ``length``) with ``cues`` arms. At the first step it sees the cue (which arm
    pays); after that the corridor shows nothing, the junction only that it is the junction.
    Action 0 walks forward (it stays put at the junction); action ``1 + i`` turns into arm
    ``i``, which ends the episode at the junction (reward 1 for the cued arm, 0 for another)
    and does nothing in the corridor. The episode is truncated after ``4 * length + 4`` steps
    (reward 0). A wrong turn costs no more than never turning, so guessing is never worse than
    waiting: what a policy without memory can do is walk there and guess.

    Observation ``Box(0, 1, (cues + 1,))``: the cue one-hot (first step only), then 1.0 at the
    junction. Action ``Discrete(cues + 1)``. Memory: ``length`` steps at least (the cue is
    seen at step 0, the junction reached at step ``length`` by walking straight there).
    Chance: walk to the junction and guess, ``1 / cues``.
    State: ``cue``, ``pos``, ``t``, ``correct`` (``[N]`` int64). Unlike the example plugin's
    ``cue-corridor`` (which walks by itself), the policy walks: it must act while it holds
    the cue."""

    name = "t-maze"
    state_keys = ("cue", "pos", "t", "correct")

    @attrs.frozen
    class Config:
        length: int = attrs.field(default=16, validator=attrs.validators.ge(1))
        """Corridor cells before the junction: the cue is carried at least this many steps."""
        cues: int = attrs.field(default=2, validator=attrs.validators.ge(2))
        """Arms at the junction, one of them cued."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        k = config.cues
        super().__init__(num_envs, backend, obs_dim=k + 1, num_actions=k + 1,
                         max_episode_steps=4 * config.length + 4, seed=seed)
        self.answers, self.memory_steps = 1, config.length
        self.chance_return = 1.0 / k
        self.cue = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.pos = torch.zeros_like(self.cue)

    def _reset_envs(self, mask: Tensor) -> None:
        torch.where(mask, self.draw(self.config.cues), self.cue, out=self.cue)
        self.pos.masked_fill_(mask, 0)
        self.restart(mask)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        action = action.long()
        at_junction = self.pos >= self.config.length
        turn = at_junction & (action > 0)
        right = action - 1 == self.cue
        self.score(turn, right)
        reward = (turn & right).float()
        self.pos += ((action == 0) & ~at_junction).long()
        self.t += 1
        return reward, turn

    def _observe(self, out: Tensor) -> None:
        self.one_hot(out[:, :-1], self.cue, on=self.t == 0)
        out[:, -1] = (self.pos >= self.config.length).to(out.dtype)
