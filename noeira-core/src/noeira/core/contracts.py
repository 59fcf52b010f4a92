"""The contracts every plugin implements, as typed protocols.

Shapes: ``N = num_envs``. Observations are ``[N, *observation_space.shape]``, actions
``[N, *action_space.shape]``, rewards / flags ``[N]``. Every tensor lives on the env's
``device``. Conformance checks for each protocol are in :mod:`noeira.core.testing`.

**Optional members.** Each protocol lists what every plugin of its kind has (required) and, in
its docstring, what a plugin may leave out (optional), with what leaving it out means. Code
that holds any plugin of a kind reads an optional member through this module's function
named after it (:func:`render_fps`, :func:`episode_stat_keys`, :func:`graph_warmup`...), the one
place that holds its default, so a plugin written with the required members alone works.
Code that holds a class which declares the member (a :class:`noeira.core.TensorEnv`) reads it
as a plain attribute. The conformance kit checks an optional member's type where it is present.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs
import torch
from torch import Tensor

from noeira.core.spaces import Space

__all__ = [
    "Agent",
    "Backend",
    "BatchedEnv",
    "EnvSpec",
    "EnvState",
    "GraphBackend",
    "Network",
    "NetworkSpec",
    "PhysicsEngine",
    "PolicyState",
    "RobotDriver",
    "StepResult",
    "close_physics",
    "episode_metrics",
    "episode_stat_keys",
    "evaluation_config",
    "graph_reference",
    "graph_warmup",
    "is_torso",
    "learns_from_dataset",
    "physics_capture_safe",
    "policy_module",
    "reads_code",
    "reads_raw",
    "render",
    "render_fps",
    "takes_heads",
]

EnvState = Tensor | dict[str, Tensor]
"""An env's state: one ``[N, state_dim]`` tensor, or a dict of tensors each with a leading ``[N]``
(nested names joined with a dot, e.g. ``inventory.wood``)."""

PolicyState = Tensor | None
"""A policy's recurrent state: one tensor whose dimension 1 is the batch (``[layers, B, hidden]``),
or ``None`` for a feed-forward policy."""


@runtime_checkable
class Backend(Protocol):
    """Where tensors live and how work is launched (``cpu``, ``cuda``, plugins: mps, xpu...)."""

    name: str
    device: torch.device
    """The device this process computes on (``cuda:1`` for a backend built with index 1)."""
    supports_graphs: bool
    generators: list[torch.Generator]
    """Every generator made by :meth:`generator`, so a graph backend can register them."""
    rank: int
    """This process's rank among ``world_size`` training processes (0 alone)."""
    world_size: int
    """How many processes train together (1 alone)."""

    def is_available(self) -> bool: ...
    def synchronize(self) -> None: ...
    def seed(self, seed: int) -> None:
        """Seed torch's global generators for this device (and the CPU)."""
    def generator(self, seed: int | None) -> torch.Generator:
        """A new generator on the device, seeded (or from entropy when ``seed`` is None)."""
    def to_device(self, x: Any) -> Any:
        """Stage a tensor / array / nested mapping onto the device."""
    def to_host(self, x: Any) -> Any:
        """Bring a tensor / nested mapping back to the host (one sync)."""
    def device_name(self) -> str: ...


@attrs.define(slots=True)
class StepResult:
    """What ``BatchedEnv.step`` returns. The tensors are the env's own buffers, overwritten
    by the next step: clone what you keep.

    ``obs``: ``[N, *obs_shape]`` the observation to act on next (already reset where done).
    ``reward``: ``[N]`` float. ``terminated`` / ``truncated``: ``[N]`` bool, as gymnasium
    (both can be true at the step limit). ``final_obs``: ``[N, *obs_shape]`` the observation
    the step reached before any autoreset (equal to ``obs`` where not done).
    """

    obs: Tensor
    reward: Tensor
    terminated: Tensor
    truncated: Tensor
    final_obs: Tensor


