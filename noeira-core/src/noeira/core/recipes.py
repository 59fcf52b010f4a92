"""Recipes: tuned defaults for an (agent, env, backend), from every ``noeira_recipe`` hook
implementation, layered in a defined order (see :func:`noeira.core.hookspecs.noeira_recipe`).

A distribution ships recipes for its own envs or agents by implementing the hook::

    @hookimpl
    def noeira_recipe(agent, env, backend, num_envs):
        if agent == "ppo" and env == "corridor":
            return {"env": {"num_envs": 64}, "agent": {"lr": 3e-3}, "run": {"total_steps": 50_000}}
        return None

An implementation takes only the arguments it names; one that takes ``network`` (the policy
network the run will use, as far as known) is how a network ships its own layer of settings.

Beside the config tables a recipe may carry ``"note"``: one line saying where it is known to fall
short (``"not solved: 2 of 5 seeds reach the threshold"``); a run that uses it warns with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from noeira.core import registry
from noeira.core.config import deep_merge
from noeira.core.errors import ConfigError, NoeiraError
from noeira.core.plugins import get_plugin_manager, plugin_distribution

__all__ = ["Recipe", "find_recipes", "merged_recipe"]

SECTIONS = ("env", "agent", "graph", "run")


@attrs.frozen
class Recipe:
    """One implementation's recipe: its values and where they came from."""

    plugin: str
    distribution: str
    values: dict[str, Any]
    note: str | None = None
    """What the recipe is known not to do (its ``"note"``), or None."""

    def describe(self) -> str:
        return f"{self.plugin} ({self.distribution})"


def _dist_of(kind: str, name: str) -> str | None:
    try:
        return registry.dist_of(kind, name)
    except NoeiraError:
        return None


def find_recipes(agent: str, env: str, backend: str, num_envs: int | None = None,
                 network: str | None = None) -> list[Recipe]:
    """Every recipe for ``agent`` on ``env`` on ``backend`` (``cuda:1`` counts as ``cuda``), lowest
    layer first: other distributions' (by plugin name), the agent's distribution's, the env's.
    ``network`` is the user's ``agent.network`` (None: unset); implementations that take
    ``network`` are asked after the others, with the user's choice or else the one the others'
    recipes make (see :func:`noeira.core.hookspecs.noeira_recipe`)."""
    pm = get_plugin_manager()
    backend = backend.partition(":")[0]
    agent_dist, env_dist = _dist_of("agents", agent), _dist_of("envs", env.partition(":")[0])
    impls = pm.hook.noeira_recipe.get_hookimpls()
    args = {"agent": agent, "env": env, "backend": backend, "num_envs": num_envs}
    found = _ask([i for i in impls if "network" not in i.argnames], args)
    if any("network" in i.argnames for i in impls):
        if network is None:
            network = merged_recipe(sorted(found, key=_rank(agent_dist, env_dist))).get("agent", {}).get("network")
        found += _ask([i for i in impls if "network" in i.argnames], {**args, "network": network})
    return sorted(found, key=_rank(agent_dist, env_dist))


def _rank(agent_dist: str | None, env_dist: str | None) -> Any:
    return lambda r: (2 if r.distribution == env_dist else 1 if r.distribution == agent_dist else 0, r.plugin)


def _ask(impls: list[Any], args: dict[str, Any]) -> list[Recipe]:
    """The recipes of these hook implementations (each called with the arguments it names)."""
    found = []
    for impl in impls:
        values = impl.function(**{k: v for k, v in args.items() if k in impl.argnames})
        if values is None:
            continue
        dist = plugin_distribution(impl.plugin_name) or "registered in-process"
        where = f"recipe of hook plugin {impl.plugin_name!r} ({dist})"
        if not isinstance(values, Mapping):
            raise ConfigError(f"{where}: expected a dict of tables, got {type(values).__name__}")
        values = dict(values)
        note = values.pop("note", None)
        if note is not None and not isinstance(note, str):
            raise ConfigError(f"{where}: note: expected a string, got {note!r}")
        for key, table in values.items():
            if key not in SECTIONS:
                raise ConfigError(f"{where}: unknown table {key!r} (known: {', '.join(SECTIONS)}, and note)")
            if not isinstance(table, Mapping):
                raise ConfigError(f"{where}: {key}: expected a table, got {table!r}")
        found.append(Recipe(impl.plugin_name, dist, values, note))
    return found


def merged_recipe(recipes: list[Recipe]) -> dict[str, Any]:
    """The recipes layered, lowest first."""
    out: dict[str, Any] = {}
    for r in recipes:
        out = deep_merge(out, r.values)
    return out
