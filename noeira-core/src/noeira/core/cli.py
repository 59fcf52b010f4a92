"""The ``noeira`` command line: train, eval, list, info, and commands that plugins add.

User errors print one line and exit with code 2 (``--debug`` shows the traceback).

Start-up is kept short: this module imports neither torch nor rich; each command imports what
it uses (``noeira --help`` and ``noeira list`` never import torch; ``benchmarks/startup.py``
measures it and ``tests/core/test_startup.py`` keeps it so)."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from noeira.core import commands, distributed, registry
from noeira.core.api import split_name
from noeira.core.config import (
    DEFAULT_AGENT,
    DEFAULT_ENV,
    GraphConfig,
    RunSection,
    describe,
    parse_overrides,
)
from noeira.core.errors import Terminated, UserError
from noeira.core.plugins import get_plugin_manager

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["main"]


def _console(stderr: bool = False, **kwargs: Any) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, **kwargs)


def _print_keys(title: str, cls: type | None, console: Console) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    for col in ("key", "type", "default", "doc"):
        table.add_column(col, overflow="fold")
    if cls is not None:
        for key, tname, default, doc in describe(cls):
            table.add_row(key, tname, repr(default), doc)
    console.print(table)


def _print_recipes(agent: str, env: str, overrides: dict[str, Any], console: Console, world_size: int = 1) -> None:
    from noeira.core.api import get_backend
    from noeira.core.recipes import find_recipes

    backend = get_backend(str(overrides.get("backend", "auto")))
    num_envs = overrides.get("env", {}).get("num_envs")
    recipes = find_recipes(agent, env, backend.name, num_envs if isinstance(num_envs, int) else None,
                           overrides.get("agent", {}).get("network"))
    if not recipes:
        console.print(f"recipe: none for agent={agent} env={env} on {backend.name} (plugin defaults apply)\n")
        return
    console.print(f"recipes for agent={agent} env={env} on {backend.name}, lowest layer first "
                  "(your --config and KEY=VALUE go above them):", highlight=False)
    for r in recipes:
        flat = ", ".join(f"{section}.{k}={v!r}" for section, table in r.values.items() for k, v in table.items())
        console.print(f"  from {r.describe()}: {flat}", highlight=False, markup=False)
        if r.note:
            console.print(f"    note: {r.note}", highlight=False, markup=False)
    steps = next((r.values["run"]["total_steps"] for r in reversed(recipes) if "total_steps" in r.values.get("run", {})),
                 None)
    if world_size > 1 and steps is not None and "total_steps" not in overrides.get("run", {}):
        console.print(f"  with {world_size} processes: run.total_steps={steps * world_size:,} ({steps:,} x {world_size}: "
                      "each process keeps the recipe's iterations)", highlight=False, markup=False)
    console.print("")


def _train_help(overrides: dict[str, Any], world_size: int = 1) -> int:
    console = _console()
    console.print(
        "usage: noeira train [KEY=VALUE ...] [--config FILE] [--run-dir DIR] [--overwrite] [--debug]\n"
        "                    [--nproc-per-node N [--nnodes M --rdzv-endpoint HOST:PORT --node-rank R]]\n\n"
        "Trains an agent on an env, writing a run directory (config.toml, record.json, "
        "metrics.jsonl, checkpoints/).\nKEY=VALUE overrides any config key: env=NAME, "
        "agent=NAME, backend=cpu|cuda|auto, graph=NAME, env.num_envs=N (per process with --nproc-per-node), "
        "agent.KEY=V, run.KEY=V.\n"
        "With --nproc-per-node N each process steps its own env.num_envs envs, so the global batch is N times "
        "larger, as with N times the envs;\nthe recipes keep their iterations: unless you set run.total_steps "
        "(always the count of every process's steps), it becomes N times the recipe's.\n"
        "run.resume=DIR continues run DIR bit-identically, with its own config as the lowest layer (change the "
        "run.* keys, backend or graph; not env or agent).\n"
    )
    env_name = overrides.get("env", {}).get("name", DEFAULT_ENV)
    agent_name = overrides.get("agent", {}).get("name", DEFAULT_AGENT)
    _print_recipes(agent_name, env_name, overrides, console, world_size)
    _print_keys(f"agent={agent_name} (agent.KEY)", getattr(registry.load("agents", agent_name), "Config", None), console)
    _print_keys(f"env={env_name} (env.KEY; also env.num_envs)",
                getattr(registry.load("envs", split_name(env_name)[0]), "Config", None), console)
    _print_keys("graph.KEY", GraphConfig, console)
    _print_keys("run.KEY", RunSection, console)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from noeira.core.driver import config_from_cli, train

    world_size = _launch_world_size(args)
    if args.help:
        return _train_help(parse_overrides(args.overrides), world_size or 1)
    cfg = config_from_cli(args.overrides, args.config, world_size)  # a config error stops here, before any process starts
    if args.nproc_per_node is not None and distributed.from_environment() is None:
        from pathlib import Path

        from noeira.core.rundir import prepare_run_dir

        if args.run_dir and not args.overwrite:
            prepare_run_dir(Path(args.run_dir), cfg, overwrite=False)  # refuse an existing run before launching
        return distributed.launch(_without_launch_options(args.raw_argv), args.nproc_per_node, args.nnodes,
                                  args.rdzv_endpoint or "", args.node_rank)
    try:
        record = train(cfg, run_dir=args.run_dir, overwrite=args.overwrite)
    except BaseException as err:
        distributed.record_failure(err)  # before leaving the group, which makes the other ranks fail too
        distributed.shutdown(wait=False)
        raise
    rank = distributed.current()[0]
    distributed.shutdown()
    if rank != 0:
        return 0  # rank 0 reports the run
    ev = record.get("final_eval")
    evs = f", eval {ev['mean_return']:.1f} ± {ev['std_return']:.1f} over {ev['episodes']} episodes" if ev else ""
    print(
        f"{cfg.agent.name} on {cfg.env.name} ({record['backend']}, graph {record['graph']}): "
        f"{record['env_steps']:,} steps in {record['train_seconds']:.1f} s "
        f"({record['steps_per_second']:,.0f} steps/s){evs} -> {record['run_dir']}"
    )
    return 0


_LAUNCH_OPTIONS = ("--nproc-per-node", "--nnodes", "--rdzv-endpoint", "--node-rank")


def _launch_world_size(args: argparse.Namespace) -> int | None:
    """The processes ``--nproc-per-node`` x ``--nnodes`` will start (None: not launching; an
    elastic ``MIN:MAX`` node count counts MAX), which scale ``run.total_steps`` as they will in the ranks."""
    if args.nproc_per_node is None or distributed.from_environment() is not None:
        return None
    nodes = str(args.nnodes).rpartition(":")[2]
    return args.nproc_per_node * (int(nodes) if nodes.isdigit() else 1)


def _without_launch_options(argv: list[str]) -> list[str]:
    """``noeira train`` arguments for each rank: the launcher's own options taken out."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in _LAUNCH_OPTIONS:
            skip = "=" not in a
            continue
        if a != "train":
            out.append(a)
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    from noeira.core.driver import eval_run

    if args.episodes is not None and args.episodes < 1:
        raise UserError(f"--episodes: must be >= 1, got {args.episodes}")
    if args.video:  # the video alone, unless --episodes asks for the evaluation too
        from noeira.core.video import record_video

        video = record_video(args.run_dir, args.video, backend=args.backend, fps=args.fps, max_frames=args.video_frames)
        if args.episodes is None:
            if args.json:
                print(json.dumps({"video": video}))
            else:
                print(f"video: {video['frames']} frames ({video['size'][1]}x{video['size'][0]}, {video['fps']:g} fps) "
                      f"of one deterministic episode, return {video['episode_return']:.1f} -> {video['path']}")
            return 0
    result = eval_run(args.run_dir, episodes=args.episodes, backend=args.backend)
    if args.json:
        print(json.dumps({**result, "video": video} if args.video else result))
    else:
        if args.video:
            print(f"video: {video['frames']} frames -> {video['path']}")
        print(f"eval {result['mean_return']:.1f} ± {result['std_return']:.1f} over {result['episodes']} episodes "
              f"(deterministic) -> {args.run_dir}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from noeira.core.plot import plot_runs

    print(plot_runs(args.run_dirs, args.out, args.metric))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    plugins = registry.list_plugins()
    hooks = [(ep.name, *registry.dist_info(ep)) for ep in registry.entry_points("noeira")]
    if args.json:
        out: dict[str, Any] = {k: [{"name": p.name, "distribution": p.distribution, "version": p.version,
                                    "summary": p.summary} for p in v] for k, v in plugins.items()}
        out["hooks"] = [{"name": n, "distribution": d, "version": v, "summary": s} for n, d, v, s in sorted(hooks)]
        print(json.dumps(out, indent=2))
        return 0
    from rich.table import Table

    # one row per kind (names grouped by distribution), then one line per distribution: fits 80 columns
    dists: dict[str, tuple[str, str]] = {}
    table = Table(title="installed noeira plugins", show_lines=False, expand=False)
    table.add_column("kind", no_wrap=True)
    table.add_column("names (distribution)", overflow="fold")
    rows = {kind: [(p.name, p.distribution) for p in ps] for kind, ps in plugins.items()}
    rows["hooks"] = [(n, d) for n, d, _, _ in hooks]
    for kind, items in rows.items():
        by_dist: dict[str, list[str]] = {}
        for name, dist in items:
            by_dist.setdefault(dist, []).append(name)
        table.add_row(kind, "; ".join(f"{', '.join(sorted(ns))} ({d})" for d, ns in sorted(by_dist.items())) or "-")
    for ps in plugins.values():
        for p in ps:
            dists[p.distribution] = (p.version, p.summary)
    for _, d, v, summary in hooks:
        dists[d] = (v, summary)
    console = _console()
    console.print(table)
    dist_table = Table(title="distributions", show_lines=False)
    for col in ("distribution", "version", "summary"):
        dist_table.add_column(col, overflow="fold")
    for d, (v, summary) in sorted(dists.items()):
        dist_table.add_row(d, v, summary)
    console.print(dist_table)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    import torch

    from noeira.core.api import get_backend

    lines = [f"python {platform.python_version()} ({platform.platform()})", f"torch {torch.__version__}"]
    lines += [f"{name} {version}" for name, version in registry.noeira_distributions().items()]
    for name in registry.names("backends"):
        try:
            b = get_backend(name)
            lines.append(f"backend {name}: available ({b.device}, {b.device_name()})")
        except UserError as err:
            lines.append(f"backend {name}: unavailable ({err})")
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            lines.append(f"gpu {i}: {torch.cuda.get_device_name(i)}")
    else:
        lines.append("gpu: none")
    print("\n".join(lines))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="noeira", description="noeira: reinforcement learning on one device.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", add_help=False, help="train an agent (no arguments: PPO on CartPole)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--config", help="a TOML config (a run's config.toml reproduces it)")
    p.add_argument("--run-dir", help="where to write the run (default runs/ENV-AGENT-TIME); an existing run is "
                   "refused unless run.resume names it (continue) or --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --run-dir")
    p.add_argument("--nproc-per-node", type=int, metavar="N",
                   help="train data-parallel in N processes on this node (one GPU each; env.num_envs is per process), "
                        "launched through torchrun's API")
    p.add_argument("--nnodes", default="1", help="nodes (or MIN:MAX) of a multi-node run, with --rdzv-endpoint")
    p.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="where the nodes of a multi-node run meet")
    p.add_argument("--node-rank", type=int, help="this node's rank in a multi-node run (else assigned)")
    p.add_argument("-h", "--help", action="store_true", help="show the keys of the chosen plugins")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="evaluate a run's checkpoint")
    p.add_argument("run_dir")
    p.add_argument("--episodes", type=int)
    p.add_argument("--backend", help="evaluate on another backend")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--video", metavar="PATH", help="render one deterministic episode to PATH (.mp4, .gif; needs "
                   "pip install 'noeira-core[video]'); with --episodes, evaluate too")
    p.add_argument("--fps", type=float, help="frames per second of the video (default: the env's)")
    p.add_argument("--video-frames", type=int, metavar="N", help="at most N frames (default: the whole episode)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("plot", help="learning curves of runs to a PNG (needs matplotlib)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("-o", "--out", default="curves.png", help="the PNG to write (default curves.png)")
    p.add_argument("--metric", default="episode_return", help="the metrics.jsonl key to plot")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("list", help="installed plugins by kind")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="versions, backends, GPU")
    p.set_defaults(func=cmd_info)

    commands.add_commands(sub)  # noeira record, noeira export
    get_plugin_manager().hook.noeira_add_commands(subparsers=sub)
    return parser


