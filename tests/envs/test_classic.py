"""Classic-control envs: step-by-step parity with gymnasium, autoreset, time limits,
the conformance kit, config errors, float32/float64, and CUDA (marked ``cuda``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest
import torch
from env_testing import record_step

from noeira.core import ConfigError, Discrete, make_env
from noeira.core.testing import check_env

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@dataclass
class Ref:
    """How to compare one of our envs with its gymnasium reference."""

    name: str
    gym_id: str
    max_steps: int
    sample_state: Callable[[np.random.Generator, int], np.ndarray]
    """Random states ``[n, state_dim]`` (wider than the reset distribution)."""
    sample_action: Callable[[np.random.Generator, int], np.ndarray]
    """Random actions ``[n, ...]`` (out of range where gymnasium clips)."""
    gym_state: Callable[[np.ndarray], object] = lambda s: np.array(s, dtype=np.float64)
    """Our state row -> what gymnasium keeps in ``unwrapped.state``."""
    policy: Callable[[np.ndarray], np.ndarray] | None = None
    """Actions from states ``[n, state_dim]`` for half the envs of a rollout, so that both
    termination and the time limit happen (the other half act at random)."""
    tol64: float = 1e-12
    """float64 tolerance on the CPU (gymnasium's own arithmetic is float32 in places)."""


def _uniform(low: list[float], high: list[float]) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.uniform(low, high, size=(n, len(low)))


def _cartpole_policy(s: np.ndarray) -> np.ndarray:
    # a PD controller on the pole angle (plus a little cart centring) balances for 500 steps
    return (s[:, 2] + 0.5 * s[:, 3] + 0.01 * s[:, 0] + 0.1 * s[:, 1] > 0).astype(np.int64)


REFS = {
    "cartpole": Ref(
        "cartpole", "CartPole-v1", 500,
        _uniform([-2.5, -3.0, -0.25, -3.0], [2.5, 3.0, 0.25, 3.0]),
        lambda rng, n: rng.integers(0, 2, size=n),
        policy=_cartpole_policy,
    ),
    "pendulum": Ref(
        "pendulum", "Pendulum-v1", 200,
        _uniform([-3 * np.pi, -8.0], [3 * np.pi, 8.0]),
        lambda rng, n: rng.uniform(-3.0, 3.0, size=(n, 1)),
    ),
    "acrobot": Ref(
        "acrobot", "Acrobot-v1", 500,
        _uniform([-np.pi, -np.pi, -4 * np.pi, -9 * np.pi], [np.pi, np.pi, 4 * np.pi, 9 * np.pi]),
        lambda rng, n: rng.integers(0, 3, size=n),
        # pump energy: torque along the second joint's motion swings the tip up
        policy=lambda s: np.where(s[:, 3] > 0, 2, 0),
    ),
    "mountaincar": Ref(
        "mountaincar", "MountainCar-v0", 200,
        _uniform([-1.2, -0.07], [0.6, 0.07]),
        lambda rng, n: rng.integers(0, 3, size=n),
        policy=lambda s: np.where(s[:, 1] > 0, 2, 0),
    ),
    "mountaincar-continuous": Ref(
        "mountaincar-continuous", "MountainCarContinuous-v0", 999,
        _uniform([-1.2, -0.07], [0.6, 0.07]),
        lambda rng, n: rng.uniform(-2.0, 2.0, size=(n, 1)),
        # gymnasium keeps this env's state in float32 (and computes 3 * position in float32)
        gym_state=lambda s: np.array(s, dtype=np.float32),
        policy=lambda s: np.where(s[:, 1:] > 0, 1.0, -1.0),
        tol64=1e-6,
    ),
}


def _gym_action(ref: Ref, a: np.ndarray) -> object:
    return int(a) if a.ndim == 0 else np.asarray(a, dtype=np.float64)


def _torch_action(a: np.ndarray, device: str) -> torch.Tensor:
    t = torch.as_tensor(a, device=device)
    return t.long() if not np.issubdtype(a.dtype, np.floating) else t.double()


def _tolerance(ref: Ref, dtype: str, backend: str) -> dict[str, float]:
    if dtype == "float32":
        return {"rtol": 1e-4, "atol": 1e-4}
    # float64 on the CPU: same arithmetic as numpy (sin/cos may differ in the last bit)
    tol = ref.tol64 if backend == "cpu" else max(ref.tol64, 1e-9)
    return {"rtol": tol, "atol": tol}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(REFS))
