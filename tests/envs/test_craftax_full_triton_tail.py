"""The full game's tail as Triton (``craftax_full.triton_tail``, on ``craftax_full.triton_lanes``)
against the torch tail (``craftax_full.game.tail`` then ``leave_level``), byte for byte on the
state's arena.

On a CPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest.py
before Triton is imported), so the batches are small.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from env_testing import load_ref, ref_states

pytest.importorskip("triton", reason="the Triton tail needs Triton (pip install triton)")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from noeira.core import make_env  # noqa: E402
from noeira.envs.craftax.constants import light_tables  # noqa: E402
from noeira.envs.craftax_full import constants as C  # noqa: E402
from noeira.envs.craftax_full import game  # noqa: E402
from noeira.envs.craftax_full import triton_lanes as tln  # noqa: E402
from noeira.envs.craftax_full.constants import NUM_ACTIONS  # noqa: E402
from noeira.envs.craftax_full.state import (  # noqa: E402
    EXPORT_FIELDS,
    OFFSETS,
    STATE_FIELDS,
    State,
    empty_state,
    import_state,
    state_of,
)
from noeira.envs.craftax_full.triton_tail import run_finish, run_tail  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
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


@pytest.mark.parametrize("device", DEVICES)
def test_lane_helpers_are_the_torch_functions(device: str, kernel_device) -> None:  # noqa: ANN001
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
    dev = kernel_device(device)
    out_i = torch.zeros((n, 4), dtype=torch.int32, device=dev)
    out_f = torch.zeros((n, 6), dtype=torch.float32, device=dev)
    a = s.arena.to(dev)
    _helpers_kernel[(triton.cdiv(n, 64),)](a, a.view(torch.int32), a.view(torch.float32), bits.to(dev), u.to(dev),
                                           xy.to(dev), out_i, out_f, n, BLOCK=64, enable_fp_fusion=False)
    out_i, out_f = out_i.cpu(), out_f.cpu()
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


# -- the tail against the torch tail --------------------------------------------------------------
DATA = Path(__file__).with_name("data") / "craftax_full_ref.npz"
TABLES = game.Tables(torch.device("cpu"), light_tables(100_001)[0])


def _fields_at(columns: torch.Tensor) -> list[str]:
    """The state fields holding the arena's byte columns ``columns``."""
    out = []
    for k, (shape, dtype) in STATE_FIELDS.items():
        lo = OFFSETS[k]
        hi = lo + math.prod(shape) * dtype.itemsize
        if ((columns >= lo) & (columns < hi)).any():
            out.append(k)
    return out


def _tails(s: State, act: torch.Tensor, d: dict[str, torch.Tensor], dev: torch.device) -> tuple[State, State]:
    """(the torch tail's next state, the kernel's on ``dev``) from ``s`` (left unchanged)."""
    want = state_of(s.arena.clone())
    g = game._Step(want, TABLES)
    g.enter_level()
    game.tail(g, act, d)
    g.leave_level()
    got = state_of(s.arena.to(dev, copy=True))
    run_tail(got, act.to(dev), {k: v.to(dev) for k, v in d.items()})
    return want, state_of(got.arena.cpu())


def _check(want: State, got: State, what: str) -> None:
    bad = got.arena != want.arena
    assert not bad.any(), (f"{what}: the kernel's arena differs in fields {_fields_at(bad.any(0).nonzero().squeeze(1))}"
                           f", rows {bad.any(1).nonzero().squeeze(1)[:10].tolist()}")


def _draws(n: int, g: torch.Generator, spawn_go: float = 0.0) -> dict[str, torch.Tensor]:
    """A step's draws; in a fraction ``spawn_go`` of the worlds the three spawn draws are 0 (every
    class spawns where it can)."""
    d = game.sample_draws(n, g, torch.device("cpu"))
    d["u"][torch.rand(n, generator=g) < spawn_go, game.U_SPAWN:game.U_SPAWN + 3] = 0.0
    return d


