"""Train PPO on CartPole from Python, the way `noeira train` does, then use the policy.

    python examples/train_cartpole.py [--backend cpu|cuda|auto] [--steps N]
"""

from __future__ import annotations

import argparse

import torch

from noeira.core import make_env
from noeira.core.driver import resolve, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--steps", type=int, default=None, help="env steps (default: the recipe's)")
    args = parser.parse_args()

    raw = {"backend": args.backend, "env": {"name": "cartpole"}, "agent": {"name": "ppo"}}
    if args.steps:
        raw["run"] = {"total_steps": args.steps}
    cfg = resolve(raw)                       # the agent's recipe, then our values, checked
    record = train(cfg)                      # writes runs/cartpole-ppo-<time>/
    print("final evaluation:", record["final_eval"], "->", record["run_dir"])

    # The trained agent is in the checkpoint; act with it on a fresh batch of envs.
    from noeira.core import make_agent
    from noeira.core.driver import load_checkpoint

    env = make_env("cartpole", num_envs=4, backend=cfg.backend, seed=123)
    agent = make_agent("ppo", env, **{k: v for k, v in cfg.to_dict()["agent"].items() if k != "name"})
    agent.load_state_dict(load_checkpoint(record["run_dir"], map_location=env.device)["agent"])
    obs = env.reset(seed=123)
    total = torch.zeros(4, device=env.device)
    for _ in range(100):
        with torch.no_grad():
            action, _ = agent.act(obs, deterministic=True)  # a feed-forward policy: no state to carry
            result = env.step(action)
        total += result.reward
        obs = result.obs
    print("reward over 100 steps per env:", total.tolist())


if __name__ == "__main__":
    main()
