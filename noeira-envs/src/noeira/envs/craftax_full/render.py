"""What the agent sees: the reference's symbolic observation (``render_craftax_symbolic``,
8,268 float32), a compact form of it (900 bytes that decode to the same floats bit for bit),
and RGB frames of the same view for videos.

Symbolic layout, as the reference flattens it: the 9x11 view around the player (rows, then
columns), 83 floats per cell: a one-hot of the 37 block types, a one-hot of the 5 item types,
40 mob flags (class x 8 types; classes melee, passive, ranged, mob projectile, player
projectile), all zero where the cell is dark (its light <= 0.05; cells off the map are dark),
then the cell's light flag; then 51 floats: the inventory (square roots / 10 of the counts,
books / 2, pickaxe and sword / 4, the sword and bow enchantments, the bow), the six potions
(square roots / 10), health, food, drink, energy, mana, xp, dexterity, strength, intelligence
(/ 10), the facing direction one-hot, the four armour pieces / 2, their enchantments, then the
light level, sleeping, resting, the two learned spells, the floor / 10, whether the floor is
cleared (8 kills) and whether the necromancer is vulnerable.

Quirks kept: each mob slot writes its flag in turn, alive and on screen or not, at its view
cell with negative local indices wrapped once (a scatter of JAX), so a slot off screen above or
left of the view, or a dead slot sharing a cell, clears a flag an earlier slot set there; the
``/ 10`` is a multiplication by the float32 0.1 (XLA's division by a constant).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable

import torch
from torch import Tensor

from noeira.envs.craftax.render import finish_frames, paint_mobs_and_player  # the frames' shared steps
from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full.constants import MAP_SIZE, OBS_COLS, OBS_ROWS, OBS_SIZE

__all__ = ["COMPACT_SIZE", "compact", "expand", "expand_into", "render_rgb", "symbolic"]

W = MAP_SIZE
CELLS = OBS_ROWS * OBS_COLS  # 99
CH = C.CELL_CHANNELS  # 83
MOB_CHANNELS = C.NUM_MOB_CLASSES * C.MOB_TYPES_PER_CLASS  # 40
TAIL = C.TAIL_SIZE  # 51
# compact layout: the tail's float32 bytes, then per view cell its block (DARK when unlit), its
# item, and five bytes of mob flags (one per class, bit k for type k)
TAIL_BYTES = 4 * TAIL  # 204
BLOCK_BYTES = TAIL_BYTES
ITEM_BYTES = BLOCK_BYTES + CELLS
MOB_BYTES = ITEM_BYTES + CELLS
COMPACT_SIZE = 900
"""Bytes of the compact observation (897 used, padded to a multiple of 4)."""
DARK = 255
_TENTH = C.f32(0.1)


@functools.cache
def _dark_tables(device: torch.device) -> tuple[Tensor, Tensor]:
    """Per floor: its index among the dark floors' light maps, and whether it is dark (made once
    per device: the observation is computed inside recorded CUDA graphs)."""
    index = [C.DARK_LEVELS.index(lv) if lv in C.DARK_LEVELS else 0 for lv in range(C.NUM_LEVELS)]
    return (torch.tensor(index, device=device),
            torch.tensor([lv in C.DARK_LEVELS for lv in range(C.NUM_LEVELS)], device=device))


def _view(s: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Block, item and light flag of each view cell [N, 99] (off the map: out of bounds, none, dark)."""
    n = s["map"].shape[0]
    dev = s["map"].device
    pos = s["player_position"].long()
    lvl = s["player_level"].long()
    r = torch.arange(OBS_ROWS, device=dev).repeat_interleave(OBS_COLS) - OBS_ROWS // 2
    c = torch.arange(OBS_COLS, device=dev).repeat(OBS_ROWS) - OBS_COLS // 2
    x = pos[:, :1] + r
    y = pos[:, 1:] + c
    inside = (x >= 0) & (x < W) & (y >= 0) & (y < W)
    cell = x.clamp(0, W - 1) * W + y.clamp(0, W - 1)
    idx = lvl.unsqueeze(1) * W * W + cell
    blocks = torch.where(inside, s["map"].view(n, -1).gather(1, idx), C.OUT_OF_BOUNDS)
    items = torch.where(inside, s["item_map"].view(n, -1).gather(1, idx), C.ITEM_NONE)
    dark_index, is_dark = (t[lvl] for t in _dark_tables(dev))
    light = s["light_map"].view(n, -1).gather(1, dark_index.unsqueeze(1) * W * W + cell)
    lit = inside & (~is_dark.unsqueeze(1) | (light > 0.05))
    return blocks, items, lit


