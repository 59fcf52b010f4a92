"""noeira environments: batched classic control (``cartpole``, ``pendulum``, ``acrobot``,
``mountaincar``, ``mountaincar-continuous``), MuJoCo locomotion, and the gymnasium bridge
both ways (``gym:<EnvId>`` runs a gymnasium env here; :func:`to_gymnasium` runs ours there).

Importing this package is cheap: nothing here imports gymnasium or mujoco until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noeira.envs.gymnasium_vector import NoeiraVectorEnv

__all__ = ["to_gymnasium"]


def to_gymnasium(env: Any, numpy: bool = True) -> NoeiraVectorEnv:
    """Any noeira ``BatchedEnv`` as a gymnasium ``VectorEnv`` (same-step autoreset, final
    observations in ``info["final_obs"]``); see :class:`noeira.envs.gymnasium_vector.NoeiraVectorEnv`.
    ``numpy=False`` keeps torch tensors on the env's device instead of numpy arrays."""
    from noeira.envs.gymnasium_vector import NoeiraVectorEnv

    return NoeiraVectorEnv(env, numpy=numpy)
