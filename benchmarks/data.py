"""Data and deployment: imitation of our own expert, dataset throughput, deployment latency.

Three parts (``--parts``), each printing a table:

- **imitation**: an expert trained in simulation (SAC on Pendulum with its recipe, or
  ``--expert RUN``) records ``--demos`` deterministic episodes (``noeira record --policy``);
  ``bc`` and ``act`` are trained on them (``noeira train agent=... dataset=...``, their recipes,
  ``--seeds``); the expert and every imitator are evaluated on the same ``--eval-episodes``
  seeded episodes. Success: an episode's return >= -200 (the threshold BENCHMARKS.md uses for
  Pendulum); the table gives each policy's success rate, the imitators' also as a fraction of
  the expert's.
- **io**: write and read throughput in frames/s of a LeRobot v3 dataset of ``--frames`` frames
  of a six-joint arm (state, action, reward, done; episodes of 200 frames), beside the same
  rows written and read by pyarrow in one call (no per-episode commit: the price of keeping
  every saved episode readable); then a 96 x 96 camera (``--video-frames``), encoded with
  LeRobot's settings and decoded back; random items with a 20-frame action chunk.
- **deploy**: ``noeira deploy``'s control step (read the joints, run the policy, send the goals)
  on an emulated SO-101 (in-process serial transport), p50/p99 over ``--deploy-steps`` steps,
  for a BC policy as a checkpoint, TorchScript, torch.export and ONNX, beside the same step
  with no policy (read + send the present pose: the bus alone).

    python benchmarks/data.py --quick                      # a few minutes on the 2-core CPU
    python benchmarks/data.py --parts imitation --seeds 0,1,2 --json data-imitation.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _meta import commit

from noeira.core.cli import main as noeira
from noeira.core.driver import load_run

THRESHOLD = -200.0


def _run(*args: str) -> None:
    code = noeira(list(args))
    if code != 0:
        raise SystemExit(f"noeira {' '.join(args)} exited with {code}")


def episode_returns(run: Path, episodes: int, seed: int) -> np.ndarray:
    """The return of one deterministic episode in each of ``episodes`` envs (a recurrent policy,
    ACT's ensemble included, carrying its state), the envs seeded ``seed``."""
    loaded = load_run(run, backend="cpu", num_envs=episodes, seed_offset=0)
    env, agent = loaded.env, loaded.agent
    obs = env.reset(seed=seed)
    state, done = agent.initial_state(episodes), torch.ones(episodes, dtype=torch.bool)
    returns = torch.zeros(episodes, dtype=torch.float64)
    finished = torch.zeros(episodes, dtype=torch.bool)
    while not bool(finished.all()):
        action, state = agent.act(obs, state, done, deterministic=True)
        r = env.step(action)
        returns += r.reward.double() * (~finished)
        done = r.terminated | r.truncated
        finished |= done
        obs = r.obs
    env.close()
    return returns.numpy()


# -- imitation --------------------------------------------------------------------------------

def with_agent_keys(run: Path, dest: Path, **keys: Any) -> Path:
    """A run directory at ``dest`` with ``run``'s checkpoints and its config but for some agent keys
    (acting settings: the weights are the same)."""
    import tomllib

    import tomli_w

    cfg = tomllib.loads((run / "config.toml").read_text())
    cfg["agent"].update(keys)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.toml").write_text(tomli_w.dumps(cfg))
    if not (dest / "checkpoints").exists():
        (dest / "checkpoints").symlink_to((run / "checkpoints").resolve())
    return dest


def imitation(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    expert = Path(args.expert) if args.expert else work / "expert"
    t0 = time.perf_counter()
    if not args.expert:
        _run("train", "agent=sac", "env=pendulum", f"backend={args.backend}", "run.seed=0", "run.eval_episodes=10",
             "run.progress=false", "--run-dir", str(expert))
    expert_seconds = time.perf_counter() - t0
    demos = work / "demos"
    t0 = time.perf_counter()
    _run("record", "--policy", str(expert), "--episodes", str(args.demos), "--num-envs", str(min(args.demos, 10)),
         "--out", str(demos), "--seed", "100", "--backend", "cpu")
    record_seconds = time.perf_counter() - t0
    seed = 12345  # the evaluation episodes: the same for every policy, none of them recorded
    rows = []
    ret = episode_returns(expert, args.eval_episodes, seed)
    expert_rate = float((ret >= THRESHOLD).mean())
    rows.append({"policy": "expert (sac)", "seed": 0, "train_steps": "-", "train_seconds": round(expert_seconds, 1),
                 "mean_return": float(ret.mean()), "success": expert_rate, "of_expert": 1.0})
    for agent in ("bc", "act"):
        for s in args.seeds:
            run = work / f"{agent}-{s}"
            steps = args.bc_steps if agent == "bc" else args.act_steps
            extra = [f"run.total_steps={steps}"] if steps else []
            t0 = time.perf_counter()
            _run("train", f"agent={agent}", f"dataset={demos}", f"backend={args.backend}", f"run.seed={s}",
                 "run.eval_episodes=0", "run.progress=false", *extra, "--run-dir", str(run))
            seconds = time.perf_counter() - t0
            record = json.loads((run / "record.json").read_text())
            ret = episode_returns(run, args.eval_episodes, seed)
            rate = float((ret >= THRESHOLD).mean())
            rows.append({"policy": agent, "seed": s, "train_steps": record["env_steps"],
                         "train_seconds": round(seconds, 1), "mean_return": float(ret.mean()), "success": rate,
                         "of_expert": rate / expert_rate if expert_rate else float("nan")})
            if agent == "act":  # the same weights acting on each new chunk's first action, no ensemble
                plain = with_agent_keys(run, work / f"act-{s}-no-ensemble", temporal_ensemble=False)
                ret = episode_returns(plain, args.eval_episodes, seed)
                rate = float((ret >= THRESHOLD).mean())
                rows.append({"policy": "act, no temporal ensemble", "seed": s, "train_steps": record["env_steps"],
                             "train_seconds": "same", "mean_return": float(ret.mean()), "success": rate,
                             "of_expert": rate / expert_rate if expert_rate else float("nan")})
    print(f"\nimitation on Pendulum (trained on {args.backend}): {args.demos} expert episodes ({args.demos * 200:,} "
          f"frames, recorded in {record_seconds:.1f} s), {args.eval_episodes} evaluation episodes each, "
          f"success = return >= {THRESHOLD:g}")
    print("| policy | seed | gradient steps | train s | mean return | success | of the expert's |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['seed']} | {r['train_steps']} | {r['train_seconds']} | {r['mean_return']:.1f} | "
              f"{r['success']:.0%} | {r['of_expert']:.0%} |")
    return {"demos": args.demos, "eval_episodes": args.eval_episodes, "rows": rows}


# -- io ---------------------------------------------------------------------------------------

def io(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from noeira.core.dataset import DatasetWriter, LeRobotDataset

    rng = np.random.default_rng(0)
    n, length = args.frames, 200
    state = rng.normal(size=(n, 6)).astype(np.float32)
    action = rng.normal(size=(n, 6)).astype(np.float32)
    reward = rng.normal(size=n).astype(np.float32)
    names = [f"j{i}.pos" for i in range(6)]
    features = {"observation.state": {"dtype": "float32", "shape": [6], "names": names},
                "action": {"dtype": "float32", "shape": [6], "names": names},
                "next.reward": {"dtype": "float32", "shape": [1], "names": None},
                "next.done": {"dtype": "bool", "shape": [1], "names": None}}
    rows: list[dict[str, Any]] = []

    root = work / "io"
    t0 = time.perf_counter()
    with DatasetWriter(root, fps=30, features=features) as w:
        for i in range(n):
            w.add_frame({"observation.state": state[i], "action": action[i], "next.reward": reward[i],
                         "next.done": (i + 1) % length == 0}, task="t")
            if (i + 1) % length == 0:
                w.save_episode()
    rows.append(("write", "noeira DatasetWriter (every episode committed)", n / (time.perf_counter() - t0)))

    ref = work / "ref.parquet"
    t0 = time.perf_counter()
    table = pa.table({"observation.state": pa.FixedSizeListArray.from_arrays(pa.array(state.reshape(-1)), 6),
                      "action": pa.FixedSizeListArray.from_arrays(pa.array(action.reshape(-1)), 6),
                      "next.reward": reward, "next.done": (np.arange(n) + 1) % length == 0,
                      "index": np.arange(n)})
    pq.write_table(table, ref, compression="snappy")
    rows.append(("write", "pyarrow write_table, all rows at once (reference)", n / (time.perf_counter() - t0)))

    t0 = time.perf_counter()
    ds = LeRobotDataset(root)
    ds.column("action")
    rows.append(("read", "noeira LeRobotDataset: open + every frame", n / (time.perf_counter() - t0)))
    t0 = time.perf_counter()
    pq.read_table(ref).column("action").combine_chunks().flatten().to_numpy()
    rows.append(("read", "pyarrow read_table (reference)", n / (time.perf_counter() - t0)))
    chunked = LeRobotDataset(root, delta_timestamps={"action": [i / 30 for i in range(20)]})
    idx = rng.integers(0, n, size=2000)
    t0 = time.perf_counter()
    for i in idx:
        chunked[int(i)]
    rows.append(("read", "random items with a 20-frame action chunk (items/s)", len(idx) / (time.perf_counter() - t0)))

    vroot = work / "video"
    vn = args.video_frames
    vfeatures = {**features, "observation.images.front": {"dtype": "video", "shape": [96, 96, 3],
                                                          "names": ["height", "width", "channels"]}}
    yy, xx = np.mgrid[0:96, 0:96]
    t0 = time.perf_counter()
    with DatasetWriter(vroot, fps=30, features=vfeatures) as w:
        for i in range(vn):
            img = np.stack([(xx + i) % 256, (yy + 2 * i) % 256, np.full_like(xx, i % 256)], -1).astype(np.uint8)
            w.add_frame({"observation.state": state[i], "action": action[i], "next.reward": reward[i],
                         "next.done": (i + 1) % 100 == 0, "observation.images.front": img}, task="t")
            if (i + 1) % 100 == 0:
                w.save_episode()
    rows.append(("write", "with a 96x96 camera (libsvtav1, g=2, crf 30)", vn / (time.perf_counter() - t0)))
    t0 = time.perf_counter()
    vds = LeRobotDataset(vroot)
    vds.video_frames("observation.images.front")
    rows.append(("read", "with a 96x96 camera: every frame decoded", vn / (time.perf_counter() - t0)))
    idx = rng.integers(0, len(vds), size=200)
    t0 = time.perf_counter()
    for i in idx:
        vds[int(i)]
    rows.append(("read", "with a 96x96 camera: random items (items/s)", len(idx) / (time.perf_counter() - t0)))
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(f"\ndataset throughput: {n:,} frames of a six-joint arm (+ {vn:,} with a camera); the dataset takes "
          f"{size / 2**20:.1f} MiB")
    print("| what | how | frames/s |")
    print("|---|---|---|")
    for what, how, rate in rows:
        print(f"| {what} | {how} | {rate:,.0f} |")
    return {"frames": n, "video_frames": vn, "rows": [{"what": a, "how": b, "per_second": c} for a, b, c in rows]}


# -- deploy -----------------------------------------------------------------------------------

CALIBRATION = {j: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1000, "range_max": 3000}
               for i, j in enumerate(["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"])}


def deploy_latency(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from noeira.core.dataset import DatasetWriter
    from noeira.core.dataset.record import robot_features
    from noeira.core.export import load_policy
    from noeira.robot.deploy import deploy
    from noeira.robot.emulator import EmulatedBus, register, unregister
    from noeira.robot.so101 import JOINTS, SO101Follower

    cal = work / "cal.json"
    cal.write_text(json.dumps(CALIBRATION))
    ds = work / "arm"
    with DatasetWriter(ds, fps=30, features=robot_features(list(JOINTS)), robot_type="so101_follower") as w:
        for e in range(4):
            for t in range(50):
                s = [float(np.sin(0.1 * t + e + k)) * 20 for k in range(6)]
                w.add_frame({"observation.state": s, "action": [v + 1.0 for v in s]})
            w.save_episode()
    run = work / "arm-bc"
    _run("train", "agent=bc", f"dataset={ds}", "run.total_steps=200", "run.eval_episodes=0", "run.progress=false",
         "--run-dir", str(run))
    sources = {"checkpoint": run}
    for fmt, ext in (("torchscript", ".pt"), ("pt2", ".pt2"), ("onnx", ".onnx")):
        _run("export", str(run), "--format", fmt)
        sources[fmt] = run / "export" / f"policy{ext}"

    class Hold:
        """No policy: the goals are the joints just read (the bus alone)."""
        metadata = {"observation": {"shape": [6], "names": None}, "action": {"shape": [6], "names": None}}

        def reset(self) -> None: ...

        def step(self, obs: list[float]) -> list[float]:
            return list(obs)

    rows = []
    url = register("bench", EmulatedBus.so101())
    try:
        for name, policy in [("no policy (read + send)", Hold())] + [(k, load_policy(v)) for k, v in sources.items()]:
            with SO101Follower(port=url, calibration=str(cal), handle_signals=False) as arm:
                arm.arm()
                report = deploy(policy, arm, hz=1000.0, steps=args.deploy_steps, deadline=1.0)
                arm.disarm()
            lat = report.latencies[10:]  # the first steps warm caches
            rows.append({"policy": name, "p50_ms": 1000 * statistics.median(lat),
                         "p99_ms": 1000 * float(np.percentile(lat, 99)), "steps": len(lat)})
    finally:
        unregister("bench")
    print(f"\ndeployment step on the emulated SO-101 (read 6 joints + policy + SYNC_WRITE goals), {args.deploy_steps} steps")
    print("| policy | p50 ms | p99 ms |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |")
    return {"rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="imitation,io,deploy")
    p.add_argument("--expert", help="an expert run to record (default: train SAC on Pendulum with its recipe)")
    p.add_argument("--demos", type=int, default=50, help="expert episodes recorded (default 50)")
    p.add_argument("--seeds", default="0", help="imitator seeds, comma-separated (default 0)")
    p.add_argument("--bc-steps", type=int, help="gradient steps of bc (default: its recipe's)")
    p.add_argument("--act-steps", type=int, help="gradient steps of act (default: its recipe's)")
    p.add_argument("--backend", default="cpu", help="where the expert, bc and act train (cpu | cuda); evaluation on the CPU")
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--frames", type=int, default=100_000)
    p.add_argument("--video-frames", type=int, default=2_000)
    p.add_argument("--deploy-steps", type=int, default=500)
    p.add_argument("--workdir", help="keep the runs and datasets here (default: a temporary folder)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = p.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",")]
    if args.quick:
        args.demos, args.eval_episodes, args.frames, args.video_frames, args.deploy_steps = 10, 20, 20_000, 400, 200
        args.bc_steps, args.act_steps = args.bc_steps or 1000, args.act_steps or 1000
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="noeira-data-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"commit": commit(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
                           "threads": torch.get_num_threads(), "argv": sys.argv[1:]}
    parts = args.parts.split(",")
    try:
        if "io" in parts:
            out["io"] = io(args, work)
        if "deploy" in parts:
            out["deploy"] = deploy_latency(args, work)
        if "imitation" in parts:
            out["imitation"] = imitation(args, work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
