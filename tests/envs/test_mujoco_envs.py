"""The MuJoCo envs against gymnasium's v5 envs, step by step, on the ``mujoco`` engine in
float64: same state (set_state), same actions -> same observation, reward, terminated."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
import torch

from noeira.core import make_env
from noeira.core.testing import check_env

gym = pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")

# (our name, gymnasium id, steps compared per episode, action scale)
ENVS = [
    ("halfcheetah", "HalfCheetah-v5", 150, 1.0),
    ("hopper", "Hopper-v5", 150, 1.0),
    ("walker2d", "Walker2d-v5", 150, 1.0),
    ("ant", "Ant-v5", 150, 1.0),
    ("humanoid", "Humanoid-v5", 80, 1.0),
    ("swimmer", "Swimmer-v5", 150, 1.0),
    ("inverted-pendulum", "InvertedPendulum-v5", 150, 0.3),
    ("inverted-double-pendulum", "InvertedDoublePendulum-v5", 150, 0.3),
    ("reacher", "Reacher-v5", 50, 1.0),
]
N = 3  # envs in our batch, each against its own gymnasium env


@pytest.fixture(autouse=True)
def _mujoco_warnings_to_python():
    """gymnasium compiles its models with MuJoCo's default warning handler, which writes
    MUJOCO_LOG.TXT into the working directory; send them to Python's warnings instead."""
    import mujoco

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda msg: warnings.warn(f"MuJoCo: {msg}", stacklevel=2))
    yield
    mujoco.set_mju_user_warning(previous)


@pytest.mark.parametrize(("name", "gym_id", "steps", "scale"), ENVS, ids=[e[0] for e in ENVS])
def test_matches_gymnasium_v5(name: str, gym_id: str, steps: int, scale: float) -> None:
    ours = make_env(name, num_envs=N, backend="cpu", seed=0, dtype="float64")
    refs = [gym.make(gym_id).unwrapped for _ in range(N)]
    assert ours.observation_space.shape == refs[0].observation_space.shape
    assert np.allclose(ours.action_space.low.numpy(), refs[0].action_space.low)
    assert np.allclose(ours.action_space.high.numpy(), refs[0].action_space.high)
    assert ours.dt == pytest.approx(refs[0].dt)
    rng = np.random.default_rng(1)
    low, high = refs[0].action_space.low.astype(np.float64), refs[0].action_space.high.astype(np.float64)
    compared = episode = 0
    while compared < steps * N:
        # a fresh episode on both sides: gymnasium's reset states (its own noise), copied to ours
        for i, e in enumerate(refs):
            e.reset(seed=100 * episode + i)
        ours.reset(seed=episode)
        ours.set_state(torch.tensor(np.stack([e.state_vector() for e in refs])))
        for i, e in enumerate(refs):
            np.testing.assert_allclose(ours.obs[i].numpy(), e._get_obs(), rtol=1e-9, atol=1e-9,
                                       err_msg=f"{name} env {i} after set_state")
        episode += 1
        for t in range(steps):
            # actions beyond the range too: MuJoCo clamps ctrl, the control cost sees them raw
            action = rng.uniform(low * 1.2 * scale, high * 1.2 * scale, size=(N, len(low)))
            res = ours.step(torch.tensor(action))
            ended = False
            for i, e in enumerate(refs):
                obs, reward, terminated, _, _ = e.step(action[i])
                where = f"{name} env {i} episode {episode} step {t}"
                np.testing.assert_allclose(res.final_obs[i].numpy(), obs, rtol=1e-10, atol=1e-10, err_msg=where)
                assert float(res.reward[i]) == pytest.approx(float(reward), rel=1e-10, abs=1e-10), where
                assert bool(res.terminated[i]) == bool(terminated), where
                ended |= bool(terminated)
            compared += N
            if ended:  # our env autoreset; start both sides afresh
                break
    for e in refs:
        e.close()
    ours.close()


