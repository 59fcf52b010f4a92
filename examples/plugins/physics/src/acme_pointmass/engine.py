"""``pointmass``: point masses on slide joints, pushed by motors, stepped in torch.

A physics engine for noeira (entry-point group ``noeira.physics``), small enough to read in one
sitting. It reads a subset of MJCF and steps it as MuJoCo's default ``Euler`` integrator does
(semi-implicit Euler, joint damping taken implicitly), for ``num_worlds`` worlds at once, on
any torch device, with no host sync and no allocation that changes shape: an env built on it
can be recorded in a CUDA graph (``capture_safe = True``).

The MJCF subset (anything else is a one-line error naming it):

- ``<option timestep=... gravity=... integrator="Euler">``;
- ``<worldbody>`` holding ``<body pos=...>`` elements (nested or not, never rotated), each
  with ``<joint type="slide" axis=... ref=... damping=...>`` and geoms with a ``mass`` (or one
  ``<inertial mass=...>``). Geoms only carry mass: contacts are not modelled, so give a model
  meant for MuJoCo too ``contype="0" conaffinity="0"`` on every geom;
- ``<actuator>`` of ``<motor joint=... gear=... ctrlrange=... ctrllimited=...>``;
- ``<sensor>`` of ``<jointpos joint=...>`` and ``<jointvel joint=...>``.

Dynamics. A slide joint moves its body and every body inside it along its axis, so the mass
matrix is constant: ``M[i, j] = (mass moved by both joint i and joint j) * (axis_i . axis_j)``.
One step of ``h = timestep``, for every world::

    f     = gear^T clamp(ctrl, ctrlrange) + G - damping * qvel     # G[i] = gravity . axis_i * mass moved by i
    qacc  = (M + h diag(damping))^-1 f                              # MuJoCo's Euler: damping implicit
    qvel += h qacc
    qpos += h qvel                                                  # with the new velocity: semi-implicit
    time += h

As in MuJoCo, ``sensordata`` after :meth:`~PointMassEngine.step` describes the state before
its last substep; :meth:`~PointMassEngine.forward` computes it for the current state.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, ConfigError, UserError

__all__ = ["PointMassEngine", "PointMassModel", "parse_mjcf"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_ALLOWED = {  # element -> the attributes this engine understands
    "mujoco": {"model"},
    "option": {"timestep", "gravity", "integrator"},
    "worldbody": set(),
    "body": {"name", "pos"},
    "joint": {"name", "type", "axis", "ref", "damping", "pos"},
    "geom": {"name", "type", "size", "pos", "rgba", "mass", "contype", "conaffinity", "group"},
    "inertial": {"mass", "pos", "diaginertia"},
    "actuator": set(),
    "motor": {"name", "joint", "gear", "ctrlrange", "ctrllimited"},
    "sensor": set(),
    "jointpos": {"name", "joint"},
    "jointvel": {"name", "joint"},
}


@attrs.frozen
class PointMassModel:
    """What the engine keeps of an MJCF model (``nv`` joints, ``nu`` motors), as plain numbers."""

    timestep: float
    joint_names: tuple[str, ...]
    qpos0: tuple[float, ...]
    """``[nv]`` each joint's ``ref``: where ``reset`` puts it."""
    mass_matrix: tuple[tuple[float, ...], ...]
    """``[nv, nv]``."""
    damping: tuple[float, ...]
    gravity_force: tuple[float, ...]
    """``[nv]`` gravity's force along each joint."""
    gear: tuple[tuple[float, ...], ...]
    """``[nu, nv]`` force on each joint per unit of each motor's control."""
    ctrlrange: tuple[tuple[float, float], ...]
    """``[nu]`` clamp of each control (``-inf, inf``: not limited)."""
    sensors: tuple[tuple[str, int], ...]
    """``(jointpos | jointvel, joint index)`` in ``sensordata`` order."""


def _numbers(el: ET.Element, key: str, default: str, count: int | None = None) -> list[float]:
    text = el.get(key, default)
    try:
        values = [float(x) for x in text.split()]
    except ValueError:
        raise ConfigError(f"pointmass MJCF: <{el.tag} {key}={text!r}>: not numbers") from None
    if count is not None and len(values) != count:
        raise ConfigError(f"pointmass MJCF: <{el.tag} {key}={text!r}>: expected {count} numbers")
    return values


