"""Run directories: where a run writes, its checkpoints, atomic writes, the code's commit.

A run directory holds ``config.toml`` (the resolved config: ``noeira train --config`` on it
reproduces the run), ``record.json`` (versions, devices, timings, the outcome, the final
evaluation), ``metrics.jsonl`` (one row per log interval) and ``checkpoints/`` (``latest.pt``
while training, ``final.pt`` at the end). Every file is written atomically: a crash leaves
the previous version whole.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import torch

from noeira.core.api import split_name
from noeira.core.config import RunConfig
from noeira.core.contracts import Agent, Backend, BatchedEnv
from noeira.core.errors import UserError

__all__ = [
    "Run",
    "atomic_write",
    "git_commit",
    "is_run_dir",
    "load_checkpoint",
    "new_run_dir",
    "prepare_run_dir",
    "save_checkpoint",
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


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """``write(tmp)`` into a temporary file beside ``path``, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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


def save_checkpoint(path: Path, agent: Any, cfg: RunConfig, iteration: int, env_steps: int) -> None:
    """Write a checkpoint atomically (a crash leaves the previous one whole)."""
    payload = {"agent": agent.state_dict(), "iteration": iteration, "env_steps": env_steps,
               "config": cfg.to_dict(), "format": 1}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda p: torch.save(payload, p))


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """The checkpoint at ``path``: a ``.pt`` file, or a run directory (its ``final.pt``, else
    its ``latest.pt``). A missing or unreadable file is a one-line :class:`UserError`."""
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
