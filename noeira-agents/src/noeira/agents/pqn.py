"""PQN: parallelised Q-learning (Gallici et al. 2024, "Simplifying Deep Temporal Difference
Learning"): many envs, ε-greedy, Q(λ) targets, LayerNorm in the network, no replay buffer and no
target network. Read top to bottom like a CleanRL script; the whole loop stays on the device.

``collect`` steps the batched env ``horizon`` times, acting ε-greedily on the Q-network, and
stores, per step, the observation, action, reward, flags and ``max_a Q(s', a)`` of the state the
step reached (``final_obs``: the true next state, before any autoreset). ``learn`` computes the
λ-returns backwards over the rollout with those collection-time values::

    G_t = r_t + gamma * (1 - terminated_t) * B_t
    B_t = max_a Q(s_{t+1}, a)                                          where the episode ended (done_t)
        = lambda * G_{t+1} + (1 - lambda) * max_a Q(s_{t+1}, a)       otherwise;  G_T := max_a Q(s_T, a)

(a truncated episode bootstraps from its final observation, a terminated one does not), then
runs ``update_epochs x num_minibatches`` regressions of ``Q(s_t, a_t)`` on ``G_t`` (half the
squared error, the gradient norm clipped). ε falls linearly from ``epsilon_start`` to
``epsilon_end`` over ``exploration_fraction`` of the run; the learning rate anneals linearly to 0
with ``anneal_lr``. Both are device arithmetic, so ``collect`` and ``learn`` are capture-safe.

The network is :class:`~noeira.agents.qnet.QNet` with ``layer_norm`` (Linear, LayerNorm, ReLU per
hidden layer): an MLP on vector observations, a CNN torso on frames (``network = "nature-cnn"``,
``network_options = {norm = "layer"}``: PQN's Atari network). The paper's optimizer is RAdam;
this one is ``agent.optimizer`` (Adam by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.optim import check_optimizer, load_optimizer_state, make_optimizer, scale_lr
from noeira.agents.precision import autocast, check_precision
from noeira.agents.qnet import QNet
from noeira.core.config import above, at_least, within
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, PolicyState
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError
from noeira.core.recipes import RecipeTables, pick_recipe
from noeira.core.rng import restore_generator
from noeira.core.spaces import Discrete, Encoded

__all__ = ["PQN", "recipe"]


# CartPole-v1 / Acrobot-v1: purejaxql's pqn_cartpole.yaml (32 envs x 64 steps, 4 epochs of 16 minibatches, lr 1e-4
# annealed, two LayerNorm layers of 256, rewards x 0.1, gamma 0.99, lambda 0.95, gradient norm 10, 5e5 steps) with
# ε to 0.05 over 20% of the run (the yaml: to 0.2). Measured on the 2-core CPU (BENCHMARKS.md, "Recipes that solve").
# Atari: purejaxql's pqn_atari.yaml (128 envs x 32 steps, 2 epochs of 32 minibatches, lr 2.5e-4, ε to 0.001 over
# 10%, lambda 0.65, a LayerNorm Nature CNN, rewards clipped, 10M agent steps); cpu: 16 envs, not run to the end.
_CLASSIC = {"env": {"num_envs": 32},
            "agent": {"horizon": 64, "update_epochs": 4, "num_minibatches": 16, "lr": 1e-4, "anneal_lr": True,
                      "gamma": 0.99, "q_lambda": 0.95, "epsilon_end": 0.05, "exploration_fraction": 0.2,
                      "hidden": [256, 256], "reward_scale": 0.1, "max_grad_norm": 10.0},
            "run": {"total_steps": 500_000, "log_interval": 10}}
_ATARI_AGENT = {"horizon": 32, "update_epochs": 2, "num_minibatches": 32, "lr": 2.5e-4, "anneal_lr": False,
                "gamma": 0.99, "q_lambda": 0.65, "epsilon_end": 0.001, "exploration_fraction": 0.1,
                "network": "nature-cnn", "network_options": {"norm": "layer"}, "hidden": [512], "reward_clamp": 1.0,
                "max_grad_norm": 10.0}
_ATARI_NOTE = "not verified: purejaxql's pqn_atari settings, not yet run to the end with noeira"
RECIPES: RecipeTables = {
    "cartpole": {"*": _CLASSIC},  # 5 of 5 seeds (BENCHMARKS.md)
    "acrobot": {"*": _CLASSIC},  # 5 of 5 seeds
    "atari": {"cpu": {"env": {"num_envs": 16}, "agent": _ATARI_AGENT, "run": {"total_steps": 10_000_000, "log_interval": 10},
                      "note": _ATARI_NOTE},
              "*": {"env": {"num_envs": 128}, "agent": {**_ATARI_AGENT, "precision": "bf16"},
                    "run": {"total_steps": 10_000_000, "log_interval": 10}, "note": _ATARI_NOTE}},
}
"""PQN's tuned defaults: env name -> backend ("*": any) -> recipe."""


def recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """Tuned defaults for ``env`` (None: no recipe; the agent's defaults apply)."""
    return pick_recipe(RECIPES, env, backend, cpu_threads=1)


class PQN:
    """PQN agent (entry point ``pqn``) for ``Discrete`` action spaces."""

    @attrs.frozen
    class Config:
        """PQN's hyperparameters (``agent.KEY=VALUE``)."""

        horizon: int = attrs.field(default=64, validator=at_least(1))
        """Env steps per env in one collect; a learn() trains on horizon x num_envs transitions."""
        update_epochs: int = attrs.field(default=4, validator=at_least(1))
        """Passes over the rollout in one learn()."""
        num_minibatches: int = attrs.field(default=16, validator=at_least(1))
        """Minibatches per pass."""
        lr: float = attrs.field(default=1e-4, validator=above(0))
        """Learning rate (the start value with anneal_lr)."""
        anneal_lr: bool = True
        """Anneal the learning rate linearly to 0 over the run."""
        gamma: float = attrs.field(default=0.99, validator=within(0, 1))
        """Discount factor."""
        q_lambda: float = attrs.field(default=0.95, validator=within(0, 1))
        """lambda of the Q(lambda) returns (0: one-step Q-learning targets, 1: Monte Carlo returns)."""
        epsilon_start: float = 1.0
        """ε of ε-greedy exploration at the start."""
        epsilon_end: float = 0.05
        """ε after exploration_fraction of the run."""
        exploration_fraction: float = attrs.field(default=0.2, validator=within(0, 1, open_low=True))
        """Fraction of the run over which ε falls linearly."""
        hidden: tuple[int, ...] = (256, 256)
        """Widths of the hidden layers (after a CNN torso: its fully connected layers)."""
        layer_norm: bool = True
        """LayerNorm before each hidden ReLU (PQN's stabiliser in place of a target network)."""
        network: str = "mlp"
        """Torso: mlp (the observation flattened) or a CNN for frames (nature-cnn, impala-cnn)."""
        network_options: dict[str, Any] = attrs.field(factory=dict)
        """The torso's own options (PQN's Atari CNN: {norm = "layer"})."""
        reward_scale: float = 1.0
        """Multiply rewards by this before learning (PQN's CartPole: 0.1)."""
        reward_clamp: float = 0.0
        """Clip rewards to +- this first (0: off; Atari recipes: 1)."""
        max_grad_norm: float = 10.0
        """Clip the gradient norm to this (0: no clipping)."""
        optimizer: str = "adam"
        """Optimizer (the table in noeira.agents.optim)."""
        adam_eps: float = 1e-8
        """Adam's epsilon."""
        precision: str = "fp32"
        """fp32 | bf16: the forward passes under bfloat16 autocast; weights, optimizer state and losses float32."""
        total_steps: int = 0
        """Env steps the schedules (ε, lr) span; 0: the run's run.total_steps."""
        torch_threads: int = 0
        """CPU: torch.set_num_threads(N) when the agent is built (0: leave torch's setting)."""

    # -- setup ---------------------------------------------------------------------------------
    def __init__(self, spec: EnvSpec, backend: Backend, config: PQN.Config | None = None, *, training: bool = True) -> None:
        cfg = config if config is not None else type(self).Config()
        self.config, self.spec, self.backend = cfg, spec, backend
        self.device = dev = torch.device(backend.device)
        check_optimizer(cfg.optimizer)  # the rest is checked by Config's validators
        check_precision(cfg.precision)
        if not isinstance(spec.action_space, Discrete):
            raise ConfigError(f"agent: PQN needs a Discrete action space, env {spec.name!r} has {spec.action_space!r}")
        if isinstance(spec.observation_space, Encoded):
            raise ConfigError(f"agent: PQN needs plain observations; env {spec.name!r} gives encoded ones")
        if cfg.torch_threads > 0 and dev.type == "cpu":
            torch.set_num_threads(cfg.torch_threads)
        t, n = cfg.horizon, spec.num_envs
        self.num_actions, self.action_start = spec.action_space.n, spec.action_space.start
        self.steps_per_collect = t * n
        self.minibatch_size = t * n // cfg.num_minibatches
        if self.minibatch_size < 1 and training:  # acting alone (training=False) makes no minibatches
            raise ConfigError(f"agent.num_minibatches: {cfg.num_minibatches} minibatches need at least that many "
                              f"transitions, a rollout has {t * n}")
        obs_shape = tuple(spec.observation_space.shape)
        self.q = QNet(obs_shape, self.num_actions, hidden=cfg.hidden, network=cfg.network,
                      network_options=cfg.network_options, layer_norm=cfg.layer_norm, device=dev)
        self.optimizer = make_optimizer(cfg.optimizer, self.q.parameters(), cfg.lr, eps=cfg.adam_eps)
        self.generator = backend.generator(int(torch.randint(0, 2**62, (1,)).item()))
        # the rollout, allocated once: [T, N, ...]
        self.obs = torch.zeros((t, n, *obs_shape), dtype=spec.observation_space.dtype, device=dev)
        self.actions = torch.zeros((t, n), dtype=torch.int64, device=dev)
        self.rewards = torch.zeros((t, n), device=dev)
        self.terminated = torch.zeros((t, n), device=dev)
        self.dones = torch.zeros((t, n), device=dev)
        self.next_max_q = torch.zeros((t, n), device=dev)
        self.returns = torch.zeros((t, n), device=dev)
        self.steps_done = torch.zeros((), dtype=torch.float64, device=dev)
        """Env steps collected (all envs together), on the device."""
        self.total_steps = cfg.total_steps

    def set_total_steps(self, total_steps: int) -> None:
        """Told by the driver: the run's length, which ε and the lr span unless config.total_steps is set."""
        if self.config.total_steps <= 0:
            self.total_steps = int(total_steps)

    def autocast(self) -> Any:
        return autocast(self.config.precision, self.device)

    def progress(self) -> Tensor:
        """Fraction of the run collected, a device scalar in [0, 1]."""
        return (self.steps_done / max(self.total_steps, 1)).clamp(0, 1).float()

    def epsilon(self) -> Tensor:
        cfg = self.config
        frac = (self.progress() / max(cfg.exploration_fraction, 1e-9)).clamp(max=1.0)
        return cfg.epsilon_start + (cfg.epsilon_end - cfg.epsilon_start) * frac

    # -- acting --------------------------------------------------------------------------------
    def initial_state(self, batch: int) -> PolicyState:
        return None

    def _epsilon_greedy(self, q: Tensor, eps: Tensor) -> Tensor:
        n = q.shape[0]
        random = torch.randint(0, self.num_actions, (n,), generator=self.generator, device=self.device)
        coin = torch.rand(n, generator=self.generator, device=self.device)
        return torch.where(coin < eps, random, q.argmax(-1))

    @torch.no_grad()
    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, None]:
        """``obs [B, *obs_shape]`` -> (greedy, or ε-greedy, actions ``[B]``, None)."""
        with self.autocast():
            q = self.q(obs.to(self.device)).float()
        action = q.argmax(-1) if deterministic else self._epsilon_greedy(q, self.epsilon())
        return action + self.action_start, None

    @torch.no_grad()
    def collect(self, env: BatchedEnv) -> None:
        """``horizon`` ε-greedy steps of every env into the rollout."""
        cfg = self.config
        eps = self.epsilon()
        obs = env.obs
        for t in range(cfg.horizon):
            with self.autocast():
                q = self.q(obs).float()
            action = self._epsilon_greedy(q, eps)
            self.obs[t] = obs
            self.actions[t] = action
            step = env.step(action + self.action_start)
            with self.autocast():  # max_a Q(s', a) of the state reached (before any autoreset)
                self.next_max_q[t] = self.q(step.final_obs).float().max(-1).values
            reward = step.reward.float()
            if cfg.reward_clamp > 0:
                reward = reward.clamp(-cfg.reward_clamp, cfg.reward_clamp)
            self.rewards[t] = reward * cfg.reward_scale
            self.terminated[t] = step.terminated.float()
            self.dones[t] = (step.terminated | step.truncated).float()
            obs = step.obs
        self.steps_done += self.steps_per_collect

    # -- learn: Q(lambda) returns, then update_epochs x num_minibatches regressions ------------
    def _lambda_returns(self) -> None:
        cfg = self.config
        g = self.next_max_q[-1]
        for t in range(cfg.horizon - 1, -1, -1):
            nq = self.next_max_q[t]
            boot = self.dones[t] * nq + (1.0 - self.dones[t]) * (cfg.q_lambda * g + (1.0 - cfg.q_lambda) * nq)
            g = self.rewards[t] + cfg.gamma * (1.0 - self.terminated[t]) * boot
            self.returns[t] = g

    def learn(self) -> dict[str, Tensor]:
        cfg = self.config
        if cfg.anneal_lr:
            scale_lr(self.optimizer, 1.0 - self.progress())
        self._lambda_returns()
        flat_obs = self.obs.view(self.steps_per_collect, *self.obs.shape[2:])
        flat_act, flat_ret = self.actions.view(-1), self.returns.view(-1)
        sums = torch.zeros(3, device=self.device)  # loss, q, grad_norm
        updates = cfg.update_epochs * cfg.num_minibatches
        mb = self.minibatch_size
        for u in range(updates):
            i = u % cfg.num_minibatches
            if i == 0:
                perm = torch.randperm(self.steps_per_collect, generator=self.generator, device=self.device)
            idx = perm[i * mb:(i + 1) * mb]
            with self.autocast():
                q_all = self.q(flat_obs[idx]).float()
            q = q_all.gather(-1, flat_act[idx].unsqueeze(-1)).squeeze(-1)
            loss = 0.5 * (q - flat_ret[idx]).square().mean()
            self.optimizer.zero_grad(set_to_none=False)
            loss.backward()
            sync_gradients(self.q.parameters())  # data-parallel: the ranks' mean gradient (no-op alone)
            grad_norm = (nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm) if cfg.max_grad_norm > 0
                         else torch.zeros((), device=self.device))
            self.optimizer.step()
            sums += torch.stack([loss.detach(), q.detach().mean(), grad_norm.detach().float()])
        means = sums / updates
        return {"q_loss": means[0], "q_mean": means[1], "grad_norm": means[2], "epsilon": self.epsilon(),
                "lambda_return": self.returns.mean(), "lr": self.optimizer.param_groups[0]["lr"].clone()}

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"q": self.q.state_dict(), "optimizer": self.optimizer.state_dict(),
                "steps_done": self.steps_done.clone(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load in place (tensors keep their storage, so recorded graphs stay valid)."""
        self.q.load_state_dict(state["q"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.steps_done.copy_(torch.as_tensor(state["steps_done"]))
        restore_generator(self.generator, state["generator"], "agent generator")

    def __repr__(self) -> str:
        return f"PQN(num_envs={self.spec.num_envs}, horizon={self.config.horizon}, device={self.device})"
