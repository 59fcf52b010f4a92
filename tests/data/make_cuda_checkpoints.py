"""Make the CUDA-made run directories that ``tests/core/test_checkpoints.py`` evaluates and
resumes on the CPU: tiny runs trained with ``backend=cuda`` (its default graph backend), written
as one small tarball.

    python tests/data/make_cuda_checkpoints.py [OUT_DIR]    # default $OUT, else .

writes ``OUT_DIR/cuda_checkpoints.tar.gz`` (a few MB at most); commit it as
``tests/data/cuda_checkpoints.tar.gz``. Each run is small on purpose (few envs, narrow
networks, short replay buffers): the point is the checkpoint's layout as CUDA writes it (device
tensors, 16-byte Philox generator states, capturable optimizer state, Craftax's Triton kernel
key), not a trained policy.
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

RUNS: dict[str, dict[str, Any]] = {
    "ppo-cartpole": {"env": {"name": "cartpole", "num_envs": 16}, "agent": {"name": "ppo", "horizon": 16},
                     "run": {"total_steps": 4096}},
    "sac-pendulum": {"env": {"name": "pendulum", "num_envs": 4},
                     "agent": {"name": "sac", "buffer_size": 2048, "learning_starts": 256, "batch_size": 64,
                               "hidden": [32, 32]},
                     "run": {"total_steps": 1024}},
    "dqn-cartpole": {"env": {"name": "cartpole", "num_envs": 4},
                     "agent": {"name": "dqn", "buffer_size": 2048, "learning_starts": 256, "batch_size": 64,
                               "hidden": [32, 32]},
                     "run": {"total_steps": 1024}},
    "ppo-lstm-cartpole": {"env": {"name": "cartpole", "num_envs": 16},
                          "agent": {"name": "ppo", "network": "lstm", "hidden_sizes": [32], "horizon": 16,
                                    "num_minibatches": 4, "norm_obs": True, "norm_reward": True},
                          "run": {"total_steps": 2048}},
    # the recipe's network kind and precision (mingru, bf16 working weights with fp32 masters) and
    # compact observations, narrow and with few envs
    "ppo-craftax": {"env": {"name": "craftax-classic", "num_envs": 16},
                    "agent": {"name": "ppo", "hidden_sizes": [64, 64], "horizon": 16},
                    "run": {"total_steps": 1024}},
}


def main() -> int:
    import torch

    from noeira.core.driver import resolve, train

    if not torch.cuda.is_available():
        print("make_cuda_checkpoints: needs a CUDA device", file=sys.stderr)
        return 2
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cuda_checkpoints"
        for name, raw in RUNS.items():
            raw = {"backend": "cuda", **raw, "run": {"eval_episodes": 2, "progress": False, "log_interval": 1,
                                                      "seed": 0, **raw["run"]}}
            record = train(resolve(raw), run_dir=root / name)
            size = sum(p.stat().st_size for p in (root / name).rglob("*") if p.is_file())
            print(f"{name}: {record['env_steps']} steps on {record['device']} (graph {record['graph']}), "
                  f"eval {record['final_eval']['mean_return']:.1f}, {size / 1e6:.2f} MB")
        tarball = out / "cuda_checkpoints.tar.gz"
        with tarfile.open(tarball, "w:gz") as tar:
            tar.add(root, arcname="cuda_checkpoints")
    print(f"wrote {tarball} ({tarball.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
