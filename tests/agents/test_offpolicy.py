"""DQN, SAC, TD3, DDPG: contracts, capture-safety, warm-up, exploration, math pieces, configs,
recipes, optimizer and precision seams, TD3's delay.

The learning tests are in test_offpolicy_learning.py.
"""

from __future__ import annotations

import copy
import importlib
import math

import attrs
import pytest
import torch
from agent_testing import OpLog, check_capture_safe_calls

from noeira.agents import recipes, td3
from noeira.agents.ddpg import DDPG
from noeira.agents.dqn import DQN
from noeira.agents.offpolicy import QEnsemble
from noeira.agents.sac import SAC, SDEActor, SquashedGaussianActor
from noeira.agents.td3 import TD3
from noeira.core.api import get_backend, make_agent, make_env
from noeira.core.config import field_docs
from noeira.core.driver import resolve
from noeira.core.envbase import TensorEnv
from noeira.core.errors import ConfigError
from noeira.core.recipes import UNTESTED
from noeira.core.spaces import Box, Discrete
from noeira.core.testing import check_agent

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"hidden": [32, 32], "batch_size": 16, "buffer_size": 1_000, "learning_starts": 0}
ENV = {"dqn": "cartpole", "sac": "pendulum", "td3": "pendulum", "ddpg": "pendulum"}
AGENTS = list(ENV)


def build(name: str, num_envs: int = 4, seed: int = 0, **cfg: object) -> tuple[object, object]:
    torch.manual_seed(seed)
    env = make_env(ENV[name], num_envs=num_envs, backend="cpu", seed=seed)
    agent = make_agent(name, env, "cpu", **{**SMALL, **cfg})
    env.reset(seed=seed)
    return agent, env


@pytest.mark.parametrize("name", AGENTS)
def test_conformance(name: str) -> None:
    agent, env = build(name, updates_per_step=2)
    check_agent(agent, env, iterations=3)


def test_conformance_sac_sde() -> None:
    agent, env = build("sac", updates_per_step=2, sde=True, sde_sample_freq=2)
    check_agent(agent, env, iterations=3)


@pytest.mark.parametrize("name", AGENTS)
def test_every_config_key_is_documented(name: str) -> None:
    agent, _ = build(name)
    cls = type(agent).Config
    docs = field_docs(cls)
    missing = [f.name for f in attrs.fields(cls) if not docs.get(f.name)]
    assert not missing, f"{name}: undocumented keys {missing}"


@pytest.mark.parametrize(("name", "env"), [("dqn", "cartpole"), ("sac", "pendulum"), ("td3", "pendulum"),
                                           ("ddpg", "pendulum")])
def test_recipes_resolve(name: str, env: str) -> None:
    cfg = resolve({"backend": "cpu", "env": {"name": env}, "agent": {"name": name}})
    assert cfg.num_envs >= 1 and cfg.run.total_steps > 0
    assert cfg.agent.config.learning_starts < cfg.run.total_steps


def test_wrong_action_space_is_a_config_error() -> None:
    env = make_env("pendulum", num_envs=2, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match="Discrete action space"):
        make_agent("dqn", env, "cpu", **SMALL)
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match="Box action space"):
        make_agent("sac", env, "cpu", **SMALL)
    with pytest.raises(ConfigError, match="agent.loss"):
        make_agent("dqn", env, "cpu", **{**SMALL, "loss": "l3"})


# -- capture-safety: no host sync, the same op sequence on every call --------------------------

@pytest.mark.parametrize(("name", "updates"), [*((name, 2) for name in AGENTS), ("td3", 3), ("dqn-ez", 2)])
@pytest.mark.parametrize("n_step", [1, 3])
def test_collect_and_learn_are_capture_safe_across_the_warm_up(name: str, updates: int, n_step: int) -> None:
    # 4 envs, learning starts at 12 steps: learn() of calls 1-2 warms up, of calls 3+ learns;
    # TD3 with 3 updates per call decides its delay on the device; dqn-ez: εz-greedy's holds
    extra = {"noise": "ou"} if name in ("td3", "ddpg") else {"ez_exponent": 2.0} if name == "dqn-ez" else {}
    name = name.removesuffix("-ez")
    agent, env = build(name, learning_starts=12, updates_per_step=updates, n_step=n_step, **extra)
    check_capture_safe_calls(agent, env)


