"""Read a LeRobot v3 dataset, with LeRobot's semantics.

::

    from noeira.core.dataset import LeRobotDataset

    ds = LeRobotDataset("demos", delta_timestamps={"action": [i / 20 for i in range(10)]})
    item = ds[100]            # {"observation.state": [3], "action": [10, 1], "action_is_pad": [10], ...}
    ds.fps, ds.features, ds.num_episodes, len(ds), ds.stats

An item is frame ``idx`` of the selected episodes (in the order of their ``index``), as torch
tensors: each data column (a scalar column gives a 0-d tensor), each camera as float32
``[3, H, W]`` in ``[0, 1]``, and ``task`` (the string). ``delta_timestamps`` maps a feature to
offsets in seconds; each offset becomes ``round(offset * fps)`` frames, the frames at those
offsets are stacked (``[k, ...]``), and an offset that falls outside the frame's episode reads
the episode's first or last frame and is marked in ``<key>_is_pad`` (LeRobot's rule, which
is how ACT trains on action chunks that run past an episode's end). Video frames are looked up
by timestamp (the episode's ``from_timestamp`` in its file plus the frame's ``timestamp``)
within ``tolerance_s``.

Opening checks what training would trip on later: ``meta/info.json`` present and v3, every
file an episode names present, each episode's rows where the metadata says. A problem is a
one-line :class:`~noeira.core.dataset.format.DatasetError` (exit code 2 at the CLI).

For training on a whole dataset at once, :meth:`LeRobotDataset.column` and
:meth:`LeRobotDataset.video_frames` return every selected frame's values as arrays, and
:attr:`LeRobotDataset.frame_episode_end` where each frame's episode ends, so chunks can be
gathered on the device with the same clamping and padding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from noeira.core.dataset import format as fmt
from noeira.core.dataset.format import DatasetError, require

__all__ = ["LeRobotDataset", "delta_indices", "load_episodes", "load_info", "load_tasks"]


def load_info(root: str | Path) -> dict[str, Any]:
    """``meta/info.json``, checked: a v3 dataset with fps and features."""
    root = Path(root)
    path = root / fmt.INFO_PATH
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset directory")
    if not path.is_file():
        raise DatasetError(f"{root}: not a LeRobot dataset (no {fmt.INFO_PATH})")
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DatasetError(f"{path}: not readable JSON ({err})") from None
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v3."):
        hint = " (convert it with LeRobot's convert_dataset_v21_to_v30)" if version.startswith("v2") else ""
        raise DatasetError(f"{root}: codebase_version {version or 'missing'}, expected v3.x{hint}")
    for key in ("fps", "features", "data_path"):
        if key not in info:
            raise DatasetError(f"{path}: missing key {key!r}")
    if not isinstance(info["features"], dict) or not info["features"]:
        raise DatasetError(f"{path}: features must be a non-empty table")
    for key, ft in info["features"].items():
        if not isinstance(ft, dict) or "dtype" not in ft or "shape" not in ft:
            raise DatasetError(f"{path}: feature {key!r} needs dtype and shape")
    return info


def load_tasks(root: str | Path) -> list[str]:
    """The task strings, by ``task_index``."""
    pq = require("pyarrow.parquet")
    path = Path(root) / fmt.TASKS_PATH
    if not path.is_file():
        raise DatasetError(f"{root}: missing {fmt.TASKS_PATH}")
    table = pq.read_table(path)
    names = table.column("task" if "task" in table.column_names else "__index_level_0__").to_pylist()
    order = table.column("task_index").to_pylist()
    out = [""] * len(names)
    for name, i in zip(names, order, strict=True):
        out[i] = name
    return out


def load_episodes(root: str | Path, info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every episode's metadata row (``meta/episodes/*/*.parquet``), by episode index."""
    pq = require("pyarrow.parquet")
    root = Path(root)
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        if int(info.get("total_episodes", 0)) == 0:
            return []
        raise DatasetError(f"{root}: missing meta/episodes/ (info.json counts {info.get('total_episodes')} episodes)")
    rows: list[dict[str, Any]] = []
    for f in files:
        try:
            rows += pq.read_table(f).to_pylist()
        except Exception as err:  # a truncated or foreign file: name it
            raise DatasetError(f"{f}: not a readable Parquet file ({type(err).__name__})") from None
    rows.sort(key=lambda r: r["episode_index"])
    if [r["episode_index"] for r in rows] != list(range(len(rows))):
        raise DatasetError(f"{root}: episode indices in meta/episodes/ are not 0..{len(rows) - 1}")
    return rows


