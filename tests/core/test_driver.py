"""The driver: run-directory contents, hook order, checkpoints, eval, resume, failures."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import torch

from noeira.core.cli import main
from noeira.core.driver import eval_run, load_checkpoint, resolve, train
from noeira.core.plugins import get_plugin_manager

TOY = {"backend": "cpu", "agent": {"name": "toy"}, "env": {"name": "corridor", "length": 4}}


@pytest.fixture
def recorder(toy_dist):
    from toy_plugins import Recorder

    rec = Recorder()
    pm = get_plugin_manager()
    pm.register(rec, name="recorder")
    yield rec
    pm.unregister(rec)


def test_run_directory_contents(toy_dist, tmp_path) -> None:
    cfg = resolve({**TOY, "run": {"total_steps": 640, "log_interval": 2, "eval_episodes": 3}})
    record = train(cfg, run_dir=tmp_path / "run")
    run = tmp_path / "run"
    # metrics.csv comes from the example plugin's hook, when it is installed
    assert {p.name for p in run.iterdir()} - {"metrics.csv"} == {"checkpoints", "config.toml", "metrics.jsonl",
                                                                  "record.json"}
    on_disk = json.loads((run / "record.json").read_text())
    assert on_disk["outcome"] == "completed" == record["outcome"]
    assert on_disk["env_steps"] == 640 and on_disk["iterations"] == 5
    assert on_disk["final_eval"]["episodes"] == 3
    assert set(on_disk["final_eval"]) == {"mean_return", "std_return", "episodes", "steps"}
    assert 0 < on_disk["final_eval"]["steps"] <= 16 + 1  # the steps it took: every episode ends by the 16-step limit
    assert on_disk["steps_per_second"] > 0 and on_disk["start"] <= on_disk["end"]
    assert on_disk["versions"]["noeira-core"] and on_disk["versions"]["torch"]
    assert on_disk["versions"]["toy-plugins"] == "0.0.1" and on_disk["versions"]["acme-corridor"] == "0.2.0"
    assert on_disk["backend"] == "cpu" and on_disk["graph"] == "eager"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [2, 4, 5]  # every log_interval, and the last
    assert {"loss", "mean_reward", "steps_per_second", "episodes"} <= set(rows[0])
    assert (run / "checkpoints" / "final.pt").is_file()
    assert not list((run / "checkpoints").glob(".*tmp*"))  # atomic writes leave no temp files
    resolved = tomllib.loads((run / "config.toml").read_text())
    assert resolved["agent"] == {"name": "toy", "horizon": 16, "lr": 0.05, "gamma": 0.9}
    assert resolved["env"]["length"] == 4 and resolved["env"]["num_envs"] == 8


def test_config_toml_reproduces_the_run(toy_dist, tmp_path) -> None:
    assert main(["train", "backend=cpu", "agent=toy", "env=corridor", "run.total_steps=384", "run.seed=3",
                 "--run-dir", str(tmp_path / "a")]) == 0
    assert main(["train", "--config", str(tmp_path / "a" / "config.toml"), "--run-dir", str(tmp_path / "b")]) == 0
    a = json.loads((tmp_path / "a" / "record.json").read_text())
    b = json.loads((tmp_path / "b" / "record.json").read_text())
    assert a["final_eval"] == b["final_eval"]
    ca, cb = load_checkpoint(tmp_path / "a"), load_checkpoint(tmp_path / "b")
    for k, v in ca["agent"]["policy"].items():
        assert v.equal(cb["agent"]["policy"][k])


def test_hook_order(recorder, tmp_path) -> None:
    cfg = resolve({**TOY, "run": {"total_steps": 512, "checkpoint_interval": 2}})
    train(cfg, run_dir=tmp_path / "run")
    assert recorder.calls == ["configure", "run_started", "iteration", "iteration", "checkpoint_saved", "iteration",
                              "iteration", "checkpoint_saved", "run_finished:completed"]


def test_hook_plugin_unregistered_is_not_called(recorder, tmp_path) -> None:
    get_plugin_manager().unregister(recorder)
    train(resolve({**TOY, "run": {"total_steps": 128}}), run_dir=tmp_path / "run")
    assert recorder.calls == []
    get_plugin_manager().register(recorder, name="recorder")


def test_eval_reproduces_final_eval(toy_dist, tmp_path) -> None:
    record = train(resolve({**TOY, "run": {"total_steps": 1024, "eval_episodes": 5}}), run_dir=tmp_path / "run")
    assert eval_run(tmp_path / "run") == record["final_eval"]


def test_resume_continues_from_the_checkpoint(toy_dist, tmp_path) -> None:
    first = train(resolve({**TOY, "run": {"total_steps": 512}}), run_dir=tmp_path / "a")
    second = train(resolve({**TOY, "run": {"total_steps": 1024, "resume": str(tmp_path / "a")}}), run_dir=tmp_path / "b")
    assert first["env_steps"] == 512 and second["env_steps"] == 1024 and second["iterations"] == 8
    rows = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["iteration"] == 5 and rows[0]["env_steps"] == 640


def test_failure_is_recorded_and_hooks_see_it(recorder, tmp_path, monkeypatch) -> None:
    from toy_plugins import ToyAgent

    def boom(self):
        raise RuntimeError("exploded")

    monkeypatch.setattr(ToyAgent, "learn", boom)
    with pytest.raises(RuntimeError, match="exploded"):
        train(resolve({**TOY, "run": {"total_steps": 512}}), run_dir=tmp_path / "run")
    assert json.loads((tmp_path / "run" / "record.json").read_text())["outcome"] == "failed"
    assert recorder.calls[-1] == "run_finished:failed"


def test_interrupt_saves_a_checkpoint(recorder, tmp_path, monkeypatch) -> None:
    from toy_plugins import ToyAgent

    calls = {"n": 0}
    real = ToyAgent.learn

    def interrupt_on_third(self):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(ToyAgent, "learn", interrupt_on_third)
    with pytest.raises(KeyboardInterrupt):
        train(resolve({**TOY, "run": {"total_steps": 4096}}), run_dir=tmp_path / "run")
    assert json.loads((tmp_path / "run" / "record.json").read_text())["outcome"] == "interrupted"
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "latest.pt")["iteration"] == 2
    assert recorder.calls[-2:] == ["checkpoint_saved", "run_finished:interrupted"]


def test_graph_backend_from_environment_variable(toy_dist, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NOEIRA_GRAPH_BACKEND", "nonesuch")
    with pytest.raises(Exception, match="unknown graph backend 'nonesuch'"):
        train(resolve({**TOY, "run": {"total_steps": 128}}), run_dir=tmp_path / "run")
    monkeypatch.setenv("NOEIRA_GRAPH_BACKEND", "eager")
    assert train(resolve({**TOY, "run": {"total_steps": 128}}), run_dir=tmp_path / "ok")["graph"] == "eager"


def test_explicit_capture_of_unsafe_env_is_an_error(toy_dist, tmp_path, monkeypatch) -> None:
    from acme_corridor.env import Corridor

    monkeypatch.setattr(Corridor, "capture_safe", False, raising=False)
    orig = Corridor.__init__

    def unsafe_init(self, *a, **k):
        orig(self, *a, **k)
        self.capture_safe = False

    monkeypatch.setattr(Corridor, "__init__", unsafe_init)
    with pytest.raises(Exception, match="graph.capture_env: env 'corridor' declares its step not capture-safe"):
        train(resolve({**TOY, "graph": {"capture_env": True}, "run": {"total_steps": 128}}), run_dir=tmp_path / "r")


# -- runs are never lost ---------------------------------------------------------------------------

def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeira.core.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=cwd)


def test_an_existing_run_is_refused_unless_resumed_or_overwritten(tmp_path) -> None:
    run = str(tmp_path / "run")
    base = ["train", "env=corridor", "backend=cpu", "run.total_steps=512", "run.progress=false", "run.eval_episodes=0",
            "--run-dir", run, "env.num_envs=4", "agent.horizon=8"]
    assert _cli(*base).returncode == 0
    first = (tmp_path / "run" / "record.json").read_text()
    out = _cli(*base)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "already holds a run" in out.stderr
    assert (tmp_path / "run" / "record.json").read_text() == first, "a refused run must not touch the old one"
    out = _cli(*base[:3], "run.total_steps=1024", *base[4:], f"run.resume={run}")
    assert out.returncode == 0, out.stderr
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["env_steps"] == 1024 and len(lines) > 2  # appended to the first run's metrics
    out = _cli(*base, "--overwrite")
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])["env_steps"] == 512


def test_resuming_a_finished_run_says_so(tmp_path) -> None:
    run = str(tmp_path / "run")
    assert _cli("train", "env=corridor", "backend=cpu", "run.total_steps=256", "run.progress=false",
                "run.eval_episodes=0", "--run-dir", run).returncode == 0
    out = _cli("train", "env=corridor", "backend=cpu", "run.total_steps=256", f"run.resume={run}",
               "--run-dir", str(tmp_path / "again"))
    assert out.returncode == 2 and "finished" in out.stderr and "raise run.total_steps" in out.stderr


@pytest.mark.parametrize("sig,code,outcome", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_stops_at_an_iteration_end_with_a_checkpoint(tmp_path, sig, code, outcome) -> None:
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "noeira.core.cli", "train", "env=corridor", "backend=cpu",
                             "run.total_steps=100000000", "run.progress=false", "--run-dir", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not ((run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").read_text().count("\n") >= 2):
            assert proc.poll() is None and time.time() < deadline, "training did not start"
            time.sleep(0.1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    record = json.loads((run / "record.json").read_text())
    assert record["outcome"] == outcome and record["iterations"] >= 2
    ckpt = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert ckpt["iteration"] == record["iterations"] and ckpt["env_steps"] == record["env_steps"]


def test_checkpoints_by_time(recorder, tmp_path) -> None:
    cfg = resolve({"backend": "cpu", "env": {"name": "corridor", "num_envs": 4}, "agent": {"name": "ppo", "horizon": 4},
                   "run": {"total_steps": 160, "progress": False, "eval_episodes": 0, "checkpoint_minutes": 1e-9}})
    train(cfg, run_dir=tmp_path / "run")
    assert recorder.calls.count("checkpoint_saved") == 10  # latest.pt after each of 9 iterations, then final.pt
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").is_file()


def test_a_pair_without_a_recipe_says_so(toy_dist, tmp_path, caplog) -> None:
    cfg = resolve({"backend": "cpu", "agent": {"name": "ppo", "horizon": 4}, "env": {"name": "corridor", "num_envs": 2},
                   "run": {"total_steps": 16, "progress": False, "eval_episodes": 0}})
    with caplog.at_level("WARNING", logger="noeira"):
        train(cfg, run_dir=tmp_path / "a")
    assert [r.getMessage() for r in caplog.records if "no tuned recipe" in r.getMessage()] == [
        "no tuned recipe for agent 'ppo' on env 'corridor' (cpu): the plugins' defaults apply and may not solve it"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="noeira"):
        train(resolve({**TOY, "run": {"total_steps": 256}}), run_dir=tmp_path / "b")  # the toy recipe applies
    assert not [r for r in caplog.records if "no tuned recipe" in r.getMessage()]
