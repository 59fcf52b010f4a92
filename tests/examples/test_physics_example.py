"""The example physics engine (examples/plugins/physics, ``pointmass``): the PhysicsEngine
contract, and MuJoCo's numbers from the same states, step by step."""

from __future__ import annotations

import pytest
import torch

from noeira.core import ConfigError, make_physics
from noeira.core.contracts import PhysicsEngine

pytestmark = pytest.mark.usefixtures("examples", "one_thread")

# two bodies, one inside the other; a tilted axis; damping, gravity, a clamped and an unclamped
# motor, both kinds of sensor
MODEL = """
<mujoco model="cart and bob">
  <option timestep="0.01" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="cart" pos="0 0 1">
      <joint name="x" type="slide" axis="1 0 0" damping="0.5"/>
      <geom type="box" size="0.1 0.1 0.1" mass="2" contype="0" conaffinity="0"/>
      <body name="bob">
        <joint name="tilt" type="slide" axis="0 3 4" ref="0.3"/>
        <geom type="sphere" size="0.05" mass="0.5" contype="0" conaffinity="0"/>
        <geom type="sphere" size="0.05" pos="0 0 0.1" mass="0.25" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="x" gear="3" ctrlrange="-1 1"/>
    <motor joint="tilt" gear="20"/>
  </actuator>
  <sensor><jointpos joint="tilt"/><jointvel joint="x"/></sensor>
</mujoco>
"""


def test_pointmass_keeps_the_physics_engine_contract() -> None:
    p = make_physics("pointmass", MODEL, num_worlds=5, backend="cpu")
    assert isinstance(p, PhysicsEngine) and p.capture_safe is True
    assert p.num_worlds == 5 and p.device == torch.device("cpu")
    shapes = {"qpos": (5, 2), "qvel": (5, 2), "ctrl": (5, 2), "time": (5,), "sensordata": (5, 2)}
    for name, shape in shapes.items():
        x = getattr(p, name)
        assert tuple(x.shape) == shape and x.dtype == torch.float32, name
    assert p.qpos[:, 1].tolist() == pytest.approx([0.3] * 5)  # the joint's ref
    p.ctrl.fill_(1.0)
    p.step(4)
    assert p.time.tolist() == pytest.approx([0.04] * 5)
    moved = p.qpos.clone()
    mask = torch.tensor([True, False, True, False, False])
    p.reset(mask)
    assert torch.allclose(p.qpos[mask], torch.tensor([[0.0, 0.3]] * 2)) and torch.equal(p.qpos[~mask], moved[~mask])
    assert bool((p.qvel[mask] == 0).all() and (p.ctrl[mask] == 0).all() and (p.time[mask] == 0).all())
    assert bool((p.qvel[~mask] != 0).all() and (p.time[~mask] > 0).all())
    p.forward()
    assert torch.equal(p.sensordata, torch.stack([p.qpos[:, 1], p.qvel[:, 0]], 1))


def test_pointmass_matches_mujoco_step_by_step() -> None:
    pytest.importorskip("mujoco")
    ours = make_physics("pointmass", MODEL, num_worlds=4, backend="cpu", dtype="float64")
    ref = make_physics("mujoco", MODEL, num_worlds=4, backend="cpu", nthread=1)
    g = torch.Generator().manual_seed(0)
    try:
        for t in range(40):
            if t == 20:  # the same mid-run state in both, then a partial reset
                state = torch.randn(4, 4, generator=g, dtype=torch.float64)
                for p in (ours, ref):
                    p.qpos.copy_(state[:, :2])
                    p.qvel.copy_(state[:, 2:])
                    p.reset(torch.tensor([False, True, False, False]))
            ctrl = torch.rand(4, 2, generator=g, dtype=torch.float64) * 4 - 2  # beyond ctrlrange too
            for p in (ours, ref):
                p.ctrl.copy_(ctrl)
                p.step(3)
            for name in ("qpos", "qvel", "time", "sensordata"):
                torch.testing.assert_close(getattr(ours, name), getattr(ref, name), rtol=1e-9, atol=1e-9,
                                           msg=lambda m, name=name, t=t: f"{name} at step {t}: {m}")
        for p in (ours, ref):
            p.forward()
        torch.testing.assert_close(ours.sensordata, ref.sensordata, rtol=1e-9, atol=1e-9)
    finally:
        ref.close()


@pytest.mark.parametrize(("change", "message"), [
    (('type="slide" axis="1 0 0"', 'axis="1 0 0"'), "only type=\"slide\""),
    (('mass="2" ', ""), "give every geom a mass"),
    (("<sensor>", "<sensor><accelerometer site=\"s\"/>"), "<accelerometer> is not supported"),
    (('damping="0.5"', 'stiffness="1"'), "<joint stiffness=...> is not supported"),
    (('joint="x" gear', 'joint="nope" gear'), "no such joint (joints: x, tilt)"),
])
def test_what_pointmass_cannot_model_is_a_one_line_error(change: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match="pointmass MJCF") as err:
        make_physics("pointmass", MODEL.replace(*change), num_worlds=1, backend="cpu")
    assert message in str(err.value) and "\n" not in str(err.value)
