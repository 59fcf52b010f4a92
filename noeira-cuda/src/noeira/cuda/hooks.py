"""Hook implementations of noeira-cuda: ``stream`` as the default graph backend on CUDA, and the
``check-capture`` / ``verify-graph`` commands. Import-light: the commands load their modules
only when run."""

from __future__ import annotations

import argparse
from typing import Any

from noeira.core.plugins import hookimpl


@hookimpl
def noeira_default_graph_backend(backend: Any) -> str | None:
    return "stream" if backend.device.type == "cuda" else None


def _check_capture(args: argparse.Namespace) -> int:
    from noeira.cuda.check import cmd_check_capture

    return cmd_check_capture(args)


def _verify_graph(args: argparse.Namespace) -> int:
    from noeira.cuda.verify import cmd_verify_graph

    return cmd_verify_graph(args)


@hookimpl
def noeira_add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "check-capture", help="list what would break a CUDA-graph recording of collect and learn",
        description="Builds the run from the same overrides as `noeira train`, runs collect and learn "
                    "eagerly with detectors on (host syncs, CPU tensors in a CUDA step, allocations and "
                    "Python values that change between calls) and lists each finding with the file and "
                    "line of the code that caused it. Exit 0: clean; 1: findings.")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--config", help="a TOML config, as for `noeira train`")
    p.add_argument("--warmup", type=int, default=1, help="unchecked calls first (lazy initialisation), default 1")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=_check_capture)

    p = subparsers.add_parser(
        "verify-graph", help="compare K eager iterations with K recorded ones, bit for bit",
        description="Runs K iterations (collect + learn) eagerly and K with the run's graph backend from the "
                    "same seed, hashing parameters, optimizer state, rollout/replay buffers, env state and "
                    "generators after each; prints the first iteration and tensor that differ (exit 1).")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--config", help="a TOML config, as for `noeira train`")
    p.add_argument("--iterations", "-k", type=int, default=6, help="iterations per run (default 6)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=_verify_graph)
