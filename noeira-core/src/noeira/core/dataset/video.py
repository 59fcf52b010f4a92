"""Camera frames in MP4 files, through PyAV (FFmpeg): encode an episode, append it to a file
without re-encoding, decode frames by timestamp.

Frames are stored as LeRobot stores them: ``yuv420p``, a key frame every ``g = 2`` frames (so a
random read decodes at most one frame it does not return), ``libsvtav1`` (AV1) at ``crf 30``
by default; ``libx264`` and any other FFmpeg encoder work too. Frame ``i`` of an episode has
the presentation time ``i / fps``; an episode appended to a file starts where the file's
previous episodes end (its ``from_timestamp``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from noeira.core.dataset.format import DatasetError, require

__all__ = ["DEFAULT_CODEC", "concatenate", "decode", "duration", "encode", "video_info"]

DEFAULT_CODEC = "libsvtav1"
"""LeRobot's default encoder (AV1)."""
_SVT_PRESET = 12
"""libsvtav1's speed preset (0 slowest ... 13 fastest); LeRobot's default."""


def _av() -> Any:
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its banner on every encoder unless told: errors only
    av = require("av")
    logging.getLogger("libav").setLevel(logging.ERROR)
    return av


def codec_options(codec: str, crf: int, g: int) -> dict[str, str]:
    """LeRobot's options for an encoder: the key frame interval ``g``, the quality ``crf``."""
    opts = {"g": str(g), "crf": str(crf)}
    if codec == "libsvtav1":
        opts["preset"] = str(_SVT_PRESET)
    return opts


def encode(path: str | Path, frames: np.ndarray, fps: int, codec: str = DEFAULT_CODEC, crf: int = 30,
           g: int = 2, pix_fmt: str = "yuv420p") -> None:
    """Write ``frames`` (``[T, H, W, 3]`` uint8 RGB) to a new MP4 at ``path``, frame ``i`` at ``i / fps`` s."""
    av = _av()
    frames = np.ascontiguousarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise DatasetError(f"video frames must be [T, H, W, 3] uint8, got {frames.dtype} {list(frames.shape)}")
    if codec not in av.codecs_available:
        raise DatasetError(f"video codec {codec!r} is not in this FFmpeg build (PyAV {av.__version__})")
    with av.open(str(path), mode="w", format="mp4") as out:
        stream = out.add_stream(codec, rate=fps, options=codec_options(codec, crf, g))
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = pix_fmt
        stream.time_base = Fraction(1, fps)
        for i, img in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            frame.time_base = Fraction(1, fps)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def duration(path: str | Path) -> float:
    """The video stream's length in seconds (what the next appended episode's ``from_timestamp`` is)."""
    av = _av()
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        if s.duration is not None:
            return float(s.duration * s.time_base)
        return float(c.duration / av.time_base)


def concatenate(inputs: Sequence[str | Path], output: str | Path) -> None:
    """``inputs`` (same codec, size and rate) one after another in ``output``, packets copied
    (no re-encoding); ``output`` is replaced atomically and may be one of the inputs."""
    av = _av()
    output = Path(output)
    with tempfile.NamedTemporaryFile("w", suffix=".ffconcat", delete=False, dir=output.parent) as listing:
        listing.write("ffconcat version 1.0\n")
        for p in inputs:
            listing.write(f"file '{Path(p).resolve()}'\n")
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}.mp4")
    try:
        with av.open(listing.name, mode="r", format="concat", options={"safe": "0"}) as src, \
                av.open(str(tmp), mode="w", format="mp4") as dst:
            streams = {}
            for s in src.streams.video:
                streams[s.index] = dst.add_stream_from_template(template=s, opaque=True)
                streams[s.index].time_base = s.time_base
            for packet in src.demux():
                if packet.stream.index not in streams or packet.dts is None:
                    continue
                packet.stream = streams[packet.stream.index]
                dst.mux(packet)
        os.replace(tmp, output)
    finally:
        Path(listing.name).unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def video_info(path: str | Path, codec_name: str | None = None, crf: int | None = None, g: int | None = None) -> dict[str, Any]:
    """The ``info`` block of a video feature in ``info.json`` (LeRobot's keys)."""
    av = _av()
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        info: dict[str, Any] = {
            "video.height": s.height, "video.width": s.width, "video.codec": s.codec_context.codec.canonical_name,
            "video.pix_fmt": s.pix_fmt, "video.is_depth_map": False, "video.fps": int(s.base_rate or s.average_rate),
            "video.channels": 3, "has_audio": bool(c.streams.audio),
        }
    if g is not None:
        info["video.g"] = g
    if crf is not None:
        info["video.crf"] = crf
    return info


def decode(path: str | Path, timestamps: Sequence[float], tolerance_s: float = 1e-4) -> np.ndarray:
    """The frames shown at ``timestamps`` (seconds in the file), ``[n, 3, H, W]`` uint8: seek to
    the key frame at or before the first, decode forward past the last, and pick for each the
    decoded frame nearest in time; one further than ``tolerance_s`` is a :class:`DatasetError`."""
    av = _av()
    if len(timestamps) == 0:
        raise DatasetError(f"{path}: no timestamps to decode")
    first, last = min(timestamps), max(timestamps)
    got: list[np.ndarray] = []
    times: list[float] = []
    try:
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            c.seek(max(0, round(first / s.time_base) - 1), backward=True, any_frame=False, stream=s)
            for frame in c.decode(s):
                if frame.pts is None:
                    continue
                t = float(frame.pts * s.time_base)
                if t < first - tolerance_s and times and times[-1] < first - tolerance_s:
                    got.pop(), times.pop()  # frames before the window are never returned
                got.append(frame.to_ndarray(format="rgb24"))
                times.append(t)
                if t >= last:
                    break
    except (OSError, av.error.FFmpegError) as err:
        raise DatasetError(f"{path}: cannot decode ({err})") from None
    if not got:
        raise DatasetError(f"{path}: no frame between {first:.4f} s and {last:.4f} s")
    loaded = np.asarray(times)
    out = []
    for ts in timestamps:
        i = int(np.argmin(np.abs(loaded - ts)))
        if abs(loaded[i] - ts) > tolerance_s:
            raise DatasetError(f"{path}: no frame within {tolerance_s} s of {ts:.4f} s (nearest {loaded[i]:.4f} s)")
        out.append(got[i])
    return np.stack(out).transpose(0, 3, 1, 2).copy()


def decode_all(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Every frame of a file, ``([T, 3, H, W] uint8, [T] timestamps in seconds)``."""
    av = _av()
    frames, times = [], []
    try:
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            for frame in c.decode(s):
                if frame.pts is None:
                    continue
                frames.append(frame.to_ndarray(format="rgb24"))
                times.append(float(frame.pts * s.time_base))
    except (OSError, av.error.FFmpegError) as err:
        raise DatasetError(f"{path}: cannot decode ({err})") from None
    if not frames:
        return np.zeros((0, 3, 0, 0), np.uint8), np.zeros(0)
    return np.stack(frames).transpose(0, 3, 1, 2).copy(), np.asarray(times)


def check_codec(codec: str) -> None:
    av = _av()
    with contextlib.suppress(Exception):
        if codec in av.codecs_available and av.Codec(codec, "w"):
            return
    raise DatasetError(f"video codec {codec!r} cannot encode in this FFmpeg build (PyAV {av.__version__}); "
                       "try libx264 or libsvtav1")
