"""The tail of the full game's step (:func:`.game.tail`, then ``clean_floors``) as Triton: the five
mob classes, spawning, plants, intrinsics, the inventory cap and its achievements.

:mod:`.game` (torch) is the reference: fed the same action taken and variates, :func:`run_tail` leaves
the state's arena byte for byte as ``g.enter_level(); game.tail(g, a, d); g.leave_level()`` does.
``tests/envs/test_craftax_full_triton_tail.py`` checks it (in Triton's interpreter on a CPU,
compiled on CUDA) on states of every floor, the boss fight, mobs of each class next to the player
and at range, projectiles, sleeping, spawns, ripening plants, the intrinsics' thresholds and full
inventories, several steps in a row.

Why: the torch tail is many small launches a step (every mob slot is gathered, moved and
scattered one by one); here a lane is a world (``triton_lanes.BLOCK`` a program) that reads and writes its
row of the arena in place (:mod:`.triton_lanes`: the views, the field offsets, the shared rules),
the player's floor's mob slots addressed at ``player_level``, each rule the torch code's masked
arithmetic in the same order, so a cell's reads see the writes before them as the torch
sequence of in-place ops does. Floats keep the torch code's order, its ``_fma`` is ``tl.fma`` and
the kernels launch with ``enable_fp_fusion=False``.

Three kernels, in the torch code's order: the mobs, spawning, the rest (:func:`run_tail`); a fourth,
:func:`run_finish`, is :func:`.game.finish` (reward, termination, the clock and its light) in one
launch where the torch code takes some thirty small ones (the reward's single rounding among them).
Spawning scans the window of cells at squared distance < 14^2 around the player for each class
whose draw says it may spawn: its valid cells counted and the ``floor(u * count)``-th located, in
one [1, 32 x 32] tile. It has its own kernel, one world a program: in a program of 128 worlds
some world nearly always draws a spawn, so every program scanned, for all its lanes (on an H100
the tail took 2.4 of the step's 5.4 ms at 65,536 envs with the scan inside, 2026-12-07).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full import game
from noeira.envs.craftax_full import triton_lanes as ln
from noeira.envs.craftax_full.state import OFFSETS, State
from noeira.envs.craftax_full.triton_lanes import (
    BOSS_LEVEL,
    DESPAWN,
    F_BOSS_PROGRESS,
    F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND,
    F_BOW_ENCHANTMENT,
    F_GROWING_PLANTS_AGE,
    F_GROWING_PLANTS_MASK,
    F_GROWING_PLANTS_POSITIONS,
    F_INVENTORY_ARMOUR,
    F_INVENTORY_ARROWS,
    F_INVENTORY_BOW,
    F_INVENTORY_POTIONS,
    F_INVENTORY_TORCHES,
    F_INVENTORY_WOOD,
    F_IS_RESTING,
    F_IS_SLEEPING,
    F_LIGHT_LEVEL,
    F_MAP,
    F_MELEE_MOBS_ATTACK_COOLDOWN,
    F_MELEE_MOBS_HEALTH,
    F_MELEE_MOBS_MASK,
    F_MELEE_MOBS_POSITION,
    F_MELEE_MOBS_TYPE_ID,
    F_MOB_MAP,
    F_MOB_PROJECTILE_DIRECTIONS,
    F_MOB_PROJECTILES_MASK,
    F_MOB_PROJECTILES_POSITION,
    F_MOB_PROJECTILES_TYPE_ID,
    F_MONSTERS_KILLED,
    F_PASSIVE_MOBS_HEALTH,
    F_PASSIVE_MOBS_MASK,
    F_PASSIVE_MOBS_POSITION,
    F_PASSIVE_MOBS_TYPE_ID,
    F_PLAYER_DEXTERITY,
    F_PLAYER_DRINK,
    F_PLAYER_ENERGY,
    F_PLAYER_FATIGUE,
    F_PLAYER_FOOD,
    F_PLAYER_HEALTH,
    F_PLAYER_HUNGER,
    F_PLAYER_INTELLIGENCE,
    F_PLAYER_LEVEL,
    F_PLAYER_MANA,
    F_PLAYER_POSITION,
    F_PLAYER_PROJECTILE_DIRECTIONS,
    F_PLAYER_PROJECTILES_MASK,
    F_PLAYER_PROJECTILES_POSITION,
    F_PLAYER_PROJECTILES_TYPE_ID,
    F_PLAYER_RECOVER,
    F_PLAYER_RECOVER_MANA,
    F_PLAYER_STRENGTH,
    F_PLAYER_THIRST,
    F_RANGED_MOBS_ATTACK_COOLDOWN,
    F_RANGED_MOBS_HEALTH,
    F_RANGED_MOBS_MASK,
    F_RANGED_MOBS_POSITION,
    F_RANGED_MOBS_TYPE_ID,
    MELEE,
    PASSIVE,
    RANGED,
    WATER,
    constant,
)

__all__ = ["clean_floors", "run_tail"]

U_MELEE_AXIS, U_MELEE_CHASE = constant(game.U_MELEE_AXIS), constant(game.U_MELEE_CHASE)
U_RANGED_AXIS, U_RANGED_MOVE = constant(game.U_RANGED_AXIS), constant(game.U_RANGED_MOVE)
U_SPAWN, U_SPAWN_CELL = constant(game.U_SPAWN), constant(game.U_SPAWN_CELL)
SLEEP, REST = constant(C.SLEEP), constant(C.ACT["rest"])
A_WAKE_UP, A_FIND_BOW = constant(C.A["wake_up"]), constant(C.A["find_bow"])
A_MAKE_ARROW, A_MAKE_TORCH = constant(C.A["make_arrow"]), constant(C.A["make_torch"])
ARROW, ARROW2, FIREBALL, ICEBALL = (constant(v) for v in (C.ARROW, C.ARROW2, C.FIREBALL, C.ICEBALL))
SCALARS = constant(len(C.INVENTORY_SCALARS))
_STRIDE = (OFFSETS["inventory.stone"] - OFFSETS["inventory.wood"]) // 4
assert all(OFFSETS[f"inventory.{k}"] == OFFSETS["inventory.wood"] + 4 * _STRIDE * i
           for i, k in enumerate(C.INVENTORY_SCALARS)), "the inventory's scalars are evenly spaced, in their order"
SCALAR_STRIDE = constant(_STRIDE)
"""Words from one inventory scalar to the next (each field has its own 16 bytes)."""
COLLECTED = constant(sum(1 << i for i, k in enumerate(C.INVENTORY_SCALARS) if f"collect_{k}" in C.A))
"""Bit ``i``: inventory scalar ``i`` has a ``collect_`` achievement (wood, stone, coal, ..., sapling)."""
COLLECT_ACH = constant(sum(C.A.get(f"collect_{k}", 0) << (7 * i) for i, k in enumerate(C.INVENTORY_SCALARS)))
"""The ``collect_`` achievement of each inventory scalar (7 bits each; 0 where none; only unpacked at
compile time, so wider than 64 bits)."""
PICKAXE_ACH = ln.pack([C.A[f"make_{m}_pickaxe"] for m in ("wood", "stone", "iron", "diamond")], 7)
SWORD_ACH = ln.pack([C.A[f"make_{m}_sword"] for m in ("wood", "stone", "iron", "diamond")], 7)
"""``make_<wood..diamond>_<tool>``: the achievement of each tool level 1..4 (7 bits each)."""
F_INVENTORY_PICKAXE, F_INVENTORY_SWORD = ln.F_INVENTORY_PICKAXE, ln.F_INVENTORY_SWORD
GRASS, PATH, FIRE_GRASS, ICE_GRASS = ln.GRASS, ln.PATH, ln.FIRE_GRASS, ln.ICE_GRASS
GRAVE, GRAVE2, GRAVE3 = ln.GRAVE, ln.GRAVE2, ln.GRAVE3
FURNACE, CRAFTING_TABLE, RIPE_PLANT = ln.FURNACE, ln.CRAFTING_TABLE, ln.RIPE_PLANT
LEVELS, PLANTS = constant(C.NUM_LEVELS), constant(C.MAX_GROWING_PLANTS)
KILLS_TO_CLEAR = constant(C.MONSTERS_KILLED_TO_CLEAR_LEVEL)
REACH = constant(C.MOB_DESPAWN_DISTANCE - 1)
"""The spawn window's half width (its cells are at squared distance < 14^2 from the player)."""
SIDE = constant(32)
"""The spawn window's side in its tile: [SIDE x SIDE] cells around the player, of which the
(2 REACH + 1)^2 = 27 x 27 nearest are the window."""
SPAWN_BLOCK, SPAWN_WARPS = 1, 1
"""The spawn kernel's launch: one world a program (its window one [1, SIDE * SIDE] tile), one warp."""


