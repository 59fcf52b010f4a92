"""Registries: one entry-point group per kind, loaded with stevedore, by name, lazily.

Only the chosen plugin is imported. stevedore's defaults would log-and-skip a plugin that
fails to import and cache entry points (in the process and on disk); here a failure raises
:class:`PluginLoadError` naming the distribution and cause, and every lookup reads the
installed metadata afresh, so a plugin installed a moment ago is found.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import re
from typing import Any

import attrs
from stevedore import NamedExtensionManager

from noeira.core.errors import PluginLoadError, UnknownPluginError

__all__ = ["KINDS", "PluginInfo", "dist_of", "entry_points", "list_plugins", "load", "names"]

KINDS: dict[str, str] = {
    "backends": "noeira.backends",
    "graph": "noeira.graph",
    "envs": "noeira.envs",
    "agents": "noeira.agents",
    "physics": "noeira.physics",
    "robots": "noeira.robots",
    "networks": "noeira.networks",
}
"""kind -> entry-point group."""

_SINGULAR = {"backends": "backend", "graph": "graph backend", "envs": "env", "agents": "agent",
             "physics": "physics engine", "robots": "robot", "networks": "network"}


@attrs.frozen
class PluginInfo:
    """One registered name, as ``noeira list`` shows it."""

    kind: str
    name: str
    distribution: str
    version: str
    summary: str
    value: str


class _FreshManager(NamedExtensionManager):  # type: ignore[type-arg]
    """stevedore's named manager without its entry-point caches."""

    def list_entry_points(self) -> list[md.EntryPoint]:
        return entry_points(self.namespace)


def entry_points(group: str) -> list[md.EntryPoint]:
    """The installed entry points of ``group``, read now (no cache)."""
    importlib.invalidate_caches()
    return list(md.entry_points(group=group))


def _group(kind: str) -> str:
    try:
        return KINDS[kind]
    except KeyError:
        raise UnknownPluginError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}") from None


def _dist_name(ep: md.EntryPoint) -> str:
    return ep.dist.metadata["Name"] if ep.dist is not None else "?"


def _missing_extra_hint(ep: md.EntryPoint, err: BaseException) -> str:
    """Which extra of the plugin's distribution provides the module that failed to import."""
    missing = getattr(err, "name", None) or ""
    if not isinstance(err, ModuleNotFoundError) or not missing:
        return ""
    top = missing.split(".")[0]
    norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()  # noqa: E731
    dist = _dist_name(ep)
    for req in (ep.dist.requires or []) if ep.dist is not None else []:
        m = re.match(r"^([A-Za-z0-9_.-]+).*extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if m and norm(m.group(1)) == norm(top):
            return f" (install it with: pip install '{dist}[{m.group(2)}]')"
    return f" (install the package that provides {top!r})"


def _find(kind: str, name: str) -> md.EntryPoint:
    group = _group(kind)
    eps = entry_points(group)
    matches = [ep for ep in eps if ep.name == name]
    if not matches:
        names = sorted({ep.name for ep in eps})
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownPluginError(
            f"unknown {_SINGULAR[kind]} {name!r}{hint} (installed: {', '.join(names) or 'none'})"
        )
    dists = sorted({_dist_name(ep) for ep in matches})
    if len(dists) > 1:
        raise PluginLoadError(f"{_SINGULAR[kind]} {name!r} is registered by several distributions: {', '.join(dists)}")
    return matches[0]


def load(kind: str, name: str) -> Any:
    """Import and return the object registered as ``name`` in ``kind`` (only that one)."""
    ep = _find(kind, name)
    errors: list[BaseException] = []

    def on_fail(_mgr: Any, _ep: md.EntryPoint, err: BaseException) -> None:
        errors.append(err)

    mgr = _FreshManager(
        _group(kind), names=[name], on_load_failure_callback=on_fail,
        on_missing_entrypoints_callback=None, invoke_on_load=False,
    )
    if errors or len(mgr.extensions) != 1:
        err = errors[0] if errors else RuntimeError("not loaded")
        raise PluginLoadError(
            f"{_SINGULAR[kind]} {name!r} from distribution {_dist_name(ep)} failed to load: "
            f"{type(err).__name__}: {err}{_missing_extra_hint(ep, err)}"
        ) from err
    return mgr.extensions[0].plugin


def dist_of(kind: str, name: str) -> str:
    """The distribution that registers ``name`` in ``kind`` (nothing is imported)."""
    return _dist_name(_find(kind, name))


def names(kind: str) -> list[str]:
    return sorted({ep.name for ep in entry_points(_group(kind))})


def list_plugins(kind: str | None = None) -> dict[str, list[PluginInfo]]:
    """Every registered name by kind, with its distribution, without importing any plugin.

    ``summary`` is the first line of the distribution's summary."""
    out: dict[str, list[PluginInfo]] = {}
    for k in [kind] if kind else list(KINDS):
        rows = []
        for ep in entry_points(_group(k)):
            dist = ep.dist
            rows.append(PluginInfo(
                kind=k, name=ep.name, distribution=_dist_name(ep),
                version=dist.version if dist is not None else "?",
                summary=(dist.metadata["Summary"] or "") if dist is not None else "",
                value=ep.value,
            ))
        out[k] = sorted(rows, key=lambda r: r.name)
    return out
