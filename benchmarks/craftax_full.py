"""Craftax (the full game) env-only throughput: noeira's batched torch env beside craftax.cu's
full game (``craftax_full_cuda bench``) in the same run, and optionally the JAX reference.

For each number of envs it measures env steps per second (all envs together, same-step autoreset
with a fresh world per episode included, random actions drawn once per run so only the env is
timed), for each ``--variants`` entry ``OBS`` (``symbolic``: 8,268 float32; ``compact``: 900
bytes) and each graph backend (``eager``; ``stream``: the step recorded as a CUDA graph), with
the memory per env (state, observation buffers, the reset queue) and whether any episode started
in a used world (``episode_world_reused``: it must stay 0).

``--vs-craftax-cu PATH``: also run craftax.cu's ``bench --envs N --iters I`` at the same sizes
and print the ratio. PATH is a built ``craftax_full_cuda`` binary, or craftax.cu's source folder
(``.anchors/craftaxcu``: a copy of ``../shared/anchors/craftaxcu`` inside the git-ignored
``.anchors``, so it travels to the GPU machine), copied to a scratch folder and built there with
``make craftax_full_cuda NVCC=<nvcc> NVCCFLAGS_FULL="-O3 -arch=sm_XY --expt-relaxed-constexpr
-fmad=false"`` (its Makefile's flags, for the GPU present). ``--cu-train ITERS`` also runs its
``train`` (8,192 envs, 128-step segments) and, beside it, noeira's PPO on the full game with the
env's recipe (``--ppo-graph``, default ``stream``; ``--ppo-set`` keys over it); ``--cu-recipe hook``
(the default) gives craftax.cu's ``train`` the same recipe's PPO settings as flags (epochs,
minibatches, learning rate and its annealing, gamma, lambda, clip, coefficients), ``own`` its
defaults. craftax.cu is a reference binary to measure
against (Apache-2.0, see its NOTICE); none of its code is used here.

Examples::

    python benchmarks/craftax_full.py --quick                     # small CPU sizes
    python benchmarks/craftax_full.py --backend cuda --sizes 65536,262144,524288 \\
        --vs-craftax-cu ../shared/anchors/craftaxcu --json craftax-full.json
    python benchmarks/craftax_full.py --backend cuda --obs-kernel 65536,262144 \\
        --obs-launch 16x4,8x4,32x4,32x8     # the compact observation: torch vs the Triton kernel
    python benchmarks/craftax_full.py --backend cuda --expand 8192,131072   # codes -> a bf16 input layer
    TRITON_INTERPRET=1 python benchmarks/craftax_full.py --launches 64 --env step_kernel=triton \
        --env worldgen_kernel=triton --env obs_kernel=triton --env resets=queue \
        --env queue_kernel=triton                                   # CUDA's launches, counted on a CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from _common import env_stepper, fmt_rate, graph_available, profile_steps, time_calls
from rich.console import Console
from rich.table import Table

from noeira.core import get_backend, make_env
from noeira.core.config import parse_overrides
from noeira.core.errors import NoeiraError

FULL_SIZES = [65536, 131072, 262144, 524288]
QUICK_SIZES = [16, 64]


def _env_bytes(env: Any) -> int:
    r = env._result
    tensors = [env.s.arena, r.obs, r.final_obs, r.reward, r.terminated, r.truncated]
    if env.queue is not None:
        tensors.append(env.queue.arena)
    return sum(t.numel() * t.element_size() for t in tensors)


def bench_noeira(n: int, backend: str, graph: str, min_time: float, obs: str, options: dict[str, Any] | None = None,
                 warmup: int = 0) -> dict[str, float] | None:
    """Steps/s under graph backend ``graph`` (None where it is not available), bytes per env, and
    the share of episodes that started in a used world. ``options``: more env settings;
    ``warmup``: steps before timing (at least 3 eager, 5 recorded)."""
    be = get_backend(backend)
    if not graph_available(graph, be):
        return None
    env = make_env("craftax", num_envs=n, backend=be, seed=0, obs=obs, **(options or {}))
    action = env.action_space.sample(n, generator=torch.Generator(device=be.device).manual_seed(0))
    fn = env_stepper(env, action, graph, be)
    seconds, _ = time_calls(fn, be.synchronize, min_time, warmup=max(warmup, 3 if graph == "eager" else 5),
                            max_chunk=200)
    if getattr(fn, "failure", None) is not None:
        return None
    stats = env.pop_episode_stats()
    count = float(stats["count"])
    out = {"steps_per_s": n / seconds, "bytes_per_env": _env_bytes(env) / n,
           "reused": float(stats["world_reused_sum"]) / count if count else 0.0}
    env.close()
    return out


def _nvcc() -> str | None:
    """nvcc on PATH, under ``$CUDA_HOME`` or in /usr/local/cuda (craftax.cu's Makefile defines its
    CUDA targets only when it finds nvcc)."""
    import os

    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return None


def _arch() -> str:
    """``sm_XY`` of the first CUDA device (sm_90 for an H100 / H200), sm_90 without one."""
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return "sm_90"


def craftax_cu_binary(path: str, console: Console) -> Path | None:
    """The craftax.cu full-game binary: ``path`` itself, or built from the sources in ``path``
    (craftax.cu's folder, e.g. ``.anchors/craftaxcu``, a copy of ``../shared/anchors/craftaxcu``
    carried to the GPU machine), copied to a scratch folder first."""
    p = Path(path)
    if p.is_file():
        return p
    if not (p / "Makefile").exists() or not (p / "craftax_full.cu").exists():
        console.print(f"[yellow]--vs-craftax-cu: {p} is neither a binary nor craftax.cu's source folder "
                      "(a Makefile and craftax_full.cu)")
        return None
    nvcc = _nvcc()
    if nvcc is None:
        console.print("[yellow]--vs-craftax-cu: no nvcc (PATH, $CUDA_HOME, /usr/local/cuda): craftax.cu not built")
        return None
    work = Path(tempfile.mkdtemp(prefix="craftaxcu-"))
    shutil.copytree(p, work / "src")
    t = time.time()
    flags = f"-O3 -arch={_arch()} --expt-relaxed-constexpr -fmad=false"  # its Makefile's, for this GPU
    res = subprocess.run(["make", "-C", str(work / "src"), "craftax_full_cuda", f"NVCC={nvcc}",
                          f"NVCCFLAGS_FULL={flags}"], capture_output=True, text=True)
    binary = work / "src" / "craftax_full_cuda"
    if res.returncode != 0 or not binary.is_file():
        console.print(f"[yellow]craftax.cu build failed: {(res.stderr or res.stdout)[-400:]}")
        return None
    console.print(f"built craftax.cu's craftax_full_cuda in {time.time() - t:.0f} s ({nvcc} {flags})")
    return binary


def train_noeira(iterations: int, graph: str, backend: str, console: Console,
                 agent: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """noeira's PPO on the full game with the env's own recipe (through the recipe hook: 8,192 envs and
    128-step segments on cuda; ``agent``: keys over it): training steps/s, env + policy + learning
    (``benchmarks/ppo_craftax.py``'s throughput phase: 4 warm-up iterations, then ``iterations``)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import ppo_craftax

    ppo_craftax.ENV = "craftax"
    be = get_backend(backend)
    cfg = ppo_craftax._config(be.name, 8192 if be.device.type == "cuda" else 32, 0, dict(agent or {}), int(1e9))
    try:
        out = ppo_craftax.throughput(cfg, graph, iterations)
    except (RuntimeError, NoeiraError) as err:
        console.print(f"[yellow]noeira PPO ({graph}): {type(err).__name__}: {str(err)[:200]}")
        return None
    a = cfg.agent.config
    return {**out, "graph": graph, "num_envs": cfg.num_envs, "horizon": a.horizon, "network": a.network,
            "hidden_sizes": list(a.hidden_sizes), "precision": a.precision, "obs": cfg.env.config.obs}


def bench_craftax_cu(binary: Path, n: int, iters: int) -> float | None:
    """craftax.cu's ``bench`` steps/s at ``n`` envs (its own SPS line), None if it failed."""
    res = subprocess.run([str(binary), "bench", "--envs", str(n), "--iters", str(iters)], capture_output=True, text=True)
    m = re.search(r"SPS=\s*([0-9.eE+]+)", res.stdout)
    return float(m.group(1)) if res.returncode == 0 and m else None


def recipe_flags() -> list[str]:
    """The env's shipped PPO recipe (the recipe hook's cuda values) as craftax.cu ``train`` flags: the
    same epochs, minibatches, learning rate and its annealing, gamma, GAE lambda, clip and loss
    coefficients (its network stays its own: two MinGRU layers of 256, fixed when it is built)."""
    from noeira.envs.craftax_full.recipes import ppo_recipe

    a = ppo_recipe("cuda", 8192)["agent"]
    flags = ["--epochs", a["update_epochs"], "--minibatches", a["num_minibatches"], "--lr", a["lr"], "--gamma",
             a["gamma"], "--gae-lambda", a["gae_lambda"], "--clip", a["clip_coef"], "--vf", a["vf_coef"], "--ent",
             a["ent_coef"]]
    return [str(x) for x in flags] + (["--lr-anneal"] if a["anneal_lr"] else [])


def train_craftax_cu(binary: Path, iters: int, console: Console, flags: list[str] | None = None) -> dict[str, Any] | None:
    """craftax.cu's full-game ``train`` with its README's command (8,192 envs, 128-step rollouts) and
    ``flags`` (its PPO settings; none: its defaults): its overall steps/s and the return per episode of
    its last report."""
    t = time.time()
    res = subprocess.run([str(binary), "train", "--envs", "8192", "--horizon", "128", "--iters", str(iters),
                          *(flags or [])], capture_output=True, text=True)
    done = re.search(r"train done: ([0-9.]+) s, ([0-9.]+) M SPS overall", res.stdout)
    rets = re.findall(r"ret/ep ([-+0-9.]+)", res.stdout)
    if res.returncode != 0 or not done:
        console.print(f"[yellow]craftax.cu train failed: {(res.stderr or res.stdout)[-300:]}")
        return None
    return {"seconds": float(done.group(1)), "steps_per_s": float(done.group(2)) * 1e6,
            "env_steps": 8192 * 128 * iters, "return": float(rets[-1]) if rets else float("nan"),
            "wall": time.time() - t, "flags": flags or []}


def _jax_reference() -> tuple[Any, Any] | None:
    """``(jax, CraftaxSymbolicEnv())``, None without craftax (this folder left off ``sys.path`` while
    importing: its ``craftax.py`` would shadow the package)."""
    here = Path(__file__).resolve().parent
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        import jax
        from craftax.craftax.envs.craftax_symbolic_env import CraftaxSymbolicEnv
    except ImportError:
        return None
    finally:
        sys.path[:] = saved
    return jax, CraftaxSymbolicEnv()


def bench_jax(n: int, min_time: float) -> float | None:
    """Steps/s of the JAX reference (jit + vmap, autoreset), None without craftax."""
    loaded = _jax_reference()
    if loaded is None:
        return None
    jax, env = loaded
    params = env.default_params
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    _, state = jax.vmap(env.reset, (0, None))(keys, params)
    action = jax.random.randint(jax.random.PRNGKey(1), (n,), 0, 43)
    step = jax.jit(jax.vmap(env.step, (0, 0, 0, None)))
    box = {"state": state}

    def run() -> None:
        obs, box["state"], *_ = step(keys, box["state"], action, params)
        box["obs"] = obs

    return n / time_calls(run, lambda: jax.block_until_ready(box["obs"]), min_time, warmup=2, max_chunk=200)[0]


def bench_worldgen(k: int, backend: str, min_time: float, kernel: bool | None = None,
                   worlds_only: bool = False) -> float:
    """Seconds per world of noeira's keyed world generation (the draws and the nine floors), ``k``
    worlds a call, as the queue's refill and on-demand resets call it; ``kernel``: the Triton
    kernels write the worlds (True), the torch ops (False), or the device's default (None);
    ``worlds_only``: ``world_from_draws`` alone, from draws made once."""
    from noeira.envs.craftax_full import worldgen

    be = get_backend(backend)
    key = torch.tensor([12345], dtype=torch.int64, device=be.device)
    stream = torch.zeros(k, dtype=torch.int64, device=be.device)
    serial = torch.arange(k, device=be.device)
    chunk = 2048 if be.device.type == "cuda" else 256
    if worlds_only:
        draws = worldgen.keyed_draws(key, stream, serial)
        seconds, _ = time_calls(lambda: worldgen.world_from_draws(draws, 0.5, kernel), be.synchronize, min_time,
                                warmup=1, max_chunk=200)
    else:
        seconds, _ = time_calls(lambda: worldgen.generate_keyed(key, stream, serial, 0.5, chunk=chunk, kernel=kernel),
                                be.synchronize, min_time, warmup=1, max_chunk=200)
    return seconds / k


def worldgen_kernels_agree(k: int, backend: str) -> bool:
    """Whether the Triton kernels and the torch ops make the same ``k`` keyed worlds, byte for byte."""
    from noeira.envs.craftax_full import worldgen

    be = get_backend(backend)
    key = torch.tensor([12345], dtype=torch.int64, device=be.device)
    stream, serial = torch.zeros(k, dtype=torch.int64, device=be.device), torch.arange(k, device=be.device)
    states = [worldgen.generate_keyed(key, stream, serial, 0.5, chunk=2048, kernel=kernel) for kernel in (False, True)]
    return torch.equal(states[0].arena, states[1].arena)


def bench_jax_worldgen(k: int, min_time: float) -> float | None:
    """Seconds per world of the JAX reference's ``reset`` (jit + vmap over ``k`` keys), None without craftax."""
    loaded = _jax_reference()
    if loaded is None:
        return None
    jax, env = loaded
    reset = jax.jit(jax.vmap(env.reset, (0, None)))
    box = {"keys": jax.random.split(jax.random.PRNGKey(0), k)}

    def run() -> None:
        box["out"] = reset(box["keys"], env.default_params)

    seconds, _ = time_calls(run, lambda: jax.block_until_ready(box["out"]), min_time, warmup=1, max_chunk=200)
    return seconds / k


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=None, help="comma-separated numbers of envs (default 64k..512k; --quick: small)")
    p.add_argument("--quick", action="store_true", help="small sizes and short timings (CPU-friendly)")
    p.add_argument("--backend", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--graphs", default="eager,stream", help="noeira graph backends to try")
    p.add_argument("--variants", default=None, help="comma-separated OBS (default: cuda compact,symbolic; cpu symbolic)")
    p.add_argument("--vs-craftax-cu", default=None, metavar="PATH", help="craftax.cu's binary or source folder")
    p.add_argument("--cu-iters", type=int, default=256, help="craftax.cu bench iterations per size")
    p.add_argument("--cu-train", type=int, default=0, metavar="ITERS",
                   help="also run craftax.cu's train for ITERS iterations of 8,192 x 128 steps, and noeira's PPO "
                        "on the full game (its recipe, --ppo-graph) beside it (0: no)")
    p.add_argument("--cu-recipe", default="hook", choices=("hook", "own"),
                   help="craftax.cu train's PPO settings: hook (the env's shipped recipe, as noeira's side runs it) "
                        "or own (its defaults: one epoch of one minibatch, lr 3e-4, gamma 0.99, ...)")
    p.add_argument("--ppo-set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="agent keys over the recipe for noeira's side of --cu-train (TOML values), e.g. "
                        "hidden_sizes=[256,256] (craftax.cu's two layers)")
    p.add_argument("--ppo-iters", type=int, default=6, help="timed PPO iterations of noeira's side of --cu-train")
    p.add_argument("--ppo-graph", default="stream", help="graph backend of noeira's side of --cu-train "
                   "(eager is tried when it fails)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="an env setting for noeira's envs (repeatable), e.g. queue_refill=64 or step_kernel=torch")
    p.add_argument("--warmup", type=int, default=0, help="env steps before timing (e.g. 200: past the first "
                   "deaths of a random policy, so resets are in the timing)")
    p.add_argument("--jax-max", type=int, default=0, help="largest size for the JAX reference (default 0: none)")
    p.add_argument("--min-time", type=float, default=None, help="seconds per measurement (default 2.0; quick 0.3)")
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    p.add_argument("--worldgen", default=None, metavar="K,K",
                   help="only time world generation: milliseconds per world, K worlds a call (with --jax-max: JAX's reset)")
    p.add_argument("--worldgen-kernel", default="auto", metavar="KIND,KIND",
                   help="what --worldgen times: auto (the device's default), torch (torch ops), triton (the Triton "
                        "kernels of triton_worldgen; on a CPU only under TRITON_INTERPRET=1); with torch and triton "
                        "also whether they make the same worlds")
    p.add_argument("--worldgen-warps", default=None, metavar="SxD,SxD",
                   help="warps of the Triton world kernels timed by --worldgen (smooth x dungeon floors; default: "
                        "triton_worldgen.LAUNCH's)")
    p.add_argument("--step-launch", default=None, metavar="BxW,BxW",
                   help="time the env with the rule kernels launched at each: worlds a program x warps (default: "
                        "triton_lanes' BLOCK x NUM_WARPS)")
    p.add_argument("--profile", default=None, metavar="N,N",
                   help="also print the GPU time per kernel of 20 eager steps at each N envs (torch.profiler; after "
                        "--warmup steps), for each variant, with the --env settings")
    p.add_argument("--obs-kernel", default=None, metavar="N,N",
                   help="only time the compact observation at N envs: the torch path (render.compact) against the "
                        "Triton kernel (triton_obs; on a CPU only under TRITON_INTERPRET=1)")
    p.add_argument("--obs-launch", default="8x4", metavar="ExW,ExW",
                   help="launches of the observation kernel timed by --obs-kernel: envs per program x warps")
    p.add_argument("--expand", default=None, metavar="B,B",
                   help="only time the expansion of B compact codes into a padded bfloat16 and a float32 input "
                        "(the Encoded space's decode_into, as PPO's input layer reads a rollout and a minibatch): "
                        "the torch path against the Triton kernel (CUDA), and check they agree")
    p.add_argument("--launches", type=int, default=0, metavar="N",
                   help="only count what one step of N envs launches (with the --env settings, after --warmup "
                        "steps): the torch ops that do work and the Triton kernels, by the function that calls them")
    a = p.parse_args(argv)
    options: dict[str, Any] = {}
    for item in a.env:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--env: expected KEY=VALUE, got {item!r}")
        options[key] = int(value) if value.lstrip("-").isdigit() else value
    if a.launches:
        return launches_main(a, options)
    if a.worldgen:
        return worldgen_main(a)
    if a.obs_kernel:
        return obs_kernel_main(a)
    if a.expand:
        return expand_main(a)
    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else FULL_SIZES)
    min_time = a.min_time if a.min_time is not None else (0.3 if a.quick else 2.0)
    graphs = [g.strip() for g in a.graphs.split(",") if g.strip()]
    be = get_backend(a.backend)
    console = Console(width=max(Console().width, 130))
    console.print(f"[bold]craftax (full game) benchmark[/] backend={be.name} ({be.device_name()}) torch={torch.__version__}"
                  + (f" env settings {options}" if options else ""))
    variants = [v.strip() for v in (a.variants or ("compact,symbolic" if be.device.type == "cuda" else "symbolic")).split(",")]
    binary = craftax_cu_binary(a.vs_craftax_cu, console) if a.vs_craftax_cu else None
    launches = [x.strip() for x in a.step_launch.split(",")] if a.step_launch else [""]
    columns = [f"{o} {g}" + (f" {lc}" if lc else "") for o in variants for g in graphs for lc in launches]
    columns += ["craftax.cu", "jax"]
    rows: list[dict[str, Any]] = []
    for n in sizes:
        row: dict[str, Any] = {"num_envs": n}
        for obs in variants:
            for graph in graphs:
                for lc in launches:
                    name = f"{obs} {graph}" + (f" {lc}" if lc else "")
                    try:
                        with step_launch(lc):
                            res = bench_noeira(n, a.backend, graph, min_time, obs, options, a.warmup)
                    except (RuntimeError, NoeiraError, MemoryError) as err:
                        console.print(f"[yellow]n={n} {name}: {type(err).__name__}: {str(err)[:160]}")
                        res = None
                    if be.device.type == "cuda":
                        torch.cuda.empty_cache()
                    row[name] = res["steps_per_s"] if res else None
                    if res:
                        row[f"{obs} bytes_per_env"] = res["bytes_per_env"]
                        row[f"{name} reused"] = res["reused"]
        row["craftax.cu"] = bench_craftax_cu(binary, n, a.cu_iters) if binary else None
        row["jax"] = bench_jax(n, min_time) if n <= a.jax_max else None
        rows.append(row)
        console.print(f"  n={n:<8d} " + "  ".join(f"{c}={fmt_rate(row.get(c))}" for c in columns if row.get(c) is not None))

    cols = [c for c in columns if any(r.get(c) is not None for r in rows)]
    table = Table(title=f"craftax (full game) env steps/s, all envs - {be.name} ({be.device_name()})")
    table.add_column("num_envs", justify="right")
    for c in cols:
        table.add_column(c, justify="right")
    table.add_column("bytes/env", justify="right")
    table.add_column("reused", justify="right")
    table.add_column("best / craftax.cu", justify="right")
    for r in rows:
        best = max((r.get(c) or 0 for c in cols if c not in ("jax", "craftax.cu")), default=0)
        ratio = f"{best / r['craftax.cu']:.2f}x" if best and r.get("craftax.cu") else "-"
        size = next((r[f"{o} bytes_per_env"] for o in variants if f"{o} bytes_per_env" in r), 0)
        reused = max((v for k, v in r.items() if k.endswith("reused")), default=0.0)
        table.add_row(f"{r['num_envs']:,}", *[fmt_rate(r.get(c)) for c in cols], f"{size:,.0f}", f"{reused:.3f}", ratio)
    console.print(table)
    if a.profile:
        for n in (int(x) for x in a.profile.split(",")):
            for obs in variants:
                for lc in launches:
                    with step_launch(lc):
                        profile_noeira(n, a.backend, obs, options, a.warmup, console, lc)
    flags = recipe_flags() if a.cu_recipe == "hook" else []
    cu_train = train_craftax_cu(binary, a.cu_train, console, flags) if binary and a.cu_train else None
    ppo = None
    if a.cu_train:
        agent = parse_overrides([f"agent.{kv}" for kv in a.ppo_set]).get("agent", {})
        ppo = train_noeira(a.ppo_iters, a.ppo_graph, a.backend, console, agent)
        if ppo is None and a.ppo_graph != "eager":
            ppo = train_noeira(a.ppo_iters, "eager", a.backend, console, agent)
    if cu_train or ppo:
        train = Table(title="PPO on the full game: training steps/s (env + policy + learning)")
        for c in ("run", "envs x horizon", "policy", "steps/s", "note"):
            train.add_column(c, justify="right" if c == "steps/s" else "left")
        if cu_train:
            recipe = "the env's recipe" if flags else "its defaults"
            train.add_row("craftax.cu train", "8,192 x 128", f"its own (2 MinGRU x 256), {recipe}",
                          fmt_rate(cu_train["steps_per_s"]),
                          f"{a.cu_train} iterations, {cu_train['seconds']:.1f} s, last return/episode "
                          f"{cu_train['return']:.2f}")
        if ppo:
            ratio = f"; {ppo['steps_per_second'] / cu_train['steps_per_s']:.2f}x craftax.cu" if cu_train else ""
            train.add_row(f"noeira ppo ({ppo['graph']})", f"{ppo['num_envs']:,} x {ppo['horizon']}",
                          f"{ppo['network']} {ppo['hidden_sizes']} {ppo['precision']}, {ppo['obs']} obs",
                          fmt_rate(ppo["steps_per_second"]),
                          f"{a.ppo_iters} iterations after 4 warm-up ({ppo['warmup_seconds']:.1f} s){ratio}")
        console.print(train)
    if a.json:
        sys.path.insert(0, str(Path(__file__).parent))
        from _meta import commit

        with open(a.json, "w") as f:
            json.dump({"date": datetime.now(UTC).isoformat(), "backend": be.name, "device": be.device_name(),
                       "torch": torch.__version__, "platform": platform.platform(), "commit": commit(),
                       "rows": rows, "craftax_cu_train": cu_train, "noeira_ppo": ppo}, f, indent=1)
    return 0


@contextlib.contextmanager
def step_launch(launch: str) -> Iterator[None]:
    """The rule kernels launched at ``launch`` (``BxW``: worlds a program x warps; empty: as they
    are) inside the block: ``triton_lanes.BLOCK`` and ``NUM_WARPS``, read at each launch."""
    if not launch:
        yield
        return
    from noeira.envs.craftax_full import triton_lanes

    default = triton_lanes.BLOCK, triton_lanes.NUM_WARPS
    triton_lanes.BLOCK, triton_lanes.NUM_WARPS = (int(v) for v in launch.split("x"))
    try:
        yield
    finally:
        triton_lanes.BLOCK, triton_lanes.NUM_WARPS = default


def profile_noeira(n: int, backend: str, obs: str, options: dict[str, Any], warmup: int, console: Console,
                   launch: str = "") -> None:
    """GPU time per kernel of 20 eager steps at ``n`` envs, after ``warmup`` steps (at least 5)."""
    be = get_backend(backend)
    env = make_env("craftax", num_envs=n, backend=be, seed=0, obs=obs, **options)
    action = env.action_space.sample(n, generator=torch.Generator(device=be.device).manual_seed(0))
    profile_steps(lambda: env.step(action), be.synchronize, n, f"{obs}, {n:,} envs, {options or 'defaults'}"
                  + (f", rules {launch}" if launch else ""),
                  console, warmup=max(warmup, 5))
    env.close()


def worldgen_main(a: argparse.Namespace) -> int:
    be = get_backend(a.backend)
    min_time = a.min_time if a.min_time is not None else 2.0
    console = Console(width=max(Console().width, 100))
    table = Table(title=f"craftax (full game) world generation, ms per world - {be.name} ({be.device_name()}), "
                        f"torch threads {torch.get_num_threads()}")
    kinds = a.worldgen_kernel.split(",")
    unknown = set(kinds) - {"auto", "torch", "triton"}
    if unknown:
        raise SystemExit(f"--worldgen-kernel: unknown {sorted(unknown)} (auto, torch, triton)")
    from noeira.envs.craftax_full import triton_worldgen

    default = triton_worldgen.LAUNCH.copy()
    warps = [tuple(int(v) for v in x.split("x")) for x in a.worldgen_warps.split(",")] if a.worldgen_warps else [
        (default["smooth_warps"], default["dungeon_warps"])]
    variants = [(f"{kind} {s}x{d}" if kind == "triton" else kind, kind, (s, d))
                for kind in kinds for s, d in (warps if kind == "triton" else warps[:1])]
    table.add_column("worlds a call", justify="right")
    for label, _, _ in variants:
        table.add_column(f"noeira {label}: keyed / worlds only", justify="right")
    table.add_column("JAX reset (jit, vmap)", justify="right")
    for k in (int(x) for x in a.worldgen.split(",")):
        cells = []
        for label, kind, (s, d) in variants:
            triton_worldgen.LAUNCH.update(smooth_warps=s, dungeon_warps=d)
            kernel = {"auto": None, "torch": False, "triton": True}[kind]
            keyed = bench_worldgen(k, a.backend, min_time, kernel)
            alone = bench_worldgen(k, a.backend, min_time, kernel, worlds_only=True)
            cells.append(f"{1e3 * keyed:.4f} / {1e3 * alone:.4f}")
            console.print(f"  k={k}: noeira {label} {1e3 * keyed:.4f} ms/world keyed, {1e3 * alone:.4f} worlds only")
        triton_worldgen.LAUNCH.update(default)
        ref = bench_jax_worldgen(k, min_time) if k <= a.jax_max else None
        table.add_row(f"{k:,}", *cells, "-" if ref is None else f"{1e3 * ref:.3f}")
    console.print(table)
    if {"torch", "triton"} <= set(kinds):
        k = min(int(x) for x in a.worldgen.split(","))
        console.print(f"  triton == torch (keyed worlds, k={k}, every byte): {worldgen_kernels_agree(k, a.backend)}")
    return 0


def obs_states(n: int, backend: str) -> Any:
    """``n`` states for the observation timings: the worlds of an env of up to 4,096 envs after 64
    random steps (mobs spawned, some envs on other floors), repeated to ``n`` rows."""
    from noeira.envs.craftax_full.state import state_of

    be = get_backend(backend)
    k = min(n, 4096)
    env = make_env("craftax", num_envs=k, backend=be, seed=0, obs="compact")
    g = torch.Generator(device=be.device).manual_seed(0)
    for _ in range(64):
        env.step(env.action_space.sample(k, generator=g))
    arena = env.s.arena.repeat(-(-n // k), 1)[:n].contiguous()
    env.close()
    return state_of(arena)


def _graphed(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` recorded as a CUDA graph (after a warm-up on a side stream): its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def time_obs(n: int, backend: str, min_time: float, kernel: Callable[..., None] | None,
             launches: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Seconds per call of the torch compact observation at ``n`` envs and of the Triton kernel
    under each launch (envs per program, warps), eagerly and on CUDA replayed from a CUDA graph
    (as the env's recorded step runs them), and whether the kernel wrote the torch bytes: a row
    per launch."""
    from noeira.envs.craftax_full import render, triton_obs

    be = get_backend(backend)
    s = obs_states(n, backend)
    want = torch.empty((n, render.COMPACT_SIZE), dtype=torch.uint8, device=be.device)
    got = torch.empty_like(want)

    def timings(fn: Callable[[], None], name: str) -> dict[str, float]:
        out = {f"{name} eager": time_calls(fn, be.synchronize, min_time, warmup=2, max_chunk=200)[0]}
        if be.device.type == "cuda":
            out[f"{name} graph"] = time_calls(_graphed(fn), be.synchronize, min_time, warmup=2, max_chunk=200)[0]
        return out

    base = timings(lambda: render.compact(s, want), "torch")
    if kernel is None:
        return [{**base, "launch": "-", "same": None}]
    rows = []
    default = (triton_obs.ROWS, triton_obs.NUM_WARPS)
    try:
        for envs, warps in launches:
            triton_obs.ROWS, triton_obs.NUM_WARPS = envs, warps  # read by the launch
            got.fill_(77)
            row = {**base, **timings(lambda: kernel(s, got), "triton"), "launch": f"{envs}x{warps}"}
            rows.append({**row, "same": torch.equal(got, want)})
    finally:
        triton_obs.ROWS, triton_obs.NUM_WARPS = default
    return rows


def obs_kernel_main(a: argparse.Namespace) -> int:
    """Time the compact observation (900 bytes per env) at each size: ``render.compact`` (torch ops:
    a few hundred launches) against ``triton_obs`` (one launch), and check they agree."""
    import os

    from noeira.envs.craftax_full.triton_obs import compact_kernel

    be = get_backend(a.backend)
    min_time = a.min_time if a.min_time is not None else (0.3 if a.quick else 2.0)
    kernel = compact_kernel() if be.device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1" else None
    launches = [tuple(int(v) for v in x.split("x")) for x in a.obs_launch.split(",")]
    modes = ["eager", "graph"] if be.device.type == "cuda" else ["eager"]
    console = Console(width=max(Console().width, 140))
    table = Table(title=f"craftax (full game) compact observation, ms per call - {be.name} ({be.device_name()})")
    for c in ("num_envs", "launch (envs x warps)", *(f"{w} {m}" for m in modes for w in ("torch", "triton", "speed-up")),
              "triton envs/s", "same bytes"):
        table.add_column(c, justify="right")
    for n in (int(x) for x in a.obs_kernel.split(",")):
        for r in time_obs(n, a.backend, min_time, kernel, launches):
            cells = []
            for m in modes:
                t, k = r[f"torch {m}"], r.get(f"triton {m}")
                cells += [f"{1e3 * t:.3f}", "-" if k is None else f"{1e3 * k:.3f}",
                          "-" if k is None else f"{t / k:.2f}x"]
            best = min((r[f"triton {m}"] for m in modes if f"triton {m}" in r), default=None)
            same = "-" if r["same"] is None else ("yes" if r["same"] else "NO")
            table.add_row(f"{n:,}", r["launch"], *cells, "-" if best is None else fmt_rate(n / best), same)
            console.print(f"  n={n} launch {r['launch']}: "
                          + ", ".join(f"{k} {1e3 * v:.3f} ms" for k, v in r.items() if k not in ("same", "launch"))
                          + f", same bytes: {same}")
        if be.device.type == "cuda":
            torch.cuda.empty_cache()
    console.print(table)
    return 0


def expand_main(a: argparse.Namespace) -> int:
    """Time ``render.expand_into`` of B codes (of states walked by random actions) into a padded
    bfloat16 input [B, 8,272] and a float32 one: the torch path (a float32 expansion, then the cast)
    against the Triton kernel (one pass; CUDA only), their write rate, and whether they agree."""
    from noeira.envs.craftax_full import render

    be = get_backend(a.backend)
    min_time = a.min_time if a.min_time is not None else (0.3 if a.quick else 2.0)
    console = Console(width=max(Console().width, 130))
    table = Table(title=f"craftax (full game) codes -> input layer, ms per call - {be.name} ({be.device_name()})")
    for c in ("codes", "dtype", "torch", "triton", "speed-up", "triton GB/s written", "same"):
        table.add_column(c, justify="right")
    for b in (int(x) for x in a.expand.split(",")):
        s = obs_states(min(b, 8192), a.backend)
        code = torch.empty((s.arena.shape[0], render.COMPACT_SIZE), dtype=torch.uint8, device=be.device)
        render.compact(s, code)
        code = code.repeat((b + code.shape[0] - 1) // code.shape[0], 1)[:b].contiguous()
        for dtype in (torch.bfloat16, torch.float32):
            out = torch.empty((b, render.OBS_SIZE + 4), dtype=dtype, device=be.device)
            want = torch.empty_like(out)
            t_torch = time_calls(lambda: want[:, :render.OBS_SIZE].copy_(_torch_expand(code)),  # noqa: B023
                                 be.synchronize, min_time, warmup=2, max_chunk=50)[0]
            kernel = render._triton_expand() if be.device.type == "cuda" else None
            t_kernel, same = None, None
            if kernel is not None:
                t_kernel = time_calls(lambda: kernel(code, out), be.synchronize, min_time, warmup=2,  # noqa: B023
                                      max_chunk=50)[0]
                same = torch.equal(out[:, :render.OBS_SIZE], want[:, :render.OBS_SIZE])
            written = b * render.OBS_SIZE * out.element_size()
            table.add_row(f"{b:,}", str(dtype).removeprefix("torch."), f"{1e3 * t_torch:.3f}",
                          "-" if t_kernel is None else f"{1e3 * t_kernel:.3f}",
                          "-" if t_kernel is None else f"{t_torch / t_kernel:.1f}x",
                          "-" if t_kernel is None else f"{written / t_kernel / 1e9:.0f}",
                          "-" if same is None else ("yes" if same else "NO"))
        if be.device.type == "cuda":
            torch.cuda.empty_cache()
    console.print(table)
    return 0


def _torch_expand(code: torch.Tensor) -> torch.Tensor:
    """The torch path of ``render.expand`` on the codes' device."""
    from noeira.envs.craftax_full import render

    res = torch.empty((code.shape[0], render.OBS_SIZE), dtype=torch.float32, device=code.device)
    render._expand_torch(code, res)
    return res


METADATA_OPS = {"view", "_unsafe_view", "as_strided", "select", "slice", "unsqueeze", "squeeze", "expand", "t",
                "transpose", "reshape", "alias", "detach", "permute", "unbind", "split", "lift_fresh"}
"""Ops that make a view or read metadata: no kernel on a GPU."""


def count_launches(step: Callable[[], Any]) -> tuple[Counter, Counter]:
    """(torch ops that do work, by the nearest noeira function calling them; Triton launches, by kernel)
    of one call of ``step``. The interpreter's own tensors (``TRITON_INTERPRET=1``) are not counted."""
    import traceback

    import triton.runtime.interpreter as interpreter
    import triton.runtime.jit as jit
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    ops: Counter = Counter()
    kernels: Counter = Counter()

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            name = func.overloadpacket.__name__
            if name not in METADATA_OPS:
                frames = [f for f in traceback.extract_stack() if "/noeira/" in f.filename]
                where = f"{Path(frames[-1].filename).stem}.{frames[-1].name}" if frames else "?"
                ops[f"{where}: {name}"] += 1
            return func(*args, **(kwargs or {}))

    def counted(run: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            kernels[getattr(self, "__name__", None) or self.fn.__name__] += 1
            with _disable_current_modes():
                return run(self, *args, **kwargs)
        return wrapper

    patched = [(cls, cls.run) for cls in (jit.JITFunction, getattr(interpreter, "InterpretedFunction", None)) if cls]
    try:
        for cls, run in patched:
            cls.run = counted(run)
        with Ops():
            step()
    finally:
        for cls, run in patched:
            cls.run = run
    return ops, kernels


def launches_main(a: argparse.Namespace, options: dict[str, Any]) -> int:
    """``--launches``: count what one step of the env (``options``: its ``--env`` settings) launches."""
    variant = (a.variants or "compact").split(",")[0]
    env = make_env("craftax", num_envs=a.launches, backend=a.backend, seed=0, obs=variant, **options)
    action = torch.randint(0, env.action_space.n, (a.launches,), device=env.device)
    env.reset(seed=0)
    for _ in range(max(a.warmup, 3)):
        env.step(action)
    ops, kernels = count_launches(lambda: env.step(action))
    console = Console(width=max(Console().width, 130))
    table = Table(title=f"one step of {a.launches} envs ({variant}, {options or 'defaults'}): what it launches")
    for c in ("called from", "ops"):
        table.add_column(c, justify="left" if c == "called from" else "right")
    places: Counter = Counter()
    for key, count in ops.items():
        places[key.split(":")[0]] += count
    for where, count in places.most_common():
        table.add_row(where, str(count))
    table.add_row("[bold]torch ops that do work", f"[bold]{sum(ops.values())}")
    table.add_row("[bold]Triton launches", f"[bold]{sum(kernels.values())}")
    console.print(table)
    console.print("Triton: " + ", ".join(f"{k} x{v}" for k, v in sorted(kernels.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
