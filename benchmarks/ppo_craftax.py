"""PPO on Craftax-Classic (or, with ``--env craftax``, the full game): training steps/s (env + policy
+ learning, everything counted) and score
(mean episode return, Craftax score, the 22 achievement success rates) as curves over env steps
and wall time, for each num_envs x graph x network x precision x optimizer asked for.

For each combination the run is built as the driver builds it (``resolve``: plugin defaults <
the recipes that apply < this script's ``--recipe`` layer < ``--set`` overrides), then:

- **throughput**: 4 warm-up iterations (a graph backend records on them, timed apart), then
  ``--iterations`` collect+learn iterations between two device synchronisations;
- **score** (with ``--seconds`` or ``--steps``): a fresh seeded run trained until the budget (its
  steps/s from the first statistics read to the last: warm-up and recording left out),
  the episode statistics read every ``--log-every`` iterations (each read is one host sync,
  counted in the wall time): mean return, Craftax score and each achievement's success rate
  at that point, over env steps and seconds of training (warm-up and recording included).

A table goes to stdout; with ``--json FILE`` one JSON line per combination (its config, the
commit, the device, throughput and the score curve) is appended to FILE when it ends; with
``--curve FILE`` each statistics read is appended as it is made, so a run stopped early (a time
limit, a lost machine) keeps its curve.

    python benchmarks/ppo_craftax.py --quick                                  # CPU smoke run
    python benchmarks/ppo_craftax.py --num-envs 16384 --graph eager,stream,device --recipe quality \\
        --seconds 0 --json craftax-h200.json                                  # steps/s table
    python benchmarks/ppo_craftax.py --num-envs 16384 --network mlp,lstm,mingru --precision fp32,bf16-master \\
        --optimizer adam,muon --steps 2e8 --json craftax-ablation.json        # equal steps
    python benchmarks/ppo_craftax.py --recipe quality --steps 1e9 --json craftax-1e9.json
    python benchmarks/ppo_craftax.py --recipe throughput --num-envs 65536 --graph device --seconds 0
    python benchmarks/ppo_craftax.py --env craftax --recipe hook --num-envs 8192 --steps 5e7   # the full game
    python benchmarks/ppo_craftax.py --recipe quality --seeds 0,1,2 --seconds 30 --iterations 0 \
        --json craftax-30s.json                                               # the 30-second score, 3 seeds

Every episode starts in a world of its own (the env generates one for each reset), so a seed's
score is over fresh worlds; with several ``--seeds`` a last line gives the mean and spread.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from typing import Any

import torch
from _common import build_ppo, time_iterations, wrap_loop
from _meta import commit

from noeira.core import registry
from noeira.core.api import get_backend
from noeira.core.driver import choose_graph, episode_metrics, resolve

ENV = "craftax-classic"

# agent layers per recipe (below --set and the command-line axes). quality: craftax.cu's
# policy (Linear(1345 -> 256) + three MinGRU layers of 256) and its tuned PPO (3 epochs x 8
# minibatches, 128-step segments, lr 5e-3 annealed, gamma 0.995, lambda 0.90, value coefficient
# 2.0, entropy 0.001), bf16 working weights on fp32 masters. throughput: one MinGRU layer of 128,
# short segments, one pass of 4 minibatches.
RECIPES: dict[str, dict[str, Any]] = {
    "hook": {},
    "quality": {"network": "mingru", "hidden_sizes": [256, 256, 256], "precision": "bf16-master", "horizon": 128,
                "update_epochs": 3, "num_minibatches": 8, "lr": 5e-3, "anneal_lr": True, "gamma": 0.995,
                "gae_lambda": 0.90, "vf_coef": 2.0, "ent_coef": 0.001, "max_grad_norm": 1.0, "clip_vloss": False},
    "throughput": {"network": "mingru", "hidden_sizes": [128], "precision": "bf16-master", "horizon": 32,
                   "update_epochs": 1, "num_minibatches": 4, "lr": 5e-3, "anneal_lr": True, "gamma": 0.995,
                   "gae_lambda": 0.90, "vf_coef": 2.0, "ent_coef": 0.001, "max_grad_norm": 1.0, "clip_vloss": False},
}



def _require_env() -> None:
    try:
        registry.load("envs", ENV)
    except Exception as exc:  # noqa: BLE001  (any failure to import the env: say so in one line)
        sys.exit(f"ppo_craftax: env {ENV!r} is not importable ({type(exc).__name__}: {exc}); "
                 "install noeira-envs with the Craftax-Classic env first")


def _config(backend_name: str, num_envs: int, seed: int, agent: dict[str, Any], total_steps: int,
            env: dict[str, Any] | None = None) -> Any:
    raw = {"backend": backend_name, "env": {"name": ENV, "num_envs": num_envs, **(env or {})},
           "agent": {"name": "ppo", **agent}, "run": {"seed": seed, "progress": False, "total_steps": total_steps}}
    return resolve(raw)


def throughput(cfg: Any, graph_name: str, iterations: int, profile: bool = False) -> dict[str, Any]:
    backend, env, agent = build_ppo(cfg, cfg.run.seed)
    collect, learn = wrap_loop(graph_name, agent, backend, env.capture_safe)
    env.reset(seed=cfg.run.seed)
    warm, dt = time_iterations(collect, learn, env, backend, iterations)
    # the split: collect and learn each between two synchronisations (two more iterations)
    split = {"collect_seconds": 0.0, "learn_seconds": 0.0}
    for _ in range(2):
        for key, fn in (("collect_seconds", lambda: collect(env)), ("learn_seconds", learn)):
            t = time.perf_counter()
            fn()
            backend.synchronize()
            split[key] += (time.perf_counter() - t) / 2
    out = {"steps_per_second": iterations * agent.steps_per_collect / dt, "warmup_seconds": warm,
           "steps_per_iteration": agent.steps_per_collect, **split}
    if profile:
        _profile(agent, env)
    env.close()
    return out


def _profile(agent: Any, env: Any) -> None:
    """One eager collect and one eager learn under torch.profiler: the 25 kernels with the most device time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    for name, fn in (("collect", lambda: agent.collect(env)), ("learn", agent.learn)):
        with profile(activities=activities) as prof:
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
        print(f"\nprofile of one eager {name}:")
        print(prof.key_averages().table(sort_by=key, row_limit=25, max_name_column_width=70))


