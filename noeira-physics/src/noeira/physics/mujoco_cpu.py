"""``mujoco``: N worlds of an MJCF model stepped by MuJoCo's C engine on CPU threads.

State is exposed as float64 torch tensors that share memory with MuJoCo's arrays:
``qpos [N, nq]``, ``qvel [N, nv]``, ``ctrl [N, nu]``, ``act [N, na]``, ``time [N]`` are
written by the caller before ``step``/``forward`` and read after; derived fields
(``xpos``, ``cfrc_ext``, ``sensordata`` ...) come from :meth:`MujocoEngine.field`.

Each world is a row of MuJoCo's integration state (``mjSTATE_INTEGRATION``: time, qpos,
qvel, act, warm start, ctrl, applied forces ...), loaded into an ``MjData`` for a call and
saved back, so results are bit-identical to one ``MjData`` per world stepped with
``mj_step``, at any thread count. Two ways to run the calls:

- by default :class:`mujoco.batch.Batch` (MuJoCo >= 3.17) owns the rows and steps them on
  its C++ thread pool, no Python per world;
- with ``rne_post_constraint=True``, a Python thread pool (MuJoCo releases the GIL) with
  one ``MjData`` per thread runs ``mj_step`` then ``mj_rnePostConstraint`` per world, as
  gymnasium's MuJoCo envs do (contact forces ``cfrc_ext``): a batch cannot call it, and an
  acceleration sensor would compute it at another RK4 stage than gymnasium reads.

Semantics, as MuJoCo's: after ``step`` the derived fields describe the state before the
last substep; ``forward(mask)`` recomputes them (``mj_forward``) for the masked worlds
only (``cacc``, ``cfrc_int``, ``cfrc_ext`` keep their values, as mj_forward leaves them);
``reset(mask)`` returns the masked worlds to the model's initial state (``mj_resetData``),
their derived fields zero until the next ``forward``/``step``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import attrs
import mujoco
import numpy as np
import torch
from torch import Tensor

from noeira.core.contracts import Backend
from noeira.core.errors import ConfigError, UserError
from noeira.physics.mjcf import load_model

__all__ = ["MujocoEngine"]

_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
_STATE = {"time": mujoco.mjtState.mjSTATE_TIME, "qpos": mujoco.mjtState.mjSTATE_QPOS,
          "qvel": mujoco.mjtState.mjSTATE_QVEL, "act": mujoco.mjtState.mjSTATE_ACT,
          "ctrl": mujoco.mjtState.mjSTATE_CTRL}
_POST_CONSTRAINT = frozenset({"cacc", "cfrc_int", "cfrc_ext"})
"""Fields only mj_rnePostConstraint computes: mj_forward leaves them as they were."""


def _component(m: mujoco.MjModel, rows: np.ndarray, name: str) -> np.ndarray:
    """The view of state component ``name`` in ``rows [N, nstate]`` (components are stored
    in the order of their bits): ``[N, size]``, ``[N]`` for time."""
    bit = int(_STATE[name])
    start = mujoco.mj_stateSize(m, int(_SPEC) & (bit - 1))
    view = rows[:, start:start + mujoco.mj_stateSize(m, bit)]
    return view[:, 0] if name == "time" else view


class MujocoEngine:
    """MuJoCo (C) for ``num_worlds`` worlds on CPU threads; tensors are float64 on the CPU."""

    @attrs.frozen
    class Config:
        nthread: int = 0
        """Threads stepping the worlds (0: one per CPU)."""
        rne_post_constraint: bool = False
        """Run mj_rnePostConstraint after every step, as gymnasium's MuJoCo envs do, so
        that cacc, cfrc_int and cfrc_ext are current (runs the worlds on a Python thread
        pool instead of mujoco.batch)."""

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
        self._template = mujoco.MjData(m)  # field shapes; the initial state row
        if config.rne_post_constraint:
            self._batch = None
            self._initial = np.zeros(mujoco.mj_stateSize(m, _SPEC))
            mujoco.mj_getState(m, self._template, self._initial, _SPEC)
            self._rows = np.tile(self._initial, (n, 1))
            state = {k: _component(m, self._rows, k) for k in _STATE}
            nthread = min(self.nthread, n)
            self._datas = [mujoco.MjData(m) for _ in range(nthread)]
            if nthread > 1:
                self._pool = ThreadPoolExecutor(nthread, thread_name_prefix="noeira-mujoco")
        else:
            try:
                from mujoco import batch as mj_batch
            except ImportError as e:  # MuJoCo < 3.17
                raise UserError(
                    f"physics 'mujoco' needs mujoco>=3.17 (mujoco.batch); installed: {mujoco.__version__}"
                ) from e
            self._batch = mj_batch.Batch(m, nsim=n, nthread=self.nthread)
            self._batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE)
            state = {k: self._batch.bind(k) for k in _STATE}
        self.qpos: Tensor = torch.from_numpy(state["qpos"])
        """``[N, nq]`` joint positions."""
        self.qvel: Tensor = torch.from_numpy(state["qvel"])
        """``[N, nv]`` joint velocities."""
        self.ctrl: Tensor = torch.from_numpy(state["ctrl"])
        """``[N, nu]`` controls, applied by the next step."""
        self.act: Tensor = torch.from_numpy(state["act"])
        """``[N, na]`` actuator activations."""
        self.time: Tensor = torch.from_numpy(state["time"])
        """``[N]`` simulation time."""
        self.sensordata: Tensor = self.field("sensordata")
        """``[N, nsensordata]`` sensor readings."""

    # -- derived fields ----------------------------------------------------------------
    def field(self, name: str) -> Tensor:
        """A derived ``MjData`` field for every world, ``[N, *shape in MjData]``, e.g.
        ``xpos [N, nbody, 3]``, ``cfrc_ext [N, nbody, 6]``, ``site_xpos [N, nsite, 3]``;
        zero until the next ``step``/``forward``, refreshed in place by each; treat it as
        read-only."""
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
                template = getattr(self._template, name, None)
                if not isinstance(template, np.ndarray):
                    raise UserError(f"physics 'mujoco': MjData has no array field {name!r}")
                arr = np.zeros((self.num_worlds, *template.shape), dtype=template.dtype)
            self._fields[name] = arr
        return torch.from_numpy(self._fields[name])

    # -- stepping ----------------------------------------------------------------------
    def step(self, nstep: int = 1) -> None:
        """``nstep`` calls of ``mj_step`` in every world (then ``mj_rnePostConstraint``
        with that option)."""
        if self._batch is not None:
            self._batch.step(nstep=nstep)
            return
        m, rows, fields = self.mj_model, self._rows, list(self._fields.items())

        def one(i: int, d: mujoco.MjData) -> None:
            mujoco.mj_setState(m, d, rows[i], _SPEC)
            mujoco.mj_step(m, d, nstep)
            mujoco.mj_rnePostConstraint(m, d)
            mujoco.mj_getState(m, d, rows[i], _SPEC)
            for name, arr in fields:
                arr[i] = getattr(d, name)

        self._run(one, None)

    def forward(self, mask: Tensor | None = None) -> None:
        """``mj_forward`` in the worlds where ``mask [N]`` is True (all when None)."""
        ids = _ids(mask)
        if ids is not None and len(ids) == 0:
            return
        if self._batch is not None:
            self._batch.forward(ids)
            return
        m, rows = self.mj_model, self._rows
        fields = [(k, a) for k, a in self._fields.items() if k not in _POST_CONSTRAINT]

        def one(i: int, d: mujoco.MjData) -> None:
            mujoco.mj_setState(m, d, rows[i], _SPEC)
            mujoco.mj_forward(m, d)
            for name, arr in fields:
                arr[i] = getattr(d, name)

        self._run(one, ids)

    def reset(self, mask: Tensor | None = None) -> None:
        """``mj_resetData`` in the worlds where ``mask [N]`` is True (all when None)."""
        ids = _ids(mask)
        if ids is not None and len(ids) == 0:
            return
        rows = slice(None) if ids is None else ids
        if self._batch is not None:
            self._batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
        else:
            self._rows[rows] = self._initial
        for arr in self._fields.values():
            arr[rows] = 0

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _run(self, fn: Callable[[int, mujoco.MjData], None], ids: np.ndarray | None) -> None:
        """``fn(i, data)`` for the worlds ``ids`` (all when None): one chunk of worlds and
        one ``MjData`` per thread."""
        idx = np.arange(self.num_worlds) if ids is None else ids

        def chunk(part: np.ndarray, d: mujoco.MjData) -> None:
            for i in part.tolist():
                fn(i, d)

        if self._pool is None or len(idx) < 2:
            chunk(idx, self._datas[0])
            return
        parts = np.array_split(idx, min(len(self._datas), len(idx)))
        for f in [self._pool.submit(chunk, part, d) for part, d in zip(parts, self._datas, strict=False)]:
            f.result()

    def __repr__(self) -> str:
        mode = "MjData per thread" if self._batch is None else "mujoco.batch"
        return f"MujocoEngine(num_worlds={self.num_worlds}, nthread={self.nthread}, {mode})"


def _ids(mask: Tensor | None) -> np.ndarray | None:
    """World indices where ``mask [N]`` is True, or None for all."""
    if mask is None:
        return None
    return np.flatnonzero(mask.detach().cpu().numpy()).astype(np.int64)
