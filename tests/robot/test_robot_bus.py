"""The bus against the emulator: every instruction, retries, and fault injection.
A missing or corrupt reply is an error, never a value."""

from __future__ import annotations

import pytest

from noeira.robot.bus import FeetechBus
from noeira.robot.emulator import EmulatedBus, EmulatedServo, PtyEmulator
from noeira.robot.errors import BusError, MotorError, RobotError
from noeira.robot.protocol import BROADCAST_ID, Instr

IDS = [1, 2, 3, 4, 5, 6]


@pytest.fixture
def bus(url: str):
    with FeetechBus(url, timeout=0.01, retries=2) as b:
        yield b


def test_ping_read_write(bus: FeetechBus, emu: EmulatedBus) -> None:
    assert bus.ping(3) and not bus.ping(9)
    assert bus.model(3) == 777
    assert bus.read(1, "Present_Position") == 2000
    bus.write(2, "Acceleration", 100)
    assert emu[2].get("Acceleration") == 100
    bus.write(2, "Homing_Offset", -100)  # sign-magnitude on the wire
    assert emu[2].mem[31:33] == (0x800 | 100).to_bytes(2, "little")
    assert bus.read(2, "Homing_Offset") == -100
    assert bus.read(2, "Present_Position") == 2100  # shaft 2000 - (-100)


def test_sync_read_and_sync_write(bus: FeetechBus, emu: EmulatedBus) -> None:
    assert bus.sync_read("Present_Position", IDS) == {1: 2000, 2: 2000, 3: 2000, 4: 2000, 5: 2048, 6: 2500}
    emu.clear_log()
    bus.sync_write("Acceleration", {1: 10, 4: 40})
    assert len(emu.log) == 1 and emu.log[0].ident == BROADCAST_ID and emu.log[0].code == Instr.SYNC_WRITE
    assert (emu[1].get("Acceleration"), emu[4].get("Acceleration"), emu[2].get("Acceleration")) == (10, 40, 0)


def test_reg_write_waits_for_action(bus: FeetechBus, emu: EmulatedBus) -> None:
    bus.reg_write(1, "Acceleration", 77)
    assert emu[1].get("Acceleration") == 0
    bus.action()
    assert emu[1].get("Acceleration") == 77


def test_broadcast_gets_no_reply_except_ping(url: str, emu: EmulatedBus) -> None:
    emu.remove(2), emu.remove(3), emu.remove(4), emu.remove(5), emu.remove(6)
    with FeetechBus(url, timeout=0.01) as b:
        assert b.broadcast_ping() == [1]
        b.write(BROADCAST_ID, "Acceleration", 5)  # returns without waiting for a reply
        assert emu[1].get("Acceleration") == 5
        assert b._raw_serial().in_waiting == 0


