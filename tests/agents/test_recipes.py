"""The agents' recipes: every agent x classic-control env pair the agent's action space allows
has a tuned recipe on cpu (and on cuda), reached through the ``noeira_recipe`` hook, whose keys
the agent and env accept (resolved and built as ``noeira train`` would, without training); a
pair without a recipe says so in one line. Whether they solve is ``benchmarks/solve.py``'s job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from noeira.agents.offpolicy import OffPolicyAgent
from noeira.core import Discrete, make_env, registry
from noeira.core.driver import build, resolve, train
from noeira.core.plugins import get_plugin_manager, hookimpl
from noeira.core.recipes import find_recipes, merged_recipe

pytestmark = pytest.mark.usefixtures("one_thread")

AGENTS = ("ppo", "a2c", "dqn", "sac", "td3", "ddpg")
CLASSIC = ("cartpole", "acrobot", "mountaincar", "pendulum", "mountaincar-continuous")


def _discrete(env: str) -> bool:
    e = make_env(env, num_envs=1, backend="cpu", seed=0)
    try:
        return isinstance(e.action_space, Discrete)
    finally:
        e.close()


def allowed(agent: str, env: str) -> bool:
    """PPO and A2C take any action space; an off-policy agent either Discrete (DQN) or Box."""
    cls = registry.load("agents", agent)
    if isinstance(cls, type) and issubclass(cls, OffPolicyAgent):
        return cls.discrete == _discrete(env)
    return True


PAIRS = [(a, e) for a in AGENTS for e in CLASSIC if allowed(a, e)]


def test_the_pairs() -> None:
    """19 pairs: PPO and A2C on all five envs, DQN on the three discrete ones, SAC/TD3/DDPG on the two continuous."""
    assert len(PAIRS) == 19
    assert ("dqn", "pendulum") not in PAIRS and ("sac", "cartpole") not in PAIRS and ("ppo", "pendulum") in PAIRS


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
@pytest.mark.parametrize(("agent", "env"), PAIRS, ids=[f"{a}-{e}" for a, e in PAIRS])
def test_every_allowed_pair_has_a_tuned_recipe(agent: str, env: str, backend: str) -> None:
    """The agents' distribution serves a recipe for the pair, tuned for it (its own env and agent
    settings, not only a catch-all step budget)."""
    recipes = find_recipes(agent, env, backend)
    assert [r.distribution for r in recipes] == ["noeira-agents"], recipes
    values = merged_recipe(recipes)
    assert values["env"]["num_envs"] >= 1 and values["agent"], values
    assert values["run"]["total_steps"] > values["agent"].get("learning_starts", 0)


@pytest.mark.parametrize(("agent", "env"), PAIRS, ids=[f"{a}-{e}" for a, e in PAIRS])
def test_the_tuned_pairs_carry_no_note(agent: str, env: str) -> None:
    """Every classic pair's recipe solves (BENCHMARKS.md): none says otherwise."""
    assert [r.note for r in find_recipes(agent, env, "cpu")] == [None]


@pytest.mark.parametrize(("agent", "env"), [("dqn", "gym:LunarLander-v3"), ("sac", "swimmer"), ("td3", "reacher"),
                                            ("ddpg", "gym:Pendulum-v1"), ("redq", "mountaincar-continuous")])
def test_an_agents_catch_all_recipe_says_it_is_untested(agent: str, env: str) -> None:
    """An off-policy agent on an env it has no tuned recipe for gets only a step budget, and a note
    (a warning line when the run starts) that nothing was verified there."""
    (recipe,) = find_recipes(agent, env, "cpu")
    assert recipe.note.startswith("untested: no recipe of this agent was verified on this env")
    assert set(recipe.values) == {"run"}


@pytest.mark.parametrize(("agent", "env"), PAIRS, ids=[f"{a}-{e}" for a, e in PAIRS])
def test_recipes_resolve_and_build(agent: str, env: str) -> None:
    """``noeira train agent=A env=E backend=cpu`` resolves the cpu recipe (every key known to the
    agent, env and run, of the right type) and builds env and agent from it; the cuda recipe's
    keys resolve too (layered as user values over the cpu config, so this runs without a GPU)."""
    cfg = resolve({"backend": "cpu", "env": {"name": env}, "agent": {"name": agent}})
    cpu = merged_recipe(find_recipes(agent, env, "cpu"))
    assert cfg.recipes and cfg.num_envs == cpu["env"]["num_envs"] and cfg.run.total_steps == cpu["run"]["total_steps"]
    for key, value in cpu["agent"].items():
        got = getattr(cfg.agent.config, key)
        assert (list(got) if isinstance(got, tuple) else got) == value, key
    pieces = build(cfg)  # the agent's own checks (ConfigError) run in its constructor
    pieces.close()
    cuda = merged_recipe(find_recipes(agent, env, "cuda"))
    resolve({"backend": "cpu", "env": {**cuda.get("env", {}), "name": env},
             "agent": {**cuda.get("agent", {}), "name": agent}, "run": cuda.get("run", {}),
             "graph": cuda.get("graph", {})})


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no tuned recipe" in r.getMessage()]


