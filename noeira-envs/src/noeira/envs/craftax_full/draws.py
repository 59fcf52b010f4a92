"""The keyed world draws (:func:`.worldgen.keyed_draws`' uniforms) as one Triton kernel on CUDA.

The torch path computes Philox4x32-10 in int64 tensor ops (about a hundred passes over
``k x 23,000`` int64 counters a call); here each program computes ``BLOCK`` counters of one world in
registers with ``triton.language.random.philox`` (the same rounds the torch ``philox`` copies) and
writes only the float32 uniforms: the same numbers, bit for bit, at the cost of one write.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from torch import Tensor

try:  # optional: without Triton the torch path computes the draws
    import triton
    import triton.language as tl
    from triton.language.random import philox, uint_to_uniform_float
except ImportError:
    triton = None

__all__ = ["BLOCK", "draws_kernel"]

BLOCK = 1024
"""Philox counters a program computes (four uniforms each)."""


if triton is not None:

    @triton.jit
    def _kernel(out, key_p, stream_p, serial_p, draws, BLOCK: tl.constexpr):  # noqa: N803
        i = tl.program_id(1)
        j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        seed = tl.load(key_p)
        stream = tl.load(stream_p + i)
        serial = tl.load(serial_p + i)
        if serial < 0:  # a world not asked for (worldgen.generate_keyed's skipped worlds)
            return
        z = j.to(tl.uint32) * 0
        c1 = z + (stream & 0xFFFFFFFF).to(tl.uint32)
        c2 = z + (serial & 0xFFFFFFFF).to(tl.uint32)
        c3 = z + ((serial >> 32) & 0xFFFFFFFF).to(tl.uint32)
        r0, r1, r2, r3 = philox(seed, j.to(tl.uint32), c1, c2, c3)
        row = out + i.to(tl.int64) * draws
        at = 4 * j
        tl.store(row + at, uint_to_uniform_float(r0), mask=at < draws)
        tl.store(row + at + 1, uint_to_uniform_float(r1), mask=at + 1 < draws)
        tl.store(row + at + 2, uint_to_uniform_float(r2), mask=at + 2 < draws)
        tl.store(row + at + 3, uint_to_uniform_float(r3), mask=at + 3 < draws)


@functools.cache
def draws_kernel() -> Callable[[Tensor, Tensor, Tensor, Tensor], None] | None:
    """``draws(out, key, stream, serial)``: ``out [k, D]`` float32 gets the uniforms of the worlds
    (``stream[i]``, ``serial[i]``) (int64 [k]) under ``key`` (int64 [1], the run's key XOR the
    salt): ``out[i, 4 j + w]`` is Triton's ``uint_to_uniform_float`` of Philox word ``w`` at
    counters ``(j, stream[i], serial[i] low word, serial[i] high word)``; a negative serial skips
    its world (its row is left as it was); None without Triton."""
    if triton is None:
        return None

    def run(out: Tensor, key: Tensor, stream: Tensor, serial: Tensor) -> None:
        k, draws = out.shape
        counters = (draws + 3) // 4
        _kernel[(triton.cdiv(counters, BLOCK), k)](out, key, stream, serial, draws, BLOCK=BLOCK)

    return run
