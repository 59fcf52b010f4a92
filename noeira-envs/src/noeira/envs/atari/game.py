"""One Atari game per :class:`Game`, stepped exactly as gymnasium steps
``AtariPreprocessing(gym.make("ALE/<Game>-v5", frameskip=1), ...)``, and the worker loop
that steps a slice of a batch in its own process.

This module imports numpy and ale-py only (no torch): worker processes load it and nothing
else. The torch side (resize to 84x84, frame stack, device copies) is
:mod:`noeira.envs.atari.env`.

A game writes, per agent step, the max of its last two grayscale (or RGB) frames at the
full screen size into its row of ``frames``; where the step restarted the game (a reset
after game over or truncation, or, with episodic life, the FIRE after a lost life) it writes
the first frame of the restart into its row of ``restarts``; its scalars go into its row of
``info`` (the columns of :data:`INFO`).

Why processes: ``ALEInterface.act`` keeps Python's GIL while it emulates, so threads step
one game at a time (measured: two threads stepping two ALEs took 2.9x the time of one).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

INFO = ("reward", "terminated", "truncated", "restart", "game_over", "game_return", "game_length", "lives")
"""Columns of the ``info`` rows a step writes (float64): the step's summed reward (unclipped),
terminated and truncated (0/1) as the agent sees them, the restart kind (0: none, 1: the game
was reset, 2: a new life started with FIRE, the stack goes on), game_over (a real game ended:
its score and length, in agent steps, follow), and the lives left."""
COL = {name: i for i, name in enumerate(INFO)}
RESET, LIFE = 1, 2

STATE_BYTES = 32_768
"""Room for one ALE state serialised with its RNG (about 14.5 KB for the games checked)."""


def area_table(src: int, dst: int) -> list[list[tuple[int, float]]]:
    """OpenCV's ``INTER_AREA`` weights (``computeResizeAreaTab``): for each output index, the
    source indices and float32 weights it sums, in OpenCV's order (cells of ``src / dst`` source
    pixels, the partial pixels at a cell's ends weighted by their overlap)."""
    scale = 1.0 / (dst / src)
    table: list[list[tuple[int, float]]] = [[] for _ in range(dst)]
    for d in range(dst):
        f1 = d * scale
        f2 = f1 + scale
        cell = min(scale, src - f1)
        s1, s2 = math.ceil(f1), math.floor(f2)
        s2 = min(s2, src - 1)
        s1 = min(s1, s2)
        if s1 - f1 > 1e-3:
            table[d].append((s1 - 1, float(np.float32((s1 - f1) / cell))))
        for s in range(s1, s2):
            table[d].append((s, float(np.float32(1.0 / cell))))
        if f2 - s2 > 1e-3:
            table[d].append((s2, float(np.float32(min(min(f2 - s2, 1.0), cell) / cell))))
    return table


