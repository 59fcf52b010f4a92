"""The SO-101 arm: six Feetech STS3215 servos on one bus, as a follower (driven) or a
leader (read by hand for teleoperation, never powered).

Safety is by construction:

- ``connect()`` pings all six servos, checks their model numbers, releases torque and
  leaves it off. Nothing moves until ``arm()``, which needs a calibration, sets every goal
  to the present position (read back and checked), and only then enables torque.
- ``send_action()`` on a disarmed arm raises :class:`RobotNotArmedError` and writes
  nothing. Armed, it reads the arm once (position, load, voltage, temperature), disarms with
  :class:`SafetyLimitError` past a limit, clamps every goal to the calibrated range and to
  a maximum change from the present position, and writes the goals with one SYNC_WRITE.
- Torque is released by ``disarm()``, ``disconnect()``, leaving a ``with`` block (also by
  an exception), interpreter exit, SIGINT and SIGTERM (:mod:`noeira.robot.safety`).
- EEPROM: at connect the follower sets its working registers (PID gains, return delay,
  operating mode, gripper torque/current limits) with Lock = 1, so they hold until power-off
  and are never saved. Persistent writes (IDs, baud rate, limits, offsets) happen only
  through explicit calls: :meth:`SO101Follower.write_calibration`, ``noeira robot setup-ids``.

Typical use::

    from noeira.core import make_robot
    with make_robot("so101", port="/dev/ttyACM0", calibration="follower.json") as arm:
        arm.arm()
        arm.send_action({"elbow_flex": 10.0, "gripper": 50.0})
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NamedTuple

import attrs

from noeira.core.config import structure
from noeira.core.errors import ConfigError, UserError
from noeira.robot import safety
from noeira.robot.bus import FeetechBus
from noeira.robot.calibration import TICKS_PER_DEG, MotorCalibration, load_calibration, validate_calibration
from noeira.robot.errors import (
    CalibrationError,
    MotorMismatchError,
    RobotError,
    RobotNotArmedError,
    SafetyLimitError,
)
from noeira.robot.protocol import MODEL_NAMES, STS3215_MODEL, decode_value

__all__ = ["GRIPPER", "JOINTS", "SO101Config", "SO101Follower", "SO101Leader", "Telemetry"]

JOINTS: dict[str, int] = {
    "shoulder_pan": 1,
    "shoulder_lift": 2,
    "elbow_flex": 3,
    "wrist_flex": 4,
    "wrist_roll": 5,
    "gripper": 6,
}
"""Joint name -> servo ID."""
GRIPPER = "gripper"
"""The one joint in 0-100 units; the others are in degrees."""

_pos = attrs.validators.gt(0)
_nonneg = attrs.validators.ge(0)
_byte = attrs.validators.and_(attrs.validators.ge(0), attrs.validators.le(254))


@attrs.frozen
class SO101Config:
    """Settings of an SO-101 arm (``make_robot("so101", port=..., calibration=...)``)."""

    port: str = ""
    """Serial port of the arm's bus: a device (/dev/ttyACM0, COM3), a pty, or a pyserial URL."""
    calibration: str | None = None
    """LeRobot-format calibration JSON. Needed for degrees and to arm; None: raw ticks only."""
    baudrate: int = attrs.field(default=1_000_000, validator=_pos)
    """Bus speed in bits per second (STS3215 default 1 000 000)."""
    timeout: float = attrs.field(default=0.1, validator=_pos)
    """Seconds to wait for one status packet before retrying."""
    retries: int = attrs.field(default=2, validator=_nonneg)
    """Extra attempts after a missing or corrupt status packet."""
    max_step_deg: float = attrs.field(default=10.0, validator=_pos)
    """Largest change of a body joint's goal from its present position per send_action, degrees."""
    max_step_gripper: float = attrs.field(default=20.0, validator=_pos)
    """Largest change of the gripper goal from its present position per send_action, 0-100 units."""
    max_temperature_c: float = attrs.field(default=65.0, validator=_pos)
    """Disarm when a servo is hotter than this, °C (the STS3215 cuts out near 70)."""
    min_voltage_v: float = attrs.field(default=4.5, validator=_nonneg)
    """Disarm when a servo's supply drops below this, volts."""
    max_voltage_v: float = attrs.field(default=13.0, validator=_pos)
    """Disarm when a servo's supply rises above this, volts."""
    max_load_pct: float = attrs.field(default=95.0, validator=_pos)
    """Disarm when |Present_Load| exceeds this percentage of maximum torque ..."""
    load_limit_reads: int = attrs.field(default=3, validator=_pos)
    """... in this many consecutive reads (a brief peak while accelerating is normal)."""
    acceleration: int = attrs.field(default=254, validator=_byte)
    """Acceleration register (RAM) set at connect; 0 means the servo's own maximum."""
    p_coefficient: int = attrs.field(default=16, validator=_byte)
    """Position loop P gain set at connect (working copy only, Lock = 1: not saved)."""
    i_coefficient: int = attrs.field(default=0, validator=_byte)
    """Position loop I gain set at connect (working copy only)."""
    d_coefficient: int = attrs.field(default=32, validator=_byte)
    """Position loop D gain set at connect (working copy only)."""
    return_delay_time: int = attrs.field(default=0, validator=_byte)
    """Return delay set at connect, units of 2 µs (working copy only)."""
    gripper_max_torque: int = attrs.field(default=500, validator=attrs.validators.and_(_nonneg, attrs.validators.le(1000)))
    """Gripper Max_Torque_Limit, 0.1 % of stall torque, so it cannot crush (working copy only)."""
    gripper_protection_current: int = attrs.field(default=250, validator=_nonneg)
    """Gripper Protection_Current, units of 6.5 mA (working copy only)."""
    gripper_overload_torque: int = attrs.field(default=25, validator=_byte)
    """Gripper Overload_Torque, % of max torque that triggers overload protection (working copy only)."""
    handle_signals: bool = True
    """Install SIGINT/SIGTERM/atexit handlers that release torque (chained to the previous ones)."""


