"""The optimizer table: Muon against a direct reference implementation (PufferLib's algorithm,
one parameter at a time), its tensor learning rate, state and checkpoints; Adam and RMSprop
against torch's, bit for bit, without importing torch._dynamo."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from noeira.agents.optim import OPTIMIZERS, Muon, load_optimizer_state, make_optimizer, newton_schulz, scale_lr

SHAPES = [(6, 4), (4,), (6, 4), (3, 8), (2, 3, 3), (5,), (8, 3), (1, 7)]


def reference_muon_step(params: list[torch.Tensor], bufs: list[torch.Tensor], lr: float, momentum: float) -> None:
    """PufferLib's Muon step, written out per parameter as its ``pufferlib/muon.py`` reads."""
    for p, buf in zip(params, bufs, strict=True):
        g = p.grad.clone()
        buf.lerp_(g, 1 - momentum)
        g.lerp_(buf, momentum)
        if g.ndim >= 2:
            x = g.view(g.shape[0], -1)
            tall = x.size(-2) > x.size(-1)
            if tall:
                x = x.mT
            x = x / torch.clamp(x.norm(), min=1e-7)
            for a, b, c in [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
                            (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)]:
                s = x @ x.mT
                y = c * s
                y.diagonal(dim1=-2, dim2=-1).add_(b)
                y = y @ s
                y.diagonal(dim1=-2, dim2=-1).add_(a)
                x = y @ x
            if tall:
                x = x.mT
            g = x * max(1, g.shape[0] / x[0].numel()) ** 0.5
        with torch.no_grad():
            p.sub_(lr * g.view(p.shape))


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=g, dtype=torch.float64)) for s in SHAPES]


