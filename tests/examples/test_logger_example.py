"""The example logger (examples/plugins/logger, hook plugin ``acme-runlog``): autoloaded from its
entry point, or registered and unregistered in-process; its ``noeira runlog`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noeira.core import get_plugin_manager
from noeira.core.cli import main
from noeira.core.plugins import AUTOLOAD_ENV, reset_plugin_manager

pytestmark = pytest.mark.usefixtures("examples", "one_thread")

RUN = ("env=cartpole", "agent=ppo", "agent.horizon=8", "run.checkpoint_interval=2")  # 4 iterations of 32 steps


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_run_event_is_appended_to_the_log(train, tmp_path, monkeypatch, capsys) -> None:
    log = tmp_path / "logs" / "runs.jsonl"
    monkeypatch.setenv("ACME_RUNLOG", str(log))
    assert get_plugin_manager().get_plugin("acme-runlog") is not None  # autoloaded from the entry point
    first, _ = train(*RUN, "run.log_interval=1", steps=128, name="first")
    second, record = train(*RUN, "run.log_interval=2", steps=128, name="second")
    got = events(log)
    assert [e["event"] for e in got if e["run_dir"] == str(first)] == [
        "started", "iteration", "iteration", "checkpoint", "iteration", "iteration", "checkpoint", "finished"]
    mine = [e for e in got if e["run_dir"] == str(second)]
    assert [e["event"] for e in mine] == ["started", "iteration", "checkpoint", "iteration", "checkpoint", "finished"]
    start, last, final, end = mine[0], mine[3], mine[4], mine[5]
    assert start["config"]["agent"]["horizon"] == 8 and start["env"] == "cartpole" and start["backend"] == "cpu"
    assert last["iteration"] == 4 and last["env_steps"] == 128 and "policy_loss" in last["metrics"]
    assert final["path"].endswith("final.pt")
    assert end["outcome"] == "completed" and end["final_eval"] == record["final_eval"] and end["env_steps"] == 128

    capsys.readouterr()
    assert main(["runlog"]) == 0  # the log named by ACME_RUNLOG
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 3 and all("cartpole" in r and "ppo" in r and "completed" in r and "128" in r for r in rows[1:])


def test_without_the_variable_nothing_is_written(train, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("ACME_RUNLOG", raising=False)
    train(*RUN, steps=32)
    assert [p.name for p in tmp_path.rglob("*.jsonl")] == ["metrics.jsonl"]  # the run's own metrics only


def test_registered_and_unregistered_in_process(train, tmp_path, monkeypatch) -> None:
    import acme_runlog.hooks as runlog

    monkeypatch.setenv(AUTOLOAD_ENV, "1")
    reset_plugin_manager()
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv("ACME_RUNLOG", str(log))
    pm = get_plugin_manager()
    assert pm.get_plugin("acme-runlog") is None  # autoload off
    train(*RUN, steps=32, name="before")
    assert not log.exists()
    pm.register(runlog, name="acme-runlog")
    try:
        train(*RUN, steps=32, name="registered")
    finally:
        pm.unregister(name="acme-runlog")
    train(*RUN, steps=32, name="after")
    assert {e["run_dir"] for e in events(log)} == {str(tmp_path / "registered")}
    reset_plugin_manager()


@pytest.mark.parametrize(("content", "message"), [(None, "no such file"), ("{not json\n", ":1: not a JSON line")])
def test_runlog_errors_are_one_line(tmp_path, capsys, content: str | None, message: str) -> None:
    path = tmp_path / "runs.jsonl"
    if content is not None:
        path.write_text(content)
    assert main(["runlog", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
