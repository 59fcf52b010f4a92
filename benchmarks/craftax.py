"""Craftax-Classic env-only throughput: noeira's batched torch env beside the JAX reference.

For each number of envs it measures env steps per second (all envs together, same-step
autoreset included, random actions drawn once per run so only the env is timed), for each
``--variants`` entry ``KERNEL/OBS`` (``env.kernel``: ``triton``, the fused Triton step, or
``torch``; ``env.obs``: ``symbolic``, 1,345 float32, or ``compact``, 148 bytes):

- ``eager``: ``env.step(action)`` as written, on ``--backend`` (cpu or cuda);
- ``stream`` / ``device``: the same step recorded as a CUDA graph (``stream``) or compiled by
  inductor and recorded (``device``), when noeira-cuda's graph plugins are installed and
  available for the backend;
- ``jax``: the reference (pip ``craftax``, ``CraftaxClassicSymbolicEnv``, jit + vmap, autoreset)
  on whatever device jax has here, at sizes up to ``--jax-max``;

and, for the eager torch step, the memory per env (state, observation buffers and reset pool,
from the tensors the env holds) and the share of the step spent in resets (the pool's refill
and draw, timed apart).

``--profile N`` also prints the GPU time per kernel of 20 eager steps at N envs (torch.profiler),
for each variant.

Published figures to compare with (not measured here): craftax.cu (Infatoshi/craftax.cu's
README), 3.12e8 env steps/s env-only at 1M envs on an RTX PRO 6000 Blackwell, with its compact
148-byte observation; the Craftax paper (Matthews et al., ICML 2024), Craftax-Classic symbolic
with JAX on one A100 at ~1e8 env steps/s with 1,024+ envs.

Examples::

    python benchmarks/craftax.py --quick                       # small CPU sizes, a minute or two
    python benchmarks/craftax.py --backend cuda --json craftax-cuda.json
    python benchmarks/craftax.py --backend cuda --sizes 65536,1048576 --no-jax
    python benchmarks/craftax.py --backend cuda --variants triton/compact --graphs stream --profile 262144
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from noeira.core import get_backend, get_graph_backend, make_env
from noeira.core.errors import NoeiraError, UnknownPluginError

FULL_SIZES = [1024, 4096, 16384, 65536, 262144, 1 << 20]
QUICK_SIZES = [16, 256, 1024]
GRAPHS = ("eager", "stream", "device")


def _time(step: Callable[[], Any], sync: Callable[[], None], min_time: float, warmup: int) -> float:
    """Seconds per call of ``step`` after ``warmup`` calls, timed over at least ``min_time``."""
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
            return elapsed / calls
        chunk = min(chunk * 2, 1000)


def _state_bytes(env: Any) -> int:
    tensors = list(env.s.values()) + list(env.pool.states.values())
    r = env._result
    tensors += [r.obs, r.final_obs, r.reward, r.terminated, r.truncated]
    return sum(t.numel() * t.element_size() for t in tensors)


def bench_noeira(n: int, backend: str, graph: str, min_time: float, kernel: str = "torch",
                 obs: str = "symbolic") -> dict[str, float] | None:
    """Steps/s under graph backend ``graph`` (None where it is not available); for eager also
    bytes per env and the share of the step in resets."""
    be = get_backend(backend)
    if graph != "eager":
        try:
            g = get_graph_backend(graph)
        except (UnknownPluginError, NoeiraError):
            return None
        if not g.available(be):
            return None
    env = make_env("craftax-classic", num_envs=n, backend=be, seed=0, kernel=kernel, obs=obs)
    gen = torch.Generator(device=be.device).manual_seed(0)
    action = env.action_space.sample(n, generator=gen)

    def step() -> None:
        env.step(action)

    fn = step if graph == "eager" else get_graph_backend(graph).wrap(step, be)
    seconds = _time(fn, be.synchronize, min_time, warmup=5 if graph == "eager" else 8)
    if getattr(fn, "failure", None) is not None:
        return None
    out = {"steps_per_s": n / seconds}
    if graph == "eager":
        out["bytes_per_env"] = _state_bytes(env) / n
        done = torch.zeros(n, dtype=torch.bool, device=be.device)
        done[:: max(1, n // 64)] = True  # ~1.5% of the envs end: a random policy's rate

        def reset() -> None:
            env.pool.refill_step()
            env.pool.draw(done, env.s)

        out["reset_share"] = _time(reset, be.synchronize, min_time / 2, warmup=3) / seconds
    env.close()
    return out


def profile_noeira(n: int, backend: str, kernel: str, obs: str, console: Console) -> None:
    """GPU time per kernel over 20 eager steps (after 5 warm-up steps)."""
    from torch.profiler import ProfilerActivity, profile

    be = get_backend(backend)
    env = make_env("craftax-classic", num_envs=n, backend=be, seed=0, kernel=kernel, obs=obs)
    action = env.action_space.sample(n, generator=torch.Generator(device=be.device).manual_seed(0))
    for _ in range(5):
        env.step(action)
    be.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            env.step(action)
        be.synchronize()
    table = Table(title=f"GPU time per step by kernel: {kernel}/{obs}, {n:,} envs (20 eager steps)")
    for c in ("kernel", "us/step", "calls/step", "share"):
        table.add_column(c, justify="left" if c == "kernel" else "right")
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    total = sum(e.device_time_total for e in events)
    for e in sorted(events, key=lambda e: -e.device_time_total)[:15]:
        table.add_row(e.key[:70], f"{e.device_time_total / 20:.1f}", f"{e.count / 20:.1f}",
                      f"{100 * e.device_time_total / total:.0f}%")
    table.add_row("total", f"{total / 20:.1f}", f"{sum(e.count for e in events) / 20:.0f}", "100%")
    console.print(table)
    console.print(f"  -> {n / (total / 20 * 1e-6):.3g} env steps/s if the GPU did nothing else")
    env.close()


def bench_jax(n: int, min_time: float) -> float | None:
    """Steps/s of the JAX reference (jit + vmap, autoreset), None without craftax."""
    here = Path(__file__).resolve().parent
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]  # this file is named craftax too
    try:
        import jax
        from craftax.craftax_classic.envs.craftax_symbolic_env import CraftaxClassicSymbolicEnv
    except ImportError:
        return None
    finally:
        sys.path[:] = saved
    env = CraftaxClassicSymbolicEnv()
    params = env.default_params
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    _, state = jax.vmap(env.reset, (0, None))(keys, params)
    action = jax.random.randint(jax.random.PRNGKey(1), (n,), 0, 17)
    step = jax.jit(jax.vmap(env.step, (0, 0, 0, None)))
    box = {"state": state, "keys": keys}

    def run() -> None:
        obs, box["state"], *_ = step(box["keys"], box["state"], action, params)
        box["obs"] = obs

    seconds = _time(run, lambda: jax.block_until_ready(box["obs"]), min_time, warmup=2)
    return n / seconds


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=None, help="comma-separated numbers of envs (default 1k..1M; --quick: small)")
    p.add_argument("--quick", action="store_true", help="small sizes and short timings (CPU-friendly)")
    p.add_argument("--backend", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--graphs", default="eager,stream,device", help="noeira graph backends to try")
    p.add_argument("--variants", default=None, help="comma-separated KERNEL/OBS (default: on cuda triton/compact, "
                   "triton/symbolic, torch/symbolic; on cpu torch/symbolic, torch/compact)")
    p.add_argument("--profile", type=int, default=None, metavar="N", help="also print GPU time per kernel at N envs")
    p.add_argument("--jax-max", type=int, default=None, help="largest size for the JAX reference (default 16384; quick 1024)")
    p.add_argument("--no-jax", action="store_true", help="skip the JAX reference")
    p.add_argument("--min-time", type=float, default=None, help="seconds per measurement (default 1.0; quick 0.3)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else FULL_SIZES)
    min_time = a.min_time if a.min_time is not None else (0.3 if a.quick else 1.0)
    jax_max = a.jax_max if a.jax_max is not None else (1024 if a.quick else 16384)
    graphs = [g.strip() for g in a.graphs.split(",") if g.strip()]
    be = get_backend(a.backend)
    console = Console(width=max(Console().width, 130))
    console.print(f"[bold]craftax-classic benchmark[/] backend={be.name} ({be.device_name()}) torch={torch.__version__} "
                  f"threads={torch.get_num_threads()}")

    default = "triton/compact,triton/symbolic,torch/symbolic" if be.device.type == "cuda" else "torch/symbolic,torch/compact"
    variants = [tuple(v.strip().split("/")) for v in (a.variants or default).split(",") if v.strip()]
    columns = [f"{k}/{o} {g}" for k, o in variants for g in graphs] + ["jax"]
    rows: list[dict[str, Any]] = []
    for n in sizes:
        row: dict[str, Any] = {"num_envs": n}
        for kernel, obs in variants:
            for graph in graphs:
                try:
                    res = bench_noeira(n, a.backend, graph, min_time, kernel, obs)
                except (RuntimeError, NoeiraError, MemoryError) as err:
                    console.print(f"[yellow]n={n} {kernel}/{obs} {graph}: {type(err).__name__}: {str(err)[:160]}")
                    res = None
                if be.device.type == "cuda":
                    torch.cuda.empty_cache()
                row[f"{kernel}/{obs} {graph}"] = res["steps_per_s"] if res else None
                if res and graph == "eager":
                    row[f"{kernel}/{obs} bytes_per_env"] = res["bytes_per_env"]
                    row[f"{kernel}/{obs} reset_share"] = res["reset_share"]
        row["jax"] = bench_jax(n, min_time) if not a.no_jax and n <= jax_max else None
        rows.append(row)
        console.print(f"  n={n:<8d} " + "  ".join(f"{c}={_fmt(row.get(c))}" for c in columns if row.get(c) is not None))

    cols = [c for c in columns if any(r.get(c) is not None for r in rows)]
    table = Table(title=f"craftax-classic env steps/s (all envs) - {be.name} ({be.device_name()})")
    table.add_column("num_envs", justify="right")
    for c in cols:
        table.add_column(c, justify="right")
    table.add_column("bytes/env", justify="right")
    table.add_column("best / jax", justify="right")
    for r in rows:
        best = max((r.get(c) or 0 for c in cols if c != "jax"), default=0)
        ratio = f"{best / r['jax']:.1f}x" if best and r.get("jax") else "-"
        size = next((r[f"{k}/{o} bytes_per_env"] for k, o in variants if f"{k}/{o} bytes_per_env" in r), 0)
        table.add_row(f"{r['num_envs']:,}", *[_fmt(r.get(c)) for c in cols], f"{size:,.0f}", ratio)
    console.print(table)
    console.print("published: craftax.cu 3.12e8 env steps/s env-only at 1M envs, compact obs (RTX PRO 6000 Blackwell, "
                  "its README); Craftax paper: Craftax-Classic symbolic JAX ~1e8 (A100)")
    if a.profile:
        for kernel, obs in variants:
            profile_noeira(a.profile, a.backend, kernel, obs, console)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": datetime.now(UTC).isoformat(), "backend": be.name, "device": be.device_name(),
                       "torch": torch.__version__, "platform": platform.platform(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
