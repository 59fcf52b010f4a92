"""``gym:<EnvId>``: any installed gymnasium env as a noeira :class:`BatchedEnv`.

``make_env("gym:LunarLander-v3", num_envs=8)`` (or ``noeira train env=gym:LunarLander-v3``)
builds gymnasium's own vector env (``gym.make_vec``, sync or async) with same-step
autoreset (``AutoresetMode.SAME_STEP``: the observation returned for an env that ended is
its reset observation; its final one is in ``info["final_obs"]``), which is noeira's
convention, and copies every step into torch buffers on the backend's device. The envs
themselves run on the CPU in numpy, so ``capture_safe`` is False.

Spaces: gymnasium ``Box`` -> noeira ``Box`` (observations and continuous actions in the
config's float dtype), ``Discrete`` -> ``Discrete``, ``MultiDiscrete`` (1-D) ->
``MultiDiscrete``; any other space is a :class:`UserError` naming it.
``get_state``/``set_state`` use the sub-envs' ``unwrapped.state`` (classic control has one);
an env without it raises ``NotImplementedError``. Checkpoints (``state_dict``) hold the
episode bookkeeping only (see ``resume_caveat``): a resumed run starts fresh episodes.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch
from torch import Tensor

from noeira.core import Backend, Box, ConfigError, Discrete, EnvSpec, MultiDiscrete, Space, StepResult, UserError
from noeira.core.envbase import check_action

__all__ = ["GymnasiumEnv", "from_gymnasium_space"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError:
        raise UserError("env 'gym:...' needs gymnasium: pip install 'noeira-envs[gymnasium]'") from None
    return gymnasium


def from_gymnasium_space(space: Any, *, dtype: torch.dtype, device: torch.device, what: str) -> Space:
    """A gymnasium space of one env as a noeira space (Box / Discrete / MultiDiscrete)."""
    spaces = _gymnasium().spaces
    if isinstance(space, spaces.Box):
        return Box(torch.as_tensor(space.low, dtype=torch.float64), torch.as_tensor(space.high, dtype=torch.float64),
                   dtype=dtype, device=device)
    if isinstance(space, spaces.Discrete):
        return Discrete(int(space.n), int(space.start), device=device)
    if isinstance(space, spaces.MultiDiscrete):
        if space.nvec.ndim != 1 or np.any(space.start != 0):
            raise UserError(f"{what}: MultiDiscrete with a nested nvec or a nonzero start is not supported ({space})")
        return MultiDiscrete(torch.as_tensor(space.nvec), device=device)
    raise UserError(f"{what}: gymnasium space {space} is not supported (Box, Discrete, MultiDiscrete are)")


class GymnasiumEnv:
    """``num_envs`` copies of a gymnasium env through ``gym.make_vec``, as a BatchedEnv.

    Shapes as every BatchedEnv: obs ``[N, *obs_shape]``, actions ``[N, *act_shape]``,
    reward / flags ``[N]``; tensors on ``backend.device`` (copied from numpy each step)."""

    name = "gym"
    capture_safe = False
    resume_caveat = ("gymnasium keeps its envs' state in Python objects (in other processes with "
                     "vectorization=async) that noeira does not save: a resumed run starts fresh episodes, re-seeded "
                     "from the checkpoint")

    @attrs.frozen
    class Config:
        id: str
        """The gymnasium env id (``gym:<EnvId>`` sets it), e.g. LunarLander-v3."""
        vectorization: str = "sync"
        """gymnasium vector env: sync (one process) | async (a process per env)."""
        kwargs: dict[str, Any] = attrs.Factory(dict)
        """Keyword arguments for ``gym.make`` (e.g. {continuous = true}, {max_episode_steps = 100})."""
        dtype: str = "float32"
        """Float dtype of observations, rewards and continuous actions: float32 | float64."""
        validate_actions: bool = False
        """Check every action's shape, dtype and range before stepping."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        gym = _gymnasium()
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"env.num_envs: must be an integer >= 1, got {num_envs!r}")
        if config.vectorization not in ("sync", "async"):
            raise ConfigError(f"env.vectorization: expected 'sync' or 'async', got {config.vectorization!r}")
        if config.dtype not in _DTYPES:
            raise ConfigError(f"env.dtype: expected one of {sorted(_DTYPES)}, got {config.dtype!r}")
        if not config.id:
            raise ConfigError("env.id: empty; name a gymnasium env as gym:<EnvId>, e.g. gym:CartPole-v1")
        self.config, self.backend, self.device = config, backend, backend.device
        self.num_envs, self.dtype = num_envs, _DTYPES[config.dtype]
        self.validate_actions = config.validate_actions
        try:
            gym.spec(config.id)
        except gym.error.Error as err:
            raise ConfigError(f"env.id: {err}") from None
        try:
            self.venv = gym.make_vec(
                config.id,
                num_envs=num_envs,
                vectorization_mode=config.vectorization,
                vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
                **config.kwargs,
            )
        except (TypeError, gym.error.Error) as err:
            raise ConfigError(f"env.kwargs: gymnasium could not make {config.id!r}: {err}") from None
        self.name = f"gym:{config.id}"
        # what the sub-envs offer for get_state/set_state, found on a probe in this process
        # (asking async workers for a missing attribute would shut them down)
        probe = gym.make(config.id, **config.kwargs).unwrapped
        probe.reset(seed=0)
        self._has_state = getattr(probe, "state", None) is not None
        self._obs_method = next((m for m in ("_get_obs", "_get_ob") if callable(getattr(probe, m, None))), None)
        probe.close()
        self.observation_space = from_gymnasium_space(
            self.venv.single_observation_space, dtype=self.dtype, device=self.device, what=f"{self.name} observation")
        self.action_space = from_gymnasium_space(
            self.venv.single_action_space, dtype=self.dtype, device=self.device, what=f"{self.name} action")
        self._np_action_dtype = self.venv.single_action_space.dtype
        limit = config.kwargs.get("max_episode_steps", gym.spec(config.id).max_episode_steps)
        self.max_episode_steps: int | None = int(limit) if limit is not None else None

        n, dev = num_envs, self.device
        obs_dtype = self.dtype if isinstance(self.observation_space, Box) else torch.int64
        shape = (n, *self.observation_space.shape)
        self._result = StepResult(
            obs=torch.zeros(shape, dtype=obs_dtype, device=dev),
            reward=torch.zeros(n, dtype=self.dtype, device=dev),
            terminated=torch.zeros(n, dtype=torch.bool, device=dev),
            truncated=torch.zeros(n, dtype=torch.bool, device=dev),
            final_obs=torch.zeros(shape, dtype=obs_dtype, device=dev),
        )
        # episode bookkeeping on the host (the envs are there anyway)
        self._ep_return = np.zeros(n, dtype=np.float64)
        self._ep_length = np.zeros(n, dtype=np.int64)
        self._stats = np.zeros(3, dtype=np.float64)
        self.reset(seed)

    @property
    def spec(self) -> EnvSpec:
        return EnvSpec.of(self)

    @property
    def obs(self) -> Tensor:
        return self._result.obs

    def _write(self, out: Tensor, array: Any) -> None:
        out.copy_(torch.as_tensor(np.asarray(array)).reshape(out.shape))

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset every sub-env (gymnasium seeds sub-env ``i`` with ``seed + i``)."""
        obs, _ = self.venv.reset(seed=seed)
        self._seed, self._steps = seed, 0  # a checkpoint's reset seed follows them
        self._write(self._result.obs, obs)
        self._ep_return[:] = 0
        self._ep_length[:] = 0
        return self._result.obs

    def step(self, action: Tensor) -> StepResult:
        if self.validate_actions:
            check_action(self.action_space, action, self.num_envs)
        act = action.detach().cpu().numpy().astype(self._np_action_dtype, copy=False)
        obs, reward, terminated, truncated, info = self.venv.step(act)
        self._steps += 1
        r = self._result
        self._write(r.obs, obs)
        self._write(r.reward, reward)
        self._write(r.terminated, terminated)
        self._write(r.truncated, truncated)
        final = np.array(obs, copy=True)
        if "_final_obs" in info:
            for i in np.flatnonzero(info["_final_obs"]):
                final[i] = info["final_obs"][i]
        self._write(r.final_obs, final)
        done = np.logical_or(terminated, truncated)
        self._ep_return += reward
        self._ep_length += 1
        self._stats += (self._ep_return[done].sum(), self._ep_length[done].sum(), done.sum())
        self._ep_return[done] = 0
        self._ep_length[done] = 0
        return r

    def _states(self) -> list[Any]:
        states = self.venv.get_attr("state") if self._has_state else None
        if states is None or any(s is None for s in states):
            raise NotImplementedError(
                f"{self.name}: get_state/set_state need the gymnasium env to keep `unwrapped.state` "
                "(classic-control envs do; this one does not)")
        return list(states)

    def get_state(self) -> Tensor:
        """The sub-envs' ``unwrapped.state`` stacked ``[N, state_dim]`` (float64)."""
        states = self._states()
        return torch.as_tensor(np.stack([np.asarray(s, dtype=np.float64).ravel() for s in states]),
                               device=self.device)

    def set_state(self, state: Tensor) -> None:
        """Write ``state`` ``[N, state_dim]`` into the sub-envs' ``unwrapped.state`` (keeping
        each env's own container type and dtype) and recompute the observation."""
        current = self._states()
        rows = torch.as_tensor(state).detach().cpu().double().numpy()
        want = (self.num_envs, int(np.asarray(current[0]).size))
        if rows.shape != want:
            raise ValueError(f"{self.name}.set_state: state shape {rows.shape} != {want}")
        new = []
        for old, row in zip(current, rows, strict=True):
            if isinstance(old, np.ndarray):
                new.append(row.astype(old.dtype).reshape(old.shape))
            else:  # e.g. MountainCar keeps a tuple of floats
                new.append(type(old)(float(v) for v in row))
        self.venv.set_attr("state", new)
        self._write(self._result.obs, self._observe_states(new))

    def _observe_states(self, states: list[Any]) -> Any:
        """The observation of the states just set: the env's ``_get_obs``/``_get_ob`` when it
        has one, else the state itself when the shapes agree."""
        if self._obs_method is not None:
            return np.stack([np.asarray(o) for o in self.venv.call(self._obs_method)])
        flat = np.stack([np.asarray(s, dtype=np.float64).ravel() for s in states])
        if flat.shape[1:] == tuple(self.observation_space.shape):
            return flat
        raise NotImplementedError(f"{self.name}.set_state: cannot compute the observation of a state")

    def state_dict(self) -> dict[str, Any]:
        """The completed-episode sums not yet popped and a seed for the fresh episodes a resumed
        run starts (the sub-envs' own state is not saved: see ``resume_caveat``)."""
        entropy = [self._seed if self._seed is not None else 0, self._steps]
        return {"episode_sums": self._stats.copy(), "reset_seed": int(np.random.SeedSequence(entropy).generate_state(1)[0])}

    def load_state_dict(self, state: Any) -> None:
        """Reset every sub-env with the saved seed (fresh episodes) and restore the sums."""
        sums = np.asarray(state["episode_sums"], dtype=np.float64)
        if sums.shape != self._stats.shape:
            raise ValueError(f"{self.name}.load_state_dict: episode sums of shape {sums.shape} != {self._stats.shape}")
        self.reset(seed=int(state["reset_seed"]))
        self._stats[:] = sums

    def pop_episode_stats(self) -> dict[str, Tensor]:
        s = torch.as_tensor(self._stats.copy(), device=self.device)
        self._stats[:] = 0
        return {"return_sum": s[0], "length_sum": s[1], "count": s[2]}

    def close(self) -> None:
        self.venv.close()

    def __repr__(self) -> str:
        return f"GymnasiumEnv({self.config.id!r}, num_envs={self.num_envs}, {self.config.vectorization})"
