"""The step's episode accounting after the rules, as one Triton kernel (the full game on CUDA).

``TensorEnv.step`` (the torch path, every device, and this kernel's reference) does it in some
thirty small launches after the rules: the reward and termination copied into the step's
result, the clock, the time limit, the running return and length, the completed episodes'
sums (return, length, count, the 67 achievements, the deepest floor, ``world_reused``) and the
ended envs' counters zeroed; the full game then clears ``truncated`` where ``terminated``. Here
one lane is one env: :func:`account` writes the step's ``reward``, ``terminated``, ``truncated``
and ``done``, updates the counters in place and returns each program's sums (float64 [P, 72],
in ``TensorEnv``'s statistics order), which the env adds up in a fixed order: deterministic.

``tests/envs/test_craftax_full.py`` (``test_env_steps_through_the_rule_kernels``) checks the env
with it against the torch path: the step's result, the counters and the popped statistics.
"""

from __future__ import annotations

import torch
from torch import Tensor

from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full.state import OFFSETS, ROW_BYTES, State

try:  # optional: without Triton the base class's torch ops do the accounting
    import triton
    import triton.language as tl
except ImportError:
    triton = None

__all__ = ["STATS", "account", "floor_table"]

BLOCK = 128
"""Envs a program takes."""
STATS = 3 + C.NUM_ACHIEVEMENTS + 2
"""Sums a program returns: return, length, count, the achievements, the floor, ``world_reused``."""

if triton is not None:

    @triton.jit
    def _account_kernel(arena, ach_offset, floors, reward_in, terminated_in, reward, terminated, truncated, done,
                        elapsed, episode_return, episode_length, reused, partial, n, max_t,
                        ROW: tl.constexpr, ACH: tl.constexpr, NUM_ACH: tl.constexpr, STATS: tl.constexpr,  # noqa: N803
                        BLOCK: tl.constexpr):  # noqa: N803
        pid = tl.program_id(0)
        e = pid * BLOCK + tl.arange(0, BLOCK)
        inside = e < n
        r = tl.load(reward_in + e, mask=inside, other=0.0)
        term = tl.load(terminated_in + e, mask=inside, other=0) != 0
        clock = tl.load(elapsed + e, mask=inside, other=0) + 1
        over = clock >= max_t
        ended = (term | over) & inside
        ret = tl.load(episode_return + e, mask=inside, other=0.0) + r  # float32, as the torch add
        length = tl.load(episode_length + e, mask=inside, other=0) + 1
        tl.store(reward + e, r, mask=inside)
        tl.store(terminated + e, term.to(tl.int8), mask=inside)
        tl.store(truncated + e, (over & ~term).to(tl.int8), mask=inside)  # the limit counts for worlds alive
        tl.store(done + e, ended.to(tl.int8), mask=inside)
        tl.store(episode_return + e, tl.where(ended, 0.0, ret), mask=inside)
        tl.store(episode_length + e, tl.where(ended, 0, length), mask=inside)
        tl.store(elapsed + e, tl.where(ended, 0, clock), mask=inside)
        d = ended.to(tl.float64)
        out = partial + pid * STATS
        tl.store(out + 0, tl.sum(ret.to(tl.float64) * d, 0))
        tl.store(out + 1, tl.sum(length.to(tl.float64) * d, 0))
        tl.store(out + 2, tl.sum(d, 0))
        # the ended worlds' achievements (bytes in each row of the arena) and the deepest floor reached
        col = tl.arange(0, ACH)
        ach = tl.load(arena + e[:, None].to(tl.int64) * ROW + ach_offset + col[None, :],
                      mask=ended[:, None] & (col[None, :] < NUM_ACH), other=0).to(tl.int32)
        tl.store(out + 3 + col, tl.sum(ach.to(tl.float64) * d[:, None], 0), mask=col < NUM_ACH)
        floor = tl.max(ach * tl.load(floors + col)[None, :], 1)
        tl.store(out + 3 + NUM_ACH, tl.sum(floor.to(tl.float64) * d, 0))
        was_used = tl.load(reused + e, mask=inside, other=0).to(tl.float64)
        tl.store(out + 4 + NUM_ACH, tl.sum(was_used * d, 0))


def floor_table(device: torch.device) -> Tensor:
    """int32 [128]: the floor number an achievement column says was entered (0: not a floor's).
    Made once when the env is built: a copy to the device inside a step would be a host sync."""
    table = torch.zeros(triton.next_power_of_2(C.NUM_ACHIEVEMENTS), dtype=torch.int32)
    for floor, column in enumerate(C.LEVEL_ACHIEVEMENTS[1:], start=1):
        table[column] = floor
    return table.to(device)


def account(s: State, floors: Tensor, reward_in: Tensor, terminated_in: Tensor, reward: Tensor, terminated: Tensor,
            truncated: Tensor, done: Tensor, elapsed: Tensor, episode_return: Tensor, episode_length: Tensor,
            reused: Tensor, max_t: int) -> Tensor:
    """The accounting of one step (see the module docstring) on the worlds ``s`` after the rules:
    ``floors`` (:func:`floor_table`); ``reward_in`` float32 [N] and ``terminated_in`` bool [N] the
    rules' result; writes ``reward``, ``terminated``, ``truncated`` and ``done`` (the step's result,
    bool [N]); updates ``elapsed``, ``episode_return``, ``episode_length`` in place; ``reused`` bool
    [N] (the episodes in used worlds). Returns the programs' sums, float64 [P, STATS]."""
    n = s.arena.shape[0]
    programs = triton.cdiv(n, BLOCK)
    partial = torch.empty((programs, STATS), dtype=torch.float64, device=s.arena.device)
    _account_kernel[(programs,)](
        s.arena, OFFSETS["achievements"], floors, reward_in, terminated_in.view(torch.int8), reward,
        terminated.view(torch.int8), truncated.view(torch.int8), done.view(torch.int8), elapsed, episode_return,
        episode_length, reused.view(torch.int8), partial, n, max_t, ROW=ROW_BYTES,
        ACH=triton.next_power_of_2(C.NUM_ACHIEVEMENTS), NUM_ACH=C.NUM_ACHIEVEMENTS, STATS=STATS, BLOCK=BLOCK)
    return partial
