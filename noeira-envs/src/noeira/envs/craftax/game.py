"""Craftax-Classic's step rules for ``N`` worlds at once: the reference's ``craftax_step``
(crafting, the DO action, placing, movement, mobs, spawning, plants, intrinsics, the
inventory cap, health, reward), batched over ``[N, ...]`` tensors with masks, gathers and
scatters: no host sync, no Python branch on a tensor's value, fixed shapes throughout.

The random parts of the rules take their variates from ``draws`` (:func:`sample_draws`), so
the same step can be driven by our generator or, in the parity tests, by the variates the JAX
reference drew. Variates by name, ``[N, k]``:

- ``u`` float32 ``[N, 17]``: 0 sapling (< 0.1); 1..3 the chasing axis of each zombie when
  both axes are as far (< 0.5: rows); 4..6 each zombie's chase (< 0.75); 7..8, 9..10 the
  skeletons' axis and move (> 0.85: the considered move, else a random one); 11..13 the
  spawn chances of a cow, a zombie, a skeleton; 14..16 which free cell each spawns on (the
  ``floor(u * count)``-th in row-major order, uniform over the cells as the reference's
  ``jax.random.choice`` with ``p`` is).
- ``dirs`` int64 ``[N, 8]``: 0..2 each zombie's random direction (0..3: left, right, up,
  down), 3..5 each cow's (0..7, 4..7 standing still), 6..7 each skeleton's (0..3).
- ``cand`` float32 ``[N, 3, SPAWN_TRIES]`` (optional): for each kind, candidate cells drawn
  uniformly from its spawn window (``floor(u * cells)``; ``u >= 1`` is no candidate). A kind
  that spawns takes the first candidate that is free for it, and only when none is does it
  take the ``floor(u * count)``-th free cell of a scan: the same uniform choice over the free
  cells (the reference's ``jax.random.choice``), for a few loads instead of a scan of the
  window in most steps. Without ``cand`` every spawn takes the scan (the parity tests, which
  replay the reference's choice that way).

Quirks of the reference kept as they are (found by the parity tests):

- Map reads at a position outside the map wrap negative indices once and clamp (JAX's
  gather); writes wrap negative indices once and drop what is still outside (its scatter).
  So a player at the top edge can walk onto row ``-1`` when row 63 below is lava (and dies),
  and an arrow leaving the top edge removes a table on row 63.
- Mob slots that are not alive still move (cows and zombies wander, arrows fly on in their
  direction, from the start: unused arrow slots drift by (1, 1) each step), keep their
  health and keep counting their attack cooldown down; only alive ones enter ``mob_map``.
  The DO action sets every slot's mask to ``health > 0``, so slots of despawned (or never
  spawned: zombies start with health 1, cows with 3) mobs come back where they wandered.
- The reward is ``achievements gained + 0.1 * health change`` as one float32 fused
  multiply-add (XLA contracts it), and the zombie spawn chance likewise.
"""

from __future__ import annotations

import torch
from torch import Tensor

from noeira.envs.craftax.constants import (
    COAL,
    COW_HEALTH,
    CRAFTING_TABLE,
    DIAMOND,
    DIRECTIONS,
    DO,
    FURNACE,
    GRASS,
    INV,
    IRON,
    LAVA,
    MAKE_IRON_PICKAXE,
    MAKE_IRON_SWORD,
    MAKE_STONE_PICKAXE,
    MAKE_STONE_SWORD,
    MAKE_WOOD_PICKAXE,
    MAKE_WOOD_SWORD,
    MAP_SIZE,
    MOB_DESPAWN_DISTANCE,
    NUM_BLOCKS,
    PATH,
    PLACE_FURNACE,
    PLACE_PLANT,
    PLACE_STONE,
    PLACE_TABLE,
    PLANT,
    RIPE_PLANT,
    SKELETON_HEALTH,
    SLEEP,
    SOLID_BLOCKS,
    SPAWN_COW_CHANCE,
    SPAWN_SKELETON_CHANCE,
    STONE,
    TREE,
    WATER,
    ZOMBIE_HEALTH,
    A,
)

__all__ = ["SPAWN_TRIES", "Tables", "sample_draws", "step"]

