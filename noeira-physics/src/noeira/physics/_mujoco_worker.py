"""The per-world loops of the ``mujoco`` engine's ``rne_post_constraint`` path, and the
worker process that runs them on a range of worlds.

Each world is a row of MuJoCo's integration state; a loop loads it into an ``MjData``
(``mj_setState``), runs, saves it back (``mj_getState``) and copies the requested
derived fields out, so one ``MjData`` serves many worlds bit-identically. The engine
runs the loops on threads of its own process or, by default, in worker processes,
where the Python of each world's calls runs beside the others' instead of taking turns
on one interpreter lock.

A worker runs this file as a script, ``python -P _mujoco_worker.py SOCK QUEUE``: SOCK is
its end of a socket pair with the engine, QUEUE the read end of a pipe shared by all
workers, from which they take chunks of worlds as they finish the previous ones. The
state rows and the fields are memory files (``memfd_create``) mapped by the engine and by
every worker, their descriptors passed over the socket. The script imports only mujoco
and numpy, so a worker starts in a fraction of a second.
"""

from __future__ import annotations

import mmap
import os
import pickle
import signal
import socket
import sys
from collections.abc import Iterable, Iterator, Sequence
from multiprocessing.connection import Connection

import mujoco
import numpy as np

SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
POST_CONSTRAINT = frozenset({"cacc", "cfrc_int", "cfrc_ext"})
"""Fields only mj_rnePostConstraint computes: mj_forward leaves them as they were."""

Outs = Sequence[tuple[np.ndarray, np.ndarray]]
"""``(out [N, ...], view of the MjData's field)`` pairs: after a world's call, its row
of each ``out`` gets the field."""


def step_worlds(m: mujoco.MjModel, d: mujoco.MjData, rows: np.ndarray, ids: Iterable[int], nstep: int,
                outs: Outs) -> None:
    """``nstep`` calls of ``mj_step`` then ``mj_rnePostConstraint`` in each world of ``ids``,
    as gymnasium's MuJoCo envs step (``rows [N, nstate]`` in place)."""
    set_state, step, rne, get_state = mujoco.mj_setState, mujoco.mj_step, mujoco.mj_rnePostConstraint, mujoco.mj_getState
    for i in ids:
        row = rows[i]
        set_state(m, d, row, SPEC)
        step(m, d, nstep)
        rne(m, d)
        get_state(m, d, row, SPEC)
        for out, view in outs:
            out[i] = view


def forward_worlds(m: mujoco.MjModel, d: mujoco.MjData, rows: np.ndarray, ids: Iterable[int], outs: Outs) -> None:
    """``mj_forward`` in each world of ``ids`` (``outs`` without the post-constraint fields)."""
    set_state, forward = mujoco.mj_setState, mujoco.mj_forward
    for i in ids:
        set_state(m, d, rows[i], SPEC)
        forward(m, d)
        for out, view in outs:
            out[i] = view


def map_fd(fd: int, shape: tuple[int, ...], dtype: str | np.dtype) -> np.ndarray:
    """The memory file ``fd`` (at least one byte long) mapped as a shared ``shape`` array
    (the mapping outlives the descriptor, which the caller closes)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    buf = mmap.mmap(fd, max(1, count * dtype.itemsize))
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)


STOP = 0xFFFFFFFF
"""The token that ends a worker's share of a call; any other is a chunk's index."""


def tokens(queue: int) -> Iterator[int]:
    """The chunk indices read from the pipe ``queue`` up to ``STOP``; EOFError when the
    pipe's writer is gone."""
    while True:
        token = os.read(queue, 4)  # 4 bytes or none: the tokens are written whole, in one write
        if len(token) < 4:
            raise EOFError("the work queue closed")
        j = int.from_bytes(token, "little")
        if j == STOP:
            return
        yield j


def chunk(worlds: Sequence[int], j: int, nchunks: int) -> Sequence[int]:
    """Chunk ``j`` of ``nchunks`` nearly equal contiguous chunks of ``worlds``."""
    n = len(worlds)
    return worlds[j * n // nchunks:(j + 1) * n // nchunks]


def serve(sock: socket.socket, queue: int) -> None:
    """Answer the engine's requests on ``sock`` until it closes it; each gets ``None`` or
    the error's text. Requests, as pickles on a Connection over ``sock``: ``("init",
    pickled MjModel, rows shape)`` and ``("field", name, shape, dtype)``, each followed on
    ``sock`` by the array's memory file descriptor; and ``("run", nstep, ids, nchunks)``:
    ``step_worlds`` (``forward_worlds`` when nstep is None) on chunks of the worlds ``ids``
    (None: all) whose indices this worker reads from the pipe ``queue``, shared by all
    workers, until it reads ``STOP``; so the worlds are shared out as they are done."""
    conn = Connection(os.dup(sock.fileno()))
    m = d = rows = None
    fields: list[tuple[str, np.ndarray, np.ndarray]] = []
    step_outs: list[tuple[np.ndarray, np.ndarray]] = []
    forward_outs: list[tuple[np.ndarray, np.ndarray]] = []
    while True:
        try:
            msg = conn.recv()
            op = msg[0]
            fds = socket.recv_fds(sock, 1, 1)[1] if op in ("init", "field") else []
        except (EOFError, OSError):
            return  # the engine closed or exited
        reply = None
        try:
            if op == "run":
                _, nstep, ids, nchunks = msg
                worlds = range(len(rows)) if ids is None else ids
                for j in tokens(queue):
                    if reply is not None:
                        continue  # failed: only take our STOP, so the queue is empty for the next call
                    try:
                        if nstep is None:
                            forward_worlds(m, d, rows, chunk(worlds, j, nchunks), forward_outs)
                        else:
                            step_worlds(m, d, rows, chunk(worlds, j, nchunks), nstep, step_outs)
                    except Exception as e:
                        reply = f"{type(e).__name__}: {e}"
            elif op == "field":
                _, name, shape, dtype = msg
                out = map_fd(fds[0], shape, dtype)
                fields.append((name, out, getattr(d, name)))
                step_outs = [(o, v) for _, o, v in fields]
                forward_outs = [(o, v) for n, o, v in fields if n not in POST_CONSTRAINT]
            elif op == "init":
                _, model, shape = msg
                m = pickle.loads(model)
                d = mujoco.MjData(m)
                rows = map_fd(fds[0], shape, np.float64)
            else:
                raise ValueError(f"unknown request {op!r}")
        except EOFError:
            return  # the engine is gone
        except Exception as e:  # sent back: the engine raises it
            reply = f"{type(e).__name__}: {e}"
        finally:
            for fd in fds:
                os.close(fd)
        try:
            conn.send(reply)
        except OSError:
            return  # the engine closed while we worked


def main(argv: list[str]) -> int:
    """``argv[1]``: the socket's file descriptor, ``argv[2]``: the queue's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the engine's to handle: it ends us
    with socket.socket(fileno=int(argv[1])) as sock:
        serve(sock, int(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
