"""A noeira ``BatchedEnv`` as a gymnasium ``VectorEnv`` (``noeira.envs.to_gymnasium``).

**Autoreset** (``metadata["autoreset_mode"]``, a :class:`gymnasium.vector.AutoresetMode`),
chosen by ``autoreset_mode``:

- ``"next-step"`` (the default, as gymnasium's own vector envs): the step on which sub-env
  ``i`` ends returns the observation it reached in ``obs[i]``, with its reward and flags.
  The next ``step`` ignores ``actions[i]`` (still checked against the space), resets sub-env
  ``i`` and returns its first observation with reward 0, terminated and truncated False.
  ``info`` holds no final observation. Step for step what ``SyncVectorEnv(..., autoreset_mode=NEXT_STEP)`` of the
  reference env returns; every gymnasium vector wrapper takes it.
- ``"same-step"`` (noeira's own): ``step`` returns the first observation of the next episode
  in ``obs[i]``; the observation the step reached is ``info["final_obs"][i]`` and
  ``info["_final_obs"][i]`` is True. As gymnasium's vector envs in this mode,
  ``info["final_obs"]`` is an object array of ``num_envs`` entries (``None`` where the env did
  not end) with ``numpy=True``; with ``numpy=False`` it is the whole ``[N, *obs_shape]``
  tensor (rows valid where the mask is True). ``RecordEpisodeStatistics`` supports it;
  gymnasium's vector observation wrappers refuse it.
- ``"disabled"``: as next-step on the step where sub-env ``i`` ends; stepping it again before
  ``reset(options={"reset_mask": mask})`` resets it raises ``AssertionError`` (as gymnasium).

**How next-step sits on a batched env.** A noeira env resets sub-env ``i`` inside the step
where it ends: its state is then a fresh start ``s0``, its observation ``o0``. The bridge
returns the reached observation (``final_obs``) and marks ``i`` pending. The next batched
step moves every sub-env, ``i`` too (one call steps them all), so the bridge undoes that for
the pending ones: before the step it copies the state (``get_state()``), the observation and
the env's per-env step counter and episode return and length (``TensorEnv.elapsed``,
``episode_return``, ``episode_length``); after it, it writes the pending rows back
(``set_state`` of the state with those rows restored) and returns ``o0``, reward 0, flags
False for them. A pending env is then at ``s0`` with no elapsed step, where gymnasium's reset
leaves it, and its next step starts from there: the time limit counts the same steps.
Exactness: the bridge adds no difference of its own where ``get_state()`` is the whole state
(classic control in float64: the states, rewards and flags of gymnasium's ``SyncVectorEnv``,
and its float32 observations); a MuJoCo env's ``get_state()`` is ``qpos, qvel``, and engine
caches such as the solver's warm start keep the ignored step, a difference within the
solver's tolerance. If the ignored step would have ended a pending env (an env that can end on its first step, or
``max_episode_steps=1``), the env counted that episode: the bridge takes its return, length
and count back out of ``pop_episode_stats`` (``TensorEnv.uncount_episodes``); an env's extra per-episode statistics
(``episode_stat_keys``) keep it. Reset draws advance as if the ignored step had been taken,
which changes which random start later episodes get, not their distribution. Cost: on a step
after some env ended, one copy of the state and one ``set_state``. Next-step needs a
:class:`noeira.core.TensorEnv` (its counters); ``gym:<EnvId>`` envs offer same-step and disabled.

**Reset.** ``reset(seed=...)`` resets every sub-env; one generator drives them all (a list of
seeds takes its first). ``options={"reset_mask": mask}`` (gymnasium's partial reset: a numpy
bool array ``[N]``, or a bool tensor) resets only those sub-envs: where they are pending (and
no seed is given), to the start noeira already drew for them; otherwise (a TensorEnv) by a
fresh reset of the whole env (its generator, reseeded by ``seed``) whose rows are kept only
where ``mask`` is True, the other sub-envs' state and counters put back, as exactly as
``get_state()`` holds them. A mask of every env is a plain reset. Any other option is a
``ValueError`` naming it: a noeira env takes no reset options.

**Actions** are checked as gymnasium's spaces would: ``[N, *single_shape]``; integers within
the bounds for ``Discrete``/``MultiDiscrete``; an integer or float dtype for ``Box`` (values
outside the bounds go to the env, as gymnasium's vector envs pass them on: Pendulum clips them). A misfit raises
:class:`InvalidActionError` (``gymnasium.error.InvalidAction``, also an ``AssertionError``
and a ``ValueError``: what gymnasium's envs and vector envs raise for such input) before
anything moves.

``numpy=True`` (default): observations float32/float64 numpy arrays, actions taken as
numpy or torch. ``numpy=False``: torch tensors on the env's device (copies, so they are
yours to keep), for torch code that wants gymnasium's interface without host copies; the
range check of discrete actions and next-step's pending flag read one value from the device.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from torch import Tensor

from noeira.core import BatchedEnv, Box, Discrete, MultiDiscrete, Space, TensorEnv
from noeira.core.contracts import EnvState

__all__ = ["InvalidActionError", "NoeiraVectorEnv", "parse_autoreset_mode", "to_gymnasium_space"]

_MODES = {"nextstep": AutoresetMode.NEXT_STEP, "samestep": AutoresetMode.SAME_STEP, "disabled": AutoresetMode.DISABLED}


class InvalidActionError(gym.error.InvalidAction, AssertionError, ValueError):
    """Actions that do not fit the action space: gymnasium's ``InvalidAction``, and also the
    ``AssertionError`` (a sub-env's ``action_space.contains`` check) and ``ValueError`` (the
    wrong number of actions) that gymnasium's envs and vector envs raise for such input."""


