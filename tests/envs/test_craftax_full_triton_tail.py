"""The full game's tail as Triton (``craftax_full.triton_tail``, on ``craftax_full.triton_lanes``)
against the torch tail (``craftax_full.game.tail`` then ``leave_level``), byte for byte on the
state's arena.

On a CPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest.py
before Triton is imported), so the batches are small.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="the Triton tail needs Triton (pip install triton)")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from noeira.envs.craftax_full import game  # noqa: E402
from noeira.envs.craftax_full import triton_lanes as tln  # noqa: E402
from noeira.envs.craftax_full.state import empty_state  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


# -- the lane helpers --------------------------------------------------------------------------------
@triton.jit
def _helpers_kernel(a8, a32, af, bits_p, u_p, xy_p, out_i, out_f, n, BLOCK: tl.constexpr):  # noqa: N803
    e64, live, r8, r32 = tln.lanes(n, BLOCK)
    bits = tl.load(bits_p + e64, mask=live, other=0)
    u = tl.load(u_p + e64, mask=live, other=0.0)
    x = tl.load(xy_p + e64 * 2, mask=live, other=0)
    y = tl.load(xy_p + e64 * 2 + 1, mask=live, other=0)
    lvl = tln.ld32(a32, r32, tln.F_PLAYER_LEVEL, live)
    idx, ok = tln.cell(lvl, x, y)
    tl.store(out_i + e64 * 4, tln.first(bits, 5), mask=live)
    tl.store(out_i + e64 * 4 + 1, tln.pick(bits, 5, u), mask=live)
    tl.store(out_i + e64 * 4 + 2, idx, mask=live)
    tl.store(out_i + e64 * 4 + 3, ok.to(tl.int32), mask=live)
    p0, p1, p2 = tln.player_damage(a32, r32, live)
    tl.store(out_f + e64 * 6, p0, mask=live)
    tl.store(out_f + e64 * 6 + 1, p1, mask=live)
    tl.store(out_f + e64 * 6 + 2, p2, mask=live)
    v0 = tl.load(u_p + e64, mask=live, other=0.0) * 9.0
    d = tln.damage_to_player(a32, r32, lvl, v0, p1, p2, live)
    tl.store(out_f + e64 * 6 + 3, d, mask=live)
    ty = (x & 7)
    m0, m1, m2 = tln.mob_damage(ty, 1)
    f0, f1, f2 = tln.defense(ty, tln.MELEE)
    tl.store(out_f + e64 * 6 + 4, tln.damage(m0, m1, m2, f0, f1, f2), mask=live)
    tl.store(out_f + e64 * 6 + 5, tln.unpack(tln.HEALTH_R, ty, 5).to(tl.float32), mask=live)


def test_lane_helpers_are_the_torch_functions() -> None:
    """first / pick (``game._first`` / ``game._pick``), the grid index with JAX's out-of-range
    semantics (``game._index``), the player's damage vector, damage through armour and enchantments
    (boss floor included) and the packed tables (damage, defense, health) against the torch code."""
    n = 200
    g = torch.Generator().manual_seed(0)
    s = empty_state(n, "cpu")
    s["player_level"].copy_(torch.randint(0, 9, (n,), generator=g))
    s["inventory.sword"].copy_(torch.randint(-1, 6, (n,), generator=g))
    s["sword_enchantment"].copy_(torch.randint(0, 3, (n,), generator=g))
    s["player_strength"].copy_(torch.randint(1, 6, (n,), generator=g))
    s["player_intelligence"].copy_(torch.randint(1, 6, (n,), generator=g))
    s["inventory.armour"].copy_(torch.randint(0, 3, (n, 4), generator=g))
    s["armour_enchantments"].copy_(torch.randint(0, 3, (n, 4), generator=g))
    bits = torch.randint(0, 32, (n,), generator=g, dtype=torch.int32)
    u = torch.rand(n, generator=g)
    xy = torch.randint(-60, 60, (n, 2), generator=g, dtype=torch.int32)
    out_i = torch.zeros((n, 4), dtype=torch.int32)
    out_f = torch.zeros((n, 6), dtype=torch.float32)
    a = s.arena
    _helpers_kernel[(triton.cdiv(n, 64),)](a, a.view(torch.int32), a.view(torch.float32), bits, u, xy, out_i, out_f,
                                           n, BLOCK=64)
    flags = ((bits.unsqueeze(1) >> torch.arange(5)) & 1).bool()
    t = game.Tables(torch.device("cpu"), torch.zeros(2))
    step = game._Step(s, t)
    step.lvl = s["player_level"].long()
    idx, ok = game._index(step.lvl, xy[:, 0], xy[:, 1])
    assert torch.equal(out_i[:, 0], game._first(flags).int())
    assert torch.equal(out_i[:, 1], game._pick(flags, u).int())
    assert torch.equal(out_i[:, 2], idx.int()) and torch.equal(out_i[:, 3], ok.int())
    vec = step.player_damage()
    assert torch.equal(out_f[:, :3], vec)
    want = step.damage_to_player(torch.stack([u * 9.0, vec[:, 1], vec[:, 2]], 1))
    assert torch.equal(out_f[:, 3], want)
    ty = (xy[:, 0] & 7).long()
    assert torch.equal(out_f[:, 4], game._Step.damage(t.damage[ty, 1], t.defense[ty, 1]))
    assert torch.equal(out_f[:, 5], t.health[ty, 2])
    assert (out_f[:, 3] != out_f[:, 3].round()).any()  # the damages are not all whole numbers
