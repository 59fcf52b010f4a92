"""``noeira plot RUN_DIR [RUN_DIR ...]``: learning curves from runs' ``metrics.jsonl``, to a PNG.

Two panels: the metric (default ``episode_return``) against env steps and against seconds of
training, one line per run, labelled ``env agent (dir)``. matplotlib is an optional extra:
``pip install 'noeira-core[plot]'``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from noeira.core.errors import UserError

__all__ = ["load_curve", "plot_runs"]


def load_curve(run_dir: Path, metric: str) -> tuple[list[float], list[float], list[float]]:
    """``(env_steps, seconds, values)`` of ``metric`` in a run (rows that have it)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir}: not a run directory (no metrics.jsonl)")
    steps, times, values = [], [], []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
        if row.get(metric) is not None:
            steps.append(float(row["env_steps"]))
            times.append(float(row.get("time", float("nan"))))
            values.append(float(row[metric]))
    return steps, times, values


def _label(run_dir: Path) -> str:
    try:
        import tomllib

        cfg: dict[str, Any] = tomllib.loads((run_dir / "config.toml").read_text())
        return f"{cfg['env']['name']} {cfg['agent']['name']} ({run_dir.name})"
    except (OSError, KeyError, ValueError):
        return run_dir.name


def plot_runs(run_dirs: Sequence[str | Path], out: str | Path, metric: str = "episode_return") -> Path:
    """Write the learning curves of ``run_dirs`` to the PNG ``out``; returns its path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("noeira plot needs matplotlib: pip install 'noeira-core[plot]'") from None
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    plotted = 0
    for d in map(Path, run_dirs):
        steps, times, values = load_curve(d, metric)
        if not values:
            continue
        label = _label(d)
        by_steps.plot(steps, values, label=label)
        by_time.plot(times, values, label=label)
        plotted += 1
    if not plotted:
        raise UserError(f"no run has {metric!r} in its metrics.jsonl (episodes may not have ended yet)")
    for ax, xlabel in ((by_steps, "env steps"), (by_time, "seconds of training")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    by_steps.legend(fontsize="small")
    path = Path(out)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
