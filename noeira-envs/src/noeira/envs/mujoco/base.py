"""The base of the MuJoCo envs: gymnasium's ``MujocoEnv`` for ``N`` worlds on a physics engine.

The engine is asked for by name (``physics=mujoco`` on CPU threads, ``mujoco-warp`` on
the GPU), so this package never imports ``noeira.physics``. The model is gymnasium's own
MJCF file, read from the installed gymnasium package. As gymnasium's envs do, an action
is written to ``ctrl`` unclipped (MuJoCo clamps it to ``ctrlrange``; the control cost
sees the raw action), the step runs ``frame_skip`` substeps (``dt = timestep *
frame_skip``), and quantities read after it (body positions, contact forces) are those
``mj_step`` leaves, computed before the last substep. Reset: ``mj_resetData``, then
``qpos0`` and zero velocities plus noise, then ``mj_forward``.

Shared here: the control cost ``|a|^2`` (``sumsq``), gymnasium's usual reset noise
(``MujocoEnv.qvel_noise``) and the episode statistics of the reward's terms: an env names
the terms gymnasium's ``info`` reports (``reward_terms``: ``reward_forward``, ``reward_ctrl``,
``reward_survive``, ``reward_contact``...), hands their values to :meth:`MujocoEnv._add_terms`
in each step, and the driver logs each term's per-episode sum as ``episode_<term>`` beside
``episode_return`` (plus ``end_values``, read where an episode ends: the x position reached).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, StepResult, TensorEnv, contracts, make_physics
from noeira.core.errors import ConfigError, UserError

__all__ = ["MujocoConfig", "MujocoEnv", "asset_path", "sumsq"]


def sumsq(x: Tensor) -> Tensor:
    """``[N, ...] -> [N]`` sum of squares over all but the first dim (the control cost
    ``|a|^2``, the contact cost ``|cfrc_ext|^2``); one reduction, no ``[N, ...]`` temporary
    of squares (at 32k worlds a contact-force temporary is 22 MB of fresh pages a step)."""
    return torch.linalg.vector_norm(x.flatten(1), dim=1).square()


def asset_path(xml_file: str) -> str:
    """A model path: absolute / ``~`` / ``./`` paths as given, else a file of gymnasium's
    ``envs/mujoco/assets`` (read from the installed gymnasium, not copied here)."""
    if xml_file.startswith(("/", ".", "~")):
        return os.path.expanduser(xml_file)
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "the MuJoCo envs load gymnasium's model files: pip install 'noeira-envs[mujoco]'"
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], "envs", "mujoco", "assets", xml_file)
    if not os.path.exists(path):
        raise ConfigError(f"env.xml_file: gymnasium has no model {xml_file!r} ({path})")
    return path


@attrs.frozen
class MujocoConfig:
    """Keys every MuJoCo env has."""

    physics: str = "mujoco"
    """Physics engine (registry name): mujoco (CPU threads) | mujoco-warp (GPU)."""
    physics_options: dict[str, Any] = attrs.field(factory=dict)
    """Config keys of the physics engine (e.g. {nthread = 8} for mujoco)."""
    dtype: str = "float32"
    """Observation and reward dtype: float32 | float64 (the physics keeps its own)."""
    max_episode_steps: int = 1000
    """Truncation step limit."""
    torch_threads: int = 1
    """Engines on the CPU: torch threads for the env's own tensor math in step, reset and
    set_state, the caller's setting restored after (0: leave torch's setting). One by
    default: after a parallel op torch's idle threads spin for milliseconds, on the cores
    where the engine's threads or processes then step the worlds, and the math per step is
    small next to the physics."""


_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class MujocoEnv(TensorEnv):
    """``num_envs`` worlds of one MJCF model. Subclasses set ``obs_dim`` (from the model),
    and write ``_observation_parts()``, ``_advance(action)`` and, unless the default noise with
    ``config.reset_noise_scale`` fits (see ``qvel_noise``), ``_reset_state()``.

    ``physics`` is the engine; its tensors (``qpos [N, nq]``, ``qvel [N, nv]`` and the
    derived fields named in ``fields``) live on ``physics.device`` in ``physics.dtype``,
    where every computation here runs; results are copied into the env's buffers.
    """

    fields: tuple[str, ...] = ()
    """Derived ``MjData`` fields the env reads (they then get computed at reset)."""
    rne_post_constraint: bool = False
    """The env reads ``cfrc_ext``: run ``mj_rnePostConstraint`` after each step."""
    qvel_noise: Literal["uniform", "normal"] = "uniform"
    """Reset velocity noise of the default ``_reset_state``: ``U(-s, s)`` or ``s * N(0, 1)``."""
    resume_caveat = ("its checkpoint holds qpos and qvel, not the rest of MuJoCo's MjData (the solver's warm start "
                     "qacc_warmstart, which the physics engines do not expose), so the physics after a resume differs "
                     "slightly from the run left alone")
    reward_terms: tuple[str, ...] = ()
    """The reward's terms, named as gymnasium's ``info`` names them (costs negative, so they sum to
    the reward): each step's values go to :meth:`_add_terms`, each episode's sums to the driver's
    metrics (``episode_<term>``)."""
    end_values: tuple[str, ...] = ()
    """Values read where an episode ends (``x_position``: how far it got), from :meth:`_end_values`."""

    def __init__(self, config: Any, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        if config.dtype not in _DTYPES:
            raise ConfigError(f"env.dtype: expected float32 or float64, got {config.dtype!r}")
        if config.max_episode_steps < 1:
            raise ConfigError(f"env.max_episode_steps: must be >= 1, got {config.max_episode_steps}")
        if getattr(config, "frame_skip", 1) < 1:
            raise ConfigError(f"env.frame_skip: must be >= 1, got {config.frame_skip}")
        if config.torch_threads < 0:
            raise ConfigError(f"env.torch_threads: must be >= 0, got {config.torch_threads}")
        self.config = config
        options = dict(config.physics_options)
        if self.rne_post_constraint:
            options["rne_post_constraint"] = True
        self.physics = make_physics(config.physics, asset_path(config.xml_file), num_worlds=num_envs,
                                    backend=backend, **options)
        p = self.physics
        self.model = p.mj_model
        self.frame_skip = config.frame_skip
        self.dt = float(self.model.opt.timestep) * self.frame_skip
        self._f = {name: p.field(name) for name in self.fields}
        self.init_qpos = torch.as_tensor(self.model.qpos0, device=p.device).to(p.dtype)
        self.init_qvel = torch.zeros(self.model.nv, dtype=p.dtype, device=p.device)
        dtype, dev = _DTYPES[config.dtype], backend.device
        ctrlrange = torch.as_tensor(self.model.actuator_ctrlrange).to(torch.float32)  # gymnasium's bounds
        super().__init__(
            num_envs,
            backend,
            observation_space=Box(-math.inf, math.inf, shape=(self.obs_dim,), dtype=dtype, device=dev),
            action_space=Box(ctrlrange[:, 0], ctrlrange[:, 1], dtype=dtype, device=dev),
            max_episode_steps=config.max_episode_steps,
            seed=seed,
            capture_safe=contracts.physics_capture_safe(p),
            dtype=dtype,
        )
        self.episode_terms = torch.zeros((num_envs, len(self.reward_terms)), dtype=p.dtype, device=p.device)
        """Each env's running sums of ``reward_terms`` over its episode ``[N, k]`` (zeroed at its reset)."""

    # -- what subclasses write -------------------------------------------------------------
    @property
    def obs_dim(self) -> int:
        raise NotImplementedError

    def _observation_parts(self) -> list[Tensor]:
        """The observation as ``[N, k_i]`` pieces on the physics device, in order along the
        feature dim (``sum k_i = obs_dim``); each is written straight into its slice of the
        env's buffer, converting the dtype on the way, with no concatenated copy between."""
        raise NotImplementedError

    def _reset_state(self) -> tuple[Tensor, Tensor]:
        """Fresh ``qpos [N, nq]``, ``qvel [N, nv]`` for every world (only the resetting
        ones are used). By default gymnasium's usual noise, ``s = config.reset_noise_scale``:
        ``qpos0 + U(-s, s)``, then zero velocities plus ``U(-s, s)`` or ``s * N(0, 1)``
        (``qvel_noise``), drawn in that order from the env's generator."""
        s, m = self.config.reset_noise_scale, self.model
        qpos = self.init_qpos + self._uniform(-s, s, m.nq)
        noise = self._normal(s, m.nv) if self.qvel_noise == "normal" else self._uniform(-s, s, m.nv)
        return qpos, self.init_qvel + noise

    def _end_values(self) -> dict[str, Tensor]:
        """``{name: [N]}`` for each of ``end_values``, from the state after the step."""
        return {}

    # -- helpers -----------------------------------------------------------------------
    def _add_terms(self, *terms: Tensor) -> None:
        """Add this step's reward terms (``[N]`` each, in ``reward_terms``' order) to the episode sums."""
        self.episode_terms.add_(torch.stack(terms, dim=1))

    @property
    def episode_stat_keys(self) -> tuple[str, ...]:  # type: ignore[override]
        """The driver's per-episode statistics: the reward's terms, then the end values."""
        return self.reward_terms + self.end_values

    def _episode_values(self) -> dict[str, Tensor]:
        values = {k: self.episode_terms[:, i] for i, k in enumerate(self.reward_terms)}
        values.update(self._end_values())
        return {k: v.to(self.device) for k, v in values.items()}

    def _uniform(self, low: float, high: float, n: int) -> Tensor:
        """``[N, n]`` uniform in ``[low, high)`` from the env's generator."""
        u = torch.rand((self.num_envs, n), generator=self.generator, device=self.device, dtype=torch.float64)
        return (low + (high - low) * u).to(self.physics.device, self.physics.dtype)

    def _normal(self, scale: float, n: int) -> Tensor:
        """``[N, n]`` normal with std ``scale`` from the env's generator."""
        z = torch.randn((self.num_envs, n), generator=self.generator, device=self.device, dtype=torch.float64)
        return (scale * z).to(self.physics.device, self.physics.dtype)

    def _finite(self) -> Tensor:
        """``[N]`` True where the state (``qpos``, ``qvel``) is all finite."""
        p = self.physics
        return torch.isfinite(p.qpos).all(dim=1) & torch.isfinite(p.qvel).all(dim=1)

    def _simulate(self, action: Tensor) -> Tensor:
        """Write ``action`` to ``ctrl`` and run ``frame_skip`` substeps; returns the action
        on the physics device and dtype, for the control cost."""
        p = self.physics
        a = action.to(p.device, p.dtype)
        p.ctrl.copy_(a)
        p.step(self.frame_skip)
        return a

    @contextlib.contextmanager
    def _math_threads(self) -> Iterator[None]:
        """``config.torch_threads`` torch threads inside, on a CPU engine; the caller's
        setting is restored after."""
        before, want = torch.get_num_threads(), self.config.torch_threads
        if want == 0 or want == before or self.physics.device.type != "cpu":
            yield
            return
        torch.set_num_threads(want)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    # -- TensorEnv ---------------------------------------------------------------------
    def step(self, action: Tensor) -> StepResult:
        with self._math_threads():
            return super().step(action)

    def reset(self, seed: int | None = None) -> Tensor:
        with self._math_threads():
            return super().reset(seed)

    def set_state(self, state: Tensor) -> None:
        with self._math_threads():
            super().set_state(state)

    def _reset_envs(self, mask: Tensor) -> None:
        p = self.physics
        m = mask.to(p.device)
        self.episode_terms.masked_fill_(m[:, None], 0)  # the episode's sums were read before its reset
        if not self.capture_safe and not bool(m.any()):
            return  # the step syncs with the host anyway: skip the no-op reset of most steps
        qpos, qvel = self._reset_state()
        p.reset(m)
        p.qpos.copy_(torch.where(m[:, None], qpos, p.qpos))
        p.qvel.copy_(torch.where(m[:, None], qvel, p.qvel))
        if self.fields:  # nothing derived is read otherwise: the next step computes it all
            p.forward(m)

    def _observe(self, out: Tensor) -> None:
        start = 0
        for part in self._observation_parts():
            out[:, start:start + part.shape[1]].copy_(part)
            start += part.shape[1]

    def get_state(self) -> Tensor:
        """``[N, nq + nv]``: ``concat(qpos, qvel)`` per env, as gymnasium's ``state_vector()``."""
        return torch.cat([self.physics.qpos, self.physics.qvel], dim=1).to(self.device)

    def _set_state(self, state: Tensor) -> None:
        p, nq = self.physics, self.model.nq
        state = state.to(p.device, p.dtype)
        p.qpos.copy_(state[:, :nq])
        p.qvel.copy_(state[:, nq:])
        p.forward()  # as gymnasium's set_state: mj_forward

    # -- render ----------------------------------------------------------------------------
    render_size: tuple[int, int] = (480, 480)
    """Frame height and width of :meth:`render`."""
    render_camera: Mapping[str, Any] = MappingProxyType({})
    """The camera (``distance``, ``azimuth``, ``elevation``, ``lookat``; see
    :class:`noeira.envs.mujoco.render.OffscreenRenderer`): by default the model's centre, from the side."""
    render_track_body: int | None = None
    _renderer: Any = None  # made by the first render()
    """A body the camera follows (the root of a walking model), or None for a fixed camera."""

    @property
    def render_fps(self) -> float:
        """One frame per env step (gymnasium's ``1 / dt``)."""
        return 1.0 / self.dt

    def render(self) -> Tensor:
        """RGB frames of every world ``[N, H, W, 3]`` uint8, rendered offscreen by MuJoCo from
        each world's ``qpos`` (one world after another: render a few). Needs an OpenGL context
        without a display: ``MUJOCO_GL=egl`` or ``osmesa`` (see :mod:`noeira.envs.mujoco.render`)."""
        renderer = self._renderer
        if renderer is None:
            from noeira.envs.mujoco.render import OffscreenRenderer

            renderer = self._renderer = OffscreenRenderer(self.model, *self.render_size, camera=self.render_camera,
                                                          track_body=self.render_track_body)
        qpos = self.physics.qpos.detach().to("cpu", torch.float64).numpy()
        return torch.from_numpy(renderer.render(qpos))

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        contracts.close_physics(self.physics)
