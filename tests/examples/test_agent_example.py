"""The example agent (examples/plugins/agent, ``reinforce``): the conformance kit on discrete and
continuous actions, its recipe through the ``noeira_recipe`` hook, and `noeira train`."""

from __future__ import annotations

import json

import pytest
import torch

from noeira.core import Box, ConfigError, EnvSpec, MultiDiscrete, get_backend, make_agent, make_env
from noeira.core.testing import check_agent

pytestmark = pytest.mark.usefixtures("examples", "one_thread")


@pytest.mark.parametrize("env_name", ["cartpole", "reach"])  # Discrete(2); Box(-1, 1, (2,))
def test_reinforce_passes_the_conformance_kit(env_name: str, backend_name: str) -> None:
    env = make_env(env_name, num_envs=4, backend=backend_name, seed=0)
    check_agent(make_agent("reinforce", env, horizon=8, hidden_sizes=[16]), env)


def test_reinforce_loss_is_the_policy_gradient_of_returns_to_go() -> None:
    """One learn on a stored rollout: returns to go G_t = r_t + gamma (1 - done_t) G_t+1, and the
    loss -mean(log pi(a_t | s_t) (G_t - mean G) / std G), from the same stored actions."""
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    agent = make_agent("reinforce", env, horizon=4, gamma=0.5, lr=0.05, anneal_lr=False, max_grad_norm=0)
    agent.collect(env)
    agent.rewards.copy_(torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 4.0], [1.0, 0.0]]))
    agent.dones.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))
    with torch.no_grad():
        log_prob = torch.log_softmax(agent.policy(agent.obs.view(8, -1)), -1).gather(-1, agent.actions.view(8, 1))
    weights = [p.detach().clone() for p in agent.policy.parameters()]
    metrics = agent.learn()
    returns = torch.tensor([[1.5, 1.0], [1.0, 2.0], [1.5, 4.0], [1.0, 0.0]])
    assert torch.allclose(agent.returns, returns)
    advantage = (returns - returns.mean()) / (returns.std() + 1e-8)
    assert torch.allclose(metrics["policy_loss"], -(log_prob.view(4, 2) * advantage).mean())
    assert all(not torch.equal(w, p) for w, p in zip(weights, agent.policy.parameters(), strict=True))


def test_unsupported_spaces_are_one_line_config_errors() -> None:
    spec = EnvSpec(name="grid", num_envs=2, observation_space=Box(0, 1, (3,)), action_space=MultiDiscrete([2, 3]),
                   device=torch.device("cpu"))
    with pytest.raises(ConfigError, match="agent reinforce: actions must be Discrete or Box; env 'grid' has"):
        make_agent("reinforce", spec, backend=get_backend("cpu"))


def test_noeira_train_applies_the_recipe(train) -> None:
    """`noeira train agent=reinforce env=cartpole` takes the distribution's recipe (num_envs,
    horizon, lr) below the user's overrides, and anneals the learning rate to 0 over the run."""
    run, record = train("agent=reinforce", "env=cartpole", "agent.horizon=16", steps=16 * 16 * 4)
    assert record["recipes"] == ["acme-reinforce-recipes (acme-reinforce)"]
    config = (run / "config.toml").read_text()
    assert "num_envs = 4" in config and "horizon = 16" in config and "lr = 0.005" in config  # overrides win
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"policy_loss", "entropy", "return_to_go", "grad_norm", "lr"} <= set(rows[-1])
    assert rows[-1]["lr"] == pytest.approx(0.005 * 1 / 16, rel=1e-5)  # the last of 16 updates


@pytest.mark.slow
def test_the_recipe_solves_cartpole(train) -> None:
    _, record = train("agent=reinforce", "env=cartpole", "env.num_envs=16", "run.eval_episodes=10", "run.seed=0",
                      steps=500_000)
    assert record["final_eval"]["mean_return"] >= 475
