"""Do the recipes solve? Every agent x classic-control env pair its action space allows, trained
from the agents' recipes (the ``noeira_recipe`` hook, exactly as ``noeira train agent=A env=E
run.seed=S backend=cpu run.eval_episodes=100`` resolves them) for several seeds, in parallel worker processes.

Each run (one fresh process, one torch thread) reports:

- **solved**: the final deterministic evaluation (the driver's ``final_eval``, over
  ``--eval-episodes`` episodes, 100 by default as gym's "solved" counts them: ``run.eval_episodes=100``;
  the 10-episode default of ``noeira train`` has a standard error of ~40 on Pendulum) reaches the
  usual threshold (CartPole-v1 475, Acrobot-v1 -100, MountainCar-v0 -110,
  MountainCarContinuous-v0 90, Pendulum-v1 -200);
- **steps / seconds to threshold**: the first log interval of ``metrics.jsonl`` whose mean
  training-episode return (``episode_return``: the exploring policy, episodes ended in that
  interval) reaches the threshold, its ``env_steps`` and ``time`` (seconds of training);
  ``-`` when the training return never got there (an exploring policy scores below its
  deterministic one: epsilon-greedy, action noise);
- **final eval**: the final evaluation's mean return; **wall**: the whole run (setup, training,
  evaluation) in its worker.

A pair solves when at least 4 of 5 seeds (scaled up to the number of ``--seeds``) solve. The table
prints agent, env, backend, seeds solved, median steps and training seconds to threshold (over
the seeds that got there), the median final eval and the CPU seconds the pair took; ``--out``
writes every run and the table as JSON.

    python benchmarks/solve.py                                  # every pair, 5 seeds, all cores
    python benchmarks/solve.py --agents ppo --envs cartpole --seeds 2 --workers 1
    python benchmarks/solve.py --quick                          # plumbing check: 1 seed, short runs
    python benchmarks/solve.py --long                           # also the pairs too slow for the default table

Pairs whose recipe takes much longer than the rest (see ``LONG``) run only with ``--long`` (or
when named with ``--agents``/``--envs``... and ``--long``). Runs are ordered longest first so the
pool stays busy to the end.
"""

from __future__ import annotations

import os

# one thread per worker, set before torch is imported (the workers are spawned: they import this module)
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import concurrent.futures as cf  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

AGENTS = ("ppo", "a2c", "dqn", "sac", "td3", "ddpg", "c51", "rainbow", "pqn", "redq")
ENVS = ("cartpole", "acrobot", "mountaincar", "pendulum", "mountaincar-continuous")
THRESHOLDS = {"cartpole": 475.0, "acrobot": -100.0, "mountaincar": -110.0, "pendulum": -200.0,
              "mountaincar-continuous": 90.0}
DISCRETE_ONLY = ("dqn", "c51", "rainbow", "pqn")
CONTINUOUS_ONLY = ("sac", "td3", "ddpg", "redq")
ONLY_ON = {"redq": ("pendulum",)}
"""Agents with recipes for some of the envs only: the pairs they are tested on."""
LONG: set[tuple[str, str]] = {("ppo", "mountaincar"), ("a2c", "mountaincar"), ("a2c", "pendulum"), ("dqn", "mountaincar"),
                              ("c51", "mountaincar"), ("rainbow", "mountaincar"), ("pqn", "mountaincar")}
"""Pairs whose recipes cost too much for the default table (run them with --long): ~3-6 min a seed on
one core of the 2-core CPU."""
QUICK_STEPS = 4_000
"""--quick: every run stops after this many env steps (a plumbing check, nothing solves)."""


def action_kind(env: str) -> str:
    """``discrete`` or ``continuous``: the env's action space."""
    from noeira.core import Discrete, make_env

    e = make_env(env, num_envs=1, backend="cpu", seed=0)
    try:
        return "discrete" if isinstance(e.action_space, Discrete) else "continuous"
    finally:
        e.close()


def allowed_pairs(agents: tuple[str, ...] = AGENTS, envs: tuple[str, ...] = ENVS) -> list[tuple[str, str]]:
    """Every (agent, env) whose action space the agent takes (DQN discrete, SAC/TD3/DDPG/REDQ continuous,
    PPO and A2C both), REDQ on Pendulum only (``ONLY_ON``)."""
    kinds = {e: action_kind(e) for e in envs}
    return [(a, e) for a in agents for e in envs
            if not (a in DISCRETE_ONLY and kinds[e] != "discrete") and not (a in CONTINUOUS_ONLY and kinds[e] != "continuous")
            and e in ONLY_ON.get(a, envs)]


def run_config(agent: str, env: str, seed: int, backend: str = "cpu", total_steps: int | None = None,
               eval_episodes: int = 100) -> Any:
    """The config ``noeira train agent=AGENT env=ENV run.seed=SEED backend=BACKEND
    run.eval_episodes=EVAL_EPISODES`` resolves (the recipes layered under it), without a progress
    bar or timed checkpoints."""
    from noeira.core.driver import resolve

    run: dict[str, Any] = {"seed": seed, "progress": False, "checkpoint_minutes": 0, "eval_episodes": eval_episodes}
    if total_steps is not None:
        run["total_steps"] = total_steps
    return resolve({"backend": backend, "env": {"name": env}, "agent": {"name": agent}, "run": run})


