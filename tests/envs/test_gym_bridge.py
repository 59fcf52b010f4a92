"""The gymnasium bridge both ways: ``gym:<EnvId>`` as a noeira BatchedEnv, and
``noeira.envs.to_gymnasium`` exposing ours as a gymnasium VectorEnv, checked against
gymnasium's own vector envs, wrappers and checkers."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.utils.passive_env_checker import (
    check_action_space,
    check_obs,
    check_observation_space,
    env_data_reuse_passive_checker,
)
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from noeira.core import Box, ConfigError, Discrete, MultiDiscrete, TensorEnv, UserError, get_backend, make_env
from noeira.core.testing import check_env
from noeira.envs import to_gymnasium

CLASSIC = ["CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0"]


# -- gym:<EnvId> -> noeira ------------------------------------------------------------------

@pytest.mark.parametrize("gym_id", CLASSIC)
def test_bridge_conformance(gym_id: str) -> None:
    check_env(f"gym:{gym_id}", num_envs=3, backend="cpu")


def test_bridge_conformance_async() -> None:
    check_env("gym:CartPole-v1", num_envs=2, backend="cpu", vectorization="async", steps=40)


@pytest.mark.cuda
def test_bridge_stages_to_cuda() -> None:
    check_env("gym:Pendulum-v1", num_envs=3, backend="cuda")
    env = make_env("gym:CartPole-v1", num_envs=2, backend="cuda")
    assert env.obs.device.type == "cuda" and not env.capture_safe


def test_bridge_matches_our_cartpole_step_by_step() -> None:
    """The same states and actions through the bridge and through our torch CartPole give
    the same numbers (float64), autoresets included (state copied over after each one)."""
    n = 6
    bridge = make_env("gym:CartPole-v1", num_envs=n, backend="cpu", seed=0, dtype="float64")
    ours = make_env("cartpole", num_envs=n, backend="cpu", seed=0, dtype="float64")
    ours.reset(seed=0)
    bridge.set_state(ours.get_state())
    torch.testing.assert_close(bridge.obs, ours.obs, rtol=1e-6, atol=1e-6)
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(120):
        action = ours.action_space.sample(n, generator=gen)
        a, b = ours.step(action), bridge.step(action)
        assert torch.equal(a.terminated, b.terminated) and torch.equal(a.truncated, b.truncated)
        torch.testing.assert_close(a.reward, b.reward)
        torch.testing.assert_close(b.final_obs, a.final_obs, rtol=1e-6, atol=1e-6)  # gymnasium's obs is float32
        done = a.terminated | a.truncated
        ended += int(done.sum())
        if done.any():
            # the bridge's final_obs is the terminal state, its obs a fresh reset
            assert not torch.allclose(b.obs[done], b.final_obs[done])
            bridge.set_state(ours.get_state())
        torch.testing.assert_close(bridge.get_state(), ours.get_state(), rtol=1e-12, atol=1e-12)
    assert ended > 0
    stats = bridge.pop_episode_stats()
    assert int(stats["count"]) == ended and float(stats["return_sum"]) == float(stats["length_sum"])


def test_bridge_discrete_observations_and_spaces() -> None:
    env = make_env("gym:FrozenLake-v1", num_envs=3, backend="cpu", seed=0, kwargs={"is_slippery": False})
    assert isinstance(env.observation_space, Discrete) and env.observation_space.n == 16
    assert isinstance(env.action_space, Discrete) and env.action_space.n == 4
    assert env.obs.dtype == torch.int64 and env.obs.shape == (3,)
    res = env.step(torch.tensor([1, 1, 2]))  # down, down, right on the 4x4 map
    assert res.obs.tolist() == [4, 4, 1]
    with pytest.raises(NotImplementedError, match="unwrapped.state"):
        env.get_state()


def test_bridge_errors() -> None:
    with pytest.raises(ConfigError, match="env.id"):
        make_env("gym:NoSuchEnv-v0", num_envs=1, backend="cpu")
    with pytest.raises(ConfigError, match="vectorization"):
        make_env("gym:CartPole-v1", num_envs=1, backend="cpu", vectorization="threads")
    with pytest.raises(ConfigError, match="kwargs"):
        make_env("gym:CartPole-v1", num_envs=1, backend="cpu", kwargs={"no_such_option": 1})
    with pytest.raises(ConfigError, match="bogus"):
        make_env("gym:CartPole-v1", num_envs=1, backend="cpu", bogus=1)
    with pytest.raises(ConfigError, match="num_envs"):
        make_env("gym:CartPole-v1", num_envs=0, backend="cpu")
    with pytest.raises(ConfigError, match="dtype"):
        make_env("gym:CartPole-v1", num_envs=1, backend="cpu", dtype="int8")
    with pytest.raises(UserError, match="Tuple"):
        make_env("gym:Blackjack-v1", num_envs=1, backend="cpu")


def test_bridge_kwargs_pass_through() -> None:
    env = make_env("gym:Pendulum-v1", num_envs=2, backend="cpu", kwargs={"g": 2.0, "max_episode_steps": 7})
    assert env.max_episode_steps == 7
    assert env.venv.get_attr("g") == (2.0, 2.0)
    env.reset(seed=0)
    for _ in range(6):
        assert not env.step(torch.zeros(2, 1)).truncated.any()
    assert env.step(torch.zeros(2, 1)).truncated.all()


# -- noeira -> gymnasium VectorEnv ----------------------------------------------------------

REF_CASES = [("cartpole", "CartPole-v1"), ("pendulum", "Pendulum-v1"), ("mountaincar", "MountainCar-v0")]


def _gym_vec(gym_id: str, n: int, mode: AutoresetMode, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    return gym.make_vec(gym_id, num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kwargs)


def _set_ref_state(ref: gym.vector.SyncVectorEnv, name: str, i: int, state: np.ndarray) -> None:
    ref.envs[i].unwrapped.state = tuple(state) if name == "mountaincar" else state.copy()


def _check_spaces_against(ours: gym.vector.VectorEnv, ref: gym.vector.VectorEnv) -> None:
    if isinstance(ref.single_action_space, gym.spaces.Discrete):
        assert ours.single_action_space == ref.single_action_space
    else:  # a float64 env takes float64 actions
        np.testing.assert_array_equal(ours.single_action_space.low, ref.single_action_space.low)
        np.testing.assert_array_equal(ours.single_action_space.high, ref.single_action_space.high)
    assert ours.single_observation_space.shape == ref.single_observation_space.shape
    np.testing.assert_array_equal(ours.single_observation_space.high, ref.single_observation_space.high)


@pytest.mark.parametrize(("name", "gym_id"), REF_CASES)
def test_to_gymnasium_matches_gymnasium_vector_env(name: str, gym_id: str) -> None:
    """Ours through to_gymnasium and gymnasium's own SyncVectorEnv (same-step autoreset)
    agree step by step: obs, reward, flags, and ``info['final_obs']`` / ``_final_obs``."""
    n = 4
    ours = to_gymnasium(make_env(name, num_envs=n, backend="cpu", seed=0, dtype="float64"), autoreset_mode="same-step")
    ref = _gym_vec(gym_id, n, AutoresetMode.SAME_STEP)
    assert ours.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    _check_spaces_against(ours, ref)
    ours.reset(seed=1)
    ref.reset(seed=1)

    def sync() -> None:
        for i, s in enumerate(ours.env.get_state().numpy()):
            _set_ref_state(ref, name, i, s)

    sync()
    ours.action_space.seed(2)
    finals = 0
    for _ in range(250):
        action = ours.action_space.sample()
        o, r, te, tr, info = ours.step(action)
        ro, rr, rte, rtr, rinfo = ref.step(action)
        assert ours.observation_space.contains(o.astype(np.float32))
        np.testing.assert_array_equal(te, rte)
        np.testing.assert_array_equal(tr, rtr)
        np.testing.assert_allclose(r, rr, rtol=1e-12)
        if te.any() or tr.any():
            finals += 1
            np.testing.assert_array_equal(info["_final_obs"], rinfo["_final_obs"])
            for i in np.flatnonzero(info["_final_obs"]):
                np.testing.assert_allclose(info["final_obs"][i], rinfo["final_obs"][i], rtol=1e-6, atol=1e-6)
            sync()  # the reset draws differ (torch vs numpy); continue from ours
        else:
            assert "final_obs" not in info
            np.testing.assert_allclose(o, ro, rtol=1e-6, atol=1e-6)
    assert finals > 0


@pytest.mark.parametrize(("name", "gym_id"), REF_CASES)
def test_to_gymnasium_next_step_matches_gymnasium_vector_env(name: str, gym_id: str) -> None:
    """The default, next-step autoreset, against gymnasium's SyncVectorEnv(autoreset_mode=NEXT_STEP):
    the step where an env ends returns its reached observation and flags; the next step ignores
    its action and returns its first observation, reward 0, flags False. The only thing
    copied across is each new episode's start (torch and numpy draw differently), and only the
    start noeira drew on the ending step: had the ignored step moved the env, the episode's
    later steps would differ from gymnasium's."""
    n = 4
    ours = to_gymnasium(make_env(name, num_envs=n, backend="cpu", seed=0, dtype="float64"))
    ref = _gym_vec(gym_id, n, AutoresetMode.NEXT_STEP)
    assert ours.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP == ref.metadata["autoreset_mode"]
    _check_spaces_against(ours, ref)
    ours.reset(seed=1)
    ref.reset(seed=1)
    for i, s in enumerate(ours.env.get_state().numpy()):
        _set_ref_state(ref, name, i, s)
    ours.action_space.seed(2)
    resetting = np.zeros(n, dtype=bool)
    starts, start_obs = ours.env.get_state().numpy(), ours.env.obs.numpy().copy()
    resets = 0
    for _ in range(260):
        action = ours.action_space.sample()
        o, r, te, tr, info = ours.step(action)
        ro, rr, rte, rtr, rinfo = ref.step(action)
        assert info == {} and rinfo == {}
        np.testing.assert_array_equal(te, rte)
        np.testing.assert_array_equal(tr, rtr)
        np.testing.assert_allclose(r, rr, rtol=1e-12)
        assert not (te | tr)[resetting].any() and (r[resetting] == 0).all()
        # rows stepping (ending ones included: their final observation) are gymnasium's
        np.testing.assert_allclose(o[~resetting], ro[~resetting], rtol=1e-6, atol=1e-6)
        # rows resetting show the start noeira drew when they ended; gymnasium takes the same start
        np.testing.assert_array_equal(o[resetting], start_obs[resetting])
        live = ~(resetting | te | tr)  # gymnasium keeps an ended env's last state until its reset
        ref_states = np.stack([np.asarray(e.unwrapped.state, dtype=np.float64) for e in ref.envs])
        np.testing.assert_allclose(ours.env.get_state().numpy()[live], ref_states[live], rtol=1e-12, atol=1e-12)
        for i in np.flatnonzero(resetting):
            _set_ref_state(ref, name, i, starts[i])
        resets += int(resetting.sum())
        starts, start_obs = ours.env.get_state().numpy(), ours.env.obs.numpy().copy()
        resetting = te | tr
        assert ours.observation_space.contains(o.astype(np.float32))
    assert resets > 0


