"""Random states in checkpoints, across devices.

A generator's state is a CPU byte tensor whose layout depends on the device: 5,056 bytes of
Mersenne Twister on the CPU, 16 bytes of Philox seed and offset on CUDA. A state moves between
generators of the same kind (one GPU to another, CPU to CPU) exactly; between kinds it cannot
move, so :func:`restore_generator` re-seeds the generator from a hash of the saved state:
deterministically (the same checkpoint on the same kind of device draws the same numbers), but
not the stream the run had. Those re-seedings are reported in one log line per load
(:func:`reseeds`), naming every generator concerned.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

__all__ = ["global_rng_state", "reseeds", "restore_generator", "restore_global_rng"]

log = logging.getLogger("noeira")
_pending: list[list[str]] = []


def _kind(nbytes: int) -> str:
    return {5056: "cpu", 16: "cuda"}.get(nbytes, f"{nbytes}-byte")


def _derived_seed(state: Tensor) -> int:
    digest = hashlib.blake2b(state.numpy().tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def _note(what: str) -> None:
    if _pending:
        _pending[-1].append(what)
    else:
        log.warning("%s: cannot move to this device; re-seeded deterministically from the saved state", what)


def restore_generator(generator: torch.Generator, state: Any, what: str) -> bool:
    """Load ``state`` (a ``get_state()`` of some generator) into ``generator``; where it cannot
    move (another device type), seed ``generator`` from a hash of it and say so (see the module
    docstring). ``what`` names the generator for that line. Returns whether the state moved."""
    saved = torch.as_tensor(state).detach().to("cpu", torch.uint8).contiguous()
    if saved.numel() == generator.get_state().numel():
        try:
            generator.set_state(saved)
            return True
        except RuntimeError:  # same size, other layout: re-seed below
            pass
    generator.manual_seed(_derived_seed(saved))
    _note(f"{what} ({_kind(saved.numel())} -> {generator.device.type})")
    return False


def global_rng_state(device: torch.device) -> dict[str, Tensor]:
    """torch's default generators that a run on ``device`` draws from: the CPU's, and the device's own."""
    out = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        out["cuda"] = torch.cuda.get_rng_state(device)
    return out


def restore_global_rng(state: dict[str, Tensor], device: torch.device) -> None:
    """The inverse of :func:`global_rng_state` on ``device`` (moved or re-seeded as :func:`restore_generator`)."""
    if "cpu" in state:
        torch.set_rng_state(torch.as_tensor(state["cpu"]).to("cpu", torch.uint8))
    if device.type == "cuda":
        gen = torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
        saved = state.get("cuda", state.get("cpu"))
        restore_generator(gen, saved, "torch's default cuda generator")


@contextlib.contextmanager
def reseeds(context: str) -> Iterator[list[str]]:
    """Collect the generators :func:`restore_generator` re-seeds inside, and log them in one
    line at the end, beginning with ``context`` (e.g. ``run.resume=DIR``)."""
    _pending.append([])
    try:
        yield _pending[-1]
    finally:
        names = _pending.pop()
        if names:
            log.warning("%s: %d random state(s) cannot move to this device: %s; re-seeded deterministically from "
                        "the saved states", context, len(names), ", ".join(names))
