"""The LeRobot v3 dataset layout: paths, features, the Arrow schema of a data file, statistics.

A dataset is a directory::

    meta/info.json                                  codebase_version "v3.0", fps, features, path templates, sizes
    meta/stats.json                                 per-feature min/max/mean/std/count/q01..q99 over every frame
    meta/tasks.parquet                              task (the pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet        one row per episode: its length, tasks, where its rows and
                                                    video frames are, its own statistics (stats/<feature>/<stat>)
    data/chunk-000/file-000.parquet                 one row per frame, many episodes per file
    videos/<camera>/chunk-000/file-000.mp4          one camera's frames, many episodes per file

Every frame row carries ``timestamp`` (``frame_index / fps``, seconds from the episode's start),
``frame_index`` (within its episode), ``episode_index``, ``index`` (within the dataset) and
``task_index``. A feature of shape ``(1,)`` is a scalar column, ``(n,)`` a fixed-size list of
``n``; ``video`` features live in the MP4 files, found through the episode's
``videos/<key>/from_timestamp`` (the episode's first frame in its file).

This module needs numpy only; pyarrow is imported by the functions that build Arrow types.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from noeira.core.errors import UserError
from noeira.core.files import atomic_write

__all__ = [
    "CODEBASE_VERSION",
    "DATA_PATH",
    "DEFAULT_FEATURES",
    "EPISODES_PATH",
    "EXTRA",
    "INFO_PATH",
    "QUANTILES",
    "STATS_PATH",
    "TASKS_PATH",
    "VIDEO_PATH",
    "DatasetError",
    "aggregate_stats",
    "arrow_type",
    "check_features",
    "feature_stats",
    "next_file",
    "require",
]

EXTRA = "noeira-core[data]"
"""The extra that installs what datasets need (pyarrow; PyAV for video)."""

CODEBASE_VERSION = "v3.0"
DEFAULT_CHUNK_SIZE = 1000
"""Files per chunk directory."""
DEFAULT_DATA_FILE_SIZE_IN_MB = 100
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"

DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
"""The columns every frame has, filled in by the writer (LeRobot's own list)."""

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
"""The quantiles ``stats.json`` holds (``q01`` ... ``q99``), as LeRobot's."""

_NUMERIC = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool")


class DatasetError(UserError):
    """A dataset that cannot be read or written as asked (missing file, bad feature, ...)."""


def require(module: str) -> Any:
    """Import ``pyarrow`` / ``av`` or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        what = "PyAV (video)" if module.startswith("av") else "pyarrow"
        raise DatasetError(f"datasets need {what}: pip install '{EXTRA}'") from None


def check_features(features: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The user's features (without the default columns), validated and normalised
    (``shape`` a list of ints, ``names`` present). Raises :class:`DatasetError`."""
    out: dict[str, dict[str, Any]] = {}
    for key, ft in features.items():
        if key in DEFAULT_FEATURES:
            raise DatasetError(f"feature {key!r}: the writer fills this column itself")
        if "/" in key:
            raise DatasetError(f"feature {key!r}: names may not contain '/'")
        dtype, shape = ft.get("dtype"), ft.get("shape")
        if dtype not in (*_NUMERIC, "video", "string"):
            raise DatasetError(f"feature {key!r}: dtype {dtype!r} is not supported "
                               f"(one of {', '.join(_NUMERIC)}, video, string)")
        if not isinstance(shape, (list, tuple)) or not shape or not all(isinstance(s, int) and s > 0 for s in shape):
            raise DatasetError(f"feature {key!r}: shape must be a list of positive integers, got {shape!r}")
        if dtype == "video" and (len(shape) != 3 or 3 not in (shape[0], shape[2])):
            raise DatasetError(f"feature {key!r}: a video is [height, width, 3] (or [3, height, width]), "
                               f"got {list(shape)}")
        if dtype not in ("video",) and len(shape) != 1:
            raise DatasetError(f"feature {key!r}: shape {list(shape)}: only vectors (n,) and videos are written")
        entry = {"dtype": dtype, "shape": list(shape), "names": ft.get("names")}
        if "info" in ft:
            entry["info"] = dict(ft["info"])
        out[key] = entry
    return out


def arrow_type(feature: Mapping[str, Any]) -> Any:
    """The Arrow type of a feature's column: a scalar for shape ``(1,)``, a fixed-size list for ``(n,)``."""
    pa = require("pyarrow")
    dtype = feature["dtype"]
    item = pa.string() if dtype == "string" else pa.bool_() if dtype == "bool" else pa.from_numpy_dtype(np.dtype(dtype))
    shape = list(feature["shape"])
    if shape == [1]:
        return item
    for n in reversed(shape):
        item = pa.list_(item, n)
    return item


def hf_features(features: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The ``huggingface`` schema metadata of a data file (what HF ``datasets`` writes), so
    ``datasets.load_dataset("parquet", ...)`` restores the same feature types."""
    out: dict[str, Any] = {}
    for key, ft in features.items():
        if ft["dtype"] == "video":
            continue
        value = {"dtype": ft["dtype"], "_type": "Value"}
        out[key] = value if list(ft["shape"]) == [1] else {"feature": value, "length": ft["shape"][0], "_type": "Sequence"}
    return {"info": {"features": out}}


def video_hw(feature: Mapping[str, Any]) -> tuple[int, int]:
    """``(height, width)`` of a video feature, whichever layout its shape is in: LeRobot's
    recorders write ``[height, width, 3]``, older datasets ``[3, height, width]``."""
    shape = list(feature["shape"])
    names = [str(n).lower() for n in feature.get("names") or []]
    channels_first = names[:1] in (["channels"], ["channel"], ["c"]) or (shape[0] == 3 and shape[2] != 3)
    return (shape[1], shape[2]) if channels_first else (shape[0], shape[1])


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The file after ``(chunk, file)``: a chunk holds ``chunks_size`` files."""
    return (chunk_index + 1, 0) if file_index >= chunks_size - 1 else (chunk_index, file_index + 1)


# -- statistics ------------------------------------------------------------------------------

def feature_stats(values: np.ndarray, image: bool = False) -> dict[str, np.ndarray]:
    """LeRobot's per-feature statistics of one episode: ``min, max, mean, std, count`` and
    the quantiles ``q01 ... q99``. ``values`` is ``[T, d]`` (or ``[T]`` for a scalar column,
    whose statistics are then shape ``(1,)``); for ``image`` it is ``[T, 3, H, W]`` uint8 and
    the statistics are per channel, shape ``(3, 1, 1)``, in ``[0, 1]``."""
    x = np.asarray(values)
    if image:
        x = x.astype(np.float64) / 255.0
        flat = x.transpose(1, 0, 2, 3).reshape(x.shape[1], -1).T  # [T*H*W, 3]
        shape: tuple[int, ...] = (x.shape[1], 1, 1)
    else:
        flat = x.astype(np.float64).reshape(x.shape[0], -1)
        shape = (flat.shape[1],)
    stats = {
        "min": flat.min(0), "max": flat.max(0), "mean": flat.mean(0), "std": flat.std(0),
        "count": np.array([x.shape[0]], dtype=np.int64),
    }
    for q, v in zip(QUANTILES, np.quantile(flat, QUANTILES, axis=0), strict=True):
        stats[f"q{round(q * 100):02d}"] = v
    return {k: v if k == "count" else v.reshape(shape) for k, v in stats.items()}


def aggregate_stats(parts: list[Mapping[str, Mapping[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Statistics of the union of episodes from theirs: counts add up, means and variances
    combine exactly (the parallel formula), min and max are the extremes; quantiles can't be
    combined exactly, so the lower ones (<= q50) take the smallest and the upper the largest
    (LeRobot's envelope)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    keys = [k for part in parts for k in part]
    for key in dict.fromkeys(keys):
        group = [p[key] for p in parts if key in p]
        c = np.array([float(np.asarray(s["count"]).reshape(-1)[0]) for s in group])
        means = np.stack([np.asarray(s["mean"], dtype=np.float64) for s in group])
        var = np.stack([np.asarray(s["std"], dtype=np.float64) ** 2 for s in group])
        w = c.reshape(-1, *([1] * (means.ndim - 1)))
        total = c.sum()
        mean = (means * w).sum(0) / total
        agg = {"min": np.min(np.stack([s["min"] for s in group]), 0), "max": np.max(np.stack([s["max"] for s in group]), 0),
               "mean": mean, "std": np.sqrt(((var + (means - mean) ** 2) * w).sum(0) / total),
               "count": np.array([round(total)], dtype=np.int64)}
        for q in group[0]:
            if q.startswith("q") and q[1:].isdigit() and all(q in s for s in group):
                stack = np.stack([s[q] for s in group])
                agg[q] = stack.min(0) if int(q[1:]) <= 50 else stack.max(0)
        out[key] = agg
    return out


def stats_to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    return {k: {s: np.asarray(v).tolist() for s, v in st.items()} for k, st in stats.items()}


def stats_from_json(data: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    return {k: {s: np.asarray(v) for s, v in st.items()} for k, st in data.items()}


# -- small file helpers ----------------------------------------------------------------------

def write_json(path: Path, data: Any) -> None:
    atomic_write(path, lambda p: p.write_text(json.dumps(data, indent=4) + "\n"))


def is_finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
