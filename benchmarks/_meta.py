"""What the benchmark scripts record about the tree they ran from (imported by them: they run as
``python benchmarks/NAME.py``, which puts this folder on ``sys.path``)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def commit() -> str:
    """The short hash of the checkout's HEAD, or ``unknown`` outside a git checkout. (A copy of
    the working tree made elsewhere may carry older git metadata than its files: say which tree
    ran when that matters.)"""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              timeout=10, cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
