"""The Feetech SCS/STS serial-bus protocol: packets, checksums, value encodings, the STS3215 map.

Wire format (STS series, little-endian 2-byte values)::

    instruction  FF FF ID LEN INSTR PARAM... CHK     LEN = len(params) + 2
    status       FF FF ID LEN ERR   DATA...  CHK     LEN = len(data) + 2
    CHK = ~(ID + LEN + INSTR|ERR + sum(params|data)) & 0xFF

Broadcast ID 0xFE reaches every servo; only PING is answered. ``SYNC_READ`` is answered by
one status packet per listed ID, in order; ``SYNC_WRITE`` is never answered.

Nothing here does I/O: :mod:`noeira.robot.bus` talks to a port, :mod:`noeira.robot.emulator`
answers like a servo. Both frame packets with :class:`PacketReader`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

__all__ = [
    "BROADCAST_ID",
    "ERROR_BITS",
    "HEADER",
    "MODEL_NAMES",
    "REGISTERS",
    "STEPS_PER_TURN",
    "STS3215_MODEL",
    "Instr",
    "Packet",
    "PacketReader",
    "Register",
    "checksum",
    "decode_error",
    "decode_value",
    "encode_value",
    "instruction_packet",
    "status_packet",
    "sync_read_params",
    "sync_write_params",
]

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFD
"""Highest addressable servo ID (0xFE is broadcast)."""
STS3215_MODEL = 777
STEPS_PER_TURN = 4096
MODEL_NAMES = {777: "sts3215", 2825: "sts3250", 11272: "sm8512bl", 1284: "scs0009"}
"""Model numbers (register 3) of Feetech servos we can name; only the STS3215 is driven."""
BAUD_RATES = {0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 76_800, 6: 57_600, 7: 38_400}
"""Baud_Rate register value -> bits per second (STS series)."""


class Instr:
    """Instruction codes."""

    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


INSTR_NAMES = {v: k for k, v in vars(Instr).items() if not k.startswith("_")}

ERROR_BITS = {0x01: "voltage", 0x02: "angle", 0x04: "overheat", 0x08: "overcurrent", 0x20: "overload"}
"""Bits of the status packet's error byte (and of the Status register 65)."""


def decode_error(err: int) -> list[str]:
    """The names of the error bits set in ``err`` (unknown bits as ``bit N``)."""
    names = [name for bit, name in ERROR_BITS.items() if err & bit]
    names += [f"bit {i}" for i in range(8) if err & (1 << i) and (1 << i) not in ERROR_BITS]
    return names


class Register(NamedTuple):
    """One entry of the memory table: ``addr``, byte ``size``, sign-magnitude ``sign_bit``
    (None for unsigned) and whether it lives in EEPROM (saved only while Lock = 0)."""

    name: str
    addr: int
    size: int
    sign_bit: int | None = None
    eeprom: bool = False


def _table(*rows: Register) -> dict[str, Register]:
    return {r.name: r for r in rows}


REGISTERS = _table(
    # EEPROM area (addresses below 40): persistent only when written with Lock = 0.
    Register("Model_Number", 3, 2, eeprom=True),
    Register("ID", 5, 1, eeprom=True),
    Register("Baud_Rate", 6, 1, eeprom=True),
    Register("Return_Delay_Time", 7, 1, eeprom=True),
    Register("Response_Status_Level", 8, 1, eeprom=True),
    Register("Min_Position_Limit", 9, 2, eeprom=True),
    Register("Max_Position_Limit", 11, 2, eeprom=True),
    Register("Max_Temperature_Limit", 13, 1, eeprom=True),
    Register("Max_Voltage_Limit", 14, 1, eeprom=True),
    Register("Min_Voltage_Limit", 15, 1, eeprom=True),
    Register("Max_Torque_Limit", 16, 2, eeprom=True),
    Register("P_Coefficient", 21, 1, eeprom=True),
    Register("D_Coefficient", 22, 1, eeprom=True),
    Register("I_Coefficient", 23, 1, eeprom=True),
    Register("Protection_Current", 28, 2, eeprom=True),
    Register("Homing_Offset", 31, 2, sign_bit=11, eeprom=True),
    Register("Operating_Mode", 33, 1, eeprom=True),
    Register("Overload_Torque", 36, 1, eeprom=True),
    # RAM area.
    Register("Torque_Enable", 40, 1),
    Register("Acceleration", 41, 1),
    Register("Goal_Position", 42, 2, sign_bit=15),
    Register("Goal_Velocity", 46, 2, sign_bit=15),
    Register("Lock", 55, 1),
    Register("Present_Position", 56, 2, sign_bit=15),
    Register("Present_Velocity", 58, 2, sign_bit=15),
    Register("Present_Load", 60, 2, sign_bit=10),
    Register("Present_Voltage", 62, 1),
    Register("Present_Temperature", 63, 1),
    Register("Status", 65, 1),
    Register("Moving", 66, 1),
    Register("Present_Current", 69, 2),
)
EEPROM_END = 40
"""Addresses below this are the EEPROM area."""


def checksum(body: Iterable[int]) -> int:
    """``~sum(body) & 0xFF`` over ID, LEN, INSTR/ERR and the parameters."""
    return ~sum(body) & 0xFF