def test_to_gymnasium_next_step_ignores_the_action_and_keeps_the_time_limit() -> None:
    """Whatever action a resetting env gets, nothing moves; the time limit counts from the
    reset step as gymnasium's: steps 1..5 truncate at 5, 6 resets, 7..11 truncate at 11."""
    def run(push: float) -> list[Any]:
        vec = to_gymnasium(make_env("pendulum", num_envs=2, backend="cpu", seed=0, max_episode_steps=5))
        vec.reset(seed=3)
        out = []
        for t in range(1, 13):
            action = np.full((2, 1), push if t in (6, 12) else 0.5, dtype=np.float32)
            out.append(vec.step(action))
        return out

    a, b = run(-2.0), run(2.0)
    for t, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        assert data_equivalence(x, y, exact=True), t
        _, r, te, tr, _ = x
        assert not te.any()
        assert tr.all() == (t in (5, 11)) and tr.any() == (t in (5, 11))
        if t in (6, 12):
            assert (r == 0).all()
        else:
            assert (r != 0).all()


def test_to_gymnasium_next_step_episode_ending_in_the_ignored_step() -> None:
    """An env that ends on its first step ends in the ignored step too (noeira steps every env):
    the bridge puts it back and takes that episode out of the env's episode sums."""
    env = make_env("cartpole", num_envs=3, backend="cpu", seed=0, max_episode_steps=1, dtype="float64")
    vec = gym.wrappers.vector.RecordEpisodeStatistics(to_gymnasium(env))
    vec.reset(seed=0)
    lengths, truncations = [], 0
    for t in range(10):
        _, r, te, tr, info = vec.step(np.ones(3, dtype=np.int64))
        assert tr.all() == (t % 2 == 0) and not te.any()
        truncations += int(tr.sum())
        if "episode" in info:
            lengths += list(info["episode"]["l"][info["_episode"]])
    stats = env.pop_episode_stats()
    assert lengths == [1] * truncations and int(stats["count"]) == truncations == 15
    assert float(stats["return_sum"]) == float(stats["length_sum"]) == 15

    # a start that fails at once: the ignored step terminates it, the real one after it too
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0, dtype="float64")
    vec = to_gymnasium(env)
    vec.reset(seed=0)
    state = env.get_state()
    state[0] = torch.tensor([0.0, 0.0, 0.25, 0.0])  # |theta| > 12 degrees: ends on its first step
    env.set_state(state)
    _, r, te, _, _ = vec.step(np.array([1, 1]))
    assert te.tolist() == [True, False] and r.tolist() == [1.0, 1.0]
    env.pop_episode_stats()
    state = env.get_state()
    doomed = torch.tensor([2.39, 2.0, 0.0, 0.0], dtype=torch.float64)
    state[0] = doomed  # env 0's start: the ignored step takes it past x = 2.4
    env.set_state(state)
    o, r, te, _, _ = vec.step(np.array([1, 1]))
    assert te.tolist() == [False, False] and r.tolist() == [0.0, 1.0]
    np.testing.assert_array_equal(o[0], doomed.numpy())  # the start, not moved
    torch.testing.assert_close(env.get_state()[0], doomed)
    assert int(env.elapsed[0]) == 0 and int(env.pop_episode_stats()["count"]) == 0
    _, r, te, _, _ = vec.step(np.array([1, 1]))
    assert te.tolist() == [True, False]
    stats = env.pop_episode_stats()
    assert int(stats["count"]) == 1 and float(stats["return_sum"]) == 1 and float(stats["length_sum"]) == 1


