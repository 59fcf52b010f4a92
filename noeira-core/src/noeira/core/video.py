"""``noeira eval RUN_DIR --video out.mp4``: one deterministic episode of a trained policy,
rendered frame by frame (``env.render()``, uint8 ``[N, H, W, 3]``) and written with imageio.

imageio is an optional extra: ``pip install 'noeira-core[video]'`` (imageio and
imageio-ffmpeg). A ``.gif`` needs only imageio (and Pillow); ``.mp4`` and other video
formats need imageio-ffmpeg. An env without ``render()`` is a one-line error.

The episode is env 0 of an env built with one env, seeded as the run's final evaluation;
the policy acts deterministically, carrying its state. The video holds one frame per step
of the episode: the state each action was chosen in (the first is the reset state). The
state an episode ends in is not shown: the env resets it within the step that ends it.
Frames smaller than 128 pixels grow by a whole factor (nearest pixel). A GIF may hold fewer
frames than were rendered: Pillow merges identical consecutive frames, adding up their durations.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from noeira.core import contracts
from noeira.core.errors import UserError

__all__ = ["EXTRA", "record_video", "write_video"]

EXTRA = "noeira-core[video]"
"""The extra that installs what writing a video needs."""


def _imageio() -> Any:
    try:
        import imageio.v3 as iio
    except ImportError:
        raise UserError(f"--video needs imageio: pip install '{EXTRA}'") from None
    return iio


def _check_writer(path: Path) -> None:
    """Fail before any work when the file cannot be written: no imageio, no ffmpeg for a video format."""
    _imageio()
    if path.suffix.lower() == ".gif":
        try:
            import PIL  # noqa: F401  (imageio writes GIFs through Pillow)
        except ImportError:
            raise UserError(f"--video {path.name}: writing a GIF needs Pillow: pip install '{EXTRA}'") from None
        return
    if not path.suffix:
        raise UserError(f"--video {path}: name a file with an extension (.mp4, .gif, ...)")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise UserError(f"--video {path.name}: writing {path.suffix} needs imageio-ffmpeg: "
                        f"pip install '{EXTRA}' (or write a .gif)") from None


def write_video(path: str | Path, frames: Any, fps: float) -> None:
    """Write ``frames`` (``[T, H, W, 3]`` uint8, numpy or torch) to ``path``; the format
    follows the extension (``.gif`` through Pillow, ``.mp4`` and the rest through ffmpeg)."""
    p = Path(path)
    _check_writer(p)
    iio = _imageio()
    if isinstance(frames, torch.Tensor):
        frames = frames.cpu().numpy()
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() == ".gif":
        iio.imwrite(p, frames, plugin="pillow", duration=1000.0 / fps, loop=0)
    else:
        # macro_block_size=2: ffmpeg's yuv420p needs even sides, and the frames are not resized otherwise
        iio.imwrite(p, frames, plugin="FFMPEG", fps=fps, macro_block_size=2)


@torch.no_grad()
def record_video(run_dir: str | Path, path: str | Path, *, backend: str | None = None, fps: float | None = None,
                 max_frames: int | None = None) -> dict[str, Any]:
    """Render one deterministic episode of a run's checkpoint to ``path``; returns
    ``{"path", "frames", "fps", "episode_return", "size"}``."""
    from noeira.core.driver import load_run

    out = Path(path)
    _check_writer(out)  # no imageio or ffmpeg: say so before loading anything
    if max_frames is not None and max_frames < 1:
        raise UserError(f"--video-frames: must be >= 1, got {max_frames}")
    if fps is not None and fps <= 0:
        raise UserError(f"--fps: must be > 0, got {fps}")
    if sys.platform.startswith("linux") and "mujoco" not in sys.modules:
        os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen without a display (MuJoCo reads it on import)
    # the agent is built before anything renders: its imports (torch.compile's Triton) must come
    # before an OpenGL library (Mesa's LLVM) is loaded into the process, or loading Triton crashes
    run = load_run(run_dir, num_envs=1, backend=backend)
    env, agent, cfg, seed = run.env, run.agent, run.cfg, run.seed
    try:
        obs = env.reset(seed=seed)
        try:
            frame = contracts.render(env)
        except NotImplementedError:
            raise UserError(f"--video: env {cfg.env.name!r} cannot render frames (it has no render(); the classic-control, "
                            "MuJoCo and Craftax envs can)") from None
        state, done = agent.initial_state(1), torch.ones(1, dtype=torch.bool, device=env.device)
        limit = max_frames or env.max_episode_steps or 100_000
        frames, episode_return = [], 0.0
        for _ in range(limit):
            frames.append(frame[0].to("cpu", torch.uint8).numpy())
            action, state = agent.act(obs, state, done, deterministic=True)
            result = env.step(action)
            episode_return += float(result.reward[0])
            done = result.terminated | result.truncated
            if bool(done[0]):
                break
            obs = result.obs
            frame = contracts.render(env)
        rate = float(fps or contracts.render_fps(env) or 30.0)
    finally:
        env.close()
    h, w = frames[0].shape[:2]
    k = max(1, 256 // max(h, w))  # small frames (Craftax's 56 x 72) grow by whole pixels, nearest
    if k > 1:
        frames = [f.repeat(k, 0).repeat(k, 1) for f in frames]
        h, w = h * k, w * k
    write_video(out, frames, rate)
    return {"path": str(out), "frames": len(frames), "fps": rate, "episode_return": episode_return, "size": [h, w]}
