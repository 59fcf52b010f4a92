"""The state layout: the reference's ``EnvState`` leaves as a dict of batched tensors.

Inside the env every leaf of the reference's ``EnvState`` is its own ``[N, ...]`` tensor under
the reference's name (nested names joined with a dot: ``inventory.wood``,
``melee_mobs.position``), in the reference's dtype, except the three big per-floor grids:
``map`` and ``item_map`` are uint8 (block and item ids fit a byte) and ``light_map`` holds only
the four dark floors (:data:`~.constants.DARK_LEVELS`), the other five being 1.0 everywhere at
all times. ``get_state``/``set_state`` exchange the reference's leaves exactly
(:data:`EXPORT_FIELDS`: int32 maps, the 9-floor float32 light map); ``state_rng`` is left out.
Per env the state takes ~100 KB (map 20.7 KB, item map 20.7 KB, mob map 20.7 KB, light 36.9 KB).

All fields of a batch are views into one byte buffer, a row per env (:class:`State`'s
``arena``), so a world is copied into an env that ended as one row: the resets copy rows, not
ninety tensors.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from noeira.envs.craftax_full.constants import (
    DARK_LEVELS,
    INVENTORY_SCALARS,
    MAP_SIZE,
    MAX_GROWING_PLANTS,
    MOB_GROUPS,
    NUM_ACHIEVEMENTS,
    NUM_LEVELS,
)

__all__ = ["EXPORT_FIELDS", "ROW_BYTES", "STATE_FIELDS", "State", "empty_state", "state_of", "export_state", "import_state"]

L, W = NUM_LEVELS, MAP_SIZE
i32, f32, b8, u8 = torch.int32, torch.float32, torch.bool, torch.uint8

_MOBS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
for _name, _count in MOB_GROUPS:
    _MOBS[f"{_name}.position"] = ((L, _count, 2), i32)
    _MOBS[f"{_name}.health"] = ((L, _count), f32)
    _MOBS[f"{_name}.mask"] = ((L, _count), b8)
    _MOBS[f"{_name}.attack_cooldown"] = ((L, _count), i32)
    _MOBS[f"{_name}.type_id"] = ((L, _count), i32)

STATE_FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "map": ((L, W, W), u8),
    "item_map": ((L, W, W), u8),
    "mob_map": ((L, W, W), b8),
    "light_map": ((len(DARK_LEVELS), W, W), f32),  # the dark floors only
    "down_ladders": ((L, 2), i32),
    "up_ladders": ((L, 2), i32),
    "chests_opened": ((L,), b8),
    "monsters_killed": ((L,), i32),
    "player_position": ((2,), i32),
    "player_level": ((), i32),
    "player_direction": ((), i32),
    "player_health": ((), f32),
    "player_food": ((), i32),
    "player_drink": ((), i32),
    "player_energy": ((), i32),
    "player_mana": ((), i32),
    "is_sleeping": ((), b8),
    "is_resting": ((), b8),
    "player_recover": ((), f32),
    "player_hunger": ((), f32),
    "player_thirst": ((), f32),
    "player_fatigue": ((), f32),
    "player_recover_mana": ((), f32),
    "player_xp": ((), i32),
    "player_dexterity": ((), i32),
    "player_strength": ((), i32),
    "player_intelligence": ((), i32),
    **{f"inventory.{k}": ((), i32) for k in INVENTORY_SCALARS},
    "inventory.armour": ((4,), i32),
    "inventory.potions": ((6,), i32),
    **_MOBS,
    "mob_projectile_directions": ((L, 3, 2), i32),
    "player_projectile_directions": ((L, 3, 2), i32),
    "growing_plants_positions": ((MAX_GROWING_PLANTS, 2), i32),
    "growing_plants_age": ((MAX_GROWING_PLANTS,), i32),
    "growing_plants_mask": ((MAX_GROWING_PLANTS,), b8),
    "potion_mapping": ((6,), i32),
    "learned_spells": ((2,), b8),
    "sword_enchantment": ((), i32),
    "bow_enchantment": ((), i32),
    "armour_enchantments": ((4,), i32),
    "boss_progress": ((), i32),
    "boss_timesteps_to_spawn_this_round": ((), i32),
    "light_level": ((), f32),
    "achievements": ((NUM_ACHIEVEMENTS,), b8),
    "timestep": ((), i32),
}
"""Internal name -> (shape of one env, dtype)."""

EXPORT_FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = dict(STATE_FIELDS)
EXPORT_FIELDS["map"] = ((L, W, W), i32)
EXPORT_FIELDS["item_map"] = ((L, W, W), i32)
EXPORT_FIELDS["light_map"] = ((L, W, W), f32)
"""The reference's leaves: name -> (shape of one env, dtype)."""

_DARK = list(DARK_LEVELS)
_BRIGHT = [lv for lv in range(L) if lv not in DARK_LEVELS]


def _layout() -> tuple[dict[str, int], int]:
    offsets, at = {}, 0
    for k, (shape, dtype) in STATE_FIELDS.items():
        offsets[k] = at
        size = math.prod(shape) * dtype.itemsize
        at += -(-size // 16) * 16  # every field 16-byte aligned
    return offsets, at


OFFSETS, ROW_BYTES = _layout()
"""Where each field starts in an env's row of the arena, and the row's length in bytes."""


class State(dict):
    """The fields by name (``[N, ...]`` tensors), all views into ``arena`` [N, ROW_BYTES] uint8."""

    arena: Tensor


def empty_state(n: int, device: torch.device | str) -> State:
    """A zeroed batch of ``n`` states."""
    return state_of(torch.zeros((n, ROW_BYTES), dtype=torch.uint8, device=device))


def state_of(arena: Tensor) -> State:
    """The fields of the states whose rows are ``arena`` [n, ROW_BYTES] uint8 (views into it)."""
    s = State()
    s.arena = arena
    n = arena.shape[0]
    for k, (shape, dtype) in STATE_FIELDS.items():
        size = math.prod(shape) * dtype.itemsize
        raw = s.arena[:, OFFSETS[k] : OFFSETS[k] + size]
        s[k] = raw.view(dtype).view(n, *shape)
    return s


def export_state(s: dict[str, Tensor]) -> dict[str, Tensor]:
    """The state as the reference's leaves (copies)."""
    out = {}
    for k, v in s.items():
        if k == "light_map":
            full = torch.ones((v.shape[0], L, W, W), dtype=f32, device=v.device)
            full[:, _DARK] = v
            out[k] = full
        else:
            out[k] = v.to(EXPORT_FIELDS[k][1], copy=True)
    return out


def import_state(state: dict[str, Tensor], into: dict[str, Tensor]) -> None:
    """Write the reference's leaves ``state`` into ``into`` (in place). The light maps of the
    bright floors must be 1.0 everywhere (the only value the game gives them)."""
    light = state["light_map"]
    if not bool((light[:, _BRIGHT] == 1.0).all()):
        raise ValueError("craftax.set_state: light_map of floors 0, 1, 3, 4, 6 must be 1.0 everywhere "
                         "(the game never changes it; only floors 2, 5, 7, 8 are dark)")
    for k, v in into.items():
        src = light[:, _DARK] if k == "light_map" else state[k]
        v.copy_(src.reshape(v.shape).to(v.dtype))
