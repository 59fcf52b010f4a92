"""Craftax-Classic's Triton kernels: env steps/s at one size under alternative launch settings.

The results of the kernels do not depend on their launch settings (``Step.configure``: lanes
per program, warps, programs per multiprocessor for the kernels that walk a queue); their speed
does. For each setting below (one group varied at a time around the defaults) this times
``env.step`` eagerly at ``--num-envs`` envs (random actions, same-step autoreset included), and
first reports how much queued work a step carries at that size (worlds left to a spawn scan,
worlds reset).

    python benchmarks/craftax_kernels.py --num-envs 1048576
    python benchmarks/craftax_kernels.py --num-envs 1048576 --only obs
    python benchmarks/craftax_kernels.py --num-envs 1048576 --only expand
    python benchmarks/craftax_kernels.py --num-envs 1048576 --only worldgen

``--step-before FILE`` times the step kernels of another version of ``triton_step.py`` (FILE,
e.g. ``git show REV:noeira-envs/src/noeira/envs/craftax/triton_step.py``) against this one's on the
same env, alternating them (three rounds each), so a change meant to keep the speed is measured
before and after in one run (its ``Step`` must take the same calls); then both versions'
``observe`` alone (the observation kernel over every world).

    python benchmarks/craftax_kernels.py --num-envs 1048576 --only none --step-before /tmp/triton_step_before.py

The ``obs`` group also times the observation kernel alone as the step launches it
(``Step.observe``).

The ``worldgen`` group varies the world kernel's launch (``WorldGen.configure``: the noise kept
from stage 2 or computed again, map rows per pass, warps, programs per multiprocessor) and also
times the kernel alone on the last step's list of ended envs.

The ``expand`` group times the decoding of compact observations into a network's padded bf16
input (``triton_step.expand``: [n, 148] uint8 -> [n, 1352] bf16, the 1,345 columns) at
``--num-envs`` rows and at 1/8 of that, against a device copy of the bytes it writes (the
bandwidth it could reach).

Needs CUDA (on a CPU the kernels run only in Triton's interpreter).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import torch
from _meta import commit

VARIANTS = {  # the first of each group is the default; sm_90 register counts (ptxas) in the comments
    "env": [{"env_maxnreg": r} for r in (0, 80)],  # 104 registers (4 programs per SM); 80: 6, spilling 36 bytes
    "spawn": [{"spawn_lanes": lanes, "spawn_warps": w, "spawn_per_sm": p}  # 255, 175, 128, 215, 209, 255 registers
              for lanes, w, p in ((8, 2, 16), (4, 8, 8), (2, 4, 16), (4, 4, 8), (8, 4, 8), (4, 2, 16))],
    "obs": [{"obs_lanes": lanes, "obs_warps": w}  # 45, 55, 56, 57, 40, 40 registers (pointers 16-byte aligned)
            for lanes, w in ((16, 4), (32, 4), (16, 2), (64, 8), (8, 4), (32, 8))],
    "expand": [{"rows": r, "warps": w} for r, w in ((4, 8), (4, 4), (8, 4), (16, 4), (16, 8), (32, 4), (32, 8))],
    "worldgen": [{"keep": k, "rows": r, "warps": w, "per_sm": p}  # 16 rows: capped at 128 registers
                 for k, r, w, p in ((True, 16, 8, 2), (False, 16, 8, 2), (True, 16, 4, 4), (False, 16, 4, 4), (True, 16, 2, 8))],
}


def _timed(fn, steps: int) -> float:
    """Seconds per call of ``fn`` (after 3 untimed calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def _codes(rows: int) -> torch.Tensor:
    """``rows`` compact observations: those of 4,096 worlds after 100 random steps, repeated."""
    from noeira.core import make_env

    env = make_env("craftax-classic", num_envs=4096, backend="cuda", seed=0, kernel="torch", obs="compact")
    g = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(100):
        env.step(torch.randint(0, 17, (4096,), generator=g, device="cuda"))
    return env.obs.repeat(-(-rows // 4096), 1)[:rows].contiguous()


def _expand(codes: torch.Tensor, setting: dict, steps: int) -> list[str]:
    """Rows of the expand group: ``triton_step.expand`` of all ``codes`` and of 1/8 of them, and
    a copy of as many bytes as it writes."""
    from noeira.envs.craftax import render, triton_step

    tenths = render._tenths_table(torch.device("cuda"))
    lines = []
    for rows in (codes.shape[0], codes.shape[0] // 8):
        code = codes[:rows]
        out = torch.zeros(rows, 1352, dtype=torch.bfloat16, device="cuda")
        copy_src = torch.empty_like(out)
        saved = triton_step.EXPAND_ROWS, triton_step.EXPAND_WARPS
        triton_step.EXPAND_ROWS, triton_step.EXPAND_WARPS = setting["rows"], setting["warps"]
        try:
            dt = _timed(lambda c=code, o=out: triton_step.expand(c, o, tenths), steps)
        finally:
            triton_step.EXPAND_ROWS, triton_step.EXPAND_WARPS = saved
        ref = _timed(lambda o=out, c=copy_src: o.copy_(c), steps)
        gbs = rows * 1345 * 2 / dt / 1e9
        lines.append(f"rows={setting['rows']}, warps={setting['warps']}, {rows:,} rows: {dt * 1e6:.1f} us "
                     f"({gbs:.0f} GB/s written; a copy of the buffer {ref * 1e6:.1f} us)")
    return lines


def _before_after(env, actions: list[torch.Tensor], path: str, steps: int) -> None:
    """env steps/s on the step kernels of ``path`` (another ``triton_step.py``) and on this one's,
    alternating, three rounds of ``steps`` steps each (after three untimed steps on each)."""
    import importlib.util
    import statistics

    spec = importlib.util.spec_from_file_location("triton_step_before", path)
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)  # Triton reads the kernels' source from the file
    kernels = {"after": env._triton, "before": before.Step(env.num_envs, env.device)}
    kernels["before"].configure(**{k: v for k, v in env._triton.launch.items() if k in kernels["before"].launch})
    times: dict[str, list[float]] = {"before": [], "after": []}
    turn = itertools.cycle(actions)
    for r in range(4):
        for name, k in kernels.items():
            env._triton = k
            if r == 0:
                for i in range(3):  # compile
                    env.step(actions[i % 16])
                continue
            times[name].append(_timed(lambda: env.step(next(turn)), steps))
    env._triton = kernels["after"]
    n = env.num_envs
    med = {name: statistics.median(t) for name, t in times.items()}
    for name in ("before", "after"):
        print(f"step kernels {name:<6} ({path if name == 'before' else 'this tree'}): {n / med[name]:.4g} steps/s, "
              f"{med[name] * 1e3:.3f} ms/step (rounds: {', '.join(f'{t * 1e3:.3f}' for t in times[name])} ms)", flush=True)
    print(f"after / before: {med['before'] / med['after']:.3f}x", flush=True)
    # the observation kernel alone (``observe``: every world, one output), alternating likewise
    from noeira.envs.craftax import triton_step

    out = torch.empty(n, 148, dtype=torch.uint8, device="cuda")
    obs: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(3):
        for name, module in (("before", before), ("after", triton_step)):
            obs[name].append(_timed(lambda m=module: m.observe(env.s, out), steps))
    print(f"observe() alone: before {statistics.median(obs['before']) * 1e3:.3f} ms, "
          f"after {statistics.median(obs['after']) * 1e3:.3f} ms", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=1 << 20)
    p.add_argument("--steps", type=int, default=30, help="timed steps per setting")
    p.add_argument("--only", default="", help="comma list of groups: env,spawn,obs,expand,worldgen (default: all)")
    p.add_argument("--quick", action="store_true", help="(nox bench) a small size")
    p.add_argument("--step-before", default=None, metavar="FILE", help="another triton_step.py to time against "
                   "this one (alternating rounds)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("craftax_kernels: needs a CUDA device (the kernels run on a CPU only in Triton's interpreter); skipped")
        return 0
    from noeira.core import make_env

    n = 65536 if args.quick else args.num_envs
    groups = [x for x in (args.only.split(",") if args.only else VARIANTS) if x in VARIANTS]
    print(f"craftax-classic kernels, {n:,} envs, {torch.cuda.get_device_name()}, commit {commit()}")
    if "expand" in groups:  # the expansion alone: no env of this size needed (nor its kernels compiled)
        codes = _codes(n)
        for setting in VARIANTS["expand"]:
            for line in _expand(codes, setting, args.steps):
                print(f"expand {line}", flush=True)
        groups.remove("expand")
    if not groups and not args.step_before:
        return 0
    env = make_env("craftax-classic", num_envs=n, backend="cuda", seed=0, kernel="triton", obs="compact")
    step = env._triton
    g = torch.Generator(device="cuda").manual_seed(0)
    actions = [torch.randint(0, 17, (n,), generator=g, device="cuda") for _ in range(16)]
    for i in range(200):  # past the first episodes' start, into a steady mix of ages
        env.step(actions[i % 16])
    queued, done = 0.0, 0.0
    for i in range(50):
        env.step(actions[i % 16])
        queued += float(step.queued) / 50
        done += float(step.done_count) / 50
    print(f"per step: {queued:,.0f} worlds queued for a spawn scan ({queued / n:.2%}), {done:,.0f} reset ({done / n:.2%})")
    if args.step_before:
        _before_after(env, actions, args.step_before, args.steps)
    print(f"{'group':<8} {'setting':<58} {'steps/s':>10} {'ms/step':>8}")
    for group in groups:
        target = env._gen if group == "worldgen" else step
        for setting in VARIANTS[group]:
            default = dict(target.launch)
            target.configure(**setting)
            for i in range(3):  # compile
                env.step(actions[i % 16])
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(args.steps):
                env.step(actions[i % 16])
            torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / args.steps
            text = ", ".join(f"{k}={v}" for k, v in setting.items())
            if group == "worldgen":  # the kernel alone, on the last step's ended envs
                gen = _timed(lambda: env._gen(env.s, step.done_queue, step.done_count, env._light0, key=env.world_key,
                                              episode=env.episode), args.steps)
                text += f" ({int(step.done_count):,} worlds: {gen * 1e3:.3f} ms)"
            if group == "obs":  # the observation kernel alone, as the step launches it
                obs = _timed(lambda: step.observe(env.s, env._final_code, env._obs_code), args.steps)
                text += f" (kernel {obs * 1e3:.3f} ms)"
            print(f"{group:<8} {text:<58} {n / dt:>10.3g} {dt * 1e3:>8.3f}", flush=True)
            target.configure(**default)
    return 0


if __name__ == "__main__":
    sys.exit(main())
