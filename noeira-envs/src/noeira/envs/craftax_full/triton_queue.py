"""The world queue's bookkeeping and row copies on CUDA, as Triton kernels (:class:`.env.WorldQueue`).

The torch path (every device) is the reference: each step :meth:`~.env.WorldQueue.refill` and
:meth:`~.env.WorldQueue.draw` take some forty small torch launches (counters, cumulative sums,
masks, a select over every row). Here each is a *plan* kernel, one program that reads the queue's
counters and writes a list of ``(destination row, source row)`` pairs with its length and the
counters' new values, and one *copy* kernel whose programs walk the list, so the copies' work
follows the worlds that move, not ``num_envs``. Every launch is the same every step (the lengths
stay on the device), so a step records in a CUDA graph.

- :func:`plan_refill`: ``empty = clamp(head + size - tail, 0, refill)`` worlds to make; the
  serials to generate (``serial + i`` for ``i < empty``, else -1: not made); the pairs
  ``(slot (tail + i) % size, fresh row i)``; each such slot's serial; ``serial`` and ``tail``
  advanced by ``empty``.
- :func:`plan_draw`: the ended envs (``mask``) in env order get the queue's next worlds
  ``(head + k) % size``; ``reused`` marks those past ``tail`` (the queue ran dry); each ended
  env's ``episode`` count goes up; ``head`` advances by their number and ``tail`` to at least ``head``.
- :func:`copy_rows`: ``dst[d] = src[s]`` for each listed pair, for one or two (dst, src) byte
  tables at once.

``tests/envs/test_craftax_full.py`` checks that the env with these kernels (``queue_kernel =
"triton"``, on a CPU in Triton's interpreter) steps as the torch path does, counters, worlds and
observations bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

try:  # optional: without Triton the queue keeps its counters in torch ops
    import triton
    import triton.language as tl
except ImportError:
    triton = None

__all__ = ["QueueKernels", "queue_kernels"]

COPY_BLOCK = 4096
"""Bytes a copy program moves per iteration (an env's arena row is ~100 KB)."""
COPY_PROGRAMS = 1024
PLAN_BLOCK = 1024
"""Envs (or queue slots) a plan kernel's one program takes per iteration."""


class QueueKernels(NamedTuple):
    """The launchers :class:`.env.WorldQueue` calls (see the module docstring)."""

    plan_refill: Callable[..., None]
    plan_draw: Callable[..., None]
    copy_rows: Callable[..., None]


if triton is not None:

    @triton.jit
    def _refill_kernel(head_p, tail_p, serial_p, slot_serial, serials, pairs, count_p, size, refill,
                       BLOCK: tl.constexpr):  # noqa: N803
        head = tl.load(head_p)
        tail = tl.load(tail_p)
        serial = tl.load(serial_p)
        empty = tl.minimum(tl.maximum(head + size - tail, 0), refill)
        for start in range(0, refill, BLOCK):
            i = start + tl.arange(0, BLOCK)
            made = i < empty  # empty <= refill: these are in range
            tl.store(serials + i, tl.where(made, serial + i, -1), mask=i < refill)
            slot = (tail + i) % size  # tail + i >= 0: C's and Python's remainders agree
            tl.store(pairs + 2 * i, slot, mask=made)
            tl.store(pairs + 2 * i + 1, i.to(tl.int64), mask=made)
            tl.store(slot_serial + slot, serial + i, mask=made)
        tl.store(count_p, empty)
        tl.store(serial_p, serial + empty)
        tl.store(tail_p, tail + empty)

    @triton.jit
    def _draw_kernel(mask, episode, reused, head_p, tail_p, pairs, count_p, n, size, BLOCK: tl.constexpr):  # noqa: N803
        head = tl.load(head_p)
        tail = tl.load(tail_p)
        total = tl.zeros((), dtype=tl.int64)
        for start in range(0, n, BLOCK):
            e = start + tl.arange(0, BLOCK)
            inside = e < n
            ended = tl.load(mask + e, mask=inside, other=0).to(tl.int32)
            order = total + (tl.cumsum(ended, 0) - 1).to(tl.int64)  # this env's place among the ended, in env order
            absolute = head + order
            hit = ended != 0
            tl.store(pairs + 2 * order, e.to(tl.int64), mask=hit)
            tl.store(pairs + 2 * order + 1, absolute % size, mask=hit)
            was = tl.load(reused + e, mask=inside, other=0)
            tl.store(reused + e, tl.where(hit, (absolute >= tail).to(tl.int8), was), mask=inside)
            count = tl.load(episode + e, mask=inside, other=0)
            tl.store(episode + e, count + ended.to(tl.int64), mask=inside)
            total = total + tl.sum(ended, 0).to(tl.int64)
        tl.store(count_p, total)
        tl.store(head_p, head + total)
        tl.store(tail_p, tl.maximum(tail, head + total))

    @triton.jit
    def _copy_kernel(dst, src, dst2, src2, pairs, count_p, row_bytes, row_bytes2, TWO: tl.constexpr,  # noqa: N803
                     BLOCK: tl.constexpr):  # noqa: N803
        count = tl.load(count_p)
        for i in range(tl.program_id(0), count, tl.num_programs(0)):
            d = tl.load(pairs + 2 * i)
            s = tl.load(pairs + 2 * i + 1)
            for start in range(0, row_bytes, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                keep = offs < row_bytes
                tl.store(dst + d * row_bytes + offs, tl.load(src + s * row_bytes + offs, mask=keep), mask=keep)
            if TWO:
                for start in range(0, row_bytes2, BLOCK):
                    offs = start + tl.arange(0, BLOCK)
                    keep = offs < row_bytes2
                    tl.store(dst2 + d * row_bytes2 + offs, tl.load(src2 + s * row_bytes2 + offs, mask=keep),
                             mask=keep)


def plan_refill(head: Tensor, tail: Tensor, serial: Tensor, slot_serial: Tensor, serials: Tensor, pairs: Tensor,
                count: Tensor) -> None:
    """Counters int64 [] (``serial``, ``tail`` updated), ``slot_serial`` int64 [size] (updated),
    ``serials`` int64 [refill] (written), ``pairs`` int64 [refill, 2] and ``count`` int64 [1] (written)."""
    _refill_kernel[(1,)](head, tail, serial, slot_serial, serials, pairs, count, slot_serial.shape[0],
                         serials.shape[0], BLOCK=PLAN_BLOCK)


def plan_draw(mask: Tensor, episode: Tensor, reused: Tensor, head: Tensor, tail: Tensor, size: int, pairs: Tensor,
              count: Tensor) -> None:
    """``mask`` bool [N], ``episode`` int64 [N] and ``reused`` bool [N] (updated), counters int64 []
    (updated), ``pairs`` int64 [N, 2] and ``count`` int64 [1] (written)."""
    _draw_kernel[(1,)](mask.view(torch.int8), episode, reused.view(torch.int8), head, tail, pairs, count,
                       mask.shape[0], size, BLOCK=PLAN_BLOCK, num_warps=8)


def copy_rows(pairs: Tensor, count: Tensor, dst: Tensor, src: Tensor, dst2: Tensor | None = None,
              src2: Tensor | None = None) -> None:
    """Byte rows: ``dst[d] = src[s]`` (and ``dst2[d] = src2[s]``) for the first ``count`` pairs."""
    two = dst2 is not None
    _copy_kernel[(min(pairs.shape[0], COPY_PROGRAMS),)](
        dst, src, dst2 if two else dst, src2 if two else src, pairs, count, dst.shape[1],
        dst2.shape[1] if two else 0, TWO=two, BLOCK=COPY_BLOCK)


@functools.cache
def queue_kernels() -> QueueKernels | None:
    """The launchers; None without Triton."""
    return None if triton is None else QueueKernels(plan_refill, plan_draw, copy_rows)
