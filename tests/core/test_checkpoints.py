"""Checkpoints as users meet them: bad input to a resume or an evaluation is one line and exit
code 2 with the run directory untouched; evaluation builds the agent to act only and runs any
number of episodes; a checkpoint made on CUDA evaluates and resumes on the CPU (real CUDA-made
runs from ``tests/data/cuda_checkpoints.tar.gz``, made by ``tests/data/make_cuda_checkpoints.py``
on a GPU machine, and a CPU run whose random states are given CUDA's shape, so the path is
covered without one)."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
import torch

from noeira.core.cli import main
from noeira.core.driver import evaluate, load_run
from noeira.core.rundir import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = DATA / "cuda_checkpoints.tar.gz"
SMALL = ["backend=cpu", "run.progress=false", "run.eval_episodes=0", "env.num_envs=4"]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def snapshot(run: Path) -> dict[str, tuple[str, int]]:
    """Every file of a run directory: its hash and modification time."""
    return {str(p.relative_to(run)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(run.rglob("*")) if p.is_file()}


def one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("noeira: error: "), err
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished PPO run and a finished DQN run on CartPole (tiny)."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for agent, extra in (("ppo", ["agent.horizon=8"]), ("dqn", ["agent.learning_starts=32", "agent.buffer_size=256"])):
        out[agent] = root / agent
        assert main(["train", "env=cartpole", f"agent={agent}", *SMALL, "run.total_steps=128", *extra,
                     "--run-dir", str(out[agent])]) == 0
    return out


@pytest.fixture
def ppo_run(runs: dict[str, Path], tmp_path: Path) -> Path:
    run = tmp_path / "ppo"
    shutil.copytree(runs["ppo"], run)
    return run


# -- bad input: one line, exit 2, nothing changed -----------------------------------------------

@pytest.mark.parametrize("override,fragments", [
    ("agent=a2c", ("a checkpoint of agent 'ppo' on env 'cartpole', not of agent 'a2c'",)),
    ("env=acrobot", ("a checkpoint of agent 'ppo' on env 'cartpole', not of agent 'ppo' on env 'acrobot'",)),
    ("agent.lr=0.1", ("the config differs from the checkpoint's at agent.lr",)),
    ("env.num_envs=8", ("the config differs from the checkpoint's at env.num_envs (4 there, 8 here)",)),
])
def test_a_resume_into_another_agent_env_or_config_is_refused(override: str, fragments: tuple[str, ...],
                                                              ppo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(ppo_run)
    code, _, err = cli(capsys, "train", f"run.resume={ppo_run}", "run.total_steps=256", override, "--run-dir",
                       str(ppo_run))
    one_line_error(code, err, f"run.resume={ppo_run}", *fragments)
    assert snapshot(ppo_run) == before


def test_a_checkpoint_of_another_agent_in_the_run_is_refused(ppo_run: Path, runs: dict[str, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(runs["dqn"] / "checkpoints" / "final.pt", ppo_run / "checkpoints" / "final.pt")
    before = snapshot(ppo_run)
    code, _, err = cli(capsys, "train", f"run.resume={ppo_run}", "run.total_steps=256", "--run-dir", str(ppo_run))
    one_line_error(code, err, "a checkpoint of agent 'dqn' on env 'cartpole', not of agent 'ppo'")
    assert snapshot(ppo_run) == before
    code, _, err = cli(capsys, "eval", str(ppo_run))
    one_line_error(code, err, "a checkpoint of agent 'dqn'", "names agent 'ppo'")
    assert snapshot(ppo_run) == before


def test_a_truncated_checkpoint_is_refused(ppo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    final = ppo_run / "checkpoints" / "final.pt"
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])
    before = snapshot(ppo_run)
    for args in (["train", f"run.resume={ppo_run}", "run.total_steps=256", "--run-dir", str(ppo_run)],
                 ["eval", str(ppo_run)]):
        code, _, err = cli(capsys, *args)
        one_line_error(code, err, f"{final}: not a readable checkpoint, truncated or corrupt")
        assert snapshot(ppo_run) == before


def test_a_finished_run_or_a_missing_one_is_refused(ppo_run: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(ppo_run)
    code, _, err = cli(capsys, "train", f"run.resume={ppo_run}", "--run-dir", str(ppo_run))
    one_line_error(code, err, "that run is finished (128 of run.total_steps=128 steps)")
    assert snapshot(ppo_run) == before
    code, _, err = cli(capsys, "train", f"run.resume={tmp_path / 'nonesuch'}", "--run-dir", str(tmp_path / "new"))
    one_line_error(code, err, "no such checkpoint")
    assert not (tmp_path / "new").exists()


def test_a_resumed_run_keeps_its_config(ppo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``run.resume=DIR`` alone continues DIR as it was set up (its agent, env and run keys), not
    with the defaults; the run keys given on the command line change."""
    code, _, err = cli(capsys, "train", f"run.resume={ppo_run}", "run.total_steps=256", "--run-dir", str(ppo_run))
    assert code == 0, err
    record = json.loads((ppo_run / "record.json").read_text())
    assert record["env_steps"] == 256 and record["resumed_at"] == {"iteration": 4, "env_steps": 128}
    assert "final_eval" not in record  # the run's own run.eval_episodes=0, not the default 10


