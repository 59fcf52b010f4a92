"""The full game's world generation (:func:`.worldgen.world_from_draws`) as three Triton kernels
on CUDA, writing the initial states straight into rows of a state arena.

Why: the torch path makes a world in a few hundred tensor ops (the Perlin noise of six floors,
eight rooms and corridors on three, the picks as cumsums), ~0.05-0.1 ms a world on an H200,
most of a step at 65,536 envs, whose queue makes num_envs / 128 worlds a step. Here one
program makes one floor of one world in registers, and the rest of the row is a copy.

What, fed the same draws (``sample_world_draws``' or ``keyed_draws``' layout):

- :func:`smooth_floors` / :func:`dungeon_floors`: the torch functions' tensors, bit for bit
  (one program per (world, floor): the floor as a [64, 64] tile of its 48x48 cells, the
  cells past the floor repeating its last row and column and masked off where they count);
- :func:`worlds_kernel`: ``write(draws, light0, arena, rows)`` writes world ``i`` into row
  ``rows[i]`` of an arena (:mod:`.state`'s layout, fields at byte offsets): every byte of
  the row, so the rows need no zeroing. The smooth and dungeon kernels write each floor's
  block, item and (dark floors) light bytes and its ladders; a third kernel copies the rest
  of the row from a row :func:`.worldgen.fill_constants` made (per device and ``light0``)
  and writes the potion mapping. The three write disjoint bytes.

How it stays exact: float32 in the torch path's order of operations, no fused multiply-adds
(``enable_fp_fusion=False``), IEEE division (``div_rn``); the gradients' cosines and sines come
from the torch path's own ops (:func:`noeira.envs.craftax.worldgen.gradients`: a CPU's
``torch.cos`` rounds otherwise than NumPy's, which Triton's interpreter calls, and than
libdevice's), and the distance terms are the torch path's tables
(:func:`.worldgen.proximity`). The Perlin noise is Craftax-Classic's Triton helper
(:func:`noeira.envs.craftax.triton_worldgen._perlin_at`). A pick (a ladder's cell, a room's
chunk, a corridor's sink) is the ``floor(u * count)``-th valid index in row-major order
through a cumsum, as :func:`.worldgen.pick`. Where a step reads a neighbour's value (the
lava's glow, the walls next to a room), the program stores its tile into its own output
cells first (the item bytes, the block bytes), then reads them back after a barrier.

Checked against the torch path on many keyed worlds, every state leaf byte for byte, on a
CPU in Triton's interpreter (``tests/envs/test_craftax_full_triton_worldgen.py``; the potion
mapping's ties, equal draws in index order as the torch path's stable ``argsort``, by a case
of its own). Capture-safe: fixed grids, tables made once per device, no host sync.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from noeira.envs.craftax.worldgen import gradients
from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full import worldgen as wg
from noeira.envs.craftax_full.state import OFFSETS, ROW_BYTES, STATE_FIELDS, empty_state

try:  # optional: without Triton the torch path generates the worlds
    import triton
    import triton.language as tl

    from noeira.envs.craftax.triton_worldgen import _norm, _perlin_at
except ImportError:
    triton = None

__all__ = ["LAUNCH", "dungeon_floors", "smooth_floors", "worlds_kernel"]

LAUNCH = {"smooth_warps": 16, "dungeon_warps": 16}
"""Warps of a floor's program (its [64, 64] tile: 8 cells a thread at 16 warps), read at each
launch (``benchmarks/craftax_full.py --worldgen-warps`` times others). Built offline for sm_90
(Triton 3.9, 2026-12-07) the smooth kernel takes 255 registers and spills at 4 warps, 192 at 8,
103 at 16; the dungeon kernel 168, 138, 109: one program a multiprocessor at 8 or 16 warps.
Not yet timed on a GPU."""
REST_BLOCK = 1024
"""Words of the row a program of the rest kernel copies at once."""

W = C.MAP_SIZE
NOISE_FIELDS = tuple(wg.NOISE_RES)  # water, mountain, path, tree
SMOOTH_INTS = ("default", "sea", "coast", "mountain", "path", "inner", "tree_req", "tree", "lava", "spawn", "ladder",
               "ladder_up", "ladder_down", *(f"ore_req{i}" for i in range(5)), *(f"ores{i}" for i in range(5)))
"""The integer columns of the smooth floors' table (``ore_req0`` ...: the config's tuples)."""
SMOOTH_FLOATS = ("water_thr", "sand_thr", "tree_uniform", "tree_perlin", "light",
                 *(f"ore_chance{i}" for i in range(5)))
DUNGEON_INTS = ("special", "fountain", "rare_path")
SMOOTH_DRAWS = ("u_tree", "u_ore", "u_ladder")
DUNGEON_DRAWS = ("dungeon_u_chunk", "dungeon_room_size", "dungeon_room_offset", "dungeon_u_chest",
                 "dungeon_u_fountain_pos", "dungeon_u_fountain", "dungeon_u_sink", "dungeon_u_rare", "dungeon_u_ladder")


def _config_value(cfg: dict, key: str) -> float:
    if key[-1].isdigit():  # an element of a tuple field
        return cfg[key[:-1]][int(key[-1])]
    return cfg[key]


@functools.cache
def _tables(device: torch.device) -> dict[str, Tensor]:
    """Device tables, made once per device (the worlds are generated inside recorded graphs):
    the smooth floors' integer and float configs [6, 24] / [6, 16], the dungeons' [3, 4], the
    distance terms [2, 6, 48 x 48] (water, mountain), the torch's light [81]."""
    ints = [[int(_config_value(c, k)) for k in SMOOTH_INTS] for c in wg.SMOOTH_CONFIGS]
    floats = [[float(_config_value(c, k)) for k in SMOOTH_FLOATS] for c in wg.SMOOTH_CONFIGS]
    water, mountain = wg.proximity(device)
    return {
        "ints": torch.tensor([r + [0] * (24 - len(r)) for r in ints], dtype=torch.int32, device=device),
        "floats": torch.tensor([r + [0.0] * (16 - len(r)) for r in floats], dtype=torch.float32, device=device),
        "dungeon": torch.tensor([[c[k] for k in DUNGEON_INTS] + [0] for c in wg.DUNGEON_CONFIGS], dtype=torch.int32,
                                device=device),
        "proximity": torch.stack([water, mountain]).reshape(2, 6, W * W).contiguous(),
        "torch_light": wg._torch_light(device).reshape(81).contiguous(),
    }


