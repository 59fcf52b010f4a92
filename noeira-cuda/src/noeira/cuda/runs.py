"""Build a run's pieces from ``noeira train``-style overrides, for the check commands."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import attrs

from noeira.core import registry
from noeira.core.api import get_backend
from noeira.core.config import RunConfig, deep_merge, load_toml, parse_overrides
from noeira.core.contracts import Backend, BatchedEnv
from noeira.core.driver import build_env, resolve
from noeira.core.errors import ConfigError

__all__ = ["Pieces", "build", "config_from_args"]

log = logging.getLogger("noeira")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    raw = load_toml(args.config) if getattr(args, "config", None) else {}
    return resolve(deep_merge(raw, parse_overrides(args.overrides)))


@attrs.define
class Pieces:
    """A run as the driver builds it: seeded, env reset, agent made; which steps are recorded."""

    cfg: RunConfig
    backend: Backend
    env: BatchedEnv
    agent: Any
    capture_env: bool
    capture_train: bool

    def close(self) -> None:
        self.env.close()


def build(cfg: RunConfig, warn: bool = False) -> Pieces:
    """Seed, build env and agent, reset the env: the driver's order, so runs compare."""
    backend = get_backend(cfg.backend)
    backend.seed(cfg.run.seed)
    env = build_env(cfg, backend, seed=cfg.run.seed)
    capture_env = cfg.graph.capture_env
    if capture_env and not env.capture_safe:
        raise ConfigError(f"graph.capture_env: env {cfg.env.name!r} declares its step not capture-safe; "
                          "leave capture_env unset or false")
    if capture_env is None:
        capture_env = env.capture_safe
    agent = registry.load("agents", cfg.agent.name)(env.spec, backend, cfg.agent.config)
    env.reset(seed=cfg.run.seed)
    return Pieces(cfg, backend, env, agent, bool(capture_env), cfg.graph.capture_train)
