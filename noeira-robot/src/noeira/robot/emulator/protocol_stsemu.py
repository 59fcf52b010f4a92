"""pyserial URL handler ``stsemu://NAME``: a port wired to the in-process emulated bus
registered as NAME (:func:`noeira.robot.emulator.register`). Replies are ready as soon as
the host has written; a read that finds too few bytes waits out the timeout, as a real port
would (nothing else can arrive), then returns what there is."""

from __future__ import annotations

import time
import urllib.parse

from serial.serialutil import PortNotOpenError, SerialBase, SerialException

from noeira.robot.emulator import EmulatedBus, lookup


class Serial(SerialBase):
    """A pyserial port backed by an :class:`EmulatedBus`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._emu: EmulatedBus | None = None
        self._rx = bytearray()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def open(self) -> None:
        if self.is_open:
            raise SerialException("Port is already open.")
        if self._port is None:
            raise SerialException("Port must be configured before it can be used.")
        parts = urllib.parse.urlsplit(self._port)
        if parts.scheme != "stsemu":
            raise SerialException(f"expected a URL stsemu://NAME, got {self._port!r}")
        try:
            self._emu = lookup(parts.netloc or parts.path.lstrip("/"))
        except ValueError as err:
            raise SerialException(str(err)) from None
        self.is_open = True

    def close(self) -> None:
        self.is_open = False
        self._emu = None

    def _reconfigure_port(self) -> None:
        pass

    def from_url(self, url: str) -> str:
        return url

    @property
    def in_waiting(self) -> int:
        return len(self._rx)

    def read(self, size: int = 1) -> bytes:
        if not self.is_open:
            raise PortNotOpenError()
        if len(self._rx) < size and self._timeout:
            time.sleep(self._timeout)
        data = bytes(self._rx[:size])
        del self._rx[:size]
        return data

    def write(self, data: bytes) -> int:
        if not self.is_open or self._emu is None:
            raise PortNotOpenError()
        self._rx += self._emu.handle(bytes(data))
        return len(data)

    def reset_input_buffer(self) -> None:
        self._rx.clear()

    def reset_output_buffer(self) -> None:
        pass

    def flush(self) -> None:
        pass
