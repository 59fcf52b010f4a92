"""Regenerate the JAX reference fixtures of ``tests/envs/test_craftax.py`` (craftax 1.6.1, CPU jax)::

    python tests/envs/data/make_craftax_fixtures.py      # a few minutes on two cores

Writes ``craftax_ref.npz`` next to this file:

- ``obs_*``: states drawn from random-policy rollouts of the reference (``state.<leaf>``) and
  the reference's symbolic observation of each;
- ``step_*``: single steps of the reference from prepared states (every one of the 17 actions
  from each of a set of states, and short random-action trajectories), run eagerly with the
  reference's ``jax.random`` calls recorded, and the outcome of each draw written in the
  layout of ``noeira.envs.craftax.game``'s ``draws``, so our step replays the same
  randomness and must reproduce the next state, reward and done exactly;
- ``gen_*``: worlds generated eagerly with their random inputs recorded (for our generator
  fed the same inputs), and summary statistics of 2,000 reference worlds;
- ``roll_*``: statistics of random-policy rollouts (episode length, return, achievement
  rates, mobs alive per step).
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from craftax.craftax_classic import game_logic, world_gen
from craftax.craftax_classic.constants import Achievement, BlockType
from craftax.craftax_classic.envs.craftax_state import EnvParams, EnvState, Inventory, Mobs, StaticEnvParams
from craftax.craftax_classic.envs.craftax_symbolic_env import CraftaxClassicSymbolicEnv
from craftax.craftax_classic.renderer import render_craftax_symbolic

OUT = pathlib.Path(__file__).with_name("craftax_ref.npz")
PARAMS, STATIC = EnvParams(), StaticEnvParams()
MOBS = ("zombies", "cows", "skeletons", "arrows")
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
        elif f.name in MOBS:
            out.update({f"{f.name}.{k}": np.asarray(getattr(v, k)) for k in ("position", "health", "mask", "attack_cooldown")})
        else:
            out[f.name] = np.asarray(v)
    return out


def from_leaves(d: dict[str, np.ndarray]) -> EnvState:
    kw = {}
    for f in dataclasses.fields(EnvState):
        if f.name == "state_rng":
            kw[f.name] = jnp.zeros((*np.shape(d["map"])[:-2], 2), jnp.uint32)  # unused by the step
        elif f.name == "fractal_noise_angles":
            continue
        elif f.name == "inventory":
            kw[f.name] = Inventory(**{k: jnp.asarray(d[f"inventory.{k}"], dtype=jnp.int32) for k in INVENTORY})
        elif f.name in MOBS:
            kw[f.name] = Mobs(**{k: jnp.asarray(d[f"{f.name}.{k}"]) for k in ("position", "health", "mask", "attack_cooldown")})
        else:
            kw[f.name] = jnp.asarray(d[f.name])
    return EnvState(**kw)


def stack(items: list[dict[str, np.ndarray]], prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}{k}": np.stack([it[k] for it in items]) for k in items[0]}


def index(batch: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    return {k: v[i] for k, v in batch.items()}


# -- recording the reference's random draws ---------------------------------------------------------
class Recorder:
    """Patches ``jax.random.uniform`` / ``choice`` to log their outputs (outermost calls only)."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self._uniform, self._choice, self._depth = jax.random.uniform, jax.random.choice, 0

    def __enter__(self) -> Recorder:
        def uniform(*a, **k):  # noqa: ANN002, ANN003, ANN202
            self._depth += 1
            out = self._uniform(*a, **k)
            self._depth -= 1
            if self._depth == 0:
                self.log.append(("u", np.asarray(out), None))
            return out

        def choice(key, a, shape=(), replace=True, p=None, axis=0):  # noqa: ANN001, ANN202
            self._depth += 1
            out = self._choice(key, a, shape, replace, p, axis)
            self._depth -= 1
            if self._depth == 0:
                self.log.append(("c", np.asarray(out), None if p is None else np.asarray(p)))
            return out

        jax.random.uniform, jax.random.choice = uniform, choice
        self._nojit = jax.disable_jit()
        self._nojit.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._nojit.__exit__(*exc)
        jax.random.uniform, jax.random.choice = self._uniform, self._choice


