"""Craftax-Classic (Matthews et al., "Craftax: A Lightning-Fast Benchmark for Open-Ended
Reinforcement Learning", ICML 2024) for ``N`` worlds at once in torch, exact to the reference
(pip ``craftax==1.6.1``, ``craftax.craftax_classic``, symbolic, default ``EnvParams``).

- Observation: ``Box`` of 1,345 float32, the reference's symbolic layout (:mod:`.render`);
  with ``obs = "compact"`` an ``Encoded`` space of 148 bytes that decodes to the same floats
  (36x less memory traffic for buffers and rollouts; policies decode where they read it).
- Action: ``Discrete(17)`` (noop, left, right, up, down, do, sleep, place stone / table /
  furnace / plant, make wood / stone / iron pickaxe, make wood / stone / iron sword).
- Reward: achievements newly unlocked + 0.1 x the change of health (:mod:`.game`).
- The reference ends an episode with one ``done``; here ``terminated`` = dead or standing
  on lava, ``truncated`` = the 10,000-step limit and not terminated. Same-step autoreset.
- State: ``get_state()``/``set_state()`` exchange the reference's ``EnvState`` leaves as a dict
  of batched tensors (:mod:`.state`; ``state_rng`` left out).
- Randomness: the reference's distributions. Mob moves, spawns, saplings and some skeleton
  moves draw from the env's device generator (``kernel=torch``) or the kernels' own Philox
  stream; the rest is exact.
- Resets: every episode starts in a world generated for it, when it starts, from a key that
  is its own: Philox keyed by the run's ``world_key`` (drawn from the generator at
  ``reset(seed)``) on counters (draw, env, the env's ``episode`` count) (:mod:`.worldgen`).
  So ``N`` envs of a ``reset`` get ``N`` worlds and no world is handed to two episodes,
  whatever the batch size or the episode lengths; the same seed gives the same worlds on
  either kernel. The Triton step generates them for the envs that ended, listed by its kernel,
  on a fixed grid (the work follows the resets; recordable); the torch step lists them with
  ``nonzero`` (a host sync, so ``kernel=torch`` is not capture-safe).
- Episode statistics: ``episode_achievement_<name>`` (the share of episodes that unlocked
  it) for the 22 achievements, and ``craftax_score`` (their geometric mean, Craftax's score).
- The step: ``kernel = "triton"`` runs it as fused Triton kernels (:mod:`.triton_step`, the
  default on CUDA where Triton is installed: rules, time limit, episode sums and observations
  in a few kernels, the variates from the kernel's own Philox stream); ``"torch"`` runs it as
  torch ops (:mod:`.game`, the reference for the kernels, on any device).
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping

import attrs
import torch
from torch import Tensor

from noeira.core import Backend, Box, ConfigError, Discrete, Encoded, TensorEnv
from noeira.core.contracts import StepResult
from noeira.core.envbase import EnvList
from noeira.envs.craftax import game, render, worldgen
from noeira.envs.craftax.constants import ACHIEVEMENTS, MAX_TIMESTEPS, NUM_ACTIONS, OBS_SIZE, light_tables
from noeira.envs.craftax.state import empty_state, export_state, import_state

__all__ = ["CraftaxClassic"]


class CraftaxClassic(TensorEnv):
    """``num_envs`` Craftax-Classic worlds (see the module docstring)."""

    name = "craftax-classic"
    episode_stat_keys = tuple(f"achievement_{a}" for a in ACHIEVEMENTS)

    @attrs.frozen
    class Config:
        validate_actions: bool = False
        """Check every action's shape, dtype and range before stepping (syncs with the host:
        for debugging, not for speed or graph capture)."""
        obs: str = "symbolic"
        """``symbolic``: the reference's 1,345 float32; ``compact``: the same as 148 bytes (an
        ``Encoded`` space that decodes to them bit for bit)."""
        kernel: str = "auto"
        """``triton``: the fused Triton step (on a CPU only under ``TRITON_INTERPRET=1``);
        ``torch``: torch ops; ``auto``: triton on CUDA when Triton is installed, else torch."""

    def __init__(self, config: Config, *, num_envs: int, backend: Backend, seed: int | None) -> None:
        dev = backend.device
        if config.obs not in ("symbolic", "compact"):
            raise ConfigError(f"env.obs: must be 'symbolic' or 'compact', got {config.obs!r}")
        self.kernel = _choose_kernel(config.kernel, torch.device(dev))
        symbolic = Box(torch.zeros(OBS_SIZE), torch.ones(OBS_SIZE), dtype=torch.float32, device=dev)
        self.compact = config.obs == "compact"
        space = Encoded((render.COMPACT_SIZE,), torch.uint8, symbolic, render.expand, dev,
                        decode_into=render.expand_into) if self.compact else symbolic
        super().__init__(
            num_envs,
            backend,
            space,
            Discrete(NUM_ACTIONS, device=dev),
            MAX_TIMESTEPS,
            seed=seed,
            capture_safe=self.kernel == "triton",  # the torch step lists the worlds to reset on the host
            validate_actions=config.validate_actions,
        )
        self.config = config
        light, zombie_chance = light_tables(MAX_TIMESTEPS + 1)
        self.tables = game.Tables(dev, light, zombie_chance)
        self._light0 = float(light[0])
        self.s = empty_state(num_envs, dev)
        self.world_key = torch.zeros(1, dtype=torch.int64, device=dev)
        """The run's key of the worlds: episode ``k`` of env ``e`` starts in the world of
        Philox(``world_key``, (draw, ``e``, ``k``)) (:func:`.worldgen.episode_draws`)."""
        self.episode = torch.zeros(num_envs, dtype=torch.int64, device=dev)
        """The episode each env is in, counted from 0 at ``reset(seed)``."""
        self._new_world_key()
        if self.kernel == "triton":
            from noeira.envs.craftax import triton_step, triton_worldgen

            if self._stats.numel() != triton_step.STATS:  # the kernel sums what TensorEnv.step would
                raise RuntimeError("craftax: the step kernel's episode sums are not TensorEnv._stats' layout")
            self._triton = triton_step.Step(num_envs, torch.device(dev))
            self._seed = torch.zeros(1, dtype=torch.int64, device=dev)  # the kernels' Philox key, +1 per step
            self._gen = triton_worldgen.WorldGen(num_envs, torch.device(dev))
            self._listed = EnvList(num_envs, torch.device(dev))
            # the compact observations the kernels write (the result buffers themselves when compact)
            self._final_code = self._result.final_obs if self.compact else torch.zeros(
                (num_envs, render.COMPACT_SIZE), dtype=torch.uint8, device=dev)
            self._obs_code = self._result.obs if self.compact else torch.zeros_like(self._final_code)
            # built here, not at the first step: it is a host-to-device copy (a sync)
            self._tenths = None if self.compact else render._tenths_table(torch.device(dev))
        self.reset(seed)

    def _new_world_key(self) -> None:
        """A new run of worlds: ``world_key`` from the generator, every env before its episode 0."""
        self.world_key.copy_(torch.randint(0, 2**62, (1,), generator=self.generator, device=self.device))
        self.episode.fill_(-1)

    # -- TensorEnv -----------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Tensor:
        """Every env starts a new episode in a new world; ``seed`` fixes them (and what follows),
        without it the episode counts go on from where they are."""
        if seed is not None:
            self.generator.manual_seed(seed)
            self._new_world_key()
        if self.kernel == "triton":
            self._seed.copy_(torch.randint(0, 2**62, (1,), generator=self.generator, device=self.device))
        return super().reset()

    def _reset_envs(self, mask: Tensor) -> None:
        """A world of its own for the next episode of each env in ``mask``."""
        if self.kernel == "triton":
            self._listed.select(mask)
            self._gen(self.s, self._listed.rows, self._listed.count, self._light0, key=self.world_key,
                      episode=self.episode)
            return
        rows = mask.nonzero().squeeze(1)  # a host sync (declared: capture_safe is False)
        if rows.numel() == 0:
            return
        self.episode.index_add_(0, rows, torch.ones_like(rows))
        fresh = worldgen.generate(self.world_key, rows, self.episode.index_select(0, rows), self._light0)
        for key, value in self.s.items():
            value.index_copy_(0, rows, fresh[key])

    def _advance(self, action: Tensor) -> tuple[Tensor, Tensor]:
        draws = game.sample_draws(self.num_envs, self.generator, self.device)
        return game.step(self.s, action, draws, self.tables)

    def step(self, action: Tensor) -> StepResult:
        if self.kernel == "triton":
            return self._kernel_step(action)
        r = super().step(action)
        r.truncated &= ~r.terminated  # the time limit counts only for worlds still alive
        return r

    # Opaque to torch.compile (the ``device`` graph): the step is hand-fused Triton kernels that
    # Inductor cannot improve, and tracing their launchers fails on some versions (torch 2.11
    # cannot lower the bool state's byte views); the graph break costs nothing once recorded.
    @torch.compiler.disable
    def _kernel_step(self, action: Tensor, draws: Mapping[str, Tensor] | None = None) -> StepResult:
        """TensorEnv.step's work on the Triton kernels (``draws``: variates to replay, for tests)."""
        from noeira.envs.craftax import triton_step

        if self.validate_actions:
            self._check(action)
        r, k = self._result, self._triton
        partial = k.env(self.s, action, self.tables, self._seed, r.reward, r.terminated, r.truncated, self.elapsed,
                        self.episode_return, self.episode_length, self._final_code, self._obs_code, MAX_TIMESTEPS,
                        draws=None if draws is None else dict(draws))
        self._seed.add_(1)
        self._stats += partial.sum(0)  # per-program sums added in a fixed order: deterministic
        # a world of its own for each world that ended (listed by the step kernel, with its count)
        self._gen(self.s, k.done_queue, k.done_count, self._light0, key=self.world_key, episode=self.episode)
        k.observe_reset(self.s, self._obs_code)
        if not self.compact:
            triton_step.expand(self._final_code, r.final_obs, self._tenths)
            triton_step.expand(self._obs_code, r.obs, self._tenths)
        return r

    def _check(self, action: Tensor) -> None:
        from noeira.core.envbase import check_action

        check_action(self.action_space, action, self.num_envs)

    def _observe(self, out: Tensor) -> None:
        if self.compact:
            render.compact(self.s, out)
        else:
            render.symbolic(self.s, out)

    def get_state(self) -> dict[str, Tensor]:
        """The reference's ``EnvState`` leaves, batched: ``{"map": [N, 64, 64] int32, ...}``."""
        return export_state(self.s)

    def _set_state(self, state: dict[str, Tensor]) -> None:
        import_state(state, self.s)
        self.elapsed.copy_(self.s["timestep"])

    def _extra_state(self) -> dict[str, Tensor]:
        """The worlds' key and each env's episode count (they fix the next worlds), and the Triton
        step's Philox key (checkpoints: ``TensorEnv.state_dict``)."""
        out = {"world_key": self.world_key, "episode": self.episode}
        if self.kernel == "triton":
            out["kernel_key"] = self._seed
        return out

    def _episode_values(self) -> dict[str, Tensor]:
        ach = self.s["achievements"].float()
        return {k: ach[:, i] for i, k in enumerate(self.episode_stat_keys)}

    def episode_metrics(self, means: Mapping[str, float]) -> dict[str, float]:
        """``craftax_score``: the geometric mean over the achievements of 1 + the success rate in
        percent, minus 1 (Craftax's score)."""
        rates = [100.0 * means.get(f"episode_achievement_{a}", 0.0) for a in ACHIEVEMENTS]
        return {"craftax_score": math.exp(sum(math.log(1.0 + r) for r in rates) / len(rates)) - 1.0}

    def render(self) -> Tensor:
        """RGB frames of every world's local view [N, 56, 72, 3] uint8."""
        return render.render_rgb(self.s)


def _choose_kernel(name: str, device: torch.device) -> str:
    """``env.kernel`` resolved: ``triton`` or ``torch`` (one-line errors for what cannot run)."""
    if name not in ("auto", "triton", "torch"):
        raise ConfigError(f"env.kernel: must be 'auto', 'triton' or 'torch', got {name!r}")
    has_triton = importlib.util.find_spec("triton") is not None
    interpret = os.environ.get("TRITON_INTERPRET", "") == "1"
    if name == "auto":
        return "triton" if has_triton and device.type == "cuda" else "torch"
    if name == "triton":
        if not has_triton:
            raise ConfigError("env.kernel: 'triton' needs Triton (it ships with PyTorch's CUDA builds: pip install triton)")
        if device.type != "cuda" and not interpret:
            raise ConfigError(f"env.kernel: 'triton' runs on cuda, or on {device.type} under TRITON_INTERPRET=1 "
                              "(slow: for tests)")
    return name
