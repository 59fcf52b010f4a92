"""The backends that ship with core: ``cpu``, ``cuda`` and ``auto`` (cuda when available)."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

import torch

from noeira.core.errors import UserError

__all__ = ["CpuBackend", "CudaBackend", "TorchBackend", "auto_backend"]


class TorchBackend:
    """A backend for one torch device type; subclasses set ``name`` and ``device``.

    ``rank`` and ``world_size`` place this process among those training together (0 and 1
    alone; the driver's distributed launch sets them), so seeds can be offset by rank and
    only rank 0 writes the run directory."""

    name = "torch"
    supports_graphs = False

    def __init__(self, device: torch.device | str, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise UserError(f"backend: rank {rank} is not in [0, world_size={world_size})")
        self.device = torch.device(device)
        self.rank, self.world_size = rank, world_size
        self.generators: list[torch.Generator] = []

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the process that writes the run directory."""
        return self.rank == 0

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

    def __init__(self, index: int | None = None, rank: int = 0, world_size: int = 1) -> None:
        super().__init__("cpu", rank, world_size)  # one CPU device: the index is ignored


class CudaBackend(TorchBackend):
    """Tensors on the current CUDA device; CUDA graphs can be recorded."""

    name = "cuda"
    supports_graphs = True

    def __init__(self, index: int | None = None, rank: int = 0, world_size: int = 1) -> None:
        available = torch.cuda.is_available()
        if index is None:
            index = torch.cuda.current_device() if available else 0
        super().__init__(torch.device("cuda", index), rank, world_size)

    def is_available(self) -> bool:
        return torch.cuda.is_available() and self.device.index < torch.cuda.device_count()

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


def auto_backend(index: int | None = None, rank: int = 0, world_size: int = 1) -> TorchBackend:
    """``cuda`` when a CUDA device is available, else ``cpu``."""
    cuda = CudaBackend(index, rank, world_size)
    return cuda if cuda.is_available() else CpuBackend(index, rank, world_size)
