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

from noeira.core import contracts, registry
from noeira.core.api import get_backend, make_env
from noeira.core.contracts import (
    Agent,
    Backend,
    BatchedEnv,
    EnvSpec,
    GraphBackend,
    Network,
    NetworkSpec,
    PhysicsEngine,
    StepResult,
)
from noeira.core.spaces import Box, Discrete, Encoded, MultiDiscrete
from noeira.core.testing.capture import CaptureHazards, Hazard, find_capture_hazards, format_hazards

__all__ = ["CaptureHazards", "Hazard", "check_agent", "check_backend", "check_env", "check_env_capture",
           "check_graph_backend", "check_network", "check_physics", "find_capture_hazards"]

EnvFactory = Callable[[int | None], BatchedEnv]


def _factory(env: str | EnvFactory, num_envs: int, backend: str, kwargs: dict[str, Any]) -> EnvFactory:
    if isinstance(env, str):
        return lambda seed: make_env(env, num_envs=num_envs, backend=backend, seed=seed, **kwargs)
    return env


def _check_batch(space: Any, x: Tensor, n: int, what: str, device: torch.device) -> None:
    assert isinstance(x, Tensor), f"{what}: expected a tensor, got {type(x).__name__}"
    assert tuple(x.shape) == (n, *space.shape), f"{what}: shape {tuple(x.shape)} != {(n, *space.shape)}"
    assert x.device.type == device.type, f"{what}: on {x.device}, env on {device}"
    if isinstance(space, (Box, Encoded)):
        assert x.dtype == space.dtype, f"{what}: dtype {x.dtype} != space dtype {space.dtype}"
    if isinstance(space, Encoded):
        y = space.decode(x)
        want = (n, *space.decoded.shape)
        assert tuple(y.shape) == want and y.dtype == space.decoded.dtype, (
            f"{what}: decode gives {tuple(y.shape)} {y.dtype}, decoded space says {want} {space.decoded.dtype}")


