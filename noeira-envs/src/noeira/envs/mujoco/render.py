"""Offscreen frames of MuJoCo worlds: ``mujoco.Renderer`` on one ``MjData``, posed from each
world's ``qpos`` in turn (so any engine renders, the GPU one included).

MuJoCo picks its OpenGL platform from ``MUJOCO_GL`` when it is first imported: ``egl`` (a
GPU, or Mesa's software EGL) or ``osmesa`` (Mesa on the CPU) render without a display;
the default (GLFW) needs one. ``noeira eval --video`` sets ``MUJOCO_GL=egl`` when it is unset
on Linux; a context that cannot be made is a one-line error naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from noeira.core.errors import UserError

__all__ = ["OffscreenRenderer"]


class OffscreenRenderer:
    """Frames ``[k, height, width, 3]`` uint8 of ``model`` posed at ``qpos [k, nq]``.

    ``camera``: ``distance``, ``azimuth``, ``elevation`` (degrees) and ``lookat`` of MuJoCo's
    free camera; ``track_body`` (a body id) makes it a tracking camera that follows that body.
    Distance defaults to 1.5 x the model's extent and lookat to the model's centre."""

    def __init__(self, model: Any, height: int, width: int, camera: Mapping[str, Any] | None = None,
                 track_body: int | None = None) -> None:
        import mujoco

        self._mj = mujoco
        self.model = model
        self.data = mujoco.MjData(model)
        # the offscreen buffer must hold the frame
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
        try:
            self.renderer = mujoco.Renderer(model, height, width)
        except Exception as err:  # no OpenGL context: GLFW without a display, EGL/OSMesa missing
            gl = os.environ.get("MUJOCO_GL", "") or "unset (GLFW)"
            raise UserError(
                f"MuJoCo cannot render offscreen with MUJOCO_GL={gl} ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}); set MUJOCO_GL=egl (GPU or Mesa EGL) "
                "or MUJOCO_GL=osmesa (CPU, needs libOSMesa) before starting"
            ) from None
        cam = mujoco.MjvCamera()
        mujoco.mjv_defaultFreeCamera(model, cam)
        camera = dict(camera or {})
        cam.distance = float(camera.get("distance", 1.5 * model.stat.extent))
        cam.azimuth = float(camera.get("azimuth", 90.0))
        cam.elevation = float(camera.get("elevation", -20.0))
        cam.lookat[:] = camera.get("lookat", model.stat.center)
        if track_body is not None:
            cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            cam.trackbodyid = track_body
        self.camera = cam

    def render(self, qpos: np.ndarray) -> np.ndarray:
        mj, m, d = self._mj, self.model, self.data
        frames = []
        for q in np.atleast_2d(qpos):
            d.qpos[:] = q
            d.qvel[:] = 0
            mj.mj_forward(m, d)
            self.renderer.update_scene(d, camera=self.camera)
            frames.append(self.renderer.render().copy())
        return np.stack(frames)

    def close(self) -> None:
        self.renderer.close()
