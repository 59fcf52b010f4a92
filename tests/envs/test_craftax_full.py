"""Craftax (the full game) against the JAX reference (craftax 1.6.1, ``craftax.craftax``).

The reference data are precomputed (``tests/envs/data/make_craftax_full_fixtures.py`` writes
``craftax_full_ref.npz``): worlds generated with their random inputs recorded; states on every
floor (from the reference's random-policy rollouts, prepared states with the player moved to
each floor and mobs, projectiles, torches and a boss fight around, and states a few reference
steps after those) with the reference's symbolic observations; reference steps (each of the
43 actions from prepared states on six floors, and short random trajectories on every floor)
with the reference's random draws recorded, which our step replays, so the next state, reward
and done must be equal leaf for leaf; statistics of 1,000 reference worlds and of random-policy
rollouts, which ours must match within confidence bounds. With craftax installed, one check
also runs the reference live.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from env_testing import (
    check_cuda_steps_match_cpu,
    check_live_reference_worlds,
    check_state_round_trip,
    load_ref,
    mismatch,
    on_device,
    record_step,
    ref_states,
)

from noeira.core import make_env
from noeira.envs.craftax_full import game, worldgen
from noeira.envs.craftax_full.constants import ACHIEVEMENTS, LEVEL_ACHIEVEMENTS, MAX_TIMESTEPS, NUM_ACTIONS, OBS_SIZE
from noeira.envs.craftax_full.env import Craftax
from noeira.envs.craftax_full.state import EXPORT_FIELDS, empty_state, export_state, import_state

DATA = Path(__file__).with_name("data") / "craftax_full_ref.npz"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    return load_ref(DATA)


def _env(n: int, device: str = "cpu", seed: int = 0, **kw: object) -> Craftax:
    return make_env("craftax", num_envs=n, backend=device, seed=seed, **kw)  # type: ignore[return-value]


def _imported(leaves: dict[str, torch.Tensor], device: str) -> tuple[dict[str, torch.Tensor], game.Tables]:
    """The env's internal state holding ``leaves`` (as ``set_state`` writes it) and the step's tables,
    without building an env (which would first generate a world for every row)."""
    from noeira.envs.craftax.constants import light_tables

    s = empty_state(leaves["map"].shape[0], device)
    import_state({k: v.to(device) for k, v in leaves.items()}, s)
    return s, game.Tables(torch.device(device), light_tables(100_001)[0])


def step_states(ref: dict[str, np.ndarray], device: str = "cpu") -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The states before and after each recorded reference step. The fixture stores the distinct
    start states once and the big grids after a step as differences from before (see
    ``make_craftax_full_fixtures._steps``)."""
    index = torch.as_tensor(ref["step_start_index"])
    before = {k: torch.as_tensor(ref[f"step_start.{k}"])[index] for k in EXPORT_FIELDS}
    after = {}
    for k in EXPORT_FIELDS:
        if k in ("map", "item_map"):
            delta = torch.as_tensor(ref[f"step_after_delta.{k}"])
            after[k] = (before[k].to(torch.uint8) + delta).to(torch.int32)
        elif k == "mob_map":
            after[k] = before[k] ^ torch.as_tensor(ref[f"step_after_delta.{k}"])
        elif k == "light_map":
            after[k] = (before[k].view(torch.int32) ^ torch.as_tensor(ref[f"step_after_delta.{k}"])).view(torch.float32)
        else:
            after[k] = torch.as_tensor(ref[f"step_after.{k}"])
    return {k: v.to(device) for k, v in before.items()}, after


