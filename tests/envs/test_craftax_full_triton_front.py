"""The full game's front as Triton (``craftax_full.triton_front``) against the torch front
(``g = game._Step(s, t); game.front(g, a, d); g.write_back()``), byte for byte on the state's arena.

The states are env worlds edited so that each lane's action has something to act on: a lane
gets an action and a floor (0..8) at random, then the cells, items, mobs, inventory and stats
around its player are drawn so that the action's rule fires often and fails for each of its
reasons sometimes (ladders with and without the floor's monsters killed, every recipe with and
without its station and costs, DO on every block and on mobs of every class and type, chests
on every floor, placing on every kind of cell, full and free projectile slots, potions, books,
enchantment tables, level-ups, moves into walls, water, lava, mobs and off the map, sleeping
and resting players). Several steps are chained, the kernel's state fed on; each test asserts
that the rules it is about changed the state somewhere, so it cannot pass vacuously.

On a CPU the kernel runs in Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest.py
before Triton is imported), so the batches are small.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton", reason="the Triton front needs Triton (pip install triton)")

from env_testing import load_ref, ref_states  # noqa: E402

from noeira.core import get_backend, make_env  # noqa: E402
from noeira.envs.craftax_full import constants as C  # noqa: E402
from noeira.envs.craftax_full import game  # noqa: E402
from noeira.envs.craftax_full.state import (  # noqa: E402
    EXPORT_FIELDS,
    OFFSETS,
    STATE_FIELDS,
    State,
    empty_state,
    import_state,
    state_of,
)
from noeira.envs.craftax_full.triton_front import run_front  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
pytestmark = pytest.mark.usefixtures("one_thread")

DATA = Path(__file__).with_name("data") / "craftax_full_ref.npz"
W = C.MAP_SIZE
ACT = C.ACT
STEPS = ((0, -1), (0, 1), (-1, 0), (1, 0))  # directions 1..4 (left, right, up, down)
CRAFTS = [ACT[k] for k in ACT if k.startswith("make_")]
PLACES = [ACT[k] for k in ("place_stone", "place_table", "place_furnace", "place_plant", "place_torch")]


def _field_of(byte: int) -> str:
    for k, (shape, dtype) in STATE_FIELDS.items():
        if OFFSETS[k] <= byte < OFFSETS[k] + math.prod(shape) * dtype.itemsize:
            return k
    return "(padding)"


def _differing(x: torch.Tensor, y: torch.Tensor) -> list[str]:
    """The fields whose bytes differ somewhere between two arenas, with the first world they differ in."""
    rows, cols = (x != y).nonzero(as_tuple=True)
    seen: dict[str, int] = {}
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        seen.setdefault(_field_of(c), r)
    return [f"{k} (world {r})" for k, r in seen.items()]


def _check_torch_light(before: State, after: State) -> None:
    """Where a torch was placed on a dark floor, ``after``'s light map is the JAX reference's
    light: every cell of the 9 x 9 window on the map gets ``clip(torch_light + old, 0, 1)``, the
    cells of row / column 47 too (the torch code once lost them: a plain scatter over clamped
    indices wrote the old value back)."""
    light = C.torch_light_map()
    placed = (after["item_map"] != before["item_map"]).view(after.arena.shape[0], -1).any(1)
    for i in placed.nonzero().flatten().tolist():
        lvl = int(after["player_level"][i])
        if lvl not in C.DARK_LEVELS:
            continue
        diff = (after["item_map"][i, lvl] != before["item_map"][i, lvl]).nonzero()
        assert diff.shape[0] == 1
        bx, by = diff[0].tolist()
        want = before["light_map"][i, C.DARK_LEVELS.index(lvl)].clone()
        x0, x1, y0, y1 = max(bx - 4, 0), min(bx + 5, W), max(by - 4, 0), min(by + 5, W)
        window = light[x0 - bx + 4: x1 - bx + 4, y0 - by + 4: y1 - by + 4]
        want[x0:x1, y0:y1] = (window + want[x0:x1, y0:y1]).clamp(0.0, 1.0)
        got = after["light_map"][i, C.DARK_LEVELS.index(lvl)]
        assert torch.equal(got, want), f"world {i}: the torch code's torch light at ({bx}, {by}) is not JAX's"


def _reference(s: State, a: torch.Tensor, d: dict[str, torch.Tensor], tables: game.Tables) -> State:
    """The torch front on a copy of ``s`` (its torches' light checked against JAX's rule)."""
    ref = state_of(s.arena.clone())
    g = game._Step(ref, tables)
    game.front(g, a, d)
    g.write_back()
    _check_torch_light(s, ref)
    return ref


class Fired:
    """What the steps checked did: per field, the worlds a step changed it in; the achievements unlocked."""

    def __init__(self) -> None:
        self.fields: dict[str, int] = {k: 0 for k in STATE_FIELDS}
        self.achievements: set[str] = set()

    def add(self, before: State, after: State) -> None:
        n = before.arena.shape[0]
        for k in STATE_FIELDS:
            self.fields[k] += int((before[k].view(n, -1) != after[k].view(n, -1)).any(1).sum())
        got = (after["achievements"] & ~before["achievements"]).any(0)
        self.achievements |= {C.ACHIEVEMENTS[j] for j in got.nonzero().flatten().tolist()}

    def check(self, fields: tuple[str, ...] = (), achievements: tuple[str, ...] = ()) -> None:
        """Every field named changed somewhere, every achievement named was unlocked somewhere."""
        assert not [k for k in fields if self.fields[k] == 0], [k for k in fields if self.fields[k] == 0]
        assert set(achievements) <= self.achievements, set(achievements) - self.achievements


def _check_steps(s: State, actions: list[torch.Tensor], gen: torch.Generator, tables: game.Tables,
                 dev: torch.device, fired: Fired) -> None:
    """Chain the steps of ``actions`` on ``s`` (in place) through both fronts, the kernel on ``dev``
    and its state fed on, the arenas compared after each."""
    for k, action in enumerate(actions):
        d = game.sample_draws(s.arena.shape[0], gen, torch.device("cpu"))
        a = game.acting(s, action)
        before = state_of(s.arena.clone())
        ref = _reference(s, a, d, tables)
        got = state_of(s.arena.to(dev, copy=True))
        run_front(got, a.to(dev), {key: v.to(dev) for key, v in d.items()})
        s.arena.copy_(got.arena.cpu())
        assert torch.equal(s.arena, ref.arena), f"step {k}: differ in {_differing(s.arena, ref.arena)}"
        fired.add(before, s)


# -- the states ---------------------------------------------------------------------------------------
class Scene:
    """Edits world ``i`` of ``s`` so that its player, on floor ``lvl``, can take action ``act``."""

    def __init__(self, s: State, i: int, lvl: int, act: int, rng: random.Random) -> None:
        self.s, self.i, self.lvl, self.act, self.rng = s, i, lvl, act, rng

    def set(self, key: str, value: object) -> None:
        self.s[key][self.i] = value if not isinstance(value, list) else torch.tensor(value)

    def block(self, x: int, y: int, b: int) -> None:
        if 0 <= x < W and 0 <= y < W:
            self.s["map"][self.i, self.lvl, x, y] = b

    def item(self, x: int, y: int, it: int) -> None:
        if 0 <= x < W and 0 <= y < W:
            self.s["item_map"][self.i, self.lvl, x, y] = it

    def mob(self, group: str, slot: int, x: int, y: int, ty: int, health: float) -> None:
        s, i, lvl = self.s, self.i, self.lvl
        s[f"{group}.position"][i, lvl, slot] = torch.tensor([x, y])
        s[f"{group}.health"][i, lvl, slot] = health
        s[f"{group}.mask"][i, lvl, slot] = True
        s[f"{group}.type_id"][i, lvl, slot] = ty
        if 0 <= x < W and 0 <= y < W:
            s["mob_map"][i, lvl, x, y] = True

    def build(self) -> None:
        s, i, lvl, act, r = self.s, self.i, self.lvl, self.act, self.rng
        # the player: on floor lvl, mostly inside, now and then on an edge; facing a random way
        edge = r.random() < 0.2
        px = r.choice([0, 1, W - 2, W - 1]) if edge and r.random() < 0.5 else r.randrange(2, W - 2)
        py = r.choice([0, 1, W - 2, W - 1]) if edge and r.random() < 0.5 else r.randrange(2, W - 2)
        facing = r.randrange(1, 5)
        self.set("player_level", lvl)
        self.set("player_position", [px, py])
        self.set("player_direction", facing)
        bx, by = px + STEPS[facing - 1][0], py + STEPS[facing - 1][1]
        self.block(px, py, r.choice([C.PATH, C.GRASS, C.SAND]))
        self.item(px, py, C.ITEM_NONE)
        # inventory and stats: often what a rule needs, sometimes not enough, sometimes full
        for k in C.INVENTORY_SCALARS:
            self.set(f"inventory.{k}", r.choice([0, 1, 1, 2, 3, 4, 5, 9, 99]))
        self.set("inventory.pickaxe", r.randrange(0, 5))
        self.set("inventory.sword", r.randrange(0, 5))
        self.set("inventory.bow", r.randrange(0, 2))
        self.set("inventory.armour", [r.randrange(0, 3) for _ in range(4)])
        self.set("inventory.potions", [r.choice([0, 0, 1, 2]) for _ in range(6)])
        perm = list(range(6))
        r.shuffle(perm)
        self.set("potion_mapping", perm)
        self.set("player_health", r.choice([1.0, 2.5, 5.0, 9.0]))
        for k in ("player_food", "player_drink", "player_energy"):
            self.set(k, r.randrange(0, 10))
        enchanting = act in (ACT["enchant_sword"], ACT["enchant_armour"], ACT["enchant_bow"])
        self.set("player_mana", r.choice([8, 9, 12, 12]) if enchanting else r.choice([0, 1, 2, 8, 9, 12]))
        self.set("player_hunger", r.choice([0.0, 3.5, 24.0]))
        self.set("player_thirst", r.choice([0.0, 3.5, 19.0]))
        self.set("player_xp", r.choice([0, 1, 2]))
        for k in ("player_dexterity", "player_strength", "player_intelligence"):
            self.set(k, r.randrange(1, 6))
        self.set("learned_spells", [r.random() < 0.5, r.random() < 0.5])
        self.set("sword_enchantment", r.choice([0, 0, 1, 2]))
        self.set("bow_enchantment", r.choice([0, 0, 1, 2]))
        if enchanting:  # something to enchant, most of the time
            self.set("inventory.bow", r.choice([0, 1, 1]))
            self.set("inventory.sword", r.choice([0, 1, 2, 3]))
        kinds = [1, 2] if enchanting and r.random() < 0.4 else [0, 0, 1, 2]  # sometimes no bare armour piece
        self.set("armour_enchantments", [r.choice(kinds) for _ in range(4)])
        self.set("chests_opened", [r.random() < 0.3 for _ in range(C.NUM_LEVELS)])
        self.set("monsters_killed", [r.choice([0, 7, 8, 12]) for _ in range(C.NUM_LEVELS)])
        self.set("is_sleeping", r.random() < 0.05)
        self.set("is_resting", r.random() < 0.05)
        if lvl == C.BOSS_LEVEL:
            self.set("boss_progress", r.randrange(0, 9))
            self.set("boss_timesteps_to_spawn_this_round", r.choice([-2, 0, 0, 3]))
        # the player's projectiles on the floor: 0..3 slots taken
        taken = r.randrange(0, 4)
        for j in range(3):
            s["player_projectiles.mask"][i, lvl, j] = j < taken if r.random() < 0.7 else r.random() < 0.5
        # around the player: a table / furnace near (crafting), else plain ground
        for ox in (-1, 0, 1):
            for oy in (-1, 0, 1):
                if (ox, oy) not in ((0, 0), STEPS[facing - 1]):
                    self.block(px + ox, py + oy, r.choice([C.GRASS, C.PATH, C.STONE, C.WATER, C.LAVA]))
        if act in CRAFTS or r.random() < 0.1:
            cells = [(ox, oy) for ox in (-1, 0, 1) for oy in (-1, 0, 1) if (ox, oy) != (0, 0)]
            r.shuffle(cells)
            if r.random() < 0.8:
                self.block(px + cells[0][0], py + cells[0][1], C.CRAFTING_TABLE)
            if r.random() < 0.7:
                self.block(px + cells[1][0], py + cells[1][1], C.FURNACE)
        # the cell in front
        if act in (ACT["enchant_sword"], ACT["enchant_armour"], ACT["enchant_bow"]):
            front = r.choice([C.ENCHANTMENT_TABLE_FIRE, C.ENCHANTMENT_TABLE_ICE, C.ENCHANTMENT_TABLE_FIRE,
                              C.ENCHANTMENT_TABLE_ICE, C.STONE])
        elif act == C.DO and lvl == C.BOSS_LEVEL and r.random() < 0.6:
            front = C.NECROMANCER
        elif act == ACT["place_plant"] and r.random() < 0.6:
            front = C.GRASS
        elif act == ACT["place_torch"] and r.random() < 0.6:  # the blocks that hold an item
            front = r.choice(list(C.CAN_PLACE_ITEM_BLOCKS))
        elif act in PLACES or act in (C.LEFT, C.RIGHT, C.UP, C.DOWN):
            front = r.choice([C.GRASS, C.SAND, C.PATH, C.FIRE_GRASS, C.ICE_GRASS, C.WATER, C.LAVA, C.STONE,
                              C.TREE, C.WALL, C.GRASS, C.PATH])
        elif act == C.DO:  # every block; the ones with their own rules more often
            front = r.choice([r.randrange(0, C.NUM_BLOCKS), C.CHEST, C.WATER, C.FOUNTAIN, C.RIPE_PLANT, C.RUBY,
                              C.SAPPHIRE, C.DIAMOND, C.IRON, C.COAL, C.STONE, C.STALAGMITE, C.TREE, C.FIRE_TREE,
                              C.ICE_SHRUB, C.GRASS, C.GRASS, C.GRASS])
        else:
            front = r.choice([C.GRASS, C.PATH, C.STONE])
        self.block(bx, by, front)
        self.item(bx, by, r.choice([C.ITEM_NONE] * 6 + [C.ITEM_TORCH, C.ITEM_LADDER_DOWN]))
        # a ripe plant in front is a growing plant's cell
        if front == C.RIPE_PLANT:
            slot = r.randrange(0, C.MAX_GROWING_PLANTS)
            s["growing_plants_positions"][i, slot] = torch.tensor([bx, by])
            s["growing_plants_age"][i, slot] = r.randrange(0, 700)
            s["growing_plants_mask"][i, slot] = True
        if act == ACT["place_plant"]:  # all plant slots taken, all but the last, or some
            taken = r.choice([C.MAX_GROWING_PLANTS, C.MAX_GROWING_PLANTS - 1, r.randrange(0, C.MAX_GROWING_PLANTS)])
            s["growing_plants_mask"][i] = torch.arange(C.MAX_GROWING_PLANTS) < taken
        # ladders: under the player when changing floors
        if act in (ACT["descend"], ACT["ascend"]):
            self.item(px, py, r.choice([C.ITEM_LADDER_DOWN, C.ITEM_LADDER_UP, C.ITEM_NONE]))
        # mobs: one in front (of any class and type; weak ones die), others around on the floor
        if r.random() < (0.4 if act == C.DO else 0.15):
            groups = ["melee_mobs", "passive_mobs", "ranged_mobs"]
            r.shuffle(groups)
            for group in groups[:r.choice([1, 1, 1, 2, 3])]:  # now and then mobs of two or three classes there
                count = 2 if group == "ranged_mobs" else 3
                self.mob(group, r.randrange(0, count), bx, by, r.randrange(0, 8),
                         r.choice([0.5, 1.0, 2.0, 3.0, 30.0]))
        if lvl == C.BOSS_LEVEL and r.random() < 0.5:
            for group in ("melee_mobs", "ranged_mobs"):
                s[f"{group}.mask"][i, lvl] = False


def _run(dev: torch.device, n: int, rounds: int, steps: int, seed: int, actions, then=None) -> Fired:  # noqa: ANN001
    """``rounds`` of: every world's scene made for its action and floor (``actions(rng)`` -> (action,
    floor); ``then(scene)`` edits it further), then ``steps`` chained steps, the first of that
    action, the later ones of it or now and then of another."""
    env = make_env("craftax", num_envs=n, backend=get_backend("cpu"), seed=seed, obs="compact")
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    fired = Fired()
    for _ in range(rounds):
        base = torch.zeros(n, dtype=torch.int64)
        for i in range(n):
            act, lvl = actions(rng)
            scene = Scene(env.s, i, lvl, act, rng)
            scene.build()
            if then is not None:
                then(scene)
            base[i] = act
        acts = [base] + [torch.where(torch.rand(n, generator=gen) < 0.3,
                                     torch.randint(0, C.NUM_ACTIONS, (n,), generator=gen), base)
                         for _ in range(steps - 1)]
        _check_steps(env.s, acts, gen, env.tables, dev, fired)
    return fired


def _on(acts: list[int], floors: list[int] | None = None):  # noqa: ANN202
    """A scene maker's draw: one of ``acts`` on one of ``floors`` (every floor when None)."""
    return lambda rng: (rng.choice(acts), rng.choice(floors) if floors else rng.randrange(0, C.NUM_LEVELS))


