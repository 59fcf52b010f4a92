"""Core's commands beyond train/eval, kept out of ``cli.py`` so that it stays small: ``noeira
record`` (episodes into a LeRobot v3 dataset) and ``noeira export`` (a run's policy as
TorchScript, ONNX or torch.export). The CLI adds them with :func:`add_commands`, beside those
that plugins add through ``noeira_add_commands``. Imported whenever the CLI starts: nothing
heavy at the top (torch, pyarrow and PyAV are imported inside the commands)."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from noeira.core.errors import NoeiraError, UserError

__all__ = ["add_commands"]


@contextlib.contextmanager
def _stop_requests() -> Iterator[list[int]]:
    """SIGINT and SIGTERM ask the loop to stop after the current step (the list gets the
    signal); the previous handlers come back afterwards."""
    got: list[int] = []
    old: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, lambda s, _f: got.append(s))
    try:
        yield got
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _say(text: str) -> None:
    print(text, flush=True)


# -- noeira record ----------------------------------------------------------------------------

def cmd_record(args: argparse.Namespace) -> int:
    if args.episodes < 1:
        raise UserError(f"--episodes: must be >= 1, got {args.episodes}")
    if args.robot:
        return _record_robot(args)
    return _record_sim(args)


def _writer(args: argparse.Namespace, fps: int, features: dict[str, Any], robot_type: str) -> Any:
    from noeira.core.dataset import DatasetWriter

    return DatasetWriter(args.out, fps=fps, features=features, robot_type=robot_type, resume=args.resume,
                         video_codec=args.video_codec)


def _record_sim(args: argparse.Namespace) -> int:
    from noeira.core import contracts
    from noeira.core.api import make_env
    from noeira.core.config import parse_overrides
    from noeira.core.dataset.record import SIM_PREFIX, env_features, record_env, scripted_policy

    if bool(args.policy) == bool(args.scripted):
        raise UserError("record: say what acts: --policy RUN_DIR (a trained run) or --scripted random|zero")
    if args.num_envs < 1:
        raise UserError(f"--num-envs: must be >= 1, got {args.num_envs}")
    overrides = parse_overrides(args.overrides)
    unknown = [k for k in overrides if k != "env"]
    if unknown:
        raise UserError(f"record: only env=NAME and env.KEY=VALUE overrides apply here, got {', '.join(unknown)}")
    env_table = dict(overrides.get("env", {}))
    if args.policy:
        from noeira.core.driver import load_run

        if env_table:
            raise UserError("record --policy: the env is the run's own (its config.toml); drop the env overrides")
        run = load_run(args.policy, backend=args.backend, num_envs=args.num_envs, seed_offset=args.seed)
        env, agent, env_name = run.env, run.agent, run.cfg.env.name
        stochastic = args.stochastic

        def act(obs: Any, state: Any, done: Any) -> Any:
            return agent.act(obs, state, done, deterministic=not stochastic)

        initial = agent.initial_state(args.num_envs)
    else:
        env_name = env_table.pop("name", None)
        if not env_name:
            raise UserError("record --scripted: name the env (env=NAME)")
        env = make_env(env_name, num_envs=args.num_envs, backend=args.backend or "cpu", seed=args.seed, **env_table)
        act, initial = scripted_policy(args.scripted, env.spec, args.seed), None
    try:
        hw = None
        if args.camera:
            try:
                frame = contracts.render(env)
            except NotImplementedError:
                raise UserError(f"--camera: env {env_name!r} cannot render frames") from None
            hw = (int(frame.shape[1]), int(frame.shape[2]))
        fps = int(round(args.fps or contracts.render_fps(env) or 30))
        writer = _writer(args, fps, env_features(env.spec, hw), f"{SIM_PREFIX}{env_name}")
        with _stop_requests() as stop, writer:
            def report(index: int, frames: int, ret: float) -> None:
                _say(f"episode {index}: {frames} frames, return {ret:.2f}")

            saved = record_env(env, act, writer, args.episodes, initial_state=initial, task=args.task,
                               camera=args.camera, seed=args.seed, on_episode=report, stop=lambda: bool(stop))
    finally:
        env.close()
    _say(f"{saved} episodes recorded (the dataset holds {writer.num_episodes}, {writer.num_frames} frames at "
         f"{fps} fps) -> {args.out}")
    return _stopped_code(stop, saved)


def _stopped_code(stop: list[int], saved: int) -> int:
    if not stop:
        return 0
    name = "SIGTERM" if stop[0] == signal.SIGTERM else "SIGINT"
    print(f"stopped by {name}: the {saved} episodes finished are saved, the one being recorded is dropped",
          file=sys.stderr, flush=True)
    return 143 if stop[0] == signal.SIGTERM else 130


def _record_robot(args: argparse.Namespace) -> int:
    from noeira.core.api import make_robot
    from noeira.core.dataset.record import record_teleop, robot_features

    if args.overrides:
        raise UserError("record --robot: KEY=VALUE overrides are for simulators; drop them")
    for flag in ("port", "teleop", "teleop_port"):
        if not getattr(args, flag):
            raise UserError(f"record --robot: --{flag.replace('_', '-')} is required")
    if args.episode_seconds <= 0:
        raise UserError(f"--episode-seconds: must be > 0, got {args.episode_seconds}")
    fps = int(round(args.fps or 30))
    if fps < 1:
        raise UserError(f"--fps: must be >= 1, got {args.fps}")
    with _stop_requests() as stop:  # before the drivers: their torque-off handlers chain to this
        follower = make_robot(args.robot, port=args.port, calibration=args.calibration)
        leader = make_robot(args.teleop, port=args.teleop_port, calibration=args.teleop_calibration)
        saved = 0
        try:
            with follower, leader:
                joints = list(follower.read())
                if not set(joints) <= set(leader.read()):
                    raise UserError(f"record: the leader {args.teleop!r} lacks joints of the follower {args.robot!r}")
                robot_type = getattr(follower, "robot_type", args.robot)
                writer = _writer(args, fps, robot_features(joints), robot_type)
                with writer:
                    if not args.yes:
                        answer = _ask("Arm the follower? It will hold its pose, then follow the leader. [y/N] ")
                        if answer.strip().lower() not in ("y", "yes"):
                            _say("not armed; nothing recorded")
                            return 1
                    follower.arm()
                    _say(f"follower armed; recording {args.episodes} episodes of {args.episode_seconds:g} s at {fps} fps")

                    def report(index: int, frames: int, seconds: float) -> None:
                        _say(f"episode {index}: {frames} frames")

                    try:
                        saved = record_teleop(follower, leader, writer, args.episodes, episode_seconds=args.episode_seconds,
                                              fps=fps, task=args.task, reset_seconds=args.reset_seconds,
                                              on_episode=report, stop=lambda: bool(stop))
                    except NoeiraError:
                        if not stop:  # a fault: one line; a stop request may fail the step in flight
                            raise
                    finally:
                        follower.disarm()
        except UserError:
            raise
        except NoeiraError as err:  # a bus or motor fault: torque is off, say it in one line
            raise UserError(f"record: {err}") from err
    _say(f"{saved} episodes recorded -> {args.out} (follower disarmed)")
    return _stopped_code(stop, saved)


def _ask(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        return ""


# -- noeira export ----------------------------------------------------------------------------

def cmd_export(args: argparse.Namespace) -> int:
    from noeira.core.export import export_policy

    result = export_policy(args.run_dir, args.format, args.out, batch=args.batch)
    if args.json:
        print(json.dumps(result))
        return 0
    meta = result["metadata"]
    state = f", state {meta['state']['shape']} (batch dim {meta['state']['batch_dim']})" if meta["recurrent"] else ""
    print(f"{meta['agent']} policy on {meta['env']}: obs {meta['observation']['shape']} -> action "
          f"{meta['action']['shape']}{state} -> {result['path']} ({args.format})")
    return 0


# -- the hook ---------------------------------------------------------------------------------

def add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "record", help="record episodes into a LeRobot v3 dataset (a simulator with a policy, or a teleoperated robot)",
        description="Simulator: noeira record env=NAME [env.KEY=V] --scripted random|zero --out DIR, or --policy RUN_DIR "
                    "(the run's env). Robot: noeira record --robot so101 --port P --calibration F --teleop so101-leader "
                    "--teleop-port P --teleop-calibration F --out DIR --episode-seconds S. Every finished episode is "
                    "saved at once; Ctrl-C or SIGTERM stop after the current step.")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="the simulator: env=NAME and env.KEY=VALUE")
    p.add_argument("--out", required=True, help="the dataset directory (new, or an existing one with --resume)")
    p.add_argument("--episodes", type=int, default=10, help="episodes to record (default 10)")
    p.add_argument("--task", default="", help="the task string stored with every frame")
    p.add_argument("--resume", action="store_true", help="add episodes to the dataset at --out")
    p.add_argument("--fps", type=float, help="frames per second (simulator: default the env's render rate; robot: 30)")
    p.add_argument("--video-codec", default="libsvtav1", help="camera encoder (default libsvtav1, LeRobot's; or libx264)")
    sim = p.add_argument_group("simulator")
    sim.add_argument("--policy", metavar="RUN_DIR", help="act with this run's checkpoint (deterministic)")
    sim.add_argument("--stochastic", action="store_true", help="with --policy: sample actions instead")
    sim.add_argument("--scripted", metavar="NAME", help="act with a scripted policy: random | zero")
    sim.add_argument("--num-envs", type=int, default=1, help="envs stepped at once, one episode each (default 1)")
    sim.add_argument("--camera", action="store_true", help="record the env's rendered frames (observation.images.render)")
    sim.add_argument("--seed", type=int, default=0, help="seed of the env and the scripted policy (default 0)")
    sim.add_argument("--backend", help="where the simulator runs (default: the run's, or cpu)")
    rob = p.add_argument_group("robot")
    rob.add_argument("--robot", help="the follower's robot driver, by name (so101)")
    rob.add_argument("--port", help="the follower's serial port")
    rob.add_argument("--calibration", help="the follower's calibration JSON")
    rob.add_argument("--teleop", help="the leader's robot driver (so101-leader)")
    rob.add_argument("--teleop-port", help="the leader's serial port")
    rob.add_argument("--teleop-calibration", help="the leader's calibration JSON")
    rob.add_argument("--episode-seconds", type=float, default=20.0, help="length of an episode (default 20)")
    rob.add_argument("--reset-seconds", type=float, default=0.0, help="unrecorded following between episodes (default 0)")
    rob.add_argument("--yes", action="store_true", help="arm the follower without asking")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_record)

    p = subparsers.add_parser("export", help="a run's policy as one file: TorchScript, ONNX or torch.export (pt2)")
    p.add_argument("run_dir")
    p.add_argument("--format", required=True, choices=("torchscript", "onnx", "pt2"),
                   help="torchscript (.pt), onnx (.onnx; needs noeira-core[export]) or pt2 (torch.export, .pt2)")
    p.add_argument("--out", help="the file to write (default RUN_DIR/export/policy.pt|.onnx|.pt2)")
    p.add_argument("--batch", type=int, default=2, help="batch of the example the policy is traced with (the batch "
                   "stays dynamic; default 2)")
    p.add_argument("--json", action="store_true", help="print the result and the metadata as JSON")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_export)