# -- the mobs ---------------------------------------------------------------------------------------
@triton.jit
def _relocate(a8, r8, lvl, x, y, alive, nx, ny, now, live):
    """game._relocate: the old cell's ``mob_map`` flag cleared if the mob was alive, the new cell's set if it is."""
    oidx, ook = ln.cell(lvl, x, y)
    ln.grid_put(a8, r8, F_MOB_MAP, oidx, ook, (ln.grid_get(a8, r8, F_MOB_MAP, oidx, live) != 0) & ~alive, live)
    nidx, nok = ln.cell(lvl, nx, ny)
    ln.grid_put(a8, r8, F_MOB_MAP, nidx, nok, (ln.grid_get(a8, r8, F_MOB_MAP, nidx, live) != 0) | now, live)


@triton.jit
def _melee_mobs(a8, a32, af, r8, r32, e64, live, lvl, px, py, boss, u_p, dirs_p):
    """game._melee_mobs: chase (or wander), hit the player when next to it, despawn when far."""
    for i in tl.static_range(3):
        slot = lvl * 3 + i
        x = ln.ld32(a32, r32, F_MELEE_MOBS_POSITION + slot * 2, live)
        y = ln.ld32(a32, r32, F_MELEE_MOBS_POSITION + slot * 2 + 1, live)
        alive = ln.flag(a8, r8, F_MELEE_MOBS_MASK + slot, live)
        ty = ln.ld32(a32, r32, F_MELEE_MOBS_TYPE_ID + slot, live)
        rx, ry = ln.move(ln.direction(dirs_p, e64, i, live) & 3)
        cx, cy = ln.towards(x, y, px, py, ln.uniform(u_p, e64, U_MELEE_AXIS + i, live))
        dist = tl.abs(x - px) + tl.abs(y - py)
        chase = ((dist < 10) | boss) & (ln.uniform(u_p, e64, U_MELEE_CHASE + i, live) < 0.75)
        qx = tl.where(chase, x + cx, x + rx)
        qy = tl.where(chase, y + cy, y + ry)
        cd = ln.ld32(a32, r32, F_MELEE_MOBS_ATTACK_COOLDOWN + slot, live)
        attack = (dist == 1) & (cd <= 0) & alive
        qx = tl.where(attack, x, qx)
        qy = tl.where(attack, y, qy)
        sleeping = ln.flag(a8, r8, F_IS_SLEEPING, live)
        m0, m1, m2 = ln.mob_damage(ty, 0)
        boost = 1.0 + 2.5 * sleeping.to(tl.float32)
        dmg = ln.damage_to_player(a32, r32, lvl, m0 * boost, m1 * boost, m2 * boost, live)
        health = ln.ldf(af, r32, F_PLAYER_HEALTH, live)
        ln.stf(af, r32, F_PLAYER_HEALTH, health - dmg * attack.to(tl.float32), live)
        ln.set_ach(a8, r8, A_WAKE_UP, sleeping & attack, live)
        ln.st8(a8, r8, F_IS_SLEEPING, sleeping & ~attack, live)
        ln.st8(a8, r8, F_IS_RESTING, ln.flag(a8, r8, F_IS_RESTING, live) & ~attack, live)
        ln.st32(a32, r32, F_MELEE_MOBS_ATTACK_COOLDOWN + slot, tl.where(attack, 5, cd - 1), live)
        ground, water, lava = ln.collision(ty, MELEE)
        ok = ln.valid_move(a8, r8, lvl, qx, qy, px, py, ground, water, lava, live)
        nx = tl.where(ok, qx, x)
        ny = tl.where(ok, qy, y)
        now = alive & ((dist < DESPAWN) | boss)
        _relocate(a8, r8, lvl, x, y, alive, nx, ny, now, live)
        ln.st32(a32, r32, F_MELEE_MOBS_POSITION + slot * 2, nx, live)
        ln.st32(a32, r32, F_MELEE_MOBS_POSITION + slot * 2 + 1, ny, live)
        ln.st8(a8, r8, F_MELEE_MOBS_MASK + slot, now, live)


