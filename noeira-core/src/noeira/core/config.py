"""Run configuration: attrs classes structured by cattrs from TOML and dotted overrides.

Layers, lowest first: each plugin's config defaults < the recipes for the agent, env and
backend (the ``noeira_recipe`` hook, :mod:`noeira.core.recipes`) < the ``--config`` TOML file < command-line overrides
(``agent.lr=3e-4 env.num_envs=4096``; ``env=NAME`` is short for ``env.name=NAME``, and
likewise ``agent=``, ``graph=``). Unknown keys and wrong types are :class:`ConfigError`
with the dotted path of the key (``agent.lr: expected a float, got 'fast'``).

Each plugin declares its own keys as a frozen attrs class ``Config`` on the registered
object; a string right below a field is that field's documentation (shown by
``noeira train agent=NAME --help``).
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
import tomli_w

from noeira.core.errors import ConfigError

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_ENV",
    "GraphConfig",
    "PluginSection",
    "RunConfig",
    "RunSection",
    "field_docs",
    "parse_overrides",
    "structure",
]

T = TypeVar("T")
DEFAULT_ENV = "cartpole"
DEFAULT_AGENT = "ppo"


@attrs.frozen
class GraphConfig:
    """How collect and learn are run."""

    name: str = ""
    """Graph backend: eager | stream | device. Empty: $NOEIRA_GRAPH_BACKEND, else the
    installed default for the backend (stream on cuda), else eager."""
    capture_env: bool | None = None
    """Record ``collect`` (the env step inside). None: when the env is capture-safe."""
    capture_train: bool = True
    """Record ``learn``."""


@attrs.frozen
class RunSection:
    """The run itself."""

    total_steps: int = 100_000
    """Env steps to train for, every env of every process together. Left to the recipe (or this
    default), it is multiplied by the number of processes of a data-parallel run, so each
    process keeps the recipe's iterations; set here, it is the global count as given."""
    seed: int = 0
    """Seeds torch, the env and the agent."""
    eval_episodes: int = 10
    """Episodes of the final deterministic evaluation (0: none)."""
    log_interval: int = 1
    """Iterations (collect + learn) between reads of the device metrics."""
    checkpoint_interval: int = 0
    """Iterations between checkpoints/latest.pt (0: by time only, see checkpoint_minutes)."""
    checkpoint_minutes: float = 5.0
    """Minutes of training between checkpoints/latest.pt, written at the next iteration's end,
    so a crash loses at most about this much (0: by iterations only)."""
    progress: bool = True
    """Show a progress bar."""
    tensorboard: bool = False
    """Write TensorBoard event files under the run directory (needs tensorboard)."""
    resume: str = ""
    """A checkpoint file or run directory to continue from (the same directory as --run-dir
    continues the run in place, appending to its metrics)."""
    dataset: str = ""
    """A LeRobot v3 dataset (a directory) that an offline agent (bc, act) learns from; dataset=PATH
    for short. The env then defaults to the one it was recorded in (else the replay env
    'dataset'), and total_steps counts gradient steps."""


@attrs.frozen
class PluginSection:
    """A plugin's name and its structured config (the plugin's own ``Config`` instance,
    or a plain dict for a plugin that declares none)."""

    name: str
    config: Any


@attrs.frozen
class RunConfig:
    """A resolved run: what ``config.toml`` holds."""

    backend: str
    env: PluginSection
    num_envs: int
    agent: PluginSection
    graph: GraphConfig
    run: RunSection
    recipes: tuple[str, ...] = ()
    """The recipes layered under the user's values, lowest first (``plugin (distribution)``);
    informational: ``config.toml`` holds the resolved values, not where they came from."""
    recipe_notes: tuple[str, ...] = ()
    """What the recipes that applied are known not to do (their ``note``s), warned when a run starts."""
    world_size: int = 1
    """The processes the config was resolved for (``--nproc-per-node`` x nodes)."""
    total_steps_scaled: bool = False
    """``run.total_steps`` is the recipe's (or the default) times ``world_size``: the user left it unset."""

    def to_dict(self) -> dict[str, Any]:
        env = {"name": self.env.name, "num_envs": self.num_envs, **_unstructure(self.env.config)}
        agent = {"name": self.agent.name, **_unstructure(self.agent.config)}
        graph = {k: v for k, v in converter.unstructure(self.graph).items() if v is not None}
        return {"backend": self.backend, "env": env, "agent": agent, "graph": graph,
                "run": converter.unstructure(self.run)}

    def to_toml(self) -> str:
        return tomli_w.dumps(_drop_none(self.to_dict()))


