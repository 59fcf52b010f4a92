"""The optimizer table: Muon against a direct reference implementation (PufferLib's algorithm,
one parameter at a time), its tensor learning rate, state and checkpoints."""

from __future__ import annotations

import copy

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
