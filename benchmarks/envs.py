"""Env-only throughput: noeira's batched torch envs vs gymnasium's vector envs, side by side.

For each env and each number of envs it measures env steps per second (all envs together,
autoreset included, actions fixed per run so only the env is timed):

- ``noeira eager``: ``env.step(action)`` as written, on ``--backend`` (cpu or cuda);
- ``noeira stream`` / ``noeira device``: the same step recorded as a CUDA graph (``stream``)
  or compiled by inductor and recorded (``device``), when the ``noeira.graph`` plugins are
  installed and available for the backend (noeira-cuda, CUDA only);
- ``gym sync`` / ``gym async``: gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` of the
  reference env (same-step autoreset), at sizes where that is feasible (``--gym-max``,
  ``--gym-async-max``); ``gym vector``: gymnasium's own numpy-vectorised env where it ships
  one (``CartPoleVectorEnv``).

Examples::

    python benchmarks/envs.py --quick                        # small CPU sizes, a minute
    python benchmarks/envs.py --backend cuda --json envs-cuda.json
    python benchmarks/envs.py --envs cartpole --sizes 1,4096,4194304 --backend cuda
"""

from __future__ import annotations

import argparse
import json
import platform
from datetime import UTC, datetime
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from _common import env_stepper, fmt_rate, graph_available, time_calls
from _meta import commit
from gymnasium.vector import AutoresetMode
from rich.console import Console
from rich.table import Table

from noeira.core import get_backend, make_env
from noeira.core.errors import NoeiraError

GYM_IDS = {
    "cartpole": "CartPole-v1",
    "pendulum": "Pendulum-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
    "mountaincar-continuous": "MountainCarContinuous-v0",
}
FULL_SIZES = [1, 16, 256, 4096, 65536, 1 << 20, 1 << 22]
QUICK_SIZES = [1, 64, 1024, 16384]
COLUMNS = ["noeira eager", "noeira stream", "noeira device", "gym vector", "gym sync", "gym async"]


def bench_noeira(name: str, n: int, backend: str, graph: str, dtype: str, min_time: float) -> float | None:
    """Env steps/s of our env under graph backend ``graph`` (None when not available)."""
    be = get_backend(backend)
    if not graph_available(graph, be):
        return None
    env = make_env(name, num_envs=n, backend=be, seed=0, dtype=dtype)
    env.reset(seed=0)
    gen = torch.Generator(device=be.device).manual_seed(0)
    action = env.action_space.sample(n, generator=gen)
    fn = env_stepper(env, action, graph, be)
    seconds, _ = time_calls(fn, be.synchronize, min_time, warmup=5 if graph == "eager" else 8)
    env.close()
    if getattr(fn, "failure", None) is not None:  # `device` latched a failure and ran eagerly
        return None
    return n / seconds