def encode_value(value: int, size: int, sign_bit: int | None = None) -> bytes:
    """``value`` as ``size`` little-endian bytes; negative values in sign-magnitude form
    (magnitude below ``sign_bit``, the sign in bit ``sign_bit``)."""
    value = int(value)
    if sign_bit is not None:
        mag = abs(value)
        if mag >= 1 << sign_bit:
            raise ValueError(f"{value} does not fit in {sign_bit} magnitude bits")
        raw = mag | (1 << sign_bit) if value < 0 else mag
    else:
        if not 0 <= value < 1 << (8 * size):
            raise ValueError(f"{value} does not fit in {size} unsigned byte(s)")
        raw = value
    return raw.to_bytes(size, "little")


def decode_value(data: bytes, sign_bit: int | None = None) -> int:
    """The integer in little-endian ``data``; sign-magnitude when ``sign_bit`` is given."""
    raw = int.from_bytes(data, "little")
    if sign_bit is not None and raw & (1 << sign_bit):
        return -(raw & ((1 << sign_bit) - 1))
    return raw


def _packet(ident: int, code: int, params: bytes) -> bytes:
    if not 0 <= ident <= BROADCAST_ID:
        raise ValueError(f"servo ID {ident} out of range 0..{BROADCAST_ID}")
    if len(params) > 250:
        raise ValueError(f"{len(params)} parameter bytes do not fit one packet")
    body = bytes((ident, len(params) + 2, code)) + params
    return HEADER + body + bytes((checksum(body),))


def instruction_packet(ident: int, instr: int, params: bytes = b"") -> bytes:
    """The instruction packet ``FF FF ID LEN INSTR PARAMS CHK``."""
    return _packet(ident, instr, bytes(params))


def status_packet(ident: int, error: int = 0, data: bytes = b"") -> bytes:
    """The status packet ``FF FF ID LEN ERR DATA CHK`` (what a servo sends back)."""
    return _packet(ident, error, bytes(data))


def sync_read_params(addr: int, size: int, ids: Sequence[int]) -> bytes:
    """Parameters of a SYNC_READ: start address, length, then the IDs."""
    return bytes((addr, size, *ids))


def sync_write_params(addr: int, size: int, data: Mapping[int, bytes]) -> bytes:
    """Parameters of a SYNC_WRITE: start address, length, then ``ID DATA...`` per servo."""
    out = bytearray((addr, size))
    for ident, payload in data.items():
        if len(payload) != size:
            raise ValueError(f"servo {ident}: {len(payload)} bytes, expected {size}")
        out.append(ident)
        out += payload
    return bytes(out)


class Packet(NamedTuple):
    """A framed packet: ``code`` is the instruction (host -> servo) or the error byte
    (servo -> host); ``params`` the parameters or data."""

    ident: int
    code: int
    params: bytes

    @property
    def raw(self) -> bytes:
        return _packet(self.ident, self.code, self.params)


class PacketReader:
    """Frames packets out of a byte stream, resynchronising on garbage.

    Feed bytes with :meth:`feed`; :meth:`next` returns the next valid packet or None when
    more bytes are needed. A bad checksum or an impossible length drops the first header
    byte and searches again, so one corrupt packet never hides the next good one; what was
    dropped is counted in :attr:`rejected` with its reason in :attr:`last_problem`.
    """

    MAX_LEN = 252

    def __init__(self, backtrack: bool = True) -> None:
        self.backtrack = backtrack
        """False: on a bad checksum drop the whole claimed packet, as a simple servo parser
        does, instead of searching again from the byte after its header."""
        self._buf = bytearray()
        self.rejected = 0
        self.last_problem = ""

    def feed(self, data: bytes) -> None:
        self._buf += data

    def clear(self) -> None:
        self._buf.clear()

    @property
    def pending(self) -> int:
        """Bytes held that do not yet form a packet."""
        return len(self._buf)

    def needed(self) -> int:
        """How many more bytes the packet under construction needs (at least 1)."""
        buf = self._buf
        i = buf.find(HEADER)
        if i < 0:
            return 4
        rest = len(buf) - i
        if rest < 4:
            return 4 - rest
        return max(1, 4 + buf[i + 3] - rest)

    def _reject(self, start: int, why: str) -> None:
        self.rejected += 1
        self.last_problem = why
        del self._buf[: start + 1]

    def next(self) -> Packet | None:
        buf = self._buf
        while True:
            i = buf.find(HEADER)
            if i < 0:
                # keep a trailing 0xFF: it may be the first half of a header
                keep = 1 if buf[-1:] == b"\xff" else 0
                del buf[: len(buf) - keep]
                return None
            if i:
                del buf[:i]
            # FF FF FF ...: a servo ID is never 0xFF, so the header starts one byte later
            if len(buf) >= 3 and buf[2] == 0xFF:
                del buf[:1]
                continue
            if len(buf) < 4:
                return None
            ident, length = buf[2], buf[3]
            if length < 2 or length > self.MAX_LEN:
                self._reject(0, f"impossible length {length}")
                continue
            if len(buf) < 4 + length:
                return None
            body = bytes(buf[2 : 4 + length - 1])
            if checksum(body) != buf[4 + length - 1]:
                self._reject(0 if self.backtrack else 4 + length - 1, f"bad checksum from ID {ident}")
                continue
            del buf[: 4 + length]
            return Packet(ident, body[2], body[3:])
