"""Arm calibration in LeRobot's JSON format, so existing files can be reused::

    {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1020,
                      "range_min": 790, "range_max": 3300}, ...}

``homing_offset`` is in encoder ticks with the meaning of the servo's Homing_Offset register
(``Present_Position = shaft - homing_offset``, mod 4096); LeRobot picks it so that the centre
pose reads 2047. ``range_min``/``range_max`` are positions in that frame. noeira applies the
offset in software (it never needs to write the servo's EEPROM), so the same file works
whether or not it was ever written to the motors; :meth:`SO101Follower.write_calibration`
does that explicitly for those who want it.

Units: body joints in degrees, 0 at the centre of the calibrated range
(``(ticks - mid) * 360 / 4096``, sign flipped when ``drive_mode`` is 1); the gripper in
0-100 of its calibrated range (100 - value when ``drive_mode`` is 1).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from noeira.core.config import structure
from noeira.core.errors import ConfigError
from noeira.robot.errors import CalibrationError
from noeira.robot.protocol import STEPS_PER_TURN

__all__ = [
    "MotorCalibration",
    "load_calibration",
    "record_calibration",
    "save_calibration",
    "validate_calibration",
]

TICKS_PER_DEG = STEPS_PER_TURN / 360.0
HALF_TURN = 2047
"""The position the centre pose reads after homing (LeRobot's half-turn homing)."""


@attrs.frozen
class MotorCalibration:
    """One joint's entry."""

    id: int
    """Servo ID on the bus."""
    drive_mode: int = 0
    """1 flips the direction of the joint's user units."""
    homing_offset: int = 0
    """Encoder ticks subtracted from the shaft position (sign-magnitude, |x| <= 2047)."""
    range_min: int = 0
    """Lowest allowed position (ticks, offset frame)."""
    range_max: int = 4095
    """Highest allowed position (ticks, offset frame)."""

    @property
    def mid(self) -> float:
        return (self.range_min + self.range_max) / 2

    def to_user(self, ticks: float, percent: bool) -> float:
        """Calibrated ``ticks`` -> degrees (``percent`` False) or 0-100 of the range."""
        if percent:
            pct = (ticks - self.range_min) / (self.range_max - self.range_min) * 100.0
            pct = min(100.0, max(0.0, pct))
            return 100.0 - pct if self.drive_mode else pct
        deg = (ticks - self.mid) / TICKS_PER_DEG
        return -deg if self.drive_mode else deg

    def to_ticks(self, value: float, percent: bool) -> float:
        """The inverse of :meth:`to_user` (not clamped)."""
        if percent:
            pct = 100.0 - value if self.drive_mode else value
            return self.range_min + pct / 100.0 * (self.range_max - self.range_min)
        deg = -value if self.drive_mode else value
        return self.mid + deg * TICKS_PER_DEG


def validate_calibration(cal: Mapping[str, MotorCalibration], joints: Mapping[str, int], where: str = "calibration") -> None:
    """Check that ``cal`` covers exactly ``joints`` ({name: id}) with sane values."""
    missing = [j for j in joints if j not in cal]
    extra = [j for j in cal if j not in joints]
    if missing or extra:
        raise CalibrationError(
            f"{where}: joints do not match the arm"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else "")
        )
    for joint, c in cal.items():
        if c.id != joints[joint]:
            raise CalibrationError(f"{where}: {joint}.id is {c.id}, but the arm has {joint} on ID {joints[joint]}")
        if c.drive_mode not in (0, 1):
            raise CalibrationError(f"{where}: {joint}.drive_mode must be 0 or 1, got {c.drive_mode}")
        if abs(c.homing_offset) > 2047:
            raise CalibrationError(f"{where}: {joint}.homing_offset must be within ±2047, got {c.homing_offset}")
        if not 0 <= c.range_min < c.range_max <= 4095:
            raise CalibrationError(
                f"{where}: {joint} needs 0 <= range_min < range_max <= 4095, got {c.range_min}..{c.range_max}"
            )


