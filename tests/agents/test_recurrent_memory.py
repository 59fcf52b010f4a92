"""Issue 32: recurrent policies that learn memory with their defaults.

Why MinGRU could not carry one bit for 8 steps at PPO's defaults while the LSTM could, each
cause with the test that shows it (each fails on the code before the fix):

* its update gate started at ``z = 1/2`` (zero bias), so its state halved at every step: a cue
  seen ``k`` steps back reached the heads ``2^-k`` as strongly as the current input (``4e-5`` at
  16 steps, ``1e-17`` at 64; the LSTM's recurrent weights carry it at ``~1``) -- now the gate's
  bias spreads the units' time constants over ``[1, max_timescale]``
  (:func:`test_memory_reaches_the_heads_at_init`);
* PPO's learning rate (2.5e-4, an MLP's) moves each weight by about ``lr`` per update, too
  little for the gates and heads to learn a faint memory within the budget -- the recurrent
  networks now ship a layer of settings through the ``noeira_recipe`` hook
  (:func:`test_recurrent_networks_ship_their_learning_rate`), and with both, PPO learns the
  issue's task with ``agent.network`` the only setting (:func:`test_issue_32_cue_at_defaults`).

Ruled out, each by a test: the update replays the rollout exactly (same log-probabilities and
values from the stored states, episode starts and bf16 autocast, at PPO's own sizes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from noeira.core import get_backend, make_agent
from noeira.core.cli import main
from noeira.core.contracts import NetworkSpec
from noeira.core.driver import resolve, train
from noeira.core.plugins import get_plugin_manager, hookimpl
from noeira.core.registry import load

pytestmark = pytest.mark.usefixtures("one_thread")

CueCorridor = pytest.importorskip("acme_corridor.memory").CueCorridor


def cue_sensitivity(network: str, steps: int, seeds: int = 5, **options) -> float:
    """At init, how strongly the critic at the last of ``steps`` steps depends on a cue shown at
    the first, relative to how strongly it depends on the current observation (mean of seeds)."""
    ratios = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        net = load("networks", network)(NetworkSpec((3,), {"actor": 2, "critic": 1}, torch.device("cpu"), (64, 64),
                                                    output_gains={"actor": 0.01, "critic": 1.0}, options=options))
        obs = torch.zeros(steps, 1, 3)
        obs[:, 0, 0] = torch.arange(steps) / (steps - 1)
        obs[-1, 0, 2] = 1.0
        obs.requires_grad_()
        done = torch.zeros(steps, 1, dtype=torch.bool)
        done[0] = True
        value = net.forward_sequence(obs, net.initial_state(1), done)["critic"][-1].sum()
        grad = torch.autograd.grad(value, obs)[0]
        ratios.append(float(grad[0, 0, 1].abs() / grad[-1, 0].abs().sum()))
    return sum(ratios) / len(ratios)


@pytest.mark.parametrize(("steps", "floor"), [(8, 2e-2), (16, 5e-3), (64, 5e-4)])
def test_memory_reaches_the_heads_at_init(steps: int, floor: float) -> None:
    """A fresh MinGRU's critic feels a cue ``steps`` back (with the zero-bias gate: 5e-3 at 8
    steps, 4e-5 at 16, 7e-18 at 64); the LSTM's, for reference, near 1."""
    assert cue_sensitivity("mingru", steps) > floor
    assert cue_sensitivity("mingru", steps, max_timescale=0) < floor / 2  # the old init, for contrast
    assert cue_sensitivity("lstm", steps) > 3e-2


