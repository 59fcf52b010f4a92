"""``noeira deploy``: run a trained policy on the arm at a fixed rate.

::

    noeira export runs/act-so101 --format torchscript          # or deploy the run directory itself
    noeira deploy runs/act-so101/export/policy.pt --robot so101 --port /dev/ttyACM0 --calibration f.json --hz 30

Each step reads the joints, maps them to the policy's observation by name (the dataset's
``<joint>.pos`` names travel in the exported file; a policy without names must observe exactly
the robot's joints, in its order), runs the policy (its recurrent state, an ACT ensemble
included, carried from step to step) and sends the action as goal positions, which the driver
clamps to the calibrated range and its per-step limit.

Safety, on top of the driver's own:

- Nothing moves unless armed: the arm is armed only after a yes (or ``--yes``), and
  ``--dry-run`` never arms: it reads and computes, and writes nothing but torque off.
- A watchdog: every step must end within ``deadline`` seconds (default two periods). A step
  that overruns it (checked in the loop) or a loop that stalls (a thread that watches it
  between steps) releases torque at once and stops the run with a one-line error.
- Ctrl-C, SIGTERM, an error: torque is released (the driver's handlers and ``with`` block).

This module imports neither torch nor numpy: the policy comes through
:func:`noeira.core.export.load_policy`, which takes and gives plain lists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from noeira.core.errors import UserError

__all__ = ["DeployReport", "Watchdog", "WatchdogTripped", "check_fit", "deploy", "joint_order"]


class WatchdogTripped(UserError):
    """A control step missed its deadline: torque was released and the run stopped."""


@attrs.define
class DeployReport:
    """What a deployment did: steps run, each step's latency (read + policy + send) in seconds."""

    steps: int = 0
    latencies: list[float] = attrs.field(factory=list)
    dry_run: bool = False

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def joint_order(names: Sequence[str] | None, joints: Sequence[str], what: str, size: int) -> list[str]:
    """The robot joint behind each entry of the policy's ``what`` (observation / action):
    ``<joint>.pos`` or ``<joint>`` names must all be joints of the robot; without names the
    policy must have exactly one entry per joint, in the robot's order."""
    if names:
        out = [str(n).removesuffix(".pos") for n in names]
        unknown = [n for n in out if n not in joints]
        if unknown or len(out) != size:
            raise UserError(f"the policy's {what} is {list(names)}, which does not fit the robot's joints "
                            f"({', '.join(joints)})")
        return out
    if size != len(joints):
        raise UserError(f"the policy's {what} has {size} values, the robot has {len(joints)} joints "
                        f"({', '.join(joints)}); a policy for this robot is trained on its recordings")
    return list(joints)


def check_fit(meta: Mapping[str, Any], joints: Sequence[str]) -> tuple[list[str], list[str]]:
    """The robot joints behind the policy's observation and action (see :func:`joint_order`);
    a policy that does not fit is a one-line :class:`UserError`, raised before anything is armed."""
    obs_meta, act_meta = meta.get("observation", {}), meta.get("action", {})
    if len(obs_meta.get("shape") or [0]) != 1 or len(act_meta.get("shape") or [0]) != 1:
        raise UserError(f"deploy: the policy observes {obs_meta.get('shape')} and acts {act_meta.get('shape')}; "
                        "a robot needs vector observations (joints) and vector actions (goals)")
    return (joint_order(obs_meta.get("names"), joints, "observation", _size(obs_meta.get("shape"))),
            joint_order(act_meta.get("names"), joints, "action", _size(act_meta.get("shape"))))


class Watchdog:
    """A thread that calls ``trip()`` once if :meth:`kick` is not called for ``deadline``
    seconds while armed (:meth:`arm`); :attr:`tripped` says whether it did."""

    def __init__(self, deadline: float, trip: Callable[[], None]) -> None:
        self.deadline, self._trip = deadline, trip
        self.tripped = False
        self._last = time.monotonic()
        self._armed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="noeira-deploy-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def arm(self) -> None:
        self.kick()
        self._armed = True

    def kick(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._armed = False
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        poll = min(self.deadline / 4, 0.005)
        while not self._stop.wait(poll):
            if self._armed and time.monotonic() - self._last > self.deadline:
                self.tripped = True
                self._trip()
                return


def deploy(policy: Any, robot: Any, *, hz: float, steps: int | None = None, deadline: float | None = None,
           dry_run: bool = False, stop: Callable[[], bool] = lambda: False,
           on_step: Callable[[int, Mapping[str, float], Mapping[str, float]], None] | None = None,
           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> DeployReport:
    """Run ``policy`` (a :class:`noeira.core.export.Policy`) on the connected ``robot`` at ``hz``
    for ``steps`` steps (None: until ``stop()``). Not ``dry_run``: the robot must be armed, and
    each step sends the action. Raises :class:`WatchdogTripped` (torque released) when a step
    takes longer than ``deadline`` seconds (default ``2 / hz``)."""
    if hz <= 0:
        raise UserError(f"--hz: must be > 0, got {hz}")
    if not dry_run and not getattr(robot, "armed", False):
        raise UserError("deploy: the robot is not armed; nothing moves unless armed")
    period = 1.0 / hz
    deadline = 2.0 * period if deadline is None else deadline
    if deadline <= 0:
        raise UserError(f"--deadline-ms: must be > 0, got {deadline * 1000:g}")
    present = robot.read()
    obs_joints, act_joints = check_fit(policy.metadata, list(present))

    def release() -> None:
        robot.emergency_release() if hasattr(robot, "emergency_release") else robot.disarm()

    first = [present[j] for j in obs_joints]
    for _ in range(3):  # warm up: TorchScript's profiling executor optimises on the first calls
        policy.step(first)
    policy.reset()
    report = DeployReport(dry_run=dry_run)
    watchdog = Watchdog(deadline, release).start()
    try:
        if not dry_run:
            watchdog.arm()
        next_tick = clock()
        while (steps is None or report.steps < steps) and not stop():
            t0 = clock()
            reading = robot.read() if report.steps else present
            action = policy.step([reading[j] for j in obs_joints])
            goals = dict(zip(act_joints, action, strict=True))
            if not dry_run:
                if watchdog.tripped:
                    break
                robot.send_action(goals)
            spent = clock() - t0
            report.latencies.append(spent)
            report.steps += 1
            if on_step is not None:
                on_step(report.steps, reading, goals)
            if not dry_run and spent > deadline:
                release()
                raise WatchdogTripped(f"watchdog: step {report.steps} took {spent * 1000:.1f} ms, over the "
                                      f"{deadline * 1000:.1f} ms deadline; torque released")
            watchdog.kick()
            next_tick += period
            wait = next_tick - clock()
            if wait > 0:
                sleep(wait)
            else:
                next_tick = clock()  # behind: start the next period now rather than bursting to catch up
    except Exception as err:
        if watchdog.tripped and not isinstance(err, WatchdogTripped):
            raise WatchdogTripped(f"watchdog: the control loop stalled past the {deadline * 1000:.1f} ms deadline at "
                                  f"step {report.steps + 1}; torque released") from err
        raise
    finally:
        watchdog.stop()
    if watchdog.tripped:
        raise WatchdogTripped(f"watchdog: the control loop stalled past the {deadline * 1000:.1f} ms deadline at step "
                              f"{report.steps + 1}; torque released")
    return report


def _size(shape: Sequence[int] | None) -> int:
    n = 1
    for s in shape or [1]:
        n *= int(s)
    return n