def parse_mjcf(model: str) -> PointMassModel:
    """Read ``model`` (an MJCF file's path, or the XML itself) into a :class:`PointMassModel`;
    a :class:`ConfigError` names the first element or attribute this engine does not handle."""
    text = model.lstrip()
    if not text.startswith("<"):
        path = os.path.expanduser(model)
        if not os.path.isfile(path):
            raise UserError(f"physics model: no such MJCF file: {model}")
        with open(path, encoding="utf-8") as f:
            text = f.read()
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise ConfigError(f"pointmass MJCF: not valid XML ({err})") from None
    for el in root.iter():
        if el.tag not in _ALLOWED:
            raise ConfigError(f"pointmass MJCF: <{el.tag}> is not supported (only {', '.join(sorted(_ALLOWED))})")
        extra = sorted(set(el.attrib) - _ALLOWED[el.tag])
        if extra:
            raise ConfigError(f"pointmass MJCF: <{el.tag} {extra[0]}=...> is not supported")
    if root.tag != "mujoco":
        raise ConfigError(f"pointmass MJCF: the root element is <{root.tag}>, not <mujoco>")

    option = root.find("option")
    option = option if option is not None else ET.Element("option")
    if option.get("integrator", "Euler") != "Euler":
        raise ConfigError(f"pointmass MJCF: integrator {option.get('integrator')!r}: only Euler")
    timestep = _numbers(option, "timestep", "0.002", 1)[0]
    gravity = _numbers(option, "gravity", "0 0 -9.81", 3)

    # joints in document order (as MuJoCo numbers them), and the bodies each one moves
    names: list[str] = []
    axes: list[list[float]] = []
    refs: list[float] = []
    damping: list[float] = []
    moves: list[set[int]] = []  # moves[i]: the bodies joint i moves (its own and those inside it)
    masses: list[float] = []  # by body

    def body_mass(body: ET.Element) -> float:
        inertial = body.find("inertial")
        if inertial is not None:
            return _numbers(inertial, "mass", "", 1)[0]
        total = 0.0
        for geom in body.findall("geom"):
            if "mass" not in geom.attrib:
                raise ConfigError(f"pointmass MJCF: give every geom a mass (body {body.get('name', '?')!r} has a geom without)")
            total += _numbers(geom, "mass", "", 1)[0]
        return total

    def walk(body: ET.Element, joints_above: list[int]) -> None:
        b = len(masses)
        masses.append(body_mass(body))
        mine = list(joints_above)
        for joint in body.findall("joint"):
            if joint.get("type") != "slide":
                raise ConfigError(f"pointmass MJCF: joint {joint.get('name', '?')!r} has type "
                                  f"{joint.get('type', 'hinge')!r}; only type=\"slide\" (say it: MuJoCo's default is hinge)")
            axis = _numbers(joint, "axis", "0 0 1", 3)
            norm = math.sqrt(sum(a * a for a in axis))
            if norm == 0:
                raise ConfigError(f"pointmass MJCF: joint {joint.get('name', '?')!r} has a zero axis")
            names.append(joint.get("name", f"joint{len(names)}"))
            axes.append([a / norm for a in axis])
            refs.append(_numbers(joint, "ref", "0", 1)[0])
            damping.append(_numbers(joint, "damping", "0", 1)[0])
            moves.append(set())
            mine.append(len(names) - 1)
        for j in mine:
            moves[j].add(b)
        for child in body.findall("body"):
            walk(child, mine)

    worldbody = root.find("worldbody")
    for body in worldbody.findall("body") if worldbody is not None else []:
        walk(body, [])
    nv = len(names)
    if nv == 0:
        raise ConfigError("pointmass MJCF: no slide joints: nothing moves")

    def dot(x: list[float], y: list[float]) -> float:
        return sum(a * b for a, b in zip(x, y, strict=True))

    mass_matrix = [[sum(masses[b] for b in moves[i] & moves[j]) * dot(axes[i], axes[j]) for j in range(nv)]
                   for i in range(nv)]
    gravity_force = [sum(masses[b] for b in moves[i]) * dot(gravity, axes[i]) for i in range(nv)]
    if any(mass_matrix[i][i] <= 0 for i in range(nv)):
        raise ConfigError("pointmass MJCF: every joint must move some mass")

    index = {n: i for i, n in enumerate(names)}

    def joint_of(el: ET.Element) -> int:
        name = el.get("joint", "")
        if name not in index:
            raise ConfigError(f"pointmass MJCF: <{el.tag} joint={name!r}>: no such joint (joints: {', '.join(names)})")
        return index[name]

    gear, ctrlrange = [], []
    for motor in root.iterfind("actuator/motor"):
        row = [0.0] * nv
        row[joint_of(motor)] = _numbers(motor, "gear", "1")[0]
        gear.append(tuple(row))
        limited = motor.get("ctrllimited", "auto")
        if limited == "true" or (limited == "auto" and "ctrlrange" in motor.attrib):
            lo, hi = _numbers(motor, "ctrlrange", "0 0", 2)
            ctrlrange.append((lo, hi))
        else:
            ctrlrange.append((-math.inf, math.inf))
    sensors = []
    for sensor in root.iterfind("sensor/*"):
        sensors.append((sensor.tag, joint_of(sensor)))
    return PointMassModel(timestep, tuple(names), tuple(refs), tuple(map(tuple, mass_matrix)), tuple(damping),
                          tuple(gravity_force), tuple(gear), tuple(ctrlrange), tuple(sensors))


