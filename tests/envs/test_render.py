"""``env.render()``: RGB frames ``[N, H, W, 3]`` uint8 of the classic-control scenes (drawn in
torch) and of the MuJoCo worlds (offscreen through MUJOCO_GL); the base class refuses clearly."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import types

import pytest
import torch

from noeira.core import TensorEnv, make_env
from noeira.envs.classic.acrobot import Acrobot
from noeira.envs.classic.cartpole import CartPole
from noeira.envs.classic.mountaincar import MountainCar
from noeira.envs.classic.pendulum import Pendulum

CLASSIC = {"cartpole": (400, 600), "acrobot": (500, 500), "pendulum": (500, 500), "mountaincar": (400, 600),
           "mountaincar-continuous": (400, 600)}


def pixel(frames: torch.Tensor, env: int, x: float, y: float) -> tuple[int, ...]:
    """The colour at scene point ``(x, y)`` (pixels, y up from the bottom edge) of env ``env``."""
    h = frames.shape[1]
    return tuple(frames[env, h - 1 - int(y), int(x)].tolist())


def with_state(name: str, rows: list[list[float]]):
    env = make_env(name, num_envs=len(rows), backend="cpu", seed=0)
    env.set_state(torch.tensor(rows, dtype=torch.float32))
    return env, env.render()


@pytest.mark.parametrize("name", CLASSIC)
def test_classic_frames_shape_and_change_with_state(name: str) -> None:
    env = make_env(name, num_envs=3, backend="cpu", seed=0)
    frames = env.render()
    assert frames.shape == (3, *CLASSIC[name], 3) and frames.dtype == torch.uint8
    assert frames.float().std() > 10, "a frame is a scene, not a blank"
    state = env.get_state()
    state[1, 0] += 0.3  # the cart, the first link, the rod, the car moves
    env.set_state(state)
    after = env.render()
    assert torch.equal(after[0], frames[0]) and not torch.equal(after[1], frames[1])
    assert isinstance(env.render_fps, (int, float)) and env.render_fps > 0


def test_cartpole_geometry() -> None:
    scale = 600 / 4.8
    env, f = with_state("cartpole", [[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.2, 0.0]])
    axle = 100 + 30 / 4
    assert pixel(f, 0, 300, axle + 60) == CartPole.POLE_RGB  # upright: the pole above the axle
    assert pixel(f, 0, 300 + 30, axle + 60) == (255, 255, 255)
    assert pixel(f, 0, 300 + 20, 100 - 10) == (0, 0, 0)  # the cart
    assert pixel(f, 0, 300, axle) == CartPole.AXLE_RGB
    cx = 300 + 1.0 * scale  # x = 1: the cart a metre right, the pole leaning right by 0.2 rad
    assert pixel(f, 1, cx + 100 * math.sin(0.2), axle + 100 * math.cos(0.2)) == CartPole.POLE_RGB
    assert pixel(f, 1, cx, axle + 100) == (255, 255, 255)
    assert pixel(f, 1, 300, 100 - 10) == (255, 255, 255)
    assert pixel(f, 1, 20, 100) == (0, 0, 0)  # the track


def test_acrobot_geometry() -> None:
    scale, mid = 500 / 4.4, 250
    env, f = with_state("acrobot", [[0.0, 0.0, 0.0, 0.0], [math.pi / 2, math.pi / 2, 0.0, 0.0]])
    assert pixel(f, 0, mid, mid - 0.5 * scale) == Acrobot.LINK_RGB  # hanging down
    assert pixel(f, 0, mid, mid - 1.5 * scale) == Acrobot.LINK_RGB
    assert pixel(f, 0, mid, mid - scale) == Acrobot.JOINT_RGB
    assert pixel(f, 0, mid, mid + 0.5 * scale) == (255, 255, 255)
    # th1 = pi/2: the first link to the right; th2 = pi/2 more: the second link up from there
    assert pixel(f, 1, mid + 0.5 * scale, mid) == Acrobot.LINK_RGB
    assert pixel(f, 1, mid + scale, mid + 0.5 * scale) == Acrobot.LINK_RGB
    assert pixel(f, 1, mid, mid - 0.5 * scale) == (255, 255, 255)
    assert pixel(f, 1, 10, mid + scale) == Acrobot.LINE_RGB  # the goal line


def test_pendulum_geometry() -> None:
    scale, mid = 500 / 4.4, 250
    env, f = with_state("pendulum", [[0.0, 0.0], [math.pi / 2, 0.0]])
    assert pixel(f, 0, mid, mid + 0.6 * scale) == Pendulum.ROD_RGB  # th = 0: upright
    assert pixel(f, 0, mid, mid - 0.6 * scale) == (255, 255, 255)
    assert pixel(f, 1, mid - 0.6 * scale, mid) == Pendulum.ROD_RGB  # th = pi/2: counterclockwise, to the left
    assert pixel(f, 1, mid + 0.6 * scale, mid) == (255, 255, 255)
    assert pixel(f, 0, mid, mid) == Pendulum.AXLE_RGB


def test_mountaincar_geometry() -> None:
    scale = 600 / 1.8
    env, f = with_state("mountaincar", [[-0.5, 0.0], [0.3, 0.0]])
    for i, pos in enumerate((-0.5, 0.3)):
        x, y, ang = (pos + 1.2) * scale, (math.sin(3 * pos) * 0.45 + 0.55) * scale, math.cos(3 * pos)
        body = (x - 20 * math.sin(ang), y + 20 * math.cos(ang))  # the body's centre, 20 px above the track
        assert pixel(f, i, *body) == MountainCar.CAR_RGB
        other = (0.3 + 1.2) * scale if i == 0 else (-0.5 + 1.2) * scale
        assert pixel(f, i, other, (math.sin(3 * (other / scale - 1.2)) * 0.45 + 0.55) * scale + 20) == (255, 255, 255)
    fx, fy = 1.7 * scale, (math.sin(1.5) * 0.45 + 0.55) * scale
    assert pixel(f, 0, fx + 5, fy + 45) == MountainCar.FLAG_RGB
    assert pixel(f, 0, 300, (math.sin(3 * (300 / scale - 1.2)) * 0.45 + 0.55) * scale) == MountainCar.HILL_RGB


def test_frames_follow_the_episode() -> None:
    env = make_env("cartpole", num_envs=1, backend="cpu", seed=0)
    frames = [env.render()]
    for _ in range(10):
        env.step(torch.ones(1, dtype=torch.int64))
        frames.append(env.render())
    assert all(not torch.equal(a, b) for a, b in zip(frames[:-1], frames[1:], strict=True))


def test_base_env_refuses_to_render() -> None:
    with pytest.raises(NotImplementedError, match="'quiet' cannot render"):
        TensorEnv.render(types.SimpleNamespace(name="quiet"))


_MUJOCO_SCRIPT = """
import json, sys, torch
from noeira.core import make_env
out = {}
for name in ("inverted-pendulum", "hopper"):
    env = make_env(name, num_envs=2, backend="cpu", seed=0)
    s = env.get_state()
    s[1, 1] += 0.15 if name == "inverted-pendulum" else 0.5  # the pole tilts / the hopper's torso leans
    env.set_state(s)
    try:
        f = env.render()
    except Exception as err:
        print(json.dumps({"error": str(err)})); sys.exit(0)
    out[name] = {"shape": list(f.shape), "dtype": str(f.dtype), "std": float(f.float().std()),
                 "differ": bool((f[0] != f[1]).any()), "again": bool(torch.equal(env.render(), f)),
                 "fps": env.render_fps}
    env.close()
print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None or importlib.util.find_spec("gymnasium") is None,
                    reason="needs noeira-envs[mujoco]")
def test_mujoco_frames_offscreen() -> None:
    """In a fresh process (MuJoCo reads MUJOCO_GL on import): egl unless the caller set one."""
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    run = subprocess.run([sys.executable, "-c", _MUJOCO_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout.strip().splitlines()[-1])
    if "error" in res:
        assert "MUJOCO_GL" in res["error"]  # the message names the variable to set
        pytest.skip(f"no offscreen OpenGL here: {res['error']}")
    for name, r in res.items():
        assert r["shape"] == [2, 480, 480, 3] and r["dtype"] == "torch.uint8", name
        assert r["std"] > 5 and r["differ"] and r["again"], name
    assert res["hopper"]["fps"] == pytest.approx(125.0) and res["inverted-pendulum"]["fps"] == pytest.approx(25.0)
