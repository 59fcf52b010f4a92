"""Policy networks registered under ``noeira.networks`` (``agent.network=NAME``).

``mlp`` (the default): one multilayer perceptron per head on the flattened observation
(separate actor and critic, no shared trunk), orthogonal init with each head's gain: "The
37 implementation details of PPO". Feed-forward, so ``state`` and ``done`` pass through.

A network is built as ``cls(spec: NetworkSpec)`` and keeps the contract
:class:`noeira.core.contracts.Network`; the recurrent ones come with the recurrent-PPO work.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from noeira.agents.nets import mlp, space_dim
from noeira.core.contracts import NetworkSpec, PolicyState
from noeira.core.errors import ConfigError

__all__ = ["ACTIVATIONS", "MLP", "activation", "check_widths", "reset_where"]

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU,
                                           "silu": nn.SiLU}


def activation(name: str) -> type[nn.Module]:
    """The activation class for ``agent.activation`` (a :class:`ConfigError` naming the known ones)."""
    if name not in ACTIVATIONS:
        raise ConfigError(f"agent.activation: unknown {name!r} (known: {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


def check_widths(hidden: Sequence[int]) -> None:
    if any(h < 1 for h in hidden):
        raise ConfigError(f"agent.hidden_sizes: every layer needs >= 1 unit, got {list(hidden)}")


class MLP(nn.Module):
    """``obs [B, *shape]`` -> one MLP per head ``[B, width]``; ``hidden_sizes`` are every MLP's
    hidden widths. Takes no options."""

    recurrent = False

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        if spec.options:
            raise ConfigError(f"agent.network_options: the mlp network takes none, got {', '.join(spec.options)}")
        check_widths(spec.hidden_sizes)
        act = activation(spec.activation)
        in_dim = space_dim(spec.observation_shape)
        self.heads = nn.ModuleDict({
            name: mlp(in_dim, spec.hidden_sizes, width, act, out_gain=spec.output_gains.get(name, 1.0)).to(spec.device)
            for name, width in spec.outputs.items()
        })

    def initial_state(self, batch: int) -> PolicyState:
        return None

    def forward(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], PolicyState]:
        x = obs.flatten(1)
        return {k: self.heads[k](x) for k in (heads or self.heads)}, None

    def forward_sequence(self, obs: Tensor, state: PolicyState, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        t, b = obs.shape[:2]
        out, _ = self.forward(obs.reshape(t * b, *obs.shape[2:]), None, None, heads)
        return {k: v.view(t, b, -1) for k, v in out.items()}


def reset_where(state: Tensor, done: Tensor) -> Tensor:
    """``state [L, B, H]`` with the rows of envs where ``done [B]`` zeroed (branch-free: a
    multiply, so it records in a CUDA graph, and the gradient stops there)."""
    return state * (~done).to(state.dtype).view(1, -1, *([1] * (state.dim() - 2)))