DIR4 = [(0, -1), (0, 1), (-1, 0), (1, 0)]


def _dir_index(row: np.ndarray) -> int:
    t = (int(row.reshape(-1)[0]), int(row.reshape(-1)[1]))
    return DIR4.index(t) if t in DIR4 else 4  # cows: the four still moves are alike


def _pick_u(idx: np.ndarray, p: np.ndarray) -> float:
    valid = np.nan_to_num(p) > 0
    count = int(valid.sum())
    if count == 0:
        return 0.5
    rank = int(valid[: int(np.asarray(idx).reshape(-1)[0])].sum())
    return (rank + 0.5) / count


def step_draws(log: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """The 25 draws of one ``craftax_step`` as our ``u`` [17] and ``dirs`` [8]."""
    kinds = "".join(x[0] for x in log)
    assert kinds == "u" + "ccu" * 3 + "ccc" + "ccu" * 2 + "ucucuc", kinds
    u = np.zeros(17, np.float32)
    dirs = np.zeros(8, np.int64)
    u[0] = log[0][1]
    for i in range(3):
        d, ax, close = log[1 + 3 * i], log[2 + 3 * i], log[3 + 3 * i]
        dirs[i] = _dir_index(d[1])
        u[1 + i] = 0.25 if int(ax[1]) == 0 else 0.75
        u[4 + i] = close[1]
    for i in range(3):
        dirs[3 + i] = _dir_index(log[10 + i][1])
    for i in range(2):
        d, ax, move = log[13 + 3 * i], log[14 + 3 * i], log[15 + 3 * i]
        dirs[6 + i] = _dir_index(d[1])
        u[7 + i] = 0.25 if int(ax[1]) == 0 else 0.75
        u[9 + i] = move[1]
    for k in range(3):
        chance, cell = log[19 + 2 * k], log[20 + 2 * k]
        u[11 + k] = chance[1]
        u[14 + k] = _pick_u(cell[1], cell[2])
    return u, dirs


_STEP = jax.jit(lambda key, state, action: (lambda s, r: (s, r, game_logic.is_game_over(s, PARAMS)))(
    *game_logic.craftax_step(key, state, action, PARAMS, STATIC)))
_LIGHT = jax.jit(lambda t: game_logic.calculate_light_level(t, PARAMS))


def recorded_step(key: jax.Array, leaves: dict[str, np.ndarray], action: int) -> dict[str, np.ndarray]:
    """One reference step: the draws recorded from an eager run, the outcome from the jitted step
    (the same key gives the same draws; XLA's fusion under jit rounds the light level and the
    reward as the users' jitted env does)."""
    with Recorder() as rec:
        game_logic.craftax_step(key, from_leaves(leaves), action, PARAMS, STATIC)
    u, dirs = step_draws(rec.log)
    state, reward, done = _STEP(key, from_leaves(leaves), action)
    return {"u": u, "dirs": dirs, "reward": np.float32(reward), "done": np.bool_(done), "next": to_leaves(state)}


# -- states to start from ---------------------------------------------------------------------------
def rollout_states(seed: int, num_envs: int, steps: int, every: int) -> list[dict[str, np.ndarray]]:
    """States along random-policy rollouts of the reference (autoreset), one per ``every`` steps per env."""
    env = CraftaxClassicSymbolicEnv()
    key = jax.random.PRNGKey(seed)
    key, k0 = jax.random.split(key)
    _, state = jax.vmap(env.reset, (0, None))(jax.random.split(k0, num_envs), PARAMS)

    @jax.jit
    def run(key, state):  # noqa: ANN001, ANN202
        def body(carry, _):  # noqa: ANN001, ANN202
            key, state = carry
            key, ka, ks = jax.random.split(key, 3)
            action = jax.random.randint(ka, (num_envs,), 0, 17)
            _, state, _, _, _ = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(ks, num_envs), state, action, PARAMS)
            return (key, state), state

        return jax.lax.scan(body, (key, state), None, length=steps)[1]

    traj = run(key, state)
    out = []
    for t in range(every - 1, steps, every):
        for e in range(num_envs):
            out.append(to_leaves(jax.tree.map(lambda x: x[t, e], traj)))  # noqa: B023
    return out