@pytest.mark.parametrize("mode", ["next-step", "same-step"])
@pytest.mark.parametrize("name", ["cartpole", "pendulum"])
def test_to_gymnasium_record_episode_statistics(mode: str, name: str) -> None:
    """gymnasium's RecordEpisodeStatistics reads each mode as gymnasium means it: its episode
    returns and lengths equal a count by hand and the env's own episode sums."""
    n = 4
    env = make_env(name, num_envs=n, backend="cpu", seed=0, max_episode_steps=30 if name == "pendulum" else 500)
    vec = gym.wrappers.vector.RecordEpisodeStatistics(to_gymnasium(env, autoreset_mode=mode))
    vec.reset(seed=0)
    vec.action_space.seed(0)
    ret, length, resetting = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    by_hand: list[tuple[float, int]] = []
    recorded: list[tuple[float, int]] = []
    for _ in range(150):
        _, r, te, tr, info = vec.step(vec.action_space.sample())
        live = ~resetting if mode == "next-step" else np.ones(n, dtype=bool)
        ret[live] += r[live]
        length[live] += 1
        done = te | tr
        by_hand += [(float(ret[i]), int(length[i])) for i in np.flatnonzero(done)]
        ret[done], length[done] = 0, 0
        resetting = done
        if "episode" in info:
            recorded += [(float(info["episode"]["r"][i]), int(info["episode"]["l"][i]))
                         for i in np.flatnonzero(info["_episode"])]
    assert len(by_hand) > 4
    np.testing.assert_allclose(np.array(recorded), np.array(by_hand), rtol=1e-5)
    stats = env.pop_episode_stats()
    assert int(stats["count"]) == len(by_hand)
    assert int(stats["length_sum"]) == sum(x[1] for x in by_hand)
    np.testing.assert_allclose(float(stats["return_sum"]), sum(x[0] for x in by_hand), rtol=1e-5)


