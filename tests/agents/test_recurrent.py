"""Recurrent policies (``lstm``, ``mingru``) and the PufferLib-grade PPO knobs: the networks
against the conformance kit and the scan against a loop, segment replay against the rollout,
resets, checkpoints and resume, bf16-master, schedules, CLI keys and errors, and the memory
task a feed-forward policy cannot solve. CUDA-graph recording of the learn step is tested where
CUDA is present (marked ``cuda``)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from noeira.agents import mingru_scan
from noeira.agents.layers import AlignedInput, layer_init
from noeira.agents.networks import LSTM, MinGRU, linear_scan
from noeira.agents.onpolicy import schedule
from noeira.agents.precision import MasterWeights
from noeira.core import get_backend, make_agent
from noeira.core.cli import main
from noeira.core.contracts import NetworkSpec
from noeira.core.driver import resolve, train
from noeira.core.errors import ConfigError
from noeira.core.testing import check_agent, check_network

pytestmark = pytest.mark.usefixtures("one_thread")

CueCorridor = pytest.importorskip("acme_corridor.memory").CueCorridor

needs_triton = pytest.mark.skipif(not mingru_scan.available(), reason="the fused scan needs Triton")
FUSED = pytest.param("mingru", {"scan": "fused"}, marks=needs_triton, id="mingru-fused")

NETWORKS = [
    ("lstm", {}),
    ("mingru", {"scan": "sequential"}),
    ("mingru", {"scan": "parallel"}),
    FUSED,
    ("mingru", {"skip": "residual", "scan": "parallel"}),
    ("mingru", {"skip": "none"}),
    ("mingru", {"conv": 1, "max_timescale": 0}),  # the plain MinGRU: no conv, zero gate bias
]


def corridor(num_envs: int, length: int = 3, device: str = "cpu") -> CueCorridor:
    return CueCorridor(CueCorridor.Config(length=length), num_envs=num_envs, backend=get_backend(device), seed=0)


# -- the networks ---------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "options"), NETWORKS)
def test_network_passes_the_kit(name, options) -> None:
    check_network(name, hidden_sizes=(8, 8, 8), options=options, steps=13)
    check_network(name, hidden_sizes=(6,), options=options, observation_shape=(2, 3))


def test_layout_follows_hidden_sizes() -> None:
    spec = NetworkSpec((1345,), {"actor": 17, "critic": 1}, torch.device("cpu"), (256, 256, 256))
    net = MinGRU(spec)
    # the input layer's weight is padded to 1,352 columns (bf16 tensor-core alignment), zero past 1,345
    assert net.encoder[0].weight.shape == (256, 1352) and len(net.gates) == 3
    assert not net.encoder[0].weight[:, 1345:].any()
    assert net.gates[0].weight.shape == (3 * 256, 256)  # z, h~ and the highway gate in one matmul
    assert net.conv.shape == (3, 4, 256)  # a width-4 causal conv per layer, the identity at init
    assert torch.equal(net.conv[:, 0], torch.ones(3, 256)) and not net.conv[:, 1:].any()
    assert net.initial_state(5).shape == (3 * 4, 5, 256)  # per layer h, then its last 3 inputs
    lstm = LSTM(NetworkSpec((4,), {"actor": 2}, torch.device("cpu"), (16, 16)))
    assert lstm.initial_state(5).shape == (4, 5, 16)  # h of each layer, then c of each layer
    assert float(lstm.w_ih[0].bias.detach()[16:32].min()) == 1.0  # forget bias


@pytest.mark.parametrize(
    ("cls", "options", "message"),
    [
        (MinGRU, {"scan": "fast"}, "agent.network_options.scan: must be one of auto, fused, parallel, sequential, got 'fast'"),
        (MinGRU, {"skipp": "none"},
         "agent.network_options.skipp: unknown key (known keys: skip, scan, max_timescale, conv)"),
        (LSTM, {"forget_bias": "x"}, "agent.network_options.forget_bias: expected a float, got 'x'"),
        (LSTM, {"scan": "parallel"}, "agent.network_options.scan: unknown key (known keys: forget_bias, max_timescale)"),
    ],
)
def test_network_options_errors(cls, options, message) -> None:
    with pytest.raises(ConfigError) as err:
        cls(NetworkSpec((3,), {"actor": 2}, torch.device("cpu"), (8,), options=options))
    assert str(err.value) == message


def test_aligned_input_is_the_unpadded_layer() -> None:
    """The padded input layer computes the unpadded layer's outputs and gradients (its padding
    columns get none), under autocast too, and loads an unpadded layer's checkpoint."""
    torch.manual_seed(0)
    padded = AlignedInput(13, 5)
    torch.manual_seed(0)
    plain = layer_init(torch.nn.Linear(13, 5))  # the same draws: the same init
    assert padded.weight.shape == (5, 16)
    torch.testing.assert_close(padded.weight[:, :13], plain.weight, rtol=0, atol=0)
    x = torch.randn(7, 13)
    torch.testing.assert_close(padded(x), plain(x))
    padded(x).square().sum().backward()
    plain(x).square().sum().backward()
    torch.testing.assert_close(padded.weight.grad[:, :13], plain.weight.grad)
    assert not padded.weight.grad[:, 13:].any()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert padded(x).dtype == torch.bfloat16
    other = AlignedInput(13, 5)
    other.load_state_dict(plain.state_dict())
    torch.testing.assert_close(other(x), plain(x))


