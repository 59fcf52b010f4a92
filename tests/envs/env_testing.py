"""What the env tests share: the reference data of the Craftax tests (Craftax-Classic and the full
game against the JAX reference), states read from them, a leaf-by-leaf comparison of states, and
the CUDA check that an env's step makes no host sync and records as a CUDA graph. The test modules
import it by name (pytest puts tests/envs on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch


def load_ref(path: Path) -> dict[str, np.ndarray]:
    """Every array of a reference fixture (``tests/envs/data/*.npz``), read into memory."""
    with np.load(path) as f:
        return dict(f)


def on_device(name: str) -> str:
    """``name``, skipping the test where it is cuda and there is no CUDA device."""
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return name


def ref_states(ref: dict[str, np.ndarray], prefix: str, fields: Iterable[str], device: str = "cpu") -> dict[str, torch.Tensor]:
    """The states stored under ``prefix`` (``f"{prefix}{leaf}"`` for each leaf of ``fields``)."""
    return {k: torch.as_tensor(ref[f"{prefix}{k}"], device=device) for k in fields}


def mismatch(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    """Key -> the first few rows where ``got`` and ``want`` differ (dtypes aside)."""
    out = {}
    for k, w in want.items():
        g = got[k].to(w.dtype).cpu()
        w = w.cpu()
        bad = (g != w).reshape(g.shape[0], -1).any(1)
        if bad.any():
            out[k] = bad.nonzero().squeeze(1)[:5].tolist()
    return out


def reference_leaves(states: object, fields: Iterable[str]) -> dict[str, torch.Tensor]:
    """The leaves of a live reference state (a JAX pytree) by their export names: ``"zombies.mask"``
    is ``states.zombies.mask``."""
    leaves: dict[str, torch.Tensor] = {}
    for name in fields:
        obj = states
        for part in name.split("."):
            obj = getattr(obj, part)
        leaves[name] = torch.as_tensor(np.asarray(obj))
    return leaves


def record_step(env: Any, action: torch.Tensor) -> torch.cuda.CUDAGraph:
    """On CUDA: checks that ``env.step(action)`` makes no host sync (three steps with syncs raising),
    then records one step as a CUDA graph, the env's generator registered, and returns it. The env
    has taken four steps (the last a warm-up on a side stream, as ``torch.cuda.graph`` wants); the
    recorded step has not run."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            env.step(action)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        env.step(action)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(env.generator)
    with torch.cuda.graph(graph):
        env.step(action)
    return graph
