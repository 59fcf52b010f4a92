"""Craftax-Classic against the JAX reference (craftax 1.6.1).

The reference data are precomputed (``tests/envs/data/make_craftax_fixtures.py`` writes
``craftax_ref.npz``): states from the reference's random-policy rollouts with its symbolic
observations; reference steps (every action from prepared states, and short trajectories)
with the reference's random draws recorded, which our step replays, so the next state,
reward and done must be equal leaf for leaf; worlds generated with recorded inputs; and
statistics of many worlds and of random-policy rollouts, which ours must match within
confidence bounds. With craftax installed, a few checks also run the reference live.
"""

from __future__ import annotations

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
from noeira.envs.craftax import game, worldgen
from noeira.envs.craftax.constants import ACHIEVEMENTS, DO, LAVA, NUM_BLOCKS, OBS_SIZE, UP, light_tables
from noeira.envs.craftax.env import CraftaxClassic
from noeira.envs.craftax.state import EXPORT_FIELDS, export_state

DATA = Path(__file__).with_name("data") / "craftax_ref.npz"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    return load_ref(DATA)


def _env(n: int, device: str = "cpu", seed: int = 0, **kw: object) -> CraftaxClassic:
    return make_env("craftax-classic", num_envs=n, backend=device, seed=seed, **kw)  # type: ignore[return-value]


# -- exactness -------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_observation_bit_exact_on_reference_states(ref: dict[str, np.ndarray], device: str) -> None:
    """The symbolic observation of states from the reference's rollouts (and prepared states:
    tools, tables, mobs, arrows, edge of the map) is the reference's, bit for bit."""
    device = on_device(device)
    want = torch.as_tensor(ref["obs_obs"])
    env = _env(want.shape[0], device)
    env.set_state(ref_states(ref, "obs_state.", EXPORT_FIELDS, device))
    got = env.obs.cpu()
    assert got.shape == want.shape == (want.shape[0], OBS_SIZE)
    bad = (got.view(torch.int32) != want.view(torch.int32)).any(0).nonzero().squeeze(1)
    assert bad.numel() == 0, f"observation entries differ: {bad[:10].tolist()}"
    # and these states cover what the observation shows
    assert want[:, 17:1323:21].sum() > 0 and want[:, 18:1323:21].sum() > 0, "no zombies / cows in view"
    assert (want[:, 1323:1335] > 0).any(), "no inventory"


@pytest.mark.parametrize("device", DEVICES)
def test_step_exact_with_the_reference_draws(ref: dict[str, np.ndarray], device: str) -> None:
    """Every action from prepared states, and short random trajectories: fed the reference's
    random draws, our step gives the reference's next state (every leaf), reward and done."""
    device = on_device(device)
    before = ref_states(ref, "step_before.", EXPORT_FIELDS, device)
    want = ref_states(ref, "step_after.", EXPORT_FIELDS)
    n = before["map"].shape[0]
    env = _env(n, device)
    env.set_state(before)
    draws = {"u": torch.as_tensor(ref["step_u"], device=device), "dirs": torch.as_tensor(ref["step_dirs"], device=device)}
    action = torch.as_tensor(ref["step_action"], device=device)
    reward, terminated = game.step(env.s, action, draws, env.tables)
    got = export_state(env.s)
    assert not mismatch(got, want), f"state leaves differ (key: rows): {mismatch(got, want)}"
    want_reward = torch.as_tensor(ref["step_reward"])
    bad = (reward.cpu().view(torch.int32) != want_reward.view(torch.int32)).nonzero().squeeze(1)
    assert bad.numel() == 0, f"rewards differ at {bad[:5].tolist()}: {reward.cpu()[bad[:5]]} vs {want_reward[bad[:5]]}"
    done = terminated.cpu() | (got["timestep"].cpu() >= 10000)
    assert torch.equal(done, torch.as_tensor(ref["step_done"]))
    # the data exercise the rules: all actions, rewards both ways, deaths, kills, crafting
    assert set(ref["step_action"].tolist()) == set(range(17))
    assert (want_reward > 0.5).any() and (want_reward < 0).any() and ref["step_done"].any()


