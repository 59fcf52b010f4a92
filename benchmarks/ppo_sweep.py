"""PPO recipe sweep on CartPole: for each case, env steps per second and the time to solve
(seeds from $SEEDS, default 0,1), with the graph backend $GRAPH (default stream) on CUDA.

A case is ``num_envs|agent overrides|run.total_steps|max steps``; the overrides are layered
on the cuda recipe's advantage settings (no value clipping, no advantage normalisation,
gamma 0.99, lambda 0.9). Lines of JSON go to stdout and to $OUT/sweep.jsonl. The sweep
behind the cuda recipe (BENCHMARKS.md, PPO) ran, among others:

    python3 benchmarks/ppo_sweep.py \
        "16384|horizon=16,update_epochs=4,num_minibatches=8,lr=5e-3|1e7|2e7" \
        "16384|horizon=16,update_epochs=2,num_minibatches=4,lr=5e-3|2e7|4e7" \
        "16384|horizon=16,update_epochs=1,num_minibatches=4,lr=5e-3|2e7|4e7" \
        "16384|horizon=16,update_epochs=1,num_minibatches=8,lr=5e-3|2e7|4e7" \
        "16384|horizon=16,update_epochs=2,num_minibatches=8,lr=5e-3|2e7|4e7"
"""

import json
import os
import sys
import time

import torch

from noeira.core.config import parse_overrides

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppo import throughput, time_to_solve  # noqa: E402  (benchmarks/ppo.py)

BASE = "clip_vloss=false,norm_adv=false,gamma=0.99,gae_lambda=0.9"


def main() -> None:
    out_dir = os.environ.get("OUT", ".")
    graph = os.environ.get("GRAPH", "stream")
    seeds = [int(x) for x in os.environ.get("SEEDS", "0,1").split(",")]
    eval_iters = int(os.environ.get("EVAL_ITERS", "2"))  # iterations between evaluations
    for case in sys.argv[1:]:
        n_s, kv, total_s, max_s = case.split("|")
        n, total, max_steps = int(n_s), int(float(total_s)), int(float(max_s))
        over = parse_overrides([f"agent.{x}" for x in (BASE + "," + kv).split(",") if x]).get("agent", {})
        over["run"] = {"total_steps": total}
        horizon = over.get("horizon", 16)
        row = {"n": n, "kv": kv, "total": total, "graph": graph}
        try:
            row.update(throughput("cuda", graph, n, 30, dict(over)))
            solves = []
            for seed in seeds:
                t0 = time.time()
                r = time_to_solve("cuda", graph, n, seed, eval_iters * n * horizon, max_steps, 10, dict(over))
                r["wall"] = round(time.time() - t0, 1)
                solves.append(r)
            row["solves"] = solves
        except Exception as e:  # one failing case does not stop the sweep
            row["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(row), flush=True)
        with open(os.path.join(out_dir, "sweep.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
