"""Optimizers by name (``agent.optimizer=NAME``), each parameter group with its own
learning-rate tensor on the device.

Capture-safe schedules: a learning rate is a 0-d device tensor held in its param group and
written in place (:func:`scale_lr`), so a recorded update sees the new rate without a
re-record. ``group["base_lr"]`` keeps the group's configured rate (a float); a schedule
writes ``lr = base_lr * factor``. On CUDA the optimizers are ``capturable`` (their step
counters live on the device).

:data:`OPTIMIZERS` is the table agents choose from: ``adam``, ``rmsprop`` and ``muon``
(:class:`Muon`, PufferLib's semantics, written with torch ops so a step records).

None of them imports ``torch._dynamo`` before something compiles: torch's optimizers import
it on their first call (for ``torch.compile``'s sake), which costs a run about as much start-up
as torch itself (sympy, FSDP, ...; see :class:`_NoDynamoImport`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import optimizer as _torch_optimizer

from noeira.core.errors import ConfigError

__all__ = [
    "OPTIMIZERS", "Muon", "check_optimizer", "load_optimizer_state", "make_optimizer", "masked_step", "newton_schulz",
    "scale_lr",
]

ParamGroups = list[dict[str, Any]]


def _wrapper_code(decorator: Any, fn: Callable[..., Any]) -> Any:
    """The code object of the function ``decorator`` wraps ``fn`` in (None: no such decorator)."""
    try:
        return decorator(fn).__code__
    except Exception:
        return None


_DISABLE_DYNAMO = _wrapper_code(getattr(torch, "_disable_dynamo", None), lambda: None)
_USE_GRAD = _wrapper_code(getattr(_torch_optimizer, "_use_grad_for_differentiable", None), lambda self: None)


def _unwrap_to(fn: Any, code: Any) -> Any:
    """Along ``fn``'s ``__wrapped__`` chain, the wrapper whose code is ``code`` (None: none)."""
    while fn is not None and code is not None:
        if getattr(fn, "__code__", None) is code:
            return fn
        fn = getattr(fn, "__wrapped__", None)
    return None


def _compiling() -> bool:
    """Whether torch.compile may be at work: dynamo imported (anything that compiles imports it)."""
    return torch.compiler.is_compiling() or "torch._dynamo" in sys.modules


def _without_disable(bound: Any) -> Any:
    """``bound`` (a method under ``torch._disable_dynamo``) as it is while dynamo is loaded;
    before, the method it wraps (the same call: nothing can be compiling)."""
    if _compiling():
        return bound
    wrapper = _unwrap_to(bound.__func__, _DISABLE_DYNAMO)
    return bound if wrapper is None else wrapper.__wrapped__.__get__(bound.__self__)


