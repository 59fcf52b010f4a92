"""The one MLP builder (noeira.agents.layers.mlp) draws the same weights as the three it replaced:
the on-policy orthogonal MLP, the off-policy ReLU MLP with torch's init, and the ensemble of k."""

from __future__ import annotations

import math

import torch
from torch import nn

from noeira.agents.layers import EnsembleLinear, layer_init, mlp


def _same(a: nn.Module, b: nn.Module) -> bool:
    pa, pb = list(a.parameters()), list(b.parameters())
    return len(pa) == len(pb) and all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True))


def test_orthogonal_mlp() -> None:
    torch.manual_seed(0)
    built = mlp(5, (8, 8), 3, nn.Tanh, out_gain=0.01)
    torch.manual_seed(0)
    former = nn.Sequential(layer_init(nn.Linear(5, 8), math.sqrt(2)), nn.Tanh(), layer_init(nn.Linear(8, 8), math.sqrt(2)),
                           nn.Tanh(), layer_init(nn.Linear(8, 3), 0.01))
    assert _same(built, former) and not _same(built, mlp(5, (8, 8), 3, nn.Tanh))
    assert [type(m) for m in built] == [type(m) for m in former]


def test_relu_mlp_with_torch_init() -> None:
    torch.manual_seed(1)
    built = mlp(5, (8,), 3, nn.ReLU, orthogonal=False)
    torch.manual_seed(1)
    former = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    assert _same(built, former) and isinstance(built[1], nn.ReLU)


def test_ensemble_of_k() -> None:
    torch.manual_seed(2)
    built = mlp(5, (8,), 1, nn.ReLU, orthogonal=False, linear=lambda i, o: EnsembleLinear(3, i, o))
    torch.manual_seed(2)
    former = nn.Sequential(EnsembleLinear(3, 5, 8), nn.ReLU(), EnsembleLinear(3, 8, 1))
    assert _same(built, former)
    assert built(torch.randn(3, 4, 5)).shape == (3, 4, 1)
