"""The critics of the continuous off-policy agents (SAC, TD3, DDPG, REDQ): an ensemble of ``k``
Q functions, scalar or categorical, its TD target and its loss.

**Scalar** (:class:`~noeira.agents.offpolicy.QEnsemble`, ``num_atoms = 0``): each critic
outputs ``Q_i(s, a)``; the target is

    y = R + gamma^m (1 - terminated) (min_i Q_target_i(s', a') + bonus)

with ``bonus = -alpha log pi(a'|s')`` for the entropy-regularised agents (SAC, REDQ) and none
for the deterministic ones; the loss is ``sum_i mean (Q_i(s, a) - y)^2``.

**Categorical** (:class:`CategoricalQEnsemble`, ``num_atoms >= 2``; C51, Bellemare et al.
2017, as FastTD3's critic, Seo et al. 2025): each critic outputs logits over the fixed support
``z = linspace(v_min, v_max, num_atoms)``, ``Q_i = sum_j softmax(logits_i)_j z_j``. The target is
a distribution: the target critic with the smallest ``Q`` for each transition (clipped double
Q, chosen before the projection) gives ``p``, its atoms move to ``R + gamma^m (1 - terminated)
(z + bonus)``, and :func:`project_categorical` spreads each moved atom's mass over its two
neighbours on ``z``. The loss is the cross-entropy ``sum_i mean -sum_j target_j log softmax(logits_i)_j``.
``v_min``/``v_max`` bound the returns the critic can represent: values outside are clipped to
the end atoms, so choose them around the discounted return's range (``r_max / (1 - gamma)``).

``members`` (REDQ): the target's minimum runs over that subset of the ensemble only.
The agents call these inside their ``autocast``; the targets, projections and losses are
float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from noeira.agents.offpolicy import OffPolicyConfig, QEnsemble, ensemble_mlp, online_and_target
from noeira.agents.replay import Batch
from noeira.core.errors import ConfigError

__all__ = ["CategoricalQEnsemble", "CriticConfig", "critic_loss", "make_critics", "project_categorical", "td_target"]


@attrs.frozen
class CriticConfig(OffPolicyConfig):
    """The keys of the agents with continuous actions (with those every off-policy agent takes):
    the critic's shape."""

    critic_hidden: tuple[int, ...] = ()
    """Widths of the critics' hidden layers (empty: ``hidden``). FastTD3's are (1024, 512, 256)."""
    num_atoms: int = 0
    """0: scalar critics; >= 2: categorical critics, a distribution over ``num_atoms`` atoms evenly
    spaced on ``[v_min, v_max]`` (C51, as FastTD3; 101 there)."""
    v_min: float = -100.0
    """With ``num_atoms``: the smallest return the categorical critic represents."""
    v_max: float = 100.0
    """With ``num_atoms``: the largest return the categorical critic represents."""


def check_critic_config(cfg: CriticConfig) -> None:
    """One-line ``ConfigError`` for a critic key out of range."""
    if cfg.num_atoms == 1 or cfg.num_atoms < 0:
        raise ConfigError(f"agent.num_atoms: 0 (scalar critics) or >= 2, got {cfg.num_atoms}")
    if cfg.num_atoms and not cfg.v_min < cfg.v_max:
        raise ConfigError(f"agent.v_min: must be below agent.v_max, got {cfg.v_min} and {cfg.v_max}")
    if any(h < 1 for h in cfg.critic_hidden):
        raise ConfigError(f"agent.critic_hidden: widths must be >= 1, got {list(cfg.critic_hidden)}")


class CategoricalQEnsemble(nn.Module):
    """``k`` categorical critics: ``obs [B, o], action [B, a]`` -> logits ``[k, B, num_atoms]``
    over ``support`` (:meth:`logits`), or their expected values ``[k, B]`` (``forward``, as a
    :class:`~noeira.agents.offpolicy.QEnsemble` gives)."""

    def __init__(self, k: int, obs_dim: int, act_dim: int, hidden: Sequence[int], num_atoms: int, v_min: float,
                 v_max: float) -> None:
        super().__init__()
        self.k, self.v_min, self.v_max = k, v_min, v_max
        self.net = ensemble_mlp(k, obs_dim + act_dim, hidden, num_atoms)
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))

    def logits(self, obs: Tensor, action: Tensor) -> Tensor:
        x = torch.cat([obs.flatten(1).float(), action], -1)
        return self.net(x.unsqueeze(0).expand(self.k, -1, -1))

    def value(self, logits: Tensor) -> Tensor:
        """``[..., num_atoms]`` logits -> the expected values ``[...]`` (float32)."""
        return (logits.float().softmax(-1) * self.support).sum(-1)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        return self.value(self.logits(obs, action))


