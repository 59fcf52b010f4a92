"""Shared bookkeeping for batched tensor envs: buffers, autoreset, time limit, episode stats,
and :class:`EnvList` for resets whose cost is paid only by the envs that ended.

A subclass writes the physics; this class does the rest, capture-safe (masks with
``torch.where``, in-place writes into buffers allocated once, no host sync)::

    class MyEnv(TensorEnv):
        def _reset_envs(self, mask):   # write fresh state where mask [N] is True
        def _advance(self, action):    # step the state; return (reward [N], terminated [N])
        def _observe(self, out):       # write the observation into out [N, *obs_shape]
        def get_state(self)            # a tensor [N, state_dim] or a dict of [N, ...] tensors
        def _set_state(self, state)    # the same structure, already checked and cast

Resets. ``_reset_envs(mask)`` runs every step with the mask of envs that just ended. For a
small state (CartPole's four floats) draw fresh values for all envs and ``torch.where`` them
in: cheap and branch-free. When a fresh state is expensive (a generated 64x64 world), make it
on demand for the envs that ended alone: :class:`EnvList` lists them on the device (their
count too), and a kernel on a fixed grid walks the list up to that count, so the work follows
the resets, the launch is the same every step and no host sync is needed. Give each episode
its own random stream (for instance Philox keyed by the run's key, on counters (draw, env,
the env's episode count)), so no two episodes share a start. Without a kernel (torch ops on
the CPU), ``mask.nonzero()`` lists them: a host sync, harmless where nothing is recorded, but
then pass ``capture_safe=False``.

Episode statistics. Beside return and length, an env may keep per-episode values (an
achievement unlocked, a distance reached): list their names in ``episode_stat_keys`` and
return ``{key: [N] float}`` from ``_episode_values()`` (read right before the reset, where an
episode ends; an env with a cheaper way to sum them over the ended episodes overrides
``_episode_sums(done)``). ``pop_episode_stats`` then also returns ``<key>_sum``, and the driver reports
``episode_<key>`` (the mean over episodes) and whatever ``episode_metrics(means)`` derives.

Checkpoints. :meth:`TensorEnv.state_dict` holds what a resumed run needs to step on exactly as
the env would have: ``get_state()``, the time-limit counters, the running episode sums and the
completed-episode sums not yet popped, the observation buffer, the generator, and whatever a
subclass names in ``_extra_state()`` (live tensors or generators: the key of the next worlds, a
kernel's random key), which :meth:`TensorEnv.load_state_dict` copies back in place. An env
whose state holds more than that and cannot save it sets ``resume_caveat`` to say why.

An env that is not capture-safe (it syncs with the host anyway) observes once per step when
no env finished: the observation after the step is then the final one, copied. So
``_observe`` must read the state only, which ``_reset_envs`` of an all-False mask leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from noeira.core.contracts import Backend, EnvSpec, EnvState, StepResult
from noeira.core.errors import ConfigError
from noeira.core.rng import restore_generator
from noeira.core.spaces import Box, Discrete, MultiDiscrete, Space

log = logging.getLogger("noeira")

__all__ = ["EnvList", "TensorEnv", "check_action", "check_state"]


def check_action(space: Space, action: Tensor, num_envs: int) -> None:
    """Raise a one-line ``ValueError`` when ``action`` does not fit ``space`` for ``num_envs``
    envs (shape, dtype, range). Off the hot path: it syncs with the host."""
    want = (num_envs, *space.shape)
    if not isinstance(action, Tensor):
        raise ValueError(f"action must be a torch.Tensor, got {type(action).__name__}")
    if tuple(action.shape) != want:
        raise ValueError(f"action shape {tuple(action.shape)} != expected {want}")
    if isinstance(space, Box):
        if not action.is_floating_point():
            raise ValueError(f"action dtype {action.dtype} is not floating point for {space}")
    elif action.is_floating_point():
        raise ValueError(f"action dtype {action.dtype} is not an integer dtype for {space}")
    if isinstance(space, (Discrete, MultiDiscrete)) and not space.contains(action.to(space.device)):
        raise ValueError(f"action out of range for {space}")


def check_state(name: str, want: EnvState, got: EnvState, device: torch.device) -> EnvState:
    """``got`` as ``want``'s structure, shapes and dtypes, on ``device``; a one-line ``ValueError``
    naming the first mismatch (a key, a shape) otherwise."""
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping):
            raise ValueError(f"{name}.set_state: expected a dict of tensors ({', '.join(want)}), got {type(got).__name__}")
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        if missing or extra:
            raise ValueError(f"{name}.set_state: keys differ (missing: {', '.join(missing) or '-'}; "
                             f"unknown: {', '.join(extra) or '-'})")
        return {k: check_state(f"{name}[{k!r}]", want[k], got[k], device) for k in want}
    if isinstance(got, Mapping):
        raise ValueError(f"{name}.set_state: expected one tensor {tuple(want.shape)}, got a dict")
    got = torch.as_tensor(got, device=device)
    if tuple(got.shape) != tuple(want.shape):
        raise ValueError(f"{name}.set_state: state shape {tuple(got.shape)} != {tuple(want.shape)}")
    return got.to(want.dtype)


def _copy_into(live: Tensor, saved: Any, what: str) -> None:
    saved = torch.as_tensor(saved)
    if tuple(saved.shape) != tuple(live.shape):
        raise ValueError(f"{what}: saved shape {tuple(saved.shape)} != {tuple(live.shape)}")
    live.copy_(saved)


class EnvList:
    """The envs a mask selects, listed on the device: ``rows[:count]`` holds them in env order
    (int32), ``count`` ([1] int32, on the device) how many there are; for work only those envs
    need, such as an expensive reset (see the module docstring). Capture-safe: :meth:`select`
    is a cumsum and a scatter over the ``N`` envs into buffers allocated here, with no host
    sync, so a kernel launched on a fixed grid reads the list and its count as they are when it
    runs (recorded in a CUDA graph, on each replay's mask)."""

    def __init__(self, num_envs: int, device: torch.device) -> None:
        self.rows = torch.zeros(num_envs + 1, dtype=torch.int32, device=device)
        """The selected envs at the front, in env order; the rest stale (its last slot a sink)."""
        self.count = torch.zeros(1, dtype=torch.int32, device=device)
        """How many envs :meth:`select` listed."""
        self._envs = torch.arange(num_envs, dtype=torch.int32, device=device)

    def select(self, mask: Tensor) -> None:
        """List the envs where ``mask`` [N] (bool) is True."""
        order = torch.cumsum(mask, 0, dtype=torch.int32)  # the i-th selected env has i + 1
        self.rows.scatter_(0, torch.where(mask, order - 1, self._envs.shape[0]).long(), self._envs)
        self.count.copy_(order[-1:])


class TensorEnv:
    """Base for batched envs whose state is torch tensors. See the module docstring."""

    name: str = "env"
    episode_stat_keys: tuple[str, ...] = ()
    """Extra per-episode statistics this env reports (see :meth:`_episode_values`)."""
    truncates_at_limit_only: bool = True
    """:meth:`step` truncates only at ``max_episode_steps`` (a subclass that truncates for other
    reasons sets this False; see ``EnvSpec.truncates_at_limit_only``)."""
    resume_caveat: str | None = None
    """Why a run resumed from :meth:`state_dict` does not continue bit-identically (one line;
    None: it does)."""
    render_fps: float | None = None
    """A video's frame rate, for an env that renders (None: the caller picks one)."""

    def __init__(
        self,
        num_envs: int,
        backend: Backend,
        observation_space: Space,
        action_space: Space,
        max_episode_steps: int | None,
        seed: int | None = None,
        capture_safe: bool = True,
        dtype: torch.dtype = torch.float32,
        validate_actions: bool = False,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"env.num_envs: must be an integer >= 1, got {num_envs!r}")
        self.num_envs, self.backend, self.device = num_envs, backend, backend.device
        self.dtype = dtype
        self.observation_space, self.action_space = observation_space, action_space
        self.max_episode_steps, self.capture_safe = max_episode_steps, capture_safe
        self.validate_actions = validate_actions
        self.generator = backend.generator(seed)
        n, dev = num_envs, self.device
        obs_shape = observation_space.shape
        obs_dtype = observation_space.dtype
        self._result = StepResult(
            obs=torch.zeros((n, *obs_shape), dtype=obs_dtype, device=dev),
            reward=torch.zeros(n, dtype=dtype, device=dev),
            terminated=torch.zeros(n, dtype=torch.bool, device=dev),
            truncated=torch.zeros(n, dtype=torch.bool, device=dev),
            final_obs=torch.zeros((n, *obs_shape), dtype=obs_dtype, device=dev),
        )
        self.elapsed = torch.zeros(n, dtype=torch.int64, device=dev)
        self.episode_return = torch.zeros(n, dtype=torch.float64 if dtype == torch.float64 else torch.float32, device=dev)
        self.episode_length = torch.zeros(n, dtype=torch.int64, device=dev)
        # return_sum, length_sum, count, then one sum per episode_stat_keys entry
        self._stats = torch.zeros(3 + len(self.episode_stat_keys), dtype=torch.float64, device=dev)
        self._all = torch.ones(n, dtype=torch.bool, device=dev)

    # -- what a subclass writes ------------------------------------------------------------
    def _reset_envs(self, mask: Tensor) -> None:
        raise NotImplementedError

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def _observe(self, out: Tensor) -> None:
        raise NotImplementedError

    def get_state(self) -> EnvState:
        raise NotImplementedError

    def _set_state(self, state: EnvState) -> None:
        raise NotImplementedError

    def _episode_values(self) -> dict[str, Tensor]:
        """``{key: [N] float}`` for each of ``episode_stat_keys``: the value of the episode each
        env is in, read at the step it ends (before its reset)."""
        return {}

    def _episode_sums(self, done: Tensor) -> Tensor:
        """The sums of ``episode_stat_keys``' values (float [K], in their order) over the envs where
        ``done`` (bool [N]): one [N, K] table of :meth:`_episode_values` and one product (K reductions
        of their own were ~5 launches each: Craftax's 69 statistics, ~350 small kernels a step)."""
        values = self._episode_values()
        table = torch.stack([values[k] for k in self.episode_stat_keys], 1)
        return done.to(self._stats.dtype) @ table.to(self._stats.dtype)

    def episode_metrics(self, means: Mapping[str, float]) -> dict[str, float]:
        """Metrics derived on the host from the episode means (``episode_<key>``); none by default."""
        return {}

    def _extra_state(self) -> dict[str, Tensor | torch.Generator]:
        """What decides how the env steps on besides :meth:`get_state`, the counters and
        ``self.generator``: live tensors (the key of the next worlds, a kernel's random key) and
        generators, by name. :meth:`state_dict` copies them; :meth:`load_state_dict` copies the
        saved values back into them in place (so recorded graphs keep their tensors). None by
        default; a subclass adds its own (``{**super()._extra_state(), "key": self.key}``)."""
        return {}

    @classmethod
    def evaluation_config(cls, config: Any) -> Any:
        """The config of the env that scores a policy (the final evaluation, ``noeira eval``,
        ``--video``); the training config by default."""
        return config

    def render(self) -> Tensor:
        """RGB frames of the current state of every env, ``[N, H, W, 3]`` uint8 on any device
        (optional; ``noeira eval --video`` records env 0). Off the hot path: it may sync with the
        host. An env that renders may set ``render_fps`` (a video's default frame rate). This
        default raises ``NotImplementedError``: the env cannot render."""
        raise NotImplementedError(f"env {self.name!r} cannot render frames (it has no render())")

    # -- the contract ----------------------------------------------------------------------
    @property
    def spec(self) -> EnvSpec:
        return EnvSpec.of(self)

    @property
    def obs(self) -> Tensor:
        return self._result.obs

    def reset(self, seed: int | None = None) -> Tensor:
        if seed is not None:
            self.generator.manual_seed(seed)
        self._reset_envs(self._all)
        self.elapsed.zero_()
        self.episode_return.zero_()
        self.episode_length.zero_()
        self._observe(self._result.obs)
        return self._result.obs

    def set_state(self, state: EnvState) -> None:
        self._set_state(check_state(self.name, self.get_state(), state, self.device))
        self._observe(self._result.obs)

    def step(self, action: Tensor) -> StepResult:
        if self.validate_actions:
            check_action(self.action_space, action, self.num_envs)
        r = self._result
        reward, terminated = self._advance(action)
        r.reward.copy_(reward)
        r.terminated.copy_(terminated)
        self.elapsed += 1
        if self.max_episode_steps is not None:
            torch.ge(self.elapsed, self.max_episode_steps, out=r.truncated)
        self._observe(r.final_obs)
        done = r.terminated | r.truncated
        self.episode_return += r.reward
        self.episode_length += 1
        d = done.to(self._stats.dtype)
        sums = torch.stack([(self.episode_return * d).sum(), (self.episode_length * d).sum(), d.sum()])
        if self.episode_stat_keys:
            sums = torch.cat([sums, self._episode_sums(done)])
        self._stats += sums
        self.episode_return.masked_fill_(done, 0)
        self.episode_length.masked_fill_(done, 0)
        self.elapsed.masked_fill_(done, 0)
        self._reset_envs(done)
        if self.capture_safe or bool(done.any()):
            self._observe(r.obs)
        else:  # nothing was reset: the state is the one just observed (this env syncs anyway)
            r.obs.copy_(r.final_obs)
        return r

    def _counters(self) -> dict[str, Tensor]:
        return {"elapsed": self.elapsed, "episode_return": self.episode_return, "episode_length": self.episode_length,
                "episode_sums": self._stats, "obs": self._result.obs}

    def state_dict(self) -> dict[str, Any]:
        """Copies of everything that decides the env's next steps (see the module docstring):
        ``state`` (:meth:`get_state`), ``elapsed``, ``episode_return``, ``episode_length``,
        ``episode_sums`` (completed episodes not yet popped), ``obs``, ``generator`` (its state)
        and ``extra`` (:meth:`_extra_state`)."""
        state = self.get_state()
        out: dict[str, Any] = {"state": {k: v.clone() for k, v in state.items()} if isinstance(state, Mapping)
                               else state.clone()}
        out.update({k: v.clone() for k, v in self._counters().items()})
        out["generator"] = self.generator.get_state()
        out["extra"] = {k: v.get_state() if isinstance(v, torch.Generator) else v.clone()
                        for k, v in self._extra_state().items()}
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s result in place, from any device: tensors move, a
        generator state that cannot (CUDA's on a CPU) re-seeds the generator deterministically
        (:func:`noeira.core.rng.restore_generator`). A state of another shape is a one-line
        ``ValueError``; ``extra`` entries only one side has (an option that differs by device,
        such as a kernel's random key) are left as they are, in one log line."""
        self.set_state(state["state"])
        for k, live in self._counters().items():
            _copy_into(live, state[k], f"{self.name}.load_state_dict: {k}")
        restore_generator(self.generator, state["generator"], f"env {self.name!r} generator")
        live_extra, saved = self._extra_state(), dict(state.get("extra", {}))
        for k, live in live_extra.items():
            if k not in saved:
                continue
            if isinstance(live, torch.Generator):
                restore_generator(live, saved[k], f"env {self.name!r} {k}")
            else:
                _copy_into(live, saved[k], f"{self.name}.load_state_dict: extra {k}")
        missing, unknown = sorted(set(live_extra) - set(saved)), sorted(set(saved) - set(live_extra))
        if missing or unknown:
            log.warning("env %r: state not in the checkpoint, kept as reset: %s; saved state this env does not use: %s",
                        self.name, ", ".join(missing) or "-", ", ".join(unknown) or "-")

    def pop_episode_stats(self) -> dict[str, Tensor]:
        """Device scalars ``return_sum``, ``length_sum``, ``count`` of the episodes completed since
        the last call and ``<key>_sum`` for each of ``episode_stat_keys``; then zero them. The
        one way episode statistics leave the env."""
        s = self._stats.clone()
        self._stats.zero_()
        out = {"return_sum": s[0], "length_sum": s[1], "count": s[2]}
        out.update({f"{k}_sum": s[3 + i] for i, k in enumerate(self.episode_stat_keys)})
        return out

    def uncount_episodes(self, mask: Tensor, returns: Tensor, lengths: Tensor) -> None:
        """Take episodes back out of the completed-episode sums not yet popped: those of the envs
        where ``mask [N]`` (bool) is True, which ended with ``returns [N]`` and ``lengths [N]``.
        For a wrapper that undoes a step (the gymnasium bridge's next-step autoreset). Their
        ``episode_stat_keys`` values stay counted (the env read them inside the step). No host sync."""
        d = mask.to(self._stats.dtype)
        sums = [(returns.to(d.dtype) * d).sum(), (lengths.to(d.dtype) * d).sum(), d.sum()]
        self._stats[:3] -= torch.stack(sums)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, device={self.device})"