def score(cfg: Any, graph_name: str, seconds: float, steps: float, log_every: int,
          curve_file: str | None = None) -> dict[str, Any]:
    backend, env, agent = build_ppo(cfg, cfg.run.seed)
    collect, learn = wrap_loop(graph_name, agent, backend, env.capture_safe)
    env.reset(seed=cfg.run.seed)
    env.pop_episode_stats()
    curve: list[dict[str, Any]] = []
    done, it, t0 = 0, 0, time.perf_counter()
    while True:
        collect(env)
        metrics = learn()
        done += agent.steps_per_collect
        it += 1
        elapsed = time.perf_counter() - t0
        over = (seconds > 0 and elapsed >= seconds) or (steps > 0 and done >= steps)
        if it % log_every == 0 or over:
            stats = env.pop_episode_stats()
            host = episode_metrics(env, backend.to_host({**metrics, **stats}), stats)
            elapsed = time.perf_counter() - t0
            if host["episodes"] > 0:
                curve.append({"env_steps": done, "seconds": elapsed, **host})
                if curve_file:  # each read on disk at once: a run cut short keeps its curve
                    with open(curve_file, "a") as f:
                        f.write(json.dumps({"seed": cfg.run.seed, **curve[-1]}) + "\n")
        if over:
            break
    env.close()
    last = curve[-1] if curve else {}
    achievements = {k.removeprefix("episode_achievement_"): v for k, v in last.items()
                    if k.startswith("episode_achievement_")}
    # training speed over the budget after the first read (warm-up and recording left out; the reads counted)
    first = curve[0] if len(curve) > 1 else {}
    rate = ((last["env_steps"] - first["env_steps"]) / (last["seconds"] - first["seconds"])) if first else None
    return {"env_steps": done, "seconds": time.perf_counter() - t0, "steps_per_second": rate,
            "episode_return": last.get("episode_return"),
            "craftax_score": last.get("craftax_score"), "achievements": achievements, "curve": curve}


