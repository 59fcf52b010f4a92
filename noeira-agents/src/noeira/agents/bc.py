"""Behaviour cloning: a policy regressed on a dataset's actions, ``noeira train agent=bc dataset=PATH``.

Read top to bottom: the hyperparameters (:class:`Config`), the policy, the agent. The policy
maps an observation to an action, with the dataset's normalisation inside (kept as buffers,
so it is in the checkpoint and in an exported policy)::

    x = (o - mean_o) / std_o                     (a camera frame: ConvEncoder(o), from scratch)
    Box:       a = clip(mlp(x) * std_a + mean_a, low, high)
               loss = mean ||mlp(x) - (a* - mean_a) / std_a||^2     (or |.|, loss = "l1")
    Discrete:  a = argmax mlp(x)
               loss = cross_entropy(mlp(x), a*)

Training is offline: :meth:`BC.load_dataset` (called by the driver, see
:mod:`noeira.core.dataset.offline`) reads every frame onto the device; ``collect`` does
nothing and each ``learn`` is one gradient step on ``batch_size`` frames drawn uniformly
(``run.total_steps`` counts gradient steps). Capture-safe: the draw is from a device
generator, the learning rate a device tensor annealed in place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from noeira.agents.exportable import FeedForwardPolicy
from noeira.agents.imitation import ConvEncoder, Demonstrations, Normalizer, load_demonstrations
from noeira.agents.nets import mlp
from noeira.agents.networks import activation
from noeira.agents.optim import load_optimizer_state, make_optimizer, scale_lr
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, PolicyState
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError, UserError
from noeira.core.spaces import Box, Discrete

__all__ = ["BC", "Config", "recipe"]


@attrs.frozen
class Config:
    """Behaviour-cloning hyperparameters (``agent.KEY=VALUE``)."""

    observation_feature: str = "observation.state"
    """The dataset feature the policy reads (a vector, or a camera [3, H, W]); its shape must be the env's observation's."""
    action_feature: str = "action"
    """The dataset feature holding the actions to imitate."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the MLP (after the image encoder for a camera)."""
    activation: str = "relu"
    """Hidden activation: tanh | relu | elu | gelu | silu."""
    image_channels: int = 64
    """A camera observation: channels of the image encoder's last feature map (trained from scratch)."""
    loss: str = "mse"
    """Continuous actions: mse | l1, on normalised actions (discrete actions: cross-entropy)."""
    batch_size: int = 256
    """Frames per gradient step."""
    lr: float = 1e-3
    """Adam learning rate (the start value when annealing)."""
    anneal_lr: bool = True
    """Cosine-anneal the learning rate to 0 over run.total_steps gradient steps."""
    max_grad_norm: float = 10.0
    """Clip the global gradient norm to this (0: no clipping)."""
    torch_threads: int = 0
    """CPU: torch.set_num_threads(N) when the agent is built (0: leave torch's setting)."""


class BCPolicy(nn.Module):
    """``obs [B, *obs_shape]`` -> the env action (the deterministic policy; see the module docstring)."""

    def __init__(self, spec: EnvSpec, cfg: Config, device: torch.device) -> None:
        super().__init__()
        space, obs_shape = spec.action_space, tuple(spec.observation_space.shape)
        self.image = len(obs_shape) == 3
        if self.image:
            if obs_shape[0] != 3:
                raise ConfigError(f"agent: a camera observation must be [3, H, W], got {list(obs_shape)}")
            self.encoder: nn.Module = ConvEncoder(cfg.image_channels, device)
            h, w = self.encoder.output_shape(obs_shape[1:])
            features = cfg.image_channels * h * w
        elif len(obs_shape) == 1:
            self.encoder = Normalizer(obs_shape, device)
            features = obs_shape[0]
        else:
            raise ConfigError(f"agent: bc reads a vector or a [3, H, W] camera observation, got {list(obs_shape)}")
        self.discrete = isinstance(space, Discrete)
        if self.discrete:
            outputs, self.start = space.n, space.start
        elif isinstance(space, Box) and len(space.shape) == 1:
            outputs = space.shape[0]
            self.action_norm = Normalizer((outputs,), device)
            self.register_buffer("low", space.low.to(device).float())
            self.register_buffer("high", space.high.to(device).float())
        else:
            raise ConfigError(f"agent: bc needs a vector Box or a Discrete action space, got {space!r}")
        self.net = mlp(features, cfg.hidden_sizes, outputs, activation(cfg.activation), out_gain=0.01).to(device)

    def outputs(self, obs: Tensor) -> Tensor:
        """The network's output: normalised actions ``[B, A]`` or logits ``[B, n]``."""
        return self.net(self.encoder(obs).flatten(1))

    def forward(self, obs: Tensor) -> Tensor:
        out = self.outputs(obs)
        if self.discrete:
            return out.argmax(-1) + self.start
        return torch.maximum(torch.minimum(self.action_norm.inverse(out), self.high), self.low)