def check_env(env: str | EnvFactory, *, num_envs: int = 4, backend: str = "cpu", steps: int | None = None,
              seed: int = 0, **kwargs: Any) -> None:
    """Check a batched env: spaces, shapes, dtypes, devices, buffers reused, seeding,
    determinism, ``get_state``/``set_state``, autoreset with ``final_obs``, time limit,
    episode statistics and checkpoints (``state_dict``/``load_state_dict``: a restored copy
    steps on bit for bit). ``env`` is a registry name or ``factory(seed) -> env``."""
    make = _factory(env, num_envs, backend, kwargs)
    a, b = make(seed), make(seed)
    assert isinstance(a, BatchedEnv), f"{type(a).__name__} does not implement BatchedEnv"
    n, dev = a.num_envs, a.device
    for what, space in (("observation_space", a.observation_space), ("action_space", a.action_space)):
        assert isinstance(space, (Box, Discrete, MultiDiscrete, Encoded)), f"{what}: {space!r} is not a noeira space"
    assert isinstance(a.spec, EnvSpec) and a.spec.num_envs == n, "spec does not describe the env"
    assert isinstance(a.capture_safe, bool), "capture_safe must be a bool"
    _check_env_optional(a)

    obs = a.reset(seed=seed)
    _check_batch(a.observation_space, obs, n, "reset() obs", dev)
    assert a.obs is obs or torch.equal(a.obs, obs), "env.obs is not the observation reset returned"
    assert torch.equal(b.reset(seed=seed), obs), "reset(seed) is not deterministic"
    assert torch.equal(make(seed + 1).reset(seed=seed), obs), "reset(seed) must not depend on the construction seed"

    state = _clone_state(a.get_state())
    _check_state_layout(state, n)
    c = make(seed + 7)
    c.reset(seed=seed + 7)
    c.set_state(_clone_state(state))
    _assert_same_state(state, c.get_state(), "set_state(get_state()) does not round-trip: get_state()")
    assert torch.allclose(c.obs.double(), a.obs.double()), "set_state does not update the observation"

    gen = torch.Generator(device=a.action_space.device if hasattr(a.action_space, "device") else "cpu")
    gen.manual_seed(seed)
    limit = steps if steps is not None else (a.max_episode_steps or 200) + 2
    since_done = torch.zeros(n, dtype=torch.int64)
    dones = 0
    running_return = torch.zeros(n, dtype=torch.float64)  # the host's own count of each episode
    return_sum, length_sum = 0.0, 0
    a.pop_episode_stats()  # from here on, the env's sums must match the host's
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
        running_return += ra.reward.double().cpu()
        dones += int(done.sum())
        return_sum += float(running_return[done].sum())
        length_sum += int(since_done[done].sum())
        running_return[done] = 0.0
        since_done[done] = 0
    stats = a.pop_episode_stats()
    keys = {"return_sum", "length_sum", "count", *(f"{k}_sum" for k in contracts.episode_stat_keys(a))}
    assert set(stats) == keys, f"pop_episode_stats keys {sorted(stats)} != {sorted(keys)} (episode_stat_keys' sums)"
    assert int(stats["count"]) == dones, f"episode count {int(stats['count'])} != episodes ended {dones}"
    assert int(stats["length_sum"]) == length_sum, \
        f"episode length sum {int(stats['length_sum'])} != {length_sum} counted on the host"
    assert abs(float(stats["return_sum"]) - return_sum) <= 1e-4 * max(1.0, abs(return_sum)), \
        f"episode return sum {float(stats['return_sum'])} != {return_sum} counted on the host"
    means = {f"episode_{k[:-len('_sum')]}": float(v) / max(dones, 1) for k, v in stats.items() if k.endswith("_sum")}
    derived = contracts.episode_metrics(a, means)
    assert all(isinstance(k, str) and isinstance(v, (int, float)) for k, v in derived.items()), \
        f"episode_metrics(means) must map names to numbers, got {derived!r}"
    again = a.pop_episode_stats()
    assert all(float(v) == 0 for v in again.values()), "pop_episode_stats must zero every sum"
    _check_resume(a, make, gen, seed)
    for e in (a, b, c):
        e.close()
    if a.capture_safe:
        check_env_capture(make, seed=seed)


def check_env_capture(env: str | EnvFactory, *, num_envs: int = 4, backend: str = "cpu", steps: int = 3,
                      warmup: int = 1, seed: int = 0, **kwargs: Any) -> None:
    """Check that a ``capture_safe`` env's ``step`` holds nothing a CUDA-graph recording cannot:
    no host-to-device copy (a tensor literal, a Python-list index, a factory without ``device=``)
    and no host sync (``.item()``, ``nonzero``, a boolean-mask index ...), found on any device,
    the CPU included, by :class:`noeira.core.testing.capture.CaptureHazards`. After ``warmup``
    unchecked steps (a recording is made after warm-up calls too: lazy caches fill there),
    ``steps`` steps run watched; an env with an ``elapsed`` counter and a time limit has half its
    envs, then the other half, put at the limit's last step first, so the watched steps run
    autoresets. ``check_env`` runs this for every env that declares ``capture_safe``."""
    make = _factory(env, num_envs, backend, kwargs)
    e = make(seed)
    e.reset(seed=seed)
    gen = torch.Generator(device=e.action_space.device if hasattr(e.action_space, "device") else "cpu")
    gen.manual_seed(seed)
    actions = [e.action_space.sample(e.num_envs, generator=gen) for _ in range(warmup + steps)]
    for action in actions[:warmup]:
        e.step(action)
    elapsed = getattr(e, "elapsed", None)
    limit = e.max_episode_steps
    done = 0
    with CaptureHazards() as det:
        for t, action in enumerate(actions[warmup:]):
            if isinstance(elapsed, Tensor) and limit is not None and t < 2:
                with det.quiet():  # the check's own setup
                    elapsed[t::2] = limit - 1
            r = e.step(action)
            with det.quiet():
                done += int((r.terminated | r.truncated).sum())
    e.close()
    assert not det.hazards, (f"{e.name if hasattr(e, 'name') else type(e).__name__} declares capture_safe, but its "
                             f"step does what a CUDA-graph recording cannot hold ({done} autoresets in "
                             f"{steps} watched steps):\n{format_hazards(det.hazards)}")


