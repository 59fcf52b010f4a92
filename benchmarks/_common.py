"""What the benchmark scripts share: timing a call, running an env's step under a graph backend and
printing rates (the env-throughput scripts); building PPO as the driver does and timing its
iterations (the PPO scripts); running ``noeira train`` as a user does (the data-parallel scripts).
Imported by them: they run as ``python benchmarks/NAME.py``, which
puts this folder on ``sys.path``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from noeira.core import get_backend, get_graph_backend, registry
from noeira.core.driver import build_env
from noeira.core.errors import NoeiraError, UnknownPluginError, UserError


def time_calls(step: Callable[[], Any], sync: Callable[[], None], min_time: float, warmup: int,
               max_chunk: int = 1000) -> tuple[float, int]:
    """(seconds per call of ``step``, timed calls) after ``warmup`` calls, timed over at least
    ``min_time``: calls in chunks that double up to ``max_chunk``, ``sync`` after each chunk."""
    for _ in range(warmup):
        step()
    sync()
    calls, chunk = 0, 1
    start = time.perf_counter()
    while True:
        for _ in range(chunk):
            step()
        calls += chunk
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls, calls
        chunk = min(chunk * 2, max_chunk)


def graph_available(graph: str, backend: Any) -> bool:
    """Whether graph backend ``graph`` is installed and available for ``backend`` (``eager`` always is)."""
    if graph == "eager":
        return True
    try:
        g = get_graph_backend(graph)
    except (UnknownPluginError, NoeiraError):
        return False
    return bool(g.available(backend))


def env_stepper(env: Any, action: Any, graph: str, backend: Any) -> Callable[[], Any]:
    """``env.step(action)`` as a call without arguments, under graph backend ``graph`` (``eager``:
    the step as written; a graph backend's wrapper may carry a ``failure`` when it fell back)."""
    def step() -> None:
        env.step(action)

    return step if graph == "eager" else get_graph_backend(graph).wrap(step, backend)


def profile_steps(step: Callable[[], Any], sync: Callable[[], None], n: int, title: str, console: Any,
                  steps: int = 20, warmup: int = 5, top: int = 15) -> None:
    """Print the time per step of each kernel over ``steps`` calls of ``step`` (after ``warmup``)
    with torch.profiler (GPU time with CUDA, else the CPU ops' own time), and the rate of ``n`` env
    steps a call if the device did nothing else."""
    import torch
    from rich.table import Table
    from torch.profiler import ProfilerActivity, profile

    gpu = torch.cuda.is_available()
    for _ in range(warmup):
        step()
    sync()
    with profile(activities=[ProfilerActivity.CUDA if gpu else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        sync()

    def spent(e: Any) -> float:
        return e.device_time_total if gpu else e.self_cpu_time_total

    table = Table(title=f"{'GPU' if gpu else 'CPU'} time per step by kernel: {title} ({steps} eager steps)")
    for c in ("kernel", "us/step", "calls/step", "share"):
        table.add_column(c, justify="left" if c == "kernel" else "right")
    events = [e for e in prof.key_averages() if spent(e) > 0]
    total = sum(spent(e) for e in events)
    for e in sorted(events, key=lambda e: -spent(e))[:top]:
        table.add_row(e.key[:70], f"{spent(e) / steps:.1f}", f"{e.count / steps:.1f}", f"{100 * spent(e) / total:.0f}%")
    table.add_row("total", f"{total / steps:.1f}", f"{sum(e.count for e in events) / steps:.0f}", "100%")
    console.print(table)
    if total:
        console.print(f"  -> {n / (total / steps * 1e-6):.3g} env steps/s if the device did nothing else")


def fmt_rate(x: float | None) -> str:
    """A rate with a G / M / k suffix (``-`` for none)."""
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def build_ppo(cfg: Any, seed: int) -> tuple[Any, Any, Any]:
    """(backend, env, agent) of a resolved PPO config, built as the driver builds them, seeded with ``seed``."""
    backend = get_backend(cfg.backend)
    backend.seed(seed)
    env = build_env(cfg, backend, seed=seed)
    agent = registry.load("agents", "ppo")(env.spec, backend, cfg.agent.config)
    agent.set_total_steps(cfg.run.total_steps)
    return backend, env, agent


def wrap_loop(graph_name: str, agent: Any, backend: Any, capture_env: bool) -> tuple[Any, Any]:
    """(collect, learn) of ``agent`` under graph backend ``graph_name`` (collect only with
    ``capture_env``: the env's ``capture_safe``, or the driver's ``Pieces.capture_env``); a
    UserError where that backend is not available."""
    graph = get_graph_backend(graph_name)
    if not graph.available(backend):
        raise UserError(f"graph {graph_name!r} is not available on {backend.name}")
    collect = graph.wrap(agent.collect, backend) if capture_env else agent.collect
    return collect, graph.wrap(agent.learn, backend)


def time_iterations(collect: Callable[[Any], Any], learn: Callable[[], Any], env: Any, backend: Any,
                    iterations: int) -> tuple[float, float]:
    """(seconds of 4 warm-up collect+learn iterations, on which a graph backend records; seconds of
    ``iterations`` more), each between two device synchronisations."""
    t0 = time.perf_counter()
    for _ in range(4):
        collect(env)
        learn()
    backend.synchronize()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(iterations):
        collect(env)
        learn()
    backend.synchronize()
    return warm, time.perf_counter() - t0


def noeira_train(args: list[str], run_dir: Path, overrides: list[str], label: str) -> tuple[dict[str, Any], float, bool]:
    """Runs ``noeira train *args --run-dir run_dir *overrides`` in a subprocess, as a user runs it:
    (its ``record.json``, the wall seconds start-up included, whether every rank's parameters ended
    identical). Exits with the end of its stderr, headed ``{label} failed``, where it fails."""
    cmd = [sys.executable, "-m", "noeira.core.cli", "train", *args, "--run-dir", str(run_dir), *overrides]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed:\n{proc.stderr[-2000:]}")
    rec = json.loads((run_dir / "record.json").read_text())
    return rec, wall, len(set(rec.get("param_hashes", ["-"]))) == 1
