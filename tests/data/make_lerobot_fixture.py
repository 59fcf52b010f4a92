"""Build ``tests/data/lerobot_v3/``: a tiny dataset laid out as LeRobot v3 writes one, by hand
from the format (pyarrow and PyAV directly, none of noeira's dataset code), so the reader is
tested against the format rather than against our own writer.

Three episodes at 10 fps of a two-joint arm with one camera: episodes 0 and 1 share
``data/chunk-000/file-000.parquet`` and ``videos/observation.images.top/chunk-000/file-000.mp4``
(episode 1's frames start at 0.5 s in it); episode 2 is in ``file-001`` of both, as after a
size roll-over. Every value is a formula of (episode, frame) that the tests recompute:

    observation.state = [10 * ep + t, -t]          action = [0.5 * t, ep]
    next.reward = t / 10                           next.done = (t == length - 1)
    camera frame = flat colour (40 * ep + 20 * t, 100, 200 - 20 * t), 32 x 32

Run ``python tests/data/make_lerobot_fixture.py`` to rebuild it.
"""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).resolve().parent / "lerobot_v3"
FPS = 10
LENGTHS = [5, 4, 3]
TASKS = ["reach the cube", "push the cube"]
EPISODE_TASK = [0, 1, 0]
DATA_FILE = [0, 0, 1]   # which data/video file each episode is in (chunk 0)
CAM = "observation.images.top"
H = W = 32


def state(ep: int, t: int) -> list[float]:
    return [10.0 * ep + t, -float(t)]


def action(ep: int, t: int) -> list[float]:
    return [0.5 * t, float(ep)]


def colour(ep: int, t: int) -> tuple[int, int, int]:
    return (40 * ep + 20 * t, 100, 200 - 20 * t)


FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [2], "names": ["shoulder.pos", "elbow.pos"]},
    "action": {"dtype": "float32", "shape": [2], "names": ["shoulder.pos", "elbow.pos"]},
    "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    "next.done": {"dtype": "bool", "shape": [1], "names": None},
    CAM: {"dtype": "video", "shape": [H, W, 3], "names": ["height", "width", "channels"],
          "info": {"video.height": H, "video.width": W, "video.codec": "av1", "video.pix_fmt": "yuv420p",
                   "video.is_depth_map": False, "video.fps": FPS, "video.channels": 3, "has_audio": False}},
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}

# what HF datasets writes into a data file's schema metadata (LeRobot writes through it)
HF = {"info": {"features": {
    "observation.state": {"feature": {"dtype": "float32", "_type": "Value"}, "length": 2, "_type": "Sequence"},
    "action": {"feature": {"dtype": "float32", "_type": "Value"}, "length": 2, "_type": "Sequence"},
    "next.reward": {"dtype": "float32", "_type": "Value"},
    "next.done": {"dtype": "bool", "_type": "Value"},
    "timestamp": {"dtype": "float32", "_type": "Value"},
    "frame_index": {"dtype": "int64", "_type": "Value"},
    "episode_index": {"dtype": "int64", "_type": "Value"},
    "index": {"dtype": "int64", "_type": "Value"},
    "task_index": {"dtype": "int64", "_type": "Value"},
}}}


def vec(rows: list[list[float]]) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(rows, np.float32).reshape(-1)), 2)


def stats(x: np.ndarray, image: bool = False) -> dict[str, list]:
    """LeRobot's per-feature statistics, in its key order; an image's per channel, shape (3, 1, 1)."""
    n = x.shape[0]
    x = x.astype(np.float64)
    x = x.transpose(0, 2, 3, 1).reshape(-1, 3) if image else x.reshape(n, -1)
    qs = (0.01, 0.1, 0.5, 0.9, 0.99)
    out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([n])}
    out.update({f"q{round(q * 100):02d}": v for q, v in zip(qs, np.quantile(x, qs, axis=0), strict=True)})
    return {k: (v.reshape(3, 1, 1) if image and k != "count" else v).tolist() for k, v in out.items()}


