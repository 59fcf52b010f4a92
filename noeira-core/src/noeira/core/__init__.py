"""noeira core: contracts, registries, hooks, config and the training driver.

Compose by name::

    from noeira.core import make_env, make_agent
    env = make_env("cartpole", num_envs=4096, backend="auto", seed=0)
    agent = make_agent("ppo", env)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Lazy: `import noeira.core.errors` (e.g. from the robot driver) must not pay for torch.
_WHERE = {
    "get_backend": "api", "get_graph_backend": "api", "make_agent": "api", "make_env": "api",
    "make_physics": "api", "make_robot": "api",
    "Agent": "contracts", "Backend": "contracts", "BatchedEnv": "contracts", "EnvSpec": "contracts",
    "GraphBackend": "contracts", "PhysicsEngine": "contracts", "RobotDriver": "contracts", "StepResult": "contracts",
    "TensorEnv": "envbase", "check_action": "envbase",
    "ConfigError": "errors", "NoeiraError": "errors", "PluginLoadError": "errors", "UnknownPluginError": "errors",
    "UserError": "errors",
    "get_plugin_manager": "plugins", "hookimpl": "plugins",
    "list_plugins": "registry",
    "Box": "spaces", "Discrete": "spaces", "Encoded": "spaces", "MultiDiscrete": "spaces", "Space": "spaces",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"noeira.core.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'noeira.core' has no attribute {name!r}")


if TYPE_CHECKING:
    from noeira.core.api import get_backend, get_graph_backend, make_agent, make_env, make_physics, make_robot
    from noeira.core.contracts import (
        Agent,
        Backend,
        BatchedEnv,
        EnvSpec,
        GraphBackend,
        PhysicsEngine,
        RobotDriver,
        StepResult,
    )
    from noeira.core.envbase import TensorEnv, check_action
    from noeira.core.errors import ConfigError, NoeiraError, PluginLoadError, UnknownPluginError, UserError
    from noeira.core.plugins import get_plugin_manager, hookimpl
    from noeira.core.registry import list_plugins
    from noeira.core.spaces import Box, Discrete, Encoded, MultiDiscrete, Space
