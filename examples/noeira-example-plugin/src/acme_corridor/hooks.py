"""Hook implementations: every run's metrics mirrored into ``metrics.csv``, and this
distribution's recipe for its memory env."""

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


@hookimpl
def noeira_recipe(agent: str, env: str, backend: str) -> dict[str, Any] | None:
    """This distribution's recipe for its memory env: PPO with the recurrent ``gru`` network."""
    if agent != "ppo" or env.partition(":")[0] != "cue-corridor":
        return None
    return {
        "env": {"num_envs": 64},
        "agent": {"network": "gru", "hidden_sizes": [32], "horizon": 16, "update_epochs": 4, "num_minibatches": 4,
                  "lr": 3e-3, "gamma": 0.9, "gae_lambda": 0.95, "ent_coef": 0.01, "torch_threads": 1},
        "run": {"total_steps": 60_000, "log_interval": 10},
    }
