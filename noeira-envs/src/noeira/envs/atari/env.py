"""``atari:<game>``: Atari 2600 games through the Arcade Learning Environment, batched.

``make_env("atari:breakout", num_envs=8)`` (or ``noeira train env=atari:breakout``) runs
``num_envs`` ALE games, each in the settings of gymnasium's ``ALE/<Game>-v5`` (sticky actions
``repeat_action_probability`` = 0.25, the minimal action set, 108,000 frames at most) under the
standard preprocessing (Machado et al. 2018; gymnasium's ``AtariPreprocessing``): each agent
step repeats the action for ``frame_skip`` frames and observes the max of the last two,
grayscale, resized to ``screen_size`` squared with OpenCV's area interpolation; a reset takes
1..``noop_max`` no-op frames; the last ``frame_stack`` frames are stacked. Game names are
ale-py's ROM names (``breakout``, ``space_invaders``, ``ms_pacman``); ``Breakout``,
``SpaceInvaders`` or ``ALE/Breakout-v5`` name the same games.

Observations: ``uint8 [N, frame_stack, screen_size, screen_size]`` (``[N, frame_stack, 3, S, S]``
with ``grayscale = false``) on the backend's device; actions ``int64 [N]`` (``Discrete``, the
game's minimal action set, or all 18 with ``full_action_space``); rewards unclipped (clipping
is the agent's choice: ``agent.reward_clamp`` / the recipes).

**Exactness.** With ``fire_reset = false`` and ``episodic_life = false``, env ``i`` reset with
seed ``s + i`` gives, action for action, the frames, rewards and terminated/truncated flags of
``FrameStackObservation(AtariPreprocessing(gym.make("ALE/<Game>-v5", frameskip=1,
repeat_action_probability=p), frame_skip=4, noop_max=30, screen_size=84,
terminal_on_life_loss=False, grayscale_obs=True), 4)`` reset with seed ``s + i`` and reset
without a seed after each episode (``tests/envs/test_atari.py``). The area resize is OpenCV's
``INTER_AREA`` computed in torch with OpenCV's weights and order of float32 operations, so
OpenCV is needed by the test only.

**Training options** (both on by default; ``noeira eval`` and the final evaluation turn
episodic life off through :meth:`Atari.evaluation_config`, so they score whole games):
``fire_reset`` presses FIRE for one frame after each reset in games whose action set has it
(Breakout waits for it); ``episodic_life`` makes a lost life ``terminated`` for the learner
while the game goes on (after one frame of FIRE with ``fire_reset``). The episode statistics
(``pop_episode_stats``: ``episode_return``, ``episode_length`` in the logs) always count whole
games and their unclipped score.

**How it runs.** The ALE emulates on the host CPU and ``ALEInterface.act`` holds Python's GIL,
so the games run in ``num_workers`` worker processes (``vectorization = "async"``, default:
one per CPU core, at most ``num_envs``), each stepping its share of the games into a shared
memory buffer; ``vectorization = "sync"`` steps them in this process. The full-size frame
(the max of the last two) of every env crosses to the device once per step (pinned on CUDA:
one non-blocking copy), where it is resized and pushed onto the stack; the envs that
restarted send their first frame too. ``capture_safe`` is False: the step waits for the host.
``get_state``/``set_state`` hold every game's ALE state (``cloneState`` with its RNG), its
no-op generator, its last two frames, lives and score, and the stack. ``render()`` gives the
RGB screens ``[N, 210, 160, 3]``.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import multiprocessing as mp
import os
import re
import weakref
from multiprocessing import shared_memory
from typing import Any

import attrs
import numpy as np
import torch
from torch import Tensor

from noeira.core import Backend, Box, ConfigError, Discrete, EnvSpec, StepResult, UserError
from noeira.core.envbase import check_action
from noeira.envs.atari import game as games

__all__ = ["Atari", "area_resize", "game_id"]


def _ale_py() -> Any:
    try:
        import ale_py
    except ImportError:
        raise UserError("env 'atari:...' needs ale-py (it ships the ROMs): pip install 'noeira-envs[atari]'") from None
    return ale_py


def game_id(name: str) -> str:
    """The ale-py ROM name of ``name``: ``breakout``, ``Breakout``, ``BreakoutNoFrameskip-v4`` and
    ``ALE/Breakout-v5`` all give ``breakout``; an unknown game is a :class:`ConfigError` naming the
    closest ROM names."""
    _ale_py()
    known = games.rom_ids()
    if not name:
        raise ConfigError("env.id: empty; name an Atari game as atari:<game>, e.g. atari:breakout")
    text = name.split("/")[-1]
    text = re.sub(r"-v\d+$", "", text)
    text = re.sub(r"(NoFrameskip|Deterministic)$", "", text)
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text).lower().replace("-", "_")
    if snake in known:
        return snake
    close = difflib.get_close_matches(snake, known, n=3, cutoff=0.5)
    hint = f"closest: {', '.join(close)}" if close else f"{len(known)} games, e.g. {', '.join(known[:4])}"
    raise ConfigError(f"env.id: unknown Atari game {name!r} ({hint})")


# -- OpenCV's INTER_AREA, exactly ------------------------------------------------------------------

def _area_tensors(src: int, dst: int, device: torch.device) -> tuple[Tensor, Tensor]:
    index, weight = games.area_arrays(src, dst)
    return torch.from_numpy(index).to(device), torch.from_numpy(weight).to(device)


def area_resize(x: Tensor, tables: tuple[Tensor, Tensor, Tensor, Tensor]) -> Tensor:
    """``x [..., H, W]`` uint8 -> ``[..., h, w]`` uint8, OpenCV's ``INTER_AREA`` bit for bit:
    each source row is first summed across (``buf[d] += x[s] * a`` in float32, in OpenCV's
    order), then the rows down (``sum += b * buf``), then rounded half to even. Separate multiply
    and add ops (never fused), so each product is rounded as OpenCV's are. ``tables`` from
    :func:`area_tables`; the numpy twin is :class:`noeira.envs.atari.game.AreaResize`."""
    yi, yw, xi, xw = tables
    xf = x.float()
    buf = None
    for j in range(xi.shape[1]):
        term = xf[..., xi[:, j]] * xw[:, j]
        buf = term if buf is None else buf + term
    out = None
    for j in range(yi.shape[1]):
        term = buf[..., yi[:, j], :] * yw[:, j, None]
        out = term if out is None else out + term
    return torch.round(out).clamp_(0, 255).to(torch.uint8)


def area_tables(src_hw: tuple[int, int], dst_hw: tuple[int, int], device: torch.device) -> tuple[Tensor, ...]:
    return (*_area_tensors(src_hw[0], dst_hw[0], device), *_area_tensors(src_hw[1], dst_hw[1], device))


# -- the batch of games: in this process, or in worker processes ---------------------------------

class _Local:
    """The games stepped in this process."""

    def __init__(self, game: str, options: dict[str, Any], num_envs: int, frame_shape: tuple[int, ...]) -> None:
        self.buffer = bytearray(games.nbytes(num_envs, frame_shape))
        self.arrays = games.arrays_in(self.buffer, num_envs, frame_shape)
        self.piece = games.Slice(game, options, 0, num_envs, self.arrays)

    def step(self) -> None:
        self.piece.step()

    def call(self, command: str, args: list[Any] | None = None, arg: Any = None) -> list[Any]:
        return [self.piece.call(command, args[0] if args is not None else arg)]

    def close(self) -> None:
        pass


def _shutdown(conns: list[Any], procs: list[Any], shm: Any) -> None:
    import pickle

    for c in conns:
        with contextlib.suppress(OSError, BrokenPipeError):
            c.send_bytes(pickle.dumps(None))
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():  # it ignores SIGTERM (see games.worker)
            p.kill()
            p.join(timeout=5)
    for c in conns:
        c.close()
    with contextlib.suppress(BufferError):  # numpy views still alive: the mapping goes with the process
        shm.close()
    with contextlib.suppress(FileNotFoundError):
        shm.unlink()


class _Workers:
    """The games in ``num_workers`` processes (``spawn``: they load numpy and ale-py, not torch),
    each stepping a contiguous share of the envs in one shared-memory buffer."""

    def __init__(self, game: str, options: dict[str, Any], num_envs: int, frame_shape: tuple[int, ...],
                 num_workers: int) -> None:
        ctx = mp.get_context("spawn")
        self.shm = shared_memory.SharedMemory(create=True, size=games.nbytes(num_envs, frame_shape))
        self.arrays = games.arrays_in(self.shm.buf, num_envs, frame_shape)
        bounds = np.linspace(0, num_envs, num_workers + 1).round().astype(int)
        self.conns, self.procs = [], []
        self._owed: list[int] = []
        """Workers whose reply to the last step is not read yet (in worker order)."""
        for w in range(num_workers):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=games.worker, daemon=True, name=f"noeira-atari-{w}",
                            args=(child, self.shm.name, game, options, int(bounds[w]), int(bounds[w + 1] - bounds[w]),
                                  num_envs, frame_shape))
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)
        self._finalizer = weakref.finalize(self, _shutdown, self.conns, self.procs, self.shm)
        for w, c in enumerate(self.conns):
            status, detail = self._recv(w, c)
            if status != "ok":
                self.close()
                raise UserError(f"atari worker {w} failed to start: {detail}")

    def _recv(self, w: int, conn: Any) -> Any:
        try:
            return conn.recv()
        except EOFError:
            return ("error", f"worker process {w} ended (exit code {self.procs[w].exitcode})")

    def step(self) -> None:
        for c in self.conns:
            c.send_bytes(b"s")
        # a second Ctrl-C can interrupt the wait below: the replies not read yet stay owed, and are
        # read before the next request (else a checkpoint's get_state would read a step's reply)
        self._owed = list(range(len(self.conns)))
        errors = self._settle()
        if errors:
            raise RuntimeError(f"atari env step failed: {errors[0]}")

    def _settle(self) -> list[str]:
        """Read the step replies still owed; the errors among them."""
        errors = []
        while self._owed:
            w = self._owed[0]
            try:
                reply = self.conns[w].recv_bytes()
            except EOFError:
                reply = f"worker process {w} ended (exit code {self.procs[w].exitcode})".encode()
            self._owed.pop(0)
            if reply:
                errors.append(reply.decode())
        return errors

    def call(self, command: str, args: list[Any] | None = None, arg: Any = None) -> list[Any]:
        """``command`` in every worker (with ``args[w]`` each, or ``arg`` for all); their results."""
        import pickle

        errors = self._settle()
        if errors:
            raise RuntimeError(f"atari env step failed: {errors[0]}")
        for w, c in enumerate(self.conns):
            c.send_bytes(pickle.dumps((command, args[w] if args is not None else arg)))
        out = []
        for w, c in enumerate(self.conns):
            status, result = self._recv(w, c)
            if status != "ok":
                raise RuntimeError(f"atari env {command} failed in worker {w}: {result}")
            out.append(result)
        return out

    def close(self) -> None:
        self.arrays = {}
        self._finalizer()


def _default_workers(num_envs: int) -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(num_envs, cores))


# -- the env ------------------------------------------------------------------------------------------

class Atari:
    """``num_envs`` ALE games as a BatchedEnv (see the module docstring).

    Shapes: obs ``uint8 [N, frame_stack, screen_size, screen_size]``, action ``int64 [N]``,
    reward ``float32 [N]``, terminated / truncated ``bool [N]``, on ``backend.device``."""

    name = "atari"
    capture_safe = False
    truncates_at_limit_only = False
    episode_stat_keys: tuple[str, ...] = ()

    @attrs.frozen
    class Config:
        id: str
        """The game (``atari:<game>`` sets it): ale-py's ROM name, e.g. breakout, pong, space_invaders."""
        frame_skip: int = 4
        """Frames each action is repeated for; the observation is the max of the last two."""
        screen_size: int = 84
        """Frames are resized to screen_size x screen_size (OpenCV's area interpolation)."""
        frame_stack: int = 4
        """Frames stacked in an observation (the newest last)."""
        grayscale: bool = True
        """Grayscale frames (false: RGB, observations [N, frame_stack, 3, S, S])."""
        noop_max: int = 30
        """A reset takes 1..noop_max no-op frames, drawn per game (0: none)."""
        fire_reset: bool = True
        """Press FIRE for one frame after each reset (and each lost life with episodic_life), in games
        whose action set has FIRE."""
        episodic_life: bool = True
        """A lost life ends the learner's episode (terminated) while the game goes on; the episode
        statistics still count whole games. Off when the driver evaluates."""
        repeat_action_probability: float = 0.25
        """Sticky actions: each frame repeats the previous action with this probability (v5: 0.25)."""
        full_action_space: bool = False
        """All 18 joystick actions instead of the game's minimal set."""
        max_episode_frames: int = 108_000
        """A game is truncated after this many frames (v5's 108,000: 30 minutes at 60 Hz)."""
        vectorization: str = "async"
        """async: the games in worker processes (num_workers); sync: in this process."""
        num_workers: int = 0
        """async: worker processes (0: one per CPU core this process may use, at most num_envs)."""
        resize: str = "auto"
        """Where frames are resized: device (the full frames cross to the device, resized there), workers
        (in the worker processes, numpy), auto (device on cuda, workers elsewhere)."""
        validate_actions: bool = False
        """Check every action's shape, dtype and range before stepping."""

    @classmethod
    def evaluation_config(cls, config: Config) -> Config:
        """The config the driver evaluates with: whole games (episodic life off)."""
        return attrs.evolve(config, episodic_life=False)

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None = None) -> None:
        _ale_py()
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"env.num_envs: must be an integer >= 1, got {num_envs!r}")
        for key in ("frame_skip", "screen_size", "frame_stack", "max_episode_frames"):
            if getattr(config, key) < 1:
                raise ConfigError(f"env.{key}: must be >= 1, got {getattr(config, key)}")
        if config.noop_max < 0 or config.num_workers < 0:
            raise ConfigError("env.noop_max / env.num_workers: must be >= 0")
        if not 0.0 <= config.repeat_action_probability <= 1.0:
            raise ConfigError(f"env.repeat_action_probability: must lie in [0, 1], got {config.repeat_action_probability}")
        if config.vectorization not in ("async", "sync"):
            raise ConfigError(f"env.vectorization: expected 'async' or 'sync', got {config.vectorization!r}")
        if config.resize not in ("auto", "device", "workers"):
            raise ConfigError(f"env.resize: expected 'auto', 'device' or 'workers', got {config.resize!r}")
        game = game_id(config.id)
        self.config, self.backend, self.device = config, backend, torch.device(backend.device)
        self.num_envs, self.game = num_envs, game
        self.name = f"atari:{game}"
        self.validate_actions = config.validate_actions
        self.resize_on_device = config.resize == "device" or (config.resize == "auto" and self.device.type == "cuda")
        options = {**attrs.asdict(config), "resize_here": not self.resize_on_device}
        probe = games.Game(game, options)  # the action set and the screen's size
        h, w = probe.ale.getScreenDims()
        num_actions = len(probe.actions)
        del probe
        n, s, size, dev = num_envs, config.frame_stack, config.screen_size, self.device
        obs_shape = (s, size, size) if config.grayscale else (s, 3, size, size)
        # what crosses from the games: full frames (resized on the device) or resized ones
        self.frame_shape = ((h, w) if config.grayscale else (h, w, 3)) if self.resize_on_device else obs_shape[1:]
        self.observation_space = Box(0, 255, shape=obs_shape, dtype=torch.uint8, device=dev)
        self.action_space = Discrete(num_actions, device=dev)
        self.max_episode_steps = math.ceil(config.max_episode_frames / config.frame_skip)
        self.render_fps = 60 / config.frame_skip

        workers = config.num_workers or _default_workers(num_envs)
        self.pool: _Local | _Workers = (
            _Workers(game, options, num_envs, self.frame_shape, min(workers, num_envs))
            if config.vectorization == "async" else _Local(game, options, num_envs, self.frame_shape))
        arrays = self.pool.arrays
        self._info = arrays["info"]
        self._actions = torch.from_numpy(arrays["actions"])
        self._frames_host = torch.from_numpy(arrays["frames"])
        self._restarts_host = torch.from_numpy(arrays["restarts"])
        self._tables = area_tables((h, w), (size, size), dev)
        self._result = StepResult(
            obs=torch.zeros((n, *obs_shape), dtype=torch.uint8, device=dev),
            reward=torch.zeros(n, dtype=torch.float32, device=dev),
            terminated=torch.zeros(n, dtype=torch.bool, device=dev),
            truncated=torch.zeros(n, dtype=torch.bool, device=dev),
            final_obs=torch.zeros((n, *obs_shape), dtype=torch.uint8, device=dev),
        )
        # the host side of each step's small outputs and the restart rows, pinned on CUDA
        cuda = dev.type == "cuda"
        self._small = torch.zeros(3, n, dtype=torch.float32, pin_memory=cuda)
        self._stage_restarts = torch.zeros((n, *self.frame_shape), dtype=torch.uint8, pin_memory=cuda)
        self._stage_frames = None
        self._registered = None
        if cuda:  # the workers' frames buffer itself as page-locked memory: the copy needs no staging
            ptr, size_bytes = self._frames_host.data_ptr(), self._frames_host.nbytes
            cudart = torch.cuda.cudart()
            if int(cudart.cudaHostRegister(ptr, size_bytes, 0)) == 0:
                self._registered = ptr
            else:  # stage through torch's own pinned memory (one host copy more); clear the error it left
                getattr(cudart, "cudaGetLastError", lambda: None)()
                self._stage_frames = torch.zeros_like(self._frames_host, pin_memory=True)
        self._copied = torch.cuda.Event() if cuda else None
        self._frames_dev = self._frames_host if not cuda else torch.zeros(self._frames_host.shape, dtype=torch.uint8,
                                                                          device=dev)
        self._small_dev = self._small if not cuda else torch.zeros(3, n, dtype=torch.float32, device=dev)
        self._stats = np.zeros(3, dtype=np.float64)
        self.reset(seed)

    # -- the contract -------------------------------------------------------------------------
    @property
    def spec(self) -> EnvSpec:
        return EnvSpec.of(self)

    @property
    def obs(self) -> Tensor:
        return self._result.obs

    def _wait_copies(self) -> None:
        """The device has read the host buffers of the last step (the workers overwrite them next)."""
        if self._copied is not None:
            self._copied.synchronize()

    def _resize(self, frames: Tensor) -> Tensor:
        """Full-size frames ``[k, H, W(, 3)]`` on the device -> ``[k, S, S]`` (``[k, 3, S, S]``); frames
        the workers resized pass as they are."""
        if not self.resize_on_device:
            return frames
        if not self.config.grayscale:
            frames = frames.permute(0, 3, 1, 2)
        return area_resize(frames, self._tables)

    def _restart_rows(self, rows: np.ndarray, kinds: np.ndarray) -> None:
        """Write the observations of the envs in ``rows`` that restarted: a reset fills the stack with
        its first frame (gymnasium's FrameStackObservation), a new life pushes its frame."""
        k = len(rows)
        index = torch.from_numpy(rows)
        stage = self._stage_restarts[:k]
        torch.index_select(self._restarts_host, 0, index, out=stage)
        frames = stage.to(self.device, non_blocking=True)
        first = self._resize(frames)  # [k, S, S]
        rows_dev = index.to(self.device, non_blocking=True)
        obs = self._result.obs
        pushed = torch.cat([obs.index_select(0, rows_dev)[:, 1:], first.unsqueeze(1)], 1)
        filled = first.unsqueeze(1).expand_as(pushed)
        full = torch.from_numpy(kinds == games.RESET).to(self.device, non_blocking=True)
        new = torch.where(full.view(-1, *([1] * (pushed.dim() - 1))), filled, pushed)
        obs.index_copy_(0, rows_dev, new)

    def reset(self, seed: int | None = None) -> Tensor:
        """Reset every game; env ``i`` is seeded with ``seed + i`` (no seed: the games' generators go on)."""
        self._wait_copies()
        self.pool.call("reset", arg=seed)
        rows = np.arange(self.num_envs)
        self._restart_rows(rows, np.full(self.num_envs, games.RESET))
        self._result.final_obs.copy_(self._result.obs)
        if self._copied is not None:
            self._copied.record()
        return self._result.obs

    def step(self, action: Tensor) -> StepResult:
        if self.validate_actions:
            check_action(self.action_space, action, self.num_envs)
        self._actions.copy_(action.detach().to("cpu", torch.int64).view(-1))  # waits for the policy (and last copies)
        self._wait_copies()
        self.pool.step()
        info, r, col = self._info, self._result, games.COL
        self._small[0].copy_(torch.from_numpy(info[:, col["reward"]]))
        self._small[1].copy_(torch.from_numpy(info[:, col["terminated"]]))
        self._small[2].copy_(torch.from_numpy(info[:, col["truncated"]]))
        if self._stage_frames is not None:
            self._stage_frames.copy_(self._frames_host)
            self._frames_dev.copy_(self._stage_frames, non_blocking=True)
        elif self._frames_dev is not self._frames_host:
            self._frames_dev.copy_(self._frames_host, non_blocking=True)
        if self._small_dev is not self._small:
            self._small_dev.copy_(self._small, non_blocking=True)
        r.reward.copy_(self._small_dev[0])
        torch.gt(self._small_dev[1], 0, out=r.terminated)
        torch.gt(self._small_dev[2], 0, out=r.truncated)
        newest = self._resize(self._frames_dev)
        r.final_obs[:, :-1].copy_(r.obs[:, 1:])
        r.final_obs[:, -1].copy_(newest)
        r.obs.copy_(r.final_obs)
        kinds = info[:, col["restart"]].astype(np.int64)
        rows = np.flatnonzero(kinds)
        if len(rows):
            self._restart_rows(rows, kinds[rows])
        over = info[:, col["game_over"]] > 0
        if over.any():
            self._stats += (info[over, col["game_return"]].sum(), info[over, col["game_length"]].sum(), over.sum())
        if self._copied is not None:
            self._copied.record()
        return r

    def pop_episode_stats(self) -> dict[str, Tensor]:
        """Whole games (not lives) ended since the last call: their summed score (unclipped), length
        in agent steps, and count."""
        s = torch.as_tensor(self._stats.copy(), device=self.device)
        self._stats[:] = 0
        return {"return_sum": s[0], "length_sum": s[1], "count": s[2]}

    # -- state ----------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Tensor]:
        """Every game's ALE state (its serialised bytes, with the RNG of sticky actions), no-op
        generator (PCG64 words), last two full-size frames, lives and score so far, and the stack."""
        self._wait_copies()
        states = [s for part in self.pool.call("get_state") for s in part]
        n = self.num_envs
        ale = np.zeros((n, games.STATE_BYTES), np.uint8)
        size = np.zeros(n, np.int64)
        for i, s in enumerate(states):
            ale[i, :len(s["ale"])] = np.frombuffer(s["ale"], np.uint8)
            size[i] = len(s["ale"])
        host = {
            "ale": ale, "ale_size": size,
            "rng": np.stack([s["rng"] for s in states]).view(np.int64),
            "frames": np.stack([s["buf"] for s in states]),
            "lives": np.array([s["lives"] for s in states], np.int64),
            "game_return": np.array([s["game_return"] for s in states], np.float64),
            "game_length": np.array([s["game_length"] for s in states], np.int64),
        }
        out = {k: torch.from_numpy(v).to(self.device) for k, v in host.items()}
        out["stack"] = self._result.obs.clone()
        return out

    def set_state(self, state: dict[str, Tensor]) -> None:
        from noeira.core.envbase import check_state

        state = check_state(self.name, self.get_state(), state, self.device)
        host = {k: v.cpu().numpy() for k, v in state.items() if k != "stack"}
        per_env = [{"ale": host["ale"][i, :int(host["ale_size"][i])].tobytes(), "rng": host["rng"][i].view(np.uint64),
                    "buf": host["frames"][i], "lives": host["lives"][i], "game_return": host["game_return"][i],
                    "game_length": host["game_length"][i]} for i in range(self.num_envs)]
        if isinstance(self.pool, _Workers):
            bounds = np.linspace(0, self.num_envs, len(self.pool.conns) + 1).round().astype(int)
            self.pool.call("set_state", args=[per_env[bounds[w]:bounds[w + 1]] for w in range(len(bounds) - 1)])
        else:
            self.pool.call("set_state", args=[per_env])
        self._result.obs.copy_(state["stack"])
        self._result.final_obs.copy_(state["stack"])

    @property
    def resume_caveat(self) -> str | None:
        """None without sticky actions: a checkpoint holds every game whole. With them, the ALE
        (ale-py 0.12) keeps the action a sticky frame repeats outside the state it saves, so a
        restored game can take another action on its first frames than the game it copies."""
        if self.config.repeat_action_probability == 0:
            return None
        return ("env.repeat_action_probability > 0: the ALE does not save the action a sticky frame repeats, "
                "so resumed games can differ from the interrupted ones (set it to 0 for bit-exact resume)")

    def state_dict(self) -> dict[str, Tensor]:
        """:meth:`get_state` on the host: what a checkpoint keeps to resume the games where they
        stood, and the completed games' sums not yet popped."""
        return {**{k: v.cpu() for k, v in self.get_state().items()}, "episode_sums": torch.from_numpy(self._stats.copy())}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.set_state({k: v for k, v in state.items() if k != "episode_sums"})
        if "episode_sums" in state:
            self._stats[:] = torch.as_tensor(state["episode_sums"]).cpu().numpy()

    def render(self) -> Tensor:
        """The RGB screens of every game, ``uint8 [N, 210, 160, 3]`` on the env's device."""
        self._wait_copies()
        frames = np.concatenate(self.pool.call("render"))
        return torch.from_numpy(frames).to(self.device)

    def close(self) -> None:
        if getattr(self, "_registered", None) is not None:
            torch.cuda.synchronize(self.device)
            int(torch.cuda.cudart().cudaHostUnregister(self._registered))
            self._registered = None
        if hasattr(self, "pool"):
            self.pool.close()

    def __repr__(self) -> str:
        return f"Atari({self.game!r}, num_envs={self.num_envs}, {self.config.vectorization}, device={self.device})"