@attrs.frozen
class EnvSpec:
    """What an agent needs to know about an env to build itself."""

    name: str
    num_envs: int
    observation_space: Space
    action_space: Space
    device: torch.device
    max_episode_steps: int | None = None
    capture_safe: bool = False
    truncates_at_limit_only: bool = False
    """``truncated`` is set only by the time limit: where an episode reaches ``max_episode_steps``
    steps (TensorEnv's rule), so an env truncates at most once in any ``max_episode_steps``
    consecutive steps. An on-policy agent may then value truncated episodes once per rollout."""

    @classmethod
    def of(cls, env: Any) -> EnvSpec:
        """The spec an env's members declare (``name``, ``num_envs``, the spaces, ``device``,
        ``max_episode_steps``, ``capture_safe``, and ``truncates_at_limit_only``, False where the
        env has none)."""
        return cls(name=env.name, num_envs=env.num_envs, observation_space=env.observation_space,
                   action_space=env.action_space, device=env.device, max_episode_steps=env.max_episode_steps,
                   capture_safe=env.capture_safe,
                   truncates_at_limit_only=getattr(env, "truncates_at_limit_only", False))


@runtime_checkable
class BatchedEnv(Protocol):
    """``num_envs`` environments stepped together, state as ``[N, ...]`` tensors.

    ``step`` autoresets envs that end (same step) and keeps per-env episode return/length
    on the device; completed-episode sums are read with :meth:`pop_episode_stats`.
    ``capture_safe`` declares that ``step`` does no host sync and no allocation whose shape
    changes, so it can be recorded in a CUDA graph.

    Optional members (read them through the functions of the same name below, which hold the
    defaults; :class:`noeira.core.TensorEnv` declares them all, with those defaults):

    - ``episode_stat_keys: tuple[str, ...]`` — the extra per-episode statistics whose
      ``<key>_sum`` :meth:`pop_episode_stats` returns. Default ``()``.
    - ``episode_metrics(means) -> dict[str, float]`` — metrics derived on the host from the
      episode means (``episode_<key>``), such as the Craftax score. Default: none.
    - ``render() -> Tensor`` — RGB frames ``[N, H, W, 3]`` uint8 of every env (off the hot path,
      may sync). Absent, or raising ``NotImplementedError``: the env cannot render.
    - ``render_fps: float`` — a video's frame rate. Default ``None`` (the caller picks one).
    - classmethod ``evaluation_config(config) -> config`` — the config of the env the driver
      scores a policy on. Default: the training config.
    """

    num_envs: int
    device: torch.device
    observation_space: Space
    action_space: Space
    max_episode_steps: int | None
    capture_safe: bool
    spec: EnvSpec
    resume_caveat: str | None
    """Why a run resumed from :meth:`state_dict` does not continue bit-identically with the run
    left alone (one line, logged when a run resumes); None when it does."""

    @property
    def obs(self) -> Tensor:
        """The current observation ``[N, *obs_shape]``: one buffer for the env's life, which
        ``reset`` returns and ``step`` rewrites in place (agents read it at collect start)."""
    def reset(self, seed: int | None = None) -> Tensor:
        """Reset every env; returns ``obs`` ``[N, *obs_shape]``."""
    def step(self, action: Tensor) -> StepResult:
        """Step every env with ``action`` ``[N, *act_shape]``."""
    def get_state(self) -> EnvState:
        """The state: one tensor ``[N, state_dim]`` (the reference's layout) or a dict of
        ``[N, ...]`` tensors (:data:`EnvState`)."""
    def set_state(self, state: EnvState) -> None:
        """Set the state (same structure, keys and shapes as :meth:`get_state`); the observation follows."""
    def pop_episode_stats(self) -> dict[str, Tensor]:
        """Device scalars ``return_sum``, ``length_sum``, ``count`` of episodes completed
        since the last call, and ``<key>_sum`` for each extra per-episode statistic the env
        keeps (the driver reports ``episode_<key>`` = sum / count); then zero them. No host sync."""
    def state_dict(self) -> dict[str, Any]:
        """Copies of everything that decides the env's next steps, for a checkpoint: its state,
        time-limit counters, running and completed-episode sums not yet popped, the observation
        buffer and its random state (generators, kernel keys). A run that resumes from it
        continues bit-identically unless ``resume_caveat`` says otherwise."""
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s result in place (buffers keep their storage), saved on
        any device: tensors move; a generator state that cannot move (CUDA's to a CPU) re-seeds
        the generator deterministically from it, saying so in one log line
        (:func:`noeira.core.rng.restore_generator`). Another env's state: a one-line ``ValueError``."""
    def close(self) -> None: ...


@runtime_checkable
class Agent(Protocol):
    """A learner built as ``cls(spec: EnvSpec, backend, config, *, training=True)``.

    ``training=False`` builds it to act only (evaluation, ``noeira eval``, deployment): it then
    checks only the keys acting reads (not, say, that ``spec.num_envs`` fills its minibatches),
    may skip its storage (replay buffers), and ``load_state_dict`` takes what acting needs from
    a training checkpoint (per-env state of another ``num_envs`` is left out).

    ``collect(env)`` steps the env and stores experience on the device; ``learn()`` runs
    the gradient updates and returns metrics as device tensors (0-d). Both are capture-safe
    for agents meant to run under a graph backend. ``steps_per_collect`` is how many env
    steps one ``collect`` makes (known on the host, so the driver never syncs to count).

    Acting outside ``collect`` (evaluation, ``noeira eval``, deployment) carries the policy
    state::

        state = agent.initial_state(num_envs)            # None for a feed-forward policy
        done = torch.ones(num_envs, dtype=torch.bool)     # every env starts an episode
        action, state = agent.act(obs, state, done, deterministic=True)
        result = env.step(action); done = result.terminated | result.truncated

    Optional members (read through :func:`policy_module` and :func:`learns_from_dataset`):

    - ``policy_module() -> nn.Module`` — the deterministic policy as one module, which
      ``noeira export`` traces and ``noeira deploy`` runs (see ``noeira.agents.exportable``).
      Absent: the agent cannot be exported.
    - ``learns_from_dataset: bool`` with ``load_dataset(path)`` — an agent that learns offline
      from a LeRobot dataset (``run.dataset``). Default ``False``.
    """

    config: Any
    steps_per_collect: int

    def initial_state(self, batch: int) -> PolicyState:
        """The policy state for ``batch`` envs at an episode start (``None``: feed-forward)."""
    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, PolicyState]:
        """``obs [B, *obs_shape]`` -> ``(action [B, *act_shape], next state)``. Where ``done [B]``
        is True the env has just started an episode, so the state is reset first (no host sync)."""
    def set_total_steps(self, total_steps: int) -> None:
        """Told once by the driver before training: the run's length in this process's env
        steps (``run.total_steps / world_size``: each rank of a data-parallel run trains as one
        process with its ``num_envs`` would), which schedules span unless the config fixes them."""
    def collect(self, env: BatchedEnv) -> None: ...
    def learn(self) -> Mapping[str, Tensor]: ...
    def state_dict(self) -> dict[str, Any]:
        """Everything training continues from, bit for bit: weights, optimizer state,
        normalisers, counters, random generators, and the per-env state ``collect`` carries
        across calls (a recurrent state, episode-start flags, replay buffers)."""
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load in place (recorded graphs keep their tensors), from a checkpoint made on any
        device (generator states that cannot move: :func:`noeira.core.rng.restore_generator`)."""


@attrs.frozen
class NetworkSpec:
    """What a policy network (registry kind ``networks``) is built for.

    ``outputs`` names each head and its width, e.g. ``{"actor": 2, "critic": 1}`` for an
    actor-critic on ``Discrete(2)`` or ``{"q": 6}`` for a Q-network; ``output_gains`` the
    initial scale of each head's last layer (1.0 when absent). ``hidden_sizes`` and
    ``activation`` are the agent's keys of the same name: the layer widths (and so the layer
    count) and the nonlinearity, which every network interprets for its kind; ``options``
    are the network's own keys (``agent.network_options``). ``decode_into`` is set when the
    agent hands a network that declares ``reads_code`` an ``Encoded`` observation's codes: the
    network decodes them itself (``Encoded.decode_into``) into its first layer's input."""

    observation_shape: tuple[int, ...]
    outputs: Mapping[str, int]
    device: torch.device
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    output_gains: Mapping[str, float] = attrs.field(factory=dict)
    options: Mapping[str, Any] = attrs.field(factory=dict)
    decode_into: Callable[[Tensor, Tensor], None] | None = None


