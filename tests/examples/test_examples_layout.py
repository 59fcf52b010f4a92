"""Each example plugin is laid out as a third party's distribution should be: ``src/`` layout,
its own package (no ``noeira/__init__.py``), an unpinned dependency on noeira-core, entry points
in its pyproject.toml, and imports of noeira-core alone (other plugins are found by name)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"
KINDS = ("env", "agent", "network", "physics", "graph", "logger")
GROUPS = {"env": "noeira.envs", "agent": "noeira.agents", "network": "noeira.networks", "physics": "noeira.physics",
          "graph": "noeira.graph", "logger": "noeira"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_distribution_of_its_own(kind: str) -> None:
    root = EXAMPLES / kind
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert GROUPS[kind] in project["entry-points"], f"{kind}: no {GROUPS[kind]} entry point"
    assert "noeira-core" in project["dependencies"] and not any("==" in d for d in project["dependencies"])
    assert (root / "README.md").read_text().strip()
    packages = [p for p in (root / "src").iterdir() if p.is_dir() and not p.name.endswith(".egg-info")]
    assert len(packages) == 1 and packages[0].name != "noeira" and (packages[0] / "__init__.py").is_file()
    for py in packages[0].rglob("*.py"):
        for module in re.findall(r"^\s*(?:from|import)\s+(noeira\.\w+)", py.read_text(), re.M):
            assert module == "noeira.core", f"{py.relative_to(EXAMPLES)} imports {module}: only noeira.core"
