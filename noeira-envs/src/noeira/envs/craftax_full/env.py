"""Craftax, the full game (Matthews et al., "Craftax: A Lightning-Fast Benchmark for Open-Ended
Reinforcement Learning", ICML 2024), for ``N`` worlds at once in torch, exact to the reference
(pip ``craftax==1.6.1``, ``craftax.craftax``, ``Craftax-Symbolic-v1``, default ``EnvParams``).

- Observation: ``Box`` of 8,268 float32, the reference's symbolic layout (:mod:`.render`); with
  ``obs = "compact"`` an ``Encoded`` space of 900 bytes that decodes to the same floats (37x less
  memory for buffers and rollouts; policies decode where they read it). On CUDA one Triton
  kernel writes the compact bytes (``obs_kernel``, :mod:`.triton_obs`; the symbolic floats are
  their expansion).
- Action: ``Discrete(43)`` (:data:`~.constants.ACTION_NAMES`).
- Reward: the rewards of the achievements newly unlocked (1 / 3 / 5 / 8 by difficulty) + 0.1 x
  the change of health (:mod:`.game`).
- ``terminated``: the player died or defeated the necromancer; ``truncated``: the 100,000-step
  limit and not terminated. Same-step autoreset, the last observation in ``final_obs``.
- State: ``get_state()``/``set_state()`` exchange the reference's ``EnvState`` leaves as a dict
  of batched tensors (:mod:`.state`; ``state_rng`` left out).
- Randomness (world generation, mob moves, spawns, loot, saplings, spells, enchantments) comes
  from the env's device generator with the reference's distributions; the rest is exact.
- Fresh worlds: every episode starts in a world generated for it, from numbers of its own
  under the run's ``world_key`` (drawn from the generator at ``reset(seed)``): Philox on the
  counters (draw, stream, serial) (:func:`.worldgen.keyed_draws`), so a world is the same
  whatever the batch, device or order it is generated in. ``resets = "on_demand"`` (the default
  on a CPU) generates the worlds of the envs that ended, when they end: episode ``k`` of env
  ``e`` is world (``e``, ``k``) (a host sync to list them, so not capture-safe).
  ``resets = "queue"`` (the default on CUDA: capture-safe) keeps a queue of fresh worlds (the
  queue's ``j``-th is world (``QUEUE_STREAM``, ``j``)), generates ``queue_refill`` of them a step
  and hands each to one episode; an env that ends while the queue is empty takes an already
  used world, which the episode statistic ``world_reused`` counts (size the queue so it stays 0).
- Resume: :meth:`state_dict` holds the world key, the episode counts and the queue's numbers
  (not its worlds: :meth:`load_state_dict` regenerates them), so a resumed run steps on bit for
  bit.
- Episode statistics: ``episode_achievement_<name>`` (the share of episodes that unlocked it)
  for the 67 achievements, ``episode_floor`` (the deepest floor reached), ``episode_world_reused``,
  and ``craftax_score`` (the geometric mean of the success rates, Craftax's score).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeVar

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, ConfigError, Discrete, Encoded, TensorEnv
from noeira.core.envbase import check_action
from noeira.envs.craftax.constants import light_tables  # the same day-night cycle as Craftax-Classic
from noeira.envs.craftax_full import game, render, triton_account, triton_step, worldgen
from noeira.envs.craftax_full.constants import (
    ACHIEVEMENTS,
    LEVEL_ACHIEVEMENTS,
    MAP_OBS_SIZE,
    MAX_TIMESTEPS,
    NUM_ACTIONS,
    OBS_SIZE,
)
from noeira.envs.craftax_full.state import State, empty_state, export_state, import_state, state_of
from noeira.envs.craftax_full.triton_queue import QueueKernels, queue_kernels  # Triton imported when asked

__all__ = ["Craftax", "WorldQueue"]

T = TypeVar("T")


def _kernel(config: Craftax.Config, key: str, dev: torch.device, make: Callable[[], T | None]) -> T | None:
    """The Triton piece ``make()`` gives (None without Triton) where ``env.<key>`` asks for it
    (``triton``; ``auto``: on CUDA), None where the torch path runs; ``triton`` asked without
    Triton is a ConfigError."""
    choice = getattr(config, key)
    if choice == "torch" or (choice == "auto" and dev.type != "cuda"):
        return None
    kernel = make()
    if kernel is None and choice == "triton":
        raise ConfigError(f"env.{key}: triton needs Triton (pip install triton), which does not import")
    return kernel


GENERATION_CHUNK = 2048
"""Worlds generated at once on CUDA (a world's draws take ~0.7 MB of int64 scratch a tensor);
256 elsewhere."""


class Craftax(TensorEnv):
    """``num_envs`` worlds of the full Craftax game (see the module docstring)."""

    name = "craftax"
    episode_stat_keys = tuple(f"achievement_{a}" for a in ACHIEVEMENTS) + ("floor", "world_reused")

    @attrs.frozen
    class Config:
        obs: str = "symbolic"
        """``symbolic``: the reference's 8,268 float32; ``compact``: the same as 900 bytes (an
        ``Encoded`` space that decodes to them bit for bit)."""
        resets: str = "auto"
        """How ended envs get their fresh worlds: ``on_demand`` (generated when they end; syncs with
        the host), ``queue`` (a queue of fresh worlds refilled every step; capture-safe), ``auto``:
        queue on CUDA, on_demand elsewhere."""
        queue_size: int = 0
        """Fresh worlds the queue holds (0: num_envs / 16, at least 64)."""
        queue_refill: int = 0
        """Worlds generated per step for the queue (0: queue_size / 8, at least 8): at least the
        resets per step, so no episode starts in a used world (``episode_world_reused``)."""
        validate_actions: bool = False
        """Check every action's shape, dtype and range before stepping (syncs with the host:
        for debugging, not for speed or graph capture)."""
        obs_kernel: str = "auto"
        """What writes the compact observations (the symbolic ones are their expansion):
        ``torch`` (:func:`.render.compact`, every device), ``triton`` (one Triton kernel,
        :mod:`.triton_obs`, the same bytes; CUDA, or a CPU under ``TRITON_INTERPRET=1``) or
        ``auto``: triton on CUDA where Triton imports (10-16x faster on an H100, BENCHMARKS.md),
        torch elsewhere."""
        worldgen_kernel: str = "auto"
        """What turns the fresh worlds' draws into states: ``torch`` (the ops of
        :func:`.worldgen.world_from_draws`, every device), ``triton`` (Triton kernels writing the
        states' rows, :mod:`.triton_worldgen`, the same bytes; CUDA, or a CPU under
        ``TRITON_INTERPRET=1``) or ``auto``: triton on CUDA where Triton imports, torch elsewhere."""
        step_kernel: str = "auto"
        """What runs the rules: ``torch`` (:func:`.game.step`, every device), ``triton`` (four Triton
        kernels, :mod:`.triton_step`, the same states bit for bit; CUDA, or a CPU under
        ``TRITON_INTERPRET=1``) or ``auto``: triton on CUDA where Triton imports, torch elsewhere."""
        queue_kernel: str = "auto"
        """What keeps the world queue (``resets = "queue"``): ``torch`` (its counters in torch ops, a
        select over every row for the copies; every device), ``triton`` (a plan kernel for each of
        refill and draw, a copy kernel whose work follows the worlds moved, :mod:`.triton_queue`;
        the same bytes; CUDA, or a CPU under ``TRITON_INTERPRET=1``) or ``auto``: triton on CUDA
        where Triton imports, torch elsewhere."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        dev = torch.device(backend.device)
        if config.obs not in ("symbolic", "compact"):
            raise ConfigError(f"env.obs: must be 'symbolic' or 'compact', got {config.obs!r}")
        if config.resets not in ("auto", "on_demand", "queue"):
            raise ConfigError(f"env.resets: must be 'auto', 'on_demand' or 'queue', got {config.resets!r}")
        for key in ("obs_kernel", "worldgen_kernel", "step_kernel", "queue_kernel"):
            if getattr(config, key) not in ("auto", "torch", "triton"):
                raise ConfigError(f"env.{key}: must be 'auto', 'torch' or 'triton', got {getattr(config, key)!r}")

        def worlds() -> object:
            from noeira.envs.craftax_full.triton_worldgen import worlds_kernel  # imports Triton if it is there

            return worlds_kernel()

        self._world_kernel = _kernel(config, "worldgen_kernel", dev, worlds) is not None
        """``world_from_draws``' ``kernel`` (``worldgen_kernel``)."""
        high = torch.ones(OBS_SIZE)
        high[MAP_OBS_SIZE:] = 50.0  # the inventory's books / 2 go up to 49.5; the rest of the tail below 3
        symbolic = Box(torch.zeros(OBS_SIZE), high, dtype=torch.float32, device=dev)
        self.compact = config.obs == "compact"
        space = Encoded((render.COMPACT_SIZE,), torch.uint8, symbolic, render.expand, dev,
                        decode_into=render.expand_into) if self.compact else symbolic
        self.resets = config.resets if config.resets != "auto" else ("queue" if dev.type == "cuda" else "on_demand")
        super().__init__(num_envs, backend, space, Discrete(NUM_ACTIONS, device=dev), MAX_TIMESTEPS, seed=seed,
                         capture_safe=self.resets == "queue",  # on_demand lists the ended envs on the host
                         validate_actions=config.validate_actions)
        self.config = config

        def compact() -> Callable[[State, Tensor], None] | None:
            from noeira.envs.craftax_full.triton_obs import compact_kernel  # imports Triton if it is there

            return compact_kernel()

        self._write_compact: Callable[[State, Tensor], None] = _kernel(config, "obs_kernel", dev, compact) or render.compact
        """What writes the compact observations (``obs_kernel``)."""
        self._step: triton_step.StepFn = _kernel(config, "step_kernel", dev, triton_step.step_kernel) or game.step
        """What runs the rules (``step_kernel``)."""
        self._account = None if self._step is game.step else triton_account.account
        """The step's episode accounting as one kernel, with the rules' kernels (None: the base class's torch ops)."""
        if self._account is not None:  # the kernel's floor table and its done flags, made once
            self._floors = triton_account.floor_table(dev)
            self._done = torch.zeros(num_envs, dtype=torch.bool, device=dev)
        light, _ = light_tables(MAX_TIMESTEPS + 1)
        self.tables = game.Tables(dev, light)
        self._light0 = float(light[0])
        self.s = empty_state(num_envs, dev)
        self.reused = torch.zeros(num_envs, dtype=torch.bool, device=dev)
        self._fresh_rows: Tensor | None = None
        self.world_key = torch.zeros(1, dtype=torch.int64, device=dev)
        """The run's key of the worlds (:func:`.worldgen.keyed_draws`)."""
        self.episode = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        """The episode each env is in, counted from 0 at ``reset(seed)`` (on_demand: its world's serial)."""
        self._envs = torch.arange(num_envs, device=dev)
        self._chunk = GENERATION_CHUNK if dev.type == "cuda" else 256
        self._new_world_key()
        self.queue: WorldQueue | None = None
        if self.resets == "queue":
            size = config.queue_size or max(64, num_envs // 16)
            refill = config.queue_refill or max(8, size // 8)
            if size < 1 or not 1 <= refill <= size:
                raise ConfigError(f"env.queue_size / env.queue_refill: need size >= 1 and 1 <= refill <= size, "
                                  f"got {size}, {refill}")
            self.queue = WorldQueue(self.generate_serial, self._render, size, refill, num_envs, space.shape,
                                    space.dtype, dev, _kernel(config, "queue_kernel", dev, queue_kernels))
        self._ach_floor = torch.tensor(LEVEL_ACHIEVEMENTS[1:], device=dev)
        self._floor_number = torch.arange(1, 9, device=dev)
        self.reset(seed)

    def _new_world_key(self) -> None:
        """A new run of worlds: ``world_key`` from the generator, every env before its episode 0."""
        self.world_key.copy_(torch.randint(0, 2**62, (1,), generator=self.generator, device=self.device))
        self.episode.fill_(-1)

    def generate_worlds(self, stream: Tensor, serial: Tensor, into: State | None = None) -> State:
        """The initial states of the worlds numbered (``stream[i]``, ``serial[i]``) under the run's key
        (``into``: written into its rows, :func:`.worldgen.generate_keyed`)."""
        return worldgen.generate_keyed(self.world_key, stream, serial, self._light0, chunk=self._chunk,
                                       kernel=self._world_kernel, into=into)

    def generate_serial(self, serial: Tensor, into: State | None = None) -> State:
        """The queue's worlds ``serial`` (int64 [k]); ``into``: written into its rows, where the
        kernels skip negative serials (:func:`.worldgen.generate_keyed`)."""
        return self.generate_worlds(torch.full_like(serial, worldgen.QUEUE_STREAM), serial, into)

    # -- TensorEnv -----------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Tensor:
        """Every env starts a new episode in a new world; ``seed`` fixes them (and what follows),
        without it the episode counts go on from where they are."""
        if seed is not None:
            self.generator.manual_seed(seed)
            self._new_world_key()
        self.episode.add_(1)
        self.generate_worlds(self._envs, self.episode, into=self.s)  # in place: no second copy of every state
        self.reused.zero_()
        if self.queue is not None and (seed is not None or self.queue.serial.item() == 0):
            self.queue.fill()
        self.elapsed.zero_()
        self.episode_return.zero_()
        self.episode_length.zero_()
        self._observe(self._result.obs)
        return self._result.obs

    def _reset_envs(self, mask: Tensor) -> None:
        if self.queue is not None:
            self.queue.draw(mask, self.s, self.reused, self.episode)
            return
        rows = mask.nonzero().squeeze(1)
        if rows.numel():
            self.episode.index_add_(0, rows, torch.ones_like(rows))
            self.s.arena.index_copy_(0, rows, self.generate_worlds(rows, self.episode.index_select(0, rows)).arena)
        self._fresh_rows = rows  # step's next _observe(obs) renders only these

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        if self.queue is not None:
            self.queue.refill()
        draws = game.sample_draws(self.num_envs, self.generator, self.device)
        return self._step(self.s, action, draws, self.tables)

    # Opaque to torch.compile (the ``device`` graph compiles the agent around it): inductor cannot
    # lower the dtype views into the state's byte arena (torch 2.13), and the step is recorded in
    # the CUDA graph as it is.
    @torch.compiler.disable
    def step(self, action: Tensor):  # noqa: ANN201
        if self._account is None:
            r = super().step(action)
            r.truncated &= ~r.terminated  # the time limit counts only for worlds still alive
            return r
        # TensorEnv.step (the reference) with its accounting in one kernel (triton_account)
        if self.validate_actions:
            check_action(self.action_space, action, self.num_envs)
        r = self._result
        reward, terminated = self._advance(action)
        self._observe(r.final_obs)
        partial = self._account(self.s, self._floors, reward, terminated, r.reward, r.terminated, r.truncated, self._done,
                                self.elapsed, self.episode_return, self.episode_length, self.reused,
                                self.max_episode_steps)
        self._stats += partial.sum(0)  # the programs' sums added in a fixed order: deterministic
        self._reset_envs(self._done)
        if self.capture_safe or bool(self._done.any()):
            self._observe(r.obs)
        else:  # nothing was reset: the state is the one just observed
            r.obs.copy_(r.final_obs)
        return r

    def _observe(self, out: Tensor) -> None:
        rows, self._fresh_rows = self._fresh_rows, None
        if self.queue is not None and self.queue._last is not None and out is self._result.obs:
            # after the queue's resets: the worlds not reset are where final_obs saw them, the others
            # start with the observation made when their world was generated
            out.copy_(self._result.final_obs)
            self.queue.draw_obs(out)
            self.queue._last = None
            return
        if rows is not None and out is self._result.obs:
            # after on-demand resets: the worlds not reset are where final_obs saw them
            out.copy_(self._result.final_obs)
            if rows.numel():
                part = torch.empty((rows.numel(), *out.shape[1:]), dtype=out.dtype, device=out.device)
                self._render(state_of(self.s.arena.index_select(0, rows)), part)
                out.index_copy_(0, rows, part)
            return
        self._render(self.s, out)

    def _render(self, s: State, out: Tensor) -> None:
        if self.compact:
            self._write_compact(s, out)
        else:
            render.symbolic(s, out, self._write_compact)

    def get_state(self) -> dict[str, Tensor]:
        """The reference's ``EnvState`` leaves, batched: ``{"map": [N, 9, 48, 48] int32, ...}``."""
        return export_state(self.s)

    def _set_state(self, state: dict[str, Tensor]) -> None:
        import_state(state, self.s)
        self.elapsed.copy_(self.s["timestep"])

    def _extra_state(self) -> dict[str, Tensor]:
        """The worlds' key and each env's episode count; with the queue its counters and the
        serial of the world in each slot (its worlds are regenerated from them on load)."""
        out = {"world_key": self.world_key, "episode": self.episode, "world_reused": self.reused}
        if self.queue is not None:
            q = self.queue
            out.update({"queue.head": q.head, "queue.tail": q.tail, "queue.serial": q.serial,
                        "queue.slot_serial": q.slot_serial})
        return out

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        super().load_state_dict(state)
        if self.queue is not None:
            self.queue.regenerate()

    def _episode_values(self) -> dict[str, Tensor]:
        ach = self.s["achievements"]
        out = {f"achievement_{a}": ach[:, i].float() for i, a in enumerate(ACHIEVEMENTS)}
        out["floor"] = self._floor().float()
        out["world_reused"] = self.reused.float()
        return out

    def _episode_sums(self, done: Tensor) -> Tensor:
        # over the bytes of the achievements (4 MB at 65,536 envs), not a float table of 69 columns (18 MB)
        ended = done.unsqueeze(1)
        counts = torch.cat([(self.s["achievements"] & ended).sum(0), (self._floor() * done).sum(0, keepdim=True),
                            (self.reused & done).sum(0, keepdim=True)])
        return counts.to(self._stats.dtype)

    def _floor(self) -> Tensor:
        """The deepest floor each env's episode reached (int64 [N]), from its floor achievements."""
        entered = self.s["achievements"][:, self._ach_floor]  # floors 1..8
        return (entered * self._floor_number).amax(1)

    def episode_metrics(self, means: Mapping[str, float]) -> dict[str, float]:
        """``craftax_score``: the geometric mean over the 67 achievements of 1 + the success rate
        in percent, minus 1 (Craftax's score)."""
        rates = [100.0 * means.get(f"episode_achievement_{a}", 0.0) for a in ACHIEVEMENTS]
        return {"craftax_score": math.exp(sum(math.log(1.0 + r) for r in rates) / len(rates)) - 1.0}

    def render(self) -> Tensor:
        """RGB frames of every world's local view [N, 72, 88, 3] uint8."""
        return render.render_rgb(self.s)


class WorldQueue:
    """Fresh worlds generated ahead and each handed to one episode (capture-safe).

    The queue holds ``size`` worlds and their first observations; ``head`` counts the worlds
    handed out, ``tail`` the worlds written, so the fresh ones are ``head .. tail - 1`` (modulo
    ``size``). Each step :meth:`refill` generates worlds behind ``tail`` for the slots emptied, at
    most ``refill`` (the launches are the same every step; on CUDA the kernels skip the worlds not
    needed and copy only those made, so the work follows the episodes that ended), and
    :meth:`draw` gives the ended envs the next worlds in env order (:meth:`draw_obs` their first
    observations); an env that finds the queue empty takes a used world and is flagged in
    ``reused``. A world is one row of the state's arena. ``kernels`` (:mod:`.triton_queue`, CUDA's
    default): the bookkeeping is one plan kernel each for refill and draw and the copies walk the
    rows listed; without them torch ops keep the counters and a select over every row copies.
    """

    def __init__(self, generate: Callable[[Tensor, State | None], State], observe: Callable[[State, Tensor], None],
                 size: int, refill: int, num_envs: int, obs_shape: tuple[int, ...], obs_dtype: torch.dtype,
                 device: torch.device, kernels: QueueKernels | None = None) -> None:
        self.generate, self.observe, self.size, self.refill_count = generate, observe, size, refill
        self.kernels = kernels
        self.device = torch.device(device)
        self.arena = torch.zeros((size, empty_state(1, self.device).arena.shape[1]), dtype=torch.uint8,
                                 device=self.device)
        self.obs = torch.zeros((size, *obs_shape), dtype=obs_dtype, device=self.device)
        self.head = torch.zeros((), dtype=torch.int64, device=self.device)
        self.tail = torch.full((), size, dtype=torch.int64, device=self.device)
        self._fresh = empty_state(refill, self.device)  # refill's worlds (zeroed rows: states the kernels can read)
        self._first = torch.zeros((refill, *obs_shape), dtype=obs_dtype, device=self.device)
        self.serial = torch.zeros((), dtype=torch.int64, device=self.device)
        """The serial of the next world to generate (the queue's worlds are numbered in order)."""
        self.slot_serial = torch.zeros(size, dtype=torch.int64, device=self.device)
        """The serial of the world each slot holds."""
        if kernels is None:  # the torch bookkeeping's index tables
            self._offsets = torch.arange(refill, device=self.device)
            self._slots = torch.arange(size, device=self.device)
        else:  # the kernels' plans: the serials to make, (destination, source) row pairs and their number
            self._serials = torch.empty(refill, dtype=torch.int64, device=self.device)
            self._refill_pairs = torch.empty((refill, 2), dtype=torch.int64, device=self.device)
            self._draw_pairs = torch.empty((num_envs, 2), dtype=torch.int64, device=self.device)
            self._counts = torch.zeros(2, dtype=torch.int64, device=self.device)
        self._last: tuple[Tensor, Tensor] | bool | None = None  # what the last draw handed out, for draw_obs

    def fill(self) -> None:
        """New worlds 0 .. size - 1 in every slot (on ``reset(seed)``, so a seed fixes the worlds)."""
        self.slot_serial.copy_(torch.arange(self.size, device=self.device))
        self.serial.fill_(self.size)
        self.regenerate()
        self.head.zero_()
        self.tail.fill_(self.size)

    def regenerate(self) -> None:
        """Every slot's world (and first observation) from its serial, in chunks."""
        chunk = GENERATION_CHUNK
        for start in range(0, self.size, chunk):
            fresh = self.generate(self.slot_serial[start : start + chunk], None)
            self.arena[start : start + chunk].copy_(fresh.arena)
            self.observe(fresh, self.obs[start : start + chunk])

    def refill(self) -> None:
        """Generate fresh worlds behind the last one written, one for each empty slot, at most ``refill``."""
        k = self.kernels
        if k is not None:
            count = self._counts[0:1]
            k.plan_refill(self.head, self.tail, self.serial, self.slot_serial, self._serials, self._refill_pairs, count)
            fresh = self.generate(self._serials, self._fresh)
            self.observe(fresh, self._first)
            k.copy_rows(self._refill_pairs, count, self.arena, fresh.arena, self._bytes(self.obs),
                        self._bytes(self._first))
            return
        empty = (self.head + self.size - self.tail).clamp(0, self.refill_count)
        serials = torch.where(self._offsets < empty, self.serial + self._offsets, -1)  # -1: not made
        fresh = self.generate(serials, self._fresh)
        self.observe(fresh, self._first)
        behind = (self._slots - self.tail) % self.size  # each slot's place behind the tail
        new = behind < empty
        made = behind.clamp(max=self.refill_count - 1)
        self.slot_serial.copy_(torch.where(new, self.serial + behind, self.slot_serial))
        self.serial.add_(empty)
        self._select(self.arena, fresh.arena, new, made)
        self._select(self._bytes(self.obs), self._bytes(self._first), new, made)
        self.tail.add_(empty)

    def draw(self, mask: Tensor, into: State, reused: Tensor, episode: Tensor) -> None:
        """Copy the next worlds into the rows of ``into`` where ``mask`` [N] is True (in env order);
        ``reused`` [N]: whether each found the queue empty; ``episode`` [N] counts up where ``mask``."""
        k = self.kernels
        if k is not None:
            count = self._counts[1:2]
            k.plan_draw(mask, episode, reused, self.head, self.tail, self.size, self._draw_pairs, count)
            k.copy_rows(self._draw_pairs, count, into.arena, self.arena)
            self._last = True
            return
        episode.add_(mask.long())
        absolute = self.head + torch.cumsum(mask.long(), 0) - 1  # the ended envs in env order
        src = absolute % self.size
        reused.copy_(torch.where(mask, absolute >= self.tail, reused))
        self._select(into.arena, self.arena, mask, src)
        self._last = (mask, src)
        self.head.add_(mask.sum())
        self.tail.copy_(torch.maximum(self.tail, self.head))

    def draw_obs(self, out: Tensor) -> None:
        """Copy the first observations of the worlds the last :meth:`draw` handed out into ``out``."""
        if self._last is True:
            self.kernels.copy_rows(self._draw_pairs, self._counts[1:2], self._bytes(out), self._bytes(self.obs))
        else:
            mask, src = self._last
            self._select(self._bytes(out), self._bytes(self.obs), mask, src)

    @staticmethod
    def _bytes(t: Tensor) -> Tensor:
        """``t`` [n, ...] as byte rows [n, B]."""
        return t.view(t.shape[0], -1).view(torch.uint8)

    @staticmethod
    def _select(dst: Tensor, src: Tensor, mask: Tensor, rows_: Tensor) -> None:
        """``dst[e] = src[rows_[e]]`` where ``mask``: a select over every row (work for all, but fixed
        shapes and no sync, so the CPU runs what a recording holds: ``noeira.core.testing.check_env_capture``
        checks it)."""
        dst.copy_(torch.where(mask.unsqueeze(1), src.index_select(0, rows_), dst))

    # in-step scratch (``noeira verify-graph`` skips them)
    __scratch__ = ("_slots", "_last", "_fresh", "_first", "_serials", "_refill_pairs", "_draw_pairs", "_counts")
