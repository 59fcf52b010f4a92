"""The ``eager`` graph backend: runs the step as written, every time; and what recorders share."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any

from noeira.core.contracts import Backend

__all__ = ["EagerGraph", "no_garbage_collection"]


@contextlib.contextmanager
def no_garbage_collection() -> Iterator[None]:
    """The garbage collector off inside, as it was after. For code that runs while a CUDA
    graph records: a collection there may destroy another graph or free another library's
    memory, which a capture in global mode forbids."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class EagerGraph:
    """No recording: ``wrap(fn)`` returns ``fn``. Available everywhere."""

    name = "eager"

    def available(self, backend: Backend) -> bool:
        return True

    def wrap(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        return fn
