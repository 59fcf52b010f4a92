"""Start-up stays short (issue #18): what each command imports, checked in fresh processes, and
the entry points read once per process. No timings here: ``benchmarks/startup.py`` measures them."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noeira.core import registry
from noeira.core.plugins import reset_plugin_manager

WATCHED = ("torch", "torch._dynamo", "sympy", "torch.distributed.fsdp", "rich", "stevedore", "cattrs")

CHILD = f"""
import json, sys
from noeira.core.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as e:  # argparse's --help
    code = e.code or 0
with open(sys.argv[1], "w") as f:
    json.dump({{"code": code, "modules": sorted(m for m in {WATCHED!r} if m in sys.modules)}}, f)
"""


def imported(tmp_path: Path, *args: str) -> set[str]:
    """The watched modules that ``noeira ARGS`` imports, run in a fresh process (exit code 0)."""
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), *args], capture_output=True, text=True,
                          env=os.environ, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["code"] == 0
    return set(result["modules"])


@pytest.mark.parametrize("args", [["--help"], ["list"], ["list", "--json"]])
def test_help_and_list_do_not_import_torch(tmp_path: Path, args: list[str]) -> None:
    mods = imported(tmp_path, *args)
    assert "torch" not in mods
    assert "stevedore" not in mods  # loading a plugin needs it; listing them does not


def test_top_level_help_does_not_import_rich(tmp_path: Path) -> None:
    assert "rich" not in imported(tmp_path, "--help")


@pytest.mark.parametrize("args", [["train", "--help"], ["train", "agent=ppo", "env=cartpole", "--help"]])
def test_train_help_does_not_import_dynamo(tmp_path: Path, args: list[str]) -> None:
    mods = imported(tmp_path, *args)
    assert "torch" in mods  # the plugins' Config classes live beside their torch code
    assert not mods & {"torch._dynamo", "sympy", "torch.distributed.fsdp"}, mods


def test_training_imports_no_dynamo_sympy_or_fsdp(tmp_path: Path) -> None:
    """torch's optimizers import torch._dynamo (with sympy and FSDP) at their first call; noeira's don't
    until something compiles."""
    mods = imported(tmp_path, "train", "backend=cpu", "env=cartpole", "agent=ppo", "run.total_steps=256",
                    "env.num_envs=4", "run.eval_episodes=1", "run.progress=false", "--run-dir", str(tmp_path / "run"))
    assert not mods & {"torch._dynamo", "sympy", "torch.distributed.fsdp"}, mods
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["outcome"] == "completed" and record["eval_seconds"] >= 0


def test_entry_points_are_scanned_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = md.entry_points

    def counting(**params: object) -> object:
        calls.append(params)
        return real(**params)

    monkeypatch.setattr(md, "entry_points", counting)
    reset_plugin_manager()
    try:
        for kind in registry.KINDS:
            registry.names(kind)
        registry.list_plugins()
        registry.load("backends", "cpu")
        registry.dist_of("envs", "cartpole")
        registry.entry_points("noeira")
        assert len(calls) == 1, calls
        reset_plugin_manager()  # forgets the scan
        registry.names("envs")
        assert len(calls) == 2
    finally:
        reset_plugin_manager()


def test_a_distribution_added_to_a_path_directory_is_found_without_a_reset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan is kept while sys.path and its directories' mtimes stay as they were."""

    def write_dist(root: Path, name: str, entry_points: dict[str, dict[str, str]]) -> None:
        info = root / f"{name.replace('-', '_')}-0.0.1.dist-info"  # what pip leaves (conftest's write_dist)
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) for group, items in entry_points.items()))

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    os.utime(site, ns=(10**18, 10**18))  # an old mtime: the new .dist-info below changes it, whatever the clock
    try:
        assert "late-env" not in registry.names("envs")
        write_dist(site, "late-dist", {"noeira.envs": {"late-env": "nowhere:Env"}})
        assert "late-env" in registry.names("envs")
        assert registry.dist_of("envs", "late-env") == "late-dist"
    finally:
        monkeypatch.undo()
        reset_plugin_manager()
    assert "late-env" not in registry.names("envs")  # sys.path changed back