def test_gymnasium_observation_wrappers_need_next_step() -> None:
    """gymnasium's vector observation wrappers refuse same-step autoreset and take ours in
    next-step (and disabled) mode; reward and action wrappers stack on top."""
    def make(mode: str) -> gym.vector.VectorEnv:
        return to_gymnasium(make_env("pendulum", num_envs=3, backend="cpu", seed=0), autoreset_mode=mode)

    with pytest.raises(ValueError, match="NEXT_STEP or DISABLED"):
        gym.wrappers.vector.NormalizeObservation(make("same-step"))
    for mode in ("next-step", "disabled"):
        gym.wrappers.vector.TransformObservation(make(mode), lambda o: o * 2)
    vec = gym.wrappers.vector.ClipAction(gym.wrappers.vector.NormalizeReward(
        gym.wrappers.vector.NormalizeObservation(gym.wrappers.vector.RecordEpisodeStatistics(make("next-step")))))
    vec.reset(seed=0)
    for _ in range(210):
        o, r, te, tr, info = vec.step(np.full((3, 1), 10.0, dtype=np.float32))  # clipped to 2 by ClipAction
        assert o.shape == (3, 3) and np.isfinite(o).all() and np.isfinite(r).all()
    assert len(vec.unwrapped.env.pop_episode_stats()) == 3 and vec.env.env.env.episode_count == 3