def test_widths_must_be_one() -> None:
    with pytest.raises(ConfigError, match=r"agent.hidden_sizes: the lstm network needs .* got \[8, 4\]"):
        LSTM(NetworkSpec((3,), {"actor": 2}, torch.device("cpu"), (8, 4)))


@pytest.mark.parametrize("t", [1, 2, 5, 8, 13])
def test_linear_scan_matches_the_loop(t) -> None:
    g = torch.Generator().manual_seed(t)
    a = torch.rand(t, 4, 3, generator=g)
    a[torch.rand(t, 4, 1, generator=g).expand(t, 4, 3) < 0.3] = 0.0  # resets
    b, h0 = torch.randn(t, 4, 3, generator=g), torch.randn(4, 3, generator=g)
    h, want = h0, []
    for i in range(t):
        h = a[i] * h + b[i]
        want.append(h)
    torch.testing.assert_close(linear_scan(a, b, h0), torch.stack(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("skip", ["highway", "residual", "none"])
@pytest.mark.parametrize("scan", ["parallel", pytest.param("fused", marks=needs_triton)])
def test_mingru_scans_agree_with_gradients(scan, skip) -> None:
    """The parallel and fused scans give the step-by-step loop's outputs and gradients (the
    parameters' and the initial state's), resets inside the segment included."""
    spec = dict(observation_shape=(3,), outputs={"actor": 2}, device=torch.device("cpu"), hidden_sizes=(8, 8))
    torch.manual_seed(0)
    seq = MinGRU(NetworkSpec(**spec, options={"scan": "sequential", "skip": skip}))
    par = MinGRU(NetworkSpec(**spec, options={"scan": scan, "skip": skip}))
    par.load_state_dict(seq.state_dict())
    obs, done = torch.randn(16, 5, 3), torch.rand(16, 5) < 0.2
    assert bool(done[1:].any())
    state = torch.randn(seq.initial_state(5).shape)  # h and the conv's last inputs of both layers
    grads = []
    for net in (seq, par):
        s0 = state.clone().requires_grad_()
        out = net.forward_sequence(obs, s0, done)["actor"]
        out.square().sum().backward()
        grads.append([p.grad.clone() for p in net.parameters()] + [s0.grad])
    torch.testing.assert_close(seq.forward_sequence(obs, state, done)["actor"],
                               par.forward_sequence(obs, state, done)["actor"], rtol=1e-5, atol=1e-6)
    for gs, gp in zip(*grads, strict=True):
        torch.testing.assert_close(gs, gp, rtol=1e-4, atol=1e-5)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@needs_triton
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("taps", [2, 3, 4])
def test_fused_conv_agrees_with_the_torch_form(taps, device, monkeypatch) -> None:
    """The conv kernels (``scan="fused"``) give the torch form's inputs to the gates and its
    gradients (the inputs', the taps', the carried inputs'), with resets inside the segment, one
    at the first step, and segments shorter than the taps; and its acting step."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    launched = []  # the fused network runs the kernels, not the torch form
    real = mingru_scan._conv_kernels

    def counted():
        forward, backward = real()

        class Count:
            def __init__(self, fn, name):
                self.fn, self.name = fn, name

            def __getitem__(self, grid):
                launched.append(self.name)
                return self.fn[grid]

        return Count(forward, "forward"), Count(backward, "backward")

    monkeypatch.setattr(mingru_scan, "_conv_kernels", counted)
    spec = dict(observation_shape=(3,), outputs={"actor": 2}, device=torch.device(device), hidden_sizes=(8,))
    torch.manual_seed(taps)
    ref = MinGRU(NetworkSpec(**spec, options={"scan": "parallel", "conv": taps}))
    fused = MinGRU(NetworkSpec(**spec, options={"scan": "fused", "conv": taps}))
    with torch.no_grad():
        ref.conv.normal_()  # the identity start would hide the taps
    fused.load_state_dict(ref.state_dict())
    for t in (1, 2, 11):
        x = torch.randn(t, 5, 8, device=device, requires_grad=True)
        keep = (torch.rand(t, 5, 1, device=device) > 0.3).float()
        keep[0, 0] = 0.0
        past = [torch.randn(5, 8, device=device, requires_grad=True) for _ in range(taps - 1)]
        dy = torch.randn(t, 5, 8, device=device)
        got = []
        for net in (ref, fused):
            for p in (x, *past, net.conv):
                p.grad = None
            u = net._conv_sequence(0, x, past, keep)
            (u * dy).sum().backward()
            got.append([u.detach(), x.grad.clone(), net.conv.grad.clone(), *(p.grad.clone() for p in past)])
        for want, have in zip(*got, strict=True):
            torch.testing.assert_close(have, want, rtol=1e-5, atol=1e-5)
        assert float(got[0][2][:, 1:].abs().sum()) > 0, "the taps got gradients"
    with torch.no_grad():  # acting: one step, the state's carried inputs shifted
        (want, want_past), (have, have_past) = (net._conv_step(0, x[0], past) for net in (ref, fused))
    torch.testing.assert_close(have, want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(torch.stack(have_past), torch.stack(want_past), rtol=0, atol=0)
    assert launched.count("forward") == 4 and launched.count("backward") == 3, launched


@needs_triton
def test_mingru_benchmark_runs_and_its_paths_agree() -> None:
    """``benchmarks/mingru.py --quick`` (in the interpreter) prints a row for each path, all of them
    within float32 rounding of the torch forms."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "benchmarks" / "mingru.py"
    out = subprocess.run([sys.executable, str(script), "--quick", "--dtype", "float32", "--backend", "cpu"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines() if line.strip().startswith("8 ")]
    assert len(rows) == 5, out.stdout
    assert all(float(r[-1]) < 1e-5 and float(r[-2]) < 1e-5 for r in rows), out.stdout


# -- PPO with a recurrent network -------------------------------------------------------------

@pytest.mark.parametrize(("name", "options"), NETWORKS[:4])
def test_segments_replay_the_rollout(name, options) -> None:
    """Each segment replayed from its stored initial state with the same resets gives the rollout's
    own log-probs and values: the first minibatch of the first epoch sees ratio 1."""
    env = corridor(6)
    agent = make_agent("ppo", env, network=name, network_options=options, hidden_sizes=[8, 8], horizon=7,
                       num_minibatches=2)
    env.reset(seed=0)
    for _ in range(2):  # the second rollout starts mid-episode, from a carried state
        agent.collect(env)
    buf = agent.rollout.buf
    assert float(buf.state0.abs().sum()) > 0, "the segment start state is stored"
    assert bool(buf.starts.any()) and not bool(buf.starts.all()), "episode starts inside the segment"
    with torch.no_grad():
        logprob, _, value = agent.rollout.evaluate(torch.arange(6), segments=True)
    torch.testing.assert_close(logprob.view(7, 6), buf.logprobs, rtol=0, atol=1e-6)
    torch.testing.assert_close(value.view(7, 6), buf.values, rtol=0, atol=1e-6)
    metrics = agent.learn()
    assert all(math.isfinite(float(v)) for v in metrics.values())


def test_state_resets_where_an_episode_starts() -> None:
    """The carried state of an env whose episode just began acts as a fresh one."""
    env = corridor(4)
    agent = make_agent("ppo", env, network="mingru", hidden_sizes=[8], horizon=5)
    env.reset(seed=0)
    agent.collect(env)  # length 3: every env ended once inside the 5 steps
    state, starts = agent.rollout.state, agent.rollout.starts
    obs = env.obs
    with torch.no_grad():
        x = agent.rollout.policy.observe(obs)
        carried, _ = agent.rollout.policy.net(x, state, torch.ones(4, dtype=torch.bool))
        fresh, _ = agent.rollout.policy.net(x, agent.initial_state(4), torch.zeros(4, dtype=torch.bool))
    torch.testing.assert_close(carried["actor"], fresh["actor"], rtol=0, atol=0)
    assert starts.dtype == torch.bool


@pytest.mark.parametrize("kw", [
    {"network": "lstm"},
    {"network": "mingru", "optimizer": "muon", "lr": 0.02},
    {"network": "mingru", "precision": "bf16-master", "prio_alpha": 1.0},
    {"network": "lstm", "precision": "bf16-master", "optimizer": "muon", "advantage": "puff"},
])
def test_agent_conformance(kw) -> None:
    env = corridor(8)
    agent = make_agent("ppo", env, hidden_sizes=[8], horizon=6, num_minibatches=2, **kw)
    check_agent(agent, env)


@pytest.mark.parametrize("kw", [
    {"network": "mingru"},
    {"network": "lstm", "optimizer": "muon", "lr": 0.02},
    {"network": "mingru", "precision": "bf16-master", "lr_schedule": "cosine", "ent_schedule": "linear",
     "ent_coef": 0.01},
])
def test_resume_continues_bit_identically(kw) -> None:
    """A fresh agent loading a checkpoint continues exactly as the original would from fresh
    episodes (the training envs' recurrent state is per episode: checkpoints do not hold it)."""

    def build():
        torch.manual_seed(0)
        env = corridor(8)
        agent = make_agent("ppo", env, hidden_sizes=[8], horizon=6, num_minibatches=2, **kw)
        agent.set_total_steps(1000)
        return env, agent

    env, agent = build()
    env.reset(seed=0)
    for _ in range(2):
        agent.collect(env)
        agent.learn()
    saved = copy.deepcopy(agent.state_dict())  # as from a file: no tensor shared with the live agent
    assert "state" not in saved["rollout"] and not any("state0" in k for k in saved["rollout"]["policy"])
    env2, resumed = build()
    resumed.load_state_dict(saved)
    # the original as a resumed run starts: fresh episodes, fresh recurrent state
    agent.rollout.state.zero_()
    agent.rollout.starts.fill_(True)
    for e in (env, env2):
        e.reset(seed=5)
    for _ in range(2):
        for e, a in ((env, agent), (env2, resumed)):
            a.collect(e)
            a.learn()
    for p, q in zip(agent.rollout.policy.parameters(), resumed.rollout.policy.parameters(), strict=True):
        assert torch.equal(p, q)
    for p, q in zip(agent.rollout.weights.parameters(), resumed.rollout.weights.parameters(), strict=True):
        assert torch.equal(p, q)


# -- bf16-master ------------------------------------------------------------------------------

def test_bf16_master_step_tracks_fp32() -> None:
    """One Adam step through bf16 working weights and float32 masters lands where the float32
    step lands, within bf16's rounding of the forward/backward; the working weights are the
    masters rounded to bf16."""
    from noeira.agents.optim import make_optimizer

    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    mixed = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    mixed.load_state_dict(ref.state_dict())
    start = [p.detach().clone() for p in ref.parameters()]
    weights = MasterWeights(mixed, "bf16-master")
    assert all(p.dtype == torch.bfloat16 for p in mixed.parameters())
    assert all(m.dtype == torch.float32 for m in weights.parameters())
    opt_ref = make_optimizer("adam", ref.parameters(), 1e-2)
    opt_mix = weights.attach(make_optimizer("adam", weights.parameters(), 1e-2))
    x, y = torch.randn(64, 6), torch.randn(64, 3)
    for _ in range(3):
        for net, opt, w in ((ref, opt_ref, None), (mixed, opt_mix, weights)):
            opt.zero_grad(set_to_none=False)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=w is not None):
                loss = (net(x).float() - y).square().mean()
            loss.backward()
            if w is None:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            else:
                w.clip_gradients(0.5)
            opt.step()
    for s, r, m, wk in zip(start, ref.parameters(), weights.parameters(), mixed.parameters(), strict=True):
        moved = (r - s).abs().max()
        assert moved > 1e-3
        torch.testing.assert_close(m, r.detach(), rtol=0, atol=0.1 * float(moved.detach()) + 1e-3)
        assert torch.equal(wk, m.detach().to(torch.bfloat16))


def test_bf16_master_agent_keeps_float32_masters() -> None:
    env = corridor(8)
    agent = make_agent("ppo", env, network="mingru", hidden_sizes=[8], horizon=6, precision="bf16-master")
    net_params = list(agent.rollout.policy.parameters())
    assert all(p.dtype == torch.bfloat16 for p in net_params)
    opt_params = [p for g in agent.optimizer.param_groups for p in g["params"]]
    assert all(p.dtype == torch.float32 for p in opt_params)
    env.reset(seed=0)
    agent.collect(env)
    assert agent.rollout.buf.state0.dtype == torch.float32 and agent.rollout.buf.advantages.dtype == torch.float32
    before = [p.detach().clone() for p in opt_params]
    agent.learn()
    assert any(not torch.equal(b, p) for b, p in zip(before, opt_params, strict=True))
    for w, m in zip(net_params, opt_params, strict=True):
        assert torch.equal(w, m.detach().to(torch.bfloat16))
    assert len(agent.state_dict()["rollout"]["master"]) == len(opt_params)


# -- schedules and knobs ----------------------------------------------------------------------

def test_schedules() -> None:
    p = torch.tensor([0.0, 0.25, 0.5, 1.0])
    torch.testing.assert_close(schedule(p, "linear", 1.0, 0.1), 1.0 - 0.9 * p)
    torch.testing.assert_close(schedule(p, "cosine", 1.0, 0.1), 0.1 + 0.9 * 0.5 * (1 + torch.cos(math.pi * p)))
    assert torch.equal(schedule(p, "linear", 1.0, 0.0), 1.0 - p)  # the default annealing, bit for bit


def test_lr_and_entropy_schedules_in_learn() -> None:
    env = corridor(8)
    agent = make_agent("ppo", env, horizon=4, lr=1e-2, lr_schedule="cosine", min_lr_ratio=0.1, ent_coef=0.02,
                       ent_schedule="linear", ent_coef_final=0.0)
    agent.set_total_steps(64)
    env.reset(seed=0)
    seen = []
    for _ in range(3):
        agent.collect(env)
        m = agent.learn()
        seen.append((float(m["lr"]), float(m["ent_coef"])))
    for k, (lr, ent) in enumerate(seen):  # progress before batch k: 32 k / 64
        prog = 32 * k / 64
        assert lr == pytest.approx(1e-2 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog))), rel=1e-5)
        assert ent == pytest.approx(0.02 * (1 - prog), rel=1e-5, abs=1e-8)


