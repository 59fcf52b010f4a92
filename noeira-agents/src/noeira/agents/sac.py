"""Soft Actor-Critic (Haarnoja et al. 2018) with twin Q and automatic entropy tuning.

The whole loop runs on the device (see :mod:`noeira.agents.offpolicy`): ``collect`` samples
the stochastic policy (uniform random actions before ``learning_starts``) and stores the
transitions in the device replay buffer; ``learn`` runs ``updates_per_step`` updates, each:

1. critics: ``y = R + gamma^m (1 - terminated) (min_i Q_target_i(s', a') - alpha log pi(a'|s'))``
   with ``a' ~ pi(s')``; loss ``sum_i mean (Q_i(s, a) - y)^2``. The two critics are one
   batched network (:class:`~noeira.agents.offpolicy.QEnsemble`); with ``num_atoms`` they are
   categorical and ``y`` a projected distribution (:mod:`noeira.agents.critics`).
2. actor: ``mean(alpha log pi(a|s) - min_i Q_i(s, a))``, ``a ~ pi(s)`` reparameterized.
3. temperature (``autotune``): ``-mean(alpha (log pi(a|s) + target_entropy))``,
   ``target_entropy = -target_entropy_scale * action_dim``.
4. targets: Polyak averaging with rate ``tau``.

The policy is a tanh-squashed Gaussian in ``[-1, 1]``, rescaled to the env's Box
(``low + (a + 1)(high - low) / 2``); the buffer stores the ``[-1, 1]`` action. The
Gaussian's sample and log-probability are computed in float32 whatever ``agent.precision``.

With ``sde`` the Gaussian's noise is state-dependent (gSDE, Raffin et al. 2022, as
Stable-Baselines3 has it): ``a = tanh(mu(s) + phi(s) W)``, ``phi(s)`` the actor's last hidden
layer, ``W ~ N(0, sigma^2)`` a ``[features, act_dim]`` matrix with ``sigma = exp(log_std)``
learned per entry. While an env keeps its ``W`` (``sde_sample_freq`` steps) its noise is a
smooth function of the state, so exploration persists across steps (what MountainCar's flag
needs; white noise averages out); each update draws one ``W`` for its batch.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from noeira.agents import mujoco_recipes
from noeira.agents.critics import CriticConfig, critic_loss, make_critics, td_target
from noeira.agents.distributions import gaussian_log_prob, sde_draw, sde_noise, sde_redraw_, sde_std
from noeira.agents.offpolicy import (
    UNTESTED,
    OffPolicyAgent,
    RecipeTables,
    frozen,
    pick_recipe,
    relu_mlp,
)
from noeira.agents.replay import Batch
from noeira.core.contracts import Backend, EnvSpec
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError

__all__ = ["RECIPES", "SAC", "SDEActor", "SquashedGaussianActor", "recipe"]


def _tanh_log_det(x: Tensor) -> Tensor:
    """``sum log |d tanh(x)/dx| = sum log(1 - tanh(x)^2)`` ``[B]``, in a form stable for large ``|x|``."""
    return (2 * (math.log(2) - x - F.softplus(-2 * x))).sum(-1)


class SquashedGaussianActor(nn.Module):
    """pi(a|s): ``tanh(N(mean(s), std(s)))`` in ``[-1, 1]^act_dim``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], log_std_min: float,
                 log_std_max: float) -> None:
        super().__init__()
        self.trunk = nn.Sequential(relu_mlp(obs_dim, hidden[:-1], hidden[-1]), nn.ReLU())
        self.head = nn.Linear(hidden[-1], 2 * act_dim)  # mean and log-std in one matmul
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """``mean, log_std`` ``[B, act_dim]`` each (log-std squashed into its range)."""
        mean, log_std = self.head(self.trunk(obs.flatten(1).float())).chunk(2, -1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(log_std) + 1)
        return mean, log_std

    def sample(self, obs: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """A reparameterized action ``[B, act_dim]`` and its log-probability ``[B]`` (float32)."""
        mean, log_std = (x.float() for x in self(obs))  # bf16 under autocast: sample in float32
        eps = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        x = mean + log_std.exp() * eps
        log_prob = (-0.5 * eps.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1) - _tanh_log_det(x)
        return torch.tanh(x), log_prob


class SDEActor(nn.Module):
    """pi(a|s) with gSDE: ``tanh(N(mu(s), sqrt(phi(s)^2 @ sigma^2 + 1e-6)))`` in ``[-1, 1]^act_dim``,
    sampled as ``tanh(mu(s) + phi(s) @ W)``, ``W = sigma * N(0, 1)`` (reparameterized, so the loss
    reaches ``log_std`` through the sample as well as the density). ``phi`` enters the noise and
    the variance detached, and ``mu`` is clipped to ``[-2, 2]`` before the tanh (SB3's
    ``learn_features=False`` and ``clip_mean``)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...], log_std_init: float) -> None:
        super().__init__()
        self.trunk = nn.Sequential(relu_mlp(obs_dim, hidden[:-1], hidden[-1]), nn.ReLU())
        self.mu = nn.Linear(hidden[-1], act_dim)
        self.log_std = nn.Parameter(torch.full((hidden[-1], act_dim), float(log_std_init)))

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """``mean [B, act_dim]`` (clipped) and the features ``phi [B, features]``."""
        phi = self.trunk(obs.flatten(1).float())
        return self.mu(phi).clamp(-2.0, 2.0), phi

    def weights(self, batch: tuple[int, ...], generator: torch.Generator) -> Tensor:
        """Noise matrices ``W [*batch, features, act_dim]``, each entry ``N(0, sigma^2)``."""
        return sde_draw(self.log_std, batch, generator)

    def sample_with(self, obs: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
        """The action ``[B, act_dim]`` under ``W`` (one ``[F, A]`` for the batch, or ``[B, F, A]``)
        and its log-probability ``[B]`` (float32)."""
        mean, phi = (x.float() for x in self(obs))
        phi = phi.detach()
        noise = sde_noise(phi, w)
        x = mean + noise
        log_prob = gaussian_log_prob(noise, sde_std(phi, self.log_std)) - _tanh_log_det(x)
        return torch.tanh(x), log_prob

    def sample(self, obs: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """A reparameterized action and its log-probability under one fresh ``W`` for the batch."""
        return self.sample_with(obs, self.weights((), generator))


class SAC(OffPolicyAgent):
    """Soft Actor-Critic for 1-d ``Box`` action spaces."""

    @attrs.frozen
    class Config(CriticConfig):
        """SAC's keys (with the critics' and those every off-policy agent takes)."""

        actor_lr: float = 3e-4
        """Learning rate of the policy (and of the temperature)."""
        critic_lr: float = 1e-3
        """Learning rate of the twin critics."""
        alpha: float = 0.2
        """Entropy temperature; the initial value when ``autotune``."""
        autotune: bool = True
        """Tune the temperature so the policy's entropy tracks ``target_entropy``."""
        target_entropy_scale: float = 1.0
        """target_entropy = -target_entropy_scale * action_dim."""
        log_std_min: float = -5.0
        """Lower bound of the policy's log standard deviation."""
        log_std_max: float = 2.0
        """Upper bound of the policy's log standard deviation."""
        sde: bool = False
        """State-dependent exploration (gSDE): noise ``phi(s) W``, the actor's features times a per-env
        random matrix kept ``sde_sample_freq`` steps, instead of white Gaussian noise."""
        sde_sample_freq: int = 32
        """With ``sde``: env steps each env keeps its noise matrix ``W`` before drawing a new one."""
        sde_log_std_init: float = -3.0
        """With ``sde``: the initial ``log sigma`` of every entry of ``W`` (SB3's ``log_std_init``)."""

    config: Config

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config, *, training: bool = True) -> None:
        super().__init__(spec, backend, config, training=training)
        cfg, dev = config, self.device
        if cfg.sde and cfg.sde_sample_freq < 1:
            raise ConfigError(f"agent.sde_sample_freq: must be >= 1, got {cfg.sde_sample_freq}")
        self.actor: SquashedGaussianActor | SDEActor
        if cfg.sde:
            self.actor = SDEActor(self.obs_dim, self.act_dim, cfg.hidden, cfg.sde_log_std_init).to(dev)
            self.sde_weights = torch.zeros((self.num_envs, *self.actor.log_std.shape), device=dev)
            """Each env's noise matrix ``W``, redrawn every ``sde_sample_freq`` collect steps."""
            self.sde_clock = torch.zeros((), dtype=torch.int64, device=dev)
            """Collect steps taken (the redraws are due where it is a multiple of ``sde_sample_freq``)."""
        else:
            self.actor = SquashedGaussianActor(self.obs_dim, self.act_dim, cfg.hidden, cfg.log_std_min,
                                               cfg.log_std_max).to(dev)
        self.critic, self.critic_target = make_critics(cfg, 2, self.obs_dim, self.act_dim, dev)
        self.log_alpha = nn.ParameterDict({"log_alpha": nn.Parameter(torch.tensor(math.log(cfg.alpha), device=dev))})
        self.nets.update({"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target,
                          "alpha": self.log_alpha})
        self.target_entropy = -cfg.target_entropy_scale * self.act_dim
        self.critic_opt = self.add_optimizer("critic", self.critic.parameters(), cfg.critic_lr)
        self.actor_opt = self.add_optimizer("actor", self.actor.parameters(), cfg.actor_lr)
        if cfg.autotune:
            self.alpha_opt = self.add_optimizer("alpha", self.log_alpha.parameters(), cfg.actor_lr)

    def explore(self, obs: Tensor) -> Tensor:
        if not self.config.sde:
            return self.actor.sample(obs, self.generator)[0]
        sde_redraw_(self.sde_weights, self.sde_clock, self.config.sde_sample_freq,
                    self.actor.weights((self.num_envs,), self.generator))
        return self.actor.sample_with(obs, self.sde_weights)[0]

    def extra_state(self) -> dict[str, Tensor]:
        if not self.config.sde:
            return super().extra_state()
        return {**super().extra_state(), "sde_weights": self.sde_weights, "sde_clock": self.sde_clock}

    def policy_action(self, obs: Tensor, deterministic: bool) -> Tensor:
        """``tanh(mean)`` (``deterministic``) or a policy sample ``[B, act_dim]``."""
        return torch.tanh(self.actor(obs)[0]) if deterministic else self.actor.sample(obs, self.generator)[0]

    def update(self, batch: Batch, j: int) -> dict[str, Tensor]:
        cfg = self.config
        alpha = self.log_alpha["log_alpha"].detach().exp()

        # 1. critics toward the soft TD target (scalar or categorical: noeira.agents.critics)
        with torch.no_grad(), self.autocast():
            next_action, next_log_prob = self.actor.sample(batch.next_obs, self.generator)
            target = td_target(self.critic_target, batch.next_obs, next_action, batch, bonus=-alpha * next_log_prob)
        with self.autocast():
            loss, q = critic_loss(self.critic, batch.obs, batch.action, target)  # q: [2, B]
        self.critic_opt.zero_grad(set_to_none=False)
        loss.backward()
        sync_gradients(self.critic.parameters())  # data-parallel: the ranks' mean gradient (no-op alone)
        self.critic_opt.step()

        # 2. actor: maximize min Q + entropy (gradients flow through the critic to the action only)
        with frozen(self.critic), self.autocast():
            action, log_prob = self.actor.sample(batch.obs, self.generator)
            min_q = self.critic(batch.obs, action).float().min(0).values
        actor_loss = (alpha * log_prob - min_q).mean()
        self.actor_opt.zero_grad(set_to_none=False)
        actor_loss.backward()
        sync_gradients(self.actor.parameters())
        self.actor_opt.step()

        # 3. temperature
        if cfg.autotune:
            alpha_loss = -(self.log_alpha["log_alpha"].exp() * (log_prob.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad(set_to_none=False)
            alpha_loss.backward()
            sync_gradients(self.log_alpha.parameters())
            self.alpha_opt.step()

        # 4. targets
        self.polyak(self.critic_target, self.critic, cfg.tau)
        return {"critic_loss": loss, "actor_loss": actor_loss, "q_mean": q.mean(), "alpha": alpha,
                "entropy": -log_prob.mean()}


RECIPES: RecipeTables = {
    # Measured on the 2-core CPU (BENCHMARKS.md, "Recipes that solve"); on cuda ("*") not verified here.
    # Pendulum: 4 envs, one update per transition, 3-step returns (which roughly halve the steps to
    # solve it); 64-wide networks on the CPU (as good here, twice as fast), 256-wide elsewhere
    "pendulum": {
        "cpu": {
            "env": {"num_envs": 4},
            "agent": {"hidden": [64, 64], "batch_size": 128, "buffer_size": 100_000, "learning_starts": 1_000,
                      "updates_per_step": 4, "n_step": 3},
            "run": {"total_steps": 8_000, "log_interval": 100},
        },
        "*": {
            "env": {"num_envs": 4},
            "agent": {"hidden": [256, 256], "batch_size": 256, "buffer_size": 100_000, "learning_starts": 1_000,
                      "updates_per_step": 4, "n_step": 3},
            "run": {"total_steps": 8_000, "log_interval": 100},
        },
    },
    # MountainCarContinuous-v0: rl-baselines3-zoo hyperparams/sac.yml (lr 3e-4, buffer 5e4, batch 512,
    # fixed temperature 0.1, one update per transition, gamma 0.9999, tau 0.01, learning from the start,
    # [64, 64], gSDE with log_std_init -3.67 and a new noise matrix every 32 steps (its train_freq), 5e4
    # steps). On the 2-core CPU (BENCHMARKS.md, "Recipes that solve") 4 of 5 seeds solve (evals 93.8-94.7;
    # seed 4 89.9, one episode in ten stalling); without gSDE the policy learned to stand still (white
    # noise averages out before the car reaches the flag).
    "mountaincar-continuous": {"*": {
        "env": {"num_envs": 4},
        "agent": {"hidden": [64, 64], "batch_size": 512, "buffer_size": 50_000, "learning_starts": 0,
                  "updates_per_step": 4, "actor_lr": 3e-4, "critic_lr": 3e-4, "alpha": 0.1, "autotune": False,
                  "gamma": 0.9999, "tau": 0.01, "sde": True, "sde_sample_freq": 32, "sde_log_std_init": -3.67},
        "run": {"total_steps": 50_000, "log_interval": 250},
    }},
    # gymnasium's MuJoCo locomotion envs: noeira.agents.mujoco_recipes (untested: notes say so)
    **mujoco_recipes.tables("sac"),
    "*": {"*": {"note": UNTESTED, "run": {"total_steps": 1_000_000, "log_interval": 250}}},
}
"""SAC's tuned defaults: env name -> backend name -> recipe ("*": any other)."""


def recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """Tuned defaults for ``env`` on ``backend`` (below whatever the user sets), from
    :data:`RECIPES`; the same at any ``num_envs`` the user chooses."""
    return pick_recipe(RECIPES, env, backend)
