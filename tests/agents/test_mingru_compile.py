"""The MinGRU Triton kernels (the fused scan and conv, :mod:`noeira.agents.mingru_kernels`) compile for
the GPU (sm_90), checked without one: the CPU tests run them in Triton's interpreter, which never
compiles, so a construct the compiler rejects would first fail on a GPU. A fresh process without the
interpreter builds each kernel for every dtype and option the network launches it with (Triton ships
its own LLVM and ptxas; no driver or device is needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="the fused MinGRU kernels need Triton")
pytestmark = pytest.mark.slow

COMPILE = """
import itertools, json
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from noeira.agents import mingru_kernels as k

def build(fn, types, constexprs):
    signature = {n: "constexpr" if n in constexprs else types.get(n, "i32") for n in fn.arg_names}
    consts = {(fn.arg_names.index(n),): v for n, v in constexprs.items()}
    triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": 4})

built, failed = 0, []
for io, n, keep in itertools.product(("*fp32", "*bf16"), (1, 2, 3), (True, False)):
    types = {"x": io, "u": io, "dx": io, "du": "*fp32", "past": "*fp32", "keep": "*fp32", "w": "*fp32",
             "dw": "*fp32", "dpast": "*fp32"}
    for fn in (k.conv_forward, k.conv_backward):
        try:
            build(fn, types, {"H": 256, "N": n, "KEEP": keep, "BLOCK": 256}); built += 1
        except Exception as exc:
            failed.append(f"{fn.__name__} {io} N={n} KEEP={keep}: {type(exc).__name__}: {exc}")
for io, skip, gates in itertools.product(("*fp32", "*bf16"), (0, 1, 2), (2, 3)):
    types = {"g": io, "x": io, "dg": io, "dx": io, "keep": "*fp32", "h0": "*fp32", "hs": "*fp32", "y": "*fp32",
             "dy": "*fp32", "dh0": "*fp32"}
    for fn, extra in ((k.forward, {"KEEP": True}), (k.forward, {"KEEP": False}), (k.backward, {})):
        try:
            build(fn, types, {"H": 256, "GATES": gates, "SKIP": skip, "BLOCK": 256, **extra}); built += 1
        except Exception as exc:
            failed.append(f"{fn.__name__} {io} SKIP={skip} GATES={gates} {extra}: {type(exc).__name__}: {exc}")
print(json.dumps({"built": built, "failed": failed}))
"""


def test_mingru_kernels_compile_for_sm90() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert not result["failed"], "\n".join(result["failed"])
    assert result["built"] == 24 + 36
