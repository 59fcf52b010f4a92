"""``atari:<game>``: step for step equal to gymnasium's AtariPreprocessing + FrameStackObservation over
``ALE/<Game>-v5`` (frames, rewards, terminated/truncated, through autoresets), the conformance kit,
state round trips, the training options and bad input."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

pytest.importorskip("ale_py")

from noeira.core import ConfigError, UserError, make_env  # noqa: E402
from noeira.core.testing import check_env  # noqa: E402

EXACT = {"fire_reset": False, "episodic_life": False}  # the reference has neither


def reference(game: str, p: float, seeds: list[int]) -> list:
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("cv2")  # AtariPreprocessing resizes with OpenCV
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    out = []
    for s in seeds:
        env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=p)
        env = FrameStackObservation(AtariPreprocessing(env, frame_skip=4, noop_max=30, screen_size=84,
                                                       terminal_on_life_loss=False, grayscale_obs=True), 4)
        env.reset(seed=s)
        out.append(env)
    return out


@pytest.mark.parametrize(("game", "p", "steps", "n", "ends", "options"), [
    ("Breakout", 0.0, 400, 3, 3, {"vectorization": "sync", "resize": "device"}),  # the torch resize
    ("Breakout", 0.25, 400, 3, 3, {"num_workers": 2}),  # the numpy resize, in worker processes
    ("Pong", 0.0, 600, 1, 0, {"vectorization": "sync"}),  # a random game of Pong lasts longer: points, no end
    ("Pong", 0.25, 600, 1, 0, {"num_workers": 1}),
])
def test_equal_to_gymnasium_atari_preprocessing(game: str, p: float, steps: int, n: int, ends: int,
                                                options: dict) -> None:
    torch.set_num_threads(1)  # small tensors; a loaded 2-core box crawls with two torch threads
    seed = 11
    env = make_env(f"atari:{game.lower()}", num_envs=n, backend="cpu", seed=seed, repeat_action_probability=p,
                   **EXACT, **options)
    refs = reference(game, p, [seed + i for i in range(n)])
    obs = env.reset(seed=seed)
    want = [r.reset(seed=seed + i)[0] for i, r in enumerate(refs)]
    for i in range(n):
        np.testing.assert_array_equal(obs[i].numpy(), want[i], err_msg=f"reset obs of env {i}")
    g = np.random.default_rng(0)
    ended, rewarded = 0, 0
    for t in range(steps):
        action = g.integers(0, env.action_space.n, n)
        res = env.step(torch.as_tensor(action))
        for i, r in enumerate(refs):
            o, rew, term, trunc, _ = r.step(int(action[i]))
            where = f"env {i}, step {t}"
            np.testing.assert_array_equal(res.final_obs[i].numpy(), o, err_msg=f"final_obs, {where}")
            assert float(res.reward[i]) == rew, where
            rewarded += rew != 0
            assert (bool(res.terminated[i]), bool(res.truncated[i])) == (term, trunc), where
            if term or trunc:
                ended += 1
                o, _ = r.reset()
            np.testing.assert_array_equal(res.obs[i].numpy(), o, err_msg=f"obs, {where}")
    assert ended >= ends and rewarded > 0  # the comparison went through autoresets and scores
    env.close()


def test_conformance_kit() -> None:
    # the kit counts episodes by the done flags: with episodic life a lost life is done but the
    # statistics count whole games (test_episodic_life_ends_lives_but_counts_games)
    torch.set_num_threads(1)
    check_env("atari:breakout", num_envs=3, steps=120, vectorization="sync", episodic_life=False,
              repeat_action_probability=0.0)  # sticky actions: see test_sticky_actions_resume_with_a_caveat


def test_state_round_trip_continues_the_same_games() -> None:
    a = make_env("atari:breakout", num_envs=2, backend="cpu", seed=3, num_workers=2)
    b = make_env("atari:breakout", num_envs=2, backend="cpu", seed=99, vectorization="sync")
    g = torch.Generator().manual_seed(0)
    for _ in range(40):
        a.step(torch.randint(0, 4, (2,), generator=g))
    b.set_state(a.get_state())
    assert torch.equal(a.obs, b.obs)
    for t in range(250):  # sticky actions and no-op resets draw from the restored generators
        act = torch.randint(0, 4, (2,), generator=g)
        ra, rb = a.step(act), b.step(act)
        for k in ("obs", "final_obs", "reward", "terminated", "truncated"):
            assert torch.equal(getattr(ra, k), getattr(rb, k)), (k, t)
    assert torch.equal(a.pop_episode_stats()["return_sum"], b.pop_episode_stats()["return_sum"])
    a.close()
    b.close()


def test_workers_leave_ctrl_c_to_the_driver() -> None:
    """Ctrl-C reaches the whole process group; the driver stops at the end of its iteration, so the
    workers must keep stepping (they end when the env closes)."""
    import os
    import signal
    import time

    env = make_env("atari:breakout", num_envs=2, backend="cpu", seed=0, num_workers=1)
    os.kill(env.pool.procs[0].pid, signal.SIGINT)
    time.sleep(0.3)
    env.step(torch.zeros(2, dtype=torch.int64))
    assert env.pool.procs[0].is_alive()
    env.close()
    assert not env.pool.procs[0].is_alive()


def test_a_step_interrupted_by_a_second_ctrl_c_leaves_the_env_usable() -> None:
    """A second Ctrl-C stops the driver at once, possibly while it waits for the workers' step
    replies; the checkpoint it then writes asks the workers for their state. That request must
    read its own answer, not the step's reply still in the pipe (seen on the H200: the
    checkpoint failed with "worker process 3 ended")."""
    env = make_env("atari:breakout", num_envs=4, backend="cpu", seed=0, num_workers=2)
    conn = env.pool.conns[1]
    real = type(conn).recv_bytes
    calls = {"n": 0}

    def interrupted(self, *a, **k):
        if self is conn and calls["n"] == 0:
            calls["n"] += 1
            raise KeyboardInterrupt
        return real(self, *a, **k)

    type(conn).recv_bytes = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            env.step(torch.zeros(4, dtype=torch.int64))
    finally:
        type(conn).recv_bytes = real
    state = env.state_dict()  # what the driver's checkpoint asks for
    assert set(state) >= {"episode_sums"}
    env.step(torch.zeros(4, dtype=torch.int64))  # and stepping goes on
    env.close()


def test_episodic_life_ends_lives_but_counts_games() -> None:
    env = make_env("atari:breakout", num_envs=2, backend="cpu", seed=0, vectorization="sync", fire_reset=True)
    g = torch.Generator().manual_seed(1)
    terminated = games = 0
    score = torch.zeros(2, dtype=torch.float64)
    scores = []
    while games < 2:
        r = env.step(torch.randint(0, 4, (2,), generator=g))
        score += r.reward.double()
        terminated += int(r.terminated.sum())
        stats = env.pop_episode_stats()
        games += int(stats["count"])
        if stats["count"] > 0:
            scores.append(float(stats["return_sum"]))
    assert terminated >= 5 * games  # Breakout has 5 lives: each one ended an episode for the learner
    assert sum(scores) == pytest.approx(float(score.sum()) - float(env.get_state()["game_return"].sum()))
    frames = env.render()
    assert frames.shape == (2, 210, 160, 3) and frames.dtype == torch.uint8
    from noeira.envs.atari.env import Atari

    assert Atari.evaluation_config(env.config).episodic_life is False
    env.close()


def test_rgb_observations() -> None:
    env = make_env("atari:pong", num_envs=2, backend="cpu", seed=0, vectorization="sync", grayscale=False)
    assert env.obs.shape == (2, 4, 3, 84, 84)
    env.step(torch.zeros(2, dtype=torch.int64))
    env.close()


def test_unknown_game_names_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"unknown Atari game 'brekout' \(closest: breakout"):
        make_env("atari:brekout", num_envs=1, backend="cpu")
    from noeira.envs.atari.env import game_id

    assert game_id("SpaceInvaders") == game_id("ALE/SpaceInvaders-v5") == "space_invaders"
    assert game_id("BreakoutNoFrameskip-v4") == "breakout"


def test_missing_ale_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ale_py", None)
    with pytest.raises(UserError, match=r"pip install 'noeira-envs\[atari\]'"):
        make_env("atari:breakout", num_envs=1, backend="cpu")


def test_the_three_area_resizes_are_opencvs() -> None:
    cv2 = pytest.importorskip("cv2")
    from noeira.envs.atari.env import area_resize, area_tables
    from noeira.envs.atari.game import AreaResize

    g = np.random.default_rng(0)
    frames = g.integers(0, 256, (12, 210, 160), dtype=np.uint8)
    frames[6:] = frames[6:] // 85 * 85  # few levels, as Atari screens: sums land on halves more often
    want = np.stack([cv2.resize(f, (84, 84), interpolation=cv2.INTER_AREA) for f in frames])
    out = np.zeros((84, 84), np.uint8)
    for use_cv2 in (False, True):
        resize = AreaResize((210, 160), 84, use_cv2=use_cv2)
        for f, w in zip(frames, want, strict=True):
            resize(f, out)
            np.testing.assert_array_equal(out, w)
    got = area_resize(torch.from_numpy(frames), area_tables((210, 160), (84, 84), torch.device("cpu")))
    np.testing.assert_array_equal(got.numpy(), want)
    rgb = g.integers(0, 256, (210, 160, 3), dtype=np.uint8)
    out3 = np.zeros((3, 84, 84), np.uint8)
    AreaResize((210, 160), 84, use_cv2=False)(rgb, out3)
    np.testing.assert_array_equal(out3, cv2.resize(rgb, (84, 84), interpolation=cv2.INTER_AREA).transpose(2, 0, 1))


@pytest.mark.cuda
def test_on_cuda_the_frames_resized_on_the_device_are_the_workers() -> None:
    """The full frames cross to the GPU (page-locked shared memory, one copy) and are resized there:
    step for step the observations of the cpu env, whose workers resize with OpenCV."""
    torch.set_num_threads(1)
    gpu = make_env("atari:breakout", num_envs=4, backend="cuda", seed=5, num_workers=2, resize="device")
    cpu = make_env("atari:breakout", num_envs=4, backend="cpu", seed=5, num_workers=2)
    assert gpu.obs.device.type == "cuda" and gpu.resize_on_device
    assert torch.equal(gpu.obs.cpu(), cpu.obs)
    g = torch.Generator().manual_seed(0)
    for t in range(300):
        action = torch.randint(0, 4, (4,), generator=g)
        rg, rc = gpu.step(action.cuda()), cpu.step(action)
        for k in ("obs", "final_obs", "reward", "terminated", "truncated"):
            assert torch.equal(getattr(rg, k).cpu(), getattr(rc, k)), (k, t)
    gpu.close()
    cpu.close()


def test_sticky_actions_resume_with_a_caveat() -> None:
    """The ALE saves its RNG but not the action a sticky frame repeats: without sticky actions a
    checkpoint restores the games bit for bit (the kit checks it), with them the env says so."""
    env = make_env("atari:breakout", num_envs=1, vectorization="sync")
    try:
        assert env.resume_caveat is not None and "repeat_action_probability" in env.resume_caveat
    finally:
        env.close()
    env = make_env("atari:breakout", num_envs=1, vectorization="sync", repeat_action_probability=0.0)
    try:
        assert env.resume_caveat is None
    finally:
        env.close()
