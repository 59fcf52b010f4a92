"""A2C: conformance, its own config and recipe, one unclipped update per rollout, solves CartPole."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import torch

from noeira.agents import a2c, ppo
from noeira.agents.a2c import A2C
from noeira.core import make_agent, make_env
from noeira.core.config import field_docs
from noeira.core.driver import resolve, train
from noeira.core.errors import ConfigError
from noeira.core.testing import check_agent

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("env_name,kw", [
    ("cartpole", {}),
    ("cartpole", {"optimizer": "adam", "norm_adv": True, "norm_obs": True}),
    ("pendulum", {"norm_reward": True, "bf16": True}),
])
def test_check_agent(env_name: str, kw: dict) -> None:
    env = make_env(env_name, num_envs=8, backend="cpu", seed=0)
    check_agent(make_agent("a2c", env, **kw), env)


def test_one_plain_gradient_step_per_rollout() -> None:
    """learn() equals one hand-written A2C step: -A log pi + vf_coef * 0.5 (V - R)^2, SGD-free check
    via the gradient the optimizer receives."""
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    agent = make_agent("a2c", env, horizon=5, max_grad_norm=0.0, ent_coef=0.01)
    env.reset(seed=0)
    agent.collect(env)
    buf, pol = agent.rollout.buf, agent.rollout.policy
    buf.compute_advantages(agent.config.gamma, agent.config.gae_lambda)
    obs, act = buf.obs.view(20, -1), buf.actions.view(20)
    logp, ent, v = pol.evaluate(obs, act)
    adv, ret = buf.advantages.view(20), buf.returns.view(20)
    ref_loss = -(adv * logp).mean() - 0.01 * ent.mean() + 0.5 * 0.5 * (v - ret).square().mean()
    ref_grads = torch.autograd.grad(ref_loss, list(pol.parameters()))
    steps = []
    agent.optimizer.step = lambda *a, **k: steps.append(1)  # type: ignore[method-assign]
    metrics = agent.learn()
    assert len(steps) == 1
    for p, g in zip(pol.parameters(), ref_grads, strict=True):
        torch.testing.assert_close(p.grad, g)
    torch.testing.assert_close(metrics["policy_loss"], -(adv * logp).mean().detach())


def test_config_and_recipe() -> None:
    docs = field_docs(A2C.Config)
    missing = [f.name for f in attrs.fields(A2C.Config) if not docs.get(f.name)]
    assert not missing, f"undocumented A2C.Config fields: {missing}"
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match="agent.optimizer"):
        make_agent("a2c", env, optimizer="sgd")
    with pytest.raises(ConfigError, match="unknown key"):
        make_agent("a2c", env, clip_coef=0.2)  # no clipping in A2C
    with pytest.raises(ConfigError, match="unknown key"):
        make_agent("a2c", env, advantage="puff")  # one on-policy update: puff would equal GAE
    assert isinstance(make_agent("a2c", env).optimizer, torch.optim.RMSprop)
    cfg = resolve({"backend": "cpu", "agent": {"name": "a2c"}})
    assert cfg.agent.config.horizon == a2c.recipe("cartpole", "cpu")["agent"]["horizon"]
    assert "noeira.agents.ppo" not in [c.__module__ for c in A2C.__mro__], "A2C shares PPO's code by functions"


@pytest.mark.slow
def test_a2c_solves_cartpole(tmp_path: Path) -> None:
    cfg = resolve({"backend": "cpu", "agent": {"name": "a2c"}, "run": {"progress": False, "seed": 0}})
    record = train(cfg, run_dir=tmp_path / "a2c")
    assert record["final_eval"]["mean_return"] >= 475, record["final_eval"]


def test_recipe_scales_with_the_users_num_envs() -> None:
    """A2C takes PPO's recipe logic with its own table: the run keeps its iterations."""
    base = a2c.recipe("cartpole", "cuda")
    scaled = a2c.recipe("cartpole", "cuda", num_envs=4 * base["env"]["num_envs"])
    assert scaled["run"]["total_steps"] == 4 * base["run"]["total_steps"]
    assert scaled["agent"] == base["agent"] and base["agent"]["horizon"] != ppo.recipe("cartpole", "cuda")["agent"]["horizon"]