def _check_env_optional(env: BatchedEnv) -> None:
    """The optional members' types (:mod:`noeira.core.contracts`), where the env has them."""
    keys = getattr(env, "episode_stat_keys", ())
    assert isinstance(keys, tuple) and all(isinstance(k, str) and k for k in keys), \
        f"episode_stat_keys must be a tuple of names, got {keys!r}"
    assert len(set(keys)) == len(keys), f"episode_stat_keys has a name twice: {keys!r}"
    fps = getattr(env, "render_fps", None)
    assert fps is None or (isinstance(fps, (int, float)) and fps > 0), f"render_fps: None or > 0, got {fps!r}"
    for name in ("render", "episode_metrics", "evaluation_config"):
        member = getattr(env, name, None)
        assert member is None or callable(member), f"{name} must be a method, got {member!r}"


def _check_resume(a: BatchedEnv, make: EnvFactory, gen: torch.Generator, seed: int, steps: int = 8) -> None:
    """An env restored from ``a.state_dict()`` (into one built from another seed) steps on as
    ``a`` does, bit for bit (unless ``a.resume_caveat`` says it cannot), sums included."""
    assert a.resume_caveat is None or isinstance(a.resume_caveat, str), "resume_caveat: None or a string"
    a.step(a.action_space.sample(a.num_envs, generator=gen))  # completed-episode sums not yet popped, maybe
    saved = copy.deepcopy(a.state_dict())
    d = make(seed + 11)
    d.reset(seed=seed + 11)
    d.load_state_dict(saved)
    if a.resume_caveat is None:
        assert torch.equal(d.obs, a.obs), "load_state_dict(state_dict()) does not restore the observation"
        for t in range(steps):
            action = a.action_space.sample(a.num_envs, generator=gen)
            ra, rd = a.step(action), d.step(action.clone())
            for name in ("obs", "reward", "terminated", "truncated", "final_obs"):
                assert torch.equal(getattr(ra, name), getattr(rd, name)), \
                    f"an env restored by load_state_dict(state_dict()) steps differently ({name}, t={t})"
        sa, sd = a.pop_episode_stats(), d.pop_episode_stats()
        assert all(torch.equal(sa[k], sd[k]) for k in sa), "load_state_dict(state_dict()) does not restore the episode sums"
    d.close()


def _clone_state(state: Any) -> Any:
    if isinstance(state, Mapping):
        return {k: v.clone() for k, v in state.items()}
    return state.clone()


def _check_state_layout(state: Any, n: int) -> None:
    if isinstance(state, Mapping):
        assert state, "get_state(): an empty dict"
        for k, v in state.items():
            assert isinstance(k, str), f"get_state(): key {k!r} is not a string"
            assert isinstance(v, Tensor) and v.dim() >= 1 and v.shape[0] == n, \
                f"get_state()[{k!r}]: expected a tensor with a leading [num_envs={n}], got {getattr(v, 'shape', v)}"
    else:
        assert isinstance(state, Tensor) and state.dim() == 2 and state.shape[0] == n, \
            f"get_state(): expected [num_envs, state_dim] or a dict of [num_envs, ...], got {getattr(state, 'shape', state)}"


