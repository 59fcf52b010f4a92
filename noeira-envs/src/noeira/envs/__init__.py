"""noeira environments: batched classic control (``cartpole``, ``pendulum``, ``acrobot``,
``mountaincar``, ``mountaincar-continuous``), MuJoCo locomotion, and the gymnasium bridge
both ways (``gym:<EnvId>`` runs a gymnasium env here; :func:`to_gymnasium` runs ours there;
:func:`to_sb3` hands ours to Stable-Baselines3).

Importing this package is cheap: nothing here imports gymnasium or mujoco until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gymnasium.vector import AutoresetMode

    from noeira.envs.gymnasium_vector import NoeiraVectorEnv
    from noeira.envs.sb3_vec import NoeiraSB3VecEnv

__all__ = ["to_gymnasium", "to_sb3"]


def to_gymnasium(env: Any, numpy: bool = True, *, autoreset_mode: str | AutoresetMode = "next-step") -> NoeiraVectorEnv:
    """Any noeira ``BatchedEnv`` as a gymnasium ``VectorEnv``; see
    :mod:`noeira.envs.gymnasium_vector`. ``autoreset_mode``: ``"next-step"`` (gymnasium's
    default: the step after an env ends resets it, ignoring its action; needs a ``TensorEnv``),
    ``"same-step"`` (noeira's: reset within the step, the last observation in
    ``info["final_obs"]``) or ``"disabled"``, or a ``gymnasium.vector.AutoresetMode``.
    ``reset(options={"reset_mask": mask})`` resets some envs; bad actions raise
    ``gymnasium.error.InvalidAction``. ``numpy=False`` keeps torch tensors on the env's device."""
    from noeira.envs.gymnasium_vector import NoeiraVectorEnv

    return NoeiraVectorEnv(env, numpy=numpy, autoreset_mode=autoreset_mode)


def to_sb3(env: Any) -> NoeiraSB3VecEnv:
    """Any noeira ``BatchedEnv`` as a Stable-Baselines3 ``VecEnv`` (same-step autoreset,
    ``infos[i]["terminal_observation"]``); see :class:`noeira.envs.sb3_vec.NoeiraSB3VecEnv`."""
    from noeira.envs.sb3_vec import NoeiraSB3VecEnv

    return NoeiraSB3VecEnv(env)
