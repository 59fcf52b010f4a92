"""Copy arena rows into the envs that ended, on CUDA: one Triton kernel whose programs walk the
list of ended envs (its work follows them, not ``num_envs``; the launch is the same every step,
so it records in a CUDA graph)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["copy_rows_kernel"]

BLOCK = 4096
"""Bytes a program copies per iteration (an env's row is ~100 KB)."""
PROGRAMS = 1024


@functools.cache
def copy_rows_kernel() -> Callable[..., None] | None:
    """``copy(dst, src, mask, order, rows, ended, envs, listed=False)``: ``dst[e] = src[rows[e]]``
    for every env ``e`` where ``mask`` (``order``: the inclusive cumsum of ``mask`` minus 1; ``ended``
    [N + 1] and ``envs`` = ``arange(N)``: scratch made once); ``listed``: ``ended`` lists this
    ``mask``'s envs already (a copy of other rows for the same envs just made it); None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(dst, src, ended, count_p, rows, row_bytes, BLOCK: tl.constexpr):  # noqa: N803
        count = tl.load(count_p)
        for i in range(tl.program_id(0), count, tl.num_programs(0)):
            e = tl.load(ended + i)
            r = tl.load(rows + e)
            for start in range(0, row_bytes, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                keep = offs < row_bytes
                tl.store(dst + e * row_bytes + offs, tl.load(src + r * row_bytes + offs, mask=keep), mask=keep)

    def run(dst: Tensor, src: Tensor, mask: Tensor, order: Tensor, rows: Tensor, ended: Tensor, envs: Tensor,
            listed: bool = False) -> None:
        n = mask.shape[0]
        if not listed:  # the ended envs, in env order, at the front of `ended` (the others land in its last slot)
            ended.scatter_(0, torch.where(mask, order, n), envs)
        kernel[(min(n, PROGRAMS),)](dst, src, ended, order[-1:] + 1, rows, dst.shape[1], BLOCK=BLOCK)

    return run