@triton.jit
def _passive_mobs(a8, a32, r8, r32, e64, live, lvl, px, py, dirs_p):
    """game._passive_mobs: a random step (or none), despawn when far."""
    for i in tl.static_range(3):
        slot = lvl * 3 + i
        x = ln.ld32(a32, r32, F_PASSIVE_MOBS_POSITION + slot * 2, live)
        y = ln.ld32(a32, r32, F_PASSIVE_MOBS_POSITION + slot * 2 + 1, live)
        alive = ln.flag(a8, r8, F_PASSIVE_MOBS_MASK + slot, live)
        ty = ln.ld32(a32, r32, F_PASSIVE_MOBS_TYPE_ID + slot, live)
        rx, ry = ln.move(ln.direction(dirs_p, e64, 3 + i, live) & 7)
        qx = x + rx
        qy = y + ry
        ground, water, lava = ln.collision(ty, PASSIVE)
        ok = ln.valid_move(a8, r8, lvl, qx, qy, px, py, ground, water, lava, live)
        nx = tl.where(ok, qx, x)
        ny = tl.where(ok, qy, y)
        now = alive & (tl.abs(x - px) + tl.abs(y - py) < DESPAWN)
        _relocate(a8, r8, lvl, x, y, alive, nx, ny, now, live)
        ln.st32(a32, r32, F_PASSIVE_MOBS_POSITION + slot * 2, nx, live)
        ln.st32(a32, r32, F_PASSIVE_MOBS_POSITION + slot * 2 + 1, ny, live)
        ln.st8(a8, r8, F_PASSIVE_MOBS_MASK + slot, now, live)


@triton.jit
def _ranged_mobs(a8, a32, r8, r32, e64, live, lvl, px, py, boss, u_p, dirs_p):
    """game._ranged_mobs: keep at range 4..5 (or wander), shoot from there (or when cornered), despawn when far."""
    for i in tl.static_range(2):
        slot = lvl * 2 + i
        x = ln.ld32(a32, r32, F_RANGED_MOBS_POSITION + slot * 2, live)
        y = ln.ld32(a32, r32, F_RANGED_MOBS_POSITION + slot * 2 + 1, live)
        alive = ln.flag(a8, r8, F_RANGED_MOBS_MASK + slot, live)
        ty = ln.ld32(a32, r32, F_RANGED_MOBS_TYPE_ID + slot, live)
        ground, water, lava = ln.collision(ty, RANGED)
        rx, ry = ln.move(ln.direction(dirs_p, e64, 6 + i, live) & 3)
        rx = x + rx
        ry = y + ry
        cx, cy = ln.towards(x, y, px, py, ln.uniform(u_p, e64, U_RANGED_AXIS + i, live))
        dist = tl.abs(x - px) + tl.abs(y - py)
        far = dist >= 6
        close = dist <= 3
        qx = tl.where(close, x - cx, tl.where(far, x + cx, rx))
        qy = tl.where(close, y - cy, tl.where(far, y + cy, ry))
        considered = ln.uniform(u_p, e64, U_RANGED_MOVE + i, live) > 0.85
        qx = tl.where(considered, qx, rx)
        qy = tl.where(considered, qy, ry)
        blocked = ~ln.valid_move(a8, r8, lvl, qx, qy, px, py, ground, water, lava, live)
        cd = ln.ld32(a32, r32, F_RANGED_MOBS_ATTACK_COOLDOWN + slot, live)
        attack = (((dist >= 4) & (dist <= 5)) | (close & blocked)) & (cd <= 0) & alive
        flying = tl.zeros_like(x)
        for k in tl.static_range(3):
            flying += ln.ld8(a8, r8, F_MOB_PROJECTILES_MASK + lvl * 3 + k, live)
        shoot = attack & (flying < 3)
        ln.spawn_projectile(a8, a32, r8, r32, lvl, F_MOB_PROJECTILES_POSITION, F_MOB_PROJECTILES_MASK,
                            F_MOB_PROJECTILE_DIRECTIONS, F_MOB_PROJECTILES_TYPE_ID, shoot, x, y, cx, cy,
                            ln.unpack(ln.RANGED_PROJECTILE, ty, 3), live)
        qx = tl.where(attack, x, qx)
        qy = tl.where(attack, y, qy)
        ln.st32(a32, r32, F_RANGED_MOBS_ATTACK_COOLDOWN + slot, tl.where(attack, 4, cd - 1), live)
        ok = ln.valid_move(a8, r8, lvl, qx, qy, px, py, ground, water, lava, live)
        nx = tl.where(ok, qx, x)
        ny = tl.where(ok, qy, y)
        now = alive & ((dist < DESPAWN) | boss)
        _relocate(a8, r8, lvl, x, y, alive, nx, ny, now, live)
        ln.st32(a32, r32, F_RANGED_MOBS_POSITION + slot * 2, nx, live)
        ln.st32(a32, r32, F_RANGED_MOBS_POSITION + slot * 2 + 1, ny, live)
        ln.st8(a8, r8, F_RANGED_MOBS_MASK + slot, now, live)


