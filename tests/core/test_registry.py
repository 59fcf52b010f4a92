"""Registries: lazy loading, unknown names, import failures, freshly installed plugins."""

from __future__ import annotations

import sys

import pytest

from noeira.core import get_backend, get_graph_backend, list_plugins, make_agent, make_env, registry
from noeira.core.errors import PluginLoadError, UnknownPluginError


def test_core_registers_backends_and_eager() -> None:
    names = {p.name: p.distribution for p in list_plugins()["backends"]}
    assert names["cpu"] == names["cuda"] == names["auto"] == "noeira-core"
    assert [p.name for p in list_plugins("graph")["graph"] if p.distribution == "noeira-core"] == ["eager"]
    assert get_backend("cpu").device.type == "cpu"
    assert get_backend("auto").name in ("cpu", "cuda")
    assert get_graph_backend("eager").name == "eager"


def test_list_plugins_has_every_kind() -> None:
    assert set(list_plugins()) == {"backends", "graph", "envs", "agents", "physics", "robots", "networks"}


def test_unknown_name_lists_installed_and_closest() -> None:
    with pytest.raises(UnknownPluginError) as err:
        make_env("corridr")
    msg = str(err.value)
    assert "unknown env 'corridr'" in msg and "did you mean 'corridor'" in msg and "installed:" in msg
    assert "corridor" in msg.split("installed:")[1]


def test_unknown_backend_and_graph() -> None:
    with pytest.raises(UnknownPluginError, match="unknown backend 'tpu'.*installed: auto, cpu, cuda"):
        get_backend("tpu")
    with pytest.raises(UnknownPluginError, match="unknown graph backend 'eagre'; did you mean 'eager'"):
        get_graph_backend("eagre")


def test_only_the_chosen_plugin_is_imported(install_dist) -> None:
    install_dist("lazy-check", {"noeira.envs": {"never-imported": "module_that_must_not_load:Env"}})
    make_env("corridor", num_envs=2, backend="cpu")
    assert "module_that_must_not_load" not in sys.modules
    assert "never-imported" in registry.names("envs")


def test_failing_import_names_distribution_and_cause(install_dist) -> None:
    install_dist("broken-dist", {"noeira.envs": {"broken": "no_such_module_xyz:Env"}})
    with pytest.raises(PluginLoadError) as err:
        make_env("broken")
    msg = str(err.value)
    assert "env 'broken' from distribution broken-dist failed to load" in msg
    assert "ModuleNotFoundError" in msg and "no_such_module_xyz" in msg


def test_missing_optional_dependency_names_the_extra(install_dist) -> None:
    install_dist("extra-dist", {"noeira.physics": {"needs-extra": "fancy_engine_pkg.core:Engine"}},
                 requires=["noeira-core", 'fancy-engine-pkg>=1; extra == "fancy"'])
    with pytest.raises(PluginLoadError, match=r"pip install 'extra-dist\[fancy\]'"):
        registry.load("physics", "needs-extra")


def test_plugin_installed_a_moment_ago_is_found(install_dist) -> None:
    assert "toy" not in registry.names("agents")
    install_dist("late-dist", {"noeira.agents": {"toy": "toy_plugins:ToyAgent"}})
    env = make_env("corridor", num_envs=3, backend="cpu")
    agent = make_agent("toy", env, horizon=4)
    assert agent.steps_per_collect == 12


def test_same_name_from_two_distributions_is_an_error(install_dist) -> None:
    install_dist("dup-one", {"noeira.agents": {"twin": "toy_plugins:ToyAgent"}})
    install_dist("dup-two", {"noeira.agents": {"twin": "toy_plugins:ToyAgent"}})
    with pytest.raises(PluginLoadError, match="several distributions: dup-one, dup-two"):
        registry.load("agents", "twin")


def test_plugin_config_errors_carry_the_path(toy_dist) -> None:
    env = make_env("corridor", num_envs=2, backend="cpu")
    with pytest.raises(Exception, match=r"agent\.lrr: unknown key \(known keys: horizon, lr, gamma\)"):
        make_agent("toy", env, lrr=0.1)
    with pytest.raises(Exception, match=r"agent\.lr: expected a float, got 'fast'"):
        make_agent("toy", env, lr="fast")
    with pytest.raises(Exception, match=r"env\.length"):
        make_env("corridor", length=1)
    with pytest.raises(Exception, match=r"env\.num_envs: must be an integer >= 1"):
        make_env("corridor", num_envs=0)