MOVES = [C.NOOP, C.LEFT, C.RIGHT, C.UP, C.DOWN]


@pytest.mark.parametrize("device", DEVICES)
def test_every_action_on_every_floor(device: str, kernel_device) -> None:  # noqa: ANN001
    """Each of the 43 actions on every floor, in scenes made for it, sleeping and resting players
    among them (their action becomes NOOP): the same arena as the torch front."""
    fired = _run(kernel_device(device), 86, 2, 3, 0, _on(list(range(C.NUM_ACTIONS))))
    fired.check(fields=("player_position", "player_direction", "map", "player_xp"))


@pytest.mark.parametrize("device", DEVICES)
def test_floor_changes_and_crafting(device: str, kernel_device) -> None:  # noqa: ANN001
    """Ladders down (with and without the floor's monsters killed) and up, on every floor; every
    recipe with and without its station and costs."""
    fired = _run(kernel_device(device), 64, 3, 2, 1, _on([ACT["descend"], ACT["ascend"], *CRAFTS]))
    fired.check(fields=("player_level", "player_position", "player_xp", "inventory.wood", "inventory.stone",
                        "inventory.iron", "inventory.coal", "inventory.diamond", "inventory.pickaxe",
                        "inventory.sword", "inventory.armour", "inventory.arrows", "inventory.torches"),
                achievements=("enter_dungeon", "enter_gnomish_mines", "make_iron_armour", "make_diamond_armour"))


