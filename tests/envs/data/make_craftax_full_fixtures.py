"""Regenerate the JAX reference fixtures of ``tests/envs/test_craftax_full.py`` (craftax 1.6.1,
``craftax.craftax``, CPU jax)::

    python tests/envs/data/make_craftax_full_fixtures.py [gen,obs,steps,stats,roll,tables]

Writes ``craftax_full_ref.npz`` next to this file (the parts named are remade, the others kept):

- ``gen_*``: worlds generated with their random inputs recorded, in the layout of
  ``noeira.envs.craftax_full.worldgen.sample_world_draws``, and the reference's worlds;
- ``obs_*``: states on every floor (from reference rollouts, the player moved to each floor, mobs,
  projectiles, torches, darkness) and the reference's symbolic observation of each;
- ``step_*``: single reference steps (every one of the 43 actions from prepared states on every
  floor, and short random trajectories), the reference's random draws recorded in the layout of
  ``noeira.envs.craftax_full.game``'s ``draws``, so our step replays the same randomness;
- ``stats_*``: summary statistics of 1,000 reference worlds per floor (50 batches of 20);
- ``roll_*``: statistics of random-policy rollouts;
- ``tables_*``: the reference's lookup tables (rewards, mobs per floor and type, blocks).

All parts take ~1 h on a loaded 2-core machine (XLA compiles the vmapped world generation and
rollouts slowly); ``tables`` takes seconds.

The draws are recorded by wrapping ``jax.random.uniform / choice / randint / permutation`` so each
outermost call reports its output through an ordered ``jax.debug.callback`` while the jitted
reference runs (one compile, then milliseconds per step). States are stored with uint8 maps
(block and item ids fit) and the light map of every floor.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from craftax.craftax import game_logic
from craftax.craftax.constants import TORCH_LIGHT_MAP
from craftax.craftax.craftax_state import EnvParams, EnvState, Inventory, Mobs, StaticEnvParams
from craftax.craftax.world_gen import world_gen as wg
from craftax.craftax.world_gen.world_gen_configs import ALL_DUNGEON_CONFIGS, ALL_SMOOTHGEN_CONFIGS

OUT = pathlib.Path(__file__).with_name("craftax_full_ref.npz")
PARAMS, STATIC = EnvParams(), StaticEnvParams()
W = 48
MOB_GROUPS = ("melee_mobs", "passive_mobs", "ranged_mobs", "mob_projectiles", "player_projectiles")
MOB_FIELDS = ("position", "health", "mask", "attack_cooldown", "type_id")
INVENTORY = [f.name for f in dataclasses.fields(Inventory)]


# -- EnvState <-> flat leaves ------------------------------------------------------------------------
def to_leaves(state: EnvState) -> dict[str, np.ndarray]:
    out = {}
    for f in dataclasses.fields(EnvState):
        v = getattr(state, f.name)
        if f.name in ("state_rng", "fractal_noise_angles"):
            continue
        if f.name == "inventory":
            out.update({f"inventory.{k}": np.asarray(getattr(v, k)) for k in INVENTORY})
        elif f.name in MOB_GROUPS:
            out.update({f"{f.name}.{k}": np.asarray(getattr(v, k)) for k in MOB_FIELDS})
        elif f.name in ("map", "item_map"):
            out[f.name] = np.asarray(v).astype(np.uint8)
        else:
            out[f.name] = np.asarray(v)
    return out


def from_leaves(d: dict[str, np.ndarray]) -> EnvState:
    kw = {}
    for f in dataclasses.fields(EnvState):
        if f.name == "state_rng":
            kw[f.name] = jnp.zeros((*np.shape(d["player_level"]), 2), jnp.uint32)
        elif f.name == "fractal_noise_angles":
            continue
        elif f.name == "inventory":
            kw[f.name] = Inventory(**{k: jnp.asarray(d[f"inventory.{k}"], dtype=jnp.int32) for k in INVENTORY})
        elif f.name in MOB_GROUPS:
            kw[f.name] = Mobs(**{k: jnp.asarray(d[f"{f.name}.{k}"]) for k in MOB_FIELDS})
        elif f.name in ("map", "item_map"):
            kw[f.name] = jnp.asarray(d[f.name], dtype=jnp.int32)
        else:
            kw[f.name] = jnp.asarray(d[f.name])
    return EnvState(**kw)


def stack(items: list[dict[str, np.ndarray]], prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}{k}": np.stack([it[k] for it in items]) for k in items[0]}


# -- recording the reference's random draws ---------------------------------------------------------
class Recorder:
    """While active, every outermost ``jax.random.uniform / choice / randint / permutation`` call
    reports ``(kind, output, p)`` through an ordered debug callback into ``log`` (in jitted code
    too: the values arrive as the program runs)."""

    NAMES = ("uniform", "choice", "randint", "permutation")
    sink: list[tuple[str, np.ndarray, np.ndarray | None]] = []
    """Where the callbacks write: one list for every recorder, since a compiled program keeps the
    callbacks it was traced with (and runs them on later calls too)."""

    def __init__(self) -> None:
        Recorder.sink.clear()
        self.log = Recorder.sink
        self._orig = {n: getattr(jax.random, n) for n in self.NAMES}
        self._depth = 0

    def _wrap(self, name: str):  # noqa: ANN202
        f = self._orig[name]

        def g(*a, **k):  # noqa: ANN002, ANN003, ANN202
            self._depth += 1
            out = f(*a, **k)
            self._depth -= 1
            if self._depth == 0:
                p = k.get("p")
                has_p = p is not None
                def log(o, pp):  # noqa: ANN001, ANN202
                    Recorder.sink.append((name[0], np.asarray(o), np.asarray(pp) if has_p else None))

                jax.debug.callback(log, out, p if has_p else jnp.zeros(()), ordered=True)
            return out

        return g

    def __enter__(self) -> Recorder:
        for n in self.NAMES:
            setattr(jax.random, n, self._wrap(n))
        return self

    def __exit__(self, *exc: object) -> None:
        jax.effects_barrier()  # the callbacks of the programs run so far have all arrived
        for n in self.NAMES:
            setattr(jax.random, n, self._orig[n])


def rank_u(idx: np.ndarray | int, p: np.ndarray) -> float:
    """A uniform that our ``pick`` turns into the same choice: the middle of the chosen cell's
    interval among the valid ones (0.5 when none is valid: the choice is then index 0 either way)."""
    valid = np.nan_to_num(np.asarray(p, dtype=np.float64).reshape(-1)) > 0
    count = int(valid.sum())
    if count == 0:
        return 0.5
    i = int(np.asarray(idx).reshape(-1)[0])
    assert valid[i], "the reference chose a cell our rule never picks"
    return (int(valid[:i].sum()) + 0.5) / count


def index_u(value: int, low: int, high: int) -> float:
    """A uniform whose ``low + floor(u * (high - low))`` is ``value`` (a randint in [low, high))."""
    return (value - low + 0.5) / (high - low)


# -- world generation -------------------------------------------------------------------------------
_SMOOTH_GEN = None
_DUNGEON_GEN = None


def _floor_fns():  # noqa: ANN202
    global _SMOOTH_GEN, _DUNGEON_GEN
    if _SMOOTH_GEN is None:
        pos = jnp.array([W // 2, W // 2])
        _SMOOTH_GEN = jax.jit(lambda key, i: wg.generate_smoothworld(
            key, STATIC, pos, jax.tree.map(lambda x: x[i], ALL_SMOOTHGEN_CONFIGS), PARAMS), static_argnums=1)
        _DUNGEON_GEN = jax.jit(lambda key, i: wg.generate_dungeon(
            key, STATIC, jax.tree.map(lambda x: x[i], ALL_DUNGEON_CONFIGS)), static_argnums=1)
    return _SMOOTH_GEN, _DUNGEON_GEN


_WORLD = jax.jit(lambda key: wg.generate_world(key, PARAMS, STATIC))


def recorded_world(key: jax.Array) -> dict[str, np.ndarray]:
    """The draws of ``generate_world(key)`` in our layout, and the world it makes."""
    smooth_gen, dungeon_gen = _floor_fns()
    rngs = jax.random.split(key, 7)
    rng, smooth_keys = rngs[0], rngs[1:]
    rngs = jax.random.split(rng, 4)
    rng, dungeon_keys = rngs[0], rngs[1:]
    out: dict[str, list] = {k: [] for k in ("angles_water", "angles_mountain", "angles_path", "angles_tree", "u_tree",
                                             "u_ore", "u_ladder")}
    for i in range(6):
        with Recorder() as rec:
            jax.block_until_ready(smooth_gen(smooth_keys[i], i))
        kinds = "".join(x[0] for x in rec.log)
        assert kinds == "uuuuu" + "u" * 5 + "ccc", (kinds, [x[1].shape for x in rec.log])
        lg = rec.log
        for j, name in enumerate(("angles_water", "angles_mountain", "angles_path", "angles_tree", "u_tree")):
            out[name].append(lg[j][1])
        out["u_ore"].append(np.stack([lg[5 + j][1] for j in range(5)]))
        out["u_ladder"].append(np.array([rank_u(lg[11][1], lg[11][2]), rank_u(lg[12][1], lg[12][2])], np.float32))
    dkeys = ("u_chunk", "room_size", "room_offset", "u_chest", "u_fountain_pos", "u_fountain", "u_sink", "u_rare",
             "u_ladder")
    dout: dict[str, list] = {k: [] for k in dkeys}
    for i in range(3):
        with Recorder() as rec:
            jax.block_until_ready(dungeon_gen(dungeon_keys[i], i))
        lg = rec.log
        kinds = "".join(x[0] for x in lg)
        assert kinds == "r" + "crrru" * 8 + "c" * 8 + "ccc", kinds
        size = lg[0][1]
        free = np.ones(9)
        u_chunk, offset, u_chest, u_fpos, u_f = [], [], [], [], []
        for r in range(8):
            c, off, chest, fpos, flag = lg[1 + 5 * r : 6 + 5 * r]
            u_chunk.append(rank_u(c[1], free))
            free[int(c[1])] = 0
            offset.append(off[1])
            u_chest.append([index_u(int(chest[1][j]), 1, int(size[r, j]) - 1) for j in range(2)])
            u_fpos.append([index_u(int(fpos[1][j]), 1, int(size[r, j]) - 1) for j in range(2)])
            u_f.append(flag[1])
        included = np.zeros(8)
        included[-1] = 1
        u_sink = []
        for r in range(8):
            c = lg[41 + r]
            u_sink.append(rank_u(c[1], included))
            included[r] = 1
        rare = lg[49][1]
        dout["u_chunk"].append(np.array(u_chunk, np.float32))
        dout["room_size"].append(size.astype(np.int64))
        dout["room_offset"].append(np.stack(offset).astype(np.int64))
        dout["u_chest"].append(np.array(u_chest, np.float32))
        dout["u_fountain_pos"].append(np.array(u_fpos, np.float32))
        dout["u_fountain"].append(np.array(u_f, np.float32))
        dout["u_sink"].append(np.array(u_sink, np.float32))
        dout["u_rare"].append(np.where(rare, 0.05, 0.5).astype(np.float32))
        dout["u_ladder"].append(np.array([rank_u(lg[50][1], lg[50][2]), rank_u(lg[51][1], lg[51][2])], np.float32))
    perm = np.asarray(jax.random.permutation(jax.random.split(rng)[1], jnp.arange(6)))
    u_potion = np.zeros(6, np.float32)
    u_potion[perm] = (np.arange(6) + 0.5) / 6
    draws = {k: np.stack(v) for k, v in out.items()}
    draws.update({f"dungeon_{k}": np.stack(v) for k, v in dout.items()})
    draws["u_potion"] = u_potion
    world = to_leaves(_WORLD(key))
    draws.update({f"world.{k}": v for k, v in world.items()})
    return draws


# -- reference steps with their draws -----------------------------------------------------------------
DIR4 = [(0, -1), (0, 1), (-1, 0), (1, 0)]
ORE_MID = (0.15, 0.45, 0.675, 0.8125, 0.9375)  # the middle of each ore's interval of our inverse CDF
TOOL_MID = (0.2, 0.55, 0.8, 0.95)
NUM_U = 33


def _dir_index(v: np.ndarray) -> int:
    t = tuple(int(x) for x in np.asarray(v).reshape(-1)[:2])
    return DIR4.index(t) if t in DIR4 else 4  # passive mobs: the four still moves are alike


def _axis_u(idx: np.ndarray) -> float:
    return 0.25 if int(np.asarray(idx).reshape(-1)[0]) == 0 else 0.75


def step_draws(log: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """The 45 draws of one ``craftax_step`` as our ``u`` [33] and ``dirs`` [8]."""
    kinds = "".join(x[0] for x in log)
    assert kinds == "uurucrrrrrurrururcc" + "cc" + "ccu" * 3 + "ccc" + "ccu" * 2 + "ucucuc", kinds
    v = [x[1] for x in log]
    u = np.zeros(NUM_U, np.float32)
    dirs = np.zeros(8, np.int64)
    u[0], u[1], u[3], u[6], u[9], u[11] = v[0], v[1], v[3], v[10], v[13], v[15]
    u[2] = index_u(int(v[2]), 4, 8)
    ore = int(v[4])
    u[4] = ORE_MID[ore]
    u[5] = index_u(int(v[5]), 1, 4) if ore == 0 else index_u(int(v[6]), 1, 3) if ore == 1 else 0.5
    u[7] = index_u(int(v[11]), 0, 6)
    u[8] = index_u(int(v[12]), 1, 3)
    u[10] = index_u(int(v[14]), 1, 5)
    u[12] = index_u(int(v[16]), 0, 2)
    u[13] = TOOL_MID[int(v[17]) - 1]
    u[14] = TOOL_MID[int(v[18]) - 1]
    u[15] = rank_u(v[19], log[19][2])
    u[16] = rank_u(v[20], log[20][2])
    for i in range(3):
        dirs[i] = _dir_index(v[21 + 3 * i])
        u[17 + i] = _axis_u(v[22 + 3 * i])
        u[20 + i] = v[23 + 3 * i]
        dirs[3 + i] = _dir_index(v[30 + i])
    for i in range(2):
        dirs[6 + i] = _dir_index(v[33 + 3 * i])
        u[23 + i] = _axis_u(v[34 + 3 * i])
        u[25 + i] = v[35 + 3 * i]
    for k in range(3):
        u[27 + k] = v[39 + 2 * k]
        u[30 + k] = rank_u(v[40 + 2 * k], log[40 + 2 * k][2])
    return u, dirs


_STEP = jax.jit(lambda key, state, action: (lambda s, r: (s, r, game_logic.is_game_over(s, PARAMS, STATIC)))(
    *game_logic.craftax_step(key, state, action, PARAMS, STATIC)))
_RECORDED_STEP = jax.jit(lambda key, state, action: (lambda s, r: (s, r, game_logic.is_game_over(s, PARAMS, STATIC)))(
    *game_logic.craftax_step(key, state, action, PARAMS, STATIC)))
"""The same as ``_STEP``, only ever run under a ``Recorder`` (so it is traced with the callbacks)."""
_LIGHT = jax.jit(lambda t: game_logic.calculate_light_level(t, PARAMS))


def recorded_step(key: jax.Array, leaves: dict[str, np.ndarray], action: int) -> dict:
    """One reference step (jitted) with its draws."""
    with Recorder() as rec:
        state, reward, done = _RECORDED_STEP(key, from_leaves(leaves), action)
        jax.block_until_ready(reward)
    u, dirs = step_draws(rec.log)
    return {"u": u, "dirs": dirs, "reward": np.float32(reward), "done": np.bool_(done), "next": to_leaves(state)}


# -- states to start from ---------------------------------------------------------------------------
def rollout_states(seed: int, num_envs: int, steps: int, every: int) -> list[dict[str, np.ndarray]]:
    """States along random-policy rollouts of the reference, one per ``every`` steps per env."""
    from craftax.craftax.envs.craftax_symbolic_env import CraftaxSymbolicEnv

    env = CraftaxSymbolicEnv()
    key = jax.random.PRNGKey(seed)
    key, k0 = jax.random.split(key)
    _, state = jax.vmap(env.reset, (0, None))(jax.random.split(k0, num_envs), PARAMS)

    @jax.jit
    def run(key, state):  # noqa: ANN001, ANN202
        def body(carry, _):  # noqa: ANN001, ANN202
            key, state = carry
            key, ka, ks = jax.random.split(key, 3)
            action = jax.random.randint(ka, (num_envs,), 0, 43)
            _, state, _, _, _ = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(ks, num_envs), state, action, PARAMS)
            return (key, state), state

        return jax.lax.scan(body, (key, state), None, length=steps)[1]

    traj = run(key, state)
    return [to_leaves(jax.tree.map(lambda x: x[t, e], traj)) for t in range(every - 1, steps, every)  # noqa: B023
            for e in range(num_envs)]


SOLID = {4, 5, 8, 9, 10, 11, 12, 15, 16, 17, 19, 20, 21, 22, 23, 24, 28, 30, 31, 32, 33, 34, 35}
FLOOR_TYPES = ((0, 0, 0), (2, 2, 2), (1, 1, 1), (2, 3, 3), (2, 4, 4), (1, 5, 5), (1, 6, 6), (1, 7, 7), (0, 0, 0))
HEALTH = ((3, 5, 3), (4, 7, 5), (6, 9, 6), (8, 11, 8), (0, 12, 12), (0, 20, 4), (0, 20, 14), (0, 24, 16))
FACING = {  # blocks worth facing on each floor (beside those of the floor itself)
    0: [2, 3, 4, 5, 8, 9, 10, 16, 13, 14, 7, 23],
    1: [7, 23, 24, 17, 19, 4, 8],
    2: [4, 20, 8, 9, 10, 21, 22, 3, 14, 7],
    3: [31, 23, 3, 17, 7],
    4: [30, 23, 24, 17, 7],
    5: [4, 20, 21, 22, 10, 3, 14],
    6: [28, 25, 14, 4, 8, 22, 13],
    7: [29, 26, 3, 4, 21, 10],
    8: [32, 33, 34, 35, 17, 7],
}


def prepared(leaves: dict[str, np.ndarray], level: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A state on ``level`` with a lot going on: the player at that floor's ladder up, a random
    inventory, attributes, spells, enchantments, intrinsics, a table and furnace beside the player
    now and then, an interesting block in front, mobs of every class (the floor's types) and
    projectiles around, torches, sometimes asleep or resting, and on the graveyard a boss fight in
    some phase."""
    d = {k: np.array(v) for k, v in leaves.items()}
    d["player_level"] = np.int32(level)
    pos = d["up_ladders"][level].copy() if level > 0 else d["player_position"].copy()
    if rng.random() < 0.15:  # near an edge
        pos = np.array([rng.choice([0, 1, 46, 47]), rng.integers(0, 48)], np.int32)
    pos = pos.astype(np.int32)
    d["player_position"] = pos
    m, items, mob = d["map"][level], d["item_map"][level], d["mob_map"][level]
    px, py = int(pos[0]), int(pos[1])
    if m[px, py] in SOLID or m[px, py] in (3, 14):
        m[px, py] = 7
    for k in INVENTORY:
        if k == "armour":
            d["inventory.armour"] = rng.integers(0, 3, 4).astype(np.int32) * (rng.random() < 0.6)
        elif k == "potions":
            d["inventory.potions"] = (rng.integers(0, 4, 6) * (rng.random(6) < 0.6)).astype(np.int32)
        elif k in ("pickaxe", "sword"):
            d[f"inventory.{k}"] = np.int32(rng.integers(0, 5))
        elif k == "bow":
            d[f"inventory.{k}"] = np.int32(rng.random() < 0.5)
        else:
            d[f"inventory.{k}"] = np.int32(rng.integers(0, 12) if rng.random() < 0.7 else 0)
    for k in ("player_food", "player_drink", "player_energy"):
        d[k] = np.int32(rng.integers(0, 10))
    d["player_mana"] = np.int32(rng.integers(0, 13))
    d["player_health"] = np.float32(rng.integers(1, 10) - 0.5 * rng.integers(0, 2) - 0.3 * (rng.random() < 0.3))
    d["player_xp"] = np.int32(rng.integers(0, 3))
    for k in ("player_dexterity", "player_strength", "player_intelligence"):
        d[k] = np.int32(rng.integers(1, 6))
    for k, hi in (("player_recover", 25), ("player_hunger", 25), ("player_thirst", 20), ("player_fatigue", 30),
                  ("player_recover_mana", 30)):
        d[k] = np.float32(rng.integers(-20, 2 * hi + 1) / 2)
    d["is_sleeping"] = np.bool_(rng.random() < 0.15)
    d["is_resting"] = np.bool_(not d["is_sleeping"] and rng.random() < 0.1)
    d["player_direction"] = np.int32(rng.integers(1, 5))
    d["learned_spells"] = rng.random(2) < 0.5
    d["sword_enchantment"] = np.int32(rng.integers(0, 3))
    d["bow_enchantment"] = np.int32(rng.integers(0, 3))
    d["armour_enchantments"] = (rng.integers(0, 3, 4) * (rng.random(4) < 0.5)).astype(np.int32)
    d["monsters_killed"][level] = np.int32(rng.choice([0, 5, 7, 8, 12]))
    d["chests_opened"][level] = rng.random() < 0.3
    for lv in range(1, level + 1):
        if rng.random() < 0.8:
            ach = [0, 29, 28, 30, 31, 32, 33, 34, 35][lv]
            d["achievements"][ach] = True
    d["achievements"] |= rng.random(67) < 0.1
    if level == 8:
        d["boss_progress"] = np.int32(rng.integers(0, 8))
        d["boss_timesteps_to_spawn_this_round"] = np.int32(rng.integers(-3, 8))
    close = [(px + a, py + b) for a in (-1, 0, 1) for b in (-1, 0, 1) if (a, b) != (0, 0)]
    rng.shuffle(close)
    for block in (11, 12):  # a crafting table and a furnace beside the player, now and then
        x, y = close.pop()
        if rng.random() < 0.6 and 0 <= x < 48 and 0 <= y < 48:
            m[x, y] = block
    dx, dy = [(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)][int(d["player_direction"])]
    fx, fy = px + dx, py + dy
    if 0 <= fx < 48 and 0 <= fy < 48 and rng.random() < 0.7:
        m[fx, fy] = rng.choice(FACING[level])
        if m[fx, fy] == 16:
            slot = int(rng.integers(0, 10))
            d["growing_plants_positions"][slot] = (fx, fy)
            d["growing_plants_mask"][slot] = True
            d["growing_plants_age"][slot] = 700
        items[fx, fy] = 0
    if rng.random() < 0.3:  # on a ladder
        items[px, py] = 2 if rng.random() < 0.6 else 3
    for _ in range(int(rng.integers(0, 4))):  # torches
        x, y = px + int(rng.integers(-4, 5)), py + int(rng.integers(-5, 6))
        if 0 <= x < 48 and 0 <= y < 48 and m[x, y] not in SOLID and (x, y) != (px, py):
            items[x, y] = 1
    spots = [(px + a, py + b) for a in range(-6, 7) for b in range(-6, 7) if 0 < abs(a) + abs(b) <= 7]
    rng.shuffle(spots)
    types = FLOOR_TYPES[level]
    for cls, group in ((1, "melee_mobs"), (0, "passive_mobs"), (2, "ranged_mobs")):
        posm, mask, health = d[f"{group}.position"][level], d[f"{group}.mask"][level], d[f"{group}.health"][level]
        tid, cd = d[f"{group}.type_id"][level], d[f"{group}.attack_cooldown"][level]
        for i in range(posm.shape[0]):
            if rng.random() < 0.4 or not spots:
                continue
            x, y = spots.pop()
            if not (0 <= x < 48 and 0 <= y < 48) or mob[x, y] or m[x, y] in SOLID:
                continue
            if mask[i]:
                mob[posm[i][0], posm[i][1]] = False
            t = types[cls] if rng.random() < 0.8 else int(rng.integers(0, 8))
            posm[i] = (x, y)
            mask[i] = True
            tid[i] = t
            health[i] = np.float32(max(1, HEALTH[t][cls] if HEALTH[t][cls] else 3) * rng.uniform(0.2, 1.0))
            cd[i] = rng.integers(-2, 4)
            mob[x, y] = True
    for group, dirs, kinds in (("mob_projectiles", "mob_projectile_directions", range(8)),
                               ("player_projectiles", "player_projectile_directions", (4, 2, 3, 0))):
        posm, mask, tid = d[f"{group}.position"][level], d[f"{group}.mask"][level], d[f"{group}.type_id"][level]
        for i in range(3):
            if rng.random() < 0.5:
                continue
            ddx, ddy = DIR4[int(rng.integers(0, 4))]
            dist = int(rng.integers(1, 5))
            posm[i] = (px - ddx * dist, py - ddy * dist) if group == "mob_projectiles" else (px + ddx, py + ddy)
            mask[i] = True
            tid[i] = int(rng.choice(list(kinds)))
            d[dirs][level, i] = (ddx, ddy)
    d["timestep"] = np.int32(rng.integers(0, 100000))
    d["light_level"] = np.float32(_LIGHT(d["timestep"]))
    return d


