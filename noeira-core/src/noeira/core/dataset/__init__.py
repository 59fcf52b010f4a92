"""Datasets in the LeRobot v3 format, read and written natively (pyarrow for Parquet, PyAV for
MP4): :class:`LeRobotDataset` reads one with LeRobot's semantics, :class:`DatasetWriter` writes
one episode by episode (every saved episode readable even if the writer is killed), and
:mod:`noeira.core.dataset.record` records episodes from a simulator or a teleoperated robot.

Needs the extra ``noeira-core[data]`` (pyarrow, av); importing this package imports neither
(nor torch) until a reader or writer is made.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "LeRobotDataset": "reader", "load_info": "reader", "DatasetWriter": "writer", "DatasetError": "format",
    "CODEBASE_VERSION": "format",
}
__all__ = ["CODEBASE_VERSION", "DatasetError", "DatasetWriter", "LeRobotDataset", "load_info"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"noeira.core.dataset.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'noeira.core.dataset' has no attribute {name!r}")


if TYPE_CHECKING:
    from noeira.core.dataset.format import CODEBASE_VERSION, DatasetError
    from noeira.core.dataset.reader import LeRobotDataset, load_info
    from noeira.core.dataset.writer import DatasetWriter
