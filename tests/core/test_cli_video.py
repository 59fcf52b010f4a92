"""``noeira eval RUN_DIR --video PATH``: a rendered deterministic episode written with imageio;
one-line errors (exit 2) for an env that cannot render and for a missing imageio / ffmpeg."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noeira.core.cli import main

iio = pytest.importorskip("imageio.v3", reason="noeira eval --video needs imageio (noeira-core[video])")
HAS_FFMPEG = importlib.util.find_spec("imageio_ffmpeg") is not None


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeira.core.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, check=False)


def train(tmp_path: Path, env: str, capsys: pytest.CaptureFixture[str]) -> Path:
    run = tmp_path / env
    assert main(["train", "agent=toy", f"env={env}", "backend=cpu", "run.total_steps=256", "run.eval_episodes=2",
                 "--run-dir", str(run)]) == 0
    capsys.readouterr()
    return run


@pytest.mark.parametrize("suffix", [".gif", pytest.param(".mp4", marks=pytest.mark.skipif(
    not HAS_FFMPEG, reason="writing .mp4 needs imageio-ffmpeg (noeira-core[video])"))])
def test_eval_writes_a_video_of_one_episode(toy_dist, tmp_path, capsys, suffix: str) -> None:
    run = train(tmp_path, "cartpole", capsys)
    out = tmp_path / f"episode{suffix}"
    assert main(["eval", str(run), "--video", str(out), "--video-frames", "120", "--json"]) == 0
    video = json.loads(capsys.readouterr().out)["video"]
    assert video["path"] == str(out) and video["size"] == [400, 600] and video["fps"] == 50
    n = video["frames"]  # the episode, or its first 120 steps
    assert 8 <= n <= 120 and video["episode_return"] == n  # CartPole: +1 per step, one frame per step
    frames = iio.imread(out)
    assert frames.ndim == 4 and frames.shape[1:] == (400, 600, 3)
    if suffix == ".gif":  # Pillow merges identical consecutive frames (and adds up their durations)
        assert 2 <= frames.shape[0] <= n
        assert not (frames[0] == frames[-1]).all()
    else:
        assert frames.shape[0] == n
        assert frames.std(axis=0).max() > 50, "the pole and cart move"
    # the line for people: where, and how many frames
    assert main(["eval", str(run), "--video", str(out), "--video-frames", "5", "--fps", "10"]) == 0
    line = capsys.readouterr().out.strip()
    assert len(line.splitlines()) == 1 and line.startswith("video: 5 frames (600x400, 10 fps)") and line.endswith(str(out))


def test_video_with_episodes_evaluates_too(toy_dist, tmp_path, capsys) -> None:
    run = train(tmp_path, "cartpole", capsys)
    assert main(["eval", str(run), "--video", str(tmp_path / "v.gif"), "--video-frames", "3", "--episodes", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("video: 3 frames ->") and lines[1].startswith("eval ") and "over 2 episodes" in lines[1]


def test_env_without_render_is_one_line_exit_2(toy_dist, tmp_path, capsys) -> None:
    run = train(tmp_path, "corridor", capsys)  # the example plugin's env has no render()
    out = run_cli("eval", str(run), "--video", str(tmp_path / "c.gif"))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ("noeira: error: --video: env 'corridor' cannot render frames (it has no render(); "
                                  "the classic-control, MuJoCo and Craftax envs can)")
    assert not (tmp_path / "c.gif").exists()


@pytest.mark.parametrize(("missing", "name", "needs"), [
    ("imageio", "v.gif", "--video needs imageio: pip install 'noeira-core[video]'"),
    ("imageio_ffmpeg", "v.mp4", "--video v.mp4: writing .mp4 needs imageio-ffmpeg: pip install 'noeira-core[video]' "
                                "(or write a .gif)"),
])
def test_missing_writer_names_the_extra(toy_dist, tmp_path, capsys, monkeypatch, missing: str, name: str,
                                        needs: str) -> None:
    run = train(tmp_path, "cartpole", capsys)
    for mod in [m for m in sys.modules if m == missing or m.startswith(f"{missing}.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    assert main(["eval", str(run), "--video", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"noeira: error: {needs}"


@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None or importlib.util.find_spec("gymnasium") is None
                    or importlib.util.find_spec("noeira.agents") is None, reason="needs noeira-envs[mujoco], noeira-agents")
def test_mujoco_video_through_the_cli(tmp_path) -> None:
    """In fresh processes: the CLI sets MUJOCO_GL=egl when unset (MuJoCo reads it on import)."""
    run, out = tmp_path / "ip", tmp_path / "ip.gif"
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    train_run = subprocess.run([sys.executable, "-m", "noeira.core.cli", "train", "env=inverted-pendulum", "agent=ppo",
                                "backend=cpu", "env.num_envs=2", "run.total_steps=256", "run.eval_episodes=1",
                                "--run-dir", str(run)], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert train_run.returncode == 0, train_run.stderr
    ev = subprocess.run([sys.executable, "-m", "noeira.core.cli", "eval", str(run), "--video", str(out),
                         "--video-frames", "6"], capture_output=True, text=True, env=env, timeout=120, check=False)
    if ev.returncode == 2 and "MUJOCO_GL" in ev.stderr:
        pytest.skip(f"no offscreen OpenGL here: {ev.stderr.strip()}")
    assert ev.returncode == 0, ev.stderr
    assert ev.stdout.startswith("video: 6 frames (480x480, 25 fps)"), ev.stdout
    frames = iio.imread(out)
    assert frames.shape[1:] == (480, 480, 3) and frames.std() > 5