def _check_vector_env(vec: gym.vector.VectorEnv) -> None:
    """gymnasium's env-checker rules, as far as they apply to a vector env (gymnasium 1.4's
    ``check_env`` takes single envs only): its space checks; reset and step return types;
    observations in the batched space (``check_obs``, warnings as errors); seeded resets and steps
    deterministic (``data_equivalence``); returned data never shared between calls."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for space in (vec.single_observation_space, vec.observation_space):
            check_observation_space(space)
        for space in (vec.single_action_space, vec.action_space):
            check_action_space(space)
        assert vec.observation_space == batch_space(vec.single_observation_space, vec.num_envs)
        assert vec.action_space == batch_space(vec.single_action_space, vec.num_envs)
        assert isinstance(vec.metadata["autoreset_mode"], AutoresetMode)

        def episode(seed: int) -> list[Any]:
            out = [vec.reset(seed=seed)]
            vec.action_space.seed(seed)
            for _ in range(60):
                out.append(vec.step(vec.action_space.sample()))
            return out

        first, again, other = episode(7), episode(7), episode(8)
        assert data_equivalence(first, again, exact=True)
        assert not data_equivalence(first[0], other[0])
        for i, result in enumerate(first):
            assert isinstance(result, tuple) and len(result) == (2 if i == 0 else 5)
            obs, info = result[0], result[-1]
            assert isinstance(info, dict)
            check_obs(obs, vec.observation_space, "reset" if i == 0 else "step")
            if i > 0:
                _, r, te, tr, _ = result
                assert r.shape == te.shape == tr.shape == (vec.num_envs,)
                assert te.dtype == tr.dtype == np.bool_ and np.issubdtype(r.dtype, np.floating)
                env_data_reuse_passive_checker((first[i - 1][0], first[i - 1][-1]), (obs, info), "previous", "step")
        assert any(r[2].any() or r[3].any() for r in first[1:]), "no episode ended: the check saw no autoreset"


@pytest.mark.parametrize("mode", ["next-step", "same-step"])
@pytest.mark.parametrize("name", ["cartpole", "acrobot", "mountaincar-continuous"])
def test_to_gymnasium_passes_gymnasium_checks(name: str, mode: str) -> None:
    _check_vector_env(to_gymnasium(make_env(name, num_envs=3, backend="cpu", seed=0, max_episode_steps=25),
                                   autoreset_mode=mode))


def test_to_gymnasium_reset_mask() -> None:
    """gymnasium's partial reset (``options={"reset_mask": mask}``): the masked envs start
    over, as a full reset with the same seed starts them; the others keep state, step count and
    observation. A pending next-step reset in the mask takes the start noeira drew for it; one
    outside the mask still happens on the next step."""
    n = 4
    zero = np.zeros((n, 1))
    env = make_env("pendulum", num_envs=n, backend="cpu", seed=0, dtype="float64", max_episode_steps=8)
    vec = to_gymnasium(env)
    full = to_gymnasium(make_env("pendulum", num_envs=n, backend="cpu", seed=0, dtype="float64"))
    vec.reset(seed=0)
    for _ in range(3):
        o, *_ = vec.step(zero)
    state, elapsed = env.get_state(), env.elapsed.clone()
    mask = np.array([True, False, True, False])
    options = {"reset_mask": mask}
    o2, info = vec.reset(seed=5, options=options)
    assert info == {} and list(options) == ["reset_mask"] and options["reset_mask"] is mask  # the caller's dict kept
    np.testing.assert_array_equal(o2[mask], full.reset(seed=5)[0][mask])
    np.testing.assert_array_equal(o2[~mask], o[~mask])
    keep = ~torch.as_tensor(mask)
    torch.testing.assert_close(env.get_state()[keep], state[keep], rtol=0, atol=0)
    assert env.elapsed.tolist() == [0, 3, 0, 3] and elapsed.tolist() == [3] * n

    for _ in range(5):  # envs 1 and 3 reach their 8th step
        o, _, te, tr, _ = vec.step(zero)
    assert tr.tolist() == [False, True, False, True] and not te.any()
    final, start = o.copy(), env.obs.numpy().copy()  # start: what noeira drew for 1 and 3
    o3, _ = vec.reset(options={"reset_mask": np.array([False, True, False, False])})
    np.testing.assert_array_equal(o3[1], start[1])
    np.testing.assert_array_equal(o3[[0, 2, 3]], final[[0, 2, 3]])  # env 3 still shows its final observation
    o4, r, te, tr, _ = vec.step(zero)
    assert r[3] == 0 and not (te | tr).any() and (r[[0, 1, 2]] != 0).all()
    np.testing.assert_array_equal(o4[3], start[3])
    assert env.elapsed.tolist() == [6, 1, 6, 0]

    # a mask with a live env: a fresh reset of those rows, reseeded
    o5, _ = vec.reset(seed=9, options={"reset_mask": np.array([True, False, False, True])})
    np.testing.assert_array_equal(o5[[0, 3]], full.reset(seed=9)[0][[0, 3]])
    np.testing.assert_array_equal(o5[[1, 2]], o4[[1, 2]])
    assert env.elapsed.tolist() == [0, 1, 6, 0]


def test_to_gymnasium_reset_mask_with_record_episode_statistics() -> None:
    """RecordEpisodeStatistics reads ``reset_mask`` after the env's reset: only the masked
    envs' running statistics restart."""
    vec = gym.wrappers.vector.RecordEpisodeStatistics(to_gymnasium(make_env("pendulum", num_envs=3, backend="cpu", seed=0)))
    vec.reset(seed=0)
    for _ in range(4):
        vec.step(np.zeros((3, 1), dtype=np.float32))
    vec.reset(options={"reset_mask": np.array([False, True, False])})
    assert vec.episode_lengths.tolist() == [4, 0, 4]


