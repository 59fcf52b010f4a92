"""Fixtures of the env tests."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch


@pytest.fixture
def kernel_device() -> Callable[[str], torch.device]:
    """``kernel_device(name)``: the device a Triton kernel test runs on, skipping where it can't
    (cuda without a GPU; cpu outside Triton's interpreter, which tests/conftest.py turns on where
    there is no GPU)."""
    def choose(name: str) -> torch.device:
        if name == "cuda" and not torch.cuda.is_available():
            pytest.skip("no CUDA device")
        if name == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("Triton kernels run on a CPU only in Triton's interpreter (this process compiles them for CUDA)")
        return torch.device(name)

    return choose
