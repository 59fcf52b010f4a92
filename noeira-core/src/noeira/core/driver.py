"""The training driver: resolve the config, build by name, loop, log, checkpoint, evaluate.

::

    collect = graph.wrap(agent.collect) if capture_env else agent.collect
    learn   = graph.wrap(agent.learn)   if capture_train else agent.learn
    until total_steps: collect(env); metrics = learn()      # no host sync here
    every log_interval iterations: one read of the device metrics -> hooks
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata as md
import json
import logging
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from noeira.core import distributed, registry
from noeira.core.api import get_backend, get_graph_backend, plugin_config, split_name
from noeira.core.config import (
    DEFAULT_AGENT,
    DEFAULT_ENV,
    GraphConfig,
    PluginSection,
    RunConfig,
    RunSection,
    deep_merge,
    load_toml,
    parse_overrides,
    structure,
)
from noeira.core.contracts import Agent, Backend, BatchedEnv
from noeira.core.errors import ConfigError, Terminated, UserError
from noeira.core.plugins import get_plugin_manager, plugin_distribution
from noeira.core.recipes import find_recipes, merged_recipe

__all__ = [
    "Pieces",
    "Run",
    "build",
    "build_env",
    "config_from_cli",
    "evaluate",
    "load_checkpoint",
    "prepare_run_dir",
    "process_backend",
    "rank_seed",
    "records_learn",
    "resolve",
    "save_checkpoint",
    "train",
]

log = logging.getLogger("noeira")
GRAPH_ENV = "NOEIRA_GRAPH_BACKEND"
_TOP_KEYS = ("backend", "env", "agent", "graph", "run")
DEFAULT_NUM_ENVS = 16


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank`` in a run seeded ``seed``: rank 0 keeps it, other ranks are
    spread far apart so no two ranks (or a rank and an evaluation env) share a stream."""
    return seed + 1_000_003 * rank


def resolve(raw: Mapping[str, Any]) -> RunConfig:
    """Layer the recipes for the chosen agent, env and backend (``noeira_recipe``) under ``raw``
    and structure every section."""
    for key in raw:
        if key not in _TOP_KEYS:
            raise ConfigError(f"{key}: unknown key (known keys: {', '.join(_TOP_KEYS)})")
    for key in ("env", "agent", "graph", "run"):
        if key in raw and not isinstance(raw[key], Mapping):
            raise ConfigError(f"{key}: expected a table, got {raw[key]!r}")
    backend_name = raw.get("backend", "auto")
    if not isinstance(backend_name, str):
        raise ConfigError(f"backend: expected a string, got {backend_name!r}")
    backend = get_backend(backend_name)
    env_name = raw.get("env", {}).get("name", DEFAULT_ENV)
    agent_name = raw.get("agent", {}).get("name", DEFAULT_AGENT)
    for path, value in (("env.name", env_name), ("agent.name", agent_name)):
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
    agent_cls = registry.load("agents", agent_name)
    user_envs = raw.get("env", {}).get("num_envs")
    user_envs = user_envs if isinstance(user_envs, int) and not isinstance(user_envs, bool) and user_envs >= 1 else None
    recipes = find_recipes(agent_name, env_name, backend.name, user_envs, raw.get("agent", {}).get("network"))
    merged = deep_merge(merged_recipe(recipes), raw)

    env_data = dict(merged.get("env", {}))
    env_data.pop("name", None)
    num_envs = env_data.pop("num_envs", DEFAULT_NUM_ENVS)
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ConfigError(f"env.num_envs: expected an integer >= 1, got {num_envs!r}")
    base, implied = split_name(env_name)
    env_cfg = plugin_config(registry.load("envs", base), {**env_data, **implied}, "env")
    agent_data = dict(merged.get("agent", {}))
    agent_data.pop("name", None)
    agent_cfg = plugin_config(agent_cls, agent_data, "agent")
    graph = structure(merged.get("graph", {}), GraphConfig, "graph")
    run = structure(merged.get("run", {}), RunSection, "run")
    for key in ("total_steps", "log_interval"):
        if getattr(run, key) < 1:
            raise ConfigError(f"run.{key}: must be >= 1, got {getattr(run, key)}")
    for key in ("eval_episodes", "checkpoint_interval", "checkpoint_minutes"):
        if getattr(run, key) < 0:
            raise ConfigError(f"run.{key}: must be >= 0, got {getattr(run, key)}")
    index = backend_name.partition(":")[2]
    return RunConfig(
        backend=f"{backend.name}:{index}" if index else backend.name, env=PluginSection(env_name, env_cfg),
        num_envs=num_envs, agent=PluginSection(agent_name, agent_cfg), graph=graph, run=run,
        recipes=tuple(r.describe() for r in recipes),
        recipe_notes=tuple(f"{r.note} (recipe of {r.describe()})" for r in recipes if r.note),
    )


