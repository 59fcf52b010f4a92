"""Data-parallel training: 1 vs N processes of ``noeira train --nproc-per-node N``, side by side.

Each row is one ``noeira train`` run (a subprocess, as a user runs it) with the same
``env.num_envs`` per process, so N processes step N times the envs. It prints the training
steps/s (every rank's steps, from ``record.json``), the scaling efficiency
``steps/s(N) / (N x steps/s(1))``, the wall time including start-up, and whether the ranks'
parameters stayed identical (their hashes). On this CPU (gloo) the rows check the path; the
multi-GPU scaling figures come from GPU machines (NCCL)::

    python benchmarks/distributed.py --quick                                     # CPU, 1 vs 2 processes
    python benchmarks/distributed.py --backend cuda --nprocs 1,2,4,8 --num-envs 16384 \\
        --total-steps 200000000                                                  # one GPU per process
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from _common import noeira_train


def run(nproc: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    run_dir = out / f"n{nproc}"
    train = ["--nproc-per-node", str(nproc), f"backend={args.backend}", f"env={args.env}", f"agent={args.agent}",
             f"env.num_envs={args.num_envs}", f"run.total_steps={args.total_steps * nproc}", "run.progress=false",
             "run.eval_episodes=0"]
    rec, wall, identical = noeira_train(train, run_dir, args.set, f"nproc={nproc}")
    return {"nproc": nproc, "num_envs_per_rank": args.num_envs, "env_steps": rec["env_steps"],
            "steps_per_second": rec["steps_per_second"], "train_seconds": rec["train_seconds"], "wall_seconds": wall,
            "ranks_identical": identical, "devices": rec.get("devices")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CPU, 1 vs 2 processes, a few seconds each")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--env", default="cartpole")
    p.add_argument("--agent", default="ppo")
    p.add_argument("--nprocs", default="1,2", help="process counts to compare, e.g. 1,2,4,8")
    p.add_argument("--num-envs", type=int, default=64, help="env.num_envs per process")
    p.add_argument("--total-steps", type=int, default=200_000, help="env steps per process")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra overrides for every run")
    p.add_argument("--json", help="append the rows as JSON lines to this file")
    args = p.parse_args()
    if args.quick:
        args.backend, args.nprocs, args.total_steps = "cpu", "1,2", 100_000
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.nprocs.split(",")]:
            rows.append(run(n, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["steps_per_second"] / rows[0]["nproc"]
    print(f"\n{args.agent} on {args.env}, backend {args.backend}, {args.num_envs} envs per process")
    print(f"{'procs':>5} {'steps/s':>12} {'efficiency':>10} {'train s':>8} {'wall s':>7} {'identical':>9}")
    for r in rows:
        eff = r["steps_per_second"] / (r["nproc"] * base)
        print(f"{r['nproc']:>5} {r['steps_per_second']:>12,.0f} {eff:>10.2f} {r['train_seconds']:>8.1f} "
              f"{r['wall_seconds']:>7.1f} {str(r['ranks_identical']):>9}")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
