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

An agent keeps its recipes as :data:`RecipeTables` (env -> backend -> recipe) next to its code
and answers the hook with :func:`pick_recipe`, the one lookup every table goes through.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs

from noeira.core import registry
from noeira.core.config import deep_merge
from noeira.core.errors import ConfigError, NoeiraError
from noeira.core.plugins import get_plugin_manager, plugin_distribution

__all__ = ["UNTESTED", "Recipe", "RecipeTables", "find_recipes", "merged_recipe", "pick_recipe"]

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


# -- recipe tables -------------------------------------------------------------------------------

RecipeTables = Mapping[str, Mapping[str, Mapping[str, Any]]]
"""An agent's recipes: env -> backend -> recipe. The env key is the env's name, or its family
for a parametrised one (``atari`` for ``atari:pong``); ``"*"`` stands for any other env or
backend, and an env's ``cpu`` recipe serves a backend its table does not name."""

UNTESTED = ("untested: no recipe of this agent was verified on this env; the agent's defaults apply "
            "and may not solve it")
"""The note of an agent's ``"*"`` env (any other env: MuJoCo, ``gym:`` envs): a run starts with it
as one warning line, as for a pair with no recipe at all."""


def pick_recipe(tables: RecipeTables, env: str, backend: str, *, num_envs: int | None = None,
                cpu_threads: int | None = None) -> dict[str, Any] | None:
    """The recipe for ``env`` on ``backend`` from ``tables``, a fresh copy the caller may change;
    None when neither the env (or its family) nor ``"*"`` has one. The backend's own recipe,
    else ``"*"``'s, else ``cpu``'s.

    ``num_envs`` (the user's, for an on-policy agent): ``run.total_steps`` scales with it, so the
    run keeps the recipe's number of iterations. ``cpu_threads``: on the cpu backend, the
    ``agent.torch_threads`` the recipe sets unless it says otherwise (small networks run fastest
    on one thread)."""
    by_backend = tables.get(env.partition(":")[0], tables.get("*"))
    if not by_backend:
        return None
    found = next((by_backend[k] for k in (backend, "*", "cpu") if k in by_backend), None)
    if found is None:
        return None
    out = copy.deepcopy(dict(found))
    if cpu_threads is not None and backend == "cpu":
        out.setdefault("agent", {}).setdefault("torch_threads", cpu_threads)
    base_envs = out.get("env", {}).get("num_envs")
    if num_envs is not None and base_envs and "total_steps" in out.get("run", {}):
        out["run"]["total_steps"] = out["run"]["total_steps"] * num_envs // base_envs
    return out
