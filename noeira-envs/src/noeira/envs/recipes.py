"""The recipes this distribution ships for its own envs, served through the ``noeira_recipe``
hook (entry point ``noeira`` -> ``envs``). As the env's distribution, its recipes are layered
over those of an agent's distribution for the same env."""

from __future__ import annotations

from typing import Any

from noeira.core.plugins import hookimpl

MEMORY_TASKS = ("repeat-first", "repeat-previous", "count-recall", "t-maze", "autoencode")
"""The memory suite's envs (:mod:`noeira.envs.memory`), named here so the hook imports nothing."""


@hookimpl
def noeira_recipe(agent: str, env: str, backend: str, num_envs: int | None,
                  network: str | None) -> dict[str, Any] | None:
    if agent == "ppo" and env == "craftax-classic":
        from noeira.envs.craftax.recipes import ppo_recipe

        return ppo_recipe(backend, num_envs, network)
    if agent == "ppo" and env == "craftax":
        from noeira.envs.craftax_full.recipes import ppo_recipe as full_recipe

        return full_recipe(backend, num_envs, network)
    if agent == "ppo" and env in MEMORY_TASKS:
        from noeira.envs.memory.recipes import ppo_recipe as memory_recipe

        return memory_recipe(env, backend, num_envs, network)
    return None
