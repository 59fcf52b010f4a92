"""PPO / on-policy pieces: advantage estimators against plain-python references, action
heads against torch.distributions, conformance kit, config, checkpoints. Fast (no learning)."""

from __future__ import annotations

import copy
import math

import attrs
import pytest
import torch

from noeira.agents import ppo
from noeira.agents.distributions import CategoricalHead, GaussianHead, SDEGaussianHead, make_head
from noeira.agents.ppo import PPO
from noeira.agents.rollout_buffer import RolloutBuffer, gae, puff_advantage
from noeira.core import Box, Discrete, MultiDiscrete, TensorEnv, get_backend, make_agent, make_env
from noeira.core.config import field_docs
from noeira.core.driver import resolve
from noeira.core.errors import ConfigError
from noeira.core.testing import check_agent

pytestmark = pytest.mark.usefixtures("one_thread")


class MatchEnv(TensorEnv):
    """Tiny MultiDiscrete env: observe two random targets (one-hot), reward 1 per component
    the action matches. Episodes truncate after 8 steps."""

    name = "match"
    nvec = (3, 4)

    def __init__(self, num_envs: int, seed: int | None = 0) -> None:
        be = get_backend("cpu")
        super().__init__(num_envs, be, Box(0.0, 1.0, shape=(sum(self.nvec),)),
                         MultiDiscrete(list(self.nvec)), max_episode_steps=8, seed=seed)
        self.target = torch.zeros((num_envs, 2), dtype=torch.int64)

    def _draw(self, mask: torch.Tensor) -> None:
        new = torch.stack([torch.randint(0, n, (self.num_envs,), generator=self.generator) for n in self.nvec], 1)
        self.target.copy_(torch.where(mask[:, None], new, self.target))

    def _reset_envs(self, mask: torch.Tensor) -> None:
        self._draw(mask)

    def _advance(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        reward = (action == self.target).float().sum(1)
        self._draw(torch.ones(self.num_envs, dtype=torch.bool))
        return reward, torch.zeros(self.num_envs, dtype=torch.bool)

    def _observe(self, out: torch.Tensor) -> None:
        out.zero_()
        out.scatter_(1, self.target[:, :1], 1.0)
        out.scatter_(1, self.target[:, 1:] + self.nvec[0], 1.0)

    def get_state(self) -> torch.Tensor:
        return self.target.clone()

    def _set_state(self, state: torch.Tensor) -> None:
        self.target.copy_(state)


# -- advantages -------------------------------------------------------------------------------

def _random_rollout(t: int = 7, n: int = 5, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    term = torch.rand(t, n, generator=g) < 0.2
    trunc = torch.rand(t, n, generator=g) < 0.2
    return {
        "rewards": torch.randn(t, n, generator=g),
        "values": torch.randn(t, n, generator=g),
        "final_values": torch.randn(t, n, generator=g),
        "terminated": term, "truncated": trunc,
    }


def _reference_advantages(d: dict[str, torch.Tensor], gamma: float, lam: float, ratio: torch.Tensor | None = None,
                          rho_clip: float = math.inf, c_clip: float = math.inf) -> list[list[float]]:
    """Plain python, one env and one step at a time: bootstrap from V(final_obs) at a
    truncation or at the rollout's end, from the next row's value otherwise, not at all
    after a termination; the trace stops at every episode end."""
    t_len, n = d["rewards"].shape
    out = [[0.0] * n for _ in range(t_len)]
    for i in range(n):
        adv = 0.0
        for t in reversed(range(t_len)):
            r = float(d["rewards"][t, i])
            v = float(d["values"][t, i])
            term, trunc = bool(d["terminated"][t, i]), bool(d["truncated"][t, i])
            if trunc or t == t_len - 1:
                v_next = float(d["final_values"][t, i])
            else:
                v_next = float(d["values"][t + 1, i])
            if term:
                v_next = 0.0
            w = 1.0 if ratio is None else float(ratio[t, i])
            rho, c = min(w, rho_clip), min(w, c_clip)
            delta = rho * (r + gamma * v_next - v)
            if term or trunc:
                adv = 0.0
            adv = delta + gamma * lam * c * adv
            out[t][i] = adv
    return out


def _fill(d: dict[str, torch.Tensor]) -> RolloutBuffer:
    t, n = d["rewards"].shape
    buf = RolloutBuffer(t, n, 1, (), torch.int64, "cpu")
    buf.rewards.copy_(d["rewards"])
    buf.values.copy_(d["values"])
    buf.final_values.copy_(d["final_values"])
    buf.terminated.copy_(d["terminated"].float())
    buf.truncated.copy_(d["truncated"])
    buf.dones.copy_((d["terminated"] | d["truncated"]).float())
    return buf


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_python_reference_with_truncation_and_termination(seed: int) -> None:
    d = _random_rollout(seed=seed)
    assert d["terminated"].any() and d["truncated"].any()
    buf = _fill(d)
    buf.compute_advantages(gamma=0.97, lam=0.9)
    ref = torch.tensor(_reference_advantages(d, 0.97, 0.9))
    torch.testing.assert_close(buf.advantages, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(buf.returns, ref + d["values"])


def test_gae_by_hand() -> None:
    """One env, three steps: a truncation at t=1 (bootstrap from V(final_obs)=10), the
    rollout ends at t=2 (bootstrap from V(final_obs)=4)."""
    d = {"rewards": torch.tensor([[1.0], [2.0], [3.0]]), "values": torch.tensor([[0.5], [1.0], [2.0]]),
         "final_values": torch.tensor([[1.0], [10.0], [4.0]]),
         "terminated": torch.tensor([[False], [False], [False]]), "truncated": torch.tensor([[False], [True], [False]])}
    buf = _fill(d)
    g, lam = 0.9, 0.5
    buf.compute_advantages(g, lam)
    a2 = 3.0 + g * 4.0 - 2.0                      # 4.6
    a1 = 2.0 + g * 10.0 - 1.0                     # 10.0: truncated, trace cut
    a0 = (1.0 + g * 1.0 - 0.5) + g * lam * a1     # V(s_1)=values[1]=1.0 (not final_values[0])
    torch.testing.assert_close(buf.advantages[:, 0], torch.tensor([a0, a1, a2]))
    # the same rollout, but t=1 terminates: no bootstrap there
    d["terminated"] = torch.tensor([[False], [True], [False]])
    d["truncated"] = torch.tensor([[False], [False], [False]])
    buf = _fill(d)
    buf.compute_advantages(g, lam)
    torch.testing.assert_close(buf.advantages[1, 0], torch.tensor(2.0 - 1.0))


def test_puff_advantage_is_gae_on_policy_with_wide_clips() -> None:
    d = _random_rollout(t=9, n=6, seed=3)
    buf = _fill(d)
    buf.compute_advantages(0.99, 0.95)
    ref = buf.advantages.clone()
    for clip in (1.0, 1e9):  # on-policy the ratio is 1: any clip >= 1 leaves it alone
        buf.compute_advantages(0.99, 0.95, ratio=torch.ones(9, 6), rho_clip=clip, c_clip=clip)
        torch.testing.assert_close(buf.advantages, ref, rtol=0, atol=0)


def test_puff_advantage_by_hand() -> None:
    """One env, two steps, ratios 2.0 and 0.5, rho_clip 1.5, c_clip 1.0:
    delta_1 = min(0.5,1.5) * (1 + 0.9*3 - 2) = 0.85; A_1 = 0.85
    delta_0 = min(2,1.5) * (0 + 0.9*2 - 1) = 1.2;  A_0 = 1.2 + 0.9*0.8*min(2,1)*0.85 = 1.812"""
    z = torch.zeros(2, 1)
    out = torch.zeros(2, 1)
    puff_advantage(torch.tensor([[0.0], [1.0]]), torch.tensor([[1.0], [2.0]]), torch.tensor([[2.0], [3.0]]), z, z,
                   torch.tensor([[2.0], [0.5]]), 0.9, 0.8, 1.5, 1.0, out=out)
    torch.testing.assert_close(out[:, 0], torch.tensor([1.812, 0.85]))
    d = _random_rollout(seed=5)
    ratio = torch.rand(7, 5, generator=torch.Generator().manual_seed(1)) * 2
    buf = _fill(d)
    buf.compute_advantages(0.95, 0.9, ratio=ratio, rho_clip=1.2, c_clip=0.9)
    ref = torch.tensor(_reference_advantages(d, 0.95, 0.9, ratio, 1.2, 0.9))
    torch.testing.assert_close(buf.advantages, ref, rtol=1e-5, atol=1e-5)


def test_gae_function_writes_out() -> None:
    t = torch.ones(3, 2)
    out = torch.empty(3, 2)
    res = gae(t, torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), 1.0, 1.0, out=out)
    assert res is out
    torch.testing.assert_close(out[:, 0], torch.tensor([3.0, 2.0, 1.0]))


# -- action heads ------------------------------------------------------------------------------

def test_categorical_head_matches_torch_distributions() -> None:
    head = CategoricalHead([3, 5, 2])
    g = torch.Generator().manual_seed(0)
    out = torch.randn(64, 10, generator=g)
    action, logp = head.sample(out, g)
    assert action.shape == (64, 3) and action.dtype == torch.int64
    assert bool((action >= 0).all()) and bool((action < torch.tensor([3, 5, 2])).all())
    dists = [torch.distributions.Categorical(logits=x) for x in out.split([3, 5, 2], dim=1)]
    ref_logp = sum(dd.log_prob(a) for dd, a in zip(dists, action.unbind(1), strict=True))
    ref_ent = sum(dd.entropy() for dd in dists)
    lp, ent = head.log_prob_entropy(out, action)
    torch.testing.assert_close(logp, ref_logp)
    torch.testing.assert_close(lp, ref_logp)
    torch.testing.assert_close(ent, ref_ent)
    assert torch.equal(head.mode(out), torch.stack([x.argmax(1) for x in out.split([3, 5, 2], dim=1)], 1))


def test_categorical_sampling_frequencies() -> None:
    head = make_head(Discrete(3, start=1))
    probs = torch.tensor([0.2, 0.5, 0.3])
    out = probs.log().expand(200_000, 3)
    action, _ = head.sample(out, torch.Generator().manual_seed(0))
    assert action.shape == (200_000,) and int(action.min()) == 1 and int(action.max()) == 3
    freq = torch.bincount(action - 1, minlength=3).float() / action.numel()
    torch.testing.assert_close(freq, probs, atol=5e-3, rtol=0)


def test_gaussian_head_matches_normal_and_clips_for_env() -> None:
    space = Box(-2.0, 2.0, shape=(2,))
    head = GaussianHead(space, log_std_init=0.3)
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(32, 2, generator=g) * 3
    action, logp = head.sample(mean, g)
    ref = torch.distributions.Normal(mean, torch.exp(torch.tensor(0.3)))
    torch.testing.assert_close(logp, ref.log_prob(action).sum(1))
    lp, ent = head.log_prob_entropy(mean, action)
    torch.testing.assert_close(lp, ref.log_prob(action).sum(1))
    torch.testing.assert_close(ent, ref.entropy().sum(1))
    env_action = head.to_env(action)
    assert bool((env_action.abs() <= 2.0).all()) and bool((action.abs() > 2.0).any())  # stored unclipped
    torch.testing.assert_close(env_action, action.clamp(-2, 2))


def test_sde_head_keeps_each_envs_noise_and_matches_normal() -> None:
    """gSDE: the action is mu(phi) + phi W with phi = tanh(out) and one W per env, kept for
    sample_freq samples; its density and entropy are Normal(mu, sqrt(phi^2 sigma^2 + 1e-6))'s."""
    torch.manual_seed(0)
    space = Box(-2.0, 2.0, shape=(2,))
    head = SDEGaussianHead(space, features=8, num_envs=16, sample_freq=3, log_std_init=-0.5)
    g = torch.Generator().manual_seed(0)
    out = torch.randn(16, 8, generator=g)
    first = [head.sample(out, g)[0] for _ in range(3)]
    later, logp = head.sample(out, g)
    assert torch.equal(first[0], first[1]) and torch.equal(first[0], first[2]) and not torch.equal(first[0], later)
    phi = torch.tanh(out)
    mean = head.mu(phi)
    torch.testing.assert_close(later - mean, torch.bmm(phi.unsqueeze(1), head.weights).squeeze(1))
    ref = torch.distributions.Normal(mean, (phi.square() @ head.log_std.exp().square() + 1e-6).sqrt())
    torch.testing.assert_close(logp, ref.log_prob(later).sum(1))
    lp, ent = head.log_prob_entropy(out, later)
    torch.testing.assert_close(lp, ref.log_prob(later).sum(1))
    torch.testing.assert_close(ent, ref.entropy().sum(1))
    (lp.sum() + ent.sum()).backward()
    assert float(head.log_std.grad.abs().sum()) > 0 and float(head.mu.weight.grad.abs().sum()) > 0
    assert tuple(head.sample(out[:4], g)[0].shape) == (4, 2)  # another batch size: one fresh W for it
    with pytest.raises(ConfigError, match="needs a Box"):
        make_head(Discrete(3), sde=True)
    with pytest.raises(ConfigError, match="agent.sde_sample_freq"):
        make_head(space, sde=True, sde_sample_freq=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16-master"])
def test_ppo_with_sde_conforms(precision: str) -> None:
    env = make_env("pendulum", num_envs=4, backend="cpu", seed=0)
    agent = make_agent("ppo", env, "cpu", sde=True, sde_sample_freq=4, horizon=8, num_minibatches=2,
                       update_epochs=1, precision=precision)
    check_agent(agent, env, iterations=3)


def test_unsupported_action_space_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not supported"):
        make_head(("mixed", Discrete(2)))  # type: ignore[arg-type]


# -- the agent ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    {},
    {"advantage": "puff", "prio_alpha": 0.8, "norm_obs": True, "norm_reward": True},
    {"bf16": True, "clip_vloss": False, "max_grad_norm": 0.0},
])
def test_check_agent_cartpole(kw: dict) -> None:
    env = make_env("cartpole", num_envs=8, backend="cpu", seed=0)
    check_agent(make_agent("ppo", env, horizon=16, **kw), env)


def test_check_agent_pendulum_and_multidiscrete() -> None:
    env = make_env("pendulum", num_envs=8, backend="cpu", seed=0)
    check_agent(make_agent("ppo", env, horizon=8, norm_obs=True), env)
    env = MatchEnv(8)
    agent = make_agent("ppo", env, backend="cpu", horizon=8)
    check_agent(agent, env)
    action, state = agent.act(env.obs)
    assert action.shape == (8, 2) and state is None


def test_learn_metrics_are_device_scalars() -> None:
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=8)
    env.reset(seed=0)
    agent.collect(env)
    metrics = agent.learn()
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "lr"):
        assert metrics[key].dim() == 0 and metrics[key].device.type == "cpu", key
    assert agent.steps_per_collect == 32


