"""Batched spaces.

A space describes what **one** environment takes or gives; batched tensors carry a leading
``[num_envs]`` dimension in front of ``space.shape``. This is gymnasium's
``single_observation_space``, with bounds held as tensors on the env's device so checks and
sampling never leave it.

- ``Box(low, high)``: float tensors of ``shape``; a batch is ``[num_envs, *shape]``.
- ``Discrete(n)``: int64 in ``[start, start + n)``; a batch is ``[num_envs]``.
- ``MultiDiscrete(nvec)``: int64, component ``i`` in ``[0, nvec[i])``; a batch is
  ``[num_envs, len(nvec)]``.
- ``Encoded(shape, dtype, decoded, decode)``: observations held in a compact code (bytes of
  ids and flags, ``[num_envs, *shape]``) that ``decode`` turns into the float observations
  ``decoded`` (a ``Box``) describes; policies read ``decode(obs)``. For observations that are
  large and mostly one-hot: the code is what moves through memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["Box", "Discrete", "Encoded", "MultiDiscrete", "Space"]


class Box:
    """A box in R^shape, bounds as tensors (``-inf``/``inf`` allowed)."""

    def __init__(
        self,
        low: Tensor | float | Sequence[float],
        high: Tensor | float | Sequence[float],
        shape: Sequence[int] | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        low_t = torch.as_tensor(low, dtype=dtype, device=device)
        high_t = torch.as_tensor(high, dtype=dtype, device=device)
        if shape is not None:
            low_t = low_t.expand(tuple(shape)).clone()
            high_t = high_t.expand(tuple(shape)).clone()
        if low_t.shape != high_t.shape:
            raise ValueError(f"Box: low shape {tuple(low_t.shape)} != high shape {tuple(high_t.shape)}")
        if bool((low_t > high_t).any()):
            raise ValueError("Box: low must be <= high everywhere")
        self.low, self.high, self.dtype = low_t, high_t, dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.low.shape)

    @property
    def device(self) -> torch.device:
        return self.low.device

    @property
    def bounded(self) -> bool:
        return bool(torch.isfinite(self.low).all() and torch.isfinite(self.high).all())

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> Box:
        return Box(self.low.to(device), self.high.to(device), dtype=dtype or self.dtype, device=device)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` uniform samples ``[n, *shape]`` (unbounded sides use a unit normal)."""
        u = torch.rand((n, *self.shape), generator=generator, device=self.device, dtype=self.dtype)
        low = torch.where(torch.isfinite(self.low), self.low, torch.zeros_like(self.low))
        high = torch.where(torch.isfinite(self.high), self.high, torch.ones_like(self.high))
        x = low + u * (high - low)
        if not self.bounded:
            z = torch.randn((n, *self.shape), generator=generator, device=self.device, dtype=self.dtype)
            x = torch.where(torch.isfinite(self.low) & torch.isfinite(self.high), x, z)
        return x

    def contains(self, x: Tensor) -> bool:
        """Whether a batch ``[n, *shape]`` lies inside (shape, dtype kind and bounds)."""
        return (
            isinstance(x, Tensor)
            and x.is_floating_point()
            and tuple(x.shape[1:]) == self.shape
            and bool(((x >= self.low) & (x <= self.high)).all())
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and self.shape == other.shape
            and torch.equal(self.low.cpu(), other.low.cpu())
            and torch.equal(self.high.cpu(), other.high.cpu())
        )

    def __repr__(self) -> str:
        return f"Box(shape={self.shape}, dtype={self.dtype}, device={self.device})"


class Discrete:
    """``n`` choices ``start .. start + n - 1``."""

    def __init__(self, n: int, start: int = 0, device: torch.device | str = "cpu") -> None:
        if n < 1:
            raise ValueError(f"Discrete: n must be >= 1, got {n}")
        self.n, self.start, self.device = int(n), int(start), torch.device(device)
        self.dtype = torch.int64

    shape: tuple[int, ...] = ()

    def to(self, device: torch.device | str) -> Discrete:
        return Discrete(self.n, self.start, device)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        return torch.randint(self.start, self.start + self.n, (n,), generator=generator, device=self.device)

    def contains(self, x: Tensor) -> bool:
        return (
            isinstance(x, Tensor)
            and not x.is_floating_point()
            and x.dim() == 1
            and bool(((x >= self.start) & (x < self.start + self.n)).all())
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Discrete) and (self.n, self.start) == (other.n, other.start)

    def __repr__(self) -> str:
        return f"Discrete({self.n}" + (f", start={self.start})" if self.start else ")")


