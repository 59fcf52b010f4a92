"""Errors of the robot drivers. Bus and motor faults are :class:`RobotError`; what the user
can fix (a wrong port, a missing calibration) is a :class:`noeira.core.errors.UserError`."""

from __future__ import annotations

from noeira.core.errors import NoeiraError, UserError

__all__ = [
    "BusError",
    "CalibrationError",
    "MotorError",
    "MotorMismatchError",
    "RobotError",
    "RobotNotArmedError",
    "SafetyLimitError",
]


class RobotError(NoeiraError, RuntimeError):
    """Something went wrong talking to or driving the robot."""


class BusError(RobotError, OSError):
    """No valid status packet: a timeout, a bad checksum, a truncated or unexpected packet.
    Never replaced by a default value."""


class MotorError(RobotError):
    """A servo answered with error bits set (voltage, angle, overheat, overcurrent, overload)."""

    def __init__(self, message: str, ident: int, error: int) -> None:
        super().__init__(message)
        self.ident = ident
        self.error = error


class MotorMismatchError(RobotError):
    """A servo is missing or is not the expected model."""


class RobotNotArmedError(RobotError):
    """``send_action`` on a driver that is not armed: nothing was written."""


class SafetyLimitError(RobotError):
    """A monitored limit (temperature, voltage, load) was crossed; torque has been released."""


class CalibrationError(UserError):
    """A calibration file that is missing, malformed or does not fit the arm."""
