"""Small agents for the graph tests, registered through a throwaway distribution
(``conftest.install_dist``): a capture-safe one, one with a planted ``.item()``, and one
that keeps its write position in a Python int (fine eagerly, frozen by a recording)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.core import Backend, Discrete, EnvSpec


class CleanAgent:
    """REINFORCE with a linear softmax policy, written by the capture-safe rules."""

    @attrs.frozen
    class Config:
        horizon: int = 8
        """Env steps per collect."""
        lr: float = 0.05
        """Adam step size."""
        gamma: float = 0.9
        """Discount."""

    @classmethod
    def recipe(cls, env_name: str, backend_name: str) -> dict[str, Any]:
        return {"env": {"num_envs": 8}, "run": {"total_steps": 1024, "eval_episodes": 2, "progress": False}}

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config) -> None:
        assert isinstance(spec.action_space, Discrete)
        self.config, self.device = config, spec.device
        n, t, d = spec.num_envs, config.horizon, spec.observation_space.shape[0]
        self.steps_per_collect = n * t
        self.policy = nn.Linear(d, spec.action_space.n).to(self.device)
        cuda = self.device.type == "cuda"
        lr = torch.tensor(config.lr, device=self.device) if cuda else config.lr
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=lr, capturable=cuda)
        self.gen = backend.generator(0)
        self.obs = torch.zeros(t, n, d, device=self.device)
        self.actions = torch.zeros(t, n, dtype=torch.int64, device=self.device)
        self.rewards = torch.zeros(t, n, device=self.device)
        self.dones = torch.zeros(t, n, device=self.device)
        self.returns = torch.zeros(t, n, device=self.device)

    def act(self, obs: Tensor, deterministic: bool = False) -> Tensor:
        logits = self.policy(obs)
        if deterministic:
            return logits.argmax(-1)
        return torch.multinomial(logits.softmax(-1), 1, generator=self.gen).squeeze(-1)

    def collect(self, env: Any) -> None:
        with torch.no_grad():
            for t in range(self.config.horizon):
                self.obs[t].copy_(env.obs)
                a = self.act(env.obs)
                self.actions[t].copy_(a)
                r = env.step(a)
                self.rewards[t].copy_(r.reward)
                self.dones[t].copy_((r.terminated | r.truncated).float())

    def loss(self) -> Tensor:
        ret = torch.zeros_like(self.rewards[0])
        for t in reversed(range(self.config.horizon)):
            ret = self.rewards[t] + self.config.gamma * ret * (1 - self.dones[t])
            self.returns[t].copy_(ret)
        logp = self.policy(self.obs).log_softmax(-1).gather(-1, self.actions[..., None]).squeeze(-1)
        adv = self.returns - self.returns.mean()
        return -(logp * adv).mean()

    def learn(self) -> Mapping[str, Tensor]:
        loss = self.loss()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": loss.detach(), "mean_reward": self.rewards.mean()}

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "opt": self.opt.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.opt.load_state_dict(state["opt"])


class PlantedItemAgent(CleanAgent):
    """CleanAgent with a host sync planted in ``learn``."""

    def learn(self) -> Mapping[str, Tensor]:
        loss = self.loss()
        if loss.item() > 1e6:  # PLANTED: a host sync
            raise RuntimeError("diverged")
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": loss.detach()}


class PythonCursorAgent(CleanAgent):
    """CleanAgent that keeps a running sum of rewards in a ring of 4 slots, with the slot
    index in a Python int: right eagerly, frozen at one slot by a recording."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: CleanAgent.Config) -> None:
        super().__init__(spec, backend, config)
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

    def __init__(self, spec: EnvSpec, backend: Backend, config: CleanAgent.Config) -> None:
        super().__init__(spec, backend, config)
        self.scale = torch.ones(1)

    def loss(self) -> Tensor:
        return (super().loss() * self.scale.to(self.device)).sum()  # PLANTED: a host-to-device copy