@pytest.mark.parametrize("device", DEVICES)
def test_do_on_blocks_mobs_chests_and_the_necromancer(device: str, kernel_device) -> None:  # noqa: ANN001
    """DO on every block kind, on mobs of every class and type (some die, passive ones are eaten),
    chests on every floor (the loot's variates drawn afresh each step), the necromancer."""
    fired = _run(kernel_device(device), 128, 4, 2, 2, _on([C.DO], [0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1, 3, 4, 8]))
    fired.check(fields=("map", "mob_map", "monsters_killed", "chests_opened", "boss_progress", "player_drink",
                        "player_thirst", "player_food", "player_hunger", "growing_plants_age", "inventory.wood",
                        "inventory.stone", "inventory.coal", "inventory.iron", "inventory.diamond",
                        "inventory.sapphire", "inventory.ruby", "inventory.sapling", "inventory.torches",
                        "inventory.arrows", "inventory.potions", "melee_mobs.health", "melee_mobs.mask",
                        "passive_mobs.health", "passive_mobs.mask", "ranged_mobs.health", "ranged_mobs.mask"),
                achievements=("collect_drink", "eat_plant", "open_chest", "damage_necromancer", "eat_cow",
                              "defeat_zombie", "defeat_skeleton"))


def _facing_a_chest(scene: Scene) -> None:
    """The player awake, facing a chest on the map, nothing in the way; the bow not found yet."""
    s, i = scene.s, scene.i
    x, y = s["player_position"][i].tolist()
    if not (0 < x < W - 1 and 0 < y < W - 1):
        x, y = 5, 5
        scene.set("player_position", [x, y])
    dx, dy = STEPS[int(s["player_direction"][i]) - 1]
    scene.block(x + dx, y + dy, C.CHEST)
    s["mob_map"][i, scene.lvl, x + dx, y + dy] = False
    for group in ("melee_mobs", "passive_mobs", "ranged_mobs"):
        s[f"{group}.mask"][i, scene.lvl] = False
    scene.set("is_sleeping", False)
    scene.set("is_resting", False)
    scene.set("inventory.bow", 0)
    scene.set("inventory.pickaxe", scene.rng.randrange(0, 3))
    scene.set("inventory.sword", scene.rng.randrange(0, 3))