def build_env(cfg: RunConfig, backend: Backend, num_envs: int | None = None, seed: int | None = None) -> BatchedEnv:
    base, _ = split_name(cfg.env.name)
    cls = registry.load("envs", base)
    return cls(cfg.env.config, num_envs=num_envs or cfg.num_envs, backend=backend, seed=seed)


def choose_graph(cfg: GraphConfig, backend: Backend) -> str:
    """Config first, then ``$NOEIRA_GRAPH_BACKEND``, then a plugin's default, then eager."""
    return (cfg.name or os.environ.get(GRAPH_ENV, "").strip()
            or get_plugin_manager().hook.noeira_default_graph_backend(backend=backend) or "eager")


@torch.no_grad()
def evaluate(agent: Agent, env: BatchedEnv, episodes: int, seed: int) -> dict[str, Any]:
    """Mean and std of the first episode's return in each of ``episodes`` envs, acting
    deterministically (a recurrent policy carries its state). ``env`` must have
    ``num_envs == episodes``."""
    obs = env.reset(seed=seed)
    n = env.num_envs
    returns = torch.zeros(n, dtype=torch.float64, device=env.device)
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    state, done = agent.initial_state(n), torch.ones(n, dtype=torch.bool, device=env.device)
    limit = env.max_episode_steps or 100_000
    for t in range(limit + 1):
        action, state = agent.act(obs, state, done, deterministic=True)
        result = env.step(action)
        returns += result.reward.double() * (~finished)
        done = result.terminated | result.truncated
        finished |= done
        obs = result.obs
        if t % 16 == 15 and bool(finished.all()):
            break
    r = returns.cpu()
    return {"mean_return": float(r.mean()), "std_return": float(r.std(unbiased=False)) if n > 1 else 0.0,
            "episodes": n}


def _atomic_write(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_checkpoint(path: Path, agent: Any, cfg: RunConfig, iteration: int, env_steps: int) -> None:
    """Write a checkpoint atomically (a crash leaves the previous one whole)."""
    payload = {"agent": agent.state_dict(), "iteration": iteration, "env_steps": env_steps,
               "config": cfg.to_dict(), "format": 1}
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, lambda p: torch.save(payload, p))


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        for candidate in (p / "checkpoints" / "final.pt", p / "checkpoints" / "latest.pt", p / "final.pt", p / "latest.pt"):
            if candidate.is_file():
                p = candidate
                break
        else:
            raise UserError(f"{path}: no checkpoint found (looked for checkpoints/final.pt and latest.pt)")
    if not p.is_file():
        raise UserError(f"{path}: no such checkpoint")
    try:
        return torch.load(p, map_location=map_location, weights_only=False)
    except Exception as err:
        raise UserError(f"{p}: not a readable checkpoint ({type(err).__name__}: {err})") from None


def _versions(cfg: RunConfig, graph: str) -> dict[str, str]:
    out = {"torch": torch.__version__, **registry.noeira_distributions()}
    for name, _ in get_plugin_manager().list_name_plugin():  # hook plugins take part in every run
        dist = plugin_distribution(name)
        if dist and dist != "?":
            with contextlib.suppress(md.PackageNotFoundError):
                out.setdefault(dist, md.version(dist))
    network = cfg.to_dict()["agent"].get("network")
    for kind, name in (("envs", split_name(cfg.env.name)[0]), ("agents", cfg.agent.name), ("graph", graph),
                       ("backends", cfg.backend.partition(":")[0]), ("networks", network)):
        for info in registry.list_plugins(kind)[kind]:
            if info.name == name:
                out[info.distribution] = info.version
    return dict(sorted(out.items()))


