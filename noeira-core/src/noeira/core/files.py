"""Small file helpers shared by run directories and datasets (no heavy imports: the dataset
module stays light)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write"]


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """``write(tmp)`` into a temporary file beside ``path`` (its folder made if missing), then
    rename it over ``path``: a reader, or a crash, sees the old file or the new one, never half
    of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