def world_draws(ref: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The recorded world draws in ``worldgen.sample_world_draws``' layout (the fixture keeps the
    per-cell uniforms only as what they decided: a uniform on the same side of each threshold)."""
    d = {k[4:]: torch.as_tensor(v) for k, v in ref.items()
         if k.startswith("gen_") and not k.startswith(("gen_world.", "gen_hit", "gen_dungeon_rare", "gen_torch"))}
    d["u_tree"] = torch.where(torch.as_tensor(ref["gen_hit_tree"]), 0.9999, 0.0)
    d["u_ore"] = torch.where(torch.as_tensor(ref["gen_hit_ore"]), 0.0, 0.9999)
    d["dungeon_u_rare"] = torch.where(torch.as_tensor(ref["gen_dungeon_rare"]), 0.05, 0.5)
    return d


# -- the game's tables -------------------------------------------------------------------------------
def test_tables_are_the_references(ref: dict[str, np.ndarray]) -> None:
    """Every lookup table of the rules equals the reference's (the step data reach only some mob
    types, so a wrong entry for another would pass them): rewards, the floor and mob tables,
    collisions, damage, health, defense, projectiles, solid and placeable blocks."""
    from noeira.envs.craftax_full import constants as C

    t = game.Tables(torch.device("cpu"), torch.zeros(2))
    want = {k[len("tables_"):]: torch.as_tensor(v) for k, v in ref.items() if k.startswith("tables_")}
    assert torch.equal(t.rewards.long(), want["achievement_reward"].long())
    assert torch.equal(t.level_achievement, want["level_achievement"].long())
    assert torch.equal(t.mob_achievement, want["mob_achievement"].long())
    assert torch.equal(t.floor_types.long(), want["floor_mob_types"].long())
    assert torch.equal(t.floor_chance, want["floor_spawn_chance"])
    assert torch.equal(t.collision, want["collision"].bool())
    assert torch.equal(t.player_collision, want["collision"][0, 0].bool())
    assert torch.equal(t.damage[:, 0], want["damage"][:, 1]) and torch.equal(t.damage[:, 1], want["damage"][:, 3])
    assert torch.equal(t.health, want["health"][:, :3])
    assert torch.equal(t.defense, want["defense"][:, :3])
    assert torch.equal(t.ranged_projectile.long(), want["ranged_projectile"].long())
    assert torch.equal(t.solid, want["solid"].bool()) and torch.equal(t.can_place_item, want["can_place_item"].bool())
    assert len(C.ACHIEVEMENTS) == len(want["achievement_reward"]) and len(C.ACTION_NAMES) == 43


# -- world generation --------------------------------------------------------------------------------
def test_square_roots_are_correctly_rounded() -> None:
    """``constants.sqrt32`` (the observation's inventory roots, the torch light, the spawn distance)
    is the correctly rounded float32 square root, XLA's, on every CPU: torch's float32 ``sqrt`` on
    an AVX-512 CPU is one ulp off for some integers (19, 21, ...), which the observation would carry."""
    from noeira.envs.craftax_full.constants import sqrt32

    x = torch.arange(0, 20_000, dtype=torch.float32)
    want = np.sqrt(x.numpy())  # IEEE-correct in numpy
    assert np.array_equal(sqrt32(x).numpy(), want)
    assert sqrt32(x).dtype == torch.float32


def test_fused_multiply_adds_round_once() -> None:
    """``game._fma`` (the reward, the night melee spawn chance, the attribute multipliers: XLA's fused
    multiply-adds) is ``a * b + c`` rounded once to float32, also where rounding to float64 first
    lands on a float32 tie the exact sum was not on (``1 + a * b`` with ``a * b`` near ``2^-24``)."""
    from fractions import Fraction

    from noeira.envs.craftax_full.game import _fma

    gen = torch.Generator().manual_seed(0)
    a = 1 + torch.rand(20_000, generator=gen)
    b = (2.0**-24 / a.double()).float()
    c = torch.ones_like(a)
    twice = (a.double() * b.double() + c.double()).float()  # rounded to float64, then to float32
    got = _fma(a, b, c)

    def nearest(x: Fraction, near: float) -> float:  # the float32 nearest x, ties to an even last bit
        f = np.float32(near)
        cands = (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf)))
        return float(min(cands, key=lambda v: (abs(Fraction(float(v)) - x), int(np.float32(v).view(np.int32)) & 1)))

    differ = torch.nonzero(got != twice).squeeze(1).tolist()
    assert len(differ) > 100, "the cases should include double roundings"
    for i in differ[:300] + list(range(300)):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert float(got[i]) == nearest(exact, float(got[i])), (float(a[i]), float(b[i]))
    assert got.dtype == torch.float32
    torch.testing.assert_close(_fma(torch.tensor([3.0]), 0.25, 1.0), torch.tensor([1.75]), rtol=0, atol=0)
    # it keeps nothing: it runs on every step's fresh tensors (a cache keyed by them held every one)
    import gc
    import weakref

    arg = torch.ones(3)
    alive = weakref.ref(arg)
    _fma(arg, 0.5, torch.ones(3))
    del arg
    gc.collect()
    assert alive() is None, "_fma keeps a reference to its arguments"


def test_world_generation_from_recorded_draws(ref: dict[str, np.ndarray]) -> None:
    """Fed the reference's recorded draws, our generator makes the reference's worlds: every leaf
    of the initial state (all nine floors' maps, items, light maps, ladders, the potion mapping)."""
    draws = world_draws(ref)
    want = ref_states(ref, "gen_world.", EXPORT_FIELDS)
    got = export_state(worldgen.world_from_draws(draws, float(want["light_level"][0])))
    assert not mismatch(got, want), f"state leaves differ (key: rows): {mismatch(got, want)}"
    from noeira.envs.craftax_full.constants import torch_light_map

    assert torch.equal(torch_light_map(), torch.as_tensor(ref["gen_torch_light_map"]))
    # the worlds exercise what they should: lava glow and ladder light on dark floors, every dungeon feature
    light = want["light_map"]
    assert ((light > 0) & (light < 1)).any() and (want["map"] == 23).any() and (want["map"] == 30).any()


def test_keyed_worlds_are_their_numbers_and_uniform() -> None:
    """The env's worlds come from Philox keyed by (the run's key, stream, serial): a world is the
    same whatever batch it is generated in, another number or key gives another world, and the
    draws are uniform in [0, 1) (the randint fields cover their ranges), so the worlds follow the
    distribution ``test_world_generation_statistics`` checks against the reference's."""
    key = torch.tensor([77])
    stream, serial = torch.tensor([0, 1, 0, worldgen.QUEUE_STREAM]), torch.tensor([0, 0, 1, 0])
    batch = worldgen.generate_keyed(key, stream, serial, 1.0)
    alone = worldgen.generate_keyed(key, stream[2:3], serial[2:3], 1.0)
    assert torch.equal(batch.arena[2], alone.arena[0])
    maps = {hash(m.numpy().tobytes()) for m in export_state(batch)["map"]}
    other = worldgen.generate_keyed(torch.tensor([78]), stream[:1], serial[:1], 1.0)
    assert len(maps) == 4 and not torch.equal(other.arena[0], batch.arena[0])
    d = worldgen.keyed_draws(key, torch.arange(8), torch.zeros(8, dtype=torch.long))
    for name, shape, ints in worldgen.DRAW_LAYOUT:
        v = d[name]
        assert v.shape == (8, *shape), name
        if ints is None:
            assert v.dtype == torch.float32 and v.min() >= 0 and v.max() < 1, name
            if v.numel() > 1000:
                assert abs(v.mean().item() - 0.5) < 0.01 and abs(v.var().item() - 1 / 12) < 0.005, name
        else:
            assert set(v.unique().tolist()) == set(range(*ints)), name


def test_world_generation_statistics(ref: dict[str, np.ndarray]) -> None:
    """Per floor: the count of each block type, of lit cells, and the distance from the spawn to
    each ladder agree with 1,000 reference worlds within 4.5 standard errors (the reference's
    standard error from the spread of 50 batch means: its worlds within a vmapped batch are
    correlated)."""
    g = torch.Generator().manual_seed(3)
    n = 200
    s = worldgen.generate(n, g, torch.device("cpu"), 1.0)
    st = export_state(s)
    m = st["map"].numpy()
    ours = {
        "counts": np.stack([(m == b).sum((2, 3)) for b in range(37)], -1).astype(np.float64),
        "lit": (st["light_map"].numpy() > 0.05).sum((2, 3)).astype(np.float64)[..., None],
        "ladders": np.stack([np.sqrt(((st[k].numpy() - 24) ** 2).sum(-1)) for k in ("down_ladders", "up_ladders")], -1),
    }
    for key, mine in ours.items():
        groups = ref[f"stats_{key}"].astype(np.float64)  # [50 batches, 9 floors, stat]
        se = np.sqrt(groups.var(0, ddof=1) / len(groups) + mine.var(0) / n) + 1e-9
        z = np.abs(mine.mean(0) - groups.mean(0)) / se
        never = (groups.max(0) == 0) & (mine.max(0) == 0)
        bad = np.argwhere(~((z < 4.5) | never))
        assert len(bad) == 0, f"{key}: (floor, stat) {bad[:5].tolist()}: z {z[tuple(bad.T)][:5]}, " \
                              f"ours {mine.mean(0)[tuple(bad.T)][:5]}, ref {groups.mean(0)[tuple(bad.T)][:5]}"
    # distinct worlds: no two of the 200 share a floor
    flat = st["map"].reshape(n, -1)
    assert len({hash(r.numpy().tobytes()) for r in flat}) == n


# -- exactness -------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_observation_bit_exact_on_reference_states(ref: dict[str, np.ndarray], device: str) -> None:
    """The symbolic observation of states on every floor (reference rollouts, prepared states with
    mobs, projectiles, torches and darkness, and states a few reference steps after those) is the
    reference's, bit for bit; the compact observation decodes to the same floats."""
    from noeira.envs.craftax_full import render

    device = on_device(device)
    want = torch.as_tensor(ref["obs_obs"])
    states = ref_states(ref, "obs_state.", EXPORT_FIELDS, device)
    n = want.shape[0]
    s, _ = _imported(states, device)  # the env's state without generating n worlds first
    got = torch.empty((n, OBS_SIZE), device=device)
    render.symbolic(s, got)
    got = got.cpu()
    assert got.shape == want.shape == (n, OBS_SIZE)
    bad = (got.view(torch.int32) != want.view(torch.int32))
    cols = bad.any(0).nonzero().squeeze(1)
    rows = bad.any(1).nonzero().squeeze(1)
    assert cols.numel() == 0, f"observation entries differ: columns {cols[:10].tolist()}, rows {rows[:10].tolist()}"
    code = torch.empty((n, render.COMPACT_SIZE), dtype=torch.uint8, device=device)
    render.compact(s, code)
    assert torch.equal(render.expand(code).cpu().view(torch.int32), want.view(torch.int32))
    # and through the env: set_state makes that state's observation, in either form
    for obs in ("symbolic", "compact"):
        env = _env(4, device, obs=obs)
        env.set_state({k: v[:4] for k, v in states.items()})
        full = env.observation_space.decode(env.obs) if obs == "compact" else env.obs
        assert torch.equal(full.cpu().view(torch.int32), want[:4].view(torch.int32)), obs
    # and these states cover what the observation shows: every floor, mobs of each class, darkness, items
    levels = set(ref["obs_state.player_level"].tolist())
    assert levels == set(range(9)), levels
    grid = want[:, : 99 * 83].view(-1, 99, 83)
    assert (grid[:, :, 42:82].sum((0, 1)) > 0).sum() >= 12, "few mob kinds in view"
    assert (grid[:, :, 82] == 0).any() and (grid[:, :, 38:42].sum() > 0)


@pytest.mark.parametrize("device", DEVICES)
def test_step_exact_with_the_reference_draws(ref: dict[str, np.ndarray], device: str) -> None:
    """Every action from prepared states on six floors, and short random trajectories on every
    floor: fed the reference's random draws, our step gives the reference's next state (every
    leaf), reward (bit for bit) and done."""
    device = on_device(device)
    before, want = step_states(ref, device)
    s, tables = _imported(before, device)
    draws = {"u": torch.as_tensor(ref["step_u"], device=device), "dirs": torch.as_tensor(ref["step_dirs"], device=device)}
    action = torch.as_tensor(ref["step_action"], device=device)
    reward, terminated = game.step(s, action, draws, tables)
    got = export_state(s)
    bad = mismatch(got, want)
    assert not bad, f"state leaves differ (key: rows): {bad}"
    want_reward = torch.as_tensor(ref["step_reward"])
    wrong = (reward.cpu().view(torch.int32) != want_reward.view(torch.int32)).nonzero().squeeze(1)
    assert wrong.numel() == 0, f"rewards differ at {wrong[:5].tolist()}: {reward.cpu()[wrong[:5]]} vs {want_reward[wrong[:5]]}"
    done = terminated.cpu() | (got["timestep"].cpu() >= 100000)
    assert torch.equal(done, torch.as_tensor(ref["step_done"]))
    # the data exercise the rules: all actions on several floors, rewards both ways, deaths
    assert set(ref["step_action"].tolist()) == set(range(NUM_ACTIONS))
    assert set(before["player_level"].tolist()) == set(range(9))
    assert (want_reward > 0.5).any() and (want_reward < 0).any()
    # and the rules they exercise: achievements of every kind unlocked, chests, enchanting, the boss
    gained = (want["achievements"] & ~before["achievements"].cpu()).any(0)
    assert gained.sum() >= 40, [a for i, a in enumerate(ACHIEVEMENTS) if not gained[i]]
    for key in ("boss_progress", "sword_enchantment", "armour_enchantments", "learned_spells",
                "light_map", "player_level", "monsters_killed", "growing_plants_mask", "player_strength"):
        assert (want[key] != before[key].cpu()).any(), f"no step changes {key}"


def test_step_changes_with_the_draws(ref: dict[str, np.ndarray]) -> None:
    """The exactness test depends on the draws it replays: changing one changes the outcome."""
    before, want = step_states(ref)
    s, tables = _imported(before, "cpu")
    u = torch.as_tensor(ref["step_u"]).clone()
    u[:, game.U_SPAWN + 1] = 0.0  # every melee mob that may spawn does
    game.step(s, torch.as_tensor(ref["step_action"]), {"u": u, "dirs": torch.as_tensor(ref["step_dirs"])}, tables)
    assert "melee_mobs.mask" in mismatch(export_state(s), want)


@pytest.mark.slow  # 96 envs x 600 steps (~35 s of CPU)
def test_random_policy_rollout_statistics(ref: dict[str, np.ndarray]) -> None:
    """Uniformly random actions: episode length, return, the success rate of each achievement and
    the mobs alive per step on the player's floor agree with the reference's rollouts within
    confidence bounds (each episode in a freshly generated world on both sides). 96 envs x 600
    steps here, 128 x 600 in the reference (~230 episodes each side)."""
    if "roll_steps" not in ref:
        pytest.skip("the fixture's 'roll' part is not generated (make_craftax_full_fixtures.py roll)")
    n, steps = 96, int(ref["roll_steps"])
    env = _env(n, seed=5)
    g = torch.Generator().manual_seed(6)
    returns, mobs = [], []
    ret = torch.zeros(n)
    rows = torch.arange(n)
    for _ in range(steps):
        r = env.step(torch.randint(0, NUM_ACTIONS, (n,), generator=g))
        ret += r.reward
        done = r.terminated | r.truncated
        returns.append(ret[done].clone())
        ret[done] = 0
        lvl = env.s["player_level"].long()
        mobs.append(torch.stack([env.s[f"{k}.mask"][rows, lvl].sum(1).float() for k in
                                 ("melee_mobs", "passive_mobs", "ranged_mobs", "mob_projectiles", "player_projectiles")], 1))
    stats = env.pop_episode_stats()
    count = stats["count"].item()
    ref_len = ref["roll_length"].astype(np.float64)
    assert count > 100 and len(ref_len) > 100
    mean_len = stats["length_sum"].item() / count
    bound = 4.5 * ref_len.std() * math.sqrt(1 / count + 1 / len(ref_len)) + 0.02 * ref_len.mean()
    assert abs(mean_len - ref_len.mean()) < bound, (mean_len, ref_len.mean())
    ours_ret = torch.cat(returns).double().numpy()
    ref_ret = ref["roll_return"].astype(np.float64)
    se = math.sqrt(ref_ret.var() / len(ref_ret) + ours_ret.var() / len(ours_ret))
    assert abs(ours_ret.mean() - ref_ret.mean()) < 4.5 * se + 0.01, (ours_ret.mean(), ref_ret.mean())
    ref_rate = ref["roll_achievements"].mean(0)
    for i, a in enumerate(ACHIEVEMENTS):
        p = stats[f"achievement_{a}_sum"].item() / count
        q = ref_rate[i]
        se = math.sqrt(q * (1 - q) / len(ref["roll_achievements"]) + p * (1 - p) / count) + 1e-3
        assert abs(p - q) < 4.5 * se + 0.01, f"{a}: ours {p:.3f}, reference {q:.3f}"
    # mobs alive per step: each env's mean over the rollout is one sample (steps within an env are
    # correlated); the reference's standard error taken as ours scaled to its env count
    per_env = torch.stack(mobs).mean(0).double().numpy()  # [n, 5]
    m, se = per_env.mean(0), per_env.std(0, ddof=1) / math.sqrt(n)
    want = ref["roll_mobs"]
    se_both = se * math.sqrt(1 + n / int(ref["roll_envs"]))
    assert np.all(np.abs(m - want) < 4.5 * se_both + 0.01), f"mobs alive per step: ours {m}, reference {want}, se {se_both}"
    assert stats["world_reused_sum"].item() == 0


@pytest.mark.slow  # XLA compiles the reference's world generation (~1 min on 2 cores)
def test_live_reference_worlds_import_and_observe() -> None:
    """With craftax and jax installed: fresh reference worlds imported through set_state give the
    reference's observation, and come back unchanged through get_state."""
    pytest.importorskip("jax")
    pytest.importorskip("craftax")
    from craftax.craftax.craftax_state import EnvParams, StaticEnvParams
    from craftax.craftax.renderer import render_craftax_symbolic
    from craftax.craftax.world_gen.world_gen import generate_world

    check_live_reference_worlds(_env(2), generate_world, render_craftax_symbolic, EnvParams(), StaticEnvParams(),
                                EXPORT_FIELDS)


# -- the env's contract ----------------------------------------------------------------------------
def test_spaces_and_config() -> None:
    env = _env(3)
    assert env.observation_space.shape == (OBS_SIZE,) and env.action_space.n == 43
    assert env.spec.max_episode_steps == 100_000
    # on a CPU the ended envs' worlds are made on demand (listed on the host); the queue is capture-safe
    assert env.resets == "on_demand" and not env.spec.capture_safe
    assert _env(1, resets="queue").spec.capture_safe
    assert env.obs.shape == (3, 8268) and env.obs.dtype == torch.float32
    state = env.get_state()
    assert set(state) == set(EXPORT_FIELDS)
    assert state["map"].shape == (3, 9, 48, 48) and state["map"].dtype == torch.int32
    assert state["melee_mobs.position"].shape == (3, 9, 3, 2) and state["ranged_mobs.health"].shape == (3, 9, 2)
    assert state["inventory.potions"].shape == (3, 6) and state["achievements"].shape == (3, 67)
    assert state["light_map"].shape == (3, 9, 48, 48) and state["light_map"].dtype == torch.float32
    # a fresh world: the player in the middle of the overworld on grass, facing up, full intrinsics
    assert (state["player_position"] == 24).all() and (state["map"][:, 0, 24, 24] == 2).all()
    assert (state["player_level"] == 0).all() and (state["player_health"] == 9.0).all()
    assert (state["map"][:, 8, 24, 24] == 32).all(), "the necromancer waits in the middle of the graveyard"
    with pytest.raises(Exception, match="env.obs"):
        _env(2, obs="pixels")
    with pytest.raises(Exception, match="env.resets"):
        _env(2, resets="never")


def test_get_set_state_round_trip() -> None:
    b, state = check_state_round_trip(_env, game, 4, 20)
    bad = dict(state)
    bad["light_map"] = state["light_map"].clone()
    bad["light_map"][0, 0, 0, 0] = 0.5
    with pytest.raises(ValueError, match="light_map"):
        b.set_state(bad)


def test_reset_is_deterministic_and_every_world_is_new() -> None:
    a, b, c = _env(6, seed=3), _env(6, seed=3), _env(6, seed=4)
    assert torch.equal(a.obs, b.obs) and not torch.equal(a.get_state()["map"], c.get_state()["map"])
    action = a.action_space.sample(6)
    for _ in range(10):
        ra, rb = a.step(action), b.step(action)
    assert torch.equal(ra.obs, rb.obs) and not mismatch(a.get_state(), b.get_state())
    a.reset(seed=9)
    c.reset(seed=9)
    assert not mismatch(a.get_state(), c.get_state())
    # every env of a reset and every autoreset gets a world of its own
    env = _env(8, seed=0)
    seen = {hash(m.numpy().tobytes()) for m in env.get_state()["map"]}
    state = env.get_state()
    for _ in range(5):
        state["player_health"][:4] = 0.0  # these four die this step
        env.set_state(state)
        env.step(torch.zeros(8, dtype=torch.long))
        state = env.get_state()
        seen |= {hash(m.numpy().tobytes()) for m in state["map"][:4]}
    assert len(seen) == 8 + 5 * 4


@pytest.mark.parametrize("resets", ["on_demand", "queue"])
def test_resume_is_bit_exact_across_resets(resets: str) -> None:
    """An env restored from ``state_dict`` into one of another seed steps on bit for bit through
    episodes that end: the fresh worlds come from the saved key and counts (the queue's worlds
    regenerated from their serials), the step's draws from the saved generator."""
    kw = {"resets": resets, "queue_size": 4, "queue_refill": 2} if resets == "queue" else {}
    a = _env(3, seed=1, **kw)
    a.step(torch.tensor([1, 2, 3]))
    state = a.get_state()
    state["player_health"][:2] = 0.0  # two die at the next step: new worlds after the restore
    a.set_state(state)
    saved = a.state_dict()
    b = _env(3, seed=2, **kw)
    b.load_state_dict(saved)
    g = torch.Generator().manual_seed(0)
    for t in range(4):
        action = torch.randint(0, NUM_ACTIONS, (3,), generator=g)
        ra, rb = a.step(action), b.step(action)
        assert torch.equal(ra.obs, rb.obs) and torch.equal(ra.reward, rb.reward), t
        assert torch.equal(a.s.arena, b.s.arena), t
        if t == 0:
            assert ra.terminated[:2].all() and not torch.equal(ra.obs[0], ra.final_obs[0])
    assert torch.equal(a.episode, b.episode) and a.episode.tolist()[:2] == [1, 1]


@pytest.mark.parametrize("resets", ["on_demand", "queue"])
def test_termination_truncation_and_autoreset(resets: str) -> None:
    """Dying and defeating the necromancer terminate; the time limit truncates (and not both); the
    world that ended is replaced by a fresh one in the same step, its last observation in final_obs."""
    env = _env(4, seed=0, resets=resets)
    state = env.get_state()
    state["player_health"][0] = 0.5
    state["player_food"][0] = 0
    state["player_drink"][0] = 0
    state["player_recover"][0] = -15.0  # loses its last health this step
    state["timestep"][1] = 99_999  # the time limit
    state["boss_progress"][2] = 8  # the necromancer is defeated
    state["timestep"][2] = 99_999
    env.set_state(state)
    maps = state["map"].clone()
    r = env.step(torch.zeros(4, dtype=torch.long))
    assert r.terminated.tolist() == [True, False, True, False]
    assert r.truncated.tolist() == [False, True, False, False]
    assert r.reward[0].item() == pytest.approx(-0.05) and r.reward[2].item() == pytest.approx(8.0)
    after = env.get_state()
    assert after["timestep"][:3].tolist() == [0, 0, 0] and after["timestep"][3].item() == 1
    for i in range(3):
        assert not torch.equal(after["map"][i], maps[i]), "a fresh world"
    assert torch.equal(after["map"][3], maps[3])
    assert not torch.equal(r.final_obs[0], r.obs[0]) and torch.equal(r.final_obs[3], r.obs[3])
    assert torch.equal(r.obs[:3], _fresh_obs(env, after))
    stats = env.pop_episode_stats()
    assert stats["count"].item() == 3 and stats["length_sum"].item() == 3 and stats["world_reused_sum"].item() == 0
    assert stats["achievement_defeat_necromancer_sum"].item() == 1


def _fresh_obs(env: Craftax, after: dict[str, torch.Tensor]) -> torch.Tensor:
    other = _env(4, seed=7)
    other.set_state(after)
    return other.obs[:3]


def test_queue_hands_each_world_to_one_episode() -> None:
    """In queue mode the ended envs take the next fresh worlds; when more end than the queue holds,
    the extra ones take used worlds and the episode statistic says so."""
    env = _env(6, seed=0, resets="queue", queue_size=4, queue_refill=1)
    state = env.get_state()
    state["player_health"][:] = 0.0  # all six die
    env.set_state(state)
    queued = env.queue.arena.clone()
    env.step(torch.zeros(6, dtype=torch.long))
    stats = env.pop_episode_stats()
    assert stats["count"].item() == 6
    # the queue was full, so its refill made nothing: its 4 fresh worlds went to the first 4, 2 took used ones
    assert stats["world_reused_sum"].item() == 0  # the flag belongs to the episodes that start now
    assert env.reused.tolist() == [False] * 4 + [True] * 2
    arena = env.s.arena
    assert all(torch.equal(arena[i], queued[i]) for i in range(4))


def test_queue_refills_only_the_slots_emptied() -> None:
    """The refill makes one world for each slot handed out (at most ``queue_refill``), numbered on
    from the last: none while no episode ends, two after two episodes end."""
    env = _env(4, seed=0, resets="queue", queue_size=8, queue_refill=4)
    q = env.queue
    queued, serial = q.arena.clone(), q.serial.item()
    env.step(torch.zeros(4, dtype=torch.long))
    assert q.serial.item() == serial and torch.equal(q.arena, queued)
    state = env.get_state()
    state["player_health"][1:3] = 0.0  # two die
    env.set_state(state)
    env.step(torch.zeros(4, dtype=torch.long))  # they take slots 0 and 1
    env.step(torch.zeros(4, dtype=torch.long))  # whose worlds the refill makes again
    assert q.serial.item() == serial + 2
    assert q.slot_serial.tolist() == [8, 9, 2, 3, 4, 5, 6, 7]
    fresh = env.generate_serial(torch.tensor([8, 9]))
    assert torch.equal(q.arena[:2], fresh.arena) and torch.equal(q.arena[2:8], queued[2:8])


def test_episode_sums_are_the_table_product() -> None:
    """The env's own sums over the ended episodes (over the achievement bytes) equal the base's
    table of ``_episode_values`` times the ended flags."""
    from noeira.core import TensorEnv

    env = _env(5, seed=0)
    g = torch.Generator().manual_seed(3)
    env.s["achievements"].copy_(torch.rand(env.s["achievements"].shape, generator=g) < 0.3)
    env.reused.copy_(torch.tensor([True, False, True, True, False]))
    done = torch.tensor([True, True, False, True, False])
    got = env._episode_sums(done)
    assert got.dtype == torch.float64 and got[-2] > 0 and got[-1] == 2
    assert torch.equal(got, TensorEnv._episode_sums(env, done))


def test_episode_achievements_floor_and_score() -> None:
    env = _env(2, seed=0)
    state = env.get_state()
    state["achievements"][0, :3] = True
    state["achievements"][0, 30] = True  # enter_sewers: floor 3
    state["timestep"][:] = 99_999
    env.set_state(state)
    env.step(torch.zeros(2, dtype=torch.long))
    stats = env.pop_episode_stats()
    assert stats["count"].item() == 2
    assert [stats[f"achievement_{a}_sum"].item() for a in ACHIEVEMENTS[:4]] == [1.0, 1.0, 1.0, 0.0]
    assert stats["floor_sum"].item() == 3.0
    means = {f"episode_achievement_{a}": 0.0 for a in ACHIEVEMENTS}
    assert env.episode_metrics(means)["craftax_score"] == pytest.approx(0.0)
    means = {f"episode_achievement_{a}": 1.0 for a in ACHIEVEMENTS}
    assert env.episode_metrics(means)["craftax_score"] == pytest.approx(100.0)
    means["episode_achievement_collect_wood"] = 0.5
    want = math.exp((math.log(51.0) + 66 * math.log(101.0)) / 67) - 1
    assert env.episode_metrics(means)["craftax_score"] == pytest.approx(want)


def test_descend_and_fight() -> None:
    """A scripted sequence: descend the open ladder, the floor's achievement and xp, then kill a
    zombie-class mob in front for its achievement."""
    env = _env(1, seed=0)
    s = env.get_state()
    x, y = s["down_ladders"][0, 0].tolist()
    s["player_position"][0] = torch.tensor([x, y])
    env.set_state(s)
    r = env.step(torch.tensor([18]))  # descend
    s = env.get_state()
    assert s["player_level"].item() == 1 and s["player_position"][0].tolist() == s["up_ladders"][0, 1].tolist()
    assert s["achievements"][0, 29] and s["player_xp"].item() == 1 and r.reward.item() == 3.0
    px, py = s["player_position"][0].tolist()
    s["player_direction"][0] = 4  # facing down
    s["map"][0, 1, px + 1, py] = 7
    s["melee_mobs.position"][0, 1, 0] = torch.tensor([px + 1, py])
    s["melee_mobs.mask"][0, 1, 0] = True
    s["melee_mobs.health"][0, 1, 0] = 1.0
    s["melee_mobs.type_id"][0, 1, 0] = 2  # an orc soldier
    s["mob_map"][0, 1, px + 1, py] = True
    env.set_state(s)
    r = env.step(torch.tensor([5]))  # do
    s = env.get_state()
    assert not s["melee_mobs.mask"][0, 1, 0] and s["achievements"][0, 38] and s["monsters_killed"][0, 1].item() == 1
    assert not s["mob_map"][0, 1, px + 1, py]


def test_render_frames() -> None:
    env = _env(3)
    frames = env.render()
    assert frames.shape == (3, 72, 88, 3) and frames.dtype == torch.uint8
    assert (frames.float().std(dim=(1, 2, 3)) > 0).all()
    s = env.get_state()
    s["map"][0, 0, 20, 19] = 3  # water at the view's top-left corner of env 0
    env.set_state(s)
    tl = env.render()[0, 2:6, 2:6].float().mean((0, 1))
    assert tl[2] > tl[0] and tl[2] > tl[1], "water is blue"


def test_conformance_kit() -> None:
    """noeira's conformance kit (60 steps: the 100,000-step limit is checked above), with the
    symbolic and the compact observation, and with the reset queue."""
    from noeira.core.testing import check_env

    check_env("craftax", num_envs=3, backend="cpu", steps=60)
    check_env("craftax", num_envs=3, backend="cpu", steps=30, obs="compact", resets="queue", queue_size=8,
              queue_refill=2)


def test_ppo_recipe_resolves_and_builds() -> None:
    """The env's PPO recipe (through the recipe hook) resolves for cpu and cuda, and the cpu one
    builds and runs an iteration; on cuda it takes the compact observation and mingru in bf16."""
    from noeira.core.driver import build, resolve
    from noeira.core.recipes import find_recipes, merged_recipe

    cuda = merged_recipe(find_recipes("ppo", "craftax", "cuda"))
    assert cuda["env"]["obs"] == "compact" and cuda["agent"]["network"] == "mingru"
    assert cuda["agent"]["precision"] == "bf16-master"
    cfg = resolve({"backend": "cpu", "env": {"name": "craftax", "num_envs": 4},
                   "agent": {"name": "ppo", "horizon": 4, "hidden_sizes": [16, 16]}})
    assert cfg.recipes and cfg.agent.config.network == "mingru"
    pieces = build(cfg)
    pieces.agent.collect(pieces.env)
    pieces.agent.learn()
    pieces.close()


@pytest.mark.cuda
def test_cuda_matches_cpu_and_captures() -> None:
    """On CUDA: the same steps as on the CPU given the same draws; no host sync in the env's step
    (queue resets); a CUDA graph of the step replays what the eager step computes."""
    on_device("cuda")
    n = 64
    check_cuda_steps_match_cpu(_env, game, n, 30, NUM_ACTIONS)
    kernel = "triton" if importlib.util.find_spec("triton") is not None else "torch"
    env, eager = (_env(n, "cuda", seed=s, obs="compact", obs_kernel=kernel) for s in (0, 1))
    assert env.resets == "queue"
    if kernel == "triton":  # the observations come from the Triton kernel
        from noeira.envs.craftax_full.triton_obs import compact_kernel

        assert env._write_compact is compact_kernel()
    action = env.action_space.sample(n)
    graph = record_step(env, action)
    for _ in range(10):
        eager.s.arena.copy_(env.s.arena)
        eager.queue.arena.copy_(env.queue.arena)
        eager.queue.head.copy_(env.queue.head)
        eager.queue.tail.copy_(env.queue.tail)
        eager.queue.serial.copy_(env.queue.serial)
        eager.queue.slot_serial.copy_(env.queue.slot_serial)
        eager.world_key.copy_(env.world_key)
        eager.episode.copy_(env.episode)
        eager.elapsed.copy_(env.elapsed)
        eager.generator.set_state(env.generator.get_state())
        graph.replay()
        ref_step = eager.step(action)
        assert torch.equal(env._result.final_obs, ref_step.final_obs)
        assert torch.equal(env._result.reward, ref_step.reward)
        assert torch.equal(env._result.obs, ref_step.obs)
        assert torch.equal(env.s.arena, eager.s.arena)


@pytest.mark.cuda
@pytest.mark.parametrize("obs", ["compact", "symbolic"])
def test_stream_graph_replays_the_eager_step_bit_for_bit(obs: str) -> None:
    """``verify-graph`` for the env alone: 300 steps of the step recorded as a CUDA graph (the
    ``stream`` backend: warm-up, recording, replays) beside 300 eager steps of an env built from the
    same seed, compared after every step (observation, final observation, reward, flags) and at the
    end (the state arena, the queue, the episode counts, the generator). Every env meets its time
    limit once within the run, at a step of its own, so 256 episodes end and take worlds from the
    queue (64 slots: it wraps round four times)."""
    on_device("cuda")
    from noeira.core import get_backend, get_graph_backend

    n, steps = 256, 300
    g = torch.Generator().manual_seed(0)
    actions = torch.randint(0, NUM_ACTIONS, (steps, n), generator=g).cuda()
    ends = torch.randint(1, steps - 10, (n,), generator=g).cuda()  # the step at which each env is truncated
    envs, steppers, action = [], [], torch.zeros(n, dtype=torch.long, device="cuda")
    for graph in ("eager", "stream"):
        backend = get_backend("cuda")
        env = make_env("craftax", num_envs=n, backend=backend, seed=0, obs=obs, queue_size=64, queue_refill=8)
        assert env.resets == "queue" and env.capture_safe
        env.elapsed.copy_(env.max_episode_steps - ends)
        envs.append(env)
        def run(env=env) -> None:  # noqa: ANN001
            env.step(action)  # a recorded step returns None or tensors, not the StepResult

        steppers.append(get_graph_backend(graph).wrap(run, backend))
    eager, recorded = envs
    ended = 0
    for t in range(steps):
        action.copy_(actions[t])
        for step in steppers:
            step()
        a, b = eager._result, recorded._result
        for key in ("obs", "final_obs", "reward", "terminated", "truncated"):
            assert torch.equal(getattr(a, key), getattr(b, key)), (key, t)
        ended += int((a.terminated | a.truncated).sum())
    assert steppers[1].graph is not None, "the stream backend recorded the step"
    assert ended >= n
    assert torch.equal(eager.s.arena, recorded.s.arena)
    q, r = eager.queue, recorded.queue
    for key in ("arena", "obs", "head", "tail", "serial", "slot_serial"):
        assert torch.equal(getattr(q, key), getattr(r, key)), key
    assert torch.equal(eager.episode, recorded.episode) and torch.equal(eager.reused, recorded.reused)
    assert not bool(eager.reused.any()), "the queue kept up: no episode started in a used world"
    assert torch.equal(eager.generator.get_state(), recorded.generator.get_state())


@pytest.mark.parametrize("device", DEVICES)
def test_queue_copy_kernel_copies_the_listed_rows(device: str, kernel_device) -> None:  # noqa: ANN001
    """The queue's Triton row copy (CUDA; on a CPU in Triton's interpreter) writes ``dst[d] = src[s]``
    for the first ``count`` pairs listed, in one table or two at once, and leaves every other row alone."""
    pytest.importorskip("triton")
    from noeira.envs.craftax_full.triton_queue import queue_kernels

    dev = kernel_device(device)
    n, size = 9, 5
    pairs = torch.tensor([[1, 3], [4, 4], [5, 0], [8, 1], [0, 2]], dtype=torch.int64, device=dev)
    count = torch.tensor([4], device=dev)  # the last pair is past the count: not copied
    dst = torch.randint(0, 255, (n, 5000), dtype=torch.uint8, device=dev)  # rows longer than one block
    src = torch.randint(0, 255, (size, 5000), dtype=torch.uint8, device=dev)
    dst2 = torch.randint(0, 255, (n, 37), dtype=torch.uint8, device=dev)
    src2 = torch.randint(0, 255, (size, 37), dtype=torch.uint8, device=dev)
    one, before, before2 = dst.clone(), dst.clone(), dst2.clone()
    kernels = queue_kernels()
    kernels.copy_rows(pairs, count, one, src)
    kernels.copy_rows(pairs, count, dst, src, dst2, src2)
    moved = {int(d): int(r) for d, r in pairs[:4].tolist()}
    for e in range(n):
        for got, table, old in ((one, src, before), (dst, src, before), (dst2, src2, before2)):
            want = table[moved[e]] if e in moved else old[e]
            assert torch.equal(got[e].cpu(), want.cpu()), e


@pytest.mark.parametrize("device", DEVICES)
def test_queue_kernels_keep_the_queue_as_torch_does(device: str, kernel_device) -> None:  # noqa: ANN001
    """The env with the queue's plan and copy kernels (``queue_kernel = "triton"``; on a CPU in
    Triton's interpreter) steps as with the torch bookkeeping: observations, final observations,
    states, episode counts, ``reused`` and the queue's counters, slots and worlds equal, through
    resets in env order, a queue that runs dry (worlds reused) and refills that wrap around."""
    pytest.importorskip("triton")
    dev = kernel_device(device)
    n = 12
    envs = [_env(n, str(dev), seed=5, obs="compact", resets="queue", queue_size=6, queue_refill=2, queue_kernel=k)
            for k in ("torch", "triton")]
    assert envs[0].queue.kernels is None and envs[1].queue.kernels is not None
    g = torch.Generator().manual_seed(4)
    reused = 0
    for t in range(10):
        action = torch.randint(0, NUM_ACTIONS, (n,), generator=g).to(dev)
        dying = torch.rand(n, generator=g) < (0.5 if t == 4 else 0.2)  # step 4: more than the queue holds
        for env in envs:
            state = env.get_state()
            state["player_health"][dying] = 0.0
            env.set_state(state)
        results = [env.step(action) for env in envs]
        for key in ("obs", "final_obs", "reward", "terminated"):
            assert torch.equal(getattr(results[0], key), getattr(results[1], key)), (key, t)
        assert torch.equal(envs[0].s.arena, envs[1].s.arena), t
        assert torch.equal(envs[0].episode, envs[1].episode) and torch.equal(envs[0].reused, envs[1].reused), t
        q, r = envs[0].queue, envs[1].queue
        for key in ("arena", "obs", "head", "tail", "serial", "slot_serial"):
            assert torch.equal(getattr(q, key), getattr(r, key)), (key, t)
        reused += int(envs[1].reused.sum())
    assert reused > 0, "the queue ran dry at step 4: some episodes took used worlds"
    assert int(envs[1].queue.serial) >= 3 * 6, "every slot was refilled at least twice (the refills wrap around)"


@pytest.mark.parametrize("device", DEVICES)
def test_keyed_draws_kernel_gives_the_torch_draws(device: str, kernel_device) -> None:  # noqa: ANN001
    """The Triton kernel of the keyed world draws (CUDA's path; on a CPU in Triton's interpreter)
    gives the torch path's draws bit for bit: every field, streams and serials with high words
    included, so a world is the same whichever path made it."""
    pytest.importorskip("triton")
    dev = kernel_device(device)
    key = torch.tensor([0x123456789ABCDEF], device=dev)
    stream = torch.tensor([0, 3, worldgen.QUEUE_STREAM], device=dev)
    serial = torch.tensor([7, (1 << 33) + 5, (1 << 40) + 1], device=dev)
    torch_draws = worldgen.keyed_draws(key.cpu(), stream.cpu(), serial.cpu(), kernel=False)
    kernel_draws = worldgen.keyed_draws(key, stream, serial, kernel=True)
    for name in torch_draws:
        assert torch.equal(kernel_draws[name].cpu(), torch_draws[name]), name


@pytest.mark.slow  # XLA compiles the reference's rollout and step (minutes on 2 cores), then ~1 min
def test_step_exact_live_sweep() -> None:
    """A longer parity sweep against the live reference: on every floor, prepared states (mobs of
    the floor's types, projectiles, potions, enchantments, on the graveyard a boss fight) walked
    30 random actions on, every step recorded with its draws: our step from the reference's state
    with those draws gives the reference's next state (every leaf), reward (bit for bit) and done."""
    pytest.importorskip("jax")
    pytest.importorskip("craftax")
    import importlib.util

    spec = importlib.util.spec_from_file_location("craftax_full_fixtures", DATA.with_name("make_craftax_full_fixtures.py"))
    fx = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fx)
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(21)
    base = fx.rollout_states(seed=31, num_envs=4, steps=200, every=100)
    key = jax.random.PRNGKey(41)
    checked, levels = 0, set()
    for j in range(18):
        cur = fx.prepared(base[j % len(base)], j % 9, rng)
        cur["player_health"] = np.float32(max(float(cur["player_health"]), 5.0))
        for _ in range(30):
            key, k = jax.random.split(key)
            a = int(rng.integers(0, NUM_ACTIONS))
            rec = fx.recorded_step(k, cur, a)
            before = {name: torch.as_tensor(np.asarray(cur[name])).unsqueeze(0) for name in EXPORT_FIELDS}
            s, tables = _imported(before, "cpu")
            action = torch.tensor([a])
            reward, terminated = game.step(s, action, {"u": torch.as_tensor(rec["u"]).unsqueeze(0),
                                                       "dirs": torch.as_tensor(rec["dirs"]).unsqueeze(0)}, tables)
            want = {name: torch.as_tensor(np.asarray(rec["next"][name])).unsqueeze(0) for name in EXPORT_FIELDS}
            bad = mismatch(export_state(s), want)
            assert not bad, f"floor {int(cur['player_level'])}, step {checked}: leaves differ {sorted(bad)}"
            assert reward.view(torch.int32).item() == torch.tensor(rec["reward"]).view(torch.int32).item()
            assert bool(terminated.item() or int(want["timestep"]) >= 100_000) == bool(rec["done"])
            levels.add(int(cur["player_level"]))
            checked += 1
            if rec["done"]:
                break
            cur = rec["next"]
    assert checked >= 250 and levels == set(range(9)), (checked, levels)  # 296 at this writing (some die early)


@pytest.mark.parametrize("obs", ["symbolic", "compact"])
def test_queue_step_is_capture_safe_through_autoresets(obs: str) -> None:
    """The step with queue resets (the CUDA default) does nothing a CUDA-graph recording cannot
    hold (no tensor literal or Python-list index copied to the device, no host sync), checked on
    the CPU by ``noeira.core.testing.capture`` over steps where envs die and take queued worlds;
    the on-demand resets (declared not capture-safe) are seen listing the ended envs on the host."""
    from noeira.core.testing import CaptureHazards

    env = _env(4, seed=0, obs=obs, resets="queue", queue_size=6, queue_refill=2)
    assert env.capture_safe
    g = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, NUM_ACTIONS, (4,), generator=g) for _ in range(4)]
    env.step(actions[0])  # warm-up (a recording follows warm-up calls too)
    _check_capture_safe_deaths(env, actions[1:])
    on_demand = _env(2, seed=0)
    assert not on_demand.capture_safe
    with CaptureHazards() as det:
        on_demand.step(torch.zeros(2, dtype=torch.long))
    assert any("nonzero" in h.what for h in det.hazards)