@functools.cache
def _arena_outputs(device: torch.device) -> tuple[Tensor, Tensor]:
    """Where each floor's outputs start in an arena row: smooth [6, 5] (block byte, item byte,
    light float or -1 on a bright floor, ladder down int32, ladder up int32), dungeon [3, 4]."""
    def floor(level: int, light: bool) -> list[int]:
        dark = (OFFSETS["light_map"] // 4 + C.DARK_LEVELS.index(level) * W * W) if level in C.DARK_LEVELS else -1
        return [OFFSETS["map"] + level * W * W, OFFSETS["item_map"] + level * W * W, *([dark] if light else []),
                OFFSETS["down_ladders"] // 4 + 2 * level, OFFSETS["up_ladders"] // 4 + 2 * level]

    smooth = [floor(lv, True) for lv in wg.SMOOTH_LEVELS]
    dungeon = [floor(lv, False) for lv in wg.DUNGEON_LEVELS]
    return (torch.tensor(smooth, dtype=torch.int64, device=device),
            torch.tensor(dungeon, dtype=torch.int64, device=device))


@functools.cache
def _tensor_outputs(floors: int, device: torch.device) -> Tensor:
    """Where each floor's outputs start in the torch functions' tensors ([k, F, 48, 48] maps,
    [k, F, 2] ladders: down, up), as :func:`_arena_outputs` lays them out."""
    light = [[f * W * W] for f in range(floors)] if floors == 6 else [[] for _ in range(floors)]
    return torch.tensor([[f * W * W, f * W * W, *light[f], 2 * f, 2 * f + 1] for f in range(floors)],
                        dtype=torch.int64, device=device)


@functools.cache
def _template(device: torch.device, light0: float) -> Tensor:
    """A row of the arena holding what every initial state holds alike, as int32 words."""
    s = empty_state(1, device)
    wg.fill_constants(s, light0)
    return s.arena.view(torch.int32)[0].clone()


def _world_draws(draws: dict[str, Tensor], names: tuple[str, ...]) -> list[Tensor | int]:
    """(tensor, stride between worlds) of each draw: a world's part contiguous (``keyed_draws``'
    fields are views of one buffer, a row per world)."""
    out: list[Tensor | int] = []
    for name in names:
        v = draws[name]
        inner = v.shape[1:]
        want = [1] * len(inner)
        for i in range(len(inner) - 2, -1, -1):
            want[i] = want[i + 1] * inner[i + 1]
        if any(st != w for st, w, n in zip(v.stride()[1:], want, inner, strict=True) if n > 1):
            v = v.contiguous()
        out += [v, v.stride(0)]
    return out


if triton is not None:
    _W = tl.constexpr(W)
    _PAD = tl.constexpr(wg.PAD)
    _CHUNK = tl.constexpr(wg.CHUNK)
    _SIDE = tl.constexpr(W // wg.CHUNK)
    _SPAWN_CELL = tl.constexpr(wg.SPAWN[0] * W + wg.SPAWN[1])
    # gradient points of a floor's noise fields
    _N_WATER, _N_MOUNTAIN, _N_PATH, _N_TREE = (tl.constexpr((r0 + 1) * (r1 + 1)) for r0, r1 in wg.NOISE_RES.values())
    _STONE, _LAVA, _PATH, _WALL = (tl.constexpr(v) for v in (C.STONE, C.LAVA, C.PATH, C.WALL))
    _CHEST, _DARKNESS, _WALL_MOSS = (tl.constexpr(v) for v in (C.CHEST, C.DARKNESS, C.WALL_MOSS))
    _NONE, _TORCH = tl.constexpr(C.ITEM_NONE), tl.constexpr(C.ITEM_TORCH)
    _DOWN, _UP = tl.constexpr(C.ITEM_LADDER_DOWN), tl.constexpr(C.ITEM_LADDER_UP)
    _F005, _F01, _F02, _F04, _F05 = (tl.constexpr(C.f32(v)) for v in (0.05, 0.1, 0.2, 0.4, 0.5))
    _F07, _F08, _F085 = (tl.constexpr(C.f32(v)) for v in (0.7, 0.8, 0.85))
    (_I_DEFAULT, _I_SEA, _I_COAST, _I_MOUNTAIN, _I_PATH, _I_INNER, _I_TREE_REQ, _I_TREE, _I_LAVA, _I_SPAWN,
     _I_LADDER, _I_LADDER_UP, _I_LADDER_DOWN, _I_ORE_REQ) = (tl.constexpr(SMOOTH_INTS.index(k)) for k in (
        "default", "sea", "coast", "mountain", "path", "inner", "tree_req", "tree", "lava", "spawn", "ladder",
        "ladder_up", "ladder_down", "ore_req0"))
    _I_ORES = tl.constexpr(SMOOTH_INTS.index("ores0"))
    _F_WATER, _F_SAND, _F_TREE_U, _F_TREE_P, _F_LIGHT, _F_CHANCE = (tl.constexpr(SMOOTH_FLOATS.index(k)) for k in (
        "water_thr", "sand_thr", "tree_uniform", "tree_perlin", "light", "ore_chance0"))
    _MOB_W = tl.constexpr(OFFSETS["mob_map"] // 4)
    _LIGHT_W = tl.constexpr(OFFSETS["light_map"] // 4)
    _TAIL_W = tl.constexpr(OFFSETS["down_ladders"] // 4)  # the light map ends here
    _DOWN_W, _UP_W = tl.constexpr(OFFSETS["down_ladders"] // 4), tl.constexpr(OFFSETS["up_ladders"] // 4)
    _LADDER_WORDS = tl.constexpr(C.NUM_LEVELS * 2)
    _POTION_W = tl.constexpr(OFFSETS["potion_mapping"] // 4)
    _ROW_W = tl.constexpr(ROW_BYTES // 4)

    @triton.jit
    def _nth(valid, rank, index, u):
        """The ``index`` of the ``floor(u * count)``-th True of ``valid`` (``rank``: each entry's
        count of Trues up to it; 0 when none is: :func:`.worldgen.pick`)."""
        count = tl.sum(valid.to(tl.int32), axis=0)
        j = tl.minimum((u * count.to(tl.float32)).to(tl.int32), tl.maximum(count - 1, 0))
        return tl.sum(tl.where(valid & (rank == j + 1), index, 0), axis=0)

    @triton.jit
    def _pick(valid, index, u):
        """:func:`_nth` over a few entries (1-D, in order), the ranks counted by comparing every
        pair, not by ``tl.cumsum``: compiled for 8 or 16 entries in a program of 512 threads, the
        dungeons came out otherwise than the torch path's on an H100 (2026-12-07), while Triton's
        interpreter gave the same."""
        at = tl.arange(0, valid.shape[0])
        rank = tl.sum(tl.where(at[None, :] <= at[:, None], valid.to(tl.int32)[None, :], 0), axis=1)
        return _nth(valid, rank, index, u)

    @triton.jit
    def _pick_cell(valid, cell, u):
        """:func:`_nth` over a floor's [64, 64] tile (row-major: the cells past the floor are
        never valid)."""
        flat = tl.reshape(valid, [4096])
        return _nth(flat, tl.cumsum(flat.to(tl.int32), axis=0), tl.reshape(cell, [4096]), u)

    @triton.jit
    def _store_ladders(lad_p, at_down, at_up, down, up, PAIRS: tl.constexpr):
        """The ladders' cells: (row, column) int32 pairs (an arena) or flat indices."""
        if PAIRS:
            tl.store(lad_p + at_down, (down // _W).to(lad_p.dtype.element_ty))
            tl.store(lad_p + at_down + 1, (down % _W).to(lad_p.dtype.element_ty))
            tl.store(lad_p + at_up, (up // _W).to(lad_p.dtype.element_ty))
            tl.store(lad_p + at_up + 1, (up % _W).to(lad_p.dtype.element_ty))
        else:
            tl.store(lad_p + at_down, down.to(lad_p.dtype.element_ty))
            tl.store(lad_p + at_up, up.to(lad_p.dtype.element_ty))

    @triton.jit
    def _neighbour(at, xr, yr, DX: tl.constexpr, DY: tl.constexpr, other):  # noqa: N803
        """The floor's values ``at`` (48 x 48, row-major) at the cells (xr + DX, yr + DY); ``other``
        off the floor (the zero padding of :func:`.worldgen._conv3`)."""
        xa = xr + DX
        yb = yr + DY
        near = (xa >= 0) & (xa < _W) & (yb >= 0) & (yb < _W)
        return tl.load(at + xa * _W + yb, mask=near, other=other)

    @triton.jit
    def _field(cos_p, sin_p, x, y, R0: tl.constexpr, R1: tl.constexpr):
        """A noise field of the floor, normalised to [0, 1] (its minimum and maximum over the
        tile: the cells past the floor repeat cells of it)."""
        noise = _perlin_at(cos_p, sin_p, x, y, R0, R1, _W)
        return _norm(noise, tl.min(tl.min(noise, axis=1), axis=0), tl.max(tl.max(noise, axis=1), axis=0))

    @triton.jit
    def _smooth_kernel(cw, sw, cm, sm, cp, sp, ct, st, u_tree, u_tree_ws, u_ore, u_ore_ws, u_lad, u_lad_ws,
                       ints_p, floats_p, prox_p, torch_light_p, rows_p, out_p, map_p, item_p, light_p, lad_p,
                       map_ws, item_ws, light_ws, lad_ws, PAIRS: tl.constexpr):
        """Floor ``program_id(1)`` of the smooth floors of world ``program_id(0)``
        (:func:`.worldgen.smooth_floors`, step by step)."""
        w = tl.program_id(0).to(tl.int64)
        f = tl.program_id(1)
        row = tl.load(rows_p + w).to(tl.int64)
        if row < 0:  # a world not asked for (generate_keyed's negative serials)
            return
        xr = tl.arange(0, 64)[:, None]
        yr = tl.arange(0, 64)[None, :]
        inside = (xr < _W) & (yr < _W)
        x = tl.minimum(xr, _W - 1)  # the cells past the floor repeat its last row and column
        y = tl.minimum(yr, _W - 1)
        cell = x * _W + y
        ints = ints_p + f * 24
        floats = floats_p + f * 16
        g = w * 6 + f  # this floor's gradients, [k, 6, points] each

        # -- the blocks
        near_water = tl.load(prox_p + f * (_W * _W) + cell)
        near_mountain = tl.load(prox_p + (6 + f) * (_W * _W) + cell)
        water = _field(cw + g * _N_WATER, sw + g * _N_WATER, x, y, 3, 3) + near_water - 1.0
        sea = tl.load(ints + _I_SEA)
        mp = tl.where(water > tl.load(floats + _F_WATER), sea, tl.load(ints + _I_DEFAULT))
        mp = tl.where((water > tl.load(floats + _F_SAND)) & (mp != sea), tl.load(ints + _I_COAST), mp)
        mountain = _field(cm + g * _N_MOUNTAIN, sm + g * _N_MOUNTAIN, x, y, 3, 3) + _F005
        mountain = mountain + near_mountain - 1.0
        high = mountain > _F07
        mp = tl.where(high, tl.load(ints + _I_MOUNTAIN), mp)
        path_block = tl.load(ints + _I_PATH)
        mp = tl.where(high & (_field(cp + g * _N_PATH, sp + g * _N_PATH, x, y, 6, 24) > _F08), path_block, mp)
        # the transposed path noise: the noise at the swapped cell
        mp = tl.where(high & (_field(cp + g * _N_PATH, sp + g * _N_PATH, y, x, 6, 24) > _F08), path_block, mp)
        mp = tl.where((mountain > _F085) & (water > _F04), tl.load(ints + _I_INNER), mp)
        tree_noise = _field(ct + g * _N_TREE, st + g * _N_TREE, x, y, 12, 12)
        u = tl.load(u_tree + w * u_tree_ws + f * (_W * _W) + cell)
        trees = tl.where(tree_noise > tl.load(floats + _F_TREE_P), 1.0, 0.0) * u > tl.load(floats + _F_TREE_U)
        mp = tl.where(trees & (mp == tl.load(ints + _I_TREE_REQ)), tl.load(ints + _I_TREE), mp)
        for i in tl.static_range(5):
            u = tl.load(u_ore + w * u_ore_ws + (f * 5 + i) * (_W * _W) + cell)
            hit = (mp == tl.load(ints + _I_ORE_REQ + i)) & (u < tl.load(floats + _F_CHANCE + i))
            mp = tl.where(hit, tl.load(ints + _I_ORES + i), mp)
        lava = (mountain > _F085) & (tree_noise > _F07)
        lava_block = tl.load(ints + _I_LAVA)
        mp = tl.where(lava, lava_block, mp)
        # the unused "always diamond" pick: stone at cell 0 when the floor has none
        stones = tl.sum(tl.sum(((mp == _STONE) & inside).to(tl.int32), axis=1), axis=0)
        mp = tl.where((cell == 0) & (stones == 0), _STONE, mp)
        mp = tl.where(cell == _SPAWN_CELL, tl.load(ints + _I_SPAWN), mp)
        valid = (mp == tl.load(ints + _I_LADDER)) & inside
        down = _pick_cell(valid, cell, tl.load(u_lad + w * u_lad_ws + f * 2))
        up = _pick_cell(valid, cell, tl.load(u_lad + w * u_lad_ws + f * 2 + 1))

        # -- the light: the floor's default, the ladder up's torch light (the 9x9 patch, its start
        # wrapped once when negative, then kept on the map), lava's glow
        default = tl.load(floats + _F_LIGHT)
        r0 = up // _W - 4
        c0 = up % _W - 4
        r0 = tl.minimum(tl.maximum(tl.where(r0 < 0, r0 + _W, r0), 0), _W - 9)
        c0 = tl.minimum(tl.maximum(tl.where(c0 < 0, c0 + _W, c0), 0), _W - 9)
        in_patch = (x >= r0) & (x < r0 + 9) & (y >= c0) & (y < c0 + 9)
        pr = tl.minimum(tl.maximum(x - r0, 0), 8)
        pc = tl.minimum(tl.maximum(y - c0, 0), 8)
        patch = tl.load(torch_light_p + pr * 9 + pc) * (1.0 - default) + default
        light = tl.where(in_patch, patch, default)
        # the glow reads the lava of the neighbours: the tile goes through the floor's item cells
        outs = out_p + f * 5
        item_at = item_p + row * item_ws + tl.load(outs + 1)
        tl.store(item_at + cell, lava.to(item_p.dtype.element_ty), mask=inside)
        tl.debug_barrier()
        glow = tl.zeros([64, 64], dtype=tl.float32)  # _conv3's taps in its order
        glow = glow + _neighbour(item_at, xr, yr, -1, -1, 0).to(tl.float32) * _F02
        glow = glow + _neighbour(item_at, xr, yr, -1, 0, 0).to(tl.float32) * _F07
        glow = glow + _neighbour(item_at, xr, yr, -1, 1, 0).to(tl.float32) * _F02
        glow = glow + _neighbour(item_at, xr, yr, 0, -1, 0).to(tl.float32) * _F07
        glow = glow + _neighbour(item_at, xr, yr, 0, 0, 0).to(tl.float32) * 1.0
        glow = glow + _neighbour(item_at, xr, yr, 0, 1, 0).to(tl.float32) * _F07
        glow = glow + _neighbour(item_at, xr, yr, 1, -1, 0).to(tl.float32) * _F02
        glow = glow + _neighbour(item_at, xr, yr, 1, 0, 0).to(tl.float32) * _F07
        glow = glow + _neighbour(item_at, xr, yr, 1, 1, 0).to(tl.float32) * _F02
        tl.debug_barrier()  # every lava tap read before the item cells are written
        lit = tl.where(lava_block == _LAVA, 1.0, 0.0)
        light = tl.minimum(tl.maximum(light + glow * lit, 0.0), 1.0)
        light_at = tl.load(outs + 2)
        has_light = cell * 0 + light_at >= 0  # (a block: the interpreter cannot AND a scalar into one)
        tl.store(light_p + row * light_ws + light_at + cell, light, mask=inside & has_light)
        item = tl.where((cell == down) & (tl.load(ints + _I_LADDER_DOWN) != 0), _DOWN, _NONE)
        item = tl.where((cell == up) & (tl.load(ints + _I_LADDER_UP) != 0), _UP, item)
        tl.store(item_at + cell, item.to(item_p.dtype.element_ty), mask=inside)
        tl.store(map_p + row * map_ws + tl.load(outs) + cell, mp.to(map_p.dtype.element_ty), mask=inside)
        lad = row * lad_ws
        _store_ladders(lad_p, lad + tl.load(outs + 3), lad + tl.load(outs + 4), down, up, PAIRS)

    @triton.jit
    def _dungeon_kernel(u_chunk, u_chunk_ws, size_p, size_ws, offset_p, offset_ws, u_chest, u_chest_ws, u_fpos,
                        u_fpos_ws, u_fountain, u_fountain_ws, u_sink, u_sink_ws, u_rare, u_rare_ws, u_lad, u_lad_ws,
                        cfg_p, rows_p, out_p, map_p, item_p, lad_p, map_ws, item_ws, lad_ws, PAIRS: tl.constexpr):
        """Dungeon floor ``program_id(1)`` of world ``program_id(0)`` (:func:`.worldgen.dungeon_floors`):
        the rooms and corridors only where they cross the floor (every step writes its own cells,
        so the padded map's margin never matters), then the walls and the ladders."""
        w = tl.program_id(0).to(tl.int64)
        d = tl.program_id(1)
        row = tl.load(rows_p + w).to(tl.int64)
        if row < 0:  # a world not asked for (generate_keyed's negative serials)
            return
        xr = tl.arange(0, 64)[:, None]
        yr = tl.arange(0, 64)[None, :]
        inside = (xr < _W) & (yr < _W)
        cell = tl.minimum(xr, _W - 1) * _W + tl.minimum(yr, _W - 1)
        px = xr + _PAD  # the cell in the padded map's coordinates
        py = yr + _PAD
        rooms = tl.arange(0, 8)
        chunks = tl.arange(0, 16)
        free = chunks < _SIDE * _SIDE
        room_x = tl.zeros([8], dtype=tl.int32)
        room_y = tl.zeros([8], dtype=tl.int32)
        mp = tl.zeros([64, 64], dtype=tl.int32) + _WALL
        item = tl.zeros([64, 64], dtype=tl.int32) + _NONE
        fountain = tl.load(cfg_p + d * 4 + 1)
        u_chunk += w * u_chunk_ws + d * 8
        size_p += w * size_ws + d * 16
        offset_p += w * offset_ws + d * 16
        u_chest += w * u_chest_ws + d * 16
        u_fpos += w * u_fpos_ws + d * 16
        u_fountain += w * u_fountain_ws + d * 8
        u_sink += w * u_sink_ws + d * 8
        for r in tl.static_range(8):
            chunk = _pick(free, chunks, tl.load(u_chunk + r))
            free = free & (chunks != chunk)
            sx = tl.load(size_p + 2 * r).to(tl.int32)
            sy = tl.load(size_p + 2 * r + 1).to(tl.int32)
            x0 = (chunk % _SIDE) * _CHUNK + _PAD + tl.load(offset_p + 2 * r).to(tl.int32)
            y0 = (chunk // _SIDE) * _CHUNK + _PAD + tl.load(offset_p + 2 * r + 1).to(tl.int32)
            room_x = tl.where(rooms == r, x0, room_x)
            room_y = tl.where(rooms == r, y0, room_y)
            mp = tl.where((px >= x0) & (px < x0 + sx) & (py >= y0) & (py < y0 + sy), _PATH, mp)
            corner = ((px == x0) | (px == x0 + sx - 1)) & ((py == y0) | (py == y0 + sy - 1))
            item = tl.where(corner, _TORCH, item)
            cx = x0 + 1 + (tl.load(u_chest + 2 * r) * (sx - 2).to(tl.float32)).to(tl.int32)
            cy = y0 + 1 + (tl.load(u_chest + 2 * r + 1) * (sy - 2).to(tl.float32)).to(tl.int32)
            mp = tl.where((px == cx) & (py == cy), _CHEST, mp)
            fx = x0 + 1 + (tl.load(u_fpos + 2 * r) * (sx - 2).to(tl.float32)).to(tl.int32)
            fy = y0 + 1 + (tl.load(u_fpos + 2 * r + 1) * (sy - 2).to(tl.float32)).to(tl.int32)
            fx = tl.where(tl.load(u_fountain + r) > _F05, fx, -1)  # no fountain: a cell off the map
            mp = tl.where((px == fx) & (py == fy), fountain, mp)
        # corridors: room i to a room already joined (the last room, then 0 .. i - 1), along the
        # source's row to the sink's column, then along that column to the sink's row
        for i in tl.static_range(8):
            sink = _pick((rooms < i) | (rooms == 7), rooms, tl.load(u_sink + i))
            sx = tl.sum(tl.where(rooms == i, room_x, 0), axis=0)
            sy = tl.sum(tl.where(rooms == i, room_y, 0), axis=0)
            dx = tl.sum(tl.where(rooms == sink, room_x, 0), axis=0)
            dy = tl.sum(tl.where(rooms == sink, room_y, 0), axis=0)
            hd = dy - sy
            along = (py - sy) * ((hd > 0).to(tl.int32) - (hd < 0).to(tl.int32))
            on = (px == tl.where(hd != 0, sx, -1)) & (along >= 0) & (along <= tl.abs(hd))  # none when hd = 0
            mp = tl.where(on & (mp == _WALL), _PATH, mp)
            vd = dx - sx
            along = (px - sx) * ((vd > 0).to(tl.int32) - (vd < 0).to(tl.int32))
            on = (py == tl.where(vd != 0, dy, -1)) & (along >= 0) & (along <= tl.abs(vd))
            mp = tl.where(on & (mp == _WALL), _PATH, mp)
        special_x = tl.sum(tl.where(rooms == 0, room_x, 0), axis=0) + 2
        special_y = tl.sum(tl.where(rooms == 0, room_y, 0), axis=0) + 2
        mp = tl.where((px == special_x) & (py == special_y), tl.load(cfg_p + d * 4), mp)

        # walls next to a room or corridor stay (some mossy), the rest is darkness; some path cells
        # change. The neighbours are read back through the floor's block cells.
        outs = out_p + d * 4
        map_at = map_p + row * map_ws + tl.load(outs)
        tl.store(map_at + cell, mp.to(map_p.dtype.element_ty), mask=inside)
        tl.debug_barrier()
        adjacent = mp != _WALL
        adjacent = adjacent | (_neighbour(map_at, xr, yr, -1, 0, _WALL).to(tl.int32) != _WALL)
        adjacent = adjacent | (_neighbour(map_at, xr, yr, 0, -1, _WALL).to(tl.int32) != _WALL)
        adjacent = adjacent | (_neighbour(map_at, xr, yr, 0, 1, _WALL).to(tl.int32) != _WALL)
        adjacent = adjacent | (_neighbour(map_at, xr, yr, 1, 0, _WALL).to(tl.int32) != _WALL)
        tl.debug_barrier()  # every neighbour read before the block cells are written again
        rare = tl.load(u_rare + w * u_rare_ws + d * (_W * _W) + cell) < _F01
        path_map = tl.where(rare & (mp == _PATH) & (item == _NONE), tl.load(cfg_p + d * 4 + 2), mp)
        wall_map = tl.where(rare, _WALL_MOSS, _WALL)
        mp = tl.where(adjacent, tl.where(mp == _WALL, wall_map, path_map), _DARKNESS)
        tl.store(map_at + cell, mp.to(map_p.dtype.element_ty), mask=inside)
        valid = (mp == _PATH) & inside
        down = _pick_cell(valid, cell, tl.load(u_lad + w * u_lad_ws + d * 2))
        up = _pick_cell(valid, cell, tl.load(u_lad + w * u_lad_ws + d * 2 + 1))
        item = tl.where(cell == up, _UP, tl.where(cell == down, _DOWN, item))
        tl.store(item_p + row * item_ws + tl.load(outs + 1) + cell, item.to(item_p.dtype.element_ty), mask=inside)
        lad = row * lad_ws
        _store_ladders(lad_p, lad + tl.load(outs + 2), lad + tl.load(outs + 3), down, up, PAIRS)

    @triton.jit
    def _rest_kernel(template, u_potion, u_potion_ws, rows_p, words, BLOCK: tl.constexpr):  # noqa: N803
        """The row of world ``program_id(0)`` besides its floors: the template's words (the mob
        map, the scalars), the potion mapping (the stable ``argsort`` of the draws: a draw's rank
        counts the smaller ones and the equal ones before it)."""
        w = tl.program_id(0).to(tl.int64)
        row = tl.load(rows_p + w).to(tl.int64)
        if row < 0:
            return
        dst = words + row * _ROW_W
        for start in tl.range(_MOB_W, _LIGHT_W, BLOCK):
            at = start + tl.arange(0, BLOCK)
            keep = at < _LIGHT_W
            tl.store(dst + at, tl.load(template + at, mask=keep), mask=keep)
        for start in tl.range(_TAIL_W, _ROW_W, BLOCK):
            at = start + tl.arange(0, BLOCK)
            keep = (at < _ROW_W) & ((at < _DOWN_W) | (at >= _DOWN_W + _LADDER_WORDS))
            keep = keep & ((at < _UP_W) | (at >= _UP_W + _LADDER_WORDS)) & ((at < _POTION_W) | (at >= _POTION_W + 6))
            tl.store(dst + at, tl.load(template + at, mask=keep), mask=keep)
        i = tl.arange(0, 8)
        u = tl.load(u_potion + w * u_potion_ws + i, mask=i < 6, other=2.0)
        before = (u[None, :] < u[:, None]) | ((u[None, :] == u[:, None]) & (i[None, :] < i[:, None]))
        rank = tl.sum(before.to(tl.int32), axis=1)  # the padding (2.0) sorts after every draw
        tl.store(dst + _POTION_W + rank, i, mask=i < 6)


def _gradient_args(draws: dict[str, Tensor]) -> list[Tensor]:
    """The cosines and sines of the noise fields' gradients, [k, 6, points] each, by the torch
    path's ops."""
    out = []
    for name in NOISE_FIELDS:
        cos, sin = gradients(draws[f"angles_{name}"])
        out += [cos.contiguous(), sin.contiguous()]
    return out


def _launch_smooth(draws: dict[str, Tensor], rows: Tensor, outs: Tensor, map_: Tensor, item: Tensor, light: Tensor,
                   ladders: Tensor, pairs: bool) -> None:
    k, dev = rows.shape[0], rows.device
    t = _tables(dev)
    _smooth_kernel[(k, len(wg.SMOOTH_LEVELS))](
        *_gradient_args(draws), *_world_draws(draws, SMOOTH_DRAWS), t["ints"], t["floats"], t["proximity"],
        t["torch_light"], rows, outs, map_, item, light, ladders, map_.stride(0), item.stride(0), light.stride(0),
        ladders.stride(0), PAIRS=pairs, num_warps=LAUNCH["smooth_warps"], enable_fp_fusion=False)


def _launch_dungeon(draws: dict[str, Tensor], rows: Tensor, outs: Tensor, map_: Tensor, item: Tensor,
                    ladders: Tensor, pairs: bool) -> None:
    k, dev = rows.shape[0], rows.device
    _dungeon_kernel[(k, len(wg.DUNGEON_LEVELS))](
        *_world_draws(draws, DUNGEON_DRAWS), _tables(dev)["dungeon"], rows, outs, map_, item, ladders,
        map_.stride(0), item.stride(0), ladders.stride(0), PAIRS=pairs, num_warps=LAUNCH["dungeon_warps"],
        enable_fp_fusion=False)


def smooth_floors(d: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """:func:`.worldgen.smooth_floors` by the smooth floors' kernel: the same tensors."""
    k, dev = d["u_tree"].shape[0], d["u_tree"].device
    mp = torch.empty((k, 6, W, W), dtype=torch.int64, device=dev)
    item = torch.empty_like(mp)
    light = torch.empty((k, 6, W, W), dtype=torch.float32, device=dev)
    ladders = torch.empty((k, 6, 2), dtype=torch.int64, device=dev)
    if k:
        _launch_smooth(d, torch.arange(k, device=dev), _tensor_outputs(6, dev), mp, item, light, ladders, False)
    return mp, item, light, ladders[..., 0], ladders[..., 1]


def dungeon_floors(d: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`.worldgen.dungeon_floors` by the dungeon floors' kernel: the same tensors."""
    k, dev = d["dungeon_u_rare"].shape[0], d["dungeon_u_rare"].device
    mp = torch.empty((k, 3, W, W), dtype=torch.int64, device=dev)
    item = torch.empty_like(mp)
    ladders = torch.empty((k, 3, 2), dtype=torch.int64, device=dev)
    if k:
        _launch_dungeon(d, torch.arange(k, device=dev), _tensor_outputs(3, dev), mp, item, ladders, False)
    return mp, item, ladders[..., 0], ladders[..., 1]


@functools.cache
def worlds_kernel() -> Callable[[dict[str, Tensor], float, Tensor, Tensor], None] | None:
    """``write(draws, light0, arena, rows)``: the initial states :func:`.worldgen.world_from_draws`
    makes of ``draws`` (``k`` worlds) written into rows ``rows`` (int64 [k], distinct) of
    ``arena`` [N, ROW_BYTES] uint8 (contiguous rows), every byte of them; a negative row skips its
    world (its programs return at once; its draws are not read); None without Triton."""
    if triton is None:
        return None

    def write(draws: dict[str, Tensor], light0: float, arena: Tensor, rows: Tensor) -> None:
        k, dev = rows.shape[0], arena.device
        if k == 0:
            return
        if arena.dim() != 2 or arena.shape[1] != ROW_BYTES or arena.stride(1) != 1 or arena.stride(0) != ROW_BYTES:
            raise ValueError("triton_worldgen: needs an arena [N, ROW_BYTES] uint8 of contiguous rows")
        words = arena.view(torch.int32)
        smooth, dungeon = _arena_outputs(dev)
        _launch_smooth(draws, rows, smooth, arena, arena, arena.view(torch.float32), words, True)
        _launch_dungeon(draws, rows, dungeon, arena, arena, words, True)
        potion, potion_ws = _world_draws(draws, ("u_potion",))
        _rest_kernel[(k,)](_template(dev, float(light0)), potion, potion_ws, rows, words, BLOCK=REST_BLOCK,
                           num_warps=4)

    return write


# the row's fields as the kernels write them: every byte of a row, each by one kernel
assert OFFSETS["item_map"] - OFFSETS["map"] == STATE_FIELDS["map"][0][0] * W * W
assert OFFSETS["down_ladders"] == OFFSETS["light_map"] + len(C.DARK_LEVELS) * W * W * 4
assert all(lv in wg.SMOOTH_LEVELS for lv in C.DARK_LEVELS)