@pytest.mark.parametrize("device", DEVICES)
def test_chests_on_every_floor(device: str, kernel_device) -> None:  # noqa: ANN001
    """Chests opened on every floor, opened before or not: the loot (torches, ores, potions,
    arrows, tools; a bow on floor 1 and books on floors 3 and 4 from a chest not opened before)
    from the variates drawn afresh each step."""
    fired = _run(kernel_device(device), 72, 2, 1, 6, _on([C.DO]), _facing_a_chest)
    fired.check(fields=("map", "chests_opened", "inventory.torches", "inventory.coal", "inventory.iron",
                        "inventory.diamond", "inventory.sapphire", "inventory.ruby", "inventory.potions",
                        "inventory.arrows", "inventory.pickaxe", "inventory.sword", "inventory.books",
                        "inventory.bow"),
                achievements=("open_chest",))


@pytest.mark.parametrize("device", DEVICES)
def test_placing(device: str, kernel_device) -> None:  # noqa: ANN001
    """Placing every placeable thing on every kind of cell (a mob or the map's edge in the way
    sometimes), torches on dark and bright floors, saplings with and without a free plant slot."""
    fired = _run(kernel_device(device), 64, 3, 2, 3, _on(PLACES, [0, 2, 5, 7, 8, 1]))
    fired.check(fields=("map", "item_map", "light_map", "growing_plants_positions", "growing_plants_mask",
                        "inventory.wood", "inventory.stone", "inventory.torches", "inventory.sapling"),
                achievements=("place_table", "place_furnace", "place_stone", "place_torch", "place_plant"))