def encode(path: Path, frames: list[np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4") as out:
        s = out.add_stream("libsvtav1", rate=FPS, options={"g": "2", "crf": "30", "preset": "12"})
        s.width, s.height, s.pix_fmt = W, H, "yuv420p"
        s.time_base = Fraction(1, FPS)
        for i, img in enumerate(frames):
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts, f.time_base = i, Fraction(1, FPS)
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode(None):
            out.mux(p)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    index = 0
    data: dict[int, dict[str, list]] = {}
    frames: dict[int, list[np.ndarray]] = {}
    episodes = []
    video_time = {0: 0.0, 1: 0.0}
    all_rows: dict[str, list] = {k: [] for k in ("state", "action", "reward", "done", "ts", "fi", "ei", "ix", "ti")}
    for ep, n in enumerate(LENGTHS):
        f = DATA_FILE[ep]
        d = data.setdefault(f, {k: [] for k in all_rows})
        for t in range(n):
            row = {"state": state(ep, t), "action": action(ep, t), "reward": t / 10, "done": t == n - 1,
                   "ts": t / FPS, "fi": t, "ei": ep, "ix": index + t, "ti": EPISODE_TASK[ep]}
            for k, v in row.items():
                d[k].append(v)
                all_rows[k].append(v)
            img = np.zeros((H, W, 3), np.uint8)
            img[:] = colour(ep, t)
            frames.setdefault(f, []).append(img)
        from_ts = video_time[f]
        video_time[f] += n / FPS
        ep_rows = {k: np.asarray(v[-n:]) for k, v in d.items()}
        st = {"observation.state": stats(ep_rows["state"]), "action": stats(ep_rows["action"]),
              "next.reward": stats(ep_rows["reward"]), "next.done": stats(ep_rows["done"]),
              "timestamp": stats(ep_rows["ts"]), "frame_index": stats(ep_rows["fi"]),
              "episode_index": stats(ep_rows["ei"]), "index": stats(ep_rows["ix"]),
              "task_index": stats(ep_rows["ti"])}
        st[CAM] = stats(np.stack(frames[f][-n:]).transpose(0, 3, 1, 2) / 255.0, image=True)
        row = {"episode_index": ep, "tasks": [TASKS[EPISODE_TASK[ep]]], "length": n,
               "data/chunk_index": 0, "data/file_index": f, "dataset_from_index": index, "dataset_to_index": index + n,
               f"videos/{CAM}/chunk_index": 0, f"videos/{CAM}/file_index": f,
               f"videos/{CAM}/from_timestamp": from_ts, f"videos/{CAM}/to_timestamp": from_ts + n / FPS}
        for key in FEATURES:
            if key in st:
                for name, v in st[key].items():
                    row[f"stats/{key}/{name}"] = v
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
        episodes.append(row)
        index += n

    for f, d in data.items():
        table = pa.table({
            "observation.state": vec(d["state"]), "action": vec(d["action"]),
            "next.reward": pa.array(d["reward"], pa.float32()), "next.done": pa.array(d["done"], pa.bool_()),
            "timestamp": pa.array(d["ts"], pa.float32()), "frame_index": pa.array(d["fi"], pa.int64()),
            "episode_index": pa.array(d["ei"], pa.int64()), "index": pa.array(d["ix"], pa.int64()),
            "task_index": pa.array(d["ti"], pa.int64()),
        })
        table = table.replace_schema_metadata({b"huggingface": json.dumps(HF).encode()})
        path = OUT / f"data/chunk-000/file-{f:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, compression="snappy")
        encode(OUT / f"videos/{CAM}/chunk-000/file-{f:03d}.mp4", frames[f])

    meta = OUT / "meta"
    (meta / "episodes/chunk-000").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(episodes), meta / "episodes/chunk-000/file-000.parquet", compression="snappy")
    tasks = pa.table({"task_index": pa.array([0, 1], pa.int64()), "task": pa.array(TASKS)})
    pandas_meta = {"index_columns": ["task"], "column_indexes": [], "columns": [
        {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": None},
        {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3"}
    pq.write_table(tasks.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()}), meta / "tasks.parquet")

    total = {k: np.asarray(v) for k, v in all_rows.items()}
    overall = {"observation.state": stats(total["state"]), "action": stats(total["action"]),
               "next.reward": stats(total["reward"]), "next.done": stats(total["done"]),
               "timestamp": stats(total["ts"]), "frame_index": stats(total["fi"]),
               "episode_index": stats(total["ei"]), "index": stats(total["ix"]), "task_index": stats(total["ti"])}
    (meta / "stats.json").write_text(json.dumps(overall, indent=4))
    info = {"codebase_version": "v3.0", "robot_type": "so101_follower", "total_episodes": len(LENGTHS),
            "total_frames": sum(LENGTHS), "total_tasks": len(TASKS), "chunks_size": 1000,
            "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": FPS,
            "splits": {"train": f"0:{len(LENGTHS)}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
            "features": FEATURES}
    (meta / "info.json").write_text(json.dumps(info, indent=4))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
