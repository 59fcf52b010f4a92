"""``profiled``: the loop's two phases run eagerly, each inside a named profiler range.

A graph backend (entry-point group ``noeira.graph``, chosen by ``graph=NAME``) decides how the
driver runs an agent's ``collect`` and ``learn``: ``eager`` calls them, ``stream`` records each
once as a CUDA graph and replays it. This one calls them as they are, each inside
``torch.profiler.record_function("noeira.collect")`` (``"noeira.learn"``), so a profiler trace
groups every op under the phase that ran it; and it counts the calls::

    import torch
    from noeira.core.driver import config_from_cli, train

    with torch.profiler.profile() as prof:
        train(config_from_cli(["graph=profiled", "run.total_steps=20000"]))
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=8))  # noeira.collect, noeira.learn

On CUDA, the same ranges become NVTX ranges for Nsight Systems under
``torch.autograd.profiler.emit_nvtx()``.

The contract: ``name``; ``available(backend)``; ``wrap(fn, backend)`` returning a callable that
takes ``fn``'s arguments and returns its results. The driver builds one instance per run
(``cls()``, no arguments) and wraps both phases on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from noeira.core import Backend

__all__ = ["ProfiledGraph"]


class ProfiledGraph:
    """See the module docstring."""

    name = "profiled"
    warmup = 0
    """Eager calls of a step before it is recorded (``noeira verify-graph`` reads it): none, as
    nothing is ever recorded."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        """Calls so far of each wrapped step, by its range's name (``noeira.collect``, ``noeira.learn``)."""

    def available(self, backend: Backend) -> bool:
        return True  # any device: nothing is recorded

    def wrap(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        label = f"noeira.{getattr(fn, '__name__', 'step')}"
        self.calls.setdefault(label, 0)

        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            self.calls[label] += 1
            with torch.profiler.record_function(label):
                return fn(*args, **kwargs)

        return step
