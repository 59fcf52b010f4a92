"""The physics engines: ``mujoco`` bit-identical to one MjData per world stepped by
``mj_step`` (both of its paths), the reset/forward/field semantics, and ``mujoco-warp``
against ``mujoco`` within float32 tolerance (on Warp's CPU device when Warp is installed,
on CUDA under the ``cuda`` marker)."""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
import warnings

import mujoco
import numpy as np
import pytest
import torch

from noeira.core import make_physics
from noeira.core.contracts import PhysicsEngine
from noeira.core.errors import PluginLoadError, UserError
from noeira.physics.mujoco_cpu import _shared_array

GYM = importlib.util.find_spec("gymnasium")
ASSETS = os.path.join(list(GYM.submodule_search_locations)[0], "envs", "mujoco", "assets") if GYM else ""
needs_assets = pytest.mark.skipif(GYM is None, reason="gymnasium (for its MJCF files) is not installed")
HAS_WARP = importlib.util.find_spec("mujoco_warp") is not None and importlib.util.find_spec("warp") is not None

PENDULUM = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/>
      <site name="tip" pos="0 0 -0.5"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" ctrlrange="-1 1" ctrllimited="true"/></actuator>
  <sensor><jointpos joint="hinge"/><framepos objtype="site" objname="tip"/></sensor>