def _git_commit() -> str | None:
    for where in (Path(__file__).resolve().parent, Path.cwd()):
        try:
            out = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                                 text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0:
            return out.stdout.strip()
    return None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@attrs.define
class Run:
    """A run in progress, as the hooks see it."""

    config: RunConfig
    dir: Path
    """The run directory (written by rank 0 only)."""
    backend: Backend
    env: BatchedEnv
    agent: Agent
    graph: str
    iteration: int = 0
    env_steps: int = 0
    started: str = attrs.field(factory=_now)
    state: dict[str, Any] = attrs.field(factory=dict)
    """Scratch space for hook implementations (one key each)."""


def _new_run_dir(cfg: RunConfig) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{split_name(cfg.env.name)[0]}-{cfg.agent.name}-{stamp}"
    path, i = base, 1
    while path.exists():
        path, i = base.with_name(f"{base.name}-{i}"), i + 1
    return path


def config_from_cli(overrides: list[str], config: str | Path | None = None) -> RunConfig:
    """The config ``noeira train [overrides] [--config FILE]`` runs with."""
    raw = load_toml(config) if config else {}
    return resolve(deep_merge(raw, parse_overrides(overrides)))


@attrs.define
class Pieces:
    """A run's parts, built in the driver's order: seeded, env reset, agent made."""

    cfg: RunConfig
    backend: Backend
    env: BatchedEnv
    agent: Agent
    capture_env: bool
    """Whether ``collect`` is recorded (``graph.capture_env``, else the env's ``capture_safe``)."""
    capture_train: bool

    def close(self) -> None:
        self.env.close()


def build(cfg: RunConfig, graph_name: str = "eager", backend: Backend | None = None) -> Pieces:
    """Seed the backend (the seed offset by its rank), build env and agent, reset the env.
    Raises :class:`ConfigError` for an explicit ``capture_env=true`` on an env that is not
    capture-safe."""
    backend = backend if backend is not None else get_backend(cfg.backend)
    seed = rank_seed(cfg.run.seed, backend.rank)
    backend.seed(seed)
    env = build_env(cfg, backend, seed=seed)
    capture_env = cfg.graph.capture_env
    if capture_env and not env.capture_safe:
        raise ConfigError(f"graph.capture_env: env {cfg.env.name!r} declares its step not capture-safe; "
                          "leave capture_env unset or false")
    if capture_env is None:
        capture_env = env.capture_safe
        if not env.capture_safe and graph_name != "eager":
            log.warning("env %r is not capture-safe: its collect runs eagerly under graph %r", cfg.env.name, graph_name)
    agent = registry.load("agents", cfg.agent.name)(env.spec, backend, cfg.agent.config)
    agent.set_total_steps(cfg.run.total_steps)
    distributed.broadcast_(_shared_tensors(agent, backend))  # every rank starts from rank 0's weights
    env.reset(seed=seed)
    return Pieces(cfg, backend, env, agent, bool(capture_env), cfg.graph.capture_train)


def records_learn(cfg: RunConfig, backend: Backend, graph_name: str) -> bool:
    """Whether ``learn`` is recorded: ``graph.capture_train``, alone. With several processes learn
    holds the gradient all-reduce; recorded with NCCL inside, a 2-GPU run hung on the H200
    (2026-12-01, not yet understood), so it runs eagerly there until that is solved."""
    return bool(cfg.graph.capture_train) and (backend.world_size == 1 or graph_name == "eager")