def test_one_step_parity_from_random_states(name: str, backend: str) -> None:
    """Set many random states in ours and gymnasium's, step once with random actions,
    compare observation, reward, termination and the next state (float64)."""
    ref, n = REFS[name], 512
    rng = np.random.default_rng(0)
    states, actions = ref.sample_state(rng, n), ref.sample_action(rng, n)
    env = make_env(name, num_envs=n, backend=backend, seed=0, dtype="float64")
    env.reset(seed=0)
    env.set_state(torch.as_tensor(states, device=backend))
    res = env.step(_torch_action(actions, backend))
    after = env.get_state().cpu().numpy()
    tol = _tolerance(ref, "float64", backend)

    genv = gym.make(ref.gym_id).unwrapped
    genv.reset(seed=0)
    g_obs, g_rew, g_term, g_state = [], [], [], []
    for i in range(n):
        genv.state = ref.gym_state(states[i])
        if hasattr(genv, "steps_beyond_terminated"):
            genv.steps_beyond_terminated = None
        o, r, term, trunc, _ = genv.step(_gym_action(ref, actions[i]))
        assert not trunc
        g_obs.append(o)
        g_rew.append(r)
        g_term.append(term)
        g_state.append(np.asarray(genv.state, dtype=np.float64))
    g_term_a = np.array(g_term)
    np.testing.assert_array_equal(res.terminated.cpu().numpy(), g_term_a)
    assert 0 < g_term_a.sum() < n or name == "pendulum", "the states should cover both outcomes"
    np.testing.assert_allclose(res.reward.cpu().numpy(), np.array(g_rew), **tol)
    np.testing.assert_allclose(res.final_obs.cpu().numpy(), np.array(g_obs, dtype=np.float64), rtol=1e-6, atol=1e-6)
    live = ~g_term_a
    np.testing.assert_allclose(after[live], np.array(g_state)[live], **tol)
    assert not res.truncated.any()


