"""A small batched rasteriser in torch for the classic-control scenes.

Shapes are masks over the pixel grid, computed for every env at once (``[N, H, W]``) and
painted in order onto white frames. Coordinates are pixels with ``y`` up (the origin at the
bottom-left corner, as the scenes are usually described); :meth:`Canvas.frames` flips them
into image rows. Positions are ``[N]`` tensors (or floats), so each env draws its own state.

The scenes (in each env's ``_draw``) show what gymnasium's renderers show, at their sizes:
CartPole's cart and pole on a track, Acrobot's two links and the goal line, MountainCar's
car on the hill with the flag, Pendulum's rod and axle.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["Canvas"]

Number = float | Tensor


class Canvas:
    """``n`` white frames of ``height x width`` pixels on ``device``."""

    def __init__(self, n: int, height: int, width: int, device: torch.device) -> None:
        self.n, self.height, self.width = n, height, width
        self.img = torch.full((n, height, width, 3), 255.0, device=device)
        # pixel centres, y up: x [1, 1, W], y [1, H, 1] (row 0 is the top of the image)
        self.x = (torch.arange(width, device=device, dtype=torch.float32) + 0.5).view(1, 1, width)
        self.y = (height - 0.5 - torch.arange(height, device=device, dtype=torch.float32)).view(1, height, 1)

    def _v(self, v: Number) -> Tensor:
        """A per-env value ``[N, 1, 1]`` (a float is the same for every env)."""
        t = torch.as_tensor(v, dtype=torch.float32, device=self.img.device)
        return t.reshape(-1, 1, 1) if t.dim() else t.view(1, 1, 1)

    def paint(self, mask: Tensor, rgb: tuple[int, int, int]) -> None:
        colour = torch.tensor(rgb, dtype=torch.float32, device=self.img.device)
        self.img.copy_(torch.where(mask.unsqueeze(-1), colour, self.img))

    def box(self, cx: Number, cy: Number, angle: Number, along: tuple[float, float], across: tuple[float, float]) -> Tensor:
        """A rectangle in the frame at ``(cx, cy)`` turned ``angle`` radians counterclockwise:
        ``along`` = (start, end) on the frame's x axis, ``across`` = (start, end) on its y axis."""
        ang = self._v(angle)
        c, s = torch.cos(ang), torch.sin(ang)
        dx, dy = self.x - self._v(cx), self.y - self._v(cy)
        u, v = dx * c + dy * s, -dx * s + dy * c  # the pixel in the rectangle's frame
        return (u >= along[0]) & (u <= along[1]) & (v >= across[0]) & (v <= across[1])

    def rod(self, x0: Number, y0: Number, angle: Number, length: float, half_width: float, back: float = 0.0) -> Tensor:
        """A bar from ``(x0, y0)`` in direction ``angle`` (radians from the x axis), ``length``
        long (starting ``back`` behind the point), ``2 half_width`` wide."""
        return self.box(x0, y0, angle, (-back, length), (-half_width, half_width))

    def circle(self, cx: Number, cy: Number, r: float) -> Tensor:
        return (self.x - self._v(cx)) ** 2 + (self.y - self._v(cy)) ** 2 <= r * r

    def hline(self, y: float, half_width: float = 0.75, x0: float = 0.0, x1: float | None = None) -> Tensor:
        x1 = self.width if x1 is None else x1
        m = ((self.y - y).abs() <= half_width) & (self.x >= x0) & (self.x <= x1)
        return m.expand(self.n, self.height, self.width)

    def triangle(self, pts: list[tuple[Number, Number]]) -> Tensor:
        """A filled triangle (either winding)."""
        (ax, ay), (bx, by), (cx, cy) = [(self._v(px), self._v(py)) for px, py in pts]

        def side(x0: Tensor, y0: Tensor, x1: Tensor, y1: Tensor) -> Tensor:
            return (x1 - x0) * (self.y - y0) - (y1 - y0) * (self.x - x0)

        d1, d2, d3 = side(ax, ay, bx, by), side(bx, by, cx, cy), side(cx, cy, ax, ay)
        return ((d1 >= 0) & (d2 >= 0) & (d3 >= 0)) | ((d1 <= 0) & (d2 <= 0) & (d3 <= 0))

    def frames(self) -> Tensor:
        """The frames ``[N, H, W, 3]`` uint8 (RGB)."""
        return self.img.round().clamp(0, 255).to(torch.uint8)
