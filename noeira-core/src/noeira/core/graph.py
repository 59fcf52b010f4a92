"""The ``eager`` graph backend: runs the step as written, every time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from noeira.core.contracts import Backend

__all__ = ["EagerGraph"]


class EagerGraph:
    """No recording: ``wrap(fn)`` returns ``fn``. Available everywhere."""

    name = "eager"

    def available(self, backend: Backend) -> bool:
        return True

    def wrap(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        return fn