@triton.jit
def _mob_projectiles(a8, a32, af, r8, r32, live, lvl, px, py):
    """game._mob_projectiles: fly on, break furnaces and tables, hit the player (waking it), stop at walls and mobs."""
    for i in tl.static_range(3):
        slot = lvl * 3 + i
        x = ln.ld32(a32, r32, F_MOB_PROJECTILES_POSITION + slot * 2, live)
        y = ln.ld32(a32, r32, F_MOB_PROJECTILES_POSITION + slot * 2 + 1, live)
        qx = x + ln.ld32(a32, r32, F_MOB_PROJECTILE_DIRECTIONS + slot * 2, live)
        qy = y + ln.ld32(a32, r32, F_MOB_PROJECTILE_DIRECTIONS + slot * 2 + 1, live)
        alive = ln.flag(a8, r8, F_MOB_PROJECTILES_MASK + slot, live)
        idx, ok = ln.cell(lvl, qx, qy)
        block = ln.grid_get(a8, r8, F_MAP, idx, live)
        on_player = (qx == px) & (qy == py)
        go = (ln.in_bounds(qx, qy) & ~(ln.solid(block) & (block != WATER))
              & ~ln.in_mob(a8, r8, idx, qx, qy, px, py, live))
        hit = (((x == px) & (y == py)) | on_player) & alive
        go = go & ~hit
        breaks = alive & ((block == FURNACE) | (block == CRAFTING_TABLE))
        ln.grid_put(a8, r8, F_MAP, idx, ok & breaks, tl.zeros_like(block) + PATH, live)
        v0, v1, v2 = ln.mob_damage(ln.ld32(a32, r32, F_MOB_PROJECTILES_TYPE_ID + slot, live), 1)
        dmg = ln.damage_to_player(a32, r32, lvl, v0, v1, v2, live)
        health = ln.ldf(af, r32, F_PLAYER_HEALTH, live)
        ln.stf(af, r32, F_PLAYER_HEALTH, health - dmg * hit.to(tl.float32), live)
        ln.st8(a8, r8, F_IS_SLEEPING, ln.flag(a8, r8, F_IS_SLEEPING, live) & ~hit, live)
        ln.st8(a8, r8, F_IS_RESTING, ln.flag(a8, r8, F_IS_RESTING, live) & ~hit, live)
        ln.st8(a8, r8, F_MOB_PROJECTILES_MASK + slot, go & alive, live)
        ln.st32(a32, r32, F_MOB_PROJECTILES_POSITION + slot * 2, qx, live)
        ln.st32(a32, r32, F_MOB_PROJECTILES_POSITION + slot * 2 + 1, qy, live)


@triton.jit
def _player_projectiles(a8, a32, af, r8, r32, live, lvl):
    """game._player_projectiles: arrows (bow enchantment, dexterity) and spells (intelligence) hit the
    mobs on their cell, then on the next one, and fly on unless they hit a mob or a wall."""
    for i in tl.static_range(3):
        slot = lvl * 3 + i
        ptype = ln.ld32(a32, r32, F_PLAYER_PROJECTILES_TYPE_ID + slot, live)
        alive = ln.flag(a8, r8, F_PLAYER_PROJECTILES_MASK + slot, live)
        s0, s1, s2 = ln.mob_damage(ptype, 1)
        v0 = s0 * alive.to(tl.float32)
        v1 = s1 * alive.to(tl.float32)
        v2 = s2 * alive.to(tl.float32)
        arrow = (ptype == ARROW) | (ptype == ARROW2)
        bow = tl.minimum(tl.maximum(ln.ld32(a32, r32, F_BOW_ENCHANTMENT, live), 0), 2)
        half = v0 * 0.5
        v0 = v0 + 0.0
        v1 = v1 + tl.where(arrow & (bow == 1), half, 0.0)
        v2 = v2 + tl.where(arrow & (bow == 2), half, 0.0)
        dex = (ln.ld32(a32, r32, F_PLAYER_DEXTERITY, live) - 1).to(tl.float32)
        k = tl.where(arrow, tl.fma(dex, ln.FIFTH, 1.0), 1.0)
        v0 = v0 * k
        v1 = v1 * k
        v2 = v2 * k
        magic = (ptype == FIREBALL) | (ptype == ICEBALL)
        intelligence = (ln.ld32(a32, r32, F_PLAYER_INTELLIGENCE, live) - 1).to(tl.float32)
        k = tl.where(magic, tl.fma(intelligence, 0.5, 1.0), 1.0)
        v0 = v0 * k
        v1 = v1 * k
        v2 = v2 * k
        x = ln.ld32(a32, r32, F_PLAYER_PROJECTILES_POSITION + slot * 2, live)
        y = ln.ld32(a32, r32, F_PLAYER_PROJECTILES_POSITION + slot * 2 + 1, live)
        qx = x + ln.ld32(a32, r32, F_PLAYER_PROJECTILE_DIRECTIONS + slot * 2, live)
        qy = y + ln.ld32(a32, r32, F_PLAYER_PROJECTILE_DIRECTIONS + slot * 2 + 1, live)
        idx, _ok = ln.cell(lvl, qx, qy)
        block = ln.grid_get(a8, r8, F_MAP, idx, live)
        wall = ln.solid(block) & (block != WATER)
        everyone = live | ~live
        att0, _k0 = ln.attack(a8, a32, af, r8, r32, lvl, x, y, v0, v1, v2, False, everyone, live)
        k = 1 - att0.to(tl.float32)
        att1, _k1 = ln.attack(a8, a32, af, r8, r32, lvl, qx, qy, v0 * k, v1 * k, v2 * k, False, everyone, live)
        ln.st8(a8, r8, F_PLAYER_PROJECTILES_MASK + slot, ln.in_bounds(qx, qy) & ~wall & ~(att0 | att1) & alive, live)
        ln.st32(a32, r32, F_PLAYER_PROJECTILES_POSITION + slot * 2, qx, live)
        ln.st32(a32, r32, F_PLAYER_PROJECTILES_POSITION + slot * 2 + 1, qy, live)


# -- spawning ---------------------------------------------------------------------------------------
@triton.jit
def _window(a8, r8, lvl, px, py, need, boss, deep, CLS: tl.constexpr):  # noqa: N803
    """The spawn window as one [BLOCK, SIDE * SIDE] tile (row-major, as the map): the cells where a
    mob of class ``CLS`` may spawn now (in the window and on the map, no mob, the class's block
    and distance; ``deep``: a deep thing, which spawns in water), and their coordinates."""
    at = tl.arange(0, SIDE * SIDE)[None, :]
    dx = at // SIDE - REACH
    dy = at % SIDE - REACH
    d2 = dx * dx + dy * dy
    x = px[:, None] + dx
    y = py[:, None] + dy
    m = need[:, None] & (dx <= REACH) & (dy <= REACH) & (d2 < DESPAWN * DESPAWN) & ln.in_bounds(x, y)
    at = lvl[:, None] * ln.CELLS + x * ln.W + y
    block = ln.grid_get(a8, r8[:, None], F_MAP, at, m)
    free = m & (ln.grid_get(a8, r8[:, None], F_MOB_MAP, at, m) == 0)
    normal = (block == GRASS) | (block == PATH) | (block == FIRE_GRASS) | (block == ICE_GRASS)
    grave = (block == GRAVE) | (block == GRAVE2) | (block == GRAVE3)
    if CLS == PASSIVE:
        where = normal & (d2 > 9)
    else:
        monster = tl.where(boss[:, None], grave & (d2 <= 36), normal & (d2 > 81))
        if CLS == RANGED:
            water = tl.where(boss[:, None], grave & (d2 <= 36), (block == WATER) & (d2 > 81))
            monster = tl.where(deep[:, None], water, monster)
        where = monster
    return (free & where).to(tl.int32), x, y


