"""A conformance check for :class:`noeira.core.contracts.RobotDriver` implementations.

Run it against hardware you can safely arm, or against an emulator::

    from noeira.robot.testing import check_robot_driver
    check_robot_driver(make_robot("so101", port=url, calibration=path), action={"gripper": 50.0})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noeira.core.contracts import RobotDriver

__all__ = ["check_robot_driver"]


def check_robot_driver(driver: Any, action: Mapping[str, float]) -> None:
    """Assert the RobotDriver contract on an unconnected ``driver``; ``action`` is a small,
    safe command for its joints. Leaves the driver disconnected."""
    assert isinstance(driver, RobotDriver), f"{type(driver).__name__} does not implement RobotDriver"
    assert not driver.connected and not driver.armed, "a new driver must be disconnected and disarmed"
    driver.connect()
    try:
        assert driver.connected and not driver.armed, "connect() must leave the driver disarmed"
        state = driver.read()
        assert isinstance(state, dict) and state, "read() must return a non-empty dict"
        assert all(isinstance(k, str) and isinstance(v, (int, float)) for k, v in state.items()), state
        assert set(action) <= set(state), f"action keys {set(action) - set(state)} are not joints"
        raw = driver.read(raw=True)
        assert set(raw) == set(state), "read(raw=True) must have the same joints as read()"
        _expect_not_armed(driver, action)
        driver.arm()
        assert driver.armed, "arm() must set armed"
        sent = driver.send_action(action)
        assert isinstance(sent, dict) and set(sent) == set(action), "send_action returns the goals it sent"
        driver.disarm()
        assert not driver.armed and driver.connected, "disarm() keeps the connection"
        _expect_not_armed(driver, action)
        driver.disarm()  # idempotent
    finally:
        driver.disconnect()
    assert not driver.connected and not driver.armed, "disconnect() must leave it disconnected and disarmed"
    driver.disconnect()  # idempotent


def _expect_not_armed(driver: Any, action: Mapping[str, float]) -> None:
    try:
        driver.send_action(action)
    except Exception as err:  # the driver's own "not armed" error
        assert "NotArmed" in type(err).__name__, f"send_action while disarmed raised {type(err).__name__}: {err}"
    else:
        raise AssertionError("send_action on a disarmed driver must raise")
