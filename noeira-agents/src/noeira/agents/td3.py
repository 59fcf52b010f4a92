"""TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing, delayed actor updates.

The whole loop runs on the device (see :mod:`noeira.agents.offpolicy`): ``collect`` acts
with the deterministic policy plus exploration noise (Gaussian, or Ornstein-Uhlenbeck with
``noise = "ou"``; uniform random before ``learning_starts``) and stores the transitions;
``learn`` runs ``updates_per_step`` updates, each:

1. critics: ``y = R + gamma^m (1 - terminated) min_i Q_target_i(s', clip(mu_target(s') + eps))``
   with smoothing noise ``eps = clip(N(0, policy_noise), -noise_clip, noise_clip)``.
2. every ``policy_delay``-th update: the actor ascends ``Q_1(s, mu(s))``, then the target
   actor and critics follow by Polyak averaging (rate ``tau``).

Delayed updates, capture-safe: which updates of a ``learn()`` call also update the actor is
a fixed pattern decided on the host from the update's index ``j`` within the call (update
``j`` does when ``j % policy_delay == policy_delay - 1``), so every call records the same op
sequence and the delay holds across calls when ``updates_per_step`` is a multiple of
``policy_delay``. With fewer updates per call than ``policy_delay``, the last update of each
call updates the actor (an effective delay of ``updates_per_step``).

Actions live in ``[-1, 1]`` (tanh), rescaled to the env's Box; noise scales are in those
units (``exploration_noise = 0.1`` is 5% of the action range).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.offpolicy import OffPolicyAgent, OffPolicyConfig, QEnsemble, frozen, online_and_target, relu_mlp
from noeira.agents.replay import Batch
from noeira.core.contracts import Backend, EnvSpec
from noeira.core.errors import ConfigError

__all__ = ["TD3", "DeterministicActor", "DeterministicConfig"]

log = logging.getLogger("noeira")


class DeterministicActor(nn.Module):
    """mu(s) = tanh(MLP(s)) in ``[-1, 1]^act_dim``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.net = relu_mlp(obs_dim, hidden, act_dim)

    def forward(self, obs: Tensor) -> Tensor:
        return torch.tanh(self.net(obs.flatten(1).float()))