@triton.jit
def _spawn_cell(a8, r8, lvl, px, py, need, boss, deep, u_cell, CLS: tl.constexpr):  # noqa: N803
    """Over the spawn window (row-major), the cells where a mob of class ``CLS`` may spawn: their
    count and the ``floor(u_cell * count)``-th one (game._pick), for the ``need`` lanes."""
    count = tl.zeros_like(px)
    sx = tl.zeros_like(px)
    sy = tl.zeros_like(px)
    if tl.max(need.to(tl.int32), axis=0) > 0:  # (the same branch for the whole program)
        # the window's cells sit in other threads than the lane's, which may have written mob_map
        # just before (the previous class's spawn): make those writes visible
        tl.debug_barrier()
        v, x, y = _window(a8, r8, lvl, px, py, need, boss, deep, CLS)
        count = tl.sum(v, axis=1)
        j = tl.minimum((u_cell * count.to(tl.float32)).to(tl.int32), tl.maximum(count - 1, 0))
        hit = (v != 0) & (tl.cumsum(v, axis=1) == (j + 1)[:, None])
        sx = tl.sum(tl.where(hit, x, 0), axis=1)
        sy = tl.sum(tl.where(hit, y, 0), axis=1)
    return count, sx, sy


@triton.jit
def _spawn_class(a8, a32, af, r8, r32, live, lvl, px, py, boss, go, mtype, u_cell, POS: tl.constexpr,  # noqa: N803
                 HEALTH: tl.constexpr, MASK: tl.constexpr, TYPE: tl.constexpr, COUNT: tl.constexpr,
                 CLS: tl.constexpr, FRESH: tl.constexpr):
    """One class of game._spawn: where its draw says so, a slot is free and the window has a cell
    for it, a mob of type ``mtype`` with ``FRESH``'s health (by type) in the first free slot; the
    first free slot (slot 0 when none) takes the type id in any case, and its cell enters
    ``mob_map`` if the slot is alive (the reference's bookkeeping, quirks kept)."""
    free = tl.zeros_like(px)
    for i in tl.static_range(COUNT):
        free |= ln.bit(~ln.flag(a8, r8, MASK + lvl * COUNT + i, live), i)
    need = live & go & (free != 0)
    count, sx, sy = _spawn_cell(a8, r8, lvl, px, py, need, boss, mtype == 5, u_cell, CLS)
    spawn = need & (count > 0)
    at = lvl * COUNT + ln.first(free, COUNT)
    # the slot as it was, so nothing below reads back what another thread of the program stored
    alive = ln.flag(a8, r8, MASK + at, live) | spawn
    x = tl.where(spawn, sx, ln.ld32(a32, r32, POS + at * 2, live))
    y = tl.where(spawn, sy, ln.ld32(a32, r32, POS + at * 2 + 1, live))
    ln.st32(a32, r32, POS + at * 2, sx, spawn)
    ln.st32(a32, r32, POS + at * 2 + 1, sy, spawn)
    ln.stf(af, r32, HEALTH + at, ln.unpack(FRESH, mtype, 5).to(tl.float32), spawn)
    ln.st8(a8, r8, MASK + at, spawn, spawn)
    ln.st32(a32, r32, TYPE + at, mtype, live)
    sidx, sok = ln.cell(lvl, x, y)
    ln.grid_put(a8, r8, F_MOB_MAP, sidx, sok, (ln.grid_get(a8, r8, F_MOB_MAP, sidx, live) != 0) | alive, live)


@triton.jit
def _spawn(a8, a32, af, r8, r32, e64, live, lvl, px, py, boss, u_p):
    """game._spawn: at most one passive, one melee and one ranged mob near the player (in the boss
    fight: the necromancer's waves, near graves)."""
    killed = ln.ld32(a32, r32, F_MONSTERS_KILLED + lvl, live)
    coeff = 1 + 2 * (killed < KILLS_TO_CLEAR).to(tl.int32)
    wave = boss & (ln.ld32(a32, r32, F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND, live) >= 1)
    coeff = coeff * tl.where(boss, wave.to(tl.int32) * 1000, 1)
    dark = 1.0 - ln.ldf(af, r32, F_LIGHT_LEVEL, live)
    melee_chance = tl.fma(ln.floor_chance(ln.CHANCE_NIGHT, lvl), dark * dark, ln.floor_chance(ln.CHANCE_MELEE, lvl))
    progress = tl.minimum(tl.maximum(ln.ld32(a32, r32, F_BOSS_PROGRESS, live), 0), LEVELS - 1)
    go = (ln.uniform(u_p, e64, U_SPAWN, live) < ln.floor_chance(ln.CHANCE_PASSIVE, lvl)) & ~boss
    _spawn_class(a8, a32, af, r8, r32, live, lvl, px, py, boss, go, ln.unpack(ln.FLOOR_TYPE_P, lvl, 3),
                 ln.uniform(u_p, e64, U_SPAWN_CELL + PASSIVE, live), F_PASSIVE_MOBS_POSITION, F_PASSIVE_MOBS_HEALTH,
                 F_PASSIVE_MOBS_MASK, F_PASSIVE_MOBS_TYPE_ID, 3, PASSIVE, ln.HEALTH_P)
    go = ln.uniform(u_p, e64, U_SPAWN + 1, live) < melee_chance * coeff.to(tl.float32)
    mtype = tl.where(boss, ln.unpack(ln.FLOOR_TYPE_M, progress, 3), ln.unpack(ln.FLOOR_TYPE_M, lvl, 3))
    _spawn_class(a8, a32, af, r8, r32, live, lvl, px, py, boss, go, mtype,
                 ln.uniform(u_p, e64, U_SPAWN_CELL + MELEE, live), F_MELEE_MOBS_POSITION, F_MELEE_MOBS_HEALTH,
                 F_MELEE_MOBS_MASK, F_MELEE_MOBS_TYPE_ID, 3, MELEE, ln.HEALTH_M)
    go = ln.uniform(u_p, e64, U_SPAWN + 2, live) < ln.floor_chance(ln.CHANCE_RANGED, lvl) * coeff.to(tl.float32)
    mtype = tl.where(boss, ln.unpack(ln.FLOOR_TYPE_R, progress, 3), ln.unpack(ln.FLOOR_TYPE_R, lvl, 3))
    _spawn_class(a8, a32, af, r8, r32, live, lvl, px, py, boss, go, mtype,
                 ln.uniform(u_p, e64, U_SPAWN_CELL + RANGED, live), F_RANGED_MOBS_POSITION, F_RANGED_MOBS_HEALTH,
                 F_RANGED_MOBS_MASK, F_RANGED_MOBS_TYPE_ID, 2, RANGED, ln.HEALTH_R)