class Telemetry(NamedTuple):
    """One servo's state from a single read of registers 56-63."""

    position: int
    """Present_Position, ticks in the servo's own Homing_Offset frame."""
    velocity: int
    load_pct: float
    voltage_v: float
    temperature_c: float


def _parse_telemetry(data: bytes) -> Telemetry:
    return Telemetry(
        position=decode_value(data[0:2], 15),
        velocity=decode_value(data[2:4], 15),
        load_pct=decode_value(data[4:6], 10) / 10.0,
        voltage_v=data[6] / 10.0,
        temperature_c=float(data[7]),
    )


class _SO101Arm:
    """What the follower and the leader share: bus, checks, reading, torque release."""

    Config = SO101Config
    joints: dict[str, int] = JOINTS
    read_only = False

    def __init__(self, config: SO101Config | None = None, **kwargs: Any) -> None:
        if config is None:
            config = structure(kwargs, SO101Config, "robot")
        elif kwargs:
            raise TypeError("pass either a Config or keyword arguments, not both")
        if not config.port:
            raise ConfigError("robot.port: required (a serial device such as /dev/ttyACM0, or a pyserial URL)")
        if config.min_voltage_v >= config.max_voltage_v:
            raise ConfigError("robot.min_voltage_v: must be below robot.max_voltage_v")
        self.config = config
        self.calibration: dict[str, MotorCalibration] | None = (
            load_calibration(config.calibration, self.joints) if config.calibration else None
        )
        self.connected = False
        self.armed = False
        self.bus: FeetechBus | None = None
        self.homing_offsets: dict[str, int] = {}
        """Each servo's Homing_Offset register as read at connect."""
        self._over_load = dict.fromkeys(self.joints, 0)

    @property
    def ids(self) -> list[int]:
        return list(self.joints.values())

    def __repr__(self) -> str:
        state = "armed" if self.armed else "connected" if self.connected else "disconnected"
        return f"{type(self).__name__}({self.config.port!r}, {state})"

    # -- lifecycle --------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the bus, ping all six servos, check their models, release torque (left off)."""
        if self.connected:
            return
        c = self.config
        bus = FeetechBus(c.port, baudrate=c.baudrate, timeout=c.timeout, retries=c.retries)
        try:
            missing = [f"{j} (ID {i})" for j, i in self.joints.items() if not bus.ping(i)]
            if missing:
                raise MotorMismatchError(
                    f"no answer from {', '.join(missing)} on {c.port} at {c.baudrate} baud: check power, "
                    "cabling and IDs (noeira robot scan / setup-ids)"
                )
            wrong = []
            for j, i in self.joints.items():
                model = bus.model(i)
                if model != STS3215_MODEL:
                    wrong.append(f"{j} (ID {i}) is model {model} ({MODEL_NAMES.get(model, 'unknown')})")
            if wrong:
                raise MotorMismatchError(f"expected STS3215 servos (model {STS3215_MODEL}): {'; '.join(wrong)}")
            bus.release_torque(self.ids)
            offsets = bus.sync_read("Homing_Offset", self.ids)
            self.homing_offsets = {j: offsets[i] for j, i in self.joints.items()}
            self._configure(bus)
            self._verify_torque_off(bus)
        except BaseException:
            bus.close()
            raise
        self.bus = bus
        self.connected = True
        self.armed = False
        if c.handle_signals:
            safety.register(self)

    def _configure(self, bus: FeetechBus) -> None:
        """Working registers for position control; the leader writes none."""

    def _verify_torque_off(self, bus: FeetechBus) -> None:
        # error bits (a servo's low voltage, say) must not stop us from checking torque is off
        on = [i for i, v in bus.sync_read("Torque_Enable", self.ids, check=False).items() if v]
        if on:
            bus.release_torque(on)
            on = [i for i, v in bus.sync_read("Torque_Enable", on, check=False).items() if v]
            if on:
                raise RobotError(f"torque is still on for servo(s) {on} after releasing it")

    def disarm(self) -> None:
        """Release torque on all six servos and check that it is off."""
        self.armed = False
        if not self.connected or self.bus is None:
            return
        self.bus.release_torque(self.ids)
        self._verify_torque_off(self.bus)

    def disconnect(self) -> None:
        """Release torque (also if checking that fails) and close the bus."""
        if not self.connected or self.bus is None:
            return
        try:
            self.disarm()
        except Exception:
            self.emergency_release()
            raise
        finally:
            self.bus.close()
            self.connected = False
            self.armed = False
            safety.unregister(self)

    def emergency_release(self) -> None:
        """Torque off now, without waiting for replies (signal handlers, atexit)."""
        self.armed = False
        if self.bus is not None and self.bus.is_open:
            self.bus.release_torque(self.ids, emergency=True)

    def __enter__(self) -> _SO101Arm:
        self.connect()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.disconnect()
            return
        with contextlib.suppress(Exception):  # an exception is on its way: release torque, don't mask it
            self.disconnect()

    # -- reading ----------------------------------------------------------------------------

    def _bus(self) -> FeetechBus:
        if not self.connected or self.bus is None:
            raise RobotError(f"{type(self).__name__} is not connected (call connect() first)")
        return self.bus

    def _calibration(self, what: str) -> dict[str, MotorCalibration]:
        if self.calibration is None:
            raise CalibrationError(
                f"{what} needs a calibration: pass calibration=FILE (record one with `noeira robot calibrate`)"
            )
        return self.calibration

    def calibrated_ticks(self, joint: str, motor_ticks: int) -> int:
        """A position read from the servo -> ticks in the calibration's homing frame."""
        cal = self._calibration("calibrated_ticks")[joint]
        return (motor_ticks + self.homing_offsets[joint] - cal.homing_offset) % 4096

    def motor_ticks(self, joint: str, calibrated: int) -> int:
        """Ticks in the calibration's frame -> the value to write to the servo."""
        cal = self._calibration("motor_ticks")[joint]
        return (calibrated - self.homing_offsets[joint] + cal.homing_offset) % 4096

    def read(self, raw: bool = False) -> dict[str, float]:
        """Joint positions (one SYNC_READ): degrees for body joints, 0-100 for the gripper;
        ``raw=True``: Present_Position ticks as the servos report them."""
        pos = self._bus().sync_read("Present_Position", self.ids)
        if raw:
            return {j: pos[i] for j, i in self.joints.items()}
        cal = self._calibration("read()")
        return {j: cal[j].to_user(self.calibrated_ticks(j, pos[i]), j == GRIPPER) for j, i in self.joints.items()}

    def telemetry(self) -> dict[str, Telemetry]:
        """Position, velocity, load, voltage and temperature of every servo, one SYNC_READ."""
        data = self._bus().sync_read_bytes(56, 8, self.ids)
        return {j: _parse_telemetry(data[i]) for j, i in self.joints.items()}

    def arm(self) -> None:
        raise NotImplementedError

    def send_action(self, action: Mapping[str, float]) -> dict[str, float]:
        raise RobotNotArmedError(f"send_action: {type(self).__name__} is not armed; nothing was written")


