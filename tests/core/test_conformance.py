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
