"""``shared-mlp``: one MLP trunk that every head reads (the actor and the critic share features).

    obs [B, *shape] -> flatten -> (Linear -> [LayerNorm] -> activation) per hidden_sizes entry -> trunk [B, H]
    trunk -> one Linear per head: {"actor": [B, n], "critic": [B, 1]}

noeira's own ``mlp`` gives each head its own MLP; sharing the trunk halves the work of a forward
pass and lets the critic's gradient shape the actor's features (a PPO with a shared trunk usually
wants a smaller ``vf_coef``). Feed-forward: ``recurrent = False``, no state.

Built as ``SharedMLP(spec)`` from a :class:`~noeira.core.contracts.NetworkSpec`: ``spec.outputs``
names the heads and widths, ``spec.output_gains`` the orthogonal-init gain of each head (PPO asks
0.01 for the actor), ``spec.hidden_sizes`` and ``spec.activation`` the trunk, ``spec.options``
(``agent.network_options``) this network's own keys, :class:`SharedMLP.Config`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
from torch import Tensor, nn

from noeira.core import ConfigError
from noeira.core.config import structure
from noeira.core.contracts import NetworkSpec

__all__ = ["SharedMLP"]

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}


class SharedMLP(nn.Module):
    """See the module docstring."""

    recurrent = False

    @attrs.frozen
    class Config:
        layer_norm: bool = False
        """LayerNorm after each hidden Linear, before the activation."""

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        options = structure(dict(spec.options), SharedMLP.Config, "agent.network_options")
        if spec.activation not in ACTIVATIONS:
            raise ConfigError(f"agent.activation: shared-mlp knows {', '.join(ACTIVATIONS)}; got {spec.activation!r}")
        if not spec.hidden_sizes or any(h < 1 for h in spec.hidden_sizes):
            raise ConfigError(f"agent.hidden_sizes: shared-mlp needs one or more layers of >= 1 unit, "
                              f"got {list(spec.hidden_sizes)}")
        layers: list[nn.Module] = []
        width = math.prod(spec.observation_shape)
        for hidden in spec.hidden_sizes:
            linear = nn.Linear(width, hidden)
            nn.init.orthogonal_(linear.weight, math.sqrt(2))
            nn.init.zeros_(linear.bias)
            layers += [linear, *([nn.LayerNorm(hidden)] if options.layer_norm else []), ACTIVATIONS[spec.activation]()]
            width = hidden
        self.trunk = nn.Sequential(*layers)
        self.heads = nn.ModuleDict()
        for name, size in spec.outputs.items():
            head = nn.Linear(width, size)
            nn.init.orthogonal_(head.weight, spec.output_gains.get(name, 1.0))
            nn.init.zeros_(head.bias)
            self.heads[name] = head
        self.to(spec.device)

    def initial_state(self, batch: int) -> None:
        return None

    def forward(self, obs: Tensor, state: None = None, done: Tensor | None = None,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], None]:
        """``obs [B, *shape]`` -> ``({head: [B, width]}, None)``. ``heads`` asks for some heads
        only (PPO asks for the critic alone when it values an observation)."""
        x = self.trunk(obs.reshape(obs.shape[0], -1))
        return {k: self.heads[k](x) for k in (heads or self.heads)}, None

    def forward_sequence(self, obs: Tensor, state: None, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        """``obs [T, B, *shape]`` -> ``{head: [T, B, width]}``: feed-forward, so one batch of T * B."""
        t, b = obs.shape[:2]
        out, _ = self.forward(obs.reshape(t * b, *obs.shape[2:]), None, None, heads)
        return {k: v.view(t, b, -1) for k, v in out.items()}
