"""``noeira check-capture`` and ``noeira verify-graph`` from the command line: planted faults are
reported with their file and line, clean code reports nothing (on the CPU through the torch
modes, on CUDA with the sync debug mode and CPU-tensor detection too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from noeira.core.cli import main
from noeira.cuda.check import check_steps

AGENTS = {"clean": "graph_agents:CleanAgent", "planted": "graph_agents:PlantedItemAgent",
          "cursor": "graph_agents:PythonCursorAgent", "percall": "graph_agents:PerCallBufferAgent",
          "hosttensor": "graph_agents:HostTensorAgent"}
SOURCE = Path(__file__).with_name("graph_agents.py")


@pytest.fixture
def agents(install_dist):
    return install_dist("graph-test-agents", {"noeira.agents": AGENTS})


def planted_line(tag: str) -> str:
    for i, line in enumerate(SOURCE.read_text().splitlines(), 1):
        if f"PLANTED: {tag}" in line:
            return f"graph_agents.py:{i}"
    raise AssertionError(tag)


def check(capsys, agent: str, backend: str) -> tuple[int, str]:
    code = main(["check-capture", f"backend={backend}", f"agent={agent}", "env=corridor", "env.num_envs=8"])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_clean_agent_reports_nothing(agents, capsys, backend) -> None:
    code, out = check(capsys, "clean", backend)
    assert code == 0, out
    assert "clean:" in out and "finding" not in out.split("clean:")[1]


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_planted_item_is_reported_with_file_and_line(agents, capsys, backend) -> None:
    code, out = check(capsys, "planted", backend)
    assert code == 1, out
    lines = [x for x in out.splitlines() if planted_line("a host sync") in x]
    assert lines and "learn: host sync: Tensor.item()" in lines[0], out
    assert "1 finding(s)" in out, out  # nothing else: the .item() is the only fault


@pytest.mark.parametrize(("agent", "tag", "kind"), [
    ("cursor", "a Python value that changes", "python value: aten.select"),
    ("percall", "a buffer allocated per call", "allocation: a new [8, 8] float32 tensor"),
])
def test_values_and_buffers_that_a_recording_freezes(agents, capsys, agent, tag, kind) -> None:
    code, out = check(capsys, agent, "cpu")
    assert code == 1, out
    assert any(planted_line(tag) in x and kind in x for x in out.splitlines()), out


@pytest.mark.cuda
def test_cpu_tensor_in_a_cuda_step(agents, capsys) -> None:
    code, out = check(capsys, "hosttensor", "cuda")
    assert code == 1, out
    assert any(planted_line("a host-to-device copy") in x and "cpu tensor" in x for x in out.splitlines()), out


def test_detectors_directly() -> None:
    """Each detector, on a step of plain torch code (no plugins)."""
    x = torch.arange(6.0)
    i = {"n": 0}

    def step():
        a = float(x.sum())                   # host read
        b = x[x > 2].sum()                   # boolean mask: data-dependent size
        i["n"] += 1
        c = torch.zeros(i["n"] + 2)          # shape changes between calls
        return {"v": b + a + c.sum(), "l": torch.tensor(x.tolist()).sum()}

    report = check_steps([("learn", step, True)], torch.device("cpu"), warmup=1)
    found = {(f.kind, f.what.split(" ")[0].rstrip(":"), f.line) for f in report.findings}
    line = step.__code__.co_firstlineno
    assert ("host sync", "float(tensor)", line + 1) in found
    assert any(f.kind == "host sync" and "boolean mask" in f.what and f.line == line + 2 for f in report.findings)
    assert ("allocation", "aten.zeros", line + 4) in found
    assert ("host sync", "Tensor.tolist()", line + 5) in found
    assert all(f.file == __file__ for f in report.findings)


def test_verify_graph_cli(agents, capsys) -> None:
    assert main(["verify-graph", "backend=cpu", "agent=clean", "env=corridor", "env.num_envs=8", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "bit-identical" in out and "records nothing on cpu" in out


def test_verify_graph_hashes_a_dict_env_state(capsys) -> None:
    """An env whose state is a dict of tensors (the example plugin's cue-corridor) is hashed key
    by key (it crashed on Craftax-Classic's)."""
    assert main(["verify-graph", "backend=cpu", "agent=ppo", "env=cue-corridor", "env.num_envs=8", "agent.horizon=4",
                 "agent.num_minibatches=2", "-k", "2"]) == 0
    assert "bit-identical" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.parametrize(("agent", "code", "text"), [("clean", 0, "bit-identical"),
                                                     ("cursor", 1, "iteration 5 (replayed)")])
def test_verify_graph_cli_on_cuda(agents, capsys, agent, code, text) -> None:
    assert main(["verify-graph", "backend=cuda", f"agent={agent}", "env=corridor", "env.num_envs=8", "-k", "6"]) == code
    out = capsys.readouterr().out
    assert text in out, out
    if code:
        assert "agent.ring" in out