def _obs(out: dict[str, np.ndarray], t0: float) -> None:
    """Observations of rollout states, prepared states on every floor, and states a few random
    reference steps after those."""
    from craftax.craftax.renderer import render_craftax_symbolic

    rng = np.random.default_rng(0)
    states = rollout_states(seed=1, num_envs=16, steps=400, every=100)
    base = rollout_states(seed=2, num_envs=8, steps=200, every=100)
    prep = [prepared(base[i % len(base)], lv, rng) for i in range(36) for lv in [i % 9]]
    key = jax.random.PRNGKey(5)
    moved = []
    for s in prep:
        cur = s
        for _ in range(int(rng.integers(1, 6))):
            key, k = jax.random.split(key)
            st, _, done = _STEP(k, from_leaves(cur), int(rng.integers(0, 43)))
            if bool(done):
                break
            cur = to_leaves(st)
        moved.append(cur)
    states += prep + moved
    batch = stack(states, "")
    obs = np.asarray(jax.jit(jax.vmap(render_craftax_symbolic))(from_leaves(batch)))
    out.update({f"obs_state.{k}": v for k, v in batch.items()})
    out["obs_obs"] = obs
    print(f"obs: {obs.shape[0]} states ({time.time() - t0:.0f}s)", file=sys.stderr)


