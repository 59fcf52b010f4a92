"""REINFORCE (Williams 1992): the Monte Carlo policy gradient, with the whole loop on the device.

Read top to bottom: the hyperparameters (:class:`Config`), then the agent. ``collect`` runs the
policy ``horizon`` steps in every env, writing observations, actions, rewards and episode ends
into buffers ``[horizon, num_envs, ...]`` allocated once. ``learn`` computes every step's
discounted return-to-go within the rollout,

    G_t = r_t + gamma * (1 - done_t) * G_{t+1},        G_horizon = 0,

normalises it over the batch (the baseline: A_t = (G_t - mean G) / std G), and takes one
gradient step on

    loss = -mean_{t,n}[ log pi(a_t | s_t) A_t ] - ent_coef * mean_{t,n}[ entropy pi(. | s_t) ].

An episode still running at the end of a rollout has its return cut there (there is no critic
to bootstrap it): a horizon of about ``1 / (1 - gamma)`` steps covers what the discount sees.

Capture-safe (ARCHITECTURE.md, "Capture-safe rules"): no host sync in ``collect`` or ``learn``,
fixed shapes, random numbers from one generator on the device, metrics as 0-d device tensors, a
capturable Adam on CUDA. So a graph backend may record both phases.

Spaces: observations any ``Box`` (flattened, read as float32); actions ``Discrete(n)`` (a softmax
over ``n`` logits) or ``Box`` (a Gaussian with a learned, state-independent log std: the sample
is clipped to the box for the env, the unclipped sample is stored). Anything else is a one-line
:class:`ConfigError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.core import Backend, BatchedEnv, Box, ConfigError, Discrete, EnvSpec
from noeira.core.distributed import sync_gradients

__all__ = ["Config", "Reinforce"]


@attrs.frozen
class Config:
    """REINFORCE hyperparameters (``agent.KEY=VALUE``)."""

    horizon: int = attrs.field(default=128, validator=attrs.validators.ge(1))
    """Env steps per env in one collect; the batch is horizon x num_envs transitions."""
    gamma: float = attrs.field(default=0.99, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    """Discount factor."""
    lr: float = attrs.field(default=1e-3, validator=attrs.validators.gt(0))
    """Adam learning rate (the start value when annealing)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run (run.total_steps)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the policy MLP (tanh)."""
    ent_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    """Entropy bonus coefficient."""
    max_grad_norm: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    """Clip the gradient's global norm to this (0: no clipping)."""
    torch_threads: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    """CPU: torch.set_num_threads(N) when the agent is built (small networks run fastest on one
    thread; 0: leave torch's setting)."""


