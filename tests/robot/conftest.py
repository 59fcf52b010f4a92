"""Fixtures for the robot tests: emulated SO-101 buses (in-process URL or pty) and a
calibration that fits them. No hardware is needed."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from noeira.robot import safety
from noeira.robot.emulator import EmulatedBus, PtyEmulator, register, unregister

_names = itertools.count()

# Body joints: range 1000-3000 (mid 2000); wrist_roll a full turn; gripper 2000-3000.
CALIBRATION = {
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1000, "range_max": 3000},
    "shoulder_lift": {"id": 2, "drive_mode": 0, "homing_offset": 0, "range_min": 1000, "range_max": 3000},
    "elbow_flex": {"id": 3, "drive_mode": 0, "homing_offset": 0, "range_min": 1000, "range_max": 3000},
    "wrist_flex": {"id": 4, "drive_mode": 1, "homing_offset": 0, "range_min": 1000, "range_max": 3000},
    "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 4095},
    "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 0, "range_min": 2000, "range_max": 3000},
}


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_raises() -> None:
    """A job that a non-interactive shell starts in the background begins with SIGINT ignored
    (POSIX; ``nohup pytest &``, some CI runners), and Python then keeps it ignored: the Ctrl-C
    tests need the interpreter's usual KeyboardInterrupt, in this process and the ones it starts."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def emu() -> EmulatedBus:
    """Six STS3215 on IDs 1-6, all at position 2000 (the calibrated centre)."""
    return EmulatedBus.so101([2000, 2000, 2000, 2000, 2048, 2500])


@pytest.fixture
def url(emu: EmulatedBus) -> Iterator[str]:
    """``stsemu://...``: the in-process pyserial transport to ``emu``."""
    name = f"emu{next(_names)}"
    yield register(name, emu)
    unregister(name)


@pytest.fixture
def pty(emu: EmulatedBus) -> Iterator[PtyEmulator]:
    """``emu`` served on a pseudo-terminal by a thread."""
    with PtyEmulator(emu) as p:
        yield p


@pytest.fixture
def cal_path(tmp_path: Path) -> Path:
    p = tmp_path / "so101.json"
    p.write_text(json.dumps(CALIBRATION))
    return p


@pytest.fixture(autouse=True)
def _no_lingering_handlers() -> Iterator[None]:
    """Each test starts and ends without our signal handlers or registered drivers."""
    yield
    for d in safety.registered():
        safety.unregister(d)
    safety.uninstall_handlers()