def load_calibration(path: str | os.PathLike[str], joints: Mapping[str, int] | None = None) -> dict[str, MotorCalibration]:
    """Read a LeRobot-format calibration file; with ``joints`` ({name: id}) also check it
    fits that arm. Errors are :class:`CalibrationError` naming the file and the key."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise CalibrationError(f"calibration file {str(p)!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise CalibrationError(f"calibration file {str(p)!r} is not readable JSON: {err}") from None
    if not isinstance(raw, dict):
        raise CalibrationError(f"calibration file {str(p)!r}: expected a JSON object of joints")
    cal = {}
    for joint, entry in raw.items():
        try:
            cal[joint] = structure(entry, MotorCalibration, joint)
        except ConfigError as err:
            raise CalibrationError(f"calibration file {str(p)!r}: {err}") from None
    if joints is not None:
        validate_calibration(cal, joints, f"calibration file {str(p)!r}")
    return cal


def save_calibration(path: str | os.PathLike[str], cal: Mapping[str, MotorCalibration]) -> None:
    """Write ``cal`` as LeRobot-format JSON (atomically: a temp file, then a rename)."""
    p = Path(path)
    data = {j: attrs.asdict(c) for j, c in cal.items()}
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=4)
            f.write("\n")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def homing_offset_for(shaft: int) -> int:
    """The Homing_Offset that makes a shaft position ``shaft`` read :data:`HALF_TURN`."""
    return min(shaft - HALF_TURN, 2047)  # shaft 4095 would need 2048, which 11 bits cannot hold


def full_range(ident: int, homing_offset: int, drive_mode: int = 0) -> MotorCalibration:
    """A calibration spanning the whole turn (continuous joints such as wrist_roll)."""
    return MotorCalibration(ident, drive_mode, homing_offset, 0, 4095)


def joints_of(names: Sequence[str], ids: Sequence[int]) -> dict[str, int]:
    return dict(zip(names, ids, strict=True))


FULL_TURN_JOINTS = ("wrist_roll",)
"""Joints that turn freely: calibrated over the whole turn, as LeRobot does."""
MIN_SWEEP_TICKS = 20
"""A swept joint must have moved at least this much, or the recording is refused."""


def record_calibration(
    arm: object,
    wait_centre: Callable[[], None],
    sweeping: Callable[[], bool],
    on_sample: Callable[[dict[str, int], dict[str, int]], None] | None = None,
) -> dict[str, MotorCalibration]:
    """Record a calibration from a connected arm with torque off (moved by hand).

    ``wait_centre()`` returns once the arm is in its centre pose; the homing offsets are
    chosen so that pose reads 2047. Then positions are sampled while ``sweeping()`` is true
    (the user moves every joint through its full range) and the extremes become
    ``range_min``/``range_max``. ``arm`` is an SO-101 driver (``joints``, ``read(raw=True)``,
    ``homing_offsets``)."""
    joints: dict[str, int] = arm.joints  # type: ignore[attr-defined]
    motor_offsets: dict[str, int] = arm.homing_offsets  # type: ignore[attr-defined]
    wait_centre()
    raw = arm.read(raw=True)  # type: ignore[attr-defined]
    offsets = {j: homing_offset_for((int(raw[j]) + motor_offsets[j]) % 4096) for j in joints}

    def frame(sample: Mapping[str, float]) -> dict[str, int]:
        return {j: (int(sample[j]) + motor_offsets[j] - offsets[j]) % 4096 for j in joints}

    centre = frame(raw)
    lo, hi = dict(centre), dict(centre)
    while sweeping():
        for j, v in frame(arm.read(raw=True)).items():  # type: ignore[attr-defined]
            lo[j], hi[j] = min(lo[j], v), max(hi[j], v)
        if on_sample is not None:
            on_sample(lo, hi)
    still = [j for j in joints if j not in FULL_TURN_JOINTS and hi[j] - lo[j] < MIN_SWEEP_TICKS]
    if still:
        raise CalibrationError(
            f"no sweep recorded for {', '.join(still)}: move every joint through its full range before finishing"
        )
    cal = {}
    for j, ident in joints.items():
        if j in FULL_TURN_JOINTS:
            cal[j] = full_range(ident, offsets[j])
        else:
            cal[j] = MotorCalibration(ident, 0, offsets[j], lo[j], hi[j])
    return cal