def test_obs_norm_and_reward_stats_in_state_dict() -> None:
    env = make_env("pendulum", num_envs=4, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=8, norm_obs=True, norm_reward=True)
    env.reset(seed=0)
    agent.collect(env)
    state = agent.state_dict()
    mean = state["rollout"]["policy"]["obs_rms.mean"]
    assert mean.shape == (3,) and float(mean.abs().sum()) > 0
    assert float(state["rollout"]["policy"]["obs_rms.count"]) == pytest.approx(32, abs=1e-3)
    assert float(state["rollout"]["reward_scaler"]["rms.count"]) == pytest.approx(32, abs=1e-3)
    fresh = make_agent("ppo", env, horizon=8, norm_obs=True, norm_reward=True)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.rollout.policy.obs_rms.mean, agent.rollout.policy.obs_rms.mean)
    assert torch.equal(fresh.act(env.obs, deterministic=True)[0], agent.act(env.obs, deterministic=True)[0])


def test_lr_anneals_as_a_tensor_per_param_group() -> None:
    """Each param group holds its own lr tensor (the one a recorded graph reads); annealing
    writes it in place and load_state_dict keeps the tensor, restoring its value."""
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=8, lr=1e-3)
    agent.set_total_steps(64)  # two iterations of 32 steps
    lr = agent.optimizer.param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and agent.optimizer.param_groups[0]["base_lr"] == 1e-3
    env.reset(seed=0)
    lrs = []
    for _ in range(2):
        agent.collect(env)
        lrs.append(float(agent.learn()["lr"]))
    assert lrs == pytest.approx([1e-3, 5e-4])
    assert agent.optimizer.param_groups[0]["lr"] is lr
    state = copy.deepcopy(agent.state_dict())  # as a checkpoint holds it
    lr.fill_(7.0)
    agent.load_state_dict(state)
    assert agent.optimizer.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(5e-4)


