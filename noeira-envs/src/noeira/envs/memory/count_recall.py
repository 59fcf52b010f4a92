"""Count how often a symbol has come up (``count-recall``): POPGym's CountRecall, with uniform
draws in place of its two decks."""

from __future__ import annotations

import math

import attrs
import torch
from torch import Tensor

from noeira.core import Backend
from noeira.envs.memory._base import MemoryEnv

__all__ = ["CountRecall"]


class CountRecall(MemoryEnv):
    """``count-recall``: each step deals a symbol and shows a query symbol (both uniform); the
    action must be how many times the queried symbol has been dealt so far in the episode (this
    step's deal included). A set-like memory: order does not matter, every deal does.

    Observation ``Box(0, 1, (2 * symbols,))``: the dealt symbol one-hot, then the query
    one-hot. Action ``Discrete(length + 1)``: the count. Reward ``+-1 / length`` per step; the
    episode terminates after ``length`` steps. Memory: ``length - 1`` steps (the first deal
    counts at the last query). Chance: the most likely count given only whether the query
    matches the current deal (averaged over the step). State: ``counts [N, symbols]``,
    ``dealt``, ``query``, ``t``, ``correct``."""

    name = "count-recall"
    state_keys = ("counts", "dealt", "query", "t", "correct")

    @attrs.frozen
    class Config:
        length: int = attrs.field(default=16, validator=attrs.validators.ge(2))
        """Steps per episode (each one a deal and a query)."""
        symbols: int = attrs.field(default=4, validator=attrs.validators.ge(2))
        """Distinct symbols (POPGym: 2 colours, 4 suits or 13 ranks by difficulty)."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        n, k = config.length, config.symbols
        super().__init__(num_envs, backend, obs_dim=2 * k, num_actions=n + 1, max_episode_steps=None, seed=seed)
        self.answers, self.memory_steps = n, n - 1
        self.chance_return = memoryless_return(n, k)
        dev = self.device
        self.counts = torch.zeros(num_envs, k, dtype=torch.int64, device=dev)
        self.dealt = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self.query = torch.zeros_like(self.dealt)
        self._symbols = torch.arange(k, device=dev)

    def _deal(self, mask: Tensor | None = None) -> None:
        """A new deal and query (where ``mask``: into a fresh episode, the counts restarted)."""
        k = self.config.symbols
        dealt, query = self.draw(k), self.draw(k)
        one = (dealt[:, None] == self._symbols).long()  # one-hot (F.one_hot reads the values on the host)
        if mask is None:
            self.dealt.copy_(dealt)
            self.query.copy_(query)
            self.counts += one
        else:
            torch.where(mask, dealt, self.dealt, out=self.dealt)
            torch.where(mask, query, self.query, out=self.query)
            torch.where(mask[:, None], one, self.counts, out=self.counts)

    def _reset_envs(self, mask: Tensor) -> None:
        self._deal(mask)
        self.restart(mask)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        count = self.counts.gather(1, self.query[:, None]).squeeze(1)
        reward = self.score(torch.ones_like(self.t, dtype=torch.bool), action.long() == count)
        self.t += 1
        self._deal()
        return reward, self.t >= self.config.length

    def _observe(self, out: Tensor) -> None:
        k = self.config.symbols
        self.one_hot(out[:, :k], self.dealt)
        self.one_hot(out[:, k:], self.query)


def memoryless_return(length: int, symbols: int) -> float:
    """The expected return of the best policy that sees only the current deal and query: the
    count is ``match + Binomial(t, 1 / symbols)`` at step ``t`` (uniform over the episode), and
    it answers the likeliest count for each ``match`` (whether the query is the current deal)."""
    p = 1.0 / symbols
    ret = 0.0
    for match, p_match in ((1, p), (0, 1.0 - p)):
        prob = [0.0] * (length + 1)
        for t in range(length):
            for x in range(t + 1):
                prob[x + match] += math.comb(t, x) * p**x * (1 - p) ** (t - x) / length
        ret += p_match * (2 * max(prob) - 1)
    return ret
