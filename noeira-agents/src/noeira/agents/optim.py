"""Optimizers by name (``agent.optimizer=NAME``), each parameter group with its own
learning-rate tensor on the device.

Capture-safe schedules: a learning rate is a 0-d device tensor held in its param group and
written in place (:func:`scale_lr`), so a recorded update sees the new rate without a
re-record. ``group["base_lr"]`` keeps the group's configured rate (a float); a schedule
writes ``lr = base_lr * factor``. On CUDA the optimizers are ``capturable`` (their step
counters live on the device).

:data:`OPTIMIZERS` is the table agents choose from; the recurrent-PPO work adds Muon here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from noeira.core.errors import ConfigError

__all__ = ["OPTIMIZERS", "load_optimizer_state", "make_optimizer", "masked_step", "scale_lr"]

ParamGroups = list[dict[str, Any]]


def _adam(groups: ParamGroups, eps: float = 1e-8, **_: Any) -> torch.optim.Optimizer:
    """Adam. On CUDA the fused kernel, ``capturable``: two launches per step instead of a
    dozen foreach ones, which counts in a recorded update of small networks. Elsewhere
    torch does not support capturable: the fused kernel where the device has one, else the
    single-tensor path (both take a tensor lr)."""
    if groups[0]["params"][0].device.type == "cuda":
        return torch.optim.Adam(groups, eps=eps, fused=True, capturable=True)
    try:
        return torch.optim.Adam(groups, eps=eps, fused=True)
    except RuntimeError:  # a device without a fused kernel
        return torch.optim.Adam(groups, eps=eps, foreach=False)


def _rmsprop(groups: ParamGroups, eps: float = 1e-8, alpha: float = 0.99, **_: Any) -> torch.optim.Optimizer:
    """RMSprop, ``capturable`` on CUDA; elsewhere the single-tensor path (it takes a tensor lr)."""
    on_cuda = groups[0]["params"][0].device.type == "cuda"
    return torch.optim.RMSprop(groups, eps=eps, alpha=alpha, **({"capturable": True} if on_cuda else {"foreach": False}))


OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {"adam": _adam, "rmsprop": _rmsprop}
"""name -> ``builder(param_groups, eps=..., alpha=...)``; options a builder does not use are ignored."""


def make_optimizer(name: str, params: Iterable[nn.Parameter] | Iterable[Mapping[str, Any]], lr: float,
                   path: str = "agent.optimizer", **options: Any) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (parameters, or param groups that may set their own
    ``lr``), every group's learning rate a device tensor starting at its rate (``lr`` by default)
    with ``base_lr`` recorded. Unknown names are a :class:`ConfigError` at ``path``."""
    if name not in OPTIMIZERS:
        raise ConfigError(f"{path}: unknown optimizer {name!r} (known: {', '.join(OPTIMIZERS)})")
    items = list(params)
    groups: ParamGroups = [dict(g) for g in items] if items and isinstance(items[0], Mapping) else [{"params": items}]
    for g in groups:
        g["params"] = list(g["params"])
        base = float(g.get("lr", lr))
        g["lr"] = torch.tensor(base, dtype=torch.float32, device=g["params"][0].device)
        g["base_lr"] = base
    return OPTIMIZERS[name](groups, **options)


@torch.no_grad()
def scale_lr(optimizer: torch.optim.Optimizer, factor: Tensor | float) -> None:
    """Every group's ``lr <- base_lr * factor`` in place. A schedule passes a device scalar
    (recorded graphs then follow it); a float is written as a constant."""
    for g in optimizer.param_groups:
        if isinstance(factor, Tensor):
            torch.mul(factor, g["base_lr"], out=g["lr"])
        else:
            g["lr"].fill_(g["base_lr"] * factor)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: Mapping[str, Any]) -> None:
    """``optimizer.load_state_dict(state)`` that keeps each group's own lr tensor (the one the
    schedules write and a recorded graph reads), its ``base_lr`` and this device's kernel choice
    (``fused``/``capturable``/``foreach``), copying the saved rates into the lr tensors."""
    keep = [{k: g[k] for k in ("lr", "base_lr", "fused", "capturable", "foreach") if k in g} for g in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, ours in zip(optimizer.param_groups, keep, strict=True):
        saved_lr = group["lr"]
        group.update(ours)
        group["lr"].copy_(torch.as_tensor(saved_lr, dtype=group["lr"].dtype))


@torch.no_grad()
def _snapshot(optimizer: torch.optim.Optimizer) -> list[tuple[Tensor, Tensor]]:
    pairs = []
    for g in optimizer.param_groups:
        for p in g["params"]:
            pairs.append((p, p.detach().clone()))
            for v in optimizer.state.get(p, {}).values():
                if isinstance(v, Tensor) and v.device == p.device:
                    pairs.append((v, v.clone()))
    return pairs


def masked_step(optimizer: torch.optim.Optimizer, due: Tensor) -> None:
    """``optimizer.step()`` that takes effect only where the device flag ``due`` (0-d bool) is
    True: parameters and optimizer state (moments, step counters) are restored otherwise, so a
    skipped step leaves no trace, exactly as if it had not run. Capture-safe (no host branch);
    it costs a copy of the parameters and state. The state must exist already (one step made)."""
    saved = _snapshot(optimizer)
    optimizer.step()
    with torch.no_grad():
        for now, before in saved:
            now.copy_(torch.where(due, now, before))