def test_collect_is_seeded() -> None:
    def run() -> torch.Tensor:
        torch.manual_seed(0)
        env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
        agent = make_agent("ppo", env, horizon=8)
        env.reset(seed=0)
        agent.collect(env)
        agent.learn()
        agent.collect(env)
        return agent.rollout.buf.actions.clone()
    assert torch.equal(run(), run())


def test_truncation_bootstraps_from_final_obs_value() -> None:
    """Pendulum only truncates (200 steps): every truncated row's bootstrap is V(final_obs)
    of that step, which collect computed with the critic."""
    env = make_env("pendulum", num_envs=3, backend="cpu", seed=0, max_episode_steps=5)
    agent = make_agent("ppo", env, horizon=7)
    env.reset(seed=0)
    finals = []
    orig_step = env.step

    def spy(action: torch.Tensor):  # record what the env returned at each step
        res = orig_step(action)
        finals.append(res.final_obs.clone())
        return res
    env.step = spy  # type: ignore[method-assign]
    agent.collect(env)
    buf, policy = agent.rollout.buf, agent.rollout.policy
    assert bool(buf.truncated[4].all()) and not bool(buf.terminated.any())
    with torch.no_grad():
        v_final = policy.value(policy.observe(finals[4]))
    torch.testing.assert_close(buf.final_values[4], v_final)
    torch.testing.assert_close(buf.next_values()[4], v_final)
    torch.testing.assert_close(buf.next_values()[3], buf.values[4])  # not done: the next row's value


