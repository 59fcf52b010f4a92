"""A Feetech SCS/STS bus over any port pyserial opens: a device path, a pty, or a URL
(``loop://``, ``socket://``, ``stsemu://`` for the in-process emulator).

Every transaction is: drop stale input, send one instruction packet, frame the status
packet(s) it asks for with resync, validate checksum, ID and length, retry on a missing or
corrupt reply. A read that fails after its retries raises :class:`BusError`; it never
returns a made-up value. Status packets with error bits raise :class:`MotorError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from noeira.robot.errors import BusError, MotorError
from noeira.robot.protocol import (
    BROADCAST_ID,
    MAX_ID,
    MODEL_NAMES,
    REGISTERS,
    Instr,
    Packet,
    PacketReader,
    Register,
    decode_error,
    decode_value,
    encode_value,
    instruction_packet,
    sync_read_params,
    sync_write_params,
)

__all__ = ["FeetechBus", "reg"]


def reg(name_or_reg: str | Register) -> Register:
    """The :class:`Register` called ``name`` in the STS3215 table."""
    if isinstance(name_or_reg, Register):
        return name_or_reg
    try:
        return REGISTERS[name_or_reg]
    except KeyError:
        raise KeyError(f"unknown register {name_or_reg!r}; known: {', '.join(REGISTERS)}") from None


class FeetechBus:
    """One serial bus of Feetech STS servos.

    Args:
        port: a serial device (``/dev/ttyACM0``, ``COM3``, a pty path) or a pyserial URL.
        baudrate: bits per second (STS3215 default 1 000 000).
        timeout: seconds to wait for one status packet (a SYNC_READ gets this per servo).
        retries: extra attempts after a missing or corrupt status packet.

    Thread-safe: a re-entrant lock serialises transactions, so a signal handler running on
    the main thread can still release torque in the middle of one (see :meth:`release_torque`).
    """

    def __init__(self, port: str, *, baudrate: int = 1_000_000, timeout: float = 0.1, retries: int = 2) -> None:
        import serial  # pyserial, imported here so the CLI hook module stays light

        self.port_name = port
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.lock = threading.RLock()
        """Held during every transaction; re-entrant. Hold it to make several calls atomic."""
        self._reader = PacketReader()
        try:
            self._ser = serial.serial_for_url(port, baudrate=baudrate, timeout=self.timeout, write_timeout=1.0)
        except (serial.SerialException, ValueError, OSError) as err:
            raise BusError(f"cannot open serial port {port!r}: {err}") from err
        self.stats = {"sent": 0, "retries": 0, "rejected": 0}
        """Packets sent, retried transactions and rejected (corrupt) packets."""

    # -- plumbing -------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return bool(getattr(self._ser, "is_open", False))

    def close(self) -> None:
        with self.lock:
            if self.is_open:
                self._ser.close()

    def __enter__(self) -> FeetechBus:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _send(self, ident: int, instr: int, params: bytes) -> None:
        packet = instruction_packet(ident, instr, params)
        try:
            self._ser.reset_input_buffer()
            self._ser.write(packet)
            self._ser.flush()
        except Exception as err:  # pyserial raises SerialException / OSError / PortNotOpenError
            raise BusError(f"{self.port_name}: write failed: {err}") from err
        self._reader.clear()
        self.stats["sent"] += 1

    def _receive(self, ident: int, data_len: int, deadline: float, also: int | None = None) -> Packet:
        """The next valid status packet from ``ident`` (or ``also``) carrying ``data_len`` bytes."""
        problem = "no status packet"
        rejected0 = self._reader.rejected
        while True:
            packet = self._reader.next()
            if packet is not None:
                if packet.ident != ident and packet.ident != also:
                    problem = f"status packet from ID {packet.ident} instead of {ident}"
                    continue
                if len(packet.params) != data_len:
                    problem = f"status packet with {len(packet.params)} data bytes instead of {data_len}"
                    continue
                return packet
            if self._reader.rejected != rejected0:
                problem = self._reader.last_problem
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._reader.pending and problem == "no status packet":
                    problem = f"truncated status packet ({self._reader.pending} bytes)"
                raise BusError(f"servo {ident}: {problem} within {self.timeout * 1000:.0f} ms on {self.port_name}")
            try:
                self._ser.timeout = remaining
                chunk = self._ser.read(self._reader.needed())
            except Exception as err:
                raise BusError(f"{self.port_name}: read failed: {err}") from err
            self.stats["rejected"] = self._reader.rejected
            self._reader.feed(chunk)

    def _check(self, packet: Packet) -> Packet:
        if packet.code:
            names = ", ".join(decode_error(packet.code))
            raise MotorError(f"servo {packet.ident} reports error: {names} (0x{packet.code:02x})", packet.ident, packet.code)
        return packet

    def _transact(self, ident: int, instr: int, params: bytes, data_len: int, also: int | None = None) -> Packet:
        """Send and wait for one status packet, retrying on BusError."""
        with self.lock:
            for attempt in range(self.retries + 1):
                self._send(ident, instr, params)
                try:
                    return self._check(self._receive(ident, data_len, time.monotonic() + self.timeout, also))
                except BusError as err:
                    if attempt == self.retries:
                        raise BusError(f"{err} ({attempt + 1} attempts)") from None
                    self.stats["retries"] += 1
            raise AssertionError("unreachable")

    # -- instructions ---------------------------------------------------------------------

    def ping(self, ident: int) -> bool:
        """Whether servo ``ident`` answers a PING (motor error bits count as an answer)."""
        try:
            self._transact(ident, Instr.PING, b"", 0)
        except MotorError:
            return True
        except BusError:
            return False
        return True

    def broadcast_ping(self, timeout: float | None = None) -> list[int]:
        """IDs that answer a broadcast PING within ``timeout``. Meant for a bus with one
        servo (setup); several servos may answer on top of each other."""
        with self.lock:
            self._send(BROADCAST_ID, Instr.PING, b"")
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
            found: list[int] = []
            while time.monotonic() < deadline:
                self._ser.timeout = max(0.0, deadline - time.monotonic())
                self._reader.feed(self._ser.read(self._reader.needed()))
                while (packet := self._reader.next()) is not None:
                    if not packet.params and packet.ident not in found:
                        found.append(packet.ident)
            return found

    def read_bytes(self, ident: int, addr: int, size: int) -> bytes:
        """``size`` bytes of servo ``ident``'s memory from ``addr``."""
        return self._transact(ident, Instr.READ, bytes((addr, size)), size).params

    def read(self, ident: int, register: str | Register) -> int:
        """The decoded value of ``register`` on servo ``ident``."""
        r = reg(register)
        return decode_value(self.read_bytes(ident, r.addr, r.size), r.sign_bit)

    def write_bytes(self, ident: int, addr: int, data: bytes) -> None:
        """WRITE ``data`` at ``addr``; waits for the status packet unless broadcast."""
        params = bytes((addr,)) + bytes(data)
        if ident == BROADCAST_ID:
            with self.lock:
                self._send(ident, Instr.WRITE, params)
        else:
            self._transact(ident, Instr.WRITE, params, 0)

    def write(self, ident: int, register: str | Register, value: int) -> None:
        """WRITE ``value`` to ``register`` (RAM, or the live copy of an EEPROM register:
        saved across power cycles only while Lock = 0, see :meth:`write_eeprom`)."""
        r = reg(register)
        self.write_bytes(ident, r.addr, encode_value(value, r.size, r.sign_bit))

    def write_eeprom(self, ident: int, register: str | Register, value: int) -> None:
        """Persist ``value`` in an EEPROM register: unlock (Lock = 0), write, lock again.
        Writing ``ID`` re-locks the servo under its new ID."""
        r = reg(register)
        with self.lock:
            self.write(ident, "Lock", 0)
            try:
                if r.name == "ID":  # the servo may answer under its old or its new ID
                    self._transact(ident, Instr.WRITE, bytes((r.addr,)) + encode_value(value, 1), 0, also=value)
                    ident = value
                else:
                    self.write(ident, r, value)
            finally:
                self.write(ident, "Lock", 1)

    def reg_write(self, ident: int, register: str | Register, value: int) -> None:
        """REG_WRITE: stage ``value``; it takes effect on :meth:`action`."""
        r = reg(register)
        params = bytes((r.addr,)) + encode_value(value, r.size, r.sign_bit)
        if ident == BROADCAST_ID:
            with self.lock:
                self._send(ident, Instr.REG_WRITE, params)
        else:
            self._transact(ident, Instr.REG_WRITE, params, 0)

    def action(self, ident: int = BROADCAST_ID) -> None:
        """ACTION: apply the staged REG_WRITEs (broadcast by default: no reply)."""
        if ident == BROADCAST_ID:
            with self.lock:
                self._send(ident, Instr.ACTION, b"")
        else:
            self._transact(ident, Instr.ACTION, b"", 0)

    def _receive_each(self, ids: Sequence[int], size: int) -> tuple[dict[int, Packet], str]:
        """Status packets from each of ``ids`` (any order), ``size`` data bytes each; waits
        up to the timeout for the first and again after each one that arrives."""
        got: dict[int, Packet] = {}
        pending = set(ids)
        problem = "no status packet"
        rejected0 = self._reader.rejected
        deadline = time.monotonic() + self.timeout
        while pending:
            packet = self._reader.next()
            if packet is not None:
                if packet.ident in pending and len(packet.params) == size:
                    got[packet.ident] = packet
                    pending.discard(packet.ident)
                    deadline = time.monotonic() + self.timeout
                else:
                    problem = f"unexpected status packet (ID {packet.ident}, {len(packet.params)} data bytes)"
                continue
            if self._reader.rejected != rejected0:
                problem = self._reader.last_problem
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._reader.pending and problem == "no status packet":
                    problem = f"truncated status packet ({self._reader.pending} bytes)"
                break
            try:
                self._ser.timeout = remaining
                chunk = self._ser.read(self._reader.needed())
            except Exception as err:
                raise BusError(f"{self.port_name}: read failed: {err}") from err
            self._reader.feed(chunk)
        self.stats["rejected"] = self._reader.rejected
        return got, problem

    def sync_read_bytes(self, addr: int, size: int, ids: Sequence[int], *, check: bool = True) -> dict[int, bytes]:
        """SYNC_READ: ``size`` bytes from ``addr`` of every servo in ``ids``. Servos whose
        reply is missing or corrupt are asked again (a new SYNC_READ of just those). Error
        bits raise :class:`MotorError` unless ``check`` is False."""
        ids = list(dict.fromkeys(ids))
        out: dict[int, Packet] = {}
        with self.lock:
            todo = ids
            for attempt in range(self.retries + 1):
                self._send(BROADCAST_ID, Instr.SYNC_READ, sync_read_params(addr, size, todo))
                got, problem = self._receive_each(todo, size)
                out.update(got)
                todo = [i for i in todo if i not in got]
                if not todo:
                    break
                if attempt == self.retries:
                    raise BusError(
                        f"SYNC_READ of {size} bytes at {addr}: servo(s) {todo} gave {problem} within "
                        f"{self.timeout * 1000:.0f} ms on {self.port_name} ({attempt + 1} attempts)"
                    )
                self.stats["retries"] += 1
        for i in ids if check else ():
            self._check(out[i])
        return {i: out[i].params for i in ids}

    def sync_read(self, register: str | Register, ids: Sequence[int], *, check: bool = True) -> dict[int, int]:
        """SYNC_READ of one register from every servo in ``ids``: ``{id: value}``."""
        r = reg(register)
        data = self.sync_read_bytes(r.addr, r.size, ids, check=check)
        return {i: decode_value(d, r.sign_bit) for i, d in data.items()}

    def sync_write(self, register: str | Register, values: Mapping[int, int]) -> None:
        """One SYNC_WRITE packet setting ``register`` on each servo: ``{id: value}``."""
        r = reg(register)
        data = {i: encode_value(v, r.size, r.sign_bit) for i, v in values.items()}
        with self.lock:
            self._send(BROADCAST_ID, Instr.SYNC_WRITE, sync_write_params(r.addr, r.size, data))

    def release_torque(self, ids: Iterable[int] = (), *, emergency: bool = False) -> None:
        """Torque off: a broadcast WRITE of Torque_Enable = 0 (reaches every servo, needs no
        reply), then a SYNC_WRITE of the same for ``ids``. Safe to call from a signal
        handler in the middle of another transaction (the lock is re-entrant). ``emergency``
        repeats the broadcast: if it cut into a half-sent packet, the servos' parsers swallow
        the first copies as the rest of that packet and still read a whole one after."""
        packet = instruction_packet(BROADCAST_ID, Instr.WRITE, bytes((REGISTERS["Torque_Enable"].addr, 0)))
        with self.lock:
            if emergency:
                try:
                    self._ser.write(packet * 4)
                    self._ser.flush()
                except Exception as err:
                    raise BusError(f"{self.port_name}: write failed: {err}") from err
            self.write(BROADCAST_ID, "Torque_Enable", 0)
            ids = list(ids)
            if ids:
                self.sync_write("Torque_Enable", dict.fromkeys(ids, 0))

    # -- discovery ------------------------------------------------------------------------

    def model(self, ident: int) -> int:
        """The model number (register 3) of servo ``ident``."""
        return self.read(ident, "Model_Number")

    def scan(self, ids: Iterable[int] = range(MAX_ID + 1), timeout: float | None = None) -> list[tuple[int, int, str]]:
        """``(id, model number, model name)`` for every servo in ``ids`` that answers a PING.
        Each missing ID costs ``timeout`` (default: the bus timeout), without retries."""
        found = []
        with self.lock:
            saved = self.timeout, self.retries
            self.timeout = saved[0] if timeout is None else timeout
            self.retries = 0
            try:
                for ident in ids:
                    if self.ping(ident):
                        self.timeout, self.retries = saved
                        model = self.model(ident)
                        found.append((ident, model, MODEL_NAMES.get(model, "unknown")))
                        self.timeout = saved[0] if timeout is None else timeout
                        self.retries = 0
            finally:
                self.timeout, self.retries = saved
        return found

    def __repr__(self) -> str:
        return f"FeetechBus({self.port_name!r})"

    def _raw_serial(self) -> Any:
        """The pyserial object (tests)."""
        return self._ser
