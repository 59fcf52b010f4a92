"""Craftax's world generation (the reference's ``world_gen.generate_world``) for ``k`` worlds at
once: nine 48x48 floors each.

Six floors are "smooth" worlds shaped by Perlin noise (``generate_smoothworld``: the overworld,
the gnomish mines, the troll mines, the fire and ice realms and the graveyard, each with its own
blocks and thresholds, :data:`SMOOTH_CONFIGS`); three are dungeons of eight rooms joined by
corridors (``generate_dungeon``: the dungeon, the sewers, the vaults, :data:`DUNGEON_CONFIGS`).
Every floor gets a ladder down and a ladder up on a random valid cell; the potion colours are
a random permutation of the six effects.

The generation is split in two, as in Craftax-Classic: :func:`sample_world_draws` draws the
random inputs and :func:`world_from_draws` turns them into initial states deterministically, so
the parity tests feed it the draws the JAX reference made. A choice among valid cells (a
ladder's cell, a room's chunk, a corridor's end) takes the ``floor(u * count)``-th valid one
in row-major order (index 0 when none is valid, as the reference's ``choice`` does then): the
same uniform distribution as the reference's ``jax.random.choice`` with ``p``.

Quirks of the reference kept (each found by the parity tests): the ladder's light patch on a
dark floor near an edge lands elsewhere: a start row or column below 0 wraps to the far side,
then the patch is clipped onto the map (the floors are generated under ``vmap``, where
``dynamic_update_slice`` becomes a scatter that normalises negative indices); a
floor with no stone gets a stone at (0, 0) (the unused "always diamond" pick falls on index 0
and writes stone there: the graveyard always has one); rooms overlap and a later room clears an
earlier room's chest; a fountain can replace a chest; a ladder up on the ladder down's cell
hides the ladder down.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import Tensor

from noeira.envs.craftax.worldgen import perlin
from noeira.envs.craftax_full.constants import (
    BOSS_FIGHT_SPAWN_TURNS,
    CHEST,
    COAL,
    DARK_LEVELS,
    DARKNESS,
    DIAMOND,
    ENCHANTMENT_TABLE_FIRE,
    ENCHANTMENT_TABLE_ICE,
    FIRE_GRASS,
    FIRE_TREE,
    FOUNTAIN,
    GRASS,
    GRAVE,
    GRAVE2,
    GRAVE3,
    ICE_GRASS,
    ICE_SHRUB,
    IRON,
    ITEM_LADDER_DOWN,
    ITEM_LADDER_UP,
    ITEM_NONE,
    ITEM_TORCH,
    LAVA,
    MAP_SIZE,
    NECROMANCER,
    OUT_OF_BOUNDS,
    PATH,
    RUBY,
    SAND,
    SAPPHIRE,
    STALAGMITE,
    STONE,
    TREE,
    UP,
    WALL,
    WALL_MOSS,
    WATER,
    sqrt32,
    torch_light_map,
)
from noeira.envs.craftax_full.state import ROW_BYTES, State, empty_state, state_of

__all__ = ["DUNGEON_CONFIGS", "DUNGEON_LEVELS", "SMOOTH_CONFIGS", "SMOOTH_LEVELS", "fill_constants", "generate",
           "perlin", "pick", "proximity", "sample_world_draws", "world_from_draws"]

W = MAP_SIZE
SPAWN = (W // 2, W // 2)
SMOOTH_LEVELS = (0, 2, 5, 6, 7, 8)
"""The floors each smooth configuration makes, in :data:`SMOOTH_CONFIGS` order."""
DUNGEON_LEVELS = (1, 3, 4)
NOISE_RES = {"water": (3, 3), "mountain": (3, 3), "path": (6, 24), "tree": (12, 12)}
"""Perlin resolution (gradient cells per axis) of each noise field on a 48x48 floor."""

_OOB = OUT_OF_BOUNDS  # an ore slot that never fires (chance 0)
SMOOTH_CONFIGS = (
    # overworld, gnomish mines, troll mines, fire realm, ice realm, graveyard
    dict(default=GRASS, sea=WATER, coast=SAND, mountain=STONE, path=PATH, inner=PATH,
         ore_req=(STONE,) * 5, ores=(COAL, IRON, DIAMOND, _OOB, _OOB), ore_chance=(0.03, 0.02, 0.001, 0.0, 0.0),
         tree_req=GRASS, tree=TREE, lava=LAVA, spawn=GRASS, ladder=PATH, ladder_up=False, ladder_down=True,
         water_strength=5, water_max=1, mountain_strength=5, mountain_max=1, light=1.0,
         water_thr=0.7, sand_thr=0.6, tree_uniform=0.8, tree_perlin=0.5),
    dict(default=PATH, sea=WATER, coast=PATH, mountain=STONE, path=STONE, inner=STONE,
         ore_req=(STONE,) * 5, ores=(COAL, IRON, DIAMOND, SAPPHIRE, RUBY), ore_chance=(0.04, 0.02, 0.005, 0.0025, 0.0025),
         tree_req=PATH, tree=STALAGMITE, lava=LAVA, spawn=PATH, ladder=PATH, ladder_up=True, ladder_down=True,
         water_strength=5, water_max=1, mountain_strength=17, mountain_max=1.5, light=0.0,
         water_thr=0.7, sand_thr=0.6, tree_uniform=0.8, tree_perlin=0.5),
    dict(default=PATH, sea=WATER, coast=PATH, mountain=STONE, path=STONE, inner=STONE,
         ore_req=(STONE,) * 5, ores=(COAL, IRON, DIAMOND, SAPPHIRE, RUBY), ore_chance=(0.04, 0.03, 0.01, 0.01, 0.01),
         tree_req=PATH, tree=STALAGMITE, lava=LAVA, spawn=PATH, ladder=PATH, ladder_up=True, ladder_down=True,
         water_strength=5, water_max=1, mountain_strength=17, mountain_max=1.5, light=0.0,
         water_thr=0.7, sand_thr=0.6, tree_uniform=0.8, tree_perlin=0.5),
    dict(default=FIRE_GRASS, sea=LAVA, coast=SAND, mountain=STONE, path=STONE, inner=STONE,
         ore_req=(STONE,) * 5, ores=(COAL, IRON, DIAMOND, SAPPHIRE, RUBY), ore_chance=(0.05, 0.0, 0.0, 0.0, 0.025),
         tree_req=FIRE_GRASS, tree=FIRE_TREE, lava=LAVA, spawn=FIRE_GRASS, ladder=FIRE_GRASS, ladder_up=True,
         ladder_down=True, water_strength=5, water_max=1, mountain_strength=5, mountain_max=1, light=1.0,
         water_thr=0.5, sand_thr=0.6, tree_uniform=0.8, tree_perlin=0.5),
    dict(default=ICE_GRASS, sea=WATER, coast=ICE_GRASS, mountain=STONE, path=STONE, inner=STONE,
         ore_req=(STONE,) * 5, ores=(COAL, IRON, DIAMOND, SAPPHIRE, RUBY), ore_chance=(0.0, 0.0, 0.005, 0.02, 0.0),
         tree_req=ICE_GRASS, tree=ICE_SHRUB, lava=WATER, spawn=ICE_GRASS, ladder=ICE_GRASS, ladder_up=True,
         ladder_down=True, water_strength=5, water_max=1, mountain_strength=17, mountain_max=1.5, light=0.0,
         water_thr=0.5, sand_thr=0.6, tree_uniform=0.4, tree_perlin=0.5),
    dict(default=PATH, sea=PATH, coast=PATH, mountain=WALL, path=WALL, inner=WALL,
         ore_req=(WALL, GRAVE, GRAVE, WALL, WALL), ores=(WALL_MOSS, GRAVE2, GRAVE3, SAPPHIRE, RUBY),
         ore_chance=(0.1, 0.333, 0.5, 0.0, 0.0), tree_req=PATH, tree=GRAVE, lava=WALL, spawn=NECROMANCER,
         ladder=PATH, ladder_up=False, ladder_down=False, water_strength=5, water_max=1, mountain_strength=10,
         mountain_max=10, light=0.0, water_thr=0.7, sand_thr=0.6, tree_uniform=0.95, tree_perlin=-1.0),
)
"""The reference's ``SmoothGenConfig`` of each smooth floor."""
DUNGEON_CONFIGS = (
    dict(special=PATH, fountain=FOUNTAIN, rare_path=PATH),  # dungeon
    dict(special=ENCHANTMENT_TABLE_ICE, fountain=WATER, rare_path=WATER),  # sewers
    dict(special=ENCHANTMENT_TABLE_FIRE, fountain=FOUNTAIN, rare_path=PATH),  # vaults
)
"""The reference's ``DungeonConfig`` of each dungeon floor."""
NUM_ROOMS, MIN_ROOM, MAX_ROOM, CHUNK = 8, 5, 10, 16
PAD = MAX_ROOM  # the dungeon is built on a map padded by the largest room size
CHUNKS = (W // CHUNK) ** 2


# -- helpers ----------------------------------------------------------------------------------------
def pick(valid: Tensor, u: Tensor) -> Tensor:
    """Index along the last dim of the ``floor(u * count)``-th True of ``valid`` [..., M] (0 when
    there is none: what the reference's ``choice`` gives for an all-zero ``p``)."""
    count = valid.sum(-1)
    j = (u * count).long().clamp(max=(count - 1).clamp(min=0))
    idx = (valid.long().cumsum(-1) <= j.unsqueeze(-1)).sum(-1)
    return torch.where(count > 0, idx, 0)


def _set(grid: Tensor, flat: Tensor, value: Tensor | int, where: Tensor | None = None) -> None:
    """``grid[..., flat] = value`` on a grid [..., M] (flat [...] int64), where ``where`` if given."""
    idx = flat.unsqueeze(-1)
    if isinstance(value, Tensor):
        value = value.to(grid.dtype).expand(flat.shape).unsqueeze(-1)
    else:  # a fill kernel, not a host-to-device copy (world generation runs inside recorded graphs)
        value = torch.full((*flat.shape, 1), value, dtype=grid.dtype, device=grid.device)
    if where is not None:
        value = torch.where(where.unsqueeze(-1), value, grid.gather(-1, idx))
    grid.scatter_(-1, idx, value)


def _conv3(x: Tensor, kernel: tuple[tuple[float, ...], ...]) -> Tensor:
    """``jsp.signal.convolve(x, kernel, mode="same")`` for a symmetric 3x3 kernel over the last
    two dims (zero padding), summed tap by tap in row-major order of the kernel."""
    pad = torch.nn.functional.pad(x, (1, 1, 1, 1))
    out = torch.zeros_like(x)
    h, w = x.shape[-2:]
    for a in range(3):
        for b in range(3):
            if kernel[a][b] != 0:
                out = out + pad[..., a : a + h, b : b + w] * kernel[a][b]
    return out


# -- draws ----------------------------------------------------------------------------------------
def sample_world_draws(k: int, generator: torch.Generator, device: torch.device) -> dict[str, Tensor]:
    """The random inputs of ``k`` worlds (all uniform in [0, 1) but the room sizes and offsets):

    - smooth floors, ``[k, 6, ...]``: ``angles_<field>`` [r0+1, r1+1] (times 2 pi), ``u_tree``
      [48, 48], ``u_ore`` [5, 48, 48], ``u_ladder`` [2] (down, up);
    - dungeons, ``[k, 3, ...]``: ``u_chunk`` [8], ``room_size`` [8, 2] int (5..9), ``room_offset``
      [8, 2] int (0..10), ``u_chest`` [8, 2], ``u_fountain_pos`` [8, 2], ``u_fountain`` [8],
      ``u_sink`` [8], ``u_rare`` [48, 48], ``u_ladder`` [2];
    - ``u_potion`` [k, 6] (its argsort is the potion mapping)."""
    def rand(*shape: int) -> Tensor:
        return torch.rand((k, *shape), generator=generator, device=device)

    out = {f"angles_{f}": rand(6, r0 + 1, r1 + 1) for f, (r0, r1) in NOISE_RES.items()}
    out["u_tree"] = rand(6, W, W)
    out["u_ore"] = rand(6, 5, W, W)
    out["u_ladder"] = rand(6, 2)
    out["dungeon_u_chunk"] = rand(3, NUM_ROOMS)
    out["dungeon_room_size"] = torch.randint(MIN_ROOM, MAX_ROOM, (k, 3, NUM_ROOMS, 2), generator=generator, device=device)
    out["dungeon_room_offset"] = torch.randint(0, CHUNK - MIN_ROOM, (k, 3, NUM_ROOMS, 2), generator=generator,
                                               device=device)
    out["dungeon_u_chest"] = rand(3, NUM_ROOMS, 2)
    out["dungeon_u_fountain_pos"] = rand(3, NUM_ROOMS, 2)
    out["dungeon_u_fountain"] = rand(3, NUM_ROOMS)
    out["dungeon_u_sink"] = rand(3, NUM_ROOMS)
    out["dungeon_u_rare"] = rand(3, W, W)
    out["dungeon_u_ladder"] = rand(3, 2)
    out["u_potion"] = rand(6)
    return out


def _draw_layout() -> list[tuple[str, tuple[int, ...], tuple[int, int] | None]]:
    """``sample_world_draws``' fields in a fixed order: (name, shape per world, the integer range
    ``[low, high)`` of a randint field or None for a uniform)."""
    out: list[tuple[str, tuple[int, ...], tuple[int, int] | None]] = [
        (f"angles_{f}", (6, r0 + 1, r1 + 1), None) for f, (r0, r1) in NOISE_RES.items()]
    out += [("u_tree", (6, W, W), None), ("u_ore", (6, 5, W, W), None), ("u_ladder", (6, 2), None),
            ("dungeon_u_chunk", (3, NUM_ROOMS), None),
            ("dungeon_room_size", (3, NUM_ROOMS, 2), (MIN_ROOM, MAX_ROOM)),
            ("dungeon_room_offset", (3, NUM_ROOMS, 2), (0, CHUNK - MIN_ROOM)),
            ("dungeon_u_chest", (3, NUM_ROOMS, 2), None), ("dungeon_u_fountain_pos", (3, NUM_ROOMS, 2), None),
            ("dungeon_u_fountain", (3, NUM_ROOMS), None), ("dungeon_u_sink", (3, NUM_ROOMS), None),
            ("dungeon_u_rare", (3, W, W), None), ("dungeon_u_ladder", (3, 2), None), ("u_potion", (6,), None)]
    return out


DRAW_LAYOUT = _draw_layout()
DRAWS_PER_WORLD = sum(math.prod(shape) for _, shape, _ in DRAW_LAYOUT)
"""Uniforms one world takes (~91,000): Philox words 4 per counter, see :func:`keyed_draws`."""
SALT = 0x5DEECE66D1F2A3B7
"""XORed into the run's key before it keys the worlds' Philox (the step's variates come from
the env's generator; the salt keeps the worlds' stream apart from Craftax-Classic's too)."""
QUEUE_STREAM = 0xFFFFFFFF
"""The first counter word of the queue's worlds (env indices, the on-demand worlds', are below)."""


def keyed_draws(key: Tensor, stream: Tensor, serial: Tensor, kernel: bool | None = None) -> dict[str, Tensor]:
    """``sample_world_draws``' inputs of the worlds numbered ``(stream[i], serial[i])`` (int64
    [k]) under the run's ``key`` (int64 [1]): world ``i`` reads Philox4x32-10 (as Triton's,
    :func:`noeira.envs.craftax.worldgen.philox`) at counters ``(j, stream[i], serial[i] low,
    serial[i] high)``, ``j`` = 0, 1, ..., four uniforms a counter. So a world depends on its
    numbers only: any batch, device or order of generation gives it bit for bit. ``kernel``: the
    uniforms from :func:`.draws.draws_kernel` (one Triton kernel, the same numbers; None: on CUDA
    where Triton is installed), else from torch ops."""
    from noeira.envs.craftax.worldgen import philox, uniform
    from noeira.envs.craftax_full.draws import draws_kernel

    dev = stream.device
    k = stream.shape[0]
    key = (key.reshape(1, 1).to(dev) ^ SALT)
    run = draws_kernel() if kernel or (kernel is None and dev.type == "cuda") else None
    if run is not None:
        u = torch.empty((k, DRAWS_PER_WORLD), dtype=torch.float32, device=dev)
        run(u, key.reshape(1), stream.to(torch.int64).contiguous(), serial.to(torch.int64).contiguous())
    else:
        c1 = stream.to(torch.int64).view(-1, 1)
        ser = serial.to(torch.int64).view(-1, 1)
        c2, c3 = ser & 0xFFFFFFFF, (ser >> 32) & 0xFFFFFFFF
        counters = torch.arange((DRAWS_PER_WORLD + 3) // 4, device=dev, dtype=torch.int64).view(1, -1)
        # Triton's uint_to_uniform_float of each word (Craftax-Classic's ``uniform``), four a counter
        u = torch.stack([uniform(w) for w in philox(key, counters, c1, c2, c3)], -1).view(k, -1)[:, :DRAWS_PER_WORLD]
    out, start = {}, 0
    for name, shape, ints in DRAW_LAYOUT:
        size = math.prod(shape)
        v = u[:, start:start + size].reshape(k, *shape)
        start += size
        if ints is not None:
            low, high = ints
            v = (low + (v * (high - low)).long()).clamp_(max=high - 1)
        out[name] = v
    return out


def generate_keyed(key: Tensor, stream: Tensor, serial: Tensor, light0: float, chunk: int = 256,
                   kernel: bool | None = None, into: State | None = None) -> State:
    """The initial states of the worlds numbered ``(stream[i], serial[i])`` (:func:`keyed_draws`),
    ``chunk`` at a time (a world's draws take ~0.4 MB, and ~0.7 MB of int64 scratch on the torch
    path); ``kernel`` as :func:`world_from_draws`' (the Triton kernels, the keyed draws' with them,
    write each chunk's worlds straight into the states' rows). ``into``: states of ``k`` rows to write world ``i`` into
    row ``i`` of (and returned); there the Triton kernels skip the worlds whose serial is negative,
    whose rows keep what they held, so the work follows the worlds asked for while the shapes stay
    fixed (a CUDA graph records them; the torch path makes every world)."""
    k, dev = stream.shape[0], stream.device
    write = _worlds_kernel(kernel, dev)
    if write is None:
        if into is None and k <= chunk:
            return world_from_draws(keyed_draws(key, stream, serial), light0, kernel=False)
        s = empty_state(k, dev) if into is None else into
        serial = serial.clamp(min=0)  # (every world made: a skipped one's draws must be numbers)
        for i in range(0, k, chunk):
            draws = keyed_draws(key, stream[i:i + chunk], serial[i:i + chunk])
            s.arena[i:i + chunk].copy_(world_from_draws(draws, light0, kernel=False).arena)
        return s
    s = state_of(torch.empty((k, ROW_BYTES), dtype=torch.uint8, device=dev)) if into is None else into
    rows = torch.where(serial >= 0, torch.arange(k, device=dev), -1)  # (negative serials come only with into)
    for i in range(0, k, chunk):
        write(keyed_draws(key, stream[i:i + chunk], serial[i:i + chunk], kernel), light0, s.arena, rows[i:i + chunk])
    return s


def _worlds_kernel(kernel: bool | None, device: torch.device) -> Callable[..., None] | None:
    """:func:`.triton_worldgen.worlds_kernel` where ``kernel`` asks for it (None: on CUDA) and
    Triton imports, else None (the torch ops)."""
    if not (kernel or (kernel is None and device.type == "cuda")):
        return None
    from noeira.envs.craftax_full.triton_worldgen import worlds_kernel

    return worlds_kernel()


@functools.cache
def _config_tensor(key: str, device: torch.device, dtype: torch.dtype = torch.int64) -> Tensor:
    """A field of every smooth config [6] (made once per device: the generation runs inside
    recorded CUDA graphs, where a host-to-device copy is not allowed)."""
    return torch.tensor([c[key] for c in SMOOTH_CONFIGS], dtype=dtype, device=device)


@functools.cache
def _level_index(which: str, device: torch.device) -> Tensor:
    """The floors the smooth configs make (``smooth``), the dungeons (``dungeon``), or the index
    among the smooth floors of the dark ones (``dark``), as a device tensor made once."""
    levels = {"smooth": SMOOTH_LEVELS, "dungeon": DUNGEON_LEVELS,
              "dark": tuple(SMOOTH_LEVELS.index(lv) for lv in DARK_LEVELS)}[which]
    return torch.tensor(levels, dtype=torch.int64, device=device)


@functools.cache
def _dungeon_tensor(key: str, device: torch.device) -> Tensor:
    return torch.tensor([c[key] for c in DUNGEON_CONFIGS], device=device)


@functools.cache
def _torch_light(device: torch.device) -> Tensor:
    return torch_light_map().to(device)


# -- smooth floors -----------------------------------------------------------------------------------
@functools.cache
def proximity(device: torch.device) -> tuple[Tensor, Tensor]:
    """What the distance from the spawn adds to the water and the mountain noise of each smooth
    floor, [1, 6, 48, 48] float32 each (made once per device; the Triton kernels read them too)."""
    def cfg(key: str) -> Tensor:
        return _config_tensor(key, device, torch.float32).view(1, 6, 1, 1)

    rows = torch.arange(W, device=device)
    dist = sqrt32(((rows.view(-1, 1) - SPAWN[0]) ** 2 + (rows.view(1, -1) - SPAWN[1]) ** 2).float())
    water = torch.minimum((dist / cfg("water_strength")).clamp(min=0.0), cfg("water_max"))
    mountain = torch.minimum((dist / cfg("mountain_strength")).clamp(min=0.0), cfg("mountain_max"))
    return water, mountain


def smooth_floors(d: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The six smooth floors of each world: (map [k, 6, 48, 48] uint8, item map, light map float32,
    ladder down [k, 6] flat index, ladder up [k, 6] flat index)."""
    dev = d["u_tree"].device
    k = d["u_tree"].shape[0]

    def cfg(key: str, dtype: torch.dtype = torch.int64) -> Tensor:
        return _config_tensor(key, dev, dtype).view(1, 6, 1, 1)

    rows = torch.arange(W, device=dev)
    prox_water, prox_mountain = proximity(dev)

    water = perlin(d["angles_water"], NOISE_RES["water"], W) + prox_water - 1.0
    mp = torch.where(water > cfg("water_thr", torch.float32), cfg("sea"), cfg("default"))
    mp = torch.where((water > cfg("sand_thr", torch.float32)) & (mp != cfg("sea")), cfg("coast"), mp)
    mountain = perlin(d["angles_mountain"], NOISE_RES["mountain"], W) + 0.05
    mountain = mountain + prox_mountain - 1.0
    high = mountain > 0.7
    mp = torch.where(high, cfg("mountain"), mp)
    path = perlin(d["angles_path"], NOISE_RES["path"], W)
    mp = torch.where(high & (path > 0.8), cfg("path"), mp)
    mp = torch.where(high & (path.transpose(-2, -1) > 0.8), cfg("path"), mp)
    mp = torch.where((mountain > 0.85) & (water > 0.4), cfg("inner"), mp)
    tree_noise = perlin(d["angles_tree"], NOISE_RES["tree"], W)
    trees = ((tree_noise > cfg("tree_perlin", torch.float32)).float() * d["u_tree"] > cfg("tree_uniform", torch.float32))
    mp = torch.where(trees & (mp == cfg("tree_req")), cfg("tree"), mp)
    ore_req, ores = _config_tensor("ore_req", dev), _config_tensor("ores", dev)
    chance = _config_tensor("ore_chance", dev, torch.float32)
    for i in range(5):
        hit = (mp == ore_req[:, i].view(1, 6, 1, 1)) & (d["u_ore"][:, :, i] < chance[:, i].view(1, 6, 1, 1))
        mp = torch.where(hit, ores[:, i].view(1, 6, 1, 1), mp)
    lava = (mountain > 0.85) & (tree_noise > 0.7)
    mp = torch.where(lava, cfg("lava"), mp)
    flat = mp.reshape(k, 6, W * W)
    # the unused "always diamond" pick: stone on a stone cell (no change), or at index 0 when there is none
    flat[..., 0] = torch.where((flat == STONE).any(-1), flat[..., 0], STONE)
    flat[..., SPAWN[0] * W + SPAWN[1]] = _config_tensor("spawn", dev).view(1, 6)
    item = torch.zeros_like(flat)
    valid = flat == _config_tensor("ladder", dev).view(1, 6, 1)
    down = pick(valid, d["u_ladder"][..., 0])
    _set(item, down, ITEM_LADDER_DOWN, _config_tensor("ladder_down", dev, torch.bool).view(1, 6).expand(k, 6))
    up = pick(valid, d["u_ladder"][..., 1])

    # light: the floor's default, the ladder up's torch light (its 9x9 patch kept on the map), lava's glow
    default = cfg("light", torch.float32)
    light = default.expand(k, 6, W, W).clone()
    patch = _torch_light(dev) * (1 - default) + default  # [1, 6, 9, 9]
    # where the patch starts: a negative start wraps once, then the patch is kept on the map (the
    # reference's vmapped dynamic_update_slice, a scatter that normalises negative indices, then clips)
    r0, c0 = up // W - 4, up % W - 4
    r0 = torch.where(r0 < 0, r0 + W, r0).clamp(0, W - 9)
    c0 = torch.where(c0 < 0, c0 + W, c0).clamp(0, W - 9)
    inside = ((rows.view(1, 1, W) >= r0.unsqueeze(-1)) & (rows.view(1, 1, W) < r0.unsqueeze(-1) + 9))
    inside_c = ((rows.view(1, 1, W) >= c0.unsqueeze(-1)) & (rows.view(1, 1, W) < c0.unsqueeze(-1) + 9))
    pr = (rows.view(1, 1, W) - r0.unsqueeze(-1)).clamp(0, 8)  # [k, 6, 48]
    pc = (rows.view(1, 1, W) - c0.unsqueeze(-1)).clamp(0, 8)
    pvals = patch.expand(k, 6, 9, 9).gather(2, pr.unsqueeze(-1).expand(k, 6, W, 9))
    pvals = pvals.gather(3, pc.unsqueeze(2).expand(k, 6, W, W))
    light = torch.where(inside.unsqueeze(-1) & inside_c.unsqueeze(-2), pvals, light)
    glow = (cfg("lava") == LAVA).float()
    light = (light + _conv3(lava.float(), ((0.2, 0.7, 0.2), (0.7, 1.0, 0.7), (0.2, 0.7, 0.2))) * glow).clamp(0.0, 1.0)
    _set(item, up, ITEM_LADDER_UP, _config_tensor("ladder_up", dev, torch.bool).view(1, 6).expand(k, 6))
    return flat.view(k, 6, W, W), item.view(k, 6, W, W), light, down, up


# -- dungeons ---------------------------------------------------------------------------------------
def dungeon_floors(d: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The three dungeon floors of each world: (map [k, 3, 48, 48], item map, ladder down [k, 3]
    flat index, ladder up [k, 3]); their light is 1 everywhere."""
    size = d["dungeon_room_size"]
    k, dev = size.shape[0], size.device
    P = W + 2 * PAD
    rows = torch.arange(P, device=dev)
    inner = (rows >= PAD) & (rows < PAD + W)
    mp = torch.where(inner.view(-1, 1) & inner.view(1, -1), WALL, 0).to(torch.int64).expand(k, 3, P, P).clone()
    item = torch.zeros((k, 3, P * P), dtype=torch.int64, device=dev)
    flat = mp.view(k, 3, P * P)
    free = torch.ones((k, 3, CHUNKS), dtype=torch.bool, device=dev)
    fountain_block = _dungeon_tensor("fountain", dev).view(1, 3)
    positions = []
    for r in range(NUM_ROOMS):
        chunk = pick(free, d["dungeon_u_chunk"][..., r])
        free.scatter_(-1, chunk.unsqueeze(-1), False)
        side = W // CHUNK
        pos = torch.stack([(chunk % side) * CHUNK, (chunk // side) * CHUNK], -1) + PAD + d["dungeon_room_offset"][..., r, :]
        s = size[..., r, :]
        positions.append(pos)
        in_r = (rows.view(1, 1, P) >= pos[..., :1]) & (rows.view(1, 1, P) < pos[..., :1] + s[..., :1])
        in_c = (rows.view(1, 1, P) >= pos[..., 1:]) & (rows.view(1, 1, P) < pos[..., 1:] + s[..., 1:])
        mp.masked_fill_(in_r.unsqueeze(-1) & in_c.unsqueeze(-2), PATH)
        for dr, dc in ((0, 0), (1, 0), (0, 1), (1, 1)):  # torches in the corners
            cell = (pos[..., 0] + dr * (s[..., 0] - 1)) * P + pos[..., 1] + dc * (s[..., 1] - 1)
            _set(item, cell, ITEM_TORCH)
        chest = pos + 1 + (d["dungeon_u_chest"][..., r, :] * (s - 2)).long()
        _set(flat, chest[..., 0] * P + chest[..., 1], CHEST)
        fpos = pos + 1 + (d["dungeon_u_fountain_pos"][..., r, :] * (s - 2)).long()
        _set(flat, fpos[..., 0] * P + fpos[..., 1], fountain_block.expand(k, 3), d["dungeon_u_fountain"][..., r] > 0.5)
    pos = torch.stack(positions, 2)  # [k, 3, rooms, 2]
    included = torch.zeros((k, 3, NUM_ROOMS), dtype=torch.bool, device=dev)
    included[..., -1] = True
    for i in range(NUM_ROOMS):
        sink = pick(included, d["dungeon_u_sink"][..., i])
        src = pos[:, :, i]
        dst = pos.gather(2, sink.view(k, 3, 1, 1).expand(k, 3, 1, 2)).squeeze(2)
        # along the source's row to the sink's column, then along that column to the sink's row
        hd = dst[..., 1] - src[..., 1]
        along = (rows.view(1, 1, P) - src[..., 1:]) * hd.sign().unsqueeze(-1)
        on = (along >= 0) & (along <= hd.abs().unsqueeze(-1)) & (hd != 0).unsqueeze(-1)
        row = mp.gather(2, src[..., 0].view(k, 3, 1, 1).expand(k, 3, 1, P)).squeeze(2)
        row = torch.where(on & (row == WALL), PATH, row)
        mp.scatter_(2, src[..., 0].view(k, 3, 1, 1).expand(k, 3, 1, P), row.unsqueeze(2))
        vd = dst[..., 0] - src[..., 0]
        along = (rows.view(1, 1, P) - src[..., :1]) * vd.sign().unsqueeze(-1)
        on = (along >= 0) & (along <= vd.abs().unsqueeze(-1)) & (vd != 0).unsqueeze(-1)
        col = mp.gather(3, dst[..., 1].view(k, 3, 1, 1).expand(k, 3, P, 1)).squeeze(3)
        col = torch.where(on & (col == WALL), PATH, col)
        mp.scatter_(3, dst[..., 1].view(k, 3, 1, 1).expand(k, 3, P, 1), col.unsqueeze(3))
        included[..., i] = True
    special = pos[:, :, 0] + 2
    _set(flat, special[..., 0] * P + special[..., 1],
         _dungeon_tensor("special", dev).view(1, 3).expand(k, 3))
    mp = mp[..., PAD : PAD + W, PAD : PAD + W]
    item = item.view(k, 3, P, P)[..., PAD : PAD + W, PAD : PAD + W]

    # walls next to a room or corridor stay (some mossy), the rest is darkness; some path cells change
    adj = _conv3((mp != WALL).float(), ((0, 1, 0), (1, 1, 1), (0, 1, 0))) > 0.5
    rare = d["dungeon_u_rare"] < 0.1
    rare_path = _dungeon_tensor("rare_path", dev).view(1, 3, 1, 1)
    path_map = torch.where(rare & (mp == PATH) & (item == ITEM_NONE), rare_path, mp)
    wall_map = torch.where(rare, WALL_MOSS, WALL)
    mp = torch.where(~adj, DARKNESS, torch.where(mp == WALL, wall_map, path_map))
    flat = mp.reshape(k, 3, W * W)
    item = item.reshape(k, 3, W * W)
    down = pick(flat == PATH, d["dungeon_u_ladder"][..., 0])
    _set(item, down, ITEM_LADDER_DOWN)
    up = pick(flat == PATH, d["dungeon_u_ladder"][..., 1])
    _set(item, up, ITEM_LADDER_UP)
    return flat.view(k, 3, W, W), item.view(k, 3, W, W), down, up


# -- worlds ---------------------------------------------------------------------------------------
def world_from_draws(draws: dict[str, Tensor], light0: float, kernel: bool | None = None) -> State:
    """Initial states (the layout of :mod:`.state`) of the worlds ``draws`` describe (``light0``:
    the light level at timestep 0). ``kernel``: Triton kernels write the states
    (:mod:`.triton_worldgen`, the same bytes; None: on CUDA where Triton imports), else the torch
    ops below (the reference of the kernels)."""
    u = draws["u_potion"]
    k, dev = u.shape[0], u.device
    write = _worlds_kernel(kernel, dev)
    if write is not None:
        s = state_of(torch.empty((k, ROW_BYTES), dtype=torch.uint8, device=dev))  # the kernels write every byte
        write(draws, light0, s.arena, torch.arange(k, device=dev))
        return s
    smap, sitem, slight, sdown, sup = smooth_floors(draws)
    dmap, ditem, ddown, dup = dungeon_floors(draws)
    s = empty_state(k, dev)
    # the floors as device index tensors made once (a Python list index is copied from the host)
    sl, dl, dark = _level_index("smooth", dev), _level_index("dungeon", dev), _level_index("dark", dev)
    s["map"][:, sl] = smap.to(torch.uint8)
    s["map"][:, dl] = dmap.to(torch.uint8)
    s["item_map"][:, sl] = sitem.to(torch.uint8)
    s["item_map"][:, dl] = ditem.to(torch.uint8)
    s["light_map"].copy_(slight.index_select(1, dark))
    for key, a, b in (("down_ladders", sdown, ddown), ("up_ladders", sup, dup)):
        s[key][:, sl] = torch.stack([a // W, a % W], -1).int()
        s[key][:, dl] = torch.stack([b // W, b % W], -1).int()
    fill_constants(s, light0)
    s["potion_mapping"].copy_(u.argsort(dim=-1, stable=True).int())  # equal draws in index order, on every device
    return s


def fill_constants(s: State, light0: float) -> None:
    """The fields every initial state starts with alike (on zeroed states; the Triton kernels
    copy a row made by it)."""
    s["monsters_killed"][:, 0] = 10  # the first ladder starts open
    s["player_position"][:, 0], s["player_position"][:, 1] = SPAWN
    s["player_direction"].fill_(UP)
    s["player_health"].fill_(9.0)
    for key in ("player_food", "player_drink", "player_energy", "player_mana"):
        s[key].fill_(9)
    for key in ("player_dexterity", "player_strength", "player_intelligence"):
        s[key].fill_(1)
    for group in ("melee_mobs", "passive_mobs", "ranged_mobs", "mob_projectiles", "player_projectiles"):
        s[f"{group}.health"].fill_(1.0)
    s["mob_projectile_directions"].fill_(1)
    s["player_projectile_directions"].fill_(1)
    s["boss_timesteps_to_spawn_this_round"].fill_(BOSS_FIGHT_SPAWN_TURNS)
    s["light_level"].fill_(light0)


def generate(k: int, generator: torch.Generator, device: torch.device, light0: float) -> State:
    """``k`` fresh initial states."""
    return world_from_draws(sample_world_draws(k, generator, device), light0)