def _bootstrap_run(env_name: str, bootstrap: str, env_kw: dict, agent_kw: dict, iterations: int = 4):
    torch.manual_seed(0)
    env = make_env(env_name, num_envs=4, backend="cpu", seed=0, **env_kw)
    agent = make_agent("ppo", env, bootstrap=bootstrap, **agent_kw)
    env.reset(seed=0)
    if env_name == "craftax-classic":  # two worlds near the time limit: truncations inside the rollout
        st = env.get_state()
        st["timestep"][:2] = torch.tensor([9993, 9995])
        env.set_state(st)
    rows = []
    for _ in range(iterations):
        agent.collect(env)
        buf = agent.rollout.buf
        used = buf.truncated.clone()
        used[-1] = True  # the last row's bootstrap is read everywhere
        rows.append((used, buf.final_values.clone(), buf.truncated.clone()))
        agent.learn()
    return agent, rows


@pytest.mark.parametrize(("env_name", "env_kw", "agent_kw"), [
    ("pendulum", {"max_episode_steps": 9}, {"horizon": 7}),
    ("pendulum", {"max_episode_steps": 9}, {"horizon": 7, "network": "mingru", "hidden_sizes": [8, 8]}),
    ("craftax-classic", {"obs": "compact", "kernel": "torch"},
     {"horizon": 6, "network": "mingru", "hidden_sizes": [16], "num_minibatches": 2}),
])
def test_bootstrap_at_end_is_every_step_bit_for_bit(env_name: str, env_kw: dict, agent_kw: dict) -> None:
    """Valuing truncated episodes once at the end of the rollout (bootstrap=auto resolves to it
    where the env truncates only at a time limit of at least horizon steps) gives the values
    every-step computes wherever an estimator reads them, so training is bit for bit the same
    (feed-forward, recurrent, and an Encoded observation kept as its code)."""
    if env_name == "craftax-classic":
        pytest.importorskip("noeira.envs.craftax")
    a, rows_a = _bootstrap_run(env_name, "every-step", env_kw, agent_kw)
    b, rows_b = _bootstrap_run(env_name, "auto", env_kw, agent_kw)
    assert not a.rollout.bootstrap_at_end and b.rollout.bootstrap_at_end
    truncated_inside = 0
    for (used, va, ta), (_, vb, tb) in zip(rows_a, rows_b, strict=True):
        assert torch.equal(ta, tb)
        assert torch.equal(va[used], vb[used])
        truncated_inside += int(ta[:-1].sum())
    assert truncated_inside >= 2, "no truncation before a rollout's last row: the at-end path went untested"
    for (name, pa), pb in zip(a.rollout.policy.state_dict().items(), b.rollout.policy.state_dict().values(),
                              strict=True):
        assert torch.equal(pa, pb), name


