"""The conformance kit passes good plugins and catches broken ones."""

from __future__ import annotations

import pytest
import torch
from acme_corridor.env import Corridor

from noeira.core import get_backend, get_graph_backend, make_agent, make_env
from noeira.core.spaces import Box, Discrete, MultiDiscrete
from noeira.core.testing import check_agent, check_backend, check_env, check_graph_backend

CPU = get_backend("cpu")
CFG = Corridor.Config(length=4)


def corridor(cls=Corridor):
    return lambda seed: cls(CFG, num_envs=6, backend=CPU, seed=seed)


def test_good_plugins_pass(toy_dist) -> None:
    check_env("corridor", num_envs=4, backend="cpu", length=5)
    check_backend("cpu")
    check_graph_backend(get_graph_backend("eager"), "cpu")
    env = make_env("corridor", num_envs=4, backend="cpu")
    check_agent(make_agent("toy", env), env)


def test_catches_fresh_observation_buffers() -> None:
    class Fresh(Corridor):
        def step(self, action):
            r = super().step(action)
            r.obs = r.obs.clone()
            return r

    with pytest.raises(AssertionError, match="same buffer"):
        check_env(corridor(Fresh))


def test_catches_nondeterministic_reset() -> None:
    class Noisy(Corridor):
        def _reset_envs(self, mask):
            self.generator.seed()
            super()._reset_envs(mask)

    with pytest.raises(AssertionError, match="not deterministic"):
        check_env(corridor(Noisy))


def test_catches_wrong_time_limit() -> None:
    class Liar(Corridor):  # reports 16 but truncates at 17
        def step(self, action):
            self.max_episode_steps = 17
            r = super().step(action)
            self.max_episode_steps = 16
            return r

    with pytest.raises(AssertionError, match="truncated at t="):
        check_env(corridor(Liar), steps=40)


def test_catches_broken_set_state() -> None:
    class NoSet(Corridor):
        def _set_state(self, state):
            pass

    with pytest.raises(AssertionError, match="round-trip"):
        check_env(corridor(NoSet))


def test_catches_miscounted_episodes() -> None:
    class Forgetful(Corridor):
        def pop_episode_stats(self):
            s = super().pop_episode_stats()
            return {**s, "count": s["count"] * 0}

    with pytest.raises(AssertionError, match="episode count"):
        check_env(corridor(Forgetful))


class Gusty(Corridor):
    """A corridor whose wind comes from a generator of its own: state a checkpoint must name."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.wind = torch.Generator(device=self.device).manual_seed(7)

    def _advance(self, action):
        gust = torch.rand(self.num_envs, generator=self.wind, device=self.device) < 0.3
        return super()._advance(torch.where(gust, 0, action))


def test_catches_state_a_checkpoint_leaves_out() -> None:
    with pytest.raises(AssertionError, match=r"restored by load_state_dict\(state_dict\(\)\) steps differently"):
        check_env(corridor(Gusty), steps=10)

    class Named(Gusty):
        def _extra_state(self):
            return {**super()._extra_state(), "wind": self.wind}

    check_env(corridor(Named), steps=10)


def test_catches_agent_that_does_not_restore(toy_dist) -> None:
    env = make_env("corridor", num_envs=4, backend="cpu")
    agent = make_agent("toy", env, lr=0.5)
    agent.load_state_dict = lambda state: None
    with pytest.raises(AssertionError, match="does not restore"):
        check_agent(agent, env)


def test_catches_graph_backend_that_replays_stale_results() -> None:
    class Stale:
        name = "stale"

        def available(self, backend):
            return True

        def wrap(self, fn, backend=None):
            cache = {}

            def call():
                if "out" not in cache:
                    cache["out"] = fn()
                return cache["out"]
            return call

    with pytest.raises(AssertionError, match="differs from eager"):
        check_graph_backend(Stale(), "cpu")


def test_spaces_sample_and_contain() -> None:
    g = torch.Generator().manual_seed(0)
    box = Box(-1.0, 2.0, shape=(3,))
    assert box.contains(box.sample(100, g)) and not box.contains(torch.full((1, 3), 5.0))
    d = Discrete(4, start=1)
    x = d.sample(1000, g)
    assert d.contains(x) and int(x.min()) == 1 and int(x.max()) == 4
    md = MultiDiscrete([2, 5])
    y = md.sample(1000, g)
    assert md.contains(y) and y[:, 1].max() == 4 and not md.contains(torch.tensor([[2, 0]]))
    with pytest.raises(ValueError, match="low must be <= high"):
        Box(1.0, 0.0, shape=(1,))


def test_encoded_space_and_an_agent_that_decodes_it() -> None:
    """An Encoded observation: codes of its shape and dtype, decoded into its float Box; PPO
    reads the decoded observation (its network is built for the decoded shape); an off-policy
    agent refuses it in one line."""
    from noeira.core import ConfigError, Encoded, EnvSpec, make_agent

    decoded = Box(0.0, 1.0, shape=(6,))
    calls = []

    def decode(code: torch.Tensor) -> torch.Tensor:  # two bytes -> a one-hot of each (3 + 3)
        calls.append(tuple(code.shape))
        return torch.cat([torch.nn.functional.one_hot(code[..., i].long(), 3) for i in range(2)], -1).float()

    space = Encoded((2,), torch.uint8, decoded, decode)
    codes = space.sample(50, torch.Generator().manual_seed(0))
    assert space.contains(codes) and not space.contains(codes.float()) and not space.contains(codes[:, :1])
    with pytest.raises(ValueError, match="integer type"):
        Encoded((2,), torch.float32, decoded, decode)
    spec = EnvSpec(name="coded", num_envs=4, observation_space=space, action_space=Discrete(3),
                   device=torch.device("cpu"))
    agent = make_agent("ppo", spec, backend="cpu", horizon=4, num_minibatches=2)
    assert agent.rollout.policy.obs_dim == 6
    action, _ = agent.act(torch.tensor([[0, 2], [1, 1], [2, 0], [0, 0]], dtype=torch.uint8), None,
                          torch.ones(4, dtype=torch.bool))
    assert action.shape == (4,) and calls[-1] == (4, 2)
    with pytest.raises(ConfigError, match="needs float observations"):
        make_agent("dqn", spec, backend="cpu")