def check_agent(agent: Agent, env: BatchedEnv, *, iterations: int = 2) -> None:
    """Check an agent on ``env``: ``act`` fits the action space and carries the policy state,
    ``collect`` and ``learn`` run, ``learn`` returns device scalars, checkpoints round-trip."""
    assert isinstance(agent, Agent), f"{type(agent).__name__} does not implement Agent"
    assert isinstance(agent.steps_per_collect, int) and agent.steps_per_collect > 0, "steps_per_collect must be > 0"
    agent.set_total_steps(10 * agent.steps_per_collect)
    obs = env.reset(seed=0).clone()  # env.obs is the env's buffer: collect below overwrites it
    n = env.num_envs
    start = torch.ones(n, dtype=torch.bool, device=env.device)
    for det in (True, False):
        state0 = agent.initial_state(n)
        assert state0 is None or (isinstance(state0, Tensor) and state0.dim() >= 2 and state0.shape[1] == n), \
            "initial_state(batch): None or a tensor whose dimension 1 is the batch"
        with torch.no_grad():
            act, state1 = agent.act(obs, state0, start, deterministic=det)
            act2, state2 = agent.act(obs, state1, start, deterministic=True)
        assert (state1 is None) == (state0 is None), "act must return a state exactly when initial_state gives one"
        if det and state0 is not None:
            again, _ = agent.act(obs, state2, start, deterministic=True)
            first, _ = agent.act(obs, agent.initial_state(n), start, deterministic=True)
            assert torch.equal(again, first), "act(done=True) must reset the state to the initial one"
        assert tuple(act.shape) == (n, *env.action_space.shape), \
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
        before = agent.act(obs, agent.initial_state(n), start, deterministic=True)[0].clone()
    agent.collect(env)
    agent.learn()
    agent.load_state_dict(state)
    _assert_same_state(state, agent.state_dict(), "state_dict")
    with torch.no_grad():
        after = agent.act(obs, agent.initial_state(n), start, deterministic=True)[0]
    assert torch.equal(before, after), "load_state_dict(state_dict()) does not restore the policy"


def check_network(network: str | type, *, observation_shape: tuple[int, ...] = (5,), batch: int = 3,
                  steps: int = 6, device: str = "cpu", **spec_kw: Any) -> None:
    """Check a policy network (a ``noeira.networks`` name or class): heads and shapes,
    ``forward_sequence`` equal to step-by-step ``forward``, the state reset where ``done``, and
    gradients that reach the parameters through a segment."""
    cls = registry.load("networks", network) if isinstance(network, str) else network
    spec = NetworkSpec(observation_shape=observation_shape, outputs={"actor": 4, "critic": 1},
                       device=torch.device(device), **spec_kw)
    torch.manual_seed(0)
    net = cls(spec)
    assert isinstance(net, Network) and isinstance(net, torch.nn.Module), f"{cls.__name__} does not implement Network"
    assert isinstance(net.recurrent, bool), "recurrent must be a bool"
    for flag in ("reads_code", "reads_raw"):
        value = getattr(cls, flag, False)
        assert isinstance(value, bool), f"{flag} must be a bool, got {value!r}"
    assert getattr(cls, "features", None) is None or callable(cls.features), "features must be a method"
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(steps, batch, *observation_shape, generator=g).to(device)
    done = torch.rand(steps, batch, generator=g).to(device) < 0.3
    done[0] = True
    state0 = net.initial_state(batch)
    if not net.recurrent:
        assert state0 is None, "a feed-forward network's initial_state must be None"
    else:
        assert isinstance(state0, Tensor) and state0.dim() >= 2 and state0.shape[1] == batch, \
            "initial_state(batch): a tensor whose dimension 1 is the batch"
    with torch.no_grad():
        state, stepped = state0, []
        for t in range(steps):
            out, state = net(obs[t], state, done[t])
            assert set(out) == {"actor", "critic"}, f"forward: heads {sorted(out)} != ['actor', 'critic']"
            assert tuple(out["actor"].shape) == (batch, 4) and tuple(out["critic"].shape) == (batch, 1), "head shapes"
            stepped.append(out)
            if t == 0 and contracts.takes_heads(net.forward):
                for head in ("actor", "critic"):
                    one, _ = net(obs[t], state0, done[t], heads=(head,))
                    assert head in one and torch.allclose(one[head], out[head], atol=1e-6), \
                        f"forward(heads=({head!r},)) differs from forward()'s {head!r} head"
        seq = net.forward_sequence(obs, state0, done)
        for k in ("actor", "critic"):
            want = torch.stack([o[k] for o in stepped])
            assert tuple(seq[k].shape) == tuple(want.shape), f"forward_sequence[{k!r}]: shape {tuple(seq[k].shape)}"
            # float32 rounding scales with the outputs' size (a CNN torso batched over T * B rows, not B,
            # rounds its sums differently), so the tolerance is relative to their largest, not each one
            tol = 1e-5 * max(1.0, want.abs().max().item())
            assert torch.allclose(seq[k], want, atol=tol), f"forward_sequence[{k!r}] differs from step-by-step forward"
        if net.recurrent:
            noisy = state0 + 1.0
            fresh, _ = net(obs[0], state0, torch.ones(batch, dtype=torch.bool, device=device))
            reset, _ = net(obs[0], noisy, torch.ones(batch, dtype=torch.bool, device=device))
            assert torch.allclose(fresh["actor"], reset["actor"]), "done=True must reset the state to initial_state"
            kept, _ = net(obs[0], noisy, torch.zeros(batch, dtype=torch.bool, device=device))
            assert not torch.allclose(kept["actor"], fresh["actor"]), "done=False must keep the state"
    seq = net.forward_sequence(obs, state0, done)
    (seq["actor"].square().mean() + seq["critic"].square().mean()).backward()
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in net.parameters()), \
        "no gradient reached the parameters through forward_sequence"


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

    warmup = getattr(graph, "warmup", 0)
    assert isinstance(warmup, int) and warmup >= 0, f"warmup must be an int >= 0, got {warmup!r}"
    reference = getattr(graph, "reference", None)
    assert reference is None or callable(reference), f"reference must be a method, got {reference!r}"
    for wrap in (graph.wrap, *([reference] if reference is not None else [])):
        state.zero_()
        ref = torch.zeros(8)
        wrapped = wrap(step, be)
        for i in range(calls):
            out = wrapped()
            ref = (ref + 1) * 0.5
            assert torch.allclose(state.cpu(), ref), f"{wrap.__name__}, call {i}: the state differs from eager"
            assert torch.allclose(out["sum"].cpu(), ref.sum()), f"{wrap.__name__}, call {i}: the output differs from eager"