def area_arrays(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`area_table` as ``index int64 [dst, K]`` and ``weight float32 [dst, K]`` (missing slots:
    index 0, weight 0, which add an exact 0.0)."""
    table = area_table(src, dst)
    k = max(len(t) for t in table)
    index, weight = np.zeros((dst, k), np.int64), np.zeros((dst, k), np.float32)
    for d, row in enumerate(table):
        for j, (s, w) in enumerate(row):
            index[d, j], weight[d, j] = s, w
    return index, weight


class AreaResize:
    """OpenCV's ``INTER_AREA`` of a full frame ``[H, W]`` (or ``[H, W, 3]``) to ``[S, S]`` (``[3, S, S]``):
    OpenCV itself where it imports (3-8x faster), else in numpy, bit for bit: each source row summed
    across (``buf[d] += x[s] * a``, float32, OpenCV's order), then the rows down (``sum += b * buf``),
    rounded half to even. The torch twin is :func:`noeira.envs.atari.env.area_resize` (the same tables
    and operations); ``tests/envs/test_atari.py`` holds all three to OpenCV's output."""

    def __init__(self, src_hw: tuple[int, int], size: int, use_cv2: bool = True) -> None:
        self.yi, self.yw = area_arrays(src_hw[0], size)
        self.xi, self.xw = area_arrays(src_hw[1], size)
        self.size = size
        self.cv2 = None
        if use_cv2:
            try:
                import cv2

                self.cv2 = cv2
            except ImportError:
                pass

    def __call__(self, frame: np.ndarray, out: np.ndarray) -> None:
        if self.cv2 is not None:
            small = self.cv2.resize(frame, (self.size, self.size), interpolation=self.cv2.INTER_AREA)
            out[...] = small if small.ndim == 2 else small.transpose(2, 0, 1)
            return
        x = frame.astype(np.float32)
        if x.ndim == 3:
            x = x.transpose(2, 0, 1)  # channels first, as the observation
        buf = x[..., self.xi[:, 0]] * self.xw[:, 0]
        for j in range(1, self.xi.shape[1]):
            buf += x[..., self.xi[:, j]] * self.xw[:, j]
        acc = buf[..., self.yi[:, 0], :] * self.yw[:, 0, None]
        for j in range(1, self.yi.shape[1]):
            acc += buf[..., self.yi[:, j], :] * self.yw[:, j, None]
        np.clip(np.rint(acc), 0, 255, out=acc)
        out[...] = acc


def _ale() -> Any:
    import ale_py

    return ale_py


def rom_ids() -> list[str]:
    """The ROM names ale-py ships (``breakout``, ``space_invaders`` ...)."""
    from ale_py import roms

    return list(roms.get_all_rom_ids())


class Game:
    """One ALE game with gymnasium's v5 settings (``frameskip=1`` at the ALE, sticky actions
    ``repeat_action_probability``, ``max_num_frames_per_episode``) under AtariPreprocessing's
    frame skip, max-pool and no-op reset, plus this project's two training options: FIRE on
    reset and episodic life. ``options`` is a dict of the env's config keys."""

    def __init__(self, game: str, options: dict[str, Any]) -> None:
        ale_py = _ale()
        from ale_py import roms

        self.game, self.o = game, options
        self.rom = roms.get_rom_path(game)
        self.ale = ale_py.ALEInterface()
        self.ale.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale.setFloat("repeat_action_probability", float(options["repeat_action_probability"]))
        self.ale.setInt("max_num_frames_per_episode", int(options["max_episode_frames"]))
        self.ale.loadROM(self.rom)
        self.actions = self.ale.getLegalActionSet() if options["full_action_space"] else self.ale.getMinimalActionSet()
        self.fire = next((a for a in self.actions if a == ale_py.Action.FIRE), None)
        self.grayscale = bool(options["grayscale"])
        h, w = self.ale.getScreenDims()
        shape = (h, w) if self.grayscale else (h, w, 3)
        self.buf = [np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)]
        self.np_random = np.random.Generator(np.random.PCG64())
        self.lives = 0
        self.game_return, self.game_length = 0.0, 0

    # -- gymnasium's AtariEnv -------------------------------------------------------------
    def _seed(self, seed: int) -> None:
        """AtariEnv.seed_game + load_game: the no-op generator and the ALE's seed, from ``seed``."""
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self.np_random = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(np_seed))))
        self.ale.setInt("random_seed", int(np.int32(ale_seed)))
        self.ale.loadROM(self.rom)

    def _env_reset(self, seed: int | None) -> None:
        if seed is not None:
            self._seed(seed)
        self.ale.reset_game()

    def _screen(self, out: np.ndarray) -> None:
        if self.grayscale:
            self.ale.getScreenGrayscale(out)
        else:
            self.ale.getScreenRGB(out)

    # -- AtariPreprocessing ---------------------------------------------------------------
    def reset(self, seed: int | None, frame: np.ndarray) -> None:
        """Reset (seeded when ``seed`` is given), 1..noop_max no-ops from the game's generator
        (gymnasium's rule: a game that ends among them is reset again), then FIRE for one
        frame if ``fire_reset`` and the game has it; the first frame goes into ``frame``."""
        self._env_reset(seed)
        noop_max = int(self.o["noop_max"])
        noops = int(self.np_random.integers(1, noop_max + 1)) if noop_max > 0 else 0
        for _ in range(noops):
            self.ale.act(self.actions[0], 1.0)
            if self.ale.game_over(with_truncation=False) or self.ale.game_truncated():
                self._env_reset(seed)
        if self.o["fire_reset"] and self.fire is not None:
            self.ale.act(self.fire, 1.0)
            if self.ale.game_over():  # never seen; start over rather than hand out an ended game
                self._env_reset(None)
        self._observe_restart(frame)
        self.game_return, self.game_length = 0.0, 0

    def _observe_restart(self, frame: np.ndarray) -> None:
        self.lives = self.ale.lives()
        self._screen(self.buf[0])
        self.buf[1].fill(0)
        frame[...] = self.buf[0]

    def step(self, action: int, frame: np.ndarray, restart: np.ndarray, info: np.ndarray) -> None:
        """One agent step: ``frame_skip`` frames of ``action`` (the index in the action set),
        the max of the last two into ``frame``; the outcome into ``info`` (:data:`INFO`); a
        restart's first frame into ``restart``."""
        act = self.actions[action]
        skip = int(self.o["frame_skip"])
        total, terminated, truncated = 0.0, False, False
        for t in range(skip):
            total += self.ale.act(act, 1.0)
            terminated = self.ale.game_over(with_truncation=False)
            truncated = self.ale.game_truncated()
            if terminated or truncated:
                break  # the frames of this step stay as they were (AtariPreprocessing's rule)
            if t == skip - 2:
                self._screen(self.buf[1])
            elif t == skip - 1:
                self._screen(self.buf[0])
        if skip > 1:
            np.maximum(self.buf[0], self.buf[1], out=self.buf[0])  # in place, as the reference
        frame[...] = self.buf[0]
        self.game_return += total
        self.game_length += 1
        lives = self.ale.lives()
        life_lost = lives < self.lives and lives > 0
        self.lives = lives
        info[:] = 0.0
        info[COL["reward"]] = total
        info[COL["truncated"]] = truncated
        info[COL["lives"]] = lives
        if terminated or truncated:
            info[COL["terminated"]] = terminated
            info[COL["game_over"]] = 1.0
            info[COL["game_return"]] = self.game_return
            info[COL["game_length"]] = self.game_length
            info[COL["restart"]] = RESET
            self.reset(None, restart)
        elif life_lost and self.o["episodic_life"]:
            info[COL["terminated"]] = 1.0  # a life is an episode for the learner; the game goes on
            if self.o["fire_reset"] and self.fire is not None:
                self.ale.act(self.fire, 1.0)
                if self.ale.game_over(with_truncation=False) or self.ale.game_truncated():
                    info[COL["game_over"]] = 1.0
                    info[COL["game_return"]] = self.game_return
                    info[COL["game_length"]] = self.game_length
                    info[COL["restart"]] = RESET
                    self.reset(None, restart)
                else:
                    info[COL["restart"]] = LIFE
                    self._observe_restart(restart)

    # -- state ------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Everything the next steps depend on: the ALE (with its RNG), the no-op generator,
        the two frame buffers (a step that ends early reads them), lives and the game's score."""
        ale = self.ale.cloneState(include_rng=True).serialize()
        if len(ale) > STATE_BYTES:
            raise RuntimeError(f"atari:{self.game}: ALE state of {len(ale)} bytes exceeds {STATE_BYTES}")
        bg = self.np_random.bit_generator.state
        mask = (1 << 64) - 1
        rng = [bg["state"]["state"] >> 64, bg["state"]["state"] & mask, bg["state"]["inc"] >> 64,
               bg["state"]["inc"] & mask, bg["has_uint32"], bg["uinteger"]]
        return {"ale": ale, "rng": np.array(rng, dtype=np.uint64), "buf": np.stack(self.buf),
                "lives": self.lives, "game_return": self.game_return, "game_length": self.game_length}

    def set_state(self, s: dict[str, Any]) -> None:
        ale_py = _ale()
        self.ale.restoreState(ale_py.ALEState(bytes(s["ale"])))
        r = [int(x) for x in s["rng"]]
        self.np_random.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": (r[0] << 64) | r[1], "inc": (r[2] << 64) | r[3]},
            "has_uint32": r[4], "uinteger": r[5]}
        self.buf[0][...] = s["buf"][0]
        self.buf[1][...] = s["buf"][1]
        self.lives = int(s["lives"])
        self.game_return, self.game_length = float(s["game_return"]), int(s["game_length"])

    def render(self) -> np.ndarray:
        return self.ale.getScreenRGB()


