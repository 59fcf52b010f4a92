"""Small agents for the graph tests, registered through a throwaway distribution
(``conftest.install_dist``): the test suite's ToyAgent (tests/toy_plugins.py) made
recordable, and copies of it with one planted fault each — a ``.item()``, a write position
kept in a Python int (fine eagerly, frozen by a recording), a buffer allocated per call, a
tensor kept on the host."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor
from toy_plugins import ToyAgent  # tests/ is on sys.path (conftest.install_dist, also for subprocesses)

from noeira.core import Backend, EnvSpec, hookimpl


@hookimpl
def noeira_recipe(agent: str) -> dict[str, Any] | None:
    """Every graph test agent's recipe (this module is the test distribution's hook plugin)."""
    if agent not in ("clean", "planted", "cursor", "percall", "hosttensor"):
        return None
    return {"env": {"num_envs": 8}, "run": {"total_steps": 1024, "eval_episodes": 2, "progress": False}}


class CleanAgent(ToyAgent):
    """ToyAgent written by the capture-safe rules: on CUDA a capturable Adam with the
    learning rate as a device tensor; shorter collects and runs."""

    @attrs.frozen
    class Config(ToyAgent.Config):
        horizon: int = 8
        """Env steps per collect."""

    def make_optimizer(self) -> torch.optim.Optimizer:
        cuda = self.device.type == "cuda"
        lr = torch.tensor(self.config.lr, device=self.device) if cuda else self.config.lr
        return torch.optim.Adam(self.policy.parameters(), lr=lr, capturable=cuda)


class PlantedItemAgent(CleanAgent):
    """CleanAgent with a host sync planted in ``learn``."""

    def loss(self) -> Tensor:
        loss = super().loss()
        if loss.item() > 1e6:  # PLANTED: a host sync
            raise RuntimeError("diverged")
        return loss


class PythonCursorAgent(CleanAgent):
    """CleanAgent that keeps a running sum of rewards in a ring of 4 slots, with the slot
    index in a Python int: right eagerly, frozen at one slot by a recording."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: CleanAgent.Config, *, training: bool = True) -> None:
        super().__init__(spec, backend, config, training=training)
        self.ring = torch.zeros(4, device=self.device)
        self.cursor = 0

    def learn(self) -> Mapping[str, Tensor]:
        out = super().learn()
        self.ring[self.cursor % 4] += self.rewards.sum()  # PLANTED: a Python value that changes
        self.cursor += 1
        return out


class PerCallBufferAgent(CleanAgent):
    """CleanAgent that allocates a new advantages tensor every learn and keeps it."""

    def learn(self) -> Mapping[str, Tensor]:
        out = super().learn()
        self.last_returns = self.returns * 1.0  # PLANTED: a buffer allocated per call
        return out


class HostTensorAgent(CleanAgent):
    """CleanAgent that scales its loss by a tensor kept on the CPU (a CPU scalar would be read
    at launch, fine while constant; a CPU tensor is copied from host memory)."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: CleanAgent.Config, *, training: bool = True) -> None:
        super().__init__(spec, backend, config, training=training)
        self.scale = torch.ones(1)

    def loss(self) -> Tensor:
        return (super().loss() * self.scale.to(self.device)).sum()  # PLANTED: a host-to-device copy
