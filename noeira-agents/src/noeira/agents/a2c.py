"""Advantage Actor-Critic (synchronous A2C) with the whole rollout on the device.

The same storage, collection and advantage code as :mod:`noeira.agents.ppo` (``collect``
is PPO's: ``horizon`` steps of every env into ``[horizon, num_envs]`` buffers on the
device); the update is one gradient step per rollout on the whole batch, with the plain
policy gradient (no ratio, no clipping)::

    loss = -mean(A * log pi(a|s)) - ent_coef * entropy + vf_coef * 0.5 * mean((V - R)^2)

Defaults follow Stable-Baselines3's A2C (RMSprop, lr 7e-4, 5-step rollouts, lambda 1).
Capture-safe like PPO. References: Mnih et al. 2016 (A3C); Wu et al. 2017 (A2C).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import Tensor

from noeira.agents.policy import ActorCriticConfig
from noeira.agents.ppo import PPO
from noeira.agents.rollout import make_optimizer
from noeira.core.contracts import EnvSpec
from noeira.core.errors import ConfigError

__all__ = ["A2C"]


@attrs.frozen
class Config(ActorCriticConfig):
    """A2C hyperparameters (``agent.KEY=VALUE``); the network and normalisation keys
    (hidden_sizes, activation, log_std_init, norm_obs, norm_reward, reward_clip, bf16) are
    :class:`~noeira.agents.policy.ActorCriticConfig`'s."""

    horizon: int = 5
    """Env steps per env in one collect; the batch (one gradient step) is horizon x num_envs."""
    lr: float = 7e-4
    """Learning rate (the start value when annealing)."""
    anneal_lr: bool = False
    """Anneal the learning rate linearly to 0 over the run."""
    total_steps: int = 0
    """Env steps the annealing spans; 0: the run's run.total_steps."""
    optimizer: str = "rmsprop"
    """rmsprop | adam."""
    rmsprop_alpha: float = 0.99
    """RMSprop smoothing constant."""
    optim_eps: float = 1e-5
    """Optimizer epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE lambda (1: n-step returns bootstrapped at the end of the rollout, classic A2C)."""
    advantage: str = "gae"
    """gae | puff (with one on-policy update the puff advantage equals GAE; kept for symmetry)."""
    vtrace_rho_clip: float = 1.0
    """puff advantage: clip of the importance weight on the TD error."""
    vtrace_c_clip: float = 1.0
    """puff advantage: clip of the importance weight on the trace."""
    norm_adv: bool = False
    """Normalise advantages over the batch (zero mean, unit std)."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Clip the global gradient norm to this (0: no clipping)."""
    torch_threads: int = 0
    """CPU: torch.set_num_threads(N) when the agent is built (0: leave torch's setting)."""


_RECIPES: dict[str, dict[str, dict[str, Any]]] = {
    # one gradient step per rollout, so small batches (many steps): Adam with a high annealed
    # lr, advantages not normalised (as for PPO). About 2,300 updates solve CartPole.
    "cartpole": {
        "cpu": {
            "env": {"num_envs": 16},
            "agent": {"horizon": 8, "lr": 3e-3, "optimizer": "adam", "gamma": 0.99, "gae_lambda": 0.95,
                      "norm_adv": False, "anneal_lr": True},
            "run": {"total_steps": 300_000, "log_interval": 50},
        },
        "cuda": {
            "env": {"num_envs": 256},
            "agent": {"horizon": 8, "lr": 3e-3, "optimizer": "adam", "gamma": 0.99, "gae_lambda": 0.95,
                      "norm_adv": False, "anneal_lr": True},
            "run": {"total_steps": 3_000_000, "log_interval": 50},
        },
    },
}


class A2C(PPO):
    """A2C agent (entry point ``a2c``): PPO's collection, one unclipped update per rollout."""

    Config = Config  # type: ignore[assignment]
    RECIPES = _RECIPES  # PPO.recipe reads them

    def _validate(self, cfg: Any, spec: EnvSpec) -> None:
        super()._validate(cfg, spec)
        if cfg.optimizer not in ("adam", "rmsprop"):
            raise ConfigError(f"agent.optimizer: expected 'adam' or 'rmsprop', got {cfg.optimizer!r}")

    def _make_optimizer(self) -> torch.optim.Optimizer:
        cfg = self.config
        return make_optimizer(cfg.optimizer, self.policy.parameters(), self.lr, cfg.optim_eps, cfg.rmsprop_alpha)

    def _setup_update(self) -> None:
        if self.config.advantage == "puff":
            self.ratio = torch.ones((self.config.horizon, self.spec.num_envs), device=self.device)

    def learn(self) -> dict[str, Tensor]:
        cfg, buf, policy = self.config, self.buf, self.policy
        if cfg.anneal_lr:
            self.lr.copy_(cfg.lr * (1.0 - self._progress()))
        self._advantages()  # on-policy: ratio 1, so puff == GAE
        explained_var = 1 - (buf.returns - buf.values).var() / (buf.returns.var() + 1e-8)

        flat = lambda x: x.view(self.steps_per_collect, *x.shape[2:])  # [T, N, ...] -> [T*N, ...]
        with self._autocast():
            logprob, entropy, value = policy.evaluate(flat(buf.obs), flat(buf.actions))
        adv = flat(buf.advantages)
        if cfg.norm_adv:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg_loss = -(adv * logprob).mean()
        v_loss = 0.5 * (value - flat(buf.returns)).square().mean()
        entropy_loss = entropy.mean()
        loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss

        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        grad_norm = torch.zeros((), device=self.device)
        if cfg.max_grad_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return {
            "policy_loss": pg_loss.detach(), "value_loss": v_loss.detach(), "entropy": entropy_loss.detach(),
            "explained_variance": explained_var, "grad_norm": grad_norm.detach(), "lr": self.lr.clone(),
            "advantage_mean": buf.advantages.mean(),
        }
