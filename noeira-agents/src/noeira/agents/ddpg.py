"""DDPG (Lillicrap et al. 2016): one critic, actor and targets updated at every update.

DDPG is TD3 without its three fixes: one critic instead of the clipped double-Q pair, no
target policy smoothing, no delay. It runs TD3's loop
(:class:`~noeira.agents.td3.DeterministicAgent`) with those switched off::

    y = R + gamma^m (1 - terminated) Q_target(s', mu_target(s'))
    critic: mean (Q(s, a) - y)^2        actor: -mean Q(s, mu(s))        targets: Polyak (tau)

Exploration: Gaussian (or ``noise = "ou"``, the paper's Ornstein-Uhlenbeck) noise added to
mu(s) in ``[-1, 1]`` action units; uniform random actions before ``learning_starts``.
"""

from __future__ import annotations

from typing import Any

import attrs

from noeira.agents import td3
from noeira.agents.td3 import DeterministicAgent, DeterministicConfig
from noeira.core.contracts import Backend, EnvSpec

__all__ = ["DDPG", "recipe"]


class DDPG(DeterministicAgent):
    """Deep Deterministic Policy Gradient for 1-d ``Box`` action spaces."""

    @attrs.frozen
    class Config(DeterministicConfig):
        """DDPG's keys: TD3's without those of its fixes (policy_noise, noise_clip, policy_delay)."""

    config: Config

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config, *, training: bool = True) -> None:
        super().__init__(spec, backend, config, training=training, num_critics=1, policy_delay=1, policy_noise=0.0,
                         noise_clip=0.0)


TD3_ONLY = ("policy_noise", "noise_clip", "policy_delay")
"""TD3's keys DDPG does not take (those of its fixes)."""


def recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """TD3's recipes (:func:`noeira.agents.td3.recipe`) without the keys of TD3's fixes: on the 2-core
    CPU they solve DDPG's pairs too (MountainCarContinuous: 5 of 5 seeds, BENCHMARKS.md "Recipes that
    solve"); the MuJoCo ones are untested for both."""
    out = td3.recipe(env, backend, num_envs)
    if out is not None:
        for key in TD3_ONLY:
            out.get("agent", {}).pop(key, None)
    return out
