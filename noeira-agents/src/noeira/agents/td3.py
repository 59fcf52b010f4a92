"""TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing, delayed actor updates.

The whole loop runs on the device (see :mod:`noeira.agents.offpolicy`): ``collect`` acts
with the deterministic policy plus exploration noise (Gaussian; Ornstein-Uhlenbeck with
``noise = "ou"``; with ``noise = "mixed"`` Gaussian of a scale each env draws at its episode
start, as FastTD3; uniform random before ``learning_starts``) and stores the transitions;
``learn`` runs ``updates_per_step`` updates, each:

1. critics: ``y = R + gamma^m (1 - terminated) min_i Q_target_i(s', clip(mu_target(s') + eps))``
   with smoothing noise ``eps = clip(N(0, policy_noise), -noise_clip, noise_clip)`` (with
   ``num_atoms``: categorical critics and a projected target distribution, as FastTD3's;
   :mod:`noeira.agents.critics`).
2. every ``policy_delay``-th update: the actor ascends ``Q_1(s, mu(s))``, then the target
   actor and critics follow by Polyak averaging (rate ``tau``).

Delayed updates, capture-safe: the updates are counted since learning started, across
``learn()`` calls (``num_updates``, on the device), and update ``i`` (from 0) also updates the
actor and the targets when ``i % policy_delay == policy_delay - 1``. When ``updates_per_step``
is a multiple of ``policy_delay`` (the Pendulum recipe: 4 and 2; DDPG: any and 1) every call
starts at a multiple of ``policy_delay``, so that rule is a fixed pattern over the update's
index ``j`` within the call (``j % policy_delay == policy_delay - 1``), decided on the host:
only those updates compute the actor step. Otherwise (the defaults: 1 and 2) every update
computes it and applies it only where the device flag says it is due: the actor's step is a
:func:`~noeira.agents.optim.masked_step` (parameters and Adam state restored where not due) and
the targets move with rate ``tau * due``. Both give the same numbers; the second costs an
actor backward pass and a copy of the actor's parameters and optimizer state per update.

Actions live in ``[-1, 1]`` (tanh), rescaled to the env's Box; noise scales are in those
units (``exploration_noise = 0.1`` is 5% of the action range).

:class:`DeterministicAgent` is this loop with the fixes as explicit arguments; :class:`TD3`
passes them from its config, :class:`~noeira.agents.ddpg.DDPG` switches them off.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.agents import mujoco_recipes
from noeira.agents.critics import CriticConfig, critic_loss, make_critics, td_target
from noeira.agents.offpolicy import (
    UNTESTED,
    OffPolicyAgent,
    RecipeTables,
    frozen,
    online_and_target,
    pick_recipe,
    relu_mlp,
)
from noeira.agents.optim import masked_step
from noeira.agents.replay import Batch
from noeira.core.contracts import Backend, EnvSpec
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError

__all__ = ["RECIPES", "TD3", "DeterministicActor", "DeterministicAgent", "DeterministicConfig", "recipe"]


class DeterministicActor(nn.Module):
    """mu(s) = tanh(MLP(s)) in ``[-1, 1]^act_dim``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.net = relu_mlp(obs_dim, hidden, act_dim)

    def forward(self, obs: Tensor) -> Tensor:
        return torch.tanh(self.net(obs.flatten(1).float()))


@attrs.frozen
class DeterministicConfig(CriticConfig):
    """The keys of the deterministic-policy agents, TD3 and DDPG (with the critics' and those every
    off-policy agent takes); DDPG takes exactly these."""

    actor_lr: float = 3e-4
    """Learning rate of the actor."""
    critic_lr: float = 3e-4
    """Learning rate of the critics (DDPG: of the critic)."""
    exploration_noise: float = 0.1
    """Standard deviation of the exploration noise (Gaussian; OU's sigma; mixed: the largest), in
    [-1, 1] action units."""
    noise: str = "gaussian"
    """Exploration noise: gaussian | ou (Ornstein-Uhlenbeck, reset at episode ends) | mixed (Gaussian
    whose std each env draws from U(exploration_noise_min, exploration_noise) at every episode start,
    as FastTD3: many envs explore at many scales at once)."""
    exploration_noise_min: float = 0.001
    """With ``noise = mixed``: the smallest per-env standard deviation."""
    ou_theta: float = 0.15
    """Mean reversion rate of the OU noise."""
    ou_dt: float = 1e-2
    """Time step of the OU noise."""


