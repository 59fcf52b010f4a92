"""noeira environments: batched classic control (``cartpole``, ``pendulum``, ``acrobot``,
``mountaincar``, ``mountaincar-continuous``), MuJoCo locomotion, and the gymnasium bridge
both ways (``gym:<EnvId>`` runs a gymnasium env here; :func:`to_gymnasium` runs ours there;
:func:`to_sb3` hands ours to Stable-Baselines3).

Importing this package is cheap: nothing here imports gymnasium or mujoco until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noeira.envs.gymnasium_vector import NoeiraVectorEnv
    from noeira.envs.sb3_vec import NoeiraSB3VecEnv

__all__ = ["to_gymnasium", "to_sb3"]


def to_gymnasium(env: Any, numpy: bool = True) -> NoeiraVectorEnv:
    """Any noeira ``BatchedEnv`` as a gymnasium ``VectorEnv`` (same-step autoreset, final
    observations in ``info["final_obs"]``); see :class:`noeira.envs.gymnasium_vector.NoeiraVectorEnv`.
    ``numpy=False`` keeps torch tensors on the env's device instead of numpy arrays."""
    from noeira.envs.gymnasium_vector import NoeiraVectorEnv

    return NoeiraVectorEnv(env, numpy=numpy)


def to_sb3(env: Any) -> NoeiraSB3VecEnv:
    """Any noeira ``BatchedEnv`` as a Stable-Baselines3 ``VecEnv`` (same-step autoreset,
    ``infos[i]["terminal_observation"]``); see :class:`noeira.envs.sb3_vec.NoeiraSB3VecEnv`."""
    from noeira.envs.sb3_vec import NoeiraSB3VecEnv

    return NoeiraSB3VecEnv(env)