W = MAP_SIZE
SPAWN_RADIUS = MOB_DESPAWN_DISTANCE - 1  # spawn cells lie at distance < 14 from the player
SPAWN_TRIES = 8
"""Candidate cells a spawning kind tries before it scans its window (``cand``)."""


class Tables:
    """Constant lookup tensors on one device, built once per env."""

    def __init__(self, device: torch.device, light: Tensor, zombie_chance: Tensor) -> None:
        solid = torch.zeros(NUM_BLOCKS + 1, dtype=torch.bool)
        solid[list(SOLID_BLOCKS)] = True
        self.solid = solid.to(device)
        dirs = torch.zeros(17, 2, dtype=torch.int16)  # DIRECTIONS[action], zero past DOWN
        dirs[: len(DIRECTIONS)] = torch.tensor(DIRECTIONS, dtype=torch.int16)
        self.dirs = dirs.to(device)
        # a random move: 0..3 left/right/up/down, 4..7 (cows only) standing still
        self.moves = torch.cat([dirs[1:5], torch.zeros(4, 2, dtype=torch.int16)]).to(device)
        self.light = light.to(device)
        self.zombie_chance = zombie_chance.to(device)
        self.max_t = light.shape[0] - 1
        # spawn window: the cells at distance 4..13 from the player, row-major
        r = torch.arange(-SPAWN_RADIUS, SPAWN_RADIUS + 1)
        dx, dy = torch.meshgrid(r, r, indexing="ij")
        dist = dx.abs() + dy.abs()
        keep = (dist > 3) & (dist <= SPAWN_RADIUS)
        self.spawn_dx = dx[keep].to(torch.int16).to(device)
        self.spawn_dy = dy[keep].to(torch.int16).to(device)
        self.spawn_far = (dist[keep] > 9).to(device)  # zombies and skeletons spawn further out
        far = dist[keep] > 9
        # the candidate cells of each window, row-major: (dx, dy) of the whole window (cows) and of its far part
        self.window_dx = self.spawn_dx.int()
        self.window_dy = self.spawn_dy.int()
        self.far_dx = dx[keep][far].to(torch.int32).to(device)
        self.far_dy = dy[keep][far].to(torch.int32).to(device)
        self.f32_tenth = torch.tensor(0.1, dtype=torch.float32).double().to(device)
        # the 8 cells around the player (crafting needs a table / furnace among them)
        close = torch.tensor([[0, -1], [0, 1], [-1, 0], [1, 0], [-1, -1], [-1, 1], [1, -1], [1, 1]], dtype=torch.int16)
        self.close = close.to(device)


def sample_draws(n: int, generator: torch.Generator, device: torch.device) -> dict[str, Tensor]:
    """The variates of one step for ``n`` worlds (see the module docstring)."""
    return {
        "u": torch.rand((n, 17), generator=generator, device=device),
        "dirs": torch.randint(0, 8, (n, 8), generator=generator, device=device),
        "cand": torch.rand((n, 3, SPAWN_TRIES), generator=generator, device=device),
    }


