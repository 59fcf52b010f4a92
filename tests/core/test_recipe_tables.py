"""core.recipes.pick_recipe: the one lookup every agent's recipe tables go through."""

from __future__ import annotations

from noeira.core.recipes import UNTESTED, pick_recipe

TABLES = {
    "cartpole": {"cpu": {"env": {"num_envs": 8}, "agent": {"lr": 1e-3}, "run": {"total_steps": 800}},
                 "cuda": {"env": {"num_envs": 64}, "run": {"total_steps": 6400}}},
    "atari": {"*": {"env": {"num_envs": 8}, "agent": {"torch_threads": 4}}},
    "*": {"*": {"note": UNTESTED}},
}


def test_env_family_backend_and_fallbacks() -> None:
    assert pick_recipe(TABLES, "cartpole", "cuda")["env"] == {"num_envs": 64}
    assert pick_recipe(TABLES, "cartpole", "mps")["env"] == {"num_envs": 8}  # no "*": the cpu recipe
    assert pick_recipe(TABLES, "atari:pong", "cuda")["env"] == {"num_envs": 8}  # the family's recipe
    assert pick_recipe(TABLES, "gym:LunarLander-v3", "cpu") == {"note": UNTESTED}  # any other env
    assert pick_recipe({"cartpole": TABLES["cartpole"]}, "pendulum", "cpu") is None


def test_copies_threads_and_scaling() -> None:
    out = pick_recipe(TABLES, "cartpole", "cpu")
    out["agent"]["lr"] = 1.0
    assert TABLES["cartpole"]["cpu"]["agent"]["lr"] == 1e-3  # a fresh copy
    assert "torch_threads" not in out["agent"]
    assert pick_recipe(TABLES, "cartpole", "cpu", cpu_threads=1)["agent"] == {"lr": 1e-3, "torch_threads": 1}
    assert pick_recipe(TABLES, "atari:pong", "cpu", cpu_threads=1)["agent"] == {"torch_threads": 4}  # the recipe's own
    assert "agent" not in pick_recipe(TABLES, "cartpole", "cuda", cpu_threads=1)
    # the user's num_envs keeps the recipe's iterations: total_steps scales with it
    assert pick_recipe(TABLES, "cartpole", "cpu", num_envs=32)["run"]["total_steps"] == 3200
    assert pick_recipe(TABLES, "cartpole", "cpu")["run"]["total_steps"] == 800
