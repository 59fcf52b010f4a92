"""House rules of the repository: namespace package, dependency rule, packaging."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTS = sorted(p for p in ROOT.glob("noeira-*") if (p / "pyproject.toml").is_file())


def test_six_distributions() -> None:
    assert [d.name for d in DISTS] == ["noeira-agents", "noeira-core", "noeira-cuda", "noeira-envs",
                                       "noeira-physics", "noeira-robot"]


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: d.name)
def test_namespace_package_and_src_layout(dist: Path) -> None:
    assert not (dist / "src" / "noeira" / "__init__.py").exists(), "noeira must stay a PEP 420 namespace"
    assert (dist / "src" / "noeira" / dist.name.removeprefix("noeira-")).is_dir()


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: d.name)
def test_unpinned_dependencies_and_offline_backend(dist: Path) -> None:
    meta = tomllib.loads((dist / "pyproject.toml").read_text())
    assert meta["build-system"]["build-backend"] == "setuptools.build_meta"
    assert meta["project"]["requires-python"] == ">=3.11"
    for req in meta["project"]["dependencies"]:
        assert "==" not in req, f"{dist.name} pins {req}"
    if dist.name != "noeira-core":
        assert "noeira-core" in meta["project"]["dependencies"]


@pytest.mark.parametrize("dist", [d for d in DISTS if d.name != "noeira-core"], ids=lambda d: d.name)
def test_dependency_rule(dist: Path) -> None:
    me = dist.name.removeprefix("noeira-")
    others = {d.name.removeprefix("noeira-") for d in DISTS} - {me, "core"}
    pattern = re.compile(rf"^\s*(from|import)\s+noeira\.({'|'.join(others)})\b", re.M)
    for py in (dist / "src").rglob("*.py"):
        assert not pattern.search(py.read_text()), f"{py} imports a sibling distribution"


def test_core_imports_no_other_distribution() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+noeira\.(envs|agents|physics|cuda|robot)\b", re.M)
    for py in (ROOT / "noeira-core" / "src").rglob("*.py"):
        assert not pattern.search(py.read_text()), py


def test_robot_needs_only_core_and_pyserial() -> None:
    deps = tomllib.loads((ROOT / "noeira-robot" / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(re.split(r"[<>=!~ ]", d)[0] for d in deps) == ["noeira-core", "pyserial"]


def _core_imports() -> dict[str, set[str]]:
    """Module -> the core modules it imports (at the top, under TYPE_CHECKING or inside a function)."""
    root = ROOT / "noeira-core" / "src"
    mods = {".".join(py.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): py
            for py in (root / "noeira" / "core").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, py in mods.items():
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                names = [n for n in subs if n in mods]
                if len(names) < len(subs):  # names from the module itself
                    names.append(node.module)
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {n for n in names if n in mods and n != m}
    return graph


def test_core_has_no_import_cycle() -> None:
    """The core modules import one another in one direction (hookspecs names ``Run`` from
    rundir, not from the driver; loggers take ``hookimpl`` from hookspecs, not from plugins)."""
    graph = _core_imports()
    assert "noeira.core.driver" not in graph["noeira.core.hookspecs"]
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        if m in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        for n in sorted(graph[m]):
            visit(n, path + [m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])
