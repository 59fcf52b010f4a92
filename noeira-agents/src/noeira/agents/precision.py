"""Numeric precision of the networks (``agent.precision``), one place for every agent.

- ``fp32``: everything in float32 (the default).
- ``bf16``: forward passes under ``torch.autocast(dtype=bfloat16)``; parameters, gradients,
  optimizer state, losses, advantages and returns stay float32.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from noeira.core.errors import ConfigError

__all__ = ["PRECISIONS", "autocast", "check_precision"]

PRECISIONS = ("fp32", "bf16")


def check_precision(value: str, path: str = "agent.precision") -> str:
    """``value`` if it names a precision, else a :class:`ConfigError` at ``path``."""
    if value not in PRECISIONS:
        raise ConfigError(f"{path}: expected one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """The context the forward passes run in for ``precision`` on ``device``."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
