"""MuJoCo locomotion against the published scores: each agent's recipe (``noeira.agents.mujoco_recipes``)
trained for a wall-clock budget, then the speed of its loop recorded (``stream``) against eager.

For each agent x env x seed the run is built as ``noeira train agent=A env=E run.seed=S`` resolves
it (the recipe of ``--backend``, or ``--recipe-of``'s values layered as user settings), and trained
with collect and learn recorded by ``--graph`` until ``--budget`` seconds of training or the
recipe's ``run.total_steps`` (``--max-steps``). It reports:

- **ret@1M**: the deterministic evaluation (``--eval-episodes`` envs, 1000-step episodes) at the
  first log point at or past 1M env steps (the anchors' budget: SAC/TD3 at 1M steps);
- **final**: the evaluation at the end of the budget, and the steps and seconds trained;
- **t->anchor**: the seconds of training until an evaluation first reached each anchor's score on
  the env (SB3 zoo's SAC, CleanRL's TD3 at 1M steps; ``ANCHORS``), and the env steps then;
  evaluations run every ``--eval-every`` seconds of training (not counted);
- **train ret**: the last mean training-episode return (the exploring policy) and its reward
  terms (``episode_reward_forward`` ...; the env's episode statistics, in the JSON).

Then, per agent x env, the speed of the loop (``--speed-iters`` iterations after the warm-up and
recording, the warm-up's updates computed as every update is): **env steps/s** and **updates/s**
(gradient updates: ``updates_per_step`` per iteration off-policy, epochs x minibatches for PPO)
under ``--graph`` and under ``eager``, and their ratio.

    python benchmarks/mujoco_learning.py --quick                                   # CPU plumbing check
    python benchmarks/mujoco_learning.py --quick --recipe-of cuda --agents td3 --envs halfcheetah
    python benchmarks/mujoco_learning.py --backend cuda --agents td3 --envs halfcheetah --budget 240 \\
        --json mujoco-h200.json                                                      # the H200 row

On the CPU, ``--quick`` shrinks everything (4 envs of 100-step episodes, small networks and
batches, a 20 s budget): it checks the plumbing, nothing reaches an anchor.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import _meta
import torch
from _common import wrap_loop

from noeira.agents.mujoco_recipes import ANCHORS, LOCOMOTION
from noeira.core.api import get_backend, get_graph_backend
from noeira.core.config import parse_overrides
from noeira.core.driver import build, build_env, evaluate, resolve
from noeira.core.errors import UserError
from noeira.core.recipes import find_recipes, merged_recipe

AGENTS = ("td3", "sac", "ppo", "redq")
ONE_MILLION = 1_000_000

QUICK = {
    "env": {"num_envs": 4, "max_episode_steps": 100},
    "offpolicy": {"hidden": [32, 32], "critic_hidden": [32, 32], "batch_size": 64, "buffer_size": 20_000,
                  "learning_starts": 256, "updates_per_step": 4},
    "ppo": {"horizon": 64, "num_minibatches": 4, "update_epochs": 2, "hidden_sizes": [32, 32]},
}
"""--quick: a CPU plumbing check at toy sizes."""


def run_config(agent: str, env: str, seed: int, args: argparse.Namespace) -> Any:
    """The resolved config: ``--backend``'s recipe, or ``--recipe-of``'s values as user settings
    (physics switched to the backend's; fp32 on a CPU), then ``--quick``'s sizes and ``--set`` on top."""
    raw: dict[str, Any] = {"backend": args.backend, "env": {"name": env}, "agent": {"name": agent},
                           "run": {"seed": seed, "progress": False}}
    if args.recipe_of:
        values = merged_recipe(find_recipes(agent, env, args.recipe_of))
        for key in ("env", "agent", "run"):
            raw[key] = {**values.get(key, {}), **raw[key]}
        on_cuda = get_backend(args.backend).name == "cuda"
        raw["env"]["physics"] = "mujoco-warp" if on_cuda else "mujoco"
        if not on_cuda and "precision" in raw["agent"]:
            raw["agent"]["precision"] = "fp32"  # bf16 autocast only slows a CPU down
    if args.quick:
        raw["env"].update(QUICK["env"])
        raw["agent"].update(QUICK["ppo"] if agent == "ppo" else QUICK["offpolicy"])
        if agent == "redq":
            raw["agent"]["policy_delay"] = QUICK["offpolicy"]["updates_per_step"]
    for key, value in parse_overrides(args.set).items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return resolve(raw)


def updates_per_iteration(agent: Any, cfg: Any) -> int:
    """Gradient updates one learn() call makes."""
    c = cfg.agent.config
    return c.updates_per_step if hasattr(c, "updates_per_step") else int(agent.num_updates)


def _free(*objs: Any) -> None:
    for o in objs:
        close = getattr(o, "close", None)
        if close is not None:
            close()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def train_run(agent_name: str, env_name: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One seed trained for the budget; its learning curve and the anchor crossings."""
    cfg = run_config(agent_name, env_name, seed, args)
    backend = get_backend(cfg.backend)
    t_start = time.perf_counter()
    pieces = build(cfg, args.graph, backend)
    env, agent = pieces.env, pieces.agent
    eval_env = build_env(cfg, backend, num_envs=args.eval_episodes, seed=seed + 1)
    collect, learn = wrap_loop(args.graph, pieces.agent, pieces.backend, pieces.capture_env)
    steps_per_iter = agent.steps_per_collect
    max_steps = args.max_steps or cfg.run.total_steps
    anchors = {src: score for src, table in ANCHORS.items() for e, (score, _) in table.items() if e == env_name}
    crossed: dict[str, dict[str, float] | None] = dict.fromkeys(anchors)
    curve: list[dict[str, Any]] = []
    steps, train_s, evals_s = 0, 0.0, 0.0
    next_eval, ret_1m = args.eval_every, None

    def evaluate_now() -> float:
        nonlocal evals_s
        t = time.perf_counter()
        ret = evaluate(agent, eval_env, args.eval_episodes, seed=seed + 1)["mean_return"]
        evals_s += time.perf_counter() - t
        for src, score in anchors.items():
            if crossed[src] is None and ret >= score:
                crossed[src] = {"seconds": train_s, "env_steps": steps}
        return ret

    while steps < max_steps and train_s < args.budget:
        t = time.perf_counter()
        for _ in range(args.log_every):
            collect(env)
            learn()
            steps += steps_per_iter
            if steps >= max_steps:
                break
        backend.synchronize()
        train_s += time.perf_counter() - t
        point: dict[str, Any] = {"env_steps": steps, "seconds": round(train_s, 3)}
        point.update(episode_means(backend.to_host(env.pop_episode_stats())))
        curve.append(point)
        if ret_1m is None and steps >= ONE_MILLION:
            ret_1m = evaluate_now()
            point["eval_return"] = ret_1m
        elif train_s >= next_eval:
            point["eval_return"] = evaluate_now()
        if train_s >= next_eval:
            next_eval = train_s + args.eval_every
        if "eval_return" in point:  # one line per evaluation: a run cut by a time limit still shows its curve
            print(f"  {agent_name} {env_name} seed {seed}: {steps:,} steps, {train_s:.0f} s, "
                  f"eval {point['eval_return']:.1f}, train {_last_train(curve):.1f}", flush=True)
    final = evaluate_now()
    result = {
        "agent": agent_name, "env": env_name, "seed": seed, "backend": backend.name, "graph": args.graph,
        "num_envs": cfg.num_envs, "recipes": list(cfg.recipes), "recipe_notes": list(cfg.recipe_notes),
        "env_steps": steps, "train_seconds": train_s, "eval_seconds": evals_s,
        "wall_seconds": time.perf_counter() - t_start, "return_at_1m": ret_1m, "final_return": final,
        "anchors": {src: {"score": anchors[src], "reached": crossed[src]} for src in anchors},
        "train_return": _last_train(curve, None),
        "curve": curve, "config": cfg.to_dict(),
    }
    _free(eval_env, env)
    return result


def _last_train(curve: list[dict[str, Any]], default: Any = float("nan")) -> Any:
    """The latest logged mean training-episode return (intervals in which no episode ended log none)."""
    return next((p["train_return"] for p in reversed(curve) if "train_return" in p), default)


def episode_means(stats: dict[str, Any]) -> dict[str, float]:
    """The mean training-episode return (``train_return``), length and reward terms of the episodes
    that ended since the last read (``pop_episode_stats``'s sums); empty when none did."""
    count = float(stats["count"])
    if count <= 0:
        return {}
    means = {k[: -len("_sum")]: float(v) / count for k, v in stats.items() if k.endswith("_sum")}
    out = {"train_return": means.pop("return"), "episodes": count}
    out.update(means)
    return out


def speed_run(agent_name: str, env_name: str, graph_name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Env steps and gradient updates per second of collect + learn under ``graph_name``."""
    cfg = run_config(agent_name, env_name, 0, args)
    backend = get_backend(cfg.backend)
    pieces = build(cfg, graph_name, backend)
    collect, learn = wrap_loop(graph_name, pieces.agent, pieces.backend, pieces.capture_env)
    graph = get_graph_backend(graph_name)
    warm = int(getattr(graph, "warmup", 0)) + 2
    for _ in range(warm):
        collect(pieces.env)
        learn()
    backend.synchronize()
    t = time.perf_counter()
    for _ in range(args.speed_iters):
        collect(pieces.env)
        learn()
    backend.synchronize()
    dt = time.perf_counter() - t
    upd = updates_per_iteration(pieces.agent, cfg)
    row = {"agent": agent_name, "env": env_name, "graph": graph_name, "num_envs": cfg.num_envs,
           "env_steps_per_s": args.speed_iters * pieces.agent.steps_per_collect / dt,
           "updates_per_s": args.speed_iters * upd / dt, "updates_per_iteration": upd,
           "capture_env": pieces.capture_env}
    _free(pieces.env)
    del pieces
    _free()
    return row


def _fmt(x: Any, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def print_tables(runs: list[dict[str, Any]], speeds: list[dict[str, Any]], device: str) -> None:
    print(f"\ndevice: {device}, torch {torch.__version__}")
    if runs:
        sources = sorted({s for r in runs for s in r["anchors"]})
        head = ["agent", "env", "seed", "envs", "steps", "train s", "ret@1M", "final", "train ret",
                *(f"t->{s} anchor" for s in sources)]
        rows = [head]
        for r in runs:
            cells = [r["agent"], r["env"], str(r["seed"]), _fmt(r["num_envs"]), _fmt(r["env_steps"]),
                     _fmt(r["train_seconds"], ".1f"), _fmt(r["return_at_1m"], ",.1f"), _fmt(r["final_return"], ",.1f"),
                     _fmt(r["train_return"], ",.1f")]
            for s in sources:
                a = r["anchors"].get(s)
                if a is None:
                    cells.append("")
                else:
                    hit = a["reached"]
                    cells.append(f"{a['score']:,.0f}: " + ("no" if hit is None else
                                                          f"{hit['seconds']:.0f} s ({hit['env_steps']:,} st)"))
            rows.append(cells)
        _print(rows)
    if speeds:
        print()
        rows = [["agent", "env", "envs", "graph", "env steps/s", "updates/s", "x eager"]]
        eager = {(s["agent"], s["env"]): s for s in speeds if s["graph"] == "eager"}
        for s in speeds:
            base = eager.get((s["agent"], s["env"]))
            ratio = s["env_steps_per_s"] / base["env_steps_per_s"] if base and s is not base else None
            rows.append([s["agent"], s["env"], _fmt(s["num_envs"]), s["graph"], _fmt(s["env_steps_per_s"]),
                         _fmt(s["updates_per_s"], ",.1f"), _fmt(ratio, ".1f")])
        _print(rows)


def _print(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j < 2 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto", help="cpu | cuda | auto")
    p.add_argument("--graph", default="", help="graph backend of the learning runs (default: stream on cuda, else eager)")
    p.add_argument("--agents", default="td3", help=f"comma list of {', '.join(AGENTS)}")
    p.add_argument("--envs", default="halfcheetah", help=f"comma list of {', '.join(LOCOMOTION)}")
    p.add_argument("--seeds", default="1", help="a count (3: seeds 0-2) or a comma list (0,2)")
    p.add_argument("--budget", type=float, default=600.0, help="seconds of training per run (default 600)")
    p.add_argument("--max-steps", type=int, default=0, help="env steps per run (default: the recipe's total_steps)")
    p.add_argument("--eval-every", type=float, default=30.0, help="seconds of training between evaluations")
    p.add_argument("--eval-episodes", type=int, default=16, help="envs of each deterministic evaluation")
    p.add_argument("--log-every", type=int, default=0, help="iterations between host reads (default: 1 cpu, 20 cuda)")
    p.add_argument("--speed-iters", type=int, default=0, help="timed iterations per speed row (default 50; --quick 5)")
    p.add_argument("--no-train", action="store_true", help="only the speed table")
    p.add_argument("--no-speed", action="store_true", help="only the learning runs")
    p.add_argument("--recipe-of", default="", help="use this backend's recipe (cuda: the massively parallel one) here")
    p.add_argument("--quick", action="store_true", help="CPU plumbing check: toy sizes, 20 s budget")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides, as noeira train takes them")
    p.add_argument("--json", default="", help="write every run, curve and speed row here")
    args = p.parse_args(argv)
    backend = get_backend(args.backend)
    args.backend = backend.name
    args.graph = args.graph or ("stream" if backend.name == "cuda" else "eager")
    if args.quick:
        args.budget = min(args.budget, 20.0)
        args.eval_episodes = min(args.eval_episodes, 2)
        args.eval_every = min(args.eval_every, 10.0)
    args.log_every = args.log_every or (20 if backend.name == "cuda" else 1)
    args.speed_iters = args.speed_iters or (5 if args.quick else 50)
    if backend.name == "cpu":
        torch.set_num_threads(1)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    seeds = list(range(int(args.seeds))) if "," not in args.seeds else [int(s) for s in args.seeds.split(",") if s]
    if not seeds and not args.no_train:  # `--seeds 0` is a count of none, not seed 0
        p.error(f"--seeds {args.seeds}: no seeds to train (a count >= 1, or a comma list such as 0, or 0,2)")
    runs: list[dict[str, Any]] = []
    speeds: list[dict[str, Any]] = []
    for a in agents:
        for e in envs:
            for s in () if args.no_train else seeds:
                r = train_run(a, e, s, args)
                runs.append(r)
                print(f"{a} {e} seed {s}: {r['env_steps']:,} steps in {r['train_seconds']:.0f} s, "
                      f"final {r['final_return']:.1f}, at 1M {_fmt(r['return_at_1m'], '.1f')}", flush=True)
            if not args.no_speed:
                for g in dict.fromkeys([args.graph, "eager"]):
                    try:
                        speeds.append(speed_run(a, e, g, args))
                    except UserError as err:
                        print(f"skip speed {a} {e} {g}: {err}")
                        continue
                    print(f"{a} {e} {g}: {speeds[-1]['env_steps_per_s']:,.0f} env steps/s, "
                          f"{speeds[-1]['updates_per_s']:,.1f} updates/s", flush=True)
    print_tables(runs, speeds, backend.device_name())
    if args.json:
        out = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
               "commit": _meta.commit(), "device": backend.device_name(), "backend": backend.name,
               "torch": torch.__version__, "cpu_count": os.cpu_count(), "args": vars(args), "runs": runs,
               "speed": speeds}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"-> {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
