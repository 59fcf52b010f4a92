"""The imitation agents ``bc`` and ``act``: trained by ``noeira train agent=... dataset=PATH``
through the shared driver, LeRobot's chunk semantics, ACT's temporal ensembling against its
definition, the normalisation living in the checkpoint, and one-line errors for datasets that
don't fit."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")
pytest.importorskip("av")

from noeira.agents.act import ACT, ensemble_step  # noqa: E402
from noeira.agents.bc import BC  # noqa: E402
from noeira.agents.imitation import action_chunks  # noqa: E402
from noeira.core.api import get_backend, make_env  # noqa: E402
from noeira.core.cli import main  # noqa: E402
from noeira.core.dataset import DatasetWriter, LeRobotDataset  # noqa: E402
from noeira.core.testing import check_agent, check_env  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "lerobot_v3"
W = np.array([[1.5, -2.0, 0.5], [0.3, 0.8, -1.2]], np.float32)


def expert(obs: np.ndarray) -> np.ndarray:
    return np.tanh(obs @ W.T)


def _synthetic(root: Path, episodes: int = 12, length: int = 20, camera: bool = False) -> Path:
    """Episodes of a smooth 3-d state and an expert's 2-d action ``tanh(W s)`` (a robot-like
    recording: not from a simulator, so training replays it in the env ``dataset``)."""
    rng = np.random.default_rng(0)
    features = {"observation.state": {"dtype": "float32", "shape": [3], "names": ["a.pos", "b.pos", "c.pos"]},
                "action": {"dtype": "float32", "shape": [2], "names": ["a.pos", "b.pos"]}}
    if camera:
        features["observation.images.top"] = {"dtype": "video", "shape": [32, 32, 3], "names": ["height", "width", "channels"]}
    with DatasetWriter(root, fps=10, features=features, robot_type="toy_arm", video_codec="libx264") as w:
        for _ in range(episodes):
            s = rng.normal(size=3).astype(np.float32)
            for _ in range(length):
                frame = {"observation.state": s, "action": expert(s)}
                if camera:
                    img = np.zeros((32, 32, 3), np.uint8)
                    img[..., 0] = np.uint8(np.clip(128 + 40 * s[0], 0, 255))
                    img[..., 1] = np.uint8(np.clip(128 + 40 * s[1], 0, 255))
                    img[..., 2] = np.uint8(np.clip(128 + 40 * s[2], 0, 255))
                    frame["observation.images.top"] = img
                w.add_frame(frame, task="follow")
                s = (0.9 * s + 0.3 * rng.normal(size=3)).astype(np.float32)
            w.save_episode()
    return root


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _synthetic(tmp_path_factory.mktemp("toy") / "ds")


def test_action_chunks_are_lerobots_delta_timestamps() -> None:
    k, fps = 4, 10
    ds = LeRobotDataset(FIXTURE, delta_timestamps={"action": [i / fps for i in range(k)]})
    actions = torch.as_tensor(ds.column("action"))
    ends = torch.as_tensor(ds.frame_episode_end)
    chunk, pad = action_chunks(actions, ends, torch.arange(len(ds)), k)
    for i in range(len(ds)):
        item = ds[i]
        assert torch.equal(chunk[i], item["action"]) and torch.equal(pad[i], item["action_is_pad"])


def test_temporal_ensembling_is_the_papers_weighted_average() -> None:
    """a_t = sum_i w_i p_i / sum_i w_i over every chunk's prediction for step t, w_i = exp(-m i)
    with i = 0 the oldest; an episode start forgets everything before it."""
    gen = torch.Generator().manual_seed(0)
    b, k, a, m = 3, 5, 2, 0.3
    steps = 12
    chunks = torch.randn(steps, b, k, a, generator=gen)
    done = torch.zeros(steps, b, dtype=torch.bool)
    done[0] = True
    done[7, 1] = True  # env 1 starts a new episode at step 7
    state = torch.zeros(k, b, a + 2)
    for t in range(steps):
        action, state = ensemble_step(chunks[t], state, done[t], m)
        for env in range(b):
            start = max(s for s in range(t + 1) if done[s, env])
            preds = [chunks[s, env, t - s] for s in range(max(start, t - k + 1), t + 1)]  # oldest first
            w = torch.tensor([math.exp(-m * i) for i in range(len(preds))])
            want = (torch.stack(preds) * w[:, None]).sum(0) / w.sum()
            torch.testing.assert_close(action[env], want)


def test_bc_and_act_train_through_the_driver_and_imitate(toy: Path, tmp_path: Path) -> None:
    data = LeRobotDataset(toy)
    # the loss of predicting the mean action: what imitation must beat by far
    act_all = data.column("action")
    baseline = float(((act_all - act_all.mean(0)) ** 2).mean())
    for agent, extra, steps in (("bc", ["agent.hidden_sizes=[64, 64]", "agent.batch_size=128", "agent.lr=3e-3"], 400),
                                ("act", ["agent.dim_model=32", "agent.dim_feedforward=64", "agent.n_heads=2",
                                         "agent.n_encoder_layers=1", "agent.n_vae_encoder_layers=1", "agent.chunk_size=4",
                                         "agent.lr=1e-3", "agent.batch_size=64", "agent.dropout=0.0"], 300)):
        run = tmp_path / agent
        assert main(["train", f"agent={agent}", f"dataset={toy}", f"run.total_steps={steps}", "run.eval_episodes=4",
                     "run.progress=false", *extra, "--run-dir", str(run)]) == 0
        record = json.loads((run / "record.json").read_text())
        config = (run / "config.toml").read_text()
        assert 'name = "dataset"' in config and f'dataset = "{toy}"' in config  # the replay env, picked by itself
        assert record["env_steps"] == steps  # gradient steps
        # the replay env's return is minus the summed squared error over an episode (20 frames)
        mse = -record["final_eval"]["mean_return"] / 20
        assert mse < 0.2 * baseline, (agent, mse, baseline)


def test_the_normalisation_is_in_the_checkpoint(tmp_path: Path) -> None:
    """A run evaluates, exports and re-records without its dataset: the checkpoint holds the
    statistics (here an env the dataset was recorded in, so nothing else needs the files)."""
    ds = tmp_path / "demos"
    assert main(["record", "env=pendulum", "env.max_episode_steps=20", "--scripted", "random", "--episodes", "4",
                 "--num-envs", "2", "--out", str(ds)]) == 0
    run = tmp_path / "run"
    assert main(["train", "agent=bc", f"dataset={ds}", "run.total_steps=50", "run.eval_episodes=2",
                 "run.progress=false", "env.max_episode_steps=20", "--run-dir", str(run)]) == 0
    ckpt = torch.load(run / "checkpoints" / "final.pt", weights_only=False)
    mean = ckpt["agent"]["policy"]["encoder.mean"]
    assert torch.allclose(mean, torch.as_tensor(LeRobotDataset(ds).column("observation.state")).mean(0), atol=1e-5)
    assert ckpt["agent"]["metadata"]["fps"] == 30
    shutil.rmtree(ds)
    assert main(["eval", str(run), "--episodes", "2", "--json"]) == 0


def test_the_agents_keep_the_contract(toy: Path) -> None:
    check_env("dataset", num_envs=3, backend="cpu", path=str(toy))  # the replay env keeps the env contract
    backend = get_backend("cpu")
    for cls, cfg in ((BC, BC.Config(hidden_sizes=(16,), batch_size=8)),
                     (ACT, ACT.Config(dim_model=16, n_heads=2, dim_feedforward=32, n_encoder_layers=1,
                                      n_vae_encoder_layers=1, chunk_size=3, batch_size=8))):
        env = make_env("dataset", num_envs=2, backend="cpu", seed=0, path=str(toy))
        agent = cls(env.spec, backend, cfg)
        agent.load_dataset(str(toy))
        check_agent(agent, env)
        env.close()


def test_images_go_through_a_cnn_trained_from_scratch(tmp_path: Path) -> None:
    ds = _synthetic(tmp_path / "cam", episodes=3, length=8, camera=True)
    cam = "observation.images.top"
    for agent, extra in (("bc", ["agent.hidden_sizes=[32]", "agent.image_channels=8"]),
                         ("act", ["agent.dim_model=16", "agent.dim_feedforward=32", "agent.n_heads=2",
                                  "agent.n_encoder_layers=1", "agent.n_vae_encoder_layers=1", "agent.chunk_size=3",
                                  "agent.image_channels=8", "agent.batch_size=8"])):
        run = tmp_path / agent
        assert main(["train", f"agent={agent}", f"dataset={ds}", f"env.observation={cam}",
                     f"agent.observation_feature={cam}", "run.total_steps=20", "run.eval_episodes=1",
                     "run.progress=false", *extra, "--run-dir", str(run)]) == 0
        assert json.loads((run / "record.json").read_text())["final_eval"]["episodes"] == 1
        ckpt = torch.load(run / "checkpoints" / "final.pt", weights_only=False)
        assert any("conv" in k or "backbone" in k or "encoder.net" in k for k in ckpt["agent"]["policy"])


def test_datasets_that_do_not_fit_are_one_line_errors(toy: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pend = tmp_path / "pend"
    assert main(["record", "env=pendulum", "env.max_episode_steps=5", "--scripted", "random", "--episodes", "1",
                 "--out", str(pend)]) == 0
    cart = tmp_path / "cart"
    assert main(["record", "env=cartpole", "env.max_episode_steps=5", "--scripted", "random", "--episodes", "1",
                 "--out", str(cart)]) == 0
    broken = tmp_path / "broken"
    shutil.copytree(toy, broken)
    (broken / "data" / "chunk-000" / "file-000.parquet").unlink()
    cases = [
        (["agent=bc", f"dataset={tmp_path / 'nowhere'}"], "no such dataset directory"),
        (["agent=bc", f"dataset={broken}"], "missing data/chunk-000/file-000.parquet"),
        (["agent=bc", f"dataset={pend}", "env=cartpole"], "has shape [3], but env 'cartpole' observes [4]"),
        (["agent=bc", f"dataset={toy}", "agent.observation_feature=observation.velocity"],
         "no feature 'observation.velocity'"),
        (["agent=act", f"dataset={cart}"], "act predicts chunks of continuous actions"),
        (["agent=ppo", f"dataset={toy}"], "learns from its env, not from a dataset"),
        (["agent=bc", "env=pendulum"], "learns from a dataset: pass dataset=PATH"),
    ]
    for args, message in cases:
        assert main(["train", *args, "run.total_steps=2", "run.progress=false", "--run-dir",
                     str(tmp_path / "r"), "--overwrite"]) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