def test_kernel_step_is_capture_safe_from_its_first_step(kernel_device) -> None:  # noqa: ANN001
    """CUDA's step (the rule, accounting, queue and observation kernels; on a CPU in Triton's
    interpreter) holds nothing a recording cannot, from the env's very first step on (CUDA's
    ``record_step`` checks its first steps with host syncs raising: a table made and copied to the
    device on first use, a cached one included, fails there)."""
    pytest.importorskip("triton")
    kernel_device("cpu")
    env = _env(4, seed=0, obs="compact", resets="queue", queue_size=6, queue_refill=2, step_kernel="triton",
               queue_kernel="triton", obs_kernel="triton", worldgen_kernel="triton")
    assert env._account is not None and env.queue.kernels is not None
    g = torch.Generator().manual_seed(0)
    _check_capture_safe_deaths(env, [torch.randint(0, NUM_ACTIONS, (4,), generator=g) for _ in range(3)])


def _check_capture_safe_deaths(env: Craftax, actions: list[torch.Tensor]) -> None:
    """``env`` steps ``actions`` with half its envs dying at each (each takes a queued world) and
    nothing a CUDA-graph recording cannot hold happens (``noeira.core.testing.capture``)."""
    from noeira.core.testing import CaptureHazards, format_hazards

    start = env.episode.clone()
    with CaptureHazards() as det:
        for t, action in enumerate(actions):
            with det.quiet():
                state = env.get_state()
                state["player_health"][t % 2::2] = 0.0  # half the envs die this step
                env.set_state(state)
            r = env.step(action)
            with det.quiet():
                assert bool(r.terminated[t % 2::2].all())
    assert not det.hazards, format_hazards(det.hazards)
    assert (env.episode - start).tolist() == [2, 1, 2, 1]  # three steps of deaths: each took a queued world


