"""The example env (examples/plugins/env, ``reach``): the conformance kit, the same numbers on
either physics engine it can ask for by name, frames, and a `noeira train` through it."""

from __future__ import annotations

import json

import pytest
import torch

from noeira.core import UnknownPluginError, make_env
from noeira.core.testing import check_env

pytestmark = pytest.mark.usefixtures("examples", "one_thread")


def test_reach_passes_the_conformance_kit() -> None:
    check_env("reach", num_envs=6, max_episode_steps=30)  # several time limits and some targets reached


def test_reach_is_the_same_env_on_mujoco(backend_name: str) -> None:
    """``env.physics`` swaps the engine: MuJoCo (noeira-physics) and the example's pointmass give
    the same observations, rewards and episode ends from the same seed and actions."""
    pytest.importorskip("mujoco")
    ours = make_env("reach", num_envs=8, backend=backend_name, seed=0, physics_options={"dtype": "float64"},
                    max_episode_steps=25, radius=0.3)
    ref = make_env("reach", num_envs=8, backend="cpu", seed=0, physics="mujoco", physics_options={"nthread": 1},
                   max_episode_steps=25, radius=0.3)
    assert ours.capture_safe and not ref.capture_safe
    g = torch.Generator().manual_seed(1)
    try:
        torch.testing.assert_close(ours.reset(seed=3).cpu(), ref.reset(seed=3))
        ended = 0
        for _ in range(60):
            action = torch.rand(8, 2, generator=g) * 2.4 - 1.2
            a, b = ours.step(action.to(ours.device)), ref.step(action)
            for name in ("obs", "final_obs", "reward"):
                torch.testing.assert_close(getattr(a, name).cpu(), getattr(b, name), rtol=1e-5, atol=1e-5)
            assert torch.equal(a.terminated.cpu(), b.terminated) and torch.equal(a.truncated.cpu(), b.truncated)
            ended += int(b.terminated.sum())
        assert ended > 0, "no episode reached its target: the test would not see the resets"
    finally:
        ours.close()
        ref.close()


def test_an_unknown_engine_names_the_installed_ones() -> None:
    with pytest.raises(UnknownPluginError, match="unknown physics engine 'bullet'.*installed: .*pointmass"):
        make_env("reach", num_envs=2, backend="cpu", physics="bullet")


def test_reach_renders_the_ball_and_the_target() -> None:
    env = make_env("reach", num_envs=2, backend="cpu", seed=0)
    env.reset(seed=0)
    env.set_state({"qpos": torch.tensor([[0.0, 0.0], [0.6, -0.6]]), "qvel": torch.zeros(2, 2),
                   "target": torch.tensor([[-0.6, 0.6], [0.0, 0.0]])})
    frames = env.render()
    assert frames.shape == (2, 64, 64, 3) and frames.dtype == torch.uint8
    red, green = torch.tensor([230, 25, 75], dtype=torch.uint8), torch.tensor([60, 180, 75], dtype=torch.uint8)
    assert torch.equal(frames[0, 32, 32], red) and torch.equal(frames[1, 32, 32], green)  # the centre of the arena
    assert torch.equal(frames[0, 16, 16], green) and torch.equal(frames[1, 48, 48], red)  # up-left, down-right
    assert env.render_fps == pytest.approx(20.0)


def test_noeira_train_runs_ppo_on_reach(train) -> None:
    run, record = train("env=reach", "agent=ppo", "agent.horizon=16", "env.max_episode_steps=8", steps=256)
    assert record["outcome"] == "completed" and record["env_steps"] == 256
    assert record["versions"]["acme-reach"] == "0.1.0"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all("episode_reached" in r for r in rows), "the per-episode statistic is reported"
    assert all(r["episodes"] >= 4 for r in rows)  # every env truncates at 8 steps, 16 steps a collect
