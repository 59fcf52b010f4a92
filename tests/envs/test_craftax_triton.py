"""Craftax-Classic's fused Triton step (``noeira.envs.craftax.triton_step``) against the torch
step (``noeira.envs.craftax.game``, itself checked against the JAX reference in
test_craftax.py): fed the same variates, the kernels give the same next state, reward,
termination, episode bookkeeping and observations, bit for bit.

On a CPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, which conftest.py
sets before Triton is imported; slow, so the CPU cases are small); on CUDA they are compiled, and the
cuda cases also record the step in a CUDA graph and check the kernel's own random stream
statistically.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

pytest.importorskip("triton", reason="the fused Craftax step needs Triton (pip install triton)")

from env_testing import load_ref, mismatch  # noqa: E402

from noeira.core import make_env  # noqa: E402
from noeira.envs.craftax import game, render  # noqa: E402
from noeira.envs.craftax import triton_step as ts  # noqa: E402
from noeira.envs.craftax.constants import ACHIEVEMENTS  # noqa: E402
from noeira.envs.craftax.state import EXPORT_FIELDS, export_state  # noqa: E402

DATA = Path(__file__).with_name("data") / "craftax_ref.npz"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    return load_ref(DATA)


def _env(n: int, device: torch.device, **kw: object):
    return make_env("craftax-classic", num_envs=n, backend=device.type, **{"seed": 0, **kw})


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_replays_the_reference_steps(ref: dict[str, np.ndarray], device: str, kernel_device) -> None:
    """Every action from the prepared states and the short random trajectories of the JAX
    reference, with its recorded draws: the kernels' next state, reward and done are the
    reference's (so the torch step's), leaf for leaf."""
    dev = kernel_device(device)
    before = {k: torch.as_tensor(ref[f"step_before.{k}"], device=dev) for k in EXPORT_FIELDS}
    want = {k: torch.as_tensor(ref[f"step_after.{k}"]) for k in EXPORT_FIELDS}
    n = before["map"].shape[0]
    env = _env(n, dev, kernel="torch")
    env.set_state(before)
    draws = {"u": torch.as_tensor(ref["step_u"], device=dev), "dirs": torch.as_tensor(ref["step_dirs"], device=dev)}
    reward, terminated = ts.Step(n, dev).game(env.s, torch.as_tensor(ref["step_action"], device=dev), env.tables,
                                              draws=draws)
    got = export_state(env.s)
    assert not mismatch(got, want), f"state leaves differ (key: rows): {mismatch(got, want)}"
    assert torch.equal(reward.cpu().view(torch.int32), torch.as_tensor(ref["step_reward"]).view(torch.int32))
    assert torch.equal(terminated.cpu() | (got["timestep"].cpu() >= 10000), torch.as_tensor(ref["step_done"]))


@pytest.mark.parametrize("device", DEVICES)
def test_own_variates_replay_in_torch(device: str, kernel_device) -> None:
    """The kernels' own Philox variates, written out, drive the torch step to the same state;
    they are uniform in [0, 1) and 0..7 as game.sample_draws' are, and the key decides them."""
    dev = kernel_device(device)
    n = 64 if dev.type == "cpu" else 4096
    a, b = _env(n, dev, kernel="torch", seed=3), _env(n, dev, kernel="torch", seed=3)
    k = ts.Step(n, dev)
    seed = torch.tensor([1234], dtype=torch.int64, device=dev)
    g = torch.Generator(device=dev).manual_seed(0)
    us = []
    for _ in range(2 if dev.type == "cpu" else 20):
        action = torch.randint(0, 17, (n,), generator=g, device=dev)
        draws = {"u": torch.zeros(n, 17, device=dev), "dirs": torch.zeros(n, 8, dtype=torch.int64, device=dev),
                 "cand": torch.zeros(n, 3, game.SPAWN_TRIES, device=dev)}
        rk, tk = k.game(b.s, action, b.tables, draws=draws, seed=seed, write_draws=True)
        rt, tt = game.step(a.s, action, draws, a.tables)
        assert torch.equal(rk, rt) and torch.equal(tk, tt)
        assert not mismatch(export_state(b.s), export_state(a.s))
        us.append(draws["u"].clone())
        seed += 1
    u = torch.cat(us).cpu()
    assert (u >= 0).all() and (u < 1).all() and abs(u.mean().item() - 0.5) < 0.02
    assert set(draws["dirs"].unique().tolist()) == set(range(8))
    assert not torch.equal(us[0], us[1]), "a new key draws new variates"


def _aligned(n: int, dev: torch.device, obs: str):
    """A torch-step env and a kernel env in the same state (the same seed: the same world key and
    episode counts, so the same next worlds); some worlds about to die and some at the time limit."""
    a, b = _env(n, dev, kernel="torch", obs=obs, seed=3), _env(n, dev, kernel="triton", obs=obs, seed=3)
    st = a.get_state()
    st["player_health"][:20] = 1  # more than a program's worth of worlds end in one step
    st["player_food"][:20] = 0
    st["player_drink"][:20] = 0
    st["player_recover"][:20] = -14.0
    st["timestep"][20:24] = 9996
    a.set_state(st)
    b.set_state(st)
    assert torch.equal(a.world_key, b.world_key) and torch.equal(a.episode, b.episode)
    return a, b