def bench_gym(name: str, n: int, mode: str, min_time: float) -> float | None:
    """Env steps/s of gymnasium's vector env (``sync``, ``async`` or ``vector``: its own
    numpy-vectorised env), None where gymnasium has none."""
    gym_id = GYM_IDS[name]
    if mode == "vector":
        if gym.spec(gym_id).vector_entry_point is None:
            return None
        venv = gym.make_vec(gym_id, num_envs=n, vectorization_mode="vector_entry_point")
    else:
        venv = gym.make_vec(gym_id, num_envs=n, vectorization_mode=mode,
                            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    venv.reset(seed=0)
    venv.action_space.seed(0)
    action = venv.action_space.sample()
    seconds, _ = time_calls(lambda: venv.step(action), lambda: None, min_time, warmup=3)
    venv.close()
    return n / seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default=",".join(GYM_IDS), help="comma-separated env names")
    p.add_argument("--sizes", default=None, help="comma-separated numbers of envs (default 1..4M; --quick: small)")
    p.add_argument("--quick", action="store_true", help="small sizes and short timings (CPU-friendly)")
    p.add_argument("--backend", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--graphs", default="eager,stream,device", help="noeira graph backends to try")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--gym-max", type=int, default=None, help="largest size for gym sync (default 4096; quick 1024)")
    p.add_argument("--gym-vector-max", type=int, default=None,
                   help="largest size for gymnasium's numpy-vectorised env (default 1M; quick 16384)")
    p.add_argument("--gym-async-max", type=int, default=None, help="largest size for gym async (default 64; quick 16)")
    p.add_argument("--no-gym", action="store_true", help="skip gymnasium")
    p.add_argument("--min-time", type=float, default=None, help="seconds per measurement (default 1.0; quick 0.25)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)

    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else FULL_SIZES)
    min_time = a.min_time if a.min_time is not None else (0.25 if a.quick else 1.0)
    gym_max = a.gym_max if a.gym_max is not None else (1024 if a.quick else 4096)
    vector_max = a.gym_vector_max if a.gym_vector_max is not None else (16384 if a.quick else 1 << 20)
    async_max = a.gym_async_max if a.gym_async_max is not None else (16 if a.quick else 64)
    names = [s.strip() for s in a.envs.split(",") if s.strip()]
    graphs = [g.strip() for g in a.graphs.split(",") if g.strip()]
    be = get_backend(a.backend)
    console = Console(width=max(Console().width, 130))
    device = be.device_name()
    console.print(f"[bold]noeira envs benchmark[/] backend={be.name} ({device}) dtype={a.dtype} "
                  f"torch={torch.__version__} gymnasium={gym.__version__} threads={torch.get_num_threads()}")

    rows: list[dict[str, Any]] = []
    for name in names:
        for n in sizes:
            row: dict[str, Any] = {"env": name, "num_envs": n}
            for graph in graphs:
                try:
                    row[f"noeira {graph}"] = bench_noeira(name, n, a.backend, graph, a.dtype, min_time)
                except (RuntimeError, NoeiraError, MemoryError) as err:  # e.g. out of memory at 4M
                    console.print(f"[yellow]{name} n={n} {graph}: {type(err).__name__}: {str(err)[:120]}")
                    row[f"noeira {graph}"] = None
                    if be.device.type == "cuda":
                        torch.cuda.empty_cache()
            if not a.no_gym:
                for mode, limit in (("vector", vector_max), ("sync", gym_max), ("async", async_max)):
                    row[f"gym {mode}"] = bench_gym(name, n, mode, min_time) if n <= limit else None
            ours = [row.get(f"noeira {g}") for g in graphs]
            theirs = [row.get(f"gym {m}") for m in ("vector", "sync", "async")]
            best_ours = max((x for x in ours if x), default=None)
            best_theirs = max((x for x in theirs if x), default=None)
            row["speedup"] = best_ours / best_theirs if best_ours and best_theirs else None
            rows.append(row)
            console.print(f"  {name:24s} n={n:<8d} " + "  ".join(
                f"{c}={fmt_rate(row.get(c))}" for c in COLUMNS if c in row and row.get(c) is not None))

    cols = [c for c in COLUMNS if any(r.get(c) is not None for r in rows)]
    table = Table(title=f"env steps/s (all envs) - {be.name} ({device}), {a.dtype}")
    table.add_column("env", no_wrap=True)
    table.add_column("num_envs", justify="right")
    for c in cols:
        table.add_column(c, justify="right")
    table.add_column("best noeira / best gym", justify="right")
    for r in rows:
        table.add_row(r["env"], f"{r['num_envs']:,}", *[fmt_rate(r.get(c)) for c in cols],
                      f"{r['speedup']:.1f}x" if r["speedup"] else "-")
    console.print(table)
    if a.json:
        meta = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "commit": commit(),
                "backend": be.name, "device": device, "dtype": a.dtype, "torch": torch.__version__,
                "gymnasium": gym.__version__, "numpy": np.__version__, "platform": platform.platform(),
                "min_time": min_time}
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        console.print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
