"""PPO on CartPole: env steps per second and wall time to solve, ours beside Stable-Baselines3.

For each ``num_envs`` x graph backend, noeira's PPO (the ``cartpole`` recipe of the backend,
``env.num_envs`` overridden) is built as the driver builds it and measured twice:

- **throughput**: after warm-up (and recording, under a graph backend) iterations, which are
  timed apart, ``--iterations`` collect+learn iterations between two device synchronisations;
- **time to solve**: a fresh seeded run, evaluated deterministically on ``--eval-episodes``
  envs every ``--eval-every`` env steps (evaluation time excluded); the wall time of training
  until the evaluation mean first reaches ``--threshold`` (475), or ``-`` within ``--max-steps``.

Then the **fixed-budget recipes** both sides ship, as a user runs them: ``noeira train`` with no
arguments (the default recipe, driver included: its ``train_seconds`` and final evaluation)
and SB3's PPO with the rl-baselines3-zoo CartPole-v1 hyperparameters (1e5 steps, 8 envs),
timed the same way, with the same deterministic evaluation afterwards. SB3 runs in this
process on this machine (skipped when stable-baselines3 is not installed).

    python benchmarks/ppo.py --quick                                    # CPU smoke run
    python benchmarks/ppo.py --num-envs 1024,4096,16384,65536 --graph eager,stream,device \\
        --json ppo-h200.json                                            # the H200 table
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from typing import Any

import torch
from _common import build_ppo, time_iterations, wrap_loop

from noeira.core.api import get_backend
from noeira.core.driver import build_env, evaluate, resolve, train
from noeira.core.errors import UserError

THRESHOLD = 475.0


def _build(backend_name: str, num_envs: int, seed: int, overrides: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    run = {"seed": seed, "progress": False, **overrides.pop("run", {})}
    raw = {"backend": backend_name, "env": {"name": "cartpole", "num_envs": num_envs},
           "agent": {"name": "ppo", **overrides}, "run": run}
    cfg = resolve(raw)
    return cfg, *build_ppo(cfg, seed)


def throughput(backend_name: str, graph_name: str, num_envs: int, iterations: int, overrides: dict[str, Any]) -> dict[str, Any]:
    cfg, backend, env, agent = _build(backend_name, num_envs, 0, dict(overrides))
    collect, learn = wrap_loop(graph_name, agent, backend, env.capture_safe)
    env.reset(seed=0)
    warm, dt = time_iterations(collect, learn, env, backend, iterations)
    steps = iterations * agent.steps_per_collect
    env.close()
    return {"steps_per_second": steps / dt, "warmup_seconds": warm, "horizon": cfg.agent.config.horizon}


def time_to_solve(backend_name: str, graph_name: str, num_envs: int, seed: int, eval_every: int, max_steps: int,
                  episodes: int, overrides: dict[str, Any]) -> dict[str, Any]:
    cfg, backend, env, agent = _build(backend_name, num_envs, seed, dict(overrides))
    collect, learn = wrap_loop(graph_name, agent, backend, env.capture_safe)
    eval_env = build_env(cfg, backend, num_envs=episodes, seed=seed + 1)
    env.reset(seed=seed)
    elapsed, steps, next_eval = 0.0, 0, eval_every
    result: dict[str, Any] = {"solved": False, "seconds": None, "steps": None, "last_eval": None}
    while steps < max_steps:
        t0 = time.perf_counter()
        while steps < next_eval:
            collect(env)
            learn()
            steps += agent.steps_per_collect
        backend.synchronize()
        elapsed += time.perf_counter() - t0
        next_eval += eval_every
        ret = evaluate(agent, eval_env, episodes, seed=seed + 1)["mean_return"]
        result["last_eval"] = ret
        if ret >= THRESHOLD:
            result.update(solved=True, seconds=elapsed, steps=steps)
            break
    env.close()
    eval_env.close()
    return result


def noeira_default(backend_name: str, seed: int) -> dict[str, Any]:
    """``noeira train`` with no arguments (backend forced to ``backend_name``)."""
    cfg = resolve({"backend": backend_name, "run": {"seed": seed, "progress": False}})
    with tempfile.TemporaryDirectory() as d:
        rec = train(cfg, run_dir=d)
    return {"train_seconds": rec["train_seconds"], "steps": rec["env_steps"], "eval": rec["final_eval"]["mean_return"],
            "steps_per_second": rec["steps_per_second"], "num_envs": cfg.num_envs}


def sb3_zoo(seed: int, device: str) -> dict[str, Any] | None:
    """SB3 PPO with rl-baselines3-zoo's CartPole-v1 hyperparameters (hyperparams/ppo.yml)."""
    try:
        from stable_baselines3 import PPO as SB3PPO
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.evaluation import evaluate_policy
    except ImportError:
        return None

    def linear(start: float) -> Any:
        return lambda progress_remaining: progress_remaining * start

    total = 100_000
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = SB3PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                   ent_coef=0.0, learning_rate=linear(0.001), clip_range=linear(0.2), seed=seed, device=device, verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=total)
    dt = time.perf_counter() - t0
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=seed + 1)
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    return {"train_seconds": dt, "steps": total, "eval": float(mean), "steps_per_second": total / dt, "num_envs": 8}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--num-envs", default="", help="comma list (default: 1024,4096,16384,65536; --quick: 32,128)")
    p.add_argument("--graph", default="eager,stream,device", help="comma list; unavailable ones are skipped")
    p.add_argument("--iterations", type=int, default=0, help="timed throughput iterations (default 50; quick 10)")
    p.add_argument("--seeds", default="0", help="comma list of seeds for time-to-solve (median reported)")
    p.add_argument("--eval-every", type=int, default=0, help="env steps between evaluations (default ~2 iterations)")
    p.add_argument("--total-steps", type=int, default=0,
                   help="run.total_steps: the lr annealing horizon (default: the recipe's)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="give up solving after this many env steps (default: the run length, --total-steps or the "
                        "recipe's at that num_envs)")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--no-sb3", action="store_true", help="skip Stable-Baselines3")
    p.add_argument("--sb3-device", default="cpu", help="SB3's torch device (its MlpPolicy PPO is fastest on cpu)")
    p.add_argument("--sb3-threads", type=int, default=0,
                   help="torch threads for SB3 (default: as ours, i.e. 1 after our cpu recipe; on a busy "
                        "2-core machine more threads make SB3 several times slower)")
    p.add_argument("--quick", action="store_true", help="small sizes for a CPU")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra agent.KEY=VALUE for our PPO")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()

    from noeira.core.config import parse_overrides
    overrides = parse_overrides([f"agent.{kv}" for kv in args.set]).get("agent", {})
    backend = get_backend(args.backend)
    if args.total_steps:
        overrides["run"] = {"total_steps": args.total_steps}
    sizes = [int(x) for x in (args.num_envs or ("32,128" if args.quick else "1024,4096,16384,65536")).split(",")]
    iterations = args.iterations or (10 if args.quick else 50)
    seeds = [int(s) for s in args.seeds.split(",")]

    def max_steps(n: int) -> int:  # the recipe's run length at n envs, unless given
        return args.max_steps or args.total_steps or resolve({"backend": backend.name, "env": {"num_envs": n}}).run.total_steps
    print(f"device: {backend.device_name()} ({backend.name}), torch {torch.__version__}, threads {torch.get_num_threads()}")

    rows: list[dict[str, Any]] = []
    for n in sizes:
        for graph_name in [g.strip() for g in args.graph.split(",") if g.strip()]:
            row: dict[str, Any] = {"impl": "noeira", "num_envs": n, "graph": graph_name}
            try:
                row.update(throughput(backend.name, graph_name, n, iterations, overrides))
                horizon = row["horizon"]
                every = args.eval_every or 2 * n * horizon
                solves = [time_to_solve(backend.name, graph_name, n, s, every, max_steps(n), args.eval_episodes, overrides)
                          for s in seeds]
            except UserError as err:
                print(f"skip num_envs={n} graph={graph_name}: {err}")
                continue
            done = [s for s in solves if s["solved"]]
            row["solved"] = f"{len(done)}/{len(solves)}"
            row["solve_seconds"] = statistics.median(s["seconds"] for s in done) if done else None
            row["solve_steps"] = statistics.median(s["steps"] for s in done) if done else None
            rows.append(row)
            print(_fmt(row), flush=True)
            gc.collect()

    recipes: list[dict[str, Any]] = []
    for seed in seeds:
        r = {"impl": "noeira (noeira train, default recipe)", "seed": seed, **noeira_default(backend.name, seed),
             "threads": torch.get_num_threads()}
        recipes.append(r)
        print(_fmt_recipe(r), flush=True)
        if not args.no_sb3:
            if args.sb3_threads:
                torch.set_num_threads(args.sb3_threads)
            threads = torch.get_num_threads()
            s = sb3_zoo(seed, args.sb3_device)
            if s is None:
                print("stable-baselines3 not installed: SB3 skipped (pip install stable-baselines3)")
            else:
                s = {"impl": f"SB3 PPO (zoo recipe, {args.sb3_device})", "seed": seed, **s, "threads": threads}
                recipes.append(s)
                print(_fmt_recipe(s), flush=True)

    print("\nthroughput and time to solve (eval mean >= 475, evaluation time excluded)")
    print(f"{'impl':8} {'num_envs':>9} {'graph':7} {'steps/s':>12} {'solved':>7} {'solve s':>8} {'solve steps':>12}")
    for r in rows:
        print(_fmt(r))
    print("\nfixed-budget recipes (training wall time, then deterministic eval over 10 episodes)")
    print(f"{'impl':44} {'seed':>4} {'envs':>5} {'steps':>8} {'train s':>8} {'steps/s':>10} {'eval':>6} {'threads':>7}")
    for r in recipes:
        print(_fmt_recipe(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": backend.device_name(), "backend": backend.name, "torch": torch.__version__,
                       "rows": rows, "recipes": recipes}, f, indent=2)


def _fmt(r: dict[str, Any]) -> str:
    s = r.get("solve_seconds")
    st = r.get("solve_steps")
    return (f"{r['impl']:8} {r['num_envs']:>9} {r['graph']:7} {r['steps_per_second']:>12,.0f} {r['solved']:>7} "
            f"{(f'{s:.2f}' if s is not None else '-'):>8} {(f'{st:,.0f}' if st is not None else '-'):>12}")


def _fmt_recipe(r: dict[str, Any]) -> str:
    return (f"{r['impl']:44} {r['seed']:>4} {r['num_envs']:>5} {r['steps']:>8} {r['train_seconds']:>8.2f} "
            f"{r['steps_per_second']:>10,.0f} {r['eval']:>6.1f} {r.get('threads', '-'):>7}")


if __name__ == "__main__":
    main()