# -- the player and the world -----------------------------------------------------------------------
@triton.jit
def _plants(a8, a32, r8, r32, live):
    """game._plants: the overworld's growing plants age; at 600 their cell becomes a ripe plant."""
    for i in tl.static_range(PLANTS):
        age = ln.ld32(a32, r32, F_GROWING_PLANTS_AGE + i, live)
        age = (age + 1) * ln.ld8(a8, r8, F_GROWING_PLANTS_MASK + i, live)
        ln.st32(a32, r32, F_GROWING_PLANTS_AGE + i, age, live)
        x = ln.ld32(a32, r32, F_GROWING_PLANTS_POSITIONS + i * 2, live)
        y = ln.ld32(a32, r32, F_GROWING_PLANTS_POSITIONS + i * 2 + 1, live)
        idx, ok = ln.cell(tl.zeros_like(x), x, y)
        ln.grid_put(a8, r8, F_MAP, idx, ok & (age >= 600), tl.zeros_like(x) + RIPE_PLANT, live)


@triton.jit
def _need(af, a32, r32, live, NEED: tl.constexpr, LEVEL: tl.constexpr, rate, limit, not_boss):  # noqa: N803
    """Hunger or thirst grows by ``rate``; over ``limit`` it costs a food (drink) point (none in the boss fight)."""
    x = ln.ldf(af, r32, NEED, live) + rate
    over = x > limit
    level = ln.ld32(a32, r32, LEVEL, live)
    ln.st32(a32, r32, LEVEL, tl.where(over, tl.maximum(level - not_boss, 0), level), live)
    ln.stf(af, r32, NEED, tl.where(over, 0.0, x), live)


@triton.jit
def _intrinsics(a8, a32, af, r8, r32, live, act, boss):
    """game._intrinsics: sleeping and waking, resting, hunger, thirst, fatigue, health and mana recovery."""
    energy = ln.ld32(a32, r32, F_PLAYER_ENERGY, live)
    dex = ln.ld32(a32, r32, F_PLAYER_DEXTERITY, live)
    top = 7 + 2 * dex
    max_health = (8 + ln.ld32(a32, r32, F_PLAYER_STRENGTH, live)).to(tl.float32)
    health = ln.ldf(af, r32, F_PLAYER_HEALTH, live)
    sleeping = ln.flag(a8, r8, F_IS_SLEEPING, live) | ((act == SLEEP) & (energy < top))
    wake = (energy >= top) & sleeping
    sleeping = sleeping & ~wake
    ln.set_ach(a8, r8, A_WAKE_UP, wake, live)
    food = ln.ld32(a32, r32, F_PLAYER_FOOD, live)
    drink = ln.ld32(a32, r32, F_PLAYER_DRINK, live)
    resting = ln.flag(a8, r8, F_IS_RESTING, live) | ((act == REST) & (health < max_health))
    resting = resting & ~((health >= max_health) | (food <= 0) | (drink <= 0))
    ln.st8(a8, r8, F_IS_SLEEPING, sleeping, live)
    ln.st8(a8, r8, F_IS_RESTING, resting, live)
    not_boss = (~boss).to(tl.int32)
    decay = 1.0 - 0.125 * (dex - 1).to(tl.float32)
    rate = tl.where(sleeping, 0.5, 1.0) * decay
    _need(af, a32, r32, live, F_PLAYER_HUNGER, F_PLAYER_FOOD, rate, 25, not_boss)
    _need(af, a32, r32, live, F_PLAYER_THIRST, F_PLAYER_DRINK, rate, 20, not_boss)
    fatigue = ln.ldf(af, r32, F_PLAYER_FATIGUE, live)
    tired_down = fatigue - 1.0
    fatigue = tl.where(sleeping, tl.where(tired_down > 0.0, 0.0, tired_down), fatigue + decay)
    tired = fatigue > 30
    rested = fatigue < -10
    energy = tl.where(tired, tl.maximum(energy - not_boss, 0), tl.where(rested, tl.minimum(energy + 1, top), energy))
    ln.st32(a32, r32, F_PLAYER_ENERGY, energy, live)
    ln.stf(af, r32, F_PLAYER_FATIGUE, tl.where(tired | rested, 0.0, fatigue), live)
    food = ln.ld32(a32, r32, F_PLAYER_FOOD, live)
    drink = ln.ld32(a32, r32, F_PLAYER_DRINK, live)
    fine = (food > 0) & (drink > 0) & ((energy > 0) | sleeping)
    recover = ln.ldf(af, r32, F_PLAYER_RECOVER, live)
    recover = recover + tl.where(fine, tl.where(sleeping, 2.0, 1.0),
                                 tl.where(sleeping, -0.5, -1.0) * not_boss.to(tl.float32))
    up = recover > 25
    health = tl.where(up, tl.minimum(health + 1.0, max_health), health)
    recover = tl.where(up, 0.0, recover)
    down = recover < -15
    health = tl.where(down, health - 1.0, health)
    ln.stf(af, r32, F_PLAYER_HEALTH, health, live)
    ln.stf(af, r32, F_PLAYER_RECOVER, tl.where(down, 0.0, recover), live)
    mana_coeff = 1.0 + 0.25 * (ln.ld32(a32, r32, F_PLAYER_INTELLIGENCE, live) - 1).to(tl.float32)
    rm = (ln.ldf(af, r32, F_PLAYER_RECOVER_MANA, live) + tl.where(sleeping, 2.0, 1.0)) * mana_coeff
    more = rm > 30
    ln.st32(a32, r32, F_PLAYER_MANA, ln.ld32(a32, r32, F_PLAYER_MANA, live) + more.to(tl.int32), live)
    ln.stf(af, r32, F_PLAYER_RECOVER_MANA, tl.where(more, 0.0, rm), live)