@pytest.mark.parametrize("precision", ["fp32", "bf16-master"])
def test_network_reading_codes_trains_as_on_decoded_floats(precision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A network that reads an Encoded observation's codes (its input layer decodes them into its
    padded input, in its dtype) gives the values and the training of the decoded floats, bit for bit."""
    pytest.importorskip("noeira.envs.craftax")
    from noeira.agents import networks

    kw = {"horizon": 6, "network": "mingru", "hidden_sizes": [16], "num_minibatches": 2, "precision": precision}
    runs = []
    for reads in (False, True):
        monkeypatch.setattr(networks._RecurrentTrunk, "reads_code", reads)
        runs.append(_bootstrap_run("craftax-classic", "auto", {"obs": "compact", "kernel": "torch"}, kw, iterations=2))
    (a, _), (b, _) = runs
    assert not a.rollout.policy.reads_code and b.rollout.policy.reads_code
    for name in ("values", "logprobs", "final_values", "advantages"):
        assert torch.equal(getattr(a.rollout.buf, name), getattr(b.rollout.buf, name)), name
    for (name, pa), pb in zip(a.rollout.policy.state_dict().items(), b.rollout.policy.state_dict().values(),
                              strict=True):
        assert torch.equal(pa, pb), name


def test_bootstrap_choice() -> None:
    env = make_env("pendulum", num_envs=2, backend="cpu", seed=0, max_episode_steps=5)
    assert not make_agent("ppo", env, horizon=7).rollout.bootstrap_at_end  # a limit shorter than a rollout
    assert make_agent("ppo", env, horizon=5).rollout.bootstrap_at_end
    with pytest.raises(ConfigError, match="agent.bootstrap: 'at-end' needs"):
        make_agent("ppo", env, horizon=7, bootstrap="at-end")
    with pytest.raises(ConfigError, match="agent.bootstrap: must be"):
        make_agent("ppo", env, bootstrap="lazy")


def test_config_errors_and_docs() -> None:
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match="agent.advantage"):
        make_agent("ppo", env, advantage="vtrace")
    with pytest.raises(ConfigError, match="agent.num_minibatches"):
        make_agent("ppo", env, horizon=2, num_minibatches=16, prio_alpha=0.5)
    with pytest.raises(ConfigError, match="agent.activation"):
        make_agent("ppo", env, activation="sigmoidish")
    with pytest.raises(ConfigError, match="agent.lr"):
        make_agent("ppo", env, lr="fast")
    docs = field_docs(PPO.Config)
    missing = [f.name for f in attrs.fields(PPO.Config) if not docs.get(f.name)]
    assert not missing, f"undocumented PPO.Config fields: {missing}"


@pytest.mark.parametrize("env_name", ["cartpole", "pendulum"])
@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_recipes_resolve(env_name: str, backend: str) -> None:
    recipe = ppo.recipe(env_name, backend)
    assert recipe["env"]["num_envs"] >= 1 and recipe["run"]["total_steps"] > 0
    cfg = resolve({"env": {"name": env_name}, "agent": {"name": "ppo", **recipe["agent"]}, "run": recipe["run"],
                   "backend": "cpu"})
    assert cfg.agent.config.horizon == recipe["agent"]["horizon"]
    assert ppo.recipe("no-such-env", backend) is None


def test_recipe_keeps_its_iterations_at_the_users_num_envs() -> None:
    """A user's env.num_envs reaches the recipe (through the driver), which scales the run
    length with it; the user's own run.total_steps still wins."""
    cuda = ppo.recipe("cartpole", "cuda")
    assert ppo.recipe("cartpole", "cuda", num_envs=4 * cuda["env"]["num_envs"])["run"]["total_steps"] == \
        4 * cuda["run"]["total_steps"]
    base = resolve({"backend": "cpu"})
    bigger = resolve({"backend": "cpu", "env": {"num_envs": 4 * base.num_envs}})
    assert bigger.num_envs == 4 * base.num_envs and bigger.run.total_steps == 4 * base.run.total_steps
    mine = resolve({"backend": "cpu", "env": {"num_envs": 4 * base.num_envs}, "run": {"total_steps": 1234}})
    assert mine.run.total_steps == 1234