def test_gate_bias_spreads_the_time_constants() -> None:
    """Update gates start at z = 1 / tau, tau log-uniform in [1, max_timescale] (per unit)."""
    torch.manual_seed(0)
    net = load("networks", "mingru")(NetworkSpec((3,), {"actor": 2}, torch.device("cpu"), (512,),
                                                 options={"max_timescale": 100}))
    tau = 1 / torch.sigmoid(net.gates[0].bias[:512].detach())
    assert float(tau.min()) >= 1.0 and float(tau.max()) <= 100.5
    log_tau = tau.log()
    for lo, hi in ((0.0, 1.5), (1.5, 3.0), (3.0, 4.61)):  # about a third of the units in each third (in log)
        share = float(((log_tau >= lo) & (log_tau < hi)).float().mean())
        assert 0.25 < share < 0.42, (lo, hi, share)
    off = load("networks", "mingru")(NetworkSpec((3,), {"actor": 2}, torch.device("cpu"), (8,),
                                                 options={"max_timescale": 0}))
    assert not off.gates[0].bias.any()  # the zero-bias gate, on request


def test_lstm_chrono_initialisation() -> None:
    """``max_timescale`` > 1 starts each LSTM unit's forget gate at 1 - 1/tau (tau log-uniform in
    [1, max_timescale], MinGRU's spread) and its input gate at 1/tau; 0 keeps ``forget_bias``."""
    torch.manual_seed(0)
    h = 512
    net = load("networks", "lstm")(NetworkSpec((3,), {"actor": 2}, torch.device("cpu"), (h, h),
                                               options={"max_timescale": 100}))
    for layer in net.w_ih:
        bias = layer.bias.detach()
        forget, write = torch.sigmoid(bias[h:2 * h]), torch.sigmoid(bias[:h])
        tau = 1 / (1 - forget)
        assert float(tau.min()) >= 1.0 and float(tau.max()) <= 100.5
        assert 0.25 < float((tau.log() >= 3.0).float().mean()) < 0.42  # a third of the units past e^3 steps
        torch.testing.assert_close(write, 1 - forget)
        assert not bias[2 * h:].any()
    plain = load("networks", "lstm")(NetworkSpec((3,), {"actor": 2}, torch.device("cpu"), (8,),
                                                 options={"forget_bias": 0.5}))
    assert torch.equal(plain.w_ih[0].bias[8:16], torch.full((8,), 0.5)) and not plain.w_ih[0].bias[:8].any()


@pytest.mark.parametrize("precision", ["fp32", "bf16", "bf16-master"])
@pytest.mark.parametrize("network", ["lstm", "mingru"])
def test_replay_is_exact_at_ppo_defaults(network: str, precision: str) -> None:
    """At PPO's own sizes (16 envs, horizon 128, 8-step episodes: 16 episode starts inside each
    segment; the second rollout starts mid-episode from a carried state) and after updates have
    moved the weights, replaying each segment from its stored state gives the rollout's own
    log-probabilities and values, bit for bit, under bf16 autocast too."""
    env = CueCorridor(CueCorridor.Config(length=8), num_envs=16, backend=get_backend("cpu"), seed=0)
    agent = make_agent("ppo", env, network=network, precision=precision, lr=3e-3)
    env.reset(seed=0)
    agent.collect(env)
    agent.learn()
    agent.collect(env)
    buf = agent.rollout.buf
    assert buf.starts.sum() >= 16 * 15 and float(buf.state0.abs().sum()) > 0
    with torch.no_grad():
        logprob, _, value = agent.rollout.evaluate(torch.arange(16), segments=True)
    assert torch.equal(logprob.view(128, 16), buf.logprobs)
    assert torch.equal(value.view(128, 16), buf.values)


# -- the networks' layer of settings (noeira_recipe with network) --------------------------------

@pytest.fixture
def plain_cue(install_dist):
    """The example plugin's cue env under another name, so no recipe knows it: a third-party env
    as the issue's user had."""
    install_dist("plain-cue-env", {"noeira.envs": {"plain-cue": "acme_corridor.memory:CueCorridor"}})
    return "plain-cue"


def _run(env: str, **agent) -> dict:
    return resolve({"backend": "cpu", "env": {"name": env}, "agent": {"name": "ppo", **agent}})


def test_recurrent_networks_ship_their_learning_rate(plain_cue: str) -> None:
    for network in ("lstm", "mingru"):
        cfg = _run(plain_cue, network=network)
        assert cfg.agent.config.lr == 3e-3 and cfg.recipes == ("networks (noeira-agents)",)
    mlp = _run(plain_cue)
    assert mlp.agent.config.lr == 2.5e-4 and mlp.recipes == ()
    assert _run(plain_cue, network="mingru", lr=1e-3).agent.config.lr == 1e-3  # the user's word is last


