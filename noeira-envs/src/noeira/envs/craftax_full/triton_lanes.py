"""Lanes of the full game's step as Triton kernels (issue #35): the state's layout as constants and
the small rules both halves of the step share, each the Triton twin of a :mod:`.game` function.

One lane is one world (``BLOCK`` worlds a program, :func:`lanes`). A lane reads and writes its
world's row of the state's byte arena (:class:`.state.State`'s ``arena``) through three views of
the same tensor that every kernel takes: ``a8`` (uint8: the bool and uint8 fields), ``a32``
(int32) and ``af`` (float32); a field is reached only through the view of its own dtype, so no
byte is read through two views. ``F_<NAME>`` (the field's name upper-cased, ``.`` -> ``_``) is
the index of a field's first element in its view, ``r8`` / ``r32`` the lane's row start in the
byte / word views: ``af + r32 + F_PLAYER_HEALTH``, ``a8 + r8 + F_MAP + cell``. The mob slots of
a floor are addressed at the floor: slot ``i`` of a group of ``k`` on floor ``lvl`` is element
``lvl * k + i`` (positions and directions: two ints each).

Small tables (damage, defense, health, collisions, the floors' mobs and chances, achievements)
are ``tl.constexpr`` integers packed a few bits per entry and unpacked by jit lookups, so no
table lives on the device. Exactness: floats follow the torch code's operation order, its
``_fma`` is ``tl.fma``, and kernels are launched with ``enable_fp_fusion=False`` so that the
compiler fuses nothing else (XLA did not).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl
from torch import Tensor

from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full import game
from noeira.envs.craftax_full.state import OFFSETS, ROW_BYTES, STATE_FIELDS, State


def constant(value: int | float) -> object:
    """A constant the kernels read: ``tl.constexpr`` for the compiler, the plain number under
    ``TRITON_INTERPRET=1`` (the interpreter would wrap whatever is computed from a constexpr in
    one, and such a value has no tensor methods)."""
    return value if os.environ.get("TRITON_INTERPRET", "") == "1" else tl.constexpr(value)


def _field(name: str) -> object:
    """The index of field ``name``'s first element in the arena's view of its dtype."""
    return constant(OFFSETS[name] // STATE_FIELDS[name][1].itemsize)


def pack(values: list[int], bits: int) -> object:
    """``values`` as one integer, ``bits`` bits each (entry ``i`` at bit ``i * bits``)."""
    packed = 0
    for i, v in enumerate(values):
        assert 0 <= int(v) < 1 << bits, (values, bits)
        packed |= int(v) << (i * bits)
    assert packed < 1 << 63
    return constant(packed)


def _codes(values: list[float], table: tuple[float, ...]) -> object:
    """``values`` as 3-bit codes: their index in ``table`` (whose entry 0 is 0.0)."""
    return pack([table.index(v) for v in values], 3)


# -- the layout ------------------------------------------------------------------------------------
ROW8 = constant(ROW_BYTES)
"""A world's row in the byte view (its length in bytes)."""
ROW32 = constant(ROW_BYTES // 4)
"""A world's row in the int32 / float32 views."""
F_MAP = _field("map")
F_ITEM_MAP = _field("item_map")
F_MOB_MAP = _field("mob_map")
F_LIGHT_MAP = _field("light_map")
F_DOWN_LADDERS = _field("down_ladders")
F_UP_LADDERS = _field("up_ladders")
F_CHESTS_OPENED = _field("chests_opened")
F_MONSTERS_KILLED = _field("monsters_killed")
F_PLAYER_POSITION = _field("player_position")
F_PLAYER_LEVEL = _field("player_level")
F_PLAYER_DIRECTION = _field("player_direction")
F_PLAYER_HEALTH = _field("player_health")
F_PLAYER_FOOD = _field("player_food")
F_PLAYER_DRINK = _field("player_drink")
F_PLAYER_ENERGY = _field("player_energy")
F_PLAYER_MANA = _field("player_mana")
F_IS_SLEEPING = _field("is_sleeping")
F_IS_RESTING = _field("is_resting")
F_PLAYER_RECOVER = _field("player_recover")
F_PLAYER_HUNGER = _field("player_hunger")
F_PLAYER_THIRST = _field("player_thirst")
F_PLAYER_FATIGUE = _field("player_fatigue")
F_PLAYER_RECOVER_MANA = _field("player_recover_mana")
F_PLAYER_XP = _field("player_xp")
F_PLAYER_DEXTERITY = _field("player_dexterity")
F_PLAYER_STRENGTH = _field("player_strength")
F_PLAYER_INTELLIGENCE = _field("player_intelligence")
F_INVENTORY_WOOD = _field("inventory.wood")
F_INVENTORY_STONE = _field("inventory.stone")
F_INVENTORY_COAL = _field("inventory.coal")
F_INVENTORY_IRON = _field("inventory.iron")
F_INVENTORY_DIAMOND = _field("inventory.diamond")
F_INVENTORY_SAPLING = _field("inventory.sapling")
F_INVENTORY_PICKAXE = _field("inventory.pickaxe")
F_INVENTORY_SWORD = _field("inventory.sword")
F_INVENTORY_BOW = _field("inventory.bow")
F_INVENTORY_ARROWS = _field("inventory.arrows")
F_INVENTORY_TORCHES = _field("inventory.torches")
F_INVENTORY_RUBY = _field("inventory.ruby")
F_INVENTORY_SAPPHIRE = _field("inventory.sapphire")
F_INVENTORY_BOOKS = _field("inventory.books")
F_INVENTORY_ARMOUR = _field("inventory.armour")
F_INVENTORY_POTIONS = _field("inventory.potions")
F_MELEE_MOBS_POSITION = _field("melee_mobs.position")
F_MELEE_MOBS_HEALTH = _field("melee_mobs.health")
F_MELEE_MOBS_MASK = _field("melee_mobs.mask")
F_MELEE_MOBS_ATTACK_COOLDOWN = _field("melee_mobs.attack_cooldown")
F_MELEE_MOBS_TYPE_ID = _field("melee_mobs.type_id")
F_PASSIVE_MOBS_POSITION = _field("passive_mobs.position")
F_PASSIVE_MOBS_HEALTH = _field("passive_mobs.health")
F_PASSIVE_MOBS_MASK = _field("passive_mobs.mask")
F_PASSIVE_MOBS_ATTACK_COOLDOWN = _field("passive_mobs.attack_cooldown")
F_PASSIVE_MOBS_TYPE_ID = _field("passive_mobs.type_id")
F_RANGED_MOBS_POSITION = _field("ranged_mobs.position")
F_RANGED_MOBS_HEALTH = _field("ranged_mobs.health")
F_RANGED_MOBS_MASK = _field("ranged_mobs.mask")
F_RANGED_MOBS_ATTACK_COOLDOWN = _field("ranged_mobs.attack_cooldown")
F_RANGED_MOBS_TYPE_ID = _field("ranged_mobs.type_id")
F_MOB_PROJECTILES_POSITION = _field("mob_projectiles.position")
F_MOB_PROJECTILES_HEALTH = _field("mob_projectiles.health")
F_MOB_PROJECTILES_MASK = _field("mob_projectiles.mask")
F_MOB_PROJECTILES_ATTACK_COOLDOWN = _field("mob_projectiles.attack_cooldown")
F_MOB_PROJECTILES_TYPE_ID = _field("mob_projectiles.type_id")
F_PLAYER_PROJECTILES_POSITION = _field("player_projectiles.position")
F_PLAYER_PROJECTILES_HEALTH = _field("player_projectiles.health")
F_PLAYER_PROJECTILES_MASK = _field("player_projectiles.mask")
F_PLAYER_PROJECTILES_ATTACK_COOLDOWN = _field("player_projectiles.attack_cooldown")
F_PLAYER_PROJECTILES_TYPE_ID = _field("player_projectiles.type_id")
F_MOB_PROJECTILE_DIRECTIONS = _field("mob_projectile_directions")
F_PLAYER_PROJECTILE_DIRECTIONS = _field("player_projectile_directions")
F_GROWING_PLANTS_POSITIONS = _field("growing_plants_positions")
F_GROWING_PLANTS_AGE = _field("growing_plants_age")
F_GROWING_PLANTS_MASK = _field("growing_plants_mask")
F_POTION_MAPPING = _field("potion_mapping")
F_LEARNED_SPELLS = _field("learned_spells")
F_SWORD_ENCHANTMENT = _field("sword_enchantment")
F_BOW_ENCHANTMENT = _field("bow_enchantment")
F_ARMOUR_ENCHANTMENTS = _field("armour_enchantments")
F_BOSS_PROGRESS = _field("boss_progress")
F_BOSS_TIMESTEPS_TO_SPAWN_THIS_ROUND = _field("boss_timesteps_to_spawn_this_round")
F_LIGHT_LEVEL = _field("light_level")
F_ACHIEVEMENTS = _field("achievements")
F_TIMESTEP = _field("timestep")
assert all(f"F_{k.upper().replace('.', '_')}" in globals() for k in STATE_FIELDS), "a field has no F_ constant"

# -- constants of the rules ------------------------------------------------------------------------
NUM_U = constant(game.NUM_U)
W = constant(C.MAP_SIZE)
CELLS = constant(C.MAP_SIZE * C.MAP_SIZE)
BOSS_LEVEL = constant(C.BOSS_LEVEL)
DESPAWN = constant(C.MOB_DESPAWN_DISTANCE)
PASSIVE, MELEE, RANGED, PROJECTILE = (constant(c) for c in (C.PASSIVE, C.MELEE, C.RANGED, C.PROJECTILE))
GRASS, WATER, PATH, LAVA = (constant(b) for b in (C.GRASS, C.WATER, C.PATH, C.LAVA))
FURNACE, CRAFTING_TABLE, RIPE_PLANT = (constant(b) for b in (C.FURNACE, C.CRAFTING_TABLE, C.RIPE_PLANT))
FIRE_GRASS, ICE_GRASS = constant(C.FIRE_GRASS), constant(C.ICE_GRASS)
GRAVE, GRAVE2, GRAVE3 = constant(C.GRAVE), constant(C.GRAVE2), constant(C.GRAVE3)
SOLID = constant(sum(1 << b for b in C.SOLID_BLOCKS))
"""Bit ``b`` set: block ``b`` is solid (``Tables.solid``)."""
TENTH = constant(C.f32(0.1))
FIFTH = constant(C.f32(0.2))
TWENTIETH = constant(C.f32(0.05))

_DEFENSE_VALUES = (0.0, *sorted({C.f32(v) for row in C.DEFENSE for cls in row for v in cls} - {0.0}))
_CHANCE_VALUES = (0.0, *sorted({C.f32(v) for row in C.FLOOR_SPAWN_CHANCE for v in row} - {0.0}))
assert len(_DEFENSE_VALUES) == len(_CHANCE_VALUES) == 5  # the lookups name four nonzero values each
DEFENSE_1, DEFENSE_2, DEFENSE_3, DEFENSE_4 = (constant(v) for v in _DEFENSE_VALUES[1:])
CHANCE_1, CHANCE_2, CHANCE_3, CHANCE_4 = (constant(v) for v in _CHANCE_VALUES[1:])


def _defense(cls: int) -> tuple[object, ...]:
    """A class's (physical, fire, ice) defense by type id: 3-bit codes into ``DEFENSE_1..4``."""
    return tuple(_codes([C.f32(C.DEFENSE[ty][cls][k]) for ty in range(8)], _DEFENSE_VALUES) for k in range(3))


def _damage(kind: int) -> tuple[object, ...]:
    """The (physical, fire, ice) damage of kind 0 (melee) or 1 (projectile) by type id, 4 bits each."""
    return tuple(pack([C.DAMAGE[ty][kind][k] for ty in range(8)], 4) for k in range(3))


def _by_type(table: tuple, cls: int, bits: int) -> object:
    """``table[type][cls]`` by type id, ``bits`` bits each."""
    return pack([table[ty][cls] for ty in range(8)], bits)


DEFENSE_P, DEFENSE_M, DEFENSE_R = _defense(C.PASSIVE), _defense(C.MELEE), _defense(C.RANGED)
DEFENSE_P0, DEFENSE_P1, DEFENSE_P2 = DEFENSE_P
DEFENSE_M0, DEFENSE_M1, DEFENSE_M2 = DEFENSE_M
DEFENSE_R0, DEFENSE_R1, DEFENSE_R2 = DEFENSE_R
DAMAGE_MELEE0, DAMAGE_MELEE1, DAMAGE_MELEE2 = _damage(0)
DAMAGE_SHOT0, DAMAGE_SHOT1, DAMAGE_SHOT2 = _damage(1)
HEALTH_P, HEALTH_M, HEALTH_R = (_by_type(C.HEALTH, cls, 5) for cls in (C.PASSIVE, C.MELEE, C.RANGED))
"""A fresh mob's health by type id (5 bits each)."""
COLLISION_P, COLLISION_M, COLLISION_R = (
    pack([C.COLLISION[ty][cls][k] for ty in range(8) for k in range(3)], 1) for cls in (C.PASSIVE, C.MELEE, C.RANGED))
"""Bit ``3 * type + k``: a mob of the class and type is blocked by (ground, water, lava)[k]."""
MOB_ACHIEVEMENT_P, MOB_ACHIEVEMENT_M, MOB_ACHIEVEMENT_R = (
    pack(list(C.MOB_ACHIEVEMENTS[cls]), 7) for cls in (C.PASSIVE, C.MELEE, C.RANGED))
"""The achievement for killing a mob of the class, by type id (7 bits each)."""
RANGED_PROJECTILE = pack(list(C.RANGED_PROJECTILE), 3)
FLOOR_TYPE_P, FLOOR_TYPE_M, FLOOR_TYPE_R = (
    pack([C.FLOOR_MOB_TYPES[lv][cls] for lv in range(C.NUM_LEVELS)], 3) for cls in range(3))
"""The type id of the (passive, melee, ranged) mobs spawning on each floor (3 bits each)."""
CHANCE_PASSIVE, CHANCE_MELEE, CHANCE_RANGED, CHANCE_NIGHT = (
    _codes([C.f32(C.FLOOR_SPAWN_CHANCE[lv][k]) for lv in range(C.NUM_LEVELS)], _CHANCE_VALUES) for k in range(4))
"""Each floor's spawn chances (passive, melee, ranged, extra melee at night): 3-bit codes into ``CHANCE_1..4``."""


# -- lanes and fields ------------------------------------------------------------------------------
BLOCK = 128
"""Worlds a program of a half's kernel (one a thread at ``NUM_WARPS``)."""
NUM_WARPS = 4


def launch(kernel: Any, caller: str, s: State, act: Tensor, d: dict[str, Tensor], block: int | None = None,
           warps: int | None = None) -> None:
    """Run a half of the step, ``kernel[grid](a8, a32, af, act, u, dirs, n, BLOCK)``, on the states
    ``s`` in place (their arena): ``act`` the action taken (int64 [N], :func:`.game.acting`'s), ``d``
    the step's draws (:func:`.game.sample_draws`); ``block`` worlds a program on ``warps`` warps
    (default :data:`BLOCK`, :data:`NUM_WARPS`). ``caller`` names the launcher in the error for
    inputs of another layout."""
    arena = s.arena
    n = arena.shape[0]
    if n == 0:
        return
    u, dirs = d["u"], d["dirs"]
    if (arena.shape[1] != ROW_BYTES or not arena.is_contiguous() or not u.is_contiguous() or u.shape != (n, game.NUM_U)
            or u.dtype != torch.float32 or dirs.shape != (n, 8) or dirs.dtype != torch.int64
            or not dirs.is_contiguous() or act.shape != (n,) or act.dtype != torch.int64):
        raise ValueError(f"{caller}: needs a contiguous arena [N, ROW_BYTES], act int64 [N], u float32 [N, 33] and "
                         "dirs int64 [N, 8], contiguous")
    block = block or BLOCK
    kernel[(triton.cdiv(n, block),)](arena, arena.view(torch.int32), arena.view(torch.float32), act, u, dirs, n,
                                     BLOCK=block, num_warps=warps or NUM_WARPS, enable_fp_fusion=False)


@triton.jit
def lanes(n, BLOCK: tl.constexpr):  # noqa: N803
    """The program's lanes: world index (int64), whether it exists (< ``n``), row starts ``r8``, ``r32``."""
    e64 = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return e64, e64 < n, e64 * ROW8, e64 * ROW32


@triton.jit
def ld8(a8, r8, at, live):
    """Element ``at`` of the byte view (a bool or uint8 field's), as int32; 0 off the live lanes."""
    return tl.load(a8 + r8 + at, mask=live, other=0).to(tl.int32)


@triton.jit
def flag(a8, r8, at, live):
    """A bool field's element ``at``."""
    return tl.load(a8 + r8 + at, mask=live, other=0) != 0


@triton.jit
def st8(a8, r8, at, v, live):
    """Store ``v`` (bool or int) as a byte at element ``at`` where ``live``."""
    tl.store(a8 + r8 + at, v.to(tl.uint8), mask=live)


@triton.jit
def ld32(a32, r32, at, live):
    """An int32 field's element ``at``."""
    return tl.load(a32 + r32 + at, mask=live, other=0)


@triton.jit
def st32(a32, r32, at, v, live):
    tl.store(a32 + r32 + at, v.to(tl.int32), mask=live)


@triton.jit
def ldf(af, r32, at, live):
    """A float32 field's element ``at``."""
    return tl.load(af + r32 + at, mask=live, other=0.0)


@triton.jit
def stf(af, r32, at, v, live):
    tl.store(af + r32 + at, v.to(tl.float32), mask=live)


@triton.jit
def uniform(u_p, e64, k, live):
    """The lane's draw ``u[:, k]`` (``u_p``: the float32 [N, NUM_U] draws)."""
    return tl.load(u_p + e64 * NUM_U + k, mask=live, other=1.0)


@triton.jit
def direction(dirs_p, e64, k, live):
    """The lane's draw ``dirs[:, k]`` (``dirs_p``: the int64 [N, 8] draws), as int32."""
    return tl.load(dirs_p + e64 * 8 + k, mask=live, other=0).to(tl.int32)


@triton.jit
def unpack(packed, i, BITS: tl.constexpr):  # noqa: N803
    """Entry ``i`` (a tensor) of a packed constant table (``pack``), as int32."""
    return ((packed >> (i.to(tl.int64) * BITS)) & ((1 << BITS) - 1)).to(tl.int32)


# -- the grids (map, item_map, mob_map: bytes, ``lvl * CELLS + x * W + y``) --------------------------
@triton.jit
def in_bounds(x, y):
    """game._in_bounds."""
    return (x >= 0) & (x < W) & (y >= 0) & (y < W)


@triton.jit
def cell(lvl, x, y):
    """game._index: the flat index a read at (lvl, x, y) gathers (negative coordinates wrapped once,
    then clamped) and whether a write there lands (inside after the wrap)."""
    x = tl.where(x < 0, x + W, x)
    y = tl.where(y < 0, y + W, y)
    ok = (x >= 0) & (x < W) & (y >= 0) & (y < W)
    return lvl * CELLS + tl.minimum(tl.maximum(x, 0), W - 1) * W + tl.minimum(tl.maximum(y, 0), W - 1), ok


@triton.jit
def grid_get(a8, r8, GRID: tl.constexpr, idx, live):  # noqa: N803
    """game._get on a byte grid (``GRID``: ``F_MAP``, ``F_ITEM_MAP`` or ``F_MOB_MAP``), as int32."""
    return ld8(a8, r8, GRID + idx, live)


@triton.jit
def grid_put(a8, r8, GRID: tl.constexpr, idx, ok, v, live):  # noqa: N803
    """game._put: ``grid[idx] = v`` where ``ok``."""
    st8(a8, r8, GRID + idx, v, live & ok)


@triton.jit
def solid(block):
    """Tables.solid[block]."""
    return ((SOLID >> block.to(tl.int64)) & 1) != 0


@triton.jit
def in_mob(a8, r8, idx, x, y, px, py, live):
    """_Step.in_mob: a mob on the cell (``mob_map`` at ``idx``) or the player at (x, y)."""
    return (grid_get(a8, r8, F_MOB_MAP, idx, live) != 0) | ((x == px) & (y == py))


@triton.jit
def valid_move(a8, r8, lvl, x, y, px, py, ground, water, lava, live):
    """_Step.valid_move (``is_position_in_bounds_not_in_mob_not_colliding``) with the collision flags
    (blocked by ground, water, lava)."""
    idx, _ok = cell(lvl, x, y)
    block = grid_get(a8, r8, F_MAP, idx, live)
    is_solid = solid(block)
    is_water = block == WATER
    is_lava = block == LAVA
    is_ground = ~is_solid & ~is_water & ~is_lava
    return (in_bounds(x, y) & ~in_mob(a8, r8, idx, x, y, px, py, live) & ~is_solid & ~(ground & is_ground)
            & ~(water & is_water) & ~(lava & is_lava))


@triton.jit
def collision(ty, CLS: tl.constexpr):  # noqa: N803
    """Tables.collision[ty, CLS]: whether a mob is blocked by (ground, water, lava)."""
    if CLS == PASSIVE:
        bits = unpack(COLLISION_P, ty, 3)
    elif CLS == MELEE:
        bits = unpack(COLLISION_M, ty, 3)
    else:
        bits = unpack(COLLISION_R, ty, 3)
    return (bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0


# -- small choices ----------------------------------------------------------------------------------
@triton.jit
def bit(cond, i: tl.constexpr):
    """``cond`` as bit ``i`` of a small set (for :func:`first` and :func:`pick`)."""
    return cond.to(tl.int32) << i


@triton.jit
def first(bits, K: tl.constexpr):  # noqa: N803
    """game._first over a set of ``K`` flags (bit ``i`` = flag ``i``): the first set, 0 when none."""
    idx = tl.zeros_like(bits)
    for k in tl.static_range(K):
        i = K - 1 - k
        idx = tl.where(((bits >> i) & 1) != 0, i, idx)
    return idx


@triton.jit
def pick(bits, K: tl.constexpr, u):  # noqa: N803
    """game._pick over a set of ``K`` flags: the ``floor(u * count)``-th set one (0 when none)."""
    count = tl.zeros_like(bits)
    for i in tl.static_range(K):
        count += (bits >> i) & 1
    j = tl.minimum((u * count.to(tl.float32)).to(tl.int32), tl.maximum(count - 1, 0))
    idx = tl.zeros_like(bits)
    running = tl.zeros_like(bits)
    for i in tl.static_range(K):
        running += (bits >> i) & 1
        idx += (running <= j).to(tl.int32)
    return tl.where(count > 0, idx, 0)


@triton.jit
def set_ach(a8, r8, k, got, live):
    """_Step.set_ach: achievement ``k`` (a constant or a lane's index) unlocked where ``got``."""
    st8(a8, r8, F_ACHIEVEMENTS + k, got, live & got)


# -- movement ---------------------------------------------------------------------------------------
@triton.jit
def sign(v):
    """torch.sign of an int."""
    return (v > 0).to(tl.int32) - (v < 0).to(tl.int32)


@triton.jit
def move(k):
    """Tables.moves[k] for k in 0..7 (left, right, up, down, then four standing still): (dx, dy)."""
    return tl.where(k == 2, -1, tl.where(k == 3, 1, 0)), tl.where(k == 0, -1, tl.where(k == 1, 1, 0))


@triton.jit
def action_step(a):
    """Tables.dirs[a]: the [row, col] step of actions 1..4 (left, right, up, down), zero otherwise."""
    return tl.where(a == 3, -1, tl.where(a == 4, 1, 0)), tl.where(a == 1, -1, tl.where(a == 2, 1, 0))


@triton.jit
def towards(x, y, px, py, u_axis):
    """game._towards: one step towards the player along the further axis (either, by ``u_axis``,
    when both are as far)."""
    ddx = px - x
    ddy = py - y
    ax = tl.abs(ddx)
    ay = tl.abs(ddy)
    rows = (ax > ay) | ((ax == ay) & (u_axis < 0.5))
    return tl.where(rows, sign(ddx), 0), tl.where(rows, 0, sign(ddy))


# -- damage -----------------------------------------------------------------------------------------
@triton.jit
def coded(code, V1, V2, V3, V4):  # noqa: N803
    """The float32 a 3-bit code (``_codes``) stands for: ``V1..V4`` (0: 0.0)."""
    return tl.where(code == 1, V1, tl.where(code == 2, V2, tl.where(code == 3, V3, tl.where(code == 4, V4, 0.0))))


@triton.jit
def floor_chance(codes, lvl):
    """Tables.floor_chance[lvl, k] of the column ``codes`` (``CHANCE_PASSIVE``, ``CHANCE_MELEE``, ...)."""
    return coded(unpack(codes, lvl, 3), CHANCE_1, CHANCE_2, CHANCE_3, CHANCE_4)


@triton.jit
def _defense3(ty, P0, P1, P2):  # noqa: N803
    return (coded(unpack(P0, ty, 3), DEFENSE_1, DEFENSE_2, DEFENSE_3, DEFENSE_4),
            coded(unpack(P1, ty, 3), DEFENSE_1, DEFENSE_2, DEFENSE_3, DEFENSE_4),
            coded(unpack(P2, ty, 3), DEFENSE_1, DEFENSE_2, DEFENSE_3, DEFENSE_4))


@triton.jit
def defense(ty, CLS: tl.constexpr):  # noqa: N803
    """Tables.defense[ty, CLS]: the (physical, fire, ice) defense of a mob (float32)."""
    if CLS == PASSIVE:
        d0, d1, d2 = _defense3(ty, DEFENSE_P0, DEFENSE_P1, DEFENSE_P2)
    elif CLS == MELEE:
        d0, d1, d2 = _defense3(ty, DEFENSE_M0, DEFENSE_M1, DEFENSE_M2)
    else:
        d0, d1, d2 = _defense3(ty, DEFENSE_R0, DEFENSE_R1, DEFENSE_R2)
    return d0, d1, d2


@triton.jit
def mob_damage(ty, KIND: tl.constexpr):  # noqa: N803
    """Tables.damage[ty, KIND]: the (physical, fire, ice) damage of a melee mob (``KIND`` 0) or of a
    projectile (1) of type ``ty`` (float32)."""
    if KIND == 0:
        v0 = unpack(DAMAGE_MELEE0, ty, 4)
        v1 = unpack(DAMAGE_MELEE1, ty, 4)
        v2 = unpack(DAMAGE_MELEE2, ty, 4)
    else:
        v0 = unpack(DAMAGE_SHOT0, ty, 4)
        v1 = unpack(DAMAGE_SHOT1, ty, 4)
        v2 = unpack(DAMAGE_SHOT2, ty, 4)
    return v0.to(tl.float32), v1.to(tl.float32), v2.to(tl.float32)


@triton.jit
def damage(v0, v1, v2, d0, d1, d2):
    """_Step.damage: ``(1 - defense) . damage`` over (physical, fire, ice), XLA's fused order."""
    k0 = 1.0 - d0
    k1 = 1.0 - d1
    k2 = 1.0 - d2
    return tl.fma(k2, v2, tl.fma(k1, v1, k0 * v0))


@triton.jit
def damage_to_player(a32, r32, lvl, v0, v1, v2, live):
    """_Step.damage_to_player: damage (physical, fire, ice) through the player's armour and its
    enchantments, x1.5 in the boss fight."""
    a0 = ld32(a32, r32, F_INVENTORY_ARMOUR, live).to(tl.float32)
    a1 = ld32(a32, r32, F_INVENTORY_ARMOUR + 1, live).to(tl.float32)
    a2 = ld32(a32, r32, F_INVENTORY_ARMOUR + 2, live).to(tl.float32)
    a3 = ld32(a32, r32, F_INVENTORY_ARMOUR + 3, live).to(tl.float32)
    d_phys = ((a0 * TENTH + a1 * TENTH) + a2 * TENTH) + a3 * TENTH
    e0 = ld32(a32, r32, F_ARMOUR_ENCHANTMENTS, live)
    e1 = ld32(a32, r32, F_ARMOUR_ENCHANTMENTS + 1, live)
    e2 = ld32(a32, r32, F_ARMOUR_ENCHANTMENTS + 2, live)
    e3 = ld32(a32, r32, F_ARMOUR_ENCHANTMENTS + 3, live)
    d_fire = (((e0 == 1).to(tl.float32) * FIFTH + (e1 == 1).to(tl.float32) * FIFTH)
              + (e2 == 1).to(tl.float32) * FIFTH) + (e3 == 1).to(tl.float32) * FIFTH
    d_ice = (((e0 == 2).to(tl.float32) * FIFTH + (e1 == 2).to(tl.float32) * FIFTH)
             + (e2 == 2).to(tl.float32) * FIFTH) + (e3 == 2).to(tl.float32) * FIFTH
    boss = 1.0 + (lvl == BOSS_LEVEL).to(tl.float32) * 0.5
    return damage(v0 * boss, v1 * boss, v2 * boss, d_phys, d_fire, d_ice)


@triton.jit
def player_damage(a32, r32, live):
    """_Step.player_damage (``get_player_damage_vector``): (physical, fire, ice)."""
    sword = tl.minimum(tl.maximum(ld32(a32, r32, F_INVENTORY_SWORD, live), 0), 4)
    phys_i = tl.where(sword == 0, 1, tl.where(sword == 1, 2, tl.where(sword == 2, 3, tl.where(sword == 3, 5, 8))))
    ench = ld32(a32, r32, F_SWORD_ENCHANTMENT, live)
    fire = (phys_i * (ench == 1).to(tl.int32)).to(tl.float32) * 0.5
    ice = (phys_i * (ench == 2).to(tl.int32)).to(tl.float32) * 0.5
    strength = (ld32(a32, r32, F_PLAYER_STRENGTH, live) - 1).to(tl.float32)
    phys = phys_i.to(tl.float32) * tl.fma(strength, 0.25, 1.0)
    intelligence = (ld32(a32, r32, F_PLAYER_INTELLIGENCE, live) - 1).to(tl.float32)
    magic = tl.fma(intelligence, TWENTIETH, 1.0)
    return phys, fire * magic, ice * magic


@triton.jit
def max_food(a32, r32, live):
    """_Step.max_food (also the cap of drink and energy): 7 + 2 x dexterity."""
    return 7 + 2 * ld32(a32, r32, F_PLAYER_DEXTERITY, live)


@triton.jit
def mob_achievement(ty, CLS: tl.constexpr):  # noqa: N803
    """Tables.mob_achievement[CLS, ty]."""
    if CLS == PASSIVE:
        k = unpack(MOB_ACHIEVEMENT_P, ty, 7)
    elif CLS == MELEE:
        k = unpack(MOB_ACHIEVEMENT_M, ty, 7)
    else:
        k = unpack(MOB_ACHIEVEMENT_R, ty, 7)
    return k


@triton.jit
def _strike(a8, a32, af, r8, r32, lvl, x, y, v0, v1, v2, active, live, POS: tl.constexpr,  # noqa: N803
            HEALTH: tl.constexpr, MASK: tl.constexpr, TYPE: tl.constexpr, COUNT: tl.constexpr, CLS: tl.constexpr):
    """One class of ``_Step.attack``: the first alive slot at (x, y) (slot 0 when none, undamaged)
    takes the damage, then every slot keeps ``mask & health > 0`` (where ``active``). Returns
    (a slot was there, the target died now, its type id)."""
    base = lvl * COUNT
    tgt = tl.zeros_like(x)
    att = x != x
    for k in tl.static_range(COUNT):
        i = COUNT - 1 - k
        hit = ((ld32(a32, r32, POS + (base + i) * 2, live) == x) & (ld32(a32, r32, POS + (base + i) * 2 + 1, live) == y)
               & flag(a8, r8, MASK + base + i, live))
        tgt = tl.where(hit, i, tgt)
        att = att | hit
    ttype = ld32(a32, r32, TYPE + base + tgt, live)
    d0, d1, d2 = defense(ttype, CLS)
    dmg = damage(v0, v1, v2, d0, d1, d2)
    h = ldf(af, r32, HEALTH + base + tgt, live)
    stf(af, r32, HEALTH + base + tgt, h + (-dmg * att.to(tl.float32)), live & active)
    old = flag(a8, r8, MASK + base + tgt, live)
    for i in tl.static_range(COUNT):
        keep = flag(a8, r8, MASK + base + i, live) & (ldf(af, r32, HEALTH + base + i, live) > 0.0)
        st8(a8, r8, MASK + base + i, keep, live & active)
    killed = active & old & ~flag(a8, r8, MASK + base + tgt, live)
    return att, killed, ttype


@triton.jit
def attack(a8, a32, af, r8, r32, lvl, x, y, v0, v1, v2, CAN_EAT: tl.constexpr, active, live):  # noqa: N803
    """_Step.attack (``attack_mob``) at (x, y) on floor ``lvl`` with damage (v0, v1, v2) where
    ``active``: the first melee, passive and ranged mob there each take it; kills give their
    achievements (a passive mob's only when ``CAN_EAT``, which also feeds the player), clear
    the cell's ``mob_map`` flag and count towards ``monsters_killed``. Returns (attacked a mob,
    killed one)."""
    att_m, kill_m, ty_m = _strike(a8, a32, af, r8, r32, lvl, x, y, v0, v1, v2, active, live, F_MELEE_MOBS_POSITION,
                                  F_MELEE_MOBS_HEALTH, F_MELEE_MOBS_MASK, F_MELEE_MOBS_TYPE_ID, 3, MELEE)
    att_p, kill_p, ty_p = _strike(a8, a32, af, r8, r32, lvl, x, y, v0, v1, v2, active, live,
                                  F_PASSIVE_MOBS_POSITION, F_PASSIVE_MOBS_HEALTH, F_PASSIVE_MOBS_MASK,
                                  F_PASSIVE_MOBS_TYPE_ID, 3, PASSIVE)
    att_r, kill_r, ty_r = _strike(a8, a32, af, r8, r32, lvl, x, y, v0, v1, v2, active, live, F_RANGED_MOBS_POSITION,
                                  F_RANGED_MOBS_HEALTH, F_RANGED_MOBS_MASK, F_RANGED_MOBS_TYPE_ID, 2, RANGED)
    set_ach(a8, r8, mob_achievement(ty_m, MELEE), kill_m, live)
    set_ach(a8, r8, mob_achievement(ty_r, RANGED), kill_r, live)
    if CAN_EAT:
        set_ach(a8, r8, mob_achievement(ty_p, PASSIVE), kill_p, live)
        food = ld32(a32, r32, F_PLAYER_FOOD, live)
        st32(a32, r32, F_PLAYER_FOOD, tl.minimum(max_food(a32, r32, live), food + 6), live & kill_p)
        stf(af, r32, F_PLAYER_HUNGER, tl.zeros_like(v0), live & kill_p)
    killed = kill_m | kill_p | kill_r
    idx, ok = cell(lvl, x, y)
    grid_put(a8, r8, F_MOB_MAP, idx, ok & killed, tl.zeros_like(x), live)
    monster = kill_m | kill_r
    kills = ld32(a32, r32, F_MONSTERS_KILLED + lvl, live)
    st32(a32, r32, F_MONSTERS_KILLED + lvl, kills + 1, live & monster)
    return att_m | att_p | att_r, killed


@triton.jit
def spawn_projectile(a8, a32, r8, r32, lvl, POS: tl.constexpr, MASK: tl.constexpr, DIRS: tl.constexpr,  # noqa: N803
                     TYPE: tl.constexpr, spawn, x, y, dx, dy, ptype, live):
    """game._spawn_projectile: where ``spawn``, the first free slot of a projectile group (three a
    floor; slot 0 when none is free) gets (x, y), direction (dx, dy) and type ``ptype``, alive."""
    free = tl.zeros_like(x)
    for i in tl.static_range(3):
        free |= bit(~flag(a8, r8, MASK + lvl * 3 + i, live), i)
    slot = lvl * 3 + first(free, 3)
    go = live & spawn
    st32(a32, r32, POS + slot * 2, x, go)
    st32(a32, r32, POS + slot * 2 + 1, y, go)
    st8(a8, r8, MASK + slot, spawn, go)
    st32(a32, r32, DIRS + slot * 2, dx, go)
    st32(a32, r32, DIRS + slot * 2 + 1, dy, go)
    st32(a32, r32, TYPE + slot, ptype, go)