def _torch_at_a_far_edge(scene: Scene) -> None:
    """The player awake, placing a torch on grass within four cells of row or column 47."""
    s, i, r = scene.s, scene.i, scene.rng
    far = [W - 4, W - 3, W - 2, W - 1]
    bx, by = (r.choice(far), r.randrange(0, W)) if r.random() < 0.5 else (r.randrange(0, W), r.choice(far))
    if r.random() < 0.3:
        bx, by = r.choice(far), r.choice(far)
    facing = 4 if bx > 0 else 3  # the player above the cell, facing down (or below it, facing up)
    px, py = bx - STEPS[facing - 1][0], by
    scene.set("player_position", [px, py])
    scene.set("player_direction", facing)
    scene.block(bx, by, C.GRASS)
    scene.item(bx, by, C.ITEM_NONE)
    s["mob_map"][i, scene.lvl, bx, by] = False
    scene.set("inventory.torches", 3)
    scene.set("is_sleeping", False)
    scene.set("is_resting", False)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_light_at_the_far_edges(device: str, kernel_device) -> None:  # noqa: ANN001
    """Torches placed near row / column 47 of the dark floors light every cell of their window on
    the map, the edge's cells too, as the JAX reference does: ``_check_torch_light`` holds the torch
    code to that rule, and the kernel is held to the torch code."""
    fired = _run(kernel_device(device), 48, 2, 1, 7, _on([ACT["place_torch"]], list(C.DARK_LEVELS)),
                 _torch_at_a_far_edge)
    fired.check(fields=("item_map", "light_map", "inventory.torches"), achievements=("place_torch",))


