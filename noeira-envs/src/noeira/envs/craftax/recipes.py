"""A PPO recipe for Craftax-Classic, served through the ``noeira_recipe`` hook
(:mod:`noeira.envs.recipes`).

Starting points: craftax.cu's tuned recipe (Infatoshi/craftax.cu: 3 epochs x 8 minibatches
over 128-step rollouts, learning rate 5e-3 annealed, gamma 0.995, GAE lambda 0.90, value
coefficient 2.0, entropy 0.001; a Linear(1345 -> 256) and three MinGRU layers of 256) and
PufferLib's Craftax config (16,384 agents, entropy 0.02). On cuda: that network, bf16 working
weights with fp32 masters, 16,384 envs, 1e9 steps, the compact observation (the rollout holds
148 bytes a step instead of 1,345 floats; training is the same bit for bit); on a CPU a smaller
network and a short run.
On an H200 this recipe (``benchmarks/ppo_craftax.py --recipe quality`` runs it with the same
values) trains at 5.6e6 steps/s and reached a mean return of 18.0 in 30 s of wall time, one
seed (BENCHMARKS.md). The entropy coefficient is craftax.cu's 0.001 (PufferLib's 0.02 was not
compared); the cosine decay to a tenth of the rate spans the run.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ppo_recipe"]


def ppo_recipe(backend: str, num_envs: int | None, network: str | None = None) -> dict[str, Any]:
    """``{"env": ..., "agent": ..., "run": ...}`` for PPO on ``craftax-classic``. ``num_envs``
    (None: the recipe's) scales the step budget so the number of updates stays; ``network`` (the
    user's ``agent.network``; None: the recipe's mingru) keeps the MinGRU options off another network."""
    cuda = backend == "cuda"
    n = num_envs or (16_384 if cuda else 64)
    horizon = 128 if cuda else 64
    iterations = 480 if cuda else 60  # ~1e9 env steps at 16,384 envs on a GPU; a smoke-sized run on a CPU
    return {
        "env": {"num_envs": n, **({"obs": "compact"} if cuda else {})},
        "agent": {
            "network": "mingru", "hidden_sizes": [256, 256, 256] if cuda else [128, 128],
            # the MinGRU these settings were tuned with and measured on: no input conv, the
            # gates' bias at zero (mingru's defaults since issue 32 are conv 4 and spread time
            # constants, not yet measured on Craftax)
            **({"network_options": {"conv": 1, "max_timescale": 0}} if network in (None, "mingru") else {}),
            "precision": "bf16-master" if cuda else "fp32",
            "horizon": horizon, "update_epochs": 3, "num_minibatches": 8,
            "lr": 5e-3, "anneal_lr": True, "lr_schedule": "cosine", "min_lr_ratio": 0.1,
            "gamma": 0.995, "gae_lambda": 0.90, "vf_coef": 2.0, "clip_vloss": False,
            "ent_coef": 0.001,
            "max_grad_norm": 1.0, "norm_adv": True,
        },
        "run": {"total_steps": iterations * horizon * n, "log_interval": 5},
    }