@torch.no_grad()
def _create_state(optimizer: torch.optim.Optimizer) -> None:
    """Create the optimizer's state now, all zeros as its first step would create it (Adam's and
    RMSprop's fresh state is zeros), so that :func:`masked_step` can restore it from the first
    update on."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
    masked_step(optimizer, torch.zeros((), dtype=torch.bool, device=optimizer.param_groups[0]["params"][0].device))
    for state in optimizer.state.values():
        for v in state.values():
            if isinstance(v, Tensor):
                v.zero_()


class DeterministicAgent(OffPolicyAgent):
    """The deterministic-policy loop of TD3 and DDPG for 1-d ``Box`` action spaces, with TD3's
    fixes as arguments: ``num_critics`` (clipped double-Q over them), ``policy_delay`` (critic
    updates per actor and target update), ``policy_noise`` and ``noise_clip`` (target policy
    smoothing; 0 switches it off)."""

    config: DeterministicConfig

    def __init__(self, spec: EnvSpec, backend: Backend, config: DeterministicConfig, *, training: bool = True, num_critics: int,
                 policy_delay: int, policy_noise: float, noise_clip: float) -> None:
        super().__init__(spec, backend, config, training=training)
        cfg, dev = config, self.device
        if cfg.noise not in ("gaussian", "ou", "mixed"):
            raise ConfigError(f"agent.noise: expected gaussian, ou or mixed, got {cfg.noise!r}")
        if cfg.noise == "mixed" and not 0 <= cfg.exploration_noise_min <= cfg.exploration_noise:
            raise ConfigError(f"agent.exploration_noise_min: must lie in [0, exploration_noise = "
                              f"{cfg.exploration_noise}], got {cfg.exploration_noise_min}")
        self.num_critics, self.policy_delay = num_critics, policy_delay
        self.policy_noise, self.noise_clip = policy_noise, noise_clip
        self.delay_on_device = cfg.updates_per_step % policy_delay != 0
        """Whether the delay is decided per update on the device (else by the host pattern; module docstring)."""
        self.actor, self.actor_target = online_and_target(DeterministicActor, self.obs_dim, self.act_dim, cfg.hidden,
                                                          device=dev)
        self.critic, self.critic_target = make_critics(cfg, num_critics, self.obs_dim, self.act_dim, dev)
        self.nets.update({"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                          "critic_target": self.critic_target})
        self.actor_opt = self.add_optimizer("actor", self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = self.add_optimizer("critic", self.critic.parameters(), cfg.critic_lr)
        if policy_delay > 1:
            _create_state(self.actor_opt)  # a masked (skipped) first step then leaves no state behind
        self.ou_state = torch.zeros((self.num_envs, self.act_dim), device=dev)
        self.noise_scale = torch.zeros((self.num_envs, 1), device=dev)
        """``noise = mixed``: each env's exploration std, drawn at its episode start."""
        if cfg.noise == "mixed":
            self.noise_scale.copy_(self._noise_scales())

    # -- exploration -------------------------------------------------------------------------
    def _noise(self, shape: tuple[int, ...]) -> Tensor:
        return torch.randn(shape, generator=self.generator, device=self.device)

    def _noise_scales(self) -> Tensor:
        """Fresh per-env stds ``[N, 1]``, uniform in ``[exploration_noise_min, exploration_noise)``."""
        lo, hi = self.config.exploration_noise_min, self.config.exploration_noise
        return lo + (hi - lo) * torch.rand((self.num_envs, 1), generator=self.generator, device=self.device)

    def explore(self, obs: Tensor) -> Tensor:
        cfg = self.config
        if cfg.noise == "ou":
            # dx = theta (0 - x) dt + sigma sqrt(dt) N(0, 1)
            x = self.ou_state
            x.add_(-cfg.ou_theta * cfg.ou_dt * x + cfg.exploration_noise * cfg.ou_dt**0.5 * self._noise(x.shape))
            noise = x
        elif cfg.noise == "mixed":
            noise = self.noise_scale * self._noise((obs.shape[0], self.act_dim))
        else:
            noise = cfg.exploration_noise * self._noise((obs.shape[0], self.act_dim))
        return (self.actor(obs) + noise).clamp(-1.0, 1.0)

    def after_step(self, done: Tensor) -> None:
        if self.config.noise == "ou":
            self.ou_state.masked_fill_(done.unsqueeze(-1), 0.0)  # a fresh OU process per episode
        elif self.config.noise == "mixed":  # a fresh std per episode (drawn for every env: no dynamic shapes)
            self.noise_scale.copy_(torch.where(done.unsqueeze(-1), self._noise_scales(), self.noise_scale))

    def policy_action(self, obs: Tensor, deterministic: bool) -> Tensor:
        """mu(s) (``deterministic``), else with Gaussian exploration noise."""
        a = self.actor(obs)
        if not deterministic:
            a = (a + self.config.exploration_noise * self._noise(a.shape)).clamp(-1.0, 1.0)
        return a

    # -- learning ----------------------------------------------------------------------------
    def update(self, batch: Batch, j: int) -> dict[str, Tensor]:
        cfg = self.config
        # 1. critics toward the (smoothed) clipped double-Q target
        with torch.no_grad(), self.autocast():
            next_action = self.actor_target(batch.next_obs)
            if self.policy_noise > 0:
                smoothing = (self.policy_noise * self._noise(next_action.shape)).clamp(-self.noise_clip, self.noise_clip)
                next_action = (next_action + smoothing).clamp(-1.0, 1.0)
            target = td_target(self.critic_target, batch.next_obs, next_action, batch)
        with self.autocast():
            loss, q = critic_loss(self.critic, batch.obs, batch.action, target)  # q: [num_critics, B]
        self.critic_opt.zero_grad(set_to_none=False)
        loss.backward()
        sync_gradients(self.critic.parameters())  # data-parallel: the ranks' mean gradient (no-op alone)
        self.critic_opt.step()
        metrics = {"critic_loss": loss, "q_mean": q.mean()}

        # 2. delayed actor and target updates (module docstring)
        d = self.policy_delay
        due: Tensor | None = None
        if self.delay_on_device:
            due = (self.num_updates + j).remainder(d) == d - 1
        elif j % d != d - 1:
            return metrics
        with frozen(self.critic), self.autocast():
            actor_q = self.critic(batch.obs, self.actor(batch.obs))[0]
        actor_loss = -actor_q.float().mean()
        self.actor_opt.zero_grad(set_to_none=False)
        actor_loss.backward()
        sync_gradients(self.actor.parameters())
        if due is None:
            self.actor_opt.step()
            tau: float | Tensor = cfg.tau
        else:
            masked_step(self.actor_opt, due)
            tau = cfg.tau * due
        self.polyak(self.actor_target, self.actor, tau)
        self.polyak(self.critic_target, self.critic, tau)
        metrics["actor_loss"] = actor_loss  # on the device path: the loss at every update, stepped or not
        return metrics

    def extra_state(self) -> dict[str, Tensor]:
        return {**super().extra_state(), "ou_state": self.ou_state, "noise_scale": self.noise_scale}


