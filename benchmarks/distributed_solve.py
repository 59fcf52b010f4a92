"""Does data parallel keep the recipe? ``noeira train --nproc-per-node N`` from the recipe alone
(no ``run.total_steps``: it becomes N x the recipe's, so each process runs the recipe's
iterations over a global batch N times larger), for several seeds, next to one process.

Each row is one ``noeira train`` run (a subprocess, as a user runs it) and reports the final
deterministic evaluation over ``--eval-episodes`` episodes (100: as ``benchmarks/solve.py``
counts "solved"), the iterations, the total steps and whether the ranks' parameters ended
identical. A world size solves when at least 4 of 5 seeds reach the threshold (CartPole-v1: 475)::

    python benchmarks/distributed_solve.py                          # PPO CartPole on the CPU: 1, 2, 4 processes x 5 seeds
    python benchmarks/distributed_solve.py --nprocs 2 --seeds 1     # one run
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from _common import noeira_train

THRESHOLDS = {"cartpole": 475.0, "acrobot": -100.0, "pendulum": -200.0}


def run(nproc: int, seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    run_dir = out / f"n{nproc}-s{seed}"
    launch = ["--nproc-per-node", str(nproc)] if nproc > 1 else []
    train = [*launch, f"backend={args.backend}", f"env={args.env}", f"agent={args.agent}", f"run.seed={seed}",
             f"run.eval_episodes={args.eval_episodes}", "run.progress=false"]
    rec, wall, identical = noeira_train(train, run_dir, args.set, f"nproc={nproc} seed={seed}")
    return {"nproc": nproc, "seed": seed, "eval": rec["final_eval"]["mean_return"], "iterations": rec["iterations"],
            "total_steps": rec["total_steps"], "note": rec.get("total_steps_note"), "train_seconds": rec["train_seconds"],
            "wall_seconds": wall, "ranks_identical": identical}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--env", default="cartpole")
    p.add_argument("--agent", default="ppo")
    p.add_argument("--nprocs", default="1,2,4", help="process counts, e.g. 1,2,4")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra overrides for every run")
    p.add_argument("--json", help="append the rows as JSON lines to this file")
    args = p.parse_args()
    threshold = THRESHOLDS.get(args.env, float("inf"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.nprocs.split(",")]:
            for seed in range(args.seeds):
                rows.append(run(n, seed, args, Path(tmp)))
                print(json.dumps(rows[-1]), flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(rows[-1]) + "\n")
    print(f"\n{args.agent} on {args.env}, backend {args.backend}, the recipe's settings; solved: eval >= {threshold:g}")
    print(f"{'procs':>5} {'solved':>7} {'iterations':>10} {'total steps':>12} {'evals':<48} {'train s':>8} {'identical':>9}")
    for n in sorted({r["nproc"] for r in rows}):
        group = [r for r in rows if r["nproc"] == n]
        solved = sum(r["eval"] >= threshold for r in group)
        evals = ", ".join(f"{r['eval']:.1f}" for r in group)
        print(f"{n:>5} {f'{solved}/{len(group)}':>7} {group[0]['iterations']:>10} {group[0]['total_steps']:>12,} "
              f"{evals:<48} {sum(r['train_seconds'] for r in group) / len(group):>8.1f} "
              f"{str(all(r['ranks_identical'] for r in group)):>9}")


if __name__ == "__main__":
    main()
