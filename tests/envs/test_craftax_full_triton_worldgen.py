"""The full game's world generation as Triton kernels (``noeira.envs.craftax_full.triton_worldgen``)
against the torch path (``craftax_full.worldgen``, itself checked against the JAX reference in
test_craftax_full.py): fed the same draws, keyed (``keyed_draws``: the env's worlds) or from a
generator (``sample_world_draws``), the kernels give the torch path's floors and states bit for
bit, every leaf and every byte of a state's row.

On a CPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, which conftest.py sets
before Triton is imported; slow, ~0.1 s a floor, so the CPU cases make 16 worlds); on CUDA they
are compiled and the cases make 512.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="the world generation kernels need Triton (pip install triton)")

from noeira.envs.craftax_full import triton_worldgen as tw  # noqa: E402
from noeira.envs.craftax_full import worldgen as wg  # noqa: E402
from noeira.envs.craftax_full.constants import DARK_LEVELS, MAP_SIZE, STONE  # noqa: E402
from noeira.envs.craftax_full.state import state_of  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
pytestmark = pytest.mark.usefixtures("one_thread")


def _worlds(dev: torch.device) -> int:
    return 16 if dev.type == "cpu" else 512


def _draws(kind: str, k: int, dev: torch.device) -> dict[str, torch.Tensor]:
    """``k`` worlds' draws: keyed as the env's queue and its resets number them (two keys, high
    serial words), or from a generator."""
    if kind == "keyed":
        half = k // 2
        key = torch.tensor([0x5EED], device=dev)
        a = wg.keyed_draws(key, torch.full((half,), wg.QUEUE_STREAM, device=dev),
                           torch.arange(half, device=dev) + (1 << 33))
        b = wg.keyed_draws(key + 1, torch.arange(k - half, device=dev), torch.full((k - half,), 3, device=dev))
        return {name: torch.cat([a[name], b[name]]) for name in a}
    return wg.sample_world_draws(k, torch.Generator(device=dev).manual_seed(5), dev)


def _same(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...], names: tuple[str, ...]) -> None:
    for name, g, w in zip(names, got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        differ = int((g != w).sum())
        assert differ == 0, f"{name}: {differ} elements differ"


@pytest.mark.parametrize("kind", ["keyed", "sampled"])
@pytest.mark.parametrize("device", DEVICES)
def test_smooth_floors_kernel_gives_the_torch_floors(device: str, kind: str, kernel_device) -> None:  # noqa: ANN001
    """The smooth floors' kernel gives ``smooth_floors``' blocks, items, light and ladders, on
    worlds that show the reference's quirks: a dark floor's ladder up near an edge (its light
    patch wrapped), the graveyard's stone at (0, 0), lava glowing."""
    dev = kernel_device(device)
    draws = _draws(kind, _worlds(dev), dev)
    want = wg.smooth_floors(draws)
    _same(tw.smooth_floors(draws), want, ("map", "item", "light", "down", "up"))
    mp, _, light, _, up = want
    dark = [wg.SMOOTH_LEVELS.index(lv) for lv in DARK_LEVELS]
    near_edge = (up[:, dark] // MAP_SIZE < 4) | (up[:, dark] % MAP_SIZE < 4)
    assert bool(near_edge.any()), "no ladder up near an edge: the sample misses the wrapped light patch"
    assert bool((mp[:, wg.SMOOTH_LEVELS.index(8), 0, 0] == STONE).all())
    assert bool(((light > 0) & (light < 1)).any())


@pytest.mark.parametrize("kind", ["keyed", "sampled"])
@pytest.mark.parametrize("device", DEVICES)
def test_dungeon_floors_kernel_gives_the_torch_floors(device: str, kind: str, kernel_device) -> None:  # noqa: ANN001
    """The dungeon floors' kernel gives ``dungeon_floors``' blocks, items and ladders."""
    dev = kernel_device(device)
    draws = _draws(kind, _worlds(dev), dev)
    _same(tw.dungeon_floors(draws), wg.dungeon_floors(draws), ("map", "item", "down", "up"))


LIGHT0 = 0.6180339  # any float32 value: the kernels write what they are given


@pytest.mark.parametrize("kind", ["keyed", "sampled"])
@pytest.mark.parametrize("device", DEVICES)
def test_worlds_kernel_writes_the_torch_states(device: str, kind: str, kernel_device) -> None:  # noqa: ANN001
    """``worlds_kernel`` writes ``world_from_draws``' states (torch path) into the rows named of an
    arena full of junk, every byte of those rows (every leaf equal, the padding too), and leaves
    the other rows alone; ``world_from_draws(kernel=True)`` gives the same states. Two worlds'
    potion draws tie (equal draws keep their order)."""
    from noeira.envs.craftax_full.state import ROW_BYTES, STATE_FIELDS, state_of

    dev = kernel_device(device)
    k = _worlds(dev)
    draws = _draws(kind, k, dev)
    draws["u_potion"][:2] = torch.tensor([[0.5, 0.25, 0.5, 0.25, 0.125, 0.5], [0.75] * 6], device=dev)
    want = wg.world_from_draws(draws, LIGHT0, kernel=False)
    size = 2 * k + 3
    arena = torch.randint(0, 256, (size, ROW_BYTES), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    arena = arena.to(dev)
    before = arena.clone()
    rows = torch.randperm(size, generator=torch.Generator().manual_seed(3))[:k].to(dev)
    tw.worlds_kernel()(draws, LIGHT0, arena, rows)
    got = state_of(arena.index_select(0, rows))
    for key in STATE_FIELDS:
        assert torch.equal(got[key], want[key]), f"{key} differs"
    assert torch.equal(got.arena, want.arena), "a byte between the fields differs"
    others = torch.ones(size, dtype=torch.bool, device=dev)
    others[rows] = False
    assert torch.equal(arena[others], before[others]), "a row not named was written"
    if kind == "keyed":  # the same states through world_from_draws' kernel path
        assert torch.equal(wg.world_from_draws(draws, LIGHT0, kernel=True).arena, want.arena)


@pytest.mark.parametrize("device", DEVICES)
def test_generate_keyed_through_the_kernels(device: str, kernel_device) -> None:  # noqa: ANN001
    """``generate_keyed`` with the kernels, in chunks (each written straight into its rows), gives
    the torch path's states."""
    dev = kernel_device(device)
    k = 10 if dev.type == "cpu" else 600
    key = torch.tensor([99], device=dev)
    stream, serial = torch.full((k,), wg.QUEUE_STREAM, device=dev), torch.arange(k, device=dev) * 7
    want = wg.generate_keyed(key, stream, serial, LIGHT0, chunk=k, kernel=False)
    got = wg.generate_keyed(key, stream, serial, LIGHT0, chunk=k // 3, kernel=True)
    assert torch.equal(got.arena, want.arena)


@pytest.mark.parametrize("device", DEVICES)
def test_generate_keyed_into_skips_negative_serials(device: str, kernel_device) -> None:  # noqa: ANN001
    """Into given states, the kernels make the worlds of the non-negative serials (the torch
    path's) and leave the other rows as they were: the queue's refill makes only what it needs."""
    dev = kernel_device(device)
    k = 6 if dev.type == "cpu" else 600
    key = torch.tensor([99], device=dev)
    stream = torch.full((k,), wg.QUEUE_STREAM, device=dev)
    serial = torch.arange(k, device=dev) * 7
    skip = torch.arange(k, device=dev) % 3 == 1
    want = wg.generate_keyed(key, stream, serial, LIGHT0, chunk=k, kernel=False)
    into = state_of(torch.randint(0, 256, want.arena.shape, dtype=torch.uint8, device=dev))
    before = into.arena.clone()
    got = wg.generate_keyed(key, stream, torch.where(skip, -1, serial), LIGHT0, chunk=k, kernel=True, into=into)
    assert got is into
    assert torch.equal(into.arena[~skip], want.arena[~skip]) and torch.equal(into.arena[skip], before[skip])


def test_env_makes_its_worlds_through_the_kernels(kernel_device) -> None:  # noqa: ANN001
    """The env with ``worldgen_kernel = "triton"`` (here in Triton's interpreter) has the torch
    env's worlds: at reset, in its queue, and in the envs that die and take the queue's next
    world; the step with the kernels' launches in it stays capture-safe
    (``noeira.core.testing.capture``)."""
    from noeira.core import make_env
    from noeira.core.testing import CaptureHazards, format_hazards

    kernel_device("cpu")
    envs = [make_env("craftax", num_envs=2, backend="cpu", seed=0, obs="compact", resets="queue", queue_size=3,
                     queue_refill=1, worldgen_kernel=kind) for kind in ("torch", "triton")]
    assert envs[1]._world_kernel and envs[0]._world_kernel is False
    assert torch.equal(envs[0].s.arena, envs[1].s.arena)
    det = CaptureHazards()
    action = torch.zeros(2, dtype=torch.long)
    for t in range(3):
        results = []
        for i, env in enumerate(envs):
            state = env.get_state()
            state["player_health"][t % 2] = 0.0  # one env dies this step and takes the queue's next world
            env.set_state(state)
            with det if i == 1 and t > 0 else torch.no_grad():
                results.append(env.step(action))
        assert torch.equal(results[0].obs, results[1].obs) and bool(results[1].terminated[t % 2])
        assert torch.equal(envs[0].s.arena, envs[1].s.arena), t
        assert torch.equal(envs[0].queue.arena, envs[1].queue.arena), t
    assert not det.hazards, format_hazards(det.hazards)
