"""What the env tests share: the reference data of the Craftax tests (Craftax-Classic and the full
game against the JAX reference), states read from them, a leaf-by-leaf comparison of states, the
checks both Craftax games pass the same way (live reference worlds, the state round trip, the CUDA
step beside the CPU's), and the CUDA check that an env's step makes no host sync and records as a
CUDA graph. The test modules
import it by name (pytest puts tests/envs on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch


def load_ref(path: Path) -> dict[str, np.ndarray]:
    """Every array of a reference fixture (``tests/envs/data/*.npz``), read into memory."""
    with np.load(path) as f:
        return dict(f)


def on_device(name: str) -> str:
    """``name``, skipping the test where it is cuda and there is no CUDA device."""
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return name


def ref_states(ref: dict[str, np.ndarray], prefix: str, fields: Iterable[str], device: str = "cpu") -> dict[str, torch.Tensor]:
    """The states stored under ``prefix`` (``f"{prefix}{leaf}"`` for each leaf of ``fields``)."""
    return {k: torch.as_tensor(ref[f"{prefix}{k}"], device=device) for k in fields}


def mismatch(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    """Key -> the first few rows where ``got`` and ``want`` differ (dtypes aside)."""
    out = {}
    for k, w in want.items():
        g = got[k].to(w.dtype).cpu()
        w = w.cpu()
        bad = (g != w).reshape(g.shape[0], -1).any(1)
        if bad.any():
            out[k] = bad.nonzero().squeeze(1)[:5].tolist()
    return out


def reference_leaves(states: object, fields: Iterable[str]) -> dict[str, torch.Tensor]:
    """The leaves of a live reference state (a JAX pytree) by their export names: ``"zombies.mask"``
    is ``states.zombies.mask``."""
    leaves: dict[str, torch.Tensor] = {}
    for name in fields:
        obj = states
        for part in name.split("."):
            obj = getattr(obj, part)
        leaves[name] = torch.as_tensor(np.asarray(obj))
    return leaves


def record_step(env: Any, action: torch.Tensor) -> torch.cuda.CUDAGraph:
    """On CUDA: checks that ``env.step(action)`` makes no host sync (three steps with syncs raising),
    then records one step as a CUDA graph, the env's generator registered, and returns it. The env
    has taken four steps (the last a warm-up on a side stream, as ``torch.cuda.graph`` wants); the
    recorded step has not run."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            env.step(action)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        env.step(action)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(env.generator)
    with torch.cuda.graph(graph):
        env.step(action)
    return graph


def check_live_reference_worlds(env: Any, generate_world: Callable[..., Any], render_symbolic: Callable[..., Any],
                                params: Any, static_params: Any, fields: Iterable[str]) -> None:
    """Fresh reference worlds (JAX, one per env of ``env``) imported through ``set_state`` give the
    reference's symbolic observation, and come back unchanged through ``get_state``."""
    import jax

    keys = jax.random.split(jax.random.PRNGKey(21), env.num_envs)
    states = jax.jit(jax.vmap(lambda k: generate_world(k, params, static_params)))(keys)
    want_obs = torch.as_tensor(np.asarray(jax.jit(jax.vmap(render_symbolic))(states)))
    leaves = reference_leaves(states, fields)
    env.set_state(leaves)
    assert torch.equal(env.obs.view(torch.int32), want_obs.view(torch.int32))
    assert not mismatch(env.get_state(), leaves)


def check_state_round_trip(make: Callable[..., Any], game: Any, n: int, steps: int) -> tuple[Any, dict[str, torch.Tensor]]:
    """A Craftax env's state after ``steps`` random steps, set into an env of another seed, reads
    back the same and observes the same; the same draws then step both to the same next state;
    a state with a leaf missing is refused. Returns (that env, the state) for further checks."""
    a = make(n, seed=1)
    for _ in range(steps):
        a.step(a.action_space.sample(n))
    state = a.get_state()
    b = make(n, seed=2)
    b.set_state(state)
    assert not mismatch(b.get_state(), state)
    assert torch.equal(b.obs, a.obs)
    # same state, same draws: the same next state
    action = a.action_space.sample(n)
    draws = game.sample_draws(n, torch.Generator().manual_seed(0), torch.device("cpu"))
    ra, ta = game.step(a.s, action, draws, a.tables)
    rb, tb = game.step(b.s, action, draws, b.tables)
    assert torch.equal(ra, rb) and torch.equal(ta, tb) and not mismatch(a.get_state(), b.get_state())
    with pytest.raises(ValueError, match="keys differ"):
        b.set_state({k: v for k, v in state.items() if k != "map"})
    return b, state


def check_cuda_steps_match_cpu(make: Callable[..., Any], game: Any, n: int, steps: int, num_actions: int) -> None:
    """On CUDA: a Craftax game's rules step ``n`` envs as on the CPU, given the same actions and
    draws, for ``steps`` steps (reward and termination each step, every state leaf at the end)."""
    cpu, gpu = make(n, "cpu", seed=0), make(n, "cuda", seed=0)
    gpu.set_state({k: v.cuda() for k, v in cpu.get_state().items()})
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        action = torch.randint(0, num_actions, (n,), generator=g)
        draws = game.sample_draws(n, g, torch.device("cpu"))
        rc, tc = game.step(cpu.s, action, draws, cpu.tables)
        rg, tg = game.step(gpu.s, action.cuda(), {k: v.cuda() for k, v in draws.items()}, gpu.tables)
        assert torch.equal(rc, rg.cpu()) and torch.equal(tc, tg.cpu())
    assert not mismatch(gpu.get_state(), cpu.get_state())
