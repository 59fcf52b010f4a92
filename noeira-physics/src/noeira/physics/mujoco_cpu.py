"""``mujoco``: N worlds of an MJCF model stepped by MuJoCo's C engine on CPU threads.

State is exposed as float64 torch tensors that share memory with MuJoCo's arrays:
``qpos [N, nq]``, ``qvel [N, nv]``, ``ctrl [N, nu]``, ``act [N, na]``, ``time [N]`` are
written by the caller before ``step``/``forward`` and read after; derived fields
(``xpos``, ``cfrc_ext``, ``sensordata`` ...) come from :meth:`MujocoEngine.field`.

Two ways to step, both giving results bit-identical to one ``MjData`` per world stepped
with ``mj_step``:

- by default :class:`mujoco.batch.Batch` (MuJoCo >= 3.17): the worlds' state rows are
  the tensors themselves and the C++ thread pool steps them, no Python per world;
- with ``rne_post_constraint=True``, one persistent ``MjData`` per world on a Python
  thread pool (MuJoCo releases the GIL), so that ``mj_rnePostConstraint`` can run after
  each ``mj_step`` as gymnasium's MuJoCo envs do (contact forces ``cfrc_ext``); a batch
  cannot call it, and an acceleration sensor would compute it at the wrong RK4 stage.

Semantics, as MuJoCo's: after ``step`` the derived fields describe the state before the
last substep; ``forward(mask)`` recomputes them (``mj_forward``) for the masked worlds
only; ``reset(mask)`` returns the masked worlds to the model's initial state
(``mj_resetData``), their derived fields zero until the next ``forward``/``step``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import mujoco
import numpy as np
import torch
from torch import Tensor

from noeira.core.contracts import Backend
from noeira.core.errors import ConfigError, UserError
from noeira.physics.mjcf import load_model

__all__ = ["MujocoEngine"]

_STATE = ("qpos", "qvel", "ctrl", "act", "time")
_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
_BITS = {"time": mujoco.mjtState.mjSTATE_TIME, "qpos": mujoco.mjtState.mjSTATE_QPOS,
         "qvel": mujoco.mjtState.mjSTATE_QVEL, "act": mujoco.mjtState.mjSTATE_ACT,
         "ctrl": mujoco.mjtState.mjSTATE_CTRL}


def _component(m: mujoco.MjModel, rows: np.ndarray, name: str) -> np.ndarray:
    """The view of state component ``name`` in ``rows [N, nstate]`` (components are stored
    in the order of their bits): ``[N, size]``, ``[N]`` for time."""
    bit = int(_BITS[name])
    start = mujoco.mj_stateSize(m, int(_SPEC) & (bit - 1))
    size = mujoco.mj_stateSize(m, bit)
    view = rows[:, start:start + size]
    return view[:, 0] if name == "time" else view


class MujocoEngine:
    """MuJoCo (C) for ``num_worlds`` worlds on CPU threads; tensors are float64 on the CPU."""

    @attrs.frozen
    class Config:
        nthread: int = 0
        """Threads stepping the worlds (0: one per CPU)."""
        rne_post_constraint: bool = False
        """Run mj_rnePostConstraint after every step, as gymnasium's MuJoCo envs do, so
        that cacc, cfrc_int and cfrc_ext are current (steps one MjData per world on a
        Python thread pool instead of mujoco.batch)."""

    capture_safe = False
    """Stepping syncs with the host: it cannot be recorded in a CUDA graph."""

    def __init__(self, config: Config, *, model: str | mujoco.MjModel, num_worlds: int, backend: Backend) -> None:
        if config.nthread < 0:
            raise ConfigError(f"physics.nthread: must be >= 0, got {config.nthread}")
        self.config = config
        self.mj_model = load_model(model)
        """The host ``MjModel`` (names, ids, sizes, ctrlrange, masses ...)."""
        self.num_worlds = num_worlds
        self.device = torch.device("cpu")
        self.dtype = torch.float64
        self.nthread = config.nthread or os.cpu_count() or 1
        self._fields: dict[str, np.ndarray] = {}
        self._pool: ThreadPoolExecutor | None = None
        m, n = self.mj_model, num_worlds
        if config.rne_post_constraint:
            self._batch = None
            self._datas = [mujoco.MjData(m) for _ in range(n)]
            # one row per world of MuJoCo's integration state (time, qpos, qvel, act,
            # warm start, ctrl, applied forces ...), as mujoco.batch keeps it: a world is
            # loaded and saved with one mj_setState / mj_getState call
            self._rows = np.zeros((n, mujoco.mj_stateSize(m, _SPEC)))
            self._state = {k: _component(m, self._rows, k) for k in _STATE}
            self._pool = ThreadPoolExecutor(self.nthread, thread_name_prefix="noeira-mujoco") if self.nthread > 1 else None
        else:
            try:
                from mujoco import batch as mj_batch
            except ImportError as e:  # MuJoCo < 3.17
                raise UserError(
                    f"physics 'mujoco' needs mujoco>=3.17 (mujoco.batch); installed: {mujoco.__version__}"
                ) from e
            self._batch = mj_batch.Batch(m, nsim=n, nthread=self.nthread)
            self._batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE)
            self._state = {k: self._batch.bind(k) for k in _STATE}
        self.qpos: Tensor = torch.from_numpy(self._state["qpos"])
        """``[N, nq]`` joint positions."""
        self.qvel: Tensor = torch.from_numpy(self._state["qvel"])
        """``[N, nv]`` joint velocities."""
        self.ctrl: Tensor = torch.from_numpy(self._state["ctrl"])
        """``[N, nu]`` controls, applied by the next step."""
        self.act: Tensor = torch.from_numpy(self._state["act"])
        """``[N, na]`` actuator activations."""
        self.time: Tensor = torch.from_numpy(self._state["time"])
        """``[N]`` simulation time."""
        self.sensordata: Tensor = self.field("sensordata")
        """``[N, nsensordata]`` sensor readings."""
        if self._batch is None:
            self._run(self._sync_out, None)

    # -- derived fields ----------------------------------------------------------------
    def field(self, name: str) -> Tensor:
        """A derived ``MjData`` field for every world, ``[N, *shape in MjData]``, e.g.
        ``xpos [N, nbody, 3]``, ``cfrc_ext [N, nbody, 6]``, ``site_xpos [N, nsite, 3]``.
        The tensor is refreshed in place by every ``step``/``forward``/``reset``; treat it
        as read-only."""
        if name in _STATE:
            return getattr(self, name)
        if name not in self._fields:
            if self._batch is not None:
                try:
                    arr = self._batch.bind(name)
                except ValueError as e:
                    raise UserError(f"physics 'mujoco': no array field {name!r} to bind: {e}") from e
                arr.flags.writeable = True  # reset() zeroes it; callers only read it
            else:
                template = getattr(self._datas[0], name, None)
                if not isinstance(template, np.ndarray):
                    raise UserError(f"physics 'mujoco': MjData has no array field {name!r}")
                arr = np.zeros((self.num_worlds, *template.shape), dtype=template.dtype)
                for i, d in enumerate(self._datas):
                    arr[i] = getattr(d, name)
            self._fields[name] = arr
        return torch.from_numpy(self._fields[name])

    # -- stepping ----------------------------------------------------------------------
    def step(self, nstep: int = 1) -> None:
        """``nstep`` calls of ``mj_step`` in every world (then ``mj_rnePostConstraint``
        with that option)."""
        if self._batch is not None:
            self._batch.step(nstep=nstep)
            return
        m = self.mj_model

        def one(i: int, d: mujoco.MjData) -> None:
            self._sync_in(i, d)
            mujoco.mj_step(m, d, nstep)
            mujoco.mj_rnePostConstraint(m, d)
            self._sync_out(i, d)

        self._run(one, None)

    def forward(self, mask: Tensor | None = None) -> None:
        """``mj_forward`` in the worlds where ``mask [N]`` is True (all when None)."""
        ids = _ids(mask)
        if ids is not None and len(ids) == 0:
            return
        if self._batch is not None:
            self._batch.forward(ids)
            return
        m = self.mj_model

        def one(i: int, d: mujoco.MjData) -> None:
            self._sync_in(i, d)
            mujoco.mj_forward(m, d)
            self._sync_out(i, d)

        self._run(one, ids)

    def reset(self, mask: Tensor | None = None) -> None:
        """``mj_resetData`` in the worlds where ``mask [N]`` is True (all when None)."""
        ids = _ids(mask)
        if ids is not None and len(ids) == 0:
            return
        if self._batch is not None:
            self._batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
            rows = slice(None) if ids is None else ids
            for arr in self._fields.values():
                arr[rows] = 0
            return
        m = self.mj_model

        def one(i: int, d: mujoco.MjData) -> None:
            mujoco.mj_resetData(m, d)
            self._sync_out(i, d)

        self._run(one, ids)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    # -- the per-world path ------------------------------------------------------------
    def _sync_in(self, i: int, d: mujoco.MjData) -> None:
        mujoco.mj_setState(self.mj_model, d, self._rows[i], _SPEC)

    def _sync_out(self, i: int, d: mujoco.MjData) -> None:
        mujoco.mj_getState(self.mj_model, d, self._rows[i], _SPEC)
        for name, arr in self._fields.items():
            arr[i] = getattr(d, name)

    def _run(self, fn: Any, ids: np.ndarray | None) -> None:
        """``fn(i, data_i)`` for the worlds ``ids`` (all when None), in chunks on the pool."""
        idx = np.arange(self.num_worlds) if ids is None else ids
        datas = self._datas

        def chunk(part: np.ndarray) -> None:
            for i in part.tolist():
                fn(i, datas[i])

        if self._pool is None or len(idx) < 2:
            chunk(idx)
            return
        futures = [self._pool.submit(chunk, part) for part in np.array_split(idx, min(self.nthread, len(idx)))]
        for f in futures:
            f.result()

    def __repr__(self) -> str:
        mode = "MjData pool" if self._batch is None else "mujoco.batch"
        return f"MujocoEngine(num_worlds={self.num_worlds}, nthread={self.nthread}, {mode})"


def _ids(mask: Tensor | None) -> np.ndarray | None:
    """World indices where ``mask [N]`` is True, or None for all."""
    if mask is None:
        return None
    return np.flatnonzero(mask.detach().cpu().numpy()).astype(np.int64)
