"""Craftax-Classic's world generation as a Triton kernel (``noeira.envs.craftax.triton_worldgen``)
against the torch generator (``noeira.envs.craftax.worldgen``, itself checked against the JAX
reference in test_craftax.py): fed the same draws, the kernel writes the same worlds into the
rows its list names (the map up to cells where a float rounding tips a threshold; none so
far), and the reference's worlds from its recorded draws; keyed by (run key, env, episode) it
draws the torch reference's Philox variates, so it makes the same world for each episode.
Its grid is fixed: fewer programs than worlds walk the list up to the count on the device.

On a CPU the kernel runs in Triton's interpreter (``TRITON_INTERPRET=1``, which conftest.py
sets before Triton is imported; slow, so the CPU cases are small); on CUDA it is compiled, and
the cuda cases also record it in a CUDA graph and check that it does not sync with the host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("triton", reason="the Craftax world generation kernel needs Triton (pip install triton)")

from noeira.envs.craftax import triton_worldgen as tw  # noqa: E402
from noeira.envs.craftax import worldgen  # noqa: E402
from noeira.envs.craftax.constants import LAVA  # noqa: E402
from noeira.envs.craftax.state import STATE_FIELDS, empty_state  # noqa: E402

DATA = Path(__file__).with_name("data") / "craftax_ref.npz"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
pytestmark = pytest.mark.usefixtures("one_thread")
LIGHT0 = 0.7150233  # any float32 value: the kernel writes what it is given
DRAW_KEYS = ("angles_water", "angles_mountain", "angles_path", "angles_tree", "u_coal", "u_iron", "u_diamond",
             "u_tree", "u_pick")


def _junk_pool(n: int, dev: torch.device) -> dict[str, torch.Tensor]:
    """A pool whose every entry is garbage (so a field the kernel forgets shows)."""
    pool = empty_state(n, dev)
    for v in pool.values():
        v.fill_(True if v.dtype == torch.bool else 7)
    return pool


def _map_differs(got: torch.Tensor, want: torch.Tensor) -> int:
    return int((got.cpu() != want.cpu()).sum())


def _check_worlds(pool: dict[str, torch.Tensor], rows: torch.Tensor, want: dict[str, torch.Tensor]) -> int:
    """Every field but the map equal; returns how many map cells differ."""
    for key in STATE_FIELDS:
        if key != "map":
            assert torch.equal(pool[key][rows].cpu(), want[key].cpu()), f"{key} differs"
    return _map_differs(pool["map"][rows], want["map"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("chunk", "keep"), [(16, True), (64, False)])
def test_same_draws_as_world_from_draws(device: str, chunk: int, keep: bool, kernel_device) -> None:
    """Fed ``sample_world_draws``' variates, the kernel writes ``world_from_draws``' worlds (light
    level ``light0``) into the rows named, in their order, and leaves the other rows alone; with
    the noise kept from stage 2 or computed again, ``chunk`` map rows at a time."""
    dev = kernel_device(device)
    k = (3 if chunk == 16 else 6) if dev.type == "cpu" else 512
    size = 2 * k + 3
    g = torch.Generator(device=dev).manual_seed(11)
    draws = worldgen.sample_world_draws(k, g, dev)
    want = worldgen.world_from_draws(draws)
    want["light_level"].fill_(LIGHT0)
    pool = _junk_pool(size, dev)
    before = {key: v.clone() for key, v in pool.items()}
    rows = torch.randperm(size, generator=torch.Generator().manual_seed(1))[:k].to(dev)
    tw.generate_into(pool, rows, LIGHT0, draws=draws, rows=chunk, keep=keep, per_sm=1 if dev.type == "cuda" else 2)
    differ = _check_worlds(pool, rows, want)
    print(f"\n{differ} map cells differ over {k} worlds (rows={chunk}, keep={keep}, {device})")
    assert differ <= 2 * k, f"{differ} map cells differ over {k} worlds"
    others = torch.ones(size, dtype=torch.bool, device=dev)
    others[rows] = False
    for key, v in pool.items():
        assert torch.equal(v[others], before[key][others]), f"{key}: a row not named was written"
    assert (want["map"] == LAVA).any(), "the worlds exercise lava"


@pytest.mark.parametrize("device", DEVICES)
def test_reference_draws_make_the_reference_worlds(device: str, kernel_device) -> None:
    """Fed the JAX reference's recorded noise angles and per-cell draws, the kernel writes the
    reference's maps (up to threshold flips of XLA's fused arithmetic, as worldgen does)."""
    dev = kernel_device(device)
    with np.load(DATA) as f:
        draws = {key: torch.as_tensor(f[f"gen_{key}"], device=dev) for key in DRAW_KEYS}
        want = torch.as_tensor(f["gen_map"])
    k = want.shape[0]
    pool = _junk_pool(k + 2, dev)
    rows = torch.arange(1, k + 1, device=dev)
    tw.generate_into(pool, rows, 1.0, draws=draws)
    got = pool["map"][rows]
    differ = _map_differs(got, want)
    print(f"\n{differ} map cells differ from the reference's over {k} worlds ({device})")
    assert differ <= 2 * k, f"{differ} cells differ over {k} worlds"
    assert (got.cpu() == LAVA).any() and (got[:, 32, 32] == 2).all()


@pytest.mark.parametrize("device", DEVICES)
def test_episode_keys_make_the_torch_worlds(device: str, kernel_device) -> None:
    """Keyed by the run's key, the kernel writes the world of the next episode of each env its
    list names, up to the count on the device (a list in any order, walked by fewer programs
    than it holds): ``worldgen.generate``'s world for (env, its episode count + 1), every other
    field a fresh world's; it counts those episodes and leaves the other envs alone. Another
    episode or another key, another world."""
    dev = kernel_device(device)
    n, k = (9, 4) if dev.type == "cpu" else (4096, 2048)
    key = torch.tensor([12345], dtype=torch.int64, device=dev)
    episode = torch.arange(n, dtype=torch.int64, device=dev) % 3 - 1  # -1, 0, 1: the first, second, third
    episode[1] = (1 << 32) + 5  # the counter's high word counts
    listed = torch.randperm(n, generator=torch.Generator().manual_seed(2))[:k + 2].to(dev).int()
    listed[0] = 1
    rows = listed[:k].long()
    pool = _junk_pool(n, dev)
    before = {key_: v.clone() for key_, v in pool.items()}
    gen = tw.WorldGen(k + 2, dev)
    if dev.type == "cpu":
        gen.configure(per_sm=2)  # one "SM" under the interpreter: fewer programs than the list
    assert gen.programs < k, "the grid walks its list"
    count = torch.tensor([k], dtype=torch.int32, device=dev)
    start = episode.clone()
    gen(pool, listed, count, LIGHT0, key=key, episode=episode)
    assert torch.equal(episode[rows], start[rows] + 1), "the listed envs start their next episode"
    others = torch.ones(n, dtype=torch.bool, device=dev)
    others[rows] = False
    assert torch.equal(episode[others], start[others])
    for key_, v in pool.items():
        assert torch.equal(v[others], before[key_][others]), f"{key_}: an env past the count was written"
    want = worldgen.generate(key, rows, episode[rows], LIGHT0)
    differ = _check_worlds(pool, rows, want)
    print(f"\n{differ} map cells differ over {k} worlds ({device})")
    assert differ <= 2 * k
    again = _junk_pool(n, dev)
    gen(again, listed, count, LIGHT0, key=key, episode=episode)  # each env's next episode
    assert all(not torch.equal(again["map"][r], pool["map"][r]) for r in rows.tolist())
    other = worldgen.generate(key + 1, rows, episode[rows], LIGHT0)["map"]
    assert all(not torch.equal(other[i], again["map"][r]) for i, r in enumerate(rows.tolist()))


@pytest.mark.cuda
def test_graph_replay_and_no_host_sync() -> None:
    """On CUDA: the call does not sync with the host, and recorded in a CUDA graph it replays
    for the list and count of each replay (the episode counters advanced on the device)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    dev = torch.device("cuda")
    n = 4096
    pool = _junk_pool(n, dev)
    gen = tw.WorldGen(n, dev)
    listed = torch.randperm(n, device=dev).int()
    count = torch.tensor([1000], dtype=torch.int32, device=dev)
    key = torch.tensor([7], dtype=torch.int64, device=dev)
    episode = torch.zeros(n, dtype=torch.int64, device=dev)
    gen(pool, listed, count, LIGHT0, key=key, episode=episode)  # compile outside the capture
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        gen(pool, listed, count, LIGHT0, key=key, episode=episode)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # records on a side stream of its own
        gen(pool, listed, count, LIGHT0, key=key, episode=episode)
    eager_pool, eager_episode = _junk_pool(n, dev), episode.clone()
    for size in (300, 2500):
        listed.copy_(torch.randperm(n, device=dev).int())
        count.fill_(size)
        graph.replay()
        gen(eager_pool, listed, count, LIGHT0, key=key, episode=eager_episode)
        torch.cuda.synchronize()
        rows = listed[:size].long()
        assert torch.equal(episode, eager_episode)
        for key_ in STATE_FIELDS:
            assert torch.equal(pool[key_][rows], eager_pool[key_][rows]), f"{key_}: the graph's worlds differ"
