"""The on-policy actor-critic: observation normalizer, a policy network found by name
(``agent.network``, default ``mlp``: separate actor and critic MLPs), and the action head.

The network maps observations to two heads, ``actor`` (the action distribution's parameters,
last layer initialised with gain 0.01 so the first policy is close to uniform / zero-mean)
and ``critic`` (the value). A recurrent network also takes and returns its state; the state
is reset where an episode starts (``done``), by arithmetic. Capture-safe: no host sync,
fixed shapes.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.cnn import network_class
from noeira.agents.distributions import make_head
from noeira.agents.layers import RunningMeanStd, space_dim
from noeira.agents.precision import PRECISIONS, check_precision
from noeira.core import contracts
from noeira.core.config import at_least
from noeira.core.contracts import EnvSpec, NetworkSpec, PolicyState
from noeira.core.spaces import Encoded

__all__ = ["ActorCritic", "ActorCriticConfig", "precision_of"]


@attrs.frozen
class ActorCriticConfig:
    """The keys PPO and A2C share: their network, optimizer, precision and the observation
    and reward normalisation (each algorithm's own keys are in its ``Config``)."""

    network: str = "mlp"
    """Policy network, by name in the noeira.networks registry (noeira list shows them); torso+top stacks
    a CNN under another network (impala-cnn+mingru: the CNN's features are the recurrent network's input)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Layer widths of the network (mlp: the hidden layers of the actor and of the critic; lstm,
    mingru: an input layer then one recurrent layer per entry, all of one width)."""
    activation: str = "tanh"
    """Hidden activation: tanh | relu | elu | gelu | silu."""
    network_options: dict[str, Any] = attrs.field(factory=dict)
    """The network's own keys beyond hidden_sizes/activation (see its documentation):
    lstm: forget_bias; mingru: skip (highway | residual | none), scan (auto | parallel | sequential)."""
    log_std_init: float = 0.0
    """Continuous actions: initial log standard deviation (a learned, state-independent parameter;
    with sde: of every entry of the noise matrix)."""
    sde: bool = False
    """Continuous actions: state-dependent exploration (gSDE): the noise is the actor's features
    times a per-env random matrix kept sde_sample_freq steps, so it persists across steps."""
    sde_sample_freq: int = 8
    """With sde: steps each env keeps its noise matrix before drawing a new one."""
    norm_obs: bool = False
    """Normalise observations by a running mean/std kept on the device (saved in checkpoints)."""
    norm_reward: bool = False
    """Scale rewards by the running std of the discounted return (saved in checkpoints)."""
    reward_clip: float = 10.0
    """With norm_reward: clip scaled rewards to +- this."""
    reward_clamp: float = attrs.field(default=0.0, validator=at_least(0))
    """Clip the env's rewards to +- this before any scaling (0: off; PufferLib clamps to 1)."""
    precision: str = "fp32"
    """fp32 | bf16 | bf16-master. bf16: the networks run under bfloat16 autocast (weights,
    optimizer state, losses, advantages and returns stay float32). bf16-master (PufferLib's):
    the weights are bf16, the optimizer steps float32 master copies and recasts them after each
    step; losses, advantages and returns stay float32."""
    bf16: bool = False
    """Older spelling of precision=bf16 (true overrides precision)."""
    bootstrap: str = "auto"
    """When the critic values the observation a truncated episode reached (the bootstrap
    through a time limit, V(final_obs)): every-step: every env's final observation after each
    step (one more critic pass per step); at-end: the truncated envs' final observations and
    recurrent states are kept and valued in one pass at the end of the rollout, the same
    numbers, exact when an env truncates at most once per rollout; auto: at-end where the env
    promises that (it truncates only at a time limit of at least horizon steps, or has no time
    limit and so never truncates), else every-step."""


def precision_of(cfg: ActorCriticConfig) -> str:
    """The precision ``cfg`` asks for (``bf16 = true`` is ``precision = "bf16"``)."""
    return "bf16" if cfg.bf16 else check_precision(cfg.precision, choices=PRECISIONS)


class ActorCritic(nn.Module):
    """``obs [B, *obs_shape]`` -> action distribution and value ``[B]``, through the network
    ``cfg.network``. With ``norm_obs`` the running mean / variance of observations (buffers
    ``obs_rms.*``, so they are in ``state_dict``) normalise every input; :meth:`observe`
    updates them."""

    def __init__(self, spec: EnvSpec, cfg: ActorCriticConfig, device: torch.device | str = "cpu") -> None:
        super().__init__()
        space = spec.observation_space
        # an Encoded observation (a compact code) is decoded into the float one the network reads,
        # or, where the network reads codes (and nothing normalises the floats), by the network
        self.decode = space.decode if isinstance(space, Encoded) else None
        self.obs_shape = tuple((space.decoded if isinstance(space, Encoded) else space).shape)
        self.obs_dim = space_dim(self.obs_shape)
        self.head = make_head(spec.action_space, cfg.log_std_init, device, sde=cfg.sde,
                              features=cfg.hidden_sizes[-1], num_envs=spec.num_envs,
                              sde_sample_freq=cfg.sde_sample_freq)
        self.obs_rms = RunningMeanStd(self.obs_shape, device=device) if cfg.norm_obs else None
        net_cls = network_class(cfg.network)  # a registered network, or torso+top (noeira.agents.cnn)
        self.reads_code = (isinstance(space, Encoded) and space.decode_into is not None and not cfg.norm_obs
                           and contracts.reads_code(net_cls))
        # a network that takes the observation as the env gives it (a CNN: uint8 frames, scaled inside)
        self.reads_raw = (not isinstance(space, Encoded) and not cfg.norm_obs and contracts.reads_raw(net_cls))
        self.net = net_cls(NetworkSpec(
            observation_shape=self.obs_shape, outputs={"actor": self.head.num_outputs, "critic": 1},
            device=torch.device(device), hidden_sizes=tuple(cfg.hidden_sizes), activation=cfg.activation,
            output_gains={"actor": self.head.output_gain, "critic": 1.0}, options=dict(cfg.network_options),
            decode_into=space.decode_into if self.reads_code else None,
        ))
        self.net.to(device)
        self.recurrent = bool(self.net.recurrent)
        self._heads = contracts.takes_heads(self.net.forward)  # else the network computes every head

    def initial_state(self, batch: int) -> PolicyState:
        return self.net.initial_state(batch)

    def observe(self, obs: Tensor, update: bool = False) -> Tensor:
        """Raw ``[B, *obs_shape]`` -> the network input ``[B, obs_dim]`` (float, normalised);
        ``update`` first folds the batch into the running statistics. Encoded observations
        are decoded first, unless the network reads codes (``reads_code``: the code, as it is);
        a network that ``reads_raw`` (a CNN) takes the observation as it is."""
        if self.reads_code or self.reads_raw:
            return obs
        if self.decode is not None:
            obs = self.decode(obs)
        if self.obs_rms is not None:
            if update:
                self.obs_rms.update(obs)
            obs = self.obs_rms.normalize(obs.float())
        return obs.reshape(obs.shape[0], self.obs_dim).float()

    def _shaped(self, x: Tensor) -> Tensor:
        return x if self.reads_code or self.reads_raw else x.view(*x.shape[:-1], *self.obs_shape)

    def _forward(self, x: Tensor, state: PolicyState, done: Tensor | None,
                 heads: tuple[str, ...]) -> tuple[dict[str, Tensor], PolicyState]:
        """The network on ``x``, asked for ``heads`` where it takes the keyword."""
        return self.net(x, state, done, heads=heads) if self._heads else self.net(x, state, done)

    def value(self, x: Tensor, state: PolicyState = None) -> Tensor:
        """``x [B, obs_dim]`` (from :meth:`observe`) -> ``V(x) [B]`` (float32), continuing ``state``."""
        done = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device) if self.recurrent else None
        out, _ = self._forward(self._shaped(x), state, done, ("critic",))
        return out["critic"].squeeze(-1).float()

    def act(self, x: Tensor, state: PolicyState, done: Tensor | None,
            generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor, PolicyState]:
        """Sample: ``(action [B, *act_shape], log_prob [B], value [B], next state)``."""
        out, state = self.net(self._shaped(x), state, done)
        action, log_prob = self.head.sample(out["actor"], generator)
        return action, log_prob, out["critic"].squeeze(-1).float(), state

    def mode(self, x: Tensor, state: PolicyState, done: Tensor | None) -> tuple[Tensor, PolicyState]:
        """The most likely action and the next state."""
        out, state = self._forward(self._shaped(x), state, done, ("actor",))
        return self.head.mode(out["actor"]), state

    def evaluate(self, x: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Stored actions under the current weights (feed-forward networks): ``x [B, obs_dim]``
        -> ``(log_prob [B], entropy [B], value [B])``."""
        out, _ = self.net(self._shaped(x), None, None)
        log_prob, entropy = self.head.log_prob_entropy(out["actor"], action)
        return log_prob, entropy, out["critic"].squeeze(-1).float()

    def evaluate_sequence(self, x: Tensor, action: Tensor, state: PolicyState,
                          done: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Whole segments: ``x [T, B, obs_dim]``, ``action [T, B, ...]``, the state before the first
        step and the episode starts ``done [T, B]`` -> ``(log_prob, entropy, value)`` each ``[T, B]``,
        replayed as the rollout ran (gradients through the state, cut at episode starts)."""
        t, b = x.shape[:2]
        out = self.net.forward_sequence(self._shaped(x), state, done)
        flat = lambda y: y.reshape(t * b, *y.shape[2:])  # noqa: E731
        log_prob, entropy = self.head.log_prob_entropy(flat(out["actor"]), flat(action))
        return log_prob.view(t, b), entropy.view(t, b), out["critic"].squeeze(-1).float()
