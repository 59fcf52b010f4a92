"""``noeira record`` from a simulator: what a frame holds, cameras, a trained run's policy,
resuming, and a recorder killed mid-episode (SIGKILL, SIGTERM) keeping every finished episode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")
pytest.importorskip("av")

from noeira.core.api import make_env  # noqa: E402
from noeira.core.cli import main  # noqa: E402
from noeira.core.dataset import LeRobotDataset  # noqa: E402
from noeira.core.dataset.record import env_features, record_env, scripted_policy  # noqa: E402
from noeira.core.dataset.writer import DatasetWriter  # noqa: E402


def test_a_frame_is_the_observation_its_action_and_what_followed(tmp_path: Path) -> None:
    """Recorded frames replay the env exactly: from the same seed, stepping the recorded actions
    gives the recorded observations, rewards and episode ends."""
    env = make_env("pendulum", num_envs=2, backend="cpu", seed=3, max_episode_steps=7)
    with DatasetWriter(tmp_path / "ds", fps=20, features=env_features(env.spec)) as w:
        assert record_env(env, scripted_policy("random", env.spec, 1), w, 4, task="swing", seed=3) == 4
    ds = LeRobotDataset(tmp_path / "ds")
    assert (ds.num_episodes, len(ds), ds.tasks) == (4, 28, ["swing"])
    assert ds.features["action"]["shape"] == [1] and ds.features["observation.state"]["shape"] == [3]
    obs, actions = ds.column("observation.state"), ds.column("action")
    rewards, dones = ds.column("next.reward"), ds.column("next.done")
    # episodes 0 and 1 ran side by side in envs 0 and 1 (they end at the same step): replay env 0
    ref = make_env("pendulum", num_envs=2, backend="cpu", seed=3, max_episode_steps=7)
    o = ref.reset(seed=3)
    first_env = [e for e in ds.episodes if e["episode_index"] in (0, 1)]
    a0 = first_env[0]["dataset_from_index"]
    other = first_env[1]["dataset_from_index"]
    for t in range(7):
        assert np.allclose(obs[a0 + t], o[0].numpy(), atol=1e-6)
        act = torch.tensor([[actions[a0 + t]], [actions[other + t]]], dtype=torch.float32)
        r = ref.step(act)
        assert rewards[a0 + t] == pytest.approx(float(r.reward[0]), abs=1e-5)
        assert bool(dones[a0 + t]) == bool(r.terminated[0])
        o = r.obs
    assert np.all(ds.column("frame_index")[a0:a0 + 7] == np.arange(7))
    assert ds.robot_type is None  # the writer was given none here; noeira record names the env


def test_record_cli_with_a_camera_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    args = ["record", "env=cartpole", "env.max_episode_steps=4", "--scripted", "random", "--episodes", "2",
            "--num-envs", "2", "--camera", "--out", str(out), "--video-codec", "libx264", "--task", "balance"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("episode 0: 4 frames") and "2 episodes recorded" in lines[-1]
    ds = LeRobotDataset(out)
    assert ds.robot_type == "noeira:cartpole" and ds.fps == 50 and ds.features["action"]["dtype"] == "int64"
    cam = ds.features["observation.images.render"]
    assert cam["dtype"] == "video" and cam["info"]["video.codec"] == "h264"
    frames = ds.video_frames("observation.images.render")
    # the rendered frames are the env's: compare with a fresh render of the first state
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0, max_episode_steps=4)
    env.reset(seed=0)
    want = env.render()[0].permute(2, 0, 1).numpy().astype(int)
    assert np.abs(frames[0].astype(int) - want).mean() < 3
    assert main(args) == 2  # the dataset exists: resume or choose another path
    assert "already holds a dataset" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    ds = LeRobotDataset(out)
    assert ds.num_episodes == 4 and ds.episodes[2]["data/file_index"] == 1


def test_record_with_a_trained_policy(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", "env=cartpole", "agent=ppo", "run.total_steps=256", "env.num_envs=4", "run.eval_episodes=0",
                 "run.progress=false", "--run-dir", str(run)]) == 0
    out = tmp_path / "ds"
    assert main(["record", "--policy", str(run), "--episodes", "3", "--num-envs", "3", "--out", str(out)]) == 0
    ds = LeRobotDataset(out)
    # the recorded actions are the policy's deterministic actions for the recorded observations
    from noeira.core.driver import load_run

    loaded = load_run(run, num_envs=1)
    act, _ = loaded.agent.act(torch.as_tensor(ds.column("observation.state")), None, None, deterministic=True)
    assert np.array_equal(act.numpy(), ds.column("action").reshape(-1))
    loaded.env.close()


def test_record_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "ds")
    cases = [
        (["record", "env=cartpole", "--out", out], "--policy RUN_DIR"),
        (["record", "--scripted", "random", "--out", out], "name the env"),
        (["record", "env=cartpole", "--scripted", "wander", "--out", out], "--scripted: expected random or zero"),
        (["record", "env=cartpole", "agent.lr=1", "--scripted", "random", "--out", out], "only env=NAME"),
        (["record", "--policy", str(tmp_path), "--out", out], "not a run directory"),
        (["record", "env=pendulum", "--scripted", "zero", "--camera", "--video-codec", "nope", "--out", out],
         "video codec 'nope'"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)


def _recorder(out: Path) -> subprocess.Popen[str]:
    """A recorder of many short episodes in another process, printing a line per saved episode."""
    code = "import sys; from noeira.core.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-u", "-c", code, "record", "env=pendulum", "env.max_episode_steps=6", "--scripted", "random",
         "--episodes", "100000", "--num-envs", "1", "--camera", "--video-codec", "libx264", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait_for_episodes(proc: subprocess.Popen[str], n: int) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + 240
    while len(lines) < n and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("episode "):
            lines.append(line)
    assert len(lines) >= n, (lines, proc.stderr.read() if proc.poll() is not None else "")
    return lines


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_recorder_keeps_every_finished_episode(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "ds"
    proc = _recorder(out)
    try:
        saved = _wait_for_episodes(proc, 3)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    ds = LeRobotDataset(out)  # opens cleanly: every file whole, metadata consistent
    assert ds.num_episodes >= len(saved)
    assert all(e["length"] == 6 for e in ds.episodes)
    assert ds.video_frames("observation.images.render").shape[0] == len(ds)
    info = json.loads((out / "meta" / "info.json").read_text())
    if sig == signal.SIGTERM:  # a clean stop: the episode in flight is dropped, the rest saved, exit 143
        assert proc.returncode == 143 and "stopped by SIGTERM" in err
        assert info["total_episodes"] == ds.num_episodes
    else:
        assert proc.returncode == -signal.SIGKILL
        assert info["total_episodes"] in (ds.num_episodes, ds.num_episodes - 1)
    # and recording carries on from there
    assert main(["record", "env=pendulum", "env.max_episode_steps=6", "--scripted", "zero", "--episodes", "1",
                 "--camera", "--video-codec", "libx264", "--out", str(out), "--resume"]) == 0
    again = LeRobotDataset(out)
    assert again.num_episodes == ds.num_episodes + 1
    assert again.column("action")[-6:].tolist() == [0.0] * 6
