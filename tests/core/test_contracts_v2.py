"""Contracts v2: dict env state, per-episode statistics, resets listed for the envs that ended, recipes
through the hook, the rank-aware core and the network seam."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from acme_corridor.env import Corridor
from acme_corridor.memory import CueCorridor

from noeira.core import get_backend, make_agent, make_env
from noeira.core.backends import CpuBackend
from noeira.core.config import RunConfig
from noeira.core.driver import build, resolve, train
from noeira.core.envbase import EnvList
from noeira.core.errors import ConfigError, UnknownPluginError
from noeira.core.plugins import get_plugin_manager, hookimpl
from noeira.core.recipes import find_recipes
from noeira.core.testing import check_agent, check_env, check_network

CPU = get_backend("cpu")


# -- env state as a mapping ----------------------------------------------------------------------

def test_dict_state_env_passes_the_kit_and_round_trips() -> None:
    check_env("cue-corridor", num_envs=6, backend="cpu", steps=30)
    env = make_env("cue-corridor", num_envs=3, backend="cpu", seed=0)
    env.reset(seed=0)
    state = {"pos": torch.tensor([0, 2, 3]), "cue": torch.tensor([1, 0, 1])}
    env.set_state(state)
    assert env.obs[:, 1].tolist() == [1.0, 0.0, 0.0]  # the cue shows at the first step only
    assert env.obs[:, 2].tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="missing: cue"):
        env.set_state({"pos": torch.zeros(3, dtype=torch.int64)})
    with pytest.raises(ValueError, match=r"\['pos'\].*shape \(4,\)"):
        env.set_state({"pos": torch.zeros(4, dtype=torch.int64), "cue": torch.zeros(3, dtype=torch.int64)})
    with pytest.raises(ValueError, match="expected a dict"):
        env.set_state(torch.zeros(3, 2))


def test_kit_catches_episode_statistics_that_are_not_reset() -> None:
    class Leaky(Corridor):
        def step(self, action):
            before = self.episode_return.clone()
            r = super().step(action)
            done = r.terminated | r.truncated
            self.episode_return += torch.where(done, before + r.reward, 0.0)  # the ended episode's return lingers
            return r

    with pytest.raises(AssertionError, match="episode return sum"):
        check_env(lambda seed: Leaky(Corridor.Config(length=4), num_envs=6, backend=CPU, seed=seed))


def test_extra_episode_statistics_reach_the_metrics(tmp_path: Path) -> None:
    env = make_env("cue-corridor", num_envs=4, backend="cpu", seed=0)
    env.reset(seed=0)
    for _ in range(4):  # every env answers (action 1) at the 4th step
        env.step(torch.ones(4, dtype=torch.int64))
    stats = env.pop_episode_stats()
    assert int(stats["count"]) == 4
    assert float(stats["correct_sum"]) == float((env.get_state()["cue"] >= 0).sum()) - float(
        stats["count"] - stats["correct_sum"])  # every ended episode is correct or not
    cfg = resolve({"backend": "cpu", "env": {"name": "cue-corridor"},
                   "run": {"total_steps": 2048, "progress": False, "eval_episodes": 0}})
    train(cfg, run_dir=tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "episode_correct" in rows[-1] and 0.0 <= rows[-1]["episode_correct"] <= 1.0
    assert not any(k.endswith("_sum") for k in rows[-1]), "raw sums must not be logged"


# -- resets that cost only where envs end ----------------------------------------------------------

def test_env_list_names_the_ended_envs_in_order() -> None:
    """EnvList puts the envs a mask selects at the front of its rows, in env order, and their
    count on the device; a later mask replaces the list (stale rows past the count aside)."""
    listed = EnvList(7, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    for mask in [torch.tensor([False, True, False, True, True, False, True]), torch.zeros(7, dtype=torch.bool),
                 torch.ones(7, dtype=torch.bool)] + [torch.rand(7, generator=g) < 0.4 for _ in range(5)]:
        listed.select(mask)
        count = int(listed.count)
        assert count == int(mask.sum()) and listed.rows.dtype == torch.int32
        assert listed.rows[:count].tolist() == mask.nonzero().squeeze(1).tolist()


# -- recipes through the hook ------------------------------------------------------------------------

class _RecipePlugin:
    def __init__(self, values: dict) -> None:
        self.values = values

    @hookimpl
    def noeira_recipe(self, agent: str, env: str, backend: str, num_envs: int | None) -> dict | None:
        return self.values if env == "corridor" else None


def test_recipes_are_layered_env_distribution_last(install_dist, toy_dist) -> None:
    """Other distributions' recipes < the agent's distribution's < the env's distribution's < the user."""
    site = toy_dist  # agent `toy` and its recipe (tests/toy_plugins.py)
    (site / "other_recipes.py").write_text(
        "from noeira.core import hookimpl\n"
        "@hookimpl\n"
        "def noeira_recipe(agent, env):\n"
        "    return {'env': {'num_envs': 5}, 'run': {'total_steps': 111, 'log_interval': 3}}\n")
    (site / "env_recipes.py").write_text(
        "from noeira.core import hookimpl\n"
        "@hookimpl\n"
        "def noeira_recipe(agent, env, backend, num_envs):\n"
        "    return {'env': {'num_envs': 7}} if env == 'corridor2' else None\n")
    install_dist("aaa-other", {"noeira": {"other-recipes": "other_recipes"}})
    install_dist("corridor2-env", {"noeira.envs": {"corridor2": "acme_corridor.env:Corridor"},
                                   "noeira": {"env-recipes": "env_recipes"}})
    recipes = find_recipes("toy", "corridor2", "cpu")
    assert [r.describe() for r in recipes] == ["other-recipes (aaa-other)", "toy-recipes (toy-plugins)",
                                               "env-recipes (corridor2-env)"]
    cfg = resolve({"backend": "cpu", "env": {"name": "corridor2"}, "agent": {"name": "toy"}, "run": {"seed": 3}})
    assert cfg.num_envs == 7  # the env's distribution has the last word
    assert cfg.run.total_steps == 2048  # the agent's distribution over another's
    assert cfg.run.log_interval == 3 and cfg.run.seed == 3  # only the other plugin set it; the user's own value
    assert cfg.recipes == tuple(r.describe() for r in recipes)