# -- grid access with JAX's out-of-range semantics ---------------------------------------------
def _index(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Flat index to read at (x, y) (negative wrapped once, then clamped) and whether a write
    there lands (inside the map after the wrap)."""
    x = torch.where(x < 0, x + W, x)
    y = torch.where(y < 0, y + W, y)
    ok = (x >= 0) & (x < W) & (y >= 0) & (y < W)
    return x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long(), ok


def _get(grid: Tensor, idx: Tensor) -> Tensor:
    return grid.gather(1, idx.unsqueeze(1)).squeeze(1)


def _put(grid: Tensor, idx: Tensor, ok: Tensor, value: Tensor) -> None:
    """``grid[idx] = value`` where ``ok``; elsewhere the cell keeps its value."""
    old = _get(grid, idx)
    grid.scatter_(1, idx.unsqueeze(1), torch.where(ok, value.to(grid.dtype), old).unsqueeze(1))


def _in_bounds(x: Tensor, y: Tensor) -> Tensor:
    return (x >= 0) & (x < W) & (y >= 0) & (y < W)


def _free(t: Tables, mp: Tensor, mm: Tensor, x: Tensor, y: Tensor, px: Tensor, py: Tensor) -> Tensor:
    """The reference's ``is_position_in_bounds_not_in_wall_not_in_mob_not_in_lava``."""
    idx, _ = _index(x, y)
    block = _get(mp, idx).long()
    in_mob = _get(mm, idx) | ((x == px) & (y == py))
    return _in_bounds(x, y) & ~t.solid[block] & ~in_mob & (block != LAVA)


def _first(mask: Tensor) -> Tensor:
    """Index of the first True along dim 1, 0 when none (``jnp.argmax`` of a bool array)."""
    return mask.to(torch.uint8).argmax(1)


def _set_at(x: Tensor, i: Tensor, value: Tensor, where: Tensor) -> None:
    """``x[n, i[n]] = value[n]`` where ``where[n]`` (x ``[N, k]`` or ``[N, k, 2]``)."""
    if x.dim() == 3:
        idx = i.view(-1, 1, 1).expand(-1, 1, 2)
        old = x.gather(1, idx)
        x.scatter_(1, idx, torch.where(where.view(-1, 1, 1), value.view(-1, 1, 2).to(x.dtype), old))
    else:
        idx = i.view(-1, 1)
        old = x.gather(1, idx)
        x.scatter_(1, idx, torch.where(where.view(-1, 1), value.view(-1, 1).to(x.dtype), old))


# -- the step ------------------------------------------------------------------------------------
def step(s: dict[str, Tensor], action: Tensor, d: dict[str, Tensor], t: Tables) -> tuple[Tensor, Tensor]:
    """Advance every world one step under ``action`` [N] (in place); returns (reward float32 [N],
    terminated [N]: dead or standing on lava). The time limit is the caller's."""
    n = action.shape[0]
    mp = s["map"].view(n, -1)
    mm = s["mob_map"].view(n, -1)
    ach = s["achievements"]
    inv = s["inventory"]
    init_ach = ach.sum(1)
    init_health = s["player_health"].clone()
    u, dirs = d["u"], d["dirs"]

    # a sleeping player does nothing
    a = torch.where(s["is_sleeping"], 0, action.long())
    pp = s["player_position"]
    px, py = pp[:, 0], pp[:, 1]

    _craft(s, a, t, mp, px, py)
    _do(s, a, t, mp, mm, px, py, u[:, 0])
    _place(s, a, t, mp, mm, px, py)

    # movement: onto a free cell, or onto lava (where the player dies)
    step_xy = t.dirs[a]
    qx, qy = px + step_xy[:, 0], py + step_xy[:, 1]
    qidx, _ = _index(qx, qy)
    moves = _free(t, mp, mm, qx, qy, px, py) | (_get(mp, qidx) == LAVA)
    pp.add_(step_xy * moves.unsqueeze(1))
    turning = (a >= 1) & (a <= 4)
    s["player_direction"].copy_(torch.where(turning, a, s["player_direction"]))
    px, py = pp[:, 0], pp[:, 1]

    _zombies(s, t, mp, mm, px, py, u, dirs)
    _cows(s, t, mp, mm, px, py, dirs)
    _skeletons(s, t, mp, mm, px, py, u, dirs)
    _arrows(s, t, mp, mm, px, py)
    _spawn(s, t, mp, mm, px, py, u, d.get("cand"))
    _plants(s, mp)
    _intrinsics(s, a)

    inv.clamp_(max=9)
    health = s["player_health"]
    on_lava = _get(mp, _index(px, py)[0]) == LAVA
    health.copy_(torch.where(on_lava, 0, health).clamp_(min=0))

    # reward: one fused multiply-add in float32, as XLA computes it
    gained = (ach.sum(1) - init_ach).double()
    reward = ((health - init_health).double() * t.f32_tenth + gained).float()
    ts = s["timestep"]
    ts.add_(1)
    s["light_level"].copy_(t.light[ts.long().clamp(max=t.max_t)])
    terminated = (health <= 0) | on_lava
    return reward, terminated


def _near(t: Tables, mp: Tensor, px: Tensor, py: Tensor, block: int) -> Tensor:
    x = px.unsqueeze(1) + t.close[:, 0]
    y = py.unsqueeze(1) + t.close[:, 1]
    inside = _in_bounds(x, y)
    idx = x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long()
    return (inside & (mp.gather(1, idx) == block)).any(1)


def _craft(s: dict[str, Tensor], a: Tensor, t: Tables, mp: Tensor, px: Tensor, py: Tensor) -> None:
    inv, ach = s["inventory"], s["achievements"]
    table = _near(t, mp, px, py, CRAFTING_TABLE)
    furnace = _near(t, mp, px, py, FURNACE)
    wood, stone, coal, iron = (inv[:, INV[k]] >= 1 for k in ("wood", "stone", "coal", "iron"))
    # (action, can craft, cost per material, tool made, achievement); the actions exclude each other
    recipes = (
        (MAKE_WOOD_PICKAXE, table & wood, ("wood",), "wood_pickaxe"),
        (MAKE_STONE_PICKAXE, table & wood & stone, ("wood", "stone"), "stone_pickaxe"),
        (MAKE_IRON_PICKAXE, table & furnace & wood & stone & iron & coal, ("wood", "stone", "iron", "coal"), "iron_pickaxe"),
        (MAKE_WOOD_SWORD, table & wood, ("wood",), "wood_sword"),
        (MAKE_STONE_SWORD, table & wood & stone, ("wood", "stone"), "stone_sword"),
        (MAKE_IRON_SWORD, table & furnace & wood & stone & iron & coal, ("wood", "stone", "iron", "coal"), "iron_sword"),
    )
    for act, can, cost, tool in recipes:
        made = (a == act) & can
        m = made.to(inv.dtype)
        for k in cost:
            inv[:, INV[k]] -= m
        inv[:, INV[tool]] += m
        ach[:, A[f"make_{tool}"]] |= made


def _do(s: dict[str, Tensor], a: Tensor, t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor, u_sapling: Tensor) -> None:
    """The DO action: attack the mob in front, else mine / collect / drink / eat the block."""
    do = a == DO
    inv, ach = s["inventory"], s["achievements"]
    d = t.dirs[s["player_direction"].long()]
    bx, by = px + d[:, 0], py + d[:, 1]
    damage = torch.stack([torch.ones_like(inv[:, 0]), 2 * inv[:, INV["wood_sword"]], 3 * inv[:, INV["stone_sword"]],
                          5 * inv[:, INV["iron_sword"]]], 1).amax(1)
    attacked = torch.zeros_like(do)
    killed_any = torch.zeros_like(do)
    for name, achievement in (("zombies", "defeat_zombie"), ("cows", "eat_cow"), ("skeletons", "defeat_skeleton")):
        pos, health, mask = s[f"{name}.position"], s[f"{name}.health"], s[f"{name}.mask"]
        hit = (pos[:, :, 0] == bx.unsqueeze(1)) & (pos[:, :, 1] == by.unsqueeze(1)) & mask
        hit_any = hit.any(1) & do
        target = _first(hit)
        was_alive = mask.gather(1, target.unsqueeze(1)).squeeze(1)
        health.sub_(torch.nn.functional.one_hot(target, hit.shape[1]).to(health.dtype) * (damage * hit_any).unsqueeze(1))
        mask.copy_(torch.where(do.unsqueeze(1), health > 0, mask))  # every slot: the quirk
        killed = do & was_alive & ~mask.gather(1, target.unsqueeze(1)).squeeze(1)
        ach[:, A[achievement]] |= killed
        attacked |= hit_any
        killed_any |= killed
        if name == "cows":
            food = s["player_food"]
            food.copy_(torch.where(killed, (food + 6).clamp(max=9), food))
            s["player_hunger"].masked_fill_(killed, 0.0)
    bidx, bok = _index(bx, by)
    _put(mm, bidx, bok & killed_any, torch.zeros_like(killed_any))

    block = _get(mp, bidx)
    ok = do & _in_bounds(bx, by) & ~attacked
    tree = ok & (block == TREE)
    stone = ok & (block == STONE) & (inv[:, INV["wood_pickaxe"]] > 0)
    coal = ok & (block == COAL) & (inv[:, INV["wood_pickaxe"]] > 0)
    iron = ok & (block == IRON) & (inv[:, INV["stone_pickaxe"]] > 0)
    diamond = ok & (block == DIAMOND) & (inv[:, INV["iron_pickaxe"]] > 0)
    sapling = ok & (block == GRASS) & (u_sapling < 0.1)
    water = ok & (block == WATER)
    ripe = ok & (block == RIPE_PLANT)
    new_block = torch.where(tree, GRASS, torch.where(stone | coal | iron | diamond, PATH, torch.where(ripe, PLANT, block)))
    _put(mp, bidx, bok, new_block)
    for k, got in (("wood", tree), ("stone", stone), ("coal", coal), ("iron", iron), ("diamond", diamond), ("sapling", sapling)):
        inv[:, INV[k]] += got.to(inv.dtype)
    for k, got in (("collect_wood", tree), ("collect_stone", stone), ("collect_coal", coal), ("collect_iron", iron),
                   ("collect_diamond", diamond), ("collect_sapling", sapling), ("collect_drink", water),
                   ("eat_plant", ripe)):
        ach[:, A[k]] |= got
    drink = s["player_drink"]
    drink.copy_(torch.where(water, (drink + 1).clamp(max=9), drink))
    s["player_thirst"].masked_fill_(water, 0.0)
    food = s["player_food"]
    food.copy_(torch.where(ripe, (food + 4).clamp(max=9), food))
    s["player_hunger"].masked_fill_(ripe, 0.0)
    # the eaten plant starts growing again: the first plant slot at that cell (slot 0 if none)
    ppos = s["growing_plants_positions"]
    at = (ppos[:, :, 0] == bx.unsqueeze(1)) & (ppos[:, :, 1] == by.unsqueeze(1))
    _set_at(s["growing_plants_age"], _first(at), torch.zeros_like(bx), ripe)


def _place(s: dict[str, Tensor], a: Tensor, t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor) -> None:
    inv, ach = s["inventory"], s["achievements"]
    d = t.dirs[s["player_direction"].long()]
    bx, by = px + d[:, 0], py + d[:, 1]
    bidx, bok = _index(bx, by)
    block = _get(mp, bidx)
    wall = t.solid[block.long()]
    ok = _in_bounds(bx, by) & ~(_get(mm, bidx) | ((bx == px) & (by == py)))
    table = ok & (a == PLACE_TABLE) & ~wall & (inv[:, INV["wood"]] >= 2)
    furnace = ok & (a == PLACE_FURNACE) & ~wall & (inv[:, INV["stone"]] > 0)
    stone = ok & (a == PLACE_STONE) & ((block == WATER) | ~wall) & (inv[:, INV["stone"]] > 0)
    plant = ok & (a == PLACE_PLANT) & (block == GRASS) & (inv[:, INV["sapling"]] > 0)
    new_block = torch.where(table, CRAFTING_TABLE, torch.where(furnace, FURNACE, torch.where(stone, STONE, torch.where(
        plant, PLANT, block))))
    _put(mp, bidx, bok, new_block)
    inv[:, INV["wood"]] -= 2 * table.to(inv.dtype)
    inv[:, INV["stone"]] -= (furnace | stone).to(inv.dtype)
    inv[:, INV["sapling"]] -= plant.to(inv.dtype)
    ach[:, A["place_table"]] |= table
    ach[:, A["place_furnace"]] |= furnace
    ach[:, A["place_stone"]] |= stone
    ach[:, A["place_plant"]] |= plant
    # a new growing plant in the first free slot (none when all ten are taken)
    pmask = s["growing_plants_mask"]
    free = ~pmask
    adding = plant & free.any(1)
    slot = _first(free)
    _set_at(s["growing_plants_positions"], slot, torch.stack([bx, by], 1), adding)
    _set_at(s["growing_plants_age"], slot, torch.zeros_like(bx), adding)
    _set_at(pmask, slot, torch.ones_like(adding), adding)


def _towards(x: Tensor, y: Tensor, px: Tensor, py: Tensor, u_axis: Tensor) -> tuple[Tensor, Tensor]:
    """One step from (x, y) towards the player along the axis that is further (either one, at
    random, when both are as far): the reference's ``player_move_direction``."""
    ddx, ddy = px - x, py - y
    ax, ay = ddx.abs(), ddy.abs()
    rows = (ax > ay) | ((ax == ay) & (u_axis < 0.5))
    return torch.where(rows, ddx.sign(), 0), torch.where(rows, 0, ddy.sign())


def _leave_enter(mm: Tensor, old_idx: Tensor, old_ok: Tensor, was: Tensor, new_idx: Tensor, new_ok: Tensor, now: Tensor) -> None:
    """A mob's ``mob_map`` bookkeeping: clear its old cell if it was alive, mark its new cell if
    it still is."""
    _put(mm, old_idx, old_ok & was, torch.zeros_like(was))
    _put(mm, new_idx, new_ok & now, torch.ones_like(now))


def _zombies(s: dict[str, Tensor], t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor, u: Tensor, dirs: Tensor) -> None:
    pos, mask, cd = s["zombies.position"], s["zombies.mask"], s["zombies.attack_cooldown"]
    health, sleeping, ach = s["player_health"], s["is_sleeping"], s["achievements"]
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        alive = mask[:, i].clone()
        rnd = t.moves[dirs[:, i] % 4]
        cx, cy = _towards(x, y, px, py, u[:, 1 + i])
        dist = (x - px).abs() + (y - py).abs()
        chase = (dist < 10) & (u[:, 4 + i] < 0.75)
        qx = torch.where(chase, x + cx, x + rnd[:, 0])
        qy = torch.where(chase, y + cy, y + rnd[:, 1])
        attack = (dist == 1) & (cd[:, i] <= 0) & alive
        qx, qy = torch.where(attack, x, qx), torch.where(attack, y, qy)
        health.sub_(torch.where(sleeping, 7, 2).to(health.dtype) * attack)
        ach[:, A["wake_up"]] |= sleeping & attack
        sleeping &= ~attack
        cd[:, i] = torch.where(attack, 5, cd[:, i] - 1)
        ok = _free(t, mp, mm, qx, qy, px, py)
        nx, ny = torch.where(ok, qx, x), torch.where(ok, qy, y)
        now = alive & (dist < MOB_DESPAWN_DISTANCE)
        oidx, ook = _index(x, y)
        nidx, nok = _index(nx, ny)
        _leave_enter(mm, oidx, ook, alive, nidx, nok, now)
        pos[:, i, 0], pos[:, i, 1] = nx, ny
        mask[:, i] = now


def _cows(s: dict[str, Tensor], t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor, dirs: Tensor) -> None:
    pos, mask = s["cows.position"], s["cows.mask"]
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        alive = mask[:, i].clone()
        rnd = t.moves[dirs[:, 3 + i]]
        qx, qy = x + rnd[:, 0], y + rnd[:, 1]
        ok = _free(t, mp, mm, qx, qy, px, py)
        nx, ny = torch.where(ok, qx, x), torch.where(ok, qy, y)
        now = alive & ((x - px).abs() + (y - py).abs() < MOB_DESPAWN_DISTANCE)
        oidx, ook = _index(x, y)
        nidx, nok = _index(nx, ny)
        _leave_enter(mm, oidx, ook, alive, nidx, nok, now)
        pos[:, i, 0], pos[:, i, 1] = nx, ny
        mask[:, i] = now


def _skeletons(s: dict[str, Tensor], t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor, u: Tensor, dirs: Tensor) -> None:
    pos, mask, cd = s["skeletons.position"], s["skeletons.mask"], s["skeletons.attack_cooldown"]
    apos, amask, adir = s["arrows.position"], s["arrows.mask"], s["arrow_directions"]
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        alive = mask[:, i].clone()
        rnd = t.moves[dirs[:, 6 + i] % 4]
        rx, ry = x + rnd[:, 0], y + rnd[:, 1]
        cx, cy = _towards(x, y, px, py, u[:, 7 + i])
        dist = (x - px).abs() + (y - py).abs()
        far, close = dist >= 10, dist <= 3
        qx = torch.where(close, x - cx, torch.where(far, x + cx, rx))
        qy = torch.where(close, y - cy, torch.where(far, y + cy, ry))
        considered = u[:, 9 + i] > 0.85
        qx, qy = torch.where(considered, qx, rx), torch.where(considered, qy, ry)
        # shoot at distance 4..5, or when too close and the way back is blocked
        attack = ((dist >= 4) & (dist <= 5)) | (close & ~_free(t, mp, mm, qx, qy, px, py))
        attack &= (cd[:, i] <= 0) & alive
        shoot = attack & (amask.sum(1) < amask.shape[1])
        slot = _first(~amask)
        _set_at(apos, slot, torch.stack([x, y], 1), shoot)
        _set_at(amask, slot, torch.ones_like(shoot), shoot)
        _set_at(adir, slot, torch.stack([cx, cy], 1), shoot)
        qx, qy = torch.where(attack, x, qx), torch.where(attack, y, qy)
        cd[:, i] = torch.where(attack, 4, cd[:, i] - 1)
        ok = _free(t, mp, mm, qx, qy, px, py)
        nx, ny = torch.where(ok, qx, x), torch.where(ok, qy, y)
        now = alive & (dist < MOB_DESPAWN_DISTANCE)
        oidx, ook = _index(x, y)
        nidx, nok = _index(nx, ny)
        _leave_enter(mm, oidx, ook, alive, nidx, nok, now)
        pos[:, i, 0], pos[:, i, 1] = nx, ny
        mask[:, i] = now


def _arrows(s: dict[str, Tensor], t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor) -> None:
    pos, mask, adir = s["arrows.position"], s["arrows.mask"], s["arrow_directions"]
    health, sleeping = s["player_health"], s["is_sleeping"]
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0] + adir[:, i, 0], pos[:, i, 1] + adir[:, i, 1]
        alive = mask[:, i]
        idx, ok = _index(x, y)
        block = _get(mp, idx)
        on_player = (x == px) & (y == py)
        blocked = (t.solid[block.long()] & (block != WATER)) | _get(mm, idx) | on_player  # arrows fly over water
        hit = on_player & alive
        breaks = alive & ((block == FURNACE) | (block == CRAFTING_TABLE))
        _put(mp, idx, ok & breaks, torch.full_like(block, PATH))
        health.sub_(2 * hit.to(health.dtype))
        sleeping &= ~hit
        mask[:, i] = _in_bounds(x, y) & ~blocked & alive
        pos[:, i, 0], pos[:, i, 1] = x, y


