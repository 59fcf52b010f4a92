"""The example graph backend (examples/plugins/graph, ``profiled``): the conformance kit, the
profiler ranges it adds in a `noeira train`, and `noeira verify-graph` through it."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from noeira.core import get_graph_backend
from noeira.core.driver import config_from_cli, train
from noeira.core.testing import check_graph_backend

pytestmark = pytest.mark.usefixtures("examples", "one_thread")


def test_profiled_passes_the_conformance_kit(backend_name: str) -> None:
    graph = get_graph_backend("profiled")
    check_graph_backend(graph, backend_name)
    assert graph.calls == {"noeira.step": 6}


def test_each_phase_is_one_profiler_range_per_iteration(tmp_path) -> None:
    # a small run: the profiler's events take long to read back
    cfg = config_from_cli(["backend=cpu", "env=cartpole", "agent=ppo", "graph=profiled", "env.num_envs=4",
                           "agent.horizon=2", "agent.update_epochs=1", "agent.num_minibatches=1", "run.total_steps=24",
                           "run.eval_episodes=0", "run.progress=false"])
    with torch.autograd.profiler.profile() as prof:  # torch.profiler.profile's Kineto takes seconds to start
        record = train(cfg, run_dir=tmp_path / "run")
    assert record["graph"] == "profiled" and record["iterations"] == 3
    ranges = Counter(e.name for e in prof.function_events if e.name.startswith("noeira."))
    assert ranges == {"noeira.collect": 3, "noeira.learn": 3}


def test_verify_graph_compares_it_with_eager(capsys) -> None:
    pytest.importorskip("noeira.cuda")
    from noeira.core.cli import main

    code = main(["verify-graph", "backend=cpu", "env=cartpole", "agent=ppo", "graph=profiled", "env.num_envs=4",
                 "agent.horizon=8", "-k", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "graph 'profiled'" in out and "bit-identical" in out, out
