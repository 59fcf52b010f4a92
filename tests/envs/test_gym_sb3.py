"""noeira envs handed to Stable-Baselines3 through ``noeira.envs.to_sb3``."""

from __future__ import annotations

import numpy as np
import pytest

from noeira.core import make_env
from noeira.envs import to_sb3

sb3 = pytest.importorskip("stable_baselines3")


def test_sb3_terminal_observation_and_time_limit() -> None:
    env = make_env("pendulum", num_envs=3, backend="cpu", seed=0, max_episode_steps=5)
    vec = to_sb3(env)
    obs = vec.reset()
    assert obs.shape == (3, 3) and obs.dtype == np.float32
    assert vec.observation_space.contains(obs[0]) and vec.action_space.shape == (1,)
    for _ in range(5):
        obs, rewards, dones, infos = vec.step(np.zeros((3, 1), dtype=np.float32))
        assert rewards.shape == (3,) and dones.dtype == bool
    assert dones.all()
    for i in range(3):
        assert infos[i]["TimeLimit.truncated"] is True
        np.testing.assert_array_equal(infos[i]["terminal_observation"], env._result.final_obs[i].numpy())
        assert not np.array_equal(obs[i], infos[i]["terminal_observation"])


def test_sb3_termination_is_not_truncation() -> None:
    env = make_env("cartpole", num_envs=2, backend="cpu", seed=0)
    vec = to_sb3(env)
    vec.seed(3)
    vec.reset()
    for _ in range(100):  # always pushing right topples the pole within a few dozen steps
        _, _, dones, infos = vec.step(np.ones(2, dtype=np.int64))
        if dones.any():
            break
    i = int(np.flatnonzero(dones)[0])
    assert infos[i]["TimeLimit.truncated"] is False
    final = infos[i]["terminal_observation"]
    assert abs(final[0]) > 2.4 or abs(final[2]) > 12 * 2 * np.pi / 360


def test_sb3_ppo_runs_on_a_noeira_env() -> None:
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    vec = VecMonitor(to_sb3(make_env("cartpole", num_envs=4, backend="cpu", seed=0)))
    model = PPO("MlpPolicy", vec, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(4 * 32 * 2)
    assert len(model.ep_info_buffer) > 0  # VecMonitor saw episodes end
    action, _ = model.predict(vec.reset(), deterministic=True)
    assert action.shape == (4,)


@pytest.mark.parametrize("name", ["cartpole", "pendulum"])
def test_sb3_vec_env_through_sb3_checks_and_ppo(name: str) -> None:
    """SB3's check_env takes a single gymnasium env, which noeira does not have; its vector
    path instead: VecMonitor and VecCheckNan (raising) around ours, random actions through them
    as check_env steps, then PPO trains and evaluate_policy reads the episodes."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecCheckNan, VecMonitor

    n = 4
    vec = VecCheckNan(VecMonitor(to_sb3(make_env(name, num_envs=n, backend="cpu", seed=0, max_episode_steps=32))),
                      raise_exception=True)
    vec.seed(0)
    obs = vec.reset()
    space = vec.observation_space
    assert obs.shape == (n, *space.shape) and obs.dtype == space.dtype
    vec.action_space.seed(0)
    ended = 0
    for _ in range(40):
        obs, rewards, dones, infos = vec.step(np.stack([vec.action_space.sample() for _ in range(n)]))
        assert all(space.contains(o) for o in obs) and rewards.dtype == np.float32 and len(infos) == n
        for i in np.flatnonzero(dones):
            assert space.contains(infos[i]["terminal_observation"]) and "episode" in infos[i]  # VecMonitor's
            ended += 1
    assert ended >= n
    model = PPO("MlpPolicy", vec, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    mean, _ = evaluate_policy(model, vec, n_eval_episodes=n)
    assert np.isfinite(mean) and (mean > 0 if name == "cartpole" else mean < 0)
    if name == "pendulum":
        with pytest.raises(ValueError, match="nan"):
            vec.step(np.full((n, 1), np.nan, dtype=np.float32))
