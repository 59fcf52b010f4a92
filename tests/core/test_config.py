"""Config: overrides, TOML, strict types, paths in errors, docs of fields."""

from __future__ import annotations

import attrs
import pytest

from noeira.core.config import (
    GraphConfig,
    RunSection,
    above,
    at_least,
    field_docs,
    one_of,
    parse_overrides,
    structure,
    within,
)
from noeira.core.driver import resolve
from noeira.core.errors import ConfigError


def test_overrides_parse_values_as_toml() -> None:
    out = parse_overrides(["env=cartpole", "agent.lr=3e-4", "env.num_envs=4096", "run.progress=false",
                           "agent.hidden=[64, 64]", "backend=cpu", "graph=eager"])
    assert out == {"env": {"name": "cartpole", "num_envs": 4096}, "agent": {"lr": 3e-4, "hidden": [64, 64]},
                   "run": {"progress": False}, "backend": "cpu", "graph": {"name": "eager"}}


@pytest.mark.parametrize("bad", ["novalue", "=3", ""])
def test_malformed_override(bad: str) -> None:
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_overrides([bad])


def test_override_below_a_value_is_an_error() -> None:
    with pytest.raises(ConfigError, match="backend: is a value, not a table"):
        parse_overrides(["backend=cpu", "backend.x=1"])


@attrs.frozen
class _Validated:
    kind: str = attrs.field(default="a", validator=one_of("a", "b"))
    steps: int = attrs.field(default=1, validator=at_least(1))
    widths: tuple[int, ...] = attrs.field(default=(4,), validator=at_least(1))
    lr: float = attrs.field(default=0.1, validator=above(0))
    gamma: float = attrs.field(default=0.5, validator=within(0, 1))
    momentum: float = attrs.field(default=0.5, validator=within(0, 1, open_high=True))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "c"}, "agent.kind: must be one of a, b, got 'c'"),
        ({"steps": 0}, "agent.steps: must be >= 1, got 0"),
        ({"widths": [4, 0]}, "agent.widths: must be >= 1, got [4, 0]"),
        ({"lr": 0.0}, "agent.lr: must be > 0, got 0.0"),
        ({"lr": float("nan")}, "agent.lr: must be > 0, got nan"),
        ({"gamma": 1.5}, "agent.gamma: must lie in [0, 1], got 1.5"),
        ({"momentum": 1.0}, "agent.momentum: must lie in [0, 1), got 1.0"),
    ],
)
def test_validators_name_the_key(data, message) -> None:
    """core.config's validators: a bad value is one line naming its key and the rule, at structure time."""
    with pytest.raises(ConfigError) as err:
        structure(data, _Validated, "agent")
    assert str(err.value) == message
    assert structure({"kind": "b", "steps": 3, "gamma": 1.0, "momentum": 0.0}, _Validated, "agent").steps == 3


def test_strict_types_with_paths() -> None:
    with pytest.raises(ConfigError, match=r"run\.seed: expected an integer, got 'x'"):
        structure({"seed": "x"}, RunSection, "run")
    with pytest.raises(ConfigError, match=r"run\.progress: expected true or false, got 1"):
        structure({"progress": 1}, RunSection, "run")
    with pytest.raises(ConfigError, match=r"graph\.capture_envv: unknown key"):
        structure({"capture_envv": True}, GraphConfig, "graph")
    assert structure({"total_steps": 1e5}, RunSection, "run").total_steps == 100_000


def test_resolve_errors(toy_dist) -> None:
    with pytest.raises(ConfigError, match=r"^agnet: unknown key"):
        resolve({"agnet": {}})
    with pytest.raises(ConfigError, match=r"run\.total_steps: must be >= 1"):
        resolve({"agent": {"name": "toy"}, "env": {"name": "corridor"}, "run": {"total_steps": 0}})
    with pytest.raises(ConfigError, match=r"env\.num_envs: expected an integer >= 1, got 'many'"):
        resolve({"agent": {"name": "toy"}, "env": {"name": "corridor", "num_envs": "many"}})
    with pytest.raises(ConfigError, match=r"env\.lenght: unknown key"):
        resolve({"agent": {"name": "toy"}, "env": {"name": "corridor", "lenght": 3}})


def test_recipe_is_layered_below_user_values(toy_dist) -> None:
    cfg = resolve({"backend": "cpu", "agent": {"name": "toy"}, "env": {"name": "corridor"}})
    assert cfg.num_envs == 8 and cfg.run.total_steps == 2048  # from the toy distribution's noeira_recipe
    cfg = resolve({"backend": "cpu", "agent": {"name": "toy", "lr": 0.5}, "env": {"name": "corridor", "num_envs": 3}})
    assert cfg.num_envs == 3 and cfg.agent.config.lr == 0.5 and cfg.run.total_steps == 2048


def test_config_round_trips_through_toml(toy_dist, tmp_path) -> None:
    import tomllib

    cfg = resolve({"backend": "cpu", "agent": {"name": "toy"}, "env": {"name": "corridor", "length": 5}})
    again = resolve(tomllib.loads(cfg.to_toml()))
    assert again == cfg


def test_field_docs_read_the_string_below_each_field() -> None:
    @attrs.frozen
    class C:
        a: int = 1
        """The a."""
        b: float = 2.0
        c: str = "x"
        """The c,
        on two lines."""

    assert field_docs(C) == {"a": "The a.", "c": "The c, on two lines."}
    assert field_docs(RunSection)["total_steps"].startswith("Env steps to train for")


def test_a_malformed_list_value_is_one_toml_error() -> None:
    with pytest.raises(ConfigError) as err:
        parse_overrides(["agent.hidden_sizes=[64,64"])
    msg = str(err.value)
    assert msg.startswith("agent.hidden_sizes: '[64,64' is not a valid TOML value") and "\n" not in msg
    assert parse_overrides(["env.name=gym:CartPole-v1"]) == {"env": {"name": "gym:CartPole-v1"}}  # plain text stays text