def test_network_layer_sits_below_the_envs_recipes() -> None:
    """The env's distribution has the last word: the memory suite's recipes (noeira-envs) over
    the network's layer; Craftax's recipe sets its own rate and keeps its tuned MinGRU (no conv,
    zero gate bias), and leaves another network's options alone."""
    cfg = _run("t-maze", network="lstm")
    assert cfg.recipes == ("networks (noeira-agents)", "envs (noeira-envs)") and cfg.agent.config.lr == 3e-3
    craftax = _run("craftax-classic")
    assert craftax.agent.config.network == "mingru" and craftax.agent.config.lr == 5e-3
    assert craftax.agent.config.network_options == {"conv": 1, "max_timescale": 0}
    lstm = _run("craftax-classic", network="lstm")
    assert lstm.agent.config.network_options == {} and lstm.agent.config.lr == 5e-3
    assert lstm.recipes == ("networks (noeira-agents)", "envs (noeira-envs)")


def test_count_recall_recipe_keeps_its_rare_answers_explored() -> None:
    """count-recall's recipe (noeira-envs) raises the entropy bonus, the LSTM's most, and widens
    the LSTM only: at ent_coef 0.01 every network stopped trying the rare high counts
    (BENCHMARKS.md "Memory": accuracy by count); the MLP keeps its sizes."""
    lstm, mingru, mlp = (_run("count-recall", network=n) for n in ("lstm", "mingru", "mlp"))
    assert (lstm.agent.config.ent_coef, lstm.agent.config.hidden_sizes) == (0.1, (128, 128))
    assert (mingru.agent.config.ent_coef, mingru.agent.config.hidden_sizes) == (0.05, (64, 64))
    assert mlp.agent.config.hidden_sizes == (64, 64)
    assert _run("repeat-first", network="lstm").agent.config.ent_coef == 0.01  # the other tasks keep 0.01


def test_help_says_where_the_layer_came_from(plain_cue: str, capsys) -> None:
    assert main(["train", f"env={plain_cue}", "agent.network=mingru", "backend=cpu", "--help"]) == 0
    out = capsys.readouterr().out
    assert "from networks (noeira-agents): agent.lr=0.003" in out


