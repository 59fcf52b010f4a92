"""Convolutional networks (``nature-cnn``, ``impala-cnn``), the ``torso+top`` seam that stacks one under
a recurrent network, and PPO on Atari frames with them (uint8 frames stored and passed as they are)."""

from __future__ import annotations

import pytest
import torch

from noeira.agents.cnn import network_class
from noeira.core import ConfigError, make_agent, make_env
from noeira.core.contracts import NetworkSpec
from noeira.core.testing import check_agent, check_network

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(("name", "shape", "options"), [
    ("nature-cnn", (4, 44, 44), {}),
    ("impala-cnn", (4, 24, 24), {}),
    ("impala-cnn", (2, 3, 24, 24), {"norm": "layer", "channels": [8, 16]}),  # RGB stack: 6 channels
    ("impala-cnn+mingru", (4, 24, 24), {}),
    ("nature-cnn+lstm", (4, 44, 44), {"torso_hidden_sizes": [64], "top": {"forget_bias": 0.5}}),
])
def test_networks_keep_the_contract(name: str, shape: tuple[int, ...], options: dict) -> None:
    check_network(network_class(name), observation_shape=shape, hidden_sizes=(32,), activation="relu",
                  options=options)


def test_the_architectures() -> None:
    spec = NetworkSpec((4, 84, 84), {"q": 6}, torch.device("cpu"), hidden_sizes=(512,), activation="relu")
    nature = network_class("nature-cnn")(spec)
    assert nature.conv_dim == 64 * 7 * 7 and nature.feature_dim == 512  # Mnih et al.'s 3136 -> 512
    impala = network_class("impala-cnn")(spec)
    assert sum(isinstance(m, torch.nn.Conv2d) for m in impala.modules()) == 15
    assert impala.conv_dim == 32 * 11 * 11
    layer = network_class("nature-cnn")(NetworkSpec((4, 84, 84), {"q": 6}, torch.device("cpu"), hidden_sizes=(512,),
                                                    options={"norm": "layer"}))
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in layer.modules()) == 4


def test_uint8_frames_are_scaled_inside() -> None:
    net = network_class("nature-cnn")(NetworkSpec((4, 36, 36), {"q": 3}, torch.device("cpu"), hidden_sizes=(16,)))
    frames = torch.randint(0, 256, (2, 4, 36, 36), dtype=torch.uint8)
    with torch.no_grad():
        assert torch.allclose(net(frames)[0]["q"], net(frames.float() / 255)[0]["q"], atol=1e-6)


def test_a_torso_must_have_features() -> None:
    with pytest.raises(ConfigError, match="'mlp' cannot be a torso"):
        network_class("mlp+lstm")
    with pytest.raises(ConfigError, match="nature-cnn needs image observations"):
        network_class("nature-cnn")(NetworkSpec((8,), {"q": 2}, torch.device("cpu")))


@pytest.mark.parametrize("network", ["nature-cnn", "impala-cnn+mingru"])
def test_ppo_on_atari_frames(network: str) -> None:
    pytest.importorskip("ale_py")
    env = make_env("atari:breakout", num_envs=2, backend="cpu", seed=0, vectorization="sync")
    agent = make_agent("ppo", env, network=network, hidden_sizes=[32], activation="relu", horizon=8,
                       num_minibatches=2, update_epochs=1)
    assert agent.rollout.buf.obs.dtype == torch.uint8  # the frames, not 28,224 floats a step
    check_agent(agent, env)
    env.close()


def test_the_atari_recipe_is_cleanrls() -> None:
    from noeira.core.driver import resolve

    cfg = resolve({"env": {"name": "atari:pong"}, "agent": {"name": "ppo"}, "backend": "cpu"})
    a = cfg.agent.config
    assert (cfg.num_envs, a.horizon, a.network, a.hidden_sizes, a.clip_coef, a.ent_coef, a.reward_clamp) == (
        8, 128, "nature-cnn", (512,), 0.1, 0.01, 1.0)
    scaled = resolve({"env": {"name": "atari:pong", "num_envs": 16}, "agent": {"name": "ppo"}, "backend": "cpu"})
    assert scaled.run.total_steps == 2 * cfg.run.total_steps  # the same iterations at twice the envs