def test_step_changes_only_by_the_rules(ref: dict[str, np.ndarray]) -> None:
    """A broken rule shows: the recorded steps differ from the reference when a draw changes
    (a check that the exactness test above depends on the draws it replays)."""
    before = ref_states(ref, "step_before.", EXPORT_FIELDS)
    want = ref_states(ref, "step_after.", EXPORT_FIELDS)
    env = _env(before["map"].shape[0])
    env.set_state(before)
    u = torch.as_tensor(ref["step_u"]).clone()
    u[:, 11] = 0.0  # every cow that may spawn does
    game.step(env.s, torch.as_tensor(ref["step_action"]), {"u": u, "dirs": torch.as_tensor(ref["step_dirs"])}, env.tables)
    assert "cows.mask" in mismatch(export_state(env.s), want)


def test_light_level_matches_reference_formula(ref: dict[str, np.ndarray]) -> None:
    """The light level of every state in the data is our table's at its timestep."""
    light, _ = light_tables(10001)
    for prefix in ("obs_state.", "step_after."):
        t = torch.as_tensor(ref[f"{prefix}timestep"]).long()
        want = torch.as_tensor(ref[f"{prefix}light_level"])
        assert torch.equal(light[t].view(torch.int32), want.view(torch.int32))


def test_world_generation_from_recorded_draws(ref: dict[str, np.ndarray]) -> None:
    """Fed the reference's noise angles and per-cell draws, our generator makes the reference's
    worlds (up to cells where XLA's fused float32 arithmetic tips a threshold the other way)."""
    keys = ("angles_water", "angles_mountain", "angles_path", "angles_tree", "u_coal", "u_iron", "u_diamond", "u_tree", "u_pick")
    draws = {k: torch.as_tensor(ref[f"gen_{k}"]) for k in keys}
    got = worldgen.world_from_draws(draws)["map"]
    want = torch.as_tensor(ref["gen_map"])
    differ = (got != want).sum().item()
    assert differ <= 2 * want.shape[0], f"{differ} cells differ over {want.shape[0]} worlds"
    assert (got == LAVA).any() and (got[:, 32, 32] == 2).all()


def _map_hashes(maps: torch.Tensor) -> set[bytes]:
    """One key per distinct map of ``maps`` [k, 64, 64] (its bytes)."""
    return {bytes(m) for m in maps.to(torch.uint8).reshape(maps.shape[0], -1).cpu().numpy()}


def test_world_generation_statistics(ref: dict[str, np.ndarray]) -> None:
    """The worlds a reset gives, each env one sample: all distinct, and their block-type counts
    and distances from the spawn to the nearest water and tree agree with the reference's 2,000
    worlds within 4.5 standard errors. (The reference's worlds of one vmapped batch are
    correlated, so its standard error comes from the spread of the means of 20 batches of 100.)
    A reset that handed a world to several envs fails the count; its statistics would also be
    treated as more samples than they are."""
    n = 512
    maps = _env(n, seed=3).get_state()["map"]
    assert len(_map_hashes(maps)) == n, "every env of a reset gets a world of its own"
    maps = maps.numpy()
    xs, ys = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    dist = np.abs(xs - 32) + np.abs(ys - 32)
    ours = {"counts": np.stack([(maps == b).sum((1, 2)) for b in range(NUM_BLOCKS)], 1).astype(np.float64),
            "near": np.stack([np.where(maps == b, dist[None], 999).reshape(n, -1).min(1) for b in (3, 5)], 1)}
    for key in ("counts", "near"):
        groups = ref[f"gen_stats_{key}"].astype(np.float64)  # [20 batches, stat]
        se = np.sqrt(groups.var(0, ddof=1) / len(groups) + ours[key].var(0) / n) + 1e-9
        z = np.abs(ours[key].mean(0) - groups.mean(0)) / se
        never = (groups.max(0) == 0) & (ours[key].max(0) == 0)  # invalid, out of bounds, wood, tables...
        assert ((z < 4.5) | never).all(), f"{key}: z = {np.round(z, 1)}, ours {ours[key].mean(0)}, ref {groups.mean(0)}"
    assert ours["counts"][:, 10].min() >= 1, "every world has a diamond"


