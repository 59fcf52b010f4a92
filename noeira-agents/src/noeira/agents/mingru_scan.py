"""A MinGRU layer's recurrence over a whole segment as two Triton kernels (``scan="fused"``).

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
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

__all__ = ["available", "mingru_scan", "mingru_step"]

SKIPS = {"highway": 0, "residual": 1, "none": 2}
BLOCK = 256


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
    import triton
    import triton.language as tl

    @triton.jit
    def forward(g, x, keep, h0, hs, y, T, B, H: tl.constexpr, GATES: tl.constexpr, SKIP: tl.constexpr,
                KEEP: tl.constexpr, BLOCK: tl.constexpr):
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = cols < B * H
        b, j = cols // H, cols % H
        h = tl.load(h0 + cols, mask=live, other=0.0)
        for t in range(T):
            gi = g + (t * B + b) * (GATES * H) + j
            z = tl.sigmoid(tl.load(gi, mask=live, other=0.0).to(tl.float32))
            cand = tl.load(gi + H, mask=live, other=0.0).to(tl.float32)
            if KEEP:
                h = h * tl.load(keep + t * B + b, mask=live, other=0.0)
            h = (1.0 - z) * h + z * cand
            row = t * B * H + cols
            tl.store(hs + row, h, mask=live)
            if SKIP == 0:
                p = tl.sigmoid(tl.load(gi + 2 * H, mask=live, other=0.0).to(tl.float32))
                xv = tl.load(x + row, mask=live, other=0.0).to(tl.float32)
                out = xv + p * (h - xv)
            elif SKIP == 1:
                out = tl.load(x + row, mask=live, other=0.0).to(tl.float32) + h
            else:
                out = h
            tl.store(y + row, out, mask=live)

    @triton.jit
    def backward(g, x, keep, h0, hs, dy, dg, dx, dh0, T, B, H: tl.constexpr, GATES: tl.constexpr,
                 SKIP: tl.constexpr, BLOCK: tl.constexpr):
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = cols < B * H
        b, j = cols // H, cols % H
        carry = tl.zeros([BLOCK], dtype=tl.float32)  # a_{t+1} * dh_{t+1}
        h = tl.load(hs + (T - 1) * B * H + cols, mask=live, other=0.0)  # h_t, walking down
        for s in range(T):
            t = T - 1 - s
            gi = g + (t * B + b) * (GATES * H) + j
            z = tl.sigmoid(tl.load(gi, mask=live, other=0.0).to(tl.float32))
            cand = tl.load(gi + H, mask=live, other=0.0).to(tl.float32)
            k = tl.load(keep + t * B + b, mask=live, other=0.0)
            row = t * B * H + cols
            if t > 0:
                prev = tl.load(hs + row - B * H, mask=live, other=0.0)
            else:
                prev = tl.load(h0 + cols, mask=live, other=0.0)
            d_out = tl.load(dy + row, mask=live, other=0.0).to(tl.float32)
            di = dg + (t * B + b) * (GATES * H) + j
            if SKIP == 0:
                pg = tl.sigmoid(tl.load(gi + 2 * H, mask=live, other=0.0).to(tl.float32))
                xv = tl.load(x + row, mask=live, other=0.0).to(tl.float32)
                dh = d_out * pg + carry
                tl.store(dx + row, (d_out * (1.0 - pg)).to(dx.dtype.element_ty), mask=live)
                tl.store(di + 2 * H, (d_out * (h - xv) * pg * (1.0 - pg)).to(dg.dtype.element_ty), mask=live)
            elif SKIP == 1:
                dh = d_out + carry
                tl.store(dx + row, d_out.to(dx.dtype.element_ty), mask=live)
            else:
                dh = d_out + carry
            kp = k * prev
            tl.store(di, (dh * (cand - kp) * z * (1.0 - z)).to(dg.dtype.element_ty), mask=live)
            tl.store(di + H, (dh * z).to(dg.dtype.element_ty), mask=live)
            carry = dh * (1.0 - z) * k
            h = prev
        tl.store(dh0 + cols, carry, mask=live)

    return forward, backward


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
