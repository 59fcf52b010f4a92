"""Compose by name: the functions users call to build plugins from the registries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from noeira.core import registry
from noeira.core.config import structure
from noeira.core.errors import ConfigError, UserError

if TYPE_CHECKING:  # torch is imported where it is used: make_robot must not pay for it
    import torch

    from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, GraphBackend

__all__ = [
    "get_backend",
    "get_graph_backend",
    "make_agent",
    "make_env",
    "make_physics",
    "make_robot",
    "plugin_config",
    "split_name",
]


def split_name(name: str) -> tuple[str, dict[str, str]]:
    """``"gym:CartPole-v1"`` -> ``("gym", {"id": "CartPole-v1"})``: a name ``prefix:rest``
    loads plugin ``prefix`` with config key ``id=rest``."""
    base, sep, rest = name.partition(":")
    return (base, {"id": rest}) if sep else (name, {})


def plugin_config(obj: Any, data: Mapping[str, Any], path: str) -> Any:
    """Structure ``data`` into ``obj.Config`` (unknown keys and wrong types are errors at
    ``path``); a plugin without ``Config`` gets the dict as it is."""
    cls = getattr(obj, "Config", None)
    if cls is None:
        return dict(data)
    return structure(data, cls, path)


def get_backend(name: str | Backend = "auto", rank: int = 0, world_size: int = 1) -> Backend:
    """The backend registered as ``name`` (``cpu``, ``cuda``, ``auto``, plugins); ``NAME:INDEX``
    picks a device (``cuda:1``). A backend class is called as ``cls(index, rank, world_size)``."""
    if not isinstance(name, str):
        return name
    base, sep, index_text = name.partition(":")
    index = None
    if sep:
        if not index_text.isdigit():
            raise ConfigError(f"backend: {name!r} is not NAME or NAME:INDEX (e.g. cuda:1)")
        index = int(index_text)
    backend = registry.load("backends", base)(index, rank, world_size)
    if not backend.is_available():
        raise UserError(f"backend {name!r} is not available on this machine (try backend=auto)")
    return backend


def backend_for(device: torch.device | str) -> Backend:
    """The registered backend whose name is the device type (``cpu``, ``cuda``, ...)."""
    import torch

    return get_backend(torch.device(device).type)


def get_graph_backend(name: str) -> GraphBackend:
    """The graph backend registered as ``name`` (``eager``, ``stream``, ``device``)."""
    return registry.load("graph", name)()


def make_env(
    name: str,
    num_envs: int = 1,
    backend: str | Backend = "auto",
    seed: int | None = None,
    **kwargs: Any,
) -> BatchedEnv:
    """``num_envs`` batched envs of the registered ``name`` on ``backend``.

    ``kwargs`` are the env's own config keys; ``gym:<EnvId>`` runs a gymnasium env."""
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ConfigError(f"env.num_envs: must be an integer >= 1, got {num_envs!r}")
    base, implied = split_name(name)
    cls = registry.load("envs", base)
    cfg = plugin_config(cls, {**kwargs, **implied}, "env")
    return cls(cfg, num_envs=num_envs, backend=get_backend(backend), seed=seed)


def make_agent(
    name: str,
    env: BatchedEnv | EnvSpec,
    backend: str | Backend | None = None,
    *,
    training: bool = True,
    **config: Any,
) -> Any:
    """The agent registered as ``name`` for ``env`` (or its spec); ``config`` are its keys.
    ``backend`` defaults to the env's own backend object (so the agent's generators join the
    env's in ``backend.generators``, which a recorded step registers), else the env's device.
    ``training=False`` builds it to act only (deployment, evaluation: see the Agent contract)."""
    from noeira.core.contracts import Backend, EnvSpec

    spec = env if isinstance(env, EnvSpec) else env.spec
    cls = registry.load("agents", name)
    cfg = plugin_config(cls, config, "agent")
    if backend is None:
        own = getattr(env, "backend", None)
        chosen = own if isinstance(own, Backend) else backend_for(spec.device)
    else:
        chosen = get_backend(backend)
    return cls(spec, chosen, cfg) if training else cls(spec, chosen, cfg, training=False)


def make_physics(
    name: str,
    model: str,
    num_worlds: int = 1,
    backend: str | Backend = "auto",
    **kwargs: Any,
) -> Any:
    """The physics engine ``name`` for an MJCF ``model`` (path or XML string) with
    ``num_worlds`` worlds on ``backend``."""
    if not isinstance(num_worlds, int) or num_worlds < 1:
        raise ConfigError(f"physics.num_worlds: must be an integer >= 1, got {num_worlds!r}")
    cls = registry.load("physics", name)
    cfg = plugin_config(cls, kwargs, "physics")
    return cls(cfg, model=model, num_worlds=num_worlds, backend=get_backend(backend))


def make_robot(name: str, **kwargs: Any) -> Any:
    """The robot driver ``name`` (``so101`` ...); ``kwargs`` are its config keys."""
    cls = registry.load("robots", name)
    return cls(plugin_config(cls, kwargs, "robot"))
