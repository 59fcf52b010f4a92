"""The gymnasium bridge both ways: ``gym:<EnvId>`` as a noeira BatchedEnv, and
``noeira.envs.to_gymnasium`` exposing ours as a gymnasium VectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from noeira.core import ConfigError, Discrete, UserError, make_env
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

def _gym_same_step(gym_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(gym_id, num_envs=n, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})


@pytest.mark.parametrize(("name", "gym_id"), [("cartpole", "CartPole-v1"), ("pendulum", "Pendulum-v1"),
                                              ("mountaincar", "MountainCar-v0")])
def test_to_gymnasium_matches_gymnasium_vector_env(name: str, gym_id: str) -> None:
    """Ours through to_gymnasium and gymnasium's own SyncVectorEnv (same-step autoreset)
    agree step by step: obs, reward, flags, and ``info['final_obs']`` / ``_final_obs``."""
    n = 4
    ours = to_gymnasium(make_env(name, num_envs=n, backend="cpu", seed=0, dtype="float64"))
    ref = _gym_same_step(gym_id, n)
    assert ours.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    if isinstance(ref.single_action_space, gym.spaces.Discrete):
        assert ours.single_action_space == ref.single_action_space
    else:  # a float64 env takes float64 actions
        np.testing.assert_array_equal(ours.single_action_space.low, ref.single_action_space.low)
        np.testing.assert_array_equal(ours.single_action_space.high, ref.single_action_space.high)
    assert ours.single_observation_space.shape == ref.single_observation_space.shape
    np.testing.assert_array_equal(ours.single_observation_space.high, ref.single_observation_space.high)
    ours.reset(seed=1)
    ref.reset(seed=1)

    def sync() -> None:
        state = ours.env.get_state().numpy()
        ref.set_attr("state", [s.copy() if name != "mountaincar" else tuple(s) for s in state])

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


def test_to_gymnasium_record_episode_statistics() -> None:
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    vec = gym.wrappers.vector.RecordEpisodeStatistics(to_gymnasium(env))
    vec.reset(seed=0)
    lengths = []
    for _ in range(100):
        _, _, te, tr, info = vec.step(vec.action_space.sample())
        if "episode" in info:
            lengths += list(info["episode"]["l"][info["_episode"]])
    stats = env.pop_episode_stats()
    assert len(lengths) == int(stats["count"]) > 0
    assert sum(lengths) == int(stats["length_sum"])


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
    vec = to_gymnasium(make_env("acrobot", num_envs=3, backend="cpu", seed=0), numpy=False)
    o, _ = vec.reset(seed=0)
    assert isinstance(o, torch.Tensor) and o.shape == (3, 6)
    o, r, te, tr, info = vec.step(torch.tensor([0, 1, 2]))
    assert all(isinstance(x, torch.Tensor) for x in (o, r, te, tr, info["final_obs"], info["_final_obs"]))
    assert info["final_obs"].shape == (3, 6) and info["_final_obs"].dtype == torch.bool


def test_round_trip_gym_to_noeira_to_gym() -> None:
    vec = to_gymnasium(make_env("gym:CartPole-v1", num_envs=2, backend="cpu", seed=0))
    o, _ = vec.reset(seed=0)
    assert o.shape == (2, 4)
    for _ in range(30):
        o, r, te, tr, info = vec.step(vec.action_space.sample())
        assert vec.observation_space.contains(o)
    vec.close()


@pytest.mark.cuda
def test_to_gymnasium_on_cuda() -> None:
    vec = to_gymnasium(make_env("cartpole", num_envs=8, backend="cuda", seed=0), numpy=False)
    o, _ = vec.reset(seed=0)
    assert o.device.type == "cuda"
    o, r, te, tr, info = vec.step(torch.ones(8, dtype=torch.int64, device="cuda"))
    assert r.device.type == "cuda" and info["final_obs"].device.type == "cuda"
    vec_np = to_gymnasium(make_env("cartpole", num_envs=8, backend="cuda", seed=0))
    o, _ = vec_np.reset(seed=0)
    assert isinstance(o, np.ndarray)
    vec_np.step(vec_np.action_space.sample())
