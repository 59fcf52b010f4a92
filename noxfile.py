"""nox sessions: tests (backend x graph), slow (the learning tests), lint, demo, bench.

    nox -s tests            # every combination; those that need CUDA skip without it
    nox -s slow             # the learning tests (marked slow): minutes, on the CPU
    nox -s lint demo
    nox --no-venv -s tests  # use the current environment as it is (e.g. the GPU machine)
"""

from __future__ import annotations

import shutil
import subprocess

import nox

nox.options.sessions = ["lint", "tests", "slow"]
nox.options.reuse_existing_virtualenvs = True

# CPU build first, so pip never pulls the multi-GB CUDA build for a laptop or CI.
TORCH = "torch==2.13.0"
DISTS = ["./noeira-core[plot,video,data,export]", "./noeira-envs[gymnasium,mujoco,atari]", "./noeira-agents", "./noeira-physics",
         "./noeira-cuda", "./noeira-robot", "./examples/noeira-example-plugin",
         *[f"./examples/plugins/{kind}" for kind in ("env", "agent", "network", "physics", "graph", "logger")]]
# the references the tests compare against: gymnasium's v5 MuJoCo envs, Stable-Baselines3 (the
# VecEnv bridge), JAX Craftax on CPU jax (Craftax-Classic); Triton, whose interpreter runs the
# Craftax kernels on the CPU; OpenCV, which gymnasium's AtariPreprocessing resizes with (the Atari env's reference)
TEST_DEPS = ["pytest>=8", "gymnasium[mujoco]>=1.0", "stable-baselines3>=2.3", "craftax==1.6.1", "jax[cpu]", "triton",
             "opencv-python-headless"]


def _has_cuda() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True, check=False).returncode == 0


def _install(session: nox.Session, *extra: str) -> None:
    """Install torch (CPU) then the project, editable; nothing with --no-venv."""
    if session.venv_backend == "none":
        return
    session.install(TORCH)
    session.install(*[a for d in DISTS for a in ("-e", d)], *extra)


@nox.session
@nox.parametrize("graph", ["eager", "stream", "device"])
@nox.parametrize("backend", ["cpu", "cuda"])
def tests(session: nox.Session, backend: str, graph: str) -> None:
    """The test suite on one backend with one graph backend (CUDA graphs need backend=cuda)."""
    if (backend == "cuda" or graph != "eager") and not _has_cuda():
        session.skip(f"backend={backend} graph={graph} needs a CUDA device")
    if backend == "cpu" and graph != "eager":
        session.skip("graph backends record only on cuda (on cpu they are the eager path)")
    _install(session, *TEST_DEPS)
    env = {"NOEIRA_TEST_BACKEND": backend, "NOEIRA_GRAPH_BACKEND": graph}
    session.run("pytest", *(session.posargs or ["-q"]), "-m", "not slow", env=env)


@nox.session
def slow(session: nox.Session) -> None:
    """The learning tests (marked ``slow``: each trains an agent until it solves a task), on the
    CPU: kept out of ``tests`` so that the suite everyone runs stays within minutes."""
    _install(session, *TEST_DEPS)
    env = {"NOEIRA_TEST_BACKEND": "cpu", "NOEIRA_GRAPH_BACKEND": "eager"}
    session.run("pytest", *(session.posargs or ["-q"]), "-m", "slow", env=env)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole repository."""
    if session.venv_backend != "none":
        session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session
def demo(session: nox.Session) -> None:
    """The README's run command: PPO on CartPole on the best backend available."""
    _install(session)
    session.run("noeira", "train", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, quick sizes (pass --full for the sizes in BENCHMARKS.md)."""
    _install(session, "gymnasium[mujoco]>=1.0", "stable-baselines3")
    quick = [] if "--full" in session.posargs else ["--quick"]
    for script in sorted(__import__("pathlib").Path("benchmarks").glob("*.py")):
        session.run("python", str(script), *quick)
