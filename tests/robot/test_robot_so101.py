"""The SO-101 drivers against the emulator: every safety promise is checked by looking at
what went over the bus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noeira.core import RobotDriver, make_robot
from noeira.core.errors import ConfigError, UserError
from noeira.robot.calibration import TICKS_PER_DEG, MotorCalibration, load_calibration, save_calibration
from noeira.robot.emulator import EmulatedBus
from noeira.robot.errors import (
    BusError,
    CalibrationError,
    MotorError,
    MotorMismatchError,
    RobotError,
    RobotNotArmedError,
    SafetyLimitError,
)
from noeira.robot.protocol import Instr
from noeira.robot.so101 import JOINTS, SO101Follower, SO101Leader
from noeira.robot.testing import check_robot_driver

IDS = list(JOINTS.values())


def follower(url: str, cal_path: Path | None, **kw) -> SO101Follower:
    kw.setdefault("timeout", 0.01)
    return make_robot("so101", port=url, calibration=str(cal_path) if cal_path else None, **kw)


def torque(emu: EmulatedBus) -> list[bool]:
    return [emu[i].torque for i in IDS]


def torque_on_writes(emu: EmulatedBus) -> list:
    return [w for w in emu.writes("Torque_Enable") if w.value("Torque_Enable")]


# -- construction and contract ---------------------------------------------------------------

def test_registry_names_and_protocol(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    arm = follower(url, cal_path)
    assert type(arm) is SO101Follower and isinstance(arm, RobotDriver)
    leader = make_robot("so101-leader", port=url)
    assert type(leader) is SO101Leader and isinstance(leader, RobotDriver)
    check_robot_driver(arm, action={"elbow_flex": 5.0, "gripper": 60.0})
    assert not any(torque(emu))


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="robot.port: required"):
        make_robot("so101")
    with pytest.raises(ConfigError, match="robot.max_step_deg"):
        make_robot("so101", port="x", max_step_deg=-1.0)
    with pytest.raises(ConfigError, match="robot.speed: unknown key"):
        make_robot("so101", port="x", speed=3)
    with pytest.raises(CalibrationError, match="does not exist"):
        make_robot("so101", port="x", calibration="/nonexistent/cal.json")


# -- connect ---------------------------------------------------------------------------------

def test_connect_pings_checks_models_configures_and_leaves_torque_off(url: str, cal_path: Path,
                                                                      emu: EmulatedBus) -> None:
    for s in emu.servos.values():
        s.set("Torque_Enable", 1)  # left on by a previous program
    saved = {i: emu[i].saved_eeprom for i in IDS}
    arm = follower(url, cal_path)
    arm.connect()
    assert arm.connected and not arm.armed
    assert sorted(p.ident for p in emu.instructions(Instr.PING)) == IDS
    model_reads = [p for p in emu.instructions(Instr.READ) if p.params[0] == 3]
    assert sorted(p.ident for p in model_reads) == IDS
    assert not any(torque(emu)) and not torque_on_writes(emu)
    assert not emu.writes("Goal_Position")
    # working registers are set, but nothing went to EEPROM (Lock stayed 1)
    assert [emu[i].get("P_Coefficient") for i in IDS] == [16] * 6
    assert emu[6].get("Max_Torque_Limit") == 500 and emu[1].get("Max_Torque_Limit") == 1000
    assert [emu[i].get("Acceleration") for i in IDS] == [254] * 6
    assert not [w for w in emu.writes("Lock") if w.value("Lock") == 0]
    assert {i: emu[i].saved_eeprom for i in IDS} == saved
    arm.disconnect()


def test_missing_motor_is_named_and_port_closed(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    emu.remove(3)
    arm = follower(url, cal_path)
    with pytest.raises(MotorMismatchError, match=r"elbow_flex \(ID 3\)"):
        arm.connect()
    assert not arm.connected and not arm.bus


def test_wrong_model_is_refused(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    emu[2].set("Model_Number", 2825)
    with pytest.raises(MotorMismatchError, match=r"shoulder_lift \(ID 2\) is model 2825 \(sts3250\)"):
        follower(url, cal_path).connect()


# -- reading ---------------------------------------------------------------------------------

def test_read_units(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    emu[1].set_present(2000 + 512)  # +45 degrees from the centre
    emu[4].set_present(2000 + 512)  # wrist_flex has drive_mode 1
    emu[6].set_present(2750)  # gripper range 2000-3000
    with follower(url, cal_path) as arm:
        raw = arm.read(raw=True)
        assert raw == {"shoulder_pan": 2512, "shoulder_lift": 2000, "elbow_flex": 2000, "wrist_flex": 2512,
                       "wrist_roll": 2048, "gripper": 2750}
        deg = arm.read()
        assert deg["shoulder_pan"] == pytest.approx(45.0)
        assert deg["wrist_flex"] == pytest.approx(-45.0)
        assert deg["shoulder_lift"] == pytest.approx(0.0)
        assert deg["wrist_roll"] == pytest.approx((2048 - 2047.5) / TICKS_PER_DEG)
        assert deg["gripper"] == pytest.approx(75.0)


def test_read_without_calibration(url: str, emu: EmulatedBus) -> None:
    with follower(url, None) as arm:
        assert arm.read(raw=True)["gripper"] == 2500
        with pytest.raises(CalibrationError, match="needs a calibration"):
            arm.read()


def test_motor_homing_offset_is_compensated(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    # the servo's own Homing_Offset (e.g. from an earlier LeRobot calibration) differs from the file's
    emu[1].set("Homing_Offset", 300)
    with follower(url, cal_path) as arm:
        assert arm.read(raw=True)["shoulder_pan"] == 1700
        assert arm.read()["shoulder_pan"] == pytest.approx(0.0)
        arm.arm()
        arm.send_action({"shoulder_pan": 5.0})
        goal = emu.writes("Goal_Position")[-1]
        assert goal.ident == 1 and goal.value("Goal_Position") == 1700 + round(5 * TICKS_PER_DEG)


def test_a_missing_read_is_an_error_not_zero(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with follower(url, cal_path, retries=1) as arm:
        emu.fault_ids = {5}
        emu.drop_replies = 2
        with pytest.raises(BusError, match=r"\[5\]"):
            arm.read()
        emu[2].error_bits = 0x01
        with pytest.raises(MotorError, match="servo 2 reports error: voltage"):
            arm.read()


# -- arming and commanding -------------------------------------------------------------------

def test_send_action_unarmed_writes_nothing(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with follower(url, cal_path) as arm:
        emu.clear_log()
        with pytest.raises(RobotNotArmedError, match="not armed"):
            arm.send_action({"elbow_flex": 30.0})
        assert emu.log == []
        arm.arm()
        arm.disarm()
        emu.clear_log()
        with pytest.raises(RobotNotArmedError):
            arm.send_action({"elbow_flex": 30.0})
        assert emu.log == []
    assert not any(torque(emu))


def test_arm_requires_connection_and_calibration(url: str, emu: EmulatedBus) -> None:
    arm = follower(url, None)
    with pytest.raises(RobotError, match="not connected"):
        arm.arm()
    arm.connect()
    with pytest.raises(CalibrationError, match="arm\\(\\) needs a calibration"):
        arm.arm()
    assert not arm.armed and not torque_on_writes(emu) and not emu.writes("Goal_Position")
    arm.disconnect()


def test_arm_sets_goals_to_present_before_torque(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    emu[3].set_present(2222)
    for s in emu.servos.values():
        s.goal_enables_torque = False
        s.set("Goal_Position", 100)  # a stale goal far away
    with follower(url, cal_path) as arm:
        emu.clear_log()
        arm.arm()
        assert arm.armed and all(torque(emu))
        goal_writes = emu.writes("Goal_Position")
        assert {w.ident: w.value("Goal_Position") for w in goal_writes} == {
            1: 2000, 2: 2000, 3: 2222, 4: 2000, 5: 2048, 6: 2500}
        first_torque = emu.writes().index(torque_on_writes(emu)[0])
        assert all(emu.writes().index(w) < first_torque for w in goal_writes)
        assert emu[3].present == 2222  # nothing moved
    assert not any(torque(emu))


def test_one_sync_write_per_call_with_clamping(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with follower(url, cal_path, max_step_deg=10.0, max_step_gripper=20.0) as arm:
        arm.arm()
        emu.clear_log()
        sent = arm.send_action({"shoulder_pan": 5.0, "elbow_flex": 90.0, "wrist_flex": -400.0, "gripper": 0.0})
        writes = [p for p in emu.log if p.code in (Instr.WRITE, Instr.SYNC_WRITE, Instr.REG_WRITE)]
        assert len(writes) == 1 and writes[0].code == Instr.SYNC_WRITE
        goals = {w.ident: w.value("Goal_Position") for w in emu.writes("Goal_Position")}
        step = round(10 * TICKS_PER_DEG)
        assert goals == {
            1: 2000 + round(5 * TICKS_PER_DEG),  # within limits: as asked
            3: 2000 + step,  # +90 deg asked: at most 10 deg from present
            4: 2000 + step,  # drive_mode 1: -400 deg -> up, clamped to the step
            6: 2500 - 200,  # gripper: 20 % of its 1000-tick range per call
        }
        assert sent["elbow_flex"] == pytest.approx(10.0, abs=0.1) and sent["gripper"] == pytest.approx(30.0)
        # repeated calls walk toward the target and stop at the calibrated range
        for _ in range(60):
            arm.send_action({"elbow_flex": 170.0})
        assert emu[3].get("Goal_Position") == 3000 and emu[3].present == 3000
        assert arm.read()["elbow_flex"] == pytest.approx(1000 / TICKS_PER_DEG)


def test_bad_action_writes_nothing(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with follower(url, cal_path) as arm:
        arm.arm()
        emu.clear_log()
        with pytest.raises(UserError, match="unknown joint 'elbow'"):
            arm.send_action({"elbow": 1.0})
        with pytest.raises(UserError, match="finite"):
            arm.send_action({"elbow_flex": float("nan")})
        assert emu.log == [] and arm.armed


def test_disarm_and_disconnect_release_torque(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    arm = follower(url, cal_path)
    arm.connect()
    arm.arm()
    arm.disarm()
    assert not arm.armed and not any(torque(emu))
    arm.arm()
    arm.disconnect()
    assert not arm.connected and not any(torque(emu))
    assert not arm.bus.is_open


def test_exception_in_with_block_releases_torque(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with pytest.raises(ZeroDivisionError), follower(url, cal_path) as arm:
        arm.arm()
        assert all(torque(emu))
        1 / 0  # noqa: B018
    assert not any(torque(emu))
    last = emu.writes("Torque_Enable")[-1]
    assert last.value("Torque_Enable") == 0


def test_exception_with_a_dead_bus_still_sends_the_release(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with pytest.raises(ZeroDivisionError), follower(url, cal_path) as arm:
        arm.arm()
        emu.drop_replies = 100  # no more replies: disarm cannot verify
        1 / 0  # noqa: B018
    assert not any(torque(emu))


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (lambda e: e[2].set("Present_Temperature", 80), r"shoulder_lift \(ID 2\) temperature 80 °C > 65 °C"),
        (lambda e: e[5].set("Present_Voltage", 40), r"wrist_roll \(ID 5\) voltage 4.0 V outside"),
        (lambda e: e[6].set("Present_Voltage", 140), r"gripper \(ID 6\) voltage 14.0 V outside"),
    ],
)
def test_monitoring_disarms(url: str, cal_path: Path, emu: EmulatedBus, fault, message: str) -> None:
    with follower(url, cal_path) as arm:
        arm.arm()
        fault(emu)
        emu.clear_log()
        with pytest.raises(SafetyLimitError, match=message + ".*torque released"):
            arm.send_action({"elbow_flex": 5.0})
        assert not arm.armed and not any(torque(emu))
        assert not emu.writes("Goal_Position")
        with pytest.raises(SafetyLimitError, match="not arming"):
            arm.arm()
        assert not any(torque(emu))


def test_sustained_load_disarms(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with follower(url, cal_path, max_load_pct=50.0, load_limit_reads=3) as arm:
        arm.arm()
        emu[3].goal_enables_torque = False
        for _ in range(2):  # a short peak is tolerated
            emu[3].set("Present_Load", -600)
            arm.send_action({})
        emu[3].set("Present_Load", 0)
        arm.send_action({})
        for _ in range(2):
            emu[3].set("Present_Load", -600)
            arm.send_action({})
        emu[3].set("Present_Load", 600)
        with pytest.raises(SafetyLimitError, match=r"elbow_flex \(ID 3\) load 60 % > 50 % for 3 reads"):
            arm.send_action({})
        assert not any(torque(emu))


def test_motor_error_while_armed_releases_torque(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    with follower(url, cal_path) as arm:
        arm.arm()
        emu[4].error_bits = 0x20
        with pytest.raises(MotorError, match="overload"):
            arm.send_action({"elbow_flex": 1.0})
        assert not arm.armed and not any(torque(emu))
        emu[4].error_bits = 0


def test_write_calibration_is_explicit_and_persists(url: str, cal_path: Path, emu: EmulatedBus, tmp_path: Path) -> None:
    cal = load_calibration(cal_path)
    cal["elbow_flex"] = MotorCalibration(3, 0, -48, 1000, 3000)
    path = tmp_path / "c.json"
    save_calibration(path, cal)
    with follower(url, path) as arm:
        before = arm.read()["elbow_flex"]
        assert emu[3].get("Homing_Offset") == 0  # connect did not write it
        arm.write_calibration()
        assert arm.read()["elbow_flex"] == pytest.approx(before)
    for i in IDS:
        emu[i].power_cycle()
    assert emu[3].get("Homing_Offset") == -48 and emu[3].get("Max_Position_Limit") == 3000
    assert emu[3].present == 2048


# -- leader ----------------------------------------------------------------------------------

def test_leader_is_read_only(url: str, cal_path: Path, emu: EmulatedBus) -> None:
    leader = make_robot("so101-leader", port=url, calibration=str(cal_path), timeout=0.01)
    with leader:
        assert leader.read()["gripper"] == pytest.approx(50.0)
        with pytest.raises(RobotError, match="read-only"):
            leader.arm()
        with pytest.raises(RobotNotArmedError):
            leader.send_action({"gripper": 10.0})
        leader.disarm()
    assert not torque_on_writes(emu)
    assert not emu.writes("Goal_Position")
    touched = {w.addr for w in emu.writes()}
    assert touched == {40}  # only Torque_Enable = 0


# -- calibration files -----------------------------------------------------------------------

def test_calibration_roundtrip_in_lerobot_format(cal_path: Path, tmp_path: Path) -> None:
    cal = load_calibration(cal_path, JOINTS)
    out = tmp_path / "sub" / "copy.json"
    save_calibration(out, cal)
    assert json.loads(out.read_text()) == json.loads(cal_path.read_text())
    assert cal["gripper"] == MotorCalibration(id=6, drive_mode=0, homing_offset=0, range_min=2000, range_max=3000)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("gripper"), "missing gripper"),
        (lambda d: d.__setitem__("tail", d["gripper"]), "unknown tail"),
        (lambda d: d["elbow_flex"].__setitem__("id", 9), "elbow_flex.id is 9"),
        (lambda d: d["elbow_flex"].__setitem__("range_min", 3500), "range_min < range_max"),
        (lambda d: d["elbow_flex"].__setitem__("homing_offset", 3000), "±2047"),
        (lambda d: d["elbow_flex"].__setitem__("range_min", "low"), "elbow_flex.range_min: expected an integer"),
        (lambda d: d["elbow_flex"].__setitem__("color", 1), "elbow_flex.color: unknown key"),
    ],
)
def test_bad_calibration_files(cal_path: Path, tmp_path: Path, edit, message: str) -> None:
    data = json.loads(cal_path.read_text())
    edit(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=message.replace("(", r"\(")):
        load_calibration(bad, JOINTS)
    with pytest.raises(CalibrationError, match="bad.json"):
        make_robot("so101", port="x", calibration=str(bad))


def test_unreadable_calibration(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CalibrationError, match="not readable JSON"):
        load_calibration(bad)
