"""Run directories: where a run writes, its checkpoints, atomic writes, the code's commit.

A run directory holds ``config.toml`` (the resolved config: ``noeira train --config`` on it
reproduces the run), ``record.json`` (versions, devices, timings, the outcome, the final
evaluation), ``metrics.jsonl`` (one row per log interval) and ``checkpoints/`` (``latest.pt``
while training, ``final.pt`` at the end). Every file is written atomically: a crash leaves
the previous version whole. In a data-parallel run rank 0 writes all of that; every other rank
writes only its part of each checkpoint (``checkpoints/latest.rank1.pt``: its env and agent
state), which a resume at the same world size reads back.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import subprocess
from pathlib import Path
from typing import Any

import attrs
import torch

from noeira.core import rng
from noeira.core.api import split_name
from noeira.core.config import RunConfig, load_toml
from noeira.core.contracts import Agent, Backend, BatchedEnv
from noeira.core.errors import UserError
from noeira.core.files import atomic_write

log = logging.getLogger("noeira")

__all__ = [
    "Resume",
    "Run",
    "atomic_write",
    "check_resume",
    "checkpoint_file",
    "checkpoint_payload",
    "git_commit",
    "is_run_dir",
    "load_checkpoint",
    "new_run_dir",
    "prepare_run_dir",
    "read_resume",
    "restore",
    "resumed_config",
    "save_checkpoint",
    "shard_path",
    "utc_now",
    "write_json",
]


def utc_now() -> str:
    """The time, UTC, to the second (ISO 8601)."""
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
    started: str = attrs.field(factory=utc_now)
    state: dict[str, Any] = attrs.field(factory=dict)
    """Scratch space for hook implementations (one key each)."""


def _finite(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as indented JSON, atomically (non-finite floats as null)."""
    atomic_write(path, lambda p: p.write_text(json.dumps(_finite(data), indent=2) + "\n"))


def new_run_dir(cfg: RunConfig) -> Path:
    """``runs/ENV-AGENT-TIME`` (``-1``, ``-2``... when taken)."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{split_name(cfg.env.name)[0]}-{cfg.agent.name}-{stamp}"
    path, i = base, 1
    while path.exists():
        path, i = base.with_name(f"{base.name}-{i}"), i + 1
    return path


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in ("config.toml", "record.json", "metrics.jsonl",
                                                                     "checkpoints"))


def prepare_run_dir(path: Path, cfg: RunConfig, overwrite: bool) -> None:
    """Refuse to write over an existing run unless told what to do: ``run.resume`` naming that
    run continues it in place; ``overwrite`` clears it first."""
    if not is_run_dir(path):
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


FORMAT = 2
"""The checkpoint format: 1 held the agent; 2 adds the env, torch's generators and the world size."""


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write a checkpoint atomically (a crash leaves the previous one whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda p: torch.save({"format": FORMAT, **payload}, p))


