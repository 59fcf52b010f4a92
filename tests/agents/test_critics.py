"""What the continuous off-policy agents gained for massively parallel training: categorical
critics (the C51 projection against the textbook loop, their TD target and loss), observation
normalisation on the device, per-env exploration scales (TD3's ``noise = mixed``), separate
critic widths; each on SAC, TD3 and DDPG, capture-safe, checkpointed, and recorded bit for bit on CUDA."""

from __future__ import annotations

import copy

import pytest
import torch
from agent_testing import check_capture_safe_calls

from noeira.agents.critics import CategoricalQEnsemble, critic_loss, project_categorical, td_target
from noeira.agents.offpolicy import QEnsemble
from noeira.agents.replay import Batch
from noeira.core.api import make_agent, make_env
from noeira.core.errors import ConfigError
from noeira.core.testing import check_agent

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"hidden": [16, 16], "batch_size": 16, "buffer_size": 1_000, "learning_starts": 0}
FAST = {"num_atoms": 21, "v_min": -200.0, "v_max": 10.0, "norm_obs": True, "critic_hidden": [32, 16, 8]}
"""FastTD3's shape at toy size: categorical critics, normalised observations, narrowing critic layers."""


def build(name: str, num_envs: int = 4, seed: int = 0, backend: str = "cpu", env: str = "pendulum",
          **cfg: object) -> tuple[object, object]:
    torch.manual_seed(seed)
    e = make_env(env, num_envs=num_envs, backend=backend, seed=seed)
    agent = make_agent(name, e, backend, **{**SMALL, **cfg})
    e.reset(seed=seed)
    return agent, e


# -- the projection ---------------------------------------------------------------------------

def textbook_projection(probs: torch.Tensor, positions: torch.Tensor, v_min: float, v_max: float) -> torch.Tensor:
    """C51's projection (Bellemare et al. 2017, Algorithm 1) as a loop over every atom of every row."""
    rows, a = probs.shape
    delta = (v_max - v_min) / (a - 1)
    out = torch.zeros(rows, a, dtype=torch.float64)
    for r in range(rows):
        for i in range(a):
            b = (min(max(float(positions[r, i]), v_min), v_max) - v_min) / delta
            lo, hi = int(b // 1), int(-(-b // 1))
            p = float(probs[r, i])
            if lo == hi:
                out[r, lo] += p
            else:
                out[r, lo] += p * (hi - b)
                out[r, hi] += p * (b - lo)
    return out


@pytest.mark.parametrize("a", [2, 5, 51])
def test_projection_matches_the_textbook_loop(a: int) -> None:
    g = torch.Generator().manual_seed(a)
    v_min, v_max = -10.0, 10.0
    support = torch.linspace(v_min, v_max, a)
    rows = 64
    probs = torch.rand(rows, a, generator=g).softmax(-1)
    reward = torch.randn(rows, 1, generator=g) * 6  # some rows push atoms past either end
    scale = torch.rand(rows, 1, generator=g) * 0.99
    scale[:8] = 0.0  # terminated rows: all mass at the reward
    positions = reward + scale * support
    positions[8:12] = support  # exactly on the atoms (lower == upper neighbour)
    positions[12, :] = 3 * v_max  # everything clipped to the top atom
    got = project_categorical(probs, positions, v_min, v_max)
    want = textbook_projection(probs, positions, v_min, v_max)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0)  # float32 sums of up to A masses
    torch.testing.assert_close(got.sum(-1), torch.ones(rows), atol=1e-5, rtol=0)
    assert float(got.min()) >= 0


def test_projection_of_a_shifted_support_keeps_the_mean() -> None:
    """Inside the support, the projection preserves the distribution's mean (the two neighbours
    share each atom's mass in proportion to closeness)."""
    a, v_min, v_max = 101, -100.0, 100.0
    support = torch.linspace(v_min, v_max, a)
    probs = torch.randn(32, a).softmax(-1)
    positions = 1.7 + 0.9 * support  # within [-88.3, 91.7]
    got = project_categorical(probs, positions, v_min, v_max)
    torch.testing.assert_close((got * support).sum(-1), (probs * positions).sum(-1), atol=1e-3, rtol=0)


# -- the TD target and the loss -----------------------------------------------------------------

def _batch(b: int = 16, obs_dim: int = 3) -> Batch:
    g = torch.Generator().manual_seed(1)
    return Batch(obs=torch.randn(b, obs_dim, generator=g), action=torch.rand(b, 1, generator=g) * 2 - 1,
                 reward=torch.randn(b, generator=g), next_obs=torch.randn(b, obs_dim, generator=g),
                 terminated=(torch.rand(b, generator=g) < 0.3).float(), discount=torch.full((b,), 0.99))