def view_mobs(s: dict[str, Tensor]) -> Tensor:
    """Mob flags of each view cell [N, 99, 40] (uint8), written slot by slot as the reference does."""
    n = s["map"].shape[0]
    dev = s["map"].device
    lvl = s["player_level"].long()
    rows = torch.arange(n, device=dev)
    flags = torch.zeros(n, CELLS * MOB_CHANNELS, dtype=torch.uint8, device=dev)
    px = s["player_position"][:, 0].long()
    py = s["player_position"][:, 1].long()
    for cls, (group, count) in enumerate(C.MOB_GROUPS):
        pos = s[f"{group}.position"][rows, lvl].long()
        mask = s[f"{group}.mask"][rows, lvl]
        types = s[f"{group}.type_id"][rows, lvl].long()
        for i in range(count):
            lx = pos[:, i, 0] - px + OBS_ROWS // 2
            ly = pos[:, i, 1] - py + OBS_COLS // 2
            on = (lx >= 0) & (lx < OBS_ROWS) & (ly >= 0) & (ly < OBS_COLS) & mask[:, i]
            lx = torch.where(lx < 0, lx + OBS_ROWS, lx)
            ly = torch.where(ly < 0, ly + OBS_COLS, ly)
            ch = cls * C.MOB_TYPES_PER_CLASS + types[:, i]
            lands = (lx >= 0) & (lx < OBS_ROWS) & (ly >= 0) & (ly < OBS_COLS) & (ch >= 0) & (ch < MOB_CHANNELS)
            idx = ((lx.clamp(0, OBS_ROWS - 1) * OBS_COLS + ly.clamp(0, OBS_COLS - 1)) * MOB_CHANNELS
                   + ch.clamp(0, MOB_CHANNELS - 1)).unsqueeze(1)
            flags.scatter_(1, idx, torch.where(lands.unsqueeze(1), on.unsqueeze(1).to(torch.uint8), flags.gather(1, idx)))
    return flags.view(n, CELLS, MOB_CHANNELS)


def _tenths(x: Tensor) -> Tensor:
    return x.float() * _TENTH


def tail(s: dict[str, Tensor]) -> Tensor:
    """The 51 floats after the view [N, 51]."""
    n = s["map"].shape[0]
    dev = s["map"].device
    rows = torch.arange(n, device=dev)
    lvl = s["player_level"].long()
    inv = lambda k: s[f"inventory.{k}"]  # noqa: E731
    roots = [_tenths(C.sqrt32(inv(k).float())) for k in ("wood", "stone", "coal", "iron", "diamond", "sapphire",
                                                          "ruby", "sapling", "torches", "arrows")]
    cols = roots + [inv("books").float() * 0.5, inv("pickaxe").float() * 0.25, inv("sword").float() * 0.25,
                    s["sword_enchantment"].float(), s["bow_enchantment"].float(), inv("bow").float()]
    out = [torch.stack(cols, 1), _tenths(C.sqrt32(inv("potions").float()))]
    intr = [s[f"player_{k}"] for k in ("health", "food", "drink", "energy", "mana", "xp", "dexterity", "strength",
                                       "intelligence")]
    out.append(_tenths(torch.stack([x.float() for x in intr], 1)))
    out.append(((s["player_direction"].long() - 1).unsqueeze(1) == torch.arange(4, device=dev)).float())
    out.append(inv("armour").float() * 0.5)
    out.append(s["armour_enchantments"].float())
    melee = s["melee_mobs.mask"][rows, lvl].any(1)
    ranged = s["ranged_mobs.mask"][rows, lvl].any(1)
    vulnerable = ~melee & ~ranged & (s["boss_timesteps_to_spawn_this_round"] <= 0)
    cleared = s["monsters_killed"][rows, lvl] >= C.MONSTERS_KILLED_TO_CLEAR_LEVEL
    special = [s["light_level"], s["is_sleeping"].float(), s["is_resting"].float(), s["learned_spells"][:, 0].float(),
               s["learned_spells"][:, 1].float(), _tenths(s["player_level"]), cleared.float(), vulnerable.float()]
    out.append(torch.stack(special, 1))
    return torch.cat(out, 1)