# (our name, gymnasium id, the reward terms of its info)
TERMS = [
    ("halfcheetah", "HalfCheetah-v5", ("reward_forward", "reward_ctrl")),
    ("hopper", "Hopper-v5", ("reward_forward", "reward_ctrl", "reward_survive")),
    ("walker2d", "Walker2d-v5", ("reward_forward", "reward_ctrl", "reward_survive")),
    ("ant", "Ant-v5", ("reward_forward", "reward_ctrl", "reward_survive", "reward_contact")),
    ("humanoid", "Humanoid-v5", ("reward_forward", "reward_ctrl", "reward_survive", "reward_contact")),
    ("swimmer", "Swimmer-v5", ("reward_forward", "reward_ctrl")),
    ("inverted-double-pendulum", "InvertedDoublePendulum-v5", ("reward_survive", "distance_penalty", "velocity_penalty")),
    ("reacher", "Reacher-v5", ("reward_dist", "reward_ctrl")),
]


@pytest.mark.parametrize(("name", "gym_id", "terms"), TERMS, ids=[t[0] for t in TERMS])
def test_episode_statistics_sum_gymnasiums_reward_terms(name: str, gym_id: str, terms: tuple[str, ...]) -> None:
    """``pop_episode_stats`` sums each reward term of gymnasium's ``info`` over the episodes that
    ended (time limit and termination, across autoresets), the terms add up to the return, and the
    locomotion envs report the root's x position where each episode ended."""
    steps, limit = 60, 25
    ours = make_env(name, num_envs=N, backend="cpu", seed=0, dtype="float64", max_episode_steps=limit)
    assert ours.episode_stat_keys[:len(terms)] == terms
    refs = [gym.make(gym_id).unwrapped for _ in range(N)]
    nq = ours.model.nq
    ours.reset(seed=3)

    def copy_state(i: int) -> None:
        state = ours.get_state()[i].numpy()
        refs[i].set_state(state[:nq], state[nq:])

    for i in range(N):
        refs[i].reset(seed=i)
        copy_state(i)
    rng = np.random.default_rng(2)
    low, high = refs[0].action_space.low, refs[0].action_space.high
    running = np.zeros((N, len(terms)))
    want = dict.fromkeys(terms, 0.0) | {"return": 0.0, "x_position": 0.0, "count": 0}
    ret = np.zeros(N)
    for _ in range(steps):
        action = rng.uniform(low, high, size=(N, len(low)))
        res = ours.step(torch.tensor(action))
        for i, e in enumerate(refs):
            _, reward, _, _, info = e.step(action[i])
            running[i] += [info[t] for t in terms]
            ret[i] += reward
            if bool(res.terminated[i] | res.truncated[i]):
                for j, t in enumerate(terms):
                    want[t] += running[i, j]
                want["return"] += ret[i]
                want["x_position"] += info.get("x_position", 0.0)
                want["count"] += 1
                running[i], ret[i] = 0.0, 0.0
                copy_state(i)  # our env reset itself: start gymnasium's from the same state
    stats = ours.pop_episode_stats()
    assert want["count"] >= N and float(stats["count"]) == want["count"]
    for t in terms:
        assert float(stats[f"{t}_sum"]) == pytest.approx(want[t], rel=1e-8, abs=1e-8), t
    assert float(stats["return_sum"]) == pytest.approx(want["return"], rel=1e-8)
    assert sum(float(stats[f"{t}_sum"]) for t in terms) == pytest.approx(float(stats["return_sum"]), rel=1e-8, abs=1e-8)
    if "x_position" in ours.episode_stat_keys:
        assert float(stats["x_position_sum"]) == pytest.approx(want["x_position"], rel=1e-8, abs=1e-8)
    for e in refs:
        e.close()
    ours.close()


@pytest.mark.parametrize("name", [e[0] for e in ENVS])
def test_conformance(name: str) -> None:
    check_env(name, num_envs=3, backend="cpu", max_episode_steps=20, steps=45)