class BC:
    """Behaviour cloning (see the module docstring); keeps the Agent contract, learning from a dataset."""

    Config = Config
    learns_from_dataset = True
    """The driver hands this agent ``run.dataset`` (:func:`noeira.core.dataset.offline.attach_dataset`)."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config | None = None, *, training: bool = True) -> None:
        # training=False (acting alone) changes nothing: the dataset is read by load_dataset, not here
        cfg = config or Config()
        validate(cfg)
        if cfg.torch_threads > 0 and backend.device.type == "cpu":
            torch.set_num_threads(cfg.torch_threads)
        self.config, self.spec, self.backend, self.device = cfg, spec, backend, backend.device
        self.policy = BCPolicy(spec, cfg, self.device)
        self.optimizer = make_optimizer("adam", self.policy.parameters(), cfg.lr)
        self.generator = backend.generator(int(torch.randint(0, 2**62, ())))
        self.steps_per_collect = 1
        self.total_steps = 1
        self.updates = torch.zeros((), dtype=torch.float32, device=self.device)
        """Gradient steps made, on the device (the learning-rate schedule reads it)."""
        self.data: Demonstrations | None = None
        self.metadata: dict[str, Any] = {}

    # -- the dataset ---------------------------------------------------------------------------
    def load_dataset(self, path: str) -> None:
        """Read the demonstrations onto the device and fit the normalisation to them."""
        cfg = self.config
        data = load_demonstrations(path, self.spec, cfg.observation_feature, cfg.action_feature, self.device)
        if data.frames < 1:
            raise UserError(f"dataset {path}: holds no frames")
        if not self.policy.image:
            self.policy.encoder.fit(data.obs)
        if not self.policy.discrete:
            self.policy.action_norm.fit(data.actions)
        self.data = data
        self.metadata = imitation_metadata(data, cfg.observation_feature, cfg.action_feature)

    # -- the Agent contract ------------------------------------------------------------------
    def set_total_steps(self, total_steps: int) -> None:
        self.total_steps = max(int(total_steps), 1)

    def initial_state(self, batch: int) -> PolicyState:
        return None

    @torch.no_grad()
    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, PolicyState]:
        """The imitated action for ``obs [B, ...]`` (the same whether ``deterministic`` or not)."""
        return self.policy(obs.to(self.device)), None

    def collect(self, env: BatchedEnv) -> None:
        """Nothing: the data is the dataset's."""

    def learn(self) -> dict[str, Tensor]:
        """One gradient step on ``batch_size`` frames drawn uniformly from the dataset."""
        if self.data is None:
            raise UserError("agent bc: no dataset loaded (train with dataset=PATH)")
        cfg, data = self.config, self.data
        idx = torch.randint(0, data.frames, (cfg.batch_size,), generator=self.generator, device=self.device)
        out = self.policy.outputs(data.obs[idx])
        if self.policy.discrete:
            loss = F.cross_entropy(out, data.actions[idx])
        else:
            err = out - self.policy.action_norm(data.actions[idx])
            loss = err.abs().mean() if cfg.loss == "l1" else err.square().mean()
        if cfg.anneal_lr:
            scale_lr(self.optimizer, 0.5 * (1.0 + torch.cos(math.pi * (self.updates / self.total_steps).clamp(max=1.0))))
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        sync_gradients(list(self.policy.parameters()))
        norm = (nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm) if cfg.max_grad_norm > 0
                else torch.zeros((), device=self.device))
        self.optimizer.step()
        self.updates.add_(1)
        return {"loss": loss.detach(), "grad_norm": norm.detach()}

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates.clone(), "generator": self.generator.get_state(), "metadata": self.metadata}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.updates.copy_(torch.as_tensor(state["updates"]))
        self.generator.set_state(state["generator"].cpu())
        self.metadata = dict(state.get("metadata", {}))

    def policy_module(self) -> nn.Module:
        """The policy as one module for ``noeira export`` / ``deploy``: ``obs -> action``."""
        return FeedForwardPolicy(self.policy, self.policy.forward, self.metadata)


def imitation_metadata(data: Demonstrations, observation: str, action: str) -> dict[str, Any]:
    """What an exported imitation policy says about its inputs and outputs: the dataset's
    feature names (a robot's joints) and frame rate."""
    return {"fps": data.fps,
            "observation": {"feature": observation, "names": data.observation_feature.get("names")},
            "action": {"feature": action, "names": data.action_feature.get("names")}}



def recipe(env: str, backend: str, num_envs: int | None = None) -> dict[str, Any] | None:
    """Any env: the run counts gradient steps, logs every 100 of them, and the training env (never
    stepped: the data is the dataset's) is one env; the final evaluation builds its own. On the
    CPU one torch thread: these small networks run several times slower on two threads of a
    busy 2-core machine (thread contention)."""
    out: dict[str, Any] = {"env": {"num_envs": 1}, "run": {"total_steps": 5000, "log_interval": 100}}
    if backend == "cpu":
        out["agent"] = {"torch_threads": 1}
    return out

def validate(cfg: Config) -> None:
    if cfg.loss not in ("mse", "l1"):
        raise ConfigError(f"agent.loss: expected 'mse' or 'l1', got {cfg.loss!r}")
    for key in ("batch_size", "image_channels"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"agent.{key}: must be >= 1, got {getattr(cfg, key)}")
    if not cfg.lr > 0:
        raise ConfigError(f"agent.lr: must be > 0, got {cfg.lr}")
    if cfg.max_grad_norm < 0:
        raise ConfigError(f"agent.max_grad_norm: must be >= 0, got {cfg.max_grad_norm}")
