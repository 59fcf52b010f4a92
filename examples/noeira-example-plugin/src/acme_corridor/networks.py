"""A recurrent policy network for noeira's ``noeira.networks`` registry: ``gru``.

``obs -> Linear + tanh -> GRU cells (one per hidden_sizes entry, all the same width) -> heads``.
The state is ``[layers, B, hidden]``; where ``done`` marks an episode start it is zeroed by a
multiply (no branch, so it records in a CUDA graph, and the gradient stops there).
``forward_sequence`` is ``forward`` step by step (truncated BPTT over the segment).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from noeira.core import ConfigError
from noeira.core.contracts import NetworkSpec


class GRU(nn.Module):
    recurrent = True

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        widths = tuple(spec.hidden_sizes)
        if not widths or len(set(widths)) != 1 or widths[0] < 1:
            raise ConfigError(f"agent.hidden_sizes: the gru network needs layers of one width, got {list(widths)}")
        if spec.options:
            raise ConfigError(f"agent.network_options: the gru network takes none, got {', '.join(spec.options)}")
        self.layers, self.hidden = len(widths), widths[0]
        in_dim = math.prod(spec.observation_shape) if spec.observation_shape else 1
        self.encoder = nn.Linear(in_dim, self.hidden)
        self.cells = nn.ModuleList(nn.GRUCell(self.hidden, self.hidden) for _ in range(self.layers))
        self.heads = nn.ModuleDict({name: nn.Linear(self.hidden, width) for name, width in spec.outputs.items()})
        for name, head in self.heads.items():
            nn.init.orthogonal_(head.weight, spec.output_gains.get(name, 1.0))
            nn.init.zeros_(head.bias)
        self.to(spec.device)

    def initial_state(self, batch: int) -> Tensor:
        return torch.zeros(self.layers, batch, self.hidden, device=self.encoder.weight.device)

    def forward(self, obs: Tensor, state: Tensor, done: Tensor,
                heads: Sequence[str] | None = None) -> tuple[dict[str, Tensor], Tensor]:
        state = state * (~done).to(state.dtype).view(1, -1, 1)
        x = torch.tanh(self.encoder(obs.flatten(1)))
        new = []
        for layer, cell in enumerate(self.cells):
            x = cell(x, state[layer])
            new.append(x)
        return {k: self.heads[k](x) for k in (heads or self.heads)}, torch.stack(new)

    def forward_sequence(self, obs: Tensor, state: Tensor, done: Tensor,
                         heads: Sequence[str] | None = None) -> dict[str, Tensor]:
        outs = []
        for t in range(obs.shape[0]):
            out, state = self.forward(obs[t], state, done[t], heads)
            outs.append(out)
        return {k: torch.stack([o[k] for o in outs]) for k in outs[0]}