def test_reset_distribution_and_time_limit() -> None:
    env = make_env("hopper", num_envs=64, backend="cpu", seed=0, dtype="float64")
    env.reset(seed=3)
    state = env.get_state()
    qpos0 = torch.tensor(env.model.qpos0)
    noise = state[:, : env.model.nq] - qpos0
    assert noise.abs().max() <= 5e-3 and noise.std() > 1e-3  # U(-0.005, 0.005)
    assert env.max_episode_steps == 1000
    assert make_env("reacher", num_envs=1, backend="cpu").max_episode_steps == 50


# the envs with gymnasium's usual reset noise: qpos0 + U(-s, s), qvel U(-s, s) or s * N(0, 1)
RESET_NOISE = [("halfcheetah", "normal"), ("hopper", "uniform"), ("walker2d", "uniform"),
               ("ant", "normal"), ("humanoid", "uniform"), ("swimmer", "uniform"),
               ("inverted-pendulum", "uniform"), ("inverted-double-pendulum", "normal")]


@pytest.mark.parametrize(("name", "qvel_noise"), RESET_NOISE, ids=[e[0] for e in RESET_NOISE])
def test_reset_noise(name: str, qvel_noise: str) -> None:
    """The parity test copies gymnasium's reset states; this checks our own reset noise."""
    env = make_env(name, num_envs=128, backend="cpu", seed=0, dtype="float64")
    env.reset(seed=1)
    s, nq = env.config.reset_noise_scale, env.model.nq
    state = env.get_state()
    qpos_noise, qvel = state[:, :nq] - torch.tensor(env.model.qpos0), state[:, nq:]
    assert qpos_noise.abs().max() <= s and qpos_noise.std() > s / 3
    if qvel_noise == "uniform":
        assert qvel.abs().max() <= s and qvel.std() > s / 3
    else:  # N(0, s^2): a third of the draws lie beyond s
        assert qvel.abs().max() > 2 * s and abs(qvel.std() / s - 1) < 0.1
    env.close()


def test_reacher_target_in_disc() -> None:
    env = make_env("reacher", num_envs=256, backend="cpu", seed=0, dtype="float64")
    env.reset(seed=0)
    goal = env.get_state()[:, 2:4]
    r = goal.norm(dim=1)
    assert (r < 0.2).all() and r.max() > 0.15
    assert (env.get_state()[:, -2:] == 0).all()  # target velocity zero


def test_autoreset_after_termination() -> None:
    env = make_env("inverted-pendulum", num_envs=4, backend="cpu", seed=0, dtype="float64")
    env.reset(seed=0)
    hit = False
    for _ in range(60):
        res = env.step(torch.full((4, 1), 3.0, dtype=torch.float64))
        if res.terminated.any():
            hit = True
            i = int(res.terminated.nonzero()[0])
            assert res.final_obs[i, 1].abs() > 0.2 and res.obs[i, 1].abs() <= 0.01 + 1e-12
            break
    assert hit, "a pendulum pushed hard must fall"


def _spy_observation(env, calls: list[int]) -> None:
    """Record torch's thread count at each observation the env builds."""
    parts = env._observation_parts

    def spy():
        calls.append(torch.get_num_threads())
        return parts()

    env._observation_parts = spy


def test_observes_once_per_step_unless_an_env_resets() -> None:
    env = make_env("inverted-pendulum", num_envs=4, backend="cpu", seed=0, dtype="float64")
    env.reset(seed=0)
    calls: list[int] = []
    _spy_observation(env, calls)
    res = env.step(torch.zeros((4, 1), dtype=torch.float64))
    assert not res.terminated.any() and len(calls) == 1
    assert torch.equal(res.obs, res.final_obs)
    for _ in range(60):
        calls.clear()
        res = env.step(torch.full((4, 1), 3.0, dtype=torch.float64))
        if res.terminated.any():
            break
    assert res.terminated.any() and len(calls) == 2, "a step with a reset observes the reset envs again"
    i = int(res.terminated.nonzero()[0])
    fresh = torch.cat([env.physics.qpos[i], env.physics.qvel[i]])
    assert torch.equal(res.obs[i], fresh) and not torch.equal(res.obs[i], res.final_obs[i])