def test_a_bad_recipe_names_its_plugin() -> None:
    pm = get_plugin_manager()
    pm.register(_RecipePlugin({"agnet": {"lr": 1.0}}), name="typo-recipes")
    try:
        with pytest.raises(ConfigError, match="typo-recipes.*unknown table 'agnet'"):
            resolve({"backend": "cpu", "env": {"name": "corridor"}})
    finally:
        pm.unregister(name="typo-recipes")


def test_train_help_shows_where_the_recipe_came_from() -> None:
    out = subprocess.run([sys.executable, "-m", "noeira.core.cli", "train", "env=cue-corridor", "--help"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "from acme-csv (acme-corridor): " in out.stdout and "agent.network='gru'" in out.stdout


# -- rank-aware core ------------------------------------------------------------------------------------

def _cfg(total_steps: int = 256) -> RunConfig:
    return resolve({"backend": "cpu", "env": {"name": "corridor", "num_envs": 4},
                    "agent": {"name": "ppo", "horizon": 8}, "run": {"total_steps": total_steps, "progress": False}})


def test_backend_knows_rank_world_size_and_device_index() -> None:
    be = get_backend("cpu")
    assert (be.rank, be.world_size, be.is_main) == (0, 1, True)
    assert get_backend("cpu:0").device == torch.device("cpu")
    with pytest.raises(ConfigError, match="NAME:INDEX"):
        get_backend("cuda:first")
    with pytest.raises(Exception, match="rank 2"):
        CpuBackend(rank=2, world_size=2)


def test_seeds_are_offset_by_rank() -> None:
    cfg = _cfg()
    a = build(cfg, backend=CpuBackend())
    b = build(cfg, backend=CpuBackend())
    c = build(cfg, backend=CpuBackend(rank=1, world_size=2))
    assert torch.equal(a.env.obs, b.env.obs)
    assert not torch.equal(a.env.obs, c.env.obs)


def test_only_rank_zero_writes_the_run(tmp_path: Path) -> None:
    pm = get_plugin_manager()
    calls: list[str] = []

    class Spy:
        @hookimpl
        def noeira_run_started(self, run) -> None:
            calls.append("started")

    pm.register(Spy(), name="spy")
    try:
        record = train(_cfg(), run_dir=tmp_path / "rank1", backend=CpuBackend(rank=1, world_size=2))
        # rank 1 writes its own part of each checkpoint only (no config, record or metrics), and calls no hook
        files = sorted(str(p.relative_to(tmp_path / "rank1")) for p in (tmp_path / "rank1").rglob("*") if p.is_file())
        assert files == ["checkpoints/final.rank1.pt"] and calls == []
        assert record["outcome"] == "completed" and record["world_size"] == 2
        assert record["env_steps"] == 256 and "final_eval" not in record  # every rank's steps count
        record = train(_cfg(), run_dir=tmp_path / "rank0")
        assert (tmp_path / "rank0" / "record.json").is_file() and calls == ["started"]
        assert record["world_size"] == 1 and record["num_envs_per_rank"] == 4
    finally:
        pm.unregister(name="spy")


# -- the network seam --------------------------------------------------------------------------------------

def test_networks_by_name() -> None:
    check_network("mlp", hidden_sizes=(8,))
    check_network("gru", hidden_sizes=(8, 8))
    env = make_env("corridor", num_envs=4, backend="cpu")
    with pytest.raises(UnknownPluginError, match=r"unknown network 'lsmt'.*installed: .*gru.*mlp"):
        make_agent("ppo", env, network="lsmt")
    with pytest.raises(ConfigError, match="agent.network_options"):
        make_agent("ppo", env, network_options={"cells": 3})


def test_kit_catches_a_recurrent_network_that_ignores_done() -> None:
    from acme_corridor.networks import GRU

    class Forgetful(GRU):
        def forward(self, obs, state, done, heads=None):
            return super().forward(obs, state, torch.zeros_like(done), heads)

    with pytest.raises(AssertionError, match="done=True must reset"):
        check_network(Forgetful, hidden_sizes=(8,))


def test_recurrent_agent_carries_state_and_trains(tmp_path: Path) -> None:
    """The third-party memory env (dict state), its recipe through the hook and the recurrent test
    network: through the kit, and `noeira train` learns what a feed-forward policy cannot."""
    env = CueCorridor(CueCorridor.Config(), num_envs=8, backend=CPU, seed=0)
    check_agent(make_agent("ppo", env, network="gru", hidden_sizes=[16], horizon=8, num_minibatches=2), env)
    out = subprocess.run([sys.executable, "-m", "noeira.core.cli", "train", "env=cue-corridor", "run.progress=false",
                          "--run-dir", str(tmp_path / "cue")], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    record = json.loads((tmp_path / "cue" / "record.json").read_text())
    assert record["recipes"] == ["acme-csv (acme-corridor)"]
    assert record["final_eval"]["mean_return"] >= 0.9, record["final_eval"]  # guessing scores 0


def test_cli_rejects_an_unknown_network_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "noeira.core.cli", "train", "agent.network=lstmm", "backend=cpu",
                          "--run-dir", str(tmp_path / "x")], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "unknown network 'lstmm'" in out.stderr


@pytest.mark.cuda
def test_env_list_on_cuda_matches_the_cpu_and_records() -> None:
    """On CUDA the list is the CPU's, without a host sync, and a CUDA graph of select() lists
    each replay's mask."""
    n = 1000
    masks = [torch.rand(n, generator=torch.Generator().manual_seed(i)) < 0.1 * (i + 1) for i in range(4)]
    listed = EnvList(n, torch.device("cuda"))
    mask = masks[0].cuda()
    listed.select(mask)  # warm up outside the capture
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        listed.select(mask)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        listed.select(mask)
    for m in masks:
        mask.copy_(m.cuda())
        graph.replay()
        torch.cuda.synchronize()
        count = int(listed.count)
        assert count == int(m.sum()) and listed.rows[:count].cpu().tolist() == m.nonzero().squeeze(1).tolist()
