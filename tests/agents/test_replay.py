"""The device replay buffer: ring layout, sampling, n-step targets, flags, memory check."""

from __future__ import annotations

import logging
import random

import pytest
import torch

from noeira.agents.replay import ReplayBuffer
from noeira.core.errors import ConfigError


def make_rb(capacity: int, num_envs: int, obs_dim: int = 2, seed: int = 0) -> ReplayBuffer:
    g = torch.Generator().manual_seed(seed)
    return ReplayBuffer(capacity, num_envs, (obs_dim,), torch.float32, (), torch.int64, "cpu", g)


def write(rb: ReplayBuffer, step: int, done: torch.Tensor | None = None, term: torch.Tensor | None = None) -> None:
    """One row: obs = (step, env), action = step, reward = step + env/10, next_obs = (step + 0.5, env)."""
    n = rb.num_envs
    env = torch.arange(n, dtype=torch.float32)
    obs = torch.stack([torch.full((n,), float(step)), env], -1)
    rb.add_obs_action(obs, torch.full((n,), step, dtype=torch.int64))
    done = torch.zeros(n, dtype=torch.bool) if done is None else done
    term = torch.zeros(n, dtype=torch.bool) if term is None else term
    rb.add_result(step + env / 10, term, done & ~term, obs + torch.tensor([0.5, 0.0]))


def test_capacity_rounds_up_to_whole_rows_and_logs_memory(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="noeira"):
        rb = make_rb(10, 4)
    assert (rb.rows, rb.capacity) == (3, 12)
    assert rb.obs.shape == (3, 4, 2) and rb.action.shape == (3, 4)
    assert rb.nbytes == 3 * 4 * (2 * 4 * 2 + 8 + 4 + 1 + 1)
    assert any("replay buffer: 12 transitions" in r.getMessage() for r in caplog.records)


def test_wraparound_keeps_the_newest_rows() -> None:
    rb = make_rb(6, 2)  # 3 rows
    for step in range(5):
        write(rb, step)
        assert int(rb.size) == min(step + 1, 3)
        assert int(rb.pos) == (step + 1) % 3
    # rows now hold steps 3, 4, 2 (row = step % 3)
    assert rb.obs[:, 0, 0].tolist() == [3.0, 4.0, 2.0]
    assert rb.action[:, 1].tolist() == [3, 4, 2]
    assert torch.allclose(rb.reward[:, 1], torch.tensor([3.1, 4.1, 2.1]))
    assert rb.next_obs[:, 0, 0].tolist() == [3.5, 4.5, 2.5]


def test_sampling_is_uniform_over_filled_rows_only() -> None:
    rb = make_rb(100, 3)  # 34 rows
    for step in range(5):
        write(rb, step)
    row, env = rb.sample_index((20_000,))
    assert int(row.max()) == 4 and int(row.min()) == 0
    assert int(env.max()) == 2 and int(env.min()) == 0
    counts = torch.bincount(row * 3 + env, minlength=15).double()
    assert counts.min() > 0.85 * 20_000 / 15 and counts.max() < 1.15 * 20_000 / 15
    batch = rb.sample(7, num_batches=3)
    assert batch.obs.shape == (3, 7, 2) and batch.action.shape == (3, 7) and batch.reward.shape == (3, 7)
    assert batch[1].obs.shape == (7, 2)
    # one-step batches are the stored rows
    assert torch.equal(batch.obs[..., 0].long(), batch.action)
    assert torch.allclose(batch.next_obs[..., 0], batch.obs[..., 0] + 0.5)
    assert torch.allclose(batch.discount, torch.full((3, 7), 0.99))


def test_sampling_is_deterministic_given_the_generator() -> None:
    a, b = make_rb(50, 2, seed=3), make_rb(50, 2, seed=3)
    for step in range(9):
        write(a, step)
        write(b, step)
    assert all(torch.equal(x, y) for x, y in zip(a.sample_index((64,)), b.sample_index((64,)), strict=True))


