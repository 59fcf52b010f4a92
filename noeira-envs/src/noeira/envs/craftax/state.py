"""The state layout: the reference's ``EnvState`` leaves as a dict of batched tensors.

Inside the env the state is compact (``STATE_FIELDS``: uint8 map, int8 intrinsics and
inventory, int16 positions); ``get_state``/``set_state`` exchange the reference's own leaves
(``EXPORT_FIELDS``: names joined with a dot, ``inventory.wood`` ... ``inventory.iron_sword``,
``zombies.position`` ...; int32 / bool / float32 as the reference has them). Ints that drift
stay in range for the reference's 10,000-step episodes: dead arrows keep flying (one cell a
step), dead mobs' attack cooldowns keep counting down, plants age without bound.
"""

from __future__ import annotations

import torch
from torch import Tensor

from noeira.envs.craftax.constants import INVENTORY, MAP_SIZE, MAX_PLANTS, MOBS

__all__ = ["EXPORT_FIELDS", "STATE_FIELDS", "export_state", "import_state"]

_MOB_FIELDS = {}
for _name, _count in MOBS:
    _MOB_FIELDS[f"{_name}.position"] = ((_count, 2), torch.int16)
    _MOB_FIELDS[f"{_name}.health"] = ((_count,), torch.int8)
    _MOB_FIELDS[f"{_name}.mask"] = ((_count,), torch.bool)
    _MOB_FIELDS[f"{_name}.attack_cooldown"] = ((_count,), torch.int16)

STATE_FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "map": ((MAP_SIZE, MAP_SIZE), torch.uint8),
    "mob_map": ((MAP_SIZE, MAP_SIZE), torch.bool),
    "player_position": ((2,), torch.int16),
    "player_direction": ((), torch.int8),
    "player_health": ((), torch.int8),
    "player_food": ((), torch.int8),
    "player_drink": ((), torch.int8),
    "player_energy": ((), torch.int8),
    "is_sleeping": ((), torch.bool),
    "player_recover": ((), torch.float32),
    "player_hunger": ((), torch.float32),
    "player_thirst": ((), torch.float32),
    "player_fatigue": ((), torch.float32),
    "inventory": ((len(INVENTORY),), torch.int8),  # one tensor inside, 12 leaves outside
    **_MOB_FIELDS,
    "arrow_directions": ((3, 2), torch.int8),
    "growing_plants_positions": ((MAX_PLANTS, 2), torch.int16),
    "growing_plants_age": ((MAX_PLANTS,), torch.int16),
    "growing_plants_mask": ((MAX_PLANTS,), torch.bool),
    "light_level": ((), torch.float32),
    "achievements": ((22,), torch.bool),
    "timestep": ((), torch.int32),
}
"""Internal name -> (shape of one env, dtype)."""


def _export_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype in (torch.bool, torch.float32) else torch.int32


EXPORT_FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
for _k, (_shape, _dtype) in STATE_FIELDS.items():
    if _k == "inventory":
        EXPORT_FIELDS.update({f"inventory.{n}": ((), torch.int32) for n in INVENTORY})
    else:
        EXPORT_FIELDS[_k] = (_shape, _export_dtype(_dtype))


def empty_state(n: int, device: torch.device | str) -> dict[str, Tensor]:
    return {k: torch.zeros((n, *shape), dtype=dtype, device=device) for k, (shape, dtype) in STATE_FIELDS.items()}


def export_state(s: dict[str, Tensor]) -> dict[str, Tensor]:
    """The compact state as the reference's leaves (copies)."""
    out = {}
    for k, v in s.items():
        if k == "inventory":
            out.update({f"inventory.{n}": v[:, i].to(torch.int32) for i, n in enumerate(INVENTORY)})
        else:
            out[k] = v.to(EXPORT_FIELDS[k][1], copy=True)
    return out


def import_state(state: dict[str, Tensor], into: dict[str, Tensor]) -> None:
    """Write the reference's leaves ``state`` into the compact state ``into`` (in place)."""
    for k, v in into.items():
        if k == "inventory":
            v.copy_(torch.stack([state[f"inventory.{n}"] for n in INVENTORY], 1).to(v.dtype))
        else:
            v.copy_(state[k].reshape(v.shape).to(v.dtype))