def shard_path(path: Path, rank: int) -> Path:
    """Where rank ``rank`` of a data-parallel run keeps its part of checkpoint ``path`` (rank 0:
    ``path`` itself, which holds the config and counters too): ``latest.rank1.pt``."""
    return path if rank == 0 else path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def checkpoint_file(path: str | Path) -> Path:
    """The checkpoint ``path`` names: a ``.pt`` file, or a run directory's newer of
    ``checkpoints/final.pt`` and ``checkpoints/latest.pt`` (a finished run continued and then
    interrupted has both). A one-line :class:`UserError` when there is none."""
    p = Path(path)
    if p.is_dir():
        found = [c for d in (p / "checkpoints", p) for c in (d / "final.pt", d / "latest.pt") if c.is_file()]
        if not found:
            raise UserError(f"{path}: no checkpoint found (looked for checkpoints/final.pt and latest.pt)")
        return max(found[:2], key=lambda c: c.stat().st_mtime_ns)
    if not p.is_file():
        raise UserError(f"{path}: no such checkpoint")
    return p


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """The checkpoint at ``path`` (see :func:`checkpoint_file`), its tensors on ``map_location``.
    A missing, truncated or foreign file is a one-line :class:`UserError`."""
    p = checkpoint_file(path)
    try:
        ckpt = torch.load(p, map_location=map_location, weights_only=False)
    except Exception as err:
        why = (str(err).strip().splitlines() or [""])[0]
        raise UserError(f"{p}: not a readable checkpoint, truncated or corrupt ({type(err).__name__}: {why})") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") not in (1, FORMAT) or "agent" not in ckpt:
        raise UserError(f"{p}: not a noeira checkpoint (no format {FORMAT} agent state in it)")
    return ckpt


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def check_resume(ckpt: dict[str, Any], cfg: RunConfig, source: str) -> None:
    """Refuse, in one line, to resume ``cfg`` from ``ckpt``: a checkpoint of another agent or env,
    of another env or agent config (``num_envs`` included; keys the plugin added since the
    checkpoint was made take their defaults), or of a run that already ended. The backend,
    graph and run keys may change (``run.total_steps`` extends a finished run)."""
    saved, here = _plain(ckpt.get("config", {})), _plain(cfg.to_dict())
    was = (saved.get("agent", {}).get("name"), saved.get("env", {}).get("name"))
    if was != (cfg.agent.name, cfg.env.name):
        raise UserError(f"run.resume={source}: a checkpoint of agent {was[0]!r} on env {was[1]!r}, not of agent "
                        f"{cfg.agent.name!r} on env {cfg.env.name!r} (resume it with its own config: leave env= and "
                        "agent= out)")
    # keys on one side only are a plugin's newer (or dropped) keys: the checkpoint was made before
    # they existed (a newer key takes its default), so only the keys both sides know are compared
    # (within tables too: a network's options table gained conv and max_timescale in issue 32)
    diffs = [d for section in ("env", "agent") for d in _differences(section, saved.get(section, {}), here[section])]
    if diffs:
        key, there, now = diffs[0]
        more = f" and {len(diffs) - 1} more ({', '.join(d[0] for d in diffs[1:])})" if len(diffs) > 1 else ""
        raise UserError(f"run.resume={source}: the config differs from the checkpoint's at {key} ({there!r} there, "
                        f"{now!r} here){more}; a resumed run keeps its env and agent config (leave those keys out)")
    if int(ckpt["env_steps"]) >= cfg.run.total_steps:
        raise UserError(f"run.resume={source}: that run is finished ({int(ckpt['env_steps']):,} of "
                        f"run.total_steps={cfg.run.total_steps:,} steps); raise run.total_steps to train on")