class MultiDiscrete:
    """Several discrete choices; component ``i`` takes ``0 .. nvec[i] - 1``."""

    def __init__(self, nvec: Sequence[int] | Tensor, device: torch.device | str = "cpu") -> None:
        self.nvec = torch.as_tensor(nvec, dtype=torch.int64, device=device).flatten()
        if self.nvec.numel() == 0 or bool((self.nvec < 1).any()):
            raise ValueError(f"MultiDiscrete: every entry of nvec must be >= 1, got {self.nvec.tolist()}")
        self.device, self.dtype = self.nvec.device, torch.int64

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.nvec.numel()),)

    def to(self, device: torch.device | str) -> MultiDiscrete:
        return MultiDiscrete(self.nvec, device)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        u = torch.rand((n, *self.shape), generator=generator, device=self.device)
        return (u * self.nvec).long().clamp_max(self.nvec - 1)

    def contains(self, x: Tensor) -> bool:
        return (
            isinstance(x, Tensor)
            and not x.is_floating_point()
            and tuple(x.shape[1:]) == self.shape
            and bool(((x >= 0) & (x < self.nvec)).all())
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultiDiscrete) and torch.equal(self.nvec.cpu(), other.nvec.cpu())

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec.tolist()})"


class Encoded:
    """Observations stored as a compact code of ``shape`` and integer ``dtype`` (one env's),
    and ``decode``, which maps a batch of codes ``[..., *shape]`` to the float observations
    ``[..., *decoded.shape]`` that ``decoded`` describes, on the codes' device. ``decode`` must
    be a pure tensor function (no host sync: agents call it inside recorded steps).

    Optional ``decode_into(code, out)``: the same observations of codes ``[B, *shape]`` written
    into the first ``prod(decoded.shape)`` columns of ``out [B, W]`` (a float tensor of any dtype,
    each value ``decode``'s cast to it; the other columns untouched), so a network's first layer
    can read them in its own dtype and width without an intermediate float32 copy."""

    def __init__(self, shape: Sequence[int], dtype: torch.dtype, decoded: Box, decode: Callable[[Tensor], Tensor],
                 device: torch.device | str = "cpu",
                 decode_into: Callable[[Tensor, Tensor], None] | None = None) -> None:
        if dtype.is_floating_point:
            raise ValueError(f"Encoded: the code's dtype must be an integer type, got {dtype}")
        self.shape, self.dtype, self.decoded, self.decode = tuple(shape), dtype, decoded, decode
        self.decode_into = decode_into
        self.device = torch.device(device)

    def to(self, device: torch.device | str) -> Encoded:
        return Encoded(self.shape, self.dtype, self.decoded.to(device), self.decode, device, self.decode_into)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` random codes ``[n, *shape]`` (uniform bytes: not every code is a valid observation)."""
        info = torch.iinfo(self.dtype)
        return torch.randint(info.min, info.max + 1, (n, *self.shape), generator=generator, device=self.device,
                             dtype=self.dtype)

    def contains(self, x: Tensor) -> bool:
        """Whether a batch ``[n, *shape]`` has the code's shape and dtype."""
        return isinstance(x, Tensor) and x.dtype == self.dtype and tuple(x.shape[1:]) == self.shape

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Encoded) and (self.shape, self.dtype) == (other.shape, other.dtype)
                and self.decoded == other.decoded and self.decode is other.decode)

    def __repr__(self) -> str:
        return f"Encoded(shape={self.shape}, dtype={self.dtype}, decoded={self.decoded!r})"


Space = Box | Discrete | MultiDiscrete | Encoded