class _NoDynamoImport:
    """``torch.optim.Optimizer``'s methods without importing ``torch._dynamo``.

    torch wraps ``add_param_group``, ``zero_grad``, ``state_dict`` and ``load_state_dict`` in
    ``torch._disable_dynamo`` and each optimizer's ``step`` in ``_use_grad_for_differentiable``
    (graph breaks around it); both import dynamo at their first call, about 2 s of start-up
    on a CPU (sympy, torch.distributed's FSDP, ...) that a run which compiles nothing never
    needs. Until dynamo is loaded nothing can be compiling, so the wrapped methods run directly
    (``step`` under the grad mode torch's wrapper sets); once it is loaded (``torch.compile``,
    the ``device`` graph backend) torch's own wrappers run, graph breaks included. Where torch
    wraps them otherwise (another version) its methods run as they are."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _without_disable(super().add_param_group)(param_group)  # type: ignore[misc]

    def zero_grad(self, set_to_none: bool = True) -> None:
        _without_disable(super().zero_grad)(set_to_none)  # type: ignore[misc]

    def state_dict(self) -> dict[str, Any]:
        return _without_disable(super().state_dict)()  # type: ignore[misc,no-any-return]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _without_disable(super().load_state_dict)(state_dict)  # type: ignore[misc]


def _step_of(cls: type[torch.optim.Optimizer]) -> Callable[..., Any]:
    """``cls.step`` without the dynamo import of its ``_use_grad_for_differentiable`` wrapper,
    which sets the grad mode and, for ``torch.compile``, breaks the graph around the step."""
    torch_step = _unwrap_to(cls.step, _USE_GRAD)
    if torch_step is None:
        return cls.step  # wrapped otherwise in this torch: as it is
    plain = torch_step.__wrapped__

    def step(self: torch.optim.Optimizer, closure: Callable[[], Any] | None = None) -> Any:
        if _compiling():
            return torch_step(self, closure)
        prev = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            return plain(self, closure)
        finally:
            torch.set_grad_enabled(prev)

    step.__doc__, step.__wrapped__ = plain.__doc__, plain  # type: ignore[attr-defined]
    return step


class Adam(_NoDynamoImport, torch.optim.Adam):
    """``torch.optim.Adam``, the same update, without importing ``torch._dynamo`` (:class:`_NoDynamoImport`)."""

    step = _step_of(torch.optim.Adam)


class RMSprop(_NoDynamoImport, torch.optim.RMSprop):
    """``torch.optim.RMSprop``, the same update, without importing ``torch._dynamo`` (:class:`_NoDynamoImport`)."""

    step = _step_of(torch.optim.RMSprop)


def _adam(groups: ParamGroups, eps: float = 1e-8, **_: Any) -> torch.optim.Optimizer:
    """Adam. On CUDA the fused kernel, ``capturable``: two launches per step instead of a
    dozen foreach ones, which counts in a recorded update of small networks. Elsewhere
    torch does not support capturable: the fused kernel where the device has one, else the
    single-tensor path (both take a tensor lr)."""
    if groups[0]["params"][0].device.type == "cuda":
        return Adam(groups, eps=eps, fused=True, capturable=True)
    try:
        return Adam(groups, eps=eps, fused=True)
    except RuntimeError:  # a device without a fused kernel
        return Adam(groups, eps=eps, foreach=False)


def _rmsprop(groups: ParamGroups, eps: float = 1e-8, alpha: float = 0.99, **_: Any) -> torch.optim.Optimizer:
    """RMSprop, ``capturable`` on CUDA; elsewhere the single-tensor path (it takes a tensor lr)."""
    on_cuda = groups[0]["params"][0].device.type == "cuda"
    return RMSprop(groups, eps=eps, alpha=alpha, **({"capturable": True} if on_cuda else {"foreach": False}))


# the quintic Newton-Schulz coefficients of each of the 5 iterations (HeavyBall's, which
# PufferLib's Muon uses): they push every singular value of X / ||X||_F towards 1
NS_COEFFICIENTS = ((4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
                   (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012))


def newton_schulz(g: Tensor, eps: float = 1e-7) -> Tensor:
    """The orthogonalised ``g [..., rows, cols]`` (approximately ``U V^T`` of its SVD), batched
    over leading dimensions: ``X = g / max(||g||_F, eps)`` (transposed so that rows <= cols),
    then 5 iterations ``X <- a X + (b S + c S^2) X`` with ``S = X X^T``."""
    tall = g.size(-2) > g.size(-1)
    x = g.mT if tall else g
    x = x / torch.clamp(torch.linalg.matrix_norm(x, keepdim=True), min=eps)
    for a, b, c in NS_COEFFICIENTS:
        s = x @ x.mT
        x = a * x + (b * s + c * (s @ s)) @ x
    return x.mT if tall else x


class Muon(_NoDynamoImport, torch.optim.Optimizer):
    """Muon as PufferLib trains with it (``pufferlib/muon.py``), capture-safe and batched.

    Per parameter, with its gradient ``g`` (clipped globally before, by the agent)::

        m <- lerp(m, g, 1 - momentum)              # the momentum buffer, an EMA
        u <- lerp(g, m, momentum)                  # Nesterov
        u <- NS5(u.view(rows, -1)) * sqrt(max(1, rows / cols))    # parameters of >= 2 dims
        p <- p - lr * u                            # 1-D parameters take u as it is

    No weight decay. ``lr`` is the group's 0-d device tensor, read by the recorded step. The
    momentum update is one ``_foreach`` op over all parameters, and parameters of the same
    matrix shape are orthogonalised together in one batched Newton-Schulz (a stack of
    ``[k, rows, cols]``), so a step costs a few kernels per distinct shape, not per parameter.
    The momentum buffers exist from construction (nothing is allocated lazily in a recorded step).

    ``torch.optim.Muon`` (torch >= 2.9) is not this: it refuses 1-D parameters, uses other
    coefficients and scaling, and takes only a float lr."""

    def __init__(self, params: Any, lr: Tensor | float = 0.02, momentum: float = 0.95, eps: float = 1e-7) -> None:
        if not 0.0 <= momentum < 1.0:
            raise ConfigError(f"agent.muon_momentum: must lie in [0, 1), got {momentum}")
        super().__init__(params, {"lr": lr, "momentum": momentum, "ns_eps": eps})
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            beta = group["momentum"]
            grads = [p.grad for p in params]
            bufs = [self.state[p]["momentum_buffer"] for p in params]
            torch._foreach_lerp_(bufs, grads, 1.0 - beta)
            updates = list(torch._foreach_lerp(grads, bufs, beta))
            by_shape: dict[tuple[int, int], list[int]] = {}
            for k, p in enumerate(params):
                if p.dim() >= 2:
                    by_shape.setdefault((p.shape[0], p[0].numel()), []).append(k)
            for (rows, cols), ks in by_shape.items():
                ortho = newton_schulz(torch.stack([updates[k].view(rows, cols) for k in ks]), group["ns_eps"])
                ortho = ortho * max(1.0, rows / cols) ** 0.5
                for j, k in enumerate(ks):
                    updates[k] = ortho[j].view_as(params[k])
            lr = group["lr"]
            torch._foreach_mul_(updates, lr if isinstance(lr, Tensor) else float(lr))
            torch._foreach_sub_(params, updates)
        return loss


def _muon(groups: ParamGroups, momentum: float = 0.95, **_: Any) -> torch.optim.Optimizer:
    """Muon (:class:`Muon`): its step is plain torch ops, recordable on any device."""
    return Muon(groups, momentum=momentum)


OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {"adam": _adam, "rmsprop": _rmsprop, "muon": _muon}
"""name -> ``builder(param_groups, eps=..., alpha=..., momentum=...)``; options a builder does not use are ignored."""


def check_optimizer(name: str, path: str = "agent.optimizer") -> None:
    """A :class:`ConfigError` at ``path`` unless ``name`` is in :data:`OPTIMIZERS` (checked before
    anything is built; :func:`make_optimizer` checks again)."""
    if name not in OPTIMIZERS:
        raise ConfigError(f"{path}: unknown optimizer {name!r} (known: {', '.join(OPTIMIZERS)})")


def make_optimizer(name: str, params: Iterable[nn.Parameter] | Iterable[Mapping[str, Any]], lr: float,
                   path: str = "agent.optimizer", **options: Any) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (parameters, or param groups that may set their own
    ``lr``), every group's learning rate a device tensor starting at its rate (``lr`` by default)
    with ``base_lr`` recorded. Unknown names are a :class:`ConfigError` at ``path``."""
    check_optimizer(name, path)
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