@pytest.mark.parametrize("device", DEVICES)
def test_projectiles_potions_books_enchanting_and_levels(device: str, kernel_device) -> None:  # noqa: ANN001
    """Arrows and spells with full and free projectile slots, the six potions, books, enchanting
    the bow, the sword and armour at fire and ice tables, level-ups, the boss floor's clock."""
    acts = [ACT[k] for k in ACT if k.startswith(("shoot", "cast", "drink", "read", "enchant", "level_up"))]
    fired = _run(kernel_device(device), 96, 3, 2, 4, _on(acts, [0, 1, 3, 8]))
    fired.check(fields=("player_projectiles.position", "player_projectiles.mask", "player_projectiles.type_id",
                        "player_projectile_directions", "inventory.arrows", "player_mana", "player_health",
                        "player_energy", "inventory.potions", "learned_spells", "inventory.books",
                        "sword_enchantment", "bow_enchantment", "armour_enchantments", "inventory.ruby",
                        "inventory.sapphire", "player_dexterity", "player_strength", "player_intelligence",
                        "player_xp", "boss_timesteps_to_spawn_this_round"),
                achievements=("fire_bow", "cast_fireball", "cast_iceball", "drink_potion", "learn_fireball",
                              "learn_iceball", "enchant_sword", "enchant_armour", "defeat_necromancer"))