_COMMANDS_FROM = {"robot": "noeira-robot", "deploy": "noeira-robot", "verify-graph": "noeira-cuda",
                  "check-capture": "noeira-cuda"}
"""Commands that other noeira distributions add (through noeira_add_commands)."""


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parse_args``, but ``train`` takes its KEY=VALUE overrides before and after options
    (``noeira train --run-dir R run.resume=R``)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if command in _COMMANDS_FROM and command not in sub.choices:
        dist = _COMMANDS_FROM[command]
        raise UserError(f"`noeira {command}` comes with the {dist} distribution, which is not installed "
                        f"(pip install ./{dist} from a clone)")
    args, extra = parser.parse_known_args(argv)
    args.raw_argv = list(argv)
    if getattr(args, "command", None) == "train":
        args.overrides += [x for x in extra if "=" in x and not x.startswith("-")]
        extra = [x for x in extra if "=" not in x or x.startswith("-")]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _report(message: str, soft_wrap: bool = False) -> None:
    _console(stderr=True, highlight=False).print(message, markup=False, soft_wrap=soft_wrap)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = _parse(parser, argv)
        if args.command is None:
            args = _parse(parser, ["train", *argv])
        try:
            code = int(args.func(args) or 0)
        except BaseException:
            distributed.shutdown(wait=False)
            raise
        distributed.shutdown()  # a command run under torchrun (verify-graph, check-capture) leaves its group
        return code
    except UserError as e:
        if debug:
            raise
        _report(f"noeira: error: {e}", soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        _report("noeira: interrupted (the run directory holds a checkpoint of the last iteration)")
        return 130
    except Terminated:
        _report("noeira: terminated by SIGTERM (the run directory holds a checkpoint of the last iteration)")
        return 143


if __name__ == "__main__":
    sys.exit(main())
