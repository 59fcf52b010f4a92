"""Every hook noeira calls, in one place (pluggy project ``noeira``).

Implement them in a module or class decorated with ``noeira.core.hookimpl`` and register
it under the entry-point group ``noeira``; ``NOEIRA_DISABLE_PLUGIN_AUTOLOAD=1`` turns that
autoloading off. Core's own progress display, JSON-lines metrics log and TensorBoard
logging are implementations of these hooks too (:mod:`noeira.core.loggers`).

Order within a run: ``noeira_recipe`` (while the config is resolved) -> ``noeira_configure``
-> ``noeira_run_started`` -> (``noeira_iteration`` | ``noeira_checkpoint_saved``)* ->
``noeira_run_finished``. In a run of several processes the run hooks are called on rank 0
only (``run.backend.rank``), the one that writes the run directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from noeira.core.config import RunConfig
    from noeira.core.contracts import Backend
    from noeira.core.rundir import Run

hookspec = pluggy.HookspecMarker("noeira")
hookimpl = pluggy.HookimplMarker("noeira")
"""Marks a hook implementation (also exported as ``noeira.core.hookimpl``)."""


@hookspec
def noeira_recipe(agent: str, env: str, backend: str, num_envs: int | None,
                  network: str | None) -> dict[str, Any] | None:
    """Tuned defaults for ``agent`` on ``env`` (names as configured, e.g. ``ppo``, ``cartpole``,
    ``gym:LunarLander-v3``) on ``backend`` (``cpu``, ``cuda``...), or ``None`` to pass.

    The result is a nested dict of config tables, ``{"env": {...}, "agent": {...}, "run": {...},
    "graph": {...}}``. ``num_envs`` is the user's ``env.num_envs`` when they set it (a recipe may
    size the run to it), else ``None``. ``network`` is the policy network the run will use
    (``agent.network``) as far as it is known: the user's choice when they made one, else the
    one a recipe chose (implementations that do not take ``network`` are asked first, so one of
    them may choose it), else ``None`` (the agent's default); a network's own layer of settings
    (the learning rate its recurrence needs) is an implementation that takes it. An
    implementation takes only the arguments it names. Every implementation's result is layered below the
    user's config (``--config`` file, then overrides), lowest first: other distributions' recipes
    (by plugin name), then the agent's distribution's, then the env's distribution's, so the
    distribution that ships an env has the last word on its recipes. ``noeira train --help``
    lists which recipes applied and where they came from."""


@hookspec
def noeira_configure(config: RunConfig) -> None:
    """The resolved config of a run, before anything is built. Raise
    :class:`noeira.core.errors.ConfigError` to refuse it."""


@hookspec
def noeira_run_started(run: Run) -> None:
    """The env and agent are built and the run directory exists (``run.dir``)."""


@hookspec
def noeira_iteration(run: Run, iteration: int, env_steps: int, metrics: dict[str, float]) -> None:
    """Once per log interval: ``metrics`` are host floats read from the device in one
    transfer (agent losses, ``episode_return``, ``episode_length``, ``steps_per_second``...)."""


@hookspec
def noeira_checkpoint_saved(run: Run, path: Path) -> None:
    """A checkpoint was written (atomically) at ``path``."""


@hookspec
def noeira_run_finished(run: Run, outcome: str, record: dict[str, Any]) -> None:
    """The run ended: ``outcome`` is ``completed``, ``interrupted`` or ``failed``;
    ``record`` is what ``record.json`` holds (final evaluation included when completed)."""


@hookspec
def noeira_add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add subcommands to the ``noeira`` CLI. Each parser sets ``func=callable(args) -> int``
    with ``set_defaults``; raise :class:`noeira.core.errors.UserError` for bad input."""


@hookspec(firstresult=True)
def noeira_default_graph_backend(backend: Backend) -> str | None:
    """The graph backend to use on ``backend`` when the config names none; ``None`` to pass."""
