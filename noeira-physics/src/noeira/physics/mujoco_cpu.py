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
- with ``rne_post_constraint=True``, ``mj_step`` then ``mj_rnePostConstraint`` per world,
  as gymnasium's MuJoCo envs do (contact forces ``cfrc_ext``). A batch cannot call it:
  the MjData a batch stepped is reachable only by copying it out (``get_data`` of a
  persistent batch, bit-exact but ~7 us a world and one MjData per world kept), and an
  acceleration sensor would compute it at another RK4 stage than gymnasium reads. So
  each world takes a few Python calls (``_mujoco_worker.step_worlds``, ~4 us beside
  the 180-450 us of an env step's substeps). MuJoCo releases the interpreter lock in
  each call, so on many threads of one process the lock changes hands several times per
  world and the threads queue for it; by default the worlds therefore run in worker
  processes (one per thread, each with its own interpreter), the rows and fields in
  shared memory, chunks of worlds handed out as workers finish the previous ones.
  ``workers="threads"`` runs the same loops on a thread pool in this process instead.

Semantics, as MuJoCo's: after ``step`` the derived fields describe the state before the
last substep; ``forward(mask)`` recomputes them (``mj_forward``) for the masked worlds
only (``cacc``, ``cfrc_int``, ``cfrc_ext`` keep their values, as mj_forward leaves them);
``reset(mask)`` returns the masked worlds to the model's initial state (``mj_resetData``),
their derived fields zero until the next ``forward``/``step``.
"""

from __future__ import annotations

import itertools
import os
import pickle
import socket
import subprocess
import sys
import warnings
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

import attrs
import mujoco
import numpy as np
import torch
from torch import Tensor

from noeira.core.contracts import Backend
from noeira.core.errors import ConfigError, UserError
from noeira.physics import _mujoco_worker as worker
from noeira.physics.mjcf import load_model

__all__ = ["MujocoEngine"]

_SPEC = worker.SPEC
_STATE = {"time": mujoco.mjtState.mjSTATE_TIME, "qpos": mujoco.mjtState.mjSTATE_QPOS,
          "qvel": mujoco.mjtState.mjSTATE_QVEL, "act": mujoco.mjtState.mjSTATE_ACT,
          "ctrl": mujoco.mjtState.mjSTATE_CTRL}
_INLINE_FORWARD = 4
"""forward() of at most this many worlds (an env's resets) runs in this process: cheaper
than a round trip to the workers."""


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
        """Threads (or worker processes) stepping the worlds (0: one per CPU)."""
        rne_post_constraint: bool = False
        """Run mj_rnePostConstraint after every step, as gymnasium's MuJoCo envs do, so
        that cacc, cfrc_int and cfrc_ext are current (runs the worlds in Python loops,
        see workers, instead of mujoco.batch)."""
        workers: str = "processes"
        """With rne_post_constraint, where those loops run: processes (nthread worker
        processes, each with its own interpreter, sharing the state's memory; they start
        in well under a second) | threads (a thread pool in this process: no start-up,
        but the worlds' Python takes turns on the interpreter lock, slow on many threads)."""

    capture_safe = False
    """Stepping syncs with the host: it cannot be recorded in a CUDA graph."""

    def __init__(self, config: Config, *, model: str | mujoco.MjModel, num_worlds: int, backend: Backend) -> None:
        if config.nthread < 0:
            raise ConfigError(f"physics.nthread: must be >= 0, got {config.nthread}")
        if config.workers not in ("processes", "threads"):
            raise ConfigError(f"physics.workers: expected processes or threads, got {config.workers!r}")
        self.config = config
        self.mj_model = load_model(model)
        """The host ``MjModel`` (names, ids, sizes, ctrlrange, masses ...); the worlds
        step a copy of it."""
        self.num_worlds = num_worlds
        self.device = torch.device("cpu")
        self.dtype = torch.float64
        self.nthread = config.nthread or os.cpu_count() or 1
        self._fields: dict[str, np.ndarray] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._procs: _Processes | None = None
        m, n = self.mj_model, num_worlds
        self._template = mujoco.MjData(m)  # field shapes; the initial state row
        if config.rne_post_constraint:
            self._batch = None
            self._m = m.__copy__()  # the worlds' model, as the workers' and a batch's are copies
            self._initial = np.zeros(mujoco.mj_stateSize(m, _SPEC))
            mujoco.mj_getState(m, self._template, self._initial, _SPEC)
            nthread = min(self.nthread, n)
            processes = nthread > 1 and config.workers == "processes"
            if processes and not (hasattr(os, "memfd_create") and sys.executable):
                warnings.warn("physics 'mujoco': worker processes need Linux (memfd_create) and "
                              "sys.executable; running workers=threads", stacklevel=2)
                processes = False
            self._datas = [mujoco.MjData(m) for _ in range(1 if processes else nthread)]
            if processes:
                self._rows, fd = _shared_array((n, len(self._initial)), np.float64)
                self._rows[:] = self._initial
                try:
                    self._procs = _Processes(m, fd, self._rows.shape, nthread - 1)  # and this process
                finally:
                    os.close(fd)  # mapped by all now; the memory goes with the last mapping
            else:
                self._rows = np.tile(self._initial, (n, 1))
                if nthread > 1:
                    self._pool = ThreadPoolExecutor(nthread, thread_name_prefix="noeira-mujoco")
            state = {k: _component(m, self._rows, k) for k in _STATE}
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
                shape = (self.num_worlds, *template.shape)
                if self._procs is not None and template.size:
                    arr, fd = _shared_array(shape, template.dtype)
                    try:
                        self._procs.add_field(name, fd, shape, arr.dtype)
                    finally:
                        os.close(fd)
                else:
                    arr = np.zeros(shape, dtype=template.dtype)
            self._fields[name] = arr
        return torch.from_numpy(self._fields[name])

    # -- stepping ----------------------------------------------------------------------
    def step(self, nstep: int = 1) -> None:
        """``nstep`` calls of ``mj_step`` in every world (then ``mj_rnePostConstraint``
        with that option)."""
        if self._batch is not None:
            self._batch.step(nstep=nstep)
            return
        m, rows, d = self._m, self._rows, self._datas[0]
        if self._procs is not None:
            outs = self._outs(d, post=True)
            self._procs.run(nstep, None, lambda part: worker.step_worlds(m, d, rows, part, nstep, outs))
        else:
            self._run(lambda ids, d, outs: worker.step_worlds(m, d, rows, ids, nstep, outs), None, post=True)

    def forward(self, mask: Tensor | None = None) -> None:
        """``mj_forward`` in the worlds where ``mask [N]`` is True (all when None)."""
        ids = _ids(mask)
        if ids is not None and len(ids) == 0:
            return
        if self._batch is not None:
            self._batch.forward(ids)
            return
        m, rows, d = self._m, self._rows, self._datas[0]
        if self._procs is not None and (ids is None or len(ids) > _INLINE_FORWARD):
            outs = self._outs(d, post=False)
            self._procs.run(None, ids, lambda part: worker.forward_worlds(m, d, rows, part, outs))
            return
        self._run(lambda ids, d, outs: worker.forward_worlds(m, d, rows, ids, outs), ids, post=False)

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
        if self._procs is not None:
            self._procs.close()

    def _run(self, fn: Callable[[Sequence[int], mujoco.MjData, worker.Outs], None], ids: np.ndarray | None,
             post: bool) -> None:
        """``fn(world ids, data, outs)`` in this process for the worlds ``ids`` (all when
        None): one chunk of worlds and one ``MjData`` per thread; ``outs`` pairs the
        fields with the data's arrays (without the post-constraint ones unless ``post``)."""
        worlds = range(self.num_worlds) if ids is None else ids.tolist()
        if self._pool is None or len(worlds) < 2:
            fn(worlds, self._datas[0], self._outs(self._datas[0], post))
            return
        nchunks = min(len(worlds), 64 * len(self._datas))
        chunks = itertools.count()  # shared: each thread takes the next chunk as it finishes one

        def loop(d: mujoco.MjData) -> None:
            outs = self._outs(d, post)
            while (j := next(chunks)) < nchunks:
                fn(worker.chunk(worlds, j, nchunks), d, outs)

        for f in [self._pool.submit(loop, d) for d in self._datas]:
            f.result()

    def _outs(self, d: mujoco.MjData, post: bool) -> worker.Outs:
        """The fields paired with ``d``'s arrays, for the loops to copy; the post-constraint
        ones only if ``post``."""
        return [(a, getattr(d, k)) for k, a in self._fields.items()
                if a.size and (post or k not in worker.POST_CONSTRAINT)]

    def __repr__(self) -> str:
        mode = ("mujoco.batch" if self._batch is not None else
                f"this and {self._procs.nworkers} worker processes" if self._procs is not None else "MjData per thread")
        return f"MujocoEngine(num_worlds={self.num_worlds}, nthread={self.nthread}, {mode})"


class _Processes:
    """``nworkers`` worker processes (``_mujoco_worker``) stepping the worlds whose state
    rows are the memory file ``rows_fd``; each has a socket pair for requests, and they
    and this process take chunks of worlds from one pipe."""

    def __init__(self, model: mujoco.MjModel, rows_fd: int, rows_shape: tuple[int, int], nworkers: int) -> None:
        self.num_worlds = rows_shape[0]
        self._socks: list[socket.socket] = []
        self._conns: list[Connection] = []
        self._procs: list[subprocess.Popen] = []
        self._take, self._queue = os.pipe()  # not inherited but by pass_fds
        self._finalizer = weakref.finalize(self, _Processes._end, self._socks, self._conns, self._procs,
                                           [self._take, self._queue])
        try:
            for _ in range(nworkers):
                ours, theirs = socket.socketpair()
                self._socks.append(ours)
                self._conns.append(Connection(os.dup(ours.fileno())))
                with theirs:
                    # run by path (-P: its folder not on sys.path), so that the worker imports
                    # mujoco and numpy only, not the caller's __main__ as multiprocessing would
                    self._procs.append(subprocess.Popen(
                        [sys.executable, "-P", worker.__file__, str(theirs.fileno()), str(self._take)],
                        pass_fds=(theirs.fileno(), self._take), stdin=subprocess.DEVNULL))
            self._call(("init", pickle.dumps(model), rows_shape), rows_fd)
        except BaseException:
            self.close()
            raise

    @property
    def nworkers(self) -> int:
        return len(self._procs)

    def add_field(self, name: str, fd: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Have the workers copy field ``name`` after each world's call into the ``shape``
        array in the memory file ``fd``."""
        self._call(("field", name, shape, dtype.str), fd)

    def run(self, nstep: int | None, ids: np.ndarray | None, local: Callable[[Sequence[int]], None]) -> None:
        """``step_worlds`` with ``nstep`` (``forward_worlds`` when None) in the worlds
        ``ids`` (all when None), shared out in chunks as the workers and this process
        (``local(worlds)``) finish them."""
        worlds = range(self.num_worlds) if ids is None else ids.tolist()
        takers = self.nworkers + 1
        # small chunks, so that the last to finish waits little; the tokens fit in an empty
        # pipe (at least a page: 1024 tokens), so writing them never waits
        nchunks = max(1, min(len(worlds), 64 * takers, 1024 - takers))
        tokens = np.arange(nchunks, dtype="<u4").tobytes() + worker.STOP.to_bytes(4, "little") * takers

        def take() -> Exception | None:
            error = None
            for j in worker.tokens(self._take):
                if error is None:  # after an error only our STOP is taken, leaving the queue empty
                    try:
                        local(worker.chunk(worlds, j, nchunks))
                    except Exception as e:
                        error = e
            return error

        self._call(("run", nstep, None if ids is None else worlds, nchunks), tokens=tokens, take=take)

    def _call(self, msg: tuple, fd: int | None = None, tokens: bytes = b"",
              take: Callable[[], Exception | None] | None = None) -> None:
        """Send ``msg`` (and the file descriptor ``fd``) to every worker, write ``tokens``
        to the queue, ``take()`` our share, then wait for the workers; raise the first
        error."""
        if not self._finalizer.alive:
            raise RuntimeError("physics 'mujoco': the engine is closed (or a call to its workers failed)")
        try:
            for sock, conn in zip(self._socks, self._conns, strict=True):
                conn.send(msg)
                if fd is not None:
                    socket.send_fds(sock, [b"f"], [fd])
            if tokens and os.write(self._queue, tokens) != len(tokens):
                raise OSError("physics 'mujoco': the work queue took part of a write")
            local_error = take() if take is not None else None
            errors = [conn.recv() for conn in self._conns]
        except BaseException as e:  # a worker died, or we were interrupted between a request and its reply
            self.close()
            if isinstance(e, (EOFError, OSError)):
                raise RuntimeError("physics 'mujoco': a worker process exited (see its error above)") from e
            raise
        if local_error is not None:
            raise local_error
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            raise RuntimeError(f"physics 'mujoco' worker: {error}")

    def close(self) -> None:
        self._finalizer()

    @staticmethod
    def _end(socks: list[socket.socket], conns: list[Connection], procs: list[subprocess.Popen],
             pipe: list[int]) -> None:
        for fd in pipe:
            os.close(fd)
        for c in [*conns, *socks]:
            c.close()  # the worker reads EOF and exits
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _shared_array(shape: tuple[int, ...], dtype: np.dtype | type) -> tuple[np.ndarray, int]:
    """A zeroed ``shape`` array in a new memory file (``memfd_create``: in memory, no
    name, gone with its last mapping), and the file's descriptor, for the workers to map;
    the caller closes it."""
    fd = os.memfd_create("noeira-mujoco")
    try:
        os.ftruncate(fd, max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize))
        return worker.map_fd(fd, shape, dtype), fd
    except BaseException:
        os.close(fd)
        raise


def _ids(mask: Tensor | None) -> np.ndarray | None:
    """World indices where ``mask [N]`` is True, or None for all."""
    if mask is None:
        return None
    return np.flatnonzero(mask.detach().cpu().numpy()).astype(np.int64)
