"""Craftax's constants (the full game: craftax 1.6.1, ``craftax.craftax``): block and item types,
the 43 actions, the 67 achievements and their rewards, the tables of mobs per floor and type,
and the reference's ``EnvParams`` / ``StaticEnvParams`` defaults.

Floors, in the reference's order: 0 overworld, 1 dungeon, 2 gnomish mines, 3 sewers, 4 vaults,
5 troll mines, 6 fire realm, 7 ice realm, 8 graveyard (the necromancer's floor). The mob tables
below are indexed by a mob's *type id* (0..7), as the reference indexes them (its comments call
the rows floors; the rows are types: which type spawns on which floor is ``FLOOR_MOB_TYPES``).
"""

from __future__ import annotations

import math

import torch

from noeira.envs.craftax.constants import f32  # noqa: F401  (C.f32: the full game's modules read it here)

MAP_SIZE = 48
NUM_LEVELS = 9
OBS_ROWS, OBS_COLS = 9, 11  # the local view, rows x columns, the player in the middle
NUM_BLOCKS = 37
NUM_ITEMS = 5
NUM_MOB_CLASSES = 5  # melee, passive, ranged, mob projectiles, player projectiles (observation order)
MOB_TYPES_PER_CLASS = 8
CELL_CHANNELS = NUM_BLOCKS + NUM_ITEMS + NUM_MOB_CLASSES * MOB_TYPES_PER_CLASS + 1  # 83: blocks, items, mobs, light
MAP_OBS_SIZE = OBS_ROWS * OBS_COLS * CELL_CHANNELS  # 8217
TAIL_SIZE = 51  # inventory 16, potions 6, intrinsics 9, direction 4, armour 4, armour enchantments 4, special 8
OBS_SIZE = MAP_OBS_SIZE + TAIL_SIZE  # 8268
NUM_ACTIONS = 43

# -- block types ------------------------------------------------------------------------------------
BLOCK_NAMES = (
    "invalid", "out_of_bounds", "grass", "water", "stone", "tree", "wood", "path", "coal", "iron", "diamond",
    "crafting_table", "furnace", "sand", "lava", "plant", "ripe_plant", "wall", "darkness", "wall_moss",
    "stalagmite", "sapphire", "ruby", "chest", "fountain", "fire_grass", "ice_grass", "gravel", "fire_tree",
    "ice_shrub", "enchantment_table_fire", "enchantment_table_ice", "necromancer", "grave", "grave2", "grave3",
    "necromancer_vulnerable",
)
B = {name: i for i, name in enumerate(BLOCK_NAMES)}
INVALID, OUT_OF_BOUNDS, GRASS, WATER, STONE, TREE, WOOD, PATH, COAL, IRON, DIAMOND = range(11)
CRAFTING_TABLE, FURNACE, SAND, LAVA, PLANT, RIPE_PLANT, WALL, DARKNESS, WALL_MOSS, STALAGMITE = range(11, 21)
SAPPHIRE, RUBY, CHEST, FOUNTAIN, FIRE_GRASS, ICE_GRASS, GRAVEL, FIRE_TREE, ICE_SHRUB = range(21, 30)
ENCHANTMENT_TABLE_FIRE, ENCHANTMENT_TABLE_ICE, NECROMANCER, GRAVE, GRAVE2, GRAVE3, NECROMANCER_VULNERABLE = range(30, 37)

SOLID_BLOCKS = (STONE, TREE, COAL, IRON, DIAMOND, CRAFTING_TABLE, FURNACE, PLANT, RIPE_PLANT, WALL, WALL_MOSS,
                STALAGMITE, RUBY, SAPPHIRE, CHEST, FOUNTAIN, FIRE_TREE, ENCHANTMENT_TABLE_FIRE,
                ENCHANTMENT_TABLE_ICE, GRAVE, GRAVE2, GRAVE3, NECROMANCER)
"""What nothing walks through (water and lava are not solid: collisions by mob type decide)."""
CAN_PLACE_ITEM_BLOCKS = (GRASS, SAND, PATH, FIRE_GRASS, ICE_GRASS)
SPAWN_BLOCKS = (GRASS, PATH, FIRE_GRASS, ICE_GRASS)
"""Where mobs spawn (outside the boss fight; deep things spawn on water)."""