@pytest.mark.parametrize("device", DEVICES)
def test_moves(device: str, kernel_device) -> None:  # noqa: ANN001
    """Moves onto ground and into walls, water, lava, mobs and off the map's edges; sleeping and
    resting players stand still."""
    fired = _run(kernel_device(device), 64, 3, 3, 5, _on(MOVES + [C.SLEEP, ACT["rest"]]))
    fired.check(fields=("player_position", "player_direction"))


@pytest.mark.parametrize("device", DEVICES)
def test_front_on_the_reference_states(device: str, kernel_device) -> None:  # noqa: ANN001
    """The JAX reference's prepared and rollout states (every floor, the boss fight, mobs and
    projectiles around the player, chests, torches), three chained steps of random actions."""
    ref = load_ref(DATA)
    parts = []
    for prefix in ("obs_state.", "step_start."):
        leaves = ref_states(ref, prefix, EXPORT_FIELDS)
        part = empty_state(leaves["map"].shape[0], "cpu")
        import_state(leaves, part)
        parts.append(part.arena)
    s = state_of(torch.cat(parts))
    assert set(s["player_level"].tolist()) == set(range(C.NUM_LEVELS))
    n = s.arena.shape[0]
    env = make_env("craftax", num_envs=1, backend=get_backend("cpu"), seed=0, obs="compact")
    gen = torch.Generator().manual_seed(8)
    fired = Fired()
    _check_steps(s, [torch.randint(0, C.NUM_ACTIONS, (n,), generator=gen) for _ in range(3)], gen, env.tables,
                 kernel_device(device), fired)
    fired.check(fields=("player_position", "player_direction", "map", "achievements"))


@pytest.mark.parametrize("device", DEVICES)
def test_front_then_tail_is_the_torch_step(device: str, kernel_device) -> None:  # noqa: ANN001
    """The two halves as Triton, one after the other on the arena (``run_front``, ``run_tail``), then
    ``game.finish``: the torch step's state and reward, over chained steps of the scenes' actions."""
    from noeira.envs.craftax_full.triton_tail import run_tail

    dev = kernel_device(device)
    n = 64
    env = make_env("craftax", num_envs=n, backend=get_backend("cpu"), seed=9, obs="compact")
    rng = random.Random(9)
    gen = torch.Generator().manual_seed(9)
    actions = _on(list(range(C.NUM_ACTIONS)))
    tables = game.Tables(dev, env.tables.light)
    s = env.s
    fired = Fired()
    for _ in range(2):
        for i in range(n):
            act, lvl = actions(rng)
            Scene(s, i, lvl, act, rng).build()
        for _ in range(3):
            action = torch.randint(0, C.NUM_ACTIONS, (n,), generator=gen)
            d = game.sample_draws(n, gen, torch.device("cpu"))
            before = state_of(s.arena.clone())
            want = state_of(s.arena.clone())
            reward, done = game.step(want, action, d, env.tables)
            got = state_of(s.arena.to(dev, copy=True))
            a = game.acting(got, action.to(dev))
            init_ach, init_health = got["achievements"].clone(), got["player_health"].clone()
            dd = {key: v.to(dev) for key, v in d.items()}
            run_front(got, a, dd)
            run_tail(got, a, dd)
            got_reward, got_done = game.finish(got, tables, init_ach, init_health)
            s.arena.copy_(got.arena.cpu())
            _check_torch_light(before, want)  # (the tail leaves the light and item maps alone)
            assert torch.equal(s.arena, want.arena), _differing(s.arena, want.arena)
            assert torch.equal(got_reward.cpu(), reward) and torch.equal(got_done.cpu(), done)
            fired.add(before, s)
    fired.check(fields=("player_position", "map", "player_food", "player_health"))


def test_run_front_checks_its_inputs() -> None:
    s = empty_state(2, "cpu")
    d = game.sample_draws(2, torch.Generator().manual_seed(0), torch.device("cpu"))
    with pytest.raises(ValueError, match="run_front"):
        run_front(s, torch.zeros(2, dtype=torch.int32), d)