def compact(s: dict[str, Tensor], out: Tensor) -> None:
    """Write the compact observation of every world into ``out`` [N, 900] uint8: bytes 0..203
    the 51 tail floats (float32), 204..302 each view cell's block id (255 when dark), 303..401
    its item id, 402..896 its mob flags (five bytes: melee, passive, ranged, mob projectile,
    player projectile; bit ``k`` for type ``k``); :func:`expand` makes the 8,268 floats again.
    The reference of :mod:`.triton_obs`, which writes the same bytes on CUDA."""
    n = out.shape[0]
    blocks, items, lit = _view(s)
    out[:, :TAIL_BYTES].copy_(tail(s).contiguous().view(torch.uint8).view(n, TAIL_BYTES))
    out[:, BLOCK_BYTES:ITEM_BYTES].copy_(torch.where(lit, blocks, DARK))
    out[:, ITEM_BYTES:MOB_BYTES].copy_(items)
    bits = (view_mobs(s).view(n, CELLS, C.NUM_MOB_CLASSES, C.MOB_TYPES_PER_CLASS).to(torch.int32)
            << torch.arange(C.MOB_TYPES_PER_CLASS, device=out.device, dtype=torch.int32)).sum(3)
    out[:, MOB_BYTES : MOB_BYTES + CELLS * C.NUM_MOB_CLASSES].copy_(bits.view(n, -1))
    out[:, MOB_BYTES + CELLS * C.NUM_MOB_CLASSES :].zero_()


def expand(code: Tensor, out: Tensor | None = None) -> Tensor:
    """The symbolic observation [..., 8268] float32 of compact observations ``code`` [..., 900]
    uint8 (bit for bit what :func:`symbolic` writes for the same worlds); into ``out`` if given."""
    lead = code.shape[:-1]
    c = code.reshape(-1, COMPACT_SIZE)
    b = c.shape[0]
    res = torch.empty((b, OBS_SIZE), dtype=torch.float32, device=c.device) if out is None else out.view(b, OBS_SIZE)
    _expand(c, res)
    return res.view(*lead, OBS_SIZE)


@functools.cache
def _triton_expand() -> Callable[[Tensor, Tensor], None] | None:
    """:func:`.triton_obs.expand_kernel` where Triton is installed, else None."""
    if importlib.util.find_spec("triton") is None:
        return None
    from noeira.envs.craftax_full.triton_obs import expand_kernel

    return expand_kernel()


def _kernel_for(code: Tensor, out: Tensor) -> Callable[[Tensor, Tensor], None] | None:
    """The Triton expansion where it can write ``out`` for ``code`` (CUDA, float32 or bfloat16 rows
    with contiguous columns): one kernel instead of a dozen full-size temporaries; else None."""
    if code.is_cuda and out.dtype in (torch.float32, torch.bfloat16) and out.stride(-1) == 1:
        return _triton_expand()
    return None


def _expand(c: Tensor, res: Tensor) -> None:
    (_kernel_for(c, res) or _expand_torch)(c, res)


def _expand_torch(c: Tensor, res: Tensor) -> None:
    """The torch path of the expansion: codes ``c`` [B, 900] -> ``res`` [B, 8268] float32 (the
    kernel's reference)."""
    b = c.shape[0]
    dev = c.device
    grid = res[:, : CELLS * CH].view(b, CELLS, CH)
    blocks = c[:, BLOCK_BYTES:ITEM_BYTES].long()
    lit = blocks != DARK
    grid[:, :, : C.NUM_BLOCKS].copy_(blocks.unsqueeze(2) == torch.arange(C.NUM_BLOCKS, device=dev))
    o = C.NUM_BLOCKS
    items = c[:, ITEM_BYTES:MOB_BYTES].long()
    grid[:, :, o : o + C.NUM_ITEMS].copy_((items.unsqueeze(2) == torch.arange(C.NUM_ITEMS, device=dev)) & lit.unsqueeze(2))
    o += C.NUM_ITEMS
    mobs = c[:, MOB_BYTES : MOB_BYTES + CELLS * C.NUM_MOB_CLASSES].view(b, CELLS, C.NUM_MOB_CLASSES, 1)
    bits = (mobs >> torch.arange(C.MOB_TYPES_PER_CLASS, device=dev, dtype=torch.uint8)) & 1
    grid[:, :, o : o + MOB_CHANNELS].copy_(bits.view(b, CELLS, MOB_CHANNELS) * lit.unsqueeze(2))
    grid[:, :, CH - 1].copy_(lit)
    res[:, CELLS * CH :].copy_(c[:, :TAIL_BYTES].contiguous().view(torch.float32))


