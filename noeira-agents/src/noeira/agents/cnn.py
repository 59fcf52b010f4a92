"""Convolutional networks for pixel observations, registered under ``noeira.networks``, and
the seam that stacks one under another network (``agent.network=impala-cnn+mingru``).

``nature-cnn`` (Mnih et al. 2015): three convolutions (32 8x8 stride 4, 64 4x4 stride 2, 64 3x3
stride 1), ReLU after each. ``impala-cnn`` (Espeholt et al. 2018): three stacks (16, 32, 32
channels), each a 3x3 convolution, a 3x3 max-pool of stride 2 and two residual blocks of two 3x3
convolutions: 15 convolutions. After the convolutions: the fully connected layers
``hidden_sizes`` (``[512]`` is the Nature DQN's and CleanRL's PPO's; ``[256]`` IMPALA's) with
``activation``, then one linear layer per head.

Inputs: observations ``[B, *shape]`` whose last two dimensions are the image's height and width;
the leading ones are channels (a frame stack ``[4, 84, 84]``: 4 channels; RGB frames
``[4, 3, 84, 84]``: 12). ``uint8`` frames are scaled to [0, 1] inside the network, so the agent
stores and passes the bytes (``reads_raw``); float inputs are taken as they are. On CUDA the
convolutions run channels-last (``network_options.channels_last``) and, under the agent's bf16
precision, in bfloat16.

Options (``agent.network_options``): ``channels`` (each convolution's / stack's width), ``norm``
(``layer``: LayerNorm after every convolution and hidden layer, as PQN's networks) and
``channels_last``.

A CNN is also a torso: ``features(obs) -> [B, feature_dim]`` (the convolutions and hidden
layers, no heads), which the value-based agents put their Q heads on and :class:`Stacked`
feeds to another network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.layers import layer_init
from noeira.agents.networks import activation, network_options
from noeira.core import contracts, registry
from noeira.core.config import one_of
from noeira.core.contracts import NetworkSpec, PolicyState
from noeira.core.errors import ConfigError

__all__ = ["ImpalaCNN", "NatureCNN", "Stacked", "network_class"]


def _image_shape(shape: Sequence[int], name: str) -> tuple[int, int, int]:
    """``(channels, height, width)`` of an observation shape ``[..., H, W]``."""
    if len(shape) < 3:
        raise ConfigError(f"agent.network: {name} needs image observations [channels..., height, width], "
                          f"got shape {tuple(shape)} (choose mlp for vector observations)")
    return math.prod(shape[:-2]), shape[-2], shape[-1]


class _ChannelNorm(nn.Module):
    """LayerNorm over each position's channels (a conv feature map ``[B, C, H, W]``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _ConvNet(nn.Module):
    """What both CNNs share: input scaling, the fully connected layers, the heads and the
    Network contract. A subclass builds ``self.convs`` (``[B, C, H, W] -> [B, C', H', W']``)."""

    recurrent = False
    reads_raw = True
    """The agent passes observations as the env gives them (uint8 frames), not flattened floats."""
    name = ""

    @attrs.frozen
    class Config:
        channels: tuple[int, ...] = ()
        """Convolution widths (nature-cnn: 3 entries, default 32, 64, 64; impala-cnn: one per stack,
        default 16, 32, 32)."""
        norm: str = attrs.field(default="none", validator=one_of("none", "layer"))
        """layer: LayerNorm after every convolution and hidden layer (PQN's networks); none."""
        channels_last: str = attrs.field(default="auto", validator=one_of("auto", "true", "false"))
        """Run the convolutions in channels-last memory format: auto (on cuda), true, false."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        self.options = network_options(spec.options, self.Config)
        self.in_channels, h, w = _image_shape(spec.observation_shape, self.name)
        self.layer_norm = self.options.norm == "layer"
        self._build_convs(self.options.channels or self.default_channels)
        self._init_convs()
        with torch.no_grad():  # the flattened size, from one probe image
            self.conv_dim = int(self.convs(torch.zeros(1, self.in_channels, h, w))[0].numel())
        act = activation(spec.activation)
        layers: list[nn.Module] = []
        last = self.conv_dim
        for width in spec.hidden_sizes:
            if width < 1:
                raise ConfigError(f"agent.hidden_sizes: every layer needs >= 1 unit, got {list(spec.hidden_sizes)}")
            layers.append(layer_init(nn.Linear(last, width)))
            if self.layer_norm:
                layers.append(nn.LayerNorm(width))
            layers.append(act())
            last = width
        self.fc = nn.Sequential(*layers)
        self.feature_dim = last
        self.heads = nn.ModuleDict({
            name: layer_init(nn.Linear(last, width), spec.output_gains.get(name, 1.0))
            for name, width in spec.outputs.items()
        })
        self.to(spec.device)
        cl = self.options.channels_last
        self.channels_last = cl == "true" or (cl == "auto" and torch.device(spec.device).type == "cuda")
        if self.channels_last:
            self.convs.to(memory_format=torch.channels_last)

    default_channels: tuple[int, ...] = ()
    default_hidden: tuple[int, ...] = (512,)
    """The fully connected layers as a torso under another network (``Stacked``)."""

    def _build_convs(self, channels: tuple[int, ...]) -> None:
        raise NotImplementedError

    def _init_convs(self) -> None:
        """Orthogonal init with gain sqrt(2) (CleanRL's ``layer_init``), zero bias."""
        for m in self.convs.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.orthogonal_(m.weight, math.sqrt(2))
                nn.init.zeros_(m.bias)

    def _conv(self, c_in: int, c_out: int, kernel: int, stride: int = 1, padding: int = 0) -> list[nn.Module]:
        out: list[nn.Module] = [nn.Conv2d(c_in, c_out, kernel, stride, padding)]
        if self.layer_norm:
            out.append(_ChannelNorm(c_out))
        return out

    def initial_state(self, batch: int) -> PolicyState:
        return None

    def features(self, obs: Tensor) -> Tensor:
        """``obs [B, *shape]`` -> ``[B, feature_dim]``: the convolutions then the hidden layers."""
        x = obs.reshape(obs.shape[0], self.in_channels, *obs.shape[-2:])
        x = x.float() * (1.0 / 255.0) if x.dtype == torch.uint8 else x
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return self.fc(self.convs(x).flatten(1))

    def forward(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], PolicyState]:
        x = self.features(obs)
        return {k: self.heads[k](x) for k in (heads or self.heads)}, None

    def forward_sequence(self, obs: Tensor, state: PolicyState, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        t, b = obs.shape[:2]
        out, _ = self.forward(obs.reshape(t * b, *obs.shape[2:]), None, None, heads)
        return {k: v.view(t, b, -1) for k, v in out.items()}


class NatureCNN(_ConvNet):
    """``nature-cnn``: Mnih et al. 2015's convolutions (see the module docstring)."""

    name = "nature-cnn"
    default_channels = (32, 64, 64)

    def _build_convs(self, channels: tuple[int, ...]) -> None:
        if len(channels) != 3:
            raise ConfigError(f"agent.network_options.channels: nature-cnn has 3 convolutions, got {list(channels)}")
        c1, c2, c3 = channels
        self.convs = nn.Sequential(*self._conv(self.in_channels, c1, 8, 4), nn.ReLU(),
                                   *self._conv(c1, c2, 4, 2), nn.ReLU(),
                                   *self._conv(c2, c3, 3, 1), nn.ReLU())


class _Residual(nn.Module):
    """IMPALA's residual block: ``x + conv(relu(conv(relu(x))))``."""

    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.body(x)


class ImpalaCNN(_ConvNet):
    """``impala-cnn``: Espeholt et al. 2018's 15-layer residual network (see the module docstring)."""

    name = "impala-cnn"
    default_channels = (16, 32, 32)
    default_hidden = (256,)

    def _build_convs(self, channels: tuple[int, ...]) -> None:
        if not channels:
            raise ConfigError("agent.network_options.channels: impala-cnn needs one width per stack")
        layers: list[nn.Module] = []
        last = self.in_channels
        for c in channels:
            layers += [*self._conv(last, c, 3, 1, 1), nn.MaxPool2d(3, 2, 1)]
            for _ in range(2):
                layers.append(_Residual([nn.ReLU(), *self._conv(c, c, 3, 1, 1), nn.ReLU(), *self._conv(c, c, 3, 1, 1)]))
            last = c
        layers.append(nn.ReLU())
        self.convs = nn.Sequential(*layers)


# -- stacking a torso under another network -------------------------------------------------------

class Stacked(nn.Module):
    """``torso+top`` (``agent.network=impala-cnn+mingru``): the torso's ``features`` (its
    convolutions and ``torso_hidden_sizes``) are the top network's observation. The top network
    (``lstm``, ``mingru``, ``mlp``, any registered one) is built with the agent's ``hidden_sizes``,
    ``activation`` and heads; it carries the recurrent state. ``agent.network_options`` may hold
    ``torso`` and ``top`` tables (each part's own options) and ``torso_hidden_sizes`` (default:
    the torso's ``[512]``/``[256]``). Built by :func:`network_class`."""

    torso_cls: type = nn.Module
    top_cls: type = nn.Module
    reads_raw = True

    @attrs.frozen
    class Config:
        torso: dict[str, Any] = attrs.field(factory=dict)
        """The torso's own options (e.g. {channels = [16, 32, 32]})."""
        top: dict[str, Any] = attrs.field(factory=dict)
        """The top network's own options (e.g. {skip = "residual"} for mingru)."""
        torso_hidden_sizes: tuple[int, ...] = ()
        """The torso's fully connected layers (empty: the torso's default, 512 for nature-cnn, 256 for impala-cnn)."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        o = network_options(spec.options, self.Config)
        hidden = o.torso_hidden_sizes or getattr(self.torso_cls, "default_hidden", (512,))
        self.torso = self.torso_cls(NetworkSpec(observation_shape=spec.observation_shape, outputs={},
                                                device=spec.device, hidden_sizes=tuple(hidden), activation="relu",
                                                options=o.torso))
        self.top = self.top_cls(NetworkSpec(observation_shape=(self.torso.feature_dim,), outputs=spec.outputs,
                                            device=spec.device, hidden_sizes=spec.hidden_sizes,
                                            activation=spec.activation, output_gains=spec.output_gains,
                                            options=o.top))
        self.recurrent = bool(self.top.recurrent)
        self._heads = contracts.takes_heads(self.top.forward), contracts.takes_heads(self.top.forward_sequence)

    def initial_state(self, batch: int) -> PolicyState:
        return self.top.initial_state(batch)

    def forward(self, obs: Tensor, state: PolicyState, done: Tensor | None,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], PolicyState]:
        x = self.torso.features(obs)
        return self.top(x, state, done, heads=heads) if self._heads[0] else self.top(x, state, done)

    def forward_sequence(self, obs: Tensor, state: PolicyState, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        t, b = obs.shape[:2]
        x = self.torso.features(obs.reshape(t * b, *obs.shape[2:])).view(t, b, -1)
        if self._heads[1]:
            return self.top.forward_sequence(x, state, done, heads=heads)
        return self.top.forward_sequence(x, state, done)


def network_class(name: str) -> type:
    """The network class ``agent.network`` names: a registered network, or ``torso+top`` (a
    registered network with ``features``, e.g. a CNN, under any registered network)."""
    if "+" not in name:
        return registry.load("networks", name)
    torso_name, _, top_name = name.partition("+")
    torso, top = registry.load("networks", torso_name), registry.load("networks", top_name)
    if not contracts.is_torso(torso):
        raise ConfigError(f"agent.network: {torso_name!r} cannot be a torso (it has no features(); "
                          "nature-cnn and impala-cnn can)")
    return type(f"Stacked[{name}]", (Stacked,), {"torso_cls": torso, "top_cls": top,
                                                 "reads_raw": contracts.reads_raw(torso)})
