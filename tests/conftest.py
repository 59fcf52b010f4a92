"""Shared fixtures. ``toy_dist`` installs a throwaway distribution (a ``.dist-info`` folder on
``sys.path``) registering the test suite's own plugins — the same way pip would."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from noeira.core.plugins import reset_plugin_manager

TESTS = Path(__file__).resolve().parent

# Triton kernels (Craftax-Classic's fused step) run in Triton's interpreter where there is no
# GPU; the variable must be set before Triton is first imported.
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def write_dist(root: Path, name: str, entry_points: dict[str, dict[str, str]], version: str = "0.0.1",
               requires: list[str] | None = None) -> None:
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Summary: test plugins"]
    meta += [f"Requires-Dist: {r}" for r in requires or []]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    eps = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n"
                  for group, items in entry_points.items())
    (info / "entry_points.txt").write_text(eps)


@pytest.fixture
def install_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Path]]:
    """``install_dist(name, {group: {name: "module:attr"}})`` makes a distribution visible to
    importlib.metadata at once (also to subprocesses, through PYTHONPATH)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]))
    reset_plugin_manager()

    def install(name: str, entry_points: dict[str, dict[str, str]], **kw: object) -> Path:
        write_dist(site, name, entry_points, **kw)  # type: ignore[arg-type]
        reset_plugin_manager()
        return site

    yield install
    reset_plugin_manager()
    sys.modules.pop("toy_plugins", None)


@pytest.fixture
def toy_dist(install_dist: Callable[..., Path]) -> Path:
    """Registers agent ``toy`` and its recipe hook (tests/toy_plugins.py)."""
    return install_dist("toy-plugins", {"noeira.agents": {"toy": "toy_plugins:ToyAgent"},
                                        "noeira": {"toy-recipes": "toy_plugins"}})


@pytest.fixture
def backend_name() -> str:
    """The backend under test: ``$NOEIRA_TEST_BACKEND`` (set by ``nox -s tests``), else cpu."""
    name = os.environ.get("NOEIRA_TEST_BACKEND", "cpu")
    if name == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("NOEIRA_TEST_BACKEND=cuda but no CUDA device")
    return name


@pytest.fixture
def graph_name(backend_name: str) -> str:
    """The graph backend under test: ``$NOEIRA_GRAPH_BACKEND`` (set by ``nox -s tests``), else eager.
    Graphs record only on cuda; on cpu every graph backend runs eagerly."""
    return os.environ.get("NOEIRA_GRAPH_BACKEND", "eager") or "eager"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Small networks run fastest on one thread (and do not fight other processes): a test
    module asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
