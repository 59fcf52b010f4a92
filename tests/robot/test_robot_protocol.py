"""Packets, checksums and encodings of the Feetech protocol, byte for byte."""

from __future__ import annotations

import pytest

from noeira.robot.protocol import (
    REGISTERS,
    Instr,
    Packet,
    PacketReader,
    checksum,
    decode_error,
    decode_value,
    encode_value,
    instruction_packet,
    status_packet,
    sync_read_params,
    sync_write_params,
)


def test_instruction_packets_match_the_protocol_document() -> None:
    # PING ID 1: FF FF 01 02 01 ~(1+2+1)
    assert instruction_packet(1, Instr.PING) == bytes([0xFF, 0xFF, 0x01, 0x02, 0x01, 0xFB])
    # READ ID 1, Present_Position (56), 2 bytes: LEN = 2 params + 2
    pkt = instruction_packet(1, Instr.READ, bytes([56, 2]))
    assert pkt == bytes([0xFF, 0xFF, 0x01, 0x04, 0x02, 0x38, 0x02, (~(1 + 4 + 2 + 56 + 2)) & 0xFF])
    # WRITE ID 3 Goal_Position = 2048 (little-endian 00 08)
    pkt = instruction_packet(3, Instr.WRITE, bytes([42, 0x00, 0x08]))
    assert pkt[:5] == bytes([0xFF, 0xFF, 3, 5, 3]) and pkt[-1] == checksum(pkt[2:-1])
    assert status_packet(1, 0, b"\x00\x08") == bytes([0xFF, 0xFF, 1, 4, 0, 0, 8, (~(1 + 4 + 8)) & 0xFF])


def test_sync_packets() -> None:
    assert sync_read_params(56, 2, [1, 2, 3]) == bytes([56, 2, 1, 2, 3])
    params = sync_write_params(42, 2, {1: b"\x00\x08", 2: b"\x10\x00"})
    assert params == bytes([42, 2, 1, 0x00, 0x08, 2, 0x10, 0x00])
    pkt = instruction_packet(0xFE, Instr.SYNC_WRITE, params)
    assert pkt[3] == len(params) + 2 and pkt[4] == 0x83
    with pytest.raises(ValueError):
        sync_write_params(42, 2, {1: b"\x00"})


def test_checksum_is_inverted_low_byte_of_sum() -> None:
    assert checksum([0xFE, 0x04, 0x03, 0x28, 0x00]) == (~(0xFE + 4 + 3 + 0x28)) & 0xFF
    assert checksum([0xFF] * 10) == (~(0xFF * 10)) & 0xFF


@pytest.mark.parametrize(
    ("value", "size", "bit", "raw"),
    [
        (2048, 2, 15, 0x0800),
        (-5, 2, 15, 0x8005),  # Goal/Present_Position, velocity: sign in bit 15
        (-1020, 2, 11, 0x0800 | 1020),  # Homing_Offset: sign in bit 11
        (1020, 2, 11, 1020),
        (-300, 2, 10, 0x0400 | 300),  # Present_Load: sign in bit 10
        (200, 1, None, 200),
    ],
)
def test_sign_magnitude(value: int, size: int, bit: int | None, raw: int) -> None:
    enc = encode_value(value, size, bit)
    assert enc == raw.to_bytes(size, "little")
    assert decode_value(enc, bit) == value


def test_encode_rejects_what_does_not_fit() -> None:
    with pytest.raises(ValueError):
        encode_value(2048, 2, 11)
    with pytest.raises(ValueError):
        encode_value(-1, 1)
    with pytest.raises(ValueError):
        encode_value(256, 1)


def test_register_map() -> None:
    expect = {"ID": 5, "Baud_Rate": 6, "Return_Delay_Time": 7, "Min_Position_Limit": 9, "Max_Position_Limit": 11,
              "Max_Torque_Limit": 16, "P_Coefficient": 21, "D_Coefficient": 22, "I_Coefficient": 23,
              "Protection_Current": 28, "Homing_Offset": 31, "Operating_Mode": 33, "Overload_Torque": 36,
              "Torque_Enable": 40, "Acceleration": 41, "Goal_Position": 42, "Goal_Velocity": 46, "Lock": 55,
              "Present_Position": 56, "Present_Velocity": 58, "Present_Load": 60, "Present_Voltage": 62,
              "Present_Temperature": 63, "Status": 65, "Moving": 66, "Present_Current": 69}
    for name, addr in expect.items():
        assert REGISTERS[name].addr == addr, name
        assert REGISTERS[name].eeprom == (addr < 40), name


def test_error_bits() -> None:
    assert decode_error(0x01 | 0x04 | 0x20) == ["voltage", "overheat", "overload"]
    assert decode_error(0x02 | 0x08) == ["angle", "overcurrent"]
    assert decode_error(0x40) == ["bit 6"]


def test_reader_resyncs_after_noise_bad_checksum_and_truncation() -> None:
    good = status_packet(2, 0, b"\x34\x12")
    bad = bytearray(status_packet(1, 0, b"\x00\x08"))
    bad[-1] ^= 0xFF
    r = PacketReader()
    r.feed(b"\x00\x13\xff" + bytes(bad) + b"\xff" + good)
    assert r.next() == Packet(2, 0, b"\x34\x12")
    assert r.rejected == 1 and "checksum" in r.last_problem
    assert r.next() is None
    # a packet split across reads is completed by the next feed
    r.feed(good[:3])
    assert r.next() is None and r.needed() == 1  # the length byte
    r.feed(good[3:4])
    assert r.next() is None and r.needed() == len(good) - 4
    r.feed(good[4:])
    assert r.next() == Packet(2, 0, b"\x34\x12")
    # an impossible length is skipped
    r.feed(b"\xff\xff\x01\x01\x00" + good)
    assert r.next() == Packet(2, 0, b"\x34\x12")
    assert "length" in r.last_problem


def test_reader_handles_triple_ff_header_and_ff_in_data() -> None:
    r = PacketReader()
    pkt = status_packet(1, 0, b"\xff\xff")
    r.feed(b"\xff" + pkt)
    assert r.next() == Packet(1, 0, b"\xff\xff")
