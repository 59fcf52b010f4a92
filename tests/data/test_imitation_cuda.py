"""On CUDA: an offline agent's learn step (BC, ACT: batches, latent noise and dropout from a
device generator, the learning rate a device tensor) records as a CUDA graph and replays bit
for bit as eager, through the driver's own build (``noeira verify-graph``'s comparison)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")  # no video here: PyAV is not needed

from noeira.core.api import make_env  # noqa: E402
from noeira.core.dataset import DatasetWriter  # noqa: E402
from noeira.core.dataset.record import env_features, record_env, scripted_policy  # noqa: E402
from noeira.core.driver import resolve  # noqa: E402

SMALL = {
    "bc": {"hidden_sizes": [32, 32], "batch_size": 64},
    "act": {"dim_model": 32, "dim_feedforward": 64, "n_heads": 2, "n_encoder_layers": 1, "n_vae_encoder_layers": 1,
            "chunk_size": 5, "batch_size": 16},
}


@pytest.mark.cuda
@pytest.mark.parametrize("graph", ["stream", "device"])
@pytest.mark.parametrize("agent", ["bc", "act"])
def test_offline_learn_records_and_replays_as_eager(agent: str, graph: str, tmp_path: Path) -> None:
    from noeira.cuda.device_graph import DeviceGraph
    from noeira.cuda.stream import StreamGraph
    from noeira.cuda.verify import first_difference, run_hashes

    env = make_env("pendulum", num_envs=2, backend="cpu", seed=0, max_episode_steps=20)
    with DatasetWriter(tmp_path / "ds", fps=30, features=env_features(env.spec), robot_type="noeira:pendulum") as w:
        record_env(env, scripted_policy("random", env.spec, 0), w, 4)
    cfg = resolve({"backend": "cuda", "agent": {"name": agent, **SMALL[agent]}, "env": {"num_envs": 1},
                   "run": {"dataset": str(tmp_path / "ds"), "seed": 0, "total_steps": 100}})
    if graph == "stream":
        wrap, reference = StreamGraph().wrap, None
    else:
        dg = DeviceGraph()
        wrap, reference = dg.wrap, dg.reference
    got = run_hashes(cfg, wrap, 5)
    assert first_difference(run_hashes(cfg, reference, 5), got) is None
