"""Proximal Policy Optimization with the whole rollout on the device.

Read top to bottom like a CleanRL script: the hyperparameters (:class:`Config`), the tuned
recipes (served through the ``noeira_recipe`` hook by :mod:`noeira.agents.recipes`), then the
agent: build networks, storage and optimizer once; ``collect`` steps the batched env
``horizon`` times writing into preallocated ``[horizon, num_envs]`` buffers
(:class:`~noeira.agents.onpolicy.ActorCriticRollout`, shared with A2C); ``learn`` computes
advantages and runs ``update_epochs x num_minibatches`` clipped-surrogate updates. Both are
capture-safe (see ARCHITECTURE.md): no ``.item()``, no host branch on a tensor, RNG from a
generator on the device, learning rates as tensors annealed in place, a capturable optimizer on
CUDA, metrics returned as 0-d device tensors. So a graph backend can record ``collect`` and
``learn`` once each and replay them.

Minibatches are shuffled transitions for a feed-forward network; for a recurrent network (or
prioritized sampling) they are whole env segments, replayed from the state stored at the
segment start with the same episode resets (truncated backprop through time over the horizon).

Action spaces: ``Discrete``, ``MultiDiscrete`` and ``Box`` (see :mod:`noeira.agents.distributions`:
Gaussian with a state-independent log-std parameter; sampled unbounded, clipped to the Box
for the env, the unclipped sample stored). Anything else is a :class:`ConfigError`.

References: Schulman et al. 2017 (PPO); Huang et al. 2022, "The 37 Implementation Details of
PPO" (CleanRL); PufferLib 3 (puff advantage, prioritized segment sampling).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor

from noeira.agents import mujoco_recipes
from noeira.agents.onpolicy import ActorCriticRollout, explained_variance, schedule, segment_minibatches
from noeira.agents.optim import load_optimizer_state, scale_lr
from noeira.agents.policy import ActorCriticConfig, check_optimizer
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, PolicyState
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError

__all__ = ["PPO", "recipe"]


@attrs.frozen
class Config(ActorCriticConfig):
    """PPO hyperparameters (``agent.KEY=VALUE``); the network, precision and normalisation keys
    (network, hidden_sizes, activation, network_options, log_std_init, norm_obs, norm_reward,
    reward_clip, precision) are :class:`~noeira.agents.policy.ActorCriticConfig`'s."""

    horizon: int = 128
    """Env steps per env in one collect; the batch is horizon x num_envs transitions."""
    update_epochs: int = 4
    """Passes over the batch in one learn."""
    num_minibatches: int = 4
    """Minibatches per epoch (the batch is split into this many)."""
    optimizer: str = "adam"
    """Optimizer: adam | rmsprop | muon (the table in noeira.agents.optim; muon: PufferLib's,
    Newton-Schulz orthogonalised Nesterov momentum on every matrix)."""
    muon_momentum: float = 0.95
    """optimizer=muon: momentum (Nesterov) of its EMA buffer."""
    lr: float = 2.5e-4
    """Learning rate (the start value when annealing)."""
    anneal_lr: bool = True
    """Anneal the learning rate over the run, following lr_schedule."""
    lr_schedule: str = "linear"
    """With anneal_lr: linear | cosine, from lr down to lr * min_lr_ratio at the run's end."""
    min_lr_ratio: float = 0.0
    """With anneal_lr: the final learning rate as a fraction of lr."""
    total_steps: int = 0
    """Env steps the schedules (lr, ent_coef, prio_beta) span; 0: the run's run.total_steps."""
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
    """Entropy bonus coefficient (the start value with ent_schedule)."""
    ent_schedule: str = "constant"
    """constant | linear | cosine: the entropy coefficient goes from ent_coef to ent_coef_final over the run."""
    ent_coef_final: float = 0.0
    """The entropy coefficient at the run's end, with ent_schedule linear or cosine."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    replay_ratio: float = 0.0
    """Minibatch updates per batch of data, in passes: round(replay_ratio x num_minibatches)
    updates (fresh shuffles each pass, the last pass possibly partial; PufferLib's replay_ratio)
    instead of update_epochs x num_minibatches. 0: update_epochs."""
    max_grad_norm: float = 0.5
    """Clip the global gradient norm to this (0: no clipping)."""
    adam_eps: float = 1e-5
    """Optimizer epsilon (Adam's, or RMSprop's with optimizer=rmsprop)."""
    prio_alpha: float = 0.0
    """Prioritized segment sampling (0: off, uniform shuffled minibatches). Minibatches are
    then env segments (one env's horizon steps) drawn with probability ~ sum|advantage|^alpha."""
    prio_beta0: float = 0.2
    """Prioritized sampling: initial importance-weight exponent, annealed to 1 over the run."""
    torch_threads: int = 0
    """CPU: torch.set_num_threads(N) when the agent is built; small networks run fastest on
    one thread (0: leave torch's setting)."""


# Tuned starting points, per env and backend: layered below the user's config. An env without a
# cuda recipe takes its cpu one on cuda; only CartPole's cuda recipe was measured on a GPU (H200).
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
    # Pendulum-v1: rl-baselines3-zoo hyperparams/ppo.yml (normalize, gamma 0.9, gae_lambda 0.95, 10 epochs,
    # lr 1e-3, rollouts of 4,096 steps: 4 envs x 1,024 there, 16 x 256 here; 1e5 steps) without its gSDE,
    # which this PPO does not have; 32 minibatches of 128 rows (the zoo's 64-row ones cost twice the
    # updates) and 3e5 steps. On the 2-core CPU (BENCHMARKS.md, "Recipes that solve"): 4 of 5 seeds
    # solve, 100-episode evals -151.3, -183.5, -188.0, -297.1, -195.5 (~60 s of training each; seed 3
    # swings up from one side only, -231.7 after 5e5 steps). At 2e5 steps 3 of 5 (-157, -210, -187,
    # -585, -197); the previous recipe (64 envs x 64 steps, 8 minibatches, lr 3e-3) 2 of 5 at 1e5 steps.
    "pendulum": {
        "cpu": {
            "env": {"num_envs": 16},
            "agent": {"horizon": 256, "update_epochs": 10, "num_minibatches": 32, "lr": 1e-3, "gamma": 0.9,
                      "gae_lambda": 0.95, "clip_vloss": False, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 300_000, "log_interval": 5},
        },
        "cuda": {
            "env": {"num_envs": 4096},
            "agent": {"horizon": 32, "update_epochs": 10, "num_minibatches": 8, "lr": 3e-3, "gamma": 0.9,
                      "gae_lambda": 0.9, "clip_vloss": False, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 5_000_000, "log_interval": 10},
        },
    },
    # Acrobot-v1: rl-baselines3-zoo hyperparams/ppo.yml (normalize: true, 16 envs, n_steps 256,
    # gae_lambda 0.94, gamma 0.99, 4 epochs, 1e6 steps) with this file's CPU style: 8 large
    # minibatches instead of SB3's 64-row ones and a higher annealed lr, so a fraction of the steps:
    # 2e5; on the 2-core CPU all 5 seeds reach -100 by 74-98k steps and evaluate -82 to -87.
    "acrobot": {
        "cpu": {
            "env": {"num_envs": 16},
            "agent": {"horizon": 256, "update_epochs": 4, "num_minibatches": 8, "lr": 1e-3, "gamma": 0.99,
                      "gae_lambda": 0.94, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 200_000, "log_interval": 2},
        },
    },
    # MountainCar-v0: rl-baselines3-zoo hyperparams/ppo.yml (normalize: true, 16 envs, gae_lambda 0.98,
    # gamma 0.99, ent_coef 0) with this file's CPU style: 64-step segments, 10 epochs of 8 minibatches,
    # the lr annealed, 2e6 steps (the zoo: n_steps 16, 4 epochs of 64-row minibatches, constant lr, 1e6).
    # On the 2-core CPU (BENCHMARKS.md, "Recipes that solve") 5 of 5 seeds evaluate -96.3 to -99.0 (~250 s
    # of training each). The zoo's own settings evaluated -123.0 on seed 0 after 1e6 steps (-114.4 with the
    # lr annealed, -113.5 at 2e6; 64-step segments at 1e6: -111.8).
    "mountaincar": {
        "cpu": {
            "env": {"num_envs": 16},
            "agent": {"horizon": 64, "update_epochs": 10, "num_minibatches": 8, "lr": 3e-4, "anneal_lr": True,
                      "gamma": 0.99, "gae_lambda": 0.98, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 2_000_000, "log_interval": 20},
        },
    },
    # MountainCarContinuous-v0: rl-baselines3-zoo hyperparams/ppo.yml tunes it with gSDE
    # (use_sde, log_std_init -3.29), which this PPO does not have; without it the Gaussian's
    # white noise seldom reaches the flag. The zoo's other settings (normalize, gamma 0.9999,
    # clip 0.1, 10 epochs, gae_lambda 0.9, max_grad_norm 5, vf_coef 0.19, ent_coef 0.00429),
    # with many envs and a wide initial std for exploration: 5 of 5 seeds evaluate 92-93 on the 2-core
    # CPU, their training return reaching 90 at 164-184k of the 200k steps.
    "mountaincar-continuous": {
        "cpu": {
            "env": {"num_envs": 64},
            "agent": {"horizon": 64, "update_epochs": 10, "num_minibatches": 8, "lr": 3e-4, "gamma": 0.9999,
                      "gae_lambda": 0.9, "clip_coef": 0.1, "max_grad_norm": 5.0, "vf_coef": 0.19,
                      "ent_coef": 0.00429, "log_std_init": 0.5, "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 200_000, "log_interval": 5},
        },
    },
    # gymnasium's MuJoCo locomotion envs: noeira.agents.mujoco_recipes (untested: notes say so)
    **mujoco_recipes.tables("ppo"),
}


# Atari (atari:<game>, any game): CleanRL's ppo_atari.py (Huang et al. 2022): 8 envs x 128 steps, 4 epochs of 4
# minibatches, lr 2.5e-4 annealed, clip 0.1 (the value clip too), entropy 0.01, rewards clipped to +-1 (ALE's
# rewards are integers, so the clamp is CleanRL's sign), the Nature CNN with one 512-unit ReLU layer, 10M agent
# steps (40M frames; CleanRL's total_timesteps counts agent steps). Its env options are the atari env's defaults
# (noop reset, frame skip 4 with max-pool, 84x84 grayscale, stack 4, episodic life, fire reset); sticky actions
# stay at v5's 0.25 (CleanRL's envs had none; env.repeat_action_probability=0 for its setting). cuda: 64 envs,
# the same number of iterations (run.total_steps scales with num_envs), bf16 autocast. Not run to the end here.
_ATARI_AGENT = {"horizon": 128, "update_epochs": 4, "num_minibatches": 4, "lr": 2.5e-4, "anneal_lr": True,
                "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.1, "clip_vloss": True, "vf_clip_coef": 0.1,
                "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5, "norm_adv": True, "reward_clamp": 1.0,
                "network": "nature-cnn", "hidden_sizes": [512], "activation": "relu"}
_RECIPES["atari"] = {
    "cpu": {"env": {"num_envs": 8}, "agent": dict(_ATARI_AGENT), "run": {"total_steps": 10_000_000, "log_interval": 10},
            "note": "not verified: CleanRL's ppo_atari settings, not yet run to the end with noeira"},
    "cuda": {"env": {"num_envs": 64}, "agent": {**_ATARI_AGENT, "precision": "bf16"},
             "run": {"total_steps": 80_000_000, "log_interval": 10},
             "note": "not verified: CleanRL's ppo_atari settings, not yet run to the end with noeira"},
}


def recipe(env: str, backend: str, num_envs: int | None = None) -> dict[str, Any] | None:
    """Tuned defaults for ``env`` on ``backend`` (None when there are none). Backends other than
    cuda take the cpu recipe; on cpu the recipes use one torch thread. Given the user's
    ``num_envs``, the run keeps the recipe's number of iterations: ``run.total_steps`` scales
    with num_envs."""
    return scaled_recipe(_RECIPES, env, backend, num_envs)


def scaled_recipe(tables: Mapping[str, Mapping[str, Mapping[str, Any]]], env: str, backend: str,
                  num_envs: int | None) -> dict[str, Any] | None:
    """The on-policy recipe lookup PPO and A2C share (see :func:`recipe`)."""
    by_backend = tables.get(env.split(":")[0])
    if not by_backend:
        return None
    out = copy.deepcopy(dict(by_backend.get(backend, by_backend.get("cpu", {}))))
    if backend == "cpu":
        out.setdefault("agent", {}).setdefault("torch_threads", 1)
    base_envs = out.get("env", {}).get("num_envs")
    if num_envs is not None and base_envs and "total_steps" in out.get("run", {}):
        out["run"]["total_steps"] = out["run"]["total_steps"] * num_envs // base_envs
    return out


class PPO:
    """PPO agent (entry point ``ppo``). ``PPO(spec, backend, PPO.Config(...))``."""

    Config = Config

    # -- setup ---------------------------------------------------------------------------
    def __init__(self, spec: EnvSpec, backend: Backend, config: Config | None = None, *, training: bool = True) -> None:
        cfg = config if config is not None else type(self).Config()
        self.config, self.spec, self.backend = cfg, spec, backend
        self.device = dev = backend.device
        validate(cfg)
        if cfg.torch_threads > 0 and dev.type == "cpu":
            torch.set_num_threads(cfg.torch_threads)
        t, n = cfg.horizon, spec.num_envs
        self.total_steps = cfg.total_steps
        # networks, storage, sampling: the acting half, shared with A2C
        self.rollout = ActorCriticRollout(spec, backend, cfg, t, cfg.gamma)
        self.steps_per_collect = self.rollout.steps_per_collect
        self.optimizer = self.rollout.make_optimizer(cfg.optimizer, cfg.lr, eps=cfg.adam_eps, momentum=cfg.muon_momentum)
        # minibatch updates per learn: update_epochs passes, or replay_ratio passes (the last may be partial)
        self.num_updates = (cfg.update_epochs * cfg.num_minibatches if cfg.replay_ratio <= 0
                            else max(1, round(cfg.replay_ratio * cfg.num_minibatches)))
        self.minibatch_size = (t * n) // cfg.num_minibatches
        if self.minibatch_size < 1 and training:  # acting alone (training=False) makes no minibatches
            raise ConfigError(f"agent.num_minibatches: {cfg.num_minibatches} minibatches need at least that many "
                              f"transitions, the batch has {t * n}")
        # whole env segments per minibatch: recurrent policies (BPTT) and prioritized sampling
        self.segments = self.rollout.recurrent or cfg.prio_alpha > 0
        self.minibatch_segments = 0
        if self.segments and training:
            self.minibatch_segments = segment_minibatches(n, cfg.num_minibatches)
        if cfg.advantage == "puff":
            # pi_current / pi_old per stored step, refreshed after each minibatch
            self.ratio = torch.ones((t, n), device=dev)

    def set_total_steps(self, total_steps: int) -> None:
        """Told by the driver: the run's length, which annealing spans unless config.total_steps is set."""
        if self.config.total_steps <= 0:
            self.total_steps = int(total_steps)

    # -- acting --------------------------------------------------------------------------
    def initial_state(self, batch: int) -> PolicyState:
        return self.rollout.policy.initial_state(batch)

    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, PolicyState]:
        """``obs [B, *obs_shape]`` -> (env actions ``[B, *act_shape]`` clipped to a Box, next state)."""
        return self.rollout.act(obs, state, done, deterministic)

    def policy_module(self) -> torch.nn.Module:
        """The deterministic policy as one module, for ``noeira export`` (see ActorCriticRollout)."""
        return self.rollout.policy_module()

    def collect(self, env: BatchedEnv) -> None:
        self.rollout.collect(env)

    # -- learn: advantages, then update_epochs x num_minibatches clipped updates ---------
    def _advantages(self) -> None:
        cfg = self.config
        if cfg.advantage == "puff":
            self.rollout.buf.compute_advantages(cfg.gamma, cfg.gae_lambda, self.ratio, cfg.vtrace_rho_clip,
                                                cfg.vtrace_c_clip)
        else:
            self.rollout.buf.compute_advantages(cfg.gamma, cfg.gae_lambda)

    def _sample_segments(self, beta: Tensor) -> tuple[Tensor, Tensor]:
        """Prioritized: ``minibatch_segments`` envs drawn without replacement with probability
        ``p ~ sum_t |A|^alpha``; returns the env indices ``[m]`` and importance weights
        ``(N p)^-beta`` per transition ``[T * m]`` (segment-major, as the minibatch is laid out)."""
        n = self.spec.num_envs
        score = torch.nan_to_num(self.rollout.buf.advantages.abs().sum(0).pow(self.config.prio_alpha), 0.0, 0.0, 0.0)
        probs = (score + 1e-6) / (score + 1e-6).sum()
        # torch.multinomial(probs, m, replacement=False) draws the same way (p / Exp(1), top m),
        # but first validates probs with a host sync; written out it stays capture-safe
        noise = torch.empty_like(probs).exponential_(1.0, generator=self.rollout.generator)
        seg = torch.topk(probs / noise, self.minibatch_segments).indices
        weight = (n * probs[seg]).pow(-beta)
        return seg, weight.expand(self.config.horizon, -1).reshape(-1)

    def learn(self) -> dict[str, Tensor]:
        cfg, buf, policy = self.config, self.rollout.buf, self.rollout.policy
        gen = self.rollout.generator
        progress = self.rollout.progress(self.total_steps)
        if cfg.anneal_lr:
            scale_lr(self.optimizer, schedule(progress, cfg.lr_schedule, 1.0, cfg.min_lr_ratio))
        ent_coef = cfg.ent_coef if cfg.ent_schedule == "constant" else \
            schedule(progress, cfg.ent_schedule, cfg.ent_coef, cfg.ent_coef_final)
        beta = cfg.prio_beta0 + (1.0 - cfg.prio_beta0) * progress
        if cfg.advantage == "puff":
            self.ratio.fill_(1.0)
        self._advantages()
        explained_var = explained_variance(buf.values, buf.returns)

        n, mb, m = self.spec.num_envs, self.minibatch_size, self.minibatch_segments
        def pick(x: Tensor, idx: Tensor) -> Tensor:
            """[T, N] -> the minibatch's rows: whole segments of envs idx ([T*m], time-major) or flat rows."""
            return x[:, idx].reshape(-1) if self.segments else x.view(-1)[idx]

        sums = torch.zeros(6, device=self.device)  # policy_loss, value_loss, entropy, approx_kl, clipfrac, grad_norm
        for update in range(self.num_updates):
            i = update % cfg.num_minibatches
            if i == 0 and cfg.prio_alpha <= 0:  # uniform: a fresh permutation of the rows (or envs) each pass
                perm = torch.randperm(n if self.segments else self.steps_per_collect, generator=gen, device=self.device)
            if cfg.advantage == "puff" and update > 0:
                self._advantages()  # the policy moved: re-weight with the new ratios and values
            weight = None
            if cfg.prio_alpha > 0:
                idx, weight = self._sample_segments(beta)
            elif self.segments:
                idx = perm[i * m:(i + 1) * m]
            else:
                idx = perm[i * mb:(i + 1) * mb]
            mb_adv, mb_returns, mb_values = pick(buf.advantages, idx), pick(buf.returns, idx), pick(buf.values, idx)
            newlogprob, entropy, newvalue = self.rollout.evaluate(idx, self.segments)
            logratio = newlogprob - pick(buf.logprobs, idx)
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
            loss = pg_loss - ent_coef * entropy_loss + cfg.vf_coef * v_loss

            self.optimizer.zero_grad(set_to_none=False)
            loss.backward()
            sync_gradients(policy.parameters())  # data-parallel: the ranks' mean gradient (no-op alone)
            grad_norm = self.rollout.clip_gradients(cfg.max_grad_norm)
            self.optimizer.step()

            if cfg.advantage == "puff":  # remember where the policy and critic now stand
                rows = (torch.arange(cfg.horizon, device=self.device)[:, None] * n + idx[None, :]).reshape(-1) \
                    if self.segments else idx
                self.ratio.view(-1).index_copy_(0, rows, ratio.detach())
                buf.values.view(-1).index_copy_(0, rows, newvalue.detach())
            sums += torch.stack([pg_loss.detach(), v_loss.detach(), entropy_loss.detach(), approx_kl, clipfrac,
                                 grad_norm])

        means = sums / self.num_updates
        metrics = {
            "policy_loss": means[0], "value_loss": means[1], "entropy": means[2], "approx_kl": means[3],
            "clipfrac": means[4], "explained_variance": explained_var, "grad_norm": means[5],
            "lr": self.optimizer.param_groups[0]["lr"].clone(), "advantage_mean": buf.advantages.mean(),
        }
        if cfg.ent_schedule != "constant":
            metrics["ent_coef"] = torch.as_tensor(ent_coef, device=self.device).clone()
        return metrics

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks (with observation statistics), optimizer (with its learning rates), reward
        statistics, counters and the generator state: everything to resume training where it stopped."""
        return {"rollout": self.rollout.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load in place (tensors keep their storage, so recorded graphs stay valid, except
        the optimizer's state, which torch replaces: load before recording)."""
        self.rollout.load_state_dict(state["rollout"])
        load_optimizer_state(self.optimizer, state["optimizer"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.spec.num_envs}, horizon={self.config.horizon}, device={self.device})"


def validate(cfg: Config) -> None:
    """One-line errors for PPO keys out of range."""
    for key, value in (("horizon", cfg.horizon), ("update_epochs", cfg.update_epochs),
                       ("num_minibatches", cfg.num_minibatches)):
        if value < 1:
            raise ConfigError(f"agent.{key}: must be >= 1, got {value}")
    if cfg.advantage not in ("gae", "puff"):
        raise ConfigError(f"agent.advantage: expected 'gae' or 'puff', got {cfg.advantage!r}")
    if not cfg.lr > 0:
        raise ConfigError(f"agent.lr: must be > 0, got {cfg.lr}")
    if not 0 <= cfg.gamma <= 1 or not 0 <= cfg.gae_lambda <= 1:
        raise ConfigError("agent.gamma / agent.gae_lambda: must lie in [0, 1]")
    check_optimizer(cfg.optimizer)
    if cfg.lr_schedule not in ("linear", "cosine"):
        raise ConfigError(f"agent.lr_schedule: expected 'linear' or 'cosine', got {cfg.lr_schedule!r}")
    if cfg.ent_schedule not in ("constant", "linear", "cosine"):
        raise ConfigError(f"agent.ent_schedule: expected 'constant', 'linear' or 'cosine', got {cfg.ent_schedule!r}")
    if not 0 <= cfg.min_lr_ratio <= 1:
        raise ConfigError(f"agent.min_lr_ratio: must lie in [0, 1], got {cfg.min_lr_ratio}")
    if not cfg.replay_ratio >= 0:
        raise ConfigError(f"agent.replay_ratio: must be >= 0 (0: update_epochs), got {cfg.replay_ratio}")
    if not 0 <= cfg.muon_momentum < 1:
        raise ConfigError(f"agent.muon_momentum: must lie in [0, 1), got {cfg.muon_momentum}")
    for key in ("reward_clamp", "vf_coef", "vf_clip_coef", "ent_coef", "ent_coef_final", "max_grad_norm"):
        if not getattr(cfg, key) >= 0:
            raise ConfigError(f"agent.{key}: must be >= 0, got {getattr(cfg, key)}")