def _run(s: State, steps: int, g: torch.Generator, front: bool, dev: torch.device,
         spawn_go: float = 0.0) -> list[tuple[State, State]]:
    """``steps`` steps from ``s`` under random actions, the kernel's tail checked against the torch
    tail at each (``front``: the torch front first and ``finish`` after, a whole step; else the
    tail alone); returns (before the tail, after it) of each step."""
    seen = []
    for k in range(steps):
        n = s.arena.shape[0]
        d = _draws(n, g, spawn_go)
        act = game.acting(s, torch.randint(0, NUM_ACTIONS, (n,), generator=g))
        init_ach, init_health = s["achievements"].clone(), s["player_health"].clone()
        if front:
            f = game._Step(s, TABLES)
            game.front(f, act, d)
            f.write_back()
        want, got = _tails(s, act, d, dev)
        _check(want, got, f"step {k}")
        seen.append((s, want))
        s = state_of(got.arena.clone())  # the kernel's state goes on
        if front:
            game.finish(s, TABLES, init_ach, init_health)
    return seen


def _reference_states() -> State:
    """The reference's prepared and rollout states (every floor, the boss fight, mobs and
    projectiles around the player, chests, torches)."""
    ref = load_ref(DATA)
    parts = []
    for prefix in ("obs_state.", "step_start."):
        leaves = ref_states(ref, prefix, EXPORT_FIELDS)
        s = empty_state(leaves["map"].shape[0], "cpu")
        import_state(leaves, s)
        parts.append(s.arena)
    return state_of(torch.cat(parts))


@pytest.mark.parametrize("device", DEVICES)
def test_tail_on_the_reference_states(device: str, kernel_device) -> None:  # noqa: ANN001
    """The reference's 279 states (all nine floors, the boss fight, mobs of every class, projectiles),
    two tail steps in a row, a third of the worlds with every spawn draw at 0: the kernel's arena
    is the torch tail's, byte for byte."""
    s = _reference_states()
    assert set(s["player_level"].tolist()) == set(range(9))
    _run(s, 2, torch.Generator().manual_seed(0), front=False, dev=kernel_device(device), spawn_go=0.3)