def test_replay_ratio_sets_the_number_of_updates(monkeypatch) -> None:
    env = corridor(8)
    for ratio, want in ((0.0, 4 * 4), (1.0, 4), (2.5, 10), (0.1, 1)):
        agent = make_agent("ppo", env, horizon=4, num_minibatches=4, update_epochs=4, replay_ratio=ratio)
        assert agent.num_updates == want
        steps = []
        monkeypatch.setattr(agent.optimizer, "step", lambda *a, _s=steps, **k: _s.append(1))
        env.reset(seed=0)
        agent.collect(env)
        agent.learn()
        assert len(steps) == want


def test_reward_clamp() -> None:
    env = corridor(8, length=2)
    agent = make_agent("ppo", env, horizon=4, reward_clamp=0.5)
    env.reset(seed=0)
    agent.collect(env)
    rewards = agent.rollout.buf.rewards
    assert float(rewards.abs().max()) == 0.5


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lr_schedule", "step", "agent.lr_schedule: must be one of linear, cosine, got 'step'"),
        ("ent_schedule", "exp", "agent.ent_schedule: must be one of constant, linear, cosine, got 'exp'"),
        ("min_lr_ratio", 1.5, "agent.min_lr_ratio: must lie in [0, 1], got 1.5"),
        ("replay_ratio", -1.0, "agent.replay_ratio: must be >= 0, got -1.0"),
        ("muon_momentum", 1.0, "agent.muon_momentum: must lie in [0, 1), got 1.0"),
        ("reward_clamp", -1.0, "agent.reward_clamp: must be >= 0, got -1.0"),
        ("precision", "fp16", "agent.precision: expected one of fp32, bf16, bf16-master, got 'fp16'"),
        ("optimizer", "sgd", "agent.optimizer: unknown optimizer 'sgd' (known: adam, rmsprop, muon)"),
    ],
)
def test_bad_values_are_one_line_errors(key, value, message) -> None:
    with pytest.raises(ConfigError) as err:
        make_agent("ppo", corridor(4), **{key: value})
    assert str(err.value) == message


