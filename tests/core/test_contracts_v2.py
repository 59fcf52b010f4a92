"""Contracts v2: dict env state, per-episode statistics, resets from a state pool, recipes
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
from noeira.core.envbase import StatePool
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

def test_state_pool_draws_in_order_only_where_envs_ended() -> None:
    made = []

    def generate(k: int) -> dict[str, torch.Tensor]:
        start = sum(made)
        made.append(k)
        return {"world": torch.arange(start, start + k).view(k, 1).repeat(1, 3), "id": torch.arange(start, start + k)}

    pool = StatePool(generate, size=6, refill=2, device=torch.device("cpu"))
    assert pool.states["id"].tolist() == [0, 1, 2, 3, 4, 5]
    state = {"world": torch.full((5, 3), -1), "id": torch.full((5,), -1)}
    pool.draw(torch.tensor([False, True, False, True, True]), state)
    assert state["id"].tolist() == [-1, 0, -1, 1, 2] and state["world"][3].tolist() == [1, 1, 1]
    pool.draw(torch.tensor([True, False, False, False, True]), state)
    assert state["id"].tolist() == [3, 0, -1, 1, 4] and int(pool.cursor) == 5
    pool.draw(torch.tensor([False, False, True, True, False]), state)  # wraps around the pool
    assert state["id"].tolist() == [3, 0, 5, 0, 4]
    pool.refill_step()  # entries 0 and 1 regenerated (ids 6, 7), fixed work
    assert pool.states["id"].tolist() == [6, 7, 2, 3, 4, 5] and made[-1] == 2
    pool.refill_step()
    assert pool.states["id"].tolist() == [6, 7, 8, 9, 4, 5]
    pool.fill()
    assert int(pool.cursor) == 0 and made[-1] == 6
    with pytest.raises(ConfigError, match="refill"):
        StatePool(generate, size=4, refill=5, device=torch.device("cpu"))


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
def test_state_pool_on_cuda_matches_the_cpu_path_and_records() -> None:
    """The Triton copy (the cost follows the ended envs) gives the CPU path's rows, also replayed
    from a CUDA graph."""
    def generate(device: str):
        return lambda k: {"map": torch.arange(k * 4 * 3, device=device, dtype=torch.uint8).view(k, 4, 3),
                          "pos": torch.arange(k * 2, device=device, dtype=torch.int16).view(k, 2),
                          "hp": torch.arange(k, device=device, dtype=torch.float32) + 0.5}

    n, masks = 37, [torch.rand(37, generator=torch.Generator().manual_seed(i)) < 0.3 for i in range(4)]
    out = {}
    for device in ("cpu", "cuda"):
        pool = StatePool(generate(device), size=16, refill=3, device=torch.device(device))
        state = {k: torch.full((n, *v.shape[1:]), 7, dtype=v.dtype, device=device) for k, v in pool.states.items()}
        for m in masks:
            pool.draw(m.to(device), state)
            pool.refill_step()
        out[device] = {k: v.cpu() for k, v in state.items()}
    for k in out["cpu"]:
        assert torch.equal(out["cpu"][k], out["cuda"][k]), k

    pool = StatePool(generate("cuda"), size=16, refill=3, device=torch.device("cuda"))
    state = {k: torch.zeros((n, *v.shape[1:]), dtype=v.dtype, device="cuda") for k, v in pool.states.items()}
    mask = masks[0].cuda()
    pool.draw(mask, state)  # warm up (compiles the kernel) outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        pool.draw(mask, state)
    before = int(pool.cursor)
    graph.replay()
    torch.cuda.synchronize()
    assert int(pool.cursor) == (before + int(mask.sum())) % 16


def test_state_pool_row_copy_kernel_in_the_interpreter() -> None:
    """StatePool's Triton row copy (its CUDA path), run by Triton's interpreter on the CPU: the
    ended envs' rows of every state tensor come from their pool entries, the rest unchanged."""
    import os

    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton kernels run on a CPU only in Triton's interpreter")
    from noeira.core.envbase import _triton_rows

    n, size = 37, 9
    g = torch.Generator().manual_seed(0)
    state = {"map": torch.zeros(n, 40, 50, dtype=torch.uint8), "pos": torch.zeros(n, 3, 2, dtype=torch.int16),
             "alive": torch.zeros(n, dtype=torch.bool), "hp": torch.full((n,), -1.0)}
    pool = {"map": torch.randint(0, 255, (size, 40, 50), generator=g).to(torch.uint8),
            "pos": torch.randint(0, 99, (size, 3, 2), generator=g).to(torch.int16),
            "alive": torch.ones(size, dtype=torch.bool), "hp": torch.arange(size, dtype=torch.float32)}
    mask = torch.rand(n, generator=g) < 0.4
    order = torch.cumsum(mask, 0) - 1
    src = (5 + order) % size
    want = {k: v.clone() for k, v in state.items()}
    rows = mask.nonzero().squeeze(1)
    for k in want:
        want[k].index_copy_(0, rows, pool[k].index_select(0, src.index_select(0, rows)))
    _triton_rows()(state, pool, mask, order, src, {})
    assert 0 < int(mask.sum()) < n and all(torch.equal(state[k], want[k]) for k in state)
