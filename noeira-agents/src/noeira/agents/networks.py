"""Policy networks registered under ``noeira.networks`` (``agent.network=NAME``).

``mlp`` (the default): one multilayer perceptron per head on the flattened observation
(separate actor and critic, no shared trunk), orthogonal init with each head's gain: "The
37 implementation details of PPO". Feed-forward, so ``state`` and ``done`` pass through.

``lstm`` and ``mingru``: recurrent, one shared trunk for every head (PufferLib's layout):
``obs -> Linear -> activation -> recurrent layers -> one Linear per head``. ``hidden_sizes``
gives the recurrent layers, all of one width ``H``: ``[256, 256, 256]`` is an input Linear to
256 then three recurrent layers of 256 (craftax.cu's policy). The state is one tensor
``[rows, B, H]`` (float32 whatever the precision), zeroed where ``done`` marks an episode start
by a multiply (no branch: it records in a CUDA graph, and the gradient stops there).
``forward_sequence`` equals step-by-step ``forward``: the input projections of a whole segment
are one matmul, only the recurrence runs step by step (or, for ``mingru``, as a parallel scan or
one fused Triton kernel).
Their own keys (``agent.network_options``) are each class's attrs ``Config``.

A network is built as ``cls(spec: NetworkSpec)`` and keeps the contract
:class:`noeira.core.contracts.Network`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from noeira.agents import mingru_scan
from noeira.agents.layers import AlignedInput, layer_init, mlp, space_dim
from noeira.core.config import one_of, structure
from noeira.core.contracts import NetworkSpec, PolicyState
from noeira.core.errors import ConfigError

__all__ = ["ACTIVATIONS", "LSTM", "MLP", "MinGRU", "activation", "causal_conv", "check_widths", "linear_scan",
           "reset_where"]

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU,
                                           "silu": nn.SiLU}


def activation(name: str) -> type[nn.Module]:
    """The activation class for ``agent.activation`` (a :class:`ConfigError` naming the known ones)."""
    if name not in ACTIVATIONS:
        raise ConfigError(f"agent.activation: unknown {name!r} (known: {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


def check_widths(hidden: Sequence[int]) -> None:
    if any(h < 1 for h in hidden):
        raise ConfigError(f"agent.hidden_sizes: every layer needs >= 1 unit, got {list(hidden)}")


class MLP(nn.Module):
    """``obs [B, *shape]`` -> one MLP per head ``[B, width]``; ``hidden_sizes`` are every MLP's
    hidden widths. Takes no options."""

    recurrent = False

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        if spec.options:
            raise ConfigError(f"agent.network_options: the mlp network takes none, got {', '.join(spec.options)}")
        check_widths(spec.hidden_sizes)
        act = activation(spec.activation)
        in_dim = space_dim(spec.observation_shape)
        self.heads = nn.ModuleDict({
            name: mlp(in_dim, spec.hidden_sizes, width, act, out_gain=spec.output_gains.get(name, 1.0)).to(spec.device)
            for name, width in spec.outputs.items()
        })

    def initial_state(self, batch: int) -> PolicyState:
        return None

    def forward(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], PolicyState]:
        x = obs.flatten(1)
        return {k: self.heads[k](x) for k in (heads or self.heads)}, None

    def forward_sequence(self, obs: Tensor, state: PolicyState, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        t, b = obs.shape[:2]
        out, _ = self.forward(obs.reshape(t * b, *obs.shape[2:]), None, None, heads)
        return {k: v.view(t, b, -1) for k, v in out.items()}


def reset_where(state: Tensor, done: Tensor) -> Tensor:
    """``state [L, B, H]`` with the rows of envs where ``done [B]`` zeroed (branch-free: a
    multiply, so it records in a CUDA graph, and the gradient stops there)."""
    return state * (~done).to(state.dtype).view(1, -1, *([1] * (state.dim() - 2)))


def network_options(options: Mapping[str, Any], cls: type) -> Any:
    """``agent.network_options`` structured into the network's ``Config`` (errors at
    ``agent.network_options.KEY``, naming the known keys)."""
    return structure(dict(options), cls, "agent.network_options")


class _RecurrentTrunk(nn.Module):
    """What ``lstm`` and ``mingru`` share: the input layer, the heads, the state's shape and the
    ``forward``/``forward_sequence`` plumbing. A subclass sets ``name``, ``state_rows`` (state
    rows per layer) and writes ``_layer_step`` and ``_layer_sequence``. Reads an ``Encoded``
    observation's codes (``reads_code``): its input layer decodes them into its padded input."""

    recurrent = True
    reads_code = True
    name = ""
    state_rows = 1

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        widths = tuple(spec.hidden_sizes)
        if not widths or len(set(widths)) != 1 or widths[0] < 1:
            raise ConfigError(f"agent.hidden_sizes: the {self.name} network needs one or more recurrent layers of one "
                              f"width (e.g. [256, 256, 256]), got {list(widths)}")
        self.layers, self.hidden = len(widths), widths[0]
        self.encoder = nn.Sequential(AlignedInput(space_dim(spec.observation_shape), self.hidden,
                                                  decode_into=spec.decode_into),
                                     activation(spec.activation)())
        self.heads = nn.ModuleDict({
            name: layer_init(nn.Linear(self.hidden, width), spec.output_gains.get(name, 1.0))
            for name, width in spec.outputs.items()
        })

    def initial_state(self, batch: int) -> Tensor:
        return torch.zeros(self.state_rows * self.layers, batch, self.hidden, device=self.heads_device())

    def heads_device(self) -> torch.device:
        return next(iter(self.heads.values())).weight.device

    def _split(self, state: Tensor) -> list[Tensor]:
        """``[rows * L, B, H]`` -> per layer its ``[rows, B, H]`` slice."""
        return [state[r * self.layers + i] for i in range(self.layers) for r in range(self.state_rows)]

    def _join(self, per_layer: list[Tensor]) -> Tensor:
        rows = [per_layer[i * self.state_rows + r] for r in range(self.state_rows) for i in range(self.layers)]
        return torch.stack(rows).float()

    def forward(self, obs: Tensor, state: Tensor, done: Tensor,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], Tensor]:
        state = reset_where(state, done)
        x = self.encoder(obs.flatten(1))
        parts, new = self._split(state), []
        for i in range(self.layers):
            x, layer_state = self._layer_step(i, x, parts[i * self.state_rows:(i + 1) * self.state_rows])
            new += layer_state
        return {k: self.heads[k](x) for k in (heads or self.heads)}, self._join(new)

    def forward_sequence(self, obs: Tensor, state: Tensor, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        t, b = obs.shape[:2]
        keep = (~done).to(torch.float32).unsqueeze(-1)  # [T, B, 1]: 0 where the state resets
        x = self.encoder(obs.reshape(t * b, -1)).view(t, b, -1)
        parts = self._split(state)
        for i in range(self.layers):
            x = self._layer_sequence(i, x, parts[i * self.state_rows:(i + 1) * self.state_rows], keep)
        return {k: self.heads[k](x) for k in (heads or self.heads)}

    def _layer_step(self, i: int, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        raise NotImplementedError

    def _layer_sequence(self, i: int, x: Tensor, state: list[Tensor], keep: Tensor) -> Tensor:
        raise NotImplementedError


def decay_logits(h: int, max_timescale: float) -> Tensor:
    """``logit(1 / tau)`` for ``h`` units, ``log tau ~ U(0, log max_timescale)``: the bias at which
    a gate lets ``1 / tau`` of the new input in (so ``1 - 1/tau`` of the state stays) each step,
    spreading the units' memory over time constants of 1 to ``max_timescale`` steps."""
    tau = torch.empty(h).uniform_(0, math.log(max_timescale)).exp().clamp(min=1.0 + 1e-3)
    return -torch.log(tau - 1)


class LSTM(_RecurrentTrunk):
    """``lstm``: ``obs -> Linear(obs, H) -> activation -> len(hidden_sizes) LSTM layers of width H
    -> heads`` (all hidden_sizes equal). State ``[2 * layers, B, H]``: every layer's ``h``, then
    every layer's ``c``. Training replays a segment layer by layer: the input projection of all
    ``T`` steps is one matmul, the recurrence ``T`` small steps."""

    name = "lstm"
    state_rows = 2

    @attrs.frozen
    class Config:
        forget_bias: float = 1.0
        """Initial bias of the forget gate (1: remember by default, Jozefowicz et al. 2015), where
        ``max_timescale`` is 0."""
        max_timescale: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
        """Chrono initialisation (Tallec & Ollivier 2018) when > 1: each unit's forget gate starts
        at f = 1 - 1/tau, tau log-uniform in [1, max_timescale] (as MinGRU's update gate), and its
        input gate at 1 - f, so some units' cells start holding a cue for up to max_timescale
        steps (``forget_bias`` 1 keeps 0.73 of a cell a step). 0: ``forget_bias`` for every unit."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__(spec)
        self.options = network_options(spec.options, self.Config)
        h = self.hidden
        self.w_ih = nn.ModuleList(nn.Linear(h, 4 * h) for _ in range(self.layers))
        self.w_hh = nn.ModuleList(nn.Linear(h, 4 * h, bias=False) for _ in range(self.layers))
        with torch.no_grad():
            for lin_i, lin_h in zip(self.w_ih, self.w_hh, strict=True):
                for w in (lin_i.weight, lin_h.weight):
                    for chunk in w.view(4, h, h):
                        nn.init.orthogonal_(chunk)
                lin_i.bias.zero_()  # gate order i, f, g, o
                if self.options.max_timescale > 1:
                    forget = -decay_logits(h, self.options.max_timescale)  # logit(1 - 1/tau)
                    lin_i.bias[h:2 * h], lin_i.bias[:h] = forget, -forget
                else:
                    lin_i.bias[h:2 * h] = self.options.forget_bias
        self.to(spec.device)

    def _cell(self, i: int, gx: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """One step of layer ``i`` from its input projection ``gx [B, 4H]``."""
        gi, gf, gg, go = (gx + self.w_hh[i](h)).chunk(4, -1)
        c = torch.sigmoid(gf) * c + torch.sigmoid(gi) * torch.tanh(gg)
        h = torch.sigmoid(go) * torch.tanh(c)
        return h, c

    def _layer_step(self, i: int, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        h, c = self._cell(i, self.w_ih[i](x), state[0], state[1])
        return h, [h, c]

    def _layer_sequence(self, i: int, x: Tensor, state: list[Tensor], keep: Tensor) -> Tensor:
        gx = self.w_ih[i](x)  # [T, B, 4H], one matmul for the segment
        h, c = state
        out = []
        for t in range(x.shape[0]):
            h, c = self._cell(i, gx[t], h * keep[t], c * keep[t])
            out.append(h)
        return torch.stack(out)


def causal_conv(x: Tensor, past: Tensor, keep: Tensor, w: Tensor) -> Tensor:
    """A causal depthwise convolution over a segment in torch ops (MinGRU's ``conv``; the CPU's
    form and the reference of :func:`noeira.agents.mingru_scan.conv_sequence`, same arguments):
    ``u_t = sum_j w_j x_{t-j}``, ``x [T, B, H]``, ``past [W - 1, B, H]`` the inputs before ``t = 0``
    (most recent first), ``keep [T, B]`` 0 where an episode starts (no tap reaches across it),
    ``w [W, H]``. Returns ``u`` in ``x``'s dtype."""
    t, n = x.shape[0], past.shape[0]
    xs = torch.cat([past.flip(0), x.float()])  # oldest first: [W - 1 + T, B, H]
    keep = keep.unsqueeze(-1)
    kpad = torch.cat([keep.new_ones((n, *keep.shape[1:])), keep])
    u = w[0] * x.float()
    valid = torch.ones_like(keep)
    for j in range(1, n + 1):
        valid = valid * kpad[n - j + 1:n - j + 1 + t]  # no episode start in (t - j, t]
        u = u + w[j] * xs[n - j:n - j + t] * valid
    return u.to(x.dtype)


def linear_scan(a: Tensor, b: Tensor, h0: Tensor) -> Tensor:
    """``h_t = a_t * h_{t-1} + b_t`` over ``[T, ...]`` from ``h0``, all ``t`` at once: a
    Hillis-Steele scan of the affine maps ``h -> a h + b`` in ``ceil(log2 T)`` rounds of
    elementwise ops (composing ``(a1, b1)`` then ``(a2, b2)`` gives ``(a2 a1, a2 b1 + b2)``).

    Written in linear space rather than the log space of Feng et al. (Heinsen's scan): an
    episode reset is ``a_t = 0`` exactly, which the log-space scan cannot take without a
    segmented logcumsumexp (its ``cumsum(log a)`` hits ``-inf``), and nothing here divides by a
    running product of ``a``, the underflow the log space is for. Exact up to the order of
    float additions; gradients flow through ``a`` and ``b`` by autograd."""
    t = a.shape[0]
    pad = (0, 0) * (a.dim() - 1)
    bv = torch.cat([(a[0] * h0 + b[0]).unsqueeze(0), b[1:]])
    av = a
    shift = 1
    while shift < t:
        bv = torch.addcmul(bv, av, F.pad(bv[:-shift], (*pad, shift, 0)))
        if shift * 2 < t:
            av = av * F.pad(av[:-shift], (*pad, shift, 0), value=1.0)
        shift *= 2
    return bv


class MinGRU(_RecurrentTrunk):
    """``mingru`` (Feng et al. 2024, "Were RNNs All We Needed?"): ``obs -> Linear(obs, H) ->
    activation -> len(hidden_sizes) MinGRU layers of width H -> heads`` (all hidden_sizes equal;
    ``[256, 256, 256]`` is craftax.cu's policy). State ``[layers, B, H]``. A layer reads its input
    ``x`` only (not its state) for its gates, so one matmul serves a whole segment::

        z_t = sigmoid(W_z x_t),  h~_t = W_h x_t,  h_t = (1 - z_t) * h_{t-1} + z_t * h~_t
        y_t = x_t + p_t * (h_t - x_t),  p_t = sigmoid(W_p x_t)      (skip = "highway")

    and the recurrence is an affine scan (:func:`linear_scan`), with ``a_t = (1 - z_t) * keep_t``
    at resets. ``skip``: ``highway`` (a learned gate between the layer's input and its state, as
    PufferLib's MinGRU stack), ``residual`` (``y = x + h``) or ``none`` (``y = h``)."""

    name = "mingru"

    @attrs.frozen
    class Config:
        skip: str = attrs.field(default="highway", validator=one_of("highway", "residual", "none"))
        """How a layer's output mixes its input and its state: highway | residual | none."""
        scan: str = attrs.field(default="auto", validator=one_of("auto", "fused", "parallel", "sequential"))
        """Training over a segment: fused (each layer's conv, then its gates, recurrence and skip,
        as one Triton kernel each way, :mod:`noeira.agents.mingru_scan`: the GPU's choice), parallel (a
        log2(T)-round torch scan), sequential (T small steps), auto (fused on cuda where Triton
        imports, else parallel there; sequential elsewhere)."""
        max_timescale: float = attrs.field(default=64.0, validator=attrs.validators.ge(0))
        """The longest memory a unit starts with, in steps: each unit's update gate starts at
        z = 1 / tau, tau log-uniform in [1, max_timescale] (its state keeps 1 - 1/tau a step),
        as chrono initialisation spreads an LSTM's (Tallec & Ollivier 2018). 0: the gates' bias
        starts at zero (z = 1/2: every unit's state halves each step)."""
        conv: int = attrs.field(default=4, validator=attrs.validators.ge(1))
        """Width of a causal depthwise convolution over each layer's input, read by its gates
        (Mamba's and Griffin's short conv: a diagonal recurrence whose gates see only the
        current input cannot keep an ordered queue, the last conv - 1 inputs it can; the
        state keeps them). Starts as the identity (the plain MinGRU). 1: none."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__(spec)
        self.options = network_options(spec.options, self.Config)
        h = self.hidden
        gates = 3 if self.options.skip == "highway" else 2
        self.gates = nn.ModuleList(nn.Linear(h, gates * h) for _ in range(self.layers))
        with torch.no_grad():
            for lin in self.gates:
                for chunk in lin.weight.view(gates, h, h):
                    nn.init.orthogonal_(chunk)
                lin.bias.zero_()
                lin.bias[:h] = self._gate_bias(h)
        w = self.options.conv
        self.state_rows = w  # h, then the layer's last w - 1 inputs
        if w > 1:  # identity at init: the plain MinGRU
            self.conv = nn.Parameter(torch.zeros(self.layers, w, h))
            with torch.no_grad():
                self.conv[:, 0] = 1.0
        self.scan = self.options.scan
        if self.scan == "auto":
            self.scan = ("fused" if mingru_scan.available() else "parallel") if spec.device.type == "cuda" else "sequential"
        if self.scan == "fused" and not mingru_scan.available():
            raise ConfigError("agent.network_options.scan: fused needs Triton (pip install triton), which does not import")
        self._fused_conv = self.scan == "fused" and 1 < w <= mingru_scan.MAX_TAPS  # the conv kernels
        self.to(spec.device)

    def _gate_bias(self, h: int) -> Tensor:
        """The update gate's initial bias: ``logit(1 / tau)`` (:func:`decay_logits`)."""
        return decay_logits(h, self.options.max_timescale) if self.options.max_timescale > 1 else torch.zeros(h)

    def _coefficients(self, i: int, x: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(1 - z, z * h~, p)`` of layer ``i`` for input ``x [..., H]``, as float32."""
        parts = self.gates[i](x).float().chunk(3 if self.options.skip == "highway" else 2, -1)
        z = torch.sigmoid(parts[0])
        return 1.0 - z, z * parts[1], (torch.sigmoid(parts[2]) if len(parts) == 3 else None)

    def _out(self, x: Tensor, h: Tensor, p: Tensor | None) -> Tensor:
        if self.options.skip == "highway":
            return x + p * (h - x)
        if self.options.skip == "residual":
            return x + h
        return h

    def _conv_step(self, i: int, x: Tensor, past: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        if self.state_rows == 1:
            return x, []
        if self._fused_conv and not torch.is_grad_enabled():
            return mingru_scan.conv_step(x, torch.stack(past), self.conv[i]), [x.float(), *past[:-1]]
        w = self.conv[i].float()
        u = w[0] * x.float()
        for j, p in enumerate(past, 1):
            u = u + w[j] * p
        return u.to(x.dtype), [x.float(), *past[:-1]]

    def _conv_sequence(self, i: int, x: Tensor, past: list[Tensor], keep: Tensor) -> Tensor:
        if self.state_rows == 1:
            return x
        conv = mingru_scan.conv_sequence if self._fused_conv else causal_conv
        return conv(x, torch.stack(past), keep.squeeze(-1), self.conv[i].float())

    def _layer_step(self, i: int, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        u, past = self._conv_step(i, x, state[1:])
        if self.scan == "fused" and not torch.is_grad_enabled():  # acting: one kernel per layer
            y, h = mingru_scan.mingru_step(self.gates[i](u), x, state[0], self.options.skip)
            return y, [h, *past]
        a, b, p = self._coefficients(i, u)
        h = a * state[0] + b
        return self._out(x, h, p), [h, *past]

    def _layer_sequence(self, i: int, x: Tensor, state: list[Tensor], keep: Tensor) -> Tensor:
        u = self._conv_sequence(i, x, state[1:], keep)
        if self.scan == "fused":
            return mingru_scan.mingru_scan(self.gates[i](u), x, keep.squeeze(-1), state[0], self.options.skip)
        a, b, p = self._coefficients(i, u)  # [T, B, H] each, one matmul
        if self.scan == "parallel":
            h = linear_scan(a * keep, b, state[0])
        else:
            hs, h_t = [], state[0]
            for t in range(x.shape[0]):
                h_t = a[t] * (h_t * keep[t]) + b[t]
                hs.append(h_t)
            h = torch.stack(hs)
        return self._out(x, h, p)