</mujoco>
"""


def _reference(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, ctrls: np.ndarray, nstep: int,
               rne: bool) -> list[tuple[np.ndarray, ...]]:
    """One MjData per world, stepped with mj_step: (qpos, qvel, xpos, cfrc_ext, cvel) after each step."""
    out = []
    datas = []
    for i in range(len(qpos)):
        d = mujoco.MjData(model)
        d.qpos[:], d.qvel[:] = qpos[i], qvel[i]
        datas.append(d)
    for u in ctrls:
        for i, d in enumerate(datas):
            d.ctrl[:] = u[i]
            mujoco.mj_step(model, d, nstep)
            if rne:
                mujoco.mj_rnePostConstraint(model, d)
        out.append(tuple(np.stack([getattr(d, f) for d in datas])
                         for f in ("qpos", "qvel", "xpos", "cfrc_ext", "cvel")))
    return out


MODES = {  # how the worlds run: make_physics options
    "batch": {},
    "processes": {"rne_post_constraint": True},
    "threads": {"rne_post_constraint": True, "workers": "threads"},
}


@needs_assets
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("nthread", [1, 2, 3])
def test_mujoco_bit_identical_to_mj_step(mode: str, nthread: int) -> None:
    xml = os.path.join(ASSETS, "ant.xml")
    n, nstep = 5, 5
    eng = make_physics("mujoco", xml, num_worlds=n, backend="cpu", nthread=nthread, **MODES[mode])
    assert ("worker processes" in repr(eng)) == (mode == "processes" and nthread > 1)
    rne = mode != "batch"
    model = eng.mj_model
    rng = np.random.default_rng(0)
    qpos = model.qpos0 + rng.uniform(-0.1, 0.1, (n, model.nq))
    qvel = rng.normal(0, 0.1, (n, model.nv))
    ctrls = rng.uniform(-1, 1, (30, n, model.nu))
    xpos, cfrc = eng.field("xpos"), eng.field("cfrc_ext")
    eng.qpos.copy_(torch.from_numpy(qpos))
    eng.qvel.copy_(torch.from_numpy(qvel))
    ref = _reference(model, qpos, qvel, ctrls, nstep, rne)
    for t, u in enumerate(ctrls):
        eng.ctrl.copy_(torch.from_numpy(u))
        eng.step(nstep)
        if t == 10:
            cvel = eng.field("cvel")  # asked for while running: copied from the next step on
            assert not cvel.any()
        rq, rv, rx, rc, rcv = ref[t]
        assert np.array_equal(eng.qpos.numpy(), rq), f"qpos differs at step {t}"
        assert np.array_equal(eng.qvel.numpy(), rv), f"qvel differs at step {t}"
        assert np.array_equal(xpos.numpy(), rx), f"xpos differs at step {t}"
        if rne:
            assert np.array_equal(cfrc.numpy(), rc), f"cfrc_ext differs at step {t}"
        if t > 10:
            assert np.array_equal(cvel.numpy(), rcv), f"cvel differs at step {t}"
    assert torch.allclose(eng.time, torch.full((n,), 30 * nstep * model.opt.timestep, dtype=torch.float64))
    eng.close()


@pytest.mark.parametrize("mode", list(MODES))
def test_mujoco_reset_forward_masks(mode: str) -> None:
    eng = make_physics("mujoco", PENDULUM, num_worlds=4, backend="cpu", nthread=2, **MODES[mode])
    assert isinstance(eng, PhysicsEngine) and eng.num_worlds == 4 and not eng.capture_safe
    site, sensors = eng.field("site_xpos"), eng.sensordata
    assert tuple(site.shape) == (4, 1, 3) and tuple(sensors.shape) == (4, 4)
    assert eng.qpos.dtype == torch.float64 and eng.qpos.shape == (4, 1)
    eng.qpos[:, 0] = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    eng.forward()
    assert torch.allclose(sensors[:, 0], eng.qpos[:, 0])  # jointpos sensor follows the state
    tip_z = site[:, 0, 2].clone()
    assert torch.allclose(tip_z, 1 - 0.5 * eng.qpos[:, 0].cos())
    # forward(mask) recomputes only the masked worlds' derived fields
    eng.qpos[:, 0] = 0.0
    eng.forward(torch.tensor([True, False, False, False]))
    assert site[0, 0, 2] == pytest.approx(0.5) and torch.equal(site[1:, 0, 2], tip_z[1:])
    # reset(mask): model's initial state, derived fields zero, others untouched
    eng.ctrl[:] = 0.5
    eng.step(3)
    before = eng.qvel.clone()
    mask = torch.tensor([False, True, False, True])
    eng.reset(mask)
    assert torch.equal(eng.qvel[mask], torch.zeros(2, 1, dtype=torch.float64))
    assert torch.equal(eng.ctrl[mask], torch.zeros(2, 1, dtype=torch.float64))
    assert torch.equal(eng.time[mask], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(site[mask], torch.zeros(2, 1, 3, dtype=torch.float64))
    assert torch.equal(eng.qvel[~mask], before[~mask]) and (eng.time[~mask] > 0).all()
    # the tensors are the engine's memory: a write is the next step's input
    eng.qpos[2, 0] = 1.0
    eng.qvel[2, 0] = 0.0
    eng.ctrl[2, 0] = 0.0
    eng.step(1)
    assert 0.9 < float(eng.qpos[2, 0]) < 1.0  # falls back from 1 rad under gravity
    eng.close()


@needs_assets
def test_mujoco_forward_mask_in_workers() -> None:
    """forward(mask) of more worlds than run inline goes to the worker processes, and
    recomputes those worlds only; cfrc_ext keeps the values of the last step."""
    xml = os.path.join(ASSETS, "ant.xml")
    n = 16
    procs, threads = (make_physics("mujoco", xml, num_worlds=n, backend="cpu", nthread=2, rne_post_constraint=True,
                                   workers=w) for w in ("processes", "threads"))
    rng = np.random.default_rng(1)
    for e in (procs, threads):
        e.field("xpos"), e.field("cfrc_ext")
    qpos = torch.from_numpy(procs.mj_model.qpos0 + rng.uniform(-0.1, 0.1, (n, procs.mj_model.nq)))
    mask = torch.from_numpy(rng.random(n) < 0.6)
    assert int(mask.sum()) > 4  # more than _INLINE_FORWARD
    for e in (procs, threads):
        for _ in range(20):
            e.step(5)
        e.qpos.copy_(qpos)
        e.forward(mask)
    for f in ("xpos", "cfrc_ext"):
        assert torch.equal(procs.field(f), threads.field(f)), f
    assert procs.field("cfrc_ext").abs().max() > 1  # from the steps: feet on the floor
    procs.close()
    threads.close()


def test_mujoco_worker_processes_end() -> None:
    """The workers end with close(), when the engine is collected, or raise when one has
    died; a worker's error is raised by the engine."""
    eng = make_physics("mujoco", PENDULUM, num_worlds=4, backend="cpu", nthread=3, rne_post_constraint=True)
    procs = list(eng._procs._procs)
    assert len(procs) == 2 and all(p.poll() is None for p in procs)  # and this process
    eng.step(1)
    eng.close()
    assert all(p.poll() is not None for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        eng.step(1)

    eng = make_physics("mujoco", PENDULUM, num_worlds=4, backend="cpu", nthread=2, rne_post_constraint=True)
    procs = list(eng._procs._procs)
    del eng
    gc.collect()
    for p in procs:
        p.wait(timeout=10)

    eng = make_physics("mujoco", PENDULUM, num_worlds=4, backend="cpu", nthread=2, rne_post_constraint=True)
    _, fd = _shared_array((4, 1), np.float64)
    with pytest.raises(RuntimeError, match="worker: AttributeError.*no_such_field"):
        eng._procs.add_field("no_such_field", fd, (4, 1), np.dtype(np.float64))
    os.close(fd)
    eng.step(1)  # still usable
    eng._procs._procs[0].kill()
    with pytest.raises(RuntimeError, match="worker process exited"):
        eng.step(1)
    with pytest.raises(RuntimeError, match="closed"):
        eng.step(1)


def test_mujoco_errors() -> None:
    with pytest.raises(UserError, match="no such MJCF file"):
        make_physics("mujoco", "/nonexistent/model.xml", num_worlds=1, backend="cpu")
    with pytest.raises(UserError, match="cannot compile"):
        make_physics("mujoco", "<mujoco><worldbody><geom type='nope'/></worldbody></mujoco>", backend="cpu")
    eng = make_physics("mujoco", PENDULUM, num_worlds=2, backend="cpu")
    with pytest.raises(UserError, match="no array field"):
        eng.field("not_a_field")


def test_warp_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # import fails as if not installed
    monkeypatch.delitem(sys.modules, "noeira.physics.mujoco_warp", raising=False)
    with pytest.raises(PluginLoadError, match=r"noeira-physics\[warp\]"):
        make_physics("mujoco-warp", PENDULUM, num_worlds=1, backend="cpu")


# -- mujoco-warp against mujoco ----------------------------------------------------------

WARP_DEVICES = [
    pytest.param("cpu", marks=[pytest.mark.slow, pytest.mark.skipif(not HAS_WARP, reason="warp not installed")]),
    pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not HAS_WARP, reason="warp not installed")]),
]


