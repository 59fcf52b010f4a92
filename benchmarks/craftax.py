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

and, for every variant, the device memory per env (every tensor the env holds: state, result
buffers, the kernels' queues and scratch), the resets per step (episodes ended) and the share
of the step spent on them (the fresh worlds of the envs that ended and their observations,
timed apart on the last step's list of ended envs).

``--vs-craftax-cu PATH`` also runs craftax.cu's own env benchmark (PATH: its ``craftax_classic``
binary, or the folder holding it) at the same sizes in the same run: ``craftax_classic bench
--envs N --iters I --obs-mode 1 --reset-mode 1`` (compact observations, a fresh world for every
reset), and prints its steps/s and the ratio of the best ``triton/compact`` figure to it.

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
    python benchmarks/craftax.py --backend cuda --variants triton/compact --graphs stream --no-jax \
        --sizes 1048576,4194304 --vs-craftax-cu .anchors/craftaxcu/craftax_classic
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from _common import env_stepper, fmt_rate, graph_available, profile_steps, time_calls
from rich.console import Console
from rich.table import Table

from noeira.core import get_backend, make_env
from noeira.core.errors import NoeiraError

FULL_SIZES = [1024, 4096, 16384, 65536, 262144, 1 << 20]
QUICK_SIZES = [16, 256, 1024]
GRAPHS = ("eager", "stream", "device")


def _env_bytes(env: Any) -> int:
    """Bytes of device memory in the tensors the env holds (its attributes, and theirs one level
    down: the state dict, result buffers, the kernels' queues and scratch), each storage once."""
    seen: dict[int, int] = {}

    def add(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        elif isinstance(x, dict):
            for v in x.values():
                add(v)

    for obj in (env, *(v for v in vars(env).values() if hasattr(v, "__dict__") and not isinstance(v, torch.Tensor))):
        for v in vars(obj).values():
            add(v)
    return sum(seen.values())


def _reset_work(env: Any) -> Callable[[], None]:
    """The step's reset work on the last step's ended envs: fresh worlds (and, on the kernels,
    their observations)."""
    if env.kernel == "triton":
        k = env._triton

        def triton_reset() -> None:
            env._gen(env.s, k.done_queue, k.done_count, env._light0, key=env.world_key, episode=env.episode)
            k.observe_reset(env.s, env._obs_code)

        return triton_reset
    r = env._result
    done = r.terminated | r.truncated
    return lambda: env._reset_envs(done)


def bench_noeira(n: int, backend: str, graph: str, min_time: float, kernel: str = "torch",
                 obs: str = "symbolic", settle: int = 200) -> dict[str, float] | None:
    """Steps/s under graph backend ``graph`` (None where it is not available), bytes per env,
    resets per step and the share of the step spent on them."""
    be = get_backend(backend)
    if not graph_available(graph, be):
        return None
    env = make_env("craftax-classic", num_envs=n, backend=be, seed=0, kernel=kernel, obs=obs)
    gen = torch.Generator(device=be.device).manual_seed(0)
    action = env.action_space.sample(n, generator=gen)
    fn = env_stepper(env, action, graph, be)
    for _ in range(settle):  # past the first episodes' ends, into a steady mix of ages (random-policy episodes: ~200 steps)
        fn()
    env.pop_episode_stats()
    seconds, calls = time_calls(fn, be.synchronize, min_time, warmup=5 if graph == "eager" else 8)
    if getattr(fn, "failure", None) is not None:
        return None
    resets = float(env.pop_episode_stats()["count"]) / (calls + (5 if graph == "eager" else 8))
    reset_seconds, _ = time_calls(_reset_work(env), be.synchronize, min_time / 2, warmup=3)
    out = {"steps_per_s": n / seconds, "bytes_per_env": _env_bytes(env) / n, "resets_per_step": resets,
           "reset_share": reset_seconds / seconds}
    env.close()
    return out


def bench_craftax_cu(path: str, n: int, iters: int) -> tuple[float | None, str]:
    """craftax.cu's own env benchmark (compact observations, fresh worlds on reset) at ``n`` envs:
    (steps/s, its output line), or (None, why not)."""
    exe = Path(path)
    if exe.is_dir():
        exe = exe / "craftax_classic"
    cmd = [str(exe), "bench", "--envs", str(n), "--iters", str(iters), "--obs-mode", "1", "--reset-mode", "1"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{type(err).__name__}: {err}"
    m = re.search(r"NE=\s*(\d+).*?:\s*([\d.]+) M SPS.*", out.stdout)
    if out.returncode != 0 or m is None:
        text = (out.stderr or out.stdout).strip()
        return None, text.splitlines()[-1] if text else f"exit {out.returncode}"
    return float(m.group(2)) * 1e6, m.group(0).strip()


def profile_noeira(n: int, backend: str, kernel: str, obs: str, console: Console) -> None:
    """GPU time per kernel over 20 eager steps (after 5 warm-up steps)."""
    be = get_backend(backend)
    env = make_env("craftax-classic", num_envs=n, backend=be, seed=0, kernel=kernel, obs=obs)
    action = env.action_space.sample(n, generator=torch.Generator(device=be.device).manual_seed(0))
    profile_steps(lambda: env.step(action), be.synchronize, n, f"{kernel}/{obs}, {n:,} envs", console)
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

    seconds, _ = time_calls(run, lambda: jax.block_until_ready(box["obs"]), min_time, warmup=2)
    return n / seconds


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
    p.add_argument("--settle", type=int, default=None, help="untimed steps before timing, so episodes of all ages "
                   "run (default 200, about a random policy's episode; quick 20)")
    p.add_argument("--vs-craftax-cu", default=None, metavar="PATH", help="also run craftax.cu's env benchmark "
                   "(its craftax_classic binary, or its folder) at the same sizes")
    p.add_argument("--cu-iters", type=int, default=500, help="craftax.cu bench iterations (default 500)")
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else FULL_SIZES)
    min_time = a.min_time if a.min_time is not None else (0.3 if a.quick else 1.0)
    jax_max = a.jax_max if a.jax_max is not None else (1024 if a.quick else 16384)
    settle = a.settle if a.settle is not None else (20 if a.quick else 200)
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
                    res = bench_noeira(n, a.backend, graph, min_time, kernel, obs, settle)
                except (RuntimeError, NoeiraError, MemoryError) as err:
                    console.print(f"[yellow]n={n} {kernel}/{obs} {graph}: {type(err).__name__}: {str(err)[:160]}")
                    res = None
                if be.device.type == "cuda":
                    torch.cuda.empty_cache()
                row[f"{kernel}/{obs} {graph}"] = res["steps_per_s"] if res else None
                if res:
                    for key in ("bytes_per_env", "resets_per_step", "reset_share"):
                        row[f"{kernel}/{obs} {graph} {key}"] = res[key]
        row["jax"] = bench_jax(n, min_time) if not a.no_jax and n <= jax_max else None
        if a.vs_craftax_cu:
            row["craftax.cu"], line = bench_craftax_cu(a.vs_craftax_cu, n, a.cu_iters)
            console.print(f"  craftax.cu at {n:,} envs: {line}")
        rows.append(row)
        console.print(f"  n={n:<8d} " + "  ".join(f"{c}={fmt_rate(row.get(c))}" for c in columns if row.get(c) is not None))
        for c in columns[:-1]:
            if row.get(c) is not None:
                console.print(f"    {c}: {row[f'{c} bytes_per_env']:,.0f} bytes/env, {row[f'{c} resets_per_step']:,.1f} "
                              f"resets/step, {row[f'{c} reset_share']:.1%} of the step on resets")

    cols = [c for c in columns if any(r.get(c) is not None for r in rows)]
    table = Table(title=f"craftax-classic env steps/s (all envs) - {be.name} ({be.device_name()})")
    table.add_column("num_envs", justify="right")
    for c in cols:
        table.add_column(c, justify="right")
    kinds = [f"{k}/{o}" for k, o in variants]
    for kind in kinds:
        table.add_column(f"{kind} bytes/env", justify="right")
    table.add_column("resets/step", justify="right")
    table.add_column("reset share", justify="right")
    table.add_column("best / jax", justify="right")
    cu = a.vs_craftax_cu is not None
    if cu:
        table.add_column("craftax.cu", justify="right")
        table.add_column("triton/compact / craftax.cu", justify="right")
    for r in rows:
        best_col = max((c for c in cols if c != "jax" and r.get(c)), key=lambda c: r[c], default=None)
        best = r[best_col] if best_col else 0
        ratio = f"{best / r['jax']:.1f}x" if best and r.get("jax") else "-"
        size = [next((f"{r[f'{kind} {g} bytes_per_env']:,.0f}" for g in graphs if f"{kind} {g} bytes_per_env" in r), "-")
                for kind in kinds]
        resets = f"{r[f'{best_col} resets_per_step']:,.0f}" if best_col else "-"
        share = f"{r[f'{best_col} reset_share']:.1%}" if best_col else "-"
        extra = []
        if cu:
            ours = max((r.get(f"triton/compact {g}") or 0 for g in graphs), default=0)
            extra = [fmt_rate(r.get("craftax.cu")), f"{ours / r['craftax.cu']:.2f}x" if ours and r.get("craftax.cu") else "-"]
        table.add_row(f"{r['num_envs']:,}", *[fmt_rate(r.get(c)) for c in cols], *size, resets, share, ratio, *extra)
    console.print(table)
    console.print("resets/step and reset share: of the fastest column (the worlds generated for the envs that ended, "
                  "and their observations, timed apart on the last step's list)")
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
