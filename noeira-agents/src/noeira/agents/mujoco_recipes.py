"""Recipes of SAC, TD3, PPO and REDQ for gymnasium's MuJoCo locomotion envs (HalfCheetah, Hopper,
Walker2d, Ant, Humanoid), and the published scores they are measured against.

Two recipes per agent and env:

- **cpu** (physics ``mujoco``): the published single-env recipe the anchor comes from, 1M env
  steps: SAC as rl-baselines3-zoo's ``hyperparams/sac.yml`` (one env, one update per step, lr
  3e-4, batch 256, 256x256, 10k random steps), TD3 as CleanRL's ``td3_continuous_action.py``
  (25k random steps, exploration noise 0.1), PPO as CleanRL's ``ppo_continuous_action.py``
  (2048-step rollouts, 10 epochs of 32 minibatches, observations and rewards normalised), REDQ
  as its paper's (N = 10, M = 2, G = 20, 5k random steps; 300k steps).
- **cuda** (physics ``mujoco-warp``): massively parallel, as FastTD3 and FastSAC (Seo et al.
  2025) train: 1,024 envs, batches of 32,768, 2 updates per env step of all envs, actor
  512-256-128 and critics 1024-512-256, observations normalised on the device, tau 0.1,
  3-step returns, bf16 updates; TD3's critics categorical over 101 atoms on ``[v_min, v_max]``
  chosen per env around the discounted return's range, and each env exploring with its own
  noise scale (``noise = mixed``, 0.05-0.4); PPO with 4,096 envs and 32-step rollouts. They run
  for as many env steps as ``run.total_steps`` says (5e7 off-policy, 1e8 PPO);
  ``benchmarks/mujoco_learning.py`` stops them at a wall-clock budget.

Every one carries a ``note`` beginning "untested" until ``benchmarks/mujoco_learning.py`` has
measured it reaching its anchor (BENCHMARKS.md): a run with it starts with that warning line.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ANCHORS", "LOCOMOTION", "PHYSICS", "tables"]

LOCOMOTION = ("halfcheetah", "hopper", "walker2d", "ant", "humanoid")
PHYSICS = {"cpu": "mujoco", "cuda": "mujoco-warp"}
"""The physics engine of each backend's recipe."""

ANCHORS: dict[str, dict[str, tuple[float, str]]] = {
    "sac": {"halfcheetah": (9_535.0, "rl-baselines3-zoo SAC, 1M steps (v3/v4 envs)"),
            "hopper": (2_326.0, "rl-baselines3-zoo SAC, 1M steps (v3/v4 envs)"),
            "walker2d": (3_863.0, "rl-baselines3-zoo SAC, 1M steps (v3/v4 envs)"),
            "ant": (4_616.0, "rl-baselines3-zoo SAC, 1M steps (v3/v4 envs)")},
    "td3": {"halfcheetah": (9_583.0, "CleanRL TD3, 1M steps (v4 envs)"),
            "hopper": (3_135.0, "CleanRL TD3, 1M steps (v4 envs)"),
            "walker2d": (4_058.0, "CleanRL TD3, 1M steps (v4 envs)"),
            "humanoid": (5_035.0, "CleanRL TD3, 1M steps (v4 envs)")},
}
"""agent -> env -> (published return, where from): the scores a recipe is measured against."""

_NOTE = ("untested: this recipe follows {source}; its return on {env} has not been measured here yet "
         "(benchmarks/mujoco_learning.py)")

# the categorical critics' support per env: about the discounted return's range at gamma 0.99
# (per-step rewards up to ~14 HalfCheetah, ~4 Hopper, ~6 Walker2d, ~8 Ant and Humanoid)
_SUPPORT = {"halfcheetah": (-200.0, 1_500.0), "hopper": (-50.0, 500.0), "walker2d": (-50.0, 700.0),
            "ant": (-100.0, 900.0), "humanoid": (-50.0, 1_000.0)}

_FAST = {"hidden": [512, 256, 128], "critic_hidden": [1024, 512, 256], "batch_size": 32_768,
         "buffer_size": 1_024 * 4_096, "learning_starts": 1_024 * 16, "updates_per_step": 2, "n_step": 3,
         "gamma": 0.99, "tau": 0.1, "actor_lr": 3e-4, "critic_lr": 3e-4, "norm_obs": True, "precision": "bf16"}
"""What the massively parallel off-policy recipes share (FastTD3 / FastSAC's shape)."""


