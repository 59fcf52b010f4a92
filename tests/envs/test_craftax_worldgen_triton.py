"""Craftax-Classic's world generation as a Triton kernel (``noeira.envs.craftax.triton_worldgen``)
against the torch generator (``noeira.envs.craftax.worldgen``, itself checked against the JAX
reference in test_craftax.py): fed the same draws, the kernel writes the same worlds into the
pool rows it is given (the map up to cells where a float rounding tips a threshold; none so
far), and the reference's worlds from its recorded draws; its own Philox variates make worlds
with the torch generator's statistics, fixed by the seed.

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
from noeira.envs.craftax.constants import LAVA, NUM_BLOCKS  # noqa: E402
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
@pytest.mark.parametrize("chunk", [16, 64])
def test_same_draws_as_world_from_draws(device: str, chunk: int, kernel_device) -> None:
    """Fed ``sample_world_draws``' variates, the kernel writes ``world_from_draws``' worlds (light
    level ``light0``) into the pool rows named, in their order, and leaves the other rows alone."""
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
    tw.generate_into(pool, rows, LIGHT0, draws=draws, chunk_rows=chunk)
    differ = _check_worlds(pool, rows, want)
    print(f"\n{differ} map cells differ over {k} worlds (chunk_rows={chunk}, {device})")
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


def _stats(maps: np.ndarray) -> dict[str, np.ndarray]:
    """Block-type counts per world, and the distance from the spawn to the nearest water and tree."""
    n = maps.shape[0]
    xs, ys = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    dist = np.abs(xs - 32) + np.abs(ys - 32)
    return {"counts": np.stack([(maps == b).sum((1, 2)) for b in range(NUM_BLOCKS)], 1).astype(np.float64),
            "near": np.stack([np.where(maps == b, dist[None], 999).reshape(n, -1).min(1) for b in (3, 5)],
                             1).astype(np.float64)}


@pytest.mark.parametrize("device", DEVICES)
def test_own_variates(device: str, kernel_device) -> None:
    """The kernel's own Philox variates: its worlds' block-type counts and distances from the
    spawn to water and trees agree with the torch generator's within 4.5 standard errors; the
    other fields are world_from_draws'; the seed (read on the device, left as it is) fixes the
    worlds, world i of a call the same whatever the call's size, and another seed changes them."""
    dev = kernel_device(device)
    n, n_torch = (32, 300) if dev.type == "cpu" else (1024, 2048)
    seed = torch.tensor([12345], dtype=torch.int64, device=dev)
    pool = _junk_pool(n, dev)
    rows = torch.arange(n, device=dev).flip(0)
    tw.generate_into(pool, rows, LIGHT0, seed=seed)
    assert seed.item() == 12345
    worlds = pool["map"][rows].cpu().numpy()
    template = worldgen.world_from_draws(worldgen.sample_world_draws(1, torch.Generator(device=dev), dev))
    template["light_level"].fill_(LIGHT0)
    for key in STATE_FIELDS:
        if key != "map":
            assert torch.equal(pool[key].cpu(), template[key].cpu().expand_as(pool[key])), f"{key} differs"

    ref = worldgen.generate(n_torch, torch.Generator(device=dev).manual_seed(3), dev, LIGHT0)["map"].cpu().numpy()
    ours, theirs = _stats(worlds), _stats(ref)
    for key in ("counts", "near"):
        se = np.sqrt(ours[key].var(0) / n + theirs[key].var(0) / n_torch) + 1e-9
        z = np.abs(ours[key].mean(0) - theirs[key].mean(0)) / se
        never = (ours[key].max(0) == 0) & (theirs[key].max(0) == 0)  # invalid, out of bounds, wood, tables...
        assert ((z < 4.5) | never).all(), f"{key}: z = {np.round(z, 1)}, ours {ours[key].mean(0)}, torch {theirs[key].mean(0)}"
    assert ours["counts"][:, 10].min() >= 1, "every world has a diamond"
    assert (worlds[:, 32, 32] == 2).all()

    again = _junk_pool(4, dev)
    tw.generate_into(again, torch.arange(4, device=dev), LIGHT0, seed=seed)
    assert np.array_equal(again["map"].cpu().numpy(), worlds[:4]), "the seed fixes the worlds"
    tw.generate_into(again, torch.arange(4, device=dev), LIGHT0, seed=seed + 1)
    other = again["map"].cpu().numpy()
    assert all(not np.array_equal(other[i], worlds[i]) for i in range(4)), "another seed, other worlds"


@pytest.mark.cuda
def test_graph_replay_and_no_host_sync() -> None:
    """On CUDA: the call does not sync with the host, and recorded in a CUDA graph it replays
    what the eager call makes, the seed advanced between replays on the device."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    dev = torch.device("cuda")
    k, size = 1024, 4096
    pool = _junk_pool(size, dev)
    rows = torch.randperm(size, device=dev)[:k]
    seed = torch.tensor([7], dtype=torch.int64, device=dev)
    tw.generate_into(pool, rows, LIGHT0, seed=seed)  # compile outside the capture
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        tw.generate_into(pool, rows, LIGHT0, seed=seed)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # records on a side stream of its own
        tw.generate_into(pool, rows, LIGHT0, seed=seed)
        seed.add_(1)
    seed.fill_(100)
    for _ in range(2):
        graph.replay()
    eager = _junk_pool(size, dev)
    tw.generate_into(eager, rows, LIGHT0, seed=torch.tensor([101], dtype=torch.int64, device=dev))
    torch.cuda.synchronize()
    assert seed.item() == 102
    for key in STATE_FIELDS:
        assert torch.equal(pool[key][rows], eager[key][rows]), f"{key}: the graph's worlds differ from the eager call's"
