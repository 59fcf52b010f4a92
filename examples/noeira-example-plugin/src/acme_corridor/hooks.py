"""A hook implementation: every run's metrics, mirrored into ``metrics.csv``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from noeira.core import hookimpl

_KEY = "acme-csv"


@hookimpl
def noeira_iteration(run: Any, iteration: int, env_steps: int, metrics: dict[str, float]) -> None:
    path = Path(run.dir) / "metrics.csv"
    row = {"iteration": iteration, "env_steps": env_steps, **metrics}
    fields = run.state.setdefault(_KEY, list(row))  # columns fixed by the first row
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)