class _Probe:
    """An in-process recipe plugin that takes the network, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    @hookimpl
    def noeira_recipe(self, agent: str, env: str, network: str | None) -> dict | None:
        self.asked.append(network)
        return {"agent": {"vf_coef": 0.7}} if network == "gru" else None


def test_a_plugin_taking_network_is_asked_with_the_chosen_one() -> None:
    """The user's network, else the one a network-blind recipe chose (the example plugin's
    cue-corridor recipe picks its gru), else None."""
    probe = _Probe()
    pm = get_plugin_manager()
    pm.register(probe, name="probe")
    try:
        assert _run("cue-corridor").agent.config.vf_coef == 0.7  # acme's recipe chose gru
        assert _run("cue-corridor", network="lstm").agent.config.vf_coef == 0.5
        _run("cartpole")
        assert probe.asked == ["gru", "lstm", None]
    finally:
        pm.unregister(probe)


# -- learning --------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("network", ["lstm", "mingru"])
def test_issue_32_cue_at_defaults(network: str, plain_cue: str, tmp_path: Path) -> None:
    """The issue's run: a cue seen at the first of 8 steps, named at the last; PPO with
    ``agent.network`` the only setting (16 envs, horizon 128, and the network's learning rate).
    Both networks learn it within 5e4 steps; the sampled policy, not only its argmax, is right
    (before the fix MinGRU's training return stayed near 0 after 3e5 steps)."""
    cfg = resolve({"backend": "cpu", "env": {"name": plain_cue, "length": 8},
                   "agent": {"name": "ppo", "network": network, "torch_threads": 1},
                   "run": {"seed": 0, "total_steps": 50_000, "eval_episodes": 100, "progress": False}})
    record = train(cfg, run_dir=tmp_path / network)
    assert record["final_eval"]["mean_return"] == 1.0
    lines = (tmp_path / network / "metrics.jsonl").read_text().splitlines()
    last = [json.loads(x)["episode_return"] for x in lines if "episode_return" in x][-3:]
    assert min(last) > 0.9, last


# -- the memory suite: PPO with agent.network the only setting -----------------------------------

def _suite_run(task: str, network: str, tmp_path: Path, seed: int = 0, eval_episodes: int = 100,
               **run) -> tuple[float, dict]:
    """``noeira train env=TASK agent.network=NETWORK run.seed=SEED backend=cpu``: the final
    100-episode evaluation and the env's bounds."""
    import attrs

    from noeira.core import make_env

    cfg = resolve({"backend": "cpu", "env": {"name": task}, "agent": {"name": "ppo", "network": network},
                   "run": {"seed": seed, "eval_episodes": eval_episodes, "progress": False, "checkpoint_minutes": 0,
                           **run}})
    bounds = make_env(task, num_envs=1, backend="cpu", **attrs.asdict(cfg.env.config)).describe()
    record = train(cfg, run_dir=tmp_path / f"{task}-{network}-{seed}")
    return record["final_eval"]["mean_return"], bounds


MEMORY_TASKS = ("repeat-first", "repeat-previous", "count-recall", "t-maze", "autoencode")


@pytest.mark.slow
@pytest.mark.parametrize("task", MEMORY_TASKS)
def test_a_memoryless_policy_stays_near_chance(task: str, tmp_path: Path) -> None:
    """The tasks need memory: PPO's MLP, with the suite's recipe (5e4 steps: it has learned what
    it can, the best answer to the current observation), evaluates within a tenth of the way
    from chance to the best return. Over 1,000 episodes: t-maze's memoryless policy is right
    half the time, and 100 episodes' mean has a standard deviation of 0.05, the whole margin."""
    ret, b = _suite_run(task, "mlp", tmp_path, total_steps=50_000, eval_episodes=1000)
    assert ret <= b["chance_return"] + 0.1 * (b["best_return"] - b["chance_return"]), (ret, b)


SOLVE_BUDGETS = [
    # (task, network, run.total_steps): every task x network once, seed 0, at a budget no larger
    # than the recipe's 5e5, from the steps its seed 0 took here (BENCHMARKS.md "Memory")
    ("repeat-first", "lstm", 100_000), ("repeat-first", "mingru", 100_000),
    ("repeat-previous", "lstm", 300_000), ("repeat-previous", "mingru", 200_000),
    ("count-recall", "lstm", 500_000), ("count-recall", "mingru", 500_000),
    ("t-maze", "lstm", 100_000), ("t-maze", "mingru", 200_000),
    ("autoencode", "lstm", 200_000), ("autoencode", "mingru", 500_000),
]


@pytest.mark.slow
@pytest.mark.parametrize(("task", "network", "steps"), SOLVE_BUDGETS)
def test_short_setting_is_solved(task: str, network: str, steps: int, tmp_path: Path) -> None:
    """PPO with ``agent.network`` the only setting solves every task of the suite at its short
    setting: the final 100-episode evaluation within a tenth of the way from the best return
    (``chance + 0.9 (best - chance)``).

    A bounded subset of the claim, sized for CI (about 9 minutes on a 2-core CPU): one seed per
    task x network, each at a budget no larger than the recipe's 5e5 steps. The issue's claim,
    solved on at least 4 of 5 seeds, is 50 runs of up to 5e5 steps (hours on such a box): the
    benchmark carries it (``python benchmarks/memory.py learn``: 5 tasks x mlp, lstm, mingru x 5
    seeds, its table in BENCHMARKS.md "Memory")."""
    ret, b = _suite_run(task, network, tmp_path, total_steps=steps)
    assert ret >= b["chance_return"] + 0.9 * (b["best_return"] - b["chance_return"]), (ret, b)
