"""``noeira robot ...`` end to end against emulated arms on pseudo-terminals."""

from __future__ import annotations

import builtins
import io
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from noeira.core.cli import main
from noeira.robot.calibration import load_calibration
from noeira.robot.emulator import EmulatedBus, EmulatedServo, PtyEmulator
from noeira.robot.so101 import JOINTS

IDS = list(JOINTS.values())


def test_scan(pty: PtyEmulator, emu: EmulatedBus, capsys: pytest.CaptureFixture[str]) -> None:
    emu.remove(4)
    assert main(["robot", "scan", "--port", pty.port, "--ids", "1-8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["1 777 sts3215", "2 777 sts3215", "3 777 sts3215", "5 777 sts3215", "6 777 sts3215"]
    assert main(["robot", "scan", "--port", pty.port, "--ids", "10,11"]) == 1
    assert main(["robot", "scan", "--port", pty.port, "--ids", "one"]) == 2
    assert "--ids" in capsys.readouterr().err


def test_read(pty: PtyEmulator, emu: EmulatedBus, cal_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["robot", "read", "--port", pty.port, "--raw"]) == 0
    assert json.loads(capsys.readouterr().out) == {"shoulder_pan": 2000, "shoulder_lift": 2000, "elbow_flex": 2000,
                                                   "wrist_flex": 2000, "wrist_roll": 2048, "gripper": 2500}
    emu[3].set_present(2000 + 1024)
    assert main(["robot", "read", "--port", pty.port, "--calibration", str(cal_path)]) == 0
    values = json.loads(capsys.readouterr().out)
    assert values["elbow_flex"] == 90.0 and values["gripper"] == 50.0
    assert not emu.writes("Goal_Position") and not [w for w in emu.writes() if w.addr != 40]


def test_read_errors_are_one_line(pty: PtyEmulator, emu: EmulatedBus, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["robot", "read", "--port", pty.port]) == 2
    assert "--calibration FILE" in capsys.readouterr().err
    assert main(["robot", "read", "--port", str(tmp_path / "nope"), "--raw"]) == 2
    assert "cannot open serial port" in capsys.readouterr().err
    emu.remove(3)
    assert main(["robot", "read", "--port", pty.port, "--raw"]) == 2
    err = capsys.readouterr().err
    assert "elbow_flex (ID 3)" in err and len(err.strip().splitlines()) == 1


def _sweep(emu: EmulatedBus, centre: dict[int, int], low: dict[int, int], high: dict[int, int]) -> None:
    for i in IDS:
        emu[i].position_script.extend([centre[i], low[i], high[i], centre[i]])


def test_calibrate(pty: PtyEmulator, emu: EmulatedBus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    centre = {1: 2100, 2: 1900, 3: 2047, 4: 3000, 5: 1000, 6: 2400}
    _sweep(emu, centre, {i: c - 900 for i, c in centre.items()}, {i: c + 700 for i, c in centre.items()})
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    out = tmp_path / "cal.json"
    assert main(["robot", "calibrate", "--port", pty.port, "--out", str(out), "--sweep-seconds", "0.3"]) == 0
    cal = load_calibration(out, JOINTS)
    assert cal["shoulder_pan"].homing_offset == 53  # the centre reads 2047
    assert (cal["shoulder_pan"].range_min, cal["shoulder_pan"].range_max) == (2047 - 900, 2047 + 700)
    assert cal["wrist_flex"].homing_offset == 953
    assert (cal["wrist_roll"].range_min, cal["wrist_roll"].range_max) == (0, 4095)  # turns freely
    assert "calibration written" in capsys.readouterr().out
    assert not [w for w in emu.writes() if w.addr != 40]  # nothing but torque off was written
    # back at the centre pose every body joint reads ~0 degrees with the new file
    assert main(["robot", "read", "--port", pty.port, "--calibration", str(out)]) == 0
    values = json.loads(capsys.readouterr().out)
    assert all(abs(values[j]) < 9 for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex"))


def test_calibrate_write_eeprom(pty: PtyEmulator, emu: EmulatedBus, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    centre = {1: 2100, 2: 1900, 3: 2047, 4: 3000, 5: 1000, 6: 2400}
    _sweep(emu, centre, {i: c - 900 for i, c in centre.items()}, {i: c + 700 for i, c in centre.items()})
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    out = tmp_path / "cal.json"
    assert main(["robot", "calibrate", "--port", pty.port, "--out", str(out), "--sweep-seconds", "0.2",
                 "--write-eeprom"]) == 0
    for i in IDS:
        emu[i].power_cycle()
    assert emu[1].get("Homing_Offset") == 53 and emu[1].get("Min_Position_Limit") == 2047 - 900
    assert not any(emu[i].torque for i in IDS)


def test_calibrate_without_a_sweep_is_refused(pty: PtyEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    out = tmp_path / "cal.json"
    assert main(["robot", "calibrate", "--port", pty.port, "--out", str(out), "--sweep-seconds", "0.1"]) == 2
    assert "no sweep recorded for shoulder_pan" in capsys.readouterr().err and not out.exists()


def test_calibrate_until_enter(pty: PtyEmulator, emu: EmulatedBus, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    centre = dict.fromkeys(IDS, 2048)
    _sweep(emu, centre, dict.fromkeys(IDS, 1500), dict.fromkeys(IDS, 2500))
    answers = iter(["", ""])

    def fake_input(prompt: str = "") -> str:
        if prompt == "":  # the "sweep done" Enter: give the sampler time to see the sweep
            time.sleep(0.3)
        return next(answers)

    monkeypatch.setattr(builtins, "input", fake_input)
    out = tmp_path / "cal.json"
    assert main(["robot", "calibrate", "--port", pty.port, "--out", str(out)]) == 0
    assert load_calibration(out)["elbow_flex"].range_min == 1500 - 1


def test_setup_ids_one_motor_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    emu = EmulatedBus()
    motors: list[EmulatedServo] = []

    def plug_next(prompt: str = "") -> str:  # the user swaps in a factory-fresh motor (ID 1)
        for s in list(emu.servos):
            emu.remove(s)
        motors.append(EmulatedServo(1))
        emu.add(motors[-1])
        return ""

    monkeypatch.setattr(builtins, "input", plug_next)
    with PtyEmulator(emu) as pty:
        assert main(["robot", "setup-ids", "--port", pty.port]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "gripper: ID 1 -> 6" and out[-1] == "shoulder_pan: already ID 1"
    for m in motors:
        m.power_cycle()
    assert [m.ident for m in motors] == [6, 5, 4, 3, 2, 1]  # saved in EEPROM
    assert all(m.get("Lock") == 1 for m in motors)


def test_setup_ids_refuses_two_motors(pty: PtyEmulator, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(builtins, "input", lambda prompt="": "")
    assert main(["robot", "setup-ids", "--port", pty.port]) == 2
    assert "connect one motor at a time" in capsys.readouterr().err


@pytest.fixture
def leader_pty() -> PtyEmulator:
    emu = EmulatedBus.so101([2300, 1800, 2200, 2000, 2048, 2900])
    with PtyEmulator(emu) as p:
        yield p


def _teleop(leader: PtyEmulator, follower: PtyEmulator, cal: Path, *extra: str) -> int:
    return main(["robot", "teleop", "--leader", leader.port, "--follower", follower.port,
                 "--leader-calibration", str(cal), "--follower-calibration", str(cal), "--hz", "500", *extra])


def test_teleop_follows_the_leader(leader_pty: PtyEmulator, pty: PtyEmulator, emu: EmulatedBus, cal_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _teleop(leader_pty, pty, cal_path, "--yes", "--steps", "40") == 0
    assert [emu[i].present for i in IDS] == [2300, 1800, 2200, 2000, 2048, 2900]
    assert not any(emu[i].torque for i in IDS)
    assert not any(s.torque for s in leader_pty.bus.servos.values())
    assert not [w for w in leader_pty.bus.writes() if w.addr != 40 or w.value("Torque_Enable")]
    assert "follower disarmed after 40 steps" in capsys.readouterr().out


def test_teleop_asks_before_arming(leader_pty: PtyEmulator, pty: PtyEmulator, emu: EmulatedBus, cal_path: Path,
                                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    prompts: list[str] = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "n")
    assert _teleop(leader_pty, pty, cal_path, "--steps", "5") == 1
    assert "Arm the follower?" in prompts[0]
    assert not emu.writes("Goal_Position") and not [w for w in emu.writes("Torque_Enable") if w.value("Torque_Enable")]


def test_teleop_needs_calibrations(leader_pty: PtyEmulator, pty: PtyEmulator,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["robot", "teleop", "--leader", leader_pty.port, "--follower", pty.port, "--yes"]) == 2
    assert "--leader-calibration FILE is required" in capsys.readouterr().err
    assert main(["robot", "teleop", "--leader", pty.port, "--follower", pty.port, "--yes"]) == 2
    assert "two different ports" in capsys.readouterr().err


def test_teleop_ctrl_c_disarms(leader_pty: PtyEmulator, pty: PtyEmulator, emu: EmulatedBus, cal_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    def interrupt() -> None:
        while not any(emu[i].torque for i in IDS):
            time.sleep(0.01)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    assert _teleop(leader_pty, pty, cal_path, "--yes") == 0
    t.join()
    assert not any(emu[i].torque for i in IDS)
    out = capsys.readouterr().out
    assert "interrupted" in out and "follower disarmed" in out


def test_example_script_runs_on_emulated_arms() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "examples" / "robot_teleop.py"
    out = subprocess.run([sys.executable, str(script), "--seconds", "0.5", "--hz", "200"],
                         capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    leader = out[0].removeprefix("leader").strip()
    follower = out[1].removeprefix("follower").strip()
    assert leader == follower, out


def test_emulate_serves_ports(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["robot", "emulate", "--count", "2", "--seconds", "0.1"]) == 0
    ports = capsys.readouterr().out.split()
    assert len(ports) == 2 and all(p.startswith("/dev/") for p in ports)
    assert main(["robot", "emulate", "--count", "0"]) == 2