def _csv(text: str, kind: type = str) -> list[Any]:
    return [kind(float(x)) if kind is int else kind(x) for x in text.split(",") if x]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--num-envs", default="16384", help="comma list")
    p.add_argument("--graph", default="", help="comma list of graph backends (default: the driver's choice)")
    p.add_argument("--network", default="", help="comma list (default: the recipe's)")
    p.add_argument("--precision", default="", help="comma list: fp32,bf16,bf16-master (default: the recipe's)")
    p.add_argument("--optimizer", default="", help="comma list: adam,muon,rmsprop (default: the recipe's)")
    p.add_argument("--hidden", default="", help="hidden_sizes, e.g. 256x3 or 512,512 (default: the recipe's)")
    p.add_argument("--obs", default="", help="comma list of env.obs: symbolic,compact (default: the env's)")
    p.add_argument("--recipe", default="quality", choices=sorted(RECIPES),
                   help="agent layer above the installed recipes (hook: those alone)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="agent keys over everything (TOML values)")
    p.add_argument("--iterations", type=int, default=20, help="timed iterations of the throughput phase (0: skip)")
    p.add_argument("--seconds", type=float, default=30.0, help="score phase: wall-time budget (0: none)")
    p.add_argument("--steps", type=float, default=0.0, help="score phase: env-step budget (0: none)")
    p.add_argument("--total-steps", type=float, default=1e9, help="the run length the schedules span")
    p.add_argument("--log-every", type=int, default=10, help="score phase: iterations between statistics reads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default="", help="comma list of seeds, one run each (default: --seed)")
    p.add_argument("--json", help="append one JSON line per combination here")
    p.add_argument("--curve", help="score phase: append each statistics read here as a JSON line when it is "
                   "made (a run stopped early keeps its curve)")
    p.add_argument("--profile", action="store_true", help="after the throughput phase: the top kernels of one "
                   "eager collect and one eager learn (torch.profiler)")
    p.add_argument("--quick", action="store_true", help="a small CPU-sized run (64 envs, short segments, 10 s)")
    p.add_argument("--env", default=ENV, help="craftax-classic (default) or craftax (the full game; use --recipe hook)")
    args = p.parse_args()
    globals()["ENV"] = args.env
    _require_env()

    from noeira.core.config import parse_overrides

    extra = parse_overrides([f"agent.{kv}" for kv in args.set]).get("agent", {})
    if args.quick:
        args.num_envs, args.iterations = "64" if args.num_envs == "16384" else args.num_envs, min(args.iterations, 3)
        args.seconds = min(args.seconds, 10.0) if args.seconds else 0.0
        args.log_every = min(args.log_every, 2)
        extra = {"horizon": 16, "hidden_sizes": [64, 64], "num_minibatches": 4, "torch_threads": 1, **extra}
    if args.hidden:
        w, _, n = args.hidden.partition("x")
        extra["hidden_sizes"] = [int(w)] * int(n) if n else _csv(args.hidden, int)
    backend = get_backend(args.backend)
    axes = {
        "num_envs": _csv(args.num_envs, int),
        "graph": _csv(args.graph) or [choose_graph(resolve({"backend": backend.name}).graph, backend)],
        "network": _csv(args.network) or [None],
        "precision": _csv(args.precision) or [None],
        "optimizer": _csv(args.optimizer) or [None],
        "obs": _csv(args.obs) or [None],
        "seed": _csv(args.seeds, int) or [args.seed],
    }
    device = torch.cuda.get_device_name() if backend.device.type == "cuda" else "cpu"
    print(f"PPO on {ENV}, {backend.name} ({device}), recipe {args.recipe}, commit {commit()}")
    header = (f"{'envs':>7} {'graph':>7} {'network':>7} {'precision':>11} {'optim':>6} {'obs':>8} {'seed':>4} {'steps/s':>10} "
              f"{'collect s':>9} {'learn s':>8} "
              f"{'score steps':>11} {'seconds':>8} {'score sps':>9} {'return':>7} {'craftax':>8}")
    print(header)
    rows = []
    for num_envs, graph, network, precision, optimizer, obs, seed in itertools.product(*axes.values()):
        agent = {**RECIPES[args.recipe], **extra}
        for key, value in (("network", network), ("precision", precision), ("optimizer", optimizer)):
            if value is not None:
                agent[key] = value
        if agent.get("optimizer") == "muon" and "lr" not in extra:
            agent["lr"] = 0.02  # Muon's orthogonalised step wants a larger rate than Adam's
        cfg = _config(backend.name, num_envs, seed, agent, int(args.total_steps), {"obs": obs} if obs else None)
        a = cfg.agent.config
        obs = cfg.env.config.obs
        row: dict[str, Any] = {"num_envs": num_envs, "graph": graph, "obs": obs, "network": a.network, "precision": a.precision,
                               "optimizer": a.optimizer, "hidden_sizes": list(a.hidden_sizes), "horizon": a.horizon,
                               "recipe": args.recipe, "seed": seed, "agent": agent, "backend": backend.name, "device": device,
                               "commit": commit(), "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv)}
        if args.iterations > 0:
            row.update(throughput(cfg, graph, args.iterations, args.profile))
        if args.seconds > 0 or args.steps > 0:
            row["score"] = score(cfg, graph, args.seconds, args.steps, args.log_every, args.curve)
        s = row.get("score", {})
        fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        print(f"{num_envs:>7} {graph:>7} {a.network:>7} {a.precision:>11} {a.optimizer:>6} {obs:>8} {seed:>4} "
              f"{fmt(row.get('steps_per_second'), '10.3g')} {fmt(row.get('collect_seconds'), '9.3f')} "
              f"{fmt(row.get('learn_seconds'), '8.3f')} {fmt(s.get('env_steps'), '11.3g')} "
              f"{fmt(s.get('seconds'), '8.1f')} {fmt(s.get('steps_per_second'), '9.3g')} "
              f"{fmt(s.get('episode_return'), '7.2f')} "
              f"{fmt(s.get('craftax_score'), '8.2f')}", flush=True)
        rows.append(row)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    scores = [r["score"]["episode_return"] for r in rows if r.get("score", {}).get("episode_return") is not None]
    if len(axes["seed"]) > 1 and scores:
        mean = sum(scores) / len(scores)
        sd = (sum((x - mean) ** 2 for x in scores) / max(1, len(scores) - 1)) ** 0.5
        print(f"\nmean return over {len(scores)} runs (seeds {','.join(map(str, axes['seed']))}): {mean:.2f} "
              f"(sd {sd:.2f}; each {', '.join(f'{x:.2f}' for x in scores)})")
    for row in rows:
        ach = row.get("score", {}).get("achievements")
        if ach:
            print(f"\nachievement success rates ({row['network']}, {row['precision']}, {row['optimizer']}, "
                  f"{row['num_envs']} envs, {row['graph']}):")
            for name, rate in ach.items():
                print(f"  {name:<24} {rate:6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
