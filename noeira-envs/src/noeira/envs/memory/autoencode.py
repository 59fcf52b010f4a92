"""Watch a sequence, then recite it backwards (``autoencode``): POPGym's Autoencode, with a
deck of cards replaced by ``length`` uniform symbols."""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend
from noeira.envs.memory._base import MemoryEnv

__all__ = ["Autoencode"]


class Autoencode(MemoryEnv):
    """``autoencode``: for ``length`` steps (watching) the observation shows one symbol of a
    random sequence and actions do nothing; for the next ``length`` steps (playing) the action
    must name the sequence backwards, the last symbol first. The policy must hold the whole
    sequence in order.

    Observation ``Box(0, 1, (symbols + 1,))``: the symbol one-hot (zeros while playing), then
    1.0 while playing. Action ``Discrete(symbols)``. Reward ``+-1 / length`` per playing step,
    0 while watching; the episode terminates after ``2 * length`` steps. Memory:
    ``2 * length - 1`` steps (the first symbol is named last). Chance: every answer a guess.
    State: ``sequence [N, length]``, ``t``, ``correct``."""

    name = "autoencode"
    state_keys = ("sequence", "t", "correct")

    @attrs.frozen
    class Config:
        length: int = attrs.field(default=4, validator=attrs.validators.ge(1))
        """Symbols to watch and recite (the first is recalled 2 * length - 1 steps after it was shown)."""
        symbols: int = attrs.field(default=4, validator=attrs.validators.ge(2))
        """Distinct symbols (POPGym: the 4 suits)."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        n, k = config.length, config.symbols
        super().__init__(num_envs, backend, obs_dim=k + 1, num_actions=k, max_episode_steps=None, seed=seed)
        self.answers, self.memory_steps = n, 2 * n - 1
        self.chance_return = (2 - k) / k
        self.sequence = torch.zeros(num_envs, n, dtype=torch.int64, device=self.device)

    def _reset_envs(self, mask: Tensor) -> None:
        torch.where(mask[:, None], self.draw(self.config.symbols, self.config.length), self.sequence,
                    out=self.sequence)
        self.restart(mask)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        n = self.config.length
        # playing step j = t - n names sequence[n - 1 - j]
        target = self.sequence.gather(1, (2 * n - 1 - self.t).clamp(0, n - 1)[:, None]).squeeze(1)
        reward = self.score(self.t >= n, action.long() == target)
        self.t += 1
        return reward, self.t >= 2 * n

    def _observe(self, out: Tensor) -> None:
        n = self.config.length
        watching = self.t < n
        shown = self.sequence.gather(1, self.t.clamp(max=n - 1)[:, None]).squeeze(1)
        self.one_hot(out[:, :-1], shown, on=watching)
        out[:, -1] = (~watching).to(out.dtype)