def _compare_engines(xml: str, backend: str, steps: int, nstep: int, fields: tuple[str, ...],
                     atol: float, rne: bool = False) -> None:
    n = 4
    cpu = make_physics("mujoco", xml, num_worlds=n, backend="cpu", rne_post_constraint=rne)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrp = make_physics("mujoco-warp", xml, num_worlds=n, backend=backend, rne_post_constraint=rne)
    assert wrp.qpos.dtype == torch.float32 and wrp.qpos.device.type == backend
    m = cpu.mj_model
    rng = np.random.default_rng(0)
    qpos = torch.from_numpy(m.qpos0 + rng.uniform(-0.05, 0.05, (n, m.nq)))
    qvel = torch.from_numpy(rng.normal(0, 0.05, (n, m.nv)))
    lo, hi = m.actuator_ctrlrange.T
    for e in (cpu, wrp):
        e.qpos.copy_(qpos)
        e.qvel.copy_(qvel)
        e.forward()
    fc = {f: cpu.field(f) for f in fields}
    fw = {f: wrp.field(f) for f in fields}
    for t in range(steps):
        u = torch.from_numpy(rng.uniform(lo, hi, (n, m.nu)))
        for e in (cpu, wrp):
            e.ctrl.copy_(u)
            e.step(nstep)
        for name, a, b in [("qpos", cpu.qpos, wrp.qpos), ("qvel", cpu.qvel, wrp.qvel)] + \
                [(f, fc[f], fw[f]) for f in fields]:
            err = (a - b.double().cpu()).abs().max().item()
            scale = 1 + a.abs().max().item()
            assert err <= atol * scale, f"{name} differs by {err:.2e} at step {t}"


@needs_assets
@pytest.mark.parametrize("backend", WARP_DEVICES)
def test_warp_matches_mujoco_halfcheetah(backend: str) -> None:
    _compare_engines(os.path.join(ASSETS, "half_cheetah.xml"), backend, steps=20, nstep=5,
                     fields=("xpos", "cvel"), atol=1e-3)


