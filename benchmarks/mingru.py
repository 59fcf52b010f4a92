"""One MinGRU layer over a training segment, forward and backward, at PPO's minibatch sizes: the
causal conv in front of the gates as torch ops (``networks.causal_conv``, the CPU's form) against
its Triton kernels (``mingru_scan.conv_sequence``, the GPU's), and the whole layer (conv, gates'
GEMM, recurrence, highway skip) with ``scan=parallel`` (torch), ``scan=fused`` with the torch conv
(the path before the conv kernels) and ``scan=fused`` as it ships. Each row also says how far the
outputs and the input gradients are from the torch form's.

    python benchmarks/mingru.py                               # the Craftax recipe's minibatch: 128 x 1,024 x 256
    python benchmarks/mingru.py --segments 512,1024 --taps 4 --dtype bfloat16
    python benchmarks/mingru.py --quick                       # CPU-sized (Triton's interpreter on a CPU)

The conv rows' agreement is against the torch form, the layer rows' against ``scan=parallel``;
with bfloat16 inputs a unit of bfloat16 (the outputs' rounding) is expected, with float32 a few
float32 units. On a CPU the Triton kernels run only in Triton's interpreter
(``TRITON_INTERPRET=1``): the figures then say nothing about speed, the agreement columns still hold.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch
from _common import time_calls
from _meta import commit

from noeira.agents import mingru_scan
from noeira.agents.networks import MinGRU, causal_conv
from noeira.core.api import get_backend
from noeira.core.contracts import NetworkSpec


def _inputs(t: int, b: int, h: int, taps: int, dtype: torch.dtype, device: torch.device) -> dict[str, Any]:
    g = torch.Generator(device=device).manual_seed(0)
    return {
        "x": torch.randn(t, b, h, generator=g, device=device).to(dtype).requires_grad_(),
        "past": torch.randn(taps - 1, b, h, generator=g, device=device).requires_grad_(),
        "keep": (torch.rand(t, b, generator=g, device=device) > 1 / 300).float(),  # Craftax's ~300-step episodes
        "w": torch.randn(taps, h, generator=g, device=device).requires_grad_(),
        "du": torch.randn(t, b, h, generator=g, device=device).to(dtype),
    }


def _conv_pass(conv: Any, a: dict[str, Any]) -> list[torch.Tensor]:
    for k in ("x", "past", "w"):
        a[k].grad = None
    u = conv(a["x"], a["past"], a["keep"], a["w"])
    u.backward(a["du"])
    return [u.detach(), a["x"].grad, a["w"].grad, a["past"].grad]


class _TorchConv(MinGRU):
    """``scan=fused`` with the conv as torch ops (the path before the conv kernels)."""

    def _conv_sequence(self, i: int, x: torch.Tensor, past: list[torch.Tensor], keep: torch.Tensor) -> torch.Tensor:
        return causal_conv(x, torch.stack(past), keep.squeeze(-1), self.conv[i].float())


def _layer(kind: str, h: int, taps: int, dtype: torch.dtype, device: torch.device) -> MinGRU:
    scan = "parallel" if kind == "parallel" else "fused"
    spec = NetworkSpec((h,), {"actor": 2}, device, (h,), options={"scan": scan, "conv": taps})
    torch.manual_seed(0)
    net = (_TorchConv if kind == "fused, torch conv" else MinGRU)(spec)
    with torch.no_grad():
        net.conv.normal_(std=0.5)  # not the identity the layer starts as
    return net.to(dtype)  # the working weights in the input's dtype, as bf16-master keeps them


def _layer_pass(net: MinGRU, a: dict[str, Any], state: list[torch.Tensor]) -> list[torch.Tensor]:
    net.zero_grad(set_to_none=True)
    a["x"].grad = None
    y = net._layer_sequence(0, a["x"], state, a["keep"].unsqueeze(-1))
    y.backward(a["du"].float())
    return [y.detach(), a["x"].grad]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--segments", default="1024", help="comma list of B (segments a minibatch)")
    p.add_argument("--steps", type=int, default=128, help="T, the segment's length")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--taps", type=int, default=4, help="the conv's width (MinGRU's conv option; 2 to 4)")
    p.add_argument("--dtype", default="bfloat16", help="the layer input's dtype: bfloat16 (bf16 working weights) "
                   "or float32")
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--quick", action="store_true", help="CPU-sized: B = 8, T = 16, H = 32")
    a = p.parse_args(argv)
    if not 2 <= a.taps <= mingru_scan.MAX_TAPS:
        sys.exit(f"mingru: --taps must be 2 to {mingru_scan.MAX_TAPS}, got {a.taps}")
    if a.dtype not in ("bfloat16", "float32"):
        sys.exit(f"mingru: --dtype must be bfloat16 or float32, got {a.dtype!r}")
    if not mingru_scan.available():
        sys.exit("mingru: the fused kernels need Triton (pip install triton)")
    be = get_backend(a.backend)
    dtype = getattr(torch, a.dtype)
    sizes = [8] if a.quick else [int(x) for x in a.segments.split(",")]
    t, h = (16, 32) if a.quick else (a.steps, a.hidden)
    min_time = 0.2 if a.quick else a.min_time
    print(f"MinGRU layer, T={t}, H={h}, conv {a.taps} taps, input {a.dtype} - {be.name} ({be.device_name()}), "
          f"commit {commit()}")
    print(f"{'B':>6} {'what':<30} {'ms fwd+bwd':>11} {'max |diff| out':>15} {'max |diff| dx':>14}")
    for b in sizes:
        x = _inputs(t, b, h, a.taps, dtype, be.device)
        want = _conv_pass(causal_conv, x)
        for name, conv in (("conv, torch ops", causal_conv), ("conv, Triton kernels", mingru_scan.conv_sequence)):
            got = _conv_pass(conv, x)
            sec = time_calls(lambda: _conv_pass(conv, x), be.synchronize, min_time, warmup=2, max_chunk=20)[0]  # noqa: B023
            print(f"{b:>6} {name:<30} {1e3 * sec:>11.3f} {float((got[0].float() - want[0].float()).abs().max()):>15.2e} "
                  f"{float((got[1].float() - want[1].float()).abs().max()):>14.2e}", flush=True)
        state = [torch.zeros(b, h, device=be.device)] + list(x["past"].detach())
        ref = None
        for kind in ("parallel", "fused, torch conv", "fused"):
            net = _layer(kind, h, a.taps, dtype, be.device)
            got = _layer_pass(net, x, state)
            ref = ref or got
            sec = time_calls(lambda: _layer_pass(net, x, state), be.synchronize, min_time, warmup=2, max_chunk=20)[0]  # noqa: B023
            print(f"{b:>6} {'layer, scan=' + kind:<30} {1e3 * sec:>11.3f} "
                  f"{float((got[0] - ref[0]).abs().max()):>15.2e} {float((got[1].float() - ref[1].float()).abs().max()):>14.2e}",
                  flush=True)
        if be.device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
