"""What PPO and A2C share, by composition: :class:`ActorCriticRollout` owns the actor-critic,
its rollout storage, the sampling generator, the reward scaler and the recurrent state of the
training envs, and does the acting and collecting; each algorithm owns its optimizer and its
update. Plus the small functions both updates use.

``collect`` steps the batched env ``horizon`` times writing into preallocated ``[horizon,
num_envs]`` buffers, on the device, capture-safe. A recurrent policy's state for the training
envs lives on the device; its value at the segment start is stored (``buf.state0``) with the
episode-start flags (``buf.starts``), so the update replays each segment from there.

Precision: the rollout owns the :class:`~noeira.agents.precision.MasterWeights` of its policy;
an algorithm builds its optimizer through :meth:`ActorCriticRollout.make_optimizer` and clips
through :meth:`ActorCriticRollout.clip_gradients`, so ``bf16-master`` steps float32 masters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from noeira.agents.exportable import FeedForwardPolicy, RecurrentPolicy
from noeira.agents.optim import make_optimizer
from noeira.agents.policy import ActorCritic, ActorCriticConfig, precision_of
from noeira.agents.precision import MasterWeights, autocast
from noeira.agents.rollout import RewardScaler, Rollout
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, PolicyState
from noeira.core.errors import ConfigError
from noeira.core.rng import restore_generator

__all__ = ["ActorCriticRollout", "anneal_factor", "bootstrap_at_end", "explained_variance", "schedule",
           "segment_minibatches"]


class ActorCriticRollout:
    """The acting half of an on-policy agent (see the module docstring)."""

    def __init__(self, spec: EnvSpec, backend: Backend, cfg: ActorCriticConfig, horizon: int, gamma: float) -> None:
        dev = backend.device
        self.spec, self.device, self.horizon = spec, dev, horizon
        self.precision = precision_of(cfg)
        self.norm_obs = cfg.norm_obs
        n = spec.num_envs
        self.steps_per_collect = horizon * n
        self.policy = ActorCritic(spec, cfg, dev)
        self.recurrent = self.policy.recurrent
        self.weights = MasterWeights(self.policy, self.precision)
        self.reward_clamp = cfg.reward_clamp
        self.reward_scaler = RewardScaler(n, gamma, cfg.reward_clip, dev) if cfg.norm_reward else None
        init = self.policy.initial_state(n)
        head = self.policy.head
        # an Encoded observation is stored as its code (1,345 floats of Craftax are 148 bytes) and
        # decoded where the update reads it; with observation normalisation, the normalised input
        space = spec.observation_space
        # a network that reads raw observations (a CNN on uint8 frames) gets them stored as they are
        self.store_code = (self.policy.decode is not None or self.policy.reads_raw) and not cfg.norm_obs
        code = (tuple(space.shape), space.dtype) if self.store_code else None
        self.buf = Rollout(horizon, n, self.policy.obs_dim, head.action_shape, head.action_dtype, dev, init, code)
        # the one generator for sampling actions and minibatches, seeded from torch's global RNG
        # (which the driver seeds with run.seed)
        self.generator = backend.generator(int(torch.randint(0, 2**62, (1,)).item()))
        # the training envs' policy state and episode-start flags, carried across collects
        self.state: PolicyState = None if init is None else init.clone()
        self.starts = torch.ones(n, dtype=torch.bool, device=dev)
        self.steps_done = torch.zeros((), dtype=torch.float64, device=dev)
        # the bootstrap through truncation: valued at the end of the rollout from what the
        # truncated envs reached (their final observation, as stored, and the policy state)
        self.bootstrap_at_end = bootstrap_at_end(cfg.bootstrap, spec, horizon)
        if self.bootstrap_at_end:
            shape, dtype = ((space.shape, space.dtype) if self.store_code else ((self.policy.obs_dim,), torch.float32))
            self.truncated_obs = torch.zeros((n, *shape), dtype=dtype, device=dev)
            self.truncated_state: PolicyState = None if init is None else torch.zeros_like(init)

    def make_optimizer(self, name: str, lr: float, **options: Any) -> torch.optim.Optimizer:
        """The optimizer ``name`` over the parameters the precision trains (the float32 masters
        under ``bf16-master``, which it recasts into the working weights after each step)."""
        return self.weights.attach(make_optimizer(name, self.weights.parameters(), lr, **options))

    def clip_gradients(self, max_norm: float) -> Tensor:
        """After backward: the gradients into the optimizer's parameters (``bf16-master``: the
        float32 masters), their global norm clipped to ``max_norm`` (0: no clipping); returns the
        norm before clipping (0 when not clipping)."""
        return self.weights.clip_gradients(max_norm)

    def autocast(self) -> Any:
        return autocast(self.precision, self.device)

    @torch.no_grad()
    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, PolicyState]:
        """``obs [B, *obs_shape]`` -> (env actions ``[B, *act_shape]`` clipped to a Box, next state)."""
        x = self.policy.observe(obs)
        if self.recurrent and state is None:
            state = self.policy.initial_state(x.shape[0])
        with self.autocast():
            if deterministic:
                action, state = self.policy.mode(x, state, done)
            else:
                action, _, _, state = self.policy.act(x, state, done, self.generator)
        return self.policy.head.to_env(action), state

    def policy_module(self) -> nn.Module:
        """The deterministic policy as one module (``noeira export``): normalisation, network and
        the most likely action as the env takes it; a recurrent network's state is an explicit
        input and output (batch in dimension 1)."""
        policy = self.policy

        def act(obs: Tensor, state: PolicyState = None, done: Tensor | None = None) -> tuple[Tensor, PolicyState]:
            action, state = policy.mode(policy.observe(obs), state, done)
            return policy.head.to_env(action), state

        if self.recurrent:
            return RecurrentPolicy(policy, act, policy.initial_state, state_batch_dim=1)
        return FeedForwardPolicy(policy, lambda obs: act(obs)[0])

    @torch.no_grad()
    def collect(self, env: BatchedEnv) -> None:
        """``horizon`` steps of every env into the rollout buffers."""
        buf, policy = self.buf, self.policy
        if self.state is not None:
            buf.state0.copy_(self.state)
        state = self.state
        obs = env.obs
        for t in range(self.horizon):
            x = policy.observe(obs, update=self.norm_obs)
            buf.starts[t] = self.starts
            with self.autocast():
                action, logprob, value, state = policy.act(x, state, self.starts, self.generator)
            buf.obs[t] = obs if self.store_code else x
            buf.actions[t] = action
            buf.logprobs[t] = logprob
            buf.values[t] = value

            step = env.step(policy.head.to_env(action))
            done = step.terminated | step.truncated
            # V(final_obs), read where truncated (and in the last row, the bootstrap of the
            # segment). A recurrent critic reads it with the state the episode reached.
            if self.bootstrap_at_end and t < self.horizon - 1:
                self._keep_truncated(step.truncated, step.final_obs, state)
            else:
                with self.autocast():
                    buf.final_values[t] = policy.value(policy.observe(step.final_obs), state)
            reward = step.reward.float()
            if self.reward_clamp > 0:
                reward = reward.clamp(-self.reward_clamp, self.reward_clamp)
            if self.reward_scaler is not None:
                reward = self.reward_scaler(reward, done)
            buf.rewards[t] = reward
            buf.terminated[t] = step.terminated
            buf.truncated[t] = step.truncated
            buf.dones[t] = done
            self.starts.copy_(done)
            obs = step.obs
        if self.bootstrap_at_end:
            self._value_truncated()
        if self.state is not None:
            self.state.copy_(state)
        self.steps_done += self.steps_per_collect

    def _keep_truncated(self, truncated: Tensor, final_obs: Tensor, state: PolicyState) -> None:
        """Keep what the envs truncated in this step reached (each truncates at most once a rollout)."""
        obs = final_obs if self.store_code else self.policy.observe(final_obs)  # normalised now, as every-step
        keep = truncated.view(-1, *([1] * (obs.dim() - 1)))
        torch.where(keep, obs, self.truncated_obs, out=self.truncated_obs)
        if state is not None:
            if self.truncated_state.dtype != state.dtype:  # a network whose state is not float32 (metadata: no sync)
                self.truncated_state = torch.zeros_like(state)
            torch.where(truncated.view(1, -1, *([1] * (state.dim() - 2))), state, self.truncated_state,
                        out=self.truncated_state)

    def _value_truncated(self) -> None:
        """``final_values`` of the rows before the last where an env truncated: one critic pass
        over what each env kept (0 in the rows not truncated, which no estimator reads)."""
        x = self.policy.observe(self.truncated_obs) if self.store_code else self.truncated_obs
        with self.autocast():
            v = self.policy.value(x, self.truncated_state)
        rows = self.buf.final_values[:-1]
        torch.where(self.buf.truncated[:-1], v, torch.zeros((), device=v.device), out=rows)

    def evaluate(self, idx: Tensor, segments: bool) -> tuple[Tensor, Tensor, Tensor]:
        """The stored actions under the current weights: ``(log_prob, entropy, value)``, flat.
        ``segments``: ``idx`` are env indices and each whole segment is replayed from its stored
        state (required for a recurrent policy); else ``idx`` are flat row indices."""
        buf = self.buf
        dim = self.policy.obs_dim
        # a network that reads codes decodes them itself; raw observations go in as they are
        decode = self.store_code and self.policy.decode is not None and not self.policy.reads_code
        read = (lambda code: self.policy.decode(code).reshape(*code.shape[:-1], dim)) if decode else (  # noqa: E731
            lambda x: x)
        with self.autocast():
            if segments:
                state0 = None if buf.state0 is None else buf.state0[:, idx]
                out = self.policy.evaluate_sequence(read(buf.obs[:, idx]), buf.actions[:, idx], state0,
                                                    buf.starts[:, idx])
                return tuple(y.reshape(-1) for y in out)  # type: ignore[return-value]
            flat = lambda x: x.view(self.steps_per_collect, *x.shape[2:])  # noqa: E731  [T, N, ...] -> [T*N, ...]
            return self.policy.evaluate(read(flat(buf.obs)[idx]), flat(buf.actions)[idx])

    def progress(self, total_steps: int) -> Tensor:
        """Fraction of the run done before this batch, a device scalar in [0, 1]."""
        if total_steps <= 0:
            return torch.zeros((), device=self.device)
        return ((self.steps_done - self.steps_per_collect) / total_steps).clamp(0, 1).float()

    def state_dict(self) -> dict[str, Any]:
        """Networks (with observation statistics), reward statistics, the step counter, the
        generator and what ``collect`` carries over to the next call for the training envs (their
        recurrent state, episode-start flags and running discounted return); under
        ``bf16-master`` the float32 masters too."""
        out = {
            "policy": self.policy.state_dict(),
            "reward_scaler": self.reward_scaler.state_dict() if self.reward_scaler is not None else None,
            "steps_done": self.steps_done.clone(),
            "generator": self.generator.get_state(),
            "training_envs": {k: v.clone() for k, v in self._training_envs().items()},
        }
        if self.weights.mixed:
            out["master"] = self.weights.state_dict()
        return out

    def _training_envs(self) -> dict[str, Tensor]:
        """The per-env tensors ``collect`` carries from one call to the next (live)."""
        out = {"starts": self.starts}
        if self.state is not None:
            out["state"] = self.state
        if self.reward_scaler is not None:
            out["reward_return"] = self.reward_scaler.ret
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load in place (tensors keep their storage, so recorded graphs stay valid). The
        training envs' per-env state is loaded where its shape fits (an agent built for
        another number of envs, to evaluate, leaves it out)."""
        self.policy.load_state_dict(state["policy"])
        self.weights.load_state_dict(state.get("master"))
        if self.reward_scaler is not None and state.get("reward_scaler") is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])
        self.steps_done.copy_(torch.as_tensor(state["steps_done"]))
        restore_generator(self.generator, state["generator"], "agent generator")
        saved = state.get("training_envs", {})
        for k, live in self._training_envs().items():
            if k in saved and tuple(saved[k].shape) == tuple(live.shape):
                live.copy_(saved[k])


