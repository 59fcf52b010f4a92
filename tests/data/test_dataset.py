"""LeRobot v3 datasets: the reader against a dataset laid out as LeRobot writes one (built by
hand, tests/data/make_lerobot_fixture.py), the writer against the same layout, round trips,
LeRobot's delta-timestamp semantics, and one-line errors for broken datasets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("av")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from make_lerobot_fixture import CAM, FPS, LENGTHS, TASKS, action, colour, state  # noqa: E402

from noeira.core.dataset import DatasetError, DatasetWriter, LeRobotDataset  # noqa: E402
from noeira.core.dataset.format import aggregate_stats, feature_stats  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "lerobot_v3"
EPISODE_TASK = [0, 1, 0]


def frames() -> list[tuple[int, int]]:
    return [(ep, t) for ep, n in enumerate(LENGTHS) for t in range(n)]


def test_reads_a_dataset_laid_out_as_lerobot_writes_one() -> None:
    ds = LeRobotDataset(FIXTURE)
    assert (len(ds), ds.num_episodes, ds.fps, ds.robot_type) == (12, 3, FPS, "so101_follower")
    assert ds.tasks == TASKS and ds.video_keys == [CAM]
    for i, (ep, t) in enumerate(frames()):
        item = ds[i]
        assert item["observation.state"].tolist() == state(ep, t)
        assert item["action"].tolist() == action(ep, t)
        assert item["next.reward"].item() == pytest.approx(t / 10)
        assert item["next.done"].item() == (t == LENGTHS[ep] - 1)
        assert item["timestamp"].item() == pytest.approx(t / FPS)
        assert (item["frame_index"].item(), item["episode_index"].item(), item["index"].item()) == (t, ep, i)
        assert item["task"] == TASKS[EPISODE_TASK[ep]]
        img = item[CAM]
        assert img.shape == (3, 32, 32) and img.dtype.is_floating_point
        assert np.allclose(img[:, 16, 16].numpy() * 255, colour(ep, t), atol=6)  # AV1 is lossy: a few levels
    # every frame at once, as training reads them
    assert ds.column("observation.state").tolist() == [state(ep, t) for ep, t in frames()]
    video = ds.video_frames(CAM)
    assert video.shape == (12, 3, 32, 32) and video.dtype == np.uint8
    assert np.allclose(video[:, :, 16, 16], [colour(ep, t) for ep, t in frames()], atol=6)
    assert ds.frame_episode_start.tolist() == [0] * 5 + [5] * 4 + [9] * 3
    assert ds.frame_episode_end.tolist() == [5] * 5 + [9] * 4 + [12] * 3
    assert ds.stats["observation.state"]["count"].tolist() == [12]


def test_delta_timestamps_clamp_to_the_episode_and_mark_padding() -> None:
    chunk = [0.0, 0.1, 0.2, 0.3]
    ds = LeRobotDataset(FIXTURE, delta_timestamps={"action": chunk, "observation.state": [-0.2, -0.1, 0.0],
                                                   CAM: [-0.1, 0.0]})
    item = ds[3]  # episode 0, frame 3 of 5: the chunk runs one frame past the end
    assert item["action"].tolist() == [action(0, 3), action(0, 4), action(0, 4), action(0, 4)]
    assert item["action_is_pad"].tolist() == [False, False, True, True]
    item = ds[5]  # episode 1, frame 0: the history reaches back before the start
    assert item["observation.state"].tolist() == [state(1, 0)] * 3
    assert item["observation.state_is_pad"].tolist() == [True, True, False]
    assert item[f"{CAM}_is_pad"].tolist() == [True, False]
    assert np.allclose(item[CAM][:, :, 0, 0].numpy() * 255, [colour(1, 0)] * 2, atol=6)
    item = ds[10]  # episode 2 (another data and video file), frame 1
    assert item["action"].tolist() == [action(2, 1), action(2, 2), action(2, 2), action(2, 2)]
    assert np.allclose(item[CAM][:, :, 0, 0].numpy() * 255, [colour(2, 0), colour(2, 1)], atol=6)
    with pytest.raises(DatasetError, match="not multiples of 1/10"):
        LeRobotDataset(FIXTURE, delta_timestamps={"action": [0.05]})
    with pytest.raises(DatasetError, match="actions"):
        LeRobotDataset(FIXTURE, delta_timestamps={"actions": [0.0]})


def test_selected_episodes() -> None:
    ds = LeRobotDataset(FIXTURE, episodes=[2, 0], delta_timestamps={"action": [0.0, 0.1]})
    assert len(ds) == 8 and ds.num_episodes == 2
    assert ds.column("episode_index").tolist() == [0] * 5 + [2] * 3
    item = ds[7]  # the last frame of episode 2: the next one is padding, not episode 0's
    assert item["action_is_pad"].tolist() == [False, True]
    with pytest.raises(DatasetError, match="no episode 3"):
        LeRobotDataset(FIXTURE, episodes=[3])


def _write_fixture_content(root: Path, **kw: object) -> None:
    features = json.loads((FIXTURE / "meta" / "info.json").read_text())["features"]
    user = {k: {kk: vv for kk, vv in f.items() if kk != "info"} for k, f in features.items()
            if k not in ("timestamp", "frame_index", "episode_index", "index", "task_index")}
    with DatasetWriter(root, fps=FPS, features=user, robot_type="so101_follower", **kw) as w:
        for ep, n in enumerate(LENGTHS):
            for t in range(n):
                img = np.zeros((32, 32, 3), np.uint8)
                img[:] = colour(ep, t)
                w.add_frame({"observation.state": state(ep, t), "action": action(ep, t), "next.reward": t / 10,
                             "next.done": t == n - 1, CAM: img}, task=TASKS[EPISODE_TASK[ep]])
            assert w.save_episode() == ep


def test_writer_writes_the_same_layout_and_values(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _write_fixture_content(root)
    ours, ref = LeRobotDataset(root), LeRobotDataset(FIXTURE)
    assert len(ours) == len(ref)
    for key in ("observation.state", "action", "next.reward", "next.done", "timestamp", "frame_index",
                "episode_index", "index", "task_index"):
        assert np.array_equal(ours.column(key), ref.column(key)), key
    assert np.abs(ours.video_frames(CAM).astype(int) - ref.video_frames(CAM).astype(int)).max() <= 8
    # the same columns, types and keys as LeRobot's layout
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert data.schema.remove_metadata() == pq.read_table(FIXTURE / "data/chunk-000/file-000.parquet").schema.remove_metadata()
    assert json.loads(data.schema.metadata[b"huggingface"])["info"]["features"]["action"]["length"] == 2
    eps = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet")
    ref_eps = pq.read_table(FIXTURE / "meta/episodes/chunk-000/file-000.parquet")
    assert eps.column_names == ref_eps.column_names
    assert {f.name: f.type for f in eps.schema} == {f.name: f.type for f in ref_eps.schema}
    info, ref_info = (json.loads((r / "meta/info.json").read_text()) for r in (root, FIXTURE))
    assert info.keys() == ref_info.keys()
    assert {k: {kk: v[kk] for kk in ("dtype", "shape", "names")} for k, v in info["features"].items()} == \
        {k: {kk: v[kk] for kk in ("dtype", "shape", "names")} for k, v in ref_info["features"].items()}
    assert info["features"][CAM]["info"]["video.codec"] == "av1" and info["total_frames"] == 12
    assert ours.episodes[1][f"videos/{CAM}/from_timestamp"] == pytest.approx(0.5)  # many episodes per video file
    assert pq.read_table(root / "meta/tasks.parquet").column("task").to_pylist() == TASKS
    pd = pytest.importorskip("pandas")
    assert pd.read_parquet(root / "meta/tasks.parquet").loc["push the cube", "task_index"] == 1


def test_files_roll_over_at_their_size(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _write_fixture_content(root, data_files_size_in_mb=0.004, video_files_size_in_mb=0.0015, chunks_size=2)
    ds = LeRobotDataset(root)
    where = [(e["data/chunk_index"], e["data/file_index"]) for e in ds.episodes]
    assert len(set(where)) > 1 and where == sorted(where)
    assert (1, 0) in where or len(set(where)) == 2  # a chunk holds two files
    assert any(e[f"videos/{CAM}/file_index"] > 0 for e in ds.episodes)
    assert ds.column("action").tolist() == [action(ep, t) for ep, t in frames()]
    assert np.allclose(ds.video_frames(CAM)[:, :, 3, 3], [colour(ep, t) for ep, t in frames()], atol=6)


def test_stats_are_those_of_every_frame(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _write_fixture_content(root)
    ds = LeRobotDataset(root)
    x = ds.column("observation.state").astype(np.float64)
    st = ds.stats["observation.state"]
    assert np.allclose(st["mean"], x.mean(0)) and np.allclose(st["std"], x.std(0))
    assert np.allclose(st["min"], x.min(0)) and np.allclose(st["max"], x.max(0)) and st["count"].tolist() == [12]
    assert st["q50"].shape == (2,) and ds.stats[CAM]["mean"].shape == (3, 1, 1)
    assert ds.stats["next.reward"]["mean"].shape == (1,)
    # aggregating two halves gives the whole
    a, b = feature_stats(x[:5]), feature_stats(x[5:])
    whole = aggregate_stats([{"k": a}, {"k": b}])["k"]
    assert np.allclose(whole["mean"], x.mean(0)) and np.allclose(whole["std"], x.std(0))


def test_resume_adds_episodes_in_new_files_and_repairs_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    features = {"observation.state": {"dtype": "float32", "shape": [2], "names": None}}
    with DatasetWriter(root, fps=5, features=features) as w:
        for ep in range(2):
            for t in range(3):
                w.add_frame({"observation.state": [ep, t]}, task="a")
            w.save_episode()
    # a crash after the data file of a third episode was written, before its metadata was
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    stray = table.slice(0, 2).set_column(table.schema.get_field_index("index"), "index", pa.array([6, 7], pa.int64()))
    pq.write_table(pa.concat_tables([table, stray]), path)
    info = json.loads((root / "meta/info.json").read_text())
    info["total_episodes"] = 7
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="already holds a dataset"):
        DatasetWriter(root, fps=5, features=features)
    with pytest.raises(DatasetError, match="recorded at 5 fps"):
        DatasetWriter(root, fps=6, resume=True)
    with DatasetWriter(root, fps=5, features=features, resume=True) as w:
        assert (w.num_episodes, w.num_frames) == (2, 6)
        w.add_frame({"observation.state": [9, 9]}, task="b")
        assert w.save_episode() == 2
    ds = LeRobotDataset(root)
    assert ds.column("observation.state").tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [9, 9]]
    assert pq.read_table(path).num_rows == 6  # the stray rows are gone
    assert ds.episodes[2]["data/file_index"] == 1 and ds.tasks == ["a", "b"]


def _broken(tmp_path: Path) -> Path:
    root = tmp_path / "broken"
    shutil.copytree(FIXTURE, root)
    return root


@pytest.mark.parametrize(("damage", "message"), [
    (lambda r: (r / "data/chunk-000/file-001.parquet").unlink(), "missing data/chunk-000/file-001.parquet (episode 2)"),
    (lambda r: (r / f"videos/{CAM}/chunk-000/file-000.mp4").unlink(), "missing videos/observation.images.top"),
    (lambda r: (r / "meta/info.json").unlink(), "not a LeRobot dataset (no meta/info.json)"),
    (lambda r: (r / "meta/info.json").write_text((r / "meta/info.json").read_text().replace('"v3.0"', '"v2.1"')),
     "codebase_version v2.1, expected v3.x (convert it"),
    (lambda r: shutil.rmtree(r / "meta/episodes"), "missing meta/episodes/"),
    (lambda r: (r / "data/chunk-000/file-000.parquet").write_bytes(b"PAR1 nope"), "not a readable Parquet file"),
])
def test_a_broken_dataset_is_one_clear_error(tmp_path: Path, damage, message: str) -> None:  # noqa: ANN001
    root = _broken(tmp_path)
    damage(root)
    with pytest.raises(DatasetError) as err:
        LeRobotDataset(root)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_writer_refuses_bad_frames_and_features(tmp_path: Path) -> None:
    features = {"observation.state": {"dtype": "float32", "shape": [2], "names": None},
                "cam": {"dtype": "video", "shape": [8, 8, 3], "names": ["height", "width", "channels"]}}
    with DatasetWriter(tmp_path / "a", fps=10, features=features, video_codec="libx264") as w:
        with pytest.raises(DatasetError, match="observation.state: expected shape \\[2\\], got \\[3\\]"):
            w.add_frame({"observation.state": [1, 2, 3], "cam": np.zeros((8, 8, 3), np.uint8)})
        with pytest.raises(DatasetError, match="missing cam"):
            w.add_frame({"observation.state": [1, 2]})
        with pytest.raises(DatasetError, match="cam: expected \\[8, 8, 3\\] uint8"):
            w.add_frame({"observation.state": [1, 2], "cam": np.zeros((8, 8, 3), np.float32)})
        with pytest.raises(DatasetError, match="no frames"):
            w.save_episode()
    with pytest.raises(DatasetError, match="writer fills this column"):
        DatasetWriter(tmp_path / "b", fps=10, features={"index": {"dtype": "int64", "shape": [1]}})
    with pytest.raises(DatasetError, match="dtype 'complex64'"):
        DatasetWriter(tmp_path / "c", fps=10, features={"x": {"dtype": "complex64", "shape": [1]}})
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="exists and is not a dataset"):
        DatasetWriter(tmp_path / "d", fps=10, features={"x": {"dtype": "float32", "shape": [1]}})
