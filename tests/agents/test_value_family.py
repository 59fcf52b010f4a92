"""The value-based family: NoisyLinear, C51's projection, the device sum tree of prioritized replay,
PQN's Q(lambda) returns (each against a plain reference), DQN's default network unchanged, every
agent through the conformance kit and the capture checker, on vectors and on Atari frames."""

from __future__ import annotations

import math

import pytest
import torch

from noeira.agents.critics import project_categorical
from noeira.agents.dqn import DQN
from noeira.agents.offpolicy import relu_mlp
from noeira.agents.prioritized import SumTree
from noeira.agents.qnet import NoisyLinear, QNet
from noeira.agents.replay import ReplayBuffer
from noeira.core import make_agent, make_env
from noeira.core.cli import main
from noeira.core.testing import check_agent

pytestmark = pytest.mark.usefixtures("one_thread")


def test_noisy_linear_is_factorised_and_redrawn() -> None:
    torch.manual_seed(0)
    layer = NoisyLinear(5, 3)
    x = torch.randn(4, 5)
    g = torch.Generator().manual_seed(1)
    layer.resample(g)
    f = lambda e: e.sign() * e.abs().sqrt()  # noqa: E731
    weight = layer.weight_mu + layer.weight_sigma * torch.outer(f(layer.eps_out), f(layer.eps_in))
    bias = layer.bias_mu + layer.bias_sigma * f(layer.eps_out)
    assert torch.allclose(layer(x), x @ weight.T + bias)
    before = layer(x)
    layer.resample(g)
    assert not torch.allclose(layer(x), before)  # new noise
    layer.mean_only = True
    assert torch.allclose(layer(x), x @ layer.weight_mu.T + layer.bias_mu)
    assert torch.allclose(layer.weight_sigma, torch.full((3, 5), 0.5 / math.sqrt(5)))


def _project_reference(p: torch.Tensor, r: float, d: float, z: torch.Tensor) -> torch.Tensor:
    """Bellemare et al.'s algorithm 1, one atom at a time."""
    k, dz = len(z), float(z[1] - z[0])
    m = torch.zeros(k, dtype=torch.float64)
    for j in range(k):
        tz = min(max(r + d * float(z[j]), float(z[0])), float(z[-1]))
        b = (tz - float(z[0])) / dz
        lo, up = math.floor(b), math.ceil(b)
        if lo == up:
            m[lo] += float(p[j])
        else:
            m[lo] += float(p[j]) * (up - b)
            m[up] += float(p[j]) * (b - lo)
    return m


