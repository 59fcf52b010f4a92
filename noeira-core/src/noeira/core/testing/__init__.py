"""The conformance kit: checks that a plugin keeps the contracts of :mod:`noeira.core.contracts`.

Every plugin, ours or a third party's, runs these in its tests::

    from noeira.core.testing import check_env
    check_env("cartpole", num_envs=8, backend="cpu")

Each check raises ``AssertionError`` naming the broken promise. The pytest plugin
(:mod:`noeira.core.testing.pytest_plugin`, loaded automatically) exposes them as fixtures
and adds the ``cuda`` marker (skipped without a CUDA device).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from noeira.core.api import get_backend, make_env
from noeira.core.contracts import Agent, Backend, BatchedEnv, EnvSpec, GraphBackend, StepResult
from noeira.core.spaces import Box, Discrete, MultiDiscrete

__all__ = ["check_agent", "check_backend", "check_env", "check_graph_backend"]

EnvFactory = Callable[[int | None], BatchedEnv]


def _factory(env: str | EnvFactory, num_envs: int, backend: str, kwargs: dict[str, Any]) -> EnvFactory:
    if isinstance(env, str):
        return lambda seed: make_env(env, num_envs=num_envs, backend=backend, seed=seed, **kwargs)
    return env


def _check_batch(space: Any, x: Tensor, n: int, what: str, device: torch.device) -> None:
    assert isinstance(x, Tensor), f"{what}: expected a tensor, got {type(x).__name__}"
    assert tuple(x.shape) == (n, *space.shape), f"{what}: shape {tuple(x.shape)} != {(n, *space.shape)}"
    assert x.device.type == device.type, f"{what}: on {x.device}, env on {device}"
    if isinstance(space, Box):
        assert x.dtype == space.dtype, f"{what}: dtype {x.dtype} != space dtype {space.dtype}"


def check_env(env: str | EnvFactory, *, num_envs: int = 4, backend: str = "cpu", steps: int | None = None,
              seed: int = 0, **kwargs: Any) -> None:
    """Check a batched env: spaces, shapes, dtypes, devices, buffers reused, seeding,
    determinism, ``get_state``/``set_state``, autoreset with ``final_obs``, time limit and
    episode statistics. ``env`` is a registry name or ``factory(seed) -> env``."""
    make = _factory(env, num_envs, backend, kwargs)
    a, b = make(seed), make(seed)
    assert isinstance(a, BatchedEnv), f"{type(a).__name__} does not implement BatchedEnv"
    n, dev = a.num_envs, a.device
    for what, space in (("observation_space", a.observation_space), ("action_space", a.action_space)):
        assert isinstance(space, (Box, Discrete, MultiDiscrete)), f"{what}: {space!r} is not a noeira space"
    assert isinstance(a.spec, EnvSpec) and a.spec.num_envs == n, "spec does not describe the env"
    assert isinstance(a.capture_safe, bool), "capture_safe must be a bool"

    obs = a.reset(seed=seed)
    _check_batch(a.observation_space, obs, n, "reset() obs", dev)
    assert a.obs is obs or torch.equal(a.obs, obs), "env.obs is not the observation reset returned"
    assert torch.equal(b.reset(seed=seed), obs), "reset(seed) is not deterministic"
    assert torch.equal(make(seed + 1).reset(seed=seed), obs), "reset(seed) must not depend on the construction seed"

    state = a.get_state()
    assert isinstance(state, Tensor) and state.dim() == 2 and state.shape[0] == n, \
        f"get_state(): expected [num_envs, state_dim], got {tuple(state.shape)}"
    c = make(seed + 7)
    c.reset(seed=seed + 7)
    c.set_state(state.clone())
    assert torch.equal(c.get_state(), state), "set_state(get_state()) does not round-trip"
    assert torch.allclose(c.obs.double(), a.obs.double()), "set_state does not update the observation"

    gen = torch.Generator(device=a.action_space.device if hasattr(a.action_space, "device") else "cpu")
    gen.manual_seed(seed)
    limit = steps if steps is not None else (a.max_episode_steps or 200) + 2
    since_done = torch.zeros(n, dtype=torch.int64)
    dones = 0
    obs_ptr = a.obs.data_ptr()
    for t in range(limit):
        action = a.action_space.sample(n, generator=gen)
        ra, rb = a.step(action), b.step(action.clone())
        if t == 0:
            c.step(action.clone())
        assert isinstance(ra, StepResult), "step() must return a StepResult"
        _check_batch(a.observation_space, ra.obs, n, "step().obs", dev)
        _check_batch(a.observation_space, ra.final_obs, n, "step().final_obs", dev)
        for name in ("reward", "terminated", "truncated"):
            x = getattr(ra, name)
            assert isinstance(x, Tensor) and tuple(x.shape) == (n,), f"step().{name}: expected shape ({n},)"
        assert ra.reward.is_floating_point(), "reward must be floating point"
        assert ra.terminated.dtype == torch.bool and ra.truncated.dtype == torch.bool, "flags must be bool"
        assert ra.obs.data_ptr() == obs_ptr, "step() must write the observation into the same buffer"
        for name in ("obs", "reward", "terminated", "truncated", "final_obs"):
            assert torch.equal(getattr(ra, name), getattr(rb, name)), f"step() is not deterministic ({name}, t={t})"
        done = (ra.terminated | ra.truncated).cpu()
        keep = ~done
        assert torch.equal(ra.final_obs.cpu()[keep], ra.obs.cpu()[keep]), "final_obs must equal obs where not done"
        since_done += 1
        if a.max_episode_steps is not None:
            expected = since_done >= a.max_episode_steps
            assert torch.equal(ra.truncated.cpu(), expected), \
                f"truncated at t={t} does not follow max_episode_steps={a.max_episode_steps}"
        dones += int(done.sum())
        since_done[done] = 0
    stats = a.pop_episode_stats()
    assert set(stats) >= {"return_sum", "length_sum", "count"}, "pop_episode_stats keys"
    assert int(stats["count"]) == dones, f"episode count {int(stats['count'])} != episodes ended {dones}"
    assert int(a.pop_episode_stats()["count"]) == 0, "pop_episode_stats must zero the counts"
    for e in (a, b, c):
        e.close()


def check_agent(agent: Agent, env: BatchedEnv, *, iterations: int = 2) -> None:
    """Check an agent on ``env``: ``act`` fits the action space, ``collect`` and ``learn``
    run, ``learn`` returns device scalars, checkpoints round-trip."""
    assert isinstance(agent, Agent), f"{type(agent).__name__} does not implement Agent"
    assert isinstance(agent.steps_per_collect, int) and agent.steps_per_collect > 0, "steps_per_collect must be > 0"
    obs = env.reset(seed=0).clone()  # env.obs is the env's buffer: collect below overwrites it
    for det in (True, False):
        with torch.no_grad():
            act = agent.act(obs, deterministic=det)
        assert tuple(act.shape) == (env.num_envs, *env.action_space.shape), \
            f"act(deterministic={det}): shape {tuple(act.shape)}"
        if isinstance(env.action_space, (Discrete, MultiDiscrete)):
            assert env.action_space.contains(act), "act(): action outside the action space"
        else:
            assert act.is_floating_point(), "act(): continuous actions must be floating point"
    for _ in range(iterations):
        agent.collect(env)
        metrics = agent.learn()
        assert isinstance(metrics, Mapping) and metrics, "learn() must return a non-empty mapping"
        for k, v in metrics.items():
            assert isinstance(v, Tensor) and v.numel() == 1, f"learn()[{k!r}] must be a one-element tensor"
            assert v.device.type == env.device.type, f"learn()[{k!r}] on {v.device}, not on the env's device"
    state = copy.deepcopy(agent.state_dict())
    with torch.no_grad():
        before = agent.act(obs, deterministic=True).clone()
    agent.collect(env)
    agent.learn()
    agent.load_state_dict(state)
    _assert_same_state(state, agent.state_dict(), "state_dict")
    with torch.no_grad():
        after = agent.act(obs, deterministic=True)
    assert torch.equal(before, after), "load_state_dict(state_dict()) does not restore the policy"


def _assert_same_state(want: Any, got: Any, path: str) -> None:
    if isinstance(want, Tensor):
        assert isinstance(got, Tensor) and torch.equal(want.cpu(), got.detach().cpu()), \
            f"load_state_dict(state_dict()) does not restore {path}"
    elif isinstance(want, Mapping):
        assert isinstance(got, Mapping) and set(want) == set(got), f"{path}: keys differ after load_state_dict"
        for k in want:
            _assert_same_state(want[k], got[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(want) == len(got), f"{path}: length differs after load_state_dict"
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            _assert_same_state(w, g, f"{path}[{i}]")


def check_backend(backend: str | Backend) -> None:
    """Check a backend: identity, generators, staging both ways, synchronize."""
    be = get_backend(backend) if isinstance(backend, str) else backend
    assert isinstance(be, Backend), f"{type(be).__name__} does not implement Backend"
    assert isinstance(be.name, str) and be.name, "backend name"
    assert isinstance(be.device, torch.device), "backend device must be a torch.device"
    assert be.is_available() is True, "a backend handed out must be available"
    g1, g2 = be.generator(3), be.generator(3)
    assert g1 in be.generators and g2 in be.generators, "generators must be recorded"
    x1 = torch.rand(5, generator=g1, device=be.device)
    assert torch.equal(x1, torch.rand(5, generator=g2, device=be.device)), "seeded generators must agree"
    t = be.to_device(torch.arange(4))
    assert t.device.type == be.device.type, "to_device"
    host = be.to_host({"a": t.sum(), "b": t.max()})
    assert host == {"a": 6.0, "b": 3.0}, f"to_host of scalars: {host}"
    be.synchronize()


def check_graph_backend(graph: GraphBackend, backend: str | Backend = "cpu", *, calls: int = 6) -> None:
    """Check a graph backend: a wrapped in-place step gives the eager results, call after call."""
    be = get_backend(backend) if isinstance(backend, str) else backend
    assert isinstance(graph, GraphBackend), f"{type(graph).__name__} does not implement GraphBackend"
    assert isinstance(graph.available(be), bool), "available() must return a bool"
    state = torch.zeros(8, device=be.device)
    step_size = torch.ones(8, device=be.device)

    def step() -> dict[str, Tensor]:
        state.add_(step_size).mul_(0.5)
        return {"sum": state.sum()}

    ref = torch.zeros(8)
    wrapped = graph.wrap(step, be)
    for i in range(calls):
        out = wrapped()
        ref = (ref + 1) * 0.5
        assert torch.allclose(state.cpu(), ref), f"call {i}: the state differs from eager"
        assert torch.allclose(out["sum"].cpu(), ref.sum()), f"call {i}: the output differs from eager"