def test_goals_move_the_servo_only_with_torque(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu[1].goal_enables_torque = False
    bus.write(1, "Goal_Position", 2500)
    for _ in range(5):
        bus.ping(1)
    assert emu[1].present == 2000
    bus.write(1, "Torque_Enable", 1)
    for _ in range(20):
        bus.ping(1)
    assert emu[1].present == 2500


def test_a_dropped_reply_is_retried(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.drop_replies = 1
    assert bus.read(1, "Present_Position") == 2000
    assert bus.stats["retries"] == 1


@pytest.mark.parametrize("fault", ["drop_replies", "corrupt_replies", "truncate_replies"])
def test_persistent_faults_raise_instead_of_returning_a_value(bus: FeetechBus, emu: EmulatedBus, fault: str) -> None:
    setattr(emu, fault, 3)  # every attempt (1 + 2 retries) fails
    with pytest.raises(BusError, match=r"servo 1: .* \(3 attempts\)") as info:
        bus.read(1, "Present_Position")
    msg = str(info.value)
    assert {"drop_replies": "no status packet", "corrupt_replies": "bad checksum",
            "truncate_replies": "truncated"}[fault] in msg
    assert getattr(emu, fault) == 0
    assert bus.read(1, "Present_Position") == 2000  # the bus recovers


def test_corrupt_then_good_reply_recovers(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.corrupt_replies = 2
    assert bus.read(6, "Present_Position") == 2500
    assert bus.stats["retries"] == 2


def test_noise_before_a_reply_is_skipped(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.noise_before_reply = b"\x00\xff\x13\xff\xff\x01"
    assert bus.read(1, "Present_Position") == 2000
    assert bus.stats["retries"] == 0


def test_error_bits_raise_motor_error(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu[3].error_bits = 0x04 | 0x20
    with pytest.raises(MotorError, match="servo 3 reports error: overheat, overload") as info:
        bus.read(3, "Present_Position")
    assert info.value.ident == 3 and info.value.error == 0x24
    with pytest.raises(MotorError):
        bus.sync_read("Present_Position", IDS)
    assert bus.ping(3)  # it is there, if unwell


def test_sync_read_retries_only_the_missing_servo(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.fault_ids = {4}
    emu.drop_replies = 1
    emu.clear_log()
    assert bus.sync_read("Present_Position", IDS)[4] == 2000
    reads = emu.instructions(Instr.SYNC_READ)
    assert [list(p.params[2:]) for p in reads] == [IDS, [4]]


def test_sync_read_with_a_missing_motor_names_it(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.remove(5)
    with pytest.raises(BusError, match=r"servo\(s\) \[5\]"):
        bus.sync_read("Present_Position", IDS)


def test_reply_from_the_wrong_id_is_not_accepted(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu[1].reply_as = 7  # e.g. two servos sharing an ID
    with pytest.raises(BusError, match="ID 7 instead of 1"):
        bus.read(1, "Present_Position")
    with pytest.raises(BusError, match=r"servo\(s\) \[1\].*unexpected status packet \(ID 7"):
        bus.sync_read("Present_Position", IDS)


def test_eeprom_writes_persist_only_unlocked(bus: FeetechBus, emu: EmulatedBus) -> None:
    bus.write(1, "P_Coefficient", 16)  # Lock = 1 (power-up default): live only
    assert emu[1].get("P_Coefficient") == 16
    bus.write_eeprom(2, "Max_Position_Limit", 3000)
    assert emu[2].get("Lock") == 1  # locked again
    emu[1].power_cycle(), emu[2].power_cycle()
    assert emu[1].get("P_Coefficient") == 32
    assert emu[2].get("Max_Position_Limit") == 3000


def test_changing_an_id(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.remove(6)
    bus.write_eeprom(5, "ID", 6)
    assert bus.ping(6) and not bus.ping(5)
    emu[6].power_cycle()
    assert emu[6].ident == 6


def test_scan(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu.remove(4)
    emu.add(EmulatedServo(9, model=2825))
    assert bus.scan(range(0, 12)) == [(1, 777, "sts3215"), (2, 777, "sts3215"), (3, 777, "sts3215"),
                                      (5, 777, "sts3215"), (6, 777, "sts3215"), (9, 2825, "sts3250")]


def test_servo_at_another_baud_rate_is_silent(bus: FeetechBus, emu: EmulatedBus) -> None:
    emu[2].set("Baud_Rate", 4)
    assert not bus.ping(2) and bus.ping(1)


def test_release_torque_reaches_every_servo(bus: FeetechBus, emu: EmulatedBus) -> None:
    for s in emu.servos.values():
        s.set("Torque_Enable", 1)
    bus.release_torque()
    assert not any(s.torque for s in emu.servos.values())


def test_unopenable_port_is_a_bus_error(tmp_path) -> None:
    with pytest.raises(BusError, match="cannot open serial port"):
        FeetechBus(str(tmp_path / "no-such-tty"))


def test_loop_url_never_fabricates_a_value() -> None:
    # loop:// echoes our own instruction back; that is not a servo's answer
    with FeetechBus("loop://", timeout=0.01, retries=0) as b, pytest.raises(RobotError):
        b.read(1, "Present_Position")


def test_over_a_pty(pty: PtyEmulator, emu: EmulatedBus) -> None:
    with FeetechBus(pty.port, timeout=0.05) as b:
        assert b.sync_read("Present_Position", IDS)[6] == 2500
        emu.corrupt_replies = 1
        assert b.read(3, "Present_Position") == 2000
        assert b.stats["retries"] == 1
        emu.drop_replies = 3
        with pytest.raises(BusError):
            b.read(3, "Present_Position")


@pytest.mark.parametrize("emergency", [False, True])
def test_emergency_release_survives_a_half_sent_packet(bus: FeetechBus, emu: EmulatedBus, emergency: bool) -> None:
    from noeira.robot.protocol import PacketReader, instruction_packet, sync_write_params

    emu.reader = PacketReader(backtrack=False)  # servos that swallow a whole bad packet
    for s in emu.servos.values():
        s.set("Torque_Enable", 1)
    goals = instruction_packet(BROADCAST_ID, Instr.SYNC_WRITE,
                               sync_write_params(42, 2, {i: b"\x00\x08" for i in IDS}))
    # a signal handler cuts in after the first bytes of a goal packet went out
    emu.handle(goals[:5])
    if emergency:
        emu.clear_log()
        bus.release_torque(emergency=True)  # broadcast only, no SYNC_WRITE to help it
        assert not any(s.torque for s in emu.servos.values())
    else:  # a single broadcast release vanishes into the half packet
        emu.handle(instruction_packet(BROADCAST_ID, Instr.WRITE, bytes((40, 0))))
        assert all(s.torque for s in emu.servos.values())
