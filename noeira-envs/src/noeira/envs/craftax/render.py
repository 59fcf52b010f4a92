"""What the agent sees: the reference's symbolic observation (``render_craftax_symbolic``,
1,345 float32) and RGB frames of the same local view for videos.

Symbolic layout, as the reference flattens it: the 7x9 view around the player (rows, then
columns), 21 floats per cell (a one-hot of the 17 block types, cells off the map being
``OUT_OF_BOUNDS``, then one flag per mob kind: zombie, cow, skeleton, arrow); the 12
inventory counts / 10, health, food, drink, energy / 10, the facing direction one-hot
(left, right, up, down), the light level, sleeping.

Quirks kept: the /10 scalars are float16 as XLA computes them (``f16(f16(x) * f16(0.1))``,
its division by a constant); each mob slot writes its flag in turn, alive and on screen or
not, at its view cell with negative indices wrapped once (a scatter of JAX), so a slot off
screen above or left of the view, or a dead slot sharing a cell, clears the flag an earlier
slot of its kind set there.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch import Tensor

from noeira.envs.craftax.constants import (
    MAP_SIZE,
    MOBS,
    NUM_BLOCKS,
    NUM_MOB_KINDS,
    OBS_COLS,
    OBS_ROWS,
    OUT_OF_BOUNDS,
)

__all__ = ["COMPACT_SIZE", "compact", "expand", "expand_into", "render_rgb", "symbolic"]

CELLS = OBS_ROWS * OBS_COLS
CHANNELS = NUM_BLOCKS + NUM_MOB_KINDS
COMPACT_SIZE = 148
"""Bytes of the compact observation (see :func:`compact`)."""
MOB_BYTES, SCALAR_BYTES, LIGHT_BYTES = CELLS, 2 * CELLS, 2 * CELLS + 18  # where each part starts


@functools.cache
def _half_tenth(device: torch.device) -> Tensor:
    return torch.tensor(0.1, dtype=torch.float16, device=device)  # made once per device, before any capture


def _view_cells(pos: Tensor, device: torch.device) -> tuple[Tensor, Tensor]:
    """Flat map index of each view cell [N, 63] (clamped) and whether it is on the map."""
    r = torch.arange(OBS_ROWS, device=device).repeat_interleave(OBS_COLS) - OBS_ROWS // 2
    c = torch.arange(OBS_COLS, device=device).repeat(OBS_ROWS) - OBS_COLS // 2
    x = pos[:, :1].long() + r
    y = pos[:, 1:].long() + c
    inside = (x >= 0) & (x < MAP_SIZE) & (y >= 0) & (y < MAP_SIZE)
    return x.clamp(0, MAP_SIZE - 1) * MAP_SIZE + y.clamp(0, MAP_SIZE - 1), inside


def view_blocks(s: dict[str, Tensor]) -> Tensor:
    """Block type of each view cell [N, 63] (uint8), ``OUT_OF_BOUNDS`` off the map."""
    n = s["map"].shape[0]
    idx, inside = _view_cells(s["player_position"], s["map"].device)
    blocks = s["map"].view(n, -1).gather(1, idx)
    return torch.where(inside, blocks, OUT_OF_BOUNDS)


def view_mobs(s: dict[str, Tensor]) -> Tensor:
    """Mob flags of each view cell [N, 63, 4] (uint8), written slot by slot as the reference does."""
    n = s["map"].shape[0]
    dev = s["map"].device
    flags = torch.zeros(n, CELLS * NUM_MOB_KINDS, dtype=torch.uint8, device=dev)
    px = s["player_position"][:, 0].long()
    py = s["player_position"][:, 1].long()
    for kind, (name, count) in enumerate(MOBS):
        pos, mask = s[f"{name}.position"], s[f"{name}.mask"]
        for i in range(count):
            lx = pos[:, i, 0].long() - px + OBS_ROWS // 2
            ly = pos[:, i, 1].long() - py + OBS_COLS // 2
            on = (lx >= 0) & (lx < OBS_ROWS) & (ly >= 0) & (ly < OBS_COLS) & mask[:, i]
            lx = torch.where(lx < 0, lx + OBS_ROWS, lx)
            ly = torch.where(ly < 0, ly + OBS_COLS, ly)
            lands = (lx >= 0) & (lx < OBS_ROWS) & (ly >= 0) & (ly < OBS_COLS)
            idx = (lx.clamp(0, OBS_ROWS - 1) * OBS_COLS + ly.clamp(0, OBS_COLS - 1)) * NUM_MOB_KINDS + kind
            idx = idx.unsqueeze(1)
            flags.scatter_(1, idx, torch.where(lands.unsqueeze(1), on.unsqueeze(1).to(torch.uint8), flags.gather(1, idx)))
    return flags.view(n, CELLS, NUM_MOB_KINDS)


def _tenths(x: Tensor) -> Tensor:
    return (x.to(torch.float16) * _half_tenth(x.device)).float()


def symbolic(s: dict[str, Tensor], out: Tensor) -> None:
    """Write the reference's symbolic observation of every world into ``out`` [N, 1345] float32."""
    n = out.shape[0]
    grid = out[:, : CELLS * CHANNELS].view(n, CELLS, CHANNELS)
    blocks = view_blocks(s).long()
    grid[:, :, :NUM_BLOCKS].copy_(blocks.unsqueeze(2) == torch.arange(NUM_BLOCKS, device=out.device))
    grid[:, :, NUM_BLOCKS:].copy_(view_mobs(s))
    o = CELLS * CHANNELS
    out[:, o : o + 12].copy_(_tenths(s["inventory"]))
    o += 12
    for k in ("player_health", "player_food", "player_drink", "player_energy"):
        out[:, o].copy_(_tenths(s[k]))
        o += 1
    out[:, o : o + 4].copy_((s["player_direction"].long() - 1).unsqueeze(1) == torch.arange(4, device=out.device))
    o += 4
    out[:, o].copy_(s["light_level"])
    out[:, o + 1].copy_(s["is_sleeping"])