@runtime_checkable
class Network(Protocol):
    """A policy network: an ``nn.Module`` built as ``cls(spec: NetworkSpec)``, found by name in
    the ``noeira.networks`` group (``agent.network=NAME``).

    Inputs are float observations ``[B, *observation_shape]`` (already normalised by the agent).
    A feed-forward network has ``recurrent = False`` and ignores ``state``/``done``. A recurrent one
    keeps its state in one tensor whose dimension 1 is the batch (``[layers, B, hidden]``);
    ``done [B]`` marks envs whose episode starts at this input: their state is reset to
    :meth:`initial_state`'s before the input is read, by arithmetic (``state * ~done``), not by a
    host-side branch, so the forward pass can be recorded in a CUDA graph.

    Optional members (read through the functions of the same name below; all on the class):

    - ``reads_code: bool`` — given ``spec.decode_into``, the network also takes an ``Encoded``
      observation's integer codes ``[B, *code_shape]`` in place of the floats, with the same
      outputs (the agent then stores and passes codes). Default ``False``.
    - ``reads_raw: bool`` — the network takes the observation as the env gives it (uint8
      frames, scaled inside), not flattened floats. Default ``False``.
    - ``features(obs) -> [B, feature_dim]`` — the network is a torso whose features another
      network can take as its observation (``agent.network=torso+top``). Default: not a torso.
    - ``forward(..., heads=None)`` and ``forward_sequence(..., heads=None)`` — a keyword naming
      the heads the caller reads (a critic's value alone), so the network may skip the others;
      it returns at least those. Default: a network whose method lacks the keyword is called
      without it and computes every head (:func:`takes_heads`).
    """

    recurrent: bool

    def initial_state(self, batch: int) -> PolicyState:
        """The state at an episode start for ``batch`` envs (``None`` when not recurrent)."""
    def forward(self, obs: Tensor, state: PolicyState, done: Tensor) -> tuple[dict[str, Tensor], PolicyState]:
        """One step: ``obs [B, ...]`` -> ``({head: [B, width]}, next state)`` (optionally
        ``heads=`` too: see the class docstring)."""
    def forward_sequence(self, obs: Tensor, state: PolicyState, done: Tensor) -> dict[str, Tensor]:
        """A segment: ``obs [T, B, ...]``, the state before its first step, ``done [T, B]`` ->
        ``{head: [T, B, width]}``, equal to ``T`` calls of :meth:`forward` (truncated BPTT:
        gradients flow through the state within the segment, and stop where ``done`` resets it)."""


