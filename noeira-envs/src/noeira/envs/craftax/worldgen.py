"""Craftax-Classic's world generation (the reference's ``world_gen.generate_world``) for ``k``
worlds at once.

Four Perlin noise fields (``util.noise.generate_fractal_noise_2d``, one octave, normalised
to [0, 1] per world) shape the world around the player's spawn at (32, 32): water and sand
(resolution 4x4), mountains of stone (4x4) with paths (8x32, and its transpose) and caves,
then coal, iron and diamonds in the stone (uniform draws per cell: 4%, 3%, 0.5% where the
mountain is high), trees (noise 16x16, then a draw per cell) and lava (high mountain where
the tree noise is high); the spawn cell is grass and one random stone cell is a diamond.

The generation is split in two: the random inputs (the gradient angles of each noise, the
per-cell uniforms, the diamond's pick) and :func:`world_from_draws`, which turns them into
initial states deterministically, so the parity tests can feed it the draws the JAX reference
made. Float32 throughout, in the reference's order of operations; XLA fuses some multiply-adds
of the noise, so a cell whose noise sits within a rounding error of a threshold can come out
differently (a handful of cells in a thousand worlds).

Every episode gets a world of its own (:func:`generate`): its inputs come from Philox4x32-10
keyed by the run's key (``key ^ SALT``), on counters ``(draw, env, episode low, episode high)``,
where ``draw`` numbers the world's variates (``c < 4096``: cell ``c``'s four uniforms, coal,
iron, diamond, tree; ``4096 + j``: the ``j``-th gradient angle, water 5x5, mountain 5x5, path
9x33, tree 17x17 row-major; ``4096 + 636``: the diamond's pick). Philox is a bijection of its
counter for a given key, so no two (env, episode) pairs share an input stream, whatever the
batch size or the order in which worlds end. :mod:`.triton_worldgen` draws the same variates in
its kernel (``triton.language.random.philox``, the same float conversion), so the torch and
Triton envs start every episode in the same world. :func:`sample_world_draws` draws from a
torch generator instead (for tests and statistics).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from noeira.envs.craftax.constants import (
    COAL,
    COW_HEALTH,
    DIAMOND,
    GRASS,
    IRON,
    LAVA,
    MAP_SIZE,
    PATH,
    SAND,
    STONE,
    TREE,
    UP,
    WATER,
    f32,
)
from noeira.envs.craftax.state import empty_state

__all__ = ["NOISE_RES", "SALT", "episode_draws", "generate", "gradients", "philox", "sample_world_draws", "world_from_draws"]

W = MAP_SIZE
NOISE_RES = {"water": (4, 4), "mountain": (4, 4), "path": (8, 32), "tree": (16, 16)}
"""Perlin resolution (gradient cells per axis) of each noise field."""
SPAWN = (W // 2, W // 2)


def sample_world_draws(k: int, generator: torch.Generator, device: torch.device) -> dict[str, Tensor]:
    """The random inputs of ``k`` worlds: ``angles_<field>`` [k, r0+1, r1+1] in [0, 1) (times
    2 pi), ``u_coal``, ``u_iron``, ``u_diamond``, ``u_tree`` [k, 64, 64], ``u_pick`` [k]."""
    out = {f"angles_{f}": torch.rand((k, r0 + 1, r1 + 1), generator=generator, device=device)
           for f, (r0, r1) in NOISE_RES.items()}
    for f in ("coal", "iron", "diamond", "tree"):
        out[f"u_{f}"] = torch.rand((k, W, W), generator=generator, device=device)
    out["u_pick"] = torch.rand((k,), generator=generator, device=device)
    return out


_TWO_PI, _SQRT2 = f32(2 * math.pi), f32(math.sqrt(2))


def _interpolant(t: Tensor) -> Tensor:
    return t * t * t * (t * (t * 6 - 15) + 10)


def gradients(angles: Tensor) -> tuple[Tensor, Tensor]:
    """The cosines and sines of gradient angles in turns (``angles`` times 2 pi, float32), as
    :func:`perlin` computes them: the full game's Triton kernels take them from here, because a
    CPU's ``torch.cos`` gives other roundings than NumPy's (Triton's interpreter) and depends on
    the tensor's shape (vectorised body, scalar tail)."""
    theta = angles * _TWO_PI
    return torch.cos(theta), torch.sin(theta)


def perlin(angles: Tensor, res: tuple[int, int], size: int = W) -> Tensor:
    """Perlin noise [..., size, size] from gradient angles [..., r0+1, r1+1] in turns, normalised
    to [0, 1] per grid (``generate_fractal_noise_2d`` with one octave), float32 in the
    reference's order of operations. ``size``: 64 for Classic's map, 48 for the full game's floors."""
    dev = angles.device
    d0, d1 = size // res[0], size // res[1]
    gx = torch.remainder(torch.arange(size, device=dev, dtype=torch.float32) * (res[0] / size), 1.0).view(size, 1)
    gy = torch.remainder(torch.arange(size, device=dev, dtype=torch.float32) * (res[1] / size), 1.0).view(1, size)
    cos, sin = gradients(angles)
    r0, r1 = res

    def corner(di: int, dj: int) -> tuple[Tensor, Tensor]:
        # the gradients of each cell's (di, dj) corner, repeated over the cell's d0 x d1 block
        # (a copy of each value, not a gather: the same numbers, several times cheaper on a CPU)
        def spread(x: Tensor) -> Tensor:
            block = x[..., di:di + r0, dj:dj + r1].unsqueeze(-1).unsqueeze(-3)  # [..., r0, 1, r1, 1]
            return block.expand(*x.shape[:-2], r0, d0, r1, d1).reshape(*x.shape[:-2], size, size)
        return spread(cos), spread(sin)

    (c00, s00), (c10, s10), (c01, s01), (c11, s11) = corner(0, 0), corner(1, 0), corner(0, 1), corner(1, 1)
    n00 = gx * c00 + gy * s00
    n10 = (gx - 1) * c10 + gy * s10
    n01 = gx * c01 + (gy - 1) * s01
    n11 = (gx - 1) * c11 + (gy - 1) * s11
    tx, ty = _interpolant(gx), _interpolant(gy)
    n0 = n00 * (1 - tx) + tx * n10
    n1 = n01 * (1 - tx) + tx * n11
    noise = _SQRT2 * ((1 - ty) * n0 + ty * n1)
    lo = noise.amin(dim=(-2, -1), keepdim=True)
    hi = noise.amax(dim=(-2, -1), keepdim=True)
    return (noise - lo) / (hi - lo)


def world_from_draws(draws: dict[str, Tensor]) -> dict[str, Tensor]:
    """Initial states (the compact layout of :mod:`.state`) of the worlds ``draws`` describe."""
    u_pick = draws["u_pick"]
    k, dev = u_pick.shape[0], u_pick.device
    rows = torch.arange(W, device=dev)
    dist = (rows.view(-1, 1) - SPAWN[0]).abs() + (rows.view(1, -1) - SPAWN[1]).abs()
    near = (dist.float() * f32(0.2)).clamp(0.0, 1.0)  # XLA divides by 5 as a multiplication by 0.2f

    water = perlin(draws["angles_water"], NOISE_RES["water"]) + near - 1.0
    mp = torch.where(water > 0.7, WATER, GRASS)
    mp = torch.where((water < 0.75) & (water > 0.6) & (mp != WATER), SAND, mp)
    mountain = perlin(draws["angles_mountain"], NOISE_RES["mountain"]) + 0.05 + near - 1.0
    high = mountain > 0.7
    mp = torch.where(high, STONE, mp)
    path = perlin(draws["angles_path"], NOISE_RES["path"])
    mp = torch.where(high & (path > 0.8), PATH, mp)
    mp = torch.where(high & (path.transpose(1, 2) > 0.8), PATH, mp)
    mp = torch.where((mountain > 0.85) & (water > 0.4), PATH, mp)  # caves
    mp = torch.where((mp == STONE) & (draws["u_coal"] < 0.04), COAL, mp)
    mp = torch.where((mp == STONE) & (draws["u_iron"] < 0.03), IRON, mp)
    mp = torch.where((mountain > 0.8) & (draws["u_diamond"] < 0.005) & (mp == STONE), DIAMOND, mp)
    tree_noise = perlin(draws["angles_tree"], NOISE_RES["tree"])
    trees = ((tree_noise > 0.5) * draws["u_tree"] > 0.8) & (mp == GRASS)
    mp = torch.where(trees, TREE, mp)
    mp = torch.where((mountain > 0.85) & (tree_noise > 0.7), LAVA, mp)
    mp[:, SPAWN[0], SPAWN[1]] = GRASS
    # one more diamond on a stone cell picked uniformly (none when there is no stone)
    flat = mp.view(k, -1)
    stone = flat == STONE
    count = stone.sum(1)
    pick = (u_pick * count).long().clamp(max=(count - 1).clamp(min=0))
    j = (stone.long().cumsum(1) <= pick.unsqueeze(1)).sum(1).clamp(max=W * W - 1)
    flat.scatter_(1, j.unsqueeze(1), torch.where(count > 0, DIAMOND, flat.gather(1, j.unsqueeze(1)).squeeze(1)).unsqueeze(1))

    s = empty_state(k, dev)
    s["map"].copy_(mp)
    s["player_position"][:, 0], s["player_position"][:, 1] = SPAWN
    s["player_direction"].fill_(UP)
    for key in ("player_health", "player_food", "player_drink", "player_energy"):
        s[key].fill_(9)
    s["zombies.health"].fill_(1)
    s["cows.health"].fill_(COW_HEALTH)
    s["arrow_directions"].fill_(1)
    return s


SALT = 0x2545F4914F6CDD1D
"""XORed into the run's key before it keys the worlds' Philox (the Triton step draws its own
variates from another key; the salt keeps the two apart even if those keys met)."""
ANGLES = sum((r0 + 1) * (r1 + 1) for r0, r1 in NOISE_RES.values())  # 636
PICK = W * W + ANGLES  # the draw of the diamond's pick
_M32 = 0xFFFFFFFF


def _mulhilo(a: int, c: Tensor) -> tuple[Tensor, Tensor]:
    """The high and low 32 bits of ``a * c`` (a 32-bit constant, ``c`` int64 holding uint32s): the
    int64 product wraps as a uint64 one would, so its 64 bits are the full product's (3 ops, not
    the 10 of a product in 16-bit halves)."""
    p = a * c
    return (p >> 32) & _M32, p & _M32


def philox(key: Tensor, c0: Tensor, c1: Tensor, c2: Tensor, c3: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Philox4x32-10 (Salmon et al. 2011) as ``triton.language.random.philox`` computes it: the
    64-bit ``key`` (int64, low word first) and the four 32-bit counter words (int64 tensors
    holding uint32 values, broadcast together); returns the four output words likewise."""
    k0, k1 = key & _M32, (key >> 32) & _M32
    for _ in range(10):
        hi0, lo0 = _mulhilo(0xD2511F53, c0)
        hi2, lo2 = _mulhilo(0xCD9E8D57, c2)
        c0, c1, c2, c3 = hi2 ^ c1 ^ k0, lo2, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
    return c0, c1, c2, c3


def uniform(x: Tensor) -> Tensor:
    """Philox output words -> float32 in [0, 1), as Triton's ``uint_to_uniform_float``: the word
    as an int32 (the cast keeps the low 32 bits), negatives folded onto ``~x`` (``x ^ (x >> 31)``),
    times 4.6566127342e-10 in float32 (a Python float: no tensor literal inside a recorded step)."""
    x = x.to(torch.int32)
    return (x ^ (x >> 31)).to(torch.float32) * 4.6566127342e-10


def episode_draws(key: Tensor, envs: Tensor, episodes: Tensor) -> dict[str, Tensor]:
    """The random inputs (``sample_world_draws``' layout) of the worlds of episode ``episodes[i]``
    of env ``envs[i]`` (int64 [k]) under the run's ``key`` (int64 [1])."""
    dev = envs.device
    key = (key.reshape(1, 1) ^ SALT).to(dev)
    c1 = envs.to(torch.int64).view(-1, 1)
    ep = episodes.to(torch.int64).view(-1, 1)
    c2, c3 = ep & _M32, (ep >> 32) & _M32
    cells = torch.arange(W * W, device=dev, dtype=torch.int64).view(1, -1)
    u = [uniform(v) for v in philox(key, cells, c1, c2, c3)]
    out = {f"u_{f}": v.view(-1, W, W) for f, v in zip(("coal", "iron", "diamond", "tree"), u, strict=True)}
    rest = torch.arange(W * W, PICK + 1, device=dev, dtype=torch.int64).view(1, -1)  # the angles, then the pick
    first = uniform(philox(key, rest, c1, c2, c3)[0])
    start = 0
    for f, (r0, r1) in NOISE_RES.items():
        size = (r0 + 1) * (r1 + 1)
        out[f"angles_{f}"] = first[:, start:start + size].reshape(-1, r0 + 1, r1 + 1)
        start += size
    out["u_pick"] = first[:, ANGLES]
    return out


def generate(key: Tensor, envs: Tensor, episodes: Tensor, light0: float, chunk: int = 64) -> dict[str, Tensor]:
    """The initial states of episode ``episodes[i]`` of env ``envs[i]`` (:func:`episode_draws`),
    ``chunk`` worlds at a time (``light0``: the light level at timestep 0)."""
    parts = [world_from_draws(episode_draws(key, envs[i:i + chunk], episodes[i:i + chunk]))
             for i in range(0, envs.shape[0], chunk)]
    s = {k: torch.cat([p[k] for p in parts]) for k in parts[0]} if len(parts) != 1 else parts[0]
    s["light_level"].fill_(light0)
    return s
