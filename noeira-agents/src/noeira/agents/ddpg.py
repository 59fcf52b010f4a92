"""DDPG (Lillicrap et al. 2016): one critic, actor and targets updated at every update.

DDPG is TD3 without its three fixes: one critic instead of the clipped double-Q pair, no
target policy smoothing, no delay. The loop is :class:`~noeira.agents.td3.TD3`'s with those
switched off::

    y = R + gamma^m (1 - terminated) Q_target(s', mu_target(s'))
    critic: mean (Q(s, a) - y)^2        actor: -mean Q(s, mu(s))        targets: Polyak (tau)

Exploration: Gaussian (or ``noise = "ou"``, the paper's Ornstein-Uhlenbeck) noise added to
mu(s) in ``[-1, 1]`` action units; uniform random actions before ``learning_starts``.
"""

from __future__ import annotations

import attrs

from noeira.agents.td3 import TD3, DeterministicConfig

__all__ = ["DDPG"]


class DDPG(TD3):
    """Deep Deterministic Policy Gradient for 1-d ``Box`` action spaces. Its recipes are TD3's."""

    @attrs.frozen
    class Config(DeterministicConfig):
        """DDPG's keys: TD3's without those of its fixes (policy_noise, noise_clip, policy_delay)."""

    config: Config  # type: ignore[assignment]
    num_critics = 1  # no policy_delay / policy_noise keys: TD3 reads them as 1 and 0
