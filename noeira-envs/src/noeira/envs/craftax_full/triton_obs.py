"""The compact observation (:func:`.render.compact`) and its expansion (:func:`.render.expand`) as
Triton kernels on CUDA.

The torch path is the reference: this kernel writes the same 900 bytes per env, bit for bit
(tests run it on a CPU in Triton's interpreter against :func:`.render.compact`). The torch path
costs a few hundred launches a call (the fourteen mob slots are scattered one by one); here one
launch does it all, ``ROWS`` envs a program, each env's row built as three byte tiles (its
tail, its view cells' block and item bytes, its mob-flag bytes) and stored contiguously.

The kernel reads the state where it lives, in the state's byte arena (:mod:`.state`: every
field at a fixed offset of an env's row), so it needs the arena and no field list:

- tail: 51 floats, each read from one leaf of the row (a word of the arena, or a byte of it
  for the flags) and converted the way :func:`.render.tail` does (``TAIL_COLUMNS``, a small
  table on the device);
- view: the 9x11 cells around the player on the player's floor; a cell is dark off the map or
  where a dark floor's light is <= 0.05, and its block byte is then 255; the item byte is
  written lit or not (``ITEM_NONE`` off the map);
- mob flags: the fourteen slots in the reference's order, each writing its flag (alive and in
  view, or not) at its cell with negative local indices wrapped once, so later slots overwrite
  earlier ones as the scatter does.

Capture-safe: the launch depends on the batch size alone and the tables are made once per
device (the env's first observation, at construction, makes them before any recording).

The expansion (:func:`expand_kernel`: the Encoded space's ``decode``/``decode_into`` on CUDA)
writes the 8,268 floats of each code straight into the caller's buffer, float32 or bfloat16,
rows any stride apart (a network's padded input), one code a program: the view's grid as a
[cells, channels] tile whose values come from each cell's seven bytes, loaded once (one-hot
block, one-hot item and mob bits where lit, the light flag), then the tail's floats from their
bytes; one pass, no intermediate tensor. The torch path makes a float32 expansion through a
dozen full-size temporaries, then casts it. (A first version computed each output column's cell
by a division and gathered its bytes: on an H100 it took 7.6 ms for 131,072 codes, about 0.3
TB/s of writes; BENCHMARKS.md.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full.render import BLOCK_BYTES, CELLS, CH, COMPACT_SIZE, DARK, ITEM_BYTES, MOB_BYTES, TAIL_BYTES
from noeira.envs.craftax_full.state import OFFSETS, ROW_BYTES, STATE_FIELDS, State

try:  # optional: without Triton the torch path writes the observation
    import triton
    import triton.language as tl
except ImportError:
    triton = None

__all__ = ["EXPAND_WARPS", "NUM_WARPS", "ROWS", "TAIL_COLUMNS", "compact_kernel", "expand_kernel"]

ROWS = 8
"""Envs per program: 8 at 4 warps ran 25 % faster than 16 on an H100 (BENCHMARKS.md, 2026-12-07);
at 16 the kernel takes 254 registers, two programs a multiprocessor."""
NUM_WARPS = 4
EXPAND_WARPS = 4
"""Warps of the expansion's programs (one code a program)."""

# How each tail float is made from its leaf (``render.tail``'s conversions)
ZERO, ROOT, TENTH, FTENTH, HALF, QUARTER, INT, FLOAT, FLAG, DIRECTION, CLEARED, VULNERABLE = range(12)

TAIL_COLUMNS: tuple[tuple[str, int, int], ...] = (
    *((f"inventory.{k}", 0, ROOT) for k in ("wood", "stone", "coal", "iron", "diamond", "sapphire", "ruby", "sapling",
                                            "torches", "arrows")),
    ("inventory.books", 0, HALF), ("inventory.pickaxe", 0, QUARTER), ("inventory.sword", 0, QUARTER),
    ("sword_enchantment", 0, INT), ("bow_enchantment", 0, INT), ("inventory.bow", 0, INT),
    *(("inventory.potions", i, ROOT) for i in range(6)),
    ("player_health", 0, FTENTH),
    *((f"player_{k}", 0, TENTH) for k in ("food", "drink", "energy", "mana", "xp", "dexterity", "strength",
                                          "intelligence")),
    *(("player_direction", d, DIRECTION) for d in range(4)),  # one-hot of direction - 1: the element is d
    *(("inventory.armour", i, HALF) for i in range(4)),
    *(("armour_enchantments", i, INT) for i in range(4)),
    ("light_level", 0, FLOAT), ("is_sleeping", 0, FLAG), ("is_resting", 0, FLAG), ("learned_spells", 0, FLAG),
    ("learned_spells", 1, FLAG), ("player_level", 0, TENTH),
    ("monsters_killed", 0, CLEARED),  # of the player's floor (the kernel adds the floor)
    ("boss_timesteps_to_spawn_this_round", 0, VULNERABLE),  # <= 0, and no melee or ranged mob alive
)
"""The tail, float by float: (leaf, element, conversion)."""
assert len(TAIL_COLUMNS) == C.TAIL_SIZE


