"""A trained policy as one ``nn.Module``, what ``noeira export`` traces and ``noeira deploy`` runs.

An agent offers ``policy_module()`` returning one of these: its deterministic action, with the
observation normalisation inside and the action as the env takes it (clipped to a ``Box``,
offset for ``Discrete``), so the exported file needs nothing else.

- :class:`FeedForwardPolicy`: ``forward(obs [B, *obs_shape]) -> action [B, *act_shape]``.
- :class:`RecurrentPolicy`: ``forward(obs, state, done [B] bool) -> (action, next state)``; the
  state is one float tensor, zeros at an episode's start (``state_batch_dim`` says which of its
  dimensions is the batch), reset where ``done`` by arithmetic, so it is an explicit input and
  output of the exported graph.

``metadata`` travels into the exported file (JSON): what the observation and action are
(dataset feature names for an imitation policy), the control rate it was trained at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

__all__ = ["FeedForwardPolicy", "RecurrentPolicy"]


class FeedForwardPolicy(nn.Module):
    """``obs -> action`` through ``act``, over the parameters of ``owner`` (registered here)."""

    recurrent = False

    def __init__(self, owner: nn.Module, act: Callable[[Tensor], Tensor], metadata: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.owner = owner
        self._act = act
        self.metadata = dict(metadata or {})

    def forward(self, obs: Tensor) -> Tensor:
        return self._act(obs)


class RecurrentPolicy(nn.Module):
    """``(obs, state, done) -> (action, state)`` through ``act``; ``initial_state(batch)`` is
    zeros of the state's shape with the batch at ``state_batch_dim``."""

    recurrent = True

    def __init__(self, owner: nn.Module, act: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]],
                 initial_state: Callable[[int], Tensor], state_batch_dim: int,
                 metadata: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.owner = owner
        self._act = act
        self._initial_state = initial_state
        self.state_batch_dim = state_batch_dim
        self.metadata = dict(metadata or {})

    def initial_state(self, batch: int) -> Tensor:
        return self._initial_state(batch)

    def forward(self, obs: Tensor, state: Tensor, done: Tensor) -> tuple[Tensor, Tensor]:
        return self._act(obs, state, done)

