"""A replay buffer that lives on the device and is sampled there, capture-safe.

Layout: every field is one preallocated tensor ``[T, N, ...]`` with ``N = num_envs`` and
``T = ceil(buffer_size / N)`` rows; one ``collect`` writes one row (the N transitions of one
env step) at the write head ``pos`` and the ring wraps around. ``pos`` and ``size`` (rows
filled) are 0-d device tensors, so writing and sampling never read them on the host::

    rb = ReplayBuffer(capacity=100_000, num_envs=N, obs_shape=(3,), obs_dtype=torch.float32,
                      action_shape=(1,), action_dtype=torch.float32, device=dev, generator=g)
    rb.add_obs_action(obs, action)                  # before env.step (it rewrites obs)
    rb.add_result(reward, terminated, truncated, final_obs)   # after it; advances the head
    batch = rb.sample(batch_size, n_step=3, gamma=0.99)       # on the device

Next observations are the env's ``final_obs`` (the observation the step reached, before
any autoreset), so a transition cut by the time limit (``truncated``) bootstraps from its
true last observation; a ``terminated`` one does not bootstrap (``batch.terminated``).

Sampling is uniform over the stored transitions: a row ``floor(u * size)`` with ``u ~ U[0,1)``
(no host read of ``size``) and an env column drawn uniformly.

n-step returns (``n_step > 1``): from a sampled transition at row ``t`` of env ``e``, the
return sums ``gamma^k r[t+k, e]`` for ``k = 0 .. m-1`` and bootstraps from ``next_obs[t+m-1, e]``
with discount ``gamma^m``, where ``m <= n_step`` stops early

- at the first step that ended an episode (terminated or truncated): the return does not
  run into the next episode; a terminated end then has ``terminated = True`` (no bootstrap),
  a truncated end bootstraps from its ``final_obs`` as in the one-step case;
- at the newest row written: transitions near the write head use the steps that exist
  (a shorter return with the matching ``gamma^m``), never stale rows from before the wrap.

So every sampled target is an unbiased m-step target for some ``1 <= m <= n_step``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import attrs
import torch
from torch import Tensor

from noeira.core.errors import ConfigError

__all__ = ["Batch", "ReplayBuffer", "available_memory"]

log = logging.getLogger("noeira")


@attrs.frozen
class Batch:
    """A sampled batch of ``B`` transitions (leading dims may be ``[U, B]`` for U updates).

    ``obs`` / ``next_obs``: ``[B, *obs_shape]``; ``action``: ``[B, *action_shape]``;
    ``reward``: ``[B]`` the (n-step) discounted return; ``terminated``: ``[B]`` float, 1 where
    the target must not bootstrap; ``discount``: ``[B]`` ``gamma^m`` for the bootstrap term.
    """

    obs: Tensor
    action: Tensor
    reward: Tensor
    next_obs: Tensor
    terminated: Tensor
    discount: Tensor

    def __getitem__(self, i: int) -> Batch:
        """The ``i``-th of a stack of batches ``[U, B, ...]`` (views, no copies)."""
        return Batch(*(getattr(self, f.name)[i] for f in attrs.fields(Batch)))


def available_memory(device: torch.device) -> int | None:
    """Bytes that can still be allocated on ``device`` (None when unknown)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**27 else f"{n / 2**20:.1f} MiB"


