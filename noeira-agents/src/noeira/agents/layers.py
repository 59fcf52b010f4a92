"""Layers the agents and networks share: one MLP builder, ensembles of linear layers, the
aligned input layer and running normalizers
(optimizers are in :mod:`noeira.agents.optim`).

Everything here is capture-safe: buffers are allocated once and updated in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from noeira.core import distributed

__all__ = ["ALIGN", "AlignedInput", "EnsembleLinear", "RunningMeanStd", "layer_init", "mlp", "space_dim"]

ALIGN = 8
"""Input widths are padded to a multiple of this: cuBLAS's tensor-core kernels for bf16 want
leading dimensions of a multiple of 8 elements, and fall back to kernels several times slower
otherwise (Craftax's 1,345-float observation: 1.52 ms against 0.29 ms for a 262,144-row
minibatch through Linear(1345 -> 256) on an H200)."""


def layer_init(layer: nn.Linear, gain: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights, constant bias (the PPO implementation-details recipe)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
    hidden_gain: float = math.sqrt(2),
    *,
    orthogonal: bool = True,
    linear: Callable[[int, int], nn.Module] = nn.Linear,
) -> nn.Sequential:
    """``in_dim -> hidden... -> out_dim`` with ``activation`` between layers, each layer
    ``linear(in, out)``. ``orthogonal``: orthogonal weights and zero biases (``hidden_gain`` for
    hidden layers, ``out_gain`` for the last: the on-policy agents' init); else each layer keeps its
    own init (torch's for ``nn.Linear``: the off-policy agents'). ``linear = lambda i, o:
    EnsembleLinear(k, i, o)`` makes ``k`` MLPs evaluated as one, ``[k, B, in] -> [k, B, out]``."""
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden:
        layer = linear(last, h)
        layers += [layer_init(layer, hidden_gain) if orthogonal else layer, activation()]  # type: ignore[arg-type]
        last = h
    layer = linear(last, out_dim)
    layers.append(layer_init(layer, out_gain) if orthogonal else layer)  # type: ignore[arg-type]
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """``k`` independent linear layers applied as one batched matmul: ``[k, B, in] -> [k, B, out]``.

    Twin critics become one network with half the kernel launches. Each member is
    initialized like ``nn.Linear`` (uniform in ``±1/sqrt(in)``)."""

    def __init__(self, k: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(k, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(k, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: Tensor) -> Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class AlignedInput(nn.Linear):
    """``Linear(in_features, out_features)`` whose weight is ``[out, in_features]`` rounded up to a
    multiple of :data:`ALIGN` columns; the input ``[..., in_features]`` is written once into a
    zero-padded buffer, in the autocast dtype when autocast is on (the cast autocast makes anyway,
    so the padding costs no extra pass). The padding columns start at zero and meet zeros, so the
    outputs are the unpadded layer's. Orthogonal init on the real columns (:func:`layer_init`).
    A checkpoint of the unpadded layer loads (its weight is padded with zero columns).

    With ``decode_into`` (an ``Encoded`` space's) the input may be integer codes: they are decoded
    straight into the padded buffer, in its dtype (the cast autocast would make of the decoded
    floats), with no float32 copy in between."""

    def __init__(self, in_features: int, out_features: int, gain: float = math.sqrt(2),
                 decode_into: Callable[[Tensor, Tensor], None] | None = None) -> None:
        width = in_features + (-in_features) % ALIGN
        super().__init__(width, out_features, device="meta")  # no draws: the init is the unpadded layer's
        self.features = in_features
        real = layer_init(nn.Linear(in_features, out_features), gain)
        self.weight = nn.Parameter(torch.cat([real.weight.detach(), real.weight.new_zeros(out_features,
                                                                                          width - in_features)], 1))
        self.bias = nn.Parameter(real.bias.detach().clone())
        self.decode_into = decode_into
        self._register_load_state_dict_pre_hook(self._pad_old_weight)

    def _pad_old_weight(self, state_dict: dict, prefix: str, *_args: object) -> None:
        w = state_dict.get(prefix + "weight")
        if w is not None and w.shape[-1] == self.features < self.in_features:
            state_dict[prefix + "weight"] = torch.cat([w, w.new_zeros(w.shape[0], self.in_features - w.shape[1])], 1)

    def forward(self, x: Tensor) -> Tensor:
        code = self.decode_into is not None and not x.is_floating_point()
        if code or x.shape[-1] != self.in_features:
            kind = x.device.type
            dtype = (torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind)
                     else torch.float32 if code else x.dtype)
            padded = torch.empty(*x.shape[:-1], self.in_features, dtype=dtype, device=x.device)
            padded[..., self.features:].zero_()
            if code:
                self.decode_into(x.reshape(-1, x.shape[-1]), padded.view(-1, self.in_features))
            else:
                padded[..., :self.features].copy_(x)
            x = padded
        return super().forward(x)


def space_dim(shape: Sequence[int]) -> int:
    """Flat size of one element of a space (``()`` counts as 1)."""
    return int(math.prod(shape)) if len(shape) else 1


class RunningMeanStd(nn.Module):
    """Mean and variance of a stream of batches ``[B, *shape]`` (Chan et al.'s parallel
    update), held as buffers so they move with ``.to()`` and land in ``state_dict``.

    ``normalize(x) = clamp((x - mean) / sqrt(var + eps), -clip, clip)``.
    """

    def __init__(self, shape: Sequence[int], device: torch.device | str = "cpu", eps: float = 1e-8,
                 clip: float = 10.0) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(tuple(shape), dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones(tuple(shape), dtype=torch.float64, device=device))
        self.register_buffer("count", torch.full((), 1e-4, dtype=torch.float64, device=device))
        self.eps, self.clip = eps, clip

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        x = x.double()
        if distributed.current()[1] > 1:  # data-parallel: every rank folds in every rank's batch
            sums = torch.stack([torch.full_like(x[0], x.shape[0]), x.sum(0), x.square().sum(0)])
            distributed.all_reduce_sum_([sums])
            b_count = sums[0].reshape(-1)[0]  # the same in every position
            b_mean = sums[1] / b_count
            b_var = (sums[2] / b_count - b_mean.square()).clamp(min=0)
        else:
            b_mean = x.mean(0)
            b_var = x.var(0, unbiased=False)
            b_count = x.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean.add_(delta * b_count / total)
        m2 = self.var * self.count + b_var * b_count + delta.square() * self.count * b_count / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: Tensor) -> Tensor:
        std = torch.sqrt(self.var + self.eps).to(x.dtype)
        return ((x - self.mean.to(x.dtype)) / std).clamp(-self.clip, self.clip)