def test_multidiscrete_learns() -> None:
    """Matching two targets: random play earns 1/3 + 1/4 per step, a learned policy ~2."""
    torch.manual_seed(0)
    env = MatchEnv(64)
    agent = make_agent("ppo", env, backend="cpu", horizon=8, lr=1e-2, num_minibatches=1, gamma=0.0, gae_lambda=0.0)
    env.reset(seed=0)
    agent.collect(env)
    first = float(agent.rollout.buf.rewards.mean())
    for _ in range(12):
        agent.learn()
        agent.collect(env)
    last = float(agent.rollout.buf.rewards.mean())
    assert first < 0.8 and last > 1.9, (first, last)


def test_prioritized_segments_and_importance_weights() -> None:
    """Segments (whole env columns) are drawn ~ sum_t |A|^alpha without replacement, with
    weights (N p)^-beta, one per transition of the segment."""
    env = make_env("cartpole", num_envs=8, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=4, num_minibatches=4, prio_alpha=1.0)
    assert agent.minibatch_segments == 2
    adv = torch.full((4, 8), 0.01)
    adv[:, 5] = 100.0  # env 5 dominates the priorities
    agent.rollout.buf.advantages.copy_(adv)
    seg, weight = agent._sample_segments(torch.tensor(0.5))
    assert seg.shape == (2,) and weight.shape == (8,)  # two envs, each its whole segment of 4 steps
    envs = seg[None, :].expand(4, 2)
    assert 5 in seg.tolist() and seg[0] != seg[1]
    score = adv.abs().sum(0) + 1e-6
    probs = score / score.sum()
    torch.testing.assert_close(weight.view(4, 2)[0], (8 * probs[envs[0]]).pow(-0.5))


