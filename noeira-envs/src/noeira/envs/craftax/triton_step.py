"""Craftax-Classic's step as Triton kernels: one lane per world, the whole rule set of
:func:`noeira.envs.craftax.game.step` fused into one pass over the state.

:mod:`.game` (torch) is the reference: fed the same random variates, these kernels give the
same next state, reward and termination bit for bit (the tests replay the JAX reference's
recorded draws through both). Lanes are worlds (``BLOCK`` per program); every rule is the
torch code's masked arithmetic on ``[BLOCK]`` vectors, the state read and written in place
where it lives (the env's own tensors), the map and ``mob_map`` gathered and scattered per
lane. A world's cells are touched only by its own lane, in program order, so the reads see
the writes before them, as the torch code's sequence of in-place ops does.

- :func:`game_step` is ``game.step`` (the rules alone, variates from ``draws`` or from the
  kernel's own Philox stream), for the parity tests.
- :meth:`Step.env` adds what the env's ``step`` does around the rules (the time limit,
  episode sums, the done flags) and writes the compact observation of the state reached
  (:func:`noeira.envs.craftax.render.compact`) into ``final_obs`` and ``obs``;
  :meth:`Step.observe_reset` then writes the observation of the worlds that ended and were
  reset, from a queue the step kernel fills; :func:`observe` writes every world's;
  :func:`expand` turns compact observations into the 1,345 floats.

Rare work is queued, not branched on: the step kernel appends (one atomic per program) the
worlds whose spawn candidates all failed and the worlds that ended; the spawn-scan and
reset-observation kernels run a fixed grid of programs (a few per multiprocessor, so the
launch is the same for every step and recordable) that walk their queue. The spawn scan reads
the 27 x 27 window around the player as one tile. The observation kernels build each row as
byte tiles, so a program's rows are written as contiguous bytes.

Random variates in the kernel's own mode: Philox (``tl.rand``/``tl.randint``) keyed by a
device seed the env advances every step, counter = world x 8 + call: the same
distributions as :func:`game.sample_draws`, another stream.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import Tensor

from noeira.envs.craftax import constants as C

__all__ = ["BLOCK", "Step", "expand", "observe"]



def _const(value: int | float) -> object:
    """A module constant the kernels read: ``tl.constexpr`` for the compiler, the plain number
    under ``TRITON_INTERPRET=1`` (the interpreter computes with it as a Python value)."""
    return value if os.environ.get("TRITON_INTERPRET", "") == "1" else tl.constexpr(value)


BLOCK = 128
"""Worlds per program (one per thread at 4 warps)."""
LANES = _const(BLOCK)
SPAWN_BLOCK = 8
"""Queued worlds per program of the spawn kernel (each scans its window's cells as one tile)."""
OBS_BLOCK = 16
"""Worlds per program of the observation kernels (each builds its rows as tiles, see ``_write_compact``)."""
EXPAND_ROWS, EXPAND_WARPS = 4, 8
"""Rows per program and warps of :func:`expand`."""

# -- constants inside the kernels ------------------------------------------------------------------
GRASS = _const(C.GRASS)
WATER = _const(C.WATER)
STONE = _const(C.STONE)
TREE = _const(C.TREE)
PATH = _const(C.PATH)
COAL = _const(C.COAL)
IRON = _const(C.IRON)
DIAMOND = _const(C.DIAMOND)
TABLE = _const(C.CRAFTING_TABLE)
FURNACE = _const(C.FURNACE)
LAVA = _const(C.LAVA)
PLANT = _const(C.PLANT)
RIPE = _const(C.RIPE_PLANT)
OOB = _const(C.OUT_OF_BOUNDS)
SOLID = _const(sum(1 << b for b in C.SOLID_BLOCKS))
COW_BLOCKS = _const(1 << C.GRASS)  # where each kind spawns, as bit masks of block types
ZOMBIE_BLOCKS = _const((1 << C.GRASS) | (1 << C.PATH))
SKELETON_BLOCKS = _const(1 << C.PATH)
DESPAWN = _const(C.MOB_DESPAWN_DISTANCE)
A_WOOD = _const(C.A["collect_wood"])
A_TABLE = _const(C.A["place_table"])
A_COW = _const(C.A["eat_cow"])
A_SAPLING = _const(C.A["collect_sapling"])
A_DRINK = _const(C.A["collect_drink"])
A_WPICK = _const(C.A["make_wood_pickaxe"])
A_WSWORD = _const(C.A["make_wood_sword"])
A_PLANT = _const(C.A["place_plant"])
A_ZOMBIE = _const(C.A["defeat_zombie"])
A_STONE = _const(C.A["collect_stone"])
A_PSTONE = _const(C.A["place_stone"])
A_EAT_PLANT = _const(C.A["eat_plant"])
A_SKELETON = _const(C.A["defeat_skeleton"])
A_SPICK = _const(C.A["make_stone_pickaxe"])
A_SSWORD = _const(C.A["make_stone_sword"])
A_WAKE = _const(C.A["wake_up"])
A_FURNACE = _const(C.A["place_furnace"])
A_COAL = _const(C.A["collect_coal"])
A_IRON = _const(C.A["collect_iron"])
A_DIAMOND = _const(C.A["collect_diamond"])
A_IPICK = _const(C.A["make_iron_pickaxe"])
A_ISWORD = _const(C.A["make_iron_sword"])
ZOMBIE_HEALTH = _const(C.ZOMBIE_HEALTH)
COW_HEALTH = _const(C.COW_HEALTH)
SKELETON_HEALTH = _const(C.SKELETON_HEALTH)
COW_CHANCE = _const(C.SPAWN_COW_CHANCE)
SKELETON_CHANCE = _const(C.SPAWN_SKELETON_CHANCE)
TENTH = _const(float(torch.tensor(0.1, dtype=torch.float32)))  # the reward's 0.1, as float32
COMPACT = _const(148)
STATS = 25
"""The per-program sums the step kernel writes: ``TensorEnv._stats``' layout for this env (return,
length, count, then the 22 achievements in ``episode_stat_keys``' order, the state's bit order)."""
NUM_STATS = _const(STATS)


# -- lane helpers ----------------------------------------------------------------------------------
@triton.jit
def _not(x):
    return x == 0


@triton.jit
def _inb(x, y):
    return (x >= 0) & (x < 64) & (y >= 0) & (y < 64)


@triton.jit
def _cell(x, y):
    """The flat cell a read at (x, y) gathers (negative wrapped once, then clamped: JAX's gather)
    and whether a write there lands (inside after the wrap: JAX's scatter)."""
    x = tl.where(x < 0, x + 64, x)
    y = tl.where(y < 0, y + 64, y)
    ok = (x >= 0) & (x < 64) & (y >= 0) & (y < 64)
    idx = tl.minimum(tl.maximum(x, 0), 63) * 64 + tl.minimum(tl.maximum(y, 0), 63)
    return idx, ok


@triton.jit
def _solid(b):
    return ((SOLID >> (b & 31)) & 1) != 0


@triton.jit
def _free(mp, mm, base, x, y, px, py, live):
    """``is_position_in_bounds_not_in_wall_not_in_mob_not_in_lava``."""
    idx, _ok = _cell(x, y)
    blk = tl.load(mp + base + idx, mask=live, other=0).to(tl.int32)
    mob = tl.load(mm + base + idx, mask=live, other=0).to(tl.int32)
    in_mob = (mob != 0) | ((x == px) & (y == py))
    return _inb(x, y) & _not(_solid(blk)) & _not(in_mob) & (blk != LAVA)


@triton.jit
def _dx(d):
    """Row step of a direction (1 left, 2 right, 3 up, 4 down; others none)."""
    return tl.where(d == 3, -1, tl.where(d == 4, 1, 0))


@triton.jit
def _dy(d):
    return tl.where(d == 1, -1, tl.where(d == 2, 1, 0))


@triton.jit
def _mx(m):
    """Row step of a random move (0 left, 1 right, 2 up, 3 down, 4..7 none)."""
    return tl.where(m == 2, -1, tl.where(m == 3, 1, 0))


@triton.jit
def _my(m):
    return tl.where(m == 0, -1, tl.where(m == 1, 1, 0))


@triton.jit
def _sign(v):
    return (v > 0).to(tl.int32) - (v < 0).to(tl.int32)


@triton.jit
def _towards(x, y, px, py, u_axis):
    """One step towards the player along the further axis (either, at random, when as far)."""
    ddx = px - x
    ddy = py - y
    ax = tl.abs(ddx)
    ay = tl.abs(ddy)
    rows = (ax > ay) | ((ax == ay) & (u_axis < 0.5))
    return tl.where(rows, _sign(ddx), 0), tl.where(rows, 0, _sign(ddy))


@triton.jit
def _bit(ach, got, k):
    return ach | (got.to(tl.int32) << k)


@triton.jit
def _near(mp, base, px, py, block, live):
    """Whether one of the 8 cells around the player (inside the map) is ``block``."""
    found = px < -1000  # all False
    for k in tl.static_range(8):
        ox = 0 if k < 2 else (-1 if (k == 2 or k == 4 or k == 5) else 1)
        oy = (-1 if k == 0 else 1) if k < 2 else (0 if k < 4 else (-1 if (k == 4 or k == 6) else 1))
        x = px + ox
        y = py + oy
        inside = _inb(x, y)
        idx = tl.minimum(tl.maximum(x, 0), 63) * 64 + tl.minimum(tl.maximum(y, 0), 63)
        blk = tl.load(mp + base + idx, mask=live & inside, other=0).to(tl.int32)
        found = found | (inside & (blk == block))
    return found


@triton.jit
def _ld(p, off, live):
    return tl.load(p + off, mask=live, other=0).to(tl.int32)


@triton.jit
def _st(p, off, v, live):
    tl.store(p + off, v.to(p.dtype.element_ty), mask=live)


# -- spawning --------------------------------------------------------------------------------------
@triton.jit
def _spawn_cells(mp, mm, base, px, py, allowed, wdx, wdy, WSIZE: tl.constexpr, WPAD: tl.constexpr, need, u_pick):
    """Over a kind's window (the ``WSIZE`` offsets of ``wdx``/``wdy``, row-major: the cells at
    distance 4..13, or the far ring 10..13, from the player), the cells inside the map, of a block
    in ``allowed`` (a bit mask of block types) and without a mob: their count, and the row and
    column of the ``floor(u_pick * count)``-th (0-based). One pass over a [lanes, WPAD] tile of
    the window's cells alone (a 32 x 32 square around the player held 3 to 5 times the cells
    and the registers: the kernel ran one program per multiprocessor)."""
    j = tl.arange(0, WPAD)[None, :]
    jj = tl.minimum(j, WSIZE - 1)
    x = px[:, None] + tl.load(wdx + jj)
    y = py[:, None] + tl.load(wdy + jj)
    m = need[:, None] & (j < WSIZE) & (x >= 0) & (x < 64) & (y >= 0) & (y < 64)
    idx = x * 64 + y
    blk = tl.load(mp + base[:, None] + idx, mask=m, other=0).to(tl.int32)
    m = m & (((allowed >> (blk & 31)) & 1) != 0)
    mob = tl.load(mm + base[:, None] + idx, mask=m, other=1).to(tl.int32)  # only where the block fits
    v = (m & (mob == 0)).to(tl.int32)
    count = tl.sum(v, axis=1)
    pick = tl.minimum((u_pick * count.to(tl.float32)).to(tl.int32), tl.maximum(count - 1, 0))
    hit = (v != 0) & (tl.cumsum(v, axis=1) == (pick + 1)[:, None])
    selx = tl.sum(tl.where(hit, x, 0), axis=1)
    sely = tl.sum(tl.where(hit, y, 0), axis=1)
    return count, selx, sely


@triton.jit
def _cand(cand_p, seed, e, e64, live, kind: tl.constexpr, t, DRAWS: tl.constexpr):
    """Candidate ``t`` of a kind (``game``'s ``cand[:, kind, t]``): read, or drawn (and written)."""
    if DRAWS == 1:
        v = tl.load(cand_p + e64 * 24 + kind * 8 + t, mask=live, other=2.0)
    else:
        v = tl.rand(seed, e * 32 + 8 + kind * 8 + t)
        if DRAWS == 2:
            tl.store(cand_p + e64 * 24 + kind * 8 + t, v, mask=live)
    return v


@triton.jit
def _candidates(mp, mm, base, px, py, need, allowed, wdx, wdy, WSIZE: tl.constexpr, cand_p, seed, e, e64,
                kind: tl.constexpr, DRAWS: tl.constexpr):
    """The first of a kind's candidate cells that is free for it (in the window, on the map, an
    allowed block, no mob): (found, row, column)."""
    found = need & (px < -1000)
    fx = tl.zeros_like(px)
    fy = tl.zeros_like(px)
    for t in range(8):  # a loop, not unrolled: the step kernel compiles in a fraction of the time
        j = (_cand(cand_p, seed, e, e64, need, kind, t, DRAWS) * WSIZE).to(tl.int32)
        m = need & _not(found) & (j < WSIZE)
        jj = tl.minimum(j, WSIZE - 1)
        x = px + tl.load(wdx + jj, mask=m, other=0)
        y = py + tl.load(wdy + jj, mask=m, other=0)
        m = m & _inb(x, y)
        idx = tl.minimum(tl.maximum(x, 0), 63) * 64 + tl.minimum(tl.maximum(y, 0), 63)
        blk = tl.load(mp + base + idx, mask=m, other=0).to(tl.int32)
        mob = tl.load(mm + base + idx, mask=m, other=1).to(tl.int32)
        ok = m & (((allowed >> (blk & 31)) & 1) != 0) & (mob == 0)
        fx = tl.where(ok, x, fx)
        fy = tl.where(ok, y, fy)
        found = found | ok
    return found, fx, fy


@triton.jit
def _spawn(mp, mm, base, px, py, active, pos, hp, mask, e, SLOTS: tl.constexpr, allowed, full_health, u_go, u_pick,
           chance, wdx, wdy, WSIZE: tl.constexpr, WPAD: tl.constexpr, cand_p, seed, ei, kind: tl.constexpr,
           DRAWS: tl.constexpr, CANDIDATES: tl.constexpr, SCAN: tl.constexpr, tried):
    """One kind's spawn for the ``active`` lanes: where it has a free slot and its draw is under
    ``chance``, on its first free candidate cell (``CANDIDATES``, skipped for the lanes in
    ``tried``, whose candidates failed already), else (``SCAN``) on the ``floor(u_pick * count)``-th
    free cell of its window; then the first free slot's cell (slot 0's when all are taken)
    enters ``mob_map`` if that slot is alive (the reference's bookkeeping, quirk included).
    Returns the lanes that would spawn but found no candidate (``SCAN`` off: they are deferred,
    nothing of this kind done for them)."""
    slot = tl.zeros_like(px) + SLOTS  # the first free slot, SLOTS while none
    for i in tl.static_range(SLOTS):
        alive = _ld(mask, e * SLOTS + i, active) != 0
        slot = tl.where(_not(alive) & (slot == SLOTS), i, slot)
    has_free = slot < SLOTS
    slot = tl.where(has_free, slot, 0)
    need = active & has_free & (u_go < chance)
    found = need & (px < -1000)
    cx = tl.zeros_like(px)
    cy = tl.zeros_like(px)
    if CANDIDATES:
        found, cx, cy = _candidates(mp, mm, base, px, py, need & _not(tried), allowed, wdx, wdy, WSIZE, cand_p, seed,
                                    ei, e, kind, DRAWS)
    rest = need & _not(found)
    go = found
    if SCAN:
        if tl.max(rest.to(tl.int32), axis=0) > 0:  # (skeletons, mostly: path is rare in the far ring)
            count, sx, sy = _spawn_cells(mp, mm, base, px, py, allowed, wdx, wdy, WSIZE, WPAD, rest, u_pick)
            scan = rest & (count > 0)
            cx = tl.where(scan, sx, cx)
            cy = tl.where(scan, sy, cy)
            go = go | scan
        deferred = rest & (px < -1000)
    else:
        deferred = rest
    done_here = active & _not(deferred)
    _st(pos, (e * SLOTS + slot) * 2, cx, go)
    _st(pos, (e * SLOTS + slot) * 2 + 1, cy, go)
    _st(hp, e * SLOTS + slot, full_health + tl.zeros_like(px), go)
    _st(mask, e * SLOTS + slot, tl.zeros_like(px) + 1, go)
    alive = _ld(mask, e * SLOTS + slot, done_here) != 0
    sx = _ld(pos, (e * SLOTS + slot) * 2, done_here)
    sy = _ld(pos, (e * SLOTS + slot) * 2 + 1, done_here)
    sidx, sok = _cell(sx, sy)
    _st(mm, base + sidx, tl.zeros_like(px) + 1, done_here & sok & alive)
    return deferred


@triton.jit
def _attack(pos, hp, mask, e, SLOTS: tl.constexpr, bx, by, do, damage, live):
    """DO on a mob kind: the first alive slot at (bx, by) loses ``damage``; then every slot's mask
    is ``health > 0`` (the reference's quirk: despawned slots come back). Returns (hit, killed)."""
    target = tl.zeros_like(bx)
    hit_any = bx < -1000
    for i in tl.static_range(SLOTS):
        hit = (_ld(pos, (e * SLOTS + i) * 2, live) == bx) & (_ld(pos, (e * SLOTS + i) * 2 + 1, live) == by) & (
            _ld(mask, e * SLOTS + i, live) != 0)
        target = tl.where(hit & _not(hit_any), i, target)
        hit_any = hit_any | hit
    hit_any = hit_any & do
    was_alive = _ld(mask, e * SLOTS + target, live) != 0
    for i in tl.static_range(SLOTS):
        h = _ld(hp, e * SLOTS + i, live) - tl.where((target == i) & hit_any, damage, 0)
        _st(hp, e * SLOTS + i, h, live)
        m = tl.where(do, h > 0, _ld(mask, e * SLOTS + i, live) != 0)
        _st(mask, e * SLOTS + i, m.to(tl.int32), live)
    return hit_any, do & was_alive & (_ld(mask, e * SLOTS + target, live) == 0)


# -- the rules, in game.step's order ---------------------------------------------------------------
@triton.jit
def _u(u_p, e64, k: tl.constexpr, live):
    return tl.load(u_p + e64 * 17 + k, mask=live, other=1.0)


@triton.jit
def _keep(u_p, dirs_p, e64, live, u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15, u16,
          d0, d1, d2, d3, d4, d5, d6, d7):
    """Write the variates drawn into ``u_p`` [N, 17] and ``dirs_p`` [N, 8] (for the torch step to replay)."""
    tl.store(u_p + e64 * 17 + 0, u0, mask=live)
    tl.store(u_p + e64 * 17 + 1, u1, mask=live)
    tl.store(u_p + e64 * 17 + 2, u2, mask=live)
    tl.store(u_p + e64 * 17 + 3, u3, mask=live)
    tl.store(u_p + e64 * 17 + 4, u4, mask=live)
    tl.store(u_p + e64 * 17 + 5, u5, mask=live)
    tl.store(u_p + e64 * 17 + 6, u6, mask=live)
    tl.store(u_p + e64 * 17 + 7, u7, mask=live)
    tl.store(u_p + e64 * 17 + 8, u8, mask=live)
    tl.store(u_p + e64 * 17 + 9, u9, mask=live)
    tl.store(u_p + e64 * 17 + 10, u10, mask=live)
    tl.store(u_p + e64 * 17 + 11, u11, mask=live)
    tl.store(u_p + e64 * 17 + 12, u12, mask=live)
    tl.store(u_p + e64 * 17 + 13, u13, mask=live)
    tl.store(u_p + e64 * 17 + 14, u14, mask=live)
    tl.store(u_p + e64 * 17 + 15, u15, mask=live)
    tl.store(u_p + e64 * 17 + 16, u16, mask=live)
    _st(dirs_p, e64 * 8 + 0, d0, live)
    _st(dirs_p, e64 * 8 + 1, d1, live)
    _st(dirs_p, e64 * 8 + 2, d2, live)
    _st(dirs_p, e64 * 8 + 3, d3, live)
    _st(dirs_p, e64 * 8 + 4, d4, live)
    _st(dirs_p, e64 * 8 + 5, d5, live)
    _st(dirs_p, e64 * 8 + 6, d6, live)
    _st(dirs_p, e64 * 8 + 7, d7, live)


@triton.jit
def _variates(e, e64, live, u_p, dirs_p, seed, DRAWS: tl.constexpr):
    """``game.sample_draws``' variates of the lanes: ``u`` (17 uniforms: u0 the sapling, u1..u6
    the zombies' axis and chase draws, u7..u10 the skeletons', u11..u13 the spawn go draws, u14..u16
    the spawn picks) and ``dirs`` (8 moves in 0..7: zombies, cows, skeletons). Read (``DRAWS`` 1),
    or drawn from the kernel's Philox stream on counters ``e * 32 + 0..6`` (8..31 are the spawn
    candidates') and, with ``DRAWS`` 2, written out too."""
    if DRAWS == 1:
        u0 = _u(u_p, e64, 0, live)
        u1 = _u(u_p, e64, 1, live)
        u2 = _u(u_p, e64, 2, live)
        u3 = _u(u_p, e64, 3, live)
        u4 = _u(u_p, e64, 4, live)
        u5 = _u(u_p, e64, 5, live)
        u6 = _u(u_p, e64, 6, live)
        u7 = _u(u_p, e64, 7, live)
        u8 = _u(u_p, e64, 8, live)
        u9 = _u(u_p, e64, 9, live)
        u10 = _u(u_p, e64, 10, live)
        u11 = _u(u_p, e64, 11, live)
        u12 = _u(u_p, e64, 12, live)
        u13 = _u(u_p, e64, 13, live)
        u14 = _u(u_p, e64, 14, live)
        u15 = _u(u_p, e64, 15, live)
        u16 = _u(u_p, e64, 16, live)
        d0 = _ld(dirs_p, e64 * 8 + 0, live)
        d1 = _ld(dirs_p, e64 * 8 + 1, live)
        d2 = _ld(dirs_p, e64 * 8 + 2, live)
        d3 = _ld(dirs_p, e64 * 8 + 3, live)
        d4 = _ld(dirs_p, e64 * 8 + 4, live)
        d5 = _ld(dirs_p, e64 * 8 + 5, live)
        d6 = _ld(dirs_p, e64 * 8 + 6, live)
        d7 = _ld(dirs_p, e64 * 8 + 7, live)
    else:
        off = e * 32
        u0, u1, u2, u3 = tl.rand4x(seed, off)
        u4, u5, u6, u7 = tl.rand4x(seed, off + 1)
        u8, u9, u10, u11 = tl.rand4x(seed, off + 2)
        u12, u13, u14, u15 = tl.rand4x(seed, off + 3)
        u16, _x1, _x2, _x3 = tl.rand4x(seed, off + 4)
        r0, r1, r2, r3 = tl.randint4x(seed, off + 5)
        r4, r5, r6, r7 = tl.randint4x(seed, off + 6)
        d0 = (r0 >> 29).to(tl.int32)
        d1 = (r1 >> 29).to(tl.int32)
        d2 = (r2 >> 29).to(tl.int32)
        d3 = (r3 >> 29).to(tl.int32)
        d4 = (r4 >> 29).to(tl.int32)
        d5 = (r5 >> 29).to(tl.int32)
        d6 = (r6 >> 29).to(tl.int32)
        d7 = (r7 >> 29).to(tl.int32)
        if DRAWS == 2:
            _keep(u_p, dirs_p, e64, live, u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15, u16,
                  d0, d1, d2, d3, d4, d5, d6, d7)
    return u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15, u16, d0, d1, d2, d3, d4, d5, d6, d7


@triton.jit
def _make(a, action: tl.constexpr, can, wood, stone, coal, iron, tool, ach, bit: tl.constexpr,
          STONE_TOO: tl.constexpr, IRON_TOO: tl.constexpr):
    """One recipe: under ``action`` where ``can``, a wood (and stone, and iron and coal) tool is
    made from one of each material; its achievement bit set."""
    made = (a == action) & can
    m = made.to(tl.int32)
    wood -= m
    if STONE_TOO:
        stone -= m
    if IRON_TOO:
        iron -= m
        coal -= m
    return wood, stone, coal, iron, tool + m, _bit(ach, made, bit)


@triton.jit
def _craft(mp, base, px, py, live, a, wood, stone, coal, iron, wpick, spick, ipick, wsword, ssword, isword, ach):
    """``game._craft``: next to a table (and a furnace for iron tools), with the materials; the
    actions exclude each other, so each recipe reads the inventory it starts with."""
    table = _near(mp, base, px, py, TABLE, live)
    furnace = _near(mp, base, px, py, FURNACE, live)
    can_wood = table & (wood >= 1)
    can_stone = can_wood & (stone >= 1)
    can_iron = can_stone & furnace & (iron >= 1) & (coal >= 1)
    wood, stone, coal, iron, wpick, ach = _make(a, 11, can_wood, wood, stone, coal, iron, wpick, ach, A_WPICK,
                                                False, False)
    wood, stone, coal, iron, spick, ach = _make(a, 12, can_stone, wood, stone, coal, iron, spick, ach, A_SPICK,
                                                True, False)
    wood, stone, coal, iron, ipick, ach = _make(a, 13, can_iron, wood, stone, coal, iron, ipick, ach, A_IPICK,
                                                True, True)
    wood, stone, coal, iron, wsword, ach = _make(a, 14, can_wood, wood, stone, coal, iron, wsword, ach, A_WSWORD,
                                                 False, False)
    wood, stone, coal, iron, ssword, ach = _make(a, 15, can_stone, wood, stone, coal, iron, ssword, ach, A_SSWORD,
                                                 True, False)
    wood, stone, coal, iron, isword, ach = _make(a, 16, can_iron, wood, stone, coal, iron, isword, ach, A_ISWORD,
                                                 True, True)
    return wood, stone, coal, iron, wpick, spick, ipick, wsword, ssword, isword, ach


@triton.jit
def _do(mp, mm, base, e64, live, px, py, pdir, a, u_sapling, zpos, zhp, zmask, cpos, chp, cmask, spos, shp, smask,
        plpos, plage, food, drink, hunger, thirst, wood, stone, coal, iron, diamond, sapling, wpick, spick, ipick,
        wsword, ssword, isword, ach):
    """``game._do``: attack the mob in front (zombies, cows, skeletons: the first alive one there),
    else mine, collect, drink or eat the block in front."""
    do = a == 5
    bx = px + _dx(pdir)
    by = py + _dy(pdir)
    damage = tl.maximum(tl.maximum(tl.maximum(tl.zeros_like(px) + 1, 2 * wsword), 3 * ssword), 5 * isword)
    hit_z, killed_z = _attack(zpos, zhp, zmask, e64, 3, bx, by, do, damage, live)
    ach = _bit(ach, killed_z, A_ZOMBIE)
    hit_c, killed_c = _attack(cpos, chp, cmask, e64, 3, bx, by, do, damage, live)
    ach = _bit(ach, killed_c, A_COW)
    food = tl.where(killed_c, tl.minimum(food + 6, 9), food)
    hunger = tl.where(killed_c, 0.0, hunger)
    hit_s, killed_s = _attack(spos, shp, smask, e64, 2, bx, by, do, damage, live)
    ach = _bit(ach, killed_s, A_SKELETON)
    attacked = hit_z | hit_c | hit_s
    bidx, bok = _cell(bx, by)
    _st(mm, base + bidx, tl.zeros_like(px), live & bok & (killed_z | killed_c | killed_s))
    block = _ld(mp, base + bidx, live)
    ok = do & _inb(bx, by) & _not(attacked)
    got_tree = ok & (block == TREE)
    got_stone = ok & (block == STONE) & (wpick > 0)
    got_coal = ok & (block == COAL) & (wpick > 0)
    got_iron = ok & (block == IRON) & (spick > 0)
    got_diamond = ok & (block == DIAMOND) & (ipick > 0)
    got_sapling = ok & (block == GRASS) & (u_sapling < 0.1)
    got_water = ok & (block == WATER)
    got_ripe = ok & (block == RIPE)
    mined = got_stone | got_coal | got_iron | got_diamond
    new_block = tl.where(got_tree, GRASS, tl.where(mined, PATH, tl.where(got_ripe, PLANT, block)))
    _st(mp, base + bidx, new_block, live & bok)
    wood += got_tree.to(tl.int32)
    stone += got_stone.to(tl.int32)
    coal += got_coal.to(tl.int32)
    iron += got_iron.to(tl.int32)
    diamond += got_diamond.to(tl.int32)
    sapling += got_sapling.to(tl.int32)
    ach = _bit(ach, got_tree, A_WOOD)
    ach = _bit(ach, got_stone, A_STONE)
    ach = _bit(ach, got_coal, A_COAL)
    ach = _bit(ach, got_iron, A_IRON)
    ach = _bit(ach, got_diamond, A_DIAMOND)
    ach = _bit(ach, got_sapling, A_SAPLING)
    ach = _bit(ach, got_water, A_DRINK)
    ach = _bit(ach, got_ripe, A_EAT_PLANT)
    drink = tl.where(got_water, tl.minimum(drink + 1, 9), drink)
    thirst = tl.where(got_water, 0.0, thirst)
    food = tl.where(got_ripe, tl.minimum(food + 4, 9), food)
    hunger = tl.where(got_ripe, 0.0, hunger)
    # the eaten plant grows again: the first plant slot at that cell (slot 0 if none)
    first = tl.zeros_like(px) + 10
    for i in range(10):
        at = (_ld(plpos, (e64 * 10 + i) * 2, live) == bx) & (_ld(plpos, (e64 * 10 + i) * 2 + 1, live) == by)
        first = tl.where(at & (first == 10), i, first)
    first = tl.where(first == 10, 0, first)
    _st(plage, e64 * 10 + first, tl.zeros_like(px), live & got_ripe)
    return food, drink, hunger, thirst, wood, stone, coal, iron, diamond, sapling, ach


@triton.jit
def _place(mp, mm, base, e64, live, px, py, pdir, a, plpos, plage, plmask, wood, stone, sapling, ach):
    """``game._place``: stone (also into water), a table, a furnace, a sapling on grass, in front."""
    bx = px + _dx(pdir)
    by = py + _dy(pdir)
    bidx, bok = _cell(bx, by)
    block = _ld(mp, base + bidx, live)
    wall = _solid(block)
    mob_there = (_ld(mm, base + bidx, live) != 0) | ((bx == px) & (by == py))
    ok = _inb(bx, by) & _not(mob_there)
    put_table = ok & (a == 8) & _not(wall) & (wood >= 2)
    put_furnace = ok & (a == 9) & _not(wall) & (stone > 0)
    put_stone = ok & (a == 7) & ((block == WATER) | _not(wall)) & (stone > 0)
    put_plant = ok & (a == 10) & (block == GRASS) & (sapling > 0)
    new_block = tl.where(put_table, TABLE, tl.where(put_furnace, FURNACE, tl.where(put_stone, STONE, tl.where(
        put_plant, PLANT, block))))
    _st(mp, base + bidx, new_block, live & bok)
    wood -= 2 * put_table.to(tl.int32)
    stone -= (put_furnace | put_stone).to(tl.int32)
    sapling -= put_plant.to(tl.int32)
    ach = _bit(ach, put_table, A_TABLE)
    ach = _bit(ach, put_furnace, A_FURNACE)
    ach = _bit(ach, put_stone, A_PSTONE)
    ach = _bit(ach, put_plant, A_PLANT)
    slot = tl.zeros_like(px) + 10
    for i in range(10):
        slot = tl.where((_ld(plmask, e64 * 10 + i, live) == 0) & (slot == 10), i, slot)
    adding = put_plant & (slot < 10)
    slot = tl.where(slot == 10, 0, slot)
    _st(plpos, (e64 * 10 + slot) * 2, bx, live & adding)
    _st(plpos, (e64 * 10 + slot) * 2 + 1, by, live & adding)
    _st(plage, e64 * 10 + slot, tl.zeros_like(px), live & adding)
    _st(plmask, e64 * 10 + slot, tl.zeros_like(px) + 1, live & adding)
    return wood, stone, sapling, ach


@triton.jit
def _move(mp, mm, base, live, px, py, pdir, a):
    """Movement: onto a free cell, or onto lava (where the player dies); a move action turns."""
    sx = _dx(a)
    sy = _dy(a)
    qx = px + sx
    qy = py + sy
    qidx, _qok = _cell(qx, qy)
    moves = _free(mp, mm, base, qx, qy, px, py, live) | (_ld(mp, base + qidx, live) == LAVA)
    px = px + sx * moves.to(tl.int32)
    py = py + sy * moves.to(tl.int32)
    pdir = tl.where((a >= 1) & (a <= 4), a, pdir)
    return px, py, pdir


@triton.jit
def _relocate(mm, base, live, pos, mask_p, o, x, y, nx, ny, alive, now):
    """A mob slot's move: it leaves ``mob_map`` at (x, y) where it was alive, enters it at (nx, ny)
    where it still is (``now``); its position and mask written."""
    oidx, ook = _cell(x, y)
    nidx, nok = _cell(nx, ny)
    _st(mm, base + oidx, tl.zeros_like(x), live & ook & alive)
    _st(mm, base + nidx, tl.zeros_like(x) + 1, live & nok & now)
    _st(pos, o * 2, nx, live)
    _st(pos, o * 2 + 1, ny, live)
    _st(mask_p, o, now.to(tl.int32), live)


@triton.jit
def _zombies(mp, mm, base, e64, live, px, py, zpos, zmask, zcd, u1, u2, u3, u4, u5, u6, d0, d1, d2, health,
             sleeping, ach):
    """``game._zombies``: chase the player (75%) when close, else wander; attack when adjacent
    (more damage to a sleeper, who wakes)."""
    for i in range(3):  # loops over slots stay loops (not unrolled): the kernel compiles much faster
        o = e64 * 3 + i
        x = _ld(zpos, o * 2, live)
        y = _ld(zpos, o * 2 + 1, live)
        alive = _ld(zmask, o, live) != 0
        cd = _ld(zcd, o, live)
        dm = tl.where(i == 0, d0, tl.where(i == 1, d1, d2)) % 4
        ua = tl.where(i == 0, u1, tl.where(i == 1, u2, u3))
        uc = tl.where(i == 0, u4, tl.where(i == 1, u5, u6))
        cx, cy = _towards(x, y, px, py, ua)
        dist = tl.abs(x - px) + tl.abs(y - py)
        chase = (dist < 10) & (uc < 0.75)
        qx = tl.where(chase, x + cx, x + _mx(dm))
        qy = tl.where(chase, y + cy, y + _my(dm))
        attack = (dist == 1) & (cd <= 0) & alive
        qx = tl.where(attack, x, qx)
        qy = tl.where(attack, y, qy)
        health -= tl.where(sleeping, 7, 2) * attack.to(tl.int32)
        ach = _bit(ach, sleeping & attack, A_WAKE)
        sleeping = sleeping & _not(attack)
        _st(zcd, o, tl.where(attack, 5, cd - 1), live)
        free = _free(mp, mm, base, qx, qy, px, py, live)
        _relocate(mm, base, live, zpos, zmask, o, x, y, tl.where(free, qx, x), tl.where(free, qy, y), alive,
                  alive & (dist < DESPAWN))
    return health, sleeping, ach


@triton.jit
def _cows(mp, mm, base, e64, live, px, py, cpos, cmask, d3, d4, d5):
    """``game._cows``: wander (or stand still)."""
    for i in range(3):
        o = e64 * 3 + i
        x = _ld(cpos, o * 2, live)
        y = _ld(cpos, o * 2 + 1, live)
        alive = _ld(cmask, o, live) != 0
        dm = tl.where(i == 0, d3, tl.where(i == 1, d4, d5))
        qx = x + _mx(dm)
        qy = y + _my(dm)
        free = _free(mp, mm, base, qx, qy, px, py, live)
        _relocate(mm, base, live, cpos, cmask, o, x, y, tl.where(free, qx, x), tl.where(free, qy, y), alive,
                  alive & (tl.abs(x - px) + tl.abs(y - py) < DESPAWN))


@triton.jit
def _skeletons(mp, mm, base, e64, live, px, py, spos, smask, scd, apos, amask, adir, u7, u8, u9, u10, d6, d7):
    """``game._skeletons``: keep their distance (back off when close, come nearer when far, else
    wander), shoot an arrow at distance 4..5 (or when cornered) if an arrow slot is free."""
    for i in range(2):
        o = e64 * 2 + i
        x = _ld(spos, o * 2, live)
        y = _ld(spos, o * 2 + 1, live)
        alive = _ld(smask, o, live) != 0
        cd = _ld(scd, o, live)
        dm = tl.where(i == 0, d6, d7) % 4
        ua = tl.where(i == 0, u7, u8)
        uc = tl.where(i == 0, u9, u10)
        rx = x + _mx(dm)
        ry = y + _my(dm)
        cx, cy = _towards(x, y, px, py, ua)
        dist = tl.abs(x - px) + tl.abs(y - py)
        far = dist >= 10
        close = dist <= 3
        qx = tl.where(close, x - cx, tl.where(far, x + cx, rx))
        qy = tl.where(close, y - cy, tl.where(far, y + cy, ry))
        considered = uc > 0.85
        qx = tl.where(considered, qx, rx)
        qy = tl.where(considered, qy, ry)
        attack = ((dist >= 4) & (dist <= 5)) | (close & _not(_free(mp, mm, base, qx, qy, px, py, live)))
        attack = attack & (cd <= 0) & alive
        arrows = tl.zeros_like(px)
        aslot = tl.zeros_like(px) + 3
        for j in range(3):
            am = _ld(amask, e64 * 3 + j, live) != 0
            arrows += am.to(tl.int32)
            aslot = tl.where(_not(am) & (aslot == 3), j, aslot)
        shoot = attack & (arrows < 3)
        aslot = tl.where(aslot == 3, 0, aslot)
        ao = e64 * 3 + aslot
        _st(apos, ao * 2, x, live & shoot)
        _st(apos, ao * 2 + 1, y, live & shoot)
        _st(amask, ao, tl.zeros_like(px) + 1, live & shoot)
        _st(adir, ao * 2, cx, live & shoot)
        _st(adir, ao * 2 + 1, cy, live & shoot)
        qx = tl.where(attack, x, qx)
        qy = tl.where(attack, y, qy)
        _st(scd, o, tl.where(attack, 4, cd - 1), live)
        free = _free(mp, mm, base, qx, qy, px, py, live)
        _relocate(mm, base, live, spos, smask, o, x, y, tl.where(free, qx, x), tl.where(free, qy, y), alive,
                  alive & (dist < DESPAWN))


@triton.jit
def _arrows(mp, mm, base, e64, live, px, py, apos, amask, adir, health, sleeping):
    """``game._arrows``: every slot flies on (dead ones too); an alive arrow hurts the player (who
    wakes) and breaks tables and furnaces; it stays alive while its cell is free."""
    for i in range(3):
        o = e64 * 3 + i
        x = _ld(apos, o * 2, live) + _ld(adir, o * 2, live)
        y = _ld(apos, o * 2 + 1, live) + _ld(adir, o * 2 + 1, live)
        alive = _ld(amask, o, live) != 0
        idx, ok = _cell(x, y)
        blk = _ld(mp, base + idx, live)
        on_player = (x == px) & (y == py)
        blocked = (_solid(blk) & (blk != WATER)) | (_ld(mm, base + idx, live) != 0) | on_player
        hit = on_player & alive
        breaks = alive & ((blk == FURNACE) | (blk == TABLE))
        _st(mp, base + idx, tl.zeros_like(px) + PATH, live & ok & breaks)
        health -= 2 * hit.to(tl.int32)
        sleeping = sleeping & _not(hit)
        _st(amask, o, (_inb(x, y) & _not(blocked) & alive).to(tl.int32), live)
        _st(apos, o * 2, x, live)
        _st(apos, o * 2 + 1, y, live)
    return health, sleeping


@triton.jit
def _spawns(mp, mm, base, e, e64, live, px, py, ts, zchance_table, max_t, cpos, chp, cmask, zpos, zhp, zmask, spos,
            shp, smask, u11, u12, u13, u14, u15, u16, wdx, wdy, fdx, fdy, cand_p, seed, deferred_p,
            DRAWS: tl.constexpr):
    """``game._spawn``: a cow on grass, a zombie on grass or path (more at night), a skeleton on
    path, kind after kind, on the first free candidate cell; a world whose candidates all fail
    leaves that kind and the next ones to the spawn kernel, which scans the window. Returns the
    lanes queued for it (each with the first kind it defers in ``deferred_p``)."""
    chance_zombie = tl.load(zchance_table + tl.minimum(ts, max_t), mask=live, other=0.0)
    nope = px < -1000
    d_cow = _spawn(mp, mm, base, px, py, live, cpos, chp, cmask, e64, 3, COW_BLOCKS, COW_HEALTH, u11, u14,
                   COW_CHANCE, wdx, wdy, 340, 512, cand_p, seed, e, 0, DRAWS, True, False, nope)
    d_zombie = _spawn(mp, mm, base, px, py, live & _not(d_cow), zpos, zhp, zmask, e64, 3, ZOMBIE_BLOCKS,
                      ZOMBIE_HEALTH, u12, u15, chance_zombie, fdx, fdy, 184, 256, cand_p, seed, e, 1, DRAWS, True, False,
                      nope)
    queued = d_cow | d_zombie
    d_skeleton = _spawn(mp, mm, base, px, py, live & _not(queued), spos, shp, smask, e64, 2, SKELETON_BLOCKS,
                        SKELETON_HEALTH, u13, u16, SKELETON_CHANCE, fdx, fdy, 184, 256, cand_p, seed, e, 2, DRAWS, True,
                        False, nope)
    queued = queued | d_skeleton
    _st(deferred_p, e64, tl.where(d_cow, 0, tl.where(d_zombie, 1, 2)), queued)
    return queued


@triton.jit
def _plants(mp, base, e64, live, plpos, plage, plmask):
    """``game._plants``: planted saplings age; at 600 steps their cell is a ripe plant."""
    for i in range(10):
        o = e64 * 10 + i
        pm = _ld(plmask, o, live)
        age = (_ld(plage, o, live) + 1) * pm
        age = ((age + 32768) & 65535) - 32768  # int16, as the state keeps it
        _st(plage, o, age, live)
        pidx, pok = _cell(_ld(plpos, o * 2, live), _ld(plpos, o * 2 + 1, live))
        _st(mp, base + pidx, tl.zeros_like(age) + RIPE, live & pok & (age >= 600))


@triton.jit
def _intrinsics(a, sleeping, health, food, drink, energy, recover, hunger, thirst, fatigue, ach):
    """``game._intrinsics``: falling asleep and waking, hunger, thirst, fatigue, recovery."""
    sleeping = sleeping | ((a == 6) & (energy < 9))
    wake = (energy >= 9) & sleeping
    sleeping = sleeping & _not(wake)
    ach = _bit(ach, wake, A_WAKE)
    rate = tl.where(sleeping, 0.5, 1.0)
    hunger = hunger + rate
    over = hunger > 25.0
    food = tl.where(over, tl.maximum(food - 1, 0), food)
    hunger = tl.where(over, 0.0, hunger)
    thirst = thirst + rate
    over = thirst > 20.0
    drink = tl.where(over, tl.maximum(drink - 1, 0), drink)
    thirst = tl.where(over, 0.0, thirst)
    fatigue = tl.where(sleeping, tl.minimum(fatigue - 1.0, 0.0), fatigue + 1.0)
    tired = fatigue > 30.0
    rested = fatigue < -10.0
    energy = tl.where(tired, tl.maximum(energy - 1, 0), tl.where(rested, tl.minimum(energy + 1, 9), energy))
    fatigue = tl.where(tired | rested, 0.0, fatigue)
    fine = (food > 0) & (drink > 0) & ((energy > 0) | sleeping)
    recover = recover + tl.where(fine, tl.where(sleeping, 2.0, 1.0), tl.where(sleeping, -0.5, -1.0))
    up = recover > 25.0
    down = recover < -15.0
    health = tl.where(up, tl.minimum(health + 1, 9), tl.where(down, health - 1, health))
    recover = tl.where(up | down, 0.0, recover)
    return sleeping, health, food, drink, energy, recover, hunger, thirst, fatigue, ach


@triton.jit
def _reward(health, init_health, ach, init_ach):
    """Achievements newly unlocked + 0.1 x the change of health: one fused multiply-add in
    float64 rounded to float32 (XLA fuses it in float32 with one rounding)."""
    gained = tl.zeros_like(health)
    new = ach & ~init_ach
    for k in range(22):
        gained += (new >> k) & 1
    return ((health - init_health).to(tl.float64) * TENTH + gained.to(tl.float64)).to(tl.float32)


@triton.jit
def _inventory(inv_p, e64, live):
    """The 12 inventory counts (wood, stone, coal, iron, diamond, sapling, the pickaxes, the swords)."""
    return (_ld(inv_p, e64 * 12 + 0, live), _ld(inv_p, e64 * 12 + 1, live), _ld(inv_p, e64 * 12 + 2, live),
            _ld(inv_p, e64 * 12 + 3, live), _ld(inv_p, e64 * 12 + 4, live), _ld(inv_p, e64 * 12 + 5, live),
            _ld(inv_p, e64 * 12 + 6, live), _ld(inv_p, e64 * 12 + 7, live), _ld(inv_p, e64 * 12 + 8, live),
            _ld(inv_p, e64 * 12 + 9, live), _ld(inv_p, e64 * 12 + 10, live), _ld(inv_p, e64 * 12 + 11, live))


@triton.jit
def _store_inventory(inv_p, e64, live, wood, stone, coal, iron, diamond, sapling, wpick, spick, ipick, wsword,
                     ssword, isword):
    """The inventory, each count capped at 9."""
    _st(inv_p, e64 * 12 + 0, tl.minimum(wood, 9), live)
    _st(inv_p, e64 * 12 + 1, tl.minimum(stone, 9), live)
    _st(inv_p, e64 * 12 + 2, tl.minimum(coal, 9), live)
    _st(inv_p, e64 * 12 + 3, tl.minimum(iron, 9), live)
    _st(inv_p, e64 * 12 + 4, tl.minimum(diamond, 9), live)
    _st(inv_p, e64 * 12 + 5, tl.minimum(sapling, 9), live)
    _st(inv_p, e64 * 12 + 6, tl.minimum(wpick, 9), live)
    _st(inv_p, e64 * 12 + 7, tl.minimum(spick, 9), live)
    _st(inv_p, e64 * 12 + 8, tl.minimum(ipick, 9), live)
    _st(inv_p, e64 * 12 + 9, tl.minimum(wsword, 9), live)
    _st(inv_p, e64 * 12 + 10, tl.minimum(ssword, 9), live)
    _st(inv_p, e64 * 12 + 11, tl.minimum(isword, 9), live)


@triton.jit
def _rules(e, live, action_p,
           mp, mm, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p, recover_p, hunger_p, thirst_p,
           fatigue_p, inv_p, zpos, zhp, zmask, zcd, cpos, chp, cmask, spos, shp, smask, scd, apos, amask, adir,
           plpos, plage, plmask, light_p, ach_p, ts_p, light_table, zchance_table, max_t, wdx, wdy, fdx, fdy,
           u_p, dirs_p, cand_p, seed_p, deferred_p, DRAWS: tl.constexpr):
    """``game.step`` for the lanes ``e`` (``live`` inside num_envs), in place, but for the spawns
    that need a scan of the window: the helpers above in its order. Returns (reward float32,
    terminated, the achievements bits, the lanes queued for the spawn kernel)."""
    e64 = e.to(tl.int64)
    base = e64 * 4096
    if DRAWS == 1:
        seed = 0  # (unused: the variates are read)
    else:
        seed = tl.load(seed_p)
    u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15, u16, d0, d1, d2, d3, d4, d5, d6, d7 = (
        _variates(e, e64, live, u_p, dirs_p, seed, DRAWS))

    # -- the state this step starts from
    px = _ld(ppos, e64 * 2, live)
    py = _ld(ppos, e64 * 2 + 1, live)
    pdir = _ld(pdir_p, e64, live)
    health = _ld(health_p, e64, live)
    food = _ld(food_p, e64, live)
    drink = _ld(drink_p, e64, live)
    energy = _ld(energy_p, e64, live)
    sleeping = _ld(sleep_p, e64, live) != 0
    recover = tl.load(recover_p + e64, mask=live, other=0.0)
    hunger = tl.load(hunger_p + e64, mask=live, other=0.0)
    thirst = tl.load(thirst_p + e64, mask=live, other=0.0)
    fatigue = tl.load(fatigue_p + e64, mask=live, other=0.0)
    wood, stone, coal, iron, diamond, sapling, wpick, spick, ipick, wsword, ssword, isword = _inventory(inv_p, e64, live)
    ach = tl.zeros_like(px)
    for k in range(22):
        ach = ach | ((_ld(ach_p, e64 * 22 + k, live) != 0).to(tl.int32) << k)
    init_ach = ach
    init_health = health
    ts = _ld(ts_p, e64, live)
    a = tl.where(sleeping, 0, _ld(action_p, e64, live))  # a sleeping player does nothing

    wood, stone, coal, iron, wpick, spick, ipick, wsword, ssword, isword, ach = _craft(
        mp, base, px, py, live, a, wood, stone, coal, iron, wpick, spick, ipick, wsword, ssword, isword, ach)
    food, drink, hunger, thirst, wood, stone, coal, iron, diamond, sapling, ach = _do(
        mp, mm, base, e64, live, px, py, pdir, a, u0, zpos, zhp, zmask, cpos, chp, cmask, spos, shp, smask, plpos,
        plage, food, drink, hunger, thirst, wood, stone, coal, iron, diamond, sapling, wpick, spick, ipick, wsword,
        ssword, isword, ach)
    wood, stone, sapling, ach = _place(mp, mm, base, e64, live, px, py, pdir, a, plpos, plage, plmask, wood, stone,
                                       sapling, ach)
    px, py, pdir = _move(mp, mm, base, live, px, py, pdir, a)
    health, sleeping, ach = _zombies(mp, mm, base, e64, live, px, py, zpos, zmask, zcd, u1, u2, u3, u4, u5, u6, d0,
                                     d1, d2, health, sleeping, ach)
    _cows(mp, mm, base, e64, live, px, py, cpos, cmask, d3, d4, d5)
    _skeletons(mp, mm, base, e64, live, px, py, spos, smask, scd, apos, amask, adir, u7, u8, u9, u10, d6, d7)
    health, sleeping = _arrows(mp, mm, base, e64, live, px, py, apos, amask, adir, health, sleeping)
    queued = _spawns(mp, mm, base, e, e64, live, px, py, ts, zchance_table, max_t, cpos, chp, cmask, zpos, zhp, zmask,
                     spos, shp, smask, u11, u12, u13, u14, u15, u16, wdx, wdy, fdx, fdy, cand_p, seed, deferred_p,
                     DRAWS)
    _plants(mp, base, e64, live, plpos, plage, plmask)
    sleeping, health, food, drink, energy, recover, hunger, thirst, fatigue, ach = _intrinsics(
        a, sleeping, health, food, drink, energy, recover, hunger, thirst, fatigue, ach)

    # -- lava, the reward, the clock
    pidx, _pok = _cell(px, py)
    on_lava = _ld(mp, base + pidx, live) == LAVA
    health = tl.maximum(tl.where(on_lava, 0, health), 0)
    reward = _reward(health, init_health, ach, init_ach)
    ts = ts + 1
    light = tl.load(light_table + tl.minimum(ts, max_t), mask=live, other=0.0)
    terminated = (health <= 0) | on_lava

    # -- write the state back
    _st(ppos, e64 * 2, px, live)
    _st(ppos, e64 * 2 + 1, py, live)
    _st(pdir_p, e64, pdir, live)
    _st(health_p, e64, health, live)
    _st(food_p, e64, food, live)
    _st(drink_p, e64, drink, live)
    _st(energy_p, e64, energy, live)
    _st(sleep_p, e64, sleeping.to(tl.int32), live)
    tl.store(recover_p + e64, recover, mask=live)
    tl.store(hunger_p + e64, hunger, mask=live)
    tl.store(thirst_p + e64, thirst, mask=live)
    tl.store(fatigue_p + e64, fatigue, mask=live)
    _store_inventory(inv_p, e64, live, wood, stone, coal, iron, diamond, sapling, wpick, spick, ipick, wsword, ssword,
                     isword)
    for k in range(22):
        _st(ach_p, e64 * 22 + k, (ach >> k) & 1, live)
    _st(ts_p, e64, ts, live)
    tl.store(light_p + e64, light, mask=live)
    return reward, terminated, ach, queued


# -- the compact observation -----------------------------------------------------------------------
@triton.jit
def _mob_codes(pos, mask, slots, e64, live, px, py, i):
    """Slot ``i`` of each kind (``pos``, ``mask``, ``slots``: [1, 4], the kinds' state and slot
    counts) as its view cell ``cell * 2 + on``, [lanes, 4]; -2 where its wrapped local index leaves
    the view or the kind has no slot ``i``. The reference scatters each slot's flag at its cell,
    alive and on screen or not."""
    has = live & (i < slots)
    o = e64 * slots + i
    lx = tl.load(pos + o * 2, mask=has, other=0).to(tl.int32) - px + 3
    ly = tl.load(pos + o * 2 + 1, mask=has, other=0).to(tl.int32) - py + 4
    on = (lx >= 0) & (lx < 7) & (ly >= 0) & (ly < 9) & (tl.load(mask + o, mask=has, other=0) != 0)
    lx = tl.where(lx < 0, lx + 7, lx)
    ly = tl.where(ly < 0, ly + 9, ly)
    lands = has & (lx >= 0) & (lx < 7) & (ly >= 0) & (ly < 9)
    return tl.where(lands, (lx * 9 + ly) * 2 + on.to(tl.int32), -2)


@triton.jit
def _mob_bits(zpos, zmask, cpos, cmask, spos, smask, apos, amask, e64, live, px, py):
    """Each kind's flags over the 63 view cells as the bits of an int64, [lanes, 4] (zombie, cow,
    skeleton, arrow): a slot's ``on`` bit at its cell unless a later slot of its kind lands there
    (the last slot written wins, as the reference's scatter). A [lanes, 4] tile, so each slot is
    read and placed by one or two threads; computed on the lanes of the byte tiles instead, every
    thread writing a lane's bytes did all of its 11 slots (4x the kernel's instructions)."""
    k = tl.arange(0, 4)[None, :]
    pos = tl.where(k == 0, zpos, tl.where(k == 1, cpos, tl.where(k == 2, spos, apos)))
    mask = tl.where(k == 0, zmask, tl.where(k == 1, cmask, tl.where(k == 2, smask, amask)))
    slots = tl.where(k == 2, 2, 3)
    e64, live, px, py = e64[:, None], live[:, None], px[:, None], py[:, None]
    c0 = _mob_codes(pos, mask, slots, e64, live, px, py, 0)
    c1 = _mob_codes(pos, mask, slots, e64, live, px, py, 1)
    c2 = _mob_codes(pos, mask, slots, e64, live, px, py, 2)
    cell0, cell1, cell2 = c0 >> 1, c1 >> 1, c2 >> 1  # -1 where a slot does not land
    one = tl.full(c0.shape, 1, tl.int64)
    bits = tl.where((c2 & 1) != 0, one << cell2.to(tl.int64), 0)
    bits |= tl.where(((c1 & 1) != 0) & (cell1 != cell2), one << cell1.to(tl.int64), 0)
    bits |= tl.where(((c0 & 1) != 0) & (cell0 != cell1) & (cell0 != cell2), one << cell0.to(tl.int64), 0)
    return bits


@triton.jit
def _kind_flags(bits, k, m, KIND: tl.constexpr):
    """Kind ``KIND``'s flags of view cells ``4m + 1 .. 4m + 4`` (``m`` [1, 16]; ``bits`` [lanes,
    4], from :func:`_mob_bits`) as bit ``KIND`` of the four bytes of int32 words [lanes, 16]: a
    shift and a multiply a word, not four 64-bit shifts a byte."""
    rest = tl.sum(tl.where(k == KIND, bits, 0), axis=1)[:, None] >> 1  # cells 1..62 as bits 0..61
    half = tl.where(m < 8, rest.to(tl.int32), (rest >> 32).to(tl.int32))
    nibble = (half >> ((m & 7) * 4)) & 15
    return ((nibble * 0x204081) & 0x01010101) << KIND  # bit i of the nibble to bit 0 of byte i


@triton.jit
def _write_compact(out_p, out2_p, e64, live, mp, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p,
                   inv_p, zpos, zmask, cpos, cmask, spos, smask, apos, amask, light_p, TWO: tl.constexpr):
    """The compact observation (:func:`noeira.envs.craftax.render.compact`) of the lanes' state
    into ``out_p`` (and ``out2_p`` with ``TWO``), [N, 148] uint8 (rows 4-byte aligned). Each
    lane's row is built as three tiles, so a program writes its rows as contiguous bytes: bytes
    [lanes, 64] for bytes 0..63 (the view's 63 blocks, the first cell's mob flags), int32 words
    [lanes, 16] for 64..127 (the other 62 cells' mob flags, inventory 0..1) and bytes [lanes,
    32] for the 20 bytes after (inventory 2..11, health, food, drink, energy, direction,
    sleeping, the light level's float32 bytes)."""
    px = _ld(ppos, e64 * 2, live)
    py = _ld(ppos, e64 * 2 + 1, live)
    bits = _mob_bits(zpos, zmask, cpos, cmask, spos, smask, apos, amask, e64, live, px, py)
    k = tl.arange(0, 4)[None, :]
    lv = live[:, None]
    e2 = e64[:, None]
    row = e2 * COMPACT
    j = tl.arange(0, 64)[None, :]
    x = px[:, None] + (j // 9 - 3)
    y = py[:, None] + (j % 9 - 4)
    blk = tl.load(mp + e2 * 4096 + x * 64 + y, mask=lv & (j < 63) & _inb(x, y), other=OOB).to(tl.int32)
    first = tl.sum(((bits & 1) << k).to(tl.int32), axis=1)[:, None]  # the first cell's flags
    head = tl.where(j < 63, blk, first).to(tl.uint8)
    m = tl.arange(0, 16)[None, :]
    words = (_kind_flags(bits, k, m, 0) | _kind_flags(bits, k, m, 1) | _kind_flags(bits, k, m, 2)
             | _kind_flags(bits, k, m, 3))
    inv01 = (_ld(inv_p, e64 * 12, live) & 255) | ((_ld(inv_p, e64 * 12 + 1, live) & 255) << 8)
    words = tl.where(m == 15, words | (inv01[:, None] << 16), words)  # bytes 126, 127
    tl.store(out_p + row + j, head, mask=lv)
    tl.store((out_p + row + 64).to(tl.pointer_type(tl.int32)) + m, words, mask=lv)
    if TWO:
        tl.store(out2_p + row + j, head, mask=lv)
        tl.store((out2_p + row + 64).to(tl.pointer_type(tl.int32)) + m, words, mask=lv)
    t = tl.arange(0, 32)[None, :]
    inv = tl.load(inv_p + e2 * 12 + 2 + t, mask=lv & (t < 10), other=0).to(tl.int32)
    hp = _ld(health_p, e64, live)[:, None]
    food = _ld(food_p, e64, live)[:, None]
    drink = _ld(drink_p, e64, live)[:, None]
    energy = _ld(energy_p, e64, live)[:, None]
    direction = _ld(pdir_p, e64, live)[:, None]
    sleeping = _ld(sleep_p, e64, live)[:, None]
    light_bits = tl.load(light_p + e64, mask=live, other=0.0).to(tl.int32, bitcast=True)[:, None]
    light = (light_bits >> (tl.minimum(tl.maximum(t - 16, 0), 3) * 8))
    tail = tl.where(t < 10, inv, tl.where(t == 10, hp, tl.where(t == 11, food, tl.where(t == 12, drink, tl.where(
        t == 13, energy, tl.where(t == 14, direction, tl.where(t == 15, sleeping, light)))))))
    tail = (tail & 255).to(tl.uint8)
    tl.store(out_p + row + 128 + t, tail, mask=lv & (t < 20))
    if TWO:
        tl.store(out2_p + row + 128 + t, tail, mask=lv & (t < 20))


# -- kernels ---------------------------------------------------------------------------------------
@triton.jit
def _enqueue(queue_p, count_p, e, queued):
    """Append the lanes ``queued`` to the spawn queue (one atomic per program; the order of the
    queue does not matter: each world's spawn is its own)."""
    v = queued.to(tl.int32)
    start = tl.atomic_add(count_p, tl.sum(v, axis=0))
    tl.store(queue_p + start + tl.cumsum(v, axis=0) - v, e, mask=queued)


@triton.jit
def _game_kernel(action_p, reward_p, term_p, queue_p, count_p,
                 mp, mm, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p, recover_p, hunger_p, thirst_p,
                 fatigue_p, inv_p, zpos, zhp, zmask, zcd, cpos, chp, cmask, spos, shp, smask, scd, apos, amask, adir,
                 plpos, plage, plmask, light_p, ach_p, ts_p, light_table, zchance_table, max_t, wdx, wdy, fdx, fdy,
                 u_p, dirs_p, cand_p, seed_p, deferred_p, n, DRAWS: tl.constexpr):
    e = tl.program_id(0) * LANES + tl.arange(0, LANES)
    live = e < n
    reward, terminated, _ach, queued = _rules(
        e, live, action_p, mp, mm, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p, recover_p, hunger_p,
        thirst_p, fatigue_p, inv_p, zpos, zhp, zmask, zcd, cpos, chp, cmask, spos, shp, smask, scd, apos, amask, adir,
        plpos, plage, plmask, light_p, ach_p, ts_p, light_table, zchance_table, max_t, wdx, wdy, fdx, fdy, u_p, dirs_p,
        cand_p, seed_p, deferred_p, DRAWS)
    tl.store(reward_p + e, reward, mask=live)
    tl.store(term_p + e, terminated.to(tl.int8), mask=live)
    _enqueue(queue_p, count_p, e, queued)


@triton.jit
def _bookkeeping(pid, e64, live, reward, terminated, ach, max_steps, reward_p, term_p, trunc_p, done_p, elapsed_p,
                 ret_p, len_p, partial_p):
    """``TensorEnv.step``'s work around the rules, fused, for ``CraftaxClassic.step``'s rule set:
    the time limit (``elapsed >= max_steps``, counted only for worlds still alive, as
    ``CraftaxClassic.step`` masks ``truncated`` on the torch path), ``done``, the episode return
    and length, the sums over the episodes that end in ``TensorEnv._stats``' layout (return,
    length, count, then ``episode_stat_keys``: the 22 achievements, in the bits' order; the env
    checks that layout when it is built), and the zeroing of the three counters where done.
    This is the one other place that bookkeeping lives: done in torch ops it would take a dozen
    more passes over the ``N`` envs each step; ``test_env_step_on_the_kernels_equals_the_torch_env``
    compares the two, step by step, counters and sums included. Returns ``done``."""
    elapsed = tl.load(elapsed_p + e64, mask=live, other=0) + 1
    truncated = (elapsed >= max_steps) & _not(terminated)
    done = (terminated | truncated) & live
    ret = tl.load(ret_p + e64, mask=live, other=0.0) + reward
    length = tl.load(len_p + e64, mask=live, other=0) + 1
    d = done.to(tl.float64)
    prow = partial_p + pid * NUM_STATS
    tl.store(prow + 0, tl.sum(ret.to(tl.float64) * d, axis=0))
    tl.store(prow + 1, tl.sum(length.to(tl.float64) * d, axis=0))
    tl.store(prow + 2, tl.sum(d, axis=0))
    for k in tl.static_range(22):
        tl.store(prow + 3 + k, tl.sum(((ach >> k) & 1).to(tl.float64) * d, axis=0))
    tl.store(ret_p + e64, tl.where(done, 0.0, ret), mask=live)
    tl.store(len_p + e64, tl.where(done, 0, length), mask=live)
    tl.store(elapsed_p + e64, tl.where(done, 0, elapsed), mask=live)
    tl.store(reward_p + e64, reward, mask=live)
    tl.store(term_p + e64, terminated.to(tl.int8), mask=live)
    tl.store(trunc_p + e64, truncated.to(tl.int8), mask=live)
    tl.store(done_p + e64, done.to(tl.int8), mask=live)
    return done


@triton.jit
def _env_kernel(action_p, reward_p, term_p, trunc_p, done_p, elapsed_p, ret_p, len_p, partial_p, queue_p, count_p,
                done_queue_p, done_count_p, max_steps,
                mp, mm, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p, recover_p, hunger_p, thirst_p,
                fatigue_p, inv_p, zpos, zhp, zmask, zcd, cpos, chp, cmask, spos, shp, smask, scd, apos, amask, adir,
                plpos, plage, plmask, light_p, ach_p, ts_p, light_table, zchance_table, max_t, wdx, wdy, fdx, fdy,
                u_p, dirs_p, cand_p, seed_p, deferred_p, n, DRAWS: tl.constexpr):
    pid = tl.program_id(0)
    e = pid * LANES + tl.arange(0, LANES)
    live = e < n
    e64 = e.to(tl.int64)
    reward, terminated, ach, queued = _rules(
        e, live, action_p, mp, mm, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p, recover_p, hunger_p,
        thirst_p, fatigue_p, inv_p, zpos, zhp, zmask, zcd, cpos, chp, cmask, spos, shp, smask, scd, apos, amask, adir,
        plpos, plage, plmask, light_p, ach_p, ts_p, light_table, zchance_table, max_t, wdx, wdy, fdx, fdy, u_p, dirs_p,
        cand_p, seed_p, deferred_p, DRAWS)
    _enqueue(queue_p, count_p, e, queued)
    done = _bookkeeping(pid, e64, live, reward, terminated, ach, max_steps, reward_p, term_p, trunc_p, done_p,
                        elapsed_p, ret_p, len_p, partial_p)
    _enqueue(done_queue_p, done_count_p, e, done)  # the worlds whose reset world and observation come after


@triton.jit
def _spawn_kernel(queue_p, count_p, deferred_p, mp, mm, ppos, zpos, zhp, zmask, cpos, chp, cmask, spos, shp, smask,
                  ts_p, zchance_table, max_t, wdx, wdy, fdx, fdy, u_p, cand_p, seed_p, DRAWS: tl.constexpr,
                  SL: tl.constexpr):
    """The spawns the step left to a scan, for the worlds it queued: from the kind whose
    candidates failed (a scan now) on, the kinds in the reference's order."""
    count = tl.load(count_p)
    # a fixed grid of programs walks the queue (a program per queued world would launch a
    # program per world of the batch, nearly all of which find nothing to do)
    for start in range(tl.program_id(0) * SL, count, tl.num_programs(0) * SL):
        q = start + tl.arange(0, SL)
        live = q < count
        ei = tl.load(queue_p + q, mask=live, other=0)
        e64 = ei.to(tl.int64)
        base = e64 * 4096
        first = _ld(deferred_p, e64, live)
        if DRAWS == 1:
            seed = 0
            u11 = tl.load(u_p + e64 * 17 + 11, mask=live, other=1.0)
            u12 = tl.load(u_p + e64 * 17 + 12, mask=live, other=1.0)
            u13 = tl.load(u_p + e64 * 17 + 13, mask=live, other=1.0)
            u14 = tl.load(u_p + e64 * 17 + 14, mask=live, other=1.0)
            u15 = tl.load(u_p + e64 * 17 + 15, mask=live, other=1.0)
            u16 = tl.load(u_p + e64 * 17 + 16, mask=live, other=1.0)
        else:  # the step's own variates again: same key, same counters
            seed = tl.load(seed_p)
            off = ei * 32
            _x8, _x9, _x10, u11 = tl.rand4x(seed, off + 2)
            u12, u13, u14, u15 = tl.rand4x(seed, off + 3)
            u16, _x1, _x2, _x3 = tl.rand4x(seed, off + 4)
        px = _ld(ppos, e64 * 2, live)
        py = _ld(ppos, e64 * 2 + 1, live)
        chance_zombie = tl.load(zchance_table + tl.minimum(_ld(ts_p, e64, live) - 1, max_t), mask=live, other=0.0)
        _spawn(mp, mm, base, px, py, live & (first == 0), cpos, chp, cmask, e64, 3, COW_BLOCKS, COW_HEALTH,
               u11, u14, COW_CHANCE, wdx, wdy, 340, 512, cand_p, seed, ei, 0, DRAWS, False, True, first == 0)
        _spawn(mp, mm, base, px, py, live & (first <= 1), zpos, zhp, zmask, e64, 3, ZOMBIE_BLOCKS, ZOMBIE_HEALTH,
               u12, u15, chance_zombie, fdx, fdy, 184, 256, cand_p, seed, ei, 1, DRAWS, True, True, first == 1)
        _spawn(mp, mm, base, px, py, live, spos, shp, smask, e64, 2, SKELETON_BLOCKS, SKELETON_HEALTH, u13, u16,
               SKELETON_CHANCE, fdx, fdy, 184, 256, cand_p, seed, ei, 2, DRAWS, True, True, first == 2)


@triton.jit
def _observe_kernel(out_p, out2_p, mp, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p, inv_p,
                    zpos, zmask, cpos, cmask, spos, smask, apos, amask, light_p, n, TWO: tl.constexpr,
                    L: tl.constexpr):
    """The compact observation of every world into ``out`` (and ``out2`` with ``TWO``), ``L`` per program."""
    e = tl.program_id(0) * L + tl.arange(0, L)
    live = e < n
    _write_compact(out_p, out2_p, e.to(tl.int64), live, mp, ppos, pdir_p, health_p, food_p, drink_p, energy_p,
                   sleep_p, inv_p, zpos, zmask, cpos, cmask, spos, smask, apos, amask, light_p, TWO)


@triton.jit
def _observe_queue_kernel(queue_p, count_p, out_p, mp, ppos, pdir_p, health_p, food_p, drink_p, energy_p, sleep_p,
                          inv_p, zpos, zmask, cpos, cmask, spos, smask, apos, amask, light_p, L: tl.constexpr):
    """The compact observation of the worlds in the queue (those that ended and were reset)."""
    count = tl.load(count_p)
    for start in range(tl.program_id(0) * L, count, tl.num_programs(0) * L):
        q = start + tl.arange(0, L)
        live = q < count
        e = tl.load(queue_p + q, mask=live, other=0)
        _write_compact(out_p, out_p, e.to(tl.int64), live, mp, ppos, pdir_p, health_p, food_p, drink_p, energy_p,
                       sleep_p, inv_p, zpos, zmask, cpos, cmask, spos, smask, apos, amask, light_p, False)


@triton.jit
def _store_value(ptr, v, mask, BF16: tl.constexpr):
    """Store float32 ``v`` at ``ptr``: as float32, or (``BF16``, an int16 pointer) as bfloat16 bits."""
    if BF16:
        tl.store(ptr, _bf16_bits(v), mask=mask)
    else:
        tl.store(ptr, v, mask=mask)


@triton.jit
def _bf16_bits(v):
    """float32 -> bfloat16 bits (as int16), rounded to nearest even as torch casts (finite values;
    done on the bits, so the same under Triton's interpreter)."""
    bits = v.to(tl.int32, bitcast=True)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).to(tl.int16)


@triton.jit
def _expand_kernel(code_p, out_p, tenths_p, n, STRIDE: tl.constexpr, ROWS: tl.constexpr, BF16: tl.constexpr):
    """Compact observations [n, 148] uint8 -> the symbolic ones, the first 1,345 columns of rows
    ``STRIDE`` apart: float32, or (``BF16``, ``out_p`` viewed as int16) bfloat16 as torch casts.

    The grid's 1,323 one-hot columns hold 63 to 315 ones a row: they are written as zeros (spans
    whose bounds are multiples of 8, so with a row stride of a multiple of 8, as a padded input's
    1,352, the stores are 16-byte vectors), then, after a barrier, the ones are stored where each
    cell's bytes point. The columns from 1,320 on (the last cell's last mob bits, the scalars)
    take the general path."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = (r < n)[:, None]
    src_row = code_p + r.to(tl.int64)[:, None] * COMPACT
    dst_row = out_p + r.to(tl.int64)[:, None] * STRIDE
    j = tl.arange(0, 1024)[None, :]
    _store_value(dst_row + j, tl.zeros([ROWS, 1024], tl.float32), live, BF16)
    j = 1024 + tl.arange(0, 512)[None, :]
    _store_value(dst_row + j, tl.zeros([ROWS, 512], tl.float32), live & (j < 1320), BF16)
    tl.debug_barrier()  # the zeros land before the ones (the same addresses, other threads)
    cell = tl.arange(0, 64)[None, :]
    on = live & (cell < 63)
    block = tl.load(src_row + cell, mask=on, other=0).to(tl.int32)
    mobs = tl.load(src_row + 63 + cell, mask=on, other=0).to(tl.int32)
    one = tl.full([ROWS, 64], 1.0, tl.float32)
    _store_value(dst_row + cell * 21 + block, one, on, BF16)
    for k in tl.static_range(4):
        col = cell * 21 + 17 + k
        _store_value(dst_row + col, one, on & (((mobs >> k) & 1) != 0) & (col < 1320), BF16)
    # columns 1320..1343: the last cell's mob bits 1..3, the tenths, the direction, the light
    j = 1320 + tl.arange(0, 32)[None, :]
    grid = j < 1323
    src = tl.where(grid, 125, tl.where(j < 1339, 126 + (j - 1323), 142))
    byte = tl.load(src_row + src, mask=live & (j < 1343), other=0).to(tl.int32)
    tenths = tl.load(tenths_p + byte, mask=live & (j >= 1323) & (j < 1339), other=0.0)
    direction = ((((byte + 128) & 255) - 128 - 1) == (j - 1339)).to(tl.float32)
    b0 = tl.load(src_row + 144, mask=live, other=0).to(tl.int32)
    b1 = tl.load(src_row + 145, mask=live, other=0).to(tl.int32)
    b2 = tl.load(src_row + 146, mask=live, other=0).to(tl.int32)
    b3 = tl.load(src_row + 147, mask=live, other=0).to(tl.int32)
    light = (b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)).to(tl.float32, bitcast=True)
    bit = ((byte >> (j - 1320 + 1)) & 1).to(tl.float32)
    v = tl.where(grid, bit, tl.where(j < 1339, tenths, tl.where(j < 1343, direction, light)))
    _store_value(dst_row + j, v, live & (j < 1344), BF16)
    # column 1344: the sleeping flag
    _store_value(dst_row + 1344, tl.load(src_row + 143, mask=live, other=0).to(tl.float32), live, BF16)


# -- launchers -------------------------------------------------------------------------------------
_BOOLS = ("mob_map", "is_sleeping", "zombies.mask", "cows.mask", "skeletons.mask", "arrows.mask",
          "growing_plants_mask", "achievements")
_STATE_KEYS = ("map", "mob_map", "player_position", "player_direction", "player_health", "player_food",
               "player_drink", "player_energy", "is_sleeping", "player_recover", "player_hunger", "player_thirst",
               "player_fatigue", "inventory", "zombies.position", "zombies.health", "zombies.mask",
               "zombies.attack_cooldown", "cows.position", "cows.health", "cows.mask", "skeletons.position",
               "skeletons.health", "skeletons.mask", "skeletons.attack_cooldown", "arrows.position", "arrows.mask",
               "arrow_directions", "growing_plants_positions", "growing_plants_age", "growing_plants_mask",
               "light_level", "achievements", "timestep")
_SPAWN_KEYS = ("map", "mob_map", "player_position", "zombies.position", "zombies.health", "zombies.mask",
               "cows.position", "cows.health", "cows.mask", "skeletons.position", "skeletons.health", "skeletons.mask",
               "timestep")
_OBS_KEYS = ("map", "player_position", "player_direction", "player_health", "player_food", "player_drink",
             "player_energy", "is_sleeping", "inventory", "zombies.position", "zombies.mask", "cows.position",
             "cows.mask", "skeletons.position", "skeletons.mask", "arrows.position", "arrows.mask", "light_level")


def _args(s: dict[str, Tensor], keys: tuple[str, ...]) -> list[Tensor]:
    """The state tensors named ``keys``, as the kernels take them (bool tensors viewed as bytes)."""
    out = []
    for k in keys:
        v = s[k]
        if not v.is_contiguous():
            raise ValueError(f"craftax triton step: state tensor {k!r} must be contiguous")
        out.append(v.view(torch.uint8) if k in _BOOLS else v)
    return out


def _rows(*outs: Tensor) -> None:
    """Check the observation kernels' outputs: contiguous, starting 4-byte aligned (the mob
    flags are stored as int32 words; rows are 148 bytes)."""
    for out in outs:
        if not out.is_contiguous() or out.data_ptr() % 4:
            raise ValueError("craftax triton step: observations must be contiguous and 4-byte aligned")


def _grid(n: int) -> tuple[int]:
    return (triton.cdiv(n, BLOCK),)


def _queue_grid(n: int, lanes: int, device: torch.device, per_sm: int) -> tuple[int]:
    """A fixed grid for a kernel that walks a queue of at most ``n`` worlds, ``lanes`` at a time:
    ``per_sm`` programs per multiprocessor (0: one program), as the queue's length is known only
    on the device."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 2
    return (max(1, min(triton.cdiv(n, lanes), sms * per_sm)),)


