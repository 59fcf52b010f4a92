"""Craftax's step rules for ``N`` worlds at once: the reference's ``craftax_step`` (floor changes,
crafting, the DO action with chests and the necromancer, placing, shooting, spells, potions,
books, enchanting, attributes, movement, the five mob classes, spawning, plants, intrinsics,
the inventory cap, achievements and the reward), batched over ``[N, ...]`` tensors with masks,
gathers and scatters: no host sync, no Python branch on a tensor's value, fixed shapes.

The mobs of the player's floor are read into ``[N, slots]`` views after the floor change (every
rule acts on the player's floor only) and written back at the end of the step.

The random parts take their variates from ``draws`` (:func:`sample_draws`), so the same step runs
on our generator or, in the parity tests, on the variates the JAX reference drew:

- ``u`` float32 ``[N, 33]`` (indices ``U_*`` below): the sapling, the chest's loot (torches,
  ore, potion, arrows, tool: whether, which, how many), the spell a book teaches, the armour
  piece an enchantment lands on, each melee / ranged mob's axis when both axes are as far and
  whether it chases / makes its considered move, the spawn chances and the spawn cells. A
  choice among valid items (a spawn cell, a spell, an armour piece) takes the
  ``floor(u * count)``-th valid one (the reference's ``choice`` with ``p``, uniform over them;
  index 0 when none is valid, as the reference's gives then); a choice with fixed
  probabilities (the ore, a tool's level) inverts their cumulative sums.
- ``dirs`` int64 ``[N, 8]``: each melee mob's random direction (0..3), each passive mob's
  (0..7; 4..7 stand still), each ranged mob's (0..3).

Quirks of the reference kept (found by the parity tests, see NOTES.md): reads outside the map
wrap a negative index once and clamp, writes wrap once and drop what is still outside; mob
slots that are not alive still move and count their cooldowns down; XLA's fused multiply-adds
(the reward, the night spawn chance, attribute multipliers) are emulated in float64 with one
rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from noeira.envs.craftax_full import constants as C
from noeira.envs.craftax_full.constants import ACT, MAP_SIZE, NUM_LEVELS, A

__all__ = ["NUM_U", "Tables", "acting", "finish", "front", "sample_draws", "step", "tail"]

W = MAP_SIZE
CELLS = W * W
CREATURES = (("melee_mobs", 3), ("passive_mobs", 3), ("ranged_mobs", 2))
"""The mob groups that fight, in the order of the reference's attacks (classes melee, passive, ranged)."""

# -- the variates ----------------------------------------------------------------------------------
U_SAPLING, U_CHEST_TORCH, U_CHEST_TORCH_N, U_CHEST_ORE, U_CHEST_ORE_ID, U_CHEST_ORE_N = range(6)
U_CHEST_POTION, U_CHEST_POTION_ID, U_CHEST_POTION_N, U_CHEST_ARROWS, U_CHEST_ARROWS_N = range(6, 11)
U_CHEST_TOOL, U_CHEST_TOOL_ID, U_CHEST_PICKAXE, U_CHEST_SWORD, U_SPELL, U_ARMOUR = range(11, 17)
U_MELEE_AXIS, U_MELEE_CHASE, U_RANGED_AXIS, U_RANGED_MOVE, U_SPAWN, U_SPAWN_CELL = 17, 20, 23, 25, 27, 30
NUM_U = 33
ORE_CDF = (0.3, 0.6, 0.75, 0.875)  # coal, iron, diamond, sapphire, ruby: p = .3 .3 .15 .125 .125
TOOL_CDF = (0.4, 0.7, 0.9)  # levels 1..4: p = .4 .3 .2 .1


def sample_draws(n: int, generator: torch.Generator, device: torch.device) -> dict[str, Tensor]:
    """The variates of one step for ``n`` worlds (see the module docstring)."""
    return {
        "u": torch.rand((n, NUM_U), generator=generator, device=device),
        "dirs": torch.randint(0, 8, (n, 8), generator=generator, device=device),
    }


class Tables:
    """Constant lookup tensors on one device, built once per env."""

    def __init__(self, device: torch.device, light: Tensor) -> None:
        def t(x: object, dtype: torch.dtype = torch.int64) -> Tensor:
            return torch.tensor(x, dtype=dtype, device=device)

        def flags(blocks: tuple[int, ...]) -> Tensor:
            f = torch.zeros(C.NUM_BLOCKS, dtype=torch.bool)
            f[list(blocks)] = True
            return f.to(device)

        self.solid = flags(C.SOLID_BLOCKS)
        self.can_place_item = flags(C.CAN_PLACE_ITEM_BLOCKS)
        self.spawn_block = flags(C.SPAWN_BLOCKS)
        dirs = torch.zeros(C.NUM_ACTIONS, 2, dtype=torch.int32)
        dirs[: len(C.DIRECTIONS)] = torch.tensor(C.DIRECTIONS, dtype=torch.int32)
        self.dirs = dirs.to(device)
        self.moves = torch.cat([dirs[1:5], torch.zeros(4, 2, dtype=torch.int32)]).to(device)  # 4..7 stand still
        self.collision = t(C.COLLISION, torch.bool)  # [type, class, (ground, water, lava)]
        self.player_collision = t(C.COLLISION_PLAYER, torch.bool)
        self.damage = t(C.DAMAGE, torch.float32)  # [type, (melee, projectile), 3]
        self.health = t(C.HEALTH, torch.float32)  # [type, class]
        self.defense = t(C.DEFENSE, torch.float32)  # [type, class, 3]
        self.ranged_projectile = t(C.RANGED_PROJECTILE, torch.int32)
        self.creature_class = t((C.MELEE, C.PASSIVE, C.RANGED))
        self.floor_types = t(C.FLOOR_MOB_TYPES, torch.int32)
        self.floor_chance = t(C.FLOOR_SPAWN_CHANCE, torch.float32)
        self.mob_achievement = t(C.MOB_ACHIEVEMENTS)
        self.rewards = t(C.ACHIEVEMENT_REWARDS, torch.int32)
        self.level_achievement = t(C.LEVEL_ACHIEVEMENTS)
        self.physical = t((1, 2, 3, 5, 8), torch.int32)  # a sword level's damage
        self.dark_index = t([C.DARK_LEVELS.index(lv) if lv in C.DARK_LEVELS else 0 for lv in range(NUM_LEVELS)])
        self.is_dark = t([lv in C.DARK_LEVELS for lv in range(NUM_LEVELS)], torch.bool)
        self.torch_light = C.torch_light_map().reshape(-1).to(device)
        r = torch.arange(-4, 5)
        self.torch_dx = r.repeat_interleave(9).to(device)
        self.torch_dy = r.repeat(9).to(device)
        self.light = light.to(device)
        self.max_t = light.shape[0] - 1
        self.ore_cdf = t(ORE_CDF, torch.float32)
        self.tool_cdf = t(TOOL_CDF, torch.float32)
        self.close = t(((0, -1), (0, 1), (-1, 0), (1, 0), (-1, -1), (-1, 1), (1, -1), (1, 1)), torch.int32)
        # spawn window: every cell at squared Euclidean distance < 14^2 from the player, row-major
        r = torch.arange(-(C.MOB_DESPAWN_DISTANCE - 1), C.MOB_DESPAWN_DISTANCE)
        dx, dy = torch.meshgrid(r, r, indexing="ij")
        d2 = dx * dx + dy * dy
        keep = d2 < C.MOB_DESPAWN_DISTANCE**2
        self.spawn_dx = dx[keep].to(torch.int32).to(device)
        self.spawn_dy = dy[keep].to(torch.int32).to(device)
        self.spawn_d2 = d2[keep].to(device)
        self.tenth = torch.tensor(0.1, dtype=torch.float32).double().to(device)