def _rollout_parity(name: str, backend: str, dtype: str, n: int, steps: int, seed: int) -> None:
    """Run ours and ``n`` gymnasium envs (``gym.make``, with its TimeLimit) side by side.
    Before each step gymnasium's state is set to ours, so the comparison is step by step;
    autoreset, ``final_obs`` and truncation at the exact step are compared as well."""
    ref = REFS[name]
    rng = np.random.default_rng(seed)
    env = make_env(name, num_envs=n, backend=backend, seed=seed, dtype=dtype)
    env.reset(seed=seed)
    genvs = [gym.make(ref.gym_id) for _ in range(n)]
    for i, g in enumerate(genvs):
        g.reset(seed=seed + i)
    tol = _tolerance(ref, dtype, backend)
    ended = {"terminated": 0, "truncated": 0}
    for t in range(steps):
        state = env.get_state().double().cpu().numpy()
        if ref.policy is not None:
            actions = ref.policy(state)
            # half the envs balance (to reach the time limit), half act at random (to terminate)
            flip = (np.arange(n) % 2 == 1) | (rng.random(n) < 0.05)
            random = ref.sample_action(rng, n)
            actions = np.where(flip.reshape(-1, *[1] * (random.ndim - 1)), random, actions)
        else:
            actions = ref.sample_action(rng, n)
        for i, g in enumerate(genvs):
            g.unwrapped.state = ref.gym_state(state[i])
        res = env.step(_torch_action(actions, backend))
        final_obs = res.final_obs.double().cpu().numpy()
        obs = res.obs.double().cpu().numpy()
        reward = res.reward.double().cpu().numpy()
        term, trunc = res.terminated.cpu().numpy(), res.truncated.cpu().numpy()
        for i, g in enumerate(genvs):
            o, r, gterm, gtrunc, _ = g.step(_gym_action(ref, actions[i]))
            assert (term[i], trunc[i]) == (gterm, gtrunc), f"t={t} env {i}: flags {(term[i], trunc[i])} != {(gterm, gtrunc)}"
            np.testing.assert_allclose(final_obs[i], o, rtol=max(tol["rtol"], 1e-6), atol=max(tol["atol"], 1e-6))
            np.testing.assert_allclose(reward[i], r, **tol)
            if gterm or gtrunc:
                ended["terminated" if gterm else "truncated"] += 1
                g.reset()
                # autoreset: obs is a fresh episode's, not the final one
                assert not np.allclose(obs[i], final_obs[i])
            else:
                np.testing.assert_array_equal(obs[i], final_obs[i])
    return ended


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(REFS))
def test_rollout_parity_with_autoreset_and_time_limit(name: str, dtype: str) -> None:
    ref = REFS[name]
    ended = _rollout_parity(name, "cpu", dtype, n=8, steps=ref.max_steps + 30, seed=1)
    assert ended["truncated"] > 0, "the rollout must reach the time limit"
    if name != "pendulum":
        assert ended["terminated"] > 0


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(REFS))
def test_rollout_parity_cuda(name: str) -> None:
    _rollout_parity(name, "cuda", "float64", n=8, steps=REFS[name].max_steps + 30, seed=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(REFS))
def test_conformance(name: str, dtype: str, backend: str) -> None:
    check_env(name, num_envs=8, backend=backend, dtype=dtype)
    env = make_env(name, num_envs=3, backend=backend, dtype=dtype)
    want = getattr(torch, dtype)
    assert env.obs.dtype == want and env.get_state().dtype == want
    assert env.capture_safe and env.max_episode_steps == REFS[name].max_steps


@pytest.mark.parametrize("name", list(REFS))
def test_spaces_match_gymnasium(name: str) -> None:
    ref = REFS[name]
    genv = gym.make(ref.gym_id)
    env = make_env(name, num_envs=2, backend="cpu")
    assert genv.spec.max_episode_steps == env.max_episode_steps
    go, ga = genv.observation_space, genv.action_space
    assert env.observation_space.shape == go.shape
    np.testing.assert_array_equal(env.observation_space.low.numpy(), go.low)
    np.testing.assert_array_equal(env.observation_space.high.numpy(), go.high)
    if isinstance(ga, gym.spaces.Discrete):
        assert env.action_space.n == ga.n and env.action_space.start == ga.start
    else:
        np.testing.assert_array_equal(env.action_space.low.numpy(), ga.low)
        np.testing.assert_array_equal(env.action_space.high.numpy(), ga.high)


@pytest.mark.parametrize("name", list(REFS))
def test_reset_distribution_matches_gymnasium(name: str) -> None:
    """Not bitwise (gymnasium samples with numpy): same support and moments."""
    ref, n = REFS[name], 4000
    env = make_env(name, num_envs=n, backend="cpu", dtype="float64")
    env.reset(seed=3)
    ours = env.get_state().numpy()
    genv = gym.make(ref.gym_id).unwrapped
    theirs = []
    for i in range(n):
        genv.reset(seed=i)
        theirs.append(np.asarray(genv.state, dtype=np.float64))
    theirs_a = np.array(theirs)
    lo, hi = theirs_a.min(0), theirs_a.max(0)
    span = np.maximum(hi - lo, 1e-12)
    assert np.all(ours.min(0) >= lo - 0.01 * span) and np.all(ours.max(0) <= hi + 0.01 * span)
    np.testing.assert_allclose(ours.mean(0), theirs_a.mean(0), atol=0.05 * span.max())
    np.testing.assert_allclose(ours.std(0), theirs_a.std(0), rtol=0.1, atol=1e-9)