def _word(name: str, element: int = 0) -> int:
    """The int32 word of the arena's row where element ``element`` of leaf ``name`` starts."""
    return (OFFSETS[name] + element * STATE_FIELDS[name][1].itemsize) // 4


@functools.cache
def _tables(device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Device tables, made once per device (the observation is written inside recorded graphs):
    the tail's columns [64, 4] (word, bit shift of a flag's byte in it, conversion, DIRECTION's
    value), the mob slots [14, 5] in the reference's order (class, slots of its group, and the
    words / byte of its position, type and alive flag on floor 0), and each floor's index among
    the dark floors' light maps (-1: a bright floor)."""
    tail = [[0, 0, ZERO, 0] for _ in range(64)]
    for j, (name, element, kind) in enumerate(TAIL_COLUMNS):
        if kind == DIRECTION:  # the element is the one-hot's index; the leaf is the direction's word
            tail[j] = [_word(name), 0, kind, element]
        else:
            byte = OFFSETS[name] + element * STATE_FIELDS[name][1].itemsize
            tail[j] = [byte // 4, 8 * (byte % 4), kind, 0]
    slots = [[cls, count, _word(f"{group}.position", 2 * i), OFFSETS[f"{group}.mask"] + i, _word(f"{group}.type_id", i)]
             for cls, (group, count) in enumerate(C.MOB_GROUPS) for i in range(count)]
    dark = [C.DARK_LEVELS.index(lv) if lv in C.DARK_LEVELS else -1 for lv in range(C.NUM_LEVELS)]
    return tuple(torch.tensor(t, dtype=torch.int32, device=device) for t in (tail, slots, dark))


if triton is not None:
    _W = tl.constexpr(C.MAP_SIZE)
    _VR, _VC = tl.constexpr(C.OBS_ROWS), tl.constexpr(C.OBS_COLS)
    _CELLS = tl.constexpr(CELLS)
    _CLASSES, _TYPES = tl.constexpr(C.NUM_MOB_CLASSES), tl.constexpr(C.MOB_TYPES_PER_CLASS)
    _SLOTS = tl.constexpr(sum(count for _, count in C.MOB_GROUPS))
    _MELEE = tl.constexpr([g for g, _ in C.MOB_GROUPS].index("melee_mobs"))
    _RANGED = tl.constexpr([g for g, _ in C.MOB_GROUPS].index("ranged_mobs"))
    _TAIL_BYTES, _BLOCK_AT, _ITEM_AT, _MOB_AT = (tl.constexpr(v) for v in (TAIL_BYTES, BLOCK_BYTES, ITEM_BYTES,
                                                                          MOB_BYTES))
    _MOB_END = tl.constexpr(COMPACT_SIZE - MOB_BYTES)  # the flags and the zero padding after them
    _MAP, _ITEM_MAP = tl.constexpr(OFFSETS["map"]), tl.constexpr(OFFSETS["item_map"])
    _LIGHT = tl.constexpr(_word("light_map"))
    _POS, _LEVEL = tl.constexpr(_word("player_position")), tl.constexpr(_word("player_level"))
    _OOB, _NONE, _DARK = tl.constexpr(C.OUT_OF_BOUNDS), tl.constexpr(C.ITEM_NONE), tl.constexpr(DARK)
    _LIT_ABOVE = tl.constexpr(C.f32(0.05))
    _TENTH = tl.constexpr(C.f32(0.1))
    _CLEAR_KILLS = tl.constexpr(C.MONSTERS_KILLED_TO_CLEAR_LEVEL)
    _K_ZERO, _K_ROOT, _K_TENTH, _K_FTENTH = (tl.constexpr(v) for v in (ZERO, ROOT, TENTH, FTENTH))
    _K_HALF, _K_QUARTER, _K_INT, _K_FLOAT = (tl.constexpr(v) for v in (HALF, QUARTER, INT, FLOAT))
    _K_FLAG, _K_DIRECTION, _K_CLEARED = (tl.constexpr(v) for v in (FLAG, DIRECTION, CLEARED))

    @triton.jit
    def _compact_kernel(out, out_stride, arena, words, row_bytes, tail_tab, slot_tab, dark_tab, n,
                        ROWS: tl.constexpr):  # noqa: N803
        e = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        live = e < n
        e64 = e.to(tl.int64)
        row = arena + e64 * row_bytes  # the env's row, as bytes and as int32 words
        roww = words + e64 * (row_bytes // 4)
        dst = out + e64 * out_stride
        lvl = tl.load(roww + _LEVEL, mask=live, other=0)
        px = tl.load(roww + _POS, mask=live, other=0)
        py = tl.load(roww + _POS + 1, mask=live, other=0)
        lv = live[:, None]

        # -- the view's cells: block (dark: 255) and item
        c = tl.arange(0, 128)[None, :]
        x = px[:, None] + c // _VC - _VR // 2
        y = py[:, None] + c % _VC - _VC // 2
        inside = lv & (c < _CELLS) & (x >= 0) & (x < _W) & (y >= 0) & (y < _W)
        cell = tl.minimum(tl.maximum(x, 0), _W - 1) * _W + tl.minimum(tl.maximum(y, 0), _W - 1)
        at = lvl[:, None] * (_W * _W) + cell
        block = tl.load(row[:, None] + _MAP + at, mask=inside, other=_OOB)
        item = tl.load(row[:, None] + _ITEM_MAP + at, mask=inside, other=_NONE)
        dark = tl.load(dark_tab + lvl, mask=live, other=-1)[:, None]  # index among the dark floors' light maps
        light = tl.load(roww[:, None] + _LIGHT + dark * (_W * _W) + cell, mask=inside & (dark >= 0), other=0)
        lit = inside & ((dark < 0) | (light.to(tl.float32, bitcast=True) > _LIT_ABOVE))
        in_view = lv & (c < _CELLS)
        tl.store(dst[:, None] + _BLOCK_AT + c, tl.where(lit, block, _DARK).to(tl.uint8), mask=in_view)
        tl.store(dst[:, None] + _ITEM_AT + c, item.to(tl.uint8), mask=in_view)

        # -- mob flags, slot by slot: byte m is cell m // 5's flags of class m % 5
        m = tl.arange(0, 512)[None, :]
        m_cell = m // _CLASSES
        m_class = m % _CLASSES
        flags = tl.zeros((ROWS, 512), dtype=tl.int32)
        melee = tl.zeros((ROWS,), dtype=tl.int32)
        ranged = tl.zeros((ROWS,), dtype=tl.int32)
        for k in range(_SLOTS):
            cls = tl.load(slot_tab + k * 5)
            slot = lvl * tl.load(slot_tab + k * 5 + 1)  # this floor's slots of the group, then the slot
            pos = roww + tl.load(slot_tab + k * 5 + 2) + 2 * slot
            mx = tl.load(pos, mask=live, other=0)
            my = tl.load(pos + 1, mask=live, other=0)
            alive = tl.load(row + tl.load(slot_tab + k * 5 + 3) + slot, mask=live, other=0) != 0
            mob_type = tl.load(roww + tl.load(slot_tab + k * 5 + 4) + slot, mask=live, other=0)
            lx = mx - px + _VR // 2
            ly = my - py + _VC // 2
            on = (lx >= 0) & (lx < _VR) & (ly >= 0) & (ly < _VC) & alive
            lx = tl.where(lx < 0, lx + _VR, lx)  # the scatter wraps a negative index once
            ly = tl.where(ly < 0, ly + _VC, ly)
            ch = cls * _TYPES + mob_type
            lands = (lx >= 0) & (lx < _VR) & (ly >= 0) & (ly < _VC) & (ch >= 0) & (ch < _CLASSES * _TYPES)
            hit = lands[:, None] & (m_cell == (lx * _VC + ly)[:, None]) & (m_class == (ch // _TYPES)[:, None])
            bit = (ch % _TYPES)[:, None]
            flags = tl.where(hit, (flags & ~(1 << bit)) | (on.to(tl.int32)[:, None] << bit), flags)
            melee = melee | (alive & (cls == _MELEE)).to(tl.int32)
            ranged = ranged | (alive & (cls == _RANGED)).to(tl.int32)
        tl.store(dst[:, None] + _MOB_AT + m, flags.to(tl.uint8), mask=lv & (m < _MOB_END))

        # -- the tail's 51 float32, byte by byte: byte b is byte b % 4 of float b // 4
        b = tl.arange(0, 256)[None, :]
        col = tail_tab + (b // 4) * 4
        conv = tl.load(col + 2)
        word = tl.load(col) + tl.where(conv == _K_CLEARED, lvl[:, None], 0)
        w = tl.load(roww[:, None] + word, mask=lv & (b < _TAIL_BYTES), other=0)
        i = w.to(tl.float32)
        f = w.to(tl.float32, bitcast=True)
        flag = ((w >> tl.load(col + 1)) & 255) != 0
        unguarded = (melee == 0) & (ranged == 0)
        v = tl.where(conv == _K_ROOT, tl.sqrt_rn(tl.where(conv == _K_ROOT, i, 0.0)) * _TENTH,
            tl.where(conv == _K_TENTH, i * _TENTH,
            tl.where(conv == _K_FTENTH, f * _TENTH,
            tl.where(conv == _K_HALF, i * 0.5,
            tl.where(conv == _K_QUARTER, i * 0.25,
            tl.where(conv == _K_INT, i,
            tl.where(conv == _K_FLOAT, f,
            tl.where(conv == _K_FLAG, flag.to(tl.float32),
            tl.where(conv == _K_DIRECTION, (w - 1 == tl.load(col + 3)).to(tl.float32),
            tl.where(conv == _K_CLEARED, (w >= _CLEAR_KILLS).to(tl.float32),
            tl.where(conv == _K_ZERO, 0.0, (unguarded[:, None] & (w <= 0)).to(tl.float32))))))))))))
        byte = (v.to(tl.int32, bitcast=True) >> ((b % 4) * 8)) & 255
        tl.store(dst[:, None] + b, byte.to(tl.uint8), mask=lv & (b < _TAIL_BYTES))


@functools.cache
def compact_kernel() -> Callable[[State, Tensor], None] | None:
    """``compact(s, out)``: :func:`.render.compact` of the states ``s`` (a :class:`~.state.State`:
    the kernel reads its ``arena``) into ``out`` [N, 900] uint8, the same bytes; None without
    Triton."""
    if triton is None:
        return None

    def run(s: State, out: Tensor) -> None:
        arena = s.arena
        n = arena.shape[0]
        if n == 0:
            return
        if arena.shape[1] != ROW_BYTES or arena.stride(1) != 1 or out.stride(1) != 1:
            raise ValueError("triton_obs.compact: needs a state's arena [N, ROW_BYTES] and out [N, 900] with "
                             "contiguous rows")
        tail, slots, dark = _tables(arena.device)
        _compact_kernel[(triton.cdiv(n, ROWS),)](out, out.stride(0), arena, arena.view(torch.int32), arena.stride(0),
                                                 tail, slots, dark, n, ROWS=ROWS, num_warps=NUM_WARPS)

    return run



if triton is not None:
    from noeira.envs.craftax.triton_step import _store_value  # float32, or bfloat16 bits rounded as torch casts

    _GRID = tl.constexpr(CELLS * CH)  # 8,217 one-hot and flag columns, then the tail's floats
    _CH = tl.constexpr(CH)
    _BLOCKS, _ITEMS = tl.constexpr(C.NUM_BLOCKS), tl.constexpr(C.NUM_BLOCKS + C.NUM_ITEMS)
    _MOBS = tl.constexpr(C.NUM_BLOCKS + C.NUM_ITEMS + C.NUM_MOB_CLASSES * C.MOB_TYPES_PER_CLASS)
    _TAIL_FLOATS = tl.constexpr(C.TAIL_SIZE)

    @triton.jit
    def _expand_channels(dst, cell, live, block, lit, item, m0, m1, m2, m3, m4, k, BF16: tl.constexpr):  # noqa: N803
        """Channels ``k`` [1, K] of the cells ``cell`` [C, 1] (their bytes loaded) at ``dst``."""
        cls = (k - _ITEMS) // _TYPES  # the mob class of a mob channel
        mob = tl.where(cls == 0, m0, tl.where(cls == 1, m1, tl.where(cls == 2, m2, tl.where(cls == 3, m3, m4))))
        flag = tl.where(k < _BLOCKS, block == k,
               tl.where(k < _ITEMS, lit & (item == k - _BLOCKS),
               tl.where(k < _MOBS, lit & (((mob >> ((k - _ITEMS) % _TYPES)) & 1) != 0), lit)))
        _store_value(dst + cell * _CH + k, flag.to(tl.float32), live & (k < _CH), BF16)

    @triton.jit
    def _expand_kernel(code, out, code_stride, STRIDE: tl.constexpr, BF16: tl.constexpr):  # noqa: N803
        """Code ``code`` row ``program_id`` (900 bytes, rows ``code_stride`` apart) -> the first 8,268
        columns of its row (``STRIDE`` apart) at ``out`` (float32, or with ``BF16`` an int16 view of
        bfloat16). The grid is a [cells, channels] tile (channels 0-63, then 64-82), so each value
        comes from its cell's bytes, loaded once, with no division or gather."""
        r = tl.program_id(0).to(tl.int64)
        src = code + r * code_stride
        dst = out + r * STRIDE
        cell = tl.arange(0, 128)[:, None]
        live = cell < _CELLS
        block = tl.load(src + _BLOCK_AT + cell, mask=live, other=_DARK).to(tl.int32)
        lit = block != _DARK
        item = tl.load(src + _ITEM_AT + cell, mask=live, other=0).to(tl.int32)
        flags = src + _MOB_AT + cell * _CLASSES
        m0 = tl.load(flags, mask=live, other=0).to(tl.int32)
        m1 = tl.load(flags + 1, mask=live, other=0).to(tl.int32)
        m2 = tl.load(flags + 2, mask=live, other=0).to(tl.int32)
        m3 = tl.load(flags + 3, mask=live, other=0).to(tl.int32)
        m4 = tl.load(flags + 4, mask=live, other=0).to(tl.int32)
        _expand_channels(dst, cell, live, block, lit, item, m0, m1, m2, m3, m4, tl.arange(0, 64)[None, :], BF16)
        _expand_channels(dst, cell, live, block, lit, item, m0, m1, m2, m3, m4, 64 + tl.arange(0, 32)[None, :], BF16)
        # the tail: float k from the code's bytes 4k..4k+3 (little-endian)
        k = tl.arange(0, 64)
        on = k < _TAIL_FLOATS
        word = tl.load(src + 4 * k, mask=on, other=0).to(tl.int32)
        word |= tl.load(src + 4 * k + 1, mask=on, other=0).to(tl.int32) << 8
        word |= tl.load(src + 4 * k + 2, mask=on, other=0).to(tl.int32) << 16
        word |= tl.load(src + 4 * k + 3, mask=on, other=0).to(tl.int32) << 24
        _store_value(dst + _GRID + k, word.to(tl.float32, bitcast=True), on, BF16)


@functools.cache
def expand_kernel() -> Callable[[Tensor, Tensor], None] | None:
    """``expand(code, out)``: :func:`.render.expand` of codes ``code`` [B, 900] uint8 into the first
    8,268 columns of ``out`` [B, W] (float32 or bfloat16, ``W`` >= 8,268, rows contiguous, any row
    stride): the same floats (bfloat16: each rounded to nearest even, as torch casts); None without
    Triton."""
    if triton is None:
        return None

    def run(code: Tensor, out: Tensor) -> None:
        b = code.shape[0]
        if (out.dtype not in (torch.float32, torch.bfloat16) or out.dim() != 2 or out.shape[0] != b
                or out.shape[1] < C.OBS_SIZE or out.stride(1) != 1 or code.dim() != 2
                or code.shape[1] != COMPACT_SIZE or code.dtype != torch.uint8):
            raise ValueError(f"craftax expand: needs codes [B, {COMPACT_SIZE}] uint8 and out float32 or bfloat16 "
                             f"[B, >= {C.OBS_SIZE}] with contiguous rows, got {code.dtype} {tuple(code.shape)} and "
                             f"{out.dtype} {tuple(out.shape)}")
        if b == 0:
            return
        code = code if code.stride(1) == 1 else code.contiguous()
        bf16 = out.dtype == torch.bfloat16
        _expand_kernel[(b,)](code, out.view(torch.int16) if bf16 else out, code.stride(0), STRIDE=out.stride(0),
                             BF16=bf16, num_warps=EXPAND_WARPS)

    return run
