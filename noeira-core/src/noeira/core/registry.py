"""Registries: one entry-point group per kind, loaded with stevedore, by name, lazily.

Only the chosen plugin is imported. stevedore's defaults would log-and-skip a plugin that
fails to import and cache entry points (in the process and on disk); here a failure raises
:class:`PluginLoadError` naming the distribution and cause. The installed metadata is scanned
once for every ``noeira`` group together and kept for the process while nothing changes: a
directory of ``sys.path`` that changes (``pip install`` adds or removes a ``.dist-info``), a
change of ``sys.path`` itself or :func:`refresh` (``reset_plugin_manager`` calls it) scan it
afresh, so a plugin installed a moment ago is found.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import os
import re
import sys
from typing import Any

import attrs

from noeira.core.errors import PluginLoadError, UnknownPluginError

__all__ = ["KINDS", "PluginInfo", "dist_info", "dist_of", "entry_points", "list_plugins", "load", "names",
           "noeira_distributions", "refresh"]

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


_scan: tuple[tuple[tuple[str, int | None], ...], dict[str, tuple[md.EntryPoint, ...]]] | None = None
_meta: dict[int, tuple[md.Distribution, tuple[str, str, str]]] = {}


def _path_key() -> tuple[tuple[str, int | None], ...]:
    """``sys.path`` with each entry's mtime (as Python's own import caches tell a changed directory)."""
    key: list[tuple[str, int | None]] = []
    for entry in sys.path:
        try:
            key.append((entry, os.stat(entry or ".").st_mtime_ns))
        except (OSError, TypeError, ValueError):
            key.append((entry, None))
    return tuple(key)


def refresh() -> None:
    """Forget the scanned entry points (the next lookup reads the installed metadata afresh)."""
    global _scan
    _scan = None
    _meta.clear()


def _groups() -> dict[str, tuple[md.EntryPoint, ...]]:
    """Every ``noeira`` and ``noeira.*`` entry point by group, from one scan of the installed
    distributions (importlib.metadata's rules: the first of a distribution on sys.path wins)."""
    global _scan
    key = _path_key()
    if _scan is not None and _scan[0] == key:
        return _scan[1]
    importlib.invalidate_caches()
    every = md.entry_points().select()  # one scan (Python 3.11: SelectableGroups; later: EntryPoints)
    found = {g: tuple(every.select(group=g)) for g in every.groups if g == "noeira" or g.startswith("noeira.")}
    _meta.clear()
    _scan = (key, found)
    return found


def entry_points(group: str) -> list[md.EntryPoint]:
    """The installed entry points of ``group`` (a ``noeira`` group), as installed now."""
    if group != "noeira" and not group.startswith("noeira."):
        importlib.invalidate_caches()
        return list(md.entry_points(group=group))
    return list(_groups().get(group, ()))


def dist_info(ep: md.EntryPoint) -> tuple[str, str, str]:
    """``(name, version, summary)`` of the distribution that registers ``ep`` (``"?"``, ``"?"``,
    ``""`` when unknown), its metadata read once per scan."""
    dist = ep.dist
    if dist is None:
        return "?", "?", ""
    held = _meta.get(id(dist))
    if held is None or held[0] is not dist:
        meta = dist.metadata
        held = _meta[id(dist)] = (dist, (meta["Name"], meta["Version"], meta["Summary"] or ""))
    return held[1]


def noeira_distributions() -> dict[str, str]:
    """Name -> version of every installed distribution whose name starts with ``noeira``, sorted by
    name. Only their metadata is read: the others are told apart by their folder's name."""
    out: dict[str, str] = {}
    for dist in md.distributions():
        # the normalised name (from the .dist-info folder) of a "noeira..." name starts with "noeira"
        if not (getattr(dist, "_normalized_name", None) or "noeira").startswith("noeira"):
            continue
        meta = dist.metadata
        name = meta["Name"] or ""
        if name.startswith("noeira"):
            out.setdefault(name, meta["Version"])  # the first on sys.path, as importlib.metadata.version
    return dict(sorted(out.items()))


_manager_class: type | None = None


def _manager(*args: Any, **kwargs: Any) -> Any:
    """stevedore's named manager without its entry-point caches (stevedore imported on first use)."""
    global _manager_class
    if _manager_class is None:
        from stevedore import NamedExtensionManager

        class _FreshManager(NamedExtensionManager):  # type: ignore[type-arg,misc]
            def list_entry_points(self) -> list[md.EntryPoint]:
                return entry_points(self.namespace)

        _manager_class = _FreshManager
    return _manager_class(*args, **kwargs)


def _group(kind: str) -> str:
    try:
        return KINDS[kind]
    except KeyError:
        raise UnknownPluginError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}") from None


def _dist_name(ep: md.EntryPoint) -> str:
    return dist_info(ep)[0]


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

    mgr = _manager(
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
            dist, version, summary = dist_info(ep)
            rows.append(PluginInfo(kind=k, name=ep.name, distribution=dist, version=version, summary=summary,
                                   value=ep.value))
        out[k] = sorted(rows, key=lambda r: r.name)
    return out
