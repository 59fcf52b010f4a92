"""The training driver: build by name, loop, log, checkpoint, evaluate.

::

    collect = graph.wrap(agent.collect) if capture_env else agent.collect
    learn   = graph.wrap(agent.learn)   if capture_train else agent.learn
    until total_steps: collect(env); metrics = learn()      # no host sync here
    every log_interval iterations: one read of the device metrics -> hooks

Config resolution is :mod:`noeira.core.resolve`; run directories, checkpoints and resuming are
:mod:`noeira.core.rundir`; evaluation is :mod:`noeira.core.evaluation`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from noeira.core import contracts, distributed, registry, rng
from noeira.core.api import get_backend, get_graph_backend, split_name
from noeira.core.config import GraphConfig, RunConfig, load_toml
from noeira.core.contracts import Agent, Backend, BatchedEnv
from noeira.core.dataset.offline import attach_dataset
from noeira.core.errors import ConfigError, Terminated, UserError
from noeira.core.evaluation import eval_batch, evaluate
from noeira.core.plugins import get_plugin_manager, plugin_distribution
from noeira.core.resolve import config_from_cli, resolve
from noeira.core.rundir import (
    Resume,
    Run,
    atomic_write,
    checkpoint_file,
    checkpoint_payload,
    git_commit,
    load_checkpoint,
    new_run_dir,
    prepare_run_dir,
    read_resume,
    restore,
    save_checkpoint,
    shard_path,
    utc_now,
    write_json,
)

__all__ = [
    "LoadedRun",
    "Pieces",
    "build",
    "build_env",
    "choose_graph",
    "config_from_cli",
    "episode_metrics",
    "eval_run",
    "evaluate",
    "load_checkpoint",
    "load_run",
    "process_backend",
    "rank_seed",
    "records_learn",
    "resolve",
    "train",
]
# resolve, config_from_cli, load_checkpoint and evaluate live in resolve.py, rundir.py and
# evaluation.py; they are named here too because examples, benchmarks and other distributions
# import them from the driver.

log = logging.getLogger("noeira")
GRAPH_ENV = "NOEIRA_GRAPH_BACKEND"


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank`` in a run seeded ``seed``: rank 0 keeps it, other ranks are
    spread far apart so no two ranks (or a rank and an evaluation env) share a stream."""
    return seed + 1_000_003 * rank


def build_env(cfg: RunConfig, backend: Backend, num_envs: int | None = None, seed: int | None = None,
              evaluation: bool = False) -> BatchedEnv:
    """The run's env; ``evaluation``: the one that scores the policy, whose config an env class may
    adjust by an ``evaluation_config(config)`` classmethod (Atari: whole games, not lives)."""
    base, _ = split_name(cfg.env.name)
    cls = registry.load("envs", base)
    config = cfg.env.config
    if evaluation:
        config = contracts.evaluation_config(cls, config)
    return cls(config, num_envs=num_envs or cfg.num_envs, backend=backend, seed=seed)