def test_every_episode_starts_in_a_world_of_its_own() -> None:
    """Over many autoresets (several envs ending in one step, one env ending again and again)
    and resets without a seed, no world is handed to two episodes; each is the world of its
    (env, episode) key, and reset(seed) starts the count again."""
    n, steps = 16, 12
    env = _env(n, seed=4)
    worlds = [env.get_state()["map"]]
    g = torch.Generator().manual_seed(0)
    ended = 0
    for i in range(steps):
        dying = torch.rand(n, generator=g) < 0.5
        dying[0] = True  # env 0 ends every step
        env.s["player_health"][dying] = 0  # dead after this step's rules
        r = env.step(torch.zeros(n, dtype=torch.long))
        done = r.terminated | r.truncated
        assert torch.equal(done, dying), f"step {i}"
        ended += int(done.sum())
        worlds.append(env.get_state()["map"][done])
        if i == steps // 2:
            env.reset()  # no seed: every env starts its next episode
            worlds.append(env.get_state()["map"])
            ended += n
    maps = torch.cat(worlds)
    assert maps.shape[0] == n + ended and len(_map_hashes(maps)) == maps.shape[0], "a world was handed out twice"
    assert int(env.episode[0]) == steps + 1 and int(env.episode.sum()) == ended
    rows = torch.arange(n)
    want = worldgen.generate(env.world_key, rows, env.episode, 1.0)["map"]
    started = env.get_state()["timestep"] == 0
    assert torch.equal(env.get_state()["map"][started], want[started].int())
    env.reset(seed=4)
    assert torch.equal(env.get_state()["map"], worlds[0]) and int(env.episode.abs().sum()) == 0


def test_random_policy_rollout_statistics(ref: dict[str, np.ndarray]) -> None:
    """Uniformly random actions: episode length, return, the success rate of each achievement
    and the mobs alive per step agree with the reference's rollouts within confidence bounds."""
    n, steps = 256, 700
    env = _env(n, seed=5)
    g = torch.Generator().manual_seed(6)
    returns, mobs = [], []
    ret = torch.zeros(n)
    for _ in range(steps):
        r = env.step(torch.randint(0, 17, (n,), generator=g))
        ret += r.reward
        done = r.terminated | r.truncated
        returns.append(ret[done].clone())
        ret[done] = 0
        mobs.append(torch.stack([env.s[f"{k}.mask"].sum(1).float() for k in ("zombies", "cows", "skeletons", "arrows")], 1))
    stats = env.pop_episode_stats()
    count = stats["count"].item()
    assert count > 300
    mean_len = stats["length_sum"].item() / count
    ref_len = ref["roll_length"].astype(np.float64)
    bound = 4.5 * ref_len.std() / math.sqrt(count) + 0.02 * ref_len.mean()
    assert abs(mean_len - ref_len.mean()) < bound, (mean_len, ref_len.mean())
    ours_ret = torch.cat(returns).double().numpy()
    ref_ret = ref["roll_return"].astype(np.float64)
    assert abs(ours_ret.mean() - ref_ret.mean()) < 4.5 * math.sqrt(ref_ret.var() / len(ref_ret) + ours_ret.var() / len(ours_ret))
    # achievement rates from the env's own episode statistics
    ref_rate = ref["roll_achievements"].mean(0)
    for i, a in enumerate(ACHIEVEMENTS):
        p = stats[f"achievement_{a}_sum"].item() / count
        q = ref_rate[i]
        se = math.sqrt(q * (1 - q) / len(ref["roll_achievements"]) + p * (1 - p) / count) + 1e-3
        assert abs(p - q) < 4.5 * se + 0.01, f"{a}: ours {p:.3f}, reference {q:.3f}"
    m = torch.cat(mobs).mean(0).numpy()
    want = ref["roll_mobs"]
    assert np.all(np.abs(m - want) < 0.1 * want + 0.02), f"mobs alive per step: ours {m}, reference {want}"


def test_live_reference_worlds_import_and_observe() -> None:
    """With craftax and jax installed: fresh reference worlds imported through set_state give the
    reference's observation, and come back unchanged through get_state."""
    pytest.importorskip("jax")
    pytest.importorskip("craftax")
    from craftax.craftax_classic.envs.craftax_state import EnvParams, StaticEnvParams
    from craftax.craftax_classic.renderer import render_craftax_symbolic
    from craftax.craftax_classic.world_gen import generate_world

    check_live_reference_worlds(_env(4), generate_world, render_craftax_symbolic, EnvParams(), StaticEnvParams(),
                                EXPORT_FIELDS)