# -- the compact observation's Triton kernel (CUDA's path; on a CPU in Triton's interpreter) --------
def _varied_states(ref: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """States for the observation kernel (CPU): two reference states per floor walked six random
    steps (every second one kept), and those states edited to reach every corner of the layout:
    the player at and near the map's edges (cells off the map), mobs of every slot around and
    beyond the view's edges (negative local indices that wrap, flags that later slots clear,
    several slots on a cell, type ids outside a class's eight), dark floors' light on either side
    of 0.05, and the tail's leaves at random values."""
    from noeira.envs.craftax_full.constants import DARK_LEVELS, INVENTORY_SCALARS, MOB_GROUPS
    from noeira.envs.craftax_full.state import state_of

    levels = torch.as_tensor(ref["obs_state.player_level"])
    pick = torch.cat([(levels == lv).nonzero().squeeze(1)[:2] for lv in range(9)])
    start, tables = _imported({k: torch.as_tensor(ref[f"obs_state.{k}"])[pick] for k in EXPORT_FIELDS}, "cpu")
    s = state_of(start.arena.clone())
    g = torch.Generator().manual_seed(5)
    n = pick.numel()
    walked = []
    for t in range(6):
        game.step(s, torch.randint(0, NUM_ACTIONS, (n,), generator=g), game.sample_draws(n, g, torch.device("cpu")),
                  tables)
        if t % 2:
            walked.append(s.arena.clone())
    e = state_of(torch.cat([start.arena, *walked[-1:]]).clone())  # edited copies of the start and the last walk
    m = e.arena.shape[0]

    def ints(low: int, high: int, *shape: int) -> torch.Tensor:
        return torch.randint(low, high, (m, *shape), generator=g, dtype=torch.int32)

    edge = torch.tensor([0, 1, 3, 4, 5, 24, 42, 43, 44, 46, 47], dtype=torch.int32)
    e["player_position"].copy_(edge[ints(0, len(edge), 2)])
    e["player_position"][:4] = torch.tensor([[0, 0], [47, 47], [0, 47], [47, 0]], dtype=torch.int32)
    for name, count in MOB_GROUPS:
        offset = torch.stack([ints(-11, 12, 9, count), ints(-13, 14, 9, count)], -1)
        e[f"{name}.position"].copy_(e["player_position"][:, None, None] + offset)
        e[f"{name}.mask"].copy_(torch.rand((m, 9, count), generator=g) < 0.6)
        e[f"{name}.type_id"].copy_(torch.where(torch.rand((m, 9, count), generator=g) < 0.9, ints(0, 8, 9, count),
                                               ints(-2, 11, 9, count)))
    # every second edited row on a dark floor
    dark = torch.tensor(DARK_LEVELS, dtype=torch.int32)
    e["player_level"][::2] = dark[torch.randint(0, 4, (m,), generator=g)][::2]
    # on each row's floor: mobs on the view's corners and edges; on every second row three flags set
    # and then cleared by a later slot: above the view (local row -1 wraps to 8), left of it (column
    # -1 wraps to 10), dead on the cell
    rows = torch.arange(m)
    lvl = e["player_level"].long()
    p = e["player_position"]

    def put(group: str, slot: int, offset: tuple[int, int], alive: bool | torch.Tensor, kind: int,
            where: torch.Tensor = rows) -> None:
        e[f"{group}.position"][where, lvl[where], slot] = p[where] + torch.tensor(offset, dtype=torch.int32)
        e[f"{group}.mask"][where, lvl[where], slot] = alive
        e[f"{group}.type_id"][where, lvl[where], slot] = kind

    put("melee_mobs", 0, (-4, -5), True, 1)
    put("melee_mobs", 1, (4, 0), True, 2)
    put("melee_mobs", 2, (-5, 0), True, 2, rows[::2])  # wraps onto slot 1's cell: clears its flag
    put("passive_mobs", 0, (4, 5), True, 0)
    put("passive_mobs", 1, (-4, 5), True, 3)
    put("passive_mobs", 2, (-4, 5), False, 3, rows[::2])  # dead, on slot 1's cell: clears its flag
    put("ranged_mobs", 0, (0, 5), True, 4)
    put("ranged_mobs", 1, (0, -6), True, 4, rows[::2])  # local column -1 wraps onto slot 0's cell
    levels_of_light = torch.tensor([0.0, 0.04, 0.05, math.nextafter(0.05, 1.0), 0.3, 1.0])
    e["light_map"].copy_(levels_of_light[torch.randint(0, 6, e["light_map"].shape, generator=g)])
    for k in INVENTORY_SCALARS:
        e[f"inventory.{k}"].copy_(ints(0, 100))
    for k in ("inventory.potions", "inventory.armour", "armour_enchantments"):
        e[k].copy_(ints(0, 10, e[k].shape[1]))
    for k in ("player_food", "player_drink", "player_energy", "player_mana", "player_xp", "player_dexterity",
              "player_strength", "player_intelligence", "sword_enchantment", "bow_enchantment"):
        e[k].copy_(ints(0, 12))
    e["player_direction"].copy_(ints(0, 5))
    e["player_health"].copy_(torch.rand(m, generator=g) * 10)
    e["light_level"].copy_(torch.rand(m, generator=g))
    for k in ("is_sleeping", "is_resting", "learned_spells"):
        e[k].copy_(torch.rand(e[k].shape, generator=g) < 0.5)
    e["monsters_killed"].copy_(ints(5, 11, 9))
    e["boss_timesteps_to_spawn_this_round"].copy_(ints(-2, 3))
    return state_of(torch.cat([start.arena, *walked, e.arena]))


@pytest.mark.parametrize("device", DEVICES)
def test_compact_kernel_writes_the_torch_bytes(ref: dict[str, np.ndarray], device: str, kernel_device) -> None:  # noqa: ANN001
    """The Triton kernel of the compact observation (the env's on CUDA) writes the bytes of
    ``render.compact`` (the torch reference, which decodes to the JAX reference's observation),
    bit for bit: on the reference's states (all nine floors) and on states walked and edited to
    reach the layout's corners (cells off the map, dark cells, mobs at and beyond the view's
    edges, wrapped and overwritten flags), every byte of the 900 (the padding included)."""
    pytest.importorskip("triton")
    from noeira.envs.craftax_full import render
    from noeira.envs.craftax_full.state import state_of
    from noeira.envs.craftax_full.triton_obs import compact_kernel

    dev = kernel_device(device)
    fixture, _ = _imported(ref_states(ref, "obs_state.", EXPORT_FIELDS), "cpu")
    varied = _varied_states(ref)
    for s in (fixture, varied):
        n = s.arena.shape[0]
        want = torch.empty((n, render.COMPACT_SIZE), dtype=torch.uint8)
        render.compact(s, want)
        got = torch.full((n, render.COMPACT_SIZE), 77, dtype=torch.uint8, device=dev)
        compact_kernel()(state_of(s.arena.to(dev)), got)
        bad = (got.cpu() != want)
        assert not bad.any(), (f"bytes differ: columns {bad.any(0).nonzero().squeeze(1)[:10].tolist()}, "
                               f"rows {bad.any(1).nonzero().squeeze(1)[:10].tolist()}")
    # the varied states reach what they are meant to: cells off the map and dark cells on it, mob
    # flags on the view's four edges, every floor
    blocks, _, lit = render._view(varied)
    assert ((blocks == 1) & ~lit).any() and ((blocks != 1) & ~lit).any() and lit.any()
    mobs = render.view_mobs(varied).view(-1, 9, 11, 40).any(-1)
    assert mobs[:, 0].any() and mobs[:, 8].any() and mobs[:, :, 0].any() and mobs[:, :, 10].any()
    assert set(varied["player_level"].tolist()) == set(range(9))
    # a window of rows (a slice of the batch, as the queue's chunks are) writes the same bytes
    part = torch.empty((5, render.COMPACT_SIZE), dtype=torch.uint8, device=dev)
    compact_kernel()(state_of(varied.arena.to(dev)[3:8]), part)
    want = torch.empty((5, render.COMPACT_SIZE), dtype=torch.uint8)
    render.compact(state_of(varied.arena[3:8]), want)
    assert torch.equal(part.cpu(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_expand_kernel_writes_the_torch_floats(ref: dict[str, np.ndarray], device: str, kernel_device) -> None:  # noqa: ANN001
    """The Triton expansion of compact codes (the Encoded space's decode on CUDA) writes the
    floats of the torch ``render.expand`` bit for bit, float32 and bfloat16 (torch's cast of each),
    into rows wider than 8,268 (a padded input layer's) without touching the columns after them:
    on the codes of reference and edited states (every floor, dark cells, mob flags at the view's
    edges) and on noise codes (any block, item and flag byte, dark or lit, random tail floats)."""
    pytest.importorskip("triton")
    from noeira.envs.craftax_full import render
    from noeira.envs.craftax_full.triton_obs import expand_kernel

    dev = kernel_device(device)
    varied = _varied_states(ref)
    states = torch.empty((varied.arena.shape[0], render.COMPACT_SIZE), dtype=torch.uint8)
    render.compact(varied, states)
    g = torch.Generator().manual_seed(3)
    noise = torch.randint(0, 256, (9, render.COMPACT_SIZE), generator=g, dtype=torch.uint8)
    blocks = noise[:, render.BLOCK_BYTES:render.ITEM_BYTES]
    blocks.copy_(torch.where(blocks < 128, blocks % 37, torch.full_like(blocks, render.DARK)))  # half dark
    noise[:, render.ITEM_BYTES:render.MOB_BYTES] %= 5
    noise[:, :render.TAIL_BYTES] = (torch.randn((9, 51), generator=g) * 7).view(torch.uint8).view(9, -1)
    codes = torch.cat([states, noise])
    want = render.expand(codes)  # the torch path on the CPU
    assert (want[:, : render.CELLS * render.CH].view(-1, render.CELLS, render.CH)[..., -1] == 0).any()  # dark cells
    for dtype in (torch.float32, torch.bfloat16):
        out = torch.full((codes.shape[0], OBS_SIZE + 12), 7.0, dtype=dtype, device=dev)
        expand_kernel()(codes.to(dev), out)
        got = out.cpu()
        bad = got[:, :OBS_SIZE].view(torch.int16 if dtype == torch.bfloat16 else torch.int32) != \
            want.to(dtype).view(torch.int16 if dtype == torch.bfloat16 else torch.int32)
        assert not bad.any(), (f"{dtype}: columns {bad.any(0).nonzero().squeeze(1)[:10].tolist()}, "
                               f"rows {bad.any(1).nonzero().squeeze(1)[:10].tolist()}")
        assert (got[:, OBS_SIZE:] == 7.0).all(), "columns after the 8,268 were written"
    if dev.type == "cuda":  # the space's decode and decode_into take the kernel there
        padded = torch.zeros((codes.shape[0], OBS_SIZE + 4), dtype=torch.bfloat16, device=dev)
        render.expand_into(codes.to(dev), padded)
        assert torch.equal(padded[:, :OBS_SIZE].cpu(), want.to(torch.bfloat16))
        assert torch.equal(render.expand(codes.to(dev)).cpu(), want)


@pytest.mark.parametrize("obs", ["compact", "symbolic"])
def test_env_observes_through_the_compact_kernel(obs: str, kernel_device) -> None:  # noqa: ANN001
    """The env with the Triton kernel writing its observations (``obs_kernel = "triton"``, here in
    Triton's interpreter) steps as the env with the torch path does, through deaths and queue resets
    (observation, final observation and the queue's first observations equal), and the step
    stays capture-safe with the kernel's launches in it (``noeira.core.testing.capture``)."""
    pytest.importorskip("triton")
    from noeira.core.testing import CaptureHazards, format_hazards
    from noeira.envs.craftax_full import triton_obs

    kernel_device("cpu")
    envs = [_env(4, seed=0, obs=obs, resets="queue", queue_size=6, queue_refill=2, obs_kernel=k)
            for k in ("torch", "triton")]
    kernel = envs[1]._write_compact
    assert kernel is triton_obs.compact_kernel() and envs[0]._write_compact is not kernel
    calls = []

    def counted(s, out) -> None:  # noqa: ANN001
        calls.append(out.shape[0])
        kernel(s, out)

    envs[1]._write_compact = counted
    det = CaptureHazards()
    g = torch.Generator().manual_seed(0)
    for t in range(4):
        action = torch.randint(0, NUM_ACTIONS, (4,), generator=g)
        results = []
        for i, env in enumerate(envs):
            state = env.get_state()
            state["player_health"][t % 2::2] = 0.0  # half the envs die this step
            env.set_state(state)
            if i == 1 and t > 0:
                with det:
                    results.append(env.step(action))
            else:
                results.append(env.step(action))
        for key in ("obs", "final_obs", "reward", "terminated"):
            assert torch.equal(getattr(results[0], key), getattr(results[1], key)), (key, t)
        assert bool(results[1].terminated[t % 2::2].all())
    assert torch.equal(envs[0].queue.obs, envs[1].queue.obs)
    # each round: set_state's observation, the queue's refill, the final observations (the reset envs' come
    # from the queue's, the others' are the final ones)
    assert calls == [4, 2, 4] * 4
    assert not det.hazards, format_hazards(det.hazards)


def test_bad_settings_name_the_key() -> None:
    """A setting outside its choices is a ConfigError naming the key and what it may be."""
    from noeira.core.errors import ConfigError

    for key, value, words in (("obs_kernel", "cuda", "'torch' or 'triton'"), ("step_kernel", "cuda", "'auto'"),
                              ("resets", "pool", "'queue'"),
                              ("obs", "pixels", "'compact'")):
        with pytest.raises(ConfigError, match=f"env.{key}: must be .*{words}"):
            _env(2, **{key: value})


@pytest.mark.parametrize("device", DEVICES)
def test_env_steps_through_the_rule_kernels(device: str, kernel_device) -> None:  # noqa: ANN001
    """The env with its rules in Triton kernels (``step_kernel = "triton"``; on a CPU in Triton's
    interpreter), its episode accounting one kernel with them, steps as the env with the torch rules
    and ``TensorEnv.step``'s accounting: every state leaf, the observation, the final observation,
    reward, terminated and truncated, the clock and running return and length, and the completed
    episodes' statistics equal, through deaths, the time limit and the queue's resets."""
    pytest.importorskip("triton")
    dev = kernel_device(device)
    n = 16
    envs = [_env(n, str(dev), seed=3, obs="compact", resets="queue", queue_size=24, queue_refill=4, step_kernel=k)
            for k in ("torch", "triton")]
    assert envs[0]._step is game.step and envs[1]._step is not game.step
    assert envs[0]._account is None and envs[1]._account is not None
    g = torch.Generator().manual_seed(1)
    died = truncated = 0
    for t in range(12):
        action = torch.randint(0, NUM_ACTIONS, (n,), generator=g).to(dev)
        if t % 4 == 3 or t == 6:
            for env in envs:
                state = env.get_state()
                if t == 6:  # four reach the time limit this step, one of them dying as well
                    state["timestep"][4:8] = MAX_TIMESTEPS - 1
                    state["player_health"][7] = 0.0
                else:  # a quarter of the envs die this step: resets from the queue
                    state["player_health"][t % 4::4] = 0.0
                if t == 3:  # one of them had reached the mines (floor 2), another began in a used world
                    state["achievements"][7, LEVEL_ACHIEVEMENTS[2]] = True
                    env.reused[3] = True
                env.set_state(state)
        results = [env.step(action) for env in envs]
        for key in ("obs", "final_obs", "reward", "terminated", "truncated"):
            assert torch.equal(getattr(results[0], key), getattr(results[1], key)), (key, t)
        assert torch.equal(envs[0].s.arena, envs[1].s.arena), t
        for key in ("elapsed", "episode_return", "episode_length", "episode", "reused"):
            assert torch.equal(getattr(envs[0], key), getattr(envs[1], key)), (key, t)
        died += int(results[1].terminated.sum())
        truncated += int(results[1].truncated.sum())
        if t % 3 == 2:
            want, got = envs[0].pop_episode_stats(), envs[1].pop_episode_stats()
            assert set(want) == set(got)
            for key in want:  # the return's float64 sum in another order: equal to rounding
                assert torch.allclose(want[key], got[key], rtol=1e-12, atol=0), (key, t)
                assert key == "return_sum" or torch.equal(want[key], got[key]), (key, t)
            assert float(got["count"]) > 0 or t < 3, t
            if t == 5:
                assert float(got["floor_sum"]) == 2.0 and float(got["world_reused_sum"]) == 1.0
    assert died >= 3 * n // 4 and truncated == 3, (died, truncated)


@pytest.mark.slow
def test_launch_count_benchmark_sees_the_kernel_step() -> None:
    """``benchmarks/craftax_full.py --launches`` (Triton's interpreter on a CPU, CUDA's kernel
    settings) counts one step: the Triton kernels by name, the step's end among them (no torch
    ``game.finish`` left), and the torch ops by caller."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton")
    script = Path(__file__).parents[2] / "benchmarks" / "craftax_full.py"
    args = ["--launches", "4", *(f"--env={k}=triton" for k in ("step_kernel", "worldgen_kernel", "obs_kernel",
                                                              "queue_kernel")),
            "--env=resets=queue", "--env=queue_size=8", "--env=queue_refill=2"]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TRITON_INTERPRET": "1", "COLUMNS": "160"})
    assert out.returncode == 0, out.stderr[-2000:]
    kernels = dict(re.findall(r"(_\w+_kernel) x(\d+)", out.stdout))
    for name in ("_front_kernel", "_mobs_kernel", "_spawn_kernel", "_upkeep_kernel", "_finish_kernel",
                 "_account_kernel", "_refill_kernel", "_draw_kernel"):
        assert kernels.get(name) == "1", (name, out.stdout)
    assert kernels.get("_compact_kernel") == "2" and kernels.get("_copy_kernel") == "3"  # refill; draw: worlds, obs
    # the step's end, its accounting and the queue's bookkeeping are kernels: no torch ops of theirs left
    for caller in ("game.finish", "envbase.step", "env._episode_sums", "env.refill", "env.draw"):
        assert caller not in out.stdout, (caller, out.stdout)
    ops = int(re.search(r"torch ops that do work\D+(\d+)", out.stdout).group(1))
    assert 10 < ops < 80, out.stdout