def _cpu_offpolicy(agent: str, env: str) -> dict[str, Any]:
    if agent == "sac":
        values = {"hidden": [256, 256], "batch_size": 256, "buffer_size": 1_000_000, "learning_starts": 10_000,
                  "updates_per_step": 1, "actor_lr": 3e-4, "critic_lr": 3e-4}
        source, steps = "rl-baselines3-zoo's SAC (hyperparams/sac.yml)", 1_000_000
    elif agent == "td3":
        values = {"hidden": [256, 256], "batch_size": 256, "buffer_size": 1_000_000, "learning_starts": 25_000,
                  "updates_per_step": 1, "actor_lr": 3e-4, "critic_lr": 3e-4, "exploration_noise": 0.1,
                  "policy_noise": 0.2, "noise_clip": 0.5, "policy_delay": 2}
        source, steps = "CleanRL's TD3 (td3_continuous_action.py)", 1_000_000
    else:  # redq
        values = {"hidden": [256, 256], "batch_size": 256, "buffer_size": 1_000_000, "learning_starts": 5_000,
                  "updates_per_step": 20, "policy_delay": 20, "num_critics": 10, "target_subset": 2}
        source, steps = "REDQ's paper (Chen et al. 2021: N 10, M 2, G 20)", 300_000
    return {"note": _NOTE.format(source=source, env=env), "env": {"num_envs": 1, "physics": PHYSICS["cpu"]},
            "agent": values, "run": {"total_steps": steps, "log_interval": 1_000}}


def _cuda_offpolicy(agent: str, env: str) -> dict[str, Any]:
    values: dict[str, Any] = dict(_FAST)
    if agent == "td3":
        v_min, v_max = _SUPPORT[env]
        values.update(num_atoms=101, v_min=v_min, v_max=v_max, noise="mixed", exploration_noise=0.4,
                      exploration_noise_min=0.05, policy_noise=0.1, noise_clip=0.5, policy_delay=2)
        source = "FastTD3 (Seo et al. 2025)"
    elif agent == "sac":
        source = "FastSAC (FastTD3's repository)"
    else:  # redq: FastSAC's shape with a 10-critic ensemble (a subset of 2 in the target)
        values.update(num_critics=10, target_subset=2, policy_delay=2)
        source = "FastSAC's shape with REDQ's ensemble"
    return {"note": _NOTE.format(source=source, env=env), "env": {"num_envs": 1_024, "physics": PHYSICS["cuda"]},
            "agent": values, "run": {"total_steps": 50_000_000, "log_interval": 20}}


def _ppo(env: str) -> dict[str, dict[str, Any]]:
    cpu = {"note": _NOTE.format(source="CleanRL's PPO (ppo_continuous_action.py)", env=env),
           "env": {"num_envs": 1, "physics": PHYSICS["cpu"]},
           "agent": {"horizon": 2_048, "update_epochs": 10, "num_minibatches": 32, "lr": 3e-4, "anneal_lr": True,
                     "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.2, "ent_coef": 0.0, "vf_coef": 0.5,
                     "max_grad_norm": 0.5, "norm_obs": True, "norm_reward": True},
           "run": {"total_steps": 1_000_000, "log_interval": 1}}
    cuda = {"note": _NOTE.format(source="massively parallel PPO (4,096 envs, 32-step rollouts)", env=env),
            "env": {"num_envs": 4_096, "physics": PHYSICS["cuda"]},
            "agent": {"horizon": 32, "update_epochs": 5, "num_minibatches": 8, "lr": 3e-4, "anneal_lr": True,
                      "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.2, "ent_coef": 0.0, "vf_coef": 0.5,
                      "max_grad_norm": 1.0, "hidden_sizes": [256, 256], "norm_obs": True, "norm_reward": True},
            "run": {"total_steps": 100_000_000, "log_interval": 10}}
    return {"cpu": cpu, "cuda": cuda}


def tables(agent: str) -> dict[str, dict[str, dict[str, Any]]]:
    """``agent``'s recipes for the five envs: env -> backend -> recipe (``"*"``: cuda and any
    other backend, for the off-policy agents' tables; ``"cuda"`` for PPO's)."""
    if agent == "ppo":
        return {env: _ppo(env) for env in LOCOMOTION}
    return {env: {"cpu": _cpu_offpolicy(agent, env), "*": _cuda_offpolicy(agent, env)} for env in LOCOMOTION}
