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

from typing import Any

import attrs

from noeira.agents.offpolicy import OffPolicyConfig
from noeira.agents.td3 import TD3

__all__ = ["DDPG"]


class DDPG(TD3):
    """Deep Deterministic Policy Gradient for 1-d ``Box`` action spaces."""

    @attrs.frozen
    class Config(OffPolicyConfig):
        """DDPG's keys (with those every off-policy agent takes)."""

        actor_lr: float = 3e-4
        """Adam learning rate of the actor."""
        critic_lr: float = 3e-4
        """Adam learning rate of the critic."""
        exploration_noise: float = 0.1
        """Standard deviation of the exploration noise (Gaussian; OU's sigma), in [-1, 1] action units."""
        noise: str = "gaussian"
        """Exploration noise: gaussian | ou (Ornstein-Uhlenbeck, reset at episode ends)."""
        ou_theta: float = 0.15
        """Mean reversion rate of the OU noise."""
        ou_dt: float = 1e-2
        """Time step of the OU noise."""

    config: Config  # type: ignore[assignment]
    num_critics = 1  # no policy_delay / policy_noise keys: TD3 reads them as 1 and 0

    @classmethod
    def recipe(cls, env_name: str, backend_name: str) -> dict[str, Any]:
        """Tuned defaults for the env (below whatever the user sets). Pendulum: 4 envs, one
        update per transition, 3-step returns (which roughly halve the steps to solve it)."""
        if env_name == "pendulum":
            return {
                "env": {"num_envs": 4},
                "agent": {"hidden": [128, 128], "batch_size": 128, "buffer_size": 100_000, "learning_starts": 1_000,
                          "updates_per_step": 4, "n_step": 3, "actor_lr": 1e-3, "critic_lr": 1e-3},
                "run": {"total_steps": 8_000, "log_interval": 100},
            }
        return {"run": {"total_steps": 1_000_000, "log_interval": 250}}
