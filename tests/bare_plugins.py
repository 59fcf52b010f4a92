"""Plugins with the required members of their contract and nothing else (no ``TensorEnv``,
no ``render``, no ``episode_stat_keys``, no ``heads=``, no ``warmup``/``reference``, no
``capture_safe``/``close``), registered through a throwaway distribution by
``tests/core/test_optional_members.py``: what the contracts' optional members default to must
make them work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from acme_corridor.env import Corridor
from acme_pointmass.engine import PointMassEngine
from torch import Tensor, nn

from noeira.core import Backend, EnvSpec, StepResult
from noeira.core.contracts import EnvState, NetworkSpec, PolicyState


class BareEnv:
    """The corridor (acme-corridor) behind BatchedEnv's required members alone."""

    Config = Corridor.Config

    def __init__(self, config: Corridor.Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        self._env = Corridor(config, num_envs=num_envs, backend=backend, seed=seed)
        e = self._env
        self.num_envs, self.device = e.num_envs, e.device
        self.observation_space, self.action_space = e.observation_space, e.action_space
        self.max_episode_steps, self.capture_safe = e.max_episode_steps, e.capture_safe
        self.resume_caveat: str | None = None

    @property
    def spec(self) -> EnvSpec:
        return EnvSpec(name="bare-env", num_envs=self.num_envs, observation_space=self.observation_space,
                       action_space=self.action_space, device=self.device, max_episode_steps=self.max_episode_steps,
                       capture_safe=self.capture_safe)

    @property
    def obs(self) -> Tensor:
        return self._env.obs

    def reset(self, seed: int | None = None) -> Tensor:
        return self._env.reset(seed)

    def step(self, action: Tensor) -> StepResult:
        return self._env.step(action)

    def get_state(self) -> EnvState:
        return self._env.get_state()

    def set_state(self, state: EnvState) -> None:
        self._env.set_state(state)

    def pop_episode_stats(self) -> dict[str, Tensor]:
        return self._env.pop_episode_stats()

    def state_dict(self) -> dict[str, Any]:
        return self._env.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._env.load_state_dict(state)

    def close(self) -> None:
        self._env.close()


class BareNetwork(nn.Module):
    """A feed-forward actor-critic whose ``forward`` takes no ``heads`` keyword."""

    recurrent = False

    def __init__(self, spec: NetworkSpec) -> None:
        super().__init__()
        width = spec.hidden_sizes[-1]
        self.body = nn.Sequential(nn.Flatten(), nn.LazyLinear(width), nn.Tanh()).to(spec.device)
        self.body(torch.zeros(1, *spec.observation_shape, device=spec.device))  # materialise the lazy layer
        self.heads = nn.ModuleDict({k: nn.Linear(width, n) for k, n in spec.outputs.items()}).to(spec.device)

    def initial_state(self, batch: int) -> PolicyState:
        return None

    def forward(self, obs: Tensor, state: PolicyState, done: Tensor | None) -> tuple[dict[str, Tensor], PolicyState]:
        x = self.body(obs.float())
        return {k: h(x) for k, h in self.heads.items()}, None

    def forward_sequence(self, obs: Tensor, state: PolicyState, done: Tensor) -> dict[str, Tensor]:
        t, b = obs.shape[:2]
        out, _ = self.forward(obs.reshape(t * b, *obs.shape[2:]), None, None)
        return {k: v.view(t, b, -1) for k, v in out.items()}


class BareGraph:
    """A graph backend that records nothing: ``wrap`` counts the calls and calls through."""

    name = "bare-graph"
    calls = 0

    def available(self, backend: Backend) -> bool:
        return True

    def wrap(self, fn: Any, backend: Backend | None = None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            BareGraph.calls += 1
            return fn(*args, **kwargs)

        return call


class BarePhysics:
    """The point-mass engine (acme-pointmass) behind PhysicsEngine's required members alone."""

    Config = PointMassEngine.Config

    def __init__(self, config: PointMassEngine.Config, *, model: str, num_worlds: int, backend: Backend) -> None:
        self._e = PointMassEngine(config, model=model, num_worlds=num_worlds, backend=backend)
        self.num_worlds, self.device, self.dtype = num_worlds, backend.device, self._e.dtype

    qpos = property(lambda self: self._e.qpos)
    qvel = property(lambda self: self._e.qvel)
    ctrl = property(lambda self: self._e.ctrl)
    time = property(lambda self: self._e.time)
    sensordata = property(lambda self: self._e.sensordata)

    def step(self, nstep: int = 1) -> None:
        self._e.step(nstep)

    def forward(self, mask: Tensor | None = None) -> None:
        self._e.forward(mask)

    def reset(self, mask: Tensor | None = None) -> None:
        self._e.reset(mask)
