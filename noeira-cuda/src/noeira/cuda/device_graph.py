"""The ``device`` graph backend: the step compiled by ``torch.compile`` (fused kernels), then
recorded as one CUDA graph by the ``stream`` machinery.

Why not ``torch.compile(mode="reduce-overhead")``? Its CUDA graphs (cudagraph trees) skip any
graph whose inputs are mutated unless they are module parameters or buffers, and an RL step
mutates everything it touches (env state, rollout/replay buffers, optimizer state): most of
the step would quietly run without a graph. They also keep their own memory pool per
compiled region and re-check guards on every call. So ``device`` compiles with inductor
*without* its CUDA graphs (``triton.cudagraphs=False``), which fuses the elementwise work of
the step, and records the whole compiled step - graph breaks and the Python between the
compiled pieces included - with stream capture after the warm-up calls that compile it. The
collect and learn graphs share one memory pool, as with ``stream``.

``fallback_random=True`` makes compiled code draw random numbers as eager torch does (same
generators, same values), so seeding means the same thing under every graph backend.

Failures: ``wrap`` raises :class:`~noeira.core.errors.UserError` off CUDA. At run time, the
first failure of a wrapped step (a compile error, a recording error) is latched: one warning
naming the step and the cause, then that step runs eagerly (uncompiled, unrecorded) for the
rest of the run. The failing call itself is re-run eagerly. ``NOEIRA_DEVICE_GRAPH=0``
compiles without recording.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from noeira.core.contracts import Backend
from noeira.core.errors import UserError
from noeira.cuda.stream import RECORD_ENV, RecordedStep, StreamGraph, recording_enabled, step_name

__all__ = ["DeviceGraph", "LatchedStep", "compile_step"]

log = logging.getLogger("noeira")

COMPILE_OPTIONS: dict[str, Any] = {"triton.cudagraphs": False, "fallback_random": True}


def compile_step(fn: Callable[..., Any], options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """``fn`` compiled by inductor with the ``device`` backend's options (no inductor CUDA graphs)."""
    return torch.compile(fn, dynamic=False, options={**COMPILE_OPTIONS, **(options or {})})


class LatchedStep:
    """Calls ``inner``; on its first exception warns once and calls ``fn`` (eager) from then on."""

    def __init__(self, fn: Callable[..., Any], inner: Callable[..., Any], what: str) -> None:
        self.fn, self.inner, self.what = fn, inner, what
        self.name = step_name(fn)
        self.failure: BaseException | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failure is None:
            try:
                return self.inner(*args, **kwargs)
            except Exception as err:
                self.failure = err
                cause = str(err).strip().splitlines()[0] if str(err).strip() else ""
                log.warning("graph 'device': %s %s failed (%s: %s); it runs eagerly for the rest of the run",
                            self.what, self.name, type(err).__name__, cause)
        return self.fn(*args, **kwargs)


def _graphs_compiled() -> int:
    """How many graphs dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class _CompiledStep(RecordedStep):
    """A recorded step whose warm-up and recording run the compiled function. Warm-up goes on
    (up to ``MAX_EXTRA_WARMUP`` more calls) while a call still compiles something: compiling,
    and running a new kernel the first time (inductor may benchmark it), must not happen
    inside the recording, which would replay that work on every call."""

    MAX_EXTRA_WARMUP = 8

    def __init__(self, fn: Callable[..., Any], compiled: Callable[..., Any], backend: Backend, owner: StreamGraph,
                 warmup: int) -> None:
        super().__init__(compiled, backend, owner, warmup)
        self.name = step_name(fn)
        self._compiled_last_call = True

    def _warm(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        before = _graphs_compiled()
        out = super()._warm(args, kwargs)
        self._compiled_last_call = _graphs_compiled() != before
        return out

    def _settled(self) -> bool:
        if self._compiled_last_call and self.calls > self.warmup + self.MAX_EXTRA_WARMUP:
            log.info("graph 'device': %s still compiles after %d calls; recording it anyway", self.name, self.calls - 1)
            return True
        return not self._compiled_last_call


class DeviceGraph:
    """The ``device`` graph backend (opt-in). See the module docstring."""

    name = "device"

    def __init__(self, warmup: int = 3, options: dict[str, Any] | None = None) -> None:
        self.warmup = warmup
        """Eager (compiled) calls of each step before it is recorded; recompilations settle here."""
        self.options = options
        """Extra inductor options (``torch.compile(options=...)``)."""
        self._stream = StreamGraph(warmup=warmup)
        self._stream.name = self.name
        self.steps: list[LatchedStep] = []

    def available(self, backend: Backend) -> bool:
        return backend.device.type == "cuda" and torch.cuda.is_available()

    def wrap(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        if backend is None or not self.available(backend):
            where = "no backend was given" if backend is None else f"backend {backend.name!r} is not CUDA"
            raise UserError(f"graph 'device' needs a CUDA backend ({where}); use graph=stream, which runs "
                            "eagerly off CUDA, or graph=eager")
        compiled = compile_step(fn, self.options)
        if recording_enabled():
            inner: Callable[..., Any] = _CompiledStep(fn, compiled, backend, self._stream, self.warmup)
            what = "compiling or recording"
        else:
            self._stream._info_once("env", f"graph 'device': {RECORD_ENV}=0; steps are compiled, not recorded")
            inner, what = compiled, "compiling"
        step = LatchedStep(fn, inner, what)
        self.steps.append(step)
        return step

    def reference(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        """``fn`` compiled the same way but never recorded: what ``noeira verify-graph`` compares
        a recording with (fused kernels round differently from eager ones, so eager is no
        bit-exact reference for ``device``)."""
        return LatchedStep(fn, compile_step(fn, self.options), "compiling")