def test_a_pair_without_a_recipe_warns_in_one_line(install_dist: Callable[..., Path], tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """An agent of another distribution (the test suite's toy agent, without its recipe hook) has
    no recipe for CartPole: one warning line; PPO has one: no warning."""
    install_dist("bare-agent", {"noeira.agents": {"bare": "toy_plugins:ToyAgent"}})
    run = {"total_steps": 16, "progress": False, "eval_episodes": 0}
    cfg = resolve({"backend": "cpu", "agent": {"name": "bare", "horizon": 4}, "env": {"name": "cartpole", "num_envs": 2},
                   "run": run})
    assert cfg.recipes == ()
    with caplog.at_level("WARNING", logger="noeira"):
        train(cfg, run_dir=tmp_path / "bare")
    (line,) = _warnings(caplog)
    assert "\n" not in line and "'bare'" in line and "'cartpole'" in line
    caplog.clear()
    cfg = resolve({"backend": "cpu", "agent": {"name": "ppo", "horizon": 4}, "env": {"name": "cartpole", "num_envs": 2},
                   "run": run})
    with caplog.at_level("WARNING", logger="noeira"):
        train(cfg, run_dir=tmp_path / "ppo")
    assert cfg.recipes and not _warnings(caplog)


class _NotePlugin:
    """A recipe plugin that knows its dqn-on-mountaincar recipe does not solve."""

    @hookimpl
    def noeira_recipe(self, agent: str, env: str, backend: str, num_envs: int | None) -> dict | None:
        if (agent, env) != ("dqn", "mountaincar"):
            return None
        return {"note": "not solved: a test's recipe", "run": {"log_interval": 4}}


def test_a_recipe_known_not_to_solve_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A recipe's note (what it is known not to do) is one warning line when a run starts, kept in
    record.json and shown by ``noeira train --help``; a recipe that solves has none."""
    from noeira.core.cli import main

    raw = {"backend": "cpu", "agent": {"name": "dqn"}, "env": {"name": "mountaincar", "num_envs": 2},
           "run": {"total_steps": 64, "progress": False, "eval_episodes": 0}}
    assert resolve(raw).recipe_notes == ()  # the shipped recipes solve
    pm = get_plugin_manager()
    pm.register(_NotePlugin(), name="note-recipes")
    try:
        cfg = resolve(raw)
        (note,) = cfg.recipe_notes
        assert note.startswith("not solved: a test's recipe (recipe of note-recipes")
        with caplog.at_level("WARNING", logger="noeira"):
            record = train(cfg, run_dir=tmp_path / "dqn")
        lines = [r.getMessage() for r in caplog.records if "not solved" in r.getMessage()]
        assert len(lines) == 1 and "\n" not in lines[0] and "'dqn'" in lines[0] and "'mountaincar'" in lines[0]
        assert record["recipe_notes"] == list(cfg.recipe_notes)
        assert resolve({"backend": "cpu", "agent": {"name": "dqn"}, "env": {"name": "cartpole"}}).recipe_notes == ()
        assert main(["train", "--help", "agent=dqn", "env=mountaincar", "backend=cpu"]) == 0
        assert "note: not solved" in capsys.readouterr().out
    finally:
        pm.unregister(name="note-recipes")


# (agent, env, env steps, threshold): a recipe no other test trains, cut a little past where its
# training return crossed -100 on all 5 seeds (BENCHMARKS.md, "Recipes that solve"); cut there, seed 0
# evaluates -133: "clearly learned" (a random or untrained policy scores -500)
LEARNS = [("a2c", "acrobot", 64_000, -200.0)]


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "env", "steps", "threshold"), LEARNS, ids=[f"{c[0]}-{c[1]}" for c in LEARNS])
def test_recipe_learns(tmp_path: Path, agent: str, env: str, steps: int, threshold: float) -> None:
    cfg = resolve({"backend": "cpu", "env": {"name": env}, "agent": {"name": agent},
                   "run": {"seed": 0, "progress": False, "total_steps": steps, "eval_episodes": 100}})
    final = train(cfg, run_dir=tmp_path / "run")["final_eval"]
    assert final["mean_return"] >= threshold, f"{agent} on {env}: {final}"