def compact(s: dict[str, Tensor], out: Tensor) -> None:
    """Write the compact observation of every world into ``out`` [N, 148] uint8: what the
    symbolic observation holds, 36x smaller (:func:`expand` makes the 1,345 floats again, bit
    for bit). Bytes ``0..62``: the block type of each view cell; ``63..125``: its mob flags
    (bit ``k`` for kind ``k``: zombie, cow, skeleton, arrow); ``126..137``: the inventory;
    ``138..141``: health, food, drink, energy; ``142``: the facing direction (1..4); ``143``:
    sleeping; ``144..147``: the light level's float32 bytes. Counts are int8 stored as bytes."""
    n = out.shape[0]
    out[:, :CELLS].copy_(view_blocks(s))
    flags = view_mobs(s).to(torch.int16) << torch.arange(NUM_MOB_KINDS, device=out.device, dtype=torch.int16)
    out[:, MOB_BYTES:SCALAR_BYTES].copy_(flags.sum(2))
    o = SCALAR_BYTES
    out[:, o : o + 12].copy_(s["inventory"].view(torch.uint8))
    o += 12
    for k in ("player_health", "player_food", "player_drink", "player_energy", "player_direction"):
        out[:, o].copy_(s[k].view(torch.uint8))
        o += 1
    out[:, o].copy_(s["is_sleeping"])
    out[:, LIGHT_BYTES:].copy_(s["light_level"].contiguous().view(torch.uint8).view(n, 4))


@functools.cache
def _triton_expand():
    """:func:`noeira.envs.craftax.triton_step.expand` where Triton is installed, else None."""
    if importlib.util.find_spec("triton") is None:
        return None
    from noeira.envs.craftax.triton_step import expand as run

    return run


@functools.cache
def _tenths_table(device: torch.device) -> Tensor:
    """``_tenths`` of every byte read as int8 [256] float32 (made once per device, before any capture)."""
    return _tenths(torch.arange(256, dtype=torch.int16).to(torch.uint8).view(torch.int8)).to(device)


def expand(code: Tensor, out: Tensor | None = None) -> Tensor:
    """The symbolic observation [..., 1345] float32 of compact observations ``code`` [..., 148]
    uint8 (bit for bit what :func:`symbolic` writes for the same worlds); into ``out`` if given."""
    lead = code.shape[:-1]
    c = code.reshape(-1, COMPACT_SIZE)
    b = c.shape[0]
    res = torch.empty((b, 1345), dtype=torch.float32, device=c.device) if out is None else out.view(b, 1345)
    if c.is_cuda and _triton_expand() is not None:  # one kernel instead of a dozen
        _triton_expand()(c.contiguous(), res, _tenths_table(c.device))
        return res.view(*lead, 1345)
    grid = res[:, : CELLS * CHANNELS].view(b, CELLS, CHANNELS)
    grid[:, :, :NUM_BLOCKS].copy_(c[:, :CELLS].unsqueeze(2) == torch.arange(NUM_BLOCKS, device=c.device))
    bits = torch.arange(NUM_MOB_KINDS, device=c.device, dtype=torch.uint8)
    grid[:, :, NUM_BLOCKS:].copy_((c[:, MOB_BYTES:SCALAR_BYTES].unsqueeze(2) >> bits) & 1)
    o = CELLS * CHANNELS
    res[:, o : o + 16].copy_(_tenths_table(c.device)[c[:, SCALAR_BYTES : SCALAR_BYTES + 16].long()])
    o += 16
    direction = c[:, SCALAR_BYTES + 16].view(torch.int8).long() - 1
    res[:, o : o + 4].copy_(direction.unsqueeze(1) == torch.arange(4, device=c.device))
    res[:, o + 4].copy_(c[:, LIGHT_BYTES:].contiguous().view(torch.float32).squeeze(1))
    res[:, o + 5].copy_(c[:, SCALAR_BYTES + 17])
    return res.view(*lead, 1345)


