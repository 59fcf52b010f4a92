"""MuJoCo physics side by side: env steps per second of half_cheetah, ant, humanoid at
several world counts, for

  warp-raw      MuJoCo Warp alone: controls drawn by a Warp kernel, frame_skip x mjw.step
                (+ rne_postconstraint where the env needs it), recorded as one Warp CUDA graph
  warp-phys     our mujoco-warp engine alone: ctrl drawn, frame_skip substeps (+ rne), recorded
                as a torch CUDA graph (Warp inside torch's capture, as in the env)
  warp-env      our env on physics=mujoco-warp: env.step recorded as a torch CUDA graph on
                the GPU (obs, reward, autoreset included), eager on the CPU
  warp-env-fixed   the same with torch_graph_conditional=False: inside the torch graph the
                solver runs its fixed iterations instead of exiting early (the default
                before 2026-11-29)
  batch-raw     mujoco.batch.Batch.step alone on --threads threads (what physics=mujoco runs
                for half_cheetah)
  rollout-raw   mujoco.rollout on --threads threads (one call for many steps, no Python per step)
  mujoco-phys   our physics=mujoco engine alone on --threads threads: ctrl written, frame_skip
                substeps (+ mj_rnePostConstraint where the env needs it, in worker processes
                by default), no env; the C cost of mj_rnePostConstraint is well under 1% of
                the substeps', so rollout-raw is the same work as this row without Python
  mujoco-env    our env on physics=mujoco with --threads threads (its own tensor math on one
                torch thread, the env's default torch_threads=1)
  mujoco-env-threads   the same with physics_options workers=threads (ant, humanoid: the
                per-world Python on a thread pool in one process, not in worker processes)
  mujoco-env-pool   the same with torch_threads=0: the env's math on torch's thread pool,
                whose idle threads spin for a while after each parallel op, beside MuJoCo's
                threads or worker processes (run under OMP_WAIT_POLICY=PASSIVE to see the
                cost of the spinning alone)
  gym-vec       gymnasium's vector env of the v5 env (SyncVectorEnv; up to --gym-max envs)

An env step is frame_skip MuJoCo steps (5 for all three). The MuJoCo C rows do the same
work, since a step costs more the more contacts there are (a fallen humanoid's are many):
controls uniform in +-0.3, from the initial state on without resets (the env rows with
terminate_when_unhealthy=False; rollout-raw continues each call from the last one's
state). gym-vec samples the action space and resets as gymnasium does. Rows that need
what is not installed (Warp, a GPU) are skipped. Examples:

  python benchmarks/physics.py --quick                      # CPU, small sizes
  python benchmarks/physics.py --worlds 1024 4096 16384 32768 --threads 16 --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch

MODELS = {  # benchmark name -> (our env, gymnasium id, xml, frame_skip, env needs rne_postconstraint)
    "half_cheetah": ("halfcheetah", "HalfCheetah-v5", "half_cheetah.xml", 5, False),
    "ant": ("ant", "Ant-v5", "ant.xml", 5, True),
    "humanoid": ("humanoid", "Humanoid-v5", "humanoid.xml", 5, True),
}


def asset(xml: str) -> str:
    spec = importlib.util.find_spec("gymnasium")
    return os.path.join(list(spec.submodule_search_locations)[0], "envs", "mujoco", "assets", xml)


def timed(step: Callable[[], None], sync: Callable[[], None], min_time: float, warmup: int = 3) -> float:
    """Calls of ``step`` per second, run for at least ``min_time`` seconds after warm-up."""
    for _ in range(warmup):
        step()
    sync()
    calls, t0 = 0, time.perf_counter()
    while True:
        step()
        calls += 1
        if calls % 8 == 0 or time.perf_counter() - t0 >= min_time:  # a GPU row syncs now and then
            sync()
            dt = time.perf_counter() - t0
            if dt >= min_time:
                return calls / dt


KEEP_GOING = {"half_cheetah": {}, "ant": {"terminate_when_unhealthy": False},
              "humanoid": {"terminate_when_unhealthy": False}}
"""The env rows' options for the raw rows' work: no resets of fallen robots."""


def host_model(xml: str):
    import mujoco

    return mujoco.MjModel.from_xml_path(xml)


# -- rows ----------------------------------------------------------------------------------


def warp_raw(name: str, n: int, device: str, args) -> float:
    import mujoco
    import mujoco_warp as mjw
    import warp as wp
    from _warp_controls import advance_seed, draw_controls

    _, _, xml, fs, rne = MODELS[name]
    m = host_model(asset(xml))
    if m.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON  # as our engine does
    with wp.ScopedDevice(device):
        mm = mjw.put_model(m)
        d = mjw.put_data(m, mujoco.MjData(m), nworld=n)
        seed = wp.zeros(1, dtype=int)

        def body() -> None:
            # controls drawn every step, as the env rows' actions are: a solver warm-started
            # from the last step needs more iterations after a change of controls
            wp.launch(draw_controls, dim=d.ctrl.shape, inputs=[d.ctrl, seed, -0.3, 0.3])
            wp.launch(advance_seed, dim=1, inputs=[seed])
            for _ in range(fs):
                mjw.step(mm, d)
            if rne:
                mjw.rne_postconstraint(mm, d)

        body()  # compile
        if device.startswith("cuda"):
            with wp.ScopedCapture() as cap:
                body()
            graph = cap.graph
            rate = timed(lambda: wp.capture_launch(graph), wp.synchronize, args.min_time)
        else:
            rate = timed(body, wp.synchronize, args.min_time)
    return rate * n


def warp_phys(name: str, n: int, device: str, args) -> float:
    from noeira.core import make_physics

    _, _, xml, fs, rne = MODELS[name]
    eng = make_physics("mujoco-warp", asset(xml), num_worlds=n, backend=device.split(":")[0],
                       rne_post_constraint=rne)
    gen = torch.Generator(device=eng.device).manual_seed(0)

    def step() -> None:
        eng.ctrl.uniform_(-0.3, 0.3, generator=gen)
        eng.step(fs)

    rate = _torch_graph_rate(step, [gen], eng.device, args)
    eng.close()
    return rate * n


def _torch_graph_rate(step: Callable[[], None], generators: list, device: torch.device, args) -> float:
    """Calls of ``step`` per second: recorded as a torch CUDA graph and replayed on the GPU
    (``generators`` drawn from inside it), called eagerly on the CPU."""
    if device.type != "cuda":
        return timed(step, lambda: None, args.min_time)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    for generator in generators:
        g.register_generator_state(generator)
    with torch.cuda.graph(g):
        step()
    return timed(g.replay, torch.cuda.synchronize, args.min_time)


def warp_env(name: str, n: int, device: str, args, conditional: bool = True) -> float:
    from noeira.core import make_env

    env = make_env(MODELS[name][0], num_envs=n, backend=device.split(":")[0], seed=0, physics="mujoco-warp",
                   physics_options={"torch_graph_conditional": conditional}, **KEEP_GOING[name])
    env.reset(seed=0)
    action = torch.zeros((n, *env.action_space.shape), device=env.device)
    gen = torch.Generator(device=env.device).manual_seed(0)

    def step() -> None:
        action.uniform_(-0.3, 0.3, generator=gen)  # the raw rows' controls
        env.step(action)

    rate = _torch_graph_rate(step, [env.generator, gen], env.device, args)  # reset noise, actions
    env.close()
    return rate * n


def batch_raw(name: str, n: int, device: str, args) -> float:
    from mujoco import batch as mj_batch

    _, _, xml, fs, _ = MODELS[name]
    m = host_model(asset(xml))
    b = mj_batch.Batch(m, nsim=n, nthread=args.threads)
    b.reset()
    ctrl = b.bind("ctrl")
    rng = np.random.default_rng(0)

    def step() -> None:
        ctrl[:] = rng.uniform(-0.3, 0.3, ctrl.shape)
        b.step(nstep=fs)

    return timed(step, lambda: None, args.min_time) * n


def rollout_raw(name: str, n: int, device: str, args) -> float:
    import mujoco
    from mujoco import rollout

    _, _, xml, fs, _ = MODELS[name]
    m = host_model(asset(xml))
    datas = [mujoco.MjData(m) for _ in range(args.threads)]
    state0 = np.zeros((n, mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)))
    mujoco.mj_getState(m, datas[0], state0[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    state0[:] = state0[0]
    env_steps = 20  # per call, so the per-call cost is amortized as in a long run
    ctrl = np.random.default_rng(0).uniform(-0.3, 0.3, (n, env_steps * fs, m.nu))
    state = np.zeros((n, env_steps * fs, state0.shape[1]))
    sensordata = np.zeros((n, env_steps * fs, m.nsensordata))

    def call() -> None:
        r.rollout(m, datas, state0, ctrl, state=state, sensordata=sensordata)
        state0[:] = state[:, -1]  # the next call goes on from here

    with rollout.Rollout(nthread=args.threads) as r:
        rate = timed(call, lambda: None, args.min_time, warmup=1)
    return rate * n * env_steps


def mujoco_phys(name: str, n: int, device: str, args) -> float:
    from noeira.core import make_physics

    _, _, xml, fs, rne = MODELS[name]
    eng = make_physics("mujoco", asset(xml), num_worlds=n, backend="cpu", nthread=args.threads,
                       rne_post_constraint=rne)
    fields = [eng.field(f) for f in ENV_FIELDS[name]]  # copied out after each step, as the env reads them
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        eng.ctrl.copy_(torch.rand(eng.ctrl.shape, generator=gen, dtype=torch.float64) * 0.6 - 0.3)
        eng.step(fs)

    rate = timed(step, lambda: None, args.min_time)
    eng.close()
    del fields
    return rate * n


ENV_FIELDS = {"half_cheetah": (), "ant": ("xpos", "cfrc_ext"),
              "humanoid": ("xipos", "cinert", "cvel", "qfrc_actuator", "cfrc_ext")}


def mujoco_env(name: str, n: int, device: str, args, workers: str | None = None, torch_threads: int = 1) -> float:
    from noeira.core import make_env

    options = {"nthread": args.threads} | ({"workers": workers} if workers else {})
    env = make_env(MODELS[name][0], num_envs=n, backend="cpu", seed=0, physics="mujoco", physics_options=options,
                   torch_threads=torch_threads, **KEEP_GOING[name])
    env.reset(seed=0)
    gen = torch.Generator().manual_seed(0)
    shape = (n, *env.action_space.shape)

    # where an env step's time goes: the engine's step, and everything else (the env's torch),
    # summed over the same calls (warm-up included, which the rate leaves out)
    physics_step, spent = env.physics.step, {"env": 0.0, "physics": 0.0, "calls": 0}

    def timed_physics_step(nstep: int = 1) -> None:
        t = time.perf_counter()
        physics_step(nstep)
        spent["physics"] += time.perf_counter() - t

    def step() -> None:
        t = time.perf_counter()
        env.step(torch.rand(shape, generator=gen) * 0.6 - 0.3)
        spent["env"] += time.perf_counter() - t
        spent["calls"] += 1

    env.physics.step = timed_physics_step
    rate = timed(step, lambda: None, args.min_time)
    calls = max(spent["calls"], 1)
    print(f"{'':20s} {1e3 * spent['env'] / calls:.1f} ms per env step over {calls} calls, "
          f"{1e3 * spent['physics'] / calls:.1f} of them in physics.step", flush=True)
    env.close()
    return rate * n


def gym_vec(name: str, n: int, device: str, args) -> float:
    import gymnasium as gym

    if n > args.gym_max:
        raise SkipRow(f"> --gym-max {args.gym_max}")
    envs = gym.make_vec(MODELS[name][1], num_envs=n, vectorization_mode="sync")
    envs.reset(seed=0)
    envs.action_space.seed(0)
    rate = timed(lambda: envs.step(envs.action_space.sample()), lambda: None, args.min_time)
    envs.close()
    return rate * n


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        return "?"


class SkipRow(Exception):
    pass


def _needs_warp(device: str) -> str | None:
    if importlib.util.find_spec("mujoco_warp") is None or importlib.util.find_spec("warp") is None:
        return "warp not installed (pip install 'noeira-physics[warp]')"
    return None


ROWS: dict[str, tuple[Callable, Callable[[str], str | None]]] = {
    "warp-raw": (warp_raw, _needs_warp),
    "warp-phys": (warp_phys, _needs_warp),
    "warp-env": (warp_env, _needs_warp),
    "warp-env-fixed": (lambda *a: warp_env(*a, conditional=False), _needs_warp),
    "batch-raw": (batch_raw, lambda d: None),
    "rollout-raw": (rollout_raw, lambda d: None),
    "mujoco-phys": (mujoco_phys, lambda d: None),
    "mujoco-env": (mujoco_env, lambda d: None),
    "mujoco-env-threads": (lambda *a: mujoco_env(*a, workers="threads"), lambda d: None),
    "mujoco-env-pool": (lambda *a: mujoco_env(*a, torch_threads=0), lambda d: None),
    "gym-vec": (gym_vec, lambda d: None if importlib.util.find_spec("gymnasium") else "gymnasium not installed"),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes for a CPU check")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--worlds", nargs="+", type=int, default=None, help="world counts (default 1024..32768)")
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads for MuJoCo C")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="device for Warp")
    p.add_argument("--min-time", type=float, default=None, help="seconds per measurement")
    p.add_argument("--gym-max", type=int, default=None, help="largest gymnasium vector env")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args()
    if args.worlds is None:
        args.worlds = [16, 64] if args.quick else [1024, 4096, 16384, 32768]
    if args.min_time is None:
        args.min_time = 0.5 if args.quick else 2.0
    if args.gym_max is None:
        args.gym_max = 64 if args.quick else 1024
    warnings.simplefilter("ignore")  # MuJoCo's settotalmass, Warp's PGS -> Newton note
    import mujoco

    mujoco.set_mju_user_warning(lambda msg: None)  # not to stderr and MUJOCO_LOG.TXT
    try:
        import warp as wp

        wp.config.quiet = True
    except ImportError:
        pass

    results: list[dict] = []
    print(f"device={args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}), "
          f"threads={args.threads}, torch {torch.__version__}", flush=True)
    print(f"host: {cpu_model()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
          f"torch threads {torch.get_num_threads()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}", flush=True)
    for name in args.models:
        for n in args.worlds:
            for row in args.rows:
                fn, needs = ROWS[row]
                why = needs(args.device)
                if why is None:
                    try:
                        rate = fn(name, n, args.device, args)
                        results.append({"model": name, "worlds": n, "row": row, "steps_per_s": rate})
                        print(f"{name:13s} {n:6d} {row:18s} {rate:12.4g} env steps/s", flush=True)
                        continue
                    except SkipRow as e:
                        why = str(e)
                    except Exception as e:  # a benchmark row failing must not hide the others
                        why = f"{type(e).__name__}: {e}"
                results.append({"model": name, "worlds": n, "row": row, "skipped": why})
                print(f"{name:13s} {n:6d} {row:18s} skipped: {why}", flush=True)

    # the table: one line per (model, worlds), one column per row kind
    cols = args.rows
    print()
    width = {c: max(12, len(c)) for c in cols}
    print(f"{'model':13s} {'worlds':>6s} " + " ".join(f"{c:>{width[c]}s}" for c in cols)
          + "   ratios (raw: the faster of batch-raw, rollout-raw)")
    for name in args.models:
        for n in args.worlds:
            cells, got = [], {}
            for c in cols:
                r = next((r for r in results if r["model"] == name and r["worlds"] == n and r["row"] == c), None)
                if r and "steps_per_s" in r:
                    got[c] = r["steps_per_s"]
                    cells.append(f"{r['steps_per_s']:{width[c]}.3g}")
                else:
                    cells.append(f"{'-':>{width[c]}s}")
            ratios = []
            for c in ("warp-phys", "warp-env", "warp-env-fixed"):
                if c in got and "warp-raw" in got:
                    ratios.append(f"{c.removeprefix('warp-')}/warp-raw {got[c] / got['warp-raw']:.2f}")
            raw = max(got.get("batch-raw", 0), got.get("rollout-raw", 0))  # the faster raw MuJoCo C
            for c in ("mujoco-phys", "mujoco-env", "mujoco-env-threads", "mujoco-env-pool"):
                if c in got and raw:
                    ratios.append(f"{c.removeprefix('mujoco-')}/raw {got[c] / raw:.2f}")
            print(f"{name:13s} {n:6d} " + " ".join(cells) + "   " + ", ".join(ratios))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
