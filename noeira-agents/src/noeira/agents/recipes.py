"""The agents' tuned recipes, served through the ``noeira_recipe`` hook (entry point
``noeira`` -> ``agents``).

Each algorithm module keeps its tables next to its code and exposes
``recipe(env: str, backend: str, num_envs: int | None) -> dict | None``; this module only
routes the hook to it, importing nothing but the chosen agent's module.
"""

from __future__ import annotations

import importlib
from typing import Any

from noeira.core.plugins import hookimpl

_MODULES = {
    "ppo": "noeira.agents.ppo",
    "a2c": "noeira.agents.a2c",
    "dqn": "noeira.agents.dqn",
    "sac": "noeira.agents.sac",
    "td3": "noeira.agents.td3",
    "ddpg": "noeira.agents.ddpg",
    "c51": "noeira.agents.dqn:c51_recipe",
    "rainbow": "noeira.agents.dqn:rainbow_recipe",
    "pqn": "noeira.agents.pqn",
    "redq": "noeira.agents.redq",
    "bc": "noeira.agents.bc",
    "act": "noeira.agents.act",
}


@hookimpl
def noeira_recipe(agent: str, env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    target = _MODULES.get(agent)
    if target is None:
        return None
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function or "recipe")(env, backend, num_envs)