# -- contracts v2: network, optimizer and precision seams ------------------------------------

def test_recurrent_segments_replay_the_rollout_exactly() -> None:
    """Each segment replayed from its stored initial state with the same episode resets gives the
    rollout's own log-probs and values (the first minibatch of the first epoch sees them)."""
    from acme_corridor.memory import CueCorridor

    env = CueCorridor(CueCorridor.Config(length=3), num_envs=6, backend=get_backend("cpu"), seed=0)
    agent = make_agent("ppo", env, network="gru", hidden_sizes=[8], horizon=7, num_minibatches=2)
    env.reset(seed=0)
    for _ in range(2):  # the second rollout starts mid-episode, from a carried state
        agent.collect(env)
    buf = agent.rollout.buf
    assert buf.state0 is not None and float(buf.state0.abs().sum()) > 0, "the segment start state is stored"
    assert bool(buf.starts.any()) and not bool(buf.starts.all()), "episode starts inside the segment"
    with torch.no_grad():
        logprob, _, value = agent.rollout.evaluate(torch.arange(6), segments=True)
    torch.testing.assert_close(logprob.view(7, 6), buf.logprobs, rtol=0, atol=1e-6)
    torch.testing.assert_close(value.view(7, 6), buf.values, rtol=0, atol=1e-6)
    assert agent.segments and agent.minibatch_segments == 3
    agent.learn()


def test_act_carries_the_recurrent_state() -> None:
    from acme_corridor.memory import CueCorridor

    env = CueCorridor(CueCorridor.Config(), num_envs=4, backend=get_backend("cpu"), seed=0)
    agent = make_agent("ppo", env, network="gru", hidden_sizes=[8])
    obs = env.reset(seed=0)
    state = agent.initial_state(4)
    assert state.shape == (1, 4, 8)
    done = torch.ones(4, dtype=torch.bool)
    _, state1 = agent.act(obs, state, done, deterministic=True)
    assert not torch.equal(state1, state)
    _, state2 = agent.act(obs, state1, torch.zeros(4, dtype=torch.bool), deterministic=True)
    assert not torch.equal(state2, state1)