@pytest.mark.parametrize("device", DEVICES)
def test_env_step_on_the_kernels_equals_the_torch_env(device: str, kernel_device) -> None:
    """The env's whole step on the kernels (rules, time limit, episode sums, the reset worlds
    generated by the world kernel, observation and final observation) equals TensorEnv's on the
    torch step, given the same variates, in both observation layouts. On the CPU the queue kernels (spawn scans, reset
    observations) run as one program of other widths, which must walk its whole queue."""
    dev = kernel_device(device)
    cpu = dev.type == "cpu"
    n, steps = (32, 6) if cpu else (2048, 40)
    for obs in ("compact",) if cpu else ("compact", "symbolic"):
        a, b = _aligned(n, dev, obs)
        if cpu:
            b._triton.configure(spawn_per_sm=0, obs_per_sm=0, spawn_lanes=1, obs_lanes=8)
        g = torch.Generator(device=dev).manual_seed(0)
        queued, most_spawns, most_done = 0, 0, 0
        for i in range(steps):
            action = torch.randint(0, 17, (n,), generator=g, device=dev)
            draws = game.sample_draws(n, g, dev)
            with mock.patch.object(game, "sample_draws", lambda *args, draws=draws, **kw: draws):
                ra = a.step(action)
            rb = b._kernel_step(action, draws)
            queued += int(b._triton.queued)
            most_spawns = max(most_spawns, int(b._triton.queued))
            most_done = max(most_done, int(b._triton.done_count))
            for field in ("obs", "final_obs", "reward", "terminated", "truncated"):
                x, y = getattr(ra, field), getattr(rb, field)
                assert torch.equal(x, y), f"{obs}, step {i}: {field} differs"
            assert not mismatch(b.get_state(), a.get_state()), f"{obs}, step {i}"
            for name in ("elapsed", "episode_return", "episode_length", "episode"):
                assert torch.equal(getattr(a, name), getattr(b, name)), f"{obs}, step {i}: {name}"
        sa, sb = a.pop_episode_stats(), b.pop_episode_stats()
        assert sa["count"].item() >= 12 and all(torch.equal(sa[k], sb[k]) for k in sa), (sa, sb)
        assert queued > 0, "no spawn left to the scan: the spawn kernel went untested"
        assert most_done > b._triton.launch["obs_lanes"], "no step ended more worlds than a program takes"
        assert not cpu or most_spawns > b._triton.launch["spawn_lanes"], "no step queued more scans than a program takes"


@pytest.mark.parametrize("device", DEVICES)
def test_observation_kernels(ref: dict[str, np.ndarray], device: str, kernel_device) -> None:
    """On the reference's observation states: the compact observation kernel writes what
    render.compact does, and the expansion kernel gives the reference's 1,345 floats."""
    dev = kernel_device(device)
    state = {k: torch.as_tensor(ref[f"obs_state.{k}"], device=dev) for k in EXPORT_FIELDS}
    n = state["map"].shape[0]
    env = _env(n, dev, kernel="torch", obs="compact")
    env.set_state(state)
    code = torch.zeros(n, render.COMPACT_SIZE, dtype=torch.uint8, device=dev)
    ts.observe(env.s, code)
    assert torch.equal(code, env.obs)
    floats = torch.zeros(n, 1345, device=dev)
    ts.expand(code, floats, render._tenths_table(dev))
    assert torch.equal(floats.cpu().view(torch.int32), torch.as_tensor(ref["obs_obs"]).view(torch.int32))
    # into a wider bf16 buffer (a network's padded input): torch's cast of the same floats, the rest untouched
    wide = torch.full((n, 1352), 7.0, dtype=torch.bfloat16, device=dev)
    ts.expand(code, wide, render._tenths_table(dev))
    assert torch.equal(wide[:, :1345].view(torch.int16), floats.to(torch.bfloat16).view(torch.int16))
    assert bool((wide[:, 1345:] == 7.0).all())