def _stir(s: State, g: torch.Generator) -> None:
    """Edit the states (in place) into the tail's corners: every class of mob and projectile around
    the player (alive or not, some at 0 health, full slots, random types and cooldowns; on the
    other floors, mobs alive at health <= 0 for ``clean_floors``), sleeping
    and resting, the intrinsics near their thresholds, inventories over the cap, attributes,
    enchantments, plants about to ripen, furnaces and tables in the way, the boss fight's clock,
    kills near the floor's count, and worlds whose floor is all stone (nowhere to spawn)."""
    n = s.arena.shape[0]
    rows = torch.arange(n)
    lvl = s["player_level"].long()
    pp = s["player_position"]

    def ints(lo: int, hi: int, *shape: int) -> torch.Tensor:
        return torch.randint(lo, hi, (n, *shape), generator=g, dtype=torch.int32)

    def chance(p: float, *shape: int) -> torch.Tensor:
        return torch.rand((n, *shape), generator=g) < p

    for group, count in game.CREATURES:  # every floor's mobs, some alive at health <= 0 (cleaned at the end)
        s[f"{group}.mask"].copy_(chance(0.3, C.NUM_LEVELS, count))
        s[f"{group}.health"].copy_(ints(-1, 3, C.NUM_LEVELS, count).float())
    for group, count in game.CREATURES + (("mob_projectiles", 3), ("player_projectiles", 3)):
        pos = s[f"{group}.position"]
        pos[rows, lvl] = pp.unsqueeze(1) + ints(-6, 7, count, 2)
        near = chance(0.5, count)  # half of them right next to the player (or on it)
        pos[rows, lvl] = torch.where(near.unsqueeze(2), pp.unsqueeze(1) + ints(-1, 2, count, 2), pos[rows, lvl])
        s[f"{group}.mask"][rows, lvl] = chance(0.75, count)
        s[f"{group}.health"][rows, lvl] = ints(-1, 9, count).float() * torch.where(chance(0.5, count), 1.0, 0.75)
        s[f"{group}.attack_cooldown"][rows, lvl] = ints(-1, 3, count)
        s[f"{group}.type_id"][rows, lvl] = ints(0, 8, count)
    for key in ("mob_projectile_directions", "player_projectile_directions"):
        step = torch.tensor(((0, -1), (0, 1), (-1, 0), (1, 0)), dtype=torch.int32)
        s[key][rows, lvl] = step[torch.randint(0, 4, (n, 3), generator=g)]
    # mob_map: the alive creatures' cells on the map
    for group, count in game.CREATURES:
        for i in range(count):
            x, y = s[f"{group}.position"][rows, lvl, i].long().unbind(1)
            ok = (x >= 0) & (x < 48) & (y >= 0) & (y < 48) & s[f"{group}.mask"][rows, lvl, i]
            r = rows[ok]
            s["mob_map"][r, lvl[ok], x[ok], y[ok]] = True
    # furnaces and tables around the player, for the mob projectiles to break
    for _ in range(4):
        x = (pp[:, 0] + ints(-3, 4)).clamp(0, 47).long()
        y = (pp[:, 1] + ints(-3, 4)).clamp(0, 47).long()
        put = chance(0.5)
        s["map"][rows[put], lvl[put], x[put], y[put]] = torch.where(chance(0.5), C.FURNACE, C.CRAFTING_TABLE)[put].to(
            torch.uint8)
    s["is_sleeping"].copy_(chance(0.3))
    s["is_resting"].copy_(chance(0.2) & ~s["is_sleeping"])
    for k, scale, shift in (("player_hunger", 26.0, 0.0), ("player_thirst", 21.0, 0.0), ("player_fatigue", 45.0, -12.0),
                            ("player_recover", 45.0, -17.0), ("player_recover_mana", 31.0, 0.0)):
        s[k].copy_(torch.rand(n, generator=g) * scale + shift)
    for k in ("player_food", "player_drink", "player_energy", "player_mana"):
        s[k].copy_(ints(-1, 18))
    for k in ("player_dexterity", "player_strength", "player_intelligence"):
        s[k].copy_(ints(1, 6))
    s["player_health"].copy_(torch.rand(n, generator=g) * 12.0 - 1.0)
    for k in C.INVENTORY_SCALARS:
        s[f"inventory.{k}"].copy_(torch.where(chance(0.5), ints(0, 103), s[f"inventory.{k}"]))
    s["inventory.pickaxe"].copy_(ints(0, 5))
    s["inventory.sword"].copy_(ints(0, 5))
    s["inventory.armour"].copy_(ints(0, 3, 4))
    s["inventory.potions"].copy_(ints(0, 103, 6))
    s["armour_enchantments"].copy_(ints(0, 3, 4))
    s["bow_enchantment"].copy_(ints(0, 3))
    s["sword_enchantment"].copy_(ints(0, 3))
    s["growing_plants_positions"].copy_(ints(0, 48, 10, 2))
    s["growing_plants_age"].copy_(ints(590, 610, 10))
    s["growing_plants_mask"].copy_(chance(0.7, 10))
    s["boss_timesteps_to_spawn_this_round"].copy_(ints(-1, 3))
    s["boss_progress"].copy_(ints(0, 9))
    s["light_level"].copy_(torch.rand(n, generator=g))
    s["monsters_killed"][rows, lvl] = ints(5, 10)
    stone = chance(0.1)
    s["map"][rows[stone], lvl[stone]] = C.STONE


def _stirred() -> State:
    s = _reference_states()
    _stir(s, torch.Generator().manual_seed(1))
    return s


@pytest.mark.parametrize("device", DEVICES)
def test_tail_on_edited_states(device: str, kernel_device) -> None:  # noqa: ANN001
    """The reference's states edited into the tail's corners (:func:`_stir`), three whole steps in a
    row (the torch front, then the tails compared, then the clock), a third of the worlds with
    every spawn draw at 0: the kernel's arena is the torch tail's, byte for byte; and the states
    reach what they are meant to (checked on the torch side)."""
    seen = _run(_stirred(), 3, torch.Generator().manual_seed(2), front=True, dev=kernel_device(device), spawn_go=0.3)
    before = state_of(torch.cat([b.arena for b, _ in seen]))
    after = state_of(torch.cat([a.arena for _, a in seen]))
    rows = torch.arange(before.arena.shape[0])
    lvl = before["player_level"].long()
    floor = {k: (before[k][rows, lvl], after[k][rows, lvl]) for k in before if k.endswith((".mask", ".attack_cooldown"))}
    assert (floor["melee_mobs.attack_cooldown"][1] == 5).any()  # melee mobs hit the player
    assert (before["is_sleeping"] & after["achievements"][:, C.A["wake_up"]]).any()
    assert (floor["ranged_mobs.attack_cooldown"][1] == 4).any()  # ranged mobs shoot
    assert (after["player_health"] < before["player_health"]).any()
    assert (after["monsters_killed"] > before["monsters_killed"]).any()
    for group, _ in game.CREATURES:  # each class spawns, and despawns or dies
        b, a = floor[f"{group}.mask"]
        assert (a & ~b).any(1).any() and (b & ~a).any(1).any(), group
    broke = (before["map"] == C.FURNACE) & (after["map"] == C.PATH)
    assert broke.any()
    assert ((after["map"] == C.RIPE_PLANT) & (before["map"] != C.RIPE_PLANT)).any()
    assert (before["inventory.wood"] > 99).any() and (after["inventory.wood"] <= 99).all()
    assert (before["player_hunger"] > 24).any() and (after["player_food"] < before["player_food"]).any()
    assert (after["player_mana"] > before["player_mana"]).any()
    boss = lvl == C.BOSS_LEVEL
    assert (boss & (before["boss_timesteps_to_spawn_this_round"] >= 1)).any()
    stone = (before["map"][rows, lvl] == C.STONE).flatten(1).all(1)
    assert stone.any()


