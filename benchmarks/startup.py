"""Start-up: the wall time of ``noeira`` commands in fresh processes, against torch's own.

Each command runs ``--repeats`` times, each time in a new Python process, and the table gives
the median wall time. References, measured the same way: ``python -c pass`` (the interpreter)
and ``python -c "import torch"`` (torch's own start-up; on cuda also with the CUDA context
made, ``torch.ones(1, device="cuda")``). One more run of each command under
``python -X importtime`` counts the modules it imports and tells whether torch,
``torch._dynamo``, sympy and torch.distributed's FSDP are among them.

Columns:

- ``wall s``: the median wall time of the process, start to exit.
- ``torch s``: torch's own start-up (the reference's median) for a command that imports
  torch, else 0. A training command on cuda counts the CUDA context in it.
- ``train s``, ``eval s``: what the run reports in ``record.json`` (``train_seconds``,
  ``eval_seconds``; medians).
- ``overhead s``: ``wall - torch - train - eval``, what noeira adds (the issue's goal: at most
  1 s for a training run; ``noeira list`` and ``--help`` under 1 s, or no torch at all).
- ``modules``: modules imported (``-X importtime`` lines); ``imports``: the heavy ones among them.

The commands run as ``python -m noeira.core.cli ...`` with this interpreter (``--python``)
and the environment it is given (PYTHONPATH included), so two installations can be compared.

Examples::

    python benchmarks/startup.py --quick                     # 3 runs of each command, on the CPU
    python benchmarks/startup.py --backend cuda --train "" --json startup-cuda.json   # `noeira train backend=cuda`
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HEAVY = {"torch": "torch", "torch._dynamo": "dynamo", "sympy": "sympy", "torch.distributed.fsdp": "fsdp"}
_LINE = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)")


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


_CWD: str | None = None
"""Where the commands run: an empty directory of their own (``python -m`` puts it on sys.path; a
directory that others write into, as /tmp, would make every process scan its entry points anew)."""


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, check=False,
                         cwd=_CWD)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {out.returncode}: {out.stderr.strip()[-2000:]}")
    return wall


def _imports(argv: list[str], env: dict[str, str]) -> tuple[int, dict[str, float]]:
    """Modules imported by ``argv`` (a python command) and the cumulative seconds of the heavy ones."""
    out = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env, check=False, cwd=_CWD)
    count, heavy = 0, {}
    for line in out.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            count += 1
            if m.group(3) in HEAVY:
                heavy.setdefault(m.group(3), int(m.group(1)) / 1e6)
    return count, heavy


def _measure(label: str, argv: list[str], repeats: int, env: dict[str, str], run_dir: Path | None = None,
             ) -> dict[str, Any]:
    walls, train, evals = [], [], []
    for _ in range(repeats):
        walls.append(_wall(argv, env))
        if run_dir is not None:
            record = json.loads((run_dir / "record.json").read_text())
            train.append(record["train_seconds"])
            evals.append(record.get("eval_seconds", 0.0))
    count, heavy = _imports(argv, env)
    row = {"command": label, "wall": statistics.median(walls), "walls": walls, "modules": count,
           "imports": [HEAVY[m] for m in HEAVY if m in heavy], "import_seconds": heavy}
    if run_dir is not None:
        row["train"], row["eval"] = statistics.median(train), statistics.median(evals)
    print(f"  {label:60s} {row['wall']:6.2f} s  ({', '.join(f'{w:.2f}' for w in walls)})", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="3 runs of each command (default 7)")
    p.add_argument("--repeats", type=int, default=None, help="fresh processes per command (default 7; quick 3)")
    p.add_argument("--backend", default="cpu", help="the training row's backend: cpu | cuda (a CUDA reference too)")
    p.add_argument("--train", default=None, metavar="OVERRIDES",
                   help="the training row's KEY=VALUE overrides instead of the default (run.total_steps=2048 "
                        "run.eval_episodes=1); backend= and run.progress=false are added")
    p.add_argument("--rows", default="list,help,train-help,plugin-help,info,train",
                   help="which commands to run (default all): list, help, train-help, plugin-help, info, train")
    p.add_argument("--python", default=sys.executable, help="the interpreter that runs noeira (default: this one)")
    p.add_argument("--json", default=None, help="write the rows to this JSON file")
    a = p.parse_args(argv)
    global _CWD
    _CWD = tempfile.mkdtemp(prefix="noeira-startup-cwd-")
    repeats = a.repeats or (3 if a.quick else 7)
    py, env = a.python, dict(os.environ)
    noeira = [py, "-m", "noeira.core.cli"]
    on_cuda = a.backend.startswith("cuda")

    print(f"noeira start-up: {repeats} fresh processes per command, python {platform.python_version()}, "
          f"{platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
    refs = [_measure("python -c pass", [py, "-c", "pass"], repeats, env),
            _measure('python -c "import torch"', [py, "-c", "import torch"], repeats, env)]
    if on_cuda:
        refs.append(_measure('python -c "import torch; torch.ones(1, device=\'cuda\')"',
                             [py, "-c", "import torch; torch.ones(1, device='cuda')"], repeats, env))
    torch_s = refs[1]["wall"]
    cuda_s = refs[2]["wall"] if on_cuda else torch_s

    chosen = {r.strip() for r in a.rows.split(",")}
    rows = []
    for key, args in (("list", ["list"]), ("help", ["--help"]), ("train-help", ["train", "--help"]),
                      ("plugin-help", ["train", "agent=ppo", "env=cartpole", "--help"]), ("info", ["info"])):
        if key in chosen:
            rows.append(_measure("noeira " + " ".join(args), [*noeira, *args], repeats, env))
    if "train" in chosen:
        with tempfile.TemporaryDirectory(prefix="noeira-startup-") as tmp:
            run_dir = Path(tmp) / "run"
            overrides = [f"backend={a.backend}", *(a.train.split() if a.train is not None
                                                      else ["run.total_steps=2048", "run.eval_episodes=1"])]
            train = ["train", *overrides, "run.progress=false", "--run-dir", str(run_dir), "--overwrite"]
            rows.append(_measure("noeira train " + " ".join(overrides), [*noeira, *train], repeats, env,
                                 run_dir=run_dir))
        rows[-1]["cuda"] = on_cuda

    for r in rows:
        uses_torch = "torch" in r["imports"]
        r["torch"] = (cuda_s if r.get("cuda") else torch_s) if uses_torch else 0.0
        r["overhead"] = r["wall"] - r["torch"] - r.get("train", 0.0) - r.get("eval", 0.0)

    def fmt(x: float | None) -> str:
        return "" if x is None else f"{x:.2f}"

    print("\n| command | wall s | torch s | train s | eval s | overhead s | modules | imports |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in refs:
        print(f"| `{r['command']}` | {fmt(r['wall'])} | | | | | {r['modules']} | {', '.join(r['imports']) or '-'} |")
    for r in rows:
        print(f"| `{r['command']}` | {fmt(r['wall'])} | {fmt(r['torch'])} | {fmt(r.get('train'))} | "
              f"{fmt(r.get('eval'))} | {fmt(r['overhead'])} | {r['modules']} | {', '.join(r['imports']) or '-'} |")
    if a.json:
        meta = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "commit": _commit(), "backend": a.backend,
                "python": platform.python_version(), "platform": platform.platform(), "repeats": repeats}
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "references": refs, "rows": rows}, f, indent=1)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
