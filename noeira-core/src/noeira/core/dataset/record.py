"""Record episodes into a LeRobot v3 dataset: from a simulator driven by a policy, or from a
robot teleoperated by a leader arm.

**A simulator** (:func:`record_env`): a batched env of any registered name steps with a
policy's actions (a trained run's checkpoint, acting deterministically unless told otherwise,
or a scripted policy: ``random``, ``zero``); each env's episode is written when it ends, so
``N`` envs record ``N`` episodes at once. Frame ``t`` holds the observation the action was
chosen in (``observation.state``), that action (``action``, as the env took it: clipped to a
``Box``), the reward it earned (``next.reward``), whether the episode terminated there
(``next.done``) and, with ``camera``, the env's rendered frame (``observation.images.render``).
The dataset's ``robot_type`` is ``noeira:<env>``, which ``noeira train dataset=PATH`` reads
to pick the env to evaluate in.

**A robot** (:func:`record_teleop`): through the RobotDriver contract (any registered robot,
e.g. ``so101`` followed by ``so101-leader``): each step reads the leader (the action) and the
follower (the observation, ``<joint>.pos``), sends the action to the follower and records both,
at a fixed rate. Nothing moves unless the follower was armed, which the caller does after
asking; the leader is only read. Robots without cameras record no images.

A recorder that is killed keeps every episode it finished (see :mod:`~noeira.core.dataset.writer`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from noeira.core.dataset.format import DatasetError

__all__ = ["SIM_PREFIX", "env_features", "record_env", "record_teleop", "robot_features", "scripted_policy"]

SIM_PREFIX = "noeira:"
"""``robot_type`` of a simulator's dataset: ``noeira:<env name>``."""
CAMERA = "observation.images.render"

Act = Callable[[Any, Any, Any], tuple[Any, Any]]
"""``(obs [N, ...], state, done [N]) -> (env action [N, ...], state)``, on the env's device."""