@pytest.mark.parametrize("device", DEVICES)
def test_tail_in_env_rollouts(device: str, kernel_device) -> None:  # noqa: ANN001
    """Worlds of the env (fresh ones) played a few random steps: the kernel's tail is the torch
    tail's at every step (whole steps: the torch front, the tails, the clock)."""
    dev = kernel_device(device)
    env = make_env("craftax", num_envs=16, backend="cpu", seed=3, obs="compact")
    env.reset()
    g = torch.Generator().manual_seed(4)
    for _ in range(20):
        env.step(torch.randint(0, NUM_ACTIONS, (16,), generator=g))
    _run(state_of(env.s.arena.clone()), 4, g, front=True, dev=dev, spawn_go=0.2)


@pytest.mark.parametrize("device", DEVICES)
def test_finish_kernel_is_game_finish(device: str, kernel_device) -> None:  # noqa: ANN001
    """``run_finish`` against ``game.finish`` on the reference's states edited: health gained and
    lost by arbitrary floats, achievements newly set (and some already set before), clocks at the
    light table's end, the boss beaten, dead players. Reward and termination bit for bit, the arena
    byte for byte; the reward is rounded once (it differs from multiplying then adding somewhere)."""
    dev = kernel_device(device)
    g = torch.Generator().manual_seed(5)
    before = _stirred()
    n = before.arena.shape[0]
    init_ach = before["achievements"].clone()
    init_health = before["player_health"].clone()
    after = state_of(before.arena.clone())
    after["player_health"].copy_(init_health + (torch.rand(n, generator=g) * 12 - 6))
    after["player_health"][::7] = 0.0
    after["achievements"] |= torch.rand((n, C.NUM_ACHIEVEMENTS), generator=g) < 0.05
    after["timestep"][::3] = TABLES.max_t - torch.randint(-2, 2, (len(range(0, n, 3)),), generator=g, dtype=torch.int32)
    after["boss_progress"][::5] = C.BOSS_LEVEL
    ref = state_of(after.arena.clone())
    reward_ref, term_ref = game.finish(ref, TABLES, init_ach, init_health)
    ours = state_of(after.arena.clone().to(dev))
    tables = game.Tables(dev, TABLES.light)
    reward, term = run_finish(ours, tables, init_ach.to(dev), init_health.to(dev))
    assert torch.equal(reward.cpu().view(torch.int32), reward_ref.view(torch.int32))
    assert torch.equal(term.cpu(), term_ref) and term_ref.any() and not term_ref.all()
    assert torch.equal(ours.arena.cpu(), ref.arena)
    gained = ((after["achievements"].int() - init_ach.int()) * TABLES.rewards).sum(1).float()
    assert (gained > 0).any()
    twice = (after["player_health"] - init_health) * torch.tensor(C.f32(0.1), dtype=torch.float32) + gained
    assert not torch.equal(twice, reward_ref)


def test_run_tail_checks_its_inputs() -> None:
    s = empty_state(2, "cpu")
    d = game.sample_draws(2, torch.Generator().manual_seed(0), torch.device("cpu"))
    with pytest.raises(ValueError, match="run_tail"):
        run_tail(s, torch.zeros(2, dtype=torch.int32), d)
