"""Find, on the CPU, the work in a step that a CUDA-graph recording cannot hold.

A recording (``torch.cuda.graph``) fails on a host-to-device copy from pageable memory
(``Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is
pinned``) and on anything that waits for the device (``.item()``, ``nonzero``). Both are
invisible when the step runs on the CPU, where every tensor is a host tensor: ::

    from noeira.core.testing.capture import find_capture_hazards

    hazards = find_capture_hazards(lambda: env.step(action))
    for h in hazards:
        print(h)   # kind, what, and the Python stack of the call site

While the block runs, a ``TorchFunctionMode`` sees each torch call as the code wrote it and a
``TorchDispatchMode`` sees each aten op it becomes. What would copy host data to the device on
CUDA (each verified against what torch 2.13 dispatches):

* a tensor made from Python or NumPy data (``torch.tensor(...)``, ``torch.as_tensor(list)``,
  ``x.new_tensor(...)``, ``torch.from_numpy``): ``aten.lift_fresh``, made on the host and then
  copied to the device. ``x[i] = 1.0`` also lifts a 0-d host tensor on the CPU, but on CUDA torch
  fills it on the device: not reported;
* indexing with a Python sequence (``x[[1, 2]]``, ``x[:, (0, 3)]``, ``x[[True, False]]``): its
  indices are made on the host (``aten.lift_fresh``) and copied to the device;
* a factory (``torch.zeros``, ``arange``, ``full``, ``rand`` ...) called without ``device=``:
  a host tensor, to be copied (or to fail) on CUDA.

What syncs with the host: ``aten._local_scalar_dense`` (``.item()``, ``bool()`` / ``int()`` /
``float()`` of a tensor, a Python branch on a tensor), ``.tolist()``, ``.numpy()``, ``.cpu()``,
ops whose output size depends on the data (``nonzero``, ``masked_select``, ``unique``, a
boolean-mask index or assignment, ``repeat_interleave`` without ``output_size``).

What is fine and not reported: Python numbers in ops (``x + 1``, ``torch.where(m, 1.5, x)``,
``x.clamp(min=0)``, ``torch.full(..., device=d)``): on CUDA they are kernel arguments or are filled
on the device; ``F.one_hot(x, num_classes)``, whose range check reads the host on the CPU only.
``x.to(device)`` is not reported (on a CPU run the env's device is the CPU), ``x.to("cpu")`` is.

``noeira check-capture`` (noeira-cuda) checks a whole training iteration on the run's device
(shapes and Python values that change between calls, buffers allocated per call); this module is
the part that needs no GPU, for the conformance kit (:func:`noeira.core.testing.check_env_capture`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["HOST_METHODS", "INDEX_OPS", "SYNC_OPS", "CaptureHazards", "Hazard", "find_capture_hazards", "sync_reason"]

_TORCH_DIR = str(Path(torch.__file__).resolve().parent) + os.sep
_STDLIB = str(Path(sysconfig.get_paths()["stdlib"]).resolve()) + os.sep
STACK_DEPTH = 8
"""Frames kept per hazard (innermost first, torch's and the standard library's left out)."""

Frame = tuple[str, int, str]

SYNC_OPS = {
    "_local_scalar_dense": "aten._local_scalar_dense: a tensor value read on the host",
    "nonzero": "aten.nonzero: its output size depends on the data",
    "nonzero_static": None,  # fixed size: fine
    "masked_select": "aten.masked_select: its output size depends on the data",
    "_unique": "torch.unique: its output size depends on the data",
    "_unique2": "torch.unique: its output size depends on the data",
    "unique_dim": "torch.unique: its output size depends on the data",
    "unique_consecutive": "torch.unique_consecutive: its output size depends on the data",
    "unique_dim_consecutive": "torch.unique_consecutive: its output size depends on the data",
    "unique": "torch.unique: its output size depends on the data",
    "_assert_async": None,  # an assertion checked on the device: fine
}
"""aten ops that read the host, or whose output size depends on the data (name -> how a finding
reads; None: fine). ``repeat_interleave`` is one unless given ``output_size``. This module's CPU
detector and ``noeira check-capture`` (noeira-cuda) read this one table."""
_LIFT_OPS = {"lift_fresh", "lift_fresh_copy", "lift"}
INDEX_OPS = {"index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index", "_unsafe_index_put"}
HOST_METHODS = {
    "item": "Tensor.item(): a tensor value read on the host",
    "tolist": "Tensor.tolist(): the tensor read on the host",
    "numpy": "Tensor.numpy(): the tensor read on the host",
    "cpu": "Tensor.cpu(): a device-to-host copy",
    "__bool__": "bool(tensor): a Python branch on a tensor value",
    "__int__": "int(tensor): a tensor value read on the host",
    "__float__": "float(tensor): a tensor value read on the host",
    "__index__": "a tensor used as a Python index: its value read on the host",
}


def sync_reason(name: str, args: tuple, kwargs: dict) -> str | None:
    """Why the aten op ``name`` called with ``args``/``kwargs`` makes the host wait for the device
    (a value read, or an output size that depends on the data), or None. Both detectors, this
    module's and ``noeira check-capture``'s, report it in these words."""
    if SYNC_OPS.get(name):
        return SYNC_OPS[name]
    if name == "repeat_interleave" and kwargs.get("output_size") is None:
        return "repeat_interleave without output_size: its output size depends on the data"
    if name in INDEX_OPS:
        indices = tree_flatten(args[1])[0] if len(args) > 1 else []
        if any(isinstance(t, Tensor) and t.dtype in (torch.bool, torch.uint8) for t in indices):
            return (f"aten.{name} with a boolean mask: its size depends on the data "
                    "(use torch.where or masked_fill_)")
    return None


_FACTORIES = {"zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "rand", "randn",
              "randint", "randperm", "normal", "scalar_tensor", "empty_strided", "tril_indices",
              "triu_indices"}
_LITERALS = {"tensor", "as_tensor", "asarray", "new_tensor", "from_numpy", "frombuffer"}
_INDEXING = {"__getitem__", "__setitem__", "index_put", "index_put_"}


def frame_skipper(*own: str) -> Callable[[str], bool]:
    """A test on a frame's file name, cached per name: whether a report leaves the frame out, being
    torch's, the standard library's (not its site-packages), a frozen module's, or under one of
    ``own`` (the detector's own file or folder). This module's detector and ``noeira check-capture``
    (noeira-cuda) point at the user's code through it."""
    cache: dict[str, bool] = {}

    def skip(filename: str) -> bool:
        hit = cache.get(filename)
        if hit is None:
            path = filename
            with contextlib.suppress(OSError, ValueError):
                path = str(Path(filename).resolve())
            hit = (path.startswith((_TORCH_DIR, *own)) or filename.startswith("<frozen")
                   or (path.startswith(_STDLIB) and "-packages" not in path))
            cache[filename] = hit
        return hit

    return skip


_skip = frame_skipper(str(Path(__file__).resolve()))


def _stack() -> tuple[Frame, ...]:
    """The Python frames outside torch, this module and the standard library, innermost first."""
    out: list[Frame] = []
    f = sys._getframe(1)
    while f is not None and len(out) < STACK_DEPTH:
        name = f.f_code.co_filename
        if not _skip(name):
            out.append((name, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return tuple(out)


def short_path(path: str) -> str:
    """``path`` relative to the working directory where it lies below it, else as given."""
    with contextlib.suppress(ValueError):
        rel = os.path.relpath(path)
        if not rel.startswith(".." + os.sep):
            return rel
    return path


@attrs.define
class Hazard:
    """One call site whose work would break a CUDA-graph recording (or not be recorded)."""

    kind: str
    """``host-to-device`` (a host tensor copied to the device on CUDA), ``host tensor`` (made on
    the host, not on the device) or ``host sync`` (the host waits for a device value)."""
    what: str
    """The operation and why it breaks a recording."""
    stack: tuple[Frame, ...]
    """(file, line, function) of the caller's frames, innermost first."""
    count: int = 1

    @property
    def site(self) -> str:
        """``file:line in function`` of the innermost frame."""
        if not self.stack:
            return "<unknown>"
        file, line, fn = self.stack[0]
        return f"{short_path(file)}:{line} in {fn}"

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        frames = "".join(f"\n      {short_path(f)}:{ln} in {fn}" for f, ln, fn in self.stack[1:])
        return f"  {self.site}: {self.kind}: {self.what}{times}{frames}"


class CaptureHazards:
    """A context manager that records the :class:`Hazard` s of the torch work inside it (see the
    module docstring); ``hazards`` lists them in the order first seen, one per (kind, what, site)."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str, Frame | None], Hazard] = {}
        self._calls: list[str] = []  # the torch calls (function mode) being run, outermost first
        self._quiet = 0
        self._stack: contextlib.ExitStack | None = None

    @property
    def hazards(self) -> list[Hazard]:
        return list(self._found.values())

    def report(self, kind: str, what: str) -> None:
        stack = _stack()
        key = (kind, what, stack[0] if stack else None)
        if key in self._found:
            self._found[key].count += 1
        else:
            self._found[key] = Hazard(kind, what, stack)

    def __enter__(self) -> CaptureHazards:
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(_FunctionMode(self))
        self._stack.enter_context(_DispatchMode(self))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stack is not None
        self._stack.close()
        self._stack = None

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Work inside is not checked (the caller's own bookkeeping)."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1


class _FunctionMode(TorchFunctionMode):
    def __init__(self, det: CaptureHazards) -> None:
        super().__init__()
        self.det = det

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        det = self.det
        name = getattr(func, "__name__", "")
        if det._quiet:
            return func(*args, **kwargs)
        if name in HOST_METHODS:
            det.report("host sync", HOST_METHODS[name])
            with det.quiet():  # the _local_scalar_dense underneath is this same finding
                return func(*args, **kwargs)
        if name == "one_hot" and _num_classes(args, kwargs) >= 0:
            with det.quiet():  # its range check reads the host on the CPU only (CUDA checks on the device)
                return func(*args, **kwargs)
        if name == "to" and _to_host(args, kwargs):
            det.report("host sync", "Tensor.to('cpu'): a device-to-host copy")
        elif (name in _FACTORIES and kwargs.get("device") is None
              and torch.get_default_device().type == "cpu" and not _has_tensor(args)):
            det.report("host tensor", f"torch.{name}(...) without device=: made on the host, copied to the "
                                      "device (or failing) on CUDA")
        det._calls.append(name)
        try:
            return func(*args, **kwargs)
        finally:
            det._calls.pop()


def _num_classes(args: Any, kwargs: Any) -> int:
    n = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
    return n if isinstance(n, int) else -1


def _has_tensor(args: Any) -> bool:
    return any(isinstance(a, Tensor) for a in tree_flatten(args)[0])


def _to_host(args: Any, kwargs: Any) -> bool:
    """``Tensor.to("cpu")``: the CPU named as a string (``.to(self.device)`` on a CPU run is the
    env's own device, a no-op on CUDA, so a ``torch.device`` is not reported)."""
    dev = kwargs.get("device")
    if dev is None:
        dev = next((a for a in args[1:] if isinstance(a, str)), None)
    return isinstance(dev, str) and dev.split(":")[0] == "cpu"


class _DispatchMode(TorchDispatchMode):
    def __init__(self, det: CaptureHazards) -> None:
        super().__init__()
        self.det = det

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        det = self.det
        if det._quiet:
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        caller = det._calls[-1] if det._calls else ""
        if name in _LIFT_OPS:
            t = args[0]
            if caller in _INDEXING and t.dim() > 0:
                det.report("host-to-device", "indexing with a Python sequence: its indices are made on the host and "
                                             "copied to the device (keep them in a device tensor made once)")
            elif caller in _INDEXING:
                pass  # `x[i] = 1.0`: on CUDA torch fills the value on the device
            else:
                how = ("a tensor from Python or NumPy data" if not caller
                       else f"Tensor.{caller}(...)" if caller == "new_tensor" else f"torch.{caller}(...)")
                det.report("host-to-device", f"{how}: a tensor literal, made on the host and copied to the device "
                                             f"(make it once, on the device, outside the step) [{list(t.shape)} "
                                             f"{str(t.dtype).removeprefix('torch.')}]")
        elif (reason := sync_reason(name, args, kwargs)) is not None:
            det.report("host sync", reason)
        return func(*args, **kwargs)


def find_capture_hazards(fn: Callable[[], Any]) -> list[Hazard]:
    """Run ``fn()`` and return the hazards of its torch work (see :class:`CaptureHazards`)."""
    with CaptureHazards() as det:
        fn()
    return det.hazards


def format_hazards(hazards: list[Hazard]) -> str:
    """One block per hazard: its site, kind and what, then the outer frames."""
    return "\n".join(str(h) for h in hazards)
