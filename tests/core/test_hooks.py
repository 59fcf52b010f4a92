"""Hooks: specs in one module, autoloading from the `noeira` group, and turning it off."""

from __future__ import annotations

import json
import subprocess
import sys

from noeira.core import hookspecs
from noeira.core.plugins import get_plugin_manager, reset_plugin_manager


def test_every_hookspec_is_documented() -> None:
    specs = [n for n in dir(hookspecs) if n.startswith("noeira_")]
    assert set(specs) >= {"noeira_configure", "noeira_run_started", "noeira_iteration", "noeira_checkpoint_saved",
                          "noeira_run_finished", "noeira_add_commands", "noeira_default_graph_backend"}
    for name in specs:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), name


def test_example_plugin_hook_is_autoloaded_and_writes_csv(toy_dist, tmp_path) -> None:
    from noeira.core.cli import main

    assert get_plugin_manager().get_plugin("acme-csv") is not None
    assert main(["train", "agent=toy", "env=corridor", "run.total_steps=256", "--run-dir", str(tmp_path / "r")]) == 0
    lines = (tmp_path / "r" / "metrics.csv").read_text().splitlines()
    assert lines[0].startswith("iteration,env_steps") and len(lines) == 3


def test_disable_autoload(monkeypatch) -> None:
    monkeypatch.setenv("NOEIRA_DISABLE_PLUGIN_AUTOLOAD", "1")
    reset_plugin_manager()
    try:
        pm = get_plugin_manager()
        assert pm.get_plugin("acme-csv") is None
        assert pm.get_plugin("noeira.core.loggers") is not None  # core's own stay
    finally:
        reset_plugin_manager()


def test_broken_hook_plugin_is_an_error_naming_the_distribution(install_dist) -> None:
    install_dist("bad-hooks", {"noeira": {"bad": "no_such_hooks_module"}})
    out = subprocess.run([sys.executable, "-m", "noeira.core.cli", "list"], capture_output=True, text=True,
                         check=False, timeout=120)
    assert out.returncode == 2
    assert "hook plugin 'bad' from distribution bad-hooks failed to load" in out.stderr


def test_register_and_unregister_a_hook_plugin(toy_dist, tmp_path) -> None:
    from toy_plugins import Recorder

    from noeira.core.driver import resolve, train

    rec = Recorder()
    pm = get_plugin_manager()
    pm.register(rec)
    cfg = resolve({"backend": "cpu", "agent": {"name": "toy"}, "env": {"name": "corridor"}, "run": {"total_steps": 128}})
    train(cfg, run_dir=tmp_path / "a")
    assert rec.calls[0] == "configure" and rec.calls[-1] == "run_finished:completed"
    pm.unregister(rec)
    n = len(rec.calls)
    train(cfg, run_dir=tmp_path / "b")
    assert len(rec.calls) == n
    assert json.loads((tmp_path / "b" / "record.json").read_text())["outcome"] == "completed"