def first_crossing(metrics: Path, threshold: float) -> tuple[int | None, float | None]:
    """``(env_steps, seconds of training)`` of the first logged interval whose mean training
    return reaches ``threshold``; ``(None, None)`` if none did."""
    if not metrics.is_file():
        return None, None
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        ret = row.get("episode_return")
        if ret is not None and row.get("episodes", 0) > 0 and ret >= threshold:
            return int(row["env_steps"]), float(row["time"])
    return None, None


def run_one(agent: str, env: str, seed: int, backend: str, out_dir: str, quick: bool,
            eval_episodes: int = 100) -> dict[str, Any]:
    """Train one seed in this (fresh) process; the row of the results."""
    t_start = time.perf_counter()
    cpu_start = time.process_time()
    row: dict[str, Any] = {"agent": agent, "env": env, "seed": seed, "backend": backend,
                           "threshold": THRESHOLDS[env]}
    try:
        import torch

        from noeira.core.driver import train

        torch.set_num_threads(1)  # the off-policy agents have no torch_threads key; PPO/A2C's recipes set 1 too
        cfg = run_config(agent, env, seed, backend, eval_episodes=eval_episodes)
        if quick:
            cfg = run_config(agent, env, seed, backend, total_steps=min(cfg.run.total_steps, QUICK_STEPS),
                             eval_episodes=eval_episodes)
        run_dir = Path(out_dir) / f"{agent}-{env}-s{seed}"
        record = train(cfg, run_dir=run_dir, overwrite=True)
        final = record.get("final_eval", {}).get("mean_return")
        steps, seconds = first_crossing(run_dir / "metrics.jsonl", THRESHOLDS[env])
        row.update({
            "solved": final is not None and final >= THRESHOLDS[env], "final_eval": final,
            "final_eval_std": record.get("final_eval", {}).get("std_return"),
            "steps_to_threshold": steps, "seconds_to_threshold": seconds,
            "total_steps": record["env_steps"], "train_seconds": record.get("train_seconds"),
            "steps_per_second": record.get("steps_per_second"), "num_envs": cfg.num_envs,
            "recipes": list(cfg.recipes), "run_dir": str(run_dir), "error": None,
        })
    except Exception as err:  # one failed run is a row of the table, not the end of the benchmark
        row.update({"solved": False, "final_eval": None, "steps_to_threshold": None, "seconds_to_threshold": None,
                    "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()})
    row["wall_seconds"] = time.perf_counter() - t_start
    row["cpu_seconds"] = time.process_time() - cpu_start
    return row


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(rows: list[dict[str, Any]], need_of_5: int = 4) -> list[dict[str, Any]]:
    """One row per (agent, env, backend)."""
    out = []
    keys = sorted({(r["agent"], r["env"], r["backend"]) for r in rows},
                  key=lambda k: (AGENTS.index(k[0]) if k[0] in AGENTS else 99, ENVS.index(k[1]) if k[1] in ENVS else 99))
    for agent, env, backend in keys:
        rs = [r for r in rows if (r["agent"], r["env"], r["backend"]) == (agent, env, backend)]
        n, solved = len(rs), sum(bool(r["solved"]) for r in rs)
        need = -(-need_of_5 * n // 5)  # 4 of 5, scaled up to n seeds
        crossed = [r for r in rs if r.get("steps_to_threshold") is not None]
        out.append({
            "agent": agent, "env": env, "backend": backend, "seeds": n, "solved": solved,
            "pair_solves": solved >= need, "need": need,
            "median_steps_to_threshold": _median([r["steps_to_threshold"] for r in crossed]),
            "median_seconds_to_threshold": _median([r["seconds_to_threshold"] for r in crossed]),
            "crossed": len(crossed),
            "median_final_eval": _median([r["final_eval"] for r in rs if r.get("final_eval") is not None]),
            "final_evals": [r.get("final_eval") for r in sorted(rs, key=lambda r: r["seed"])],
            "total_steps": _median([r["total_steps"] for r in rs if r.get("total_steps")]),
            "median_wall_seconds": _median([r["wall_seconds"] for r in rs]),
            "cpu_seconds": sum(r.get("cpu_seconds", 0.0) for r in rs),
            "errors": [r["error"] for r in rs if r.get("error")],
        })
    return out


def _fmt(x: Any, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(summary: list[dict[str, Any]]) -> None:
    head = ("agent", "env", "backend", "solved", "steps", "med steps to thr", "med s to thr", "med final eval",
            "med wall s", "cpu s")
    lines = [head]
    for s in summary:
        mark = "" if s["pair_solves"] else " NO"
        crossed = "" if s["crossed"] in (0, s["seeds"]) else f" ({s['crossed']})"
        lines.append((s["agent"], s["env"], s["backend"], f"{s['solved']}/{s['seeds']}{mark}", _fmt(s["total_steps"]),
                      _fmt(s["median_steps_to_threshold"]) + crossed, _fmt(s["median_seconds_to_threshold"], ".1f"),
                      _fmt(s["median_final_eval"], ".1f"), _fmt(s["median_wall_seconds"], ".1f"),
                      _fmt(s["cpu_seconds"], ".0f")))
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    for i, row in enumerate(lines):
        print("  ".join(str(c).ljust(w) if j < 3 else str(c).rjust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for s in summary:
        for err in s["errors"]:
            print(f"error: {s['agent']} {s['env']}: {err}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default=",".join(AGENTS), help="comma-separated agents (default: all)")
    p.add_argument("--envs", default=",".join(ENVS), help="comma-separated classic-control envs (default: all)")
    p.add_argument("--seeds", default="5", help="a count (5: seeds 0-4) or a comma-separated list (0,3; one seed: 3,)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument("--backend", default="cpu", help="backend of every run (default cpu)")
    p.add_argument("--quick", action="store_true", help=f"plumbing check: seed 0 only, {QUICK_STEPS:,} steps per run")
    p.add_argument("--eval-episodes", type=int, default=100,
                   help="episodes of the final deterministic evaluation (run.eval_episodes; default 100)")
    p.add_argument("--long", action="store_true", help="include the slow pairs (LONG) too")
    p.add_argument("--only-long", action="store_true", help="run only the slow pairs")
    p.add_argument("--out", default="solve.json", help="JSON results (default solve.json)")
    p.add_argument("--run-dir", default="runs/solve", help="where the runs' directories go (default runs/solve)")
    args = p.parse_args(argv)

    agents = tuple(a.strip() for a in args.agents.split(",") if a.strip())
    envs = tuple(e.strip() for e in args.envs.split(",") if e.strip())
    for e in envs:
        if e not in THRESHOLDS:
            p.error(f"--envs: no threshold for {e!r} (known: {', '.join(THRESHOLDS)})")
    seeds = list(range(int(args.seeds))) if "," not in args.seeds else [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.quick:
        seeds = seeds[:1]
    pairs = allowed_pairs(agents, envs)
    if args.only_long:
        pairs = [pr for pr in pairs if pr in LONG]
    elif not args.long:
        skipped = [pr for pr in pairs if pr in LONG]
        pairs = [pr for pr in pairs if pr not in LONG]
        if skipped:
            print("skipped (slow, run with --long): " + ", ".join(f"{a}/{e}" for a, e in skipped))
    # longest runs first: the recipes' step budgets, by the agent kind's rough cost per step
    cost = {pr: run_config(*pr, 0, args.backend).run.total_steps * (1 if pr[0] in ("ppo", "a2c") else 40)
            for pr in pairs}
    tasks = sorted(((a, e, s) for a, e in pairs for s in seeds), key=lambda t: -cost[t[:2]])
    print(f"{len(tasks)} runs ({len(pairs)} pairs x {len(seeds)} seeds) on {args.workers} workers, backend {args.backend}",
          flush=True)

    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_one, a, e, s, args.backend, args.run_dir, args.quick, args.eval_episodes): (a, e, s)
                   for a, e, s in tasks}
        for fut in cf.as_completed(futures):
            a, e, s = futures[fut]
            try:
                row = fut.result()
            except Exception as err:  # the worker died (killed, out of memory)
                row = {"agent": a, "env": e, "seed": s, "backend": args.backend, "solved": False, "final_eval": None,
                       "steps_to_threshold": None, "seconds_to_threshold": None, "wall_seconds": 0.0,
                       "cpu_seconds": 0.0, "error": f"worker: {type(err).__name__}: {err}"}
            rows.append(row)
            status = "error: " + row["error"] if row.get("error") else \
                f"final {row['final_eval']:.1f} {'solved' if row['solved'] else 'NOT solved'}, " \
                f"threshold at {_fmt(row['steps_to_threshold'])} steps"
            print(f"[{len(rows)}/{len(tasks)} {time.perf_counter() - t0:6.0f}s] {a} {e} seed {s}: {status} "
                  f"({row['wall_seconds']:.0f}s)", flush=True)
    wall = time.perf_counter() - t0

    summary = summarize(rows)
    print()
    print_table(summary)
    failing = [f"{s['agent']}/{s['env']}" for s in summary if not s["pair_solves"]]
    cpu = sum(r.get("cpu_seconds", 0.0) for r in rows)
    print(f"\n{sum(s['pair_solves'] for s in summary)}/{len(summary)} pairs solve on >= 4 of 5 seeds"
          + (f"; not: {', '.join(failing)}" if failing else "")
          + f". {wall:.0f} s wall on {args.workers} workers, {cpu:.0f} CPU s in the runs.")
    result = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "workers": args.workers},
              "wall_seconds": wall, "cpu_seconds": cpu, "quick": args.quick, "summary": summary,
              "runs": sorted(rows, key=lambda r: (r["agent"], r["env"], r["seed"]))}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {args.out}")
    return 0 if not failing or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