def _spawn(s: dict[str, Tensor], t: Tables, mp: Tensor, mm: Tensor, px: Tensor, py: Tensor, u: Tensor,
           cand: Tensor | None) -> None:
    """Spawn at most one cow, one zombie, one skeleton, each on a random free cell of its kind
    at distance 4..13 (cows) or 10..13 (zombies, skeletons) from the player: the first free
    candidate cell, else the ``floor(u * count)``-th free cell of the window (module docstring)."""
    x = px.unsqueeze(1) + t.spawn_dx
    y = py.unsqueeze(1) + t.spawn_dy
    inside = _in_bounds(x, y)
    idx = x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long()
    chance_zombie = t.zombie_chance[s["timestep"].long().clamp(max=t.max_t)]
    kinds = (
        ("cows", COW_HEALTH, lambda b: b == GRASS, None, SPAWN_COW_CHANCE),
        ("zombies", ZOMBIE_HEALTH, lambda b: (b == GRASS) | (b == PATH), t.spawn_far, chance_zombie),
        ("skeletons", SKELETON_HEALTH, lambda b: b == PATH, t.spawn_far, SPAWN_SKELETON_CHANCE),
    )
    for k, (name, full_health, on, far, chance) in enumerate(kinds):
        pos, health, mask = s[f"{name}.position"], s[f"{name}.health"], s[f"{name}.mask"]
        # the map as it is now: an earlier kind's spawn this step is in mob_map already
        block = mp.gather(1, idx)
        cells = inside & on(block) & ~mm.gather(1, idx)
        if far is not None:
            cells &= far
        count = cells.sum(1)
        go = (mask.sum(1) < mask.shape[1]) & (u[:, 11 + k] < chance) & (count > 0)
        pick = (u[:, 14 + k] * count).long().clamp(max=(count - 1).clamp(min=0))
        j = (cells.long().cumsum(1) <= pick.unsqueeze(1)).sum(1).clamp(max=cells.shape[1] - 1)
        cx, cy = x.gather(1, j.unsqueeze(1)).squeeze(1), y.gather(1, j.unsqueeze(1)).squeeze(1)
        if cand is not None:
            wdx, wdy = (t.window_dx, t.window_dy) if far is None else (t.far_dx, t.far_dy)
            size = wdx.shape[0]
            jj = (cand[:, k] * size).long()  # [N, tries]; u >= 1: no candidate
            real = jj < size
            jj = jj.clamp(max=size - 1)
            qx, qy = px.unsqueeze(1) + wdx[jj], py.unsqueeze(1) + wdy[jj]
            qidx = qx.clamp(0, W - 1).long() * W + qy.clamp(0, W - 1).long()
            free = real & _in_bounds(qx, qy) & on(mp.gather(1, qidx)) & ~mm.gather(1, qidx)
            first = _first(free)
            found = free.any(1)
            cx = torch.where(found, qx.gather(1, first.unsqueeze(1)).squeeze(1), cx)
            cy = torch.where(found, qy.gather(1, first.unsqueeze(1)).squeeze(1), cy)
        slot = _first(~mask)
        _set_at(pos, slot, torch.stack([cx, cy], 1), go)
        _set_at(health, slot, torch.full_like(go, full_health, dtype=health.dtype), go)
        _set_at(mask, slot, torch.ones_like(go), go)
        # the slot's cell enters mob_map if the slot is alive (spawned now, or all slots taken)
        sp = pos.gather(1, slot.view(-1, 1, 1).expand(-1, 1, 2)).squeeze(1)
        sidx, sok = _index(sp[:, 0], sp[:, 1])
        _put(mm, sidx, sok & mask.gather(1, slot.unsqueeze(1)).squeeze(1), torch.ones_like(go))