def test_to_gymnasium_reset_option_errors() -> None:
    vec = to_gymnasium(make_env("cartpole", num_envs=3, backend="cpu", seed=0))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="unknown option.*'low'"):
        vec.reset(options={"low": -0.1})
    with pytest.raises(TypeError, match="numpy array"):
        vec.reset(options={"reset_mask": [True, False, True]})
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        vec.reset(options={"reset_mask": np.ones(2, dtype=bool)})
    with pytest.raises(TypeError, match="dtype bool"):
        vec.reset(options={"reset_mask": np.ones(3, dtype=np.int64)})
    with pytest.raises(ValueError, match="at least one True"):
        vec.reset(options={"reset_mask": np.zeros(3, dtype=bool)})
    vec.reset(options={"reset_mask": torch.tensor([True, False, False])})  # a bool tensor too
    same = to_gymnasium(make_env("gym:CartPole-v1", num_envs=2, backend="cpu", seed=0), autoreset_mode="same-step")
    same.reset(seed=0)
    with pytest.raises(ValueError, match="TensorEnv.*reset them all"):
        same.reset(options={"reset_mask": np.array([True, False])})
    o, _ = same.reset(seed=3, options={"reset_mask": np.array([True, True])})  # all of them: a plain reset
    np.testing.assert_array_equal(o, same.reset(seed=3)[0])


def test_to_gymnasium_disabled_autoreset() -> None:
    """``autoreset_mode="disabled"``: an ended env must be reset through ``reset_mask`` before
    it is stepped again (gymnasium asserts so too)."""
    env = make_env("pendulum", num_envs=2, backend="cpu", seed=0, max_episode_steps=3)
    vec = to_gymnasium(env, autoreset_mode=AutoresetMode.DISABLED)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    vec.reset(seed=0)
    for _ in range(3):
        o, r, te, tr, info = vec.step(np.zeros((2, 1), dtype=np.float32))
    assert tr.all() and info == {}
    np.testing.assert_array_equal(o, env._result.final_obs.numpy())
    with pytest.raises(AssertionError, match=r"sub-envs \[0, 1\] ended.*reset_mask"):
        vec.step(np.zeros((2, 1), dtype=np.float32))
    start = env.obs.numpy().copy()
    o, _ = vec.reset(options={"reset_mask": np.array([True, False])})
    np.testing.assert_array_equal(o[0], start[0])
    with pytest.raises(AssertionError, match=r"sub-envs \[1\]"):
        vec.step(np.zeros((2, 1), dtype=np.float32))
    vec.reset(options={"reset_mask": np.array([False, True])})
    _, r, te, tr, _ = vec.step(np.zeros((2, 1), dtype=np.float32))
    assert not (te | tr).any() and (r != 0).all()
    assert int(env.elapsed.max()) == 1