def test_cli_help_lists_the_new_keys(capsys) -> None:
    assert main(["train", "agent=ppo", "env=cue-corridor", "backend=cpu", "--help"]) == 0
    out = capsys.readouterr().out
    for key in ("muon_momentum", "lr_schedule", "min_lr_ratio", "ent_schedule", "ent_coef_final", "replay_ratio",
                "reward_clamp", "bf16-master", "network_options", "mingru"):
        assert key in out, key


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("agent.lr_schedule=step", "agent.lr_schedule: must be one of linear, cosine, got 'step'"),
        ('agent.network_options={scan="fast"}', "agent.network_options.scan: must be one of auto, fused, parallel, sequential"),
        ("agent.precision=fp8", "agent.precision: expected one of fp32, bf16, bf16-master, got 'fp8'"),
    ],
)
def test_cli_bad_values_exit_2(override, message, tmp_path, capsys) -> None:
    args = ["train", "backend=cpu", "env=cue-corridor", "agent.network=mingru", override, "--run-dir", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


# -- the memory task ------------------------------------------------------------------------

@pytest.mark.parametrize("network", ["lstm", "mingru", "mlp"])
def test_memory_task_is_solved_within_a_minute(network, tmp_path) -> None:
    """cue-corridor: the cue must be carried to the last cell; a feed-forward policy scores ~0,
    the recurrent networks 1.0, in seconds of training on this CPU (its recipe, network swapped)."""
    cfg = resolve({"backend": "cpu", "env": {"name": "cue-corridor"}, "agent": {"name": "ppo", "network": network},
                   "run": {"seed": 0, "eval_episodes": 32, "progress": False}})
    record = train(cfg, run_dir=tmp_path / network)
    assert record["train_seconds"] < 60
    if network == "mlp":  # can only guess the cue
        assert record["final_eval"]["mean_return"] < 0.5
    else:
        assert record["final_eval"]["mean_return"] == 1.0


def test_agent_built_for_an_env_shares_its_backend() -> None:
    """make_agent(name, env) builds on the env's own backend object, so the agent's sampling
    generator is in ``backend.generators`` and a recorded step registers it (on CUDA, a
    generator the graph does not know fails the capture)."""
    backend = get_backend("cpu")
    env = CueCorridor(CueCorridor.Config(length=4), num_envs=8, backend=backend, seed=0)
    agent = make_agent("ppo", env, network="mingru", hidden_sizes=[8], horizon=4)
    assert agent.backend is backend
    assert any(g is agent.rollout.generator for g in backend.generators)
    assert any(g is env.generator for g in backend.generators)


# -- CUDA graphs ------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize(("name", "options", "kw"), [
    ("lstm", {}, {}),
    ("mingru", {"scan": "parallel"}, {"optimizer": "muon", "lr": 0.02}),
    ("mingru", {"scan": "sequential"}, {"precision": "bf16-master", "prio_alpha": 1.0}),
    ("mingru", {"scan": "fused"}, {"precision": "bf16-master"}),
])
def test_recorded_learn_is_bit_identical_to_eager(name, options, kw) -> None:
    """collect and learn recorded as CUDA graphs (the ``stream`` backend) give eager's parameters bit for bit."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from noeira.core.api import get_graph_backend

    results = []
    for graph in ("eager", "stream"):
        backend = get_backend("cuda")  # a fresh backend per run, as the driver makes: its generators are this run's
        torch.manual_seed(0)
        env = CueCorridor(CueCorridor.Config(length=4), num_envs=64, backend=backend, seed=0)
        agent = make_agent("ppo", env, network=name, network_options=options, hidden_sizes=[32, 32], horizon=16,
                           num_minibatches=4, **kw)
        agent.set_total_steps(64 * 16 * 8)
        g = get_graph_backend(graph)
        collect, learn = g.wrap(agent.collect, backend), g.wrap(agent.learn, backend)
        env.reset(seed=0)
        for _ in range(6):
            collect(env)
            learn()
        backend.synchronize()
        results.append([p.detach().clone() for p in agent.rollout.weights.parameters()])
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