def _draw_args(draws: dict[str, Tensor] | None, seed: Tensor | None, write: bool,
               n: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """(u, dirs, cand, seed, mode) for the kernels: mode 1 reads ``draws`` (no ``cand``: no
    candidates, every spawn scans), 0 draws from ``seed``, 2 draws from ``seed`` and writes
    them into ``draws``."""
    if draws is not None and not write:
        u, d = draws["u"].float().contiguous(), draws["dirs"].to(torch.int64).contiguous()
        cand = draws.get("cand")
        cand = torch.full((n, 3, 8), 2.0, device=device) if cand is None else cand.float().contiguous()
        return u, d, cand, u, 1
    if seed is None:
        raise ValueError("craftax triton step: give draws or a seed")
    if write:
        if draws is None or "cand" not in draws:
            raise ValueError("craftax triton step: write_draws needs draws tensors (u, dirs, cand) to write into")
        return draws["u"], draws["dirs"], draws["cand"], seed, 2
    return seed, seed, seed, seed, 0


class Step:
    """The step on the kernels for ``num_envs`` worlds, its buffers allocated once."""

    __scratch__ = ("queue", "done_queue")  # consumed within the step, in the order the atomics gave (verify-graph skips them)

    def __init__(self, num_envs: int, device: torch.device) -> None:
        self.n = num_envs
        self.partial = torch.zeros((triton.cdiv(num_envs, BLOCK), STATS), dtype=torch.float64, device=device)
        self.done = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.queue = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self.done_queue = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self._counts = torch.zeros(2, dtype=torch.int32, device=device)  # zeroed by one launch a step
        self.queued = self._counts[0:1]
        """How many worlds the last step queued for the spawn kernel."""
        self.done_count = self._counts[1:2]
        """How many worlds ended in the last step (listed in ``done_queue``)."""
        self.deferred = torch.zeros(num_envs, dtype=torch.int8, device=device)
        """The first kind each queued world left to the spawn kernel."""
        self.launch = {"env_warps": 4, "env_maxnreg": 0, "spawn_lanes": SPAWN_BLOCK, "spawn_warps": 2,
                       "spawn_per_sm": 16, "spawn_maxnreg": 0, "obs_lanes": OBS_BLOCK, "obs_warps": 4, "obs_per_sm": 16,
                       "obs_maxnreg": 0}
        """Launch settings of the kernels (``benchmarks/craftax_kernels.py`` times alternatives);
        ``*_maxnreg`` caps a kernel's registers per thread (0: the compiler's choice), trading
        spills for more programs resident per multiprocessor."""
        # sm_90 builds (ptxas; pointers 16-byte aligned, as the runtime specializes them): the
        # observation kernel takes 45 registers and 672 SASS instructions a thread at 16 lanes x 4
        # warps (137 and 2,736 while every thread writing a lane's bytes placed all 11 of its mob
        # slots, before the [lanes, 4] slot tile), 55 and 896 at 32 x 4 (a third fewer a world)
        self.configure()

    def configure(self, **launch: int) -> None:
        """Change launch settings (keys of :attr:`launch`); the results do not depend on them."""
        unknown = set(launch) - set(self.launch)
        if unknown:
            raise ValueError(f"craftax triton step: unknown launch settings {sorted(unknown)}")
        self.launch.update(launch)
        c, dev = self.launch, self.queue.device
        self._spawn_grid = _queue_grid(self.n, c["spawn_lanes"], dev, c["spawn_per_sm"])
        self._observe_grid = _queue_grid(self.n, c["obs_lanes"], dev, c["obs_per_sm"])

    def _options(self, kernel: str) -> dict[str, int]:
        """The Triton launch options of ``kernel`` (env, spawn, obs) from :attr:`launch`."""
        options = {"num_warps": self.launch[f"{kernel}_warps"]}
        if self.launch[f"{kernel}_maxnreg"]:
            options["maxnreg"] = self.launch[f"{kernel}_maxnreg"]
        return options

    def _tables(self, tables) -> list:
        return [tables.light, tables.zombie_chance, tables.max_t, tables.window_dx, tables.window_dy, tables.far_dx,
                tables.far_dy]

    def _spawn(self, s: dict[str, Tensor], tables, u: Tensor, cand: Tensor, seed: Tensor, mode: int) -> None:
        _spawn_kernel[self._spawn_grid](self.queue, self.queued, self.deferred, *_args(s, _SPAWN_KEYS),
                                     tables.zombie_chance, tables.max_t, tables.window_dx, tables.window_dy,
                                     tables.far_dx, tables.far_dy, u, cand, seed, DRAWS=mode,
                                     SL=self.launch["spawn_lanes"], **self._options("spawn"))

    def game(self, s: dict[str, Tensor], action: Tensor, tables, draws: dict[str, Tensor] | None = None,
             seed: Tensor | None = None, write_draws: bool = False) -> tuple[Tensor, Tensor]:
        """``game.step(s, action, draws, tables)``: (reward float32 [N], terminated [N]). Variates
        from ``draws`` (``u`` [N, 17] float32, ``dirs`` [N, 8] int64, ``cand`` [N, 3, 8] float32
        or none), or drawn in the kernels from ``seed`` (an int64 device tensor [1]); with
        ``write_draws`` those are written into ``draws`` (preallocated) so :func:`game.step` can
        replay them."""
        n = self.n
        u, d, cand, seed_t, mode = _draw_args(draws, seed, write_draws, n, action.device)
        reward = torch.empty(n, dtype=torch.float32, device=action.device)
        term = torch.empty(n, dtype=torch.int8, device=action.device)
        self.queued.zero_()
        _game_kernel[_grid(n)](action, reward, term, self.queue, self.queued, *_args(s, _STATE_KEYS),
                               *self._tables(tables), u, d, cand, seed_t, self.deferred, n, DRAWS=mode, num_warps=4)
        self._spawn(s, tables, u, cand, seed_t, mode)
        return reward, term.bool()

    def env(self, s: dict[str, Tensor], action: Tensor, tables, seed: Tensor, reward: Tensor, terminated: Tensor,
            truncated: Tensor, elapsed: Tensor, episode_return: Tensor, episode_length: Tensor, final: Tensor,
            obs: Tensor, max_steps: int, draws: dict[str, Tensor] | None = None) -> Tensor:
        """The rules, the time limit (``truncated`` only where not ``terminated``), the episode
        bookkeeping (in place; ``self.done`` set) and the compact observation of the state
        reached (into ``final`` and ``obs``, [N, 148] uint8); returns the per-program sums
        [P, 25] over the episodes that ended (return, length, count, the 22 achievements). The
        caller resets the worlds that ended, then calls :meth:`observe_reset`."""
        n = self.n
        u, d, cand, seed_t, mode = _draw_args(draws, seed, False, n, action.device)
        self._counts.zero_()
        _env_kernel[_grid(n)](action, reward, terminated.view(torch.int8), truncated.view(torch.int8),
                              self.done.view(torch.int8), elapsed, episode_return, episode_length, self.partial,
                              self.queue, self.queued, self.done_queue, self.done_count, max_steps,
                              *_args(s, _STATE_KEYS), *self._tables(tables), u, d, cand, seed_t, self.deferred, n,
                              DRAWS=mode, **self._options("env"))
        self._spawn(s, tables, u, cand, seed_t, mode)
        self.observe(s, final, obs)
        return self.partial

    def observe(self, s: dict[str, Tensor], final: Tensor, obs: Tensor) -> None:
        """The compact observation of every world into ``final`` and ``obs`` (the last launch of
        :meth:`env`)."""
        _rows(final, obs)
        lanes = self.launch["obs_lanes"]
        _observe_kernel[(triton.cdiv(self.n, lanes),)](final, obs, *_args(s, _OBS_KEYS), self.n, TWO=True, L=lanes,
                                                       **self._options("obs"))

    def observe_reset(self, s: dict[str, Tensor], obs: Tensor) -> None:
        """The compact observation of the worlds that ended (and were reset) into ``obs``."""
        _rows(obs)
        _observe_queue_kernel[self._observe_grid](self.done_queue, self.done_count, obs, *_args(s, _OBS_KEYS),
                                                  L=self.launch["obs_lanes"], **self._options("obs"))


def observe(s: dict[str, Tensor], out: Tensor) -> None:
    """The compact observation of every world into ``out`` [N, 148] uint8."""
    n = out.shape[0]
    _rows(out)
    _observe_kernel[(triton.cdiv(n, OBS_BLOCK),)](out, out, *_args(s, _OBS_KEYS), n, TWO=False, L=OBS_BLOCK,
                                                  num_warps=4)


def expand(code: Tensor, out: Tensor, tenths: Tensor) -> None:
    """``render.expand`` as one kernel: ``code`` [n, 148] uint8 -> the first 1,345 columns of
    ``out`` [n, W] (float32 or bfloat16, rows contiguous) (``tenths``: ``render._tenths_table``)."""
    n = code.shape[0]
    if out.dtype not in (torch.float32, torch.bfloat16) or out.stride(-1) != 1 or out.shape[-1] < 1345:
        raise ValueError(f"craftax expand: out must be float32 or bfloat16 [n, >= 1345] with contiguous rows, "
                         f"got {out.dtype} {tuple(out.shape)}")
    bf16 = out.dtype == torch.bfloat16
    _expand_kernel[(triton.cdiv(n, EXPAND_ROWS),)](code, out.view(torch.int16) if bf16 else out, tenths, n,
                                                    STRIDE=out.stride(0), ROWS=EXPAND_ROWS, BF16=bf16,
                                                    num_warps=EXPAND_WARPS)