def _plants(s: dict[str, Tensor], mp: Tensor) -> None:
    age, mask, ppos = s["growing_plants_age"], s["growing_plants_mask"], s["growing_plants_positions"]
    age.add_(1).mul_(mask)
    ripe = age >= 600
    idx, ok = _index(ppos[:, :, 0], ppos[:, :, 1])
    # RIPE_PLANT is the largest block id: a max-scatter writes it where ripe and leaves the rest
    mp.scatter_reduce_(1, idx, (ripe & ok).to(mp.dtype) * RIPE_PLANT, reduce="amax")


def _intrinsics(s: dict[str, Tensor], a: Tensor) -> None:
    sleeping, ach = s["is_sleeping"], s["achievements"]
    energy, food, drink, health = s["player_energy"], s["player_food"], s["player_drink"], s["player_health"]
    sleeping |= (a == SLEEP) & (energy < 9)
    wake = (energy >= 9) & sleeping
    sleeping &= ~wake
    ach[:, A["wake_up"]] |= wake
    rate = torch.where(sleeping, 0.5, 1.0)
    for need, level, limit in (("player_hunger", food, 25), ("player_thirst", drink, 20)):
        x = s[need]
        x.add_(rate)
        over = x > limit
        level.copy_(torch.where(over, (level - 1).clamp(min=0), level))
        x.masked_fill_(over, 0.0)
    fatigue = s["player_fatigue"]
    fatigue.copy_(torch.where(sleeping, (fatigue - 1).clamp(max=0), fatigue + 1))
    tired, rested = fatigue > 30, fatigue < -10
    energy.copy_(torch.where(tired, (energy - 1).clamp(min=0), torch.where(rested, (energy + 1).clamp(max=9), energy)))
    fatigue.masked_fill_(tired | rested, 0.0)
    fine = (food > 0) & (drink > 0) & ((energy > 0) | sleeping)
    recover = s["player_recover"]
    recover.add_(torch.where(fine, torch.where(sleeping, 2.0, 1.0), torch.where(sleeping, -0.5, -1.0)))
    up, down = recover > 25, recover < -15
    health.copy_(torch.where(up, (health + 1).clamp(max=9), torch.where(down, health - 1, health)))
    recover.masked_fill_(up | down, 0.0)