@needs_assets
@pytest.mark.parametrize("backend", WARP_DEVICES)
def test_warp_matches_mujoco_ant_contact_forces(backend: str) -> None:
    """Ant resting on its feet: contact forces after rne_postconstraint agree (same layout,
    same RK4 stage as MuJoCo's), as do the state and the com-based quantities."""
    xml = os.path.join(ASSETS, "ant.xml")
    cpu = make_physics("mujoco", xml, num_worlds=2, backend="cpu", rne_post_constraint=True)
    wrp = make_physics("mujoco-warp", xml, num_worlds=2, backend=backend, rne_post_constraint=True)
    for _ in range(100):  # settle on the floor
        cpu.step(5)
    wrp.qpos.copy_(cpu.qpos)
    wrp.qvel.copy_(cpu.qvel)
    names = ("cfrc_ext", "cinert", "cvel", "xipos")
    fc, fw = {f: cpu.field(f) for f in names}, {f: wrp.field(f) for f in names}
    for t in range(5):
        cpu.step(5)
        wrp.step(5)
        assert fc["cfrc_ext"].abs().max() > 1  # feet in contact
        for f in names:
            err = (fc[f] - fw[f].double().cpu()).abs().max().item()
            assert err < 1e-3, f"{f} differs by {err:.2e} at step {t}"


@needs_assets
@pytest.mark.parametrize("backend", WARP_DEVICES)
def test_warp_reset_forward_masks(backend: str) -> None:
    eng = make_physics("mujoco-warp", PENDULUM, num_worlds=4, backend=backend)
    assert isinstance(eng, PhysicsEngine) and eng.capture_safe == (backend == "cuda")
    site = eng.field("site_xpos")
    eng.qpos[:, 0] = torch.tensor([0.1, 0.2, 0.3, 0.4])
    eng.forward()
    tip_z = site[:, 0, 2].clone()
    assert torch.allclose(tip_z, 1 - 0.5 * eng.qpos[:, 0].cos(), atol=1e-6)
    eng.qpos[:, 0] = 0.0
    eng.forward(torch.tensor([True, False, False, False], device=eng.device))
    assert abs(float(site[0, 0, 2]) - 0.5) < 1e-6 and torch.equal(site[1:, 0, 2], tip_z[1:])
    eng.ctrl[:] = 0.5
    eng.step(3)
    before = eng.qvel.clone()
    mask = torch.tensor([False, True, False, True], device=eng.device)
    eng.reset(mask)
    assert (eng.qvel[mask] == 0).all() and (eng.time[mask] == 0).all() and (site[mask] == 0).all()
    assert torch.equal(eng.qvel[~mask], before[~mask])


@needs_assets
@pytest.mark.parametrize("backend", WARP_DEVICES)
def test_warp_humanoid_pgs_to_newton_with_warning(backend: str) -> None:
    with pytest.warns(UserWarning, match="PGS solver.*Newton"):
        eng = make_physics("mujoco-warp", os.path.join(ASSETS, "humanoid.xml"), num_worlds=8, backend=backend)
    assert eng.mj_model.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    eng.step(5)
    assert torch.isfinite(eng.qpos).all()


@needs_assets
@pytest.mark.cuda
@pytest.mark.skipif(not HAS_WARP, reason="warp not installed")
def test_warp_step_in_cuda_graph() -> None:
    """The step records in a CUDA graph with the torch code around it (allocating before
    and after it, as an env step does); replays equal eager."""
    xml = os.path.join(ASSETS, "half_cheetah.xml")
    a = make_physics("mujoco-warp", xml, num_worlds=64, backend="cuda")
    b = make_physics("mujoco-warp", xml, num_worlds=64, backend="cuda")
    assert a.capture_safe
    u = torch.zeros_like(a.ctrl)
    obs = torch.zeros(64, a.qpos.shape[1] + a.qvel.shape[1], device="cuda")

    def step() -> None:
        a.ctrl.copy_(torch.tanh(a.qvel[:, :6] + u))
        a.step(5)
        obs.copy_(torch.cat([a.qpos, a.qvel], dim=1) * 2)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()  # warm-up: Warp compiles and loads its kernels
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    for _ in range(2):
        b.ctrl.copy_(torch.tanh(b.qvel[:, :6] + u))
        b.step(5)
    for _ in range(10):
        g.replay()
        b.ctrl.copy_(torch.tanh(b.qvel[:, :6] + u))
        b.step(5)
    torch.cuda.synchronize()
    assert torch.allclose(a.qpos, b.qpos, atol=1e-3), (a.qpos - b.qpos).abs().max()
    assert torch.equal(obs, torch.cat([a.qpos, a.qvel], dim=1) * 2)


