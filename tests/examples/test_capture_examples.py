"""The examples keep the capture-safe rules: `noeira check-capture` finds nothing in a run of the
example agent on the example env (on the example physics engine), nor in PPO with the example
network; on CUDA, `noeira verify-graph` replays their recorded steps bit for bit."""

from __future__ import annotations

import pytest

from noeira.core.cli import main

pytestmark = [pytest.mark.usefixtures("examples", "one_thread"), pytest.mark.filterwarnings("ignore::UserWarning")]
pytest.importorskip("noeira.cuda")

RUNS = {
    "reinforce": ["env=reach", "agent=reinforce", "env.num_envs=8", "agent.horizon=8"],
    "ppo-shared-mlp": ["env=reach", "agent=ppo", "agent.network=shared-mlp", "env.num_envs=8", "agent.horizon=8",
                       "agent.num_minibatches=2"],
}


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_check_capture_finds_nothing(capsys, run: str, backend: str) -> None:
    code = main(["check-capture", f"backend={backend}", *RUNS[run]])
    out = capsys.readouterr().out
    assert code == 0 and "clean:" in out and "finding" not in out.split("clean:")[1], out


@pytest.mark.cuda
@pytest.mark.parametrize("graph", ["stream", "device"])
@pytest.mark.parametrize("run", list(RUNS))
def test_recorded_steps_replay_bit_for_bit(capsys, run: str, graph: str) -> None:
    code = main(["verify-graph", "backend=cuda", f"graph={graph}", *RUNS[run], "-k", "6"])
    out = capsys.readouterr().out
    assert code == 0 and "bit-identical" in out, out
