"""Core's own hook implementations: JSON-lines metrics, the progress display, TensorBoard."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from noeira.core.hookspecs import hookimpl

_JSONL, _BAR, _TB = "noeira.metrics_jsonl", "noeira.progress", "noeira.tensorboard"


def _clean(v: Any) -> Any:
    return v if not isinstance(v, float) or math.isfinite(v) else None


@hookimpl
def noeira_run_started(run: Any) -> None:
    run.state[_JSONL] = open(Path(run.dir) / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
    if run.config.run.progress:
        from rich.console import Console  # registered in every process (the CLI's too): rich only for a bar
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} steps"),
            TextColumn("{task.fields[sps]}"), TextColumn("{task.fields[ret]}"), TimeElapsedColumn(),
            console=console, transient=False, disable=False,
        )
        task = bar.add_task(f"{run.config.agent.name} on {run.config.env.name}", total=run.config.run.total_steps,
                            completed=run.env_steps, sps="", ret="")
        bar.start()
        run.state[_BAR] = (bar, task)
    if run.config.run.tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            from noeira.core.errors import UserError

            raise UserError("run.tensorboard: needs tensorboard (pip install 'noeira-core[tensorboard]')") from err
        run.state[_TB] = SummaryWriter(str(Path(run.dir) / "tensorboard"))


@hookimpl
def noeira_iteration(run: Any, iteration: int, env_steps: int, metrics: dict[str, float]) -> None:
    f = run.state.get(_JSONL)
    if f is not None:
        row = {"iteration": iteration, "env_steps": env_steps, **{k: _clean(v) for k, v in metrics.items()}}
        f.write(json.dumps(row) + "\n")
        f.flush()  # nothing lost if the run dies
    if _BAR in run.state:
        bar, task = run.state[_BAR]
        ret = metrics.get("episode_return")
        bar.update(task, completed=min(env_steps, run.config.run.total_steps),
                   sps=f"{metrics.get('steps_per_second', 0):,.0f} steps/s",
                   ret=f"return {ret:.1f}" if ret is not None else "")
    tb = run.state.get(_TB)
    if tb is not None:
        for k, v in metrics.items():
            if isinstance(v, float) and math.isfinite(v):
                tb.add_scalar(k, v, env_steps)


@hookimpl
def noeira_run_finished(run: Any, outcome: str, record: dict[str, Any]) -> None:
    f = run.state.pop(_JSONL, None)
    if f is not None:
        f.close()
    if _BAR in run.state:
        bar, _ = run.state.pop(_BAR)
        bar.stop()
    tb = run.state.pop(_TB, None)
    if tb is not None:
        tb.close()
