"""The recurrent networks' own layer of settings, served through the ``noeira_recipe`` hook
(entry point ``noeira`` -> ``networks``) for any env: what ``agent.network=lstm`` or ``mingru``
needs from PPO whatever it is trained on. ``noeira train --help`` lists it as ``networks
(noeira-agents)``; a recipe for the env (its distribution's, or the agent's tables for the
classic-control envs) is layered above it, and the user's settings above everything.

Why a recurrent network needs its own learning rate (issue 32, BENCHMARKS.md "Memory"): PPO's
2.5e-4 suits an MLP, whose hidden features carry what the heads need from the first update.
A recurrent policy must first learn what to keep: MinGRU's update gate and the heads' weights
reading a memory that starts faint (MinGRU's state is a decaying average of its inputs, so a
cue seen ``k`` steps ago starts as a small part of it) grow by at most about ``lr`` per Adam
step. At 2.5e-4, MinGRU carried one bit for 8 steps only in its argmax after 3e5 steps (training
return ~0.1 of 1.0); at 3e-3 both networks learn it in ~2e4 steps, and the LSTM learns a
16-step cue in half the steps it needs at 2.5e-4.

The layer leaves the horizon alone: it is also how far back the update's gradients reach (each
segment is replayed from its stored state, truncated backprop through time), and PPO's 128
steps span the short memory tasks several times over; memory that reaches further back is
carried while acting but learned only within a segment, so an env whose memory spans more sets
its horizon in its own recipe (``benchmarks/memory.py`` does for the suite's long settings).
"""

from __future__ import annotations

from typing import Any

from noeira.core.plugins import hookimpl

__all__ = ["LAYERS", "noeira_recipe"]

LAYERS: dict[tuple[str, str], dict[str, Any]] = {
    ("ppo", "lstm"): {"agent": {"lr": 3e-3}},
    ("ppo", "mingru"): {"agent": {"lr": 3e-3}},
}
"""(agent, network) -> the network's layer of settings."""


@hookimpl
def noeira_recipe(agent: str, network: str | None) -> dict[str, Any] | None:
    layer = LAYERS.get((agent, network or ""))
    return None if layer is None else {k: dict(v) for k, v in layer.items()}
