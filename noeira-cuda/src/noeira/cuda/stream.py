"""The ``stream`` graph backend: record a step once with CUDA stream capture, then replay it.

::

    graph = StreamGraph()
    collect = graph.wrap(agent.collect, backend)    # the driver wraps both on one instance,
    learn = graph.wrap(agent.learn, backend)        # so the two graphs share one memory pool

Each wrapped step runs ``warmup`` times eagerly on a side stream (lazy initialisation such as
optimizer state, cuBLAS handles and the caching allocator's blocks happens there, outside the
recording), then is recorded once with :class:`torch.cuda.CUDAGraph` and replayed on every
later call. The call that records also replays, so every call does exactly one step's work:
the warm-up calls are real iterations, nothing is run twice or skipped.

What a recording assumes (the capture-safe rules of ARCHITECTURE.md; ``noeira check-capture``
finds the breaks and ``noeira verify-graph`` proves the result):

* static inputs: every call passes the same objects (the same env); a tensor argument that
  is a different tensor of the same shape is copied into the recorded one;
* static outputs: the step returns ``None`` or (a dict / tuple of) tensors; a replay returns
  the recorded tensors, valid until the next call of either wrapped step (the graphs share a
  pool: learn's outputs may lie where collect's temporaries go), so read or clone them first;
  for the same reason a step keeps no tensor it allocates (state is allocated once, outside);
* random numbers come from the default CUDA generator or from generators made with
  ``backend.generator(seed)``: those (``backend.generators``) are registered with each graph
  (``CUDAGraph.register_generator_state``, torch >= 2.5), so a replay draws the same numbers
  as eager code and advances the generators as eager code would.

Off CUDA (``backend.device.type != "cuda"``) ``wrap`` returns the function unchanged and logs
one info line. ``NOEIRA_DEVICE_GRAPH=0`` turns recording off the same way, without a code
change.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from noeira.core.contracts import Backend
from noeira.core.errors import CaptureError
from noeira.core.graph import no_garbage_collection

__all__ = ["RECORD_ENV", "RecordedStep", "StreamGraph", "recording_enabled"]

log = logging.getLogger("noeira")
RECORD_ENV = "NOEIRA_DEVICE_GRAPH"
GENERATOR_HINT = ("a random op drew from a CUDA generator this graph does not know: make generators with "
                  "`backend.generator(seed)` of the backend the step was wrapped with, and build env and agent "
                  "on that same backend object")
HINT = "run `noeira check-capture` with the same overrides to list host syncs, CPU tensors and allocations"


def recording_enabled() -> bool:
    """False when ``$NOEIRA_DEVICE_GRAPH`` is ``0`` (or false/no/off): record no graphs."""
    return os.environ.get(RECORD_ENV, "").strip().lower() not in ("0", "false", "no", "off")


def step_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _check_output(out: Any, name: str) -> None:
    values = out.values() if isinstance(out, Mapping) else out if isinstance(out, (tuple, list)) else [out]
    for v in values:
        if v is not None and not isinstance(v, Tensor):
            raise CaptureError(f"{name} returned a {type(v).__name__}; a recorded step returns None or tensors "
                               "(a dict or tuple of them), which a replay rewrites in place")


def _collect_garbage(max_passes: int = 4) -> None:
    """Collect until a pass finds nothing: finalizers run by one pass (a dropped CUDA graph's
    owner, a weakref callback) can leave garbage that only the next pass sees."""
    for _ in range(max_passes):
        if gc.collect() == 0:
            return


def _fresh(out: Any) -> Any:
    """The recorded outputs in a new container, so a caller's edits don't reach the next call."""
    if isinstance(out, Mapping):
        return dict(out)
    if isinstance(out, list):
        return list(out)
    return out


class RecordedStep:
    """A step function that warms up, records itself once, and replays thereafter.

    ``record(fn, args, kwargs)`` may be overridden by subclasses (the ``device`` backend
    records a compiled function). ``graph`` is the :class:`torch.cuda.CUDAGraph` once
    recorded; ``calls`` counts calls so far.
    """

    def __init__(self, fn: Callable[..., Any], backend: Backend, owner: StreamGraph, warmup: int) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.backend, self.owner, self.warmup = fn, backend, owner, max(int(warmup), 0)
        self.name = step_name(fn)
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self._args: tuple[Any, ...] = ()
        self._kwargs: dict[str, Any] = {}
        self._out: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.graph is not None:
            self._match_inputs(args, kwargs)
            self.graph.replay()
            return _fresh(self._out)
        if self.calls <= self.warmup or not self._settled():
            return self._warm(args, kwargs)
        return self._record(args, kwargs)

    def _settled(self) -> bool:
        """Ready to record after the warm-up calls (the compiled step waits for compiling to stop)."""
        return True

    # -- phases ----------------------------------------------------------------------------
    def _warm(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        _, side = self.owner.resources(self.backend.device)
        current = torch.cuda.current_stream(self.backend.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            out = self.fn(*args, **kwargs)
        current.wait_stream(side)
        return out

    def _record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        dev = self.backend.device
        pool, side = self.owner.resources(dev)
        graph = torch.cuda.CUDAGraph()
        gens = [g for g in self.backend.generators if g.device.type == "cuda"]
        if gens and hasattr(graph, "register_generator_state"):
            for g in gens:
                graph.register_generator_state(g)
        torch.cuda.synchronize(dev)
        # Garbage is collected now, and not while recording (as torch.cuda.graph collects
        # before it captures): a collection amid the capture frees whatever sits in reference
        # cycles, and destroying another CUDA graph, or freeing another library's CUDA memory
        # (Warp's arrays) outside that library's capture rules, invalidates the recording.
        _collect_garbage()
        with no_garbage_collection():
            out = self._capture(graph, pool, side, args, kwargs)
        _check_output(out, self.name)
        self.graph, self._out = graph, out
        self._args, self._kwargs = args, dict(kwargs)
        log.debug("graph %r: recorded %s after %d warm-up calls", self.owner.name, self.name, self.warmup)
        graph.replay()  # recording ran nothing: this call's work
        return _fresh(out)

    def _capture(self, graph: torch.cuda.CUDAGraph, pool: Any, side: torch.cuda.Stream, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        """Record ``fn`` into ``graph`` on the side stream; its outputs."""
        # capture_begin/capture_end by hand (not torch.cuda.graph): a failed capture must still
        # leave the side stream, or later eager work would run on it
        with torch.cuda.stream(side):
            graph.capture_begin(pool=pool)
            try:
                out = self.fn(*args, **kwargs)
            except BaseException as err:
                with contextlib.suppress(Exception):  # the capture is invalid already; `err` says why
                    graph.capture_end()
                hint = GENERATOR_HINT if "generator not in capture mode" in str(err) else HINT
                raise CaptureError(f"graph {self.owner.name!r}: recording {self.name} failed: "
                                   f"{type(err).__name__}: {_first_line(err)} ({hint})") from err
            try:
                graph.capture_end()
            except Exception as err:
                raise CaptureError(f"graph {self.owner.name!r}: recording {self.name} failed at the end of the "
                                   f"capture: {type(err).__name__}: {_first_line(err)} ({HINT})") from err
        return out

    def _match_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if len(args) != len(self._args) or kwargs.keys() != self._kwargs.keys():
            raise CaptureError(f"{self.name}: called with other arguments than it was recorded with")
        pairs = list(zip(args, self._args, strict=True)) + [(kwargs[k], self._kwargs[k]) for k in kwargs]
        for new, old in pairs:
            if new is old:
                continue
            if (isinstance(new, Tensor) and isinstance(old, Tensor) and new.shape == old.shape
                    and new.dtype == old.dtype and new.device == old.device):
                old.copy_(new)  # static input: the recording reads `old`
                continue
            raise CaptureError(f"{self.name}: recorded with {_describe(old)} but called with {_describe(new)}; "
                               "a recorded step must get the same objects every call")


def _describe(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"a tensor {tuple(x.shape)} {x.dtype} on {x.device}"
    return f"{type(x).__name__} at {id(x):#x}"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else ""


class StreamGraph:
    """The ``stream`` graph backend (the default on CUDA). See the module docstring.

    One instance holds one memory pool and one side stream for every step it wraps, so the
    collect and learn graphs of a run share memory (they are replayed in turn, never at once).
    """

    name = "stream"

    def __init__(self, warmup: int = 3) -> None:
        self.warmup = warmup
        """Eager calls of each step before it is recorded."""
        self.steps: list[RecordedStep] = []
        self._pool: Any = None
        self._side: torch.cuda.Stream | None = None
        self._said: set[str] = set()

    def available(self, backend: Backend) -> bool:
        return backend.device.type == "cuda" and torch.cuda.is_available()

    def wrap(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        if backend is None or not self.available(backend):
            where = "no backend given" if backend is None else f"backend {backend.name!r} is not CUDA"
            self._info_once("off", f"graph {self.name!r}: {where}; steps run eagerly")
            return fn
        if not recording_enabled():
            self._info_once("env", f"graph {self.name!r}: {RECORD_ENV}=0; steps run eagerly")
            return fn
        step = RecordedStep(fn, backend, self, self.warmup)
        self.steps.append(step)
        return step

    def resources(self, device: torch.device) -> tuple[Any, torch.cuda.Stream]:
        """The shared memory pool and side stream, made on first use."""
        if self._side is None:
            self._side = torch.cuda.Stream(device)
            self._pool = torch.cuda.graph_pool_handle()
        return self._pool, self._side

    def _info_once(self, key: str, msg: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.info(msg)