@triton.jit
def _clip(a32, af, r32, live):
    """game._clip: the inventory at most 99 of each, health, food, drink, energy and mana within their bounds."""
    for i in tl.static_range(SCALARS):
        v = ln.ld32(a32, r32, F_INVENTORY_WOOD + i * SCALAR_STRIDE, live)
        ln.st32(a32, r32, F_INVENTORY_WOOD + i * SCALAR_STRIDE, tl.minimum(v, 99), live)
    for i in tl.static_range(4):
        ln.st32(a32, r32, F_INVENTORY_ARMOUR + i, tl.minimum(ln.ld32(a32, r32, F_INVENTORY_ARMOUR + i, live), 99), live)
    for i in tl.static_range(6):
        v = ln.ld32(a32, r32, F_INVENTORY_POTIONS + i, live)
        ln.st32(a32, r32, F_INVENTORY_POTIONS + i, tl.minimum(v, 99), live)
    top = 7 + 2 * ln.ld32(a32, r32, F_PLAYER_DEXTERITY, live)
    health = ln.ldf(af, r32, F_PLAYER_HEALTH, live)
    health = tl.where(health < 0.0, 0.0, health)  # clamp(min=0): keeps a -0.0, as torch does
    max_health = (8 + ln.ld32(a32, r32, F_PLAYER_STRENGTH, live)).to(tl.float32)
    ln.stf(af, r32, F_PLAYER_HEALTH, tl.where(health > max_health, max_health, health), live)
    ln.st32(a32, r32, F_PLAYER_FOOD, tl.minimum(tl.maximum(ln.ld32(a32, r32, F_PLAYER_FOOD, live), 0), top), live)
    ln.st32(a32, r32, F_PLAYER_DRINK, tl.minimum(tl.maximum(ln.ld32(a32, r32, F_PLAYER_DRINK, live), 0), top), live)
    ln.st32(a32, r32, F_PLAYER_ENERGY, tl.minimum(tl.maximum(ln.ld32(a32, r32, F_PLAYER_ENERGY, live), 0), top), live)
    mana = tl.maximum(ln.ld32(a32, r32, F_PLAYER_MANA, live), 0)
    ln.st32(a32, r32, F_PLAYER_MANA, tl.minimum(mana, 6 + 3 * ln.ld32(a32, r32, F_PLAYER_INTELLIGENCE, live)), live)


@triton.jit
def _inventory_achievements(a8, a32, r8, r32, live):
    """game._inventory_achievements: collecting, the bow, arrows, torches and each tool level."""
    for i in tl.static_range(SCALARS):
        if (COLLECTED >> i) & 1:
            k = (COLLECT_ACH >> (i * 7)) & 127
            ln.set_ach(a8, r8, k, ln.ld32(a32, r32, F_INVENTORY_WOOD + i * SCALAR_STRIDE, live) > 0, live)
    ln.set_ach(a8, r8, A_FIND_BOW, ln.ld32(a32, r32, F_INVENTORY_BOW, live) > 0, live)
    ln.set_ach(a8, r8, A_MAKE_ARROW, ln.ld32(a32, r32, F_INVENTORY_ARROWS, live) > 0, live)
    ln.set_ach(a8, r8, A_MAKE_TORCH, ln.ld32(a32, r32, F_INVENTORY_TORCHES, live) > 0, live)
    pickaxe = ln.ld32(a32, r32, F_INVENTORY_PICKAXE, live)
    sword = ln.ld32(a32, r32, F_INVENTORY_SWORD, live)
    for level in tl.static_range(4):
        ln.set_ach(a8, r8, (PICKAXE_ACH >> (level * 7)) & 127, pickaxe >= level + 1, live)
        ln.set_ach(a8, r8, (SWORD_ACH >> (level * 7)) & 127, sword >= level + 1, live)


@triton.jit
def clean_floors(a8, af, r8, r32, live):
    """_Step.clean_floors: on every floor, the melee, passive and ranged mobs keep ``mask & health > 0``."""
    for at in range(LEVELS * 3):
        keep = ln.flag(a8, r8, F_MELEE_MOBS_MASK + at, live) & (ln.ldf(af, r32, F_MELEE_MOBS_HEALTH + at, live) > 0.0)
        ln.st8(a8, r8, F_MELEE_MOBS_MASK + at, keep, live)
        keep = ln.flag(a8, r8, F_PASSIVE_MOBS_MASK + at, live) & (ln.ldf(af, r32, F_PASSIVE_MOBS_HEALTH + at, live) > 0.0)
        ln.st8(a8, r8, F_PASSIVE_MOBS_MASK + at, keep, live)
    for at in range(LEVELS * 2):
        keep = ln.flag(a8, r8, F_RANGED_MOBS_MASK + at, live) & (ln.ldf(af, r32, F_RANGED_MOBS_HEALTH + at, live) > 0.0)
        ln.st8(a8, r8, F_RANGED_MOBS_MASK + at, keep, live)


@triton.jit
def _where(a32, r32, live):
    """The player's floor and position, and whether it is the boss fight."""
    lvl = ln.ld32(a32, r32, F_PLAYER_LEVEL, live)
    px = ln.ld32(a32, r32, F_PLAYER_POSITION, live)
    py = ln.ld32(a32, r32, F_PLAYER_POSITION + 1, live)
    return lvl, px, py, lvl == BOSS_LEVEL