class _StopRequests:
    """SIGINT and SIGTERM during training: the first asks the loop to stop at the end of the
    current iteration (a consistent checkpoint); a second SIGINT interrupts at once."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopRequests:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # asked twice: stop now
        self.signal = signum
        if signum == signal.SIGINT:
            log.warning("stopping at the end of this iteration (Ctrl-C again to stop at once)")

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in ("config.toml", "record.json", "metrics.jsonl",
                                                                     "checkpoints"))


def prepare_run_dir(path: Path, cfg: RunConfig, overwrite: bool) -> None:
    """Refuse to write over an existing run unless told what to do: ``run.resume`` naming that
    run continues it in place; ``overwrite`` clears it first."""
    if not _is_run_dir(path):
        return
    resume = Path(cfg.run.resume) if cfg.run.resume else None
    if resume is not None and (resume.resolve() == path.resolve() or resume.resolve().parent.parent == path.resolve()):
        return
    if not overwrite:
        raise UserError(f"--run-dir {path}: already holds a run; continue it with run.resume={path}, "
                        "or pass --overwrite to replace it")
    for name in ("config.toml", "record.json", "metrics.jsonl", "metrics.csv"):
        (path / name).unlink(missing_ok=True)
    for ckpt in (path / "checkpoints").glob("*.pt"):
        ckpt.unlink()


def process_backend(name: str) -> Backend:
    """This process's backend: alone, ``name``; launched by torchrun, the device of its local rank
    (``cuda:LOCAL_RANK``) with its rank and world size, the process group joined."""
    base = name.partition(":")[0]
    world = distributed.init(base)
    if world is None:
        return get_backend(name)
    return get_backend(f"{base}:{world.local_rank}" if base == "cuda" else base, world.rank, world.world_size)


def _shared_tensors(agent: Agent, backend: Backend) -> list[torch.Tensor]:
    """The agent's tensors every rank must hold alike (weights, normaliser statistics, optimizer
    state): its state_dict's tensors on the device, except replay buffers and generator states."""
    out: list[torch.Tensor] = []

    def walk(x: Any, key: str) -> None:
        if key in ("replay", "generator"):
            return
        if isinstance(x, torch.Tensor):
            if x.device == backend.device:
                out.append(x)
        elif isinstance(x, Mapping):
            for k, v in x.items():
                walk(v, str(k))
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v, key)

    walk(agent.state_dict(), "")
    return out