class PointMassEngine:
    """``num_worlds`` worlds of a point-mass model (see the module docstring), state as torch
    tensors on the backend's device, in ``config.dtype``. Write ``qpos``, ``qvel``, ``ctrl``
    in place before :meth:`step`; read them after."""

    @attrs.frozen
    class Config:
        dtype: str = attrs.field(default="float32", validator=attrs.validators.in_(tuple(_DTYPES)))
        """State dtype: float32 | float64 (MuJoCo's)."""

    capture_safe = True
    """step, forward and reset are device arithmetic only: they can be recorded in a CUDA graph."""

    def __init__(self, config: Config, *, model: str, num_worlds: int, backend: Backend) -> None:
        self.config = config
        self.model = parse_mjcf(model)
        self.num_worlds = num_worlds
        self.device = backend.device
        self.dtype = _DTYPES[config.dtype]
        m, n = self.model, num_worlds
        self.timestep = m.timestep
        """Seconds of one substep (``<option timestep>``)."""
        nv, nu = len(m.qpos0), len(m.gear)

        def tensor(x: object) -> Tensor:
            return torch.tensor(x, dtype=torch.float64).to(self.device, self.dtype)

        self._qpos0 = tensor(m.qpos0)
        self._gear = tensor(m.gear).reshape(nu, nv)
        bounds = torch.tensor(m.ctrlrange, dtype=torch.float64).reshape(nu, 2)
        self._ctrl_low, self._ctrl_high = bounds[:, 0].to(self.device, self.dtype), bounds[:, 1].to(self.device, self.dtype)
        self._gravity = tensor(m.gravity_force)
        self._damping = tensor(m.damping)
        implicit = torch.tensor(m.mass_matrix, dtype=torch.float64) + m.timestep * torch.diag(torch.tensor(m.damping))
        self._inverse = torch.linalg.inv(implicit).to(self.device, self.dtype)  # constant: inverted once
        # sensordata[:, k] = cat(qpos, qvel)[:, _sensor_src[k]]
        self._sensor_src = torch.tensor([j + (nv if kind == "jointvel" else 0) for kind, j in m.sensors],
                                        dtype=torch.int64, device=self.device)

        self.qpos: Tensor = self._qpos0.repeat(n, 1)
        """``[N, nq]`` joint positions (``nq = nv``: one per slide joint)."""
        self.qvel: Tensor = torch.zeros(n, nv, dtype=self.dtype, device=self.device)
        """``[N, nv]`` joint velocities."""
        self.ctrl: Tensor = torch.zeros(n, nu, dtype=self.dtype, device=self.device)
        """``[N, nu]`` motor controls, applied by the next step (clamped to ctrlrange there)."""
        self.time: Tensor = torch.zeros(n, dtype=self.dtype, device=self.device)
        """``[N]`` simulation time."""
        self.sensordata: Tensor = torch.zeros(n, len(m.sensors), dtype=self.dtype, device=self.device)
        """``[N, nsensordata]`` the sensors, in the model's order."""

    def _sensed(self) -> Tensor:
        return torch.cat([self.qpos, self.qvel], dim=1).index_select(1, self._sensor_src)

    def step(self, nstep: int = 1) -> None:
        """``nstep`` substeps of every world."""
        h = self.timestep
        for i in range(nstep):
            if i == nstep - 1:
                self.sensordata.copy_(self._sensed())  # as mj_step: sensors see the state it started from
            force = torch.clamp(self.ctrl, self._ctrl_low, self._ctrl_high) @ self._gear
            force = force + self._gravity - self._damping * self.qvel
            self.qvel.add_(force @ self._inverse, alpha=h)  # the inverse is symmetric: f @ inv == inv @ f
            self.qpos.add_(self.qvel, alpha=h)
            self.time.add_(h)

    def forward(self, mask: Tensor | None = None) -> None:
        """Compute ``sensordata`` for the current state of the worlds where ``mask [N]`` is True
        (all when None)."""
        if mask is None:
            self.sensordata.copy_(self._sensed())
        else:
            self.sensordata.copy_(torch.where(mask.to(self.device)[:, None], self._sensed(), self.sensordata))

    def reset(self, mask: Tensor | None = None) -> None:
        """Return the worlds where ``mask [N]`` is True (all when None) to the model's initial
        state: ``qpos`` at each joint's ``ref``, zero velocity, control, time and sensors."""
        if mask is None:
            mask = torch.ones(self.num_worlds, dtype=torch.bool, device=self.device)
        rows = mask.to(self.device)[:, None]
        self.qpos.copy_(torch.where(rows, self._qpos0, self.qpos))
        for x in (self.qvel, self.ctrl, self.sensordata):
            x.masked_fill_(rows, 0.0)
        self.time.masked_fill_(rows[:, 0], 0.0)

    def __repr__(self) -> str:
        return f"PointMassEngine(num_worlds={self.num_worlds}, nv={self.qpos.shape[1]}, device={self.device})"
