"""The contracts' optional members (``noeira.core.contracts``): plugins written with the
required members alone work (the defaults apply), declared members are read, and the
conformance kit checks an optional member's type where a plugin has it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from acme_corridor.env import Corridor

from noeira.core import contracts, get_backend, get_graph_backend, make_env, make_physics
from noeira.core.driver import resolve, train
from noeira.core.testing import check_env, check_graph_backend, check_network, check_physics

CPU = get_backend("cpu")
BARE = {"noeira.envs": {"bare-env": "bare_plugins:BareEnv"},
        "noeira.networks": {"bare-net": "bare_plugins:BareNetwork"},
        "noeira.graph": {"bare-graph": "bare_plugins:BareGraph"},
        "noeira.physics": {"bare": "bare_plugins:BarePhysics"}}


@pytest.fixture
def bare(install_dist) -> None:
    """Registers tests/bare_plugins.py's env, network, graph backend and physics engine."""
    install_dist("bare-plugins", BARE)


def _pointmass_model() -> str:
    from acme_reach.env import MODEL

    return MODEL


def test_defaults_apply_to_bare_plugins(bare) -> None:
    from bare_plugins import BareEnv, BareGraph, BareNetwork, BarePhysics

    env = make_env("bare-env", num_envs=3, backend="cpu", length=4)
    assert contracts.episode_stat_keys(env) == ()
    assert contracts.episode_metrics(env, {"episode_return": 1.0}) == {}
    assert contracts.render_fps(env) is None
    with pytest.raises(NotImplementedError, match="cannot render"):
        contracts.render(env)
    config = BareEnv.Config(length=4)
    assert contracts.evaluation_config(BareEnv, config) is config
    assert not contracts.reads_code(BareNetwork) and not contracts.reads_raw(BareNetwork)
    assert not contracts.is_torso(BareNetwork) and not contracts.takes_heads(BareNetwork.forward)
    assert contracts.graph_warmup(BareGraph()) == 0 and contracts.graph_reference(BareGraph()) is None
    engine = make_physics("bare", _pointmass_model(), num_worlds=2, backend="cpu")
    assert isinstance(engine, BarePhysics) and contracts.physics_capture_safe(engine) is False
    contracts.close_physics(engine)  # nothing to close: no error
    env.close()


def test_declared_members_are_read() -> None:
    cartpole = make_env("cartpole", num_envs=2, backend="cpu")
    assert contracts.render_fps(cartpole) == 50.0 and tuple(contracts.render(cartpole).shape)[-1] == 3
    assert contracts.episode_stat_keys(make_env("corridor", num_envs=2, backend="cpu", length=4)) == ()
    from acme_corridor.memory import CueCorridor

    assert contracts.episode_stat_keys(CueCorridor(CueCorridor.Config(), num_envs=2, backend=CPU)) == ("correct",)
    from noeira.agents.cnn import NatureCNN
    from noeira.agents.networks import LSTM, MLP

    assert contracts.reads_code(LSTM) and not contracts.reads_code(MLP)
    assert contracts.reads_raw(NatureCNN) and contracts.is_torso(NatureCNN) and not contracts.is_torso(MLP)
    assert contracts.takes_heads(MLP.forward) and contracts.takes_heads(LSTM.forward_sequence)
    engine = make_physics("pointmass", _pointmass_model(), num_worlds=2, backend="cpu")
    assert contracts.physics_capture_safe(engine) is True
    check_physics(engine)
    mujoco = make_physics("mujoco", _pointmass_model(), num_worlds=3, backend="cpu")
    assert contracts.physics_capture_safe(mujoco) is False
    check_physics(mujoco)  # closes its worker threads


def test_bare_plugins_pass_the_kit(bare) -> None:
    from bare_plugins import BareGraph, BareNetwork

    check_env("bare-env", num_envs=4, backend="cpu", length=4)
    check_network(BareNetwork)
    check_graph_backend(BareGraph(), "cpu")
    check_physics(make_physics("bare", _pointmass_model(), num_worlds=3, backend="cpu"))
    # an env built on a bare engine: not capture-safe (the default), closes without close()
    check_env("reach", num_envs=3, backend="cpu", physics="bare")
    assert make_env("reach", num_envs=2, backend="cpu", physics="bare").capture_safe is False


