"""Torque is released on every way out: signals (in-process and in a subprocess killed by
SIGTERM), interpreter exit, uncaught exceptions; handlers chain to the previous ones."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from noeira.core import make_robot
from noeira.robot import safety
from noeira.robot.emulator import EmulatedBus, PtyEmulator
from noeira.robot.errors import RobotNotArmedError

IDS = [1, 2, 3, 4, 5, 6]


def torque(emu: EmulatedBus) -> list[bool]:
    return [emu[i].torque for i in IDS]


def settle(pty: PtyEmulator) -> None:
    """Wait until the emulator thread has handled every byte the (dead) child wrote."""
    deadline = time.monotonic() + 2.0
    n = -1
    while time.monotonic() < deadline and (n != len(pty.bus.log) or not pty.idle()):
        n = len(pty.bus.log)
        time.sleep(0.05)


def test_sigint_releases_torque_then_raises_keyboard_interrupt(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    arm = make_robot("so101", port=url, calibration=str(cal_path), timeout=0.01)
    arm.connect()
    arm.arm()
    assert all(torque(emu))
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)  # give the handler a bytecode boundary
    assert not arm.armed and not any(torque(emu))
    arm.disconnect()


def test_sigterm_chains_to_the_previous_handler(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: calls.append(s))
    try:
        arm = make_robot("so101", port=url, calibration=str(cal_path), timeout=0.01)
        arm.connect()
        arm.arm()
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == [signal.SIGTERM]
        assert not arm.armed and not any(torque(emu))
        arm.disconnect()
    finally:
        safety.uninstall_handlers()
        signal.signal(signal.SIGTERM, previous)


def test_handlers_can_be_turned_off(url: str, cal_path: Path) -> None:
    arm = make_robot("so101", port=url, calibration=str(cal_path), handle_signals=False, timeout=0.01)
    with arm:
        assert arm not in safety.registered()
        assert signal.getsignal(signal.SIGTERM) is not safety._handler


def test_connect_off_the_main_thread_still_covers_exit(url: str, cal_path: Path) -> None:
    import atexit
    import threading

    arm = make_robot("so101", port=url, calibration=str(cal_path), timeout=0.01)
    t = threading.Thread(target=arm.connect)
    t.start()
    t.join()
    assert arm.connected and arm in safety.registered()
    assert signal.getsignal(signal.SIGTERM) is not safety._handler  # only the main thread may
    assert safety._atexit
    atexit.unregister(safety.release_all)
    atexit.register(safety.release_all)  # (it is registered; re-registering keeps one copy)
    arm.disconnect()
    arm.connect()  # on the main thread now
    assert signal.getsignal(signal.SIGTERM) is safety._handler
    arm.disconnect()
    assert arm not in safety.registered()


def test_release_in_the_middle_of_send_action_writes_no_goal(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    arm = make_robot("so101", port=url, calibration=str(cal_path), timeout=0.01)
    with arm:
        arm.arm()
        real = arm.telemetry

        def interrupted():  # a signal handler runs between the read and the write
            out = real()
            arm.emergency_release()
            return out

        arm.telemetry = interrupted
        emu.clear_log()
        with pytest.raises(RobotNotArmedError, match="released meanwhile"):
            arm.send_action({"elbow_flex": 5.0})
        assert not emu.writes("Goal_Position") and not any(torque(emu))


SCRIPT = textwrap.dedent("""
    import sys, time
    from noeira.robot.so101 import SO101Follower  # make_robot("so101", ...) would also import torch
    arm = SO101Follower(port=sys.argv[1], calibration=sys.argv[2], timeout=0.2)
    arm.connect()
    arm.arm()
    print("armed", flush=True)
    mode = sys.argv[3]
    if mode == "loop":
        while True:
            arm.send_action({"elbow_flex": 30.0})
            time.sleep(0.005)
    elif mode == "raise":
        raise RuntimeError("boom")
    # mode "exit": fall off the end without disconnecting
""")


def _run(pty: PtyEmulator, cal_path: Path, mode: str, sig: int | None) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, pty.port, str(cal_path), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "armed", proc.stderr.read() if proc.stderr else line
    if sig is not None:
        # let it send a few actions first
        n = len(pty.bus.writes("Goal_Position"))
        while len(pty.bus.writes("Goal_Position")) < n + 5 and proc.poll() is None:
            signal.sigtimedwait([], 0.01)
        assert all(torque(pty.bus))
        proc.send_signal(sig)
    proc.wait(timeout=30)
    settle(pty)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_a_subprocess_releases_torque(pty: PtyEmulator, cal_path: Path, sig: int) -> None:
    proc = _run(pty, cal_path, "loop", sig)
    assert not any(torque(pty.bus))
    last = pty.bus.writes("Torque_Enable")[-1]
    assert last.value("Torque_Enable") == 0
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM  # the default action still ends the process
    else:
        assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr.read()


@pytest.mark.parametrize("mode", ["exit", "raise"])
def test_interpreter_exit_releases_torque(pty: PtyEmulator, cal_path: Path, mode: str) -> None:
    proc = _run(pty, cal_path, mode, None)
    assert proc.returncode == (0 if mode == "exit" else 1)
    assert not any(torque(pty.bus))


def test_driver_and_cli_hook_do_not_import_torch() -> None:
    code = ("import sys, noeira.robot.cli, noeira.robot.so101, noeira.robot.emulator; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert 'serial' not in sys.modules, 'the CLI hook must not import pyserial'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
