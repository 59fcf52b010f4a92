"""The value-based agents and the CNNs on CUDA: collect and learn recorded as CUDA graphs give the
eager numbers bit for bit (``noeira verify-graph``), and PPO trains on Atari frames in bf16."""

from __future__ import annotations

import pytest
import torch

from noeira.core.cli import main

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize(("agent", "options"), [
    ("rainbow", ["agent.learning_starts=64", "agent.batch_size=32"]),
    ("c51", ["agent.learning_starts=64", "agent.batch_size=32", "agent.prioritized=true"]),
    ("dqn", ["agent.learning_starts=64", "agent.batch_size=32", "agent.noisy=true", "agent.n_step=3"]),
    ("pqn", ["agent.horizon=8", "agent.num_minibatches=4"]),
])
def test_recorded_graphs_equal_eager(agent: str, options: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify-graph", "backend=cuda", f"agent={agent}", "env=cartpole", "env.num_envs=64", *options,
                 "-k", "6"])
    out = capsys.readouterr().out
    assert code == 0 and "bit-identical" in out, out


@pytest.mark.parametrize("network", ["nature-cnn", "impala-cnn+mingru"])
def test_ppo_on_atari_frames_in_bf16(network: str) -> None:
    pytest.importorskip("ale_py")
    from noeira.core import make_agent, make_env
    from noeira.core.testing import check_agent

    env = make_env("atari:pong", num_envs=8, backend="cuda", seed=0, num_workers=4)
    agent = make_agent("ppo", env, network=network, hidden_sizes=[256], activation="relu", horizon=16,
                       num_minibatches=2, update_epochs=1, precision="bf16")
    assert agent.rollout.buf.obs.dtype == torch.uint8 and agent.rollout.buf.obs.is_cuda
    check_agent(agent, env)
    env.close()
