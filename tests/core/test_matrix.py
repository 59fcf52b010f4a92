"""The tests that must hold on every backend x graph combination of ``nox -s tests``: they
take the session's backend (``backend_name``) and graph backend (``graph_name``), so the
cuda sessions on a GPU machine run the same checks on the device and under recorded graphs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from noeira.core import make_agent, make_env
from noeira.core.driver import resolve, train
from noeira.core.testing import check_agent, check_env


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Small networks run fastest on one thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("env_name", ["cartpole", "pendulum", "acrobot", "mountaincar", "mountaincar-continuous",
                                      "cue-corridor"])
def test_env_conformance(env_name: str, backend_name: str) -> None:
    check_env(env_name, num_envs=8, backend=backend_name, steps=40)


@pytest.mark.parametrize("agent_name,env_name,kw", [
    ("ppo", "cartpole", {"horizon": 8}),
    ("ppo", "cue-corridor", {"horizon": 8, "network": "gru", "hidden_sizes": [16], "num_minibatches": 2}),
    ("a2c", "pendulum", {"horizon": 8, "norm_reward": True}),
    ("dqn", "cartpole", {"learning_starts": 8, "batch_size": 16}),
    ("sac", "pendulum", {"learning_starts": 8, "batch_size": 16}),
    ("td3", "pendulum", {"learning_starts": 8, "batch_size": 16}),
    ("ddpg", "pendulum", {"learning_starts": 8, "batch_size": 16}),
])
def test_agent_conformance(agent_name: str, env_name: str, kw: dict, backend_name: str) -> None:
    env = make_env(env_name, num_envs=8, backend=backend_name, seed=0)
    check_agent(make_agent(agent_name, env, **kw), env)


@pytest.mark.parametrize("agent_name,env_name,agent", [
    ("ppo", "cartpole", {"horizon": 8}),
    ("ppo", "cue-corridor", {"horizon": 8, "network": "gru", "hidden_sizes": [16], "num_minibatches": 2}),
    ("sac", "pendulum", {"learning_starts": 64, "batch_size": 32}),
])
def test_driver_runs_under_the_graph_backend(agent_name: str, env_name: str, agent: dict, backend_name: str,
                                             graph_name: str, tmp_path: Path) -> None:
    cfg = resolve({"backend": backend_name, "graph": {"name": graph_name},
                   "env": {"name": env_name, "num_envs": 8}, "agent": {"name": agent_name, **agent},
                   "run": {"total_steps": 256, "progress": False, "eval_episodes": 2, "log_interval": 2}})
    record = train(cfg, run_dir=tmp_path / "run")
    assert record["outcome"] == "completed" and record["graph"] == graph_name and record["env_steps"] >= 256
    saved = json.loads((tmp_path / "run" / "record.json").read_text())
    assert saved["backend"] == backend_name and "final_eval" in saved
