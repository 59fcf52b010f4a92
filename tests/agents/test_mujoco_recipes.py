"""The MuJoCo locomotion recipes of SAC, TD3, PPO and REDQ: one per backend (physics ``mujoco`` on
cpu, ``mujoco-warp`` on cuda), each starting its run with an "untested" note until
``benchmarks/mujoco_learning.py`` has measured it, every key known to the agent and env."""

from __future__ import annotations

import pytest

from noeira.agents.mujoco_recipes import ANCHORS, LOCOMOTION
from noeira.core.driver import build, resolve
from noeira.core.recipes import find_recipes, merged_recipe

pytestmark = pytest.mark.usefixtures("one_thread")

pytest.importorskip("mujoco")
AGENTS = ("sac", "td3", "ppo", "redq")
CASES = [(a, e) for a in AGENTS for e in LOCOMOTION]


@pytest.mark.parametrize(("agent", "env"), CASES, ids=[f"{a}-{e}" for a, e in CASES])
def test_recipes_per_backend_say_untested_and_resolve(agent: str, env: str) -> None:
    cpu, cuda = (find_recipes(agent, env, b) for b in ("cpu", "cuda"))
    assert [r.distribution for r in cpu] == [r.distribution for r in cuda] == ["noeira-agents"]
    for recipes, physics in ((cpu, "mujoco"), (cuda, "mujoco-warp")):
        note = recipes[0].note
        assert note.startswith("untested: this recipe follows") and env in note, note
        assert merged_recipe(recipes)["env"]["physics"] == physics
    cfg = resolve({"backend": "cpu", "env": {"name": env}, "agent": {"name": agent}})
    assert cfg.env.config.physics == "mujoco" and len(cfg.recipe_notes) == 1 and cfg.recipe_notes[0].startswith(cpu[0].note)
    values = merged_recipe(cuda)
    big = resolve({"backend": "cpu", "env": {**values["env"], "name": env}, "agent": {**values["agent"], "name": agent},
                   "run": values["run"]})
    assert big.num_envs >= 1_024 and big.env.config.physics == "mujoco-warp"
    if agent != "ppo":  # the massively parallel shape: normalised observations, large batches, several updates
        c = big.agent.config
        assert c.norm_obs and c.batch_size >= 16_384 and c.updates_per_step >= 2
        assert (c.num_atoms == 101) == (agent == "td3")


@pytest.mark.parametrize("agent", AGENTS)
def test_cpu_recipe_builds(agent: str) -> None:
    """The cpu recipe builds its env and agent (Humanoid: the largest observation)."""
    small = {} if agent == "ppo" else {"buffer_size": 10_000}
    cfg = resolve({"backend": "cpu", "env": {"name": "humanoid"}, "agent": {"name": agent, **small}})
    pieces = build(cfg)
    assert pieces.env.observation_space.shape == (348,)
    pieces.close()


def test_anchors() -> None:
    """The published scores the issue names: SB3 zoo's SAC and CleanRL's TD3 at 1M steps."""
    assert {e: s for e, (s, _) in ANCHORS["sac"].items()} == {"halfcheetah": 9_535, "hopper": 2_326,
                                                             "walker2d": 3_863, "ant": 4_616}
    assert {e: s for e, (s, _) in ANCHORS["td3"].items()} == {"halfcheetah": 9_583, "hopper": 3_135,
                                                             "walker2d": 4_058, "humanoid": 5_035}


def test_learning_benchmark_runs_and_reports(tmp_path, monkeypatch) -> None:
    """``benchmarks/mujoco_learning.py --quick`` end to end on the CPU: a learning run with its
    curve (training returns and the reward's terms), evaluations and anchors, and a speed row."""
    import importlib.util
    import json
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location("mujoco_learning", bench / "mujoco_learning.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "mujoco_learning", module)
    spec.loader.exec_module(module)
    out = tmp_path / "bench.json"
    assert module.main(["--backend", "cpu", "--quick", "--agents", "td3", "--envs", "hopper", "--max-steps", "80",
                        "--speed-iters", "2", "--recipe-of", "cuda", "--set", "env.max_episode_steps=10",
                        "agent.learning_starts=8", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["env_steps"] == 80 and run["final_return"] is not None and run["num_envs"] == 4
    assert run["config"]["agent"]["num_atoms"] == 101 and run["config"]["env"]["physics"] == "mujoco"
    assert set(run["anchors"]) == {"sac", "td3"} and run["anchors"]["td3"]["score"] == 3_135
    ended = [p for p in run["curve"] if "train_return" in p]
    assert ended and {"reward_forward", "reward_ctrl", "reward_survive", "x_position"} <= set(ended[0])
    p = ended[0]
    assert p["train_return"] == pytest.approx(p["reward_forward"] + p["reward_ctrl"] + p["reward_survive"], rel=1e-4)
    (speed,) = result["speed"]  # eager only on the CPU
    assert speed["graph"] == "eager" and speed["env_steps_per_s"] > 0 and speed["updates_per_iteration"] == 4
