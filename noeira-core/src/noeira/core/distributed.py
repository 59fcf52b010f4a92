"""Data-parallel training on ``torch.distributed``: the launch (torchrun's own API), the process
group, and the collectives the driver and the agents use.

Each process (rank) trains its own envs (``env.num_envs`` per rank) on its own device
(``cuda:LOCAL_RANK``; ``cpu`` with gloo), seeded ``rank_seed(seed, rank)``. The ranks start from
rank 0's weights (:func:`broadcast_`), average their gradients at every update
(:func:`all_reduce_mean_`, one flat buffer; on CUDA it records inside the learn graph) and
reduce their running normaliser statistics, so their parameters stay identical. Rank 0 alone
writes the run directory. Alone (``world_size == 1``) every function here is a no-op.

    noeira train --nproc-per-node 2 backend=cpu              # launches through torch.distributed.run
    torchrun --nproc-per-node 8 $(which noeira) train backend=cuda    # or torchrun itself
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from noeira.core.errors import UserError

if TYPE_CHECKING:  # torch is imported where it is used: `noeira --help` must not pay for it
    import torch
    from torch import Tensor

__all__ = ["World", "from_rank_zero", "all_reduce_max_", "all_reduce_mean_", "all_reduce_sum_", "broadcast_", "current",
           "gather_objects", "init", "launch", "record_failure", "shutdown", "sync_gradients"]

TIMEOUT_ENV = "NOEIRA_DIST_TIMEOUT"
"""Seconds a collective may wait for the other ranks before the job fails (default 300)."""


@attrs.frozen
class World:
    """This process's place in the job, read from torchrun's environment."""

    rank: int
    world_size: int
    local_rank: int


def from_environment() -> World | None:
    """The torchrun job this process belongs to (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), or None."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    return World(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0")))


def init(device_type: str) -> World | None:
    """Join the job's process group (NCCL on cuda, gloo otherwise) when launched by torchrun;
    None when training alone. Idempotent."""
    world = from_environment()
    if world is None or world.world_size == 1:
        return None
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if device_type == "cuda":
            torch.cuda.set_device(world.local_rank)
        timeout = dt.timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, "300")))
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo", timeout=timeout,
                                **({"device_id": torch.device("cuda", world.local_rank)} if device_type == "cuda" else {}))
    return world


def current() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised process group, ``(0, 1)`` without one."""
    if "torch" not in sys.modules:  # nothing can have joined a group yet
        return 0, 1
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shutdown(wait: bool = True) -> None:
    """Leave the process group, if this process joined one; ``wait``: first wait for every rank
    to get here (a rank that tears its connections down while another still works aborts it)."""
    if current()[1] == 1:
        return
    import torch.distributed as dist

    if wait:
        dist.barrier()
    dist.destroy_process_group()
    _flat_buffers.clear()


def record_failure(err: BaseException) -> None:
    """Under torchrun: write why this rank failed, and when (to the microsecond), to the error file
    torchrun gives it (``TORCHELASTIC_ERROR_FILE``), before the rank leaves its process group. The
    ranks that fail because this one left (their collectives lose a peer) fail later, so
    :func:`launch` names the rank whose failure came first: torchrun's own timestamps are whole
    seconds, and ranks that end within one second of each other would tie (the lowest rank named)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    now = time.time()
    message = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}".rstrip(": ")
    try:
        with open(path, "w") as f:
            json.dump({"message": message, "timestamp": int(now), "noeira_failed_at": now,
                       "rank": int(os.environ.get("RANK", "0")), "pid": os.getpid()}, f)
    except OSError:
        pass  # torchrun falls back to the time it saw the rank exit


def _first_failure(failures: dict[int, Any]) -> tuple[int, int, int, str, str]:
    """``(rank, local rank, pid, how it ended, its message)`` of the rank that failed first: by the
    times ranks wrote (:func:`record_failure`), over the failures torchrun saw and the error files
    of this node's other ranks (a rank that failed first may still be exiting when the ranks it
    took down have ended), else by torchrun's timestamps."""
    seen: dict[int, tuple[float, int, int, str, str]] = {}
    for rank, f in failures.items():
        data = getattr(f, "error_file_data", None) or {}
        how = f"exit code {f.exitcode}" if f.exitcode is not None and f.exitcode >= 0 else f"signal {-(f.exitcode or 0)}"
        said = data.get("message", "") if "noeira_failed_at" in data else ""
        seen[rank] = (float(data.get("noeira_failed_at", f.timestamp)), f.local_rank, f.pid, f"ended with {how}", said)
        if not f.error_file or not os.path.isfile(f.error_file):
            continue
        attempt = os.path.dirname(os.path.dirname(f.error_file))  # .../attempt_N/<local rank>/error.json
        for local in os.listdir(attempt):
            path = os.path.join(attempt, local, "error.json")
            try:
                with open(path) as fp:
                    other = json.load(fp)
            except (OSError, ValueError):
                continue
            if "noeira_failed_at" in other and int(other.get("rank", -1)) not in seen and local.isdigit():
                seen[int(other["rank"])] = (float(other["noeira_failed_at"]), int(local), int(other.get("pid", -1)),
                                            "failed", str(other.get("message", "")))
    rank = min(seen, key=lambda r: (seen[r][0], r))
    return (rank, *seen[rank][1:])


