"""Craftax-Classic: the final evaluation's time next to the training time of the same run.

The run is ``noeira train env=craftax-classic`` as a user starts it (the recipe: PPO, 1e9 steps
on cuda), which ends with a 10-episode evaluation through the run's graph backend
(``record.json``: ``train_seconds``, ``eval_seconds``). The same checkpoint is then evaluated
again twice, side by side: through the graph backend (``noeira eval``'s path) and eagerly, step
by step, as evaluation ran before it used the graph backend. Goal: evaluation under 10 % of
training. The evaluation's time follows its longest episode (a better agent lives longer); every
episode ends by the time limit (Craftax: 10,000 steps), so the time per step x the limit
(``bound``) bounds the evaluation of any agent.

    python benchmarks/eval_craftax.py                                  # the default run (cuda: ~144 s of training on an H200)
    python benchmarks/eval_craftax.py --steps 100000000                # a shorter run (a weaker agent: shorter episodes)
    python benchmarks/eval_craftax.py --backend cpu --steps 20000 --episodes 2    # what a CPU can
    python benchmarks/eval_craftax.py --env cartpole --backend cpu       # the plumbing, in seconds
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="cuda")
    p.add_argument("--env", default="craftax-classic")
    p.add_argument("--steps", type=float, default=None, help="run.total_steps (default: the recipe's)")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--skip-eager", action="store_true", help="leave out the eager evaluation (the slow one, before)")
    p.add_argument("--json", help="write the row as JSON to this file")
    args = p.parse_args()

    from noeira.core.api import get_graph_backend
    from noeira.core.driver import choose_graph, evaluate, load_run, resolve, train

    raw = {"backend": args.backend, "env": {"name": args.env}, "agent": {"name": "ppo"},
           "run": {"eval_episodes": args.episodes, "progress": False}}
    if args.steps:
        raw["run"]["total_steps"] = int(args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        record = train(resolve(raw), run_dir=run_dir)
        times = {}
        for how in ("graph",) if args.skip_eager else ("graph", "eager"):
            loaded = load_run(run_dir, episodes=args.episodes)
            steps = [0]
            step = loaded.env.step

            def counted(action, step=step, steps=steps):  # noqa: ANN001, ANN202
                steps[0] += 1
                return step(action)

            graph_name = choose_graph(loaded.cfg.graph, loaded.backend)
            graph = get_graph_backend(graph_name) if how == "graph" and graph_name != "eager" else None
            if how == "eager":
                loaded.env.step = counted  # a Python wrapper: eager only
            loaded.backend.synchronize()
            t0 = time.perf_counter()
            result = evaluate(loaded.agent, loaded.env, args.episodes, seed=loaded.seed, graph=graph,
                              backend=loaded.backend)
            loaded.backend.synchronize()
            times[how] = (time.perf_counter() - t0, result, steps[0], graph_name if graph else "eager")
            limit = loaded.env.max_episode_steps or 100_000
            loaded.close()
    train_s = record["train_seconds"]
    eager = times.get("eager", (float("nan"), times["graph"][1], None, "eager"))
    row = {"backend": record["backend"], "device": record["device"], "env_steps": record["env_steps"],
           "train_seconds": train_s, "final_eval": record["final_eval"], "eval_seconds": record["eval_seconds"],
           "graph_eval_seconds": times["graph"][0], "eager_eval_seconds": eager[0],
           "eval_steps": times["graph"][1]["steps"], "graph": times["graph"][3],
           "same_result": times["graph"][1] == eager[1] == record["final_eval"]}
    print(json.dumps(row))
    print(f"\n{args.env}, PPO's recipe, {record['env_steps']:,} steps on {record['device']}; "
          f"{args.episodes} evaluation episodes side by side, {row['eval_steps']:,} steps")
    print(f"{'':<34} {'seconds':>9} {'% of training':>14}")
    print(f"{'training':<34} {train_s:>9.1f} {100:>14.1f}")
    for name, secs in ((f"final eval in the run ({record['graph']})", record["eval_seconds"]),
                       (f"eval through {row['graph']}", row["graph_eval_seconds"]),
                       ("eval eager, step by step (before)", row["eager_eval_seconds"])):
        print(f"{name:<34} {secs:>9.1f} {100 * secs / train_s:>14.1f}")
    per_step = row["graph_eval_seconds"] / row["eval_steps"]
    row["bound_seconds"] = per_step * limit  # episodes end by the time limit: any agent's episodes, side by side
    print(f"{f'bound: {limit:,} steps through ' + row['graph']:<34} {row['bound_seconds']:>9.1f} "
          f"{100 * row['bound_seconds'] / train_s:>14.1f}")
    print(f"mean return {record['final_eval']['mean_return']:.2f}; the evaluations agree: {row['same_result']}")
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
