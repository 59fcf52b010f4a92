"""What DQN, SAC, TD3 and DDPG share: the config keys, the collect/learn loop around a
device replay buffer, target-network averaging, twin critics as one batched network.

One iteration of the driver is ``collect(env); learn()``:

- ``collect`` reads ``env.obs``, picks an action (``explore``: the algorithm's exploration,
  or a uniform random action while fewer than ``learning_starts`` env steps were taken),
  steps all ``num_envs`` envs once and writes the ``num_envs`` transitions to the buffer.
- ``learn`` draws ``updates_per_step`` batches at once and runs one gradient update on
  each. The update-to-data ratio is ``updates_per_step / num_envs`` gradient updates per
  transition collected: ``updates_per_step = num_envs`` is one update per transition.

Both are capture-safe, the same op sequence on every call: the warm-up is decided on the
device. ``env_steps`` is a device counter; ``collect`` chooses random or policy actions
with ``torch.where`` on it, and ``learn`` always runs its updates but multiplies every
learning rate by the device flag ``env_steps >= learning_starts`` (and by the optional
linear annealing factor), so no network moves before learning starts, and the targets,
which start equal to the online networks, stay put too. The price: the warm-up updates
are computed and thrown away (Adam's moments see their gradients, which only warms them
up). Anything done every k-th update (DQN's target updates, TD3's delayed actor) counts
updates since learning started on the device (``num_updates``), so it holds across calls.

Optimizers come from :mod:`noeira.agents.optim` (``agent.optimizer``; Adam by default,
fused, ``capturable`` on CUDA), each param group's learning rate a device tensor that
``learn`` rescales in place. ``agent.precision=bf16`` runs the updates' forward passes
under bfloat16 autocast (:mod:`noeira.agents.precision`); weights, optimizer state, TD
targets and losses stay float32, and acting (``collect``, ``act``) stays float32.

With ``norm_obs`` every network reads ``(obs - mean) / std`` (clipped to ±10), the running
statistics of every observation collected (:class:`~noeira.agents.nets.RunningMeanStd`, in
``nets["obs_rms"]``, so checkpoints keep them): ``collect`` folds each batch in before acting,
the buffer keeps raw observations and ``learn`` normalises sampled ones with the statistics of
the moment, as FastTD3 (Seo et al. 2025) does.

Policies are feed-forward: ``initial_state`` is None and ``act`` passes no state on.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.exportable import FeedForwardPolicy
from noeira.agents.nets import RunningMeanStd, space_dim
from noeira.agents.optim import load_optimizer_state, make_optimizer, scale_lr
from noeira.agents.precision import autocast, check_precision
from noeira.agents.replay import Batch, ReplayBuffer
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, PolicyState
from noeira.core.errors import ConfigError
from noeira.core.rng import restore_generator
from noeira.core.spaces import Box, Discrete, Encoded

__all__ = [
    "EnsembleLinear",
    "OffPolicyAgent",
    "OffPolicyConfig",
    "QEnsemble",
    "ensemble_mlp",
    "frozen",
    "online_and_target",
    "pick_recipe",
    "relu_mlp",
]

log = logging.getLogger("noeira")
M = TypeVar("M", bound=nn.Module)


@attrs.frozen
class OffPolicyConfig:
    """Keys every off-policy agent takes."""

    buffer_size: int = 1_000_000
    """Replay buffer capacity in transitions (all envs together); the oldest are overwritten."""
    batch_size: int = 256
    """Transitions per gradient update."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Target-network averaging rate: target <- target + tau * (online - target)."""
    learning_starts: int = 5_000
    """Env steps (all envs together) of uniform random actions before updates begin."""
    updates_per_step: int = 1
    """Gradient updates per learn() call, i.e. per env step of all num_envs envs;
    updates_per_step = num_envs is one update per transition collected."""
    n_step: int = 1
    """Steps of the n-step return (1: the one-step TD target)."""
    lr_anneal_steps: int = 0
    """Env steps over which every learning rate falls linearly to ``lr_end_fraction`` of its
    value, then stays there (0: constant learning rates)."""
    lr_end_fraction: float = 0.0
    """Learning rates at the end of ``lr_anneal_steps``, as a fraction of their initial value."""
    hidden: tuple[int, ...] = (256, 256)
    """Widths of the hidden layers of every network."""
    checkpoint_buffer: bool = True
    """Save the replay buffer in checkpoints (exact resume; large for big buffers)."""
    optimizer: str = "adam"
    """Optimizer of every network: adam (the table in noeira.agents.optim)."""
    precision: str = "fp32"
    """fp32 | bf16: the updates' forward passes under bfloat16 autocast; weights, optimizer state and
    losses stay float32."""
    norm_obs: bool = False
    """Normalise observations by their running mean and variance (updated on the device by every
    collected batch; stored raw in the buffer, normalised by the current statistics when read)."""


