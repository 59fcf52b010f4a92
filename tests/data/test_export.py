"""``noeira export``: the exported policy acts exactly as the checkpoint does, step by step from
the same observations (a recurrent state carried through episode starts), for every kind of
policy: PPO with an MLP, an LSTM and a MinGRU, SAC, DQN, BC and ACT (its temporal ensemble as
the state), in TorchScript, torch.export (pt2) and ONNX (run by onnxruntime)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from noeira.core.cli import main
from noeira.core.driver import load_run
from noeira.core.export import load_policy

RUNS = {
    "ppo-mlp": ["env=cartpole", "agent=ppo", "run.total_steps=256", "env.num_envs=4"],
    "ppo-lstm": ["env=cartpole", "agent=ppo", "agent.network=lstm", "agent.hidden_sizes=[32]",
                 "agent.num_minibatches=1", "run.total_steps=256", "env.num_envs=4"],
    "ppo-mingru": ["env=pendulum", "agent=ppo", "agent.network=mingru", "agent.hidden_sizes=[32, 32]",
                   "agent.num_minibatches=1", "run.total_steps=256", "env.num_envs=4", "agent.norm_obs=true"],
    "sac": ["env=pendulum", "agent=sac", "run.total_steps=24", "env.num_envs=2", "agent.learning_starts=8",
            "agent.buffer_size=64", "agent.batch_size=8"],
    "dqn": ["env=cartpole", "agent=dqn", "run.total_steps=24", "env.num_envs=2", "agent.learning_starts=8",
            "agent.buffer_size=64", "agent.batch_size=8"],
    "bc": ["agent=bc", "run.total_steps=30", "agent.hidden_sizes=[32]"],
    "act": ["agent=act", "run.total_steps=10", "agent.dim_model=32", "agent.dim_feedforward=64", "agent.n_heads=2",
            "agent.n_encoder_layers=1", "agent.n_vae_encoder_layers=1", "agent.chunk_size=5", "agent.batch_size=16"],
}
FORMATS = ["torchscript", "pt2", "onnx"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("pyarrow")
    pytest.importorskip("av")
    root = tmp_path_factory.mktemp("export")
    demos = root / "demos"
    assert main(["record", "env=pendulum", "env.max_episode_steps=20", "--scripted", "random", "--episodes", "3",
                 "--num-envs", "3", "--out", str(demos)]) == 0
    out = {}
    for name, args in RUNS.items():
        extra = [f"dataset={demos}"] if name in ("bc", "act") else []
        assert main(["train", *args, *extra, "run.eval_episodes=0", "run.progress=false", "--run-dir",
                     str(root / name)]) == 0, name
        out[name] = root / name
    return out


def _same_actions(run: Path, policy_source: Path | str, atol: float) -> None:
    ref = load_run(run, backend="cpu", num_envs=3, seed_offset=7)
    agent, env = ref.agent, ref.env
    policy = load_policy(policy_source)
    assert policy.recurrent == (agent.initial_state(3) is not None)
    obs = env.reset(seed=11).clone()
    state, mine = agent.initial_state(3), policy.initial_state(3)
    done = torch.ones(3, dtype=torch.bool)
    for t in range(25):
        want, state = agent.act(obs, state, done, deterministic=True)
        got, mine = policy.act(obs, mine, done)
        if want.is_floating_point():
            torch.testing.assert_close(got.to(want.dtype), want, atol=atol, rtol=atol)
        else:
            assert torch.equal(got.long(), want.long()), t
        result = env.step(want)
        obs = result.obs.clone()
        done = result.terminated | result.truncated
        if t == 9:
            done[1] = True  # an episode start mid-way: the exported state resets as the agent's does
    env.close()


# ONNX exports take ~10 s each (the dynamo exporter): the recurrent PPO and ACT run by default, the rest with -m slow
CASES = [pytest.param(name, fmt, marks=[pytest.mark.slow] if fmt == "onnx" and name not in ("ppo-lstm", "act") else [])
         for name in RUNS for fmt in FORMATS]


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_exported_policy_acts_as_the_checkpoint(runs: dict[str, Path], name: str, fmt: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    out = runs[name] / "export" / f"policy-{fmt}"
    assert main(["export", str(runs[name]), "--format", fmt, "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    meta = result["metadata"]
    assert meta["format"] == fmt and meta["agent"] == name.split("-")[0]
    assert result["path"] == str(out) + {"torchscript": ".pt", "pt2": ".pt2", "onnx": ".onnx"}[fmt]
    _same_actions(runs[name], result["path"], atol=1e-6 if fmt != "onnx" else 1e-4)


def test_the_metadata_names_what_goes_in_and_out(runs: dict[str, Path]) -> None:
    policy = load_policy(runs["act"])
    meta = policy.metadata
    assert meta["recurrent"] and meta["state"]["batch_dim"] == 1 and meta["state"]["shape"] == [5, 1, 3]
    assert meta["observation"]["feature"] == "observation.state" and meta["action"]["feature"] == "action"
    assert meta["fps"] == 30 and meta["chunk_size"] == 5 and meta["env"] == "pendulum"
    assert load_policy(runs["ppo-lstm"]).metadata["state"]["shape"] == [2, 1, 32]
    # step(): a flat observation in, a list out, the state carried (what noeira deploy uses)
    first = policy.step([1.0, 0.0, 0.0])
    assert len(first) == 1 and isinstance(first[0], float)


def test_export_errors_are_one_line(runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path), "--format", "pt2"]) == 2
    assert "not a run directory" in capsys.readouterr().err
    bogus = tmp_path / "policy.pt"
    bogus.write_bytes(b"not a policy")
    with pytest.raises(Exception, match="cannot load the policy"):
        load_policy(bogus)
    with pytest.raises(Exception, match="not an exported policy"):
        (tmp_path / "policy.bin").write_bytes(b"")
        load_policy(tmp_path / "policy.bin")