def test_categorical_projection_against_the_algorithm() -> None:
    z = torch.linspace(-10, 10, 11, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    p = torch.rand(6, 11, generator=g, dtype=torch.float64).softmax(-1)
    r = torch.tensor([0.0, 1.0, -3.7, 25.0, 2.0, 0.3], dtype=torch.float64)
    d = torch.tensor([0.99, 0.9, 0.0, 0.99, 1.0, 0.5], dtype=torch.float64)  # 0: terminated
    m = project_categorical(p, r.unsqueeze(-1) + d.unsqueeze(-1) * z, -10.0, 10.0).double()  # DQN's C51 target
    for i in range(6):
        torch.testing.assert_close(m[i], _project_reference(p[i], float(r[i]), float(d[i]), z), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m.sum(-1), torch.ones(6, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    assert m[2, 3] + m[2, 4] == pytest.approx(1.0)  # terminated: all mass at -3.7, split over -4 and -2


def test_sum_tree_samples_in_proportion_and_keeps_its_sums() -> None:
    g = torch.Generator().manual_seed(0)
    rb = ReplayBuffer(12, 3, (1,), torch.float32, (), torch.int64, "cpu", g)  # 4 rows x 3 envs
    tree = SumTree(rb, alpha=1.0, eps=0.0)
    for _ in range(3):  # three rows written: leaves 0..8; row 3 (leaves 9..11) stays empty
        rb.add_obs_action(torch.zeros(3, 1), torch.zeros(3, dtype=torch.int64))
        rb.add_result(torch.zeros(3), torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool), torch.zeros(3, 1))
        tree.add_row((rb.pos - 1) % rb.rows)
    priority = torch.tensor([1.0, 2, 3, 4, 0.5, 0.5, 6, 1, 2])
    tree.update(torch.arange(9), priority, torch.ones(()))
    for node in range(1, tree.leaves):  # every inner node is the sum of its children
        assert tree.tree[node] == pytest.approx(float(tree.tree[2 * node] + tree.tree[2 * node + 1]))
    row, env, leaf, weight = tree.sample((200, 100), beta=1.0, generator=g)
    assert leaf.max() < 9 and torch.equal(leaf, row * 3 + env)  # unwritten rows are never drawn
    freq = torch.bincount(leaf.reshape(-1), minlength=9).double() / leaf.numel()
    assert torch.allclose(freq, priority.double() / priority.sum(), atol=0.01)
    # importance weights (M P(i))^-beta / max, beta = 1: inversely proportional to the priority
    w = (9 * priority / priority.sum()).pow(-1.0)
    first = leaf[0]
    assert torch.allclose(weight[0], (w[first] / w[first].max()).float(), atol=1e-6)
    assert float(tree.max_priority) == 6.0


def test_dqns_default_network_is_its_former_mlp() -> None:
    torch.manual_seed(3)
    q = QNet((4,), 2, hidden=(64, 64))
    torch.manual_seed(3)
    former = relu_mlp(4, (64, 64), 2)
    x = torch.randn(5, 4)
    assert torch.equal(q(x), former(x))


def _lambda_reference(r, term, done, nq, gamma, lam):
    t_len, out = len(r), []
    g = nq[-1]
    for t in range(t_len - 1, -1, -1):
        boot = nq[t] if done[t] else lam * g + (1 - lam) * nq[t]
        g = r[t] + gamma * (0.0 if term[t] else 1.0) * boot
        out.append(g)
    return out[::-1]


@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
def test_pqn_lambda_returns(lam: float) -> None:
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    agent = make_agent("pqn", env, horizon=6, num_minibatches=2, q_lambda=lam, gamma=0.9)
    g = torch.Generator().manual_seed(0)
    agent.rewards.copy_(torch.rand(6, 2, generator=g))
    agent.next_max_q.copy_(torch.rand(6, 2, generator=g) * 5)
    agent.terminated.copy_(torch.tensor([[0, 0], [1, 0], [0, 0], [0, 0], [0, 1], [0, 0]], dtype=torch.float32))
    # env 1 is truncated at t=2 (done, not terminated)
    agent.dones.copy_(torch.tensor([[0, 0], [1, 0], [0, 1], [0, 0], [0, 1], [0, 0]], dtype=torch.float32))
    agent._lambda_returns()
    for e in range(2):
        want = _lambda_reference(agent.rewards[:, e].tolist(), agent.terminated[:, e].tolist(), agent.dones[:, e].tolist(),
                                 agent.next_max_q[:, e].tolist(), 0.9, lam)
        assert torch.allclose(agent.returns[:, e], torch.tensor(want), atol=1e-5), e
    if lam == 0.0:  # one-step Q-learning targets
        want = agent.rewards + 0.9 * (1 - agent.terminated) * agent.next_max_q
        assert torch.allclose(agent.returns, want, atol=1e-6)


CASES = [
    ("dqn", {"noisy": True, "dueling": True, "prioritized": True, "n_step": 3}),
    ("c51", {}),
    ("c51", {"prioritized": True, "double": False}),
    ("rainbow", {}),
]


@pytest.mark.parametrize(("agent", "options"), CASES, ids=[f"{a}-{sorted(o)}" for a, o in CASES])
def test_value_agents_keep_the_contract(agent: str, options: dict) -> None:
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    a = make_agent(agent, env, learning_starts=8, batch_size=16, hidden=[32], buffer_size=1000, **options)
    check_agent(a, env, iterations=6)


def test_pqn_keeps_the_contract() -> None:
    env = make_env("acrobot", num_envs=4, backend="cpu", seed=0)
    check_agent(make_agent("pqn", env, horizon=8, num_minibatches=4, hidden=[32]), env)


@pytest.mark.parametrize("agent", ["rainbow", "pqn"])
def test_on_atari_frames(agent: str) -> None:
    pytest.importorskip("ale_py")
    env = make_env("atari:pong", num_envs=2, backend="cpu", seed=0, vectorization="sync")
    kw = ({"learning_starts": 2, "batch_size": 4, "buffer_size": 64} if agent == "rainbow"
          else {"horizon": 4, "num_minibatches": 2, "network_options": {"norm": "layer"}})
    a = make_agent(agent, env, network="nature-cnn", hidden=[32], **kw)
    stored = a.rb.obs if agent == "rainbow" else a.obs
    assert stored.dtype == torch.uint8  # frames as bytes
    check_agent(a, env, iterations=3)
    env.close()


@pytest.mark.parametrize(("agent", "options"), [
    ("rainbow", ["agent.learning_starts=8", "agent.batch_size=16"]),
    ("dqn", ["agent.learning_starts=8", "agent.batch_size=16", "agent.prioritized=true", "agent.num_atoms=11"]),
    ("pqn", ["agent.horizon=8", "agent.num_minibatches=4"]),
])
def test_capture_safe(agent: str, options: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-capture", "backend=cpu", f"agent={agent}", "env=cartpole", "env.num_envs=4", *options])
    out = capsys.readouterr().out
    assert code == 0 and "clean:" in out, out


def test_bad_keys_are_one_line_errors() -> None:
    from noeira.core import ConfigError

    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match="num_atoms must be 1 or >= 3"):
        make_agent("dqn", env, num_atoms=2)
    with pytest.raises(ConfigError, match="cannot be a Q-network's torso"):
        make_agent("dqn", env, network="lstm")
    assert isinstance(make_agent("rainbow", env), DQN)