@runtime_checkable
class GraphBackend(Protocol):
    """Records a step function once and replays it (``eager`` just calls it).

    Optional members (read through :func:`graph_warmup` and :func:`graph_reference`):

    - ``warmup: int`` — how many calls of a wrapped step run eagerly before it is recorded
      (``noeira verify-graph`` labels the calls by it). Default ``0``.
    - ``reference(fn, backend) -> Callable`` — ``fn`` as the backend runs it but unrecorded
      (``device``: compiled, not recorded), the bit-exact reference ``verify-graph`` compares
      replays with. Default ``None``: plain eager calls are the reference.
    """

    name: str

    def available(self, backend: Backend) -> bool: ...
    def wrap(self, fn: Callable[..., Any], backend: Backend | None = None) -> Callable[..., Any]:
        """A callable with ``fn``'s signature; the first calls may warm up and record."""


@runtime_checkable
class PhysicsEngine(Protocol):
    """An MJCF model stepped for ``num_worlds`` worlds; state as torch tensors
    (``[num_worlds, nq]`` etc.), views without copies where the engine allows.

    ``forward(mask)`` and ``reset(mask)`` act on the worlds where ``mask [num_worlds]`` (bool) is
    True, on every world without one.

    Optional members (read through :func:`physics_capture_safe` and :func:`close_physics`):

    - ``capture_safe: bool`` — ``step``/``forward``/``reset`` do no host sync, so an env built on
      the engine can be recorded as a CUDA graph. Default ``False``.
    - ``close()`` — release threads, processes or device memory. Default: nothing to release.
    """

    num_worlds: int
    device: torch.device
    dtype: torch.dtype
    """The state tensors' dtype (float64 for MuJoCo's own precision)."""
    qpos: Tensor
    qvel: Tensor
    ctrl: Tensor
    time: Tensor
    sensordata: Tensor

    def step(self, nstep: int = 1) -> None: ...
    def forward(self, mask: Tensor | None = None) -> None: ...
    def reset(self, mask: Tensor | None = None) -> None: ...