# -- warm-up and learning-rate gating ----------------------------------------------------------

def params(agent: object) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in agent.nets.parameters()])  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", AGENTS)
def test_nothing_learns_before_learning_starts(name: str) -> None:
    agent, env = build(name, learning_starts=12, updates_per_step=2)
    before = params(agent)
    for _ in range(2):  # 8 env steps < 12: still warming up at each learn
        agent.collect(env)
        agent.learn()
        assert torch.equal(params(agent), before)
    agent.collect(env)
    agent.learn()  # 12 >= 12: the updates move the networks
    assert not torch.equal(params(agent), before)
    assert int(agent.env_steps) == 12 and int(agent.num_updates) == 2
    assert int(agent.rb.size) == 3


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_warm_up_actions_are_uniform_random(name: str) -> None:
    agent, env = build(name, num_envs=256, learning_starts=10**6)
    agent.collect(env)
    a = agent.rb.action[0, :, 0]
    # uniform on [-1, 1]: mean 0, variance 1/3 (a fresh policy's actions are far narrower)
    assert abs(float(a.mean())) < 0.1 and abs(float(a.var()) - 1 / 3) < 0.06


def test_dqn_epsilon_schedule_is_linear_then_flat() -> None:
    agent, env = build("dqn", epsilon_start=1.0, epsilon_end=0.1, exploration_steps=40)
    got = []
    for _ in range(12):
        got.append(float(agent.epsilon()))
        agent.collect(env)
    want = [max(0.1, 1.0 - 0.9 * 4 * i / 40) for i in range(12)]
    assert got == pytest.approx(want, abs=1e-6)


def test_dqn_explores_epsilon_greedily() -> None:
    agent, env = build("dqn", num_envs=2048, epsilon_start=0.3, epsilon_end=0.3, exploration_steps=1)
    obs = env.obs
    greedy = agent.q(obs).argmax(-1)
    chosen = agent.explore(obs)
    # a random action differs from the greedy one half the time (2 actions): 0.3 * 0.5
    assert abs(float((chosen != greedy).float().mean()) - 0.15) < 0.03


def test_dqn_ez_greedy_holds_random_actions_for_zeta_distributed_lengths() -> None:
    """εz-greedy: at ε = 1 every free env starts a hold whose length follows zeta(2) on 1..8;
    during a hold the action is the held one whatever the greedy choice; a done ends it."""
    n, cap = 4096, 8
    agent, env = build("dqn", num_envs=n, epsilon_start=1.0, epsilon_end=1.0, exploration_steps=1, ez_exponent=2.0,
                       ez_max_repeat=cap)
    obs = env.obs
    first = agent.explore(obs)
    lengths = agent.hold_steps + 1  # every env started a hold of this many steps (this one included)
    pmf = torch.arange(1, cap + 1, dtype=torch.float64).pow(-2.0)
    pmf /= pmf.sum()
    freq = torch.bincount(lengths, minlength=cap + 1)[1:].double() / n
    assert torch.allclose(freq, pmf, atol=4 * (pmf * (1 - pmf) / n).sqrt().max().item())
    # the envs still holding keep their action, even where a greedy act would differ
    holding = agent.hold_steps > 0
    agent.q.q[-1].bias.data[:] = torch.tensor([-1e6, 1e6])  # greedy: always action 1
    second = agent.explore(obs)
    assert torch.equal(second[holding], first[holding])
    # the ones whose hold ran out start a new one (ε = 1): random, not the greedy action 1
    assert float((second[~holding] == 0).float().mean()) == pytest.approx(0.5, abs=0.06)
    done = torch.zeros(n, dtype=torch.bool)
    done[: n // 2] = True
    agent.after_step(done)
    assert int(agent.hold_steps[: n // 2].max()) == 0 and int(agent.hold_steps[n // 2:].max()) > 0


def test_dqn_ez_greedy_at_epsilon_zero_is_greedy_and_checks_its_keys() -> None:
    agent, env = build("dqn", num_envs=64, epsilon_start=0.0, epsilon_end=0.0, exploration_steps=1, ez_exponent=1.5)
    obs = env.obs
    for _ in range(3):
        assert torch.equal(agent.explore(obs), agent.q(obs).argmax(-1))
    with pytest.raises(ConfigError, match="agent.ez_exponent: must be 0"):
        build("dqn", ez_exponent=1.0)
    with pytest.raises(ConfigError, match="agent.ez_max_repeat: must be >= 1"):
        build("dqn", ez_exponent=2.0, ez_max_repeat=0)


# -- pieces of the math ---------------------------------------------------------------------------

def test_sac_log_prob_matches_torch_distributions() -> None:
    torch.manual_seed(0)
    actor = SquashedGaussianActor(3, 2, (16,), -5.0, 2.0)
    obs = torch.randn(64, 3)
    g = torch.Generator().manual_seed(1)
    action, log_prob = actor.sample(obs, g)
    mean, log_std = actor(obs)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform(cache_size=1)]
    )
    assert torch.allclose(log_prob, dist.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1), atol=1e-3)
    assert float(action.abs().max()) <= 1.0
    assert float(log_std.min()) >= -5.0 and float(log_std.max()) <= 2.0