# -- a strict converter: no silent int("3.5") or bool("no") --------------------------------

def _strict(kind: type, ok: tuple[type, ...], name: str) -> Any:
    def hook(value: Any, _t: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise ValueError(f"expected {name}, got {value!r}")
        if kind is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, ok):
            raise ValueError(f"expected {name}, got {value!r}")
        return kind(value)
    return hook


converter = cattrs.Converter(forbid_extra_keys=True)
converter.register_structure_hook(float, _strict(float, (int, float), "a float"))
converter.register_structure_hook(int, _strict(int, (int,), "an integer"))
converter.register_structure_hook(bool, _strict(bool, (bool,), "true or false"))
converter.register_structure_hook(str, _strict(str, (str,), "a string"))


def _unstructure(obj: Any) -> dict[str, Any]:
    return dict(converter.unstructure(obj)) if attrs.has(type(obj)) else dict(obj)


def _drop_none(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    if isinstance(d, (list, tuple)):
        return [_drop_none(v) for v in d]
    return d


def _format(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)  # our strict hooks and attrs validators already say what was wrong
    return cattrs.v.format_exception(exc, type_)


def _messages(exc: BaseException, path: str) -> list[str]:
    out = []
    for msg in cattrs.transform_error(exc, path=path or "$", format_exception=_format):
        text, _, where = msg.rpartition(" @ ")
        where = where.removeprefix("$.").removeprefix("$")
        text = text.replace("invalid value for type, expected ", "expected a ")
        if text.startswith("extra fields found"):
            for key in text.partition("(")[2].rstrip(")").split(", "):
                out.append(f"{where + '.' if where else ''}{key}: unknown key")
            continue
        m = re.match(r"^'(\w+)' (must .*)$", text)  # an attrs validator on field NAME
        if m:
            out.append(f"{where + '.' if where else ''}{m.group(1)}: {m.group(2)}")
            continue
        if text == "required field missing":
            text = "required key missing"
        out.append(f"{where}: {text}")
    return out


def structure(data: Mapping[str, Any], cls: type[T], path: str) -> T:
    """Structure ``data`` into the attrs class ``cls``; errors carry ``path``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a table, got {data!r}")
    try:
        return converter.structure(dict(data), cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        msgs = _messages(exc, path) if isinstance(exc, cattrs.BaseValidationError) else [f"{path}: {exc}"]
        if isinstance(exc, cattrs.BaseValidationError) and any(m.endswith("unknown key") for m in msgs):
            keys = ", ".join(f.name for f in attrs.fields(cls))
            msgs = [m + (f" (known keys: {keys})" if m.endswith("unknown key") else "") for m in msgs]
        raise ConfigError("; ".join(msgs)) from None


# -- overrides ------------------------------------------------------------------------------

_SHORT = {"env": "env.name", "agent": "agent.name", "graph": "graph.name", "dataset": "run.dataset"}


def _parse_value(key: str, text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as err:
        if text[:1] in "[{\"'":  # meant as a list, table or quoted string: say why it is not one
            raise ConfigError(f"{key}: {text!r} is not a valid TOML value ({err})") from None
        return text


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["env=cartpole", "agent.lr=3e-4"]`` -> nested dict; values parsed as TOML
    (``3e-4`` a float, ``true`` a bool, ``[64, 64]`` a list), else kept as strings."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{item!r}: an override is KEY=VALUE (e.g. agent.lr=3e-4)")
        set_path(out, _SHORT.get(key, key), _parse_value(key, value.strip()))
    return out


def set_path(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for i, p in enumerate(parts[:-1]):
        nxt = d.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"{'.'.join(parts[: i + 1])}: is a value, not a table")
        d = nxt
    d[parts[-1]] = value


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, table by table."""
    out = copy.deepcopy(dict(base))
    for k, v in top.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        with p.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--config: no such file {str(p)!r}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"--config {str(p)!r}: not valid TOML: {err}") from None


def field_docs(cls: type) -> dict[str, str]:
    """The string right below each field of an attrs class (its documentation)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            src = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tree = ast.parse(src)
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, nxt in zip(body, body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def describe(cls: type) -> list[tuple[str, str, Any, str]]:
    """``(key, type, default, doc)`` for each field of a plugin's config class."""
    docs = field_docs(cls)
    rows = []
    for f in attrs.fields(cls):
        default = f.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()  # type: ignore[union-attr]
        tname = getattr(f.type, "__name__", None) or str(f.type)
        rows.append((f.name, tname, default, docs.get(f.name, "")))
    return rows