@attrs.frozen
class DeterministicConfig(OffPolicyConfig):
    """The keys of the deterministic-policy agents, TD3 and DDPG (with those every off-policy
    agent takes); DDPG takes exactly these."""

    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics (DDPG: of the critic)."""
    exploration_noise: float = 0.1
    """Standard deviation of the exploration noise (Gaussian; OU's sigma), in [-1, 1] action units."""
    noise: str = "gaussian"
    """Exploration noise: gaussian | ou (Ornstein-Uhlenbeck, reset at episode ends)."""
    ou_theta: float = 0.15
    """Mean reversion rate of the OU noise."""
    ou_dt: float = 1e-2
    """Time step of the OU noise."""


class TD3(OffPolicyAgent):
    """Twin Delayed DDPG for 1-d ``Box`` action spaces."""

    @attrs.frozen
    class Config(DeterministicConfig):
        """TD3's keys: DDPG's (:class:`DeterministicConfig`) and those of its fixes."""

        policy_noise: float = 0.2
        """Standard deviation of the target policy smoothing noise."""
        noise_clip: float = 0.5
        """Clip of the target policy smoothing noise."""
        policy_delay: int = 2
        """Critic updates per actor (and target) update."""

    config: Config
    num_critics = 2

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config) -> None:
        super().__init__(spec, backend, config)
        cfg, dev = config, self.device
        if cfg.noise not in ("gaussian", "ou"):
            raise ConfigError(f"agent.noise: expected gaussian or ou, got {cfg.noise!r}")
        self.policy_delay = getattr(cfg, "policy_delay", 1)
        self.policy_noise = getattr(cfg, "policy_noise", 0.0)
        self.noise_clip = getattr(cfg, "noise_clip", 0.0)
        if self.policy_delay < 1:
            raise ConfigError(f"agent.policy_delay: must be >= 1, got {self.policy_delay}")
        if cfg.updates_per_step % self.policy_delay:
            log.warning("agent.updates_per_step=%d is not a multiple of agent.policy_delay=%d: the actor updates "
                        "at fixed updates of each learn() call (see noeira.agents.td3)", cfg.updates_per_step,
                        self.policy_delay)
        self.actor, self.actor_target = online_and_target(DeterministicActor, self.obs_dim, self.act_dim, cfg.hidden,
                                                          device=dev)
        self.critic, self.critic_target = online_and_target(QEnsemble, self.num_critics, self.obs_dim, self.act_dim,
                                                            cfg.hidden, device=dev)
        self.nets.update({"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                          "critic_target": self.critic_target})
        self.actor_opt = self.add_optimizer("actor", self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = self.add_optimizer("critic", self.critic.parameters(), cfg.critic_lr)
        self.ou_state = torch.zeros((self.num_envs, self.act_dim), device=dev)

    # -- exploration -------------------------------------------------------------------------
    def _noise(self, shape: tuple[int, ...]) -> Tensor:
        return torch.randn(shape, generator=self.generator, device=self.device)

    def explore(self, obs: Tensor) -> Tensor:
        cfg = self.config
        if cfg.noise == "ou":
            # dx = theta (0 - x) dt + sigma sqrt(dt) N(0, 1)
            x = self.ou_state
            x.add_(-cfg.ou_theta * cfg.ou_dt * x + cfg.exploration_noise * cfg.ou_dt**0.5 * self._noise(x.shape))
            noise = x
        else:
            noise = cfg.exploration_noise * self._noise((obs.shape[0], self.act_dim))
        return (self.actor(obs) + noise).clamp(-1.0, 1.0)

    def after_step(self, done: Tensor) -> None:
        self.ou_state.masked_fill_(done.unsqueeze(-1), 0.0)  # a fresh OU process per episode

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = False) -> Tensor:
        """mu(s) (``deterministic``), else with Gaussian exploration noise; rescaled to the Box."""
        obs = obs.to(self.device)
        a = self.actor(obs)
        if not deterministic:
            a = (a + self.config.exploration_noise * self._noise(a.shape)).clamp(-1.0, 1.0)
        return self.to_env(a)

    # -- learning ----------------------------------------------------------------------------
    def actor_due(self, j: int) -> bool:
        """Whether update ``j`` of a learn() call also updates the actor (host-side pattern)."""
        d, u = self.policy_delay, self.config.updates_per_step
        return j % d == d - 1 or (u < d and j == u - 1)

    def update(self, batch: Batch, j: int) -> dict[str, Tensor]:
        cfg = self.config
        # 1. critics toward the (smoothed) clipped double-Q target
        with torch.no_grad():
            next_action = self.actor_target(batch.next_obs)
            if self.policy_noise > 0:
                smoothing = (self.policy_noise * self._noise(next_action.shape)).clamp(-self.noise_clip, self.noise_clip)
                next_action = (next_action + smoothing).clamp(-1.0, 1.0)
            next_q = self.critic_target(batch.next_obs, next_action).min(0).values
            target = batch.reward + batch.discount * (1.0 - batch.terminated) * next_q
        q = self.critic(batch.obs, batch.action)  # [num_critics, B]
        critic_loss = (q - target).square().mean(-1).sum()
        self.critic_opt.zero_grad(set_to_none=False)
        critic_loss.backward()
        self.critic_opt.step()
        metrics = {"critic_loss": critic_loss, "q_mean": q.mean()}

        # 2. delayed actor and target updates
        if self.actor_due(j):
            with frozen(self.critic):
                actor_loss = -self.critic(batch.obs, self.actor(batch.obs))[0].mean()
            self.actor_opt.zero_grad(set_to_none=False)
            actor_loss.backward()
            self.actor_opt.step()
            self.polyak(self.actor_target, self.actor, cfg.tau)
            self.polyak(self.critic_target, self.critic, cfg.tau)
            metrics["actor_loss"] = actor_loss
        return metrics

    def extra_state(self) -> dict[str, Tensor]:
        return {**super().extra_state(), "ou_state": self.ou_state}

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