# -- evaluation -------------------------------------------------------------------------------------

def test_eval_of_a_recurrent_run_checks_only_what_acting_needs(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Minibatches of whole env segments need num_envs >= num_minibatches to train, not to act:
    ``noeira eval --episodes 2`` on such a run works, and so does any number of episodes."""
    run = tmp_path / "lstm"
    assert main(["train", "env=cartpole", "agent=ppo", "agent.network=lstm", "agent.num_minibatches=4",
                 "agent.horizon=8", *SMALL, "run.total_steps=64", "--run-dir", str(run)]) == 0
    code, out, err = cli(capsys, "eval", str(run), "--episodes", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["episodes"] == 2
    code, out, err = cli(capsys, "eval", str(run), "--episodes", "37", "--json")
    assert code == 0, err
    assert json.loads(out)["episodes"] == 37


def test_an_offpolicy_agent_built_to_act_allocates_no_replay(runs: dict[str, Path]) -> None:
    loaded = load_run(runs["dqn"], num_envs=3)
    try:
        assert loaded.agent.rb.capacity == 3 and loaded.env.num_envs == 3
    finally:
        loaded.close()


class Heuristic:
    """Pushes the cart the way the pole turns: a deterministic policy whose episodes last 140-290 steps."""

    def initial_state(self, batch: int) -> None:
        return None

    def act(self, obs: torch.Tensor, state: Any = None, done: Any = None, deterministic: bool = False) -> Any:
        return (obs[:, 3] > 0).long(), None


def test_evaluate_counts_each_envs_first_episodes() -> None:
    """10 episodes on 4 envs: env i counts its first 3, 3, 2, 2 episodes, as a plain loop over
    the same envs counts them."""
    from noeira.core import make_env

    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    got = evaluate(Heuristic(), env, 10, seed=5)
    env.reset(seed=5)
    shares, returns, running = [3, 3, 2, 2], [[] for _ in range(4)], torch.zeros(4, dtype=torch.float64)
    while any(len(r) < s for r, s in zip(returns, shares, strict=True)):
        result = env.step(Heuristic().act(env.obs)[0])
        running += result.reward.double()
        for i in torch.nonzero(result.terminated | result.truncated).flatten().tolist():
            if len(returns[i]) < shares[i]:
                returns[i].append(float(running[i]))
            running[i] = 0
    want = torch.tensor([x for r in returns for x in r], dtype=torch.float64)
    assert got["episodes"] == 10
    assert got["mean_return"] == pytest.approx(float(want.mean()), rel=1e-12)
    assert got["std_return"] == pytest.approx(float(want.std(unbiased=False)), rel=1e-9)
    assert len(set(want.tolist())) > 2  # the episodes differ: the count above means something


# -- portable checkpoints ------------------------------------------------------------------------------

def _as_if_cuda(x: Any, key: str = "") -> Any:
    """A checkpoint's generator states replaced by ones of CUDA's shape (16 bytes)."""
    if isinstance(x, dict):
        out = {k: _as_if_cuda(v, str(k)) for k, v in x.items()}
        if "cpu" in out and key == "rng":
            out["cuda"] = torch.arange(16, dtype=torch.uint8)
        return out
    if isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.numel() == 5056 and key in ("generator", "cpu"):
        return torch.arange(16, dtype=torch.uint8) if key == "generator" else x
    return x


def test_random_states_that_cannot_move_are_reseeded_in_one_line(ppo_run: Path, tmp_path: Path, caplog,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    final = ppo_run / "checkpoints" / "final.pt"
    ckpt = _as_if_cuda(load_checkpoint(final))
    ckpt["device"] = "cuda:0"
    assert ckpt["agent"]["rollout"]["generator"].numel() == 16 and ckpt["env"]["generator"].numel() == 16
    torch.save(ckpt, final)
    with caplog.at_level(logging.WARNING, logger="noeira"):
        code, out, err = cli(capsys, "eval", str(ppo_run), "--backend", "cpu", "--json")
    assert code == 0, err
    lines = [r.getMessage() for r in caplog.records if "cannot move" in r.getMessage()]
    assert len(lines) == 1 and "agent generator (cuda -> cpu)" in lines[0], lines
    records = []
    for name in ("a", "b"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="noeira"):
            code, _, err = cli(capsys, "train", f"run.resume={ppo_run}", "run.total_steps=256",
                               "--run-dir", str(tmp_path / name))
        assert code == 0, err
        lines = [r.getMessage() for r in caplog.records if "cannot move" in r.getMessage()]
        assert len(lines) == 1, lines
        assert all(f"{w} (cuda -> cpu)" in lines[0] for w in ("agent generator", "env 'cartpole' generator"))
        records.append(load_checkpoint(tmp_path / name))
    # re-seeded deterministically: the same checkpoint resumes into the same run
    for k, v in records[0]["agent"]["rollout"]["policy"].items():
        assert torch.equal(v, records[1]["agent"]["rollout"]["policy"][k]), k


def _fixtures(tmp_path: Path) -> Path:
    if not FIXTURES.is_file():
        pytest.skip(f"no CUDA-made checkpoints: run `python tests/data/make_cuda_checkpoints.py` on a GPU machine and "
                    f"save its tarball as {FIXTURES.relative_to(DATA.parents[1])}")
    with tarfile.open(FIXTURES) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "cuda_checkpoints"


CUDA_RUNS = ["ppo-cartpole", "sac-pendulum", "dqn-cartpole", "ppo-lstm-cartpole", "ppo-craftax"]


@pytest.mark.parametrize("name", CUDA_RUNS[:-1])
def test_a_cuda_run_evaluates_on_the_cpu(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _fixtures(tmp_path) / name
    assert load_checkpoint(run)["device"].startswith("cuda")
    code, out, err = cli(capsys, "eval", str(run), "--backend", "cpu", "--episodes", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["episodes"] == 2


def test_a_cuda_craftax_run_acts_on_the_cpu(tmp_path: Path) -> None:
    """Craftax-Classic's CUDA checkpoint (the recipe's mingru network in bf16 with fp32 masters,
    compact observations, the Triton step's world key) loads on the CPU and acts, carrying its
    state (``noeira eval`` would run its episodes to their end: minutes on a CPU)."""
    run = _fixtures(tmp_path) / "ppo-craftax"
    loaded = load_run(run, num_envs=2, backend="cpu")
    try:
        state, done = loaded.agent.initial_state(2), torch.ones(2, dtype=torch.bool)
        assert state is not None
        for _ in range(32):
            action, state = loaded.agent.act(loaded.env.obs, state, done, deterministic=True)
            assert loaded.env.action_space.contains(action)
            result = loaded.env.step(action)
            done = result.terminated | result.truncated
    finally:
        loaded.close()


@pytest.mark.parametrize("name", CUDA_RUNS)
def test_a_cuda_run_resumes_on_the_cpu(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _fixtures(tmp_path) / name
    ckpt = load_checkpoint(run)
    per_iteration = ckpt["env_steps"] // ckpt["iteration"]
    code, _, err = cli(capsys, "train", f"run.resume={run}", "backend=cpu", "run.eval_episodes=0",
                       f"run.total_steps={ckpt['env_steps'] + per_iteration}", "--run-dir", str(tmp_path / "cpu"))
    assert code == 0, err
    record = json.loads((tmp_path / "cpu" / "record.json").read_text())
    assert record["backend"] == "cpu" and record["iterations"] == ckpt["iteration"] + 1


@pytest.mark.cuda
@pytest.mark.parametrize("agent", [["agent=ppo"], ["agent=ppo", "agent.network=lstm", "agent.num_minibatches=2"],
                                   ["agent=dqn", "agent.learning_starts=64", "agent.buffer_size=512"]],
                         ids=["ppo", "ppo-lstm", "dqn"])
def test_evaluation_through_the_graph_backend_equals_eager(agent: list[str], tmp_path: Path) -> None:
    """On CUDA the evaluation records a step once (``stream`` by default) and replays it: the
    same episodes, the same returns as stepping eagerly."""
    from noeira.core.api import get_graph_backend
    from noeira.core.driver import choose_graph

    run = tmp_path / "run"
    assert main(["train", "env=cartpole", *agent, "backend=cuda", "env.num_envs=8", "run.total_steps=2048",
                 "run.progress=false", "run.eval_episodes=0", "--run-dir", str(run)]) == 0
    results = []
    for graph_on in (True, False):
        loaded = load_run(run, episodes=20)
        name = choose_graph(loaded.cfg.graph, loaded.backend)
        assert name != "eager"
        graph = get_graph_backend(name) if graph_on else None
        try:
            results.append(evaluate(loaded.agent, loaded.env, 20, seed=loaded.seed, graph=graph, backend=loaded.backend))
        finally:
            loaded.close()
    assert results[0] == results[1] and results[0]["episodes"] == 20


def test_a_checkpoint_from_before_a_plugin_gained_keys_resumes(ppo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key the agent gained after the checkpoint was made (absent from the checkpoint's and the
    run's config) takes its default: the run resumes (the CUDA-made DQN fixture predates DQN's
    value-family keys)."""
    import tomllib

    import tomli_w

    final = ppo_run / "checkpoints" / "final.pt"
    ckpt = load_checkpoint(final)
    for key in ("clip_coef", "ent_schedule"):  # as if PPO had gained them since
        del ckpt["config"]["agent"][key]
    torch.save(ckpt, final)
    config = tomllib.loads((ppo_run / "config.toml").read_text())
    for key in ("clip_coef", "ent_schedule"):
        del config["agent"][key]
    (ppo_run / "config.toml").write_text(tomli_w.dumps(config))
    code, _, err = cli(capsys, "train", f"run.resume={ppo_run}", "run.total_steps=256", "--run-dir", str(ppo_run))
    assert code == 0, err


def test_resume_compares_tables_key_by_key() -> None:
    """Within a table (a network's options) a key the checkpoint predates takes its default and
    is not a difference; a key both sides hold with another value is, named by its path."""
    from noeira.core.rundir import _differences

    saved = {"network": "mingru", "network_options": {"skip": "highway"}}
    assert _differences("agent", saved, {"network": "mingru", "network_options": {"skip": "highway", "conv": 1}}) == []
    assert _differences("agent", saved, {"network": "mingru", "network_options": {"skip": "none"}}) == [
        ("agent.network_options.skip", "highway", "none")]