class Slice:
    """Games ``start .. start + n - 1`` of a batch, writing into rows of the batch's arrays: the
    full-size frames, or with ``options["resize_here"]`` the frames resized (:class:`AreaResize`)."""

    def __init__(self, game: str, options: dict[str, Any], start: int, n: int, arrays: dict[str, np.ndarray]) -> None:
        self.start, self.n = start, n
        self.games = [Game(game, options) for _ in range(n)]
        self.a = {k: v[start:start + n] for k, v in arrays.items()}
        self.resize = None
        if options.get("resize_here"):
            g = self.games[0]
            self.resize = AreaResize(g.buf[0].shape[:2], int(options["screen_size"]))
            self.full = [np.zeros_like(g.buf[0]), np.zeros_like(g.buf[0])]  # a step's frame and restart frame

    def _frames(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if self.resize is None:
            return self.a["frames"][i], self.a["restarts"][i]
        return self.full[0], self.full[1]

    def reset(self, seed: int | None) -> None:
        for i, g in enumerate(self.games):
            _, restart = self._frames(i)
            g.reset(None if seed is None else seed + self.start + i, restart)
            if self.resize is not None:
                self.resize(restart, self.a["restarts"][i])
            self.a["info"][i] = 0.0
            self.a["info"][i, COL["restart"]] = RESET
            self.a["info"][i, COL["lives"]] = g.lives

    def step(self) -> None:
        actions, info = self.a["actions"], self.a["info"]
        for i, g in enumerate(self.games):
            frame, restart = self._frames(i)
            g.step(int(actions[i]), frame, restart, info[i])
            if self.resize is not None:
                self.resize(frame, self.a["frames"][i])
                if info[i, COL["restart"]]:
                    self.resize(restart, self.a["restarts"][i])

    def call(self, command: str, arg: Any) -> Any:
        if command == "step":
            return self.step()
        if command == "reset":
            return self.reset(arg)
        if command == "get_state":
            return [g.get_state() for g in self.games]
        if command == "set_state":
            for g, s in zip(self.games, arg, strict=True):
                g.set_state(s)
            return None
        if command == "render":
            return np.stack([g.render() for g in self.games])
        raise ValueError(f"unknown command {command!r}")


def layout(num_envs: int, frame_shape: tuple[int, ...]) -> dict[str, tuple[tuple[int, ...], Any]]:
    """The batch's arrays: name -> (shape, numpy dtype)."""
    return {"actions": ((num_envs,), np.int64), "frames": ((num_envs, *frame_shape), np.uint8),
            "restarts": ((num_envs, *frame_shape), np.uint8), "info": ((num_envs, len(INFO)), np.float64)}


def arrays_in(buffer: Any, num_envs: int, frame_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Numpy views of the batch's arrays laid out one after the other in ``buffer`` (64-byte aligned)."""
    out, offset = {}, 0
    for name, (shape, dtype) in layout(num_envs, frame_shape).items():
        out[name] = np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)
        offset += math.ceil(out[name].nbytes / 64) * 64
    return out


def nbytes(num_envs: int, frame_shape: tuple[int, ...]) -> int:
    return sum(math.ceil(math.prod(s) * np.dtype(d).itemsize / 64) * 64 for s, d in layout(num_envs, frame_shape).values())


def worker(conn: Any, shm_name: str, game: str, options: dict[str, Any], start: int, n: int, num_envs: int,
           frame_shape: tuple[int, ...]) -> None:
    """A worker process: steps games ``start .. start + n - 1`` in the shared arrays when told.
    ``b"s"`` steps (the hot path: bytes, no pickling); a tuple ``(command, arg)`` does the rest;
    ``None`` ends it. Replies ``b""`` to a step, ``("ok", result)`` or ``("error", text)`` otherwise."""
    import signal
    from multiprocessing import shared_memory

    # Ctrl-C and SIGTERM reach the whole process group: the parent decides when to stop (the driver
    # finishes its iteration and checkpoints), and this process ends when the parent closes the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    shm = shared_memory.SharedMemory(name=shm_name)
    try:  # one thread per worker process (there is a worker per core)
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass
    piece = None
    try:
        piece = Slice(game, options, start, n, arrays_in(shm.buf, num_envs, frame_shape))
        conn.send(("ok", None))
        while True:
            msg = conn.recv_bytes()
            if msg == b"s":
                try:
                    piece.step()
                    conn.send_bytes(b"")
                except Exception as err:  # the parent reads an error where it waits for the step
                    conn.send_bytes(f"{type(err).__name__}: {err}".encode())
                continue
            import pickle

            request = pickle.loads(msg)
            if request is None:
                break
            try:
                conn.send(("ok", piece.call(*request)))
            except Exception as err:
                conn.send(("error", f"{type(err).__name__}: {err}"))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass
    except Exception as err:
        with contextlib.suppress(BrokenPipeError, OSError):
            conn.send(("error", f"{type(err).__name__}: {err}"))
    finally:
        del piece  # its views into the shared buffer must go before the buffer closes
        shm.close()