def test_sde_actor_log_prob_matches_torch_distributions() -> None:
    """gSDE: the sample is ``tanh(mu + phi W)`` and its log-probability the tanh-squashed
    N(mu, sqrt(phi^2 sigma^2 + 1e-6)) of torch.distributions; one W per env gives a noise
    that is a linear function of the features."""
    torch.manual_seed(0)
    actor = SDEActor(3, 2, (16,), -1.0)
    obs = torch.randn(64, 3)
    g = torch.Generator().manual_seed(1)
    w = actor.weights((64,), g)
    assert w.shape == (64, 16, 2)
    action, log_prob = actor.sample_with(obs, w)
    mean, phi = actor(obs)
    std = (phi.square() @ actor.log_std.exp().square() + 1e-6).sqrt()
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, std), [torch.distributions.TanhTransform(cache_size=1)]
    )
    assert torch.allclose(log_prob, dist.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1), atol=1e-3)
    pre_tanh = torch.atanh(action.clamp(-1 + 1e-6, 1 - 1e-6))
    assert torch.allclose(pre_tanh - mean, torch.bmm(phi.unsqueeze(1), w).squeeze(1), atol=1e-3)
    # the batch form: one W for every row; the loss reaches log_std through sample and density
    action, log_prob = actor.sample(obs, g)
    log_prob.sum().backward()
    assert actor.log_std.grad is not None and float(actor.log_std.grad.abs().sum()) > 0
    assert float(mean.abs().max()) <= 2.0


def test_sac_sde_keeps_each_envs_noise_for_sde_sample_freq_steps() -> None:
    agent, env = build("sac", sde=True, sde_sample_freq=3, sde_log_std_init=0.0, learning_starts=0)
    obs = env.obs
    first = [agent.explore(obs) for _ in range(3)]
    later = agent.explore(obs)
    # same state, same W: the same action for 3 steps, then a fresh W
    assert torch.equal(first[0], first[1]) and torch.equal(first[0], first[2])
    assert not torch.equal(first[0], later)
    assert not torch.equal(first[0][0], first[0][1])  # each env its own W
    assert set(agent.extra_state()) >= {"sde_weights", "sde_clock"}
    with pytest.raises(ConfigError, match="agent.sde_sample_freq"):
        build("sac", sde=True, sde_sample_freq=0)


def test_q_ensemble_members_are_independent_mlps() -> None:
    torch.manual_seed(0)
    q = QEnsemble(2, 3, 1, (8, 8))
    obs, act = torch.randn(5, 3), torch.randn(5, 1)
    out = q(obs, act)
    assert out.shape == (2, 5)
    x = torch.cat([obs, act], -1)
    for i in range(2):
        h = x
        for layer in q.net:
            h = torch.relu(h) if isinstance(layer, torch.nn.ReLU) else h @ layer.weight[i] + layer.bias[i]
        assert torch.allclose(out[i], h.squeeze(-1), atol=1e-6)