def mlp(in_dim: int, hidden: tuple[int, ...], out_dim: int) -> nn.Sequential:
    """``in_dim -> hidden... (tanh) -> out_dim``; orthogonal init, the last layer scaled by 0.01
    so the first policy is close to uniform (discrete) or zero-mean (continuous)."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), nn.Tanh()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    for i, layer in enumerate(m for m in layers if isinstance(m, nn.Linear)):
        nn.init.orthogonal_(layer.weight, 0.01 if i == len(hidden) else math.sqrt(2))
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


class Reinforce:
    """REINFORCE (entry point ``reinforce``), built as ``Reinforce(spec, backend, config)``;
    ``training=False`` (``noeira eval``) builds it to act only, which changes nothing here."""

    Config = Config

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config | None = None, *, training: bool = True) -> None:
        cfg = config if config is not None else Config()
        self.config, self.spec, self.device = cfg, spec, backend.device
        dev, t, n = backend.device, cfg.horizon, spec.num_envs
        if any(h < 1 for h in cfg.hidden_sizes):
            raise ConfigError(f"agent.hidden_sizes: every layer needs >= 1 unit, got {list(cfg.hidden_sizes)}")
        obs_space, act_space = spec.observation_space, spec.action_space
        if not isinstance(obs_space, Box):
            raise ConfigError(f"agent reinforce: observations must be a Box; env {spec.name!r} has {obs_space!r}")
        if not isinstance(act_space, (Discrete, Box)):
            raise ConfigError(f"agent reinforce: actions must be Discrete or Box; env {spec.name!r} has {act_space!r}")
        if cfg.torch_threads > 0 and dev.type == "cpu":
            torch.set_num_threads(cfg.torch_threads)
        self.discrete = isinstance(act_space, Discrete)
        self.obs_dim = math.prod(obs_space.shape)
        act_dim = act_space.n if isinstance(act_space, Discrete) else math.prod(act_space.shape)

        # the policy: logits (Discrete) or the Gaussian's mean (Box, with a learned log std)
        self.policy = mlp(self.obs_dim, tuple(cfg.hidden_sizes), act_dim).to(dev)
        self.log_std = None if self.discrete else nn.Parameter(torch.zeros(act_dim, device=dev))
        params = [*self.policy.parameters(), *([] if self.log_std is None else [self.log_std])]
        self.params = params
        # the learning rate is a device tensor, written in place by the schedule (a recorded graph
        # reads it); torch's Adam takes one with capturable=True (CUDA) or foreach=False
        cuda = dev.type == "cuda"
        self.optimizer = torch.optim.Adam(params, lr=torch.tensor(cfg.lr, device=dev), capturable=cuda, foreach=cuda)
        if isinstance(act_space, Box):
            self.low, self.high = act_space.low.to(dev).flatten(), act_space.high.to(dev).flatten()
        self.action_start = act_space.start if isinstance(act_space, Discrete) else 0

        # an agent gets no seed: the driver seeds torch's global generator with run.seed, so the
        # agent's own generator is seeded from it (runs repeat)
        self.generator = backend.generator(int(torch.randint(0, 2**62, (1,)).item()))

        # rollout storage, allocated once and written in place
        self.steps_per_collect = t * n
        self.obs = torch.zeros(t, n, self.obs_dim, device=dev)
        self.actions = torch.zeros((t, n) if self.discrete else (t, n, act_dim),
                                   dtype=torch.int64 if self.discrete else torch.float32, device=dev)
        self.rewards = torch.zeros(t, n, device=dev)
        self.dones = torch.zeros(t, n, device=dev)
        self.returns = torch.zeros(t, n, device=dev)
        self.updates = torch.zeros((), dtype=torch.float64, device=dev)  # learn calls so far, on the device
        self.world_size = backend.world_size
        self.total_steps = 0

    def set_total_steps(self, total_steps: int) -> None:
        """The run's length in env steps (every process's together): what anneal_lr spans."""
        self.total_steps = int(total_steps)

    # -- the policy ----------------------------------------------------------------------
    def _features(self, obs: Tensor) -> Tensor:
        return obs.reshape(obs.shape[0], self.obs_dim).float()

    def _sample(self, out: Tensor) -> Tensor:
        """One action per row of the policy's output: Gumbel-max over logits (argmax of
        logits + Gumbel noise is a softmax sample), or mean + std * normal noise."""
        if self.discrete:
            u = torch.rand(out.shape, generator=self.generator, device=out.device).clamp_(min=1e-20)
            return torch.argmax(out - torch.log(-torch.log(u)), dim=-1)
        z = torch.randn(out.shape, generator=self.generator, device=out.device)
        return out + self.log_std.exp() * z

    def _log_prob_entropy(self, out: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        """``log pi(action)`` and the entropy, per row."""
        if self.discrete:
            logp = torch.log_softmax(out, dim=-1)
            return logp.gather(-1, action[..., None]).squeeze(-1), -(logp.exp() * logp).sum(-1)
        std = self.log_std.exp()
        logp = -0.5 * ((action - out) / std).square() - self.log_std - 0.5 * math.log(2 * math.pi)
        entropy = (self.log_std + 0.5 * (1 + math.log(2 * math.pi))).sum().expand(out.shape[:-1])
        return logp.sum(-1), entropy

    def _to_env(self, action: Tensor) -> Tensor:
        if self.discrete:
            return action + self.action_start
        return torch.maximum(torch.minimum(action, self.high), self.low)  # clip to the box

    # -- the Agent contract --------------------------------------------------------------
    def initial_state(self, batch: int) -> None:
        return None  # feed-forward: no policy state

    @torch.no_grad()
    def act(self, obs: Tensor, state: None = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, None]:
        """``obs [B, *obs_shape]`` -> (env actions ``[B, *act_shape]``, None)."""
        out = self.policy(self._features(obs))
        if deterministic:
            action = out.argmax(-1) if self.discrete else out
        else:
            action = self._sample(out)
        return self._to_env(action), None

    @torch.no_grad()
    def collect(self, env: BatchedEnv) -> None:
        """``horizon`` steps of every env into the rollout buffers."""
        obs = env.obs  # the env's observation buffer: where the last collect left it
        for t in range(self.config.horizon):
            x = self._features(obs)
            action = self._sample(self.policy(x))
            self.obs[t] = x
            self.actions[t] = action
            step = env.step(self._to_env(action))
            self.rewards[t] = step.reward
            self.dones[t] = (step.terminated | step.truncated).float()
            obs = step.obs

    def learn(self) -> dict[str, Tensor]:
        cfg = self.config
        lr = self.optimizer.param_groups[0]["lr"]
        if cfg.anneal_lr:  # device arithmetic, no host branch on a tensor: lr = lr0 * (1 - progress)
            progress = self.updates * (self.steps_per_collect * self.world_size) / max(self.total_steps, 1)
            lr.copy_(cfg.lr * (1.0 - progress.clamp(max=1.0)))
        self.updates += 1
        with torch.no_grad():  # G_t, backwards through the rollout: a fixed loop, no host sync
            later = torch.zeros_like(self.returns[0])
            for t in reversed(range(cfg.horizon)):
                later = self.rewards[t] + cfg.gamma * (1.0 - self.dones[t]) * later
                self.returns[t] = later
            advantage = (self.returns - self.returns.mean()) / (self.returns.std() + 1e-8)

        t, n = self.returns.shape
        out = self.policy(self.obs.view(t * n, self.obs_dim))
        log_prob, entropy = self._log_prob_entropy(out, self.actions.view(t * n, *self.actions.shape[2:]))
        policy_loss = -(log_prob * advantage.view(-1)).mean()
        loss = policy_loss - cfg.ent_coef * entropy.mean()

        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        sync_gradients(self.params)  # several processes: their mean gradient (a no-op alone)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm) if cfg.max_grad_norm > 0 \
            else torch.zeros((), device=self.device)
        self.optimizer.step()
        return {"policy_loss": policy_loss.detach(), "entropy": entropy.mean().detach(),
                "return_to_go": self.returns.mean(), "grad_norm": grad_norm.detach(), "lr": lr.detach().clone()}

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Policy (and log std), optimizer, the update count and the generator: everything to
        resume where it stopped."""
        return {"policy": self.policy.state_dict(), "log_std": self.log_std, "optimizer": self.optimizer.state_dict(),
                "updates": self.updates, "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """In place: the parameters keep their storage (a recorded graph stays valid); torch
        replaces the optimizer's state tensors, so load before recording."""
        self.policy.load_state_dict(state["policy"])
        if self.log_std is not None:
            with torch.no_grad():
                self.log_std.copy_(state["log_std"])
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.load_state_dict(state["optimizer"])
        lr.copy_(self.optimizer.param_groups[0]["lr"])
        self.optimizer.param_groups[0]["lr"] = lr  # keep the tensor the schedule writes
        self.updates.copy_(state["updates"])
        self.generator.set_state(state["generator"].cpu())

    def __repr__(self) -> str:
        return f"Reinforce(num_envs={self.spec.num_envs}, horizon={self.config.horizon}, device={self.device})"
