"""Repeat a symbol seen before: the first of the episode (``repeat-first``) or the one ``k``
steps back (``repeat-previous``). POPGym's RepeatFirst and RepeatPrevious, with a deck of
cards replaced by uniform draws of ``symbols`` symbols (its 4 suits by default)."""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from noeira.core import Backend
from noeira.envs.memory._base import MemoryEnv

__all__ = ["RepeatFirst", "RepeatPrevious"]


class RepeatFirst(MemoryEnv):
    """``repeat-first``: each step shows a fresh symbol; at every step the action must name the
    symbol shown at the episode's first step.

    Observation ``Box(0, 1, (symbols,))``: the current symbol, one-hot. Action
    ``Discrete(symbols)``. Reward ``+-1 / length`` per step (right / wrong); the episode
    terminates after ``length`` steps. Memory: ``length - 1`` steps. Chance: the first step is
    free (the symbol is on view), every other answer a guess. State: ``first``, ``current``,
    ``t``, ``correct`` (``[N]`` int64)."""

    name = "repeat-first"
    state_keys = ("first", "current", "t", "correct")

    @attrs.frozen
    class Config:
        length: int = attrs.field(default=16, validator=attrs.validators.ge(2))
        """Steps per episode: the first symbol is asked for length - 1 steps after it was shown."""
        symbols: int = attrs.field(default=4, validator=attrs.validators.ge(2))
        """Distinct symbols (POPGym: the 4 suits)."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        n, k = config.length, config.symbols
        super().__init__(num_envs, backend, obs_dim=k, num_actions=k, max_episode_steps=None, seed=seed)
        self.answers, self.memory_steps = n, n - 1
        self.chance_return = (1 + (n - 1) * (2 - k) / k) / n
        self.first = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.current = torch.zeros_like(self.first)

    def _reset_envs(self, mask: Tensor) -> None:
        fresh = self.draw(self.config.symbols)
        torch.where(mask, fresh, self.first, out=self.first)
        torch.where(mask, fresh, self.current, out=self.current)
        self.restart(mask)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        reward = self.score(torch.ones_like(self.t, dtype=torch.bool), action.long() == self.first)
        self.t += 1
        self.current.copy_(self.draw(self.config.symbols))
        return reward, self.t >= self.config.length

    def _observe(self, out: Tensor) -> None:
        self.one_hot(out, self.current)



class RepeatPrevious(MemoryEnv):
    """``repeat-previous``: each step shows a fresh symbol; from step ``k`` on the action must
    name the symbol shown ``k`` steps before (the policy keeps a queue of the last ``k``).

    Observation ``Box(0, 1, (symbols,))``: the current symbol, one-hot. Action
    ``Discrete(symbols)``. Reward ``+-1 / answers`` at each of the ``answers`` steps from step
    ``k`` on, 0 before; the episode terminates after ``k + answers`` steps. Memory: ``k``
    steps. Chance: every answer a guess. State: ``history [N, k + 1]`` (the symbols shown
    0..k steps ago), ``t``, ``correct``."""

    name = "repeat-previous"
    state_keys = ("history", "t", "correct")

    @attrs.frozen
    class Config:
        k: int = attrs.field(default=4, validator=attrs.validators.ge(1))
        """How many steps back the symbol to name was shown (POPGym: 4, 32, 64)."""
        answers: int = attrs.field(default=16, validator=attrs.validators.ge(1))
        """Scored steps per episode (the episode lasts k + answers steps)."""
        symbols: int = attrs.field(default=4, validator=attrs.validators.ge(2))
        """Distinct symbols (POPGym: the 4 suits)."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self.config = config
        k = config.symbols
        super().__init__(num_envs, backend, obs_dim=k, num_actions=k, max_episode_steps=None, seed=seed)
        self.answers, self.memory_steps = config.answers, config.k
        self.chance_return = (2 - k) / k
        self.history = torch.zeros(num_envs, config.k + 1, dtype=torch.int64, device=self.device)

    def _reset_envs(self, mask: Tensor) -> None:
        fresh = torch.nn.functional.pad(self.draw(self.config.symbols, 1), (0, self.config.k))
        torch.where(mask[:, None], fresh, self.history, out=self.history)
        self.restart(mask)

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        k = self.config.k
        reward = self.score(self.t >= k, action.long() == self.history[:, k])
        self.t += 1
        self.history.copy_(torch.cat([self.draw(self.config.symbols, 1), self.history[:, :-1]], 1))
        return reward, self.t >= k + self.config.answers

    def _observe(self, out: Tensor) -> None:
        self.one_hot(out, self.history[:, 0])

