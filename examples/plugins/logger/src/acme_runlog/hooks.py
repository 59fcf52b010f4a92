"""A run log: every run's events, appended to one JSON-lines file across runs; and ``noeira runlog``.

noeira writes each run's metrics into that run's directory (``metrics.jsonl``). This logger keeps
one file for all runs, as an experiment tracker would: set ``ACME_RUNLOG=~/runs.jsonl`` and
every run appends a line when it starts (its config), at each log interval (its metrics), at
each checkpoint, and when it ends (outcome, final evaluation). ``noeira runlog`` prints one row
per run. Without ``ACME_RUNLOG`` the hooks do nothing, so installing the plugin changes no run.

Each line is one ``write`` to a file opened for appending, so runs that log at the same time
interleave whole lines. Every line carries ``run_dir``, which tells the runs apart.

The hooks (their specs and docstrings are in ``noeira.core.hookspecs``) are called on rank 0,
the process that writes the run directory; ``run.state`` is scratch space for hook
implementations, one key each. This module imports no torch: noeira loads hook plugins into
every ``noeira`` command, ``noeira --help`` included.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

from noeira.core import UserError, hookimpl

ENV = "ACME_RUNLOG"
_KEY = "acme-runlog"  # this plugin's key in run.state


def _finite(x: Any) -> Any:
    """JSON without NaN or infinity (a diverged loss is logged as null)."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _write(run: Any, event: str, **fields: Any) -> None:
    fd = run.state.get(_KEY)
    if fd is None:
        return
    line = {"event": event, "run_dir": str(run.dir), "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            **fields}
    os.write(fd, (json.dumps(_finite(line)) + "\n").encode())


@hookimpl
def noeira_run_started(run: Any) -> None:
    path = os.environ.get(ENV, "").strip()
    if not path:
        return
    path = os.path.expanduser(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    run.state[_KEY] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    _write(run, "started", env=run.config.env.name, agent=run.config.agent.name, backend=run.backend.name,
           graph=run.graph, env_steps=run.env_steps, config=run.config.to_dict())


@hookimpl
def noeira_iteration(run: Any, iteration: int, env_steps: int, metrics: dict[str, float]) -> None:
    _write(run, "iteration", iteration=iteration, env_steps=env_steps, metrics=metrics)


@hookimpl
def noeira_checkpoint_saved(run: Any, path: Path) -> None:
    _write(run, "checkpoint", path=str(path), env_steps=run.env_steps)


@hookimpl
def noeira_run_finished(run: Any, outcome: str, record: dict[str, Any]) -> None:
    _write(run, "finished", outcome=outcome, env_steps=record.get("env_steps"),
           steps_per_second=record.get("steps_per_second"), final_eval=record.get("final_eval"))
    fd = run.state.pop(_KEY, None)
    if fd is not None:
        os.close(fd)


# -- `noeira runlog`: one row per run -------------------------------------------------------

def summarize(path: str | Path) -> list[dict[str, Any]]:
    """The runs in the log at ``path``, in the order they started: ``run_dir``, ``env``, ``agent``,
    ``env_steps``, ``outcome`` (``running`` until the run ends), ``episode_return`` (the last
    one logged) and ``eval`` (the final evaluation's mean return)."""
    runs: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            try:
                e = json.loads(text)
            except json.JSONDecodeError:
                raise UserError(f"{path}:{number}: not a JSON line") from None
            row = runs.setdefault(e["run_dir"], {"run_dir": e["run_dir"], "env": "?", "agent": "?", "env_steps": 0,
                                                 "outcome": "running", "episode_return": None, "eval": None})
            if e["event"] == "started":
                row.update(env=e["env"], agent=e["agent"], env_steps=e["env_steps"])
            elif e["event"] == "iteration":
                row["env_steps"] = e["env_steps"]
                if e["metrics"].get("episode_return") is not None:
                    row["episode_return"] = e["metrics"]["episode_return"]
            elif e["event"] == "finished":
                row.update(outcome=e["outcome"], env_steps=e["env_steps"] or row["env_steps"],
                           eval=(e["final_eval"] or {}).get("mean_return"))
    return list(runs.values())


def _cmd_runlog(args: argparse.Namespace) -> int:
    path = args.file or os.environ.get(ENV, "").strip()
    if not path:
        raise UserError(f"noeira runlog: name the log file, or set {ENV}")
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise UserError(f"noeira runlog: no such file: {path}")
    print(f"{'run':40} {'env':14} {'agent':10} {'steps':>10} {'outcome':11} {'return':>8} {'eval':>8}")
    for r in summarize(path):
        ret = "" if r["episode_return"] is None else f"{r['episode_return']:.1f}"
        ev = "" if r["eval"] is None else f"{r['eval']:.1f}"
        print(f"{r['run_dir'][-40:]:40} {r['env']:14} {r['agent']:10} {r['env_steps']:>10,} {r['outcome']:11} "
              f"{ret:>8} {ev:>8}")
    return 0


@hookimpl
def noeira_add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("runlog", help=f"the runs in the run log (${ENV}), one row each",
                              description=f"One row per run logged in FILE (default ${ENV}): env, agent, steps, "
                                          "outcome, the last episode return and the final evaluation.")
    p.add_argument("file", nargs="?", help=f"the JSON-lines run log (default ${ENV})")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_runlog)
