"""``noeira verify-graph``: K iterations eagerly and K under the run's graph backend, from the same
seed, compared bit for bit after every iteration.

What is compared (each tensor hashed with BLAKE2 over its raw bytes, so bit-identical means
equal hashes): the agent's ``state_dict()`` (parameters, optimizer state), every tensor
reachable from the agent's attributes (modules' parameters and buffers, rollout and replay
buffers, containers and plain objects, a few levels deep), the states of its generators,
the env's ``get_state()`` and tensor attributes (observation and step buffers, episode
statistics, its generator), the learn metrics, and torch's default CPU / CUDA generators.
Attributes a class names in ``__scratch__`` (caches keyed by addresses, scratch buffers whose
contents are consumed within a step, in an order atomics choose) are not state and are skipped.

The reference for ``device`` is the same compiled step without recording (fused kernels
round differently from eager ones); for every other graph backend it is eager. When a
difference shows, eager is run once more to tell a recording problem from a step that is
not deterministic in the first place.
"""

from __future__ import annotations

import argparse
import hashlib
import types
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.core import contracts, distributed
from noeira.core.api import get_graph_backend
from noeira.core.config import RunConfig
from noeira.core.driver import choose_graph, process_backend, records_learn
from noeira.core.errors import UserError
from noeira.cuda.runs import Pieces, build, config_from_args

__all__ = ["Hashes", "cmd_verify_graph", "run_hashes", "snapshot"]

Hashes = dict[str, str]
_MAX_DEPTH = 5


def digest(t: Tensor) -> str:
    """A hash of a tensor's dtype, shape and raw bytes."""
    t = t.detach()
    h = hashlib.blake2b(f"{t.dtype}{tuple(t.shape)}".encode(), digest_size=16)
    if t.numel():
        raw = torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t).reshape(-1)  # plain strides
        raw = raw.view(torch.uint8) if raw.dtype != torch.bool else raw.to(torch.uint8)
        h.update(raw.cpu().numpy().tobytes())
    return h.hexdigest()