def env_features(spec: Any, frame_hw: tuple[int, int] | None = None) -> dict[str, dict[str, Any]]:
    """The features of a simulator's dataset, from its spaces (a vector observation and a
    ``Box``, ``Discrete`` or ``MultiDiscrete`` action), with the rendered camera if ``frame_hw``."""
    from noeira.core.spaces import Box, Discrete, Encoded, MultiDiscrete

    obs, act = spec.observation_space, spec.action_space
    if isinstance(obs, Encoded) or len(obs.shape) != 1:
        raise DatasetError(f"env {spec.name!r}: its observation {obs!r} is not a vector; only vector observations "
                           "are recorded (observation.state)")
    dtype = str(obs.dtype).removeprefix("torch.")
    features: dict[str, dict[str, Any]] = {
        "observation.state": {"dtype": "float32" if "float" in dtype else dtype, "shape": [int(obs.shape[0])], "names": None},
    }
    if isinstance(act, Box) and len(act.shape) == 1:
        features["action"] = {"dtype": "float32", "shape": [int(act.shape[0])], "names": None}
    elif isinstance(act, Discrete):
        features["action"] = {"dtype": "int64", "shape": [1], "names": None}
    elif isinstance(act, MultiDiscrete):
        features["action"] = {"dtype": "int64", "shape": [int(act.shape[0])], "names": None}
    else:
        raise DatasetError(f"env {spec.name!r}: action space {act!r} cannot be recorded (a vector Box, Discrete or "
                           "MultiDiscrete)")
    features["next.reward"] = {"dtype": "float32", "shape": [1], "names": None}
    features["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
    if frame_hw is not None:
        features[CAMERA] = {"dtype": "video", "shape": [frame_hw[0], frame_hw[1], 3],
                            "names": ["height", "width", "channels"]}
    return features


def scripted_policy(name: str, spec: Any, seed: int) -> Act:
    """``random`` (uniform over the action space; a Box without finite bounds draws from
    N(0, 1)) or ``zero`` (the zero action, or action 0 / the space's start)."""
    import torch

    from noeira.core.spaces import Box, Discrete, MultiDiscrete

    space = spec.action_space
    gen = torch.Generator(device=spec.device)
    gen.manual_seed(seed)
    if name not in ("random", "zero"):
        raise DatasetError(f"--scripted: expected random or zero, got {name!r}")

    def act(obs: Any, state: Any, done: Any) -> tuple[Any, Any]:
        n = obs.shape[0]
        if isinstance(space, Discrete):
            if name == "zero":
                return torch.full((n,), space.start, dtype=torch.int64, device=obs.device), None
            return torch.randint(0, space.n, (n,), generator=gen, device=obs.device) + space.start, None
        if isinstance(space, MultiDiscrete):
            nvec = space.nvec.to(obs.device)
            if name == "zero":
                return torch.zeros((n, nvec.shape[0]), dtype=torch.int64, device=obs.device), None
            u = torch.rand((n, nvec.shape[0]), generator=gen, device=obs.device)
            return (u * nvec).long(), None
        if isinstance(space, Box):
            lo, hi = space.low.to(obs.device), space.high.to(obs.device)
            if name == "zero":
                return torch.zeros((n, *space.shape), device=obs.device).clamp(lo, hi), None
            u = torch.rand((n, *space.shape), generator=gen, device=obs.device)
            finite = torch.isfinite(lo) & torch.isfinite(hi)
            normal = torch.randn((n, *space.shape), generator=gen, device=obs.device)
            return torch.where(finite, lo + u * (hi - lo), normal), None
        raise DatasetError(f"--scripted: action space {space!r} is not supported")

    return act


def record_env(env: Any, act: Act, writer: Any, episodes: int, *, initial_state: Any = None, task: str = "",
               camera: bool = False, seed: int = 0, on_episode: Callable[[int, int, float], None] | None = None,
               stop: Callable[[], bool] = lambda: False) -> int:
    """Step ``env`` with ``act`` until ``episodes`` episodes are written to ``writer`` (or ``stop()``);
    returns how many were written. ``on_episode(index, frames, return)`` after each."""
    import torch

    n = env.num_envs
    obs = env.reset(seed=seed)
    state = initial_state
    done = torch.ones(n, dtype=torch.bool, device=obs.device)
    keys = ["observation.state", "action", "next.reward", "next.done"] + ([CAMERA] if camera else [])
    buffers: list[dict[str, list[np.ndarray]]] = [{k: [] for k in keys} for _ in range(n)]
    saved = 0
    limit = (env.max_episode_steps or 0)
    steps_without_end = 0
    while saved < episodes and not stop():
        frames = env.render().cpu().numpy() if camera else None
        action, state = act(obs, state, done)
        seen = obs.detach().cpu().numpy().copy()  # env.step writes the next observation into the same buffer
        result = env.step(action)
        host = {
            "observation.state": seen,
            "action": action.detach().cpu().numpy().reshape(n, -1),
            "next.reward": result.reward.detach().cpu().numpy().astype(np.float32).reshape(n, 1),
            "next.done": result.terminated.detach().cpu().numpy().reshape(n, 1),
        }
        ended = (result.terminated | result.truncated).cpu().numpy()
        for i in range(n):
            buf = buffers[i]
            for k, v in host.items():
                buf[k].append(v[i])
            if frames is not None:
                buf[CAMERA].append(frames[i])
            if ended[i] and saved < episodes:
                ret = float(np.sum(buf["next.reward"]))
                length = len(buf["action"])
                for t in range(length):
                    writer.add_frame({k: buf[k][t] for k in keys}, task=task)
                index = writer.save_episode()
                saved += 1
                if on_episode is not None:
                    on_episode(index, length, ret)
            if ended[i]:
                buffers[i] = {k: [] for k in keys}
        steps_without_end = 0 if ended.any() else steps_without_end + 1
        if not limit and steps_without_end > 1_000_000:
            raise DatasetError(f"env {env.spec.name!r}: no episode ended in a million steps (no time limit?)")
        obs = result.obs
        done = result.terminated | result.truncated
    return saved


# -- robots ------------------------------------------------------------------------------------

def robot_features(joints: list[str]) -> dict[str, dict[str, Any]]:
    """LeRobot's features for an arm: ``observation.state`` and ``action`` over ``<joint>.pos``."""
    names = [f"{j}.pos" for j in joints]
    return {"action": {"dtype": "float32", "shape": [len(joints)], "names": names},
            "observation.state": {"dtype": "float32", "shape": [len(joints)], "names": names}}


def record_teleop(follower: Any, leader: Any, writer: Any, episodes: int, *, episode_seconds: float, fps: int,
                  task: str = "", reset_seconds: float = 0.0,
                  on_episode: Callable[[int, int, float], None] | None = None,
                  stop: Callable[[], bool] = lambda: False, clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> int:
    """The armed ``follower`` follows ``leader`` at ``fps``; each of ``episodes`` episodes records
    ``episode_seconds`` of (follower joints, goals sent), then the arm keeps following unrecorded
    for ``reset_seconds``. Returns the episodes written (fewer if ``stop()``)."""
    if not getattr(follower, "armed", False):
        raise DatasetError("record: the follower is not armed; nothing moves unless armed")
    joints = [n.removesuffix(".pos") for n in writer.features["observation.state"]["names"]]
    period = 1.0 / fps
    steps = max(1, round(episode_seconds * fps))
    saved = 0

    def step(record: bool) -> None:
        t0 = clock()
        goal = leader.read()
        present = follower.read()
        sent = follower.send_action({j: goal[j] for j in joints})
        if record:
            writer.add_frame({"observation.state": [present[j] for j in joints],
                              "action": [sent.get(j, goal[j]) for j in joints]}, task=task)
        sleep(max(0.0, period - (clock() - t0)))

    while saved < episodes and not stop():
        for _ in range(steps):
            if stop():
                break
            step(True)
        if writer.episode_frames == steps:
            index = writer.save_episode()
            saved += 1
            if on_episode is not None:
                on_episode(index, steps, episode_seconds)
        else:
            writer.clear_episode()
        for _ in range(round(reset_seconds * fps) if saved < episodes else 0):
            if stop():
                break
            step(False)
    return saved

