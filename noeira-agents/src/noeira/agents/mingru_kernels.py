"""The Triton kernels of :mod:`noeira.agents.mingru_scan` (imported only where Triton is: the
module docstring there gives their arithmetic)."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["backward", "conv_backward", "conv_forward", "forward"]


@triton.jit
def forward(
    g, x, keep, h0, hs, y, T, B, H: tl.constexpr, GATES: tl.constexpr, SKIP: tl.constexpr, KEEP: tl.constexpr, BLOCK: tl.constexpr
):
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
def backward(
    g, x, keep, h0, hs, dy, dg, dx, dh0, T, B, H: tl.constexpr, GATES: tl.constexpr, SKIP: tl.constexpr, BLOCK: tl.constexpr
):
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


@triton.jit
def _tap(x, past, s, BH, cols, live, N: tl.constexpr):
    """``x_s`` for one step ``s`` of the segment, the carried inputs where ``s < 0``."""
    at = cols * 0 + s  # the step as a tensor, so the masks below are tensors in the interpreter too
    inside = tl.load(x + s * BH + cols, mask=live & (at >= 0), other=0.0).to(tl.float32)
    before = tl.load(past + (-1 - s) * BH + cols, mask=live & (at < 0) & (-1 - at < N), other=0.0)
    return inside + before


@triton.jit
def _tap_weight(w, k: tl.constexpr, H: tl.constexpr, j, live, N: tl.constexpr):
    """The ``k``-th tap's weights for channels ``j`` (0 beyond the ``N`` carried taps)."""
    if k <= N:
        return tl.load(w + k * H + j, mask=live, other=0.0)
    return tl.zeros(j.shape, tl.float32)


@triton.jit
def _tap_weights(w, H: tl.constexpr, j, live, N: tl.constexpr):
    """The four taps' weights for channels ``j`` (0 beyond the ``N`` carried taps)."""
    return (_tap_weight(w, 0, H, j, live, N), _tap_weight(w, 1, H, j, live, N), _tap_weight(w, 2, H, j, live, N),
            _tap_weight(w, 3, H, j, live, N))


@triton.jit
def _keep(keep, s, T, B, b, live, KEEP: tl.constexpr):
    """``keep_s`` (1 outside the segment and without resets)."""
    if KEEP:
        at = b * 0 + s
        return tl.load(keep + s * B + b, mask=live & (at >= 0) & (at < T), other=1.0)
    return tl.full(b.shape, 1.0, tl.float32)


@triton.jit
def conv_forward(x, past, keep, w, u, T, B, H: tl.constexpr, N: tl.constexpr, KEEP: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = cols < B * H
    b, j = cols // H, cols % H
    BH = B * H
    w0, w1, w2, w3 = _tap_weights(w, H, j, live, N)
    p1 = _tap(x, past, -1, BH, cols, live, N)  # x_{t-1}, x_{t-2}, x_{t-3}
    p2 = _tap(x, past, -2, BH, cols, live, N)
    p3 = _tap(x, past, -3, BH, cols, live, N)
    since = tl.full([BLOCK], 1 << 20, tl.int32)  # steps since the last reset
    for t in range(T):
        xv = tl.load(x + t * BH + cols, mask=live, other=0.0).to(tl.float32)
        k = _keep(keep, t, T, B, b, live, KEEP)
        since = tl.where(k != 0.0, since + 1, 0)
        acc = w0 * xv
        if N >= 1:
            acc += tl.where(since >= 1, w1 * p1, 0.0)
        if N >= 2:
            acc += tl.where(since >= 2, w2 * p2, 0.0)
        if N >= 3:
            acc += tl.where(since >= 3, w3 * p3, 0.0)
        tl.store(u + t * BH + cols, acc.to(u.dtype.element_ty), mask=live)
        p3 = p2
        p2 = p1
        p1 = xv


@triton.jit
def _zeros(BLOCK: tl.constexpr):  # noqa: N803
    return tl.zeros([BLOCK], dtype=tl.float32)


@triton.jit
def _ones(BLOCK: tl.constexpr):  # noqa: N803
    return tl.full([BLOCK], 1.0, tl.float32)


@triton.jit
def conv_backward(
    du, x, past, keep, w, dx, dw, dpast, T, B, H: tl.constexpr, N: tl.constexpr, KEEP: tl.constexpr, BLOCK: tl.constexpr
):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = cols < B * H
    b, j = cols // H, cols % H
    BH = B * H
    w0, w1, w2, w3 = _tap_weights(w, H, j, live, N)
    # Each loop-carried value starts as a value of its own: Triton (3.x) finds a loop's carried
    # values by comparing each name's value after the body with its value before, so in the
    # rotation `d2 = d1` below, a d2 that started as the same zeros as d1 would look unchanged and
    # be kept at zero (the interpreter, running Python, never shows it).
    d1, d2, d3 = _zeros(BLOCK), _zeros(BLOCK), _zeros(BLOCK)  # du_{t+1}, du_{t+2}, du_{t+3} (0 past the segment)
    k1, k2, k3 = _ones(BLOCK), _ones(BLOCK), _ones(BLOCK)  # keep_{t+1}, keep_{t+2}, keep_{t+3}
    g0, g1, g2, g3 = _zeros(BLOCK), _zeros(BLOCK), _zeros(BLOCK), _zeros(BLOCK)  # dw's partial sums
    m1 = _tap(x, past, T - 2, BH, cols, live, N)  # x_{t-1}, x_{t-2}, x_{t-3}
    m2 = _tap(x, past, T - 3, BH, cols, live, N)
    m3 = _tap(x, past, T - 4, BH, cols, live, N)
    for s in range(T):
        t = T - 1 - s
        dt = tl.load(du + t * BH + cols, mask=live, other=0.0).to(tl.float32)
        xt = tl.load(x + t * BH + cols, mask=live, other=0.0).to(tl.float32)
        k0 = _keep(keep, t, T, B, b, live, KEEP)
        q1 = _keep(keep, t - 1, T, B, b, live, KEEP)
        q2 = _keep(keep, t - 2, T, B, b, live, KEEP)
        acc = w0 * dt
        g0 += dt * xt
        if N >= 1:
            acc += w1 * d1 * k1
            g1 += dt * m1 * k0
        if N >= 2:
            acc += w2 * d2 * (k2 * k1)
            g2 += dt * m2 * (k0 * q1)
        if N >= 3:
            acc += w3 * d3 * (k3 * k2 * k1)
            g3 += dt * m3 * (k0 * q1 * q2)
        tl.store(dx + t * BH + cols, acc.to(dx.dtype.element_ty), mask=live)
        d3, d2, d1 = d2, d1, dt
        k3, k2, k1 = k2, k1, k0
        m1, m2 = m2, m3
        m3 = _tap(x, past, t - 4, BH, cols, live, N)
    tl.store(dw + cols, g0, mask=live)
    if N >= 1:
        tl.store(dw + BH + cols, g1, mask=live)
        tl.store(dpast + cols, w1 * d1 * k1 + w2 * d2 * (k2 * k1) + w3 * d3 * (k3 * k2 * k1), mask=live)
    if N >= 2:
        tl.store(dw + 2 * BH + cols, g2, mask=live)
        tl.store(dpast + BH + cols, w2 * d1 * k1 + w3 * d2 * (k2 * k1), mask=live)
    if N >= 3:
        tl.store(dw + 3 * BH + cols, g3, mask=live)
        tl.store(dpast + 2 * BH + cols, w3 * d1 * k1, mask=live)