@runtime_checkable
class RobotDriver(Protocol):
    """A real robot. Nothing moves unless armed; torque is released on every exit path."""

    connected: bool
    armed: bool

    def connect(self) -> None: ...
    def disconnect(self) -> None: ...
    def arm(self) -> None: ...
    def disarm(self) -> None: ...
    def read(self, raw: bool = False) -> dict[str, float]: ...
    def send_action(self, action: Mapping[str, float]) -> dict[str, float]: ...


# -- optional members: the one place that reads them and holds their defaults ---------------
# (see the module docstring; each protocol's docstring says what the member means)


def episode_stat_keys(env: BatchedEnv) -> tuple[str, ...]:
    """``env.episode_stat_keys``: the extra per-episode statistics it reports; ``()`` without."""
    return tuple(getattr(env, "episode_stat_keys", ()))


def episode_metrics(env: BatchedEnv, means: Mapping[str, float]) -> dict[str, float]:
    """``env.episode_metrics(means)``: metrics derived from the episode means; ``{}`` without."""
    derive = getattr(env, "episode_metrics", None)
    return dict(derive(means)) if derive is not None else {}


def render(env: BatchedEnv) -> Tensor:
    """``env.render()``: frames ``[N, H, W, 3]`` uint8. ``NotImplementedError`` when the env
    cannot render (it has no ``render``, or its ``render`` says so)."""
    draw = getattr(env, "render", None)
    if draw is None:
        raise NotImplementedError(f"env {getattr(env, 'name', type(env).__name__)!r} cannot render frames "
                                  "(it has no render())")
    return draw()


def render_fps(env: BatchedEnv) -> float | None:
    """``env.render_fps``: a video's frame rate; ``None`` without (the caller picks one)."""
    fps = getattr(env, "render_fps", None)
    return float(fps) if fps is not None else None


def evaluation_config(env_cls: type, config: Any) -> Any:
    """``env_cls.evaluation_config(config)``: the config of the env that scores a policy;
    ``config`` itself without."""
    adjust = getattr(env_cls, "evaluation_config", None)
    return adjust(config) if adjust is not None else config


def policy_module(agent: Agent) -> Any:
    """``agent.policy_module()``: the deterministic policy as one ``nn.Module``.
    ``NotImplementedError`` when the agent offers none."""
    make = getattr(agent, "policy_module", None)
    if make is None:
        raise NotImplementedError(f"{type(agent).__name__} has no policy_module()")
    return make()


def learns_from_dataset(agent: Agent) -> bool:
    """``agent.learns_from_dataset``: it learns offline, from ``load_dataset(path)``; ``False`` without."""
    return bool(getattr(agent, "learns_from_dataset", False))


def reads_code(network_cls: type) -> bool:
    """``network_cls.reads_code``: it takes an ``Encoded`` observation's codes; ``False`` without."""
    return bool(getattr(network_cls, "reads_code", False))


def reads_raw(network_cls: type) -> bool:
    """``network_cls.reads_raw``: it takes the observation as the env gives it; ``False`` without."""
    return bool(getattr(network_cls, "reads_raw", False))


def is_torso(network_cls: type) -> bool:
    """Whether ``network_cls`` has ``features(obs)``: a torso another network can sit on."""
    return callable(getattr(network_cls, "features", None))


def takes_heads(method: Callable[..., Any]) -> bool:
    """Whether a network's ``forward`` or ``forward_sequence`` takes the ``heads`` keyword; asked
    once when an agent builds, not per call (a network without it computes every head)."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "heads" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def graph_warmup(graph: GraphBackend) -> int:
    """``graph.warmup``: eager calls of a wrapped step before it is recorded; ``0`` without."""
    return int(getattr(graph, "warmup", 0))


def graph_reference(graph: GraphBackend) -> Callable[..., Any] | None:
    """``graph.reference``: ``wrap``'s signature, the step as the backend runs it unrecorded;
    ``None`` without (eager calls are the reference)."""
    return getattr(graph, "reference", None)


def physics_capture_safe(engine: PhysicsEngine) -> bool:
    """``engine.capture_safe``: it steps without host syncs; ``False`` without."""
    return bool(getattr(engine, "capture_safe", False))


def close_physics(engine: PhysicsEngine) -> None:
    """``engine.close()`` where the engine has one (threads, processes, device memory)."""
    close = getattr(engine, "close", None)
    if close is not None:
        close()

