"""Proximal Policy Optimization with the whole rollout on the device.

Read top to bottom like a CleanRL script: the hyperparameters (:class:`Config`), the tuned
recipes, then the agent: build networks, storage and optimizer once; ``collect`` steps the
batched env ``horizon`` times writing into preallocated ``[horizon, num_envs]`` buffers;
``learn`` computes advantages and runs ``update_epochs x num_minibatches`` clipped-surrogate
updates. Both are capture-safe (see DESIGN.md): no ``.item()``, no host branch on a tensor, RNG
from a generator on the device, the learning rate a tensor annealed in place, a capturable
optimizer on CUDA, metrics returned as 0-d device tensors. So a graph backend can record
``collect`` and ``learn`` once each and replay them.

Action spaces: ``Discrete``, ``MultiDiscrete`` and ``Box`` (see :mod:`noeira.agents.distributions`:
Gaussian with a state-independent log-std parameter; sampled unbounded, clipped to the Box
for the env, the unclipped sample stored). Anything else is a :class:`ConfigError`.

References: Schulman et al. 2017 (PPO); Huang et al. 2022, "The 37 Implementation Details of
PPO" (CleanRL); PufferLib 3 (puff advantage, prioritized segment sampling).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor

from noeira.agents.policy import ActorCritic, ActorCriticConfig
from noeira.agents.rollout import RewardScaler, Rollout, make_optimizer
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec
from noeira.core.errors import ConfigError

__all__ = ["PPO"]


@attrs.frozen
class Config(ActorCriticConfig):
    """PPO hyperparameters (``agent.KEY=VALUE``); the network and normalisation keys
    (hidden_sizes, activation, log_std_init, norm_obs, norm_reward, reward_clip, bf16) are
    :class:`~noeira.agents.policy.ActorCriticConfig`'s."""

    horizon: int = 128
    """Env steps per env in one collect; the batch is horizon x num_envs transitions."""
    update_epochs: int = 4
    """Passes over the batch in one learn."""
    num_minibatches: int = 4
    """Minibatches per epoch (the batch is split into this many)."""
    lr: float = 2.5e-4
    """Adam learning rate (the start value when annealing)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run."""
    total_steps: int = 0
    """Env steps the annealing (lr, prio_beta) spans; 0: the run's run.total_steps."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda: bias/variance trade-off of the advantage (1: Monte Carlo, 0: one-step TD)."""
    advantage: str = "gae"
    """gae | puff. puff: PufferLib's GAE with V-trace importance clipping, recomputed before
    every minibatch with the current policy's ratios and refreshed values."""
    vtrace_rho_clip: float = 1.0
    """puff advantage: clip of the importance weight on the TD error (rho-bar)."""
    vtrace_c_clip: float = 1.0
    """puff advantage: clip of the importance weight on the trace (c-bar)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch (zero mean, unit std)."""
    clip_coef: float = 0.2
    """Surrogate clipping: the probability ratio is kept within 1 +- clip_coef."""
    clip_vloss: bool = True
    """Clip the value update around the rollout's values (PPO2-style value loss)."""
    vf_clip_coef: float = 0.2
    """Value clipping range when clip_vloss (in return units)."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Clip the global gradient norm to this (0: no clipping)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    prio_alpha: float = 0.0
    """Prioritized segment sampling (0: off, uniform shuffled minibatches). Minibatches are
    then env segments (one env's horizon steps) drawn with probability ~ sum|advantage|^alpha."""
    prio_beta0: float = 0.2
    """Prioritized sampling: initial importance-weight exponent, annealed to 1 over the run."""
    torch_threads: int = 0
    """CPU: torch.set_num_threads(N) when the agent is built; small networks run fastest on
    one thread (0: leave torch's setting)."""


# Tuned starting points, per env and backend: layered below the user's config.
_RECIPES: dict[str, dict[str, dict[str, Any]]] = {
    # CPU: tiny networks are bound by per-op overhead, so few large minibatches, a high
    # annealed lr and one torch thread. The value loss is not clipped (returns reach ~100
    # and a 0.2 clip starves the critic); advantages are not normalised (once most episodes
    # reach the time limit, advantages are ~0 and normalising them blows noise up to unit
    # scale, so the solved policy drifts away again on some seeds).
    "cartpole": {
        "cpu": {
            "env": {"num_envs": 64},
            "agent": {"horizon": 16, "update_epochs": 6, "num_minibatches": 2, "lr": 5e-3, "gamma": 0.99,
                      "gae_lambda": 0.9, "clip_vloss": False, "norm_adv": False},
            "run": {"total_steps": 100_000, "log_interval": 10},
        },
        # GPU: solving takes a number of iterations (~25-35 here) more than a number of
        # samples, and a recorded update of these small networks costs ~0.3 ms plus ~8 ns per
        # row on an H200: many envs for throughput, 2 epochs x 8 minibatches per iteration
        # (4 epochs solve in as many iterations, each twice as long), and a run of a fixed
        # number of iterations at any num_envs (see PPO.recipe). Measured on the H200 at 4k
        # and 16k envs, 2 seeds each: solved in 0.5-0.7 s.
        "cuda": {
            "env": {"num_envs": 4096},
            "agent": {"horizon": 16, "update_epochs": 2, "num_minibatches": 8, "lr": 5e-3, "gamma": 0.99,
                      "gae_lambda": 0.9, "clip_vloss": False, "norm_adv": False},
            "run": {"total_steps": 48 * 16 * 4096, "log_interval": 10},
        },
    },
    "pendulum": {
        "cpu": {
            "env": {"num_envs": 64},
            "agent": {"horizon": 64, "update_epochs": 10, "num_minibatches": 8, "lr": 3e-3, "gamma": 0.9,
                      "gae_lambda": 0.9, "clip_vloss": False, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 100_000, "log_interval": 5},
        },
        "cuda": {
            "env": {"num_envs": 4096},
            "agent": {"horizon": 32, "update_epochs": 10, "num_minibatches": 8, "lr": 3e-3, "gamma": 0.9,
                      "gae_lambda": 0.9, "clip_vloss": False, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 5_000_000, "log_interval": 10},
        },
    },
}


class PPO:
    """PPO agent (entry point ``ppo``). ``PPO(spec, backend, PPO.Config(...))``."""

    Config = Config
    RECIPES = _RECIPES
    """Tuned starting points by env, then backend (see :meth:`recipe`)."""

    @classmethod
    def recipe(cls, env_name: str, backend_name: str, num_envs: int | None = None) -> dict[str, Any]:
        """Tuned defaults for ``env_name`` on ``backend_name`` (``{}`` when there are none).
        Backends other than cuda take the cpu recipe. Given the user's ``num_envs``, the run
        keeps the recipe's number of iterations: ``run.total_steps`` scales with num_envs."""
        by_backend = cls.RECIPES.get(env_name.split(":")[0], {})
        recipe = copy.deepcopy(by_backend.get(backend_name, by_backend.get("cpu", {})))
        if backend_name == "cpu":
            recipe.setdefault("agent", {}).setdefault("torch_threads", 1)
        base_envs = recipe.get("env", {}).get("num_envs")
        if num_envs is not None and base_envs and "total_steps" in recipe.get("run", {}):
            recipe["run"]["total_steps"] = recipe["run"]["total_steps"] * num_envs // base_envs
        return recipe

    # -- setup ---------------------------------------------------------------------------
    def __init__(self, spec: EnvSpec, backend: Backend, config: Config | None = None) -> None:
        cfg = config if config is not None else type(self).Config()
        self.config, self.spec, self.backend = cfg, spec, backend
        self.device = dev = backend.device
        self._validate(cfg, spec)
        if cfg.torch_threads > 0 and dev.type == "cpu":
            torch.set_num_threads(cfg.torch_threads)
        t, n = cfg.horizon, spec.num_envs
        self.steps_per_collect = t * n
        self.total_steps = cfg.total_steps

        # networks (obs normaliser inside: it moves and saves with them)
        self.policy = ActorCritic(spec, cfg.hidden_sizes, cfg.activation, cfg.log_std_init, cfg.norm_obs, dev)
        self.reward_scaler = RewardScaler(n, cfg.gamma, cfg.reward_clip, dev) if cfg.norm_reward else None
        # storage: horizon x num_envs, on the device, allocated once
        head = self.policy.head
        self.buf = Rollout(t, n, self.policy.obs_dim, head.action_shape, head.action_dtype, dev)
        # the one generator for sampling actions and minibatches, seeded from torch's global
        # RNG (which the driver seeds with run.seed)
        self.generator = backend.generator(int(torch.randint(0, 2**62, (1,)).item()))
        # learning rate as a device tensor, annealed in place
        self.lr = torch.tensor(cfg.lr, dtype=torch.float32, device=dev)
        self.optimizer = self._make_optimizer()
        self.steps_done = torch.zeros((), dtype=torch.float64, device=dev)
        self._setup_update()

    def _validate(self, cfg: Any, spec: EnvSpec) -> None:
        for key in ("horizon", "update_epochs", "num_minibatches"):
            if getattr(cfg, key, 1) < 1:
                raise ConfigError(f"agent.{key}: must be >= 1, got {getattr(cfg, key)}")
        if cfg.advantage not in ("gae", "puff"):
            raise ConfigError(f"agent.advantage: expected 'gae' or 'puff', got {cfg.advantage!r}")
        if not cfg.lr > 0:
            raise ConfigError(f"agent.lr: must be > 0, got {cfg.lr}")
        if not 0 <= cfg.gamma <= 1 or not 0 <= cfg.gae_lambda <= 1:
            raise ConfigError("agent.gamma / agent.gae_lambda: must lie in [0, 1]")

    def _make_optimizer(self) -> torch.optim.Optimizer:
        return make_optimizer("adam", self.policy.parameters(), self.lr, self.config.adam_eps)

    def _setup_update(self) -> None:
        cfg, n, t = self.config, self.spec.num_envs, self.config.horizon
        self.minibatch_size = (t * n) // cfg.num_minibatches
        if self.minibatch_size < 1:
            raise ConfigError(f"agent.num_minibatches: {cfg.num_minibatches} minibatches need at least that many "
                              f"transitions, the batch has {t * n}")
        if cfg.prio_alpha > 0:
            self.minibatch_segments = n // cfg.num_minibatches
            if self.minibatch_segments < 1:
                raise ConfigError(f"agent.num_minibatches: prioritized sampling draws env segments; "
                                  f"{cfg.num_minibatches} minibatches need >= that many envs, got {n}")
            # flat index of (step t, env 0) so segment e covers rows t * N + e
            self._row_offsets = torch.arange(t, device=self.device) * n
        if cfg.advantage == "puff":
            # pi_current / pi_old per stored step, refreshed after each minibatch
            self.ratio = torch.ones((t, n), device=self.device)

    def set_total_steps(self, total_steps: int) -> None:
        """Told by the driver: the run's length, which annealing spans unless config.total_steps is set."""
        if self.config.total_steps <= 0:
            self.total_steps = int(total_steps)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.config.bf16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # -- acting --------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = False) -> Tensor:
        """``obs [B, *obs_shape]`` -> env actions ``[B, *act_shape]`` (clipped to a Box)."""
        x = self.policy.observe(obs)
        with self._autocast():
            if deterministic:
                action = self.policy.mode(x)
            else:
                action, _, _ = self.policy.act(x, self.generator)
        return self.policy.head.to_env(action)

    # -- collect: horizon steps of every env into the rollout buffers --------------------
    @torch.no_grad()
    def collect(self, env: BatchedEnv) -> None:
        cfg, buf, policy = self.config, self.buf, self.policy
        obs = env.obs
        for t in range(cfg.horizon):
            x = policy.observe(obs, update=cfg.norm_obs)
            with self._autocast():
                action, logprob, value = policy.act(x, self.generator)
            buf.obs[t] = x
            buf.actions[t] = action
            buf.logprobs[t] = logprob
            buf.values[t] = value

            step = env.step(policy.head.to_env(action))
            done = step.terminated | step.truncated
            # V(final_obs) for every env (no data-dependent branch); used where truncated
            with self._autocast():
                buf.final_values[t] = policy.value(policy.observe(step.final_obs))
            reward = step.reward.float()
            if self.reward_scaler is not None:
                reward = self.reward_scaler(reward, done)
            buf.rewards[t] = reward
            buf.terminated[t] = step.terminated
            buf.truncated[t] = step.truncated
            buf.dones[t] = done
            obs = step.obs
        self.steps_done += self.steps_per_collect

    # -- learn: advantages, then update_epochs x num_minibatches clipped updates ---------
    def _progress(self) -> Tensor:
        """Fraction of the run done before this batch, a device scalar in [0, 1]."""
        if self.total_steps <= 0:
            return torch.zeros((), device=self.device)
        return ((self.steps_done - self.steps_per_collect) / self.total_steps).clamp(0, 1).float()

    def _advantages(self) -> None:
        cfg = self.config
        if cfg.advantage == "puff":
            self.buf.compute_advantages(cfg.gamma, cfg.gae_lambda, self.ratio, cfg.vtrace_rho_clip, cfg.vtrace_c_clip)
        else:
            self.buf.compute_advantages(cfg.gamma, cfg.gae_lambda)

    def _sample_segments(self, beta: Tensor) -> tuple[Tensor, Tensor]:
        """Prioritized: ``minibatch_segments`` envs drawn without replacement with probability
        ``p ~ sum_t |A|^alpha``; returns flat indices ``[T * m]`` and importance weights
        ``(N p)^-beta`` per transition."""
        n = self.spec.num_envs
        score = torch.nan_to_num(self.buf.advantages.abs().sum(0).pow(self.config.prio_alpha), 0.0, 0.0, 0.0)
        probs = (score + 1e-6) / (score + 1e-6).sum()
        # torch.multinomial(probs, m, replacement=False) draws the same way (p / Exp(1), top m),
        # but first validates probs with a host sync; written out it stays capture-safe
        noise = torch.empty_like(probs).exponential_(1.0, generator=self.generator)
        seg = torch.topk(probs / noise, self.minibatch_segments).indices
        weight = (n * probs[seg]).pow(-beta)
        idx = (self._row_offsets[:, None] + seg[None, :]).reshape(-1)
        return idx, weight.expand(self.config.horizon, -1).reshape(-1)

    def learn(self) -> dict[str, Tensor]:
        cfg, buf, policy = self.config, self.buf, self.policy
        progress = self._progress()
        if cfg.anneal_lr:
            self.lr.copy_(cfg.lr * (1.0 - progress))
        beta = cfg.prio_beta0 + (1.0 - cfg.prio_beta0) * progress
        if cfg.advantage == "puff":
            self.ratio.fill_(1.0)
        self._advantages()
        explained_var = 1 - (buf.returns - buf.values).var() / (buf.returns.var() + 1e-8)

        flat = lambda x: x.view(self.steps_per_collect, *x.shape[2:])  # [T, N, ...] -> [T*N, ...]
        b_obs, b_actions, b_logprobs = flat(buf.obs), flat(buf.actions), flat(buf.logprobs)
        b_values, b_adv, b_returns = flat(buf.values), flat(buf.advantages), flat(buf.returns)
        sums = torch.zeros(5, device=self.device)  # policy_loss, value_loss, entropy, approx_kl, clipfrac
        grad_norm = torch.zeros((), device=self.device)
        mb = self.minibatch_size
        for _epoch in range(cfg.update_epochs):
            if cfg.prio_alpha <= 0:  # uniform: a fresh permutation of the batch each epoch
                perm = torch.randperm(self.steps_per_collect, generator=self.generator, device=self.device)
            for i in range(cfg.num_minibatches):
                if cfg.advantage == "puff" and not (_epoch == 0 and i == 0):
                    self._advantages()  # the policy moved: re-weight with the new ratios and values
                if cfg.prio_alpha > 0:
                    idx, weight = self._sample_segments(beta)
                else:
                    idx, weight = perm[i * mb:(i + 1) * mb], None
                mb_adv, mb_returns, mb_values = b_adv[idx], b_returns[idx], b_values[idx]

                with self._autocast():
                    newlogprob, entropy, newvalue = policy.evaluate(b_obs[idx], b_actions[idx])
                logratio = newlogprob - b_logprobs[idx]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()  # the k3 estimator of KL(old || new)
                    clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()

                if cfg.norm_adv:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                if weight is not None:
                    mb_adv = mb_adv * weight  # prioritized sampling's importance correction

                # clipped surrogate objective
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                # value loss, optionally clipped around the rollout's values
                if cfg.clip_vloss:
                    v_clipped = mb_values + (newvalue - mb_values).clamp(-cfg.vf_clip_coef, cfg.vf_clip_coef)
                    v_loss = 0.5 * torch.max((newvalue - mb_returns).square(), (v_clipped - mb_returns).square()).mean()
                else:
                    v_loss = 0.5 * (newvalue - mb_returns).square().mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss

                self.optimizer.zero_grad(set_to_none=False)
                loss.backward()
                if cfg.max_grad_norm > 0:
                    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()

                if cfg.advantage == "puff":  # remember where the policy and critic now stand
                    self.ratio.view(-1).index_copy_(0, idx, ratio.detach())
                    buf.values.view(-1).index_copy_(0, idx, newvalue.detach())
                sums += torch.stack([pg_loss.detach(), v_loss.detach(), entropy_loss.detach(), approx_kl, clipfrac])

        means = sums / (cfg.update_epochs * cfg.num_minibatches)
        return {
            "policy_loss": means[0], "value_loss": means[1], "entropy": means[2], "approx_kl": means[3],
            "clipfrac": means[4], "explained_variance": explained_var, "grad_norm": grad_norm.detach(),
            "lr": self.lr.clone(), "advantage_mean": buf.advantages.mean(),
        }

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks (with observation statistics), optimizer, reward statistics, counters and
        the generator state: everything to resume training where it stopped."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "reward_scaler": self.reward_scaler.state_dict() if self.reward_scaler is not None else None,
            "steps_done": self.steps_done.clone(),
            "lr": self.lr.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load in place (tensors keep their storage, so recorded graphs stay valid, except
        the optimizer's state, which torch replaces: load before recording)."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # keep the annealed lr tensor shared with the optimizer
            group["lr"] = self.lr
        self.lr.copy_(torch.as_tensor(state["lr"]))
        if self.reward_scaler is not None and state.get("reward_scaler") is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])
        self.steps_done.copy_(torch.as_tensor(state["steps_done"]))
        self.generator.set_state(state["generator"].cpu() if isinstance(state["generator"], Tensor) else state["generator"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.spec.num_envs}, horizon={self.config.horizon}, device={self.device})"

