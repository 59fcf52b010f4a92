"""Data-parallel training on torch.distributed, tested with gloo processes on the CPU:
identical parameters on every rank, one run directory, the budget counted across ranks (and a
recipe's budget scaled by them, so each rank keeps the recipe's iterations), bit-exact resume
from every rank's part of the checkpoint, failures that end the job with one message,
determinism in the seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE = ["backend=cpu", "env=cartpole", "run.progress=false"]


def noeira(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeira.core.cli", "train", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def record(run: Path) -> dict:
    return json.loads((run / "record.json").read_text())


def test_two_ranks_train_identically_into_one_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = noeira("--nproc-per-node", "2", *BASE, "run.total_steps=20480", "--run-dir", str(run))
    assert out.returncode == 0, out.stderr[-3000:]
    rec = record(run)
    assert rec["world_size"] == 2 and rec["num_envs_per_rank"] == 64 and len(rec["devices"]) == 2
    assert len(rec["param_hashes"]) == 2 and len(set(rec["param_hashes"])) == 1, rec["param_hashes"]
    per_iteration = 2 * 64 * 16  # two ranks' envs x horizon: the budget counts every rank's steps
    assert rec["env_steps"] == 20480 and rec["iterations"] == 20480 // per_iteration
    assert rec["total_steps"] == 20480 and rec["total_steps_note"] is None  # set by the user: the global count
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # one run directory, written by rank 0
    assert {"checkpoints", "config.toml", "metrics.jsonl", "record.json"} <= {p.name for p in run.iterdir()}
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["final.pt", "final.rank1.pt"]  # rank 1's part
    assert out.stdout.count("ppo on cartpole") == 1  # rank 0 reports

    # the same seed gives the same run; resume continues it at the same world size
    again = tmp_path / "again"
    assert noeira("--nproc-per-node", "2", *BASE, "run.total_steps=20480", "--run-dir", str(again)).returncode == 0
    assert record(again)["param_hashes"] == rec["param_hashes"]
    out = noeira("--nproc-per-node", "2", *BASE, "run.total_steps=24576", f"run.resume={run}", "--run-dir", str(run))
    assert out.returncode == 0, out.stderr[-3000:]
    resumed = record(run)
    assert resumed["env_steps"] == 24576 and len(set(resumed["param_hashes"])) == 1
    assert resumed["param_hashes"] != rec["param_hashes"]


def test_three_ranks_solve_cartpole_and_resume_from_one_process(tmp_path: Path) -> None:
    single = tmp_path / "single"
    assert noeira(*BASE, "run.total_steps=4096", "run.eval_episodes=0", "--run-dir", str(single)).returncode == 0
    run = tmp_path / "three"
    out = noeira("--nproc-per-node", "3", *BASE, "run.total_steps=300000", "run.eval_episodes=10", f"run.resume={single}",
                 "--run-dir", str(run))
    assert out.returncode == 0, out.stderr[-3000:]
    rec = record(run)
    assert rec["world_size"] == 3 and len(set(rec["param_hashes"])) == 1
    assert rec["resumed_from"] and rec["final_eval"]["mean_return"] >= 475, rec["final_eval"]


def test_the_recipe_keeps_its_iterations_on_every_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """World size W multiplies the global batch as num_envs does: left to the recipe,
    run.total_steps is W times the recipe's (the recipe's iterations, on each rank), and --help
    and record.json say so."""
    from noeira.core.cli import main
    from noeira.core.driver import resolve

    assert main(["train", "--help", "--nproc-per-node", "2", *BASE, "env.num_envs=8"]) == 0
    assert "with 2 processes: run.total_steps=25,000 (12,500 x 2" in capsys.readouterr().out
    alone = resolve({"backend": "cpu", "env": {"name": "cartpole", "num_envs": 8}}, world_size=1)
    out = noeira("--nproc-per-node", "2", *BASE, "env.num_envs=8", "run.eval_episodes=0", "--run-dir", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr[-3000:]
    rec = record(tmp_path / "r")
    assert rec["total_steps"] == 2 * alone.run.total_steps == 25000
    assert rec["iterations"] == -(-alone.run.total_steps // (8 * 16))  # a process alone: the same iterations
    assert "12,500 x 2 processes" in rec["total_steps_note"]


def test_two_ranks_resume_bit_identically_from_their_parts(tmp_path: Path) -> None:
    """Stopped after 16 iterations and resumed at the same world size, each rank reads back its
    own part of the checkpoint (env, agent, generators): the run ends as the run left alone."""
    import torch

    from noeira.core.rundir import load_checkpoint

    keys = [*BASE, "env.num_envs=8", "agent.total_steps=8192", "run.eval_episodes=0", "run.log_interval=4"]
    for args in (["run.total_steps=8192", "--run-dir", str(tmp_path / "alone")],
                 ["run.total_steps=4096", "--run-dir", str(tmp_path / "split")],
                 ["run.total_steps=8192", f"run.resume={tmp_path / 'split'}", "--run-dir", str(tmp_path / "split")]):
        out = noeira("--nproc-per-node", "2", *keys, *args)
        assert out.returncode == 0, out.stderr[-3000:]
    for name in ("final.pt", "final.rank1.pt"):
        a, b = (load_checkpoint(tmp_path / d / "checkpoints" / name) for d in ("alone", "split"))
        assert a["rank"] == b["rank"] == (1 if "rank1" in name else 0)
        for part in ("agent", "env"):
            flat_a, flat_b = _tensors(a[part]), _tensors(b[part])
            assert flat_a.keys() == flat_b.keys()
            assert all(torch.equal(flat_a[k], flat_b[k]) for k in flat_a), [k for k in flat_a
                                                                              if not torch.equal(flat_a[k], flat_b[k])]
    assert record(tmp_path / "alone")["param_hashes"] == record(tmp_path / "split")["param_hashes"]
    drop = ("time", "steps_per_second")
    rows = [[{k: v for k, v in json.loads(line).items() if k not in drop}
             for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()] for d in ("alone", "split")]
    assert rows[0] == rows[1]


def _tensors(x: object, path: str = "") -> dict:
    import torch

    if isinstance(x, torch.Tensor):
        return {path: x}
    if isinstance(x, dict):
        return {k: v for key, item in x.items() for k, v in _tensors(item, f"{path}.{key}").items()}
    if isinstance(x, (list, tuple)):
        return {k: v for i, item in enumerate(x) for k, v in _tensors(item, f"{path}.{i}").items()}
    return {}


def test_a_failing_rank_ends_the_job_with_one_message(install_dist, tmp_path: Path) -> None:
    install_dist("crash-plugins", {"noeira.agents": {"crashing": "toy_plugins:CrashingAgent"}})
    out = noeira("--nproc-per-node", "2", "backend=cpu", "env=corridor", "agent=crashing", "run.progress=false",
                 "env.num_envs=4", "run.total_steps=100000", "--run-dir", str(tmp_path / "run"), timeout=240)
    assert out.returncode == 2, out.stderr[-3000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("noeira: error: distributed run failed: rank 1") and "stopped" in last
    assert "(RuntimeError: rank 1 crashed on purpose)" in last


def test_a_signal_to_one_rank_stops_every_rank_at_the_same_iteration(install_dist, tmp_path: Path) -> None:
    """SIGTERM reaching rank 1 alone (in its third iteration): the ranks agree at the next log
    interval (the fourth iteration) and both write their part of latest.pt there; none is left
    waiting for the other in a collective."""
    import torch

    install_dist("signal-plugins", {"noeira.agents": {"signalling": "toy_plugins:SignallingAgent"}})
    run = tmp_path / "run"
    out = noeira("--nproc-per-node", "2", "backend=cpu", "env=corridor", "agent=signalling", "run.progress=false",
                 "env.num_envs=4", "run.total_steps=100000", "run.log_interval=2", "--run-dir", str(run), timeout=240)
    assert out.returncode == 2 and "distributed run failed" in out.stderr and "(Terminated)" in out.stderr, \
        out.stderr[-3000:]
    parts = [torch.load(run / "checkpoints" / name, weights_only=False) for name in ("latest.pt", "latest.rank1.pt")]
    assert [p["iteration"] for p in parts] == [4, 4] and [p["rank"] for p in parts] == [0, 1]
    assert record(run)["outcome"] == "terminated"


def test_the_launcher_names_the_rank_that_failed_first(tmp_path: Path) -> None:
    """torchrun stamps a failure in whole seconds when it sees the process end, and of ties it
    names the lowest rank: when its agent, starved of CPU, sees rank 1 (crashed) and rank 0 (its
    collective lost the peer) ended in one poll, it named rank 0 and
    test_a_failing_rank_ends_the_job_with_one_message failed. Each rank now writes, when it fails,
    the time to the microsecond; the launcher goes by those."""
    from types import SimpleNamespace

    from noeira.core.distributed import _first_failure

    def failure(rank: int, at: float, message: str) -> SimpleNamespace:
        (tmp_path / str(rank)).mkdir()
        data = {"message": message, "timestamp": int(at), "noeira_failed_at": at, "rank": rank, "pid": 100 + rank}
        (tmp_path / str(rank) / "error.json").write_text(json.dumps(data))
        return SimpleNamespace(local_rank=rank, pid=100 + rank, exitcode=1, timestamp=1000,
                               error_file=str(tmp_path / str(rank) / "error.json"), error_file_data=data)

    crashed = failure(1, 1000.25, "RuntimeError: rank 1 crashed on purpose")
    taken_down = failure(0, 1000.40, "RuntimeError: Connection closed by peer")
    both = {0: taken_down, 1: crashed}
    assert min(both, key=lambda r: both[r].timestamp) == 0  # torchrun's own choice: a tie, the lower rank
    assert _first_failure({0: taken_down, 1: crashed})[:2] == (1, 1)
    assert _first_failure({0: taken_down, 1: crashed})[3:] == ("ended with exit code 1",
                                                               "RuntimeError: rank 1 crashed on purpose")
    # rank 1 still exiting when torchrun saw rank 0 end: found by its error file beside rank 0's
    rank, local, pid, how, said = _first_failure({0: taken_down})
    assert (rank, local, pid, how) == (1, 1, 101, "failed") and said.endswith("crashed on purpose")


def test_bad_config_or_run_dir_stops_before_any_process(tmp_path: Path) -> None:
    out = noeira("--nproc-per-node", "2", *BASE, "agent.lr=fast")
    assert out.returncode == 2 and out.stderr.strip() == "noeira: error: agent.lr: expected a float, got 'fast'"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.toml").write_text("")
    out = noeira("--nproc-per-node", "2", *BASE, "--run-dir", str(tmp_path / "run"))
    assert out.returncode == 2 and "already holds a run" in out.stderr and "torch.distributed" not in out.stderr


@pytest.mark.parametrize("agent,env", [("sac", "pendulum"), ("a2c", "cartpole")])
def test_other_agents_stay_identical_across_ranks(agent: str, env: str, tmp_path: Path) -> None:
    extra = ["agent.learning_starts=64", "agent.batch_size=32"] if agent == "sac" else ["agent.norm_obs=true"]
    out = noeira("--nproc-per-node", "2", "backend=cpu", f"env={env}", f"agent={agent}", "run.progress=false",
                 "env.num_envs=4", "run.total_steps=512", "run.eval_episodes=0", *extra, "--run-dir", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr[-3000:]
    hashes = record(tmp_path / "r")["param_hashes"]
    assert len(hashes) == 2 and hashes[0] == hashes[1]


def test_verify_graph_and_check_capture_run_under_torchrun() -> None:
    """Both check commands join the job like training does (each rank its own part, collectives
    matched) and rank 0 alone reports one verdict for every rank."""
    for command, extra, verdict in [("verify-graph", ["--iterations", "3"], "bit-identical on all 2 ranks"),
                                    ("check-capture", [], "clean: no host syncs")]:
        out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                              "-m", "noeira.core.cli", command, *BASE, *extra], capture_output=True, text=True, timeout=300,
                             check=False)
        # the ranks' own lines come before torchrun's summary (~2,500 characters): keep both, and stdout
        assert out.returncode == 0, f"{command}:\n{out.stdout[-2000:]}\n{out.stderr[-8000:]}"
        assert out.stdout.count(verdict) == 1, out.stdout
        assert "2 ranks" in out.stdout.splitlines()[0], out.stdout