@pytest.mark.parametrize("torch_threads", [1, 0])
def test_env_math_runs_on_its_torch_threads(torch_threads: int) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        env = make_env("hopper", num_envs=2, backend="cpu", seed=0, physics_options={"nthread": 1},
                       torch_threads=torch_threads)
        calls: list[int] = []
        _spy_observation(env, calls)
        env.reset(seed=0)
        env.step(torch.zeros((2, 3)))
        env.set_state(env.get_state())
        assert calls == [torch_threads or 2] * 3
        assert torch.get_num_threads() == 2, "the caller's setting is restored"
    finally:
        torch.set_num_threads(before)


# -- the same envs on MuJoCo Warp ------------------------------------------------------------

HAS_WARP = importlib.util.find_spec("mujoco_warp") is not None and importlib.util.find_spec("warp") is not None
WARP = [
    pytest.param("cpu", marks=[pytest.mark.slow, pytest.mark.skipif(not HAS_WARP, reason="warp not installed")]),
    pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not HAS_WARP, reason="warp not installed")]),
]


def _warp_against_mujoco(name: str, backend: str, steps: int, tol: float, settle: int = 0, scale: float = 1.0) -> None:
    """The env on mujoco-warp (float32) against the env on mujoco (float64) from the same
    state and actions (uniform in the action box times ``scale``): obs and reward within
    ``tol * (1 + |value|)`` for ``steps`` steps (after ``settle`` steps of zero action on
    mujoco, to start from a state at rest)."""
    n = 4
    ref = make_env(name, num_envs=n, backend="cpu", seed=0, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = make_env(name, num_envs=n, backend=backend, seed=0, physics="mujoco-warp")
    assert ours.capture_safe == (backend == "cuda")
    ref.reset(seed=0)
    ours.reset(seed=0)
    for _ in range(settle):
        ref.step(torch.zeros(n, *ref.action_space.shape, dtype=torch.float64))
    ours.set_state(ref.get_state().float())
    gen = torch.Generator().manual_seed(0)
    for t in range(steps):
        action = ref.action_space.sample(n, generator=gen) * scale
        r = ref.step(action)
        o = ours.step(action.float().to(ours.device))
        for what, a, b in (("obs", r.final_obs, o.final_obs), ("reward", r.reward, o.reward)):
            err = ((a - b.double().cpu()).abs() / (1 + a.abs())).max().item()
            assert err <= tol, f"{name}: {what} differs by {err:.2e} (relative) at step {t}"
        assert torch.equal(r.terminated, o.terminated.cpu()), f"{name}: terminated differs at step {t}"
        if r.terminated.any():
            break
    ours.close()


@pytest.mark.parametrize("backend", WARP)
def test_warp_env_matches_mujoco_env(backend: str) -> None:
    _warp_against_mujoco("halfcheetah", backend, steps=15, tol=1e-2)
    if backend == "cuda":  # Warp compiles each model's kernels: keep the CPU run to one model
        _warp_against_mujoco("hopper", backend, steps=15, tol=1e-2)
        _warp_against_mujoco("walker2d", backend, steps=15, tol=1e-2)
        _warp_against_mujoco("swimmer", backend, steps=15, tol=1e-2)
        _warp_against_mujoco("inverted-pendulum", backend, steps=15, tol=1e-2)
        _warp_against_mujoco("inverted-double-pendulum", backend, steps=15, tol=1e-2)
        _warp_against_mujoco("reacher", backend, steps=15, tol=1e-2)
        # contacts: a foot touching down a step earlier in float32 than in float64 changes
        # everything after it, so Ant starts at rest on its feet with gentle actions, for a
        # few steps; Humanoid (Newton on Warp, PGS on MuJoCo) is compared loosely
        _warp_against_mujoco("ant", backend, steps=2, tol=1e-2, settle=30, scale=0.2)
        _warp_against_mujoco("humanoid", backend, steps=5, tol=5e-2)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_WARP, reason="warp not installed")
