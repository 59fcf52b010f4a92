""":func:`.game.step` with the full game's rules as Triton kernels: :mod:`.triton_front` (the player's
half, one launch) and :mod:`.triton_tail` (the mobs and the world: three launches, the spawns apart;
then the step's end, :func:`.game.finish`, as a fourth), reading and writing the state in place in
its byte arena, one lane per world (the spawns: one world a program). Around them stay the few torch
operations of the step's start: the action taken (:func:`.game.acting`) and the achievements and
health the reward counts from.

Fed the same draws, the result is :func:`.game.step`'s bit for bit: the tests replay both on the
same states in Triton's interpreter on a CPU (``tests/envs/test_craftax_full_triton_*.py``) and
compiled on CUDA (the cuda-marked tests of ``tests/envs/test_craftax_full.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from noeira.envs.craftax_full import game
from noeira.envs.craftax_full.state import State

__all__ = ["StepFn", "step_kernel"]

StepFn = Callable[[State, Tensor, dict[str, Tensor], game.Tables], tuple[Tensor, Tensor]]
"""``step(s, action, draws, tables) -> (reward, terminated)``, :func:`.game.step`'s signature."""


def step_kernel() -> StepFn | None:
    """:func:`.game.step` with the rules in Triton kernels; None without Triton."""
    try:
        from noeira.envs.craftax_full.triton_front import run_front
        from noeira.envs.craftax_full.triton_tail import run_finish, run_tail
    except ImportError:
        return None

    def step(s: State, action: Tensor, d: dict[str, Tensor], t: game.Tables) -> tuple[Tensor, Tensor]:
        a = game.acting(s, action)
        init_ach = s["achievements"].clone()
        init_health = s["player_health"].clone()
        run_front(s, a, d)
        run_tail(s, a, d)  # ends with every floor's clean-up, as game.step's leave_level
        return run_finish(s, t, init_ach, init_health)

    return step
