"""The pluggy plugin manager: hook implementations from the ``noeira`` entry-point group."""

from __future__ import annotations

import os

import pluggy

from noeira.core import hookspecs, registry
from noeira.core.errors import PluginLoadError
from noeira.core.hookspecs import hookimpl

__all__ = ["AUTOLOAD_ENV", "get_plugin_manager", "hookimpl", "plugin_distribution", "reset_plugin_manager"]

AUTOLOAD_ENV = "NOEIRA_DISABLE_PLUGIN_AUTOLOAD"

_pm: pluggy.PluginManager | None = None
_dists: dict[str, str] = {}


def _make() -> pluggy.PluginManager:
    from noeira.core import loggers

    pm = pluggy.PluginManager("noeira")
    pm.add_hookspecs(hookspecs)
    pm.register(loggers, name="noeira.core.loggers")
    _dists.clear()
    _dists["noeira.core.loggers"] = "noeira-core"
    if os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes"):
        for ep in registry.entry_points("noeira"):
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as err:  # never a silent drop; name the distribution
                dist = registry.dist_info(ep)[0]
                raise PluginLoadError(
                    f"hook plugin {ep.name!r} from distribution {dist} failed to load: {type(err).__name__}: {err}"
                ) from err
            pm.register(plugin, name=ep.name)
            _dists[ep.name] = registry.dist_info(ep)[0]
    return pm


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide manager, made on first use."""
    global _pm
    if _pm is None:
        _pm = _make()
    return _pm


def plugin_distribution(name: str) -> str | None:
    """The distribution that registered hook plugin ``name`` (None: registered in-process)."""
    return _dists.get(name)


def reset_plugin_manager() -> None:
    """Forget the manager and the scanned entry points (tests, or after installing a plugin in-process)."""
    global _pm
    _pm = None
    registry.refresh()
