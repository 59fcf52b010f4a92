"""PPO learns: the default ``noeira train`` solves CartPole; its checkpoint evaluates to the
recorded result; resuming continues training; continuous PPO improves on Pendulum."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from noeira.core.cli import main
from noeira.core.driver import load_checkpoint, resolve, train


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()  # the cpu recipes set one thread (small networks)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_default_train_solves_cartpole_eval_reproduces_and_resume_continues(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert main(["train", "backend=cpu", "run.progress=false", "--run-dir", str(run)]) == 0
    record = json.loads((run / "record.json").read_text())
    assert record["outcome"] == "completed"
    assert record["versions"]["noeira-agents"]
    final = record["final_eval"]
    assert final["mean_return"] >= 475, final
    capsys.readouterr()

    # noeira eval RUN_DIR: same checkpoint, same seed -> the recorded evaluation
    assert main(["eval", str(run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == final

    # resume: continue from the final checkpoint for two more iterations
    ckpt = load_checkpoint(run)
    steps0, it0 = ckpt["env_steps"], ckpt["iteration"]
    per_iter = steps0 // it0
    cfg = resolve({"backend": "cpu", "run": {"resume": str(run / "checkpoints" / "final.pt"), "progress": False,
                                             "total_steps": steps0 + 2 * per_iter, "eval_episodes": 0}})
    rec2 = train(cfg, run_dir=tmp_path / "resumed")
    assert rec2["resumed_from"] and rec2["env_steps"] == steps0 + 2 * per_iter and rec2["iterations"] == it0 + 2
    ckpt2 = load_checkpoint(tmp_path / "resumed")
    agent0, agent1 = ckpt["agent"]["rollout"], ckpt2["agent"]["rollout"]
    assert float(agent1["steps_done"]) == steps0 + 2 * per_iter  # the schedule continued, not restarted
    changed = [k for k in agent0["policy"] if not torch.equal(agent0["policy"][k], agent1["policy"][k])]
    assert changed, "resuming did not train"


@pytest.mark.slow
def test_continuous_ppo_improves_on_pendulum(tmp_path: Path) -> None:
    """A random Gaussian policy scores about -1200 per 200-step episode."""
    cfg = resolve({"backend": "cpu", "env": {"name": "pendulum"}, "agent": {"name": "ppo"},
                   "run": {"total_steps": 60_000, "progress": False, "seed": 0}})
    record = train(cfg, run_dir=tmp_path / "pendulum")
    assert record["final_eval"]["mean_return"] > -700, record["final_eval"]
