"""Graph backends side by side: the same run under eager, stream and device, in one process.

Each case is built as ``noeira train`` builds it (``agent:env:num_envs``, recipes included), its
collect and learn are wrapped as the driver wraps them, and after the warm-up and recording
iterations (timed apart: that is where compiling and recording happen) ``--iterations``
iterations are timed between two device synchronisations. The case ``builtin`` needs no agent
or env plugin: a REINFORCE MLP on a batched point mass, defined below.

    python benchmarks/graphs.py --quick                       # CPU smoke run (stream = eager there)
    python benchmarks/graphs.py --cases ppo:cartpole:4096,ppo:cartpole:16384,sac:pendulum:64 \\
        --graphs eager,stream,device --iterations 50          # the H200 table
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from noeira.core import Backend, Box, TensorEnv
from noeira.core.api import get_backend, get_graph_backend
from noeira.core.errors import UserError


class PointMass(TensorEnv):
    """A 2-D point pushed toward the origin: obs (x, y, vx, vy), action (ax, ay) in [-1, 1]."""

    name = "pointmass"

    def __init__(self, num_envs: int, backend: Backend, seed: int = 0) -> None:
        dev = backend.device
        super().__init__(num_envs, backend, Box(-10.0, 10.0, (4,), device=dev), Box(-1.0, 1.0, (2,), device=dev),
                         max_episode_steps=200, seed=seed)
        self.state = torch.zeros(num_envs, 4, device=dev)

    def _reset_envs(self, mask: Tensor) -> None:
        fresh = torch.rand(self.num_envs, 4, generator=self.generator, device=self.device) * 2 - 1
        self.state.copy_(torch.where(mask[:, None], fresh, self.state))

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        a = action.clamp(-1, 1)
        self.state[:, 2:].add_(0.05 * a)
        self.state[:, :2].add_(0.05 * self.state[:, 2:])
        dist = self.state[:, :2].norm(dim=-1)
        return -dist - 0.01 * a.square().sum(-1), dist > 5

    def _observe(self, out: Tensor) -> None:
        out.copy_(self.state)

    def get_state(self) -> Tensor:
        return self.state

    def _set_state(self, state: Tensor) -> None:
        self.state.copy_(state)


class Reinforce:
    """Gaussian-policy REINFORCE with a 2x64 MLP, capture-safe (buffers once, capturable Adam)."""

    def __init__(self, env: PointMass, backend: Backend, horizon: int = 32) -> None:
        n, dev = env.num_envs, backend.device
        self.horizon, self.steps_per_collect = horizon, n * horizon
        self.pi = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)).to(dev)
        self.log_std = nn.Parameter(torch.zeros(2, device=dev))
        cuda = dev.type == "cuda"
        params = [*self.pi.parameters(), self.log_std]
        self.opt = torch.optim.Adam(params, lr=torch.tensor(3e-4, device=dev) if cuda else 3e-4, capturable=cuda)
        self.gen = backend.generator(1)
        self.obs = torch.zeros(horizon, n, 4, device=dev)
        self.act_buf = torch.zeros(horizon, n, 2, device=dev)
        self.rew = torch.zeros(horizon, n, device=dev)
        self.done = torch.zeros(horizon, n, device=dev)
        self.ret = torch.zeros(horizon, n, device=dev)

    @torch.no_grad()
    def collect(self, env: PointMass) -> None:
        for t in range(self.horizon):
            self.obs[t].copy_(env.obs)
            noise = torch.randn(env.num_envs, 2, generator=self.gen, device=env.device)
            a = self.pi(env.obs) + self.log_std.exp() * noise
            self.act_buf[t].copy_(a)
            r = env.step(a)
            self.rew[t].copy_(r.reward)
            self.done[t].copy_((r.terminated | r.truncated).float())

    def learn(self) -> Mapping[str, Tensor]:
        ret = torch.zeros_like(self.rew[0])
        for t in reversed(range(self.horizon)):
            ret = self.rew[t] + 0.99 * ret * (1 - self.done[t])
            self.ret[t].copy_(ret)
        adv = (self.ret - self.ret.mean()) / (self.ret.std() + 1e-8)
        mean, std = self.pi(self.obs), self.log_std.exp()
        logp = (-0.5 * ((self.act_buf - mean) / std).square() - self.log_std).sum(-1)
        loss = -(logp * adv).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": loss.detach()}


def build(case: str, backend_name: str, quick: bool) -> tuple[Backend, Any, Any, bool, str]:
    """(backend, env, agent, capture_env, label) for ``builtin[:N]`` or ``agent:env[:N[:KEY=VALUE...]]``."""
    parts = case.split(":")
    if parts[0] == "builtin":
        backend = get_backend(backend_name)
        backend.seed(0)
        n = int(parts[1]) if len(parts) > 1 else (256 if quick else 4096)
        env = PointMass(n, backend)
        agent = Reinforce(env, backend)
        env.reset(seed=0)
        return backend, env, agent, True, f"builtin reinforce/pointmass {n} envs"
    from noeira.core.config import deep_merge, parse_overrides
    from noeira.core.driver import build as build_run
    from noeira.core.driver import resolve

    raw: dict[str, Any] = {"backend": backend_name, "agent": {"name": parts[0]}, "env": {"name": parts[1]}}
    if len(parts) > 2:
        raw["env"]["num_envs"] = int(parts[2])
    run = build_run(resolve(deep_merge(raw, parse_overrides(parts[3:]))))
    extra = f" {' '.join(parts[3:])}" if parts[3:] else ""
    return run.backend, run.env, run.agent, run.capture_env, f"{parts[0]}/{parts[1]} {run.env.num_envs} envs{extra}"


def measure(case: str, graph_name: str, backend_name: str, iterations: int, quick: bool,
            profile: bool = False) -> dict[str, Any]:
    backend, env, agent, capture_env, label = build(case, backend_name, quick)
    graph = get_graph_backend(graph_name)
    try:
        collect = graph.wrap(agent.collect, backend) if capture_env else agent.collect
        learn = graph.wrap(agent.learn, backend)
    except UserError as err:
        return {"case": label, "graph": graph_name, "error": str(err)}
    warm = int(getattr(graph, "warmup", 0)) + 1 if graph.available(backend) else 1
    t0 = time.perf_counter()
    for _ in range(warm):
        collect(env)
        learn()
    backend.synchronize()
    t1 = time.perf_counter()
    for _ in range(iterations):
        collect(env)
        learn()
    backend.synchronize()
    t2 = time.perf_counter()
    if profile and backend.device.type == "cuda":
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                collect(env)
                learn()
            backend.synchronize()
        events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        launches = sum(e.count for e in events) / 3
        gpu_us = sum(e.self_device_time_total for e in events) / 3
        top = sorted(events, key=lambda e: -e.self_device_time_total)[:5]
        print(f"[profile] {label} / {graph_name}: {launches:.0f} kernels and {gpu_us / 1e3:.2f} ms GPU time per "
              f"iteration (wall {1e3 * (t2 - t1) / iterations:.2f} ms); top: "
              + "; ".join(f"{e.key[:50]} x{e.count // 3} {e.self_device_time_total / 3e3:.2f} ms" for e in top),
              file=sys.stderr, flush=True)
    fell_back = [str(s.failure).splitlines()[0][:80] for s in getattr(graph, "steps", []) if getattr(s, "failure", None)]
    dt = t2 - t1
    updates = getattr(getattr(agent, "config", None), "updates_per_step", None)
    out = {"case": label, "graph": graph_name, "setup_s": t1 - t0, "iters_per_s": iterations / dt,
           "steps_per_s": iterations * agent.steps_per_collect / dt, "fell_back": fell_back,
           "updates_per_s": iterations * updates / dt if isinstance(updates, int) else None}
    env.close()
    del collect, learn, agent, env, graph
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="builtin", help="comma list of builtin[:N] and agent:env[:num_envs]")
    p.add_argument("--graphs", default="eager,stream,device")
    p.add_argument("--backend", default="auto")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="small sizes, few iterations (CPU smoke run)")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--profile", action="store_true", help="on CUDA: kernels and GPU time per iteration (stderr)")
    args = p.parse_args(argv)
    iterations = 3 if args.quick else args.iterations
    rows = []
    for case in args.cases.split(","):
        base = None
        for g in args.graphs.split(","):
            try:
                row = measure(case, g, args.backend, iterations, args.quick, args.profile)
            except Exception as err:  # one broken case must not hide the others
                row = {"case": case, "graph": g, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:150]}"}
            if "error" not in row:
                base = base or (row["steps_per_s"] if g == "eager" else None)
                row["speedup"] = row["steps_per_s"] / base if base else None
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() and args.backend != "cpu" else "cpu"
    print(f"\ngraph backends on {dev}, torch {torch.__version__}, {iterations} timed iterations after warm-up\n")
    print("| case | graph | env steps/s | iterations/s | updates/s | vs eager | warm-up + record (s) | note |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | {r['graph']} | | | | | | {r['error']} |")
            continue
        sp = f"{r['speedup']:.1f}x" if r.get("speedup") else ""
        note = "fell back to eager: " + "; ".join(r["fell_back"]) if r["fell_back"] else ""
        ups = f"{r['updates_per_s']:.3g}" if r.get("updates_per_s") else ""
        print(f"| {r['case']} | {r['graph']} | {r['steps_per_s']:.3g} | {r['iters_per_s']:.3g} | {ups} | {sp} | "
              f"{r['setup_s']:.1f} | {note} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
