"""An emulated bus of Feetech STS3215 servos, for tests and demos without hardware.

Each :class:`EmulatedServo` holds a register file: the EEPROM area (below address 40) has a
live copy and a saved copy (written only while Lock = 0, restored by :meth:`power_cycle`),
the RAM area is reset on power-up. While torque is on, the present position moves toward
the goal by ``speed`` ticks per instruction the bus handles (deterministic, no clock).

:class:`EmulatedBus` answers instruction packets like the servos on one wire (PING, READ,
WRITE, REG_WRITE, ACTION, SYNC_READ, SYNC_WRITE, broadcast) and records every packet it
received in :attr:`EmulatedBus.log`, so tests can check what a driver *wrote*. Faults can be
injected: dropped replies (timeouts), bad checksums, truncated packets, noise, error bits,
missing servos.

Two ways to put it behind a pyserial port:

- :class:`PtyEmulator`: a pseudo-terminal served by a thread (``os.openpty``); drivers and
  subprocesses open ``emu.port`` like a real device.
- the URL ``stsemu://NAME`` after :func:`register` (in-process, no thread).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from noeira.robot.protocol import (
    BROADCAST_ID,
    EEPROM_END,
    REGISTERS,
    STS3215_MODEL,
    Instr,
    Packet,
    PacketReader,
    decode_value,
    encode_value,
    status_packet,
)

__all__ = ["EmulatedBus", "EmulatedServo", "PtyEmulator", "Write", "register", "unregister"]

MEMORY = 86


class EmulatedServo:
    """One STS3215: a register file with EEPROM/RAM areas and a simple position servo.

    ``speed``: ticks the present position moves toward the goal per handled instruction
    while torque is on. ``goal_enables_torque``: a Goal_Position write switches torque on, as
    some Feetech firmware does; so a driver that writes goals while disarmed is caught.
    """

    def __init__(self, ident: int, *, position: int = 2048, model: int = STS3215_MODEL, speed: int = 64,
                 goal_enables_torque: bool = True) -> None:
        self.mem = bytearray(MEMORY)
        self.speed = speed
        self.goal_enables_torque = goal_enables_torque
        self.error_bits = 0
        """Sent in the error byte of every status packet (fault injection)."""
        self.reply_as: int | None = None
        """Sign status packets with this ID instead of the servo's own (fault injection)."""
        self.position_script: deque[int] = deque()
        """Positions (in the offset frame) that successive reads of Present_Position return,
        as if a hand moved the joint; consumed one per read."""
        self.actual = position  # the shaft, in encoder ticks without homing offset
        self._staged: tuple[int, bytes] | None = None
        for name, value in (("Model_Number", model), ("ID", ident), ("Baud_Rate", 0), ("Return_Delay_Time", 250),
                            ("Response_Status_Level", 1), ("Min_Position_Limit", 0), ("Max_Position_Limit", 4095),
                            ("Max_Temperature_Limit", 70), ("Max_Voltage_Limit", 140), ("Min_Voltage_Limit", 40),
                            ("Max_Torque_Limit", 1000), ("P_Coefficient", 32), ("D_Coefficient", 32),
                            ("I_Coefficient", 0), ("Protection_Current", 500), ("Homing_Offset", 0),
                            ("Operating_Mode", 0), ("Overload_Torque", 80)):
            self.set(name, value)
        self.saved_eeprom = bytes(self.mem[:EEPROM_END])
        self._power_up()

    # registers by name ---------------------------------------------------------------------
    def get(self, name: str) -> int:
        r = REGISTERS[name]
        if name == "Present_Position":
            return self.present
        return decode_value(bytes(self.mem[r.addr : r.addr + r.size]), r.sign_bit)

    def set(self, name: str, value: int) -> None:
        r = REGISTERS[name]
        self.mem[r.addr : r.addr + r.size] = encode_value(value, r.size, r.sign_bit)

    @property
    def ident(self) -> int:
        return self.mem[5]

    @property
    def torque(self) -> bool:
        return bool(self.mem[40])

    @property
    def present(self) -> int:
        """Present_Position: the shaft in the frame of Homing_Offset, in 0..4095."""
        return (self.actual - self.get("Homing_Offset")) % 4096

    def set_present(self, value: int) -> None:
        """Move the shaft so that Present_Position reads ``value`` (a hand moving the joint)."""
        self.actual = (value + self.get("Homing_Offset")) % 4096
        self._sync_present()

    def _sync_present(self) -> None:
        self.mem[56:58] = encode_value(self.present, 2, 15)

    def _power_up(self) -> None:
        self.mem[EEPROM_END:] = bytes(MEMORY - EEPROM_END)
        self.set("Lock", 1)
        self.set("Goal_Position", self.present)
        self.set("Present_Voltage", 120)
        self.set("Present_Temperature", 30)
        self._sync_present()

    def power_cycle(self) -> None:
        """Power off and on: EEPROM from its saved copy, RAM reset, torque off."""
        self.mem[:EEPROM_END] = self.saved_eeprom
        self._power_up()

    # bus side --------------------------------------------------------------------------------
    def read_mem(self, addr: int, size: int) -> bytes:
        if self.position_script and addr <= 56 < addr + size:
            self.set_present(self.position_script.popleft())
        self._sync_present()
        return bytes(self.mem[addr : addr + size])

    def write_mem(self, addr: int, data: bytes) -> None:
        for i, byte in enumerate(data):
            a = addr + i
            if a < 5 or a >= MEMORY or a in (56, 57, 58, 59, 60, 61, 62, 63, 65, 66, 69, 70):
                continue  # read-only
            self.mem[a] = byte
            if a < EEPROM_END and self.mem[55] == 0:
                saved = bytearray(self.saved_eeprom)
                saved[a] = byte
                self.saved_eeprom = bytes(saved)
        if self.goal_enables_torque and addr <= 42 < addr + len(data):
            self.mem[40] = 1
        if addr <= 40 < addr + len(data) and self.mem[40] == 0:
            self.set("Present_Load", 0)

    def stage(self, addr: int, data: bytes) -> None:
        self._staged = (addr, data)

    def act(self) -> None:
        if self._staged is not None:
            self.write_mem(*self._staged)
            self._staged = None

    def tick(self) -> None:
        """One instruction's worth of motion toward the goal while torque is on."""
        if not self.torque:
            self.set("Moving", 0)
            return
        lo, hi = self.get("Min_Position_Limit"), self.get("Max_Position_Limit")
        goal = min(max(self.get("Goal_Position"), lo), hi) if hi > lo else self.get("Goal_Position")
        here = self.present
        step = max(-self.speed, min(self.speed, goal - here))
        if step:
            self.set_present(here + step)
        self.set("Moving", int(step != 0))
        self.set("Present_Load", max(-1000, min(1000, 4 * step)))


