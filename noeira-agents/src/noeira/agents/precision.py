"""Numeric precision of the networks (``agent.precision``), one place for every agent.

- ``fp32``: everything in float32 (the default).
- ``bf16``: forward passes under ``torch.autocast(dtype=bfloat16)``; parameters, gradients,
  optimizer state, losses, advantages and returns stay float32 (autocast casts the weights
  to bf16 at every matmul).
- ``bf16-master`` (PufferLib's scheme): the module's parameters *are* bf16 (the working
  weights: forward and backward read them, no per-call cast), and :class:`MasterWeights` keeps a
  float32 master copy of each, which the optimizer steps with float32 state. After backward
  the bf16 gradients are copied into the masters' float32 gradients (clipped there), and after
  each optimizer step the masters are recast into the working weights. Forward passes still
  run under autocast (float32 inputs meet bf16 weights); advantages, returns, losses and the
  recurrent state stay float32.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor, nn

from noeira.core.errors import ConfigError

__all__ = ["PRECISIONS", "MasterWeights", "autocast", "check_precision"]

PRECISIONS = ("fp32", "bf16", "bf16-master")


def check_precision(value: str, path: str = "agent.precision", choices: tuple[str, ...] = ("fp32", "bf16")) -> str:
    """``value`` if it is one of ``choices`` (an agent's precisions: ``bf16-master`` needs an
    agent that steps :class:`MasterWeights`, the on-policy ones), else a :class:`ConfigError` at ``path``."""
    if value not in choices:
        raise ConfigError(f"{path}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """The context the forward passes run in for ``precision`` on ``device``."""
    if precision in ("bf16", "bf16-master"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _clip(params: list[Tensor], max_norm: float) -> Tensor:
    """Clip the global gradient norm to ``max_norm`` (0: no clipping); the norm before clipping
    (0 when not clipping: computing it would cost a reduction)."""
    if max_norm > 0:
        return torch.nn.utils.clip_grad_norm_(params, max_norm).detach()
    return torch.zeros((), device=params[0].device)


class MasterWeights:
    """The parameters an optimizer steps for ``module`` under ``precision``. For ``fp32`` and
    ``bf16`` they are the module's own; for ``bf16-master`` the module's floating parameters
    are cast to bf16 in place (their storage replaced once, at construction) and float32
    masters are kept here. Capture-safe: gradients and masters are allocated once and
    copied in place."""

    def __init__(self, module: nn.Module, precision: str) -> None:
        self.working = [p for p in module.parameters()]
        self.mixed = precision == "bf16-master"
        self.master = self.working
        if self.mixed:
            self.master = [nn.Parameter(p.detach().clone().float()) for p in self.working]
            with torch.no_grad():
                for p in self.working:
                    if p.is_floating_point():
                        p.data = p.data.to(torch.bfloat16)
                    p.grad = torch.zeros_like(p)
            for m in self.master:
                m.grad = torch.zeros_like(m)

    def parameters(self) -> list[Tensor]:
        """What the optimizer steps: the float32 masters (``bf16-master``) or the module's parameters."""
        return self.master

    def attach(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """``optimizer`` (over :meth:`parameters`), made to recast the working weights after each step."""
        if self.mixed:
            optimizer.register_step_post_hook(lambda *_: self.recast())
        return optimizer

    @torch.no_grad()
    def clip_gradients(self, max_norm: float) -> Tensor:
        """After backward: ``bf16-master`` moves the working gradients into the masters' float32
        gradients (zeroing the working ones for the next backward); then the global norm of the
        optimizer's gradients is clipped to ``max_norm`` (0: no clipping) and returned."""
        if self.mixed:
            grads = [p.grad for p in self.working]
            torch._foreach_copy_([m.grad for m in self.master], grads)
            torch._foreach_zero_(grads)
        return _clip(self.master, max_norm)

    @torch.no_grad()
    def recast(self) -> None:
        """Working weights <- masters (rounded to bf16)."""
        if self.mixed:
            torch._foreach_copy_(self.working, self.master)

    def state_dict(self) -> list[Tensor] | None:
        """The float32 masters (``bf16-master``; None otherwise): the bf16 working weights alone
        would lose the low bits a resumed run continues from."""
        return [m.detach().clone() for m in self.master] if self.mixed else None

    @torch.no_grad()
    def load_state_dict(self, masters: list[Tensor] | None) -> None:
        """Masters from a checkpoint (or, when it has none, from the module's weights just loaded), then recast."""
        if not self.mixed:
            return
        src = masters if masters is not None else self.working
        for m, s in zip(self.master, src, strict=True):
            m.copy_(torch.as_tensor(s).to(m.device))
        self.recast()