def test_bare_plugins_train(bare, tmp_path: Path) -> None:
    """PPO with the bare network on the bare env under the bare graph backend: the driver and the
    agent ask for no optional member (episode means come from pop_episode_stats, the heads the
    policy wants are computed whole, evaluation uses the training config)."""
    from bare_plugins import BareGraph

    BareGraph.calls = 0
    cfg = resolve({"backend": "cpu", "graph": {"name": "bare-graph"},
                   "env": {"name": "bare-env", "num_envs": 4, "length": 3},
                   "agent": {"name": "ppo", "network": "bare-net", "horizon": 8, "update_epochs": 1,
                             "num_minibatches": 1, "hidden_sizes": [8]},
                   "run": {"total_steps": 96, "log_interval": 1, "eval_episodes": 2}})
    record = train(cfg, run_dir=tmp_path / "run")
    assert BareGraph.calls >= 2 * 3  # collect and learn, three iterations, through the bare backend
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any(m.get("episodes", 0) > 0 and "episode_return" in m for m in lines), lines
    assert record["outcome"] == "completed"


def test_kit_checks_optional_members_types() -> None:
    cpu = CPU
    cfg = Corridor.Config(length=4)

    class ListKeys(Corridor):
        episode_stat_keys = ["reached"]  # a list, not a tuple

        def _episode_values(self):
            return {"reached": torch.ones(self.num_envs)}

    with pytest.raises(AssertionError, match="episode_stat_keys must be a tuple"):
        check_env(lambda seed: ListKeys(cfg, num_envs=4, backend=cpu, seed=seed))

    class Undeclared(Corridor):
        def pop_episode_stats(self):
            return {**super().pop_episode_stats(), "bonus_sum": torch.zeros(())}

    with pytest.raises(AssertionError, match="pop_episode_stats keys"):
        check_env(lambda seed: Undeclared(cfg, num_envs=4, backend=cpu, seed=seed))

    class BadFps(Corridor):
        render_fps = 0

    with pytest.raises(AssertionError, match="render_fps"):
        check_env(lambda seed: BadFps(cfg, num_envs=4, backend=cpu, seed=seed))

    class BadMetrics(Corridor):
        def episode_metrics(self, means):
            return {"score": "high"}

    with pytest.raises(AssertionError, match="episode_metrics"):
        check_env(lambda seed: BadMetrics(cfg, num_envs=4, backend=cpu, seed=seed))


def test_kit_checks_heads_and_flags() -> None:
    from noeira.agents.networks import MLP

    class WrongHeads(MLP):
        def forward(self, obs, state=None, done=None, heads=None):
            out, state = super().forward(obs, state, done)
            if heads is not None:
                out = {k: v + 1 for k, v in out.items()}
            return out, state

    with pytest.raises(AssertionError, match="heads="):
        check_network(WrongHeads)

    class NotABool(MLP):
        reads_code = 1

    with pytest.raises(AssertionError, match="reads_code must be a bool"):
        check_network(NotABool)


def test_kit_checks_graph_warmup_and_reference() -> None:
    eager = get_graph_backend("eager")

    class BadWarmup(type(eager)):
        warmup = -1

    with pytest.raises(AssertionError, match="warmup"):
        check_graph_backend(BadWarmup(), "cpu")

    class BrokenReference(type(eager)):
        def reference(self, fn, backend=None):
            return lambda: {"sum": torch.zeros(())}  # never runs the step

    with pytest.raises(AssertionError, match="reference, call 0"):
        check_graph_backend(BrokenReference(), "cpu")


def test_kit_checks_physics(bare) -> None:
    from bare_plugins import BarePhysics

    class ResetsAll(BarePhysics):
        def reset(self, mask=None):
            super().reset(None)

    model = _pointmass_model()
    with pytest.raises(AssertionError, match="other worlds"):
        check_physics(ResetsAll(BarePhysics.Config(), model=model, num_worlds=3, backend=CPU))

    class Unsafe(BarePhysics):
        capture_safe = "yes"

    with pytest.raises(AssertionError, match="capture_safe must be a bool"):
        check_physics(Unsafe(BarePhysics.Config(), model=model, num_worlds=3, backend=CPU))
