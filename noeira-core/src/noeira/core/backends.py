"""The backends that ship with core: ``cpu``, ``cuda`` and ``auto`` (cuda when available)."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

import torch

from noeira.core.errors import UserError

__all__ = ["CpuBackend", "CudaBackend", "TorchBackend", "auto_backend"]


class TorchBackend:
    """A backend for one torch device type; subclasses set ``name`` and ``device``."""

    name = "torch"
    supports_graphs = False

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.generators: list[torch.Generator] = []

    def is_available(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def generator(self, seed: int | None) -> torch.Generator:
        g = torch.Generator(device=self.device)
        if seed is None:
            g.seed()
        else:
            g.manual_seed(int(seed))
        self.generators.append(g)
        return g

    def to_device(self, x: Any) -> Any:
        if isinstance(x, Mapping):
            return {k: self.to_device(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return x.to(self.device, non_blocking=True)
        return torch.as_tensor(x, device=self.device)

    def to_host(self, x: Any) -> Any:
        if isinstance(x, Mapping):
            keys = list(x)
            if keys and all(isinstance(x[k], torch.Tensor) and x[k].numel() == 1 for k in keys):
                # one transfer for all scalars: the driver's single read per log interval
                values = torch.stack([x[k].detach().reshape(()).double() for k in keys]).cpu().tolist()
                return dict(zip(keys, values, strict=True))
            return {k: self.to_host(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return x.detach().cpu()
        return x

    def device_name(self) -> str:
        return platform.processor() or platform.machine()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device})"


class CpuBackend(TorchBackend):
    """Tensors on the CPU; graphs are not recorded."""

    name = "cpu"

    def __init__(self) -> None:
        super().__init__("cpu")


class CudaBackend(TorchBackend):
    """Tensors on the current CUDA device; CUDA graphs can be recorded."""

    name = "cuda"
    supports_graphs = True

    def __init__(self, index: int | None = None) -> None:
        available = torch.cuda.is_available()
        super().__init__(torch.device("cuda", index if index is not None else (torch.cuda.current_device() if available else 0)))

    def is_available(self) -> bool:
        return torch.cuda.is_available()

    def require(self) -> CudaBackend:
        if not self.is_available():
            raise UserError("backend 'cuda': no CUDA device is available (use backend=cpu or backend=auto)")
        return self

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def seed(self, seed: int) -> None:
        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.device) if self.is_available() else "cuda (unavailable)"


def auto_backend() -> TorchBackend:
    """``cuda`` when a CUDA device is available, else ``cpu``."""
    cuda = CudaBackend()
    return cuda if cuda.is_available() else CpuBackend()