# -- items (item_map) ---------------------------------------------------------------------------------
ITEM_NONE, ITEM_TORCH, ITEM_LADDER_DOWN, ITEM_LADDER_UP, ITEM_LADDER_DOWN_BLOCKED = range(5)

# -- actions ------------------------------------------------------------------------------------------
ACTION_NAMES = (
    "noop", "left", "right", "up", "down", "do", "sleep", "place_stone", "place_table", "place_furnace",
    "place_plant", "make_wood_pickaxe", "make_stone_pickaxe", "make_iron_pickaxe", "make_wood_sword",
    "make_stone_sword", "make_iron_sword", "rest", "descend", "ascend", "make_diamond_pickaxe",
    "make_diamond_sword", "make_iron_armour", "make_diamond_armour", "shoot_arrow", "make_arrow",
    "cast_fireball", "cast_iceball", "place_torch", "drink_potion_red", "drink_potion_green", "drink_potion_blue",
    "drink_potion_pink", "drink_potion_cyan", "drink_potion_yellow", "read_book", "enchant_sword",
    "enchant_armour", "make_torch", "level_up_dexterity", "level_up_strength", "level_up_intelligence",
    "enchant_bow",
)
ACT = {name: i for i, name in enumerate(ACTION_NAMES)}
NOOP, LEFT, RIGHT, UP, DOWN, DO, SLEEP = range(7)
# [row, col] step of actions 0..4 (noop, left, right, up, down); zero for every other action
DIRECTIONS = ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0))

# -- achievements (the reference's enum values) ----------------------------------------------------
ACHIEVEMENTS = (
    "collect_wood", "place_table", "eat_cow", "collect_sapling", "collect_drink", "make_wood_pickaxe",
    "make_wood_sword", "place_plant", "defeat_zombie", "collect_stone", "place_stone", "eat_plant",
    "defeat_skeleton", "make_stone_pickaxe", "make_stone_sword", "wake_up", "place_furnace", "collect_coal",
    "collect_iron", "collect_diamond", "make_iron_pickaxe", "make_iron_sword", "make_arrow", "make_torch",
    "place_torch", "make_diamond_sword", "make_iron_armour", "make_diamond_armour", "enter_gnomish_mines",
    "enter_dungeon", "enter_sewers", "enter_vault", "enter_troll_mines", "enter_fire_realm", "enter_ice_realm",
    "enter_graveyard", "defeat_gnome_warrior", "defeat_gnome_archer", "defeat_orc_solider", "defeat_orc_mage",
    "defeat_lizard", "defeat_kobold", "defeat_troll", "defeat_deep_thing", "defeat_pigman",
    "defeat_fire_elemental", "defeat_frost_troll", "defeat_ice_elemental", "damage_necromancer",
    "defeat_necromancer", "eat_bat", "eat_snail", "find_bow", "fire_bow", "collect_sapphire", "learn_fireball",
    "cast_fireball", "learn_iceball", "cast_iceball", "collect_ruby", "make_diamond_pickaxe", "open_chest",
    "drink_potion", "enchant_sword", "enchant_armour", "defeat_knight", "defeat_archer",
)
A = {name: i for i, name in enumerate(ACHIEVEMENTS)}
NUM_ACHIEVEMENTS = len(ACHIEVEMENTS)  # 67

_INTERMEDIATE = ("collect_sapphire", "collect_ruby", "make_diamond_pickaxe", "make_diamond_sword",
                 "make_iron_armour", "make_diamond_armour", "enter_gnomish_mines", "enter_dungeon",
                 "defeat_gnome_warrior", "defeat_gnome_archer", "defeat_orc_solider", "defeat_orc_mage", "eat_bat",
                 "eat_snail", "find_bow", "fire_bow", "open_chest", "drink_potion")
_VERY_ADVANCED = ("enter_fire_realm", "enter_ice_realm", "enter_graveyard", "defeat_pigman",
                  "defeat_fire_elemental", "defeat_frost_troll", "defeat_ice_elemental", "damage_necromancer",
                  "defeat_necromancer")


