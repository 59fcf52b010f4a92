"""The Craftax Triton kernels (Craftax-Classic's, and the full game's rules, worlds and observation) compile
for the GPU (sm_90, what the H200 runs), checked without one.

Elsewhere the kernels run on the CPU in Triton's interpreter, which executes Python and never
compiles: a construct the compiler rejects would pass every CPU test and fail on the first
GPU. Here one env step and one expansion run under the interpreter with each kernel's launch
recorded (argument types, constexprs, launch options), then a fresh process without the
interpreter compiles every recorded kernel to PTX and cubin for sm_90 (Triton ships its own
LLVM and ptxas; no driver or device is needed), specialized as the runtime would: arguments
(pointers and integers) divisible by 16 marked so. Without that the build is another one (the
observation kernel took 255 registers there, 137 as the GPU builds it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton", reason="the fused Craftax step needs Triton")
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

TYPES = {torch.uint8: "*u8", torch.int8: "*i8", torch.int16: "*i16", torch.int32: "*i32", torch.int64: "*i64",
         torch.float32: "*fp32", torch.float64: "*fp64", torch.bfloat16: "*bf16"}
KERNELS = {"triton_step": ("_env_kernel", "_spawn_kernel", "_observe_kernel", "_observe_queue_kernel",
                           "_expand_kernel"),
           "triton_worldgen": ("_worldgen_kernel",), "triton_obs": ("_compact_kernel", "_expand_kernel"),
           "full_worldgen": ("_smooth_kernel", "_dungeon_kernel", "_rest_kernel"),
           "full_front": ("_front_kernel",), "full_tail": ("_mobs_kernel", "_spawn_kernel", "_upkeep_kernel", "_finish_kernel"),
           "full_queue": ("_refill_kernel", "_draw_kernel", "_copy_kernel"), "full_account": ("_account_kernel",)}
LAUNCH_OPTIONS = ("num_warps", "num_stages", "maxnreg", "enable_fp_fusion")

COMPILE = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from noeira.envs.craftax import triton_step, triton_worldgen
from noeira.envs.craftax_full import triton_account, triton_front, triton_obs, triton_queue, triton_tail
from noeira.envs.craftax_full import triton_worldgen as full_worldgen
modules = {"triton_step": triton_step, "triton_worldgen": triton_worldgen, "triton_obs": triton_obs,
           "full_worldgen": full_worldgen, "full_front": triton_front, "full_tail": triton_tail,
           "full_queue": triton_queue, "full_account": triton_account}
failed = []
for launch in json.load(open(sys.argv[1])):
    fn = getattr(modules[launch["module"]], launch["kernel"])
    attrs = {(i,): [["tt.divisibility", 16]] for i in launch["aligned"]}
    src = ASTSource(fn=fn, signature=launch["signature"], constexprs=launch["constexprs"], attrs=attrs)
    try:
        triton.compile(src, target=GPUTarget("cuda", 90, 32), options=launch["options"])
    except Exception as exc:
        failed.append(f"{launch['kernel']} {launch['constexprs']}: {type(exc).__name__}: {exc}")
print(json.dumps(failed))
"""


def _record(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Run one step and one bf16 expansion in the interpreter (and a step of the full game with its
    rule and observation kernels, its expansions, and one full-game world by its kernels), recording
    every kernel launch."""
    from noeira.core import make_env
    from noeira.envs.craftax import render, triton_step, triton_worldgen
    from noeira.envs.craftax_full import triton_account, triton_front, triton_obs, triton_queue, triton_tail, worldgen
    from noeira.envs.craftax_full import triton_worldgen as full_worldgen

    modules = {"triton_step": triton_step, "triton_worldgen": triton_worldgen, "triton_obs": triton_obs,
               "full_worldgen": full_worldgen, "full_front": triton_front, "full_tail": triton_tail,
               "full_queue": triton_queue, "full_account": triton_account}
    launches: list[dict] = []

    def recorder(module: str, name: str):
        kernel = getattr(modules[module], name)

        class Launch:
            def __getitem__(self, grid):
                def call(*args, **kwargs):
                    signature, aligned = {}, []
                    for i, (param, value) in enumerate(zip(kernel.arg_names, args, strict=False)):
                        if isinstance(value, torch.Tensor):
                            signature[param] = TYPES[value.dtype]
                            if value.data_ptr() % 16 == 0:
                                aligned.append(i)
                        elif isinstance(value, float):
                            signature[param] = "fp32"
                        else:
                            signature[param] = "i64" if abs(int(value)) >= 2**31 else "i32"
                            if not isinstance(value, bool) and int(value) % 16 == 0:
                                aligned.append(i)
                    constexprs = {k: v for k, v in kwargs.items() if k in kernel.arg_names}
                    signature.update(dict.fromkeys(constexprs, "constexpr"))
                    options = {k: v for k, v in kwargs.items() if k in LAUNCH_OPTIONS}
                    launches.append({"module": module, "kernel": name, "signature": signature,
                                     "constexprs": constexprs, "options": options, "aligned": aligned})
                    return kernel[grid](*args, **kwargs)
                return call
        return Launch()

    for module, names in KERNELS.items():
        for name in names:
            monkeypatch.setattr(modules[module], name, recorder(module, name))
    env = make_env("craftax-classic", num_envs=8, backend="cpu", seed=0, kernel="triton", obs="compact")
    env.step(torch.zeros(8, dtype=torch.long))
    full = make_env("craftax", num_envs=4, backend="cpu", seed=0, obs="compact", obs_kernel="triton",
                    step_kernel="triton", resets="queue", queue_size=8, queue_refill=2, queue_kernel="triton")
    full.step(torch.zeros(4, dtype=torch.long))
    draws = worldgen.keyed_draws(torch.tensor([3]), torch.tensor([worldgen.QUEUE_STREAM]), torch.tensor([0]))
    worldgen.world_from_draws(draws, 0.5, kernel=True)  # as CUDA's queue makes its worlds
    wide = torch.zeros(8, 1352, dtype=torch.bfloat16)
    triton_step.expand(env.obs, wide, render._tenths_table(torch.device("cpu")))
    for dtype in (torch.bfloat16, torch.float32):  # the full game's expansion, as a padded input layer reads it
        triton_obs.expand_kernel()(full.obs, torch.zeros(4, 8272, dtype=dtype))
    # the world kernel as the GPU launches it (the interpreter takes 64 rows at a time, uncapped)
    for x in [x for x in launches if x["kernel"] == "_worldgen_kernel"]:
        for keep in (True, False):
            launches.append({**x, "constexprs": {**x["constexprs"], "ROWS": triton_worldgen.ROWS, "KEEP": keep},
                             "options": {**x["options"], "maxnreg": triton_worldgen.MAXNREG}})
    return launches


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="records the launches in Triton's interpreter")
def test_the_kernels_compile_for_sm90(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("triton.backends.nvidia", reason="Triton without its NVIDIA backend")
    launches = _record(monkeypatch)
    unique = list({json.dumps(x, sort_keys=True): x for x in launches}.values())
    assert {x["kernel"] for x in unique} == {k for names in KERNELS.values() for k in names}
    path = tmp_path / "launches.json"
    path.write_text(json.dumps(unique))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", COMPILE, str(path)], capture_output=True, text=True, env=env,
                         timeout=1200, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    failed = json.loads(out.stdout.strip().splitlines()[-1])
    assert not failed, "\n".join(failed)