def test_action_rescaling_to_the_box() -> None:
    agent, _ = build("sac")
    # pendulum: torque in [-2, 2]
    assert torch.allclose(agent.to_env(torch.tensor([[-1.0], [0.0], [1.0]])), torch.tensor([[-2.0], [0.0], [2.0]]))
    act, state = agent.act(torch.randn(100, 3), deterministic=False)
    assert float(act.abs().max()) <= 2.0 and state is None


@pytest.mark.parametrize("name", AGENTS)
def test_policies_are_feed_forward(name: str) -> None:
    agent, env = build(name, lr_anneal_steps=0)
    assert agent.initial_state(4) is None
    obs = env.obs.clone()
    action, state = agent.act(obs, agent.initial_state(4), torch.ones(4, dtype=torch.bool), deterministic=True)
    assert state is None and torch.equal(action, agent.act(obs, deterministic=True)[0])
    agent.set_total_steps(10**6)  # the driver tells every agent; lr_anneal_steps=0 stays constant
    agent.collect(env)
    agent.learn()
    assert all(float(g["lr"]) == pytest.approx(g["base_lr"]) for o in agent.optimizers.values() for g in o.param_groups)


# -- TD3's delay and DDPG -----------------------------------------------------------------------------

def moved(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return not all(torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


def test_td3_policy_delay_holds_across_learn_calls() -> None:
    # one update per call, delay 2 (the defaults): the actor and the targets move at every second
    # call once learning starts (4 envs, learning_starts 12: calls 1-2 warm up)
    agent, env = build("td3", updates_per_step=1, policy_delay=2, learning_starts=12)
    assert agent.delay_on_device
    changes = []
    for _ in range(8):
        agent.collect(env)
        nets = (agent.actor, agent.actor_target, agent.critic, agent.critic_target)
        before = [[p.clone() for p in net.parameters()] for net in nets]
        metrics = agent.learn()
        changes.append(tuple(moved(b, net) for b, net in zip(before, nets, strict=True)))
        assert "actor_loss" in metrics and torch.isfinite(metrics["actor_loss"])
    due = [False, False, False, True, False, True, False, True]
    assert changes == [(d, d, i >= 2, d) for i, d in enumerate(due)]
    # a skipped step leaves no trace: Adam counted the 3 actor steps only
    steps = {float(s["step"]) for s in agent.actor_opt.state.values()}
    assert steps == {3.0} and int(agent.num_updates) == 6


def test_td3_delay_on_the_device_equals_the_host_pattern() -> None:
    # updates_per_step a multiple of policy_delay: the host pattern; forced onto the device the
    # masked path gives the same numbers, bit for bit
    host, env = build("td3", updates_per_step=2, policy_delay=2, learning_starts=4)
    dev, dev_env = build("td3", updates_per_step=2, policy_delay=2, learning_starts=4)
    assert not host.delay_on_device
    dev.delay_on_device = True
    for _ in range(5):
        host.collect(env)
        dev.collect(dev_env)
        m_host, m_dev = host.learn(), dev.learn()
        assert torch.equal(m_host["critic_loss"], m_dev["critic_loss"])
    assert torch.equal(params(host), params(dev))


def test_ddpg_is_its_own_agent_without_td3s_keys() -> None:
    assert not issubclass(DDPG, TD3) and not issubclass(DDPG.Config, TD3.Config)
    keys = attrs.fields_dict(DDPG.Config)
    assert not {"policy_delay", "policy_noise", "noise_clip"} & set(keys)
    assert set(keys) < set(attrs.fields_dict(TD3.Config))
    env = make_env("pendulum", num_envs=2, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match="agent.policy_delay"):
        make_agent("ddpg", env, "cpu", **{**SMALL, "policy_delay": 2})
    # one critic; the actor and the targets move at every update
    agent, env = build("ddpg", updates_per_step=3)
    assert agent.critic.k == 1 and agent.policy_delay == 1 and agent.policy_noise == 0.0
    for _ in range(2):
        agent.collect(env)
        before = [p.clone() for p in agent.actor_target.parameters()]
        agent.learn()
        assert moved(before, agent.actor_target)


def test_td3_actor_moves_only_on_its_updates() -> None:
    agent, env = build("td3", updates_per_step=1, policy_delay=1)
    agent.collect(env)
    actor = [p.clone() for p in agent.actor.parameters()]
    target = [p.clone() for p in agent.actor_target.parameters()]
    agent.learn()
    assert not all(torch.equal(a, b) for a, b in zip(actor, agent.actor.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(target, agent.actor_target.parameters(), strict=True))


def test_dqn_target_is_copied_every_interval() -> None:
    agent, env = build("dqn", updates_per_step=1, target_update_interval=3, tau=1.0)
    snapshots = []
    for _ in range(6):
        agent.collect(env)
        agent.learn()
        snapshots.append((params_of(agent.q), params_of(agent.q_target)))
    for i, (online, target) in enumerate(snapshots):
        assert torch.equal(online, target) == ((i + 1) % 3 == 0), f"update {i + 1}"


def params_of(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in module.parameters()])


# -- transitions stored from a real env: truncation vs termination ---------------------------------

class Countdown(TensorEnv):
    """Obs = (steps taken, env id); env i terminates after i + 2 steps; time limit 3."""

    name = "countdown"

    def __init__(self, num_envs: int, discrete: bool) -> None:
        be = get_backend("cpu")
        action = Discrete(2) if discrete else Box(-1.0, 1.0, shape=(1,))
        super().__init__(num_envs, be, Box(-100.0, 100.0, shape=(2,)), action, max_episode_steps=3, seed=0)
        self.t = torch.zeros(num_envs)
        self.ids = torch.arange(num_envs, dtype=torch.float32)

    def _reset_envs(self, mask: torch.Tensor) -> None:
        self.t.masked_fill_(mask, 0.0)

    def _advance(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.t += 1
        return torch.ones(self.num_envs), self.t >= self.ids + 2

    def _observe(self, out: torch.Tensor) -> None:
        out.copy_(torch.stack([self.t, self.ids], -1))

    def get_state(self) -> torch.Tensor:
        return self.t.unsqueeze(-1).clone()

    def _set_state(self, state: torch.Tensor) -> None:
        self.t.copy_(state[:, 0])


@pytest.mark.parametrize("name", AGENTS)
def test_stored_transitions_bootstrap_truncated_not_terminated(name: str) -> None:
    env = Countdown(3, discrete=name == "dqn")
    torch.manual_seed(0)
    agent = make_agent(name, env, "cpu", **SMALL)
    env.reset(seed=0)
    for _ in range(3):
        agent.collect(env)
    rb = agent.rb
    # env 0 terminates at t=2; env 1 terminates at t=3 (also truncated); env 2 is truncated at t=3
    assert rb.terminated[:3].T.tolist() == [[False, True, False], [False, False, True], [False, False, False]]
    assert rb.done[:3].T.tolist() == [[False, True, False], [False, False, True], [False, False, True]]
    # next obs is the final obs (t=3 for the truncated env), not the reset obs
    assert rb.next_obs[2, :, 0].tolist() == [1.0, 3.0, 3.0]
    assert rb.obs[2, :, 0].tolist() == [0.0, 2.0, 2.0]
    b = rb.gather(torch.tensor([2, 2]), torch.tensor([1, 2]))
    assert b.terminated.tolist() == [1.0, 0.0]


# -- checkpoints -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", AGENTS)
def test_checkpoint_restores_everything_and_loads_into_another_num_envs(name: str) -> None:
    agent, env = build(name, updates_per_step=2)
    for _ in range(3):
        agent.collect(env)
        agent.learn()
    state = copy.deepcopy(agent.state_dict())
    twin, twin_env = build(name, seed=5, updates_per_step=2)
    twin.load_state_dict(state)
    assert torch.equal(params(twin), params(agent))
    assert torch.equal(twin.rb.obs, agent.rb.obs) and int(twin.env_steps) == int(agent.env_steps)
    # continuing both from the same state gives the same updates
    twin_env.set_state(env.get_state())
    agent.collect(env)
    twin.collect(twin_env)
    m1, m2 = agent.learn(), twin.learn()
    assert torch.equal(params(twin), params(agent))
    assert all(torch.equal(m1[k], m2[k]) for k in m1)
    # an agent built for evaluation with another num_envs takes the networks only
    other, other_env = build(name, num_envs=3, seed=1)
    other.load_state_dict(state)
    obs = other_env.obs
    assert torch.equal(other.act(obs, deterministic=True)[0], agent_act(state, name, obs))


def agent_act(state: dict, name: str, obs: torch.Tensor) -> torch.Tensor:
    agent, _ = build(name, num_envs=obs.shape[0], seed=2)
    agent.load_state_dict(state)
    return agent.act(obs, deterministic=True)[0]


@pytest.mark.parametrize("name", AGENTS)
def test_load_state_dict_keeps_each_groups_lr_tensor(name: str) -> None:
    agent, env = build(name, learning_starts=0)
    agent.collect(env)
    agent.learn()  # learning rates now at their base values
    state = copy.deepcopy(agent.state_dict())
    twin, _ = build(name, seed=3)  # never learned: its rates are 0 until learn()
    lrs = {k: [g["lr"] for g in o.param_groups] for k, o in twin.optimizers.items()}
    twin.load_state_dict(state)
    for k, opt in twin.optimizers.items():
        for group, lr, saved in zip(opt.param_groups, lrs[k], state["optimizers"][k]["param_groups"], strict=True):
            assert group["lr"] is lr  # the tensor learn() writes and a recorded graph reads
            assert float(lr) == float(saved["lr"]) == pytest.approx(group["base_lr"])


def test_sac_entropy_target_and_alpha_tuning() -> None:
    agent, env = build("sac", updates_per_step=4, learning_starts=0)
    assert isinstance(agent, SAC) and agent.target_entropy == -1.0
    log_alpha = float(agent.log_alpha["log_alpha"])
    assert log_alpha == pytest.approx(math.log(0.2))
    agent.collect(env)
    agent.learn()
    assert float(agent.log_alpha["log_alpha"]) != log_alpha
    fixed, env = build("sac", autotune=False)
    fixed.collect(env)
    fixed.learn()
    assert float(fixed.log_alpha["log_alpha"]) == pytest.approx(math.log(0.2))
    assert "alpha" not in fixed.optimizers


def test_classes_are_the_registered_ones() -> None:
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    assert isinstance(make_agent("dqn", env, "cpu", **SMALL), DQN)
    env = make_env("pendulum", num_envs=2, backend="cpu", seed=0)
    assert isinstance(make_agent("td3", env, "cpu", **SMALL), TD3)


def test_dqn_dueling_head_and_plain_targets() -> None:
    agent, env = build("dqn", dueling=True, double=False, loss="huber", updates_per_step=2, n_step=2)
    check_agent(agent, env, iterations=2)
    q = agent.q  # two streams (Wang et al. 2016) on the flattened observation
    x = env.obs.float().flatten(1)
    adv = q.advantage(x)
    assert torch.allclose(q(env.obs), q.value(x) + adv - adv.mean(-1, keepdim=True))


def test_learning_rates_anneal_on_the_device() -> None:
    agent, env = build("sac", learning_starts=8, lr_anneal_steps=32, lr_end_fraction=0.25, updates_per_step=1)
    seen = []
    for _ in range(10):
        agent.collect(env)
        log = OpLog()
        with log:
            agent.learn()
        assert not log.syncs
        seen.append(float(agent.optimizers["actor"].param_groups[0]["lr"]))
    steps = [4 * (i + 1) for i in range(10)]
    want = [0.0 if s < 8 else 3e-4 * (1 - 0.75 * min(s / 32, 1.0)) for s in steps]
    assert seen == pytest.approx(want, rel=1e-5)


# -- optimizer and precision seams ----------------------------------------------------------------

@pytest.mark.parametrize("name", AGENTS)
@pytest.mark.parametrize(("key", "value"), [("optimizer", "bogus"), ("precision", "fp16")])
def test_optimizer_and_precision_are_checked(name: str, key: str, value: str) -> None:
    env = make_env(ENV[name], num_envs=2, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match=f"agent.{key}") as err:
        make_agent(name, env, "cpu", **{**SMALL, key: value})
    assert "\n" not in str(err.value) and repr(value) in str(err.value)


@pytest.mark.parametrize("name", AGENTS)
def test_bf16_updates_on_the_cpu(name: str) -> None:
    agent, env = build(name, precision="bf16", updates_per_step=2)
    before = params(agent)
    for _ in range(3):
        agent.collect(env)
        metrics = agent.learn()
        assert metrics and all(bool(torch.isfinite(v)) for v in metrics.values()), metrics
        assert all(v.dtype == torch.float32 for v in metrics.values())
    assert not torch.equal(params(agent), before)
    assert all(p.dtype == torch.float32 for p in agent.nets.parameters())


@pytest.mark.parametrize("name", AGENTS)
def test_rmsprop_from_the_optimizer_table(name: str) -> None:
    agent, env = build(name, optimizer="rmsprop")
    assert all(isinstance(o, torch.optim.RMSprop) for o in agent.optimizers.values())
    agent.collect(env)
    agent.learn()
    agent.collect(env)
    assert all(bool(torch.isfinite(v)) for v in agent.learn().values())


# -- recipes ---------------------------------------------------------------------------------------

OTHER_ENVS = ["halfcheetah", "swimmer", "gym:LunarLander-v3", "mountaincar"]


@pytest.mark.parametrize("name", [*AGENTS, "redq"])
def test_recipes_are_the_modules_tables(name: str) -> None:
    module = importlib.import_module(f"noeira.agents.{name}")
    tables = td3.RECIPES if name == "ddpg" else module.RECIPES
    for env in [*(e for e in tables if e != "*"), *OTHER_ENVS]:
        for backend in ("cpu", "cuda"):
            by_backend = tables.get(env, tables["*"])
            want = copy.deepcopy(by_backend.get(backend, by_backend["*"]))
            if name == "ddpg":  # TD3's recipes without the keys of TD3's fixes
                for key in ("policy_noise", "noise_clip", "policy_delay"):
                    want.get("agent", {}).pop(key, None)
            got = module.recipe(env, backend, None)
            assert got == want and module.recipe(env, backend, 64) == want, (env, backend)
            assert recipes.noeira_recipe(agent=name, env=env, backend=backend, num_envs=None) == want
            got["run"]["total_steps"] = 1  # a fresh copy each call
            assert module.recipe(env, backend, None) == want


def test_documented_recipes() -> None:
    """The recipes README.md quotes: SAC solves Pendulum in 8k steps (64-wide on the CPU), DQN solves
    CartPole in 50k (5 of 5 seeds, BENCHMARKS.md); TD3's tables serve DDPG."""
    from noeira.agents import ddpg, dqn, sac

    cpu, cuda = sac.recipe("pendulum", "cpu", None), sac.recipe("pendulum", "cuda", None)
    assert cpu["run"]["total_steps"] == cuda["run"]["total_steps"] == 8_000
    assert (cpu["agent"]["hidden"], cuda["agent"]["hidden"]) == ([64, 64], [256, 256])
    assert dqn.recipe("cartpole", "cpu", None)["run"]["total_steps"] == 50_000
    assert dqn.recipe("gym:LunarLander-v3", "cpu", None) == {"note": UNTESTED,
                                                             "run": {"total_steps": 500_000, "log_interval": 250}}
    assert ddpg.recipe("pendulum", "cuda", 8) == td3.recipe("pendulum", "cuda", 8)
    assert td3.recipe("pendulum", "cpu", None)["agent"]["updates_per_step"] % TD3.Config().policy_delay == 0