def expand_into(code: Tensor, out: Tensor) -> None:
    """:func:`expand` of ``code`` [B, 148] into the first 1,345 columns of ``out`` [B, W], in
    ``out``'s dtype (each value as torch casts the float32 one): the ``Encoded`` space's
    ``decode_into``, which lets a network's input layer read the observation in its own dtype and
    padded width with no float32 copy between."""
    if code.is_cuda and out.dtype in (torch.float32, torch.bfloat16) and _triton_expand() is not None:
        _triton_expand()(code.reshape(-1, COMPACT_SIZE).contiguous(), out, _tenths_table(code.device))
    else:
        out[:, :1345].copy_(expand(code))


# -- RGB frames ----------------------------------------------------------------------------------
_BLOCK_RGB = (
    (0, 0, 0), (128, 128, 128), (86, 160, 58), (56, 98, 196), (120, 120, 120), (30, 100, 40), (150, 100, 50),
    (190, 170, 130), (50, 50, 50), (190, 140, 110), (160, 240, 240), (140, 90, 40), (90, 90, 100), (220, 210, 150),
    (230, 80, 20), (110, 200, 80), (200, 60, 90),
)
_MOB_RGB = ((40, 130, 40), (250, 250, 250), (210, 210, 220), (100, 60, 20))
_PLAYER_RGB = (250, 200, 40)


def render_rgb(s: dict[str, Tensor], tile: int = 8) -> Tensor:
    """Frames of the local view [N, 7 * tile, 9 * tile, 3] uint8: a colour per block type, a
    smaller square per mob (zombie green, cow white, skeleton grey, arrow brown), the player
    in the middle (a dot on the side it faces), darkened at night and when sleeping."""
    dev = s["map"].device
    n = s["map"].shape[0]
    blocks = view_blocks(s).long()
    colour = torch.tensor(_BLOCK_RGB, dtype=torch.float32, device=dev)[blocks]  # [N, 63, 3]
    img = colour.view(n, OBS_ROWS, 1, OBS_COLS, 1, 3).expand(n, OBS_ROWS, tile, OBS_COLS, tile, 3).clone()
    inner = slice(tile // 4, tile - tile // 4)
    paint_mobs_and_player(img, view_mobs(s).view(n, OBS_ROWS, OBS_COLS, NUM_MOB_KINDS).float(), _MOB_RGB, inner)
    return finish_frames(img.view(n, OBS_ROWS * tile, OBS_COLS * tile, 3), s, tile)


def paint_mobs_and_player(img: Tensor, mobs: Tensor, mob_rgb: tuple[tuple[int, int, int], ...], inner: slice) -> None:
    """On the view's tiles ``img`` [N, rows, tile, cols, tile, 3] (float, in place): a square
    (``inner`` of each tile's rows and columns) of colour ``mob_rgb[k]`` where ``mobs[..., k]``
    [N, rows, cols, K] is set, then the player's square on the middle tile. The full game's frames
    paint theirs so too."""
    n, rows, _, cols, _, _ = img.shape
    dev = img.device
    for k, rgb in enumerate(mob_rgb):
        m = mobs[..., k].view(n, rows, 1, cols, 1, 1)
        region = img[:, :, inner, :, inner, :]
        img[:, :, inner, :, inner, :] = region * (1 - m) + m * torch.tensor(rgb, dtype=torch.float32, device=dev)
    img[:, rows // 2, inner, cols // 2, inner, :] = torch.tensor(_PLAYER_RGB, dtype=torch.float32, device=dev)


def finish_frames(img: Tensor, s: dict[str, Tensor], tile: int) -> Tensor:
    """The frames ``img`` [N, H, W, 3] (float, tiles of ``tile`` pixels, the player's the middle
    one) with a dark mark on the side of the player's tile it faces, darkened at night and when
    sleeping, as uint8. The full game's frames end so too."""
    n = img.shape[0]
    dev = img.device
    cr, cc = img.shape[1] // tile // 2, img.shape[2] // tile // 2
    d = s["player_direction"].long()
    ys, xs = cr * tile + tile // 2, cc * tile + tile // 2
    off = torch.tensor([[0, 0], [0, -1], [0, 1], [-1, 0], [1, 0]], device=dev)[d.clamp(0, 4)] * (tile // 4)
    rows = torch.arange(n, device=dev)
    img[rows, ys + off[:, 0], xs + off[:, 1]] = 0.0
    light = s["light_level"].clamp(0, 1) * torch.where(s["is_sleeping"], 0.5, 1.0)
    img = img * (0.35 + 0.65 * light).view(n, 1, 1, 1)
    return img.round().clamp(0, 255).to(torch.uint8)
