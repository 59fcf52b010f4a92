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


CARRIES = """
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from noeira.agents import mingru_kernels as k

out = {}
for fn in (k.conv_forward, k.conv_backward):
    for n in (1, 2, 3):
        cx = {"H": 8, "N": n, "KEEP": True, "BLOCK": 256}
        signature = {a: "constexpr" if a in cx else ("*fp32" if a not in ("T", "B") else "i32") for a in fn.arg_names}
        consts = {(fn.arg_names.index(a),): v for a, v in cx.items()}
        ttir = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ttir"]
        loop = re.search(r"scf\\.for [^{]*iter_args\\(([^)]*)\\)", ttir).group(1)
        out[f"{fn.__name__} {n}"] = [re.match(r"%([a-z]+\\d*)", a.strip()).group(1) for a in loop.split(",")]
print(json.dumps(out))
"""


def test_conv_kernels_carry_every_tap_through_their_loops() -> None:
    """What the interpreter cannot show: the compiled conv kernels' time loops carry the values of
    every tap from one step to the next (the backward: du and keep of the N later steps, the N + 1
    partial sums of dw; the forward: the N earlier inputs). Triton decides what a loop carries by
    comparing values before and after its body, so a rotation (``d2 = d1``) of values that started
    as one tensor compiled to a constant (on an H100, 2026-12-07: wrong gradients at 3 and 4 taps)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", CARRIES], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    carried = json.loads(out.stdout.strip().splitlines()[-1])
    for n in (1, 2, 3):
        back = set(carried[f"conv_backward {n}"])
        want = {f"d{i}" for i in range(1, n + 1)} | {f"k{i}" for i in range(1, n + 1)} | {f"g{i}" for i in range(n + 1)}
        assert want <= back, (n, sorted(want - back))
        assert {f"p{i}" for i in range(1, n + 1)} <= set(carried[f"conv_forward {n}"]), n
