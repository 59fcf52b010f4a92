"""Torque off on every way out of the process.

Drivers with a live bus register here while connected. On interpreter exit (``atexit``),
SIGINT and SIGTERM every registered driver releases torque first; then the previous handler
runs (chained: Python's KeyboardInterrupt for SIGINT, the default action for SIGTERM, which
ends the process with the signal, or whatever handler was installed before us).
Exceptions are covered by the drivers' context managers and ``disconnect``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import weakref
from types import FrameType
from typing import Any, Protocol

__all__ = ["install_handlers", "register", "release_all", "unregister"]


class _Releasable(Protocol):
    def emergency_release(self) -> None: ...


_drivers: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
_previous: dict[int, Any] = {}
_installed = False
_atexit = False
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def release_all() -> None:
    """Release torque on every registered driver, best effort (never raises)."""
    for driver in list(_drivers):
        with contextlib.suppress(Exception):
            driver.emergency_release()


def _handler(signum: int, frame: FrameType | None) -> None:
    release_all()
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        # die the way the signal would have killed us, with our handler out of the way
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    # SIG_IGN: the process chose to ignore it; torque is off, carry on


def install_handlers() -> bool:
    """Register the atexit hook and install the SIGINT/SIGTERM handlers (once). Signal
    handlers can only be installed from the main thread; returns whether they are."""
    global _installed, _atexit
    with _lock:
        if not _atexit:
            atexit.register(release_all)
            _atexit = True
        if _installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False  # tried again on the next register() from the main thread
        for sig in SIGNALS:
            prev = signal.getsignal(sig)
            if prev is _handler:
                continue
            _previous[sig] = prev if prev is not None else signal.SIG_DFL
            signal.signal(sig, _handler)
        _installed = True
        return True


def uninstall_handlers() -> None:
    """Put the previous handlers back (tests)."""
    global _installed, _atexit
    with _lock:
        for sig, prev in _previous.items():
            if signal.getsignal(sig) is _handler:
                signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        _previous.clear()
        atexit.unregister(release_all)
        _installed = _atexit = False


def register(driver: _Releasable) -> None:
    install_handlers()
    _drivers.add(driver)


def unregister(driver: _Releasable) -> None:
    _drivers.discard(driver)


def registered() -> list[Any]:
    return list(_drivers)

