"""The seam between the driver and agents that learn from a dataset (``bc``, ``act``).

``noeira train agent=act dataset=PATH`` runs through the shared driver like any other run:
``dataset=PATH`` is ``run.dataset``; :func:`dataset_env` (called while the config is resolved)
names the env to build when the user named none: the simulator the dataset was recorded in
(``robot_type`` ``noeira:<env>``), else the replay env ``dataset`` over the same files. The
driver then builds env and agent as usual and calls :func:`attach_dataset`: an agent that
declares ``learns_from_dataset = True`` gets ``load_dataset(path)`` (it reads the frames onto its
device and fits its normalisation); its ``collect`` does nothing and each ``learn`` is one
gradient step (``steps_per_collect = 1``, so ``run.total_steps`` counts gradient steps). The
final evaluation runs the policy in the env. ``noeira eval``, ``export`` and ``deploy`` load
the checkpoint only: the normalisation is in it, the dataset is not read again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from noeira.core.errors import ConfigError

__all__ = ["attach_dataset", "dataset_env"]


def dataset_env(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with ``env.name`` filled in from ``run.dataset`` when it names a dataset and no env."""
    run = raw.get("run", {})
    path = run.get("dataset") if isinstance(run, Mapping) else None
    env = raw.get("env", {})
    if not path or not isinstance(path, str) or not isinstance(env, Mapping) or env.get("name"):
        return dict(raw)
    from noeira.core.dataset.reader import load_info
    from noeira.core.dataset.record import SIM_PREFIX

    robot = str(load_info(path).get("robot_type") or "")
    out = copy.deepcopy(dict(raw))
    table = out.setdefault("env", {})
    if robot.startswith(SIM_PREFIX):
        table["name"] = robot[len(SIM_PREFIX):]
    else:
        table["name"] = "dataset"
        table.setdefault("path", path)
    return out


def attach_dataset(agent: Any, cfg: Any) -> bool:
    """Give an offline agent its dataset; refuse a dataset to an agent that learns from an env,
    and an offline agent without one. Returns whether the agent learns from a dataset (its
    ``collect`` does nothing, so there is nothing to record as a graph)."""
    from noeira.core import contracts

    path = cfg.run.dataset
    learns = contracts.learns_from_dataset(agent)
    if path and not learns:
        raise ConfigError(f"run.dataset: agent {cfg.agent.name!r} learns from its env, not from a dataset "
                          "(the agents that learn from one: bc, act)")
    if learns and not path:
        raise ConfigError(f"run.dataset: agent {cfg.agent.name!r} learns from a dataset: pass dataset=PATH "
                          "(a LeRobot v3 dataset, e.g. one noeira record wrote)")
    if learns:
        agent.load_dataset(path)
    return learns
