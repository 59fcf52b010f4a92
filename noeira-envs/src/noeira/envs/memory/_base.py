"""What the memory envs share: symbol draws, one-hot observations, the answers' bookkeeping
(``episode_accuracy``) and the return bounds a result is read against."""

from __future__ import annotations

import torch
from torch import Tensor

from noeira.core import Backend, Box, Discrete, TensorEnv

__all__ = ["MemoryEnv"]


class MemoryEnv(TensorEnv):
    """A :class:`~noeira.core.TensorEnv` whose episodes are scored by answers: each right one
    earns ``+1 / answers``, each wrong one ``-1 / answers`` (so returns lie in ``[-1, 1]``;
    ``t-maze`` pays 1 or 0 for its one answer).

    A subclass sets ``answers`` (answers per episode), ``memory_steps`` and ``chance_return``,
    names its state tensors in ``state_keys`` (attributes of the same names; ``t``, the step
    within the episode, and ``correct`` are this class's), calls :meth:`restart` from
    ``_reset_envs`` and :meth:`score` from ``_advance``."""

    episode_stat_keys = ("accuracy",)
    best_return: float = 1.0
    """The expected return of a policy that remembers everything it needs: every answer right."""
    chance_return: float = 0.0
    """The best expected return of a policy that sees only the current observation."""
    memory_steps: int = 0
    """How many steps back the task needs something remembered (the longest such gap)."""
    answers: int = 1
    """Scored answers per episode."""
    state_keys: tuple[str, ...] = ("t", "correct")
    """The attributes ``get_state`` returns (a dict of ``[N, ...]`` tensors) and ``set_state`` writes."""

    def __init__(self, num_envs: int, backend: Backend, obs_dim: int, num_actions: int,
                 max_episode_steps: int | None, seed: int | None) -> None:
        dev = backend.device
        super().__init__(num_envs, backend, observation_space=Box(0.0, 1.0, shape=(obs_dim,), device=dev),
                         action_space=Discrete(num_actions, device=dev), max_episode_steps=max_episode_steps,
                         seed=seed)
        self.t = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        self.correct = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        """Right answers so far in each env's episode."""

    def draw(self, k: int, *shape: int) -> Tensor:
        """Uniform symbols in ``[0, k)``, ``[N, *shape]`` int64, from the env's generator."""
        return torch.randint(0, k, (self.num_envs, *shape), generator=self.generator, device=self.device)

    def score(self, scored: Tensor, right: Tensor) -> Tensor:
        """The reward of this step's answers (``scored [N]``: an answer counts now; ``right
        [N]``: it is the right one), counted into ``correct``."""
        self.correct += (scored & right).long()
        return torch.where(scored, torch.where(right, 1.0, -1.0), 0.0) / self.answers

    def restart(self, mask: Tensor) -> None:
        """Zero the step and the answers' count where ``mask [N]`` (a new episode)."""
        self.t.masked_fill_(mask, 0)
        self.correct.masked_fill_(mask, 0)

    def get_state(self) -> dict[str, Tensor]:
        return {key: getattr(self, key) for key in self.state_keys}

    def _set_state(self, state: dict[str, Tensor]) -> None:
        for key, value in state.items():
            getattr(self, key).copy_(value)

    def _episode_values(self) -> dict[str, Tensor]:
        return {"accuracy": self.correct.float() / self.answers}

    @staticmethod
    def one_hot(out: Tensor, symbol: Tensor, on: Tensor | None = None) -> None:
        """Write ``one_hot(symbol)`` into ``out [N, k]`` (zeros where ``on [N]`` is False)."""
        out.zero_()
        src = torch.ones_like(out[:, :1]) if on is None else on[:, None].to(out.dtype)
        out.scatter_(1, symbol[:, None], src)

    def describe(self) -> dict[str, float]:
        """The numbers a result is read against: ``best_return``, ``chance_return``,
        ``memory_steps``, ``answers``."""
        return {"best_return": self.best_return, "chance_return": self.chance_return,
                "memory_steps": self.memory_steps, "answers": self.answers}