def check_physics(engine: PhysicsEngine) -> None:
    """Check a physics engine: its state tensors (``[num_worlds, ...]`` on its device, one per
    world), ``step`` advancing every world's time, ``forward`` and ``reset`` with and without a
    mask (a masked reset leaves the other worlds as they were), and the optional members' types.
    Closes the engine (its optional ``close``) at the end."""
    assert isinstance(engine, PhysicsEngine), f"{type(engine).__name__} does not implement PhysicsEngine"
    n, dev = engine.num_worlds, engine.device
    for name in ("qpos", "qvel", "ctrl", "time", "sensordata"):
        x = getattr(engine, name)
        assert isinstance(x, Tensor) and x.dim() >= 1 and x.shape[0] == n, \
            f"{name}: expected a tensor with a leading [num_worlds={n}], got {getattr(x, 'shape', x)}"
        assert x.device.type == dev.type, f"{name}: on {x.device}, engine on {dev}"
        assert x.dtype == engine.dtype, f"{name}: dtype {x.dtype}, engine's dtype {engine.dtype}"
    safe = getattr(engine, "capture_safe", False)
    assert isinstance(safe, bool), f"capture_safe must be a bool, got {safe!r}"
    close = getattr(engine, "close", None)
    assert close is None or callable(close), f"close must be a method, got {close!r}"
    t0 = engine.time.clone()
    engine.step()
    assert bool((engine.time > t0).all()), "step() must advance every world's time"
    engine.forward()
    mask = torch.zeros(n, dtype=torch.bool, device=dev)
    mask[0] = True
    engine.forward(mask)
    engine.qpos.add_(0.01)  # every world away from its start (the state is written in place)
    engine.step()
    qpos = engine.qpos.clone()
    engine.reset(mask)
    assert float(engine.time[0]) == 0.0, "reset(mask) must restart the masked worlds' time"
    assert torch.equal(engine.qpos[1:], qpos[1:]), "reset(mask) must leave the other worlds as they were"
    engine.reset()
    assert bool((engine.time == 0).all()), "reset() must restart every world"
    contracts.close_physics(engine)
