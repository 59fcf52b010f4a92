"""A PPO recipe for Craftax (the full game), served through the ``noeira_recipe`` hook
(:mod:`noeira.envs.recipes`).

Starting point: craftax.cu's full-game ``train`` defaults (Infatoshi/craftax.cu, ``cu_ppo_defaults``
and its README's command: 8,192 envs, 128-step rollouts, learning rate 3e-4, gamma 0.99, GAE
lambda 0.95, clip 0.2, entropy 0.01, value coefficient 0.5, one epoch; a Linear(obs -> 256) and
two MinGRU layers of 256), so the two train the same recipe side by side. On cuda: that network,
bf16 working weights with fp32 masters, the compact observation (a rollout step holds 900 bytes
per env instead of 8,268 floats; training is the same bit for bit) and eight minibatches: a
minibatch's input is decoded to 8,268 floats a sample, and at two minibatches (4,096 envs x 128
steps) recording the update as a CUDA graph asked for 16 GiB more than an H100 had left
(2026-12-07, when the decode still made float32 temporaries); at eight it is a quarter of that.
craftax.cu's ``train`` keeps one minibatch at these sizes (its log: ``minibatches=1``), so it takes
one gradient step an iteration to our eight; 1e9 steps. On a CPU a smaller network
and a short run. Not yet tuned here. Measured once (H100, one seed, BENCHMARKS.md): return 13.1 and
Craftax score 2.59 after 9.16e8 steps in 286 s: 5.8 % of the maximum reward, below the Craftax
README's 1e9-step baselines (PPO-RNN 15.3 %, PPO 11.9 %), whose PPO-RNN makes 64 times more gradient
steps (BENCHMARKS.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ppo_recipe"]


def ppo_recipe(backend: str, num_envs: int | None, network: str | None = None) -> dict[str, Any]:
    """``{"env": ..., "agent": ..., "run": ...}`` for PPO on ``craftax``. ``num_envs`` (None: the
    recipe's) scales the step budget so the number of updates stays; a ``network`` other than
    mingru asked by the user keeps its own options (the recipe's network settings are left out)."""
    cuda = backend == "cuda"
    n = num_envs or (8192 if cuda else 32)
    horizon = 128 if cuda else 64
    iterations = 954 if cuda else 40  # ~1e9 env steps at 8,192 envs on a GPU; a smoke-sized run on a CPU
    own = {"network": "mingru", "hidden_sizes": [256, 256] if cuda else [128, 128]}
    return {
        "env": {"num_envs": n, **({"obs": "compact"} if cuda else {})},
        "agent": {
            **(own if network in (None, "mingru") else {}),
            "precision": "bf16-master" if cuda else "fp32",
            "horizon": horizon, "update_epochs": 1, "num_minibatches": 8 if cuda else 1,
            "lr": 3e-4, "anneal_lr": False,
            "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.2, "vf_coef": 0.5, "ent_coef": 0.01,
            "max_grad_norm": 0.5, "norm_adv": True,
        },
        "run": {"total_steps": iterations * horizon * n, "log_interval": 5},
        "note": "untuned: craftax.cu's full-game train defaults; one seed on an H100: return 13.1 after 9.2e8 steps "
                "(5.8 % of the maximum; the Craftax paper's PPO-RNN reaches 15.3 % after 1e9)",
    }