class _Dials(TensorEnv):
    """A test env with MultiDiscrete([3, 2]) actions: the observation is the last action."""

    name = "dials"

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs, get_backend("cpu"), Box(0.0, 2.0, shape=(2,)), MultiDiscrete([3, 2]), 4)
        self.s = torch.zeros(num_envs, 2)
        self.reset(0)

    def _reset_envs(self, mask: torch.Tensor) -> None:
        self.s.masked_fill_(mask[:, None], 0)

    def _advance(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.s.copy_(action)
        return action.sum(1).float(), torch.zeros(self.num_envs, dtype=torch.bool)

    def _observe(self, out: torch.Tensor) -> None:
        out.copy_(self.s)

    def get_state(self) -> torch.Tensor:
        return self.s.clone()

    def _set_state(self, state: torch.Tensor) -> None:
        self.s.copy_(state)


@pytest.mark.parametrize(("name", "action", "match"), [
    ("cartpole", [0, 1, 2], r"actions\[2\] = 2 is outside \[0, 2\)"),
    ("cartpole", [-1, 0, 0], r"actions\[0\] = -1 is outside"),
    ("cartpole", [0, 1], r"shape \(2,\), expected \(3,\)"),
    ("cartpole", [[0], [1], [0]], r"shape \(3, 1\), expected \(3,\)"),
    ("cartpole", [0.0, 1.0, 0.0], "float64 is not an integer type"),
    ("cartpole", np.array([True, False, True]), "bool is neither"),
    ("cartpole", ["a", "b", "c"], "neither an integer nor a float"),
    ("cartpole", torch.tensor([0, 5, 1]), r"actions\[1\] = 5"),
    ("pendulum", np.zeros(3, dtype=np.float32), r"shape \(3,\), expected \(3, 1\)"),
    ("pendulum", np.zeros((3, 2), dtype=np.float32), r"shape \(3, 2\), expected \(3, 1\)"),
    ("pendulum", np.zeros((3, 1), dtype=np.complex64), "complex64 is neither"),
    ("pendulum", [[0.0], [1.0]], r"shape \(2, 1\)"),
    ("dials", [[0, 1], [2, 1], [1, 2]], r"actions\[2, 1\] = 2 is outside \[0, 2\)"),
    ("dials", [[3, 0], [0, 0], [0, 0]], r"actions\[0, 0\] = 3 is outside \[0, 3\)"),
    ("dials", [0, 1, 2], r"shape \(3,\), expected \(3, 2\)"),
])
def test_to_gymnasium_rejects_bad_actions(name: str, action: Any, match: str) -> None:
    """A misfit action raises gymnasium's InvalidAction -- also the AssertionError its envs
    raise for an action outside the space and the ValueError its vector envs raise for the
    wrong number of actions -- naming the actions and the space, before anything moves."""
    env = _Dials(3) if name == "dials" else make_env(name, num_envs=3, backend="cpu", seed=0)
    vec = to_gymnasium(env)
    vec.reset(seed=0)
    state = env.get_state()
    with pytest.raises(gym.error.InvalidAction, match=match) as err:
        vec.step(action)
    assert isinstance(err.value, AssertionError) and isinstance(err.value, ValueError)
    assert str(vec.single_action_space) in str(err.value) and "\n" not in str(err.value)
    torch.testing.assert_close(env.get_state(), state, rtol=0, atol=0)
    assert int(env.elapsed.max()) == 0


def test_to_gymnasium_takes_what_gymnasium_takes() -> None:
    """Valid actions in every form gymnasium accepts; a Box action outside the bounds is
    clipped by the env, as gymnasium's Pendulum clips it."""
    vec = to_gymnasium(make_env("cartpole", num_envs=3, backend="cpu", seed=0))
    vec.reset(seed=0)
    for action in ([0, 1, 1], np.array([1, 0, 1], dtype=np.uint8), torch.tensor([0, 0, 1], dtype=torch.int32),
                   vec.action_space.sample()):
        vec.step(action)
    dials = to_gymnasium(_Dials(2))
    dials.reset(seed=0)
    o, r, *_ = dials.step(np.array([[2, 1], [0, 0]]))
    np.testing.assert_array_equal(o, [[2, 1], [0, 0]])
    np.testing.assert_array_equal(r, [3, 0])

    def pendulum(action: np.ndarray) -> Any:
        vec = to_gymnasium(make_env("pendulum", num_envs=2, backend="cpu", seed=0, dtype="float64"))
        vec.reset(seed=0)
        return vec.step(action)

    assert data_equivalence(pendulum(np.full((2, 1), 5.0)), pendulum(np.full((2, 1), 2.0)), exact=True)
    assert data_equivalence(pendulum(np.full((2, 1), 1, dtype=np.int64)), pendulum(np.full((2, 1), 1.0)), exact=True)
    ref = _gym_vec("Pendulum-v1", 2, AutoresetMode.NEXT_STEP)
    ref.reset(seed=0)
    ref.step(np.full((2, 1), 5.0, dtype=np.float32))  # gymnasium's takes it too


def test_to_gymnasium_returns_fresh_arrays() -> None:
    """gymnasium expects returned data not to be overwritten by the next step."""
    vec = to_gymnasium(make_env("pendulum", num_envs=3, backend="cpu", seed=0))
    o0, _ = vec.reset(seed=0)
    o1, r1, *_ = vec.step(vec.action_space.sample())
    keep = o1.copy(), r1.copy()
    vec.step(vec.action_space.sample())
    np.testing.assert_array_equal(o1, keep[0])
    np.testing.assert_array_equal(r1, keep[1])
    assert o0.dtype == np.float32 and vec.observation_space.contains(o1)


def test_to_gymnasium_torch_mode() -> None:
    vec = to_gymnasium(make_env("acrobot", num_envs=3, backend="cpu", seed=0), numpy=False, autoreset_mode="same-step")
    o, _ = vec.reset(seed=0)
    assert isinstance(o, torch.Tensor) and o.shape == (3, 6)
    o, r, te, tr, info = vec.step(torch.tensor([0, 1, 2]))
    assert all(isinstance(x, torch.Tensor) for x in (o, r, te, tr, info["final_obs"], info["_final_obs"]))
    assert info["final_obs"].shape == (3, 6) and info["_final_obs"].dtype == torch.bool


def test_to_gymnasium_torch_mode_next_step() -> None:
    """numpy=False returns the same numbers as numpy=True, as tensors."""
    def run(numpy: bool) -> list[Any]:
        vec = to_gymnasium(make_env("cartpole", num_envs=3, backend="cpu", seed=0, max_episode_steps=4), numpy=numpy)
        out = [vec.reset(seed=0)[0]]
        for t in range(10):
            action = torch.tensor([t % 2, 1, 0])
            out += list(vec.step(action if not numpy else action.numpy())[:4])
        return out

    tensors, arrays = run(False), run(True)
    assert all(isinstance(x, torch.Tensor) for x in tensors)
    assert data_equivalence([x.numpy() for x in tensors], arrays, exact=True)


def test_to_gymnasium_autoreset_mode_argument() -> None:
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    for mode, want in [("next-step", AutoresetMode.NEXT_STEP), ("NextStep", AutoresetMode.NEXT_STEP),
                       ("same_step", AutoresetMode.SAME_STEP), (AutoresetMode.DISABLED, AutoresetMode.DISABLED)]:
        assert to_gymnasium(env, autoreset_mode=mode).metadata["autoreset_mode"] == want
    assert to_gymnasium(env).metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP  # gymnasium's default
    with pytest.raises(ValueError, match="autoreset_mode.*'sometimes'"):
        to_gymnasium(env, autoreset_mode="sometimes")


def test_round_trip_gym_to_noeira_to_gym() -> None:
    env = make_env("gym:CartPole-v1", num_envs=2, backend="cpu", seed=0)
    with pytest.raises(ValueError, match="TensorEnv.*autoreset_mode='same-step'"):
        to_gymnasium(env)  # next-step needs the counters of a TensorEnv
    vec = to_gymnasium(env, autoreset_mode="same-step")
    o, _ = vec.reset(seed=0)
    assert o.shape == (2, 4)
    for _ in range(30):
        o, r, te, tr, info = vec.step(vec.action_space.sample())
        assert vec.observation_space.contains(o)
    with pytest.raises(gym.error.InvalidAction):
        vec.step(np.array([0, 2]))
    vec.close()


@pytest.mark.cuda
def test_to_gymnasium_on_cuda() -> None:
    vec = to_gymnasium(make_env("cartpole", num_envs=8, backend="cuda", seed=0), numpy=False, autoreset_mode="same-step")
    o, _ = vec.reset(seed=0)
    assert o.device.type == "cuda"
    o, r, te, tr, info = vec.step(torch.ones(8, dtype=torch.int64, device="cuda"))
    assert r.device.type == "cuda" and info["final_obs"].device.type == "cuda"
    nxt = to_gymnasium(make_env("cartpole", num_envs=8, backend="cuda", seed=0, max_episode_steps=3), numpy=False)
    nxt.reset(seed=0)
    for t in range(8):
        o, r, te, tr, info = nxt.step(torch.ones(8, dtype=torch.int64, device="cuda"))
        assert o.device.type == "cuda" and tr.all().item() == (t in (2, 6)) and info == {}
    with pytest.raises(gym.error.InvalidAction):
        nxt.step(torch.full((8,), 2, device="cuda"))
    vec_np = to_gymnasium(make_env("cartpole", num_envs=8, backend="cuda", seed=0))
    o, _ = vec_np.reset(seed=0)
    assert isinstance(o, np.ndarray)
    vec_np.step(vec_np.action_space.sample())
    vec_np.reset(options={"reset_mask": np.arange(8) < 3})