SCENARIOS = ("chest", "enchant", "necromancer", "water", "fountain", "ripe_plant", "grass", "path", "melee", "passive",
             "ranged", "ore", "chest", "enchant", "necromancer", "melee")
SCENARIO_LEVELS = {"enchant": (4, 3), "necromancer": (8,), "ripe_plant": (0,), "grass": (0,), "fountain": (1, 4),
                   "chest": (1, 3, 4)}


def scenario(d: dict[str, np.ndarray], kind: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Make a prepared state productive for every action: awake, healthy enough, resources for
    every recipe, spell and enchantment, xp to spend, and in front of the player what ``kind``
    names (a chest, an enchantment table, the vulnerable necromancer, water, a fountain, a ripe
    plant, grass, bare path, a mob of each class to kill, an ore)."""
    d = {k: np.array(v) for k, v in d.items()}
    level = int(d["player_level"])
    d["is_sleeping"], d["is_resting"] = np.bool_(False), np.bool_(False)
    d["player_health"] = np.float32(rng.integers(3, 8) + 0.5 * rng.integers(0, 2))
    d["player_food"], d["player_drink"] = np.int32(rng.integers(2, 9)), np.int32(rng.integers(2, 9))
    d["player_energy"] = np.int32(rng.integers(1, 8))
    d["player_mana"] = np.int32(rng.integers(9, 14))
    d["player_xp"] = np.int32(rng.integers(1, 3))
    for k, lo in (("wood", 3), ("stone", 2), ("coal", 3), ("iron", 3), ("diamond", 3), ("sapling", 1), ("torches", 1),
                  ("arrows", 1), ("ruby", 1), ("sapphire", 1), ("books", 1)):
        d[f"inventory.{k}"] = np.int32(rng.integers(lo, lo + 6))
    d["inventory.bow"] = np.int32(1)
    d["inventory.potions"] = rng.integers(1, 3, 6).astype(np.int32)
    d["inventory.pickaxe"] = np.int32(rng.integers(0, 5) if kind != "ore" else 4)
    d["inventory.sword"] = np.int32(rng.integers(0, 5))
    d["inventory.armour"] = rng.integers(0, 3, 4).astype(np.int32)
    px, py = (int(v) for v in d["player_position"])
    px, py = min(max(px, 1), 46), min(max(py, 1), 46)  # away from the edge: the block in front exists
    d["player_position"] = np.array([px, py], np.int32)
    m, items, mob = d["map"][level], d["item_map"][level], d["mob_map"][level]
    m[px, py] = 7 if m[px, py] != 32 else m[px, py]
    dx, dy = [(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)][int(d["player_direction"])]
    fx, fy = px + dx, py + dy
    items[fx, fy] = 0
    for group in ("melee_mobs", "passive_mobs", "ranged_mobs"):
        pos, mask = d[f"{group}.position"][level], d[f"{group}.mask"][level]
        for i in range(pos.shape[0]):
            if mask[i] and (pos[i][0], pos[i][1]) == (fx, fy):
                mask[i] = False
    mob[fx, fy] = False
    block = {"chest": 23, "water": 3, "fountain": 24, "ripe_plant": 16, "grass": 2, "path": 7, "necromancer": 32,
             "melee": 7, "passive": 7, "ranged": 7}.get(kind)
    if kind == "enchant":
        block = 30 if level == 4 or rng.random() < 0.5 else 31
    if kind == "ore":
        block = int(rng.choice([4, 8, 9, 10, 21, 22, 20, 5, 28, 29]))
    m[fx, fy] = block
    if kind == "ripe_plant":
        d["growing_plants_positions"][3] = (fx, fy)
        d["growing_plants_mask"][3] = True
        d["growing_plants_age"][3] = 650
    if kind == "necromancer":
        for group in ("melee_mobs", "ranged_mobs"):
            for i in np.nonzero(d[f"{group}.mask"][level])[0]:
                x, y = d[f"{group}.position"][level][i]
                mob[x, y] = False
            d[f"{group}.mask"][level] = False
        d["boss_timesteps_to_spawn_this_round"] = np.int32(rng.integers(-2, 1))
        d["boss_progress"] = np.int32(rng.integers(0, 8))
    if kind in ("melee", "passive", "ranged"):
        group, cls = {"melee": ("melee_mobs", 1), "passive": ("passive_mobs", 0), "ranged": ("ranged_mobs", 2)}[kind]
        types = FLOOR_TYPES[level]
        d[f"{group}.position"][level][0] = (fx, fy)
        d[f"{group}.mask"][level][0] = True
        d[f"{group}.health"][level][0] = np.float32(rng.choice([0.5, 1.0, 2.5]))
        d[f"{group}.type_id"][level][0] = types[cls] if kind != "passive" or level in (0, 1, 2, 3) else 1
        mob[fx, fy] = True
    return d


def _steps(out: dict[str, np.ndarray], t0: float) -> None:
    """Every action from prepared states on every floor, each with something in front of the player
    (:func:`scenario`), then short random trajectories on every floor. Stored compactly: the
    distinct start states once (``step_start.*``, ``step_start_index``), the states after each step
    as differences from the state before for the four big grids (``step_after_delta.*``: uint8
    wrapping differences, XOR of the light map's float32 bits), whole for the other leaves."""
    rng = np.random.default_rng(1)
    base = rollout_states(seed=3, num_envs=8, steps=300, every=100)
    starts, start_index, records, actions = [], [], [], []
    key = jax.random.PRNGKey(7)
    for j, kind in enumerate(SCENARIOS):
        levels = SCENARIO_LEVELS.get(kind, (j % 9,))
        lv = levels[j % len(levels)]
        s = scenario(prepared(base[j % len(base)], lv, rng), kind, rng)
        starts.append(s)
        for a in range(43):
            key, k = jax.random.split(key)
            start_index.append(len(starts) - 1)
            actions.append(a)
            records.append(recorded_step(k, s, a))
    for j in range(18):
        cur = prepared(base[(j + 3) % len(base)], j % 9, rng)
        cur["player_health"] = np.float32(max(float(cur["player_health"]), 4.0))
        for _ in range(10):
            key, k = jax.random.split(key)
            a = int(rng.integers(0, 43))
            r = recorded_step(k, cur, a)
            starts.append(cur)
            start_index.append(len(starts) - 1)
            actions.append(a)
            records.append(r)
            if r["done"]:
                break
            cur = r["next"]
    st = stack(starts, "")
    out.update({f"step_start.{k}": v for k, v in st.items()})
    index = np.array(start_index, np.int64)
    out["step_start_index"] = index
    after = stack([r["next"] for r in records], "")
    for k, v in after.items():
        b = st[k][index]
        if k in ("map", "item_map"):
            out[f"step_after_delta.{k}"] = (v.astype(np.uint8) - b.astype(np.uint8)).astype(np.uint8)
        elif k == "mob_map":
            out[f"step_after_delta.{k}"] = v ^ b
        elif k == "light_map":
            out[f"step_after_delta.{k}"] = v.view(np.int32) ^ b.view(np.int32)
        else:
            out[f"step_after.{k}"] = v
    out["step_action"] = np.array(actions, np.int64)
    for k in ("u", "dirs", "reward", "done"):
        out[f"step_{k}"] = np.stack([r[k] for r in records])
    print(f"steps: {len(records)} ({time.time() - t0:.0f}s)", file=sys.stderr)


# -- random-policy rollouts -------------------------------------------------------------------------
def _roll(out: dict[str, np.ndarray], t0: float) -> None:
    """Random-policy rollouts (autoreset): every finished episode's length, return and achievements,
    and the mobs alive on the player's floor per step (melee, passive, ranged, mob projectiles,
    player projectiles)."""
    from craftax.craftax.constants import Achievement
    from craftax.craftax.envs.craftax_symbolic_env import CraftaxSymbolicEnv

    env = CraftaxSymbolicEnv()
    num_envs, steps = 128, 600
    key = jax.random.PRNGKey(13)
    key, k0 = jax.random.split(key)
    _, state = jax.vmap(env.reset, (0, None))(jax.random.split(k0, num_envs), PARAMS)

    @jax.jit
    def run(key, state):  # noqa: ANN001, ANN202
        def body(carry, _):  # noqa: ANN001, ANN202
            key, state, ret, length = carry
            key, ka, ks = jax.random.split(key, 3)
            action = jax.random.randint(ka, (num_envs,), 0, 43)
            _, state, reward, done, info = jax.vmap(env.step, (0, 0, 0, None))(
                jax.random.split(ks, num_envs), state, action, PARAMS)
            ret, length = ret + reward, length + 1
            ach = jnp.stack([info[f"Achievements/{a.name.lower()}"] for a in sorted(Achievement, key=lambda a: a.value)],
                            -1) > 0
            lvl = state.player_level
            alive = jnp.stack([jax.vmap(lambda m, lv: m[lv].sum())(getattr(state, g).mask, lvl) for g in MOB_GROUPS], -1)
            outs = (done, ret, length, ach, alive)
            ret, length = jnp.where(done, 0.0, ret), jnp.where(done, 0, length)
            return (key, state, ret, length), outs

        init = (key, state, jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32))
        return jax.lax.scan(body, init, None, length=steps)[1]

    done, ret, length, ach, alive = (np.asarray(x) for x in run(key, state))
    out["roll_length"] = length[done].astype(np.int32)
    out["roll_return"] = ret[done].astype(np.float32)
    out["roll_achievements"] = ach[done]
    out["roll_mobs"] = alive.reshape(-1, 5).mean(0)
    out["roll_steps"] = np.int64(steps)
    out["roll_envs"] = np.int64(num_envs)
    print(f"rollouts: {int(done.sum())} episodes ({time.time() - t0:.0f}s)", file=sys.stderr)


# -- the game's tables ------------------------------------------------------------------------------
def _tables(out: dict[str, np.ndarray], t0: float) -> None:
    """The reference's lookup tables, for a direct comparison with ours."""
    import craftax.craftax.constants as C

    out["tables_achievement_reward"] = np.asarray(C.ACHIEVEMENT_REWARD_MAP)
    out["tables_level_achievement"] = np.asarray(C.LEVEL_ACHIEVEMENT_MAP)
    out["tables_mob_achievement"] = np.asarray(C.MOB_ACHIEVEMENT_MAP)
    out["tables_floor_mob_types"] = np.asarray(C.FLOOR_MOB_MAPPING)
    out["tables_floor_spawn_chance"] = np.asarray(C.FLOOR_MOB_SPAWN_CHANCE)
    out["tables_collision"] = np.asarray(C.MOB_TYPE_COLLISION_MAPPING)
    out["tables_damage"] = np.asarray(C.MOB_TYPE_DAMAGE_MAPPING)
    out["tables_health"] = np.asarray(C.MOB_TYPE_HEALTH_MAPPING)
    out["tables_defense"] = np.asarray(C.MOB_TYPE_DEFENSE_MAPPING)
    out["tables_ranged_projectile"] = np.asarray(C.RANGED_MOB_TYPE_TO_PROJECTILE_TYPE_MAPPING)
    out["tables_solid"] = np.asarray(C.SOLID_BLOCK_MAPPING)
    out["tables_can_place_item"] = np.asarray(C.CAN_PLACE_ITEM_MAPPING)
    print(f"tables ({time.time() - t0:.0f}s)", file=sys.stderr)


# -- main ---------------------------------------------------------------------------------------------
def _gen(out: dict[str, np.ndarray], t0: float) -> None:
    """Worlds from recorded draws. The per-cell uniforms are kept only as what they decide (a tree,
    an ore, a rare cell: see ``world_draws`` in the test), which keeps the file small."""
    worlds = [recorded_world(k) for k in jax.random.split(jax.random.PRNGKey(11), 8)]
    g = stack(worlds, "")
    tree_u = np.array([c for c in np.asarray(ALL_SMOOTHGEN_CONFIGS.tree_threshold_uniform)], np.float32)
    ore_chance = np.asarray(ALL_SMOOTHGEN_CONFIGS.ore_chances, np.float32)  # [6, 5]
    g["hit_tree"] = g.pop("u_tree") > tree_u[None, :, None, None]
    g["hit_ore"] = g.pop("u_ore") < ore_chance[None, :, :, None, None]
    g["dungeon_rare"] = g.pop("dungeon_u_rare") < 0.1
    out.update({f"gen_{k}": v for k, v in g.items()})
    out["gen_torch_light_map"] = np.asarray(TORCH_LIGHT_MAP)
    print(f"worlds ({time.time() - t0:.0f}s)", file=sys.stderr)


def world_stats(state: EnvState) -> dict[str, np.ndarray]:
    """Per world and floor: the count of each block type, of light cells (> 0.05), and the
    Euclidean distance from the spawn to the ladder down and the ladder up."""
    m = np.asarray(state.map)  # [n, 9, 48, 48]
    counts = np.stack([(m == b).sum((2, 3)) for b in range(37)], -1).astype(np.float64)
    lit = (np.asarray(state.light_map) > 0.05).sum((2, 3)).astype(np.float64)[..., None]
    ladders = [np.sqrt(((np.asarray(x) - W // 2) ** 2).sum(-1))[..., None] for x in (state.down_ladders, state.up_ladders)]
    return {"counts": counts, "lit": lit, "ladders": np.concatenate(ladders, -1)}


def _stats(out: dict[str, np.ndarray], t0: float) -> None:
    """Statistics of 1,000 reference worlds, as the means of 50 batches of 20 (worlds of one
    vmapped batch are not independent in the reference: batch means spread wider than the
    per-world variance says, so the test takes its standard error from the batch means)."""
    gen = jax.jit(jax.vmap(lambda k: wg.generate_world(k, PARAMS, STATIC)))
    groups = [world_stats(gen(jax.random.split(jax.random.PRNGKey(100 + b), 20))) for b in range(50)]
    for k in groups[0]:
        out[f"stats_{k}"] = np.stack([g[k].mean(0) for g in groups]).astype(np.float32)
    print(f"world statistics ({time.time() - t0:.0f}s)", file=sys.stderr)


def main() -> None:
    """``python make_craftax_full_fixtures.py [gen,obs,steps,stats,roll,tables]``."""
    allparts = ("gen", "obs", "steps", "stats", "roll", "tables")
    parts = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else set(allparts)
    t0 = time.time()
    out: dict[str, np.ndarray] = {}
    if OUT.exists():
        with np.load(OUT) as f:
            prefixes = tuple({"steps": "step_"}.get(p, f"{p}_") for p in parts)
            out.update({k: v for k, v in f.items() if not k.startswith(prefixes)})
    for p in allparts:
        if p in parts:
            globals()[f"_{p}"](out, t0)
            np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
