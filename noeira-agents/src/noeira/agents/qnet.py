"""The value-based family's pieces: the Q-network (a torso, then one or two streams: dueling,
noisy, distributional), factorised NoisyLinear, C51's projection, and ε schedules.

``QNet(obs_shape, num_actions, ...)``: ``obs [B, *obs_shape]`` -> Q-values ``[B, A]``, or with
``num_atoms > 1`` the logits of each action's return distribution ``[B, A, num_atoms]``.

- Torso: ``network = "mlp"`` flattens the observation (vector envs); a CNN (``nature-cnn``,
  ``impala-cnn``, any registered network with ``features``) gives its convolutions' features.
- Stream: the fully connected layers ``hidden`` (ReLU; with ``layer_norm`` a LayerNorm before each
  ReLU, PQN's), then the output layer. Without ``dueling`` one stream gives ``A * num_atoms`` outputs.
  With ``dueling`` (Wang et al. 2016) a value stream (``num_atoms`` outputs) and an advantage stream
  (``A * num_atoms``) are combined as ``V + A - mean_a A`` (per atom: Rainbow's logits).
- ``noisy`` (Fortunato et al. 2018): every layer of the streams is a factorised-Gaussian
  :class:`NoisyLinear`; its noise is redrawn by :meth:`QNet.resample_noise` (in place, from the
  agent's device generator: capture-safe), and ``mean_only`` acts with the mean weights.

An MLP torso without dueling, noise or atoms is ``mlp(obs_dim, hidden, A, nn.ReLU, orthogonal=False)`` built in the same
order, so DQN's numbers (its recipes' seeds) are those of its former network.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from noeira.agents.cnn import network_class
from noeira.agents.layers import space_dim
from noeira.core import contracts
from noeira.core.contracts import NetworkSpec
from noeira.core.errors import ConfigError

__all__ = ["NoisyLinear", "QNet", "linear_epsilon"]


class NoisyLinear(nn.Module):
    """``y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b`` with factorised noise
    ``eps_w = f(eps_out) f(eps_in)^T``, ``eps_b = f(eps_out)``, ``f(x) = sign(x) sqrt(|x|)``
    (Fortunato et al. 2018, section 3.2); ``mu ~ U(-1/sqrt(in), 1/sqrt(in))``,
    ``sigma = sigma0 / sqrt(in)``. The noise vectors are buffers redrawn in place by
    :meth:`resample` (from a generator: capture-safe); ``mean_only`` drops the noise."""

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 * bound))
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))
        self.mean_only = False

    @staticmethod
    def _f(x: Tensor) -> Tensor:
        return x.sign() * x.abs().sqrt()

    @torch.no_grad()
    def resample(self, generator: torch.Generator) -> None:
        self.eps_in.normal_(generator=generator)
        self.eps_out.normal_(generator=generator)

    def forward(self, x: Tensor) -> Tensor:
        if self.mean_only:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        f_in, f_out = self._f(self.eps_in), self._f(self.eps_out)
        weight = self.weight_mu + self.weight_sigma * torch.outer(f_out, f_in)
        return nn.functional.linear(x, weight, self.bias_mu + self.bias_sigma * f_out)


def _stream(in_dim: int, hidden: Sequence[int], out_dim: int, noisy: bool, layer_norm: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden:
        layers.append(NoisyLinear(last, h) if noisy else nn.Linear(last, h))
        if layer_norm:
            layers.append(nn.LayerNorm(h))
        layers.append(nn.ReLU())
        last = h
    layers.append(NoisyLinear(last, out_dim) if noisy else nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class QNet(nn.Module):
    """Q-values or return distributions (see the module docstring)."""

    def __init__(self, obs_shape: Sequence[int], num_actions: int, *, hidden: Sequence[int] = (256, 256),
                 network: str = "mlp", network_options: dict[str, Any] | None = None, num_atoms: int = 1,
                 dueling: bool = False, noisy: bool = False, layer_norm: bool = False,
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.num_actions, self.num_atoms, self.dueling = num_actions, num_atoms, dueling
        if network == "mlp":
            if network_options:
                raise ConfigError(f"agent.network_options: the mlp torso takes none, got {', '.join(network_options)}")
            self.torso: nn.Module | None = None
            in_dim = space_dim(obs_shape)
        else:
            cls = network_class(network)
            if not contracts.is_torso(cls) or "+" in network:
                raise ConfigError(f"agent.network: {network!r} cannot be a Q-network's torso (it needs features() and "
                                  "no recurrent state: mlp, nature-cnn, impala-cnn)")
            self.torso = cls(NetworkSpec(observation_shape=tuple(obs_shape), outputs={}, device=torch.device(device),
                                         hidden_sizes=(), activation="relu", options=dict(network_options or {})))
            in_dim = self.torso.feature_dim
        if dueling:
            self.value = _stream(in_dim, hidden, num_atoms, noisy, layer_norm)
            self.advantage = _stream(in_dim, hidden, num_actions * num_atoms, noisy, layer_norm)
        else:
            self.q = _stream(in_dim, hidden, num_actions * num_atoms, noisy, layer_norm)
        self.noisy_layers = [m for m in self.modules() if isinstance(m, NoisyLinear)]
        self.to(device)

    def forward(self, obs: Tensor) -> Tensor:
        """``obs [B, *obs_shape]`` -> ``[B, A]`` Q-values, or ``[B, A, num_atoms]`` logits with ``num_atoms > 1``."""
        x = obs.flatten(1).float() if self.torso is None else self.torso.features(obs)
        b, a, k = x.shape[0], self.num_actions, self.num_atoms
        if self.dueling:
            adv = self.advantage(x).view(b, a, k)
            out = self.value(x).view(b, 1, k) + adv - adv.mean(1, keepdim=True)
        else:
            out = self.q(x).view(b, a, k)
        return out.squeeze(-1) if k == 1 else out

    @torch.no_grad()
    def resample_noise(self, generator: torch.Generator) -> None:
        for m in self.noisy_layers:
            m.resample(generator)

    @contextlib.contextmanager
    def mean_only(self) -> Iterator[None]:
        """Act with the noisy layers' mean weights inside (a host flag: evaluation, not collect)."""
        for m in self.noisy_layers:
            m.mean_only = True
        try:
            yield
        finally:
            for m in self.noisy_layers:
                m.mean_only = False


def linear_epsilon(steps: Tensor, start: float, end: float, duration: int) -> Tensor:
    """ε falling linearly from ``start`` to ``end`` over ``duration`` env steps, then ``end`` (device scalar)."""
    frac = (steps.float() / max(duration, 1)).clamp(max=1.0)
    return start + (end - start) * frac
