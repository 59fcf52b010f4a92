"""The run pieces the check commands build: the driver's own, from the same overrides."""

from __future__ import annotations

import argparse

from noeira.core.config import RunConfig
from noeira.core.driver import Pieces, build, config_from_cli

__all__ = ["Pieces", "build", "config_from_args"]


def config_from_args(args: argparse.Namespace) -> RunConfig:
    return config_from_cli(args.overrides, getattr(args, "config", None))
