"""noeira core: contracts, registries, hooks, config and the training driver.

Compose by name::

    from noeira.core import make_env, make_agent
    env = make_env("cartpole", num_envs=4096, backend="auto", seed=0)
    agent = make_agent("ppo", env)
"""

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
from noeira.core.spaces import Box, Discrete, MultiDiscrete, Space

__all__ = [
    "Agent",
    "Backend",
    "BatchedEnv",
    "Box",
    "ConfigError",
    "Discrete",
    "EnvSpec",
    "GraphBackend",
    "MultiDiscrete",
    "NoeiraError",
    "PhysicsEngine",
    "PluginLoadError",
    "RobotDriver",
    "Space",
    "StepResult",
    "TensorEnv",
    "UnknownPluginError",
    "UserError",
    "check_action",
    "get_backend",
    "get_graph_backend",
    "get_plugin_manager",
    "hookimpl",
    "list_plugins",
    "make_agent",
    "make_env",
    "make_physics",
    "make_robot",
]
