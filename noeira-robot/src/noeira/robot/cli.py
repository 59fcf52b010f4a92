"""The ``noeira robot ...`` commands, hooked into ``noeira`` by this distribution.

This module is imported whenever the ``noeira`` CLI starts, so it imports nothing heavy:
pyserial and the drivers are imported inside the commands.

- ``scan``: the servos on a bus, one line each: ``ID MODEL_NUMBER MODEL_NAME``.
- ``read``: one JSON object ``{joint: value}`` (degrees / gripper 0-100, or raw ticks).
- ``calibrate``: record a LeRobot-format calibration (centre pose, then sweep each joint).
- ``setup-ids``: give each servo its SO-101 ID, one motor on the bus at a time.
- ``teleop``: a follower arm follows a leader arm; asks before arming, Ctrl-C disarms.
- ``emulate``: serve emulated SO-101 buses on pseudo-terminals (try the others without hardware).

And the top-level ``noeira deploy``: a trained policy on the arm (:mod:`noeira.robot.deploy`).

Bad input and robot faults print one line and exit with code 2.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from noeira.core.errors import UserError
from noeira.core.plugins import hookimpl

__all__ = ["noeira_add_commands"]


def _robot_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Robot faults (bus timeouts, motor errors, safety trips) become one-line UserErrors."""

    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        from noeira.robot.errors import RobotError

        try:
            return fn(args)
        except RobotError as err:
            raise UserError(str(err)) from err

    return wrapper


def _ids(text: str) -> list[int]:
    """``1-6``, ``1,3,5`` or a mix -> a list of servo IDs."""
    out: list[int] = []
    try:
        for part in text.split(","):
            a, _, b = part.strip().partition("-")
            out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    except ValueError:
        raise UserError(f"--ids: expected IDs like 1-6 or 1,2,5, got {text!r}") from None
    if not out or any(not 0 <= i <= 253 for i in out):
        raise UserError(f"--ids: IDs must be within 0-253, got {text!r}")
    return out