@needs_assets
@pytest.mark.cuda
@pytest.mark.skipif(not HAS_WARP, reason="warp not installed")
def test_warp_step_in_capture_leaves_garbage_alone() -> None:
    """A capture around the step may begin with garbage about: here a dropped CUDA graph in
    a reference cycle. Destroying a graph while a capture runs in global mode invalidates
    the capture, so the step must not collect garbage inside it."""
    a = make_physics("mujoco-warp", os.path.join(ASSETS, "half_cheetah.xml"), num_worlds=8, backend="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    x = torch.zeros(1, device="cuda")
    gc_was_on = gc.isenabled()
    gc.disable()  # the cycle below stays uncollected until the step runs in the capture
    try:
        with torch.cuda.stream(s):
            a.step(1)  # warm-up: Warp loads its kernels
            old = torch.cuda.CUDAGraph()
            old.capture_begin()
            x.add_(1)
            old.capture_end()
            cycle: list = [old]
            cycle.append(cycle)
            del old, cycle
            g = torch.cuda.CUDAGraph()
            g.capture_begin()
            a.step(1)
            x.add_(1)
            g.capture_end()
    finally:
        if gc_was_on:
            gc.enable()
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    torch.cuda.synchronize()
    assert x.item() == 1.0  # the old graph never ran; the new one added once


@pytest.mark.skipif(not HAS_WARP, reason="warp not installed")
def test_warp_registers_external_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """While torch records the step's stream in a CUDA graph, the Warp calls run inside
    wp.capture_begin(external=True)/capture_end, so Warp makes the frees of its temporaries
    graph nodes (unregistered it frees them at once: CUDA error 900), with the solver's
    conditional early exit unless torch_graph_conditional=False; nothing is registered
    when the stream is not capturing or Warp captures it itself. (The CUDA path around it: test_warp_step_in_cuda_graph.)"""
    import warp as wp

    eng = make_physics("mujoco-warp", PENDULUM, num_worlds=2, backend="cpu")
    calls: list[tuple[str, dict]] = []
    monkeypatch.setattr(wp, "capture_begin", lambda **kw: calls.append(("begin", kw)))
    monkeypatch.setattr(wp, "capture_end", lambda **kw: calls.append(("end", kw)) or f"graph{len(calls)}")

    class Device:
        captures: dict = {}

    class Stream:
        def __init__(self, capturing: bool) -> None:
            self.is_capturing, self.cuda_stream, self.device = capturing, 1234, Device()

    stream = Stream(capturing=True)
    # nothing is collected inside a capture (it may destroy another CUDA graph)
    monkeypatch.setattr(gc, "collect", lambda *a: pytest.fail("garbage collected inside a capture"))
    with eng._external_capture(stream) as m:
        assert calls == [("begin", {"stream": stream, "external": True, "capture_mode": wp.CaptureMode.GLOBAL})]
        assert m is eng._m and m.opt.graph_conditional is True  # the solver's early exit is kept
        assert not gc.isenabled()
    assert gc.isenabled()
    assert calls[1] == ("end", {"stream": stream}) and eng._graphs == ["graph2"]  # kept: kernels stay loaded

    with pytest.raises(ValueError, match="boom"), eng._external_capture(stream):
        raise ValueError("boom")
    assert gc.isenabled()
    assert [c[0] for c in calls] == ["begin", "end", "begin", "end"] and len(eng._graphs) == 1

    calls.clear()
    for s in (Stream(capturing=False), stream):
        if s is stream:
            Device.captures = {Stream(capturing=True): "warp's own"}  # same cuda stream, Warp's capture
        with eng._external_capture(s) as m:
            assert m is eng._m
    assert calls == []

    fixed = make_physics("mujoco-warp", PENDULUM, num_worlds=2, backend="cpu", torch_graph_conditional=False)
    Device.captures = {}
    with fixed._external_capture(stream) as m:
        assert m.opt.graph_conditional is False and m.opt.iterations == fixed._m.opt.iterations
    assert fixed._m.opt.graph_conditional is True  # eager steps keep the early exit