RecipeTables = Mapping[str, Mapping[str, Mapping[str, Any]]]
"""An agent's recipes: env name -> backend name -> recipe, ``"*"`` standing for any other."""

UNTESTED = ("untested: no recipe of this agent was verified on this env; the agent's defaults apply "
            "and may not solve it")
"""The note of an agent's ``"*"`` recipe (any other env: MuJoCo, ``gym:`` envs): a run starts
with it as one warning line, as for a pair with no recipe at all."""


def pick_recipe(tables: RecipeTables, env: str, backend: str) -> dict[str, Any]:
    """``tables[env][backend]`` (``"*"`` for any other env / backend), as a fresh copy the caller may change."""
    by_backend = tables.get(env, tables["*"])
    return copy.deepcopy(dict(by_backend.get(backend, by_backend["*"])))


# -- networks ----------------------------------------------------------------------------------

def relu_mlp(in_dim: int, hidden: Sequence[int], out_dim: int) -> nn.Sequential:
    """``in_dim -> hidden... -> out_dim``, ReLU between layers, torch's default init."""
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden:
        layers += [nn.Linear(last, h), nn.ReLU()]
        last = h
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """``k`` independent linear layers applied as one batched matmul: ``[k, B, in] -> [k, B, out]``.

    Twin critics become one network with half the kernel launches. Each member is
    initialized like ``nn.Linear`` (uniform in ``±1/sqrt(in)``)."""

    def __init__(self, k: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(k, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(k, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: Tensor) -> Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


def ensemble_mlp(k: int, in_dim: int, hidden: Sequence[int], out_dim: int) -> nn.Sequential:
    """``k`` ReLU MLPs evaluated together: ``[k, B, in_dim] -> [k, B, out_dim]``."""
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden:
        layers += [EnsembleLinear(k, last, h), nn.ReLU()]
        last = h
    layers.append(EnsembleLinear(k, last, out_dim))
    return nn.Sequential(*layers)


class QEnsemble(nn.Module):
    """``k`` critics Q(s, a) for continuous actions: ``obs [B, o], action [B, a] -> [k, B]``."""

    def __init__(self, k: int, obs_dim: int, act_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.k = k
        self.net = ensemble_mlp(k, obs_dim + act_dim, hidden, 1)

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        x = torch.cat([obs.flatten(1).float(), action], -1)
        return self.net(x.unsqueeze(0).expand(self.k, -1, -1)).squeeze(-1)


def online_and_target(cls: Callable[..., M], *args: Any, device: torch.device) -> tuple[M, M]:
    """``cls(*args)`` twice on ``device``: the online network and its target, which starts as a
    copy of the online weights and takes no gradients (it moves by :meth:`OffPolicyAgent.polyak`).
    Both are constructed, so the random init draws are those of two networks."""
    online, target = cls(*args).to(device), cls(*args).to(device)
    target.load_state_dict(online.state_dict())
    target.requires_grad_(False)
    return online, target


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """No parameter gradients for ``module`` inside (a host flag: the actor loss backpropagates
    through the critic to the action, not into the critic's weights)."""
    params = list(module.parameters())
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


# -- the agent skeleton -------------------------------------------------------------------------

class OffPolicyAgent:
    """Base of the off-policy agents. A subclass builds its networks in ``__init__`` (after
    ``super().__init__``), registers them in ``self.nets`` and its optimizers with
    :meth:`add_optimizer`, and writes :meth:`explore`, :meth:`update` and :meth:`policy_action`."""

    Config = OffPolicyConfig
    discrete: bool = False
    """Whether the agent takes a ``Discrete`` action space (else a ``Box``)."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: OffPolicyConfig, *, training: bool = True) -> None:
        cfg = config
        for key, value in (("batch_size", cfg.batch_size), ("updates_per_step", cfg.updates_per_step),
                           ("n_step", cfg.n_step), ("buffer_size", cfg.buffer_size)):
            if value < 1:
                raise ConfigError(f"agent.{key}: must be >= 1, got {value}")
        if cfg.learning_starts < 0:
            raise ConfigError(f"agent.learning_starts: must be >= 0, got {cfg.learning_starts}")
        check_precision(cfg.precision)  # agent.optimizer is checked by make_optimizer
        self.config, self.spec, self.backend = cfg, spec, backend
        self.device = torch.device(backend.device)
        self.num_envs = spec.num_envs
        self.steps_per_collect = spec.num_envs
        space = spec.action_space
        name = type(self).__name__
        if isinstance(spec.observation_space, Encoded):  # its replay buffer stores float observations
            raise ConfigError(f"agent: {name} needs float observations; env {spec.name!r} gives encoded ones "
                              f"({spec.observation_space!r}): choose the env's float observation")
        self.obs_dim = space_dim(spec.observation_space.shape)
        if self.discrete:
            if not isinstance(space, Discrete):
                raise ConfigError(f"agent: {name} needs a Discrete action space, env {spec.name!r} has {space!r}")
            self.num_actions, self.action_start = space.n, space.start
            action_shape, action_dtype = (), torch.int64
        else:
            if not isinstance(space, Box) or len(space.shape) != 1:
                raise ConfigError(f"agent: {name} needs a 1-d Box action space, env {spec.name!r} has {space!r}")
            self.act_dim = space.shape[0]
            low, high = space.low.to(self.device, torch.float32), space.high.to(self.device, torch.float32)
            finite = torch.isfinite(low) & torch.isfinite(high)
            # the policy acts in [-1, 1]; env action = scale * a + bias (unbounded sides: identity)
            self.action_scale = torch.where(finite, (high - low) / 2, torch.ones_like(low))
            self.action_bias = torch.where(finite, (high + low) / 2, torch.zeros_like(low))
            action_shape, action_dtype = (self.act_dim,), torch.float32
        # a device generator for exploration and sampling, seeded from torch's (seeded by the driver)
        self.generator = backend.generator(int(torch.randint(0, 2**62, ())))
        self.env_steps = torch.zeros((), dtype=torch.int64, device=self.device)
        """Env steps collected (all envs together), on the device."""
        self.num_updates = torch.zeros((), dtype=torch.int64, device=self.device)
        """Gradient updates made since learning started, on the device."""
        self.rb = ReplayBuffer(  # acting alone (training=False) stores nothing: one row
            cfg.buffer_size if training else self.num_envs, self.num_envs, spec.observation_space.shape,
            spec.observation_space.dtype, action_shape, action_dtype, self.device, self.generator,
        )
        self.nets = nn.ModuleDict()
        self.obs_rms: RunningMeanStd | None = None
        """Running observation statistics (``norm_obs``), or None."""
        if cfg.norm_obs:
            self.obs_rms = RunningMeanStd(spec.observation_space.shape, device=self.device)
            self.nets["obs_rms"] = self.obs_rms
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.learning = torch.zeros((), dtype=torch.float32, device=self.device)
        """1.0 once ``learning_starts`` env steps were collected, else 0.0 (device flag)."""

    # -- what a subclass writes -------------------------------------------------------------
    def explore(self, obs: Tensor) -> Tensor:
        """The exploration action ``[N, *action_shape]`` in buffer form (normalized to
        [-1, 1] for a Box, the index for Discrete)."""
        raise NotImplementedError

    def update(self, batch: Batch, j: int) -> dict[str, Tensor]:
        """Gradient update ``j`` of this learn() call on ``batch``; returns 0-d metrics. Its
        forward passes run under :meth:`autocast`; losses are computed in float32."""
        raise NotImplementedError

    def policy_action(self, obs: Tensor, deterministic: bool) -> Tensor:
        """The action :meth:`act` takes for ``obs`` (on the device), in buffer form."""
        raise NotImplementedError

    def after_step(self, done: Tensor) -> None:
        """Called after each env step with ``done`` ``[N]`` (e.g. to reset OU noise)."""

    def stored_reward(self, reward: Tensor) -> Tensor:
        """The reward written to the buffer (DQN's Atari recipes clip it)."""
        return reward

    def draw(self) -> Batch:
        """The ``updates_per_step`` batches of one learn() ``[U, B, ...]``: uniform from the buffer
        (an agent with prioritized replay draws its own)."""
        cfg = self.config
        return self.rb.sample(cfg.batch_size, cfg.n_step, cfg.gamma, num_batches=cfg.updates_per_step)

    # -- helpers -----------------------------------------------------------------------------
    def add_optimizer(self, name: str, params: Any, lr: float, **options: Any) -> torch.optim.Optimizer:
        """``agent.optimizer`` over ``params`` (or param groups with their own ``lr``), each group's
        learning rate a device tensor: zero until :meth:`learn` scales it (warm-up, annealing)."""
        opt = make_optimizer(self.config.optimizer, params, lr, **options)
        scale_lr(opt, 0.0)
        self.optimizers[name] = opt
        return opt

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The context of the updates' forward passes (``agent.precision``)."""
        return autocast(self.config.precision, self.device)

    def to_env(self, action: Tensor) -> Tensor:
        """Buffer-form action -> the env's action."""
        if self.discrete:
            return action + self.action_start
        return action * self.action_scale + self.action_bias

    def random_action(self) -> Tensor:
        """Uniform random actions ``[N, *action_shape]`` in buffer form."""
        n = self.num_envs
        if self.discrete:
            return torch.randint(0, self.num_actions, (n,), generator=self.generator, device=self.device)
        return torch.rand((n, self.act_dim), generator=self.generator, device=self.device) * 2 - 1

    def normalize(self, obs: Tensor) -> Tensor:
        """``obs`` as the networks read it: normalised (``norm_obs``), or unchanged."""
        return obs if self.obs_rms is None else self.obs_rms.normalize(obs.float())

    def warming_up(self) -> Tensor:
        """Device bool: fewer than ``learning_starts`` env steps collected."""
        return self.env_steps < self.config.learning_starts

    @torch.no_grad()
    def polyak(self, target: nn.Module, online: nn.Module, weight: float | Tensor) -> None:
        """``target <- target + weight * (online - target)`` in place, one ``lerp`` per tensor.

        ``weight`` is a float, or a 0-d device tensor for a rate decided on the device (``tau * due``):
        that one goes in as a tensor operand, never read on the host, and gives exactly the numbers
        of the same float weight (lerp's own formula; at w = 0 the target is unchanged). (No mask is
        needed for the warm-up: the online networks do not move before learning starts, and the
        targets start equal to them.)"""
        t = [p for p in target.parameters()] + [b for b in target.buffers() if b.is_floating_point()]
        o = [p for p in online.parameters()] + [b for b in online.buffers() if b.is_floating_point()]
        if isinstance(weight, Tensor):
            torch._foreach_lerp_(t, o, [weight] * len(t))
        else:
            torch._foreach_lerp_(t, o, weight)

    # -- the contract ------------------------------------------------------------------------
    def initial_state(self, batch: int) -> None:
        """None: the policies are feed-forward."""
        return None

    @torch.no_grad()
    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, None]:
        """``obs [B, *obs_shape]`` -> ``(action [B, *act_shape] for the env, None)``; a feed-forward
        policy has no state, so ``state`` and ``done`` change nothing."""
        return self.to_env(self.policy_action(self.normalize(obs.to(self.device)), deterministic)), None

    def policy_module(self) -> nn.Module:
        """The deterministic policy as one module, for ``noeira export``: ``obs -> env action``."""
        return FeedForwardPolicy(self.nets, lambda obs: self.to_env(self.policy_action(obs, True)))

    def set_total_steps(self, total_steps: int) -> None:
        """Nothing to do: the schedules are fixed by the config in env steps (``lr_anneal_steps``,
        0 for constant learning rates; DQN's ``exploration_steps``), not by the run's length."""

    @torch.no_grad()
    def collect(self, env: BatchedEnv) -> None:
        """Step all envs once (random actions while warming up) and store the transitions."""
        obs = env.obs
        if self.obs_rms is not None:
            self.obs_rms.update(obs)
        action = torch.where(self._expand(self.warming_up()), self.random_action(), self.explore(self.normalize(obs)))
        self.rb.add_obs_action(obs, action)
        result = env.step(self.to_env(action))
        self.rb.add_result(self.stored_reward(result.reward), result.terminated, result.truncated, result.final_obs)
        self.after_step(result.terminated | result.truncated)
        self.env_steps.add_(self.num_envs)

    def _expand(self, flag: Tensor) -> Tensor:
        return flag if self.discrete else flag.view(1, 1)

    def learn(self) -> dict[str, Tensor]:
        """``updates_per_step`` gradient updates on batches drawn at once from the buffer."""
        cfg = self.config
        self.learning.copy_(self.env_steps >= cfg.learning_starts)
        scale = self.learning
        if cfg.lr_anneal_steps > 0:
            frac = (self.env_steps.float() / cfg.lr_anneal_steps).clamp(max=1.0)
            scale = scale * (1.0 - (1.0 - cfg.lr_end_fraction) * frac)
        for opt in self.optimizers.values():
            scale_lr(opt, scale)
        batches = self.draw()
        if self.obs_rms is not None:
            batches = attrs.evolve(batches, obs=self.normalize(batches.obs), next_obs=self.normalize(batches.next_obs))
        totals: dict[str, Tensor] = {}
        counts: dict[str, int] = {}  # a metric is averaged over the updates that report it
        for j in range(cfg.updates_per_step):
            for k, v in self.update(batches[j], j).items():
                totals[k] = totals[k] + v.detach() if k in totals else v.detach()
                counts[k] = counts.get(k, 0) + 1
        self.num_updates.add_(self.learning.long() * cfg.updates_per_step)
        return {k: v / counts[k] for k, v in totals.items()}

    # -- checkpoints -------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Tensor]:
        """Device tensors besides the networks that a checkpoint keeps (subclasses add)."""
        return {"env_steps": self.env_steps, "num_updates": self.num_updates}

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "nets": self.nets.state_dict(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "extra": {k: v.clone() for k, v in self.extra_state().items()},
            "generator": self.generator.get_state(),
        }
        if self.config.checkpoint_buffer:
            state["replay"] = {k: v.clone() for k, v in self.rb.state_dict().items()}
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore in place (tensors keep their addresses, so recorded graphs stay valid)."""
        self.nets.load_state_dict(state["nets"])
        for k, opt in self.optimizers.items():
            load_optimizer_state(opt, state["optimizers"][k])  # keeps the lr tensors learn() writes
        for k, v in self.extra_state().items():
            if k in state["extra"] and state["extra"][k].shape == v.shape:  # per-env state needs the same num_envs
                v.copy_(state["extra"][k])
        restore_generator(self.generator, state["generator"], "agent generator")
        if "replay" in state and not self.rb.load_state_dict(state["replay"]):
            log.info("checkpoint replay buffer not restored (its layout differs: other num_envs or buffer_size)")