# -- the env's contract ----------------------------------------------------------------------------
def test_spaces_and_config() -> None:
    env = _env(3)
    assert env.observation_space.shape == (1345,) and env.action_space.n == 17
    assert env.spec.max_episode_steps == 10000
    assert not env.spec.capture_safe  # the torch step lists the worlds to reset on the host
    assert env.obs.shape == (3, 1345) and env.obs.dtype == torch.float32
    state = env.get_state()
    assert set(state) == set(EXPORT_FIELDS)
    assert state["map"].shape == (3, 64, 64) and state["zombies.position"].shape == (3, 3, 2)
    assert state["inventory.iron_sword"].dtype == torch.int32 and state["achievements"].shape == (3, 22)
    # a fresh world: the player in the middle on grass, facing up, full intrinsics
    assert (state["player_position"] == 32).all() and (state["map"][:, 32, 32] == 2).all()
    assert (state["player_direction"] == UP).all() and (state["player_health"] == 9).all()


def test_get_set_state_round_trip() -> None:
    check_state_round_trip(_env, game, 6, 30)


def test_reset_is_deterministic_in_the_seed() -> None:
    a, b, c = _env(8, seed=3), _env(8, seed=3), _env(8, seed=4)
    assert torch.equal(a.obs, b.obs) and not torch.equal(a.get_state()["map"], c.get_state()["map"])
    action = a.action_space.sample(8)
    for _ in range(40):
        ra, rb = a.step(action), b.step(action)
    assert torch.equal(ra.obs, rb.obs) and not mismatch(a.get_state(), b.get_state())
    a.reset(seed=9)
    c.reset(seed=9)
    assert not mismatch(a.get_state(), c.get_state())
    maps = a.get_state()["map"]
    assert not torch.equal(maps[0], maps[1]), "every env gets its own world"


def test_termination_truncation_and_autoreset() -> None:
    """Dying and lava terminate; the time limit truncates (and not both); the world that ended
    is replaced in the same step, its last observation in final_obs."""
    env = _env(4, seed=0)
    state = env.get_state()
    state["player_health"][0] = 1
    state["player_food"][0] = 0
    state["player_drink"][0] = 0
    state["player_recover"][0] = -15.0  # loses its last health this step
    state["timestep"][1] = 9999  # the time limit
    state["timestep"][2] = 9999  # the time limit and lava: terminated only
    state["map"][2, 31, 32] = LAVA
    env.set_state(state)
    action = torch.tensor([0, 0, UP, 0])
    r = env.step(action)
    assert r.terminated.tolist() == [True, False, True, False]
    assert r.truncated.tolist() == [False, True, False, False]
    assert r.reward[0].item() == pytest.approx(-0.1) and r.reward[2].item() == pytest.approx(-0.9)
    after = env.get_state()
    assert after["timestep"][:3].tolist() == [0, 0, 0] and after["timestep"][3].item() == 1
    assert (after["player_health"][:3] == 9).all()
    assert not torch.equal(r.final_obs[0], r.obs[0]) and torch.equal(r.final_obs[3], r.obs[3])
    assert r.final_obs[0, 1323 + 12].item() == 0.0  # health 0 in the last observation
    stats = env.pop_episode_stats()
    assert stats["count"].item() == 3 and stats["length_sum"].item() == 3


def test_episode_achievements_and_score() -> None:
    env = _env(2, seed=0)
    state = env.get_state()
    state["achievements"][0, :3] = True
    state["timestep"][:] = 9999
    env.set_state(state)
    env.step(torch.zeros(2, dtype=torch.long))
    stats = env.pop_episode_stats()
    assert stats["count"].item() == 2
    assert [stats[f"achievement_{a}_sum"].item() for a in ACHIEVEMENTS[:4]] == [1.0, 1.0, 1.0, 0.0]
    means = {f"episode_achievement_{a}": 0.0 for a in ACHIEVEMENTS}
    assert env.episode_metrics(means)["craftax_score"] == pytest.approx(0.0)
    means = {f"episode_achievement_{a}": 1.0 for a in ACHIEVEMENTS}
    assert env.episode_metrics(means)["craftax_score"] == pytest.approx(100.0)
    means["episode_achievement_collect_wood"] = 0.5
    want = math.exp((math.log(51.0) + 21 * math.log(101.0)) / 22) - 1
    assert env.episode_metrics(means)["craftax_score"] == pytest.approx(want)