def test_categorical_target_takes_the_smaller_critics_distribution_shifted_by_the_bonus() -> None:
    torch.manual_seed(0)
    critic = CategoricalQEnsemble(3, 3, 1, [16], 11, -5.0, 5.0)
    b = _batch()
    next_action = torch.rand(16, 1) * 2 - 1
    bonus = torch.randn(16) * 0.1
    members = torch.tensor([2, 0])
    with torch.no_grad():
        got = td_target(critic, b.next_obs, next_action, b, bonus=bonus, members=members)
    probs = critic.logits(b.next_obs, next_action).detach().softmax(-1)[[2, 0]]  # [2, B, A]
    q = (probs * critic.support).sum(-1)
    p = torch.where((q[0] <= q[1]).unsqueeze(-1), probs[0], probs[1])
    positions = b.reward[:, None] + (b.discount * (1 - b.terminated))[:, None] * (critic.support + bonus[:, None])
    torch.testing.assert_close(got, project_categorical(p, positions, -5.0, 5.0))
    # a terminated transition's target is the reward alone, on its two neighbouring atoms
    t = int(b.terminated.argmax())
    assert abs(float((got[t] * critic.support).sum()) - float(b.reward[t].clamp(-5, 5))) < 1e-5


def test_scalar_target_and_losses() -> None:
    torch.manual_seed(0)
    scalar = QEnsemble(4, 3, 1, [16])
    b = _batch()
    next_action = torch.rand(16, 1)
    y = td_target(scalar, b.next_obs, next_action, b, bonus=torch.ones(16), members=torch.tensor([1, 3]))
    q = scalar(b.next_obs, next_action)[[1, 3]].min(0).values
    torch.testing.assert_close(y, b.reward + b.discount * (1 - b.terminated) * (q + 1))
    loss, qs = critic_loss(scalar, b.obs, b.action, y)
    torch.testing.assert_close(loss, ((scalar(b.obs, b.action) - y) ** 2).mean(-1).sum())
    cat = CategoricalQEnsemble(2, 3, 1, [16], 11, -5.0, 5.0)
    target = torch.full((16, 11), 1 / 11)
    loss, qs = critic_loss(cat, b.obs, b.action, target)
    logp = cat.logits(b.obs, b.action).log_softmax(-1)
    torch.testing.assert_close(loss, -(target * logp).sum(-1).mean(-1).sum())
    assert qs.shape == (2, 16) and not qs.requires_grad


# -- the agents with the options -------------------------------------------------------------------

CASES = [("sac", FAST), ("td3", {**FAST, "noise": "mixed", "exploration_noise": 0.4}), ("ddpg", FAST),
         ("td3", {"norm_obs": True})]
IDS = ["sac", "td3-mixed", "ddpg", "td3-norm-only"]


@pytest.mark.parametrize(("name", "kw"), CASES, ids=IDS)
def test_conformance(name: str, kw: dict, backend_name: str) -> None:
    agent, env = build(name, backend=backend_name, updates_per_step=2, **kw)
    check_agent(agent, env, iterations=3)


def test_critic_shapes() -> None:
    agent, _ = build("td3", **FAST)
    assert isinstance(agent.critic, CategoricalQEnsemble) and agent.critic.k == 2
    widths = [m.weight.shape[-1] for m in agent.critic.modules() if hasattr(m, "weight")]
    assert widths == [32, 16, 8, 21]  # critic_hidden, then the atoms
    assert [m.weight.shape[0] for m in agent.actor.modules() if isinstance(m, torch.nn.Linear)] == [16, 16, 1]
    plain, _ = build("sac")
    assert isinstance(plain.critic, QEnsemble)


@pytest.mark.parametrize(("kw", "key"), [({"num_atoms": 1}, "agent.num_atoms"), ({"num_atoms": -3}, "agent.num_atoms"),
                                         ({"num_atoms": 11, "v_min": 5.0, "v_max": -5.0}, "agent.v_min"),
                                         ({"critic_hidden": [0]}, "agent.critic_hidden"),
                                         ({"noise": "mixed", "exploration_noise_min": 0.5}, "agent.exploration_noise_min"),
                                         ({"noise": "pink"}, "agent.noise")])
