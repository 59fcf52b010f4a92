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
and budgets (``benchmarks/memory.py``, ``LONG``).

``count-recall`` is answered by one of 17 actions, and the high counts are rare (6 or more:
4 % of the answers, 5: 6 %). At ``ent_coef`` 0.01 every network learned the counts in order
and stopped where its policy had stopped trying higher answers: it answered counts 0-4 (or 0-5)
right every time and never a higher one (the memory was there; the answers were no longer
explored), 90 % of answers right where 92.5 % solves (MinGRU 0.81 of 1.0 at 5e5 steps; the LSTM
0.78 with two layers of 128, -0.30 with PPO's ``[64, 64]``, its entropy collapsed by 1e5
steps). A larger entropy bonus keeps the next answer tried: 0.05 for MinGRU (at ``[64, 64]``);
the LSTM's entropy falls faster (at 0.05 one seed of two stalled at counts 0-4), so 0.1 and two
recurrent layers of 128 for it (one layer of 128 learned at half the pace; a learning rate of
1e-3 stalled at -0.34). BENCHMARKS.md "Memory" has the runs; the benchmark reports the highest
count each policy answers right (``reach``: 5 or 6 here, so not every answer is learned).
"""

from __future__ import annotations

from typing import Any

__all__ = ["STEPS", "ppo_recipe"]

STEPS = 500_000
"""The budget at 64 envs."""


def ppo_recipe(env: str, backend: str, num_envs: int | None, network: str | None = None) -> dict[str, Any]:
    """``{"env": ..., "agent": ..., "run": ...}`` for PPO on ``env`` (a memory task) with
    ``network`` (``agent.network`` as far as known; None: the agent's default);
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
    if env == "count-recall":  # the rare high counts stay explored (see the module docstring)
        out["agent"]["ent_coef"] = 0.05
        if network == "lstm":
            out["agent"].update(ent_coef=0.1, hidden_sizes=[128, 128])
    notes = []
    if cuda:
        notes.append("the CPU recipe with 1,024 envs: not yet measured on a GPU")
    if notes:
        out["note"] = "; ".join(notes)
    return out