def test_warp_env_step_in_cuda_graph() -> None:
    """env.step (reset noise from the env's generator, autoreset at the time limit) recorded
    by the ``stream`` graph backend; every call equals the same step run eagerly from the
    same state. The eager copy is put in the recorded one's state before each step: MuJoCo
    Warp's contact sums are atomic (not bit-reproducible) and halfcheetah's dynamics grow
    such differences, so comparing two free-running copies would test chaos, not recording.
    One step of the two agrees to the solver's tolerance (3e-4 seen on the H200), not bitwise."""
    from noeira.core import get_backend, get_graph_backend
    from noeira.core.errors import UnknownPluginError

    try:
        graph = get_graph_backend("stream")
    except UnknownPluginError:
        pytest.skip("noeira-cuda (graph backend 'stream') is not installed")
    backend = get_backend("cuda")
    # halfcheetah never terminates: the envs reset together at the time limit, so GPU
    # nondeterminism cannot make one copy end an episode earlier than the other
    a = make_env("halfcheetah", num_envs=256, backend=backend, seed=0, physics="mujoco-warp", max_episode_steps=20)
    b = make_env("halfcheetah", num_envs=256, backend="cuda", seed=0, physics="mujoco-warp", max_episode_steps=20)
    a.reset(seed=1)
    b.reset(seed=1)
    action = torch.zeros(256, 6, device="cuda")

    def one_step() -> None:  # a recorded step returns None or tensors
        a.step(action)

    step = graph.wrap(one_step, backend)
    for t in range(45):  # past the time limit twice: autoresets inside the graph
        action.uniform_(-1, 1)
        b.set_state(a.get_state())
        step()
        rb = b.step(action)
        torch.cuda.synchronize()
        assert torch.allclose(a.obs, rb.obs, atol=1e-3, rtol=1e-3), f"step {t}: {(a.obs - rb.obs).abs().max()}"
        assert torch.equal(a._result.truncated, rb.truncated), f"step {t}"


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_WARP, reason="warp not installed")
def test_sac_halfcheetah_on_device(tmp_path) -> None:
    """A short SAC run on halfcheetah with MuJoCo Warp: the whole loop on the GPU (env step
    captured with collect), finishing with finite returns."""
    from noeira.core.driver import resolve, train

    cfg = resolve({
        "backend": "cuda",
        "env": {"name": "halfcheetah", "num_envs": 64, "physics": "mujoco-warp", "max_episode_steps": 200},
        "agent": {"name": "sac"},
        "run": {"total_steps": 30_000, "eval_episodes": 2, "progress": False, "seed": 0},
    })
    record = train(cfg, tmp_path / "run")
    assert record["outcome"] == "completed"
    assert record["capture_env"] is True
    assert np.isfinite(record["final_eval"]["mean_return"])


def test_physics_choice_errors() -> None:
    from noeira.core.errors import ConfigError, UnknownPluginError

    with pytest.raises(UnknownPluginError, match="mujoco"):
        make_env("halfcheetah", num_envs=1, backend="cpu", physics="mujocoo")
    with pytest.raises(ConfigError, match="physics"):
        make_env("halfcheetah", num_envs=1, backend="cpu", physics_options={"threads": 2})
    with pytest.raises(ConfigError, match="xml_file"):
        make_env("hopper", num_envs=1, backend="cpu", xml_file="nope.xml")
    with pytest.raises(ConfigError, match="env.torch_threads"):
        make_env("hopper", num_envs=1, backend="cpu", torch_threads=-1)
    env = make_env("hopper", num_envs=2, backend="cpu", physics_options={"nthread": 1}, frame_skip=2)
    assert env.dt == pytest.approx(2 * env.model.opt.timestep)