def _reward(i: int) -> int:
    name = ACHIEVEMENTS[i]
    if i <= 24:
        return 1
    if name in _INTERMEDIATE:
        return 3
    return 8 if name in _VERY_ADVANCED else 5


ACHIEVEMENT_REWARDS = tuple(_reward(i) for i in range(NUM_ACHIEVEMENTS))
"""Reward for unlocking each achievement: 1 basic, 3 intermediate, 5 advanced, 8 very advanced."""

LEVEL_ACHIEVEMENTS = (0, A["enter_dungeon"], A["enter_gnomish_mines"], A["enter_sewers"], A["enter_vault"],
                      A["enter_troll_mines"], A["enter_fire_realm"], A["enter_ice_realm"], A["enter_graveyard"])
"""The achievement for entering each floor (floor 0's entry is index 0, never set by a floor change)."""
MOB_ACHIEVEMENTS = (
    (A["eat_cow"], A["eat_bat"], A["eat_snail"], 0, 0, 0, 0, 0),  # passive
    (A["defeat_zombie"], A["defeat_gnome_warrior"], A["defeat_orc_solider"], A["defeat_lizard"], A["defeat_knight"],
     A["defeat_troll"], A["defeat_pigman"], A["defeat_frost_troll"]),  # melee
    (A["defeat_skeleton"], A["defeat_gnome_archer"], A["defeat_orc_mage"], A["defeat_kobold"], A["defeat_archer"],
     A["defeat_deep_thing"], A["defeat_fire_elemental"], A["defeat_ice_elemental"]),  # ranged
)
"""Achievement for killing a mob, by class (0 passive, 1 melee, 2 ranged) and type id."""

# -- inventory --------------------------------------------------------------------------------------
INVENTORY_SCALARS = ("wood", "stone", "coal", "iron", "diamond", "sapling", "pickaxe", "sword", "bow", "arrows",
                     "torches", "ruby", "sapphire", "books")
"""The inventory's scalar leaves; beside them ``armour`` [4] and ``potions`` [6]."""

# -- mobs -----------------------------------------------------------------------------------------
# the reference's mob classes (indices of its per-class tables)
PASSIVE, MELEE, RANGED, PROJECTILE = range(4)
MOB_GROUPS = (("melee_mobs", 3), ("passive_mobs", 3), ("ranged_mobs", 2), ("mob_projectiles", 3),
              ("player_projectiles", 3))
"""Mob slots per floor, in the observation's class order."""
MAX_GROWING_PLANTS = 10