def _walk(obj: Any, name: str, out: dict[str, Tensor], seen: dict[int, Any], depth: int) -> None:
    """Collect the tensors reachable from ``obj`` into ``out`` by dotted name. ``seen`` maps
    id -> object and so keeps every walked object alive: a temporary (a ``state_dict()``)
    freed mid-walk would hand its id to the next new object, which would then be skipped."""
    if isinstance(obj, Tensor):
        if not obj.is_sparse and not obj.is_meta:
            out.setdefault(name, obj)
        return
    if isinstance(obj, torch.Generator):
        out.setdefault(name + ".rng", obj.get_state())
        return
    if depth > _MAX_DEPTH or id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return
    if isinstance(obj, (types.ModuleType, type, types.FunctionType, types.MethodType, torch.device, torch.dtype)):
        return
    seen[id(obj)] = obj
    if isinstance(obj, nn.Module):
        for k, v in obj.state_dict(keep_vars=True).items():
            _walk(v, f"{name}.{k}", out, seen, depth + 1)
    elif isinstance(obj, torch.optim.Optimizer):
        _walk(obj.state_dict(), f"{name}.state_dict", out, seen, depth + 1)
        return
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            _walk(v, f"{name}.{k}", out, seen, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _walk(v, f"{name}.{i}", out, seen, depth + 1)
    elif attrs.has(type(obj)):
        for f in attrs.fields(type(obj)):
            _walk(getattr(obj, f.name, None), f"{name}.{f.name}", out, seen, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, nn.Module):
        skip = ("backend", "owner", *getattr(type(obj), "__scratch__", ()))
        for k, v in vars(obj).items():
            if k not in skip:
                _walk(v, f"{name}.{k}", out, seen, depth + 1)


def snapshot(run: Pieces, metrics: Any = None) -> Hashes:
    """Hashes of everything a step can change (see the module docstring), by name."""
    found: dict[str, Tensor] = {}
    seen: dict[int, Any] = {id(run.env): run.env}
    _walk(run.agent.state_dict(), "agent.state_dict", found, seen, 0)
    _walk(run.agent, "agent", found, seen, 0)
    seen.pop(id(run.env))
    _walk(run.env.get_state(), "env.get_state()", found, seen, 0)  # one tensor, or a dict of them
    _walk(run.env, "env", found, seen, 0)
    if isinstance(metrics, Mapping):
        _walk(dict(metrics), "metrics", found, seen, 0)
    found["torch.cpu_rng"] = torch.get_rng_state()
    if run.backend.device.type == "cuda":
        found["torch.cuda_rng"] = torch.cuda.get_rng_state(run.backend.device)
    return {k: digest(v) for k, v in found.items()}


Wrap = Callable[[Callable[..., Any], Any], Callable[..., Any]] | None


def run_hashes(cfg: RunConfig, wrap: Wrap, iterations: int, graph_name: str = "eager") -> list[Hashes]:
    """Build the run as the driver does (under torchrun: this rank's part, the process group
    joined), run ``iterations`` iterations (steps wrapped by ``wrap(fn, backend)`` where the run
    records them), snapshot after each."""
    backend = process_backend(cfg.backend)
    run = build(cfg, graph_name, backend)
    try:
        collect = wrap(run.agent.collect, run.backend) if wrap and run.capture_env else run.agent.collect
        records = wrap and run.capture_train and records_learn(cfg, backend, graph_name)
        learn = wrap(run.agent.learn, run.backend) if records else run.agent.learn
        out = []
        for _ in range(iterations):
            collect(run.env)
            metrics = learn()
            out.append(snapshot(run, metrics))
        return out
    finally:
        run.close()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def first_difference(a: list[Hashes], b: list[Hashes]) -> tuple[int, list[str]] | None:
    """(iteration index, names that differ) of the first iteration where ``a`` and ``b`` differ;
    a name only one side has is marked ``(only in eager)`` / ``(only in graph)``."""
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        names = ([k for k in x if k in y and x[k] != y[k]] + [f"{k} (only in eager)" for k in x if k not in y]
                 + [f"{k} (only in graph)" for k in y if k not in x])
        if names:
            return i, names
    return None


def _short(name: str, width: int = 160) -> str:
    """``name`` cut to about ``width`` characters, its ``(only in ...)`` mark kept."""
    stem, mark, side = name.partition(" (only in")
    return name if len(stem) <= width else f"{stem[:width]}...{mark}{side}"


def cmd_verify_graph(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    k = args.iterations
    backend = process_backend(cfg.backend)
    rank, world_size = backend.rank, backend.world_size
    graph_name = choose_graph(cfg.graph, backend)
    graph = get_graph_backend(graph_name)
    warmup = contracts.graph_warmup(graph)
    records = graph.available(backend) and graph_name != "eager"
    if k < 1 or (records and k <= warmup):
        raise UserError(f"--iterations: must be more than graph {graph_name!r}'s {warmup} warm-up calls, got {k}")
    reference: Wrap = contracts.graph_reference(graph)
    ref_name = f"{graph_name} compiled, unrecorded" if reference else "eager"
    header = (f"verify-graph: {cfg.agent.name} on {cfg.env.name} ({backend.name}), {ref_name} vs graph {graph_name!r}, "
              f"{k} iterations")
    if records:
        header += f" (1-{warmup} warm-up, {warmup + 1} recorded, {warmup + 2}-{k} replayed)" if warmup else ""
        if cfg.graph.capture_train and not records_learn(cfg, backend, graph_name):
            header += f"; learn eager with {world_size} processes, as in training"
    else:
        header += f" (graph {graph_name!r} records nothing on {backend.name}: this compares two eager runs)"
    if world_size > 1:
        header += f"; each of {world_size} ranks checks its own part"
    if rank == 0:
        print(header, flush=True)
    ref = run_hashes(cfg, reference, k, "eager" if reference is None else graph_name)
    got = run_hashes(cfg, graph.wrap, k, graph_name)
    diff = first_difference(ref, got)
    verdicts = distributed.gather_objects(diff)  # every rank's, so all of them take the same path
    bad = [r for r, v in enumerate(verdicts) if v is not None]
    if not bad:
        if rank == 0:
            ranks = f" on all {world_size} ranks" if world_size > 1 else ""
            print(f"bit-identical{ranks}: {len(ref[-1])} tensors compared after each of {k} iterations")
        return 0
    # eager once more (on every rank: its learn holds collectives), to tell a recording problem
    # from a step that is not deterministic in the first place
    upto = max(v[0] for v in verdicts if v is not None) + 1
    again = run_hashes(cfg, reference, upto, "eager" if reference is None else graph_name)
    if rank == 0 and world_size > 1:
        print(f"DIFFERENT on rank(s) {', '.join(map(str, bad))} of {world_size}", flush=True)
    if diff is None:
        return 1
    i, names = diff
    tag = f"[rank {rank}] " if world_size > 1 else ""
    phase = ("warm-up" if i < warmup else "recorded" if i == warmup else "replayed") if records else "eager"
    lines = [f"{tag}DIFFERENT at iteration {i + 1} ({phase}): {len(names)} of {len(ref[i])} tensors differ, first:"]
    lines += [f"  {_short(n)}" for n in names[:10]]
    unstable = [n for n in names if again[i].get(n.split(" (only in")[0]) != ref[i].get(n.split(" (only in")[0])]
    if unstable:
        lines.append(f"note: {len(unstable)} of these also differ between two {ref_name} runs ({unstable[0]} ...): the "
                     "step is not deterministic by itself (atomics, non-deterministic kernels); see "
                     "torch.use_deterministic_algorithms")
    print("\n".join(lines), flush=True)
    return 1
