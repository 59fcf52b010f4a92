"""Config resolution: the user's tables, layered over the recipes, structured and checked.

::

    cfg = resolve({"env": {"name": "cartpole"}, "agent": {"name": "ppo"}})   # a RunConfig
    cfg = config_from_cli(["env=cartpole", "agent.lr=1e-3"], config="my.toml")

Layers, lowest first: each plugin's ``Config`` defaults < the recipes for the agent, env and
backend (``noeira_recipe``, :mod:`noeira.core.recipes`) < the ``--config`` file < the
``KEY=VALUE`` overrides. Unknown keys and wrong types are :class:`ConfigError`\\ s naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from noeira.core import distributed, registry
from noeira.core.api import get_backend, plugin_config, split_name
from noeira.core.config import (
    DEFAULT_AGENT,
    DEFAULT_ENV,
    GraphConfig,
    PluginSection,
    RunConfig,
    RunSection,
    deep_merge,
    load_toml,
    parse_overrides,
    structure,
)
from noeira.core.dataset.offline import dataset_env
from noeira.core.errors import ConfigError
from noeira.core.recipes import find_recipes, merged_recipe
from noeira.core.rundir import resumed_config

__all__ = ["DEFAULT_NUM_ENVS", "config_from_cli", "resolve"]

TOP_KEYS = ("backend", "env", "agent", "graph", "run")
DEFAULT_NUM_ENVS = 16


def resolve(raw: Mapping[str, Any], world_size: int | None = None) -> RunConfig:
    """Layer the recipes for the chosen agent, env and backend (``noeira_recipe``) under ``raw``
    and structure every section.

    ``world_size`` (default: torchrun's ``WORLD_SIZE``, else 1) is the number of training
    processes. Each keeps its own ``env.num_envs``, so the global batch grows with it as with
    ``num_envs``; ``run.total_steps``, unless ``raw`` sets it, is the recipe's times
    ``world_size``, so every process runs the recipe's iterations."""
    if world_size is None:
        world = distributed.from_environment()
        world_size = world.world_size if world is not None else 1
    for key in raw:
        if key not in TOP_KEYS:
            raise ConfigError(f"{key}: unknown key (known keys: {', '.join(TOP_KEYS)})")
    for key in ("env", "agent", "graph", "run"):
        if key in raw and not isinstance(raw[key], Mapping):
            raise ConfigError(f"{key}: expected a table, got {raw[key]!r}")
    backend_name = raw.get("backend", "auto")
    if not isinstance(backend_name, str):
        raise ConfigError(f"backend: expected a string, got {backend_name!r}")
    backend = get_backend(backend_name)
    raw = dataset_env(raw)  # dataset=PATH: the env it was recorded in, unless one is named
    env_name = raw.get("env", {}).get("name", DEFAULT_ENV)
    agent_name = raw.get("agent", {}).get("name", DEFAULT_AGENT)
    for path, value in (("env.name", env_name), ("agent.name", agent_name)):
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
    agent_cls = registry.load("agents", agent_name)
    user_envs = raw.get("env", {}).get("num_envs")
    user_envs = user_envs if isinstance(user_envs, int) and not isinstance(user_envs, bool) and user_envs >= 1 else None
    recipes = find_recipes(agent_name, env_name, backend.name, user_envs, raw.get("agent", {}).get("network"))
    merged = deep_merge(merged_recipe(recipes), raw)

    env_data = dict(merged.get("env", {}))
    env_data.pop("name", None)
    num_envs = env_data.pop("num_envs", DEFAULT_NUM_ENVS)
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ConfigError(f"env.num_envs: expected an integer >= 1, got {num_envs!r}")
    base, implied = split_name(env_name)
    env_cfg = plugin_config(registry.load("envs", base), {**env_data, **implied}, "env")
    agent_data = dict(merged.get("agent", {}))
    agent_data.pop("name", None)
    agent_cfg = plugin_config(agent_cls, agent_data, "agent")
    graph = structure(merged.get("graph", {}), GraphConfig, "graph")
    run_data = dict(merged.get("run", {}))
    scaled = world_size > 1 and "total_steps" not in raw.get("run", {})
    if scaled:
        steps = run_data.get("total_steps", RunSection.total_steps)
        if isinstance(steps, int) and not isinstance(steps, bool):
            run_data["total_steps"] = steps * world_size
    run = structure(run_data, RunSection, "run")
    for key in ("total_steps", "log_interval"):
        if getattr(run, key) < 1:
            raise ConfigError(f"run.{key}: must be >= 1, got {getattr(run, key)}")
    for key in ("eval_episodes", "checkpoint_interval", "checkpoint_minutes"):
        if getattr(run, key) < 0:
            raise ConfigError(f"run.{key}: must be >= 0, got {getattr(run, key)}")
    index = backend_name.partition(":")[2]
    return RunConfig(
        backend=f"{backend.name}:{index}" if index else backend.name, env=PluginSection(env_name, env_cfg),
        num_envs=num_envs, agent=PluginSection(agent_name, agent_cfg), graph=graph, run=run,
        recipes=tuple(r.describe() for r in recipes),
        recipe_notes=tuple(f"{r.note} (recipe of {r.describe()})" for r in recipes if r.note),
        world_size=world_size, total_steps_scaled=scaled,
    )


def config_from_cli(overrides: list[str], config: str | Path | None = None, world_size: int | None = None) -> RunConfig:
    """The config ``noeira train [overrides] [--config FILE]`` runs with. With ``run.resume``
    the resumed run's own config is the lowest layer (:func:`noeira.core.rundir.resumed_config`):
    a run continues as it was set up unless the user's values say otherwise."""
    user = deep_merge(load_toml(config) if config else {}, parse_overrides(overrides))
    resume = user.get("run", {}).get("resume") if isinstance(user.get("run"), Mapping) else None
    base = resumed_config(resume) if isinstance(resume, str) and resume else {}
    for section in ("env", "agent"):  # another plugin named: the run's keys of its own do not apply
        name = user.get(section, {}).get("name") if isinstance(user.get(section), Mapping) else None
        if name is not None and name != base.get(section, {}).get("name"):
            base.pop(section, None)
    return resolve(deep_merge(base, user), world_size)
