"""Craftax-Classic's world generation as one Triton kernel: fresh worlds written straight into
the rows of the envs a list names (the envs that ended, in a step; every env, on a reset).

:mod:`.worldgen` (torch) is the reference: fed the same draws, or keyed alike, the kernel
writes the worlds :func:`worldgen.world_from_draws` makes (the float math in its order of
operations, float32, no fused multiply-adds, IEEE division; ``tl.cos``/``tl.sin`` are
libdevice's, what torch's CUDA ``cos``/``sin`` call), every other state field as
``world_from_draws`` sets it.

The launch is the same whatever the list holds: a fixed grid of programs (``per_sm`` per
multiprocessor), each walking the list from its index in steps of the grid, up to the count the
list carries on the device (the step kernel's queue of ended worlds and its count). So the work
follows the envs that ended, no host sync is needed and the launch records in a CUDA graph.
Each program handles one world at a time, in four stages:

1. the gradients: the 636 angles of the four noise fields (water 5x5, mountain 5x5, path
   9x33, tree 17x17 gradient points) from the draws or from Philox, their cosines and sines
   written to the program's scratch row, then a barrier;
2. each noise field's minimum and maximum over the world, ``ROWS`` map rows at a time (a
   ``[ROWS, 64]`` tile; a cell's noise gathers its four corner gradients from the scratch
   row); with ``keep`` the noise is also stored in the scratch row (64 KB: four fields), then
   a barrier;
3. the noise normalised to [0, 1] (read back with ``keep``, else computed again) and the
   reference's thresholds: the blocks, written to the map row (the transposed path noise is
   the path noise at the swapped cell), counting the stone cells; then a barrier;
4. the extra diamond on the ``pick``-th stone cell, row-major (the map row read back: a
   row-wise cumsum plus the rows' prefix counts), and the other fields' constants.

Random variates in the kernel's own mode: Philox4x32-10 (``triton.language.random.philox``)
keyed by the run's key XOR :data:`worldgen.SALT`, on counters ``(draw, env, episode low,
episode high)`` as :func:`worldgen.episode_draws` (the torch reference) lays them out; the
kernel adds one to the env's episode counter before drawing. So every episode's world is its
own (Philox is a bijection of the counter), and the torch and Triton envs make the same one.
Uniform in [0, 1) as Triton's ``tl.rand`` (Philox's float conversion can round its very
largest integers up to 1.0, a chance of about 2^-25 a variate, which changes no block).
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.language.random import philox

from noeira.envs.craftax import constants as C
from noeira.envs.craftax import worldgen
from noeira.envs.craftax.constants import f32
from noeira.envs.craftax.state import STATE_FIELDS
from noeira.envs.craftax.triton_step import COAL, COW_HEALTH, DIAMOND, GRASS, IRON, LAVA, PATH, STONE, TREE, WATER, _const

__all__ = ["WorldGen", "generate_into"]



NUM_WARPS = 4
"""Warps per program (4 warps, 4 programs an SM: the world kernel took 0.756 ms for the ended
envs of a 1M-env step against 0.989 ms at 8 warps, 2 an SM; H200, 2026-12-03, BENCHMARKS.md)."""
ROWS = 16
"""Map rows a program computes at once (a [16, 64] tile: 4 cells a thread)."""
MAXNREG = 128
"""Registers per thread at 16 rows: two programs an SM (ptxas would take ~180 to hoist more of
the gradient gathers; at 128 it still spills nothing; 32 and 64 rows would spill, so they run
without the cap)."""
PER_SM = 4
"""Programs per multiprocessor of the grid (four fit at 128 registers and 4 warps)."""
KEEP = True
"""Stage 3 reads the noise stage 2 stored in the program's scratch row, instead of computing
the five noise evaluations a cell needs a second time."""

# -- constants inside the kernel -------------------------------------------------------------------
SAND = _const(C.SAND)
UP = _const(C.UP)
SPAWN = _const(C.MAP_SIZE // 2)
TWO_PI = _const(f32(2 * math.pi))
SQRT2 = _const(f32(math.sqrt(2)))
F_FIFTH = _const(f32(0.2))  # XLA's (and worldgen's) distance / 5 as a multiplication by 0.2f
F_005 = _const(f32(0.05))
F_04 = _const(f32(0.4))
F_05 = _const(f32(0.5))
F_06 = _const(f32(0.6))
F_07 = _const(f32(0.7))
F_075 = _const(f32(0.75))
F_08 = _const(f32(0.8))
F_085 = _const(f32(0.85))
P_COAL = _const(f32(0.04))
P_IRON = _const(f32(0.03))
P_DIAMOND = _const(f32(0.005))
U_SCALE = _const(f32(4.6566127342e-10))  # Triton's (and worldgen.uniform's) int32 -> [0, 1) scale
# the gradient angles of the four fields, one row per world: offsets into it
OFF_WATER = _const(0)  # 5 x 5
OFF_MOUNTAIN = _const(25)  # 5 x 5
OFF_PATH = _const(50)  # 9 x 33
OFF_TREE = _const(347)  # 17 x 17
NUM_ANGLES = _const(worldgen.ANGLES)
PICK = _const(worldgen.PICK - 4096)  # the pick's draw, counted from the angles'
SALT = _const(worldgen.SALT)
GRADIENTS = 1280
"""Floats of a scratch row for the gradients: cosines at [0, 636), sines at [640, 1276)."""
SINES = _const(640)
NOISE = _const(GRADIENTS)  # with keep: the raw noise of water, mountain, path, tree, 4,096 floats each

_KEYS = ("map", "mob_map", "player_position", "player_direction", "player_health", "player_food", "player_drink",
         "player_energy", "is_sleeping", "player_recover", "player_hunger", "player_thirst", "player_fatigue",
         "inventory", "zombies.position", "zombies.health", "zombies.mask", "zombies.attack_cooldown",
         "cows.position", "cows.health", "cows.mask", "cows.attack_cooldown", "skeletons.position",
         "skeletons.health", "skeletons.mask", "skeletons.attack_cooldown", "arrows.position", "arrows.health",
         "arrows.mask", "arrows.attack_cooldown", "arrow_directions", "growing_plants_positions",
         "growing_plants_age", "growing_plants_mask", "light_level", "achievements", "timestep")
"""The state tensors in the kernel's argument order (every key of STATE_FIELDS)."""
_NUMEL = {"map": 4096, "mob_map": 4096, "player_position": 2, "inventory": 12, "zombies.position": 6,
          "zombies.health": 3, "zombies.mask": 3, "zombies.attack_cooldown": 3, "cows.position": 6, "cows.health": 3,
          "cows.mask": 3, "cows.attack_cooldown": 3, "skeletons.position": 4, "skeletons.health": 2,
          "skeletons.mask": 2, "skeletons.attack_cooldown": 2, "arrows.position": 6, "arrows.health": 3,
          "arrows.mask": 3, "arrows.attack_cooldown": 3, "arrow_directions": 6, "growing_plants_positions": 20,
          "growing_plants_age": 10, "growing_plants_mask": 10, "achievements": 22}