def delta_indices(delta_timestamps: Mapping[str, Sequence[float]], fps: int, tolerance_s: float) -> dict[str, list[int]]:
    """Offsets in seconds -> offsets in frames (``round(dt * fps)``); an offset further than
    ``tolerance_s`` from a whole frame is refused, as LeRobot does."""
    out: dict[str, list[int]] = {}
    for key, deltas in delta_timestamps.items():
        bad = [d for d in deltas if abs(d * fps - round(d * fps)) / fps > tolerance_s]
        if bad:
            raise DatasetError(f"delta_timestamps[{key!r}]: {bad} are not multiples of 1/{fps} s")
        out[key] = [round(d * fps) for d in deltas]
    return out


class LeRobotDataset:
    """A LeRobot v3 dataset on disk (see the module docstring). ``episodes`` selects episodes
    by index (default all); ``delta_timestamps`` stacks frames around each item."""

    def __init__(self, root: str | Path, *, episodes: Sequence[int] | None = None,
                 delta_timestamps: Mapping[str, Sequence[float]] | None = None, tolerance_s: float = 1e-4) -> None:
        self.root = Path(root)
        self.info = load_info(self.root)
        self.fps = int(self.info["fps"])
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.tolerance_s = tolerance_s
        self.episodes = load_episodes(self.root, self.info)
        self.tasks = load_tasks(self.root) if self.episodes else []
        stats_path = self.root / fmt.STATS_PATH
        self.stats = fmt.stats_from_json(json.loads(stats_path.read_text())) if stats_path.is_file() else {}
        chosen = list(range(len(self.episodes))) if episodes is None else [int(e) for e in episodes]
        for e in chosen:
            if not 0 <= e < len(self.episodes):
                raise DatasetError(f"{self.root}: no episode {e} (it has {len(self.episodes)})")
        self.selected = chosen
        self.delta_indices = None
        if delta_timestamps:
            unknown = [k for k in delta_timestamps if k not in self.features]
            if unknown:
                raise DatasetError(f"delta_timestamps: {', '.join(unknown)} not among the features "
                                   f"({', '.join(self.features)})")
            self.delta_indices = delta_indices(delta_timestamps, self.fps, tolerance_s)
        self._check_files()
        self._load_rows()

    # -- what it holds -------------------------------------------------------------------------
    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f["dtype"] == "video"]

    @property
    def num_episodes(self) -> int:
        return len(self.selected)

    @property
    def robot_type(self) -> str | None:
        return self.info.get("robot_type")

    def __len__(self) -> int:
        return int(self._index.shape[0])

    def __repr__(self) -> str:
        return (f"LeRobotDataset({str(self.root)!r}: {self.num_episodes} episodes, {len(self)} frames at {self.fps} fps, "
                f"features {', '.join(self.features)})")

    # -- opening ---------------------------------------------------------------------------------
    def _check_files(self) -> None:
        for e in self.selected:
            ep = self.episodes[e]
            for col in ("data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index", "length"):
                if col not in ep:
                    raise DatasetError(f"{self.root}: meta/episodes/ lacks column {col!r}")
            path = self._data_file(ep)
            if not path.is_file():
                raise DatasetError(f"{self.root}: missing {path.relative_to(self.root)} (episode {e})")
            for key in self.video_keys:
                if f"videos/{key}/chunk_index" not in ep:
                    raise DatasetError(f"{self.root}: episode {e} has no video entry for {key}")
                vpath = self._video_file(ep, key)
                if not vpath.is_file():
                    raise DatasetError(f"{self.root}: missing {vpath.relative_to(self.root)} (episode {e}, {key})")

    def _data_file(self, ep: Mapping[str, Any]) -> Path:
        return self.root / self.info["data_path"].format(chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"])

    def _video_file(self, ep: Mapping[str, Any], key: str) -> Path:
        template = self.info.get("video_path") or fmt.VIDEO_PATH
        return self.root / template.format(video_key=key, chunk_index=ep[f"videos/{key}/chunk_index"],
                                           file_index=ep[f"videos/{key}/file_index"])

    def _load_rows(self) -> None:
        """Read the data files of the selected episodes once; keep each column as a numpy array
        over the selected frames, ordered by ``index``."""
        pa = require("pyarrow")
        pq = require("pyarrow.parquet")
        keys = [k for k, f in self.features.items() if f["dtype"] not in ("video", "image")]
        by_file: dict[Path, list[int]] = {}
        for e in self.selected:
            by_file.setdefault(self._data_file(self.episodes[e]), []).append(e)
        wanted = np.zeros(0, dtype=np.int64)
        if self.selected:
            wanted = np.concatenate([np.arange(self.episodes[e]["dataset_from_index"], self.episodes[e]["dataset_to_index"])
                                     for e in sorted(self.selected, key=lambda e: self.episodes[e]["dataset_from_index"])])
        cols: dict[str, list[np.ndarray]] = {k: [] for k in keys}
        indices: list[np.ndarray] = []
        for path, eps in by_file.items():
            try:
                table = pq.read_table(path)
            except Exception as err:
                raise DatasetError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None
            missing = [k for k in keys if k not in table.column_names]
            if missing:
                raise DatasetError(f"{path}: lacks the column(s) {', '.join(missing)} that info.json declares")
            index = table.column("index").to_numpy()
            lo = np.concatenate([np.arange(self.episodes[e]["dataset_from_index"], self.episodes[e]["dataset_to_index"])
                                 for e in eps])
            rows = np.flatnonzero(np.isin(index, lo))
            if rows.shape[0] != lo.shape[0]:
                raise DatasetError(f"{path}: holds {rows.shape[0]} of the {lo.shape[0]} rows its episodes "
                                   f"{eps[0]}..{eps[-1]} should have")
            picked = table.take(pa.array(rows))
            indices.append(index[rows])
            for k in keys:
                cols[k].append(_column_numpy(picked.column(k), self.features[k]))
        index = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
        order = np.argsort(index, kind="stable")
        self._index = index[order]
        if not np.array_equal(self._index, wanted):
            raise DatasetError(f"{self.root}: the data files' index column does not match meta/episodes/")
        self._columns = {k: (np.concatenate(v)[order] if v else np.zeros(0)) for k, v in cols.items()}
        # each selected frame's episode bounds, as positions in this selection
        ep_of = self._columns["episode_index"].astype(np.int64).reshape(-1)
        self._pos_from = np.zeros(len(self), dtype=np.int64)
        self._pos_to = np.zeros(len(self), dtype=np.int64)
        for e in self.selected:
            ep = self.episodes[e]
            a = int(np.searchsorted(self._index, ep["dataset_from_index"]))
            b = a + int(ep["dataset_to_index"] - ep["dataset_from_index"])
            self._pos_from[a:b], self._pos_to[a:b] = a, b
            if not np.all(ep_of[a:b] == e):
                raise DatasetError(f"{self.root}: rows of episode {e} carry another episode_index")

    # -- bulk access (training) --------------------------------------------------------------
    def column(self, key: str) -> np.ndarray:
        """Every selected frame's value of a data column: ``[len, *shape]`` (``[len]`` for a scalar)."""
        if key not in self._columns:
            raise DatasetError(f"{self.root}: no data column {key!r} (columns: {', '.join(self._columns)})")
        return self._columns[key]

    @property
    def frame_episode_start(self) -> np.ndarray:
        """For each selected frame, the position of its episode's first frame."""
        return self._pos_from

    @property
    def frame_episode_end(self) -> np.ndarray:
        """For each selected frame, the position one past its episode's last frame."""
        return self._pos_to

    def video_frames(self, key: str) -> np.ndarray:
        """Every selected frame of camera ``key``, ``[len, 3, H, W]`` uint8 (each file decoded once)."""
        from noeira.core.dataset.video import decode_all

        if key not in self.video_keys:
            raise DatasetError(f"{self.root}: no video feature {key!r} (videos: {', '.join(self.video_keys) or 'none'})")
        out: np.ndarray | None = None
        ts = self._columns["timestamp"].astype(np.float64).reshape(-1)
        by_file: dict[Path, list[int]] = {}
        for e in self.selected:
            by_file.setdefault(self._video_file(self.episodes[e], key), []).append(e)
        for path, eps in by_file.items():
            frames, times = decode_all(path)
            order = np.argsort(times, kind="stable")
            frames, times = frames[order], times[order]
            for e in eps:
                ep = self.episodes[e]
                a = int(np.searchsorted(self._index, ep["dataset_from_index"]))
                b = a + int(ep["length"])
                want = ts[a:b] + float(ep[f"videos/{key}/from_timestamp"])
                pick = np.searchsorted(times, want - self.tolerance_s)
                pick = np.clip(pick, 0, len(times) - 1)
                if np.any(np.abs(times[pick] - want) > self.tolerance_s):
                    raise DatasetError(f"{path}: episode {e} has no frame within {self.tolerance_s} s of some timestamps")
                if out is None:
                    out = np.zeros((len(self), *frames.shape[1:]), dtype=np.uint8)
                out[a:b] = frames[pick]
        return out if out is not None else np.zeros((0, 3, 0, 0), dtype=np.uint8)

    # -- items (LeRobot's __getitem__) -------------------------------------------------------
    def __getitem__(self, idx: int) -> dict[str, Any]:
        import torch

        if not -len(self) <= idx < len(self):
            raise IndexError(f"frame {idx} of {len(self)}")
        idx = int(idx) % len(self)
        start, end = int(self._pos_from[idx]), int(self._pos_to[idx])
        item: dict[str, Any] = {k: torch.from_numpy(np.array(v[idx])) for k, v in self._columns.items()
                                if self.features[k]["dtype"] != "string"}
        for k, v in self._columns.items():
            if self.features[k]["dtype"] == "string":
                item[k] = str(v[idx])
        query: dict[str, list[int]] = {}
        if self.delta_indices is not None:
            for key, deltas in self.delta_indices.items():
                query[key] = [min(max(idx + d, start), end - 1) for d in deltas]
                item[f"{key}_is_pad"] = torch.tensor([not start <= idx + d < end for d in deltas])
                if key in self._columns:
                    item[key] = torch.from_numpy(np.stack([self._columns[key][q] for q in query[key]]))
        ep = self.episodes[int(self._columns["episode_index"].reshape(-1)[idx])]
        ts = self._columns["timestamp"].reshape(-1)
        for key in self.video_keys:
            from noeira.core.dataset.video import decode

            rows = query.get(key, [idx])
            stamps = [float(ep[f"videos/{key}/from_timestamp"]) + float(ts[r]) for r in rows]
            frames = torch.from_numpy(decode(self._video_file(ep, key), stamps, self.tolerance_s)).float() / 255.0
            item[key] = frames if key in query else frames[0]
        item["task"] = self.tasks[int(self._columns["task_index"].reshape(-1)[idx])] if self.tasks else ""
        return item


def _column_numpy(col: Any, feature: Mapping[str, Any]) -> np.ndarray:
    """An Arrow column (scalars or fixed/variable-size lists) -> ``[rows, *shape]`` numpy."""
    pa = require("pyarrow")
    col = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    shape = [int(s) for s in feature["shape"]]
    if feature["dtype"] == "string":
        return np.asarray(col.to_pylist(), dtype=object)
    depth = 0
    typ = col.type
    while pa.types.is_list(typ) or pa.types.is_fixed_size_list(typ) or pa.types.is_large_list(typ):
        col = col.flatten()
        typ = col.type
        depth += 1
    flat = col.to_numpy(zero_copy_only=False)
    if feature["dtype"] == "bool":
        flat = flat.astype(bool)
    return flat.reshape(-1, *shape) if depth else flat
