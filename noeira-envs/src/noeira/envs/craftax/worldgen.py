"""Craftax-Classic's world generation (the reference's ``world_gen.generate_world``) for ``k``
worlds at once.

Four Perlin noise fields (``util.noise.generate_fractal_noise_2d``, one octave, normalised
to [0, 1] per world) shape the world around the player's spawn at (32, 32): water and sand
(resolution 4x4), mountains of stone (4x4) with paths (8x32, and its transpose) and caves,
then coal, iron and diamonds in the stone (uniform draws per cell: 4%, 3%, 0.5% where the
mountain is high), trees (noise 16x16, then a draw per cell) and lava (high mountain where
the tree noise is high); the spawn cell is grass and one random stone cell is a diamond.

The generation is split in two: :func:`sample_world_draws` draws the random inputs (the
gradient angles of each noise, the per-cell uniforms, the diamond's pick) and
:func:`world_from_draws` turns them into initial states, deterministically, so the parity
tests can feed it the draws the JAX reference made. Float32 throughout, in the reference's
order of operations; XLA fuses some multiply-adds of the noise, so a cell whose noise sits
within a rounding error of a threshold can come out differently (a handful of cells in a
thousand worlds).
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
)
from noeira.envs.craftax.state import empty_state

__all__ = ["NOISE_RES", "generate", "sample_world_draws", "world_from_draws"]

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


def _f32(x: float) -> float:
    return float(torch.tensor(x, dtype=torch.float32))


def _interpolant(t: Tensor) -> Tensor:
    return t * t * t * (t * (t * 6 - 15) + 10)


def perlin(angles: Tensor, res: tuple[int, int]) -> Tensor:
    """Perlin noise [k, 64, 64] from gradient angles [k, r0+1, r1+1] in turns, normalised to [0, 1]
    per world (``generate_fractal_noise_2d`` with one octave)."""
    dev = angles.device
    d0, d1 = W // res[0], W // res[1]
    # position inside its gradient cell, in cells (exact binary fractions)
    gx = torch.remainder(torch.arange(W, device=dev, dtype=torch.float32) * (res[0] / W), 1.0).view(1, W, 1)
    gy = torch.remainder(torch.arange(W, device=dev, dtype=torch.float32) * (res[1] / W), 1.0).view(1, 1, W)
    theta = angles * _f32(2 * math.pi)
    cos, sin = torch.cos(theta), torch.sin(theta)
    i0 = torch.arange(W, device=dev) // d0  # gradient row below each map row
    j0 = torch.arange(W, device=dev) // d1

    def corner(di: int, dj: int) -> tuple[Tensor, Tensor]:
        rows, cols = (i0 + di).view(-1, 1), (j0 + dj).view(1, -1)
        return cos[:, rows, cols], sin[:, rows, cols]

    (c00, s00), (c10, s10), (c01, s01), (c11, s11) = corner(0, 0), corner(1, 0), corner(0, 1), corner(1, 1)
    n00 = gx * c00 + gy * s00
    n10 = (gx - 1) * c10 + gy * s10
    n01 = gx * c01 + (gy - 1) * s01
    n11 = (gx - 1) * c11 + (gy - 1) * s11
    tx, ty = _interpolant(gx), _interpolant(gy)
    n0 = n00 * (1 - tx) + tx * n10
    n1 = n01 * (1 - tx) + tx * n11
    noise = _f32(math.sqrt(2)) * ((1 - ty) * n0 + ty * n1)
    lo = noise.amin(dim=(1, 2), keepdim=True)
    hi = noise.amax(dim=(1, 2), keepdim=True)
    return (noise - lo) / (hi - lo)


def world_from_draws(draws: dict[str, Tensor]) -> dict[str, Tensor]:
    """Initial states (the compact layout of :mod:`.state`) of the worlds ``draws`` describe."""
    u_pick = draws["u_pick"]
    k, dev = u_pick.shape[0], u_pick.device
    rows = torch.arange(W, device=dev)
    dist = (rows.view(-1, 1) - SPAWN[0]).abs() + (rows.view(1, -1) - SPAWN[1]).abs()
    near = (dist.float() * _f32(0.2)).clamp(0.0, 1.0)  # XLA divides by 5 as a multiplication by 0.2f

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


def generate(k: int, generator: torch.Generator, device: torch.device, light0: float) -> dict[str, Tensor]:
    """``k`` fresh initial states (``light0``: the light level at timestep 0)."""
    s = world_from_draws(sample_world_draws(k, generator, device))
    s["light_level"].fill_(light0)
    return s