def expand_into(code: Tensor, out: Tensor) -> None:
    """:func:`expand` of ``code`` [B, 900] into the first 8,268 columns of ``out`` [B, W], in
    ``out``'s dtype: the ``Encoded`` space's ``decode_into``."""
    kernel = _kernel_for(code, out)
    if kernel is not None:  # straight into the buffer, in its dtype and row stride
        kernel(code.reshape(-1, COMPACT_SIZE), out)
    elif out.dtype == torch.float32 and out.shape[1] == OBS_SIZE and out.is_contiguous():
        _expand_torch(code.reshape(-1, COMPACT_SIZE), out)
    else:
        out[:, :OBS_SIZE].copy_(expand(code))


def symbolic(s: dict[str, Tensor], out: Tensor, write_compact: Callable[..., None] | None = None) -> None:
    """Write the reference's symbolic observation of every world into ``out`` [N, 8268] float32
    (the expansion of the compact one, written by ``write_compact``: :func:`compact` by default,
    the env's Triton kernel on CUDA)."""
    code = torch.empty((out.shape[0], COMPACT_SIZE), dtype=torch.uint8, device=out.device)
    (write_compact or compact)(s, code)
    _expand(code, out)


# -- RGB frames ----------------------------------------------------------------------------------
_BLOCK_RGB = (
    (0, 0, 0), (40, 40, 40), (86, 160, 58), (56, 98, 196), (120, 120, 120), (30, 100, 40), (150, 100, 50),
    (190, 170, 130), (50, 50, 50), (190, 140, 110), (160, 240, 240), (140, 90, 40), (90, 90, 100), (220, 210, 150),
    (230, 80, 20), (110, 200, 80), (200, 60, 90), (95, 85, 80), (0, 0, 0), (80, 110, 70), (150, 140, 130),
    (40, 80, 220), (210, 30, 60), (170, 120, 30), (120, 180, 230), (200, 120, 40), (200, 230, 240), (140, 130, 120),
    (220, 90, 30), (170, 220, 230), (240, 110, 40), (90, 170, 240), (60, 0, 80), (110, 110, 110), (100, 100, 100),
    (90, 90, 90), (140, 40, 160),
)
_ITEM_RGB = ((0, 0, 0), (255, 220, 60), (70, 40, 20), (200, 170, 120), (110, 60, 60))
_CLASS_RGB = ((40, 130, 40), (250, 250, 250), (210, 210, 220), (200, 60, 30), (250, 200, 40))


def render_rgb(s: dict[str, Tensor], tile: int = 8) -> Tensor:
    """Frames of the local view [N, 9 * tile, 11 * tile, 3] uint8: a colour per block type, a small
    square per item (torch yellow, ladders brown), a smaller one per mob class (melee green,
    passive white, ranged grey, projectiles red / gold), the player in the middle (a dot on the
    side it faces), dark cells black, the whole darkened at night and when sleeping."""
    dev = s["map"].device
    n = s["map"].shape[0]
    blocks, items, lit = _view(s)
    colour = torch.tensor(_BLOCK_RGB, dtype=torch.float32, device=dev)[blocks.long()]
    img = colour.view(n, OBS_ROWS, 1, OBS_COLS, 1, 3).expand(n, OBS_ROWS, tile, OBS_COLS, tile, 3).clone()
    q = tile // 4
    has_item = (items != C.ITEM_NONE).float().view(n, OBS_ROWS, 1, OBS_COLS, 1, 1)
    item_rgb = torch.tensor(_ITEM_RGB, dtype=torch.float32, device=dev)[items.long()].view(n, OBS_ROWS, 1, OBS_COLS, 1, 3)
    corner = img[:, :, :q, :, :q, :]
    img[:, :, :q, :, :q, :] = corner * (1 - has_item) + has_item * item_rgb
    mobs = view_mobs(s).view(n, OBS_ROWS, OBS_COLS, C.NUM_MOB_CLASSES, C.MOB_TYPES_PER_CLASS).amax(-1).float()
    paint_mobs_and_player(img, mobs, _CLASS_RGB, slice(q, tile - q))
    img = img * lit.float().view(n, OBS_ROWS, 1, OBS_COLS, 1, 1)
    return finish_frames(img.view(n, OBS_ROWS * tile, OBS_COLS * tile, 3), s, tile)