def _differences(path: str, saved: dict[str, Any], here: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(key path, saved, here)`` for each key both tables hold whose values differ, into nested tables."""
    out = []
    for k in sorted(set(saved) & set(here)):
        a, b = saved[k], here[k]
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(f"{path}.{k}", a, b)
        elif a != b:
            out.append((f"{path}.{k}", a, b))
    return out


def resumed_config(source: str | Path) -> dict[str, Any]:
    """The config a run resumed from ``source`` starts from: that run's ``config.toml`` (a run
    directory's, or the one above ``checkpoints/X.pt``), else the checkpoint's own; the user's
    ``--config`` and overrides go on top. ``{}`` when neither can be read (resuming then says why)."""
    p = Path(source)
    for run in [p] if p.is_dir() else [p.parent.parent, p.parent] if p.is_file() else []:
        if (run / "config.toml").is_file():
            raw = load_toml(run / "config.toml")
            break
    else:
        try:
            raw = _plain(load_checkpoint(p).get("config", {}))
        except UserError:
            return {}
    raw.get("run", {}).pop("resume", None)
    return raw


@attrs.frozen
class Resume:
    """What a rank resumes from: rank 0's checkpoint (the config and counters) and this rank's
    own part (rank 0: the same; another rank: its shard, None when there is none to match)."""

    source: str
    main: dict[str, Any]
    own: dict[str, Any] | None


def read_resume(cfg: RunConfig, backend: Backend) -> Resume:
    """Read and check ``run.resume`` (one-line :class:`UserError`\\ s: no such file, truncated,
    another agent or env, another config, a finished run) before anything is built or written."""
    source = cfg.run.resume
    file = checkpoint_file(source)
    main = load_checkpoint(file, map_location=backend.device)
    check_resume(main, cfg, source)
    own: dict[str, Any] | None = main
    if backend.rank > 0:
        shard = shard_path(file, backend.rank)
        own = None
        if int(main.get("world_size", 1)) == backend.world_size and shard.is_file():
            own = load_checkpoint(shard, map_location=backend.device)
            if int(own.get("iteration", -1)) != int(main["iteration"]):
                own = None  # a shard of another checkpoint
    return Resume(source, main, own)


def restore(agent: Agent, env: BatchedEnv, backend: Backend, cfg: RunConfig, resume: Resume, rank_seed: int) -> None:
    """Load a checkpoint into a freshly built agent and env, in place, and torch's generators
    (a checkpoint of format 1 holds the agent alone). A rank with no part of its own (the world
    size changed) starts from rank 0's state with its generators re-seeded from ``rank_seed``."""
    state = resume.own if resume.own is not None else resume.main
    with rng.reseeds(f"run.resume={resume.source}"):
        try:
            agent.load_state_dict(state["agent"])
            if state.get("env") is not None:
                env.load_state_dict(state["env"])
        except (ValueError, KeyError, RuntimeError) as err:
            why = (str(err).strip().splitlines() or [""])[0]
            raise UserError(f"run.resume={resume.source}: the checkpoint does not fit agent {cfg.agent.name!r} on env "
                            f"{cfg.env.name!r} ({type(err).__name__}: {why})") from None
        if "rng" in state:
            rng.restore_global_rng(state["rng"], backend.device)
    if resume.own is None:  # this rank's generators must not repeat rank 0's streams
        base = rank_seed * 1_000_003 + int(resume.main["iteration"])
        torch.manual_seed(base)
        for i, g in enumerate(backend.generators):
            g.manual_seed(base * 101 + i)
    if backend.rank == 0:
        if resume.main.get("env") is None:
            log.warning("run.resume=%s: the checkpoint holds no env state (format %s): the resumed run starts fresh "
                        "episodes", resume.source, resume.main.get("format"))
        elif env.resume_caveat:
            log.warning("env %r resumes close to, not bit-identically with, the run left alone: %s", cfg.env.name,
                        env.resume_caveat)
        saved_world = int(resume.main.get("world_size", 1))
        if saved_world != backend.world_size and backend.world_size > 1:
            log.warning("run.resume=%s: a checkpoint of %d process(es) resumed by %d: ranks without a part of their "
                        "own start from rank 0's state with re-seeded generators (not bit-exact)", resume.source,
                        saved_world, backend.world_size)


def checkpoint_payload(run: Run) -> dict[str, Any]:
    """What a rank saves of ``run``: its agent and env state, torch's generators, the counters, the
    config, and the rank, world size and device (so a resume knows whether the ranks' parts match)."""
    backend = run.backend
    return {"agent": run.agent.state_dict(), "env": run.env.state_dict(),
            "rng": rng.global_rng_state(backend.device), "iteration": run.iteration, "env_steps": run.env_steps,
            "config": run.config.to_dict(), "world_size": backend.world_size, "rank": backend.rank,
            "device": str(backend.device)}


def git_commit() -> str | None:
    """The commit of the code that runs (the installed source's repository, else the working
    directory's), or None outside a git checkout."""
    for where in (Path(__file__).resolve().parent, Path.cwd()):
        try:
            out = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                                 text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0:
            return out.stdout.strip()
    return None
