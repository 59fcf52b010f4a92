"""Write a LeRobot v3 dataset episode by episode.

::

    from noeira.core.dataset import DatasetWriter

    features = {"observation.state": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
                "action": {"dtype": "float32", "shape": [1], "names": ["torque"]},
                "observation.images.front": {"dtype": "video", "shape": [64, 64, 3],
                                             "names": ["height", "width", "channels"]}}
    with DatasetWriter("demos", fps=20, features=features) as w:
        for t in range(T):
            w.add_frame({"observation.state": s, "action": a, "observation.images.front": rgb}, task="swing up")
        w.save_episode()

**Every saved episode is readable the moment** :meth:`DatasetWriter.save_episode` **returns**,
whatever happens next (SIGKILL included): each file an episode touches is rewritten whole and
renamed into place (the data file of the current episodes, the current MP4 with the episode's
frames appended, the episodes' metadata file, ``tasks.parquet``, ``stats.json``, ``info.json``,
in that order). So a killed recorder loses only the episode it was recording. The price is
rewriting the current data and video file per episode; files roll over at
``data_files_size_in_mb`` / ``video_files_size_in_mb`` as LeRobot's do, which bounds it.
``resume=True`` adds episodes to an existing dataset, in new files (as LeRobot does), after
setting right what a crash between two of those renames may have left (rows of an episode the
metadata never got, stale totals).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from noeira.core.dataset import format as fmt
from noeira.core.dataset.format import DatasetError, require
from noeira.core.files import atomic_write

__all__ = ["DatasetWriter"]

_MB = 1024 * 1024
_STAGING = ".staging"
_STATS_FRAMES = 100
"""Video statistics are computed over at most this many frames of an episode, evenly spaced."""


class DatasetWriter:
    """A LeRobot v3 dataset being written at ``root`` (see the module docstring).

    ``features`` are the user's columns (``dtype``, ``shape``, ``names``), LeRobot-style; the
    writer adds ``timestamp``, ``frame_index``, ``episode_index``, ``index`` and ``task_index``.
    ``robot_type`` goes into ``info.json`` (noeira's recorder writes ``noeira:<env>`` for a
    simulator). ``video_codec``, ``crf`` and ``g`` set the MP4 encoder (LeRobot's defaults)."""

    def __init__(self, root: str | Path, *, fps: int, features: Mapping[str, Mapping[str, Any]] | None = None,
                 robot_type: str | None = None, video_codec: str = "libsvtav1", crf: int = 30, g: int = 2,
                 chunks_size: int = fmt.DEFAULT_CHUNK_SIZE,
                 data_files_size_in_mb: float = fmt.DEFAULT_DATA_FILE_SIZE_IN_MB,
                 video_files_size_in_mb: float = fmt.DEFAULT_VIDEO_FILE_SIZE_IN_MB, resume: bool = False) -> None:
        self.pa = require("pyarrow")
        self.pq = require("pyarrow.parquet")
        self.root = Path(root)
        self.codec, self.crf, self.g = video_codec, crf, g
        if not isinstance(fps, int) or isinstance(fps, bool) or fps < 1:
            raise DatasetError(f"fps: must be a positive integer, got {fps!r}")
        exists = (self.root / fmt.INFO_PATH).is_file()
        if exists and not resume:
            raise DatasetError(f"{self.root}: already holds a dataset (add episodes with resume, or choose another path)")
        if not exists and self.root.exists() and any(self.root.iterdir()):
            raise DatasetError(f"{self.root}: exists and is not a dataset; choose an empty or new directory")
        if exists:
            self._open_existing(fps, features)
        else:
            if not features:
                raise DatasetError("features: a new dataset needs its features (dtype, shape, names)")
            user = fmt.check_features(features)
            self.info: dict[str, Any] = {
                "codebase_version": fmt.CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": 0,
                "total_frames": 0, "total_tasks": 0, "chunks_size": int(chunks_size),
                "data_files_size_in_mb": data_files_size_in_mb, "video_files_size_in_mb": video_files_size_in_mb,
                "fps": fps, "splits": {}, "data_path": fmt.DATA_PATH,
                "video_path": fmt.VIDEO_PATH if any(f["dtype"] == "video" for f in user.values()) else None,
                "features": {**user, **json.loads(json.dumps(fmt.DEFAULT_FEATURES))},
            }
            self.tasks: dict[str, int] = {}
            self.stats: dict[str, dict[str, np.ndarray]] = {}
            self._data_at = (0, 0, 0)       # chunk, file, frames in it: the file the next episode goes to
            self._meta_at = (0, 0)
            self._video_at: dict[str, tuple[int, int, float] | None] = dict.fromkeys(self.video_keys)
            self._fresh_files = False
            self.root.mkdir(parents=True, exist_ok=True)
            fmt.write_json(self.root / fmt.INFO_PATH, self.info)
        if self.video_keys:
            from noeira.core.dataset.video import check_codec

            check_codec(self.codec)
        self._data_tables: list[Any] = []   # the episodes in the current data file
        self._meta_rows: list[dict[str, Any]] = []   # the episodes in the current metadata file
        self._schema = self._data_schema()
        self.clear_episode()

    # -- what the dataset holds ------------------------------------------------------------
    @property
    def features(self) -> dict[str, dict[str, Any]]:
        return self.info["features"]

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f["dtype"] == "video"]

    @property
    def num_episodes(self) -> int:
        return int(self.info["total_episodes"])

    @property
    def num_frames(self) -> int:
        return int(self.info["total_frames"])

    @property
    def episode_frames(self) -> int:
        """Frames added to the episode being recorded."""
        return self._size

    def _user_keys(self) -> list[str]:
        return [k for k in self.features if k not in fmt.DEFAULT_FEATURES]

    def _data_schema(self) -> Any:
        pa = self.pa
        fields = [pa.field(k, fmt.arrow_type(f)) for k, f in self.features.items() if f["dtype"] != "video"]
        meta = {b"huggingface": json.dumps(fmt.hf_features(self.features)).encode()}
        return pa.schema(fields, metadata=meta)

    # -- recording -------------------------------------------------------------------------
    def clear_episode(self) -> None:
        """Drop the frames of the episode being recorded."""
        self._buffer: dict[str, list[np.ndarray]] = {k: [] for k in self._user_keys()}
        self._frame_tasks: list[str] = []
        self._size = 0

    def add_frame(self, frame: Mapping[str, Any], task: str = "") -> None:
        """One frame of the episode being recorded: a value for every feature (arrays, tensors or
        numbers; a video frame ``[H, W, 3]`` uint8, or as the feature's shape says), and the task."""
        missing = [k for k in self._buffer if k not in frame]
        extra = [k for k in frame if k not in self._buffer]
        if missing or extra:
            raise DatasetError(f"frame {self._size}: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(extra)}"] if extra else [])))
        for key, value in frame.items():
            ft = self.features[key]
            arr = _to_numpy(value)
            if ft["dtype"] == "video":
                h, w = fmt.video_hw(ft)
                if arr.shape == (3, h, w) and (h, w) != (3, 3):
                    arr = arr.transpose(1, 2, 0)
                if arr.shape != (h, w, 3) or arr.dtype != np.uint8:
                    raise DatasetError(f"frame {self._size}: {key}: expected [{h}, {w}, 3] uint8, got "
                                       f"{list(arr.shape)} {arr.dtype}")
            elif ft["dtype"] == "string":
                arr = np.asarray(str(value), dtype=object)
            else:
                arr = arr.astype(ft["dtype"], copy=False).reshape(-1)
                if arr.shape != tuple(ft["shape"]):
                    raise DatasetError(f"frame {self._size}: {key}: expected shape {ft['shape']}, got {list(arr.shape)}")
            self._buffer[key].append(np.array(arr, copy=True))
        self._frame_tasks.append(str(task))
        self._size += 1

    def save_episode(self) -> int:
        """Write the recorded frames as the next episode; returns its index. When this returns the
        episode is on disk and readable. An empty episode is refused."""
        if self._size == 0:
            raise DatasetError("save_episode: the episode has no frames")
        n, ep = self._size, self.num_episodes
        start = self.num_frames
        # tasks first: an index in tasks.parquet that no frame uses yet is harmless
        new = [t for t in dict.fromkeys(self._frame_tasks) if t not in self.tasks]
        for t in new:
            self.tasks[t] = len(self.tasks)
        if new:
            self._write_tasks()
        columns: dict[str, np.ndarray] = {}
        for key in self._user_keys():
            if self.features[key]["dtype"] != "video":
                columns[key] = np.stack(self._buffer[key])
        frame_index = np.arange(n, dtype=np.int64)
        columns["timestamp"] = (frame_index / self.fps).astype(np.float32)
        columns["frame_index"] = frame_index
        columns["episode_index"] = np.full(n, ep, dtype=np.int64)
        columns["index"] = np.arange(start, start + n, dtype=np.int64)
        columns["task_index"] = np.asarray([self.tasks[t] for t in self._frame_tasks], dtype=np.int64)

        ep_stats = {k: fmt.feature_stats(v) for k, v in columns.items() if self.features[k]["dtype"] != "string"}
        row: dict[str, Any] = {"episode_index": ep, "tasks": list(dict.fromkeys(self._frame_tasks)), "length": n}
        row.update(self._save_data(columns, start, n))
        for key in self.video_keys:
            frames = np.stack(self._buffer[key])
            row.update(self._save_video(key, frames, ep))
            pick = np.linspace(0, n - 1, min(n, _STATS_FRAMES)).round().astype(np.int64)
            ep_stats[key] = fmt.feature_stats(frames[pick].transpose(0, 3, 1, 2), image=True)
        ep_stats = {k: ep_stats[k] for k in self.features if k in ep_stats}  # LeRobot's order: the features'
        for key, st in ep_stats.items():
            for name, value in st.items():
                row[f"stats/{key}/{name}"] = np.asarray(value).tolist()
        self._save_meta_row(row)
        self.stats = fmt.aggregate_stats([self.stats, ep_stats]) if self.stats else ep_stats
        fmt.write_json(self.root / fmt.STATS_PATH, fmt.stats_to_json(self.stats))
        self.info["total_episodes"] = ep + 1
        self.info["total_frames"] = start + n
        self.info["total_tasks"] = len(self.tasks)
        self.info["splits"] = {"train": f"0:{ep + 1}"}
        fmt.write_json(self.root / fmt.INFO_PATH, self.info)
        self.clear_episode()
        return ep

    # -- the files ---------------------------------------------------------------------------
    def _write_tasks(self) -> None:
        pa = self.pa
        names = list(self.tasks)
        # pandas' own metadata, so pandas.read_parquet gives LeRobot's frame: index "task", column task_index
        pandas_meta = {
            "index_columns": ["task"],
            "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                                "metadata": {"encoding": "UTF-8"}}],
            "columns": [
                {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
                 "metadata": None},
                {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
            ],
            "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3",
        }
        table = pa.table({"task_index": pa.array([self.tasks[t] for t in names], pa.int64()),
                          "task": pa.array(names, pa.string())})
        table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
        atomic_write(self.root / fmt.TASKS_PATH, lambda p: self.pq.write_table(table, p))

    def _file_path(self, template: str, chunk: int, file: int, **kw: Any) -> Path:
        return self.root / template.format(chunk_index=chunk, file_index=file, **kw)

    def _save_data(self, columns: dict[str, np.ndarray], start: int, n: int) -> dict[str, Any]:
        pa = self.pa
        arrays = [_arrow_column(pa, columns[f.name], f.type) for f in self._schema]
        table = pa.Table.from_arrays(arrays, schema=self._schema)
        chunk, file, frames = self._data_at
        path = self._file_path(fmt.DATA_PATH, chunk, file)
        if self._data_tables and path.exists():
            size = path.stat().st_size / _MB
            if size + size / max(frames, 1) * n >= float(self.info["data_files_size_in_mb"]):
                chunk, file = fmt.next_file(chunk, file, int(self.info["chunks_size"]))
                self._data_tables, frames = [], 0
                path = self._file_path(fmt.DATA_PATH, chunk, file)
        self._data_tables.append(table)
        whole = pa.concat_tables(self._data_tables)
        atomic_write(path, lambda p: self.pq.write_table(whole, p, compression="snappy"))
        self._data_at = (chunk, file, frames + n)
        return {"data/chunk_index": chunk, "data/file_index": file, "dataset_from_index": start,
                "dataset_to_index": start + n}

    def _save_video(self, key: str, frames: np.ndarray, ep: int) -> dict[str, Any]:
        from noeira.core.dataset import video

        staging = self.root / _STAGING
        staging.mkdir(exist_ok=True)
        tmp = staging / f"{key}-{ep:06d}.mp4"
        video.encode(tmp, frames, self.fps, codec=self.codec, crf=self.crf, g=self.g)
        ep_seconds = video.duration(tmp)
        at = self._video_at.get(key)
        cap = float(self.info["video_files_size_in_mb"])
        if at is None or self._fresh_files:
            chunk, file = (0, 0) if at is None else fmt.next_file(at[0], at[1], int(self.info["chunks_size"]))
            start = None
        else:
            chunk, file, start = at
            path = self._file_path(fmt.VIDEO_PATH, chunk, file, video_key=key)
            if not path.exists() or path.stat().st_size / _MB + tmp.stat().st_size / _MB >= cap:
                chunk, file = fmt.next_file(chunk, file, int(self.info["chunks_size"]))
                start = None
        path = self._file_path(fmt.VIDEO_PATH, chunk, file, video_key=key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if start is None:
            os.replace(tmp, path)
            start = 0.0
        else:
            video.concatenate([path, tmp], path)
            tmp.unlink(missing_ok=True)
        end = start + ep_seconds
        self._video_at[key] = (chunk, file, end)
        if "info" not in self.features[key]:
            self.features[key]["info"] = video.video_info(path, crf=self.crf, g=self.g)
        return {f"videos/{key}/chunk_index": chunk, f"videos/{key}/file_index": file,
                f"videos/{key}/from_timestamp": float(start), f"videos/{key}/to_timestamp": float(end)}

    def _save_meta_row(self, row: dict[str, Any]) -> None:
        pa = self.pa
        chunk, file = self._meta_at
        path = self._file_path(fmt.EPISODES_PATH, chunk, file)
        if self._meta_rows and path.exists() and path.stat().st_size / _MB >= float(self.info["data_files_size_in_mb"]):
            chunk, file = fmt.next_file(chunk, file, int(self.info["chunks_size"]))
            self._meta_rows = []
            path = self._file_path(fmt.EPISODES_PATH, chunk, file)
        row = {**row, "meta/episodes/chunk_index": chunk, "meta/episodes/file_index": file}
        self._meta_rows.append(row)
        table = pa.Table.from_pylist(self._meta_rows)
        atomic_write(path, lambda p: self.pq.write_table(table, p))
        self._meta_at = (chunk, file)
        self._fresh_files = False

    # -- adding to an existing dataset ------------------------------------------------------
    def _open_existing(self, fps: int, features: Mapping[str, Mapping[str, Any]] | None) -> None:
        from noeira.core.dataset.reader import load_episodes, load_info, load_tasks

        self.info = load_info(self.root)
        if int(self.info["fps"]) != fps:
            raise DatasetError(f"{self.root}: recorded at {self.info['fps']} fps, not {fps}")
        if features is not None:
            mine = {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in fmt.check_features(features).items()}
            theirs = {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in self.info["features"].items()
                      if k not in fmt.DEFAULT_FEATURES}
            if mine != theirs:
                raise DatasetError(f"{self.root}: its features {theirs} differ from the ones recorded now {mine}")
        episodes = load_episodes(self.root, self.info)
        self.tasks = {t: i for i, t in enumerate(load_tasks(self.root))} if (self.root / fmt.TASKS_PATH).exists() else {}
        stats_cols = [k for k in episodes[0] if k.startswith("stats/")] if episodes else []
        per_episode = []
        for e in episodes:
            st: dict[str, dict[str, np.ndarray]] = {}
            for col in stats_cols:
                _, key, name = col.split("/", 2)
                st.setdefault(key, {})[name] = np.asarray(e[col])
            per_episode.append(st)
        self.stats = fmt.aggregate_stats(per_episode) if per_episode else {}
        total = episodes[-1]["dataset_to_index"] if episodes else 0
        self.info.update(total_episodes=len(episodes), total_frames=int(total), total_tasks=len(self.tasks),
                         splits={"train": f"0:{len(episodes)}"} if episodes else {})
        cs = int(self.info["chunks_size"])
        if episodes:
            last = episodes[-1]
            self._repair_data(last)
            self._data_at = (*fmt.next_file(last["data/chunk_index"], last["data/file_index"], cs), 0)
            self._meta_at = fmt.next_file(last["meta/episodes/chunk_index"], last["meta/episodes/file_index"], cs)
            self._video_at = {k: (last[f"videos/{k}/chunk_index"], last[f"videos/{k}/file_index"], 0.0)
                              for k in self.video_keys}
        else:
            self._data_at, self._meta_at = (0, 0, 0), (0, 0)
            self._video_at = dict.fromkeys(self.video_keys)
        self._fresh_files = bool(episodes)  # new episodes go to new files, as LeRobot resumes
        shutil.rmtree(self.root / _STAGING, ignore_errors=True)
        fmt.write_json(self.root / fmt.INFO_PATH, self.info)
        if self.stats:
            fmt.write_json(self.root / fmt.STATS_PATH, fmt.stats_to_json(self.stats))

    def _repair_data(self, last: Mapping[str, Any]) -> None:
        """Drop rows past the last episode the metadata holds (a crash after its data file was
        written and before its metadata row was)."""
        path = self._file_path(fmt.DATA_PATH, last["data/chunk_index"], last["data/file_index"])
        table = self.pq.read_table(path)
        keep = self.pa.compute.less(table.column("index"), last["dataset_to_index"])
        if self.pa.compute.all(keep).as_py() is False:
            kept = table.filter(keep)
            atomic_write(path, lambda p: self.pq.write_table(kept, p, compression="snappy"))

    # -- closing -------------------------------------------------------------------------------
    def close(self) -> None:
        """Drop an unsaved episode and the staging folder. Saved episodes need nothing more."""
        self.clear_episode()
        shutil.rmtree(self.root / _STAGING, ignore_errors=True)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _arrow_column(pa: Any, values: np.ndarray, typ: Any) -> Any:
    """A numpy column ``[T]`` or ``[T, n]`` as an Arrow array of ``typ`` (a fixed-size list for vectors)."""
    if pa.types.is_fixed_size_list(typ):
        flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=typ.value_type)
        return pa.FixedSizeListArray.from_arrays(flat, typ.list_size)
    if pa.types.is_string(typ):
        return pa.array([str(v) for v in values.reshape(-1)], type=typ)
    return pa.array(np.ascontiguousarray(values).reshape(-1), type=typ)
