"""Craftax-Classic's constants: block types, actions, achievements, directions and the
reference's ``EnvParams`` defaults (craftax 1.6.1, ``craftax.craftax_classic``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct

import torch

MAP_SIZE = 64
OBS_ROWS, OBS_COLS = 7, 9  # the local view, rows x columns, the player in the middle
NUM_BLOCKS = 17
NUM_MOB_KINDS = 4  # zombies, cows, skeletons, arrows (the observation's mob channels)
NUM_ACTIONS = 17
OBS_SIZE = OBS_ROWS * OBS_COLS * (NUM_BLOCKS + NUM_MOB_KINDS) + 12 + 4 + 4 + 1 + 1  # 1345

# block types
INVALID, OUT_OF_BOUNDS, GRASS, WATER, STONE, TREE, WOOD, PATH, COAL, IRON, DIAMOND = range(11)
CRAFTING_TABLE, FURNACE, SAND, LAVA, PLANT, RIPE_PLANT = range(11, 17)
BLOCK_NAMES = ("invalid", "out_of_bounds", "grass", "water", "stone", "tree", "wood", "path", "coal", "iron",
               "diamond", "crafting_table", "furnace", "sand", "lava", "plant", "ripe_plant")
SOLID_BLOCKS = (WATER, STONE, TREE, COAL, IRON, DIAMOND, CRAFTING_TABLE, FURNACE, PLANT, RIPE_PLANT)

# actions
NOOP, LEFT, RIGHT, UP, DOWN, DO, SLEEP = range(7)
PLACE_STONE, PLACE_TABLE, PLACE_FURNACE, PLACE_PLANT = range(7, 11)
MAKE_WOOD_PICKAXE, MAKE_STONE_PICKAXE, MAKE_IRON_PICKAXE, MAKE_WOOD_SWORD, MAKE_STONE_SWORD, MAKE_IRON_SWORD = range(11, 17)
ACTION_NAMES = ("noop", "left", "right", "up", "down", "do", "sleep", "place_stone", "place_table", "place_furnace",
                "place_plant", "make_wood_pickaxe", "make_stone_pickaxe", "make_iron_pickaxe", "make_wood_sword",
                "make_stone_sword", "make_iron_sword")

ACHIEVEMENTS = ("collect_wood", "place_table", "eat_cow", "collect_sapling", "collect_drink", "make_wood_pickaxe",
                "make_wood_sword", "place_plant", "defeat_zombie", "collect_stone", "place_stone", "eat_plant",
                "defeat_skeleton", "make_stone_pickaxe", "make_stone_sword", "wake_up", "place_furnace", "collect_coal",
                "collect_iron", "collect_diamond", "make_iron_pickaxe", "make_iron_sword")
A = {name: i for i, name in enumerate(ACHIEVEMENTS)}

INVENTORY = ("wood", "stone", "coal", "iron", "diamond", "sapling", "wood_pickaxe", "stone_pickaxe", "iron_pickaxe",
             "wood_sword", "stone_sword", "iron_sword")
INV = {name: i for i, name in enumerate(INVENTORY)}

# DIRECTIONS[action] for actions 0..4 (noop, left, right, up, down): [row, col] steps; none for the rest
DIRECTIONS = ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0))

# mob slots: (name, count, observation channel); arrows keep directions beside them
MOBS = (("zombies", 3), ("cows", 3), ("skeletons", 2), ("arrows", 3))
MAX_PLANTS = 10

# EnvParams defaults
MAX_TIMESTEPS = 10000
DAY_LENGTH = 300
ZOMBIE_HEALTH, COW_HEALTH, SKELETON_HEALTH = 5, 3, 3
MOB_DESPAWN_DISTANCE = 14
SPAWN_COW_CHANCE = 0.1
SPAWN_ZOMBIE_BASE_CHANCE = 0.02
SPAWN_ZOMBIE_NIGHT_CHANCE = 0.1
SPAWN_SKELETON_CHANCE = 0.05


def f32(x: float) -> float:
    """``x`` rounded to float32 (as a Python float), by host arithmetic: no tensor, so it may run
    inside a recorded step."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _cosf():
    """The C library's single-precision ``cosf`` (what XLA's CPU backend calls for a float32
    cosine), or None where there is none to load."""
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        f = libm.cosf
    except (OSError, AttributeError):
        return None
    f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
    return f


def light_tables(max_t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(light[t], zombie_spawn_chance[t])`` float32 for ``t = 0 .. max_t``, as the reference's
    XLA program computes them: ``progress = (t / 300) % 1 + 0.3`` (XLA divides by a constant
    as a multiplication by its float32 reciprocal), ``light = 1 - |cos(pi progress)|^3`` (the
    cosine is the C library's ``cosf``; the cube and the subtraction are one fused multiply-add)
    and ``0.02 + 0.1 (1 - light)^2`` (again a fused multiply-add). Without a C ``cosf`` the
    cosine is float64's rounded to float32, which differs in the last bit for ~1% of ``t``."""
    cosf = _cosf()
    recip, pi = f32(1 / DAY_LENGTH), f32(math.pi)
    t = torch.arange(max_t + 1, dtype=torch.float32)
    progress = torch.remainder(t * recip, 1.0) + f32(0.3)
    x = (progress * pi).tolist()
    c = torch.tensor([cosf(v) for v in x] if cosf is not None else [math.cos(v) for v in x], dtype=torch.float32).abs()
    c2 = c * c
    light = (1.0 - c2.double() * c.double()).float()  # fma(-c2, c, 1): one rounding
    dark = 1.0 - light
    sq = dark * dark
    chance = (sq.double() * f32(SPAWN_ZOMBIE_NIGHT_CHANCE) + f32(SPAWN_ZOMBIE_BASE_CHANCE)).float()
    return light, chance