def parameter_hash(agent: Agent, backend: Backend) -> str:
    """A digest of the agent's shared tensors (see :func:`_shared_tensors`), to compare ranks."""
    import hashlib

    h = hashlib.sha256()
    for t in _shared_tensors(agent, backend):
        h.update(t.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def episode_metrics(env: BatchedEnv, host: dict[str, float]) -> dict[str, float]:
    """Turn the episode sums read from the device (``pop_episode_stats``) into means:
    ``episode_return``, ``episode_length``, ``episode_<key>`` for each extra ``<key>_sum``, what the
    env derives from those (``episode_metrics``), and ``episodes`` (the count). Edits ``host``."""
    count = host.pop("count")
    sums = {k[: -len("_sum")]: host.pop(k) for k in [k for k in host if k.endswith("_sum")]
            if k in ("return_sum", "length_sum") or k[: -len("_sum")] in getattr(env, "episode_stat_keys", ())}
    out: dict[str, float] = {}
    if count > 0:
        out = {f"episode_{k}": v / count for k, v in sums.items()}
        derive = getattr(env, "episode_metrics", None)
        if derive is not None:
            out.update(derive(out))
    host.update(out)
    host["episodes"] = count
    return host


def train(cfg: RunConfig, run_dir: str | Path | None = None, backend: Backend | None = None,
          overwrite: bool = False) -> dict[str, Any]:
    """Train as ``cfg`` says; returns the record. Rank 0 (the only process when training alone)
    writes the run directory, calls the run hooks and evaluates; other ranks train beside it.
    ``backend`` (default: ``cfg.backend``) is where this process computes, with its rank.

    An existing run at ``run_dir`` is refused unless ``cfg.run.resume`` names it (continue in
    place) or ``overwrite``. SIGINT or SIGTERM stop the loop at the end of an iteration with a
    checkpoint (``checkpoints/latest.pt``) and ``record.json`` (outcome ``interrupted`` or
    ``terminated``), then raise ``KeyboardInterrupt`` or :class:`Terminated`."""
    pm = get_plugin_manager()
    if backend is None:
        backend = process_backend(cfg.backend)
    main = backend.rank == 0
    path = Path(run_dir) if run_dir is not None else _new_run_dir(cfg)
    path = Path(distributed.from_rank_zero(str(path)))  # rank 0's choice (a new directory is named by the time)
    error = None
    if main:
        try:
            prepare_run_dir(path, cfg, overwrite)
            pm.hook.noeira_configure(config=cfg)
        except UserError as err:
            error = str(err)
    error = distributed.from_rank_zero(error)  # a refused run stops every rank before any work
    if error is not None:
        raise UserError(error)
    if main and not cfg.recipes:
        log.warning("no tuned recipe for agent %r on env %r (%s): the plugins' defaults apply and may not solve it",
                    cfg.agent.name, cfg.env.name, cfg.backend)
    for note in cfg.recipe_notes if main else ():
        log.warning("agent %r on env %r (%s): %s", cfg.agent.name, cfg.env.name, cfg.backend, note)
    graph_name = choose_graph(cfg.graph, backend)
    graph = get_graph_backend(graph_name)
    pieces = build(cfg, graph_name, backend)
    env, agent, capture_env = pieces.env, pieces.agent, pieces.capture_env

    if main:
        path.mkdir(parents=True, exist_ok=True)
        (path / "checkpoints").mkdir(exist_ok=True)
        _atomic_write(path / "config.toml", lambda p: p.write_text(cfg.to_toml()))
    run = Run(config=cfg, dir=path, backend=backend, env=env, agent=agent, graph=graph_name)
    if cfg.run.resume:
        ckpt = load_checkpoint(cfg.run.resume, map_location=backend.device)
        run.iteration, run.env_steps = int(ckpt["iteration"]), int(ckpt["env_steps"])
        if run.env_steps >= cfg.run.total_steps:
            env.close()
            raise UserError(f"run.resume={cfg.run.resume}: that run is finished ({run.env_steps:,} of "
                            f"run.total_steps={cfg.run.total_steps:,} steps); raise run.total_steps to train on")
        agent.load_state_dict(ckpt["agent"])

    collect = graph.wrap(agent.collect, backend) if capture_env else agent.collect
    capture_train = records_learn(cfg, backend, graph_name)
    if main and cfg.graph.capture_train and not capture_train:
        log.warning("graph %r: learn runs eagerly with %d processes (collect is still recorded)",
                    graph_name, backend.world_size)
    learn = graph.wrap(agent.learn, backend) if capture_train else agent.learn
    record: dict[str, Any] = {
        "versions": _versions(cfg, graph_name), "commit": _git_commit(), "backend": backend.name,
        "device": backend.device_name(), "graph": graph_name, "capture_env": bool(capture_env),
        "capture_train": capture_train, "run_dir": str(path), "start": run.started,
        "resumed_from": cfg.run.resume or None, "recipes": list(cfg.recipes),
        "recipe_notes": list(cfg.recipe_notes),
        "world_size": backend.world_size, "num_envs_per_rank": cfg.num_envs,
        "devices": distributed.gather_objects(f"{backend.name} {backend.device} ({backend.device_name()})"),
    }
    steps_per_iteration = agent.steps_per_collect * backend.world_size  # the budget counts every rank's steps

    def checkpoint(name: str) -> None:
        if main:
            ckpt = path / "checkpoints" / name
            save_checkpoint(ckpt, agent, cfg, run.iteration, run.env_steps)
            pm.hook.noeira_checkpoint_saved(run=run, path=ckpt)

    outcome = "failed"
    if main:
        pm.hook.noeira_run_started(run=run)
    t0 = time.perf_counter()
    steps0 = run.env_steps
    window_t, window_steps = t0, run.env_steps
    saved_t = t0
    stop = _StopRequests()
    stop_flag = torch.zeros(1, device=backend.device)
    try:
        with stop:
            while run.env_steps < cfg.run.total_steps and stop.signal is None:
                collect(env)
                metrics = learn()
                run.iteration += 1
                run.env_steps += steps_per_iteration
                last = run.env_steps >= cfg.run.total_steps
                if main and (run.iteration % cfg.run.log_interval == 0 or last):
                    host = episode_metrics(env, backend.to_host({**metrics, **env.pop_episode_stats()}))
                    now = time.perf_counter()
                    host["steps_per_second"] = (run.env_steps - window_steps) / max(now - window_t, 1e-9)
                    host["time"] = now - t0  # seconds of training in this process (learning curves over time)
                    window_t, window_steps = now, run.env_steps
                    pm.hook.noeira_iteration(run=run, iteration=run.iteration, env_steps=run.env_steps, metrics=host)
                due_time = cfg.run.checkpoint_minutes > 0 and time.perf_counter() - saved_t >= 60 * cfg.run.checkpoint_minutes
                due_iter = cfg.run.checkpoint_interval and run.iteration % cfg.run.checkpoint_interval == 0
                if (due_time or due_iter) and not last:
                    checkpoint("latest.pt")
                    saved_t = time.perf_counter()
                if backend.world_size > 1 and run.iteration % cfg.run.log_interval == 0:
                    # a signal may reach the ranks at different iterations: stop together
                    stop_flag.fill_(float(stop.signal or 0))
                    distributed.all_reduce_max_(stop_flag)
                    if stop.signal is None and float(stop_flag) > 0:
                        stop.signal = int(stop_flag.item())
        if stop.signal is not None:
            raise Terminated() if stop.signal == signal.SIGTERM else KeyboardInterrupt()
        backend.synchronize()
        train_time = time.perf_counter() - t0
        if backend.world_size > 1:  # the ranks' parameters, hashed on each: they must be identical
            record["param_hashes"] = distributed.gather_objects(parameter_hash(agent, backend))
        checkpoint("final.pt")
        record["train_seconds"] = train_time
        record["steps_per_second"] = (run.env_steps - steps0) / max(train_time, 1e-9)
        if main and cfg.run.eval_episodes:
            t_eval = time.perf_counter()
            eval_env = build_env(cfg, backend, num_envs=cfg.run.eval_episodes, seed=cfg.run.seed + 1)
            record["final_eval"] = evaluate(agent, eval_env, cfg.run.eval_episodes, seed=cfg.run.seed + 1)
            eval_env.close()
            record["eval_seconds"] = time.perf_counter() - t_eval
        outcome = "completed"
    except (KeyboardInterrupt, Terminated) as err:
        outcome = "terminated" if isinstance(err, Terminated) else "interrupted"
        checkpoint("latest.pt")
        raise
    finally:
        record.update({"end": _now(), "env_steps": run.env_steps, "iterations": run.iteration, "outcome": outcome})
        if main:
            _atomic_write(path / "record.json", lambda p: p.write_text(json.dumps(_finite(record), indent=2) + "\n"))
            pm.hook.noeira_run_finished(run=run, outcome=outcome, record=record)
        env.close()
    return record


def _finite(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def eval_run(run_dir: str | Path, episodes: int | None = None, backend: str | None = None) -> dict[str, Any]:
    """Evaluate a run's checkpoint as ``noeira eval`` does; same seed as the run's final eval."""
    p = Path(run_dir)
    if not (p / "config.toml").is_file():
        raise UserError(f"{run_dir}: not a run directory (no config.toml)")
    raw = load_toml(p / "config.toml")
    if backend:
        raw["backend"] = backend
    raw.setdefault("run", {})["resume"] = ""
    cfg = resolve(raw)
    be = get_backend(cfg.backend)
    be.seed(cfg.run.seed)
    n = episodes or cfg.run.eval_episodes or 10
    env = build_env(cfg, be, num_envs=n, seed=cfg.run.seed + 1)
    agent = registry.load("agents", cfg.agent.name)(env.spec, be, cfg.agent.config)
    agent.set_total_steps(cfg.run.total_steps)
    agent.load_state_dict(load_checkpoint(p, map_location=be.device)["agent"])
    try:
        return evaluate(agent, env, n, seed=cfg.run.seed + 1)
    finally:
        env.close()