def parse_autoreset_mode(mode: str | AutoresetMode) -> AutoresetMode:
    """``"next-step"``/``"same-step"``/``"disabled"`` (any case, ``-``/``_`` or none, as
    gymnasium's ``"NextStep"``) or an ``AutoresetMode`` -> the ``AutoresetMode``."""
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str) and (key := mode.replace("-", "").replace("_", "").lower()) in _MODES:
        return _MODES[key]
    raise ValueError(f"autoreset_mode: expected 'next-step', 'same-step', 'disabled' or a gymnasium AutoresetMode, "
                     f"got {mode!r}")


def to_gymnasium_space(space: Space) -> gym.Space[Any]:
    """A noeira space (of one env) as the gymnasium space."""
    if isinstance(space, Box):
        dtype = np.float64 if space.dtype == torch.float64 else np.float32
        return gym.spaces.Box(space.low.cpu().numpy().astype(dtype), space.high.cpu().numpy().astype(dtype),
                              dtype=dtype)
    if isinstance(space, Discrete):
        return gym.spaces.Discrete(space.n, start=space.start)
    if isinstance(space, MultiDiscrete):
        return gym.spaces.MultiDiscrete(space.nvec.cpu().numpy())
    raise TypeError(f"no gymnasium equivalent for {space!r}")


def _clone(state: EnvState) -> EnvState:
    if isinstance(state, Mapping):
        return {k: v.clone() for k, v in state.items()}
    return state.clone()


def _rows(mask: Tensor, x: Tensor) -> Tensor:
    """``mask [N]`` shaped to broadcast over ``x [N, ...]``."""
    return mask.view(-1, *([1] * (x.dim() - 1)))


def _where(mask: Tensor, a: EnvState, b: EnvState) -> EnvState:
    """Rows of ``a`` where ``mask`` is True, of ``b`` elsewhere (tensors or dicts of them)."""
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping)
        return {k: _where(mask, a[k], b[k]) for k in a}
    assert isinstance(b, Tensor)
    return torch.where(_rows(mask.to(a.device), a), a, b)


def _short(x: Any) -> str:
    text = " ".join(repr(x).split())
    return text if len(text) <= 80 else text[:77] + "..."