def make_critics(cfg: CriticConfig, k: int, obs_dim: int, act_dim: int,
                 device: torch.device) -> tuple[QEnsemble | CategoricalQEnsemble, QEnsemble | CategoricalQEnsemble]:
    """The online ensemble of ``k`` critics and its target, as ``cfg`` shapes them."""
    check_critic_config(cfg)
    hidden = cfg.critic_hidden or cfg.hidden
    if cfg.num_atoms:
        return online_and_target(CategoricalQEnsemble, k, obs_dim, act_dim, hidden, cfg.num_atoms, cfg.v_min,
                                 cfg.v_max, device=device)
    return online_and_target(QEnsemble, k, obs_dim, act_dim, hidden, device=device)


def project_categorical(probs: Tensor, positions: Tensor, v_min: float, v_max: float) -> Tensor:
    """The distribution with mass ``probs [B, A]`` at ``positions [B, A]`` (non-decreasing along
    ``A``: an affine map of the support with a non-negative slope) projected onto ``A`` atoms evenly
    spaced on ``[v_min, v_max]``: each mass goes to its two neighbouring atoms in proportion to
    closeness (all of it to the end atom when clipped). ``[B, A]``, float32.

    Written without scatter-adds (whose atomic float adds make CUDA runs differ bit by bit): as the
    positions are sorted, the mass landing on atom ``j`` from its lower side is a difference of a
    cumulative sum between the first sources whose lower neighbour is past ``j - 1`` and ``j``
    (found by ``searchsorted``), and likewise from its upper side."""
    a = probs.shape[-1]
    delta = (v_max - v_min) / (a - 1)
    b = ((positions.float().clamp(v_min, v_max) - v_min) / delta).clamp(0, a - 1)  # in atom units
    low = b.floor()
    frac = b - low  # the share of the upper neighbour
    probs = probs.float()
    to_low = F.pad((probs * (1 - frac)).cumsum(-1), (1, 0))  # [B, A + 1]: sums of the first n sources
    to_up = F.pad((probs * frac).cumsum(-1), (1, 0))
    # count[:, t] = sources whose lower neighbour is <= t - 2, for t = 0 .. A + 1
    ks = torch.arange(-2, a, device=probs.device, dtype=torch.int64).expand(probs.shape[0], a + 2).contiguous()
    count = torch.searchsorted(low.long().contiguous(), ks, right=True)
    from_below = to_low.gather(-1, count[:, 2:]) - to_low.gather(-1, count[:, 1:-1])  # lower neighbour == j
    from_above = to_up.gather(-1, count[:, 1:-1]) - to_up.gather(-1, count[:, :-2])  # lower neighbour == j - 1
    return (from_below + from_above).clamp_(min=0)


def td_target(critic_target: nn.Module, next_obs: Tensor, next_action: Tensor, batch: Batch,
              bonus: Tensor | None = None, members: Tensor | None = None) -> Tensor:
    """The clipped TD target (module docstring): ``y [B]`` for scalar critics, a distribution
    ``[B, num_atoms]`` for categorical ones. ``bonus [B]`` is added to the next value (SAC's
    ``-alpha log pi``); ``members [M]`` restricts the minimum to those critics."""
    if isinstance(critic_target, CategoricalQEnsemble):
        not_done = batch.discount * (1.0 - batch.terminated)
        logits = critic_target.logits(next_obs, next_action).float()  # [k, B, A]
        if members is not None:
            logits = logits.index_select(0, members)
        probs = logits.softmax(-1)
        pick = (probs * critic_target.support).sum(-1).argmin(0)  # [B]: the critic of the smallest Q
        p = probs.gather(0, pick.view(1, -1, 1).expand(1, *probs.shape[1:])).squeeze(0)
        atoms = critic_target.support if bonus is None else critic_target.support + bonus.unsqueeze(-1)
        positions = batch.reward.unsqueeze(-1) + not_done.unsqueeze(-1) * atoms
        return project_categorical(p, positions, critic_target.v_min, critic_target.v_max)
    q = critic_target(next_obs, next_action).float()
    if members is not None:
        q = q.index_select(0, members)
    next_q = q.min(0).values
    if bonus is not None:
        next_q = next_q + bonus
    return batch.reward + batch.discount * (1.0 - batch.terminated) * next_q


def critic_loss(critic: nn.Module, obs: Tensor, action: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """``(loss, q [k, B])`` of every critic against ``target`` (from :func:`td_target`): the
    squared error (scalar) or the cross-entropy (categorical), averaged over the batch and summed
    over the critics; ``q`` their values (detached)."""
    if isinstance(critic, CategoricalQEnsemble):
        logits = critic.logits(obs, action).float()  # [k, B, A]
        loss = -(target * logits.log_softmax(-1)).sum(-1).mean(-1).sum()
        return loss, critic.value(logits.detach())
    q = critic(obs, action).float()  # [k, B]
    return (q - target).square().mean(-1).sum(), q.detach()
