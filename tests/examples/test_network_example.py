"""The example policy network (examples/plugins/network, ``shared-mlp``): the conformance kit,
its own options, and PPO using it by name (``agent.network=shared-mlp``)."""

from __future__ import annotations

import pytest
import torch

from noeira.core import ConfigError, make_agent, make_env
from noeira.core.testing import check_agent, check_network

pytestmark = pytest.mark.usefixtures("examples", "one_thread")


@pytest.mark.parametrize("options", [{}, {"layer_norm": True}])
def test_shared_mlp_passes_the_conformance_kit(options: dict[str, bool]) -> None:
    check_network("shared-mlp", observation_shape=(3, 2), hidden_sizes=(16, 8), options=options)


def test_one_trunk_feeds_every_head() -> None:
    from acme_shared_mlp.network import SharedMLP

    from noeira.core.contracts import NetworkSpec

    spec = NetworkSpec(observation_shape=(4,), outputs={"actor": 2, "critic": 1}, device=torch.device("cpu"),
                       hidden_sizes=(8,), output_gains={"actor": 0.01})
    net = SharedMLP(spec)
    out, state = net(torch.randn(5, 4), None, None)
    assert state is None and set(out) == {"actor", "critic"}
    critic_only, _ = net(torch.randn(5, 4), None, None, heads=("critic",))
    assert set(critic_only) == {"critic"}
    out["critic"].sum().backward()  # the critic's gradient reaches the shared trunk
    assert net.trunk[0].weight.grad is not None and net.heads["actor"].weight.grad is None
    assert net.heads["actor"].weight.abs().max() < net.heads["critic"].weight.abs().max()  # gain 0.01 vs 1


@pytest.mark.parametrize(("spec_kw", "message"), [
    ({"options": {"layer_nrom": True}}, "agent.network_options.layer_nrom: unknown key"),
    ({"activation": "softsign"}, "agent.activation: shared-mlp knows tanh, relu, gelu, silu; got 'softsign'"),
    ({"hidden_sizes": ()}, "agent.hidden_sizes: shared-mlp needs one or more layers"),
])
def test_bad_settings_are_one_line_config_errors(spec_kw: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_network("shared-mlp", **spec_kw)
    assert message in str(err.value)


def test_ppo_builds_on_it_by_name(backend_name: str) -> None:
    env = make_env("cartpole", num_envs=4, backend=backend_name, seed=0)
    agent = make_agent("ppo", env, network="shared-mlp", network_options={"layer_norm": True}, hidden_sizes=[16],
                       horizon=8, num_minibatches=2, update_epochs=1)
    check_agent(agent, env)


def test_noeira_train_runs_ppo_with_it(train) -> None:
    run, record = train("env=cartpole", "agent=ppo", "agent.network=shared-mlp", "agent.hidden_sizes=[16]",
                        "agent.horizon=16", steps=256)
    assert record["outcome"] == "completed"
    assert record["versions"]["acme-shared-mlp"] == "0.1.0"  # the network's distribution took part
    assert 'network = "shared-mlp"' in (run / "config.toml").read_text()