def test_bad_keys(kw: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        build("td3", **kw)


def test_observation_normaliser_follows_every_collected_batch_and_feeds_every_network() -> None:
    agent, env = build("td3", num_envs=8, norm_obs=True, learning_starts=10**6)
    seen = []
    for _ in range(20):
        seen.append(env.obs.double().clone())
        agent.collect(env)
    allobs = torch.cat(seen)
    rms = agent.obs_rms
    # (the statistics start from a count of 1e-4, as RunningMeanStd does: a relative 1e-6 here)
    torch.testing.assert_close(rms.mean, allobs.mean(0), atol=1e-9, rtol=1e-5)
    torch.testing.assert_close(rms.var, allobs.var(0, unbiased=False), atol=1e-9, rtol=1e-5)
    # acting, storing and learning: raw observations in the buffer, normalised ones into the networks
    assert torch.equal(agent.rb.obs[:20].reshape(-1, 3).double(), allobs)
    obs = env.obs
    want = agent.actor(((obs.double() - rms.mean) / (rms.var + 1e-8).sqrt()).float().clamp(-10, 10))
    torch.testing.assert_close(agent.act(obs, deterministic=True)[0], agent.to_env(want))
    seen_by_critic = []
    hook = agent.critic.register_forward_pre_hook(lambda m, args: seen_by_critic.append(args[0]))
    agent.learn()
    hook.remove()
    assert float(seen_by_critic[0].abs().max()) < 10.0 + 1e-6 and abs(float(seen_by_critic[0].mean())) < 1.0


def test_mixed_noise_gives_each_env_its_own_scale_redrawn_at_its_episode_start() -> None:
    agent, env = build("td3", num_envs=64, env="pendulum", noise="mixed", exploration_noise=0.5,
                       exploration_noise_min=0.1, learning_starts=0)
    scale = agent.noise_scale.clone().squeeze(-1)
    assert float(scale.min()) >= 0.1 and float(scale.max()) < 0.5 and float(scale.std()) > 0.05
    # the action noise of each env has its env's scale
    obs = env.obs
    mean = agent.actor(obs)
    draws = torch.stack([agent.explore(obs) - mean for _ in range(400)])  # [400, N, 1]
    inside = (mean.abs() < 0.3).squeeze(-1)  # where the [-1, 1] clamp rarely bites
    torch.testing.assert_close(draws.std(0).squeeze(-1)[inside], scale[inside], rtol=0.15, atol=0.0)
    done = torch.zeros(64, dtype=torch.bool)
    done[:5] = True
    agent.after_step(done)
    now = agent.noise_scale.squeeze(-1)
    assert torch.equal(now[5:], scale[5:]) and not torch.equal(now[:5], scale[:5])


@pytest.mark.parametrize(("name", "kw"), CASES, ids=IDS)
def test_capture_safe_across_the_warm_up(name: str, kw: dict) -> None:
    agent, env = build(name, learning_starts=12, updates_per_step=3, n_step=3, **kw)
    check_capture_safe_calls(agent, env)


@pytest.mark.parametrize(("name", "kw"), CASES[:2], ids=IDS[:2])
def test_checkpoint_keeps_the_normaliser_and_noise_scales(name: str, kw: dict) -> None:
    agent, env = build(name, updates_per_step=2, **kw)
    for _ in range(3):
        agent.collect(env)
        agent.learn()
    state = copy.deepcopy(agent.state_dict())
    twin, twin_env = build(name, seed=7, updates_per_step=2, **kw)
    twin.load_state_dict(state)
    twin_env.set_state(env.get_state())
    for _ in range(2):
        agent.collect(env)
        twin.collect(twin_env)
        m1, m2 = agent.learn(), twin.learn()
        assert all(torch.equal(m1[k], m2[k]) for k in m1)
    for (k, a), b in zip(agent.nets.state_dict().items(), twin.nets.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


@pytest.mark.cuda
@pytest.mark.parametrize(("name", "kw"), CASES[:3], ids=IDS[:3])
def test_verify_graph_on_cuda(name: str, kw: dict, capsys: pytest.CaptureFixture[str]) -> None:
    """Eager and recorded (``stream``) runs agree on every tensor, bit for bit (the projection has
    no atomic adds)."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from noeira.core.cli import main

    def fmt(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v).replace(" ", "") if isinstance(v, list) else str(v)

    opts = {**kw, "hidden": [64, 64], "learning_starts": 64, "batch_size": 256, "updates_per_step": 4}
    args = ["verify-graph", "backend=cuda", "graph=stream", f"agent={name}", "env=pendulum", "env.num_envs=64",
            *(f"agent.{k}={fmt(v) if not isinstance(v, str) else repr(v)}" for k, v in opts.items()), "-k", "8"]
    assert main(args) == 0, capsys.readouterr().out
    assert "bit-identical" in capsys.readouterr().out
