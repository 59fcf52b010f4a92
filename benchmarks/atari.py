"""Atari throughput: noeira's ``atari:<game>`` against EnvPool and ale-py's vector env, side by
side in one run, then training steps/s of the Atari recipes.

**Env frames per second** (agent steps x frame skip, all envs together, random actions, the
autoresets included) at each ``--sizes`` number of envs, every side with the same options:
frame skip 4 with the max of the last two frames, 84x84 grayscale, a stack of 4, 1..30 no-op
resets, FIRE on reset, episodic life, sticky actions 0.25, the minimal action set, rewards
unclipped, and as many threads / worker processes as cores (at most one per env):

- ``noeira``: ``make_env("atari:<game>")`` on ``--backend`` (cuda: the frames end on the GPU,
  resized there; ``noeira resize=workers``: resized in the worker processes, as on the cpu);
  the step includes the action's trip to the host and the observation's to the device;
- ``envpool``: ``envpool.make("<Game>-v5", env_type="gymnasium", ...)`` (numpy on the host);
- ``ale-py vector``: ``ale_py.AtariVectorEnv`` (C++ threads, numpy on the host; same-step autoreset).

A side that is not installed is skipped with a line saying so. **Training** (``--train``): steps/s
of ``noeira train`` with the recipes of ``ppo``, ``pqn`` and ``rainbow`` on the game for
``--train-seconds`` of training each (the recipe's env count; the rate after the first log).

    python benchmarks/atari.py --sizes 8,16 --seconds 5                    # the 2-core CPU
    python benchmarks/atari.py --backend cuda --sizes 8,16,32,64,128,256 --train --json atari.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import torch
from _meta import commit
from rich.console import Console
from rich.table import Table

OPTIONS = {"frame_skip": 4, "noop_max": 30, "repeat_action_probability": 0.25, "episodic_life": True,
           "fire_reset": True, "screen_size": 84, "frame_stack": 4}


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def camel(game: str) -> str:
    return "".join(part.capitalize() for part in game.split("_"))


def timed(step: Callable[[Any], Any], actions: list[Any], n: int, seconds: float, warmup: int = 10) -> float:
    """Agent steps per second of ``step(action)`` (each one steps ``n`` envs), taking ``actions`` in
    turn, over about ``seconds``."""
    turn = itertools.cycle(actions)
    for _ in range(warmup):
        step(next(turn))
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            step(next(turn))
        count += 10
    return count * n / (time.perf_counter() - t0)


def bench_noeira(game: str, n: int, backend: str, seconds: float, resize: str = "auto") -> float:
    """The env's own process only moves frames (its workers are processes): one torch thread, as the
    Atari recipes on a cpu run (more threads only contend with the workers for the cores)."""
    from noeira.core import make_env

    torch.set_num_threads(1)
    env = make_env(f"atari:{game}", num_envs=n, backend=backend, seed=0, resize=resize, **OPTIONS)
    g = torch.Generator(device=env.device).manual_seed(0)
    actions = [torch.randint(0, env.action_space.n, (n,), generator=g, device=env.device) for _ in range(16)]
    try:
        rate = timed(env.step, actions, n, seconds)
        if env.device.type == "cuda":
            torch.cuda.synchronize()
        return rate
    finally:
        env.close()


def bench_envpool(game: str, n: int, seconds: float) -> float:
    import envpool

    env = envpool.make(f"{camel(game)}-v5", env_type="gymnasium", num_envs=n, batch_size=n,
                       num_threads=min(n, cores()), episodic_life=True, reward_clip=False,
                       repeat_action_probability=0.25, noop_max=30, use_fire_reset=True, img_height=84, img_width=84,
                       stack_num=4, gray_scale=True, frame_skip=4, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, env.action_space.n, n) for _ in range(16)]
    try:
        return timed(env.step, actions, n, seconds)
    finally:
        env.close()


def bench_ale_vector(game: str, n: int, seconds: float) -> float:
    from ale_py import AtariVectorEnv

    env = AtariVectorEnv(game, num_envs=n, num_threads=min(n, cores()), repeat_action_probability=0.25, noop_max=30,
                         episodic_life=True, reward_clipping=False, use_fire_reset=True, frameskip=4, stack_num=4,
                         img_height=84, img_width=84, grayscale=True, autoreset_mode="SameStep")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, env.single_action_space.n, n) for _ in range(16)]
    try:
        return timed(env.step, actions, n, seconds)
    finally:
        env.close()


def bench_train(agent: str, game: str, backend: str, seconds: float) -> dict[str, Any]:
    """``noeira train`` with the recipe until about ``seconds`` of training (then Ctrl-C: it stops at
    the end of the iteration); steps/s between the first and the last log."""
    import signal
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c", "import sys; from noeira.core.cli import main; sys.exit(main())", "train",
               f"agent={agent}", f"env=atari:{game}", f"backend={backend}", "run.eval_episodes=0",
               "run.log_interval=1", "run.progress=false", "run.total_steps=1000000000", "--run-dir", f"{tmp}/run"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        metrics, rows, deadline = f"{tmp}/run/metrics.jsonl", [], time.time() + seconds + 180
        while proc.poll() is None and time.time() < deadline:
            time.sleep(1)
            if os.path.exists(metrics):
                with open(metrics) as f:
                    rows = [json.loads(line) for line in f if line.strip()]
                if rows and rows[-1]["time"] >= seconds:
                    break
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if len(rows) < 2:
            return {"agent": agent, "error": (err or "no metrics").strip().splitlines()[-1][:200]}
        first, last = rows[0], rows[-1]
        rate = (last["env_steps"] - first["env_steps"]) / max(last["time"] - first["time"], 1e-9)
        return {"agent": agent, "steps_per_second": rate, "frames_per_second": 4 * rate, "env_steps": last["env_steps"],
                "seconds": last["time"], "episode_return": next((r.get("episode_return") for r in reversed(rows)
                                                                  if r.get("episode_return") is not None), None)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="breakout")
    p.add_argument("--sizes", default="8,16,32,64,128,256")
    p.add_argument("--backend", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seconds", type=float, default=8.0, help="seconds measured per side and size")
    p.add_argument("--train", action="store_true", help="also training steps/s of the Atari recipes")
    p.add_argument("--train-agents", default="ppo,pqn,rainbow")
    p.add_argument("--train-seconds", type=float, default=60.0)
    p.add_argument("--json", default=None, help="write the results here")
    a = p.parse_args(argv)
    console = Console()
    sizes = [int(s) for s in a.sizes.split(",")]
    header = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "commit": commit(), "game": a.game,
              "backend": a.backend, "cores": cores(), "cpu": platform.processor() or platform.machine(),
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "options": OPTIONS}
    sides: list[tuple[str, Any]] = [("noeira", lambda n: bench_noeira(a.game, n, a.backend, a.seconds))]
    if a.backend == "cuda":
        sides.append(("noeira resize=workers", lambda n: bench_noeira(a.game, n, a.backend, a.seconds, "workers")))
    notes = []
    try:
        import envpool  # noqa: F401

        sides.append(("envpool", lambda n: bench_envpool(a.game, n, a.seconds)))
    except ImportError:
        notes.append("envpool not installed: skipped")
    try:
        from ale_py import AtariVectorEnv  # noqa: F401

        sides.append(("ale-py vector", lambda n: bench_ale_vector(a.game, n, a.seconds)))
    except ImportError:
        notes.append("ale-py's vector env not importable: skipped")
    results: dict[str, dict[int, float | str]] = {name: {} for name, _ in sides}
    for n in sizes:
        for name, fn in sides:
            try:
                results[name][n] = 4 * fn(n)  # frames/s
            except Exception as err:  # one side failing must not lose the others
                results[name][n] = f"{type(err).__name__}: {err}"[:80]
            console.print(f"{name} at {n} envs: {results[name][n]}")
    table = Table(title=f"atari:{a.game} env frames/s ({a.backend}, {cores()} cores, commit {header['commit']})")
    table.add_column("envs", justify="right")
    for name, _ in sides:
        table.add_column(name, justify="right")
    for n in sizes:
        table.add_row(str(n), *[f"{v:,.0f}" if isinstance(v, float) else str(v) for v in
                                (results[name][n] for name, _ in sides)])
    console.print(table)
    for note in notes:
        console.print(note)
    out: dict[str, Any] = {**header, "frames_per_second": {k: {str(n): v for n, v in d.items()} for k, d in results.items()},
                           "notes": notes}
    if a.train:
        train = [bench_train(agent, a.game, a.backend, a.train_seconds) for agent in a.train_agents.split(",")]
        t = Table(title=f"training on atari:{a.game} ({a.backend}), the recipes, ~{a.train_seconds:.0f} s each")
        for col in ("agent", "steps/s", "frames/s", "env steps", "last episode return"):
            t.add_column(col, justify="right")
        for r in train:
            if "error" in r:
                t.add_row(r["agent"], "error", r["error"][:60], "", "")
            else:
                t.add_row(r["agent"], f"{r['steps_per_second']:,.0f}", f"{r['frames_per_second']:,.0f}",
                          f"{r['env_steps']:,}", str(r["episode_return"]))
        console.print(t)
        out["train"] = train
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