@pytest.mark.parametrize("device", DEVICES)
def test_observation_kernel_mob_flags(device: str, kernel_device) -> None:
    """Mob slots crowded around players near the map's edges, many on one view cell, some off
    screen above or left of the view where their wrapped index lands on the same cell, some dead:
    the kernel's mob flags (and every other byte) are render.compact's, where a later slot of a
    kind clears the flag an earlier one set (the reference's scatter; rare in play)."""
    dev = kernel_device(device)
    n = 64
    env = _env(n, dev, kernel="torch", obs="compact")
    s = env.s
    g = torch.Generator().manual_seed(0)
    p = torch.randint(0, 64, (n, 2), generator=g)
    p[: n // 4] = torch.randint(0, 5, (n // 4, 2), generator=g)
    p[n // 4 : n // 2] = torch.randint(59, 64, (n // 4, 2), generator=g)
    s["player_position"].copy_(p.to(s["player_position"].dtype))
    for name in ("zombies", "cows", "skeletons", "arrows"):
        k = s[f"{name}.position"].shape[1]
        off = torch.stack([torch.randint(-3, 4, (n, k), generator=g), torch.randint(-4, 5, (n, k), generator=g)], 2)
        off = torch.where(torch.rand(n, k, 1, generator=g) < 0.5, off[:, :1], off)  # on slot 0's cell
        off[:, :, 0] -= 7 * (torch.rand(n, k, generator=g) < 0.25)  # off screen, wrapping onto the same cell
        off[:, :, 1] -= 9 * (torch.rand(n, k, generator=g) < 0.25)
        off[:, :, 0] += 20 * (torch.rand(n, k, generator=g) < 0.1)  # far away
        s[f"{name}.position"].copy_((p.unsqueeze(1) + off).to(s["player_position"].dtype))
        s[f"{name}.mask"].copy_(torch.rand(n, k, generator=g) < 0.6)
    want = torch.zeros(n, render.COMPACT_SIZE, dtype=torch.uint8, device=dev)
    render.compact(s, want)
    got = torch.zeros_like(want)
    ts.observe(s, got)
    assert torch.equal(got, want), f"rows differ: {(got != want).any(1).nonzero().squeeze(1).tolist()}"
    assert (want[:, render.MOB_BYTES : render.SCALAR_BYTES] != 0).sum() > 100, "too few mob flags to test"


def test_kernel_choice_errors() -> None:
    from noeira.core.errors import ConfigError

    with pytest.raises(ConfigError, match="env.kernel: must be"):
        _env(2, torch.device("cpu"), kernel="cuda")
    with pytest.raises(ConfigError, match="env.obs: must be"):
        _env(2, torch.device("cpu"), obs="pixels")
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(ConfigError, match="TRITON_INTERPRET=1"):
            _env(2, torch.device("cpu"), kernel="triton")
    assert _env(2, torch.device("cpu")).kernel == "torch"  # auto on a CPU


@pytest.mark.cuda
def test_kernel_env_is_deterministic_records_and_matches_the_reference_statistics(ref: dict[str, np.ndarray],
                                                                                  kernel_device) -> None:
    """On CUDA: the kernel env is the default; a seed fixes its trajectory; its step makes no host
    sync and replays from a CUDA graph as it runs eagerly; random-policy episodes (length,
    return, achievement rates) agree with the JAX reference's within confidence bounds."""
    dev = kernel_device("cuda")
    n = 256
    a, b = _env(n, dev, seed=5), _env(n, dev, seed=5)
    assert a.kernel == "triton"
    g = torch.Generator(device=dev).manual_seed(6)
    actions = [torch.randint(0, 17, (n,), generator=g, device=dev) for _ in range(700)]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for act in actions[:3]:
            ra, rb = a.step(act), b.step(act)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(ra.obs, rb.obs) and not mismatch(a.get_state(), b.get_state())
    # record one step of `a` and replay it against `b` stepping eagerly
    action = torch.zeros(n, dtype=torch.long, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a.step(action)
        b.step(action)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(a.generator)
    with torch.cuda.graph(graph):
        a.step(action)  # recorded, not run: a and b are still in the same state
    for act in actions[3:23]:
        action.copy_(act)
        graph.replay()
        rb = b.step(act)
        assert torch.equal(a._result.obs, rb.obs) and torch.equal(a._result.reward, rb.reward)
    assert not mismatch(a.get_state(), b.get_state())
    # statistics of random-policy episodes
    env = _env(n, dev, seed=7)
    env.pop_episode_stats()
    for act in actions:
        env.step(act)
    stats = {k: v.item() for k, v in env.pop_episode_stats().items()}
    count = stats["count"]
    assert count > 300
    ref_len = ref["roll_length"].astype(np.float64)
    mean_len = stats["length_sum"] / count
    assert abs(mean_len - ref_len.mean()) < 4.5 * ref_len.std() / math.sqrt(count) + 0.02 * ref_len.mean()
    ref_ret = ref["roll_return"].astype(np.float64)
    mean_ret = stats["return_sum"] / count
    assert abs(mean_ret - ref_ret.mean()) < 4.5 * math.sqrt(ref_ret.var() / len(ref_ret) + ref_ret.var() / count)
    ref_rate = ref["roll_achievements"].mean(0)
    for i, name in enumerate(ACHIEVEMENTS):
        p, q = stats[f"achievement_{name}_sum"] / count, ref_rate[i]
        se = math.sqrt(q * (1 - q) / len(ref["roll_achievements"]) + p * (1 - p) / count) + 1e-3
        assert abs(p - q) < 4.5 * se + 0.01, f"{name}: ours {p:.3f}, reference {q:.3f}"