def test_grad_norm_is_the_mean_over_the_iteration(monkeypatch) -> None:
    norms: list[float] = []
    clip = torch.nn.utils.clip_grad_norm_

    def spy(params, max_norm, *a, **k):
        out = clip(params, max_norm, *a, **k)
        norms.append(float(out))
        return out

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=8, update_epochs=2, num_minibatches=2, max_grad_norm=100.0)
    env.reset(seed=0)
    agent.collect(env)
    metrics = agent.learn()
    assert len(norms) == 4 and len(set(norms)) > 1
    assert float(metrics["grad_norm"]) == pytest.approx(sum(norms) / 4, rel=1e-5)


def test_optimizer_and_precision_keys() -> None:
    env = make_env("cartpole", num_envs=4, backend="cpu", seed=0)
    with pytest.raises(ConfigError, match=r"agent.optimizer: unknown optimizer 'muonn' \(known: adam, rmsprop"):
        make_agent("ppo", env, optimizer="muonn")
    with pytest.raises(ConfigError, match="agent.precision: expected one of fp32, bf16, bf16-master, got 'fp16'"):
        make_agent("ppo", env, precision="fp16")
    agent = make_agent("ppo", env, horizon=8, optimizer="rmsprop", precision="bf16")
    assert isinstance(agent.optimizer, torch.optim.RMSprop) and agent.rollout.precision == "bf16"
    check_agent(agent, env)
    assert make_agent("ppo", env, bf16=True).rollout.precision == "bf16"  # the older spelling still holds


# -- PufferLib-grade knobs: their neutral settings leave the default run bit-identical ------------

def _params_after(**kw) -> list[torch.Tensor]:
    torch.manual_seed(0)
    env = make_env("cartpole", num_envs=16, backend="cpu", seed=0)
    agent = make_agent("ppo", env, horizon=8, **kw)
    agent.set_total_steps(10_000)
    env.reset(seed=0)
    for _ in range(3):
        agent.collect(env)
        agent.learn()
    return [p.detach().clone() for p in agent.rollout.policy.parameters()]


@pytest.mark.parametrize("kw", [
    {"replay_ratio": 4.0},                       # = update_epochs passes
    {"lr_schedule": "linear", "min_lr_ratio": 0.0},
    {"ent_schedule": "linear", "ent_coef": 0.0, "ent_coef_final": 0.0},
    {"reward_clamp": 0.0, "precision": "fp32"},
])
def test_neutral_knobs_keep_the_default_run(kw) -> None:
    for a, b in zip(_params_after(), _params_after(**kw), strict=True):
        assert torch.equal(a, b)


def test_min_lr_ratio_and_cosine_change_the_run() -> None:
    base = _params_after()
    for kw in ({"min_lr_ratio": 0.5}, {"lr_schedule": "cosine"}, {"optimizer": "muon"}, {"precision": "bf16-master"}):
        assert any(not torch.equal(a, b.float()) for a, b in zip(base, _params_after(**kw), strict=True)), kw


@pytest.mark.parametrize("network", ["mlp", "mingru"])
def test_encoded_observations_are_stored_as_codes_and_train_bit_identically(network: str) -> None:
    """With an Encoded observation (Craftax-Classic's 148-byte compact one) the rollout stores the
    code, not the 1,345 floats, and decodes it where the update reads it: training is bit for bit
    what it is on the float observation."""
    params = []
    for obs in ("compact", "symbolic"):
        torch.manual_seed(0)
        env = make_env("craftax-classic", num_envs=8, backend="cpu", seed=0, obs=obs, kernel="torch")
        agent = make_agent("ppo", env, network=network, hidden_sizes=[16, 16], horizon=4, num_minibatches=2,
                           update_epochs=2, torch_threads=1)
        agent.set_total_steps(64)
        want_dtype = torch.uint8 if obs == "compact" else torch.float32
        assert agent.rollout.buf.obs.dtype == want_dtype and agent.rollout.buf.obs.shape[-1] == (148 if obs == "compact"
                                                                                                else 1345)
        for _ in range(2):
            agent.collect(env)
            agent.learn()
        params.append([p.detach().clone() for p in agent.rollout.policy.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*params, strict=True))
