"""The test suite's own small plugins, registered through a throwaway distribution
(see ``conftest.toy_dist``): an agent for Discrete envs and a recording hook. The graph
tests' agents (tests/cuda/graph_agents.py) are this agent with their differences."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.core import Backend, Discrete, EnvSpec, hookimpl


class ToyAgent:
    """REINFORCE with a linear softmax policy: small, capture-safe, learns the corridor."""

    @attrs.frozen
    class Config:
        horizon: int = 16
        """Env steps per collect."""
        lr: float = 0.05
        """Adam step size."""
        gamma: float = 0.9
        """Discount."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config, *, training: bool = True) -> None:
        assert isinstance(spec.action_space, Discrete)
        self.config, self.device = config, spec.device
        n, t, d = spec.num_envs, config.horizon, spec.observation_space.shape[0]
        self.steps_per_collect = n * t
        self.policy = nn.Linear(d, spec.action_space.n).to(self.device)
        self.opt = self.make_optimizer()
        self.gen = backend.generator(0)
        self.obs = torch.zeros(t, n, d, device=self.device)
        self.actions = torch.zeros(t, n, dtype=torch.int64, device=self.device)
        self.rewards = torch.zeros(t, n, device=self.device)
        self.dones = torch.zeros(t, n, device=self.device)
        self.returns = torch.zeros(t, n, device=self.device)

    def make_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.policy.parameters(), lr=self.config.lr)

    def initial_state(self, batch: int) -> None:
        return None

    def set_total_steps(self, total_steps: int) -> None:
        pass

    def act(self, obs: Tensor, state: None = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, None]:
        logits = self.policy(obs)
        if deterministic:
            return logits.argmax(-1), None
        return torch.multinomial(logits.softmax(-1), 1, generator=self.gen).squeeze(-1), None

    def collect(self, env: Any) -> None:
        with torch.no_grad():
            for t in range(self.config.horizon):
                self.obs[t].copy_(env.obs)
                a, _ = self.act(env.obs)
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


@hookimpl
def noeira_recipe(agent: str, env: str, backend: str) -> dict[str, Any] | None:
    """The toy agent's recipe (this module is registered as the distribution's hook plugin)."""
    if agent != "toy":
        return None
    return {"env": {"num_envs": 8}, "run": {"total_steps": 2048, "eval_episodes": 4, "progress": False}}


class Recorder:
    """Records the order of hook calls (registered by tests, then unregistered)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def noeira_configure(self, config: Any) -> None:
        self.calls.append("configure")

    @hookimpl
    def noeira_run_started(self, run: Any) -> None:
        self.calls.append("run_started")

    @hookimpl
    def noeira_iteration(self, run: Any, iteration: int, env_steps: int, metrics: dict[str, float]) -> None:
        self.calls.append("iteration")

    @hookimpl
    def noeira_checkpoint_saved(self, run: Any, path: Any) -> None:
        self.calls.append("checkpoint_saved")

    @hookimpl
    def noeira_run_finished(self, run: Any, outcome: str, record: dict[str, Any]) -> None:
        self.calls.append(f"run_finished:{outcome}")


class Broken:
    """An env whose module imports fine but whose construction is never reached."""


def broken_import() -> None:  # referenced by an entry point whose module does not exist
    raise AssertionError


class CrashingAgent(ToyAgent):
    """ToyAgent whose rank 1 dies in its third learn() (a distributed run must end, not hang)."""

    calls = 0

    def learn(self) -> Mapping[str, Tensor]:
        import os

        CrashingAgent.calls += 1
        if os.environ.get("RANK") == "1" and CrashingAgent.calls == 3:
            raise RuntimeError("rank 1 crashed on purpose")
        return super().learn()


class SignallingAgent(ToyAgent):
    """ToyAgent whose rank 1 receives SIGTERM during its third learn() (the ranks must stop together)."""

    calls = 0

    def learn(self) -> Mapping[str, Tensor]:
        import os
        import signal

        SignallingAgent.calls += 1
        if os.environ.get("RANK") == "1" and SignallingAgent.calls == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().learn()