def _fma(a: Tensor, b: Tensor | float, c: Tensor | float) -> Tensor:
    """``a * b + c`` in float32 with one rounding (XLA's fused multiply-add), via float64: the
    product of two float32 is exact there, and the sum is rounded to odd (the float64 neighbour
    with an odd last bit where it is inexact), so that the final rounding to float32 is the only
    one that counts (rounding to nearest twice can land on a float32 tie the exact sum was not on)."""
    p = a.double() * (b.double() if isinstance(b, Tensor) else C.f32(b))
    c = c.double() if isinstance(c, Tensor) else C.f32(c)
    s = p + c
    back = s - p
    err = (p - (s - back)) + (c - back)  # the sum's rounding error, exactly (Knuth's TwoSum)
    odd = torch.nextafter(s, torch.where(err > 0, torch.inf, -torch.inf).to(s.dtype))
    return torch.where((err != 0) & ((s.view(torch.int64) & 1) == 0), odd, s).float()


# -- grid access with JAX's out-of-range semantics ---------------------------------------------
def _index(lvl: Tensor, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Flat index into a ``[N, levels * 48 * 48]`` grid to read at (level, x, y) (negative
    coordinates wrapped once, then clamped) and whether a write there lands."""
    x = x + (x < 0) * W
    y = y + (y < 0) * W
    ok = (x >= 0) & (x < W) & (y >= 0) & (y < W)
    return lvl * CELLS + x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long(), ok


def _get(grid: Tensor, idx: Tensor) -> Tensor:
    if idx.dim() == 1:
        return grid.gather(1, idx.unsqueeze(1)).squeeze(1)
    return grid.gather(1, idx)


def _put(grid: Tensor, idx: Tensor, ok: Tensor, value: Tensor) -> None:
    """``grid[idx] = value`` where ``ok`` (idx, ok, value [N])."""
    old = _get(grid, idx)
    grid.scatter_(1, idx.unsqueeze(1), torch.where(ok, value.to(grid.dtype), old).unsqueeze(1))


def _in_bounds(x: Tensor, y: Tensor) -> Tensor:
    return (x >= 0) & (x < W) & (y >= 0) & (y < W)


def _first(mask: Tensor) -> Tensor:
    """Index of the first True along dim 1, 0 when none (``jnp.argmax`` of a bool array)."""
    return mask.to(torch.uint8).argmax(1)


def _at(x: Tensor, i: Tensor) -> Tensor:
    """``x[n, i[n]]`` for x ``[N, k]`` or ``[N, k, 2]``."""
    if x.dim() == 3:
        return x.gather(1, i.view(-1, 1, 1).expand(-1, 1, x.shape[2])).squeeze(1)
    return x.gather(1, i.view(-1, 1)).squeeze(1)


def _set_at(x: Tensor, i: Tensor, value: Tensor, where: Tensor) -> None:
    """``x[n, i[n]] = value[n]`` where ``where[n]`` (x ``[N, k]`` or ``[N, k, c]``)."""
    if x.dim() == 3:
        idx = i.view(-1, 1, 1).expand(-1, 1, x.shape[2])
        v = value.view(-1, 1, x.shape[2]).to(x.dtype)
        x.scatter_(1, idx, torch.where(where.view(-1, 1, 1), v, x.gather(1, idx)))
    else:
        idx = i.view(-1, 1)
        x.scatter_(1, idx, torch.where(where.view(-1, 1), value.view(-1, 1).to(x.dtype), x.gather(1, idx)))


def _pick(valid: Tensor, u: Tensor) -> Tensor:
    """The ``floor(u * count)``-th True of ``valid`` [N, M] (0 when none)."""
    running = valid.to(torch.int32).cumsum(1, dtype=torch.int32)
    count = running[:, -1]
    j = (u * count).to(torch.int32).clamp(max=(count - 1).clamp(min=0))
    idx = (running <= j.unsqueeze(1)).sum(1)
    return torch.where(count > 0, idx, 0)


class _Step:
    """One step's working set: the state, its flat grids, the player's floor's mob views."""

    def __init__(self, s: dict[str, Tensor], t: Tables) -> None:
        self.s, self.t = s, t
        n = s["map"].shape[0]
        self.n = n
        self.map = s["map"].view(n, -1)
        self.items = s["item_map"].view(n, -1)
        self.mobs = s["mob_map"].view(n, -1)
        self.light = s["light_map"].view(n, -1)
        self.ach = s["achievements"]
        self.rows = torch.arange(n, device=s["map"].device)

    # -- the player's floor ----------------------------------------------------------------------
    def enter_level(self) -> None:
        """Read the mob slots of the player's floor into views (``self.m``): the melee, passive and
        ranged mobs together as ``creatures.<field>`` [N, 3 classes, 3 slots] (the ranged class's
        third slot is padding, never alive), each group's slots as views of it
        (``melee_mobs.position`` [N, 3, 2], ...), and the projectiles."""
        s, n = self.s, self.n
        self.lvl = s["player_level"].long()
        self.m: dict[str, Tensor] = {}
        for f in ("position", "health", "mask", "attack_cooldown", "type_id"):
            ref = s[f"melee_mobs.{f}"]
            both = torch.zeros((n, 3, 3, *ref.shape[3:]), dtype=ref.dtype, device=ref.device)
            for c, (group, count) in enumerate(CREATURES):
                both[:, c, :count] = s[f"{group}.{f}"][self.rows, self.lvl]
                self.m[f"{group}.{f}"] = both[:, c, :count]
            self.m[f"creatures.{f}"] = both
        for group in ("mob_projectiles", "player_projectiles"):
            for f in ("position", "health", "mask", "attack_cooldown", "type_id"):
                self.m[f"{group}.{f}"] = s[f"{group}.{f}"][self.rows, self.lvl]
        for key in ("mob_projectile_directions", "player_projectile_directions"):
            self.m[key] = s[key][self.rows, self.lvl]

    def leave_level(self) -> None:
        """Write the views back (:meth:`write_back`), then :meth:`clean_floors`."""
        self.write_back()
        self.clean_floors()

    def write_back(self) -> None:
        """Write the views of the player's floor back into the state."""
        for key, v in self.m.items():
            if not key.startswith("creatures."):
                self.s[key][self.rows, self.lvl] = v

    def clean_floors(self) -> None:
        """Every floor's mobs keep ``mask & health > 0`` (each attack does that to every floor's
        slots, and every step attacks with the player's projectiles)."""
        for group, _ in CREATURES:
            self.s[f"{group}.mask"] &= self.s[f"{group}.health"] > 0

    def cell(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return _index(self.lvl, x, y)

    def fighting_boss(self) -> Tensor:
        return self.lvl == C.BOSS_LEVEL

    def boss_vulnerable(self) -> Tensor:
        mask = self.m["creatures.mask"]
        return ~mask[:, 0].any(1) & ~mask[:, 2].any(1) & (self.s["boss_timesteps_to_spawn_this_round"] <= 0)

    def in_mob(self, idx: Tensor, x: Tensor, y: Tensor) -> Tensor:
        pp = self.s["player_position"]
        return _get(self.mobs, idx) | ((x == pp[:, 0]) & (y == pp[:, 1]))

    def valid_move(self, x: Tensor, y: Tensor, collision: Tensor) -> Tensor:
        """``is_position_in_bounds_not_in_mob_not_colliding``: collision [N, 3] (ground, water, lava)."""
        idx, _ = self.cell(x, y)
        block = _get(self.map, idx).long()
        solid = self.t.solid[block]
        water, lava = block == C.WATER, block == C.LAVA
        ground = ~solid & ~water & ~lava
        return (_in_bounds(x, y) & ~self.in_mob(idx, x, y) & ~solid & ~(collision[:, 0] & ground)
                & ~(collision[:, 1] & water) & ~(collision[:, 2] & lava))

    def max_food(self) -> Tensor:
        return 7 + 2 * self.s["player_dexterity"]

    def set_ach(self, name: str | Tensor, got: Tensor) -> None:
        if isinstance(name, str):
            self.ach[:, A[name]] |= got
        else:  # an achievement index per env
            _set_at(self.ach, name, torch.ones_like(got), got)

    # -- damage ----------------------------------------------------------------------------------
    @staticmethod
    def damage(vec: Tensor, defense: Tensor) -> Tensor:
        """``get_damage``: the sum of ``(1 - defense) * damage`` over physical, fire, ice, as XLA
        computes it (the reduction's multiply-adds fused: ``fma(k2, v2, fma(k1, v1, k0 * v0))``)."""
        keep = 1.0 - defense
        return _fma(keep[..., 2], vec[..., 2], _fma(keep[..., 1], vec[..., 1], keep[..., 0] * vec[..., 0]))

    def damage_to_player(self, vec: Tensor) -> Tensor:
        s = self.s
        armour = s["inventory.armour"].float()
        ench = s["armour_enchantments"]
        d_phys = ((armour[:, 0] * C.f32(0.1) + armour[:, 1] * C.f32(0.1)) + armour[:, 2] * C.f32(0.1)) + armour[:, 3] * C.f32(0.1)
        fire = (ench == 1).float() * C.f32(0.2)
        ice = (ench == 2).float() * C.f32(0.2)
        d_fire = ((fire[:, 0] + fire[:, 1]) + fire[:, 2]) + fire[:, 3]
        d_ice = ((ice[:, 0] + ice[:, 1]) + ice[:, 2]) + ice[:, 3]
        vec = vec * (1.0 + self.fighting_boss().float() * C.BOSS_FIGHT_EXTRA_DAMAGE).unsqueeze(1)
        return self.damage(vec, torch.stack([d_phys, d_fire, d_ice], 1))

    def player_damage(self) -> Tensor:
        """``get_player_damage_vector`` [N, 3]."""
        s = self.s
        phys_i = self.t.physical[s["inventory.sword"].long().clamp(0, 4)]
        ench = s["sword_enchantment"]
        fire = (phys_i * (ench == 1)).float() * 0.5
        ice = (phys_i * (ench == 2)).float() * 0.5
        phys = phys_i.float() * _fma((s["player_strength"] - 1).float(), 0.25, 1.0)
        magic = _fma((s["player_intelligence"] - 1).float(), 0.05, 1.0)
        return torch.stack([phys, fire * magic, ice * magic], 1)

    def attack(self, x: Tensor, y: Tensor, vec: Tensor, can_eat: bool, active: Tensor) -> tuple[Tensor, Tensor]:
        """``attack_mob`` at (x, y) with damage ``vec`` [N, 3], where ``active``: the first melee,
        passive and ranged mob there each take the damage (a class with none there has its slot 0
        as the target, undamaged); returns (did attack a mob, did kill one)."""
        s, t, m = self.s, self.t, self.m
        pos, health = m["creatures.position"], m["creatures.health"]
        mask, types = m["creatures.mask"], m["creatures.type_id"]
        hit = (pos[..., 0] == x.view(-1, 1, 1)) & (pos[..., 1] == y.view(-1, 1, 1)) & mask  # [N, 3, 3]
        att = hit.any(2)
        tgt = hit.to(torch.uint8).argmax(2, keepdim=True)  # [N, 3, 1]
        ttype = types.gather(2, tgt).squeeze(2).long()
        dmg = self.damage(vec.unsqueeze(1), t.defense[ttype, t.creature_class])  # [N, 3]
        h = health.gather(2, tgt).squeeze(2)
        health.scatter_(2, tgt, torch.where(active.unsqueeze(1), h + (-dmg * att.float()), h).unsqueeze(2))
        old = mask.gather(2, tgt).squeeze(2)
        mask.copy_(torch.where(active.view(-1, 1, 1), (health > 0) & mask, mask))
        killed = active.unsqueeze(1) & old & ~mask.gather(2, tgt).squeeze(2)  # [N, 3]
        gets = killed & (t.creature_class != C.PASSIVE) if not can_eat else killed
        got = torch.zeros_like(self.ach, dtype=torch.uint8)
        got.scatter_reduce_(1, t.mob_achievement[t.creature_class, ttype], gets.to(torch.uint8), reduce="amax")
        self.ach |= got.bool()
        kill_passive = killed[:, 1]
        kill_monster = killed[:, 0] | killed[:, 2]
        if can_eat:
            food = s["player_food"]
            food.copy_(torch.where(kill_passive, torch.minimum(self.max_food(), food + 6), food))
            s["player_hunger"].masked_fill_(kill_passive, 0.0)
        killed_any = kill_monster | kill_passive
        idx, ok = self.cell(x, y)
        _put(self.mobs, idx, ok & killed_any, torch.zeros_like(killed_any))
        mk = s["monsters_killed"]
        _set_at(mk, self.lvl, _at(mk, self.lvl) + kill_monster.int(), kill_monster)
        return att.any(1), killed_any


def step(s: dict[str, Tensor], action: Tensor, d: dict[str, Tensor], t: Tables) -> tuple[Tensor, Tensor]:
    """Advance every world one step under ``action`` [N] (in place); returns (reward float32 [N],
    terminated [N]: dead, or the necromancer defeated). The time limit is the caller's."""
    g = _Step(s, t)
    init_ach = g.ach.clone()
    init_health = s["player_health"].clone()
    a = acting(s, action)
    front(g, a, d)
    tail(g, a, d)
    g.leave_level()
    return finish(s, t, init_ach, init_health)


def acting(s: dict[str, Tensor], action: Tensor) -> Tensor:
    """The action taken (int64 [N]): NOOP while sleeping or resting."""
    return torch.where(s["is_sleeping"] | s["is_resting"], C.NOOP, action.long())


def front(g: _Step, a: Tensor, d: dict[str, Tensor]) -> None:
    """The player's half of the rules: the floor change (then the floor's mobs are read into
    ``g.m``), crafting, DO, placing, shooting, spells, potions, books, enchanting, the
    necromancer's achievement and clock, attributes and movement."""
    s, u = g.s, d["u"]
    _change_floor(g, a)
    g.enter_level()
    _craft(g, a)
    _do(g, a, u)
    _place(g, a)
    _shoot(g, a)
    _cast(g, a)
    _drink_potion(g, a)
    _read_book(g, a, u[:, U_SPELL])
    _enchant(g, a, u[:, U_ARMOUR])
    g.set_ach("defeat_necromancer", s["boss_progress"] >= C.BOSS_LEVEL)
    s["boss_timesteps_to_spawn_this_round"].sub_(g.fighting_boss().int())
    _level_up(g, a)
    _move_player(g, a)


def tail(g: _Step, a: Tensor, d: dict[str, Tensor]) -> None:
    """The world's half, on the player's floor (read into ``g.m`` by :func:`front`): the five mob
    classes, spawning, plants, intrinsics, the inventory cap and the inventory's achievements.
    The caller then writes the floor back and cleans every floor (:meth:`_Step.leave_level`)."""
    u, dirs = d["u"], d["dirs"]
    _melee_mobs(g, u, dirs)
    _passive_mobs(g, dirs)
    _ranged_mobs(g, u, dirs)
    _mob_projectiles(g)
    _player_projectiles(g)
    _spawn(g, u)
    _plants(g)
    _intrinsics(g, a)
    _clip(g)
    _inventory_achievements(g)


def finish(s: dict[str, Tensor], t: Tables, init_ach: Tensor, init_health: Tensor) -> tuple[Tensor, Tensor]:
    """The step's reward (float32 [N]: a tenth of the health gained plus the new achievements'
    rewards, as XLA computes it) and termination; advances the clock and the light level."""
    gained = ((s["achievements"].int() - init_ach.int()) * t.rewards).sum(1).double()
    reward = _fma(s["player_health"] - init_health, t.tenth, gained)
    ts = s["timestep"]
    ts.add_(1)
    s["light_level"].copy_(t.light[ts.long().clamp(max=t.max_t)])
    terminated = (s["player_health"] <= 0) | (s["boss_progress"] >= C.BOSS_LEVEL)
    return reward, terminated


# -- the rules, in the reference's order ---------------------------------------------------------------
def _change_floor(g: _Step, a: Tensor) -> None:
    s, t = g.s, g.t
    lvl = s["player_level"].long()
    pos = s["player_position"]
    idx, _ = _index(lvl, pos[:, 0], pos[:, 1])
    item = _get(g.items, idx)
    killed = _at(s["monsters_killed"], lvl)
    down = (a == ACT["descend"]) & (item == C.ITEM_LADDER_DOWN) & (killed >= C.MONSTERS_KILLED_TO_CLEAR_LEVEL)
    down &= lvl < NUM_LEVELS - 1
    up = (a == ACT["ascend"]) & (item == C.ITEM_LADDER_UP) & (lvl > 0)
    to_down = _at(s["up_ladders"], (lvl + 1).clamp(max=NUM_LEVELS - 1))
    to_up = _at(s["down_ladders"], (lvl - 1) % NUM_LEVELS)
    new = lvl + down.long() - up.long()
    pos.copy_(torch.where(down.unsqueeze(1), to_down, torch.where(up.unsqueeze(1), to_up, pos)))
    which = t.level_achievement[new]
    first = (new != 0) & ~_at(g.ach, which)
    g.set_ach(which, new != 0)
    s["player_level"].copy_(new)
    s["player_xp"].add_(first.int())


def _near(g: _Step, block: int) -> Tensor:
    pp = g.s["player_position"]
    x = pp[:, :1] + g.t.close[:, 0]
    y = pp[:, 1:] + g.t.close[:, 1]
    idx = g.lvl.unsqueeze(1) * CELLS + x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long()
    return (_in_bounds(x, y) & (g.map.gather(1, idx) == block)).any(1)


def _craft(g: _Step, a: Tensor) -> None:
    s = g.s
    table = _near(g, C.CRAFTING_TABLE)
    furnace = _near(g, C.FURNACE)
    inv = {k: s[f"inventory.{k}"] for k in ("wood", "stone", "coal", "iron", "diamond", "pickaxe", "sword", "arrows",
                                           "torches")}
    armour = s["inventory.armour"]
    # (action, extra condition, costs, tool and level made); the actions exclude each other
    tools = (
        ("make_wood_pickaxe", table, {"wood": 1}, "pickaxe", 1),
        ("make_stone_pickaxe", table, {"wood": 1, "stone": 1}, "pickaxe", 2),
        ("make_iron_pickaxe", table & furnace, {"wood": 1, "stone": 1, "iron": 1, "coal": 1}, "pickaxe", 3),
        ("make_diamond_pickaxe", table, {"wood": 1, "diamond": 3}, "pickaxe", 4),
        ("make_wood_sword", table, {"wood": 1}, "sword", 1),
        ("make_stone_sword", table, {"wood": 1, "stone": 1}, "sword", 2),
        ("make_iron_sword", table & furnace, {"wood": 1, "stone": 1, "iron": 1, "coal": 1}, "sword", 3),
        ("make_diamond_sword", table, {"wood": 1, "diamond": 2}, "sword", 4),
    )
    for act, where, cost, tool, level in tools:
        made = (a == ACT[act]) & where & (inv[tool] < level)
        for k, c in cost.items():
            made &= inv[k] >= c
        for k, c in cost.items():
            inv[k].sub_(c * made.int())
        inv[tool].copy_(torch.where(made, level, inv[tool]))
    # armour: the first piece below iron (diamond) becomes iron (diamond)
    for act, where, cost, level, name in (
        ("make_iron_armour", table & furnace, {"iron": 3, "coal": 3}, 1, "make_iron_armour"),
        ("make_diamond_armour", table, {"diamond": 3}, 2, "make_diamond_armour"),
    ):
        below = armour < level
        made = (a == ACT[act]) & where & below.any(1)
        for k, c in cost.items():
            made &= inv[k] >= c
        for k, c in cost.items():
            inv[k].sub_(c * made.int())
        _set_at(armour, _first(below), torch.full_like(made, level, dtype=armour.dtype), made)
        g.set_ach(name, made)
    for act, key, gain in (("make_arrow", "arrows", 2), ("make_torch", "torches", 4)):
        other = "stone" if key == "arrows" else "coal"
        made = (a == ACT[act]) & table & (inv["wood"] >= 1) & (inv[other] >= 1) & (inv[key] < 99)
        inv["wood"].sub_(made.int())
        inv[other].sub_(made.int())
        inv[key].add_(gain * made.int())


def _chest_loot(g: _Step, u: Tensor, opening: Tensor) -> dict[str, Tensor]:
    """``add_items_from_chest``: the inventory changes of opening a chest (where ``opening``)."""
    s, t = g.s, g.t
    lvl = g.lvl
    op = opening.int()
    torches = (4 + (u[:, U_CHEST_TORCH_N] * 4).long()) * (u[:, U_CHEST_TORCH] < 0.6)
    ore = (u[:, U_CHEST_ORE_ID].unsqueeze(1) >= t.ore_cdf).sum(1)
    ore_n = torch.stack([1 + (u[:, U_CHEST_ORE_N] * 3).long(), 1 + (u[:, U_CHEST_ORE_N] * 2).long()], 1)
    ore_n = torch.where(ore < 2, ore_n.gather(1, ore.clamp(max=1).unsqueeze(1)).squeeze(1), 1)
    ore_n = ore_n * (u[:, U_CHEST_ORE] < 0.6)
    potion = (u[:, U_CHEST_POTION_ID] * 6).long().clamp(max=5)
    potion_n = (1 + (u[:, U_CHEST_POTION_N] * 2).long()) * (u[:, U_CHEST_POTION] < 0.5)
    arrows = (1 + (u[:, U_CHEST_ARROWS_N] * 4).long()) * (u[:, U_CHEST_ARROWS] < 0.25)
    tool = u[:, U_CHEST_TOOL] < 0.2
    tool_id = (u[:, U_CHEST_TOOL_ID] * 2).long()
    opened = _at(s["chests_opened"], lvl)
    out = {
        "torches": s["inventory.torches"] + torches.int() * op,
        "arrows": s["inventory.arrows"] + arrows.int() * op,
        "books": s["inventory.books"] + (~opened & ((lvl == 3) | (lvl == 4))).int() * op,
        "bow": torch.where(opening & (lvl == 1) & ~opened, 1, s["inventory.bow"]),
    }
    for i, k in enumerate(("coal", "iron", "diamond", "sapphire", "ruby")):
        out[k] = s[f"inventory.{k}"] + (ore_n * (ore == i)).int() * op
    for k, uk, tid in (("pickaxe", U_CHEST_PICKAXE, 0), ("sword", U_CHEST_SWORD, 1)):
        looting = tool & (tool_id == tid) & opening
        level = 1 + (u[:, uk].unsqueeze(1) >= t.tool_cdf).sum(1)
        out[k] = torch.where(looting, torch.maximum(level.int(), s[f"inventory.{k}"]), s[f"inventory.{k}"])
    potions = s["inventory.potions"].clone()
    _set_at(potions, potion, _at(potions, potion) + potion_n.int() * op, torch.ones_like(opening))
    out["potions"] = potions
    return out


def _do(g: _Step, a: Tensor, u: Tensor) -> None:
    """The DO action: attack the mob in front, else mine / collect / drink / eat / open / strike
    the block in front."""
    s, t = g.s, g.t
    do = a == C.DO
    pp = s["player_position"]
    step_xy = t.dirs[s["player_direction"].long()]
    bx, by = pp[:, 0] + step_xy[:, 0], pp[:, 1] + step_xy[:, 1]
    attacked, _ = g.attack(bx, by, g.player_damage(), True, do)

    bidx, bok = g.cell(bx, by)
    block = _get(g.map, bidx)
    ok = do & _in_bounds(bx, by) & ~attacked
    pick = s["inventory.pickaxe"]

    def mined(b: int, level: int = 0) -> Tensor:
        return (block == b) & (pick >= level)

    tree = (block == C.TREE) | (block == C.FIRE_TREE) | (block == C.ICE_SHRUB)
    stone, coal, iron, diamond = mined(C.STONE, 1), mined(C.COAL, 1), mined(C.IRON, 2), mined(C.DIAMOND, 3)
    sapphire, ruby, stalagmite = mined(C.SAPPHIRE, 4), mined(C.RUBY, 4), mined(C.STALAGMITE, 1)
    chest = block == C.CHEST
    to_path = stone | coal | iron | diamond | sapphire | ruby | stalagmite | chest | (block == C.FURNACE)
    to_path |= block == C.CRAFTING_TABLE
    ripe = block == C.RIPE_PLANT
    new_block = torch.where(block == C.TREE, C.GRASS, torch.where(block == C.FIRE_TREE, C.FIRE_GRASS, torch.where(
        block == C.ICE_SHRUB, C.ICE_GRASS, torch.where(to_path, C.PATH, torch.where(ripe, C.PLANT, block)))))
    _put(g.map, bidx, bok & ok, new_block)

    loot = _chest_loot(g, u, chest)
    inv_gain = {"wood": tree, "stone": stone | stalagmite, "coal": coal, "iron": iron, "diamond": diamond,
                "sapphire": sapphire, "ruby": ruby, "sapling": (block == C.GRASS) & (u[:, U_SAPLING] < 0.1)}
    for k in set(loot) | set(inv_gain):
        key = f"inventory.{k}"
        new = loot.get(k, s[key])
        if k in inv_gain:
            new = new + inv_gain[k].int()
        s[key].copy_(torch.where(ok.view(-1, *([1] * (new.dim() - 1))), new, s[key]))

    water = ok & ((block == C.WATER) | (block == C.FOUNTAIN))
    drink = s["player_drink"]
    drink.copy_(torch.where(water, torch.minimum(7 + 2 * s["player_dexterity"], drink + 1), drink))
    s["player_thirst"].masked_fill_(water, 0.0)
    eat = ok & ripe
    food = s["player_food"]
    food.copy_(torch.where(eat, torch.minimum(g.max_food(), food + 4), food))
    s["player_hunger"].masked_fill_(eat, 0.0)
    ppos = s["growing_plants_positions"]
    at = (ppos[:, :, 0] == bx.unsqueeze(1)) & (ppos[:, :, 1] == by.unsqueeze(1))
    _set_at(s["growing_plants_age"], _first(at), torch.zeros_like(bx), eat)

    # a chest counts as opened, and the necromancer as struck, even when the cell is off the map
    opened = s["chests_opened"]
    _set_at(opened, g.lvl, _at(opened, g.lvl) | chest, do)
    damaging = (block == C.NECROMANCER) & g.boss_vulnerable() & g.fighting_boss()
    strike = do & damaging
    s["boss_progress"].add_(strike.int())
    bt = s["boss_timesteps_to_spawn_this_round"]
    bt.copy_(torch.where(strike, C.BOSS_FIGHT_SPAWN_TURNS, bt))
    g.set_ach("collect_drink", water)
    g.set_ach("eat_plant", eat)
    g.set_ach("open_chest", ok & chest)
    g.set_ach("damage_necromancer", ok & damaging)


def _place(g: _Step, a: Tensor) -> None:
    s, t = g.s, g.t
    pp = s["player_position"]
    step_xy = t.dirs[s["player_direction"].long()]
    bx, by = pp[:, 0] + step_xy[:, 0], pp[:, 1] + step_xy[:, 1]
    bidx, bok = g.cell(bx, by)
    block = _get(g.map, bidx).long()
    item = _get(g.items, bidx)
    taken = t.solid[block] | (item != C.ITEM_NONE)
    ok = _in_bounds(bx, by) & ~g.in_mob(bidx, bx, by)
    wood, stone = s["inventory.wood"], s["inventory.stone"]
    table = ok & (a == ACT["place_table"]) & ~taken & (wood >= 2)
    furnace = ok & (a == ACT["place_furnace"]) & ~taken & (stone > 0)
    place_stone = ok & (a == ACT["place_stone"]) & ((block == C.WATER) | ~taken) & (stone > 0)
    torch_ = ok & (a == ACT["place_torch"]) & t.can_place_item[block] & (item == C.ITEM_NONE) & (s["inventory.torches"] > 0)
    plant = ok & (a == ACT["place_plant"]) & (block == C.GRASS) & (s["inventory.sapling"] > 0) & (item == C.ITEM_NONE)
    new_block = torch.where(table, C.CRAFTING_TABLE, torch.where(furnace, C.FURNACE, torch.where(
        place_stone, C.STONE, torch.where(plant, C.PLANT, block))))
    _put(g.map, bidx, bok, new_block)
    _put(g.items, bidx, bok & torch_, torch.full_like(item, C.ITEM_TORCH))
    wood.sub_(2 * table.int())
    stone.sub_((furnace | place_stone).int())
    s["inventory.torches"].sub_(torch_.int())
    s["inventory.sapling"].sub_(plant.int())
    g.set_ach("place_table", table)
    g.set_ach("place_furnace", furnace)
    g.set_ach("place_stone", place_stone)
    g.set_ach("place_torch", torch_)
    g.set_ach("place_plant", plant)
    # the torch's light, on the dark floors (the others are 1 everywhere and stay so)
    x = bx.unsqueeze(1) + t.torch_dx
    y = by.unsqueeze(1) + t.torch_dy
    lit = _in_bounds(x, y) & (torch_ & t.is_dark[g.lvl]).unsqueeze(1)
    lidx = t.dark_index[g.lvl].unsqueeze(1) * CELLS + x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long()
    cur = g.light.gather(1, lidx)
    # by max, not by a plain scatter: near row / column 47 the clamped indices repeat the edge's
    # cell, and a plain scatter could write its old light back over the new (the reference, on a
    # padded map, lights every cell of the window on the map); the new light is never below the old
    g.light.scatter_reduce_(1, lidx, torch.where(lit, (t.torch_light + cur).clamp(0.0, 1.0), cur), reduce="amax")
    # a new growing plant in the first free slot (none when all ten are taken)
    pmask = s["growing_plants_mask"]
    adding = plant & (~pmask).any(1)
    slot = _first(~pmask)
    _set_at(s["growing_plants_positions"], slot, torch.stack([bx, by], 1), adding)
    _set_at(s["growing_plants_age"], slot, torch.zeros_like(bx), adding)
    _set_at(pmask, slot, torch.ones_like(adding), adding)


def _spawn_projectile(g: _Step, group: str, directions: str, spawn: Tensor, x: Tensor, y: Tensor,
                      dx: Tensor, dy: Tensor, ptype: Tensor) -> None:
    m = g.m
    mask = m[f"{group}.mask"]
    slot = _first(~mask)
    _set_at(m[f"{group}.position"], slot, torch.stack([x, y], 1), spawn)
    _set_at(mask, slot, torch.ones_like(spawn), spawn)
    _set_at(m[directions], slot, torch.stack([dx, dy], 1), spawn)
    _set_at(m[f"{group}.type_id"], slot, ptype, spawn)


def _shoot(g: _Step, a: Tensor) -> None:
    s, t = g.s, g.t
    free = g.m["player_projectiles.mask"].sum(1) < 3
    shoot = (a == ACT["shoot_arrow"]) & (s["inventory.bow"] >= 1) & (s["inventory.arrows"] >= 1) & free
    pp = s["player_position"]
    d = t.dirs[s["player_direction"].long()]
    _spawn_projectile(g, "player_projectiles", "player_projectile_directions", shoot, pp[:, 0], pp[:, 1], d[:, 0],
                      d[:, 1], torch.full_like(a, C.ARROW2))
    s["inventory.arrows"].sub_(shoot.int())
    g.set_ach("fire_bow", shoot)


def _cast(g: _Step, a: Tensor) -> None:
    s, t = g.s, g.t
    ready = (s["player_mana"] >= 2) & (g.m["player_projectiles.mask"].sum(1) < 3)
    learned = s["learned_spells"]
    fire = (a == ACT["cast_fireball"]) & ready & learned[:, 0]
    ice = (a == ACT["cast_iceball"]) & ready & learned[:, 1]
    pp = s["player_position"]
    d = t.dirs[s["player_direction"].long()]
    ptype = fire.long() * C.FIREBALL + ice.long() * C.ICEBALL
    _spawn_projectile(g, "player_projectiles", "player_projectile_directions", fire | ice, pp[:, 0], pp[:, 1],
                      d[:, 0], d[:, 1], ptype)
    s["player_mana"].sub_(2 * (fire | ice).int())
    g.set_ach("cast_fireball", fire)
    g.set_ach("cast_iceball", ice)


def _drink_potion(g: _Step, a: Tensor) -> None:
    s = g.s
    potions = s["inventory.potions"]
    which = (a - ACT["drink_potion_red"]).clamp(0, 5)
    drinking = (a >= ACT["drink_potion_red"]) & (a <= ACT["drink_potion_yellow"]) & (_at(potions, which) > 0)
    effect = _at(s["potion_mapping"], which)
    s["player_health"].add_((drinking & (effect == 0)).float() * 8 - (drinking & (effect == 1)).float() * 3)
    s["player_mana"].add_((drinking & (effect == 2)).int() * 8 - (drinking & (effect == 3)).int() * 3)
    s["player_energy"].add_((drinking & (effect == 4)).int() * 8 - (drinking & (effect == 5)).int() * 3)
    _set_at(potions, which, _at(potions, which) - 1, drinking)
    g.set_ach("drink_potion", drinking)


def _read_book(g: _Step, a: Tensor, u: Tensor) -> None:
    s = g.s
    reading = (a == ACT["read_book"]) & (s["inventory.books"] > 0)
    learned = s["learned_spells"]
    spell = _pick(~learned, u)
    g.set_ach(torch.where(spell == 1, A["learn_iceball"], A["learn_fireball"]), reading)
    _set_at(learned, spell, torch.ones_like(reading), reading)
    s["inventory.books"].sub_(reading.int())


def _enchant(g: _Step, a: Tensor, u: Tensor) -> None:
    s, t = g.s, g.t
    pp = s["player_position"]
    d = t.dirs[s["player_direction"].long()]
    idx, _ = g.cell(pp[:, 0] + d[:, 0], pp[:, 1] + d[:, 1])
    block = _get(g.map, idx)
    fire_table = block == C.ENCHANTMENT_TABLE_FIRE
    kind = torch.where(fire_table, 1, 2)
    gems = torch.where(fire_table, s["inventory.ruby"], s["inventory.sapphire"])
    could = (s["player_mana"] >= 9) & (fire_table | (block == C.ENCHANTMENT_TABLE_ICE)) & (gems >= 1)
    bow = could & (a == ACT["enchant_bow"]) & (s["inventory.bow"] > 0)
    sword = could & (a == ACT["enchant_sword"]) & (s["inventory.sword"] > 0)
    armour = could & (a == ACT["enchant_armour"]) & (s["inventory.armour"].sum(1) > 0)
    ench = s["armour_enchantments"]
    bare = ench == 0
    targets = bare | (~bare.any(1, keepdim=True) & (ench != kind.unsqueeze(1)))
    target = _pick(targets, u)
    s["sword_enchantment"].copy_(torch.where(sword, kind, s["sword_enchantment"]))
    s["bow_enchantment"].copy_(torch.where(bow, kind, s["bow_enchantment"]))
    _set_at(ench, target, kind, armour)
    any_ = (bow | sword | armour).int()
    s["inventory.sapphire"].sub_(any_ * (kind == 2).int())
    s["inventory.ruby"].sub_(any_ * (kind == 1).int())
    s["player_mana"].sub_(9 * any_)
    g.set_ach("enchant_sword", sword)
    g.set_ach("enchant_armour", armour)


def _level_up(g: _Step, a: Tensor) -> None:
    s = g.s
    can = s["player_xp"] >= 1
    ups = [can & (a == ACT[f"level_up_{k}"]) & (s[f"player_{k}"] < C.MAX_ATTRIBUTE)
           for k in ("dexterity", "strength", "intelligence")]
    for k, up in zip(("dexterity", "strength", "intelligence"), ups, strict=True):
        s[f"player_{k}"].add_(up.int())
    s["player_xp"].sub_((ups[0] | ups[1] | ups[2]).int())


def _move_player(g: _Step, a: Tensor) -> None:
    s, t = g.s, g.t
    pp = s["player_position"]
    d = t.dirs[a]
    ok = g.valid_move(pp[:, 0] + d[:, 0], pp[:, 1] + d[:, 1], t.player_collision.expand(g.n, 3))
    pp.add_(d * ok.int().unsqueeze(1))
    turning = (a >= C.LEFT) & (a <= C.DOWN)
    s["player_direction"].copy_(torch.where(turning, a, s["player_direction"]))


def _towards(x: Tensor, y: Tensor, px: Tensor, py: Tensor, u_axis: Tensor) -> tuple[Tensor, Tensor]:
    """One step from (x, y) towards the player along the axis that is further (either one, at
    random, when both are as far)."""
    ddx, ddy = px - x, py - y
    ax, ay = ddx.abs(), ddy.abs()
    rows = (ax > ay) | ((ax == ay) & (u_axis < 0.5))
    return torch.where(rows, ddx.sign(), 0), torch.where(rows, 0, ddy.sign())


def _relocate(g: _Step, x: Tensor, y: Tensor, alive: Tensor, nx: Tensor, ny: Tensor, now: Tensor) -> None:
    """A mob's ``mob_map`` bookkeeping: its old cell cleared if it was alive, its new cell marked if it still is."""
    oidx, ook = g.cell(x, y)
    _put(g.mobs, oidx, ook, _get(g.mobs, oidx) & ~alive)
    nidx, nok = g.cell(nx, ny)
    _put(g.mobs, nidx, nok, _get(g.mobs, nidx) | now)


def _melee_mobs(g: _Step, u: Tensor, dirs: Tensor) -> None:
    s, t, m = g.s, g.t, g.m
    pos, mask, types = m["melee_mobs.position"], m["melee_mobs.mask"], m["melee_mobs.type_id"]
    cd = m["melee_mobs.attack_cooldown"]
    pp = s["player_position"]
    px, py = pp[:, 0], pp[:, 1]
    boss = g.fighting_boss()
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        alive = mask[:, i].clone()
        ty = types[:, i].long()
        rnd = t.moves[dirs[:, i] % 4]
        cx, cy = _towards(x, y, px, py, u[:, U_MELEE_AXIS + i])
        dist = (x - px).abs() + (y - py).abs()
        chase = ((dist < 10) | boss) & (u[:, U_MELEE_CHASE + i] < 0.75)
        qx = torch.where(chase, x + cx, x + rnd[:, 0])
        qy = torch.where(chase, y + cy, y + rnd[:, 1])
        attack = (dist == 1) & (cd[:, i] <= 0) & alive
        qx, qy = torch.where(attack, x, qx), torch.where(attack, y, qy)
        sleeping = s["is_sleeping"]
        base = t.damage[ty, 0] * (1.0 + 2.5 * sleeping.float()).unsqueeze(1)
        dmg = g.damage_to_player(base)
        s["player_health"].sub_(dmg * attack.float())
        g.set_ach("wake_up", sleeping & attack)
        sleeping &= ~attack
        s["is_resting"] &= ~attack
        cd[:, i] = torch.where(attack, 5, cd[:, i] - 1)
        ok = g.valid_move(qx, qy, t.collision[ty, C.MELEE])
        nx, ny = torch.where(ok, qx, x), torch.where(ok, qy, y)
        now = alive & ((dist < C.MOB_DESPAWN_DISTANCE) | boss)
        _relocate(g, x, y, alive, nx, ny, now)
        pos[:, i, 0], pos[:, i, 1] = nx, ny
        mask[:, i] = now


def _passive_mobs(g: _Step, dirs: Tensor) -> None:
    s, t, m = g.s, g.t, g.m
    pos, mask, types = m["passive_mobs.position"], m["passive_mobs.mask"], m["passive_mobs.type_id"]
    pp = s["player_position"]
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        alive = mask[:, i].clone()
        rnd = t.moves[dirs[:, 3 + i]]
        qx, qy = x + rnd[:, 0], y + rnd[:, 1]
        ok = g.valid_move(qx, qy, t.collision[types[:, i].long(), C.PASSIVE])
        nx, ny = torch.where(ok, qx, x), torch.where(ok, qy, y)
        now = alive & ((x - pp[:, 0]).abs() + (y - pp[:, 1]).abs() < C.MOB_DESPAWN_DISTANCE)
        _relocate(g, x, y, alive, nx, ny, now)
        pos[:, i, 0], pos[:, i, 1] = nx, ny
        mask[:, i] = now


def _ranged_mobs(g: _Step, u: Tensor, dirs: Tensor) -> None:
    s, t, m = g.s, g.t, g.m
    pos, mask, types = m["ranged_mobs.position"], m["ranged_mobs.mask"], m["ranged_mobs.type_id"]
    cd = m["ranged_mobs.attack_cooldown"]
    pp = s["player_position"]
    px, py = pp[:, 0], pp[:, 1]
    boss = g.fighting_boss()
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        alive = mask[:, i].clone()
        ty = types[:, i].long()
        coll = t.collision[ty, C.RANGED]
        rnd = t.moves[dirs[:, 6 + i] % 4]
        rx, ry = x + rnd[:, 0], y + rnd[:, 1]
        cx, cy = _towards(x, y, px, py, u[:, U_RANGED_AXIS + i])
        dist = (x - px).abs() + (y - py).abs()
        far, close = dist >= 6, dist <= 3
        qx = torch.where(close, x - cx, torch.where(far, x + cx, rx))
        qy = torch.where(close, y - cy, torch.where(far, y + cy, ry))
        considered = u[:, U_RANGED_MOVE + i] > 0.85
        qx, qy = torch.where(considered, qx, rx), torch.where(considered, qy, ry)
        # shoot at distance 4..5, or when too close and the way back is blocked
        attack = ((dist >= 4) & (dist <= 5)) | (close & ~g.valid_move(qx, qy, coll))
        attack &= (cd[:, i] <= 0) & alive
        shoot = attack & (m["mob_projectiles.mask"].sum(1) < 3)
        _spawn_projectile(g, "mob_projectiles", "mob_projectile_directions", shoot, x, y, cx, cy,
                          t.ranged_projectile[ty])
        qx, qy = torch.where(attack, x, qx), torch.where(attack, y, qy)
        cd[:, i] = torch.where(attack, 4, cd[:, i] - 1)
        ok = g.valid_move(qx, qy, coll)
        nx, ny = torch.where(ok, qx, x), torch.where(ok, qy, y)
        now = alive & ((dist < C.MOB_DESPAWN_DISTANCE) | boss)
        _relocate(g, x, y, alive, nx, ny, now)
        pos[:, i, 0], pos[:, i, 1] = nx, ny
        mask[:, i] = now


def _mob_projectiles(g: _Step) -> None:
    s, t, m = g.s, g.t, g.m
    pos, mask, types = m["mob_projectiles.position"], m["mob_projectiles.mask"], m["mob_projectiles.type_id"]
    adir = m["mob_projectile_directions"]
    pp = s["player_position"]
    px, py = pp[:, 0], pp[:, 1]
    for i in range(pos.shape[1]):
        x, y = pos[:, i, 0], pos[:, i, 1]
        qx, qy = x + adir[:, i, 0], y + adir[:, i, 1]
        alive = mask[:, i]
        idx, ok = g.cell(qx, qy)
        block = _get(g.map, idx)
        on_player = (qx == px) & (qy == py)
        go = _in_bounds(qx, qy) & ~(t.solid[block.long()] & (block != C.WATER)) & ~g.in_mob(idx, qx, qy)
        hit = (((x == px) & (y == py)) | on_player) & alive
        go &= ~hit
        breaks = alive & ((block == C.FURNACE) | (block == C.CRAFTING_TABLE))
        _put(g.map, idx, ok & breaks, torch.full_like(block, C.PATH))
        dmg = g.damage_to_player(t.damage[types[:, i].long(), 1])
        s["player_health"].sub_(dmg * hit.float())
        s["is_sleeping"] &= ~hit
        s["is_resting"] &= ~hit
        mask[:, i] = go & alive
        pos[:, i, 0], pos[:, i, 1] = qx, qy


def _player_projectiles(g: _Step) -> None:
    s, t, m = g.s, g.t, g.m
    pos, mask, types = m["player_projectiles.position"], m["player_projectiles.mask"], m["player_projectiles.type_id"]
    pdir = m["player_projectile_directions"]
    everyone = torch.ones(g.n, dtype=torch.bool, device=pos.device)
    for i in range(pos.shape[1]):
        ptype = types[:, i].long()
        vec = t.damage[ptype, 1] * mask[:, i].float().unsqueeze(1)
        arrow = (ptype == C.ARROW) | (ptype == C.ARROW2)
        add = torch.zeros_like(vec)
        add.scatter_(1, s["bow_enchantment"].long().clamp(0, 2).unsqueeze(1), (vec[:, 0] * 0.5).unsqueeze(1))
        add[:, 0] = 0.0
        vec = vec + torch.where(arrow.unsqueeze(1), add, 0.0)
        vec = vec * torch.where(arrow, _fma((s["player_dexterity"] - 1).float(), 0.2, 1.0), 1.0).unsqueeze(1)
        magic = (ptype == C.FIREBALL) | (ptype == C.ICEBALL)
        vec = vec * torch.where(magic, _fma((s["player_intelligence"] - 1).float(), 0.5, 1.0), 1.0).unsqueeze(1)
        x, y = pos[:, i, 0].clone(), pos[:, i, 1].clone()
        qx, qy = x + pdir[:, i, 0], y + pdir[:, i, 1]
        idx, _ = g.cell(qx, qy)
        block = _get(g.map, idx)
        wall = t.solid[block.long()] & (block != C.WATER)
        att0, _ = g.attack(x, y, vec, False, everyone)
        vec = vec * (1 - att0.float()).unsqueeze(1)
        att1, _ = g.attack(qx, qy, vec, False, everyone)
        mask[:, i] = _in_bounds(qx, qy) & ~wall & ~(att0 | att1) & mask[:, i]
        pos[:, i, 0], pos[:, i, 1] = qx, qy


def _spawn(g: _Step, u: Tensor) -> None:
    """Spawn at most one passive, one melee and one ranged mob on a random valid cell near the
    player (the ``floor(u * count)``-th of the window's valid cells, row-major). The window's
    blocks and mob flags are read once; a spawn's ``mob_map`` write is mirrored into them."""
    s, t, m = g.s, g.t, g.m
    lvl = g.lvl
    pp = s["player_position"]
    x = pp[:, :1] + t.spawn_dx
    y = pp[:, 1:] + t.spawn_dy
    inside = _in_bounds(x, y)
    idx = lvl.unsqueeze(1) * CELLS + x.clamp(0, W - 1).long() * W + y.clamp(0, W - 1).long()
    block = g.map.gather(1, idx)
    free = inside & ~g.mobs.gather(1, idx)
    boss = g.fighting_boss()
    killed = _at(s["monsters_killed"], lvl)
    coeff = (1 + 2 * (killed < C.MONSTERS_KILLED_TO_CLEAR_LEVEL).int())
    wave = boss & (s["boss_timesteps_to_spawn_this_round"] >= 1)
    coeff = coeff * torch.where(boss, wave.int() * 1000, 1)
    chance = t.floor_chance[lvl]  # [N, 4]
    dark = 1.0 - s["light_level"]
    melee_chance = _fma(chance[:, 3], dark * dark, chance[:, 1])
    floor_types = t.floor_types[lvl]
    boss_types = t.floor_types[s["boss_progress"].long().clamp(0, NUM_LEVELS - 1)]
    d2 = t.spawn_d2
    normal = (block == C.GRASS) | (block == C.PATH) | (block == C.FIRE_GRASS) | (block == C.ICE_GRASS)
    grave = (block == C.GRAVE) | (block == C.GRAVE2) | (block == C.GRAVE3)
    monster_cells = torch.where(boss.unsqueeze(1), grave & (d2 <= 36), normal & (d2 > 81))
    for group, cls, go, mtype in (
        ("passive_mobs", C.PASSIVE, (u[:, U_SPAWN] < chance[:, 0]) & ~boss, floor_types[:, 0]),
        ("melee_mobs", C.MELEE, u[:, U_SPAWN + 1] < melee_chance * coeff.float(),
         torch.where(boss, boss_types[:, 1], floor_types[:, 1])),
        ("ranged_mobs", C.RANGED, u[:, U_SPAWN + 2] < chance[:, 2] * coeff.float(),
         torch.where(boss, boss_types[:, 2], floor_types[:, 2])),
    ):
        if cls == C.PASSIVE:
            where = normal & (d2 > 9)
        elif cls == C.RANGED:  # deep things spawn in water
            deep = torch.where(boss.unsqueeze(1), grave & (d2 <= 36), (block == C.WATER) & (d2 > 81))
            where = torch.where((mtype == 5).unsqueeze(1), deep, monster_cells)
        else:
            where = monster_cells
        cells = free & where
        mask = m[f"{group}.mask"]
        spawn = (mask.sum(1) < mask.shape[1]) & go & cells.any(1)
        j = _pick(cells, u[:, U_SPAWN_CELL + cls])  # passive 0, melee 1, ranged 2
        slot = _first(~mask)
        pos = m[f"{group}.position"]
        _set_at(pos, slot, torch.stack([_at(x, j), _at(y, j)], 1), spawn)
        _set_at(m[f"{group}.health"], slot, t.health[mtype.long(), cls], spawn)
        _set_at(mask, slot, torch.ones_like(spawn), spawn)
        _set_at(m[f"{group}.type_id"], slot, mtype, torch.ones_like(spawn))
        # the slot's cell enters mob_map if the slot is alive (spawned now, or all slots taken)
        sp = _at(pos, slot)
        alive = _at(mask, slot)
        sidx, sok = g.cell(sp[:, 0], sp[:, 1])
        _put(g.mobs, sidx, sok, _get(g.mobs, sidx) | alive)
        free &= ~((idx == sidx.unsqueeze(1)) & (sok & alive).unsqueeze(1))


def _plants(g: _Step) -> None:
    """Plants grow on the overworld, wherever the player is."""
    s = g.s
    age, mask, ppos = s["growing_plants_age"], s["growing_plants_mask"], s["growing_plants_positions"]
    age.add_(1).mul_(mask)
    ripe = age >= 600
    idx, ok = _index(torch.zeros_like(ppos[:, :, 0]).long(), ppos[:, :, 0], ppos[:, :, 1])
    hit = torch.zeros_like(g.map[:, :CELLS], dtype=torch.uint8)
    hit.scatter_reduce_(1, idx, (ripe & ok).to(torch.uint8), reduce="amax")
    g.map[:, :CELLS].copy_(torch.where(hit.bool(), C.RIPE_PLANT, g.map[:, :CELLS]))


def _intrinsics(g: _Step, a: Tensor) -> None:
    s = g.s
    sleeping, resting = s["is_sleeping"], s["is_resting"]
    energy, food, drink, health = s["player_energy"], s["player_food"], s["player_drink"], s["player_health"]
    dex = s["player_dexterity"]
    top = 7 + 2 * dex  # max food, drink, energy
    max_health = (8 + s["player_strength"]).float()
    sleeping |= (a == C.SLEEP) & (energy < top)
    wake = (energy >= top) & sleeping
    sleeping &= ~wake
    g.set_ach("wake_up", wake)
    resting |= (a == ACT["rest"]) & (health < max_health)
    resting &= ~((health >= max_health) | (food <= 0) | (drink <= 0))
    not_boss = (~g.fighting_boss()).int()
    decay = 1.0 - 0.125 * (dex - 1).float()
    rate = torch.where(sleeping, 0.5, 1.0) * decay
    for need, level, limit in (("player_hunger", food, 25), ("player_thirst", drink, 20)):
        x = s[need]
        x.add_(rate)
        over = x > limit
        level.copy_(torch.where(over, (level - not_boss).clamp(min=0), level))
        x.masked_fill_(over, 0.0)
    fatigue = s["player_fatigue"]
    fatigue.copy_(torch.where(sleeping, (fatigue - 1).clamp(max=0), fatigue + decay))
    tired, rested = fatigue > 30, fatigue < -10
    energy.copy_(torch.where(tired, (energy - not_boss).clamp(min=0), torch.where(
        rested, torch.minimum(energy + 1, top), energy)))
    fatigue.masked_fill_(tired | rested, 0.0)
    fine = (food > 0) & (drink > 0) & ((energy > 0) | sleeping)
    recover = s["player_recover"]
    recover.add_(torch.where(fine, torch.where(sleeping, 2.0, 1.0), torch.where(sleeping, -0.5, -1.0) * not_boss))
    up = recover > 25
    health.copy_(torch.where(up, torch.minimum(health + 1, max_health), health))
    recover.masked_fill_(up, 0.0)
    down = recover < -15
    health.copy_(torch.where(down, health - 1, health))
    recover.masked_fill_(down, 0.0)
    mana_coeff = 1.0 + 0.25 * (s["player_intelligence"] - 1).float()
    rm = s["player_recover_mana"]
    rm.copy_((rm + torch.where(sleeping, 2.0, 1.0)) * mana_coeff)
    more = rm > 30
    s["player_mana"].add_(more.int())
    rm.masked_fill_(more, 0.0)


def _clip(g: _Step) -> None:
    s = g.s
    for k in C.INVENTORY_SCALARS + ("armour", "potions"):
        s[f"inventory.{k}"].clamp_(max=99)
    dex = s["player_dexterity"]
    health = s["player_health"]
    health.copy_(torch.minimum(health.clamp(min=0.0), (8 + s["player_strength"]).float()))
    for k in ("player_food", "player_drink", "player_energy"):
        s[k].copy_(torch.minimum(s[k].clamp(min=0), 7 + 2 * dex))
    s["player_mana"].copy_(torch.minimum(s["player_mana"].clamp(min=0), 6 + 3 * s["player_intelligence"]))


def _inventory_achievements(g: _Step) -> None:
    s = g.s
    for k in ("wood", "stone", "coal", "iron", "diamond", "ruby", "sapphire", "sapling"):
        g.set_ach(f"collect_{k}", s[f"inventory.{k}"] > 0)
    g.set_ach("find_bow", s["inventory.bow"] > 0)
    g.set_ach("make_arrow", s["inventory.arrows"] > 0)
    g.set_ach("make_torch", s["inventory.torches"] > 0)
    for tool in ("pickaxe", "sword"):
        for level, name in enumerate(("wood", "stone", "iron", "diamond"), 1):
            g.set_ach(f"make_{name}_{tool}", s[f"inventory.{tool}"] >= level)
