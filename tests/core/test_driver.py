"""The driver: run-directory contents, hook order, checkpoints, eval, resume, failures."""

from __future__ import annotations

import json
import tomllib

import pytest

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
    assert set(on_disk["final_eval"]) == {"mean_return", "std_return", "episodes"}
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
