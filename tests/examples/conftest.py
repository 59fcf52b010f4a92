"""The example plugins of ``examples/plugins/`` (one distribution per kind), made visible the way
pip would: each one's ``src/`` on ``sys.path`` and a ``.dist-info`` holding the entry points its
own ``pyproject.toml`` declares, so a wrong table there fails these tests."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from noeira.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
KINDS = ("env", "agent", "network", "physics", "graph", "logger")


@pytest.fixture
def examples(install_dist: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    for kind in KINDS:
        root = EXAMPLES / kind
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
        monkeypatch.syspath_prepend(str(root / "src"))
        install_dist(project["name"], project["entry-points"], version=project["version"])


@pytest.fixture
def train(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[Path, dict[str, Any]]]:
    """``train(*overrides, steps=64, name="run")``: ``noeira train`` in this process (its CLI, exit
    code 0 asserted) for a few iterations on the CPU into ``tmp_path/name``; returns the run
    directory and its ``record.json``."""
    def run(*overrides: str, steps: int = 64, name: str = "run") -> tuple[Path, dict[str, Any]]:
        run_dir = tmp_path / name
        code = main(["train", "backend=cpu", "env.num_envs=4", f"run.total_steps={steps}", "run.eval_episodes=2",
                     "run.progress=false", "run.checkpoint_minutes=0", *overrides, "--run-dir", str(run_dir)])
        assert code == 0, capsys.readouterr().err
        return run_dir, json.loads((run_dir / "record.json").read_text())

    return run