class NoeiraVectorEnv(VectorEnv):
    """``env`` (a noeira BatchedEnv of ``N`` envs) through gymnasium's VectorEnv API.

    ``reset(seed, options)`` -> ``(obs [N, ...], {})``; ``step(actions [N, ...])`` ->
    ``(obs, reward [N], terminated [N], truncated [N], info)``; see the module docstring
    for the autoreset modes, reset options and action checks."""

    def __init__(self, env: BatchedEnv, numpy: bool = True,
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP) -> None:
        self.env, self.numpy = env, numpy
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:  # fail here, not at the first episode end
            try:
                self._tensor_env("next-step autoreset").get_state()
            except NotImplementedError:
                raise ValueError(f"to_gymnasium: next-step autoreset needs get_state/set_state, which {env!r} does not "
                                 "have: use autoreset_mode='same-step'") from None
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.num_envs = env.num_envs
        self.single_observation_space = to_gymnasium_space(env.observation_space)
        self.single_action_space = to_gymnasium_space(env.action_space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._action_dtype = env.action_space.dtype
        self.spec = None
        self._pending = torch.zeros(self.num_envs, dtype=torch.bool, device=env.device)
        """Sub-envs that ended on the last step and whose reset is still to show (next-step, disabled)."""
        self._any_pending = False
        self._shown: Tensor | None = None
        """The observation last returned, where it is not ``env.obs`` (next-step, disabled)."""

    def _tensor_env(self, what: str, instead: str = "use autoreset_mode='same-step'") -> TensorEnv:
        if not isinstance(self.env, TensorEnv):
            raise ValueError(f"to_gymnasium: {what} needs a noeira TensorEnv (its state through get_state/set_state and "
                             f"its per-env step counters); {self.env!r} is not one: {instead}")
        return self.env

    def _counters(self, env: TensorEnv) -> tuple[Tensor, Tensor, Tensor]:
        return env.elapsed, env.episode_return, env.episode_length

    def _out(self, x: Tensor) -> Any:
        return x.detach().cpu().numpy().copy() if self.numpy else x.clone()

    # -- reset ---------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every env, or those of ``options["reset_mask"]``; ``seed`` an int (a list
        takes its first entry: one generator drives all envs). See the module docstring."""
        name = type(self).__name__
        opts = dict(options or {})  # the caller's dict stays as it is (RecordEpisodeStatistics reads it after us)
        mask = opts.pop("reset_mask", None)
        if opts:
            raise ValueError(f"{name}.reset: unknown option(s) {', '.join(map(repr, sorted(opts)))}: a noeira env takes "
                             "no reset options but gymnasium's 'reset_mask'")
        if isinstance(seed, (list, tuple)):
            seed = seed[0]
        if seed is not None:
            self._np_random, self._np_random_seed = np.random.default_rng(seed), seed
        m = None if mask is None else self._reset_mask(mask)
        if m is None or bool(m.all()):
            obs = self.env.reset(seed=seed)
            self._pending.zero_()
            self._any_pending, self._shown = False, None
            return self._out(obs), {}
        shown = self._shown if self._shown is not None else self.env.obs.clone()
        if not (seed is None and self.autoreset_mode != AutoresetMode.SAME_STEP and not bool((m & ~self._pending).any())):
            self._reset_rows(m, seed)
        # else: every env to reset is pending: noeira reset it where it ended; its start is in env.obs
        obs = torch.where(_rows(m, shown), self.env.obs, shown)
        self._pending &= ~m
        self._any_pending = bool(self._pending.any())
        self._shown = obs if self.autoreset_mode != AutoresetMode.SAME_STEP else None
        return self._out(obs), {}

    def _reset_mask(self, mask: Any) -> Tensor:
        """gymnasium's checks of ``options["reset_mask"]`` (a bool tensor is taken too)."""
        name = type(self).__name__
        if isinstance(mask, Tensor):
            mask = mask.detach().cpu().numpy()
        if not isinstance(mask, np.ndarray):
            raise TypeError(f"{name}.reset: options['reset_mask'] must be a numpy array, got {type(mask).__name__}")
        if mask.shape != (self.num_envs,):
            raise ValueError(f"{name}.reset: options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}")
        if mask.dtype != np.bool_:
            raise TypeError(f"{name}.reset: options['reset_mask'] must have dtype bool, got {mask.dtype}")
        if not mask.any():
            raise ValueError(f"{name}.reset: options['reset_mask'] must hold at least one True, got {mask}")
        return torch.as_tensor(mask, device=self.env.device)

    def _reset_rows(self, m: Tensor, seed: int | None) -> None:
        """Reset the sub-envs where ``m``: a fresh reset of the whole env, then the others' state
        and counters put back."""
        env = self._tensor_env("reset(options={'reset_mask': ...}) of some envs", "reset them all")
        state, counters = _clone(env.get_state()), [c.clone() for c in self._counters(env)]
        env.reset(seed=seed)
        env.set_state(_where(m, env.get_state(), state))
        for c, saved in zip(self._counters(env), counters, strict=True):
            c.copy_(torch.where(m, c, saved))

    # -- step ----------------------------------------------------------------------------
    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        action = self._action(actions)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            return self._step_same(action)
        if self.autoreset_mode == AutoresetMode.DISABLED and self._any_pending:
            ended = np.flatnonzero(self._pending.cpu().numpy()).tolist()
            raise AssertionError(f"{type(self).__name__}.step: sub-envs {ended} ended and autoreset is disabled: reset "
                                 "them first with reset(options={'reset_mask': mask})")
        env, undo = self.env, self._any_pending  # next-step with envs to reset now
        if undo:
            tenv = self._tensor_env("next-step autoreset")
            pend = self._pending
            state, start_obs = _clone(tenv.get_state()), tenv.obs.clone()
            counters = [c.clone() for c in self._counters(tenv)]
        r = env.step(action)
        if undo:
            ended = (r.terminated | r.truncated) & ~pend
            obs = torch.where(_rows(ended, r.obs), r.final_obs, torch.where(_rows(pend, r.obs), start_obs, r.obs))
            reward = r.reward.masked_fill(pend, 0)
            terminated, truncated = r.terminated & ~pend, r.truncated & ~pend
            self._uncount(tenv, (r.terminated | r.truncated) & pend, r.reward, counters)
            tenv.set_state(_where(pend, state, tenv.get_state()))
            for c, saved in zip(self._counters(tenv), counters, strict=True):
                c.copy_(torch.where(pend, saved, c))
        else:
            ended = r.terminated | r.truncated
            obs = torch.where(_rows(ended, r.obs), r.final_obs, r.obs)
            reward, terminated, truncated = r.reward, r.terminated, r.truncated
        self._pending, self._shown = ended, obs
        out = self._out(obs), self._out(reward), self._out(terminated), self._out(truncated)
        self._any_pending = bool(out[2].any() or out[3].any()) if self.numpy else bool(ended.any())
        return *out, {}

    def _uncount(self, env: TensorEnv, phantom: Tensor, reward: Tensor, counters: list[Tensor]) -> None:
        """Take the episodes that ended in the ignored step (``phantom``) out of the env's
        episode sums (``TensorEnv.uncount_episodes``)."""
        _, ret, length = counters
        env.uncount_episodes(phantom, ret + reward.to(ret.dtype), length + 1)

    def _step_same(self, action: Tensor) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        r = self.env.step(action)
        done = r.terminated | r.truncated
        info: dict[str, Any] = {}
        if self.numpy:
            mask = done.cpu().numpy()
            if mask.any():
                final = r.final_obs.cpu().numpy()
                objs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(mask):
                    objs[i] = final[i].copy()
                info = {"final_obs": objs, "_final_obs": mask}
        else:
            # no host sync: always hand over the mask and the whole final_obs tensor
            info = {"final_obs": r.final_obs.clone(), "_final_obs": done}
        return self._out(r.obs), self._out(r.reward), self._out(r.terminated), self._out(r.truncated), info

    # -- actions -------------------------------------------------------------------------
    def _action(self, actions: Any) -> Tensor:
        """``actions`` checked against the action space (see the module docstring) as a tensor
        of the env's action dtype on its device."""
        space, want = self.env.action_space, (self.num_envs, *self.single_action_space.shape)

        def bad(reason: str) -> InvalidActionError:
            return InvalidActionError(f"{type(self).__name__}.step: invalid actions {_short(actions)} for "
                                      f"{self.num_envs} x {self.single_action_space}: {reason}")

        if isinstance(actions, Tensor):
            a = actions.detach()
            dtype, real = str(a.dtype).removeprefix("torch."), not (a.is_complex() or a.dtype == torch.bool)
            integer = real and not a.is_floating_point()
        else:
            try:
                arr = np.asarray(actions)
            except (TypeError, ValueError) as err:  # ragged nested lists
                raise bad(f"not an array ({err})") from None
            dtype, real, integer = str(arr.dtype), arr.dtype.kind in "iuf", arr.dtype.kind in "iu"
            a = torch.as_tensor(np.ascontiguousarray(arr.astype(np.int64) if integer else arr) if real else np.zeros(0))
        if not real:
            raise bad(f"dtype {dtype} is neither an integer nor a float type")
        if tuple(a.shape) != want:
            raise bad(f"shape {tuple(a.shape)}, expected {want} (num_envs, *single_action_space.shape)")
        if isinstance(space, (Discrete, MultiDiscrete)):
            if not integer:
                raise bad(f"dtype {dtype} is not an integer type")
            if isinstance(space, Discrete):
                low, high = space.start, space.start + space.n
                outside = (a < low) | (a >= high)
            else:
                low, nvec = 0, space.nvec.to(a.device)
                outside = (a < 0) | (a >= nvec)
            if bool(outside.any()):
                i = np.unravel_index(int(outside.flatten().int().argmax()), want)
                bound = f"[{low}, {high})" if isinstance(space, Discrete) else f"[0, {int(nvec[i[1:]])})"
                raise bad(f"actions[{', '.join(map(str, i))}] = {a[i].item()} is outside {bound}")
        return a.to(self.env.device, self._action_dtype)

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"NoeiraVectorEnv({self.env!r}, numpy={self.numpy}, autoreset_mode={self.autoreset_mode.value!r})"
