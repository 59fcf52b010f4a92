"""The memory suite (``noeira.envs.memory``) against the networks: does PPO learn to remember?
And how fast do the recurrent networks train?

``learn``: every task x setting x network x seed, trained from the recipes exactly as
``noeira train env=TASK agent.network=NET run.seed=S backend=B run.eval_episodes=100`` resolves
them (the ``short`` setting: each task's defaults, memory <= 16 steps; ``long``: the options in
``LONG``, memory >= 64 steps, with a longer horizon and budget), in parallel worker processes
(one torch thread each). Each run reports the final deterministic evaluation (100 episodes)
against the env's ``chance_return`` (the best policy without memory) and ``best_return``
(perfect memory); it **solves** when the evaluation reaches ``chance + 0.9 (best - chance)``.
**steps to solve**: the first log interval whose mean training return (the sampling policy)
reaches that threshold. A (task, setting, network) solves when >= 4 of 5 seeds do.

    python benchmarks/memory.py learn                                   # short settings, 3 networks, 5 seeds
    python benchmarks/memory.py learn --tasks t-maze --networks mingru --seeds 1
    python benchmarks/memory.py learn --setting long --backend cuda --workers 1
    python benchmarks/memory.py learn --tasks t-maze --networks lstm --set agent.network_options.max_timescale=64

``speed``: training steps/s (collect + learn, the recipe's PPO on ``repeat-first``) of
``lstm`` and ``mingru`` at 16 envs on the CPU, beside a plain loop doing the same work with
``torch.nn.LSTM`` (CleanRL's recurrent PPO: the rollout steps the LSTM one step at a time with
its state zeroed at episode starts; the update replays each env's segment from its stored state
step by step, the same sizes, epochs and minibatches, the same Adam).

    python benchmarks/memory.py speed
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import concurrent.futures as cf  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

TASKS = ("repeat-first", "repeat-previous", "count-recall", "t-maze", "autoencode")
NETWORKS = ("mlp", "lstm", "mingru")
LONG: dict[str, dict[str, Any]] = {
    # memory >= 64 steps; the horizon (truncated BPTT) spans an episode or more
    "repeat-first": {"env": {"length": 65}, "agent": {"horizon": 128}},
    "repeat-previous": {"env": {"k": 64, "answers": 32}, "agent": {"horizon": 128}},
    "count-recall": {"env": {"length": 65}, "agent": {"horizon": 128}},
    "t-maze": {"env": {"length": 64}, "agent": {"horizon": 256}},
    "autoencode": {"env": {"length": 32}, "agent": {"horizon": 128}},
}
"""The long setting's overrides per task (``run.total_steps`` is ``--long-steps``)."""


def run_config(task: str, network: str, seed: int, setting: str, backend: str, eval_episodes: int = 100,
               total_steps: int | None = None, overrides: tuple[str, ...] = ()) -> Any:
    """The resolved config of one run (the recipes under the setting's overrides, then
    ``overrides``: ``noeira train``'s KEY=VALUE, e.g. ``agent.network_options.max_timescale=64``)."""
    from noeira.core.config import deep_merge, parse_overrides
    from noeira.core.driver import resolve

    raw: dict[str, Any] = {"backend": backend, "env": {"name": task}, "agent": {"name": "ppo", "network": network},
                           "run": {"seed": seed, "progress": False, "checkpoint_minutes": 0,
                                   "eval_episodes": eval_episodes}}
    if setting == "long":
        raw = deep_merge(raw, LONG[task])
    if total_steps is not None:
        raw["run"]["total_steps"] = total_steps
    return resolve(deep_merge(raw, parse_overrides(overrides)))


def first_crossing(metrics: Path, threshold: float) -> tuple[int | None, float | None]:
    """``(env_steps, seconds)`` of the first logged interval whose mean training return reaches
    ``threshold`` (over at least 16 episodes)."""
    if not metrics.is_file():
        return None, None
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        ret = row.get("episode_return")
        if ret is not None and row.get("episodes", 0) >= 16 and ret >= threshold:
            return int(row["env_steps"]), float(row["time"])
    return None, None