def bootstrap_at_end(choice: str, spec: EnvSpec, horizon: int) -> bool:
    """``agent.bootstrap`` resolved: whether truncated episodes are valued at the end of the
    rollout (see ``ActorCriticConfig.bootstrap``)."""
    if choice not in ("auto", "every-step", "at-end"):
        raise ConfigError(f"agent.bootstrap: must be 'auto', 'every-step' or 'at-end', got {choice!r}")
    # an env without a time limit that truncates only there never truncates: nothing to value
    exact = bool(spec.truncates_at_limit_only) and (spec.max_episode_steps is None or spec.max_episode_steps >= horizon)
    if choice == "at-end" and not exact:
        raise ConfigError(f"agent.bootstrap: 'at-end' needs an env that truncates only at a time limit of at least "
                          f"horizon ({horizon}) steps; {spec.name!r} does not promise that (use 'every-step' or 'auto')")
    return exact and choice != "every-step"


def anneal_factor(progress: Tensor) -> Tensor:
    """Linear annealing to 0 over the run: ``1 - progress``."""
    return 1.0 - progress


def schedule(progress: Tensor, kind: str, start: float, end: float) -> Tensor:
    """A value going from ``start`` (progress 0) to ``end`` (progress 1), as device arithmetic:
    ``linear``: ``start + (end - start) * progress``; ``cosine``: ``end + (start - end) *
    (1 + cos(pi * progress)) / 2``. (``linear`` from 1 to 0 is :func:`anneal_factor` bit for bit.)"""
    if kind == "cosine":
        return end + (start - end) * 0.5 * (1.0 + torch.cos(progress * math.pi))
    if start == 1.0 and end == 0.0:
        return anneal_factor(progress)
    return start + (end - start) * progress


def explained_variance(values: Tensor, returns: Tensor) -> Tensor:
    """``1 - Var(R - V) / Var(R)``: how much of the returns' variance the critic explains."""
    return 1 - (returns - values).var() / (returns.var() + 1e-8)


def segment_minibatches(num_envs: int, num_minibatches: int) -> int:
    """Envs per minibatch when minibatches are whole env segments (recurrent policies,
    prioritized sampling); a :class:`ConfigError` when there are fewer envs than minibatches."""
    per = num_envs // num_minibatches
    if per < 1:
        raise ConfigError(f"agent.num_minibatches: minibatches of whole env segments need >= {num_minibatches} envs, "
                          f"got {num_envs}")
    return per