def _ask(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        return ""


def _arm(kind: str, port: str, calibration: str | None, **kw: Any) -> Any:
    from noeira.robot.so101 import SO101Follower, SO101Leader

    cls = SO101Follower if kind == "follower" else SO101Leader
    return cls(port=port, calibration=calibration, **kw)


# -- commands --------------------------------------------------------------------------------

@_robot_errors
def cmd_scan(args: argparse.Namespace) -> int:
    from noeira.robot.bus import FeetechBus

    ids = _ids(args.ids)
    with FeetechBus(args.port, baudrate=args.baudrate, timeout=args.timeout, retries=0) as bus:
        found = bus.scan(ids, timeout=args.timeout)
    for ident, model, name in found:
        print(f"{ident} {model} {name}")
    if not found:
        print(f"no servo answered on {args.port} at {args.baudrate} baud (IDs {args.ids})", file=sys.stderr)
        return 1
    return 0


@_robot_errors
def cmd_read(args: argparse.Namespace) -> int:
    if not args.raw and not args.calibration:
        raise UserError("read: pass --calibration FILE for degrees, or --raw for servo ticks")
    # read as a leader: no configuration written, torque stays off
    with _arm("leader", args.port, args.calibration, baudrate=args.baudrate, handle_signals=False) as arm:
        values = arm.read(raw=args.raw)
    print(json.dumps({j: v if args.raw else round(v, 2) for j, v in values.items()}))
    return 0


@_robot_errors
def cmd_calibrate(args: argparse.Namespace) -> int:
    from noeira.robot.calibration import record_calibration, save_calibration

    if args.sweep_seconds is not None and args.sweep_seconds <= 0:
        raise UserError(f"--sweep-seconds: must be > 0, got {args.sweep_seconds}")
    with _arm("leader", args.port, None, baudrate=args.baudrate) as arm:
        print("Torque is off: move the arm by hand.")

        def wait_centre() -> None:
            _ask("Move every joint to the middle of its range (the centre pose), then press Enter ")

        if args.sweep_seconds is not None:
            print(f"Now move every joint through its full range ({args.sweep_seconds:g} s; "
                  "wrist_roll turns freely and needs no sweep)...")
            until = time.monotonic() + args.sweep_seconds

            def sweeping() -> bool:
                time.sleep(0.02)
                return time.monotonic() < until
        else:
            done = threading.Event()

            def sweeping() -> bool:
                if not started:
                    started.append(True)
                    threading.Thread(target=lambda: (_ask(""), done.set()), daemon=True).start()
                time.sleep(0.02)
                return not done.is_set()

            started: list[bool] = []
            print("Now move every joint through its full range (wrist_roll turns freely and needs no sweep), "
                  "then press Enter")

        last = [0.0]

        def show(lo: dict[str, int], hi: dict[str, int]) -> None:  # a live line on a terminal
            if sys.stdout.isatty() and time.monotonic() - last[0] > 0.2:
                last[0] = time.monotonic()
                print("\r" + "  ".join(f"{j[:8]} {lo[j]}-{hi[j]}" for j in lo), end="", flush=True)

        cal = record_calibration(arm, wait_centre, sweeping, show)
        if sys.stdout.isatty():
            print()
        save_calibration(args.out, cal)
        if args.write_eeprom:
            follower = _arm("follower", args.port, args.out, baudrate=args.baudrate)
            arm.disconnect()
            with follower:
                follower.write_calibration()
    for j, c in cal.items():
        print(f"{j:14s} id {c.id}  homing_offset {c.homing_offset:5d}  range {c.range_min}-{c.range_max}")
    print(f"calibration written to {args.out}" + (" and to the servos' EEPROM" if args.write_eeprom else ""))
    return 0


@_robot_errors
def cmd_setup_ids(args: argparse.Namespace) -> int:
    from noeira.robot.bus import FeetechBus
    from noeira.robot.protocol import MODEL_NAMES, STS3215_MODEL
    from noeira.robot.so101 import JOINTS

    with FeetechBus(args.port, baudrate=args.baudrate, timeout=args.timeout) as bus:
        for joint, target in reversed(JOINTS.items()):
            _ask(f"Connect ONLY the {joint} motor to the bus (it will get ID {target}), then press Enter ")
            found = bus.broadcast_ping()
            if not found:
                raise UserError(f"{joint}: no motor answered on {args.port} at {args.baudrate} baud")
            if len(found) > 1:
                raise UserError(f"{joint}: {len(found)} motors answered (IDs {found}); connect one motor at a time")
            current = found[0]
            model = bus.model(current)
            if model != STS3215_MODEL:
                raise UserError(f"{joint}: found model {model} ({MODEL_NAMES.get(model, 'unknown')}), expected an STS3215")
            if current != target:
                bus.release_torque([current])
                bus.write_eeprom(current, "ID", target)
                if not bus.ping(target):
                    raise UserError(f"{joint}: the motor does not answer on its new ID {target}")
            print(f"{joint}: ID {current} -> {target}" if current != target else f"{joint}: already ID {target}")
    return 0


@_robot_errors
def cmd_teleop(args: argparse.Namespace) -> int:
    if args.hz <= 0:
        raise UserError(f"--hz: must be > 0, got {args.hz}")
    if args.leader == args.follower:
        raise UserError("teleop: --leader and --follower must be two different ports")
    for flag in ("leader_calibration", "follower_calibration"):
        if not getattr(args, flag):
            raise UserError(f"teleop: --{flag.replace('_', '-')} FILE is required (record one with noeira robot calibrate)")
    limits: dict[str, Any] = {} if args.max_step_deg is None else {"max_step_deg": args.max_step_deg}
    leader = _arm("leader", args.leader, args.leader_calibration, baudrate=args.baudrate)
    follower = _arm("follower", args.follower, args.follower_calibration, baudrate=args.baudrate, **limits)
    with leader, follower:
        if not args.yes:
            answer = _ask("Arm the follower? It will hold its pose, then follow the leader. [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("not armed")
                return 1
        follower.arm()
        print("follower armed; Ctrl-C to stop")
        period = 1.0 / args.hz
        steps = 0
        try:
            while args.steps is None or steps < args.steps:
                t0 = time.monotonic()
                follower.send_action(leader.read())
                steps += 1
                time.sleep(max(0.0, period - (time.monotonic() - t0)))
        except KeyboardInterrupt:
            print("interrupted")
        finally:
            follower.disarm()
        print(f"follower disarmed after {steps} steps")
    return 0


@_robot_errors
def cmd_deploy(args: argparse.Namespace) -> int:
    from noeira.core.export import load_policy
    from noeira.robot.deploy import check_fit, deploy

    if args.robot != "so101":
        raise UserError(f"--robot: this distribution deploys to so101, got {args.robot!r}")
    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps: must be >= 1, got {args.steps}")
    if args.seconds is not None and args.seconds <= 0:
        raise UserError(f"--seconds: must be > 0, got {args.seconds}")
    if not args.calibration:
        raise UserError("deploy: --calibration FILE is required (record one with noeira robot calibrate)")
    policy = load_policy(args.policy)
    hz = float(args.hz or policy.metadata.get("fps") or 30.0)
    steps = args.steps if args.seconds is None else max(1, round(args.seconds * hz))
    limits: dict[str, Any] = {} if args.max_step_deg is None else {"max_step_deg": args.max_step_deg}
    deadline = None if args.deadline_ms is None else args.deadline_ms / 1000.0
    arm = _arm("follower", args.port, args.calibration, baudrate=args.baudrate, **limits)
    report = None
    with arm:
        check_fit(policy.metadata, list(arm.read()))  # a policy for another robot stops here, before arming
        if not args.dry_run:
            if not args.yes:
                answer = _ask(f"Arm the arm and run {policy.source} at {hz:g} Hz? [y/N] ")
                if answer.strip().lower() not in ("y", "yes"):
                    print("not armed")
                    return 1
            arm.arm()
            print(f"armed; running {policy.source} at {hz:g} Hz, Ctrl-C to stop", flush=True)

        def show(step: int, reading: Any, goals: Any) -> None:
            print(json.dumps({"step": step, "joints": {j: round(v, 2) for j, v in reading.items()},
                              "action": {j: round(v, 2) for j, v in goals.items()}}), flush=True)

        try:
            report = deploy(policy, arm, hz=hz, steps=steps, deadline=deadline, dry_run=args.dry_run,
                            on_step=show if args.dry_run or args.verbose else None)
        except KeyboardInterrupt:
            print("interrupted")
        finally:
            arm.disarm()
    if report is not None:
        what = "dry run, nothing sent" if args.dry_run else "arm disarmed"
        print(f"{report.steps} steps at {hz:g} Hz ({what}); step latency p50 {report.percentile(50) * 1000:.2f} ms, "
              f"p99 {report.percentile(99) * 1000:.2f} ms")
    return 0


def cmd_emulate(args: argparse.Namespace) -> int:
    from noeira.robot.emulator import EmulatedBus, PtyEmulator

    if args.count < 1:
        raise UserError(f"--count: must be >= 1, got {args.count}")
    emus = [PtyEmulator(EmulatedBus.so101()) for _ in range(args.count)]
    try:
        for e in emus:
            print(e.port, flush=True)
        print("serving emulated SO-101 buses (six STS3215, IDs 1-6); Ctrl-C to stop", file=sys.stderr, flush=True)
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        for e in emus:
            e.close()
    return 0


# -- the hook --------------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser, port: bool = True) -> None:
    if port:
        p.add_argument("--port", required=True, help="serial port of the bus (/dev/ttyACM0, COM3, a pyserial URL)")
    p.add_argument("--baudrate", type=int, default=1_000_000, help="bus speed (default 1000000)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)


@hookimpl
def noeira_add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    robot = subparsers.add_parser("robot", help="SO-101 arm: scan, read, calibrate, setup-ids, teleop")
    sub = robot.add_subparsers(dest="robot_command", metavar="COMMAND", required=True)

    p = sub.add_parser("scan", help="list the servos on a bus: ID, model number, model name")
    _common(p)
    p.add_argument("--ids", default="0-253", help="IDs to try, e.g. 1-6 or 1,2,5 (default 0-253)")
    p.add_argument("--timeout", type=float, default=0.05, help="seconds to wait for each ID (default 0.05)")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("read", help="print the arm's joint positions as one JSON object")
    _common(p)
    p.add_argument("--raw", action="store_true", help="servo ticks instead of degrees / 0-100")
    p.add_argument("--calibration", help="LeRobot-format calibration JSON (needed without --raw)")
    p.set_defaults(func=cmd_read)

    p = sub.add_parser("calibrate", help="record a calibration: centre pose, then sweep each joint")
    _common(p)
    p.add_argument("--out", required=True, help="calibration JSON to write")
    p.add_argument("--sweep-seconds", type=float, help="record the sweep for this long instead of until Enter")
    p.add_argument("--write-eeprom", action="store_true",
                   help="also save Homing_Offset and position limits in the servos' EEPROM (as LeRobot does)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("setup-ids", help="give each servo its SO-101 ID (1-6), one motor at a time")
    _common(p)
    p.add_argument("--timeout", type=float, default=0.1, help="seconds to wait for an answer (default 0.1)")
    p.set_defaults(func=cmd_setup_ids)

    p = sub.add_parser("teleop", help="the follower arm follows the leader arm (asks before arming)")
    _common(p, port=False)
    p.add_argument("--leader", required=True, help="serial port of the leader arm")
    p.add_argument("--follower", required=True, help="serial port of the follower arm")
    p.add_argument("--leader-calibration", help="calibration JSON of the leader")
    p.add_argument("--follower-calibration", help="calibration JSON of the follower")
    p.add_argument("--yes", action="store_true", help="arm without asking")
    p.add_argument("--hz", type=float, default=50.0, help="control rate (default 50)")
    p.add_argument("--steps", type=int, help="stop after this many steps (default: until Ctrl-C)")
    p.add_argument("--max-step-deg", type=float, help="largest goal change per step, degrees (default 10)")
    p.set_defaults(func=cmd_teleop)

    p = subparsers.add_parser("deploy", help="run a trained policy on the arm at a fixed rate (asks before arming)",
                              description="Loads a run directory (its checkpoint) or a file noeira export wrote, reads "
                                          "the joints, commands the arm at --hz. A step over the deadline releases "
                                          "torque (watchdog); --dry-run never arms.")
    p.add_argument("policy", metavar="RUN_OR_FILE", help="a run directory, or an exported policy (.pt, .pt2, .onnx)")
    p.add_argument("--robot", default="so101", help="the robot (so101)")
    _common(p)
    p.add_argument("--calibration", help="the arm's calibration JSON")
    p.add_argument("--hz", type=float, help="control rate (default: the rate the policy was trained at, else 30)")
    p.add_argument("--steps", type=int, help="stop after this many steps (default: until Ctrl-C)")
    p.add_argument("--seconds", type=float, help="stop after this long")
    p.add_argument("--deadline-ms", type=float, help="a step longer than this releases torque (default: two periods)")
    p.add_argument("--dry-run", action="store_true", help="read and compute, print each step, never arm or send")
    p.add_argument("--yes", action="store_true", help="arm without asking")
    p.add_argument("--verbose", action="store_true", help="print each step as JSON")
    p.add_argument("--max-step-deg", type=float, help="largest goal change per step, degrees (default 10)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("emulate", help="serve emulated SO-101 buses on pseudo-terminals (prints their paths)")
    p.add_argument("--count", type=int, default=1, help="how many arms (default 1; 2 for teleop)")
    p.add_argument("--seconds", type=float, help="stop after this long (default: until Ctrl-C)")
    p.set_defaults(func=cmd_emulate)