class SO101Follower(_SO101Arm):
    """The driven SO-101 arm (registry name ``so101``). See the module docstring."""

    robot_type = "so101_follower"
    """What a LeRobot dataset recorded with this arm names it (``info.json``'s ``robot_type``)."""

    def _configure(self, bus: FeetechBus) -> None:
        c = self.config
        common = {
            "Lock": 1,  # EEPROM-area writes below change the working copy only
            "Return_Delay_Time": c.return_delay_time,
            "Operating_Mode": 0,  # position servo
            "P_Coefficient": c.p_coefficient,
            "I_Coefficient": c.i_coefficient,
            "D_Coefficient": c.d_coefficient,
            "Acceleration": c.acceleration,
        }
        gripper = {
            "Max_Torque_Limit": c.gripper_max_torque,
            "Protection_Current": c.gripper_protection_current,
            "Overload_Torque": c.gripper_overload_torque,
        }
        for j, i in self.joints.items():
            for name, value in (common | gripper if j == GRIPPER else common).items():
                bus.write(i, name, value)

    def _check_limits(self, tele: Mapping[str, Telemetry], arming: bool = False) -> None:
        c = self.config
        problems = []
        for j, t in tele.items():
            i = self.joints[j]
            if t.temperature_c > c.max_temperature_c:
                problems.append(f"{j} (ID {i}) temperature {t.temperature_c:.0f} °C > {c.max_temperature_c:g} °C")
            if not c.min_voltage_v <= t.voltage_v <= c.max_voltage_v:
                problems.append(
                    f"{j} (ID {i}) voltage {t.voltage_v:.1f} V outside {c.min_voltage_v:g}-{c.max_voltage_v:g} V"
                )
            self._over_load[j] = self._over_load[j] + 1 if abs(t.load_pct) > c.max_load_pct else 0
            if self._over_load[j] >= c.load_limit_reads:
                problems.append(
                    f"{j} (ID {i}) load {abs(t.load_pct):.0f} % > {c.max_load_pct:g} % for {self._over_load[j]} reads"
                )
        if problems:
            if arming:
                raise SafetyLimitError("not arming: " + "; ".join(problems))
            self.emergency_release()
            raise SafetyLimitError("; ".join(problems) + " -> torque released, arm disarmed")

    def arm(self) -> None:
        """Hold the present pose: goal := present position (checked), then torque on."""
        bus = self._bus()
        cal = self._calibration("arm()")
        validate_calibration(cal, self.joints)
        if self.armed:
            return
        self._over_load = dict.fromkeys(self.joints, 0)
        try:
            tele = self.telemetry()
            self._check_limits(tele, arming=True)
            present = {self.joints[j]: t.position for j, t in tele.items()}
            bus.sync_write("Goal_Position", present)
            goals = bus.sync_read("Goal_Position", self.ids)
            off = {i: (goals[i], present[i]) for i in self.ids if goals[i] != present[i]}
            if off:
                raise RobotError(f"goal/present mismatch after setting goals (id: (goal, present)) {off}; not arming")
            for i in self.ids:
                bus.write(i, "Torque_Enable", 1)
            self.armed = True
        except BaseException:
            self.emergency_release()
            raise

    def send_action(self, action: Mapping[str, float]) -> dict[str, float]:
        """Move toward ``{joint: target}`` (degrees; gripper 0-100), clamped to the
        calibrated range and to ``max_step_*`` from the present position, in one
        SYNC_WRITE. Returns the goals actually sent, in the same units. A bus or motor
        fault on the way releases torque before it propagates."""
        if not self.armed:
            raise RobotNotArmedError("send_action: the arm is not armed (call arm() first); nothing was written")
        targets: dict[str, float] = {}
        for j, v in action.items():
            if j not in self.joints:
                raise UserError(f"send_action: unknown joint {j!r} (joints: {', '.join(self.joints)})")
            try:
                targets[j] = float(v)
            except (TypeError, ValueError):
                targets[j] = math.nan
            if not math.isfinite(targets[j]):
                raise UserError(f"send_action: {j} must be a finite number, got {v!r}")
        try:
            return self._send_action(targets)
        except RobotError as err:
            if not isinstance(err, RobotNotArmedError):
                self.emergency_release()  # a bus or motor fault while armed: stop holding
            raise

    def _send_action(self, action: Mapping[str, float]) -> dict[str, float]:
        bus = self._bus()
        cal = self._calibration("send_action()")
        tele = self.telemetry()
        self._check_limits(tele)
        goals: dict[str, int] = {}
        for j, v in action.items():
            c = cal[j]
            pct = j == GRIPPER
            target = min(max(c.to_ticks(v, pct), c.range_min), c.range_max)
            here = self.calibrated_ticks(j, tele[j].position)
            step = self.config.max_step_gripper / 100 * (c.range_max - c.range_min) if pct \
                else self.config.max_step_deg * TICKS_PER_DEG
            goals[j] = round(min(max(target, here - step), here + step))
        if goals:
            with bus.lock:  # no other thread's disarm can slip between the check and the write
                if not self.armed:
                    raise RobotNotArmedError("send_action: torque was released meanwhile; nothing was written")
                bus.sync_write("Goal_Position", {self.joints[j]: self.motor_ticks(j, t) for j, t in goals.items()})
            if not self.armed:  # a signal handler released torque meanwhile: the goal must not re-enable it
                self.emergency_release()
        return {j: cal[j].to_user(t, j == GRIPPER) for j, t in goals.items()}

    def write_calibration(self) -> None:
        """Persist the calibration in the servos' EEPROM (Homing_Offset, Min/Max_Position_Limit),
        as LeRobot does. Explicit only; needs torque off."""
        bus = self._bus()
        cal = self._calibration("write_calibration()")
        if self.armed:
            raise RobotError("write_calibration: disarm first (EEPROM writes need torque off)")
        for j, i in self.joints.items():
            bus.write_eeprom(i, "Homing_Offset", cal[j].homing_offset)
            bus.write_eeprom(i, "Min_Position_Limit", cal[j].range_min)
            bus.write_eeprom(i, "Max_Position_Limit", cal[j].range_max)
        offsets = bus.sync_read("Homing_Offset", self.ids)
        self.homing_offsets = {j: offsets[i] for j, i in self.joints.items()}


class SO101Leader(_SO101Arm):
    """The SO-101 leader arm (registry name ``so101-leader``): moved by hand, read-only.
    Torque is released at connect and never enabled; :meth:`arm` raises. It takes the same
    Config; the settings for driving (steps, limits, gains) have no effect, and connect writes
    nothing but Torque_Enable = 0."""

    read_only = True

    def arm(self) -> None:
        raise RobotError("so101-leader is read-only: its torque is never enabled")
