"""``noeira record --robot`` and ``noeira deploy`` end to end on emulated SO-101 arms: record a
teleoperated follower, train a policy on it, export it, run it on the arm; armed-only safety, a
dry run that writes nothing, and the watchdog releasing torque when a step misses its deadline."""

from __future__ import annotations

import builtins
import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("av")

from noeira.core.cli import main  # noqa: E402
from noeira.core.dataset import DatasetWriter, LeRobotDataset  # noqa: E402
from noeira.core.dataset.record import robot_features  # noqa: E402
from noeira.robot.deploy import WatchdogTripped, deploy, joint_order  # noqa: E402
from noeira.robot.emulator import EmulatedBus, PtyEmulator  # noqa: E402
from noeira.robot.so101 import JOINTS, SO101Follower  # noqa: E402

IDS = list(JOINTS.values())
LEADER = [2300, 1800, 2200, 2000, 2048, 2900]
HOME = [2000, 2000, 2000, 2000, 2048, 2500]


@pytest.fixture
def leader_pty() -> Any:
    with PtyEmulator(EmulatedBus.so101(LEADER)) as p:
        yield p


def _deg(ticks: int) -> float:
    return (ticks - 2000) * 360 / 4096


def test_record_train_export_deploy(leader_pty: PtyEmulator, pty: PtyEmulator, emu: EmulatedBus, cal_path: Path,
                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = tmp_path / "ds"
    assert main(["record", "--robot", "so101", "--port", pty.port, "--calibration", str(cal_path),
                 "--teleop", "so101-leader", "--teleop-port", leader_pty.port, "--teleop-calibration", str(cal_path),
                 "--out", str(ds), "--episodes", "2", "--episode-seconds", "0.2", "--fps", "50", "--yes"]) == 0
    assert "2 episodes recorded" in capsys.readouterr().out
    data = LeRobotDataset(ds)
    assert (data.num_episodes, len(data), data.robot_type, data.fps) == (2, 20, "so101_follower", 50)
    assert data.features["observation.state"]["names"] == [f"{j}.pos" for j in JOINTS]
    actions, states = data.column("action"), data.column("observation.state")
    # the follower was teleoperated: it ends where the leader is, and every action is a goal it was sent
    assert abs(states[-1][0] - _deg(LEADER[0])) < 0.2 and abs(actions[-1][0] - _deg(LEADER[0])) < 0.2
    assert states[0][0] == pytest.approx(0.0, abs=0.1) and 0 < actions[0][0] < 10.1  # the first goal: one 10-degree step
    assert not any(emu[i].torque for i in IDS) and not any(s.torque for s in leader_pty.bus.servos.values())

    run = tmp_path / "run"
    assert main(["train", "agent=bc", f"dataset={ds}", "run.total_steps=200", "run.eval_episodes=1",
                 "agent.hidden_sizes=[32]", "run.progress=false", "--run-dir", str(run)]) == 0
    assert main(["export", str(run), "--format", "torchscript"]) == 0
    policy = run / "export" / "policy.pt"
    for i, p in zip(IDS, HOME, strict=True):
        emu[i].set_present(p)
    capsys.readouterr()
    assert main(["deploy", str(policy), "--port", pty.port, "--calibration", str(cal_path), "--yes", "--steps", "30",
                 "--hz", "100", "--deadline-ms", "1000"]) == 0
    out = capsys.readouterr().out
    assert "30 steps at 100 Hz (arm disarmed)" in out and "p99" in out
    # the imitation drove the arm from home to where the demonstrations went (the leader's pose)
    assert [abs(emu[i].present - t) <= 30 for i, t in zip(IDS, LEADER, strict=True)] == [True] * 6
    assert not any(emu[i].torque for i in IDS)


@pytest.fixture
def joint_policy(tmp_path: Path) -> Path:
    """A BC run whose demonstrations hold every joint at +5 degrees from where it is."""
    ds = tmp_path / "hold"
    names = list(JOINTS)
    with DatasetWriter(ds, fps=20, features=robot_features(names), robot_type="so101_follower") as w:
        for e in range(2):
            for t in range(10):
                state = [float(e * 3 + t)] * 6
                w.add_frame({"observation.state": state, "action": [s + 5.0 for s in state]})
            w.save_episode()
    run = tmp_path / "hold-run"
    assert main(["train", "agent=bc", f"dataset={ds}", "run.total_steps=20", "run.eval_episodes=0",
                 "agent.hidden_sizes=[8]", "run.progress=false", "--run-dir", str(run)]) == 0
    return run


def test_dry_run_reads_and_computes_and_writes_nothing(joint_policy: Path, pty: PtyEmulator, emu: EmulatedBus,
                                                       cal_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    emu.clear_log()
    assert main(["deploy", str(joint_policy), "--port", pty.port, "--calibration", str(cal_path), "--dry-run",
                 "--steps", "4", "--hz", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    steps = [json.loads(x) for x in lines if x.startswith("{")]
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and set(steps[0]["action"]) == set(JOINTS)
    assert "4 steps at 50 Hz (dry run, nothing sent)" in lines[-1]
    assert not emu.writes("Goal_Position")
    assert not [w for w in emu.writes() if w.addr == 40 and w.value("Torque_Enable")]  # torque never on


def test_deploy_asks_before_arming(joint_policy: Path, pty: PtyEmulator, emu: EmulatedBus, cal_path: Path,
                                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    prompts: list[str] = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "n")
    emu.clear_log()
    assert main(["deploy", str(joint_policy), "--port", pty.port, "--calibration", str(cal_path), "--steps", "3"]) == 1
    assert "Arm the arm" in prompts[0] and "not armed" in capsys.readouterr().out
    assert not emu.writes("Goal_Position") and not any(emu[i].torque for i in IDS)


def test_a_policy_that_does_not_fit_the_robot_is_refused(pty: PtyEmulator, emu: EmulatedBus, cal_path: Path,
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "pendulum"
    assert main(["train", "env=pendulum", "agent=ppo", "run.total_steps=64", "env.num_envs=2", "agent.horizon=32",
                 "agent.num_minibatches=1", "run.eval_episodes=0", "run.progress=false", "--run-dir", str(run)]) == 0
    capsys.readouterr()
    emu.clear_log()
    assert main(["deploy", str(run), "--port", pty.port, "--calibration", str(cal_path),
                 "--yes", "--steps", "3"]) == 2
    err = capsys.readouterr().err
    assert "the policy's observation has 3 values, the robot has 6 joints" in err and len(err.strip().splitlines()) == 1
    assert not emu.writes("Goal_Position") and not any(emu[i].torque for i in IDS)
    with pytest.raises(Exception, match="does not fit the robot's joints"):
        joint_order(["elbow.pos", "wrist.pos"], list(JOINTS), "action", 2)


class SlowPolicy:
    """Holds the present pose; step ``slow_at`` takes ``pause`` seconds (a stalled inference)."""

    metadata = {"observation": {"shape": [6], "names": [f"{j}.pos" for j in JOINTS]},
                "action": {"shape": [6], "names": [f"{j}.pos" for j in JOINTS]}}

    def __init__(self, emu: EmulatedBus, slow_at: int, pause: float) -> None:
        self.emu, self.slow_at, self.pause, self.calls = emu, slow_at, pause, 0
        self.torque_after_pause: list[bool] = []

    def reset(self) -> None:
        self.calls = 0

    def step(self, obs: list[float]) -> list[float]:
        self.calls += 1
        if self.calls == self.slow_at:
            time.sleep(self.pause)
            self.torque_after_pause = [self.emu[i].torque for i in IDS]
        return list(obs)


def test_the_watchdog_releases_torque_when_a_step_stalls(url: str, emu: EmulatedBus, cal_path: Path) -> None:
    policy = SlowPolicy(emu, slow_at=5, pause=0.5)
    with SO101Follower(port=url, calibration=str(cal_path), handle_signals=False) as arm:
        arm.arm()
        assert all(emu[i].torque for i in IDS)
        with pytest.raises(WatchdogTripped, match="stalled past the 100.0 ms deadline at step 5; torque released"):
            deploy(policy, arm, hz=50, steps=20, deadline=0.1)
        # the watchdog thread released torque while the step was still stuck, not after it returned
        assert policy.torque_after_pause == [False] * 6
        assert not arm.armed and not any(emu[i].torque for i in IDS)


def test_a_step_over_its_deadline_releases_torque(url: str, emu: EmulatedBus, cal_path: Path) -> None:
    """A step that overruns the deadline but less than the thread's poll: the loop's own check."""
    calls = {"n": 0}

    def slow_clock() -> float:  # the clock jumps a second within step 3 (read once before the loop, three times a step)
        calls["n"] += 1
        return time.monotonic() + (1.0 if calls["n"] >= 1 + 3 * 2 + 2 else 0.0)

    policy = SlowPolicy(emu, slow_at=-1, pause=0)
    with SO101Follower(port=url, calibration=str(cal_path), handle_signals=False) as arm:
        arm.arm()
        with pytest.raises(WatchdogTripped, match="step 3 took 10..\\.. ms, over the 500.0 ms deadline; torque released"):
            deploy(policy, arm, hz=50, steps=20, deadline=0.5, clock=slow_clock)
        assert not any(emu[i].torque for i in IDS)


def test_deploy_needs_an_armed_robot(url: str, emu: EmulatedBus, cal_path: Path) -> None:
    with (SO101Follower(port=url, calibration=str(cal_path), handle_signals=False) as arm,
          pytest.raises(Exception, match="not armed; nothing moves unless armed")):
        deploy(SlowPolicy(emu, -1, 0), arm, hz=50, steps=3)
    assert not emu.writes("Goal_Position")
