"""Craftax-Classic's Triton kernels: env steps/s at one size under alternative launch settings.

The results of the kernels do not depend on their launch settings (``Step.configure``: lanes
per program, warps, programs per multiprocessor for the kernels that walk a queue); their speed
does. For each setting below (one group varied at a time around the defaults) this times
``env.step`` eagerly at ``--num-envs`` envs (random actions, same-step autoreset included), and
first reports how much queued work a step carries at that size (worlds left to a spawn scan,
worlds reset).

    python benchmarks/craftax_kernels.py --num-envs 1048576
    python benchmarks/craftax_kernels.py --num-envs 1048576 --only obs

Needs CUDA (on a CPU the kernels run only in Triton's interpreter).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from _meta import commit

VARIANTS = {  # the first of each group is the default; sm_90 register counts (ptxas) in the comments
    "env": [{"env_maxnreg": r} for r in (0, 80)],  # 96 registers (5 programs per SM); 80: 6, spilling 36 bytes
    "spawn": [{"spawn_lanes": lanes, "spawn_warps": w, "spawn_per_sm": p}  # 255, 175, 128, 215, 209, 255 registers
              for lanes, w, p in ((8, 2, 16), (4, 8, 8), (2, 4, 16), (4, 4, 8), (8, 4, 8), (4, 2, 16))],
    "obs": [{"obs_lanes": lanes, "obs_warps": w} for lanes, w in ((16, 4), (8, 4), (16, 8), (32, 8))],  # 168, 90, 108, 189
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=1 << 20)
    p.add_argument("--steps", type=int, default=30, help="timed steps per setting")
    p.add_argument("--only", default="", help="comma list of groups: env,spawn,obs (default: all)")
    p.add_argument("--quick", action="store_true", help="(nox bench) a small size")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("craftax_kernels: needs a CUDA device (the kernels run on a CPU only in Triton's interpreter); skipped")
        return 0
    from noeira.core import make_env

    n = 65536 if args.quick else args.num_envs
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
    print(f"craftax-classic kernels, {n:,} envs, {torch.cuda.get_device_name()}, commit {commit()}")
    print(f"per step: {queued:,.0f} worlds queued for a spawn scan ({queued / n:.2%}), {done:,.0f} reset ({done / n:.2%})")
    print(f"{'group':<6} {'setting':<58} {'steps/s':>10} {'ms/step':>8}")
    groups = [x for x in (args.only.split(",") if args.only else VARIANTS) if x]
    for group in groups:
        for setting in VARIANTS[group]:
            default = dict(step.launch)
            step.configure(**setting)
            for i in range(3):  # compile
                env.step(actions[i % 16])
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(args.steps):
                env.step(actions[i % 16])
            torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / args.steps
            text = ", ".join(f"{k}={v}" for k, v in setting.items())
            print(f"{group:<6} {text:<58} {n / dt:>10.3g} {dt * 1e3:>8.3f}", flush=True)
            step.configure(**default)
    return 0


if __name__ == "__main__":
    sys.exit(main())
