"""The CLI: exit codes, one-line errors, list/info/eval, plugin help."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from noeira.core.cli import main


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "noeira.core.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, check=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "agent=nope"], "noeira: error: unknown agent 'nope'"),
        (["train", "env=cartpol", "agent=toy"], "did you mean"),
        (["train", "agent=toy", "env=corridor", "agent.lr=fast"], "agent.lr: expected a float, got 'fast'"),
        (["train", "agent=toy", "env=corridor", "run.totl_steps=5"], "run.totl_steps: unknown key"),
        (["train", "--config", "/nonexistent.toml"], "--config: no such file"),
        (["train", "agent=toy", "env=corridor", "justaword"], "an override is KEY=VALUE"),
        (["eval", "/nonexistent-run"], "not a run directory"),
    ],
)
def test_user_errors_exit_2_with_one_line(toy_dist, args, message) -> None:
    out = run_cli(*args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_debug_shows_the_traceback(toy_dist) -> None:
    out = run_cli("--debug", "train", "agent=nope")
    assert out.returncode != 0 and "Traceback" in out.stderr and "UnknownPluginError" in out.stderr


def test_list_json_has_all_kinds_and_the_example_plugin() -> None:
    out = run_cli("list", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"backends", "graph", "envs", "agents", "physics", "robots", "networks", "hooks"}
    assert {"name": "acme-csv", "distribution": "acme-corridor"}.items() <= next(
        h for h in data["hooks"] if h["name"] == "acme-csv").items()
    corridor = [p for p in data["envs"] if p["name"] == "corridor"]
    assert corridor and corridor[0]["distribution"] == "acme-corridor" and corridor[0]["version"] == "0.2.0"
    assert set(corridor[0]) == {"name", "distribution", "version", "summary"}


def test_list_table_and_info(capsys) -> None:
    out = run_cli("list", env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "corridor" in out.stdout and "acme-csv" in out.stdout and "hooks" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80, "noeira list must fit 80 columns"
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "noeira-core" in out and "backend cpu: available" in out


def test_train_help_lists_plugin_keys(toy_dist, capsys) -> None:
    assert main(["train", "agent=toy", "env=corridor", "--help"]) == 0
    out = capsys.readouterr().out
    for text in ("horizon", "Env steps per collect.", "length", "Cells in the corridor", "total_steps", "capture_env"):
        assert text in out


def test_train_then_eval(toy_dist, tmp_path, capsys) -> None:
    assert main(["train", "agent=toy", "env=corridor", "backend=cpu", "run.total_steps=256",
                 "--run-dir", str(tmp_path / "r")]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("toy on corridor (cpu, graph eager): 256 steps") and str(tmp_path / "r") in summary
    record = json.loads((tmp_path / "r" / "record.json").read_text())
    assert main(["eval", str(tmp_path / "r"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == record["final_eval"]
    assert main(["eval", str(tmp_path / "r"), "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2
    assert main(["eval", str(tmp_path / "r")]) == 0
    ev = record["final_eval"]
    assert capsys.readouterr().out.startswith(f"eval {ev['mean_return']:.1f} ± {ev['std_return']:.1f} over 4 episodes")


def test_plot_draws_several_runs(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    for seed in (0, 1):
        assert main(["train", "env=cue-corridor", "backend=cpu", "run.total_steps=4096", "run.progress=false",
                     "run.eval_episodes=0", f"run.seed={seed}", "--run-dir", str(tmp_path / f"r{seed}")]) == 0
    out = run_cli("plot", str(tmp_path / "r0"), str(tmp_path / "r1"), "-o", str(tmp_path / "c.png"))
    assert out.returncode == 0, out.stderr
    png = (tmp_path / "c.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    out = run_cli("plot", str(tmp_path / "r0"), "--metric", "no_such_metric", "-o", str(tmp_path / "d.png"))
    assert out.returncode == 2 and "no run has 'no_such_metric'" in out.stderr
    rows = [json.loads(x) for x in (tmp_path / "r0" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["time"] >= 0 for r in rows) and rows[-1]["time"] >= rows[0]["time"]


def test_a_command_of_an_uninstalled_distribution_names_it(monkeypatch, capsys) -> None:
    monkeypatch.setenv("NOEIRA_DISABLE_PLUGIN_AUTOLOAD", "1")  # as if noeira-robot were not installed
    from noeira.core.plugins import reset_plugin_manager

    reset_plugin_manager()
    try:
        assert main(["robot", "scan"]) == 2
        assert "comes with the noeira-robot distribution" in capsys.readouterr().err
    finally:
        reset_plugin_manager()