class Write(NamedTuple):
    """One register write a servo received: by which instruction, to whom, where, what."""

    instr: str
    ident: int
    addr: int
    data: bytes

    def value(self, name: str) -> int | None:
        """The value this write gave register ``name``, or None if it did not touch it."""
        r = REGISTERS[name]
        if self.addr <= r.addr and r.addr + r.size <= self.addr + len(self.data):
            off = r.addr - self.addr
            return decode_value(self.data[off : off + r.size], r.sign_bit)
        return None


class EmulatedBus:
    """Servos on one wire. :meth:`handle` takes bytes from the host and returns the bytes
    the servos send back."""

    def __init__(self, servos: Iterable[EmulatedServo] = (), *, baud_index: int = 0) -> None:
        self.servos: dict[int, EmulatedServo] = {}
        for s in servos:
            self.add(s)
        self.baud_index = baud_index
        """The bus speed (a Baud_Rate register value): servos set to another one stay silent."""
        self.log: list[Packet] = []
        """Every valid instruction packet received, in order."""
        self.reader = PacketReader()
        self.lock = threading.RLock()
        self.drop_replies = 0
        """Fault: swallow this many upcoming status packets (the host times out)."""
        self.corrupt_replies = 0
        """Fault: flip the checksum of this many upcoming status packets."""
        self.truncate_replies = 0
        """Fault: send only the first half of this many upcoming status packets."""
        self.noise_before_reply = b""
        """Fault: bytes sent before the next status packet (once)."""
        self.fault_ids: set[int] | None = None
        """Restrict the counted faults above to these IDs (None: any)."""

    @classmethod
    def so101(cls, positions: Iterable[int] | None = None, **kw: object) -> EmulatedBus:
        """Six STS3215 on IDs 1-6, as in an SO-101 arm."""
        pos = list(positions) if positions is not None else [2048] * 6
        return cls(EmulatedServo(i + 1, position=p, **kw) for i, p in enumerate(pos))  # type: ignore[arg-type]

    def add(self, servo: EmulatedServo) -> None:
        self.servos[servo.ident] = servo

    def remove(self, ident: int) -> EmulatedServo:
        return self.servos.pop(ident)

    def __getitem__(self, ident: int) -> EmulatedServo:
        return self.servos[ident]

    # what the host did ------------------------------------------------------------------------
    def writes(self, name: str | None = None) -> list[Write]:
        """Every register write received (WRITE, REG_WRITE, SYNC_WRITE, broadcast ones
        included), optionally only those touching register ``name``."""
        out = []
        for p in self.log:
            if p.code in (Instr.WRITE, Instr.REG_WRITE) and p.params:
                out.append(Write(_INSTR[p.code], p.ident, p.params[0], bytes(p.params[1:])))
            elif p.code == Instr.SYNC_WRITE and len(p.params) >= 2:
                addr, size = p.params[0], p.params[1]
                body = p.params[2:]
                for k in range(0, len(body) - size, size + 1):
                    out.append(Write("SYNC_WRITE", body[k], addr, bytes(body[k + 1 : k + 1 + size])))
        if name is not None:
            out = [w for w in out if w.value(name) is not None]
        return out

    def instructions(self, code: int) -> list[Packet]:
        return [p for p in self.log if p.code == code]

    def clear_log(self) -> None:
        self.log.clear()

    # the wire -----------------------------------------------------------------------------------
    def _targets(self, ident: int) -> list[EmulatedServo]:
        live = [s for s in self.servos.values() if s.get("Baud_Rate") == self.baud_index]
        if ident == BROADCAST_ID:
            return sorted(live, key=lambda s: s.ident)
        return [s for s in live if s.ident == ident]

    def _reply(self, servo: EmulatedServo, data: bytes = b"") -> bytes:
        packet = status_packet(servo.ident if servo.reply_as is None else servo.reply_as, servo.error_bits, data)
        faulty = self.fault_ids is None or servo.ident in self.fault_ids
        if faulty and self.drop_replies:
            self.drop_replies -= 1
            return b""
        if faulty and self.corrupt_replies:
            self.corrupt_replies -= 1
            packet = packet[:-1] + bytes(((packet[-1] + 1) & 0xFF,))
        elif faulty and self.truncate_replies:
            self.truncate_replies -= 1
            packet = packet[: len(packet) // 2]
        noise, self.noise_before_reply = self.noise_before_reply, b""
        return noise + packet

    def _execute(self, p: Packet) -> bytes:
        out = bytearray()
        targets = self._targets(p.ident)
        answer = p.ident != BROADCAST_ID
        if p.code == Instr.PING:
            for s in targets:  # broadcast PING is answered by everyone
                out += self._reply(s)
        elif p.code == Instr.READ and len(p.params) == 2:
            for s in targets if answer else ():
                out += self._reply(s, s.read_mem(p.params[0], p.params[1]))
        elif p.code in (Instr.WRITE, Instr.REG_WRITE) and p.params:
            for s in targets:
                if p.code == Instr.WRITE:
                    s.write_mem(p.params[0], bytes(p.params[1:]))
                else:
                    s.stage(p.params[0], bytes(p.params[1:]))
                if answer and s.get("Response_Status_Level"):
                    out += self._reply(s)
            if p.code == Instr.WRITE and p.params[0] == 5 and answer and targets:
                self.servos = {s.ident: s for s in self.servos.values()}  # an ID changed
        elif p.code == Instr.ACTION:
            for s in targets:
                s.act()
                if answer and s.get("Response_Status_Level"):
                    out += self._reply(s)
        elif p.code == Instr.SYNC_READ and len(p.params) >= 2:
            addr, size = p.params[0], p.params[1]
            for ident in p.params[2:]:
                for s in self._targets(ident):
                    out += self._reply(s, s.read_mem(addr, size))
        elif p.code == Instr.SYNC_WRITE and len(p.params) >= 2:
            addr, size = p.params[0], p.params[1]
            body = p.params[2:]
            for k in range(0, len(body) - size, size + 1):
                for s in self._targets(body[k]):
                    s.write_mem(addr, bytes(body[k + 1 : k + 1 + size]))
        return bytes(out)

    def handle(self, data: bytes) -> bytes:
        """Bytes from the host in, bytes from the servos out. Corrupt instruction packets are
        ignored, as a servo does."""
        out = bytearray()
        with self.lock:
            self.reader.feed(data)
            while (p := self.reader.next()) is not None:
                self.log.append(p)
                out += self._execute(p)
                for s in self.servos.values():
                    s.tick()
        return bytes(out)


_INSTR = {Instr.WRITE: "WRITE", Instr.REG_WRITE: "REG_WRITE"}


class PtyEmulator:
    """Serve an :class:`EmulatedBus` on a pseudo-terminal: open :attr:`port` with pyserial
    (or hand it to a subprocess). Use as a context manager or call :meth:`close`."""

    def __init__(self, bus: EmulatedBus | None = None) -> None:
        import tty

        self.bus = bus if bus is not None else EmulatedBus.so101()
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line editing: a byte pipe like a USB adapter
        self.port = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"sts-emulator {self.port}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.02)
            if not ready:
                continue
            try:
                data = os.read(self._master, 4096)
            except OSError:
                return
            reply = self.bus.handle(data)
            if reply:
                os.write(self._master, reply)

    def idle(self) -> bool:
        """No bytes from the host are waiting to be handled."""
        ready, _, _ = select.select([self._master], [], [], 0)
        return not ready

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for fd in (self._master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> PtyEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- pyserial URL handler: stsemu://NAME --------------------------------------------------------

_REGISTRY: dict[str, EmulatedBus] = {}


def register(name: str, bus: EmulatedBus) -> str:
    """Make ``bus`` reachable as the pyserial URL ``stsemu://NAME`` (returned)."""
    import serial

    if "noeira.robot.emulator" not in serial.protocol_handler_packages:
        serial.protocol_handler_packages.append("noeira.robot.emulator")
    _REGISTRY[name] = bus
    return f"stsemu://{name}"


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def lookup(name: str) -> EmulatedBus:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"no emulated bus registered as {name!r}") from None