def test_cartpole_sutton_barto_reward() -> None:
    env = make_env("cartpole", num_envs=2, backend="cpu", dtype="float64", sutton_barto_reward=True)
    env.set_state(torch.tensor([[0.0, 0.0, 0.0, 0.0], [2.399, 3.0, 0.0, 0.0]], dtype=torch.float64))
    res = env.step(torch.tensor([1, 1]))
    assert res.terminated.tolist() == [False, True]
    assert res.reward.tolist() == [0.0, -1.0]


def test_pendulum_gravity_option() -> None:
    genv = gym.make("Pendulum-v1", g=9.81).unwrapped
    genv.reset(seed=0)
    genv.state = np.array([1.0, 0.5])
    o, r, *_ = genv.step(np.array([0.3]))
    env = make_env("pendulum", num_envs=1, backend="cpu", dtype="float64", g=9.81)
    env.set_state(torch.tensor([[1.0, 0.5]], dtype=torch.float64))
    res = env.step(torch.tensor([[0.3]], dtype=torch.float64))
    np.testing.assert_allclose(env.get_state().numpy()[0], genv.state, rtol=1e-12)
    np.testing.assert_allclose(float(res.reward[0]), r, rtol=1e-12)


@pytest.mark.parametrize("name", list(REFS))
def test_config_errors_at_creation(name: str) -> None:
    with pytest.raises(ConfigError, match="num_envs"):
        make_env(name, num_envs=0, backend="cpu")
    with pytest.raises(ConfigError, match="bogus"):
        make_env(name, num_envs=2, backend="cpu", bogus=1)
    with pytest.raises(ConfigError, match="dtype"):
        make_env(name, num_envs=2, backend="cpu", dtype="float16")
    with pytest.raises(ConfigError, match="max_episode_steps"):
        make_env(name, num_envs=2, backend="cpu", max_episode_steps=0)
    with pytest.raises(ConfigError, match="validate_actions"):
        make_env(name, num_envs=2, backend="cpu", validate_actions="yes")


@pytest.mark.parametrize("name", list(REFS))
def test_validate_actions(name: str) -> None:
    env = make_env(name, num_envs=4, backend="cpu", validate_actions=True)
    env.reset(seed=0)
    env.step(env.action_space.sample(4))
    with pytest.raises(ValueError, match="shape"):
        env.step(env.action_space.sample(3))
    if isinstance(env.action_space, Discrete):
        with pytest.raises(ValueError, match="range"):
            env.step(torch.full((4,), env.action_space.n))
        with pytest.raises(ValueError, match="dtype"):
            env.step(torch.zeros(4))
    else:
        with pytest.raises(ValueError, match="dtype"):
            env.step(torch.zeros((4, 1), dtype=torch.int64))