def choose_graph(cfg: GraphConfig, backend: Backend) -> str:
    """Config first, then ``$NOEIRA_GRAPH_BACKEND``, then a plugin's default, then eager."""
    return (cfg.name or os.environ.get(GRAPH_ENV, "").strip()
            or get_plugin_manager().hook.noeira_default_graph_backend(backend=backend) or "eager")


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
    agent.set_total_steps(-(-cfg.run.total_steps // backend.world_size))  # this process's share
    if attach_dataset(agent, cfg):  # an offline agent (bc, act) reads run.dataset; its collect does nothing
        capture_env = False
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
    state): its state_dict's tensors on the device, except replay buffers, generator states and
    the per-env state of each rank's training envs."""
    out: list[torch.Tensor] = []

    def walk(x: Any, key: str) -> None:
        if key in ("replay", "generator", "training_envs"):
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


def episode_metrics(env: BatchedEnv, host: dict[str, float], stat_keys: Iterable[str]) -> dict[str, float]:
    """Turn the episode sums read from the device (``pop_episode_stats``, whose keys are
    ``stat_keys``) into means: ``episode_return``, ``episode_length``, ``episode_<key>`` for each
    extra ``<key>_sum``, what the env derives from those (its optional ``episode_metrics``), and
    ``episodes`` (the count). Edits ``host``, which holds the agent's metrics too."""
    count = host.pop("count")
    sums = {k[: -len("_sum")]: host.pop(k) for k in stat_keys if k.endswith("_sum")}
    out: dict[str, float] = {}
    if count > 0:
        out = {f"episode_{k}": v / count for k, v in sums.items()}
        out.update(contracts.episode_metrics(env, out))
    host.update(out)
    host["episodes"] = count
    return host


def _agreed(check: Any) -> Any:
    """``check()`` on every rank; a :class:`UserError` on any rank stops them all, before any
    work, with the first rank's message."""
    value, error = None, None
    try:
        value = check()
    except UserError as err:
        error = str(err)
    first = next((e for e in distributed.gather_objects(error) if e is not None), None)
    if first is not None:
        raise UserError(first)
    return value


def train(cfg: RunConfig, run_dir: str | Path | None = None, backend: Backend | None = None,
          overwrite: bool = False) -> dict[str, Any]:
    """Train as ``cfg`` says; returns the record. Rank 0 (the only process when training alone)
    writes the run directory, calls the run hooks and evaluates; other ranks train beside it
    and write their part of each checkpoint. ``backend`` (default: ``cfg.backend``) is where this
    process computes, with its rank.

    An existing run at ``run_dir`` is refused unless ``cfg.run.resume`` names it (continue in
    place) or ``overwrite``. ``run.resume`` is read and checked before anything is written, then
    loaded into the freshly built env and agent: the run continues bit-identically with the run
    left alone (see ``BatchedEnv.resume_caveat`` for envs that cannot). SIGINT or SIGTERM stop the
    loop at the end of an iteration with a checkpoint (``checkpoints/latest.pt``) and
    ``record.json`` (outcome ``interrupted`` or ``terminated``), then raise ``KeyboardInterrupt``
    or :class:`Terminated`."""
    pm = get_plugin_manager()
    if backend is None:
        backend = process_backend(cfg.backend)
    main = backend.rank == 0
    path = Path(run_dir) if run_dir is not None else new_run_dir(cfg)
    path = Path(distributed.from_rank_zero(str(path)))  # rank 0's choice (a new directory is named by the time)

    def start_checks() -> Resume | None:
        if main:
            prepare_run_dir(path, cfg, overwrite)
            pm.hook.noeira_configure(config=cfg)
        return read_resume(cfg, backend) if cfg.run.resume else None

    resume = _agreed(start_checks)  # a refused run stops every rank before any work
    if main and not cfg.recipes:
        log.warning("no tuned recipe for agent %r on env %r (%s): the plugins' defaults apply and may not solve it",
                    cfg.agent.name, cfg.env.name, cfg.backend)
    for note in cfg.recipe_notes if main else ():
        log.warning("agent %r on env %r (%s): %s", cfg.agent.name, cfg.env.name, cfg.backend, note)
    graph_name = choose_graph(cfg.graph, backend)
    graph = get_graph_backend(graph_name)
    pieces = build(cfg, graph_name, backend)
    env, agent, capture_env = pieces.env, pieces.agent, pieces.capture_env
    run = Run(config=cfg, dir=path, backend=backend, env=env, agent=agent, graph=graph_name)
    if resume is not None:
        try:
            _agreed(lambda: restore(agent, env, backend, cfg, resume, rank_seed(cfg.run.seed, backend.rank)))
        except BaseException:
            env.close()
            raise
        run.iteration, run.env_steps = int(resume.main["iteration"]), int(resume.main["env_steps"])

    path.mkdir(parents=True, exist_ok=True)  # every rank: each writes its part of the checkpoints
    (path / "checkpoints").mkdir(exist_ok=True)
    if main:
        atomic_write(path / "config.toml", lambda p: p.write_text(cfg.to_toml()))
    collect = graph.wrap(agent.collect, backend) if capture_env else agent.collect
    capture_train = records_learn(cfg, backend, graph_name)
    if main and cfg.graph.capture_train and not capture_train:
        log.warning("graph %r: learn runs eagerly with %d processes (collect is still recorded)",
                    graph_name, backend.world_size)
    learn = graph.wrap(agent.learn, backend) if capture_train else agent.learn
    record: dict[str, Any] = {
        "versions": _versions(cfg, graph_name), "commit": git_commit(), "backend": backend.name,
        "device": backend.device_name(), "graph": graph_name, "capture_env": bool(capture_env),
        "capture_train": capture_train, "run_dir": str(path), "start": run.started,
        "resumed_from": cfg.run.resume or None, "recipes": list(cfg.recipes),
        "recipe_notes": list(cfg.recipe_notes),
        "world_size": backend.world_size, "num_envs_per_rank": cfg.num_envs,
        "total_steps": cfg.run.total_steps,
        "total_steps_note": (f"the recipe's {cfg.run.total_steps // cfg.world_size:,} x {cfg.world_size} processes "
                             "(each keeps the recipe's iterations)") if cfg.total_steps_scaled else None,
        "devices": distributed.gather_objects(f"{backend.name} {backend.device} ({backend.device_name()})"),
    }
    if resume is not None:
        record["resumed_at"] = {"iteration": run.iteration, "env_steps": run.env_steps}
    steps_per_iteration = agent.steps_per_collect * backend.world_size  # the budget counts every rank's steps

    def checkpoint(name: str) -> None:
        ckpt = shard_path(path / "checkpoints" / name, backend.rank)
        save_checkpoint(ckpt, checkpoint_payload(run))
        if main:
            pm.hook.noeira_checkpoint_saved(run=run, path=ckpt)

    outcome = "failed"
    if main:
        pm.hook.noeira_run_started(run=run)
    t0 = time.perf_counter()
    steps0 = run.env_steps
    window_t, window_steps = t0, run.env_steps
    saved_t = t0
    stop = _StopRequests()
    agree = torch.zeros(2, device=backend.device)  # (signal, checkpoint due by time): ranks act together
    stopping: int | None = None  # the signal the loop stops for (with several processes: once all agree)
    try:
        with stop:
            while run.env_steps < cfg.run.total_steps and stopping is None:
                collect(env)
                metrics = learn()
                run.iteration += 1
                run.env_steps += steps_per_iteration
                last = run.env_steps >= cfg.run.total_steps
                if main and (run.iteration % cfg.run.log_interval == 0 or last):
                    stats = env.pop_episode_stats()
                    host = episode_metrics(env, backend.to_host({**metrics, **stats}), stats)
                    now = time.perf_counter()
                    host["steps_per_second"] = (run.env_steps - window_steps) / max(now - window_t, 1e-9)
                    host["time"] = now - t0  # seconds of training in this process (learning curves over time)
                    window_t, window_steps = now, run.env_steps
                    pm.hook.noeira_iteration(run=run, iteration=run.iteration, env_steps=run.env_steps, metrics=host)
                due_time = cfg.run.checkpoint_minutes > 0 and time.perf_counter() - saved_t >= 60 * cfg.run.checkpoint_minutes
                due_iter = cfg.run.checkpoint_interval and run.iteration % cfg.run.checkpoint_interval == 0
                if backend.world_size == 1:
                    stopping = stop.signal
                else:
                    # a signal reaches the ranks at different iterations, and their clocks differ: they
                    # stop, and checkpoint by time, at the log interval where one of them asks (a rank
                    # leaving alone would leave the others waiting in the next collective)
                    due_time = False
                    if run.iteration % cfg.run.log_interval == 0 or last:
                        agree[0].fill_(float(stop.signal or 0))
                        agree[1].fill_(float(cfg.run.checkpoint_minutes > 0 and
                                             time.perf_counter() - saved_t >= 60 * cfg.run.checkpoint_minutes))
                        distributed.all_reduce_max_(agree)
                        flags = agree.tolist()
                        stopping = int(flags[0]) if flags[0] > 0 else None
                        due_time = flags[1] > 0
                if (due_time or due_iter) and not last and stopping is None:
                    checkpoint("latest.pt")
                    saved_t = time.perf_counter()
        if stopping is not None:
            raise Terminated() if stopping == signal.SIGTERM else KeyboardInterrupt()
        backend.synchronize()
        train_time = time.perf_counter() - t0
        if backend.world_size > 1:  # the ranks' parameters, hashed on each: they must be identical
            record["param_hashes"] = distributed.gather_objects(parameter_hash(agent, backend))
        checkpoint("final.pt")
        record["train_seconds"] = train_time
        record["steps_per_second"] = (run.env_steps - steps0) / max(train_time, 1e-9)
        if main and cfg.run.eval_episodes:
            t_eval = time.perf_counter()
            eval_env = build_env(cfg, backend, num_envs=eval_batch(cfg, cfg.run.eval_episodes), seed=cfg.run.seed + 1,
                                 evaluation=True)
            try:
                record["final_eval"] = evaluate(agent, eval_env, cfg.run.eval_episodes, seed=cfg.run.seed + 1,
                                                graph=graph, backend=backend)
            finally:
                eval_env.close()
            record["eval_seconds"] = time.perf_counter() - t_eval
        outcome = "completed"
    except (KeyboardInterrupt, Terminated) as err:
        outcome = "terminated" if isinstance(err, Terminated) else "interrupted"
        checkpoint("latest.pt")
        raise
    finally:
        record.update({"end": utc_now(), "env_steps": run.env_steps, "iterations": run.iteration, "outcome": outcome})
        if main:
            write_json(path / "record.json", record)
            pm.hook.noeira_run_finished(run=run, outcome=outcome, record=record)
        env.close()
    return record


@attrs.define
class LoadedRun:
    """A trained run, loaded to act: its config, backend, a fresh env and the agent with the
    checkpoint's weights."""

    cfg: RunConfig
    backend: Backend
    env: BatchedEnv
    agent: Agent
    seed: int
    """The seed ``env`` was built with (``run.seed + seed_offset``; by default the final evaluation's)."""
    path: Path
    """The run directory."""

    def close(self) -> None:
        self.env.close()


def load_run(run_dir: str | Path, num_envs: int | None = None, backend: str | None = None,
             episodes: int | None = None, seed_offset: int = 1) -> LoadedRun:
    """A run directory's config and checkpoint, built to act on ``num_envs`` envs (default: as
    many as an evaluation of ``episodes`` episodes runs, :func:`eval_batch`; ``episodes``
    defaults to the run's ``eval_episodes``, else 10) on ``backend`` (default: the run's; a
    checkpoint made on any device loads on any other), seeded ``run.seed + seed_offset`` (by
    default as the run's final evaluation). ``noeira eval``, ``--video``, ``noeira export``,
    ``noeira record`` and ``noeira deploy`` all load runs with it. The agent is built to act
    only (``training=False``): training-only keys are not checked against ``num_envs``, and no
    replay buffer is allocated."""
    p = Path(run_dir)
    if not (p / "config.toml").is_file():
        raise UserError(f"{run_dir}: not a run directory (no config.toml)")
    raw = load_toml(p / "config.toml")
    if backend:
        raw["backend"] = backend
    raw.setdefault("run", {})["resume"] = ""
    cfg = resolve(raw, world_size=1)
    be = get_backend(cfg.backend)
    ckpt = load_checkpoint(p, map_location=be.device)
    was = ckpt.get("config", {})
    if (was.get("agent", {}).get("name"), was.get("env", {}).get("name")) != (cfg.agent.name, cfg.env.name):
        raise UserError(f"{checkpoint_file(p)}: a checkpoint of agent {was.get('agent', {}).get('name')!r} on env "
                        f"{was.get('env', {}).get('name')!r}, but {p / 'config.toml'} names agent {cfg.agent.name!r} "
                        f"on env {cfg.env.name!r}")
    be.seed(cfg.run.seed)
    seed = cfg.run.seed + seed_offset
    env = build_env(cfg, be, num_envs=num_envs or eval_batch(cfg, episodes or cfg.run.eval_episodes or 10), seed=seed,
                    evaluation=True)
    try:
        cls = registry.load("agents", cfg.agent.name)
        try:
            agent = cls(env.spec, be, cfg.agent.config, training=False)
        except TypeError as err:  # a plugin written before the keyword: build it as it trained
            if "training" not in str(err):
                raise
            log.warning("agent %r does not take training=False (see the Agent contract): built as it trained, to act",
                        cfg.agent.name)
            agent = cls(attrs.evolve(env.spec, num_envs=cfg.num_envs), be, cfg.agent.config)
        with rng.reseeds(f"{p}: a checkpoint made on {ckpt.get('device', 'another device')}"):
            agent.load_state_dict(ckpt["agent"])
    except BaseException:
        env.close()
        raise
    return LoadedRun(cfg, be, env, agent, seed, p)


def eval_run(run_dir: str | Path, episodes: int | None = None, backend: str | None = None) -> dict[str, Any]:
    """Evaluate a run's checkpoint as ``noeira eval`` does (``episodes``: default the run's
    ``eval_episodes``, else 10), with the run's seed and graph backend: the run's final
    evaluation, reproduced."""
    run = load_run(run_dir, backend=backend, episodes=episodes)
    episodes = episodes or run.cfg.run.eval_episodes or 10
    try:
        graph_name = choose_graph(run.cfg.graph, run.backend)
        graph = get_graph_backend(graph_name) if graph_name != "eager" else None
        return evaluate(run.agent, run.env, episodes, seed=run.seed, graph=graph, backend=run.backend)
    finally:
        run.close()
