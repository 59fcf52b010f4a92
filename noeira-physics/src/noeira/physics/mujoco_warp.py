"""``mujoco-warp``: N worlds of an MJCF model on MuJoCo Warp (GPU, or Warp's CPU device).

State is exposed as float32 torch tensors that *are* MuJoCo Warp's arrays
(``wp.to_torch``, no copy): ``qpos [N, nq]``, ``qvel [N, nv]``, ``ctrl [N, nu]``,
``act [N, na]``, ``time [N]``; derived fields from :meth:`MujocoWarpEngine.field`.
Kernels are launched on torch's current stream, so a step can be recorded in a CUDA
graph together with the torch code around it (``capture_safe`` on CUDA): while torch's
stream is capturing, the Warp calls are registered with Warp as an external capture
(``wp.capture_begin(external=True)``), so the temporaries MuJoCo Warp allocates and drops
inside a step become allocation/free nodes of the graph instead of frees that the
capture forbids. Whoever records should collect garbage before the capture begins and
not during it (``torch.cuda.graph`` and the ``stream`` backend do; the step itself keeps
the collector off while it runs in a capture).

Same semantics as the ``mujoco`` engine: after ``step`` the derived fields describe the
state before the last substep; ``forward(mask)`` recomputes them for the masked worlds
only (Warp's forward runs every world; the fields of the others are put back);
``reset(mask)`` returns the masked worlds to the model's initial state, their derived
fields zero.

MuJoCo Warp lacks some of MuJoCo's options. The PGS solver (gymnasium's humanoid.xml
uses it) is replaced by Newton, MuJoCo's default, with one warning; other unsupported
features are refused with MuJoCo Warp's reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator

import attrs
import mujoco
import torch
from torch import Tensor

from noeira.core.contracts import Backend
from noeira.core.errors import ConfigError, PluginLoadError, UserError
from noeira.core.graph import no_garbage_collection
from noeira.physics.mjcf import load_model

try:
    import mujoco_warp as mjw
    import warp as wp
except ImportError as _e:  # the registry shows this message with the plugin's name
    raise PluginLoadError(
        f"MuJoCo Warp is not installed ({_e}); install it with: pip install 'noeira-physics[warp]'"
    ) from _e

__all__ = ["MujocoWarpEngine"]

wp.config.quiet = True  # no banner, no line per kernel module loaded

# MuJoCo's integration state and inputs (mjSTATE_INTEGRATION), as reset_data leaves them
_RESET_STATE = ("time", "qpos", "qvel", "act", "qacc_warmstart", "ctrl", "qfrc_applied", "xfrc_applied",
                "eq_active", "mocap_pos", "mocap_quat", "userdata")


class MujocoWarpEngine:
    """MuJoCo Warp for ``num_worlds`` worlds on the backend's device; tensors are float32."""

    @attrs.frozen
    class Config:
        nconmax: int = 0
        """Contacts allocated per world (0: MuJoCo Warp's default for the model)."""
        njmax: int = 0
        """Constraint rows allocated per world (0: MuJoCo Warp's default for the model)."""
        rne_post_constraint: bool = False
        """Run rne_postconstraint after every step, as gymnasium's MuJoCo envs do, so
        that cacc, cfrc_int and cfrc_ext are current."""
        torch_graph_conditional: bool = True
        """Keep MuJoCo Warp's conditional graph nodes (the solver's early exit) when a step
        is recorded by a torch CUDA graph. Off: the solver runs its fixed ``iterations``
        there (converged worlds idle), as MuJoCo Warp does inside JAX's graphs, which made
        a recorded halfcheetah step 6.5x and an ant step 4.6x slower on the H200 (100
        iterations where Newton converges in a few). On: Warp adds its conditional nodes to
        torch's capture; with Warp 1.19 on the H200 the stream's capture id, by which torch
        puts the allocations after the step into the graph's memory pool, stayed the same."""

    def __init__(self, config: Config, *, model: str | mujoco.MjModel, num_worlds: int, backend: Backend) -> None:
        for key in ("nconmax", "njmax"):
            if getattr(config, key) < 0:
                raise ConfigError(f"physics.{key}: must be >= 0, got {getattr(config, key)}")
        self.config = config
        self.num_worlds = num_worlds
        self.device = torch.device(backend.device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type not in ("cuda", "cpu"):
            raise UserError(f"physics 'mujoco-warp' runs on cuda or cpu, not {self.device}")
        self.dtype = torch.float32
        self.capture_safe = self.device.type == "cuda"
        """On CUDA the step launches kernels only, on torch's stream: recordable as a graph."""
        self._wp_device = wp.get_device(str(self.device))
        m = load_model(model)
        if m.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
            warnings.warn(
                "physics 'mujoco-warp': the model uses the PGS solver, which MuJoCo Warp does not "
                "support; using the Newton solver instead (same iterations and tolerance)",
                stacklevel=2,
            )
            m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
        self.mj_model = m
        """The host ``MjModel`` (names, ids, sizes, ctrlrange, masses ...), as simulated."""
        kw = {k: v for k, v in (("nconmax", config.nconmax), ("njmax", config.njmax)) if v}
        with wp.ScopedDevice(self._wp_device):
            try:
                self._m = mjw.put_model(m)
            except (NotImplementedError, ValueError) as e:
                raise UserError(f"physics 'mujoco-warp': MuJoCo Warp cannot simulate this model: {e}") from e
            self._d = mjw.put_data(m, mujoco.MjData(m), nworld=num_worlds, **kw)
            wp.synchronize_device(self._wp_device)  # later work runs on torch's streams
        # the model used while a torch graph records a step (see Config.torch_graph_conditional)
        self._m_torch_graph = self._m if config.torch_graph_conditional else dataclasses.replace(
            self._m, opt=dataclasses.replace(self._m.opt, graph_conditional=False))
        self._graphs: list[object] = []  # Warp's records of external captures: they keep kernels loaded
        self._streams: dict[int, object] = {}
        self._fields: dict[str, Tensor] = {}
        self._saved: dict[str, Tensor] = {}
        self.qpos: Tensor = wp.to_torch(self._d.qpos)
        """``[N, nq]`` joint positions."""
        self.qvel: Tensor = wp.to_torch(self._d.qvel)
        """``[N, nv]`` joint velocities."""
        self.ctrl: Tensor = wp.to_torch(self._d.ctrl)
        """``[N, nu]`` controls, applied by the next step."""
        self.act: Tensor = wp.to_torch(self._d.act)
        """``[N, na]`` actuator activations."""
        self.time: Tensor = wp.to_torch(self._d.time)
        """``[N]`` simulation time."""
        self.sensordata: Tensor = self.field("sensordata")
        """``[N, nsensordata]`` sensor readings."""
        # the state reset(mask) restores: what put_data of a fresh MjData holds
        self._state = {name: wp.to_torch(getattr(self._d, name)) for name in _RESET_STATE
                       if isinstance(getattr(self._d, name, None), wp.array)}
        self._initial = {name: t[:1].clone() for name, t in self._state.items() if t.numel()}

    @contextlib.contextmanager
    def _warp(self) -> Iterator[object]:
        """Warp on torch's current stream, without a wait on Warp's own stream (the work
        before is ordered on this stream); yields the MuJoCo Warp model to step with."""
        if self.device.type != "cuda":
            with wp.ScopedDevice(self._wp_device):
                yield self._m
            return
        ts = torch.cuda.current_stream(self.device)
        stream = self._streams.get(ts.cuda_stream)
        if stream is None:
            stream = self._streams[ts.cuda_stream] = wp.stream_from_torch(ts)
        with wp.ScopedStream(stream, sync_enter=False), self._external_capture(stream) as m:
            yield m

    @contextlib.contextmanager
    def _external_capture(self, stream: wp.Stream) -> Iterator[object]:
        """While someone else (torch) records ``stream`` in a CUDA graph, tell Warp so:
        unregistered, Warp frees a temporary allocated in the capture at once, which
        the capture forbids (CUDA error 900); registered, the free becomes a node of the
        graph. Inside a capture Warp started itself (``wp.ScopedCapture``) nothing is done."""
        if not stream.is_capturing or any(s.cuda_stream == stream.cuda_stream for s in stream.device.captures):
            yield self._m
            return
        # torch.cuda.graph and CUDAGraph.capture_begin capture in global mode by default
        wp.capture_begin(stream=stream, external=True, capture_mode=wp.CaptureMode.GLOBAL)
        # No garbage collection while MuJoCo Warp's Python runs inside the capture: a
        # collection may destroy another CUDA graph (or free another library's memory),
        # which a capture in global mode forbids. Garbage is collected before a capture
        # begins (torch.cuda.graph and the graph backends do).
        try:
            with no_garbage_collection():
                yield self._m_torch_graph
        except BaseException:
            with contextlib.suppress(Exception):  # the capture is invalid already; the error says why
                wp.capture_end(stream=stream)
            raise
        self._graphs.append(wp.capture_end(stream=stream))

    def field(self, name: str) -> Tensor:
        """A derived field of MuJoCo Warp's ``Data`` for every world, ``[N, *shape]``
        (``xpos [N, nbody, 3]``, ``cfrc_ext [N, nbody, 6]`` ...), refreshed in place by
        every ``step``/``forward``/``reset``; treat it as read-only."""
        if name in ("qpos", "qvel", "ctrl", "act", "time"):
            return getattr(self, name)
        if name not in self._fields:
            arr = getattr(self._d, name, None)
            if not isinstance(arr, wp.array):
                raise UserError(f"physics 'mujoco-warp': Data has no array field {name!r}")
            t = wp.to_torch(arr)
            if t.shape[0] != self.num_worlds:
                raise UserError(f"physics 'mujoco-warp': field {name!r} is not per world {tuple(t.shape)}")
            self._fields[name] = t
        return self._fields[name]

    def step(self, nstep: int = 1) -> None:
        """``nstep`` substeps in every world (then rne_postconstraint with that option)."""
        with self._warp() as m:
            for _ in range(nstep):
                mjw.step(m, self._d)
            if self.config.rne_post_constraint:
                mjw.rne_postconstraint(m, self._d)

    def forward(self, mask: Tensor | None = None) -> None:
        """Forward dynamics in the worlds where ``mask [N]`` is True (all when None)."""
        if mask is not None:
            for name, t in self._fields.items():
                saved = self._saved.get(name)
                if saved is None:
                    saved = self._saved[name] = torch.empty_like(t)
                saved.copy_(t)
        with self._warp() as m:
            mjw.forward(m, self._d)
        if mask is not None:
            for name, t in self._fields.items():
                keep = ~mask.view(-1, *([1] * (t.dim() - 1)))
                t.copy_(torch.where(keep, self._saved[name], t))

    def reset(self, mask: Tensor | None = None) -> None:
        """The worlds where ``mask [N]`` is True (all when None) back to the initial state.

        ``mask=None`` runs MuJoCo Warp's ``reset_data``. A mask resets the state arrays in
        torch, to the values ``reset_data`` gives them (recorded at construction), with
        ``torch.where``: ``reset_data`` builds its kernels on every call, which costs
        milliseconds of Python per step in an env that resets its finished worlds each
        step; everything else is recomputed from the state by the next forward or step.
        """
        if mask is None:
            with self._warp() as m:
                mjw.reset_data(m, self._d)
            for t in self._fields.values():
                t.zero_()
            return
        for name, init in self._initial.items():
            t = self._state[name]
            t.copy_(torch.where(mask.view(-1, *([1] * (t.dim() - 1))), init, t))
        for t in self._fields.values():
            t.masked_fill_(mask.view(-1, *([1] * (t.dim() - 1))), 0)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"MujocoWarpEngine(num_worlds={self.num_worlds}, device={self.device})"