@pytest.mark.parametrize("momentum", [0.95, 0.0, 0.5])
def test_muon_matches_the_reference(momentum) -> None:
    ours, ref = _params(), _params()
    bufs = [torch.zeros_like(p) for p in ref]
    opt = make_optimizer("muon", ours, 0.02, momentum=momentum)
    assert isinstance(opt, Muon) and opt.param_groups[0]["momentum"] == momentum
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in ours]
        for p, q, gr in zip(ours, ref, grads, strict=True):
            p.grad, q.grad = gr.clone(), gr.clone()
        opt.step()
        reference_muon_step(ref, bufs, float(torch.tensor(0.02)), momentum)  # the lr tensor is float32
    for p, q, b in zip(ours, ref, bufs, strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(opt.state[p]["momentum_buffer"], b, rtol=1e-12, atol=1e-12)


def test_one_dimensional_parameters_take_the_nesterov_momentum() -> None:
    p = torch.nn.Parameter(torch.zeros(3))
    opt = make_optimizer("muon", [p], 0.1, momentum=0.9)
    p.grad = torch.tensor([1.0, -2.0, 0.5])
    opt.step()
    buf = 0.1 * p.grad  # lerp(0, g, 0.1)
    update = p.grad + 0.9 * (buf - p.grad)  # lerp(g, buf, 0.9)
    torch.testing.assert_close(p.detach(), -0.1 * update)


def test_newton_schulz_orthogonalises() -> None:
    g = torch.randn(5, 16, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sv = torch.linalg.svdvals(newton_schulz(g))
    assert float(sv.min()) > 0.5 and float(sv.max()) < 1.3  # the quintic's band around 1
    torch.testing.assert_close(newton_schulz(g)[2], newton_schulz(g[2]))  # batched = one by one


def test_muon_lr_is_a_device_tensor_a_schedule_writes() -> None:
    p = torch.nn.Parameter(torch.ones(4, 4))
    opt = make_optimizer("muon", [p], 0.05)
    lr = opt.param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and lr.dim() == 0 and opt.param_groups[0]["base_lr"] == 0.05
    scale_lr(opt, torch.tensor(0.5))
    assert opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(0.025)
    p.grad = torch.eye(4)
    before = p.detach().clone()
    opt.step()
    # a scaled identity orthogonalises to ~identity; the step is lr x that
    torch.testing.assert_close(before - p.detach(), 0.025 * newton_schulz(torch.eye(4) * 0.05))


def test_muon_state_round_trip() -> None:
    ps = _params()
    opt = make_optimizer("muon", ps, 0.02)
    for p in ps:
        p.grad = torch.ones_like(p)
    opt.step()
    saved = copy.deepcopy(opt.state_dict())
    ps2 = _params()
    opt2 = make_optimizer("muon", ps2, 0.02)
    lr_tensor = opt2.param_groups[0]["lr"]
    load_optimizer_state(opt2, saved)
    assert opt2.param_groups[0]["lr"] is lr_tensor
    for p, q in zip(ps, ps2, strict=True):
        assert torch.equal(opt.state[p]["momentum_buffer"], opt2.state[q]["momentum_buffer"])


def test_table_names() -> None:
    assert list(OPTIMIZERS) == ["adam", "rmsprop", "muon"]


def test_ppo_with_muon_learns_a_step() -> None:
    from noeira.core import make_agent, make_env

    env = make_env("cartpole", num_envs=8, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=8, optimizer="muon", lr=0.02)
    assert isinstance(agent.optimizer, Muon)
    before = [p.detach().clone() for p in agent.rollout.policy.parameters()]
    env.reset(seed=0)
    agent.collect(env)
    agent.learn()
    assert all(not torch.equal(b, p) for b, p in zip(before, agent.rollout.policy.parameters(), strict=True))


# Adam and RMSprop are torch's, less the import of torch._dynamo at their first call (issue #18)

TORCH_TWINS = [("adam", torch.optim.Adam, {"fused": True}), ("adam", torch.optim.Adam, {"foreach": False}),
               ("rmsprop", torch.optim.RMSprop, {"foreach": False})]


def _steps(opt: torch.optim.Optimizer, params: list[torch.Tensor], n: int = 4) -> None:
    gen = torch.Generator().manual_seed(3)
    for _ in range(n):
        opt.zero_grad()
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)
        opt.step()


@pytest.mark.parametrize("dynamo_loaded", [False, True])
@pytest.mark.parametrize(("name", "twin", "kernel"), TORCH_TWINS)
def test_adam_and_rmsprop_step_as_torch_does(name: str, twin: type[torch.optim.Optimizer], kernel: dict,
                                             dynamo_loaded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from noeira.agents import optim

    monkeypatch.setattr(optim, "_compiling", lambda: dynamo_loaded)  # either path, whatever this process imported

    ours_cls = {"adam": optim.Adam, "rmsprop": optim.RMSprop}[name]
    assert issubclass(ours_cls, twin) and ours_cls.__name__ == twin.__name__  # profiler labels read the same
    ps, qs = _params(), _params()
    ours = ours_cls(ps, lr=torch.tensor(0.01), eps=1e-8, **kernel)
    theirs = twin(qs, lr=torch.tensor(0.01), eps=1e-8, **kernel)
    hooked = []
    ours.register_step_post_hook(lambda *_: hooked.append(1))  # bf16-master recasts through such a hook
    _steps(ours, ps)
    _steps(theirs, qs)
    assert len(hooked) == 4
    assert all(torch.equal(p, q) for p, q in zip(ps, qs, strict=True))
    mine, other = ours.state_dict(), theirs.state_dict()
    assert mine["param_groups"] == other["param_groups"]
    for k in other["state"]:
        assert all(torch.equal(mine["state"][k][s], v) for s, v in other["state"][k].items())
    ours.load_state_dict(copy.deepcopy(other))  # checkpoints of either load into the other
    theirs.load_state_dict(copy.deepcopy(mine))
    _steps(ours, ps)
    _steps(theirs, qs)
    assert all(torch.equal(p, q) for p, q in zip(ps, qs, strict=True))


def test_optimizers_do_not_import_dynamo() -> None:
    code = """
import sys, torch
from noeira.agents.optim import OPTIMIZERS, load_optimizer_state, make_optimizer, masked_step
for name in OPTIMIZERS:
    params = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]
    opt = make_optimizer(name, params, 0.01)
    for _ in range(2):
        opt.zero_grad()
        for p in params:
            p.grad = torch.ones_like(p)
        opt.step()
    masked_step(opt, torch.tensor(False))
    load_optimizer_state(opt, opt.state_dict())
print("torch._dynamo" in sys.modules, "sympy" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "twin", "kernel"), TORCH_TWINS[1:])
def test_a_compiled_step_is_torchs(name: str, twin: type[torch.optim.Optimizer], kernel: dict) -> None:
    """Under torch.compile (dynamo loaded) torch's own step runs, graph breaks included."""
    from noeira.agents import optim

    ours_cls = {"adam": optim.Adam, "rmsprop": optim.RMSprop}[name]
    results = []
    for cls in (ours_cls, twin):
        torch._dynamo.reset()
        ps = _params()
        opt = cls(ps, lr=0.01, **kernel)
        step = torch.compile(opt.step, backend="eager")
        gen = torch.Generator().manual_seed(3)
        for _ in range(3):
            for p in ps:
                p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            step()
        results.append(ps)
    assert all(torch.equal(p, q) for p, q in zip(*results, strict=True))