@triton.jit
def _mobs_kernel(a8, a32, af, act_p, u_p, dirs_p, n, BLOCK: tl.constexpr):  # noqa: N803
    """game.tail up to spawning: the five mob classes."""
    e64, live, r8, r32 = ln.lanes(n, BLOCK)
    lvl, px, py, boss = _where(a32, r32, live)
    _melee_mobs(a8, a32, af, r8, r32, e64, live, lvl, px, py, boss, u_p, dirs_p)
    _passive_mobs(a8, a32, r8, r32, e64, live, lvl, px, py, dirs_p)
    _ranged_mobs(a8, a32, r8, r32, e64, live, lvl, px, py, boss, u_p, dirs_p)
    _mob_projectiles(a8, a32, af, r8, r32, live, lvl, px, py)
    _player_projectiles(a8, a32, af, r8, r32, live, lvl)


@triton.jit
def _spawn_kernel(a8, a32, af, act_p, u_p, dirs_p, n, BLOCK: tl.constexpr):  # noqa: N803
    """game._spawn, ``BLOCK`` worlds a program (:data:`SPAWN_BLOCK`: one, so a program scans its
    window only where its world may spawn)."""
    e64, live, r8, r32 = ln.lanes(n, BLOCK)
    lvl, px, py, boss = _where(a32, r32, live)
    _spawn(a8, a32, af, r8, r32, e64, live, lvl, px, py, boss, u_p)


@triton.jit
def _upkeep_kernel(a8, a32, af, act_p, u_p, dirs_p, n, BLOCK: tl.constexpr):  # noqa: N803
    """The rest of game.tail (plants, intrinsics, the inventory cap and its achievements), then
    clean_floors (the rest of ``leave_level``: the floor's mobs live in the arena already)."""
    e64, live, r8, r32 = ln.lanes(n, BLOCK)
    act = tl.load(act_p + e64, mask=live, other=0).to(tl.int32)
    lvl = ln.ld32(a32, r32, F_PLAYER_LEVEL, live)
    _plants(a8, a32, r8, r32, live)
    _intrinsics(a8, a32, af, r8, r32, live, act, lvl == BOSS_LEVEL)
    _clip(a32, af, r32, live)
    _inventory_achievements(a8, a32, r8, r32, live)
    clean_floors(a8, af, r8, r32, live)


def run_tail(s: State, act: Tensor, d: dict[str, Tensor]) -> None:
    """The tail of the step on the states ``s`` in place (their arena), ``act`` the action taken
    (int64 [N], :func:`.game.acting`'s) and ``d`` the step's draws (:func:`.game.sample_draws`):
    three kernels in the torch code's order, the mobs, spawning, the rest."""
    ln.launch(_mobs_kernel, "triton_tail.run_tail", s, act, d)
    ln.launch(_spawn_kernel, "triton_tail.run_tail", s, act, d, block=SPAWN_BLOCK, warps=SPAWN_WARPS)
    ln.launch(_upkeep_kernel, "triton_tail.run_tail", s, act, d)


_ACHIEVEMENTS = ln.constant(C.NUM_ACHIEVEMENTS)


@triton.jit
def _finish_kernel(a8, a32, af, init_ach, init_health, rewards, light, reward_out, term_out, n, max_t,  # noqa: PLR0913
                   BLOCK: tl.constexpr, ACH: tl.constexpr):  # noqa: N803
    """:func:`.game.finish`: the reward (a tenth of the health gained plus the new achievements'
    rewards, one rounding), termination, the clock and its light."""
    e64, live, r8, r32 = ln.lanes(n, BLOCK)
    j = tl.arange(0, ACH)
    has = j < _ACHIEVEMENTS
    both = live[:, None] & has[None, :]
    now = tl.load(a8 + r8[:, None] + ln.F_ACHIEVEMENTS + j[None, :], mask=both, other=0).to(tl.int32)
    before = tl.load(init_ach + e64[:, None] * _ACHIEVEMENTS + j[None, :], mask=both, other=0).to(tl.int32)
    gained = tl.sum((now - before) * tl.load(rewards + j, mask=has, other=0)[None, :], axis=1)
    health = tl.load(af + r32 + F_PLAYER_HEALTH, mask=live, other=1.0)
    healed = health - tl.load(init_health + e64, mask=live, other=0.0)
    tl.store(reward_out + e64, tl.fma(healed, ln.TENTH, gained.to(tl.float32)), mask=live)
    ts = ln.ld32(a32, r32, ln.F_TIMESTEP, live) + 1
    tl.store(a32 + r32 + ln.F_TIMESTEP, ts, mask=live)
    tl.store(af + r32 + F_LIGHT_LEVEL, tl.load(light + tl.minimum(ts, max_t), mask=live, other=0.0), mask=live)
    boss = ln.ld32(a32, r32, F_BOSS_PROGRESS, live)
    tl.store(term_out + e64, ((health <= 0.0) | (boss >= BOSS_LEVEL)).to(tl.int8), mask=live)


def run_finish(s: State, t: game.Tables, init_ach: Tensor, init_health: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`.game.finish` on the states ``s`` in place (their arena), ``init_ach`` (bool [N, 67])
    and ``init_health`` (float32 [N]) the achievements and health before the step: the reward
    (float32 [N]) and ``terminated`` (bool [N])."""
    arena = s.arena
    n = arena.shape[0]
    reward = torch.empty(n, dtype=torch.float32, device=arena.device)
    terminated = torch.empty(n, dtype=torch.bool, device=arena.device)
    if n == 0:
        return reward, terminated
    if (init_ach.shape != (n, C.NUM_ACHIEVEMENTS) or init_ach.dtype != torch.bool or not init_ach.is_contiguous()
            or init_health.shape != (n,) or init_health.dtype != torch.float32):
        raise ValueError("triton_tail.run_finish: needs init_ach bool [N, 67] (contiguous) and init_health float32 [N]")
    _finish_kernel[(triton.cdiv(n, ln.BLOCK),)](
        arena, arena.view(torch.int32), arena.view(torch.float32), init_ach.view(torch.uint8), init_health,
        t.rewards, t.light, reward, terminated.view(torch.int8), n, t.max_t,
        BLOCK=ln.BLOCK, ACH=triton.next_power_of_2(C.NUM_ACHIEVEMENTS), num_warps=ln.NUM_WARPS, enable_fp_fusion=False)
    return reward, terminated
