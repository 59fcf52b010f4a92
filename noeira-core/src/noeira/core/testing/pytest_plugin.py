"""pytest plugin (entry point ``pytest11``): the conformance kit as fixtures, and the
``cuda`` marker, skipped when no CUDA device is present."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from noeira.core import testing


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("cuda") is not None:  # not `in item.keywords`: that holds tests/cuda too
            item.add_marker(skip)


@pytest.fixture
def check_env() -> Any:
    """:func:`noeira.core.testing.check_env`."""
    return testing.check_env


@pytest.fixture
def check_agent() -> Any:
    """:func:`noeira.core.testing.check_agent`."""
    return testing.check_agent


@pytest.fixture
def check_backend() -> Any:
    """:func:`noeira.core.testing.check_backend`."""
    return testing.check_backend


@pytest.fixture
def check_graph_backend() -> Any:
    """:func:`noeira.core.testing.check_graph_backend`."""
    return testing.check_graph_backend


@pytest.fixture
def check_env_capture() -> Any:
    """:func:`noeira.core.testing.check_env_capture`."""
    return testing.check_env_capture
