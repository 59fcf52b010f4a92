"""``noeira check-capture``: what in collect / learn would break or corrupt a CUDA-graph recording.

The step runs eagerly (after ``--warmup`` unchecked calls for lazy initialisation), twice,
under two torch modes that see every tensor operation:

* a ``TorchFunctionMode`` catches Tensor methods that leave the device: ``.item()``,
  ``.tolist()``, ``.numpy()``, ``.cpu()`` of a device tensor, ``bool()`` / ``int()`` /
  ``float()`` / ``index()`` of a tensor (a Python branch on a tensor value);
* a ``TorchDispatchMode`` sees each aten op: host syncs (``_local_scalar_dense``,
  ``nonzero``, ``masked_select``, boolean-mask indexing, device-to-host copies, and on CUDA
  whatever ``torch.cuda.set_sync_debug_mode("warn")`` flags), CPU tensors and host-to-device
  copies inside a CUDA step (work a recording does not replay, or values it freezes), new
  storages (allocations), and each op's signature: tensor shapes and the Python values
  passed (an int index, a float step size).

Then it compares the two checked calls op by op: a shape that changes is an allocation whose
size changes (a recording keeps the first), a Python value that changes is frozen by a
recording (keep it in a device tensor), a different op sequence is a Python branch on data.
Allocations made inside a call that are still alive after it (other than its outputs and
parameter gradients) are buffers allocated per call instead of once.

Each finding names the file and line of the innermost frame outside torch and noeira.cuda:
the agent's, env's or plugin's code. On the CPU, ``torch.optim`` reads step counts on the
host (``capturable=True`` is CUDA-only); those findings are left out with a note.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import linecache
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from noeira.core.testing.capture import HOST_METHODS, frame_skipper, short_path, sync_reason

__all__ = ["Finding", "Report", "check_steps", "cmd_check_capture"]

_OPTIM_DIR = str(Path(torch.__file__).resolve().parent / "optim") + os.sep
_skip = frame_skipper(str(Path(__file__).resolve().parent) + os.sep)  # torch's, the stdlib's and noeira.cuda's frames

_COPY_OPS = {"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize", "to"}
_MAX_FINDINGS_PER_DIFF = 10


Site = tuple[str, int, str]


def _site() -> tuple[Site | None, bool]:
    """(file, line, function) of the innermost frame outside torch / noeira.cuda / stdlib, and
    whether torch.optim lies between it and here."""
    f = sys._getframe(2)
    via_optim = False
    while f is not None:
        name = f.f_code.co_filename
        if not _skip(name):
            return (name, f.f_lineno, f.f_code.co_name), via_optim
        if name.startswith(_OPTIM_DIR):
            via_optim = True
        f = f.f_back
    return None, via_optim


@attrs.define
class Finding:
    """One operation that would break or corrupt a recording, where the user's code made it."""

    phase: str
    kind: str
    what: str
    file: str
    line: int
    function: str
    count: int = 1

    @property
    def code(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        code = f"\n      {self.code}" if self.code else ""
        return f"  {short_path(self.file)}:{self.line} in {self.function}: {self.phase}: {self.kind}: {self.what}{times}{code}"


def _sig(x: Any, det: Detector) -> Any:
    if isinstance(x, Tensor):
        if det.cuda and x.device.type == "cpu" and x.dim() == 0:
            # a CPU scalar in a CUDA op is read at launch: harmless while constant, so compare its value
            det.quiet += 1
            try:
                return ("cpu scalar", x.item(), x.dtype)
            finally:
                det.quiet -= 1
        return ("tensor", tuple(x.shape), x.dtype, x.device.type)
    if isinstance(x, torch.Generator):
        return ("generator", x.device.type)
    if isinstance(x, (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return x
    return type(x).__name__


def _host(t: Tensor) -> bool:
    """A CPU tensor that is not a scalar (scalars are compared by value instead)."""
    return t.device.type == "cpu" and t.dim() > 0


class Detector:
    """Collects findings while its modes are active (see the module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.findings: dict[tuple[Any, ...], Finding] = {}
        self.phase = ""
        self.quiet = 0
        self.trace: list[tuple[str, tuple[Any, ...], tuple[Site | None, bool], tuple[Any, ...]]] = []
        self.allocs: dict[int, tuple[tuple[Site | None, bool], str, tuple[int, ...], torch.dtype]] = {}
        self.backward_site: Site | None = None
        self.optim_skipped = 0

    def report(self, kind: str, what: str, located: tuple[Site | None, bool] | None = None) -> None:
        site, via_optim = located if located is not None else _site()
        if via_optim and not self.cuda:
            self.optim_skipped += 1
            return
        site = site or self.backward_site or ("<unknown>", 0, "?")
        key = (self.phase, kind, what, site[0], site[1])
        if key in self.findings:
            self.findings[key].count += 1
        else:
            self.findings[key] = Finding(self.phase, kind, what, site[0], site[1], site[2])

    @contextlib.contextmanager
    def watch(self, phase: str) -> Iterator[None]:
        """Detect inside the block; ``trace`` and ``allocs`` start afresh."""
        self.phase, self.trace, self.allocs = phase, [], {}
        prev = None
        if self.cuda:
            prev = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")
        try:
            with _FunctionMode(self), _DispatchMode(self):
                yield
        finally:
            if prev is not None:
                torch.cuda.set_sync_debug_mode(prev)


class _FunctionMode(TorchFunctionMode):
    def __init__(self, det: Detector) -> None:
        super().__init__()
        self.det = det

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        det = self.det
        name = getattr(func, "__name__", "")
        if det.quiet == 0:
            if name in ("backward",) or func is torch.autograd.backward:
                det.backward_site = _site()[0]
            what = HOST_METHODS.get(name) if name != "cpu" else None  # .cpu(): only of a device tensor
            host_copy = name == "cpu" and args and isinstance(args[0], Tensor) and args[0].device.type != "cpu"
            if what or host_copy:
                det.report("host sync", what or "Tensor.cpu() of a device tensor")
                det.quiet += 1
                try:
                    with warnings.catch_warnings():  # reported already; keep sync-debug warnings quiet
                        warnings.simplefilter("ignore")
                        return func(*args, **kwargs)
                finally:
                    det.quiet -= 1
        return func(*args, **kwargs)


class _DispatchMode(TorchDispatchMode):
    def __init__(self, det: Detector) -> None:
        super().__init__()
        self.det = det

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        det = self.det
        if det.quiet:
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        flat, _ = tree_flatten((args, kwargs))
        tensors = [t for t in flat if isinstance(t, Tensor)]
        located = _site()
        synced = False
        if (reason := sync_reason(name, args, kwargs)) is not None:
            det.report("host sync", reason, located)
            synced = True
        if name in _COPY_OPS:
            synced = self._copy(name, args, kwargs, tensors, located) or synced
        elif det.cuda and any(_host(t) for t in tensors):
            det.report("cpu tensor", f"aten.{name} with a CPU tensor in a CUDA step (read on the host: "
                                     "a recording freezes its value)", located)
        if det.cuda:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = func(*args, **kwargs)
            if not synced and any("synchroniz" in str(w.message) for w in caught):
                det.report("host sync", f"aten.{name} synchronizes with the host (torch sync debug mode)", located)
        else:
            out = func(*args, **kwargs)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, Tensor)]
        if det.cuda and not tensors and any(_host(t) for t in outs):
            det.report("cpu tensor", f"aten.{name} makes a CPU tensor in a CUDA step (host work is not recorded)",
                       located)
        det.trace.append((name, tuple(_sig(x, det) for x in flat), located, tuple(tuple(t.shape) for t in outs)))
        in_ptrs = {_ptr(t) for t in tensors}
        for t in outs:
            p = _ptr(t)
            if p and p not in in_ptrs:
                det.allocs[p] = (located, name, tuple(t.shape), t.dtype)
        return out

    def _copy(self, name: str, args: Any, kwargs: Any, tensors: list[Tensor], located: Any) -> bool:
        det = self.det
        if name == "copy_" or name.startswith("_copy_from"):
            dst, src = (args[0], args[1]) if name == "copy_" else (args[1], args[0])
            src_dev, dst_dev = src.device.type, dst.device.type
            if src_dev == "cpu" and src.dim() == 0:
                return False  # `x[i] = 1.0`: a CPU scalar, compared by value between calls
        else:
            if tensors and tensors[0].device.type == "cpu" and tensors[0].dim() == 0:
                return False
            src_dev = tensors[0].device.type if tensors else "cpu"
            dev = kwargs.get("device")
            dst_dev = torch.device(dev).type if dev is not None else src_dev
        if src_dev != "cpu" and dst_dev == "cpu":
            det.report("host sync", f"a device-to-host copy (aten.{name})", located)
            return True
        if det.cuda and src_dev == "cpu" and dst_dev != "cpu":
            det.report("cpu tensor", f"a host-to-device copy (aten.{name}) in a CUDA step: a recording replays "
                                     "the copy from the host memory it saw", located)
        elif det.cuda and src_dev == "cpu":
            det.report("cpu tensor", f"aten.{name} on CPU tensors in a CUDA step (host work is not recorded)", located)
        return False


def _ptr(t: Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except (RuntimeError, NotImplementedError):
        return 0


def _compare(det: Detector, phase: str, a: list[Any], b: list[Any]) -> None:
    """Report where two checked calls of a step differ: op, shapes, Python values."""
    det.phase = phase
    found = 0
    for (name_a, sig_a, _, out_a), (name_b, sig_b, located, out_b) in zip(a, b, strict=False):
        if found >= _MAX_FINDINGS_PER_DIFF:
            return
        if name_a != name_b or len(sig_a) != len(sig_b):
            det.report("control flow", f"two calls run different operations here (aten.{name_a} in one, aten.{name_b} "
                                       "in the next): a Python branch on data or on changing state", located)
            return
        if sig_a == sig_b:
            continue
        if out_a != out_b:
            det.report("allocation", f"aten.{name_b} makes {_shapes(out_a)} in one call and {_shapes(out_b)} in the next "
                                     "(a recording keeps the first shape)", located)
            found += 1
            continue
        for j, (x, y) in enumerate(zip(sig_a, sig_b, strict=True)):
            if x == y:
                continue
            if isinstance(x, tuple) and isinstance(y, tuple) and x[:1] == ("tensor",) == y[:1]:
                det.report("allocation", f"aten.{name_b}: argument {j} has shape {list(x[1])} in one call and "
                                         f"{list(y[1])} in the next (a recording keeps the first shape)", located)
            else:
                det.report("python value", f"aten.{name_b}: argument {j} is {x!r} in one call and {y!r} in the next "
                                           "(a recording freezes it; keep it in a device tensor)", located)
            found += 1
            break
    if len(a) != len(b):
        tail = b[len(a)][2] if len(b) > len(a) else a[len(b)][2]
        det.report("control flow", f"two calls run {len(a)} and {len(b)} operations: a Python branch on data or "
                                   "on changing state", tail)


def _shapes(shapes: tuple[Any, ...]) -> str:
    return ", ".join(str(list(x)) for x in shapes) or "nothing"


def _survivors(det: Detector, phase: str, out: Any) -> None:
    """Storages allocated in the last checked call that are still referenced from Python."""
    det.phase = phase
    if not det.allocs:
        return
    keep = {_ptr(t) for t in tree_flatten(out)[0] if isinstance(t, Tensor)}
    live: dict[int, Tensor] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            try:
                tensor = isinstance(o, Tensor)
            except ReferenceError:  # a weakref.proxy whose object is gone (the heap may hold them)
                continue
            if tensor:
                p = _ptr(o)
                if p:
                    live.setdefault(p, o)
                g = o.grad if o.requires_grad and o.is_leaf else None
                if g is not None:
                    keep.add(_ptr(g))
    for p, (located, op, shape, dtype) in det.allocs.items():
        if p in live and p not in keep:
            det.report("allocation", f"a new {list(shape)} {str(dtype).removeprefix('torch.')} tensor (aten.{op}) is kept "
                                     "after the step: allocate it once and write into it in place", located)


@attrs.define
class Report:
    """What :func:`check_steps` found, in order."""

    findings: list[Finding]
    checked: list[str]
    notes: list[str]

    @property
    def clean(self) -> bool:
        return not self.findings


def check_steps(steps: list[tuple[str, Callable[[], Any], bool]], device: torch.device, warmup: int = 1) -> Report:
    """Run ``steps`` (phase name, zero-argument callable, checked?) in turn: ``warmup`` unchecked
    rounds, then two rounds with the checked ones watched, and report what would break a
    recording of each checked step."""
    for _ in range(warmup):
        for _, fn, _ in steps:
            fn()
    det = Detector(device)
    traces: dict[str, list[list[Any]]] = {name: [] for name, _, checked in steps if checked}
    for round_ in range(2):
        for name, fn, checked in steps:
            if not checked:
                fn()
                continue
            with det.watch(name):
                out = fn()
            traces[name].append(det.trace)
            if round_ == 1:
                _survivors(det, name, out)
            del out
    for name, (a, b) in traces.items():
        _compare(det, name, a, b)
    notes = []
    if det.optim_skipped:
        notes.append(f"{det.optim_skipped} findings inside torch.optim were left out: on the CPU torch's optimizers are "
                     "not capturable (they read the step count on the host); on CUDA pass capturable=True and the "
                     "learning rate as a tensor, and check there")
    return Report(findings=list(det.findings.values()), checked=list(traces), notes=notes)


def cmd_check_capture(args: argparse.Namespace) -> int:
    from noeira.core import distributed
    from noeira.core.driver import choose_graph, process_backend, records_learn
    from noeira.core.errors import UserError
    from noeira.cuda.runs import build, config_from_args

    if args.warmup < 0:
        raise UserError(f"--warmup: must be >= 0, got {args.warmup}")
    cfg = config_from_args(args)
    backend = process_backend(cfg.backend)  # under torchrun: this rank's device, the process group joined
    run = build(cfg, choose_graph(cfg.graph, backend), backend)
    rank, world_size = backend.rank, backend.world_size
    notes = []
    if not run.capture_env:
        notes.append(f"collect not checked: it runs eagerly (env {cfg.env.name!r} capture_safe={run.env.capture_safe}, "
                     f"graph.capture_env={cfg.graph.capture_env})")
    capture_train = records_learn(cfg, backend, choose_graph(cfg.graph, backend))
    if not cfg.graph.capture_train:
        notes.append("learn not checked: graph.capture_train=false")
    elif not capture_train:
        notes.append(f"learn not checked: with {world_size} processes it runs eagerly (its NCCL all-reduce is not "
                     "recorded yet)")
    steps: list[tuple[str, Callable[[], Any], bool]] = [
        ("collect", lambda: run.agent.collect(run.env), run.capture_env),
        ("learn", run.agent.learn, capture_train),
    ]
    try:
        report = check_steps(steps, run.backend.device, warmup=args.warmup)
    finally:
        run.close()
    reports = distributed.gather_objects([str(f) for f in report.findings])  # rank 0 reports for the job
    if rank != 0:
        return 0 if not any(reports) else 1
    what = " and ".join(report.checked) or "nothing"
    ranks = f", on each of {world_size} ranks" if world_size > 1 else ""
    print(f"check-capture: {cfg.agent.name} on {cfg.env.name} ({run.backend.name}): {what}, "
          f"{args.warmup} warm-up call(s) then 2 checked calls each{ranks}")
    for n in notes + report.notes:
        print(f"note: {n}")
    findings = [(r, f) for r, found in enumerate(reports) for f in found]
    if not findings:
        print("clean: no host syncs, CPU tensors, changing shapes or values, or per-call buffers found")
        return 0
    print(f"{len(findings)} finding(s) that would break or corrupt a CUDA-graph recording:")
    for r, f in findings:
        print(f"[rank {r}] {f}" if world_size > 1 else f)
    return 1