"""Elements per world of each state tensor as the kernel writes them (1 where not listed)."""
if set(_KEYS) != set(STATE_FIELDS) or any(
        math.prod(shape) != _NUMEL.get(k, 1) for k, (shape, _dt) in STATE_FIELDS.items()):
    raise ImportError("craftax triton worldgen: the kernel's state layout is not state.STATE_FIELDS'")
_DRAW_KEYS = ("angles_water", "angles_mountain", "angles_path", "angles_tree", "u_coal", "u_iron", "u_diamond",
              "u_tree", "u_pick")


# -- helpers ---------------------------------------------------------------------------------------
@triton.jit
def _interpolant(t):
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


@triton.jit
def _perlin(sc, x, y, R0: tl.constexpr, R1: tl.constexpr, OFF: tl.constexpr):
    """``worldgen.perlin``'s noise before the normalisation at the cells (``x`` row, ``y`` column,
    broadcasting to [64, 64]), the gradients' cosines and sines gathered from the scratch row
    ``sc`` (the field's R0+1 x R1+1 points at ``OFF``)."""
    return _perlin_at(sc + OFF, sc + SINES + OFF, x, y, R0, R1, 64)


@triton.jit
def _perlin_at(cos_p, sin_p, x, y, R0: tl.constexpr, R1: tl.constexpr, SIZE: tl.constexpr):
    """The noise before the normalisation of a ``SIZE`` x ``SIZE`` grid at the cells ``x``, ``y``
    (0 <= x, y < SIZE), its (R0+1) x (R1+1) gradients' cosines and sines gathered row-major from
    ``cos_p`` and ``sin_p`` (the full game's 48x48 floors share it with Classic's 64x64 map)."""
    D0: tl.constexpr = SIZE // R0
    D1: tl.constexpr = SIZE // R1
    gx = (x % D0).to(tl.float32) * (R0 / SIZE)  # exact: the reference's remainder(i * (r / size), 1)
    gy = (y % D1).to(tl.float32) * (R1 / SIZE)
    c00 = (x // D0) * (R1 + 1) + (y // D1)  # the gradient point at the cell's low corner
    c10 = c00 + (R1 + 1)
    c01 = c00 + 1
    c11 = c10 + 1
    n00 = gx * tl.load(cos_p + c00) + gy * tl.load(sin_p + c00)
    n10 = (gx - 1.0) * tl.load(cos_p + c10) + gy * tl.load(sin_p + c10)
    n01 = gx * tl.load(cos_p + c01) + (gy - 1.0) * tl.load(sin_p + c01)
    n11 = (gx - 1.0) * tl.load(cos_p + c11) + (gy - 1.0) * tl.load(sin_p + c11)
    tx = _interpolant(gx)
    ty = _interpolant(gy)
    n0 = n00 * (1.0 - tx) + tx * n10
    n1 = n01 * (1.0 - tx) + tx * n11
    return SQRT2 * ((1.0 - ty) * n0 + ty * n1)


@triton.jit
def _range(noise, lo, hi):
    """The running minimum and maximum with a block of ``noise``."""
    return (tl.minimum(lo, tl.min(tl.min(noise, axis=1), axis=0)),
            tl.maximum(hi, tl.max(tl.max(noise, axis=1), axis=0)))


@triton.jit
def _norm(noise, lo, hi):
    """(noise - min) / (max - min), IEEE-rounded as torch divides."""
    return tl.math.div_rn(noise - lo, tl.zeros_like(noise) + (hi - lo))


@triton.jit
def _field(sc, x, y, R0: tl.constexpr, R1: tl.constexpr, OFF: tl.constexpr, slot: tl.constexpr, lo, hi,
           KEEP: tl.constexpr):
    """A field's noise at the cells, normalised: read back from the scratch row (``KEEP``, the
    field's ``slot`` there) or computed again."""
    if KEEP:
        noise = tl.load(sc + NOISE + slot * 4096 + x * 64 + y)
    else:
        noise = _perlin(sc, x, y, R0, R1, OFF)
    return _norm(noise, lo, hi)


@triton.jit
def _uniform(x):
    """Philox words -> float32 in [0, 1) (``worldgen.uniform``; Triton's ``uint_to_uniform_float``)."""
    x = x.to(tl.int32, bitcast=True)
    x = tl.where(x < 0, ~x, x)
    return x.to(tl.float32) * U_SCALE


@triton.jit
def _fill(p, row, N: tl.constexpr, P: tl.constexpr, value):
    """``p[row, :N] = value`` (``P``: N rounded up to a power of two)."""
    j = tl.arange(0, P)
    v = tl.zeros([P], dtype=tl.float32) + value
    tl.store(p + row * N + j, v.to(p.dtype.element_ty), mask=j < N)


# -- the kernel ------------------------------------------------------------------------------------
@triton.jit(noinline=True)
def _world(w, sc, key, list_p, episode_p, a_water, a_mountain, a_path, a_tree, u_coal_p, u_iron_p, u_diamond_p,
           u_tree_p, u_pick_p, light0, mp, mm, ppos, pdir, health, food, drink, energy, sleeping, recover, hunger,
           thirst, fatigue, inv, zpos, zhp, zmask, zcd, cpos, chp, cmask, ccd, spos, shp, smask, scd, apos, ahp,
           amask, acd, adir, plpos, plage, plmask, light, ach, ts, DRAWS: tl.constexpr, ROWS: tl.constexpr,
           KEEP: tl.constexpr):
    """The list's ``w``-th world (the four stages; ``sc``: the program's scratch row). A function
    of its own, called once a world: inlined into the kernel's loop over the list, the compiler
    hoists what each stage computes once out of the loop and keeps it live across all of them
    (it spilled ~400 bytes a thread at 128 registers; called, none)."""
    row = tl.load(list_p + w).to(tl.int64)  # its env: the state row written
    w64 = tl.zeros([], dtype=tl.int64) + w
    # -- the state besides the map, as world_from_draws leaves it
    _fill(ppos, row, 2, 2, SPAWN)
    _fill(pdir, row, 1, 1, UP)
    _fill(health, row, 1, 1, 9)
    _fill(food, row, 1, 1, 9)
    _fill(drink, row, 1, 1, 9)
    _fill(energy, row, 1, 1, 9)
    _fill(sleeping, row, 1, 1, 0)
    _fill(recover, row, 1, 1, 0)
    _fill(hunger, row, 1, 1, 0)
    _fill(thirst, row, 1, 1, 0)
    _fill(fatigue, row, 1, 1, 0)
    _fill(inv, row, 12, 16, 0)
    _fill(zpos, row, 6, 8, 0)
    _fill(zhp, row, 3, 4, 1)
    _fill(zmask, row, 3, 4, 0)
    _fill(zcd, row, 3, 4, 0)
    _fill(cpos, row, 6, 8, 0)
    _fill(chp, row, 3, 4, COW_HEALTH)
    _fill(cmask, row, 3, 4, 0)
    _fill(ccd, row, 3, 4, 0)
    _fill(spos, row, 4, 4, 0)
    _fill(shp, row, 2, 2, 0)
    _fill(smask, row, 2, 2, 0)
    _fill(scd, row, 2, 2, 0)
    _fill(apos, row, 6, 8, 0)
    _fill(ahp, row, 3, 4, 0)
    _fill(amask, row, 3, 4, 0)
    _fill(acd, row, 3, 4, 0)
    _fill(adir, row, 6, 8, 1)
    _fill(plpos, row, 20, 32, 0)
    _fill(plage, row, 10, 16, 0)
    _fill(plmask, row, 10, 16, 0)
    _fill(light, row, 1, 1, light0)
    _fill(ach, row, 22, 32, 0)
    _fill(ts, row, 1, 1, 0)

    # -- stage 1: the gradients' cosines and sines
    j = tl.arange(0, 1024)
    if DRAWS == 1:
        m = j < OFF_MOUNTAIN
        angle = tl.load(a_water + w64 * 25 + j, mask=m, other=0.0)
        m = (j >= OFF_MOUNTAIN) & (j < OFF_PATH)
        angle = tl.where(m, tl.load(a_mountain + w64 * 25 + (j - OFF_MOUNTAIN), mask=m, other=0.0), angle)
        m = (j >= OFF_PATH) & (j < OFF_TREE)
        angle = tl.where(m, tl.load(a_path + w64 * 297 + (j - OFF_PATH), mask=m, other=0.0), angle)
        m = (j >= OFF_TREE) & (j < NUM_ANGLES)
        angle = tl.where(m, tl.load(a_tree + w64 * 289 + (j - OFF_TREE), mask=m, other=0.0), angle)
        u_pick = tl.load(u_pick_p + w64)
    else:
        # this episode of this env: its counter words (draw, env, episode low, episode high)
        episode = tl.load(episode_p + row) + 1
        tl.store(episode_p + row, episode)
        env_word = row.to(tl.int32)
        lo_word = (episode & 0xFFFFFFFF).to(tl.int32)
        hi_word = (episode >> 32).to(tl.int32)
        z = j * 0
        r0, _r1, _r2, _r3 = philox(key, 4096 + j, z + env_word, z + lo_word, z + hi_word)
        angle = _uniform(r0)
        u_pick = tl.sum(tl.where(j == PICK, angle, 0.0), axis=0)
    theta = angle * TWO_PI
    live = j < NUM_ANGLES
    tl.store(sc + j, tl.cos(theta), mask=live)
    tl.store(sc + SINES + j, tl.sin(theta), mask=live)
    tl.debug_barrier()  # the scratch row, written by all the program's threads, read by all of them

    # -- stage 2: each noise field's range over the world (path's transpose has path's)
    y = tl.arange(0, 64)[None, :]
    lo_water = 1.0e30
    hi_water = -1.0e30
    lo_mountain = 1.0e30
    hi_mountain = -1.0e30
    lo_path = 1.0e30
    hi_path = -1.0e30
    lo_tree = 1.0e30
    hi_tree = -1.0e30
    for r0 in tl.range(0, 64, ROWS, loop_unroll_factor=1):
        x = r0 + tl.arange(0, ROWS)[:, None]
        water = _perlin(sc, x, y, 4, 4, OFF_WATER)
        mountain = _perlin(sc, x, y, 4, 4, OFF_MOUNTAIN)
        path = _perlin(sc, x, y, 8, 32, OFF_PATH)
        tree = _perlin(sc, x, y, 16, 16, OFF_TREE)
        if KEEP:
            cell = x * 64 + y
            tl.store(sc + NOISE + cell, water)
            tl.store(sc + NOISE + 4096 + cell, mountain)
            tl.store(sc + NOISE + 8192 + cell, path)
            tl.store(sc + NOISE + 12288 + cell, tree)
        lo_water, hi_water = _range(water, lo_water, hi_water)
        lo_mountain, hi_mountain = _range(mountain, lo_mountain, hi_mountain)
        lo_path, hi_path = _range(path, lo_path, hi_path)
        lo_tree, hi_tree = _range(tree, lo_tree, hi_tree)
    if KEEP:
        tl.debug_barrier()  # the noise, stored by all the program's threads, read by all of them

    # -- stage 3: the blocks, ROWS map rows at a time (the noise normalised)
    count_stone = tl.zeros([], dtype=tl.int32)
    for r0 in tl.range(0, 64, ROWS, loop_unroll_factor=1):
        x = r0 + tl.arange(0, ROWS)[:, None]
        cell = x * 64 + y
        dist = tl.abs(x - SPAWN) + tl.abs(y - SPAWN)
        near = tl.minimum(tl.maximum(dist.to(tl.float32) * F_FIFTH, 0.0), 1.0)
        # the path noise and its transpose (the noise at the swapped cell) matter only above 0.8
        carved = _field(sc, x, y, 8, 32, OFF_PATH, 2, lo_path, hi_path, KEEP) > F_08
        carved = carved | (_field(sc, y, x, 8, 32, OFF_PATH, 2, lo_path, hi_path, KEEP) > F_08)
        water = _field(sc, x, y, 4, 4, OFF_WATER, 0, lo_water, hi_water, KEEP) + near - 1.0
        block = tl.where(water > F_07, WATER, GRASS)
        block = tl.where((water < F_075) & (water > F_06) & (block != WATER), SAND, block)
        mountain = _field(sc, x, y, 4, 4, OFF_MOUNTAIN, 1, lo_mountain, hi_mountain, KEEP) + F_005 + near - 1.0
        high = mountain > F_07
        block = tl.where(high, STONE, block)
        block = tl.where(high & carved, PATH, block)  # the reference's two paths, one after the other
        block = tl.where((mountain > F_085) & (water > F_04), PATH, block)  # caves
        if DRAWS == 1:
            u_coal = tl.load(u_coal_p + w64 * 4096 + cell)
            u_iron = tl.load(u_iron_p + w64 * 4096 + cell)
            u_diamond = tl.load(u_diamond_p + w64 * 4096 + cell)
            u_tree = tl.load(u_tree_p + w64 * 4096 + cell)
        else:
            zc = cell * 0
            r_coal, r_iron, r_diamond, r_tree = philox(key, cell, zc + env_word, zc + lo_word, zc + hi_word)
            u_coal = _uniform(r_coal)
            u_iron = _uniform(r_iron)
            u_diamond = _uniform(r_diamond)
            u_tree = _uniform(r_tree)
        block = tl.where((block == STONE) & (u_coal < P_COAL), COAL, block)
        block = tl.where((block == STONE) & (u_iron < P_IRON), IRON, block)
        block = tl.where((mountain > F_08) & (u_diamond < P_DIAMOND) & (block == STONE), DIAMOND, block)
        tree_noise = _field(sc, x, y, 16, 16, OFF_TREE, 3, lo_tree, hi_tree, KEEP)
        # the reference's ((tree_noise > 0.5) * u_tree > 0.8): 0 or u_tree against 0.8
        block = tl.where((tree_noise > F_05) & (u_tree > F_08) & (block == GRASS), TREE, block)
        block = tl.where((mountain > F_085) & (tree_noise > F_07), LAVA, block)
        block = tl.where((x == SPAWN) & (y == SPAWN), GRASS, block)
        count_stone += tl.sum(tl.sum((block == STONE).to(tl.int32), axis=1), axis=0)
        tl.store(mp + row * 4096 + cell, block.to(tl.uint8))
        tl.store(mm + row * 4096 + cell, tl.zeros([ROWS, 64], dtype=tl.uint8))
    tl.debug_barrier()  # the map row, written by all the program's threads, read by all of them

    # -- stage 4: one more diamond on the pick-th stone cell, row-major (none without stone)
    pick = tl.minimum((u_pick * count_stone.to(tl.float32)).to(tl.int32), tl.maximum(count_stone - 1, 0))
    seen = tl.zeros([], dtype=tl.int32)  # stone cells in the rows before
    for r0 in tl.range(0, 64, ROWS, loop_unroll_factor=1):
        x = r0 + tl.arange(0, ROWS)[:, None]
        cell = x * 64 + y
        stone = (tl.load(mp + row * 4096 + cell) == STONE).to(tl.int32)
        per_row = tl.sum(stone, axis=1)
        before = tl.cumsum(per_row, axis=0) - per_row + seen
        rank = tl.cumsum(stone, axis=1) + before[:, None]  # stone cells up to and including this one
        tl.store(mp + row * 4096 + cell, tl.zeros([ROWS, 64], dtype=tl.uint8) + DIAMOND,
                 mask=(stone != 0) & (rank == pick + 1))
        seen += tl.sum(per_row, axis=0)
    # (the next world's stage 1 rewrites the scratch row: every thread is past stage 3, the barrier above)


@triton.jit
def _worldgen_kernel(list_p, count_p, key_p, episode_p, scratch_p, a_water, a_mountain, a_path, a_tree, u_coal_p,
                     u_iron_p, u_diamond_p, u_tree_p, u_pick_p, light0,
                     mp, mm, ppos, pdir, health, food, drink, energy, sleeping, recover, hunger, thirst, fatigue,
                     inv, zpos, zhp, zmask, zcd, cpos, chp, cmask, ccd, spos, shp, smask, scd, apos, ahp, amask,
                     acd, adir, plpos, plage, plmask, light, ach, ts, STRIDE: tl.constexpr, DRAWS: tl.constexpr,
                     ROWS: tl.constexpr, KEEP: tl.constexpr):
    """Each program walks the list from its index in steps of the grid, up to the count."""
    sc = scratch_p + tl.program_id(0).to(tl.int64) * STRIDE  # the program's scratch row
    key = tl.load(key_p).to(tl.int64) ^ SALT  # (unused with draws)
    for w in range(tl.program_id(0), tl.load(count_p), tl.num_programs(0)):
        _world(w, sc, key, list_p, episode_p, a_water, a_mountain, a_path, a_tree, u_coal_p, u_iron_p, u_diamond_p,
               u_tree_p, u_pick_p, light0, mp, mm, ppos, pdir, health, food, drink, energy, sleeping, recover, hunger,
               thirst, fatigue, inv, zpos, zhp, zmask, zcd, cpos, chp, cmask, ccd, spos, shp, smask, scd, apos, ahp,
               amask, acd, adir, plpos, plage, plmask, light, ach, ts, DRAWS, ROWS, KEEP)


# -- launchers -------------------------------------------------------------------------------------
def _state_args(states: dict[str, Tensor]) -> list[Tensor]:
    args = []
    for key in _KEYS:
        v = states[key]
        if not v.is_contiguous() or v.dtype != STATE_FIELDS[key][1]:
            raise ValueError(f"craftax triton worldgen: state tensor {key!r} must be contiguous "
                             f"{STATE_FIELDS[key][1]} (got {v.dtype})")
        args.append(v.view(torch.uint8) if v.dtype == torch.bool else v)
    return args


class WorldGen:
    """World generation for the envs a list names, on a fixed grid of programs: the launch
    (and its scratch, allocated here) is the same for any list of at most ``max_worlds``."""

    __scratch__ = ("scratch",)  # what the last world of each program left there (verify-graph skips it)

    def __init__(self, max_worlds: int, device: torch.device) -> None:
        self.max_worlds, self.device = max_worlds, torch.device(device)
        interpret = os.environ.get("TRITON_INTERPRET", "") == "1"
        self.launch = {"per_sm": PER_SM, "rows": 64 if interpret else ROWS, "warps": NUM_WARPS, "keep": KEEP}
        """Launch settings (``benchmarks/craftax_kernels.py`` times alternatives); the worlds do not
        depend on them. ``per_sm``: programs per multiprocessor (0: one program); ``rows``: map rows
        a program computes at once (16, 32 or 64; under the interpreter 64 by default: fewer, larger
        tensor ops are faster there); ``keep``: stage 3 reads the noise back instead of computing it
        again."""
        self.configure()

    def configure(self, **launch: int) -> None:
        """Change launch settings (keys of :attr:`launch`)."""
        unknown = set(launch) - set(self.launch)
        if unknown:
            raise ValueError(f"craftax triton worldgen: unknown launch settings {sorted(unknown)}")
        self.launch.update(launch)
        if self.launch["rows"] not in (16, 32, 64):
            raise ValueError(f"craftax triton worldgen: rows must be 16, 32 or 64, got {self.launch['rows']}")
        per_sm = self.launch["per_sm"]
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count if self.device.type == "cuda" else 1
        self.programs = max(1, min(self.max_worlds, sms * per_sm if per_sm else 1))
        self.stride = GRADIENTS + (4 * 4096 if self.launch["keep"] else 0)
        self.scratch = torch.empty((self.programs, self.stride), dtype=torch.float32, device=self.device)

    def __call__(self, states: dict[str, Tensor], envs: Tensor, count: Tensor, light0: float, *,
                 key: Tensor | None = None, episode: Tensor | None = None,
                 draws: dict[str, Tensor] | None = None) -> None:
        """Write fresh worlds into the rows ``envs[:count]`` of ``states[key]`` ([N, ...] contiguous
        tensors, every key of ``STATE_FIELDS``), with ``light_level = light0``. ``envs``: int32 or
        int64 device tensor of distinct rows; ``count``: its length, an int32/int64 device tensor
        [1] read in the kernel (at most ``max_worlds``). Variates: with ``key`` (int64 [1]) and
        ``episode`` (int64 [N], one added for each listed env first) the episode's own Philox
        stream (:func:`worldgen.episode_draws`); else ``draws`` (``worldgen.sample_world_draws``'
        layout, world ``i`` of the list reading row ``i``). No host sync: recordable."""
        args = _state_args(states)
        if draws is not None:
            k = envs.numel()
            d = [draws[name].to(torch.float32).contiguous() for name in _DRAW_KEYS]
            if any(v.shape[0] != k for v in d):
                raise ValueError(f"craftax triton worldgen: draws for {k} worlds needed, got "
                                 f"{ {name: tuple(v.shape) for name, v in zip(_DRAW_KEYS, d, strict=True)} }")
            key_t, episode_t, mode = count, count, 1
        elif key is not None and episode is not None:
            d, key_t, episode_t, mode = [self.scratch] * len(_DRAW_KEYS), key, episode, 0
        else:
            raise ValueError("craftax triton worldgen: give draws, or a key and the episode counters")
        c = self.launch
        cap = {"maxnreg": MAXNREG} if c["rows"] == 16 and self.device.type == "cuda" else {}
        _worldgen_kernel[(self.programs,)](envs, count, key_t, episode_t, self.scratch, *d, float(light0), *args,
                                           STRIDE=self.stride, DRAWS=mode, ROWS=c["rows"], KEEP=c["keep"],
                                           num_warps=c["warps"], enable_fp_fusion=False, **cap)


def generate_into(states: dict[str, Tensor], envs: Tensor, light0: float, draws: dict[str, Tensor] | None = None,
                  key: Tensor | None = None, episode: Tensor | None = None, **launch: int) -> None:
    """:class:`WorldGen` for one list, ``envs`` (all of it: its count made here), e.g. for tests;
    ``launch``: :attr:`WorldGen.launch` settings."""
    if envs.numel() == 0:
        return
    gen = WorldGen(envs.numel(), envs.device)
    gen.configure(**launch)
    count = torch.full((1,), envs.numel(), dtype=torch.int32, device=envs.device)
    gen(states, envs.reshape(-1), count, light0, key=key, episode=episode, draws=draws)
