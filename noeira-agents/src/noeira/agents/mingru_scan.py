"""A MinGRU layer over a whole segment as Triton kernels (``scan="fused"``): its recurrence, one
kernel each way, and the causal convolution in front of its gates, one kernel each way.

The torch scans (:func:`noeira.agents.networks.linear_scan`, or a loop of ``T`` steps) write
every intermediate as its own ``[T, B, H]`` tensor: the gates' sigmoids, the coefficients, each
of the scan's ``log2 T`` rounds, and autograd keeps most of them for backward. At PPO's
minibatch sizes (2,048 segments x 128 steps x 256 units, a quarter of a GB per float32 tensor)
that traffic is what bounds training. Here a layer is one pass over its gate pre-activations:

forward, from ``g = W x + c`` (``[T, B, G*H]``: ``z``, ``h~`` and, for ``highway``, ``p`` blocks)::

    z_t = sigmoid(g_z),  a_t = (1 - z_t) * keep_t,  h_t = a_t * h_{t-1} + z_t * g_h,
    y_t = x_t + sigmoid(g_p) * (h_t - x_t)  (highway) | x_t + h_t (residual) | h_t (none)

each thread walking ``t`` for one ``(b, j)`` channel (``B * H`` channels: plenty of threads,
and a time step's loads are contiguous across them), storing ``h`` (float32, for backward) and
``y``; backward walks ``t`` down with the reversed recurrence::

    dh_t = dy_t * dy/dh + a_{t+1} * dh_{t+1}
    dg_z = (dh_t * (g_h - keep_t * h_{t-1})) * z (1 - z),  dg_h = dh_t * z,  dg_p = dy_t (h_t - x_t) p (1 - p)

so every pre-activation gradient is written once. Arithmetic is float32 whatever the inputs'
dtype; ``y`` is float32 like the torch path's (float32 state meets bf16 activations).

The causal depthwise convolution in front of a layer's gates (``conv`` up to 4 taps) is one
kernel each way too (:func:`conv_sequence`): the torch form builds a dozen ``[T, B, H]`` float32
temporaries a layer (the shifted inputs, their masks, each product), which were most of the
learner's elementwise time on Craftax. With ``c_t`` the number of steps since the last reset
(``keep_t = 0``), counting the inputs before the segment as unbroken::

    u_t = w_0 x_t + sum_{j >= 1} w_j x_{t-j} [c_t >= j]      (x_{-1}, x_{-2}, ...: the carried inputs)

Backward walks ``t`` down with the taps' inputs and the later ``du`` in registers::

    dx_t = w_0 du_t + sum_j w_j du_{t+j} [c_{t+j} >= j],   dw_j = sum_{t, b} du_t x_{t-j} [c_t >= j]

(``dw`` as per-channel partial sums, added over the batch by torch; the carried inputs get theirs).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

__all__ = ["available", "conv_sequence", "conv_step", "mingru_scan", "mingru_step"]

SKIPS = {"highway": 0, "residual": 1, "none": 2}
BLOCK = 256
MAX_TAPS = 4
"""The widest convolution :func:`conv_sequence` fuses (its taps' inputs live in named registers)."""


@functools.cache
def available() -> bool:
    """Whether Triton imports (it ships with PyTorch's CUDA builds)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _kernels() -> tuple[Any, Any]:
    from noeira.agents import mingru_kernels

    return mingru_kernels.forward, mingru_kernels.backward


@functools.cache
def _conv_kernels() -> tuple[Any, Any]:
    from noeira.agents import mingru_kernels

    return mingru_kernels.conv_forward, mingru_kernels.conv_backward


def _forward(g: Tensor, x: Tensor, keep: Tensor | None, h0: Tensor, mode: int) -> tuple[Tensor, Tensor]:
    """The forward kernel over ``g [T, B, G*H]``: ``(hs, y)``, each ``[T, B, H]`` float32
    (``keep`` None: no resets)."""
    t, b, width = g.shape
    hidden = h0.shape[-1]
    hs = torch.empty(t, b, hidden, device=g.device, dtype=torch.float32)
    y = torch.empty_like(hs)
    forward, _ = _kernels()
    forward[(-(-(b * hidden) // BLOCK),)](g, x, hs if keep is None else keep, h0, hs, y, t, b, H=hidden,
                                          GATES=width // hidden, SKIP=mode, KEEP=keep is not None, BLOCK=BLOCK)
    return hs, y


class _MinGRUScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, g: Tensor, x: Tensor, keep: Tensor, h0: Tensor, skip: str) -> Tensor:
        g, x, keep, h0 = g.contiguous(), x.contiguous(), keep.contiguous().float(), h0.contiguous().float()
        hs, y = _forward(g, x, keep, h0, SKIPS[skip])
        ctx.save_for_backward(g, x, keep, h0, hs)
        ctx.mode, ctx.gates = SKIPS[skip], g.shape[-1] // h0.shape[-1]
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        g, x, keep, h0, hs = ctx.saved_tensors
        t, b, h = hs.shape
        dg, dh0 = torch.empty_like(g), torch.empty_like(h0)
        dx = torch.empty_like(x) if ctx.mode != 2 else None  # every element written (no skip: no dx)
        _, backward = _kernels()
        backward[(-(-(b * h) // BLOCK),)](g, x, keep, h0, hs, dy.contiguous(), dg, dg if dx is None else dx, dh0, t,
                                          b, H=h, GATES=ctx.gates, SKIP=ctx.mode, BLOCK=BLOCK)
        return dg, dx, None, dh0, None


@torch.no_grad()
def mingru_step(g: Tensor, x: Tensor, h: Tensor, skip: str = "highway") -> tuple[Tensor, Tensor]:
    """One step of one layer (acting, no gradient): ``g [B, G*H]``, ``x [B, H]``, the state
    ``h [B, H]`` -> ``(y, h')`` float32, the forward kernel's arithmetic at ``T = 1`` (so a
    rollout and its replay by :func:`mingru_scan` compute alike)."""
    hs, y = _forward(g.contiguous()[None], x.contiguous()[None], None, h.contiguous().float(), SKIPS[skip])
    return y[0], hs[0]


def mingru_scan(g: Tensor, x: Tensor, keep: Tensor, h0: Tensor, skip: str = "highway") -> Tensor:
    """One MinGRU layer over a segment: ``g [T, B, G*H]`` its gate pre-activations (``z``, ``h~``
    and, with ``highway``, ``p``), ``x [T, B, H]`` its input, ``keep [T, B]`` 0 where the state
    resets, ``h0 [B, H]`` the state before ``t = 0``; returns ``y [T, B, H]`` float32. Differentiable
    in ``g``, ``x`` and ``h0``; the same numbers as the torch scans up to float rounding."""
    if skip not in SKIPS:
        raise ValueError(f"skip must be one of {', '.join(SKIPS)}, got {skip!r}")
    return _MinGRUScan.apply(g, x, keep, h0, skip)


class _ConvSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, past: Tensor, keep: Tensor, w: Tensor) -> Tensor:
        x, past, keep, w = x.contiguous(), past.contiguous().float(), keep.contiguous().float(), w.contiguous().float()
        t, b, h = x.shape
        u = torch.empty_like(x)
        forward, _ = _conv_kernels()
        forward[(-(-(b * h) // BLOCK),)](x, past, keep, w, u, t, b, H=h, N=w.shape[0] - 1, KEEP=True, BLOCK=BLOCK)
        ctx.save_for_backward(x, past, keep, w)
        return u

    @staticmethod
    def backward(ctx: Any, du: Tensor) -> tuple[Tensor | None, ...]:
        x, past, keep, w = ctx.saved_tensors
        t, b, h = x.shape
        n = w.shape[0] - 1
        dx, dpast = torch.empty_like(x), torch.zeros_like(past)
        dw = torch.empty((n + 1, b, h), device=x.device, dtype=torch.float32)
        _, backward = _conv_kernels()
        backward[(-(-(b * h) // BLOCK),)](du.contiguous(), x, past, keep, w, dx, dw, dpast, t, b, H=h, N=n, KEEP=True,
                                          BLOCK=BLOCK)
        return dx, dpast, None, dw.sum(1)


def conv_sequence(x: Tensor, past: Tensor, keep: Tensor, w: Tensor) -> Tensor:
    """A layer's causal depthwise convolution over a segment: ``x [T, B, H]`` the inputs,
    ``past [W - 1, B, H]`` the inputs before ``t = 0`` (most recent first), ``keep [T, B]`` 0
    where an episode starts (taps never reach across it), ``w [W, H]`` the taps (``w[j]`` weighs
    ``x_{t-j}``, ``W <= 4``). Returns ``u [T, B, H]`` in ``x``'s dtype, differentiable in ``x``,
    ``past`` and ``w``; the torch form's numbers up to float rounding."""
    if not 1 <= w.shape[0] <= MAX_TAPS or past.shape[0] != w.shape[0] - 1:
        raise ValueError(f"conv_sequence: 1 to {MAX_TAPS} taps with one carried input fewer, got w {tuple(w.shape)} "
                         f"and past {tuple(past.shape)}")
    if w.shape[0] == 1:
        return (w[0] * x.float()).to(x.dtype)
    return _ConvSequence.apply(x, past, keep, w)


@torch.no_grad()
def conv_step(x: Tensor, past: Tensor, w: Tensor) -> Tensor:
    """One step of :func:`conv_sequence` (acting, no gradient): ``x [B, H]``, ``past [W - 1, B, H]``
    -> ``u [B, H]`` in ``x``'s dtype, the forward kernel's arithmetic at ``T = 1``."""
    x = x.contiguous()
    b, h = x.shape
    u = torch.empty_like(x)
    forward, _ = _conv_kernels()
    forward[(-(-(b * h) // BLOCK),)](x, past.contiguous().float(), x, w.contiguous().float(), u, 1, b, H=h,
                                     N=w.shape[0] - 1, KEEP=False, BLOCK=BLOCK)
    return u
