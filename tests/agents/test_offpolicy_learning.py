"""DQN, SAC, TD3 and DDPG learn (CPU, seeded, through the driver with the default recipes),
``noeira eval`` reproduces the final evaluation, and ``run.resume`` continues a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from noeira.core.driver import eval_run, resolve, train

pytestmark = pytest.mark.usefixtures("one_thread")


def run(tmp: Path, env: str, agent: str, seed: int = 0, **run_cfg: Any) -> dict[str, Any]:
    cfg = resolve({"backend": "cpu", "env": {"name": env}, "agent": {"name": agent},
                   "run": {"seed": seed, "progress": False, **run_cfg}})
    return train(cfg, tmp)


# (agent, env, env steps, threshold): budgets a little past where the default recipe gets there
CASES = [
    ("sac", "pendulum", 5_000, -250.0),
    ("td3", "pendulum", 6_000, -250.0),
    ("ddpg", "pendulum", 5_000, -500.0),  # "clearly improves": a random or untrained policy scores ~ -1200..-1500
    ("dqn", "cartpole", 50_000, 400.0),  # the recipe's length: its schedules span it
]


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "env", "steps", "threshold"), CASES, ids=[c[0] for c in CASES])
def test_learns_and_eval_reproduces_the_final_evaluation(tmp_path: Path, agent: str, env: str, steps: int,
                                                         threshold: float) -> None:
    record = run(tmp_path, env, agent, total_steps=steps)
    final = record["final_eval"]
    assert final["mean_return"] >= threshold, f"{agent} on {env}: {final}"
    assert eval_run(tmp_path) == final  # `noeira eval RUN_DIR`


def test_resume_continues_the_run(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    run(first, "cartpole", "dqn", total_steps=1_200, eval_episodes=0)
    record = run(second, "cartpole", "dqn", total_steps=1_600, eval_episodes=0, resume=str(first), log_interval=1)
    assert record["env_steps"] == 1_600 and record["resumed_from"] == str(first)
    lines = [json.loads(line) for line in (second / "metrics.jsonl").read_text().splitlines()]
    # the device step counter came back: epsilon continues from 1200 steps (not 1.0)
    assert lines[0]["env_steps"] == 1_204
    assert lines[0]["epsilon"] < 0.95
    ckpt = torch.load(second / "checkpoints" / "final.pt", weights_only=False)
    assert int(ckpt["agent"]["extra"]["env_steps"]) == 1_600
    assert int(ckpt["agent"]["replay"]["size"]) == 400