def test_mining_crafting_and_placing() -> None:
    """A scripted sequence: chop a tree (it turns to grass), place a table, make a pickaxe, mine stone."""
    env = _env(1, seed=0)
    s = env.get_state()
    s["map"][0, 28:37, 28:37] = 2
    s["map"][0, 31, 32] = 5  # a tree above the player
    s["map"][0, 32, 33] = 4  # stone to the right
    s["inventory.wood"][0] = 2
    env.set_state(s)
    rewards = [env.step(torch.tensor([a])).reward.item() for a in (DO, 8, 11, 2, DO)]  # 8 table, 11 pickaxe, 2 right
    s = env.get_state()
    assert s["map"][0, 31, 32].item() == 11 and s["map"][0, 32, 33].item() == 7
    assert s["inventory.wood_pickaxe"].item() == 1 and s["inventory.stone"].item() == 1 and s["inventory.wood"].item() == 0
    assert s["player_direction"].item() == 2 and s["player_position"][0].tolist() == [32, 32]
    ach = s["achievements"][0]
    assert [ACHIEVEMENTS[i] for i in ach.nonzero().squeeze(1).tolist()] == [
        "collect_wood", "place_table", "make_wood_pickaxe", "collect_stone"]
    assert rewards == [1.0, 1.0, 1.0, 0.0, 1.0]


def test_render_frames() -> None:
    env = _env(3)
    frames = env.render()
    assert frames.shape == (3, 56, 72, 3) and frames.dtype == torch.uint8
    assert (frames.float().std(dim=(1, 2, 3)) > 0).all()
    s = env.get_state()
    s["map"][0, 29, 28] = 3  # water at the view's top-left corner of env 0
    env.set_state(s)
    tl = env.render()[0, 0:8, 0:8].float().mean((0, 1))
    assert tl[2] > tl[0] and tl[2] > tl[1], "water is blue"


def test_conformance_kit() -> None:
    """noeira's conformance kit (300 steps: the 10,000-step limit is checked above), with the
    symbolic and the compact observation."""
    from noeira.core.testing import check_env

    check_env("craftax-classic", num_envs=4, backend="cpu", steps=300)
    check_env("craftax-classic", num_envs=4, backend="cpu", steps=100, obs="compact")


def test_compact_observation_decodes_to_the_symbolic_one(ref: dict[str, np.ndarray]) -> None:
    """On the reference's observation states the compact observation (148 bytes, an Encoded
    space) decodes to the reference's 1,345 floats bit for bit."""
    from noeira.core import Encoded

    want = torch.as_tensor(ref["obs_obs"])
    env = _env(want.shape[0], obs="compact")
    env.set_state(ref_states(ref, "obs_state.", EXPORT_FIELDS))
    space = env.observation_space
    assert isinstance(space, Encoded) and space.shape == (148,) and env.obs.dtype == torch.uint8
    got = space.decode(env.obs)
    assert got.shape == want.shape and torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert torch.equal(space.decode(env.obs.view(2, -1, 148)).view(-1, 1345), got)  # leading dims kept


def test_only_ended_worlds_are_reset() -> None:
    """A world that ends gets its env's next episode's world; the others go on."""
    env = _env(4, seed=0)
    state = env.get_state()
    state["player_health"][1] = 0  # dead after this step
    env.set_state(state)
    env.step(torch.zeros(4, dtype=torch.long))
    after = env.get_state()
    assert after["timestep"].tolist() == [1, 0, 1, 1] and env.episode.tolist() == [0, 1, 0, 0]
    want = worldgen.generate(env.world_key, torch.tensor([1]), torch.tensor([1]), 1.0)["map"][0]
    assert torch.equal(after["map"][1], want.int()) and not torch.equal(after["map"][1], state["map"][1])
    assert after["player_health"][1].item() == 9