class ReplayBuffer:
    """Circular buffer of ``capacity`` transitions from ``num_envs`` envs, on ``device``.

    See the module docstring for the layout, sampling and n-step rules. ``headroom`` is the
    fraction of free memory the buffer may take before creation is refused with a
    :class:`~noeira.core.errors.ConfigError` (instead of an out-of-memory crash later).
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        obs_shape: Sequence[int],
        obs_dtype: torch.dtype,
        action_shape: Sequence[int],
        action_dtype: torch.dtype,
        device: torch.device | str,
        generator: torch.Generator,
        reward_dtype: torch.dtype = torch.float32,
        headroom: float = 0.9,
    ) -> None:
        if capacity < 1:
            raise ConfigError(f"agent.buffer_size: must be >= 1, got {capacity}")
        self.num_envs = int(num_envs)
        self.rows = max(1, math.ceil(capacity / self.num_envs))
        self.capacity = self.rows * self.num_envs
        self.device = torch.device(device)
        self.generator = generator
        T, N = self.rows, self.num_envs
        obs_shape, action_shape = tuple(obs_shape), tuple(action_shape)
        specs = {
            "obs": ((T, N, *obs_shape), obs_dtype),
            "next_obs": ((T, N, *obs_shape), obs_dtype),
            "action": ((T, N, *action_shape), action_dtype),
            "reward": ((T, N), reward_dtype),
            "terminated": ((T, N), torch.bool),
            "done": ((T, N), torch.bool),
        }
        need = sum(math.prod(shape) * torch.empty((), dtype=dt).element_size() for shape, dt in specs.values())
        self.nbytes = need
        free = available_memory(self.device)
        if free is not None and need > headroom * free:
            raise ConfigError(
                f"agent.buffer_size: a replay buffer of {self.capacity} transitions needs {_gib(need)} on "
                f"{self.device}, but only {_gib(free)} is free (lower agent.buffer_size)"
            )
        self.obs, self.next_obs, self.action, self.reward, self.terminated, self.done = (
            torch.zeros(shape, dtype=dt, device=self.device) for shape, dt in specs.values()
        )
        self.pos = torch.zeros((), dtype=torch.int64, device=self.device)
        """Row the next ``add_*`` writes."""
        self.size = torch.zeros((), dtype=torch.int64, device=self.device)
        """Rows filled so far (<= ``rows``)."""
        self._env_ids = torch.arange(N, device=self.device)
        log.info("replay buffer: %d transitions (%d rows x %d envs) on %s, %s", self.capacity, T, N, self.device,
                 _gib(need))

    # -- writing (two halves around env.step, which rewrites the obs buffer) ----------------
    def add_obs_action(self, obs: Tensor, action: Tensor) -> None:
        """Write ``obs`` ``[N, *obs_shape]`` and ``action`` ``[N, *action_shape]`` at the head."""
        at = self.pos.view(1)
        self.obs.index_copy_(0, at, obs.unsqueeze(0).to(self.obs.dtype))
        self.action.index_copy_(0, at, action.unsqueeze(0).to(self.action.dtype))

    def add_result(self, reward: Tensor, terminated: Tensor, truncated: Tensor, final_obs: Tensor) -> None:
        """Write the step's outcome (``[N]`` each, ``final_obs`` ``[N, *obs_shape]``) at the
        head and advance it."""
        at = self.pos.view(1)
        self.reward.index_copy_(0, at, reward.unsqueeze(0).to(self.reward.dtype))
        self.terminated.index_copy_(0, at, terminated.unsqueeze(0))
        self.done.index_copy_(0, at, (terminated | truncated).unsqueeze(0))
        self.next_obs.index_copy_(0, at, final_obs.unsqueeze(0).to(self.next_obs.dtype))
        self.pos.add_(1).remainder_(self.rows)
        self.size.add_(1).clamp_(max=self.rows)

    # -- sampling ----------------------------------------------------------------------------
    def sample_index(self, shape: Sequence[int]) -> tuple[Tensor, Tensor]:
        """Uniform ``(row, env)`` indices of stored transitions, each of ``shape``."""
        shape = tuple(shape)
        u = torch.rand(shape, generator=self.generator, device=self.device, dtype=torch.float64)
        row = (u * self.size).long().clamp_(max=self.rows - 1)  # size >= 1 once a row is written
        env = torch.randint(0, self.num_envs, shape, generator=self.generator, device=self.device)
        return row, env

    def sample(self, batch_size: int, n_step: int = 1, gamma: float = 0.99, num_batches: int | None = None) -> Batch:
        """A uniform batch ``[batch_size, ...]`` (or ``[num_batches, batch_size, ...]``, drawn
        at once for several updates) with ``n_step`` returns discounted by ``gamma``."""
        shape = (batch_size,) if num_batches is None else (num_batches, batch_size)
        row, env = self.sample_index(shape)
        return self.gather(row, env, n_step, gamma)

    def gather(self, row: Tensor, env: Tensor, n_step: int = 1, gamma: float = 0.99) -> Batch:
        """The transitions at ``(row, env)`` with n-step returns (module docstring)."""
        obs, action = self.obs[row, env], self.action[row, env]
        if n_step == 1:
            return Batch(obs=obs, action=action, reward=self.reward[row, env], next_obs=self.next_obs[row, env],
                         terminated=self.terminated[row, env].to(self.reward.dtype),
                         discount=torch.full_like(self.reward[row, env], gamma))
        k = torch.arange(n_step, device=self.device)
        rows_k = (row.unsqueeze(-1) + k).remainder(self.rows)  # [..., n]
        env_k = env.unsqueeze(-1).expand_as(rows_k)
        # steps that exist after `row`: up to the newest row written (pos - 1), ring-aware
        newest = (self.pos - 1).remainder(self.rows)
        available = (newest - row).remainder(self.rows) + 1  # [...], in 1..rows
        done_k = self.done[rows_k, env_k]
        # step k is used when it exists and no earlier step of the window ended the episode
        ended_before = torch.cumsum(done_k.long(), -1) - done_k.long()
        use = (k < available.unsqueeze(-1)) & (ended_before == 0)
        discounts = gamma ** k.to(self.reward.dtype)
        reward = (self.reward[rows_k, env_k] * discounts * use).sum(-1)
        m = use.long().sum(-1)  # >= 1: step 0 always exists
        last = (row + m - 1).remainder(self.rows)
        return Batch(obs=obs, action=action, reward=reward, next_obs=self.next_obs[last, env],
                     terminated=self.terminated[last, env].to(self.reward.dtype),
                     discount=gamma ** m.to(self.reward.dtype))

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("obs", "next_obs", "action", "reward", "terminated", "done", "pos", "size")}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore the contents when the layout matches (same ``rows`` and ``num_envs``);
        returns whether it did (an agent built for evaluation with another ``num_envs``
        loads only its networks)."""
        if tuple(state["obs"].shape) != tuple(self.obs.shape) or tuple(state["action"].shape) != tuple(self.action.shape):
            return False
        for k, v in state.items():
            getattr(self, k).copy_(v)
        return True