def test_one_step_flags_terminated_vs_truncated() -> None:
    rb = make_rb(8, 2)
    write(rb, 0, done=torch.tensor([True, True]), term=torch.tensor([True, False]))
    b = rb.gather(torch.tensor([0, 0]), torch.tensor([0, 1]), n_step=1, gamma=0.9)
    # env 0 terminated: no bootstrap; env 1 truncated: bootstraps from its final obs
    assert b.terminated.tolist() == [1.0, 0.0]
    assert b.next_obs[:, 0].tolist() == [0.5, 0.5]
    assert torch.allclose(b.discount, torch.tensor([0.9, 0.9]))


def reference_nstep(log: list[dict], t: int, e: int, n: int, gamma: float, rows: int) -> tuple[float, float, float, float]:
    """Python n-step target for the transition written at global step t (env e): returns
    (return, discount, terminated, next_obs[0]) — stops at an episode end or the newest step;
    only steps still in the ring (the last `rows` written) are used."""
    ret, m = 0.0, 0
    for k in range(n):
        s = t + k
        if s >= len(log):
            break
        ret += gamma**k * log[s]["reward"][e]
        m = k + 1
        if log[s]["done"][e]:
            break
    last = log[t + m - 1]
    return ret, gamma**m, float(last["term"][e]), last["next_obs0"][e]


@pytest.mark.parametrize("n_step", [1, 2, 3, 5])
def test_nstep_targets_match_a_python_reference(n_step: int) -> None:
    random.seed(n_step)
    num_envs, capacity, gamma = 3, 15, 0.9  # 5 rows: the ring wraps several times
    rb = make_rb(capacity, num_envs)
    log: list[dict] = []
    for step in range(23):
        done = [random.random() < 0.3 for _ in range(num_envs)]
        term = [d and random.random() < 0.5 for d in done]
        reward = [random.uniform(-1, 1) for _ in range(num_envs)]
        obs = torch.stack([torch.full((num_envs,), float(step)), torch.arange(num_envs, dtype=torch.float32)], -1)
        next_obs = obs + torch.tensor([0.5, 0.0])
        rb.add_obs_action(obs, torch.full((num_envs,), step))
        rb.add_result(torch.tensor(reward), torch.tensor(term), torch.tensor(done) & ~torch.tensor(term), next_obs)
        log.append({"reward": reward, "done": done, "term": term, "next_obs0": next_obs[:, 0].tolist()})
        rows = int(rb.size)
        row = torch.arange(rows).repeat_interleave(num_envs)
        env = torch.arange(num_envs).repeat(rows)
        b = rb.gather(row, env, n_step=n_step, gamma=gamma)
        for i in range(rows * num_envs):
            t = int(b.obs[i, 0])  # the global step this row holds
            want = reference_nstep(log, t, int(env[i]), n_step, gamma, rb.rows)
            got = (float(b.reward[i]), float(b.discount[i]), float(b.terminated[i]), float(b.next_obs[i, 0]))
            assert got == pytest.approx(want, abs=1e-5), f"step {step}, transition t={t} env={int(env[i])}"


def test_nstep_never_reads_past_the_write_head() -> None:
    rb = make_rb(4, 1)  # 4 rows
    for step in range(6):  # rows hold steps 4, 5, 2, 3
        write(rb, step)
    b = rb.gather(torch.tensor([2, 3, 1]), torch.tensor([0, 0, 0]), n_step=3, gamma=0.5)
    # step 2: 2,3,4; step 3: 3,4,5; step 5 is the newest: only itself
    assert b.obs[:, 0].tolist() == [2.0, 3.0, 5.0]
    assert b.reward.tolist() == pytest.approx([2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4 + 0.25 * 5, 5.0])
    assert b.discount.tolist() == pytest.approx([0.125, 0.125, 0.5])
    assert b.next_obs[:, 0].tolist() == [4.5, 5.5, 5.5]


def test_a_buffer_that_cannot_fit_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"agent.buffer_size: .* needs .* only .* free"):
        make_rb(10**13, 1, obs_dim=64)


def test_state_dict_round_trips_and_refuses_another_layout() -> None:
    a = make_rb(6, 2)
    for step in range(4):
        write(a, step)
    b = make_rb(6, 2, seed=9)
    assert b.load_state_dict(a.state_dict())
    assert torch.equal(b.obs, a.obs) and int(b.pos) == int(a.pos) and int(b.size) == int(a.size)
    c = make_rb(6, 3)
    assert not c.load_state_dict(a.state_dict())
    assert int(c.size) == 0