@pytest.mark.cuda
def test_cuda_matches_cpu_and_captures() -> None:
    """On CUDA: the same steps as on the CPU given the same draws; no host sync in the step;
    a CUDA graph of the step replays what the eager step computes."""
    on_device("cuda")
    n = 64
    check_cuda_steps_match_cpu(_env, game, n, 50, 17)
    env, eager = _env(n, "cuda", seed=0), _env(n, "cuda", seed=1)
    action = env.action_space.sample(n)
    graph = record_step(env, action)
    for _ in range(20):
        eager.set_state(env.get_state())
        eager.generator.set_state(env.generator.get_state())
        eager.world_key.copy_(env.world_key)  # so the worlds that end get the same next worlds
        eager.episode.copy_(env.episode)
        if env.kernel == "triton":  # the kernels draw from their own Philox key, not the generator
            eager._seed.copy_(env._seed)
        graph.replay()
        ref_step = eager.step(action)
        assert torch.equal(env._result.final_obs, ref_step.final_obs)
        assert torch.equal(env._result.reward, ref_step.reward)
        assert torch.equal(env._result.obs, ref_step.obs)
        assert torch.equal(env.episode, eager.episode)


@pytest.mark.parametrize("cells", [5, 150])
def test_spawn_is_uniform_over_the_free_cells(cells: int) -> None:
    """A cow spawns on a free grass cell of its window, every one as likely (a chi-square
    bound), whether its candidate cells find one (many grass cells) or the window scan does
    (few): the reference's uniform choice either way."""
    n = 3000
    env = _env(n)
    state = env.get_state()
    rows = torch.arange(64)
    dist = (rows.view(-1, 1) - 32).abs() + (rows.view(1, -1) - 32).abs()
    window = ((dist > 3) & (dist <= 13)).flatten().nonzero().squeeze(1)
    chosen = window[torch.randperm(window.numel(), generator=torch.Generator().manual_seed(cells))[:cells]]
    grid = torch.full((64 * 64,), 4, dtype=torch.int32)  # stone everywhere
    grid[chosen] = 2  # but these grass cells
    grid[32 * 64 + 32] = 2
    state["map"][:] = grid.view(64, 64)
    state["mob_map"][:] = False
    for kind in ("zombies", "cows", "skeletons", "arrows"):
        state[f"{kind}.mask"][:] = False
    state["player_position"][:] = 32
    env.set_state(state)
    g = torch.Generator().manual_seed(1)
    draws = game.sample_draws(n, g, torch.device("cpu"))
    draws["u"][:, 11] = 0.0  # a cow spawns
    draws["u"][:, 12:14] = 1.0  # no zombie, no skeleton
    game.step(env.s, torch.zeros(n, dtype=torch.long), draws, env.tables)
    mask = env.s["cows.mask"]
    assert mask[:, 0].all() and not mask[:, 1:].any()
    pos = env.s["cows.position"][:, 0].long()
    where = pos[:, 0] * 64 + pos[:, 1]
    assert torch.isin(where, chosen).all(), "a cow spawned off the free cells"
    counts = torch.bincount(where, minlength=64 * 64)[chosen].double()
    expected = n / cells
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    dof = cells - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof) + 10, f"chi-square {chi2:.1f} for {dof} degrees of freedom"
    # which path chose: with 5 cells mostly the scan, with 150 mostly a candidate
    size = env.tables.window_dx.numel()
    cand = (draws["cand"][:, 0] * size).long().clamp(max=size - 1)
    cx, cy = 32 + env.tables.window_dx[cand], 32 + env.tables.window_dy[cand]
    by_candidate = torch.isin(cx.long() * 64 + cy.long(), chosen).any(1).float().mean().item()
    assert (by_candidate < 0.3) if cells == 5 else (by_candidate > 0.95), by_candidate


def test_ppo_recipe_resolves_and_builds() -> None:
    """The env's PPO recipe (through the recipe hook) resolves for cpu and cuda, and the cpu one
    builds and runs an iteration; on cuda it takes the compact observation."""
    from noeira.core.driver import build, resolve
    from noeira.core.recipes import find_recipes, merged_recipe

    cuda = merged_recipe(find_recipes("ppo", "craftax-classic", "cuda"))
    assert cuda["env"]["obs"] == "compact" and cuda["agent"]["network"] == "mingru"
    cfg = resolve({"backend": "cpu", "env": {"name": "craftax-classic", "num_envs": 8},
                   "agent": {"name": "ppo", "horizon": 4, "hidden_sizes": [16, 16]}})
    assert cfg.recipes and cfg.agent.config.network == "mingru"
    pieces = build(cfg)
    pieces.agent.collect(pieces.env)
    pieces.agent.learn()
    pieces.close()