def run_one(task: str, network: str, seed: int, setting: str, backend: str, out_dir: str,
            total_steps: int | None, time_budget: float | None = None,
            deadline: float | None = None, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """Train one seed in this (fresh) process; the row of the results. With ``time_budget``
    (seconds of training), the run stops at the end of the iteration past it (the driver's
    SIGTERM stop, with a checkpoint) and that policy is evaluated as the final one would be.
    ``deadline`` (a ``time.time()``): the budget is cut to what is left of it, and a run that
    would start with under 30 s left is not started (a row with an error)."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    row: dict[str, Any] = {"task": task, "network": network, "seed": seed, "setting": setting, "backend": backend,
                           "set": list(overrides)}
    timer = None
    if deadline is not None:
        left = deadline - time.time()
        if left < 30:
            row.update({"solved": False, "final_eval": None, "steps_to_solve": None, "wall_seconds": 0.0,
                        "cpu_seconds": 0.0, "error": "not started: the --deadline had passed"})
            return row
        time_budget = min(time_budget or left, left)
    try:
        import attrs
        import torch

        from noeira.core import make_env
        from noeira.core.driver import eval_run, train
        from noeira.core.errors import Terminated

        torch.set_num_threads(1)
        cfg = run_config(task, network, seed, setting, backend, total_steps=total_steps, overrides=overrides)
        env = make_env(task, num_envs=1, backend="cpu", seed=0, **attrs.asdict(cfg.env.config))
        bounds = env.describe()
        threshold = bounds["chance_return"] + 0.9 * (bounds["best_return"] - bounds["chance_return"])
        run_dir = Path(out_dir) / f"{task}-{setting}-{network}-s{seed}"
        if time_budget:
            # the driver stops at an iteration's end on SIGTERM; outside training one is ignored
            signal.signal(signal.SIGTERM, lambda *_: None)
            timer = threading.Timer(time_budget, os.kill, (os.getpid(), signal.SIGTERM))
            timer.daemon = True
            timer.start()
        try:
            record = train(cfg, run_dir=run_dir, overwrite=True)
            final, stopped = record["final_eval"]["mean_return"], False
        except Terminated:
            record = json.loads((run_dir / "record.json").read_text())
            final, stopped = eval_run(run_dir, episodes=100)["mean_return"], True
        finally:
            if timer is not None:
                timer.cancel()
        steps, seconds = first_crossing(run_dir / "metrics.jsonl", threshold)
        if task == "count-recall":
            row["count_recall"] = count_reach(run_dir)
        row.update({
            "memory_steps": bounds["memory_steps"], "chance": bounds["chance_return"], "best": bounds["best_return"],
            "threshold": threshold, "final_eval": final, "solved": final >= threshold,
            "steps_to_solve": steps, "seconds_to_solve": seconds, "total_steps": record["env_steps"],
            "stopped_at_time_budget": stopped, "train_seconds": record.get("train_seconds"),
            "steps_per_second": record.get("steps_per_second") or _logged_speed(run_dir / "metrics.jsonl"),
            "hidden_sizes": list(cfg.agent.config.hidden_sizes), "recipes": list(cfg.recipes), "error": None,
        })
    except Exception as err:  # one failed run is a row of the table
        row.update({"solved": False, "final_eval": None, "steps_to_solve": None,
                    "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()})
    row["wall_seconds"] = time.perf_counter() - t0
    row["cpu_seconds"] = time.process_time() - cpu0
    return row


def count_reach(run_dir: Path, envs: int = 512, episodes_per_env: int = 4) -> dict[str, Any]:
    """``count-recall``: the trained policy's accuracy by the true count (deterministic, a fresh
    seed), and the highest count it answers right at least half the time (``reach``): a policy
    can score well and never answer the rare high counts."""
    import torch

    from noeira.core.driver import load_run

    run = load_run(run_dir, num_envs=envs, seed_offset=7)
    env, agent = run.env, run.agent
    try:
        n = env.config.length
        right, seen = torch.zeros(n + 2), torch.zeros(n + 2)
        obs, state = env.reset(seed=run.seed), agent.initial_state(envs)
        done = torch.ones(envs, dtype=torch.bool, device=env.device)
        with torch.no_grad():
            for _ in range(episodes_per_env * n):
                s = env.get_state()
                count = s["counts"].gather(1, s["query"][:, None]).squeeze(1).cpu()
                action, state = agent.act(obs, state, done, deterministic=True)
                right.index_add_(0, count, (action.cpu() == count).float())
                seen.index_add_(0, count, torch.ones(envs))
                r = env.step(action)
                obs, done = r.obs, r.terminated | r.truncated
    finally:
        run.close()
    acc = {c: round(float(right[c] / seen[c]), 3) for c in range(n + 2) if seen[c] > 0}
    reach = max([c for c, a in acc.items() if a >= 0.5], default=-1)
    return {"accuracy_by_count": acc, "answers_by_count": {c: int(seen[c]) for c in acc}, "reach": reach}


def _logged_speed(metrics: Path) -> float | None:
    """Env steps per second of training from the metrics log (a run stopped by its time budget
    writes no ``steps_per_second`` in its record)."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.is_file() else []
    rows = [r for r in rows if "time" in r and "env_steps" in r]
    return rows[-1]["env_steps"] / rows[-1]["time"] if rows and rows[-1]["time"] > 0 else None


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = sorted({(r["task"], r["setting"], r["network"]) for r in rows},
                  key=lambda k: (TASKS.index(k[0]), k[1] != "short", NETWORKS.index(k[2]) if k[2] in NETWORKS else 9))
    for task, setting, network in keys:
        every = [r for r in rows if (r["task"], r["setting"], r["network"]) == (task, setting, network)]
        rs = [r for r in every if not str(r.get("error") or "").startswith("not started")]
        n, solved = len(rs), sum(bool(r["solved"]) for r in rs)
        ok = [r for r in rs if r.get("error") is None]
        evals = [r["final_eval"] for r in ok]
        out.append({
            "task": task, "setting": setting, "network": network, "seeds": n, "solved": solved,
            "solves": n > 0 and solved >= -(-4 * n // 5),
            "memory_steps": ok[0]["memory_steps"] if ok else None,
            "chance": ok[0]["chance"] if ok else None, "best": ok[0]["best"] if ok else None,
            "mean_final_eval": _mean(evals), "std_final_eval": statistics.pstdev(evals) if evals else None,
            "median_final_eval": _median(evals),
            "final_evals": [r.get("final_eval") for r in sorted(rs, key=lambda r: r["seed"])],
            "median_steps_to_solve": _median([r["steps_to_solve"] for r in ok if r["steps_to_solve"] is not None]),
            "crossed": sum(r.get("steps_to_solve") is not None for r in ok),
            "total_steps": _median([r["total_steps"] for r in ok]),
            "stopped_at_time_budget": sum(bool(r.get("stopped_at_time_budget")) for r in ok),
            "median_steps_per_second": _median([r["steps_per_second"] for r in ok if r.get("steps_per_second")]),
            "median_wall_seconds": _median([r["wall_seconds"] for r in rs]),
            "errors": [r["error"] for r in rs if r.get("error")], "not_started": len(every) - len(rs),
            "count_reach": [r["count_recall"]["reach"] for r in sorted(ok, key=lambda r: r["seed"]) if "count_recall" in r],
        })
    return out


def _fmt(x: Any, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(summary: list[dict[str, Any]]) -> None:
    """One row per (task, setting, network): seeds solved (NO: fewer than 4 in 5), the final
    evaluations' mean and spread over seeds, chance and best, the median steps to solve over the
    seeds whose training return crossed the threshold (their count in brackets when not all did),
    the steps trained (median) and training steps/s (median)."""
    head = ("task", "setting", "memory", "network", "solved", "eval mean (sd)", "chance", "best", "steps to solve",
            "steps", "steps/s")
    lines = [head]
    for s in summary:
        crossed = "" if s["crossed"] in (0, s["seeds"]) else f" ({s['crossed']})"
        stopped = " (time)" if s["stopped_at_time_budget"] else ""
        ev = "-" if s["mean_final_eval"] is None else f"{s['mean_final_eval']:.3f} ({s['std_final_eval']:.3f})"
        lines.append((s["task"], s["setting"], _fmt(s["memory_steps"]), s["network"],
                      f"{s['solved']}/{s['seeds']}" + ("" if s["solves"] else " NO"), ev,
                      _fmt(s["chance"], ".3f"), _fmt(s["best"], ".1f"), _fmt(s["median_steps_to_solve"]) + crossed,
                      _fmt(s["total_steps"]) + stopped, _fmt(s["median_steps_per_second"])))
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    for i, row in enumerate(lines):
        print("  ".join(str(c).ljust(w) if j in (0, 1, 3) else str(c).rjust(w)
                        for j, (c, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for s in summary:
        for err in s["errors"]:
            print(f"error: {s['task']} {s['setting']} {s['network']}: {err}")
        reach = s.get("count_reach")
        if reach:
            print(f"count-recall {s['setting']} {s['network']}: the highest count answered right (at least half the "
                  f"time), by seed: {', '.join(map(str, reach))}")
        if s["not_started"]:
            print(f"not started (--deadline): {s['task']} {s['setting']} {s['network']}: {s['not_started']} seeds")


def _bad(msg: str) -> SystemExit:
    """A one-line error on stderr and exit status 2 (bad arguments), to raise."""
    print(f"memory.py: {msg}", file=sys.stderr)
    return SystemExit(2)


def parse_seeds(text: str) -> list[int]:
    """``5`` (a count: seeds 0-4), ``0,3`` (a list; ``0,`` is seed 0 alone) or ``1-4`` (a range)."""
    text = text.strip()
    try:
        if "," in text:
            return [int(x) for x in text.split(",") if x.strip()]
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return list(range(lo, hi + 1))
        return list(range(int(text)))
    except ValueError:
        raise _bad(f"--seeds: {text!r} is not a count (5), a list (0,3) or a range (1-4)") from None


def pick_part(tasks: list[str], part: str) -> list[str]:
    """The tasks of part ``K/N`` (every N-th task from the K-th: the halves of ``1/2`` and ``2/2``
    are (repeat-first, count-recall, autoencode) and (repeat-previous, t-maze))."""
    try:
        k, n = (int(x) for x in part.split("/"))
        assert 1 <= k <= n
    except (ValueError, AssertionError):
        raise _bad(f"--part: {part!r} is not K/N with 1 <= K <= N (1/2, 2/2)") from None
    return tasks[k - 1::n]


def _cost(run: tuple[str, str, int, str]) -> float:
    """A rough relative cost, to start the longest runs first (the pool stays busy to the end)."""
    task, network, _, setting = run
    per_step = {"lstm": 3.0, "mingru": 1.2}.get(network, 1.0)
    wide = 2.0 if task == "count-recall" and network != "mlp" else 1.0
    return per_step * wide * (10.0 if setting == "long" else 1.0)


def write_result(path: str, rows: list[dict[str, Any]], args: argparse.Namespace, t0: float, planned: int) -> None:
    summary = summarize(rows) if rows else []
    result = {"command": " ".join(["memory.py", *sys.argv[1:]]), "commit": _commit(),
              "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "workers": args.workers},
              "wall_seconds": time.perf_counter() - t0, "runs_planned": planned, "runs_done": len(rows),
              "summary": summary,
              "runs": sorted(rows, key=lambda r: (r["task"], r["setting"], r["network"], r["seed"]))}
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(path)  # whole or not at all: a run killed by a time limit leaves the last good file


def cmd_learn(args: argparse.Namespace) -> int:
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise _bad(f"--tasks: unknown {', '.join(unknown)} (known: {', '.join(TASKS)})")
    if args.part:
        tasks = pick_part(tasks, args.part)
    networks = [n for n in args.networks.split(",") if n]
    settings = ["short", "long"] if args.setting == "both" else [args.setting]
    seeds = parse_seeds(args.seeds)
    runs = [(t, n, s, st) for st in settings for t in tasks for n in networks for s in seeds]
    if not runs:
        raise _bad("nothing to run (no task, network or seed; --seeds 0 is a count of none: 0, is seed 0)")
    runs.sort(key=_cost, reverse=True)
    print(f"{len(runs)} runs on {args.workers} workers, backend {args.backend}: {', '.join(tasks)} x "
          f"{', '.join(networks)} x seeds {seeds}" + (f", with {' '.join(args.set)}" if args.set else ""), flush=True)
    t0 = time.perf_counter()
    deadline = time.time() + args.deadline if args.deadline else None
    rows: list[dict[str, Any]] = []
    with cf.ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=mp.get_context("spawn"),
                                max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_one, t, n, s, st, args.backend, args.run_dir,
                               args.long_steps if st == "long" else args.steps, args.time_budget,
                               deadline, tuple(args.set)): (t, n, s, st)
                   for t, n, s, st in runs}
        for fut in cf.as_completed(futures):
            t, n, s, st = futures[fut]
            try:
                row = fut.result()
            except Exception as err:  # the worker died
                row = {"task": t, "network": n, "seed": s, "setting": st, "backend": args.backend, "solved": False,
                       "final_eval": None, "steps_to_solve": None, "wall_seconds": 0.0, "cpu_seconds": 0.0,
                       "error": f"worker: {type(err).__name__}: {err}"}
            rows.append(row)
            status = ("error: " + row["error"]) if row.get("error") else (
                f"eval {row['final_eval']:.3f} (chance {row['chance']:.3f}) {'solved' if row['solved'] else 'NOT solved'}"
                f", at {_fmt(row['steps_to_solve'])} steps of {_fmt(row['total_steps'])}")
            print(f"[{len(rows)}/{len(runs)} {time.perf_counter() - t0:6.0f}s] {t} {st} {n} seed {s}: {status} "
                  f"({row['wall_seconds']:.0f}s)", flush=True)
            write_result(args.out, rows, args, t0, len(runs))
    print()
    print_table(summarize(rows))
    print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f} s on {args.workers} workers -> {args.out}")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    """The table of one or more ``learn`` results together (the halves of a split matrix)."""
    rows: list[dict[str, Any]] = []
    for path in args.results:
        if not Path(path).is_file():
            raise _bad(f"{path}: no such file (did its learn run finish a run?)")
        rows += json.loads(Path(path).read_text())["runs"]
    print_table(summarize(rows))
    return 0


# -- speed: the networks against a plain torch.nn.LSTM loop --------------------------------------

def _noeira_speed(network: str, num_envs: int, iterations: int) -> float:
    """Training steps/s of noeira's PPO with ``network``: env and agent built by the driver from
    the resolved config of ``noeira train env=repeat-first agent.network=NETWORK env.num_envs=N
    backend=cpu`` (the recipes: horizon 64, 4 epochs x 4 minibatches, lr 3e-3, [64, 64]), the
    driver's loop (collect, learn) after one warm-up iteration."""
    from noeira.core.driver import build, resolve

    cfg = resolve({"backend": "cpu", "env": {"name": "repeat-first", "num_envs": num_envs},
                   "agent": {"name": "ppo", "network": network}, "run": {"seed": 0}})
    pieces = build(cfg)
    env, agent = pieces.env, pieces.agent
    agent.collect(env)
    agent.learn()
    t0 = time.perf_counter()
    for _ in range(iterations):
        agent.collect(env)
        agent.learn()
    return iterations * agent.steps_per_collect / (time.perf_counter() - t0)


def _plain_lstm_speed(num_envs: int, iterations: int) -> float:
    """The same work with ``torch.nn.LSTM``, written as CleanRL's recurrent PPO loop."""
    import torch
    from torch import nn

    from noeira.core import make_env
    from noeira.core.driver import resolve

    cfg = resolve({"backend": "cpu", "env": {"name": "repeat-first", "num_envs": num_envs},
                   "agent": {"name": "ppo", "network": "lstm"}}).agent.config
    torch.manual_seed(0)
    env = make_env("repeat-first", num_envs=num_envs, backend="cpu", seed=0)
    n, t, h = num_envs, cfg.horizon, cfg.hidden_sizes[0]
    layers = len(cfg.hidden_sizes)
    obs_dim, acts = env.observation_space.shape[0], env.action_space.n

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(obs_dim, h), nn.Tanh())
            self.lstm = nn.LSTM(h, h, num_layers=layers)
            self.actor, self.critic = nn.Linear(h, acts), nn.Linear(h, 1)

        def step(self, x, state, done):  # one step, the state zeroed where an episode starts
            keep = (~done).float().view(1, -1, 1)
            y, state = self.lstm(self.enc(x).unsqueeze(0), (state[0] * keep, state[1] * keep))
            return y[0], state

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=1e-5)
    obs_b = torch.zeros(t, n, obs_dim)
    act_b, logp_b, val_b, rew_b = (torch.zeros(t, n, dtype=torch.long), torch.zeros(t, n), torch.zeros(t, n),
                                  torch.zeros(t, n))
    start_b = torch.zeros(t, n, dtype=torch.bool)
    state = (torch.zeros(layers, n, h), torch.zeros(layers, n, h))
    starts = torch.ones(n, dtype=torch.bool)
    obs = env.reset(seed=0)
    gen = torch.Generator().manual_seed(0)
    per_mb = n // cfg.num_minibatches

    def iteration() -> None:
        nonlocal state, starts, obs
        state0 = (state[0].clone(), state[1].clone())
        with torch.no_grad():
            for i in range(t):
                y, state = net.step(obs, state, starts)
                logits, value = net.actor(y), net.critic(y).squeeze(-1)
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
                obs_b[i], act_b[i], logp_b[i], val_b[i], start_b[i] = obs, a, dist.log_prob(a), value, starts
                r = env.step(a)
                rew_b[i] = r.reward
                starts = r.terminated | r.truncated
                obs = r.obs
            adv = torch.zeros(t, n)  # GAE
            last = torch.zeros(n)
            for i in reversed(range(t)):
                nv = val_b[i + 1] if i + 1 < t else val_b[i]
                nd = (start_b[i + 1] if i + 1 < t else starts).float()
                delta = rew_b[i] + cfg.gamma * nv * (1 - nd) - val_b[i]
                last = delta + cfg.gamma * cfg.gae_lambda * (1 - nd) * last
                adv[i] = last
            ret = adv + val_b
        for _ in range(cfg.update_epochs):
            perm = torch.randperm(n, generator=gen)
            for m in range(cfg.num_minibatches):
                idx = perm[m * per_mb:(m + 1) * per_mb]
                st = (state0[0][:, idx], state0[1][:, idx])
                ys = []
                for i in range(t):  # the segment replayed step by step, as CleanRL does
                    y, st = net.step(obs_b[i, idx], st, start_b[i, idx])
                    ys.append(y)
                y = torch.stack(ys)
                dist = torch.distributions.Categorical(logits=net.actor(y))
                logp, value = dist.log_prob(act_b[:, idx]), net.critic(y).squeeze(-1)
                ratio = (logp - logp_b[:, idx]).exp()
                a = adv[:, idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                loss = pg + 0.5 * cfg.vf_coef * (value - ret[:, idx]).square().mean() - cfg.ent_coef * dist.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
                opt.step()

    iteration()
    t0 = time.perf_counter()
    for _ in range(iterations):
        iteration()
    return iterations * t * n / (time.perf_counter() - t0)


def cmd_speed(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(1)
    runs = {"noeira ppo, lstm": lambda: _noeira_speed("lstm", args.envs, args.iterations),
            "noeira ppo, mingru": lambda: _noeira_speed("mingru", args.envs, args.iterations),
            "plain torch.nn.LSTM loop": lambda: _plain_lstm_speed(args.envs, args.iterations)}
    best: dict[str, float] = {}
    for _ in range(args.rounds):  # interleaved rounds, the best of each: a shared machine's load spreads over all
        for name, fn in runs.items():
            best[name] = max(best.get(name, 0.0), fn())
    print(f"training steps/s on the CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores), "
          f"{args.envs} envs, repeat-first's PPO recipe, one torch thread, {args.iterations} iterations after one "
          f"warm-up, best of {args.rounds} interleaved rounds; commit {_commit()}")
    for name, sps in best.items():
        print(f"  {name:28s} {sps:10,.0f}  ({sps / best['plain torch.nn.LSTM loop']:.2f}x the plain loop)")
    return 0


def _commit() -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from _meta import commit

    return commit()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("learn", help="task x setting x network x seed: eval against chance and best")
    a.add_argument("--tasks", default=",".join(TASKS))
    a.add_argument("--networks", default=",".join(NETWORKS))
    a.add_argument("--setting", choices=("short", "long", "both"), default="short")
    a.add_argument("--seeds", default="5", help="a count (5: seeds 0-4), a list (0,3; 0, alone) or a range (1-4)")
    a.add_argument("--part", default="", help="K/N: only the K-th of N parts of the tasks (1/2 and 2/2: two halves)")
    a.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    a.add_argument("--backend", default="cpu")
    a.add_argument("--steps", type=int, default=None, help="run.total_steps of the short runs (default: the recipe's)")
    a.add_argument("--long-steps", type=int, default=20_000_000, help="run.total_steps of the long runs")
    a.add_argument("--time-budget", type=float, default=None,
                   help="seconds of training per run: stop at the iteration past it and evaluate that policy")
    a.add_argument("--deadline", type=float, default=None,
                   help="seconds from the start: runs still training then stop (as --time-budget), later ones don't start")
    a.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="overrides above the recipes and settings, as noeira train takes them")
    a.add_argument("--out", default="memory.json")
    a.add_argument("--run-dir", default="runs/memory")
    s = sub.add_parser("speed", help="training steps/s of lstm and mingru against a plain torch.nn.LSTM loop")
    s.add_argument("--envs", type=int, default=16)
    s.add_argument("--iterations", type=int, default=5)
    s.add_argument("--rounds", type=int, default=3)
    t = sub.add_parser("table", help="the table of learn results (JSON files) together")
    t.add_argument("results", nargs="+")
    args = p.parse_args(argv)
    return {"learn": cmd_learn, "speed": cmd_speed, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