_flat_buffers: dict[tuple[Any, Any, int], Tensor] = {}
"""One flat buffer per (device, dtype, size) for the packed collectives: allocated on the first
call (a warm-up, before any capture) and reused, so no call allocates a tensor the collective's
work handle may keep alive after the step (gloo's and NCCL's do, for a while)."""


def _all_reduce_flat_(tensors: Sequence[Tensor], divide: bool) -> None:
    """Sum (then ``divide`` by the world size) ``tensors`` across ranks in place, packed into one
    reused flat buffer so the job runs one collective."""
    if current()[1] == 1 or not tensors:
        return
    import torch
    import torch.distributed as dist

    dtype = functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    total = sum(t.numel() for t in tensors)
    key = (tensors[0].device, dtype, total)
    flat = _flat_buffers.get(key)
    if flat is None:
        flat = _flat_buffers[key] = torch.empty(total, dtype=dtype, device=tensors[0].device)
    torch.cat([t.reshape(-1) for t in tensors], out=flat)
    dist.all_reduce(flat)
    if divide:
        flat.div_(dist.get_world_size())
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset:offset + n].view_as(t))
        offset += n


def all_reduce_mean_(tensors: Sequence[Tensor]) -> None:
    """Average ``tensors`` across ranks in place, as one flat buffer (one collective).
    Capture-safe: same shapes every call, no host sync, no allocation after the first call."""
    _all_reduce_flat_(tensors, divide=True)


def all_reduce_sum_(tensors: Sequence[Tensor]) -> None:
    """Sum ``tensors`` across ranks in place, as one flat buffer."""
    _all_reduce_flat_(tensors, divide=False)


def all_reduce_max_(tensors: Sequence[Tensor]) -> None:
    """The elementwise maximum of ``tensors`` across ranks, in place."""
    if current()[1] == 1:
        return
    import torch
    import torch.distributed as dist

    for t in [tensors] if isinstance(tensors, torch.Tensor) else tensors:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)


def sync_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Average the gradients of ``params`` across ranks (after ``backward``, before clipping and
    the optimizer step, as DistributedDataParallel does). Parameters without a gradient are skipped."""
    if current()[1] == 1:
        return
    all_reduce_mean_([p.grad for p in params if p.grad is not None])


def broadcast_(tensors: Iterable[Tensor], src: int = 0) -> None:
    """Overwrite ``tensors`` with rank ``src``'s values (host tensors too, on gloo)."""
    if current()[1] == 1:
        return
    import torch.distributed as dist

    for t in tensors:
        dist.broadcast(t, src)


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order (alone: ``[obj]``)."""
    if current()[1] == 1:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def from_rank_zero(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (alone: ``obj``): a choice or a verdict made on rank 0, such
    as the run directory's name or an error that must stop every rank before any work."""
    if current()[1] == 1:
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, 0)
    return box[0]


def launch(train_argv: Sequence[str], nproc_per_node: int, nnodes: str = "1", rdzv_endpoint: str = "",
           node_rank: int | None = None, rdzv_id: str = "noeira") -> int:
    """Run ``noeira train TRAIN_ARGV`` in ``nproc_per_node`` processes per node through
    ``torch.distributed.run`` (torchrun's elastic agent: rendezvous, restarts off, one failing
    rank takes the job down). Returns the exit code; a failed rank is one ``UserError`` line."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if nproc_per_node < 1:
        raise UserError(f"--nproc-per-node: must be >= 1, got {nproc_per_node}")
    args = ["--nproc-per-node", str(nproc_per_node), "--nnodes", nnodes, "--max-restarts", "0"]
    if rdzv_endpoint:
        args += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint, "--rdzv-id", rdzv_id]
    elif nnodes in ("1", "1:1"):
        args += ["--standalone"]
    else:
        raise UserError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (where the nodes meet)")
    if node_rank is not None:
        args += ["--node-rank", str(node_rank)]
    args += ["-m", "noeira.core.cli", "train", *train_argv]
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default, said here so it need not warn
    try:
        run(parse_args(args))
    except ChildFailedError as err:
        if not err.failures:
            raise UserError("distributed run failed") from None
        rank, local, pid, how, said = _first_failure(err.failures)
        said = f" ({said})" if said else ""
        raise UserError(f"distributed run failed: rank {rank} (local rank {local}, pid {pid}) {how}{said}; the other "
                        "ranks were stopped (its error is above)") from None
    return 0

