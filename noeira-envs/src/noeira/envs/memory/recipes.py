"""PPO recipes for the memory suite, served through the ``noeira_recipe`` hook
(:mod:`noeira.envs.recipes`), for any network: the network's own settings (the recurrent
networks' learning rate, ``networks (noeira-agents)``) are layered below, the user's above.

Sized for the short settings (each task's defaults, memory <= 16 steps): 64 envs x 64 steps a
rollout (the horizon is how far back the update's gradients reach: it spans several episodes),
4 epochs of 4 minibatches, 5e5 steps. The answers of ``repeat-*``, ``count-recall`` and
``autoencode`` are scored at every step and an action changes no later reward, so a short
discount (``gamma`` 0.5) gives the critic an easy target and the advantage less noise (the LSTM
on ``repeat-previous``: 0.99 of 1.0 after 1.7e5 steps with 0.5, 0.58 with 0.99); ``t-maze`` pays
only at the junction, ``length`` steps on: 0.99 there. The long settings need longer horizons
and budgets (``benchmarks/memory.py``, ``LONG``). ``count-recall`` is not solved by this recipe
within its budget by either recurrent network (its note says so; BENCHMARKS.md "Memory").
"""

from __future__ import annotations

from typing import Any

__all__ = ["STEPS", "ppo_recipe"]

STEPS = 500_000
"""The budget at 64 envs."""


def ppo_recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any]:
    """``{"env": ..., "agent": ..., "run": ...}`` for PPO on ``env`` (a memory task);
    ``num_envs`` (None: the recipe's, 64 on a CPU, 1,024 on cuda) scales the budget so the number
    of updates stays the CPU recipe's."""
    cuda = backend == "cuda"
    n = num_envs or (1024 if cuda else 64)
    out: dict[str, Any] = {
        "env": {"num_envs": n},
        "agent": {"horizon": 64, "update_epochs": 4, "num_minibatches": 4,
                  "gamma": 0.99 if env == "t-maze" else 0.5, "gae_lambda": 0.95, "ent_coef": 0.01,
                  **({} if cuda else {"torch_threads": 1})},
        "run": {"total_steps": STEPS * n // 64, "log_interval": 4},
    }
    notes = []
    if env == "count-recall":
        notes.append("not solved at 5e5 steps (seed 0, length 16: MinGRU evaluates 0.81 of 1.0, the threshold "
                     "0.85; the LSTM -0.30 at 2e5; chance -0.505)")
    if cuda:
        notes.append("the CPU recipe with 1,024 envs: not yet measured on a GPU")
    if notes:
        out["note"] = "; ".join(notes)
    return out