def enrich(leaves: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A state with more going on: random inventory, intrinsics, a table and a furnace beside the
    player, sometimes asleep, mobs and arrows placed near the player (so crafting, placing,
    attacking, arrows and despawning all happen)."""
    d = {k: np.array(v) for k, v in leaves.items()}
    for k in INVENTORY:
        d[f"inventory.{k}"] = np.int32(rng.integers(0, 10) if rng.random() < 0.8 else 0)
    for k in ("player_health", "player_food", "player_drink", "player_energy"):
        d[k] = np.int32(rng.integers(0, 10))
    d["player_health"] = np.int32(rng.integers(1, 10))
    for k, hi in (("player_recover", 25), ("player_hunger", 25), ("player_thirst", 20), ("player_fatigue", 30)):
        d[k] = np.float32(rng.integers(-20, hi + 1) / 2)
    d["is_sleeping"] = np.bool_(rng.random() < 0.2)
    d["player_direction"] = np.int32(rng.integers(1, 5))
    px, py = (int(v) for v in d["player_position"])
    spots = [(px + dx, py + dy) for dx in (-2, -1, 0, 1, 2) for dy in (-2, -1, 0, 1, 2) if (dx, dy) != (0, 0)]
    rng.shuffle(spots)
    m = d["map"]
    # a table and a furnace among the 8 cells around the player (crafting needs them there)
    close = [(px + dx, py + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if (dx, dy) != (0, 0)]
    rng.shuffle(close)
    for block in (BlockType.CRAFTING_TABLE.value, BlockType.FURNACE.value):
        x, y = close.pop()
        if 0 <= x < 64 and 0 <= y < 64:
            m[x, y] = block
            if (x, y) in spots:
                spots.remove((x, y))
    # the cell the player faces: a random block sometimes (tree, stone, ores, water, ripe plant, grass)
    fx, fy = px + [0, 0, 0, -1, 1][int(d["player_direction"])], py + [0, -1, 1, 0, 0][int(d["player_direction"])]
    if 0 <= fx < 64 and 0 <= fy < 64 and rng.random() < 0.6:
        m[fx, fy] = rng.choice([2, 3, 4, 5, 8, 9, 10, 14, 16, 7, 13])
        if m[fx, fy] == 16:  # a ripe plant grows in a plant slot
            slot = int(rng.integers(0, 10))
            d["growing_plants_positions"][slot] = (fx, fy)
            d["growing_plants_mask"][slot] = True
            d["growing_plants_age"][slot] = 700
    mob_map = d["mob_map"]
    for name, hp in (("zombies", 5), ("cows", 3), ("skeletons", 3)):
        pos, mask, health = d[f"{name}.position"], d[f"{name}.mask"], d[f"{name}.health"]
        for i in range(pos.shape[0]):
            if mask[i] or rng.random() < 0.5 or not spots:
                continue
            x, y = spots.pop()
            if not (0 <= x < 64 and 0 <= y < 64) or mob_map[x, y] or m[x, y] in (3, 4, 5, 8, 9, 10, 11, 12, 15, 16):
                continue
            pos[i] = (x, y)
            mask[i] = True
            health[i] = rng.integers(1, hp + 1)
            mob_map[x, y] = True
            d[f"{name}.attack_cooldown"][i] = rng.integers(-2, 4)
    apos, amask, adir = d["arrows.position"], d["arrows.mask"], d["arrow_directions"]
    for i in range(3):
        if rng.random() < 0.4:
            x, y = px + int(rng.integers(-4, 5)), py + int(rng.integers(-4, 5))
            apos[i] = (x, y)
            amask[i] = True
            adir[i] = DIR4[int(rng.integers(0, 4))]
    # the edge of the map, and lava just across it, now and then (the wrap-around quirks)
    if rng.random() < 0.1:
        d["player_position"] = np.array([0, py], np.int32)
        d["player_direction"] = np.int32(3)
        m[63, py] = BlockType.LAVA.value if rng.random() < 0.5 else BlockType.CRAFTING_TABLE.value
        m[1, py], m[0, py + (1 if py < 63 else -1)] = BlockType.CRAFTING_TABLE.value, BlockType.FURNACE.value
    d["timestep"] = np.int32(rng.integers(0, 10000))
    d["light_level"] = np.float32(_LIGHT(d["timestep"]))
    return d


# -- world generation -------------------------------------------------------------------------------
def recorded_world(key: jax.Array) -> dict[str, np.ndarray]:
    with Recorder() as rec:
        state = world_gen.generate_world(key, PARAMS, STATIC)
    kinds = "".join(x[0] for x in rec.log)
    assert kinds == "uuuuuuuuc", kinds
    log = rec.log
    return {
        "angles_water": log[0][1], "angles_mountain": log[1][1], "angles_path": log[2][1],
        "u_coal": log[3][1], "u_iron": log[4][1], "u_diamond": log[5][1],
        "angles_tree": log[6][1], "u_tree": log[7][1],
        "u_pick": np.float32(_pick_u(log[8][1], log[8][2])),
        "map": np.asarray(state.map).astype(np.uint8),
    }


def world_stats(maps: np.ndarray) -> dict[str, np.ndarray]:
    """Per world: count of each block type, distance (Manhattan) from the spawn to the nearest water / tree."""
    n = maps.shape[0]
    counts = np.stack([(maps == b).sum((1, 2)) for b in range(17)], 1).astype(np.float64)
    xs, ys = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    dist = np.abs(xs - 32) + np.abs(ys - 32)
    near = np.zeros((n, 2))
    for j, b in enumerate((3, 5)):
        d = np.where(maps == b, dist[None], 999)
        near[:, j] = d.reshape(n, -1).min(1)
    return {"counts": counts, "near": near}


# -- random-policy rollouts -------------------------------------------------------------------------
def rollout_stats(seed: int, num_envs: int, steps: int) -> dict[str, np.ndarray]:
    env = CraftaxClassicSymbolicEnv()
    key = jax.random.PRNGKey(seed)
    key, k0 = jax.random.split(key)
    _, state = jax.vmap(env.reset, (0, None))(jax.random.split(k0, num_envs), PARAMS)

    @jax.jit
    def run(key, state):  # noqa: ANN001, ANN202
        def body(carry, _):  # noqa: ANN001, ANN202
            key, state, ret, length = carry
            key, ka, ks = jax.random.split(key, 3)
            action = jax.random.randint(ka, (num_envs,), 0, 17)
            step = jax.vmap(env.step, (0, 0, 0, None))
            _, state, reward, done, info = step(jax.random.split(ks, num_envs), state, action, PARAMS)
            ret, length = ret + reward, length + 1
            # the ended episode's achievements (info has them x 100 where done)
            ach = jnp.stack([info[f"Achievements/{a.name.lower()}"] for a in Achievement], -1) > 0
            out = (done, ret, length, ach, state.zombies.mask.sum(1), state.cows.mask.sum(1),
                   state.skeletons.mask.sum(1), state.arrows.mask.sum(1))
            ret, length = jnp.where(done, 0.0, ret), jnp.where(done, 0, length)
            return (key, state, ret, length), out

        zeros = jnp.zeros(num_envs)
        return jax.lax.scan(body, (key, state, zeros, jnp.zeros(num_envs, jnp.int32)), None, length=steps)[1]

    done, ret, length, old_ach, z, c, s, a = (np.asarray(x) for x in run(key, state))
    return {"done": done, "ret": ret, "length": length, "old_ach": old_ach, "mobs": np.stack([z, c, s, a], -1)}


def main() -> None:
    """``python make_craftax_fixtures.py [obs,steps,gen,roll]``: the parts to (re)make (default all;
    the others are kept from the existing file)."""
    parts = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else {"obs", "steps", "gen", "roll"}
    t0 = time.time()
    out: dict[str, np.ndarray] = {}
    if parts != {"obs", "steps", "gen", "roll"}:
        with np.load(OUT) as f:
            prefixes = tuple({"obs": "obs_", "steps": "step_", "gen": "gen_", "roll": "roll_"}[p] for p in parts)
            out.update({k: v for k, v in f.items() if not k.startswith(prefixes)})

    if "obs" in parts:
        _obs(out, np.random.default_rng(0), t0)
    if "steps" in parts:
        _steps(out, np.random.default_rng(1), t0)
    if "gen" in parts:
        _gen(out, t0)
    if "roll" in parts:
        _roll(out, t0)
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


def _obs(out: dict[str, np.ndarray], rng: np.random.Generator, t0: float) -> None:
    """Observations of rollout states."""
    states = rollout_states(seed=1, num_envs=24, steps=600, every=50)
    states += [enrich(s, rng) for s in rollout_states(seed=2, num_envs=8, steps=200, every=100)]
    obs_states = stack(states, "")
    obs = np.asarray(jax.jit(jax.vmap(render_craftax_symbolic))(from_leaves(obs_states)))
    out.update({f"obs_state.{k}": v for k, v in obs_states.items()})
    out["obs_obs"] = obs
    np.savez_compressed(OUT, **out)  # what is done so far
    print(f"obs: {obs.shape[0]} states ({time.time() - t0:.0f}s)", file=sys.stderr)



def _steps(out: dict[str, np.ndarray], rng: np.random.Generator, t0: float) -> None:
    """Single steps: every action from prepared states, then short random trajectories."""
    starts = rollout_states(seed=3, num_envs=16, steps=400, every=80)
    starts = [enrich(s, rng) if i % 3 else s for i, s in enumerate(starts)]
    rng.shuffle(starts)
    before, records, actions = [], [], []
    key = jax.random.PRNGKey(7)
    for s in starts[:12]:
        for a in range(17):
            key, k = jax.random.split(key)
            before.append(s)
            actions.append(a)
            records.append(recorded_step(k, s, a))
    for s in starts[12:26]:
        cur = s
        for _ in range(12):
            key, k = jax.random.split(key)
            a = int(rng.integers(0, 17))
            r = recorded_step(k, cur, a)
            before.append(cur)
            actions.append(a)
            records.append(r)
            if r["done"]:
                break
            cur = r["next"]
    out.update({f"step_before.{k}": v for k, v in stack(before, "").items()})
    out.update({f"step_after.{k}": v for k, v in stack([r["next"] for r in records], "").items()})
    out["step_action"] = np.array(actions, np.int64)
    for k in ("u", "dirs", "reward", "done"):
        out[f"step_{k}"] = np.stack([r[k] for r in records])
    np.savez_compressed(OUT, **out)  # what is done so far
    print(f"steps: {len(records)} ({time.time() - t0:.0f}s)", file=sys.stderr)



def _gen(out: dict[str, np.ndarray], t0: float) -> None:
    """World generation: recorded worlds, and statistics of many."""
    worlds = [recorded_world(k) for k in jax.random.split(jax.random.PRNGKey(11), 12)]
    out.update({f"gen_{k}": v for k, v in stack(worlds, "").items()})
    # worlds of one vmapped batch are not independent in the reference (batch means of split keys
    # spread several times wider than per-world variance says), so keep the means of 20 batches
    gen = jax.jit(jax.vmap(lambda k: world_gen.generate_world(k, PARAMS, STATIC).map))
    groups = [world_stats(np.asarray(gen(jax.random.split(jax.random.PRNGKey(100 + g), 100)))) for g in range(20)]
    for k in groups[0]:
        out[f"gen_stats_{k}"] = np.stack([g[k].mean(0) for g in groups]).astype(np.float32)
    np.savez_compressed(OUT, **out)  # what is done so far
    print(f"worlds ({time.time() - t0:.0f}s)", file=sys.stderr)



def _roll(out: dict[str, np.ndarray], t0: float) -> None:
    """Random-policy rollouts."""
    r = rollout_stats(seed=13, num_envs=192, steps=800)
    done = r["done"]
    out["roll_length"] = r["length"][done].astype(np.int32)
    out["roll_return"] = r["ret"][done].astype(np.float32)
    out["roll_achievements"] = r["old_ach"][done]
    out["roll_mobs"] = r["mobs"].reshape(-1, 4).mean(0)
    out["roll_mobs_sd"] = r["mobs"].reshape(-1, 4).std(0)
    out["roll_steps"] = np.int64(800)
    print(f"rollouts: {int(done.sum())} episodes ({time.time() - t0:.0f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