@pytest.mark.parametrize("name", list(REFS))
def test_step_reuses_buffers_and_never_syncs(name: str) -> None:
    """The same buffers every step (what a recorded graph relies on)."""
    env = make_env(name, num_envs=16, backend="cpu", seed=0)
    env.reset(seed=0)
    action = env.action_space.sample(16)
    first = env.step(action)
    ptrs = [t.data_ptr() for t in (first.obs, first.reward, first.terminated, first.truncated, first.final_obs)]
    state_ptr = env.s.data_ptr()
    for _ in range(5):
        r = env.step(action)
    assert [t.data_ptr() for t in (r.obs, r.reward, r.terminated, r.truncated, r.final_obs)] == ptrs
    assert env.s.data_ptr() == state_ptr


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(REFS))
def test_cuda_step_has_no_host_sync_and_graph_captures(name: str) -> None:
    """On CUDA the step never syncs with the host and records as one CUDA graph whose
    replays compute what the eager step computes (autoresets and time limits included)."""
    n = 64
    env = make_env(name, num_envs=n, backend="cuda", seed=0)
    eager = make_env(name, num_envs=n, backend="cuda", seed=1)
    env.reset(seed=0)
    action = env.action_space.sample(n)
    graph = record_step(env, action)
    ended = 0
    for _ in range(REFS[name].max_steps + 20):  # crosses autoresets and the time limit
        eager.set_state(env.get_state())
        eager.elapsed.copy_(env.elapsed)
        graph.replay()
        ref = eager.step(action)
        got = env._result
        for field in ("final_obs", "reward", "terminated", "truncated"):
            torch.testing.assert_close(getattr(got, field), getattr(ref, field))
        live = ~(ref.terminated | ref.truncated)
        torch.testing.assert_close(got.obs[live], ref.obs[live])
        ended += int((~live).sum())
    assert ended > 0


def test_acrobot_nips_dynamics() -> None:
    rng = np.random.default_rng(5)
    ref, n = REFS["acrobot"], 64
    states, actions = ref.sample_state(rng, n), ref.sample_action(rng, n)
    env = make_env("acrobot", num_envs=n, backend="cpu", dtype="float64", book_or_nips="nips", max_episode_steps=10**6)
    env.set_state(torch.as_tensor(states))
    res = env.step(torch.as_tensor(actions))
    genv = gym.make("Acrobot-v1").unwrapped
    genv.book_or_nips = "nips"
    genv.reset(seed=0)
    for i in range(n):
        genv.state = states[i].copy()
        o, r, term, *_ = genv.step(int(actions[i]))
        assert bool(res.terminated[i]) == term
        np.testing.assert_allclose(res.final_obs[i].numpy(), o, rtol=1e-6, atol=1e-6)
        if not term:
            np.testing.assert_allclose(env.get_state()[i].numpy(), genv.state, rtol=1e-12, atol=1e-12)
    with pytest.raises(ConfigError, match="book_or_nips"):
        make_env("acrobot", num_envs=1, backend="cpu", book_or_nips="paper")


@pytest.mark.parametrize("name", ["mountaincar", "mountaincar-continuous"])
def test_mountaincar_goal_velocity(name: str) -> None:
    env = make_env(name, num_envs=2, backend="cpu", dtype="float64", goal_velocity=0.01)
    env.set_state(torch.tensor([[0.55, 0.005], [0.55, 0.03]], dtype=torch.float64))
    action = torch.tensor([1, 1]) if name == "mountaincar" else torch.zeros(2, 1, dtype=torch.float64)
    assert env.step(action).terminated.tolist() == [False, True]


@pytest.mark.parametrize("name", list(REFS))
def test_step_is_capture_safe_per_noeira_check_capture(name: str) -> None:
    """noeira-cuda's capture checker (host syncs, data-dependent control flow, shapes or
    allocations that change between calls) finds nothing in the step, on the CPU too."""
    check = pytest.importorskip("noeira.cuda.check")
    env = make_env(name, num_envs=8, backend="cpu", seed=0)
    env.reset(seed=0)
    action = env.action_space.sample(8)

    def step() -> None:
        env.step(action)

    report = check.check_steps([("env.step", step, True)], torch.device("cpu"), warmup=2)
    assert report.clean, [(f.kind, f.what, f.file, f.line) for f in report.findings]


@pytest.mark.parametrize("name", list(REFS))
def test_max_episode_steps_option(name: str) -> None:
    check_env(name, num_envs=4, backend="cpu", max_episode_steps=7, steps=20)
    env = make_env(name, num_envs=4, backend="cpu", max_episode_steps=7)
    assert env.max_episode_steps == 7 and env.spec.max_episode_steps == 7