class TD3(DeterministicAgent):
    """Twin Delayed DDPG for 1-d ``Box`` action spaces."""

    @attrs.frozen
    class Config(DeterministicConfig):
        """TD3's keys: DDPG's (:class:`DeterministicConfig`) and those of its fixes."""

        policy_noise: float = 0.2
        """Standard deviation of the target policy smoothing noise."""
        noise_clip: float = 0.5
        """Clip of the target policy smoothing noise."""
        policy_delay: int = 2
        """Critic updates per actor (and target) update, counted across learn() calls."""

    config: Config

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config, *, training: bool = True) -> None:
        if config.policy_delay < 1:
            raise ConfigError(f"agent.policy_delay: must be >= 1, got {config.policy_delay}")
        super().__init__(spec, backend, config, training=training, num_critics=2, policy_delay=config.policy_delay,
                         policy_noise=config.policy_noise, noise_clip=config.noise_clip)


RECIPES: RecipeTables = {
    # Measured on the 2-core CPU (BENCHMARKS.md, "Recipes that solve"); on cuda ("*") not verified here.
    # Pendulum: 4 envs, one update per transition, 3-step returns (which roughly halve the steps to solve it)
    "pendulum": {"*": {
        "env": {"num_envs": 4},
        "agent": {"hidden": [128, 128], "batch_size": 128, "buffer_size": 100_000, "learning_starts": 1_000,
                  "updates_per_step": 4, "n_step": 3, "actor_lr": 1e-3, "critic_lr": 1e-3},
        "run": {"total_steps": 8_000, "log_interval": 100},
    }},
    # MountainCarContinuous-v0: rl-baselines3-zoo hyperparams/td3.yml and ddpg.yml (Ornstein-Uhlenbeck
    # exploration noise, sigma 0.5; SB3's defaults otherwise: lr 1e-3, one update per transition, 3e5 steps),
    # with [64, 64] networks, OU sigma 0.75 and 5e4 steps. On the 2-core CPU (BENCHMARKS.md, "Recipes
    # that solve"): TD3 solves 4 of 5 seeds, 100-episode evals 92.6, 90.8, -1.0, 94.6, 94.0 (seed 2
    # never reached the flag often enough and learned to stand still; ~110-185 s of training each);
    # DDPG 5 of 5, 93.3-93.9 (sigma 0.5 over 3e4 steps had solved 2 of 5). With sigma 0.5 over 3e4
    # steps TD3's seed 0 evaluated -4.7.
    "mountaincar-continuous": {"*": {
        "env": {"num_envs": 4},
        "agent": {"hidden": [64, 64], "batch_size": 256, "buffer_size": 100_000, "learning_starts": 1_000,
                  "updates_per_step": 4, "actor_lr": 1e-3, "critic_lr": 1e-3, "noise": "ou", "exploration_noise": 0.75},
        "run": {"total_steps": 50_000, "log_interval": 250},
    }},
    # gymnasium's MuJoCo locomotion envs: noeira.agents.mujoco_recipes (untested: notes say so)
    **mujoco_recipes.tables("td3"),
    "*": {"*": {"note": UNTESTED, "run": {"total_steps": 1_000_000, "log_interval": 250}}},
}
"""TD3's (and DDPG's) tuned defaults: env name -> backend name -> recipe ("*": any other)."""


def recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """Tuned defaults for ``env`` (below whatever the user sets), from :data:`RECIPES`; the
    same at any ``num_envs`` the user chooses."""
    return pick_recipe(RECIPES, env, backend)