FLOOR_MOB_TYPES = ((0, 0, 0), (2, 2, 2), (1, 1, 1), (2, 3, 3), (2, 4, 4), (1, 5, 5), (1, 6, 6), (1, 7, 7), (0, 0, 0))
"""Type id of the (passive, melee, ranged) mobs spawning on each floor."""
FLOOR_SPAWN_CHANCE = (
    (0.1, 0.02, 0.05, 0.1), (0.1, 0.06, 0.05, 0.0), (0.1, 0.06, 0.05, 0.0), (0.1, 0.06, 0.05, 0.0),
    (0.1, 0.06, 0.05, 0.0), (0.1, 0.06, 0.05, 0.0), (0.1, 0.06, 0.05, 0.0), (0.0, 0.06, 0.05, 0.0),
    (0.1, 0.06, 0.05, 0.0),
)
"""Spawn chance per step on each floor: (passive, melee, ranged, extra melee at night x (1 - light)^2)."""
_LAND, _FLYING, _AQUATIC, _AMPHIBIAN = (False, True, True), (False, False, False), (True, False, True), (False, False, True)
COLLISION = (
    (_LAND, _LAND, _LAND, _FLYING), (_FLYING, _LAND, _LAND, _FLYING), (_LAND, _LAND, _LAND, _FLYING),
    (_LAND, _AMPHIBIAN, _LAND, _FLYING), (_LAND, _LAND, _LAND, _FLYING), (_LAND, _LAND, _AQUATIC, _FLYING),
    (_LAND, _LAND, _FLYING, _FLYING), (_LAND, _LAND, _FLYING, _FLYING), (_LAND, _LAND, _LAND, _FLYING),
)
"""By type id and class: whether the mob is blocked by (ground, water, lava)."""
COLLISION_PLAYER = _LAND
DAMAGE = (  # by type id: (melee, projectile) damage vectors (physical, fire, ice)
    ((2, 0, 0), (2, 0, 0)), ((4, 0, 0), (4, 0, 0)), ((3, 0, 0), (0, 3, 0)), ((5, 0, 0), (0, 0, 3)),
    ((6, 0, 0), (5, 0, 0)), ((6, 1, 1), (4, 3, 3)), ((3, 5, 0), (3, 5, 0)), ((4, 0, 5), (4, 0, 5)),
)
"""Damage a melee mob of each type deals, and a projectile of each type."""
HEALTH = ((3, 5, 3), (4, 7, 5), (6, 9, 6), (8, 11, 8), (0, 12, 12), (0, 20, 4), (0, 20, 14), (0, 24, 16), (0, 0, 0))
"""Health of a freshly spawned (passive, melee, ranged) mob by type id (row 8 unused)."""
DEFENSE = (
    ((0, 0, 0), (0, 0, 0), (0, 0, 0)), ((0, 0, 0), (0, 0, 0), (0, 0, 0)), ((0, 0, 0), (0, 0, 0), (0, 0, 0)),
    ((0, 0, 0), (0, 0, 0), (0, 0, 0)), ((0, 0, 0), (0.5, 0, 0), (0.5, 0, 0)), ((0, 0, 0), (0.2, 0, 0), (0, 0, 0)),
    ((0, 0, 0), (0.9, 1.0, 0.0), (0.9, 1.0, 0.0)), ((0, 0, 0), (0.9, 0.0, 1.0), (0.9, 0.0, 1.0)),
    ((0, 0, 0), (0, 0, 0), (0, 0, 0)),
)
"""Defense (physical, fire, ice) of a (passive, melee, ranged) mob by type id."""
RANGED_PROJECTILE = (0, 0, 2, 1, 4, 5, 6, 7)
"""Projectile type each ranged mob type shoots (arrow, arrow, fireball, dagger, arrow2, slimeball, fireball2,
iceball2)."""
ARROW, DAGGER, FIREBALL, ICEBALL, ARROW2, SLIMEBALL, FIREBALL2, ICEBALL2 = range(8)

# -- game mechanics ---------------------------------------------------------------------------------
MONSTERS_KILLED_TO_CLEAR_LEVEL = 8
BOSS_FIGHT_EXTRA_DAMAGE = 0.5
BOSS_FIGHT_SPAWN_TURNS = 7
BOSS_LEVEL = NUM_LEVELS - 1
DARK_LEVELS = (2, 5, 7, 8)
"""Floors whose light map is not all ones (the others start at 1 everywhere and stay there: a torch
adds light clipped to 1): gnomish mines, troll mines, ice realm, graveyard. Only their light maps
are stored."""

# EnvParams / StaticEnvParams defaults
MAX_TIMESTEPS = 100_000
DAY_LENGTH = 300
MOB_DESPAWN_DISTANCE = 14
MAX_ATTRIBUTE = 5


def sqrt32(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded float32 square root of ``x`` (XLA's, and CUDA's ``torch.sqrt``): taken
    in float64 and rounded once more, which is exact for float32 inputs. torch 2.13's float32
    ``sqrt`` on an AVX-512 CPU is one ulp off for some integers (19, 21, 22, ...: 11 of 0..99)."""
    return torch.sqrt(x.double()).float()


def torch_light_map() -> torch.Tensor:
    """The light a torch adds around it [9, 9] float32: ``clip(1 - d / 5, 0, 1)`` with ``d`` the
    Euclidean distance from the centre (the reference's ``TORCH_LIGHT_MAP``; XLA divides by 5 as a
    multiplication by the float32 0.2)."""
    r = torch.arange(9) - 4
    d = sqrt32((r.view(-1, 1) ** 2 + r.view(1, -1) ** 2).float())
    return (1.0 - d * f32(0.2)).clamp(0.0, 1.0)


PI32 = f32(math.pi)
