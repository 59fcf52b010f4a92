"""DQN (Mnih et al. 2015) and its family as options: double Q-learning, a dueling head, noisy
nets, n-step returns, prioritized replay, distributional C51 (``num_atoms > 1``); ``c51`` and
``rainbow`` are this agent with those options as their defaults (Hessel et al. 2018: Rainbow is
all of them together).

The whole loop runs on the device (see :mod:`noeira.agents.offpolicy`): ``collect`` acts
ε-greedily (ε falls linearly from ``epsilon_start`` to ``epsilon_end`` over
``exploration_steps`` env steps; uniform random before ``learning_starts``; with ``noisy`` the
network's noise is redrawn every step) and stores the transitions in the device replay buffer;
``learn`` runs ``updates_per_step`` TD updates.

TD target (n-step when ``n_step > 1``, see :mod:`noeira.agents.replay`)::

    y = R + gamma^m * (1 - terminated) * Q_target(s', a*)
    a* = argmax_a Q(s', a)          (double DQN)   or   argmax_a Q_target(s', a)

Distributional (``num_atoms > 1``, C51, Bellemare et al. 2017): the network gives each action a
categorical distribution over ``atoms`` returns evenly spaced on ``[v_min, v_max]``; Q is its
mean. The target distribution is the target network's at ``(s', a*)`` moved to
``R + gamma^m (1 - terminated) z`` and projected back onto the atoms
(:func:`~noeira.agents.critics.project_categorical`); the loss is the cross-entropy to it.

Prioritized replay (``prioritized``, Schaul et al. 2016): transitions are drawn with probability
``p_i^alpha / sum p^alpha`` from a sum tree on the device (:mod:`noeira.agents.prioritized`),
``p_i`` their last |TD error| (C51: cross-entropy); each loss term is weighted by
``(M P(i))^-beta`` (normalised by the batch's largest), ``beta`` annealed from ``prio_beta0`` to
1 over the run. A learn() draws its ``updates_per_step`` batches at once, before its updates.

With ``ez_exponent`` > 1 exploration is temporally extended (εz-greedy, Dabney, Ostrovski and
Barreto 2021): an env not already repeating starts, with probability ε, a random action held
for ``n ~ zeta(ez_exponent)`` steps (capped at ``ez_max_repeat``), and acts greedily otherwise.
Held actions travel where one-step dithering cannot (MountainCar's flag).

The network (:class:`~noeira.agents.qnet.QNet`): ``network = "mlp"`` (the observation flattened)
or a CNN torso (``nature-cnn``, ``impala-cnn``: Atari frames, stored as bytes in the buffer),
then the fully connected layers ``hidden`` in one stream (two with ``dueling``).

The target network follows the online one by Polyak averaging with rate ``tau`` every
``target_update_interval`` updates (``tau = 1``: the classic hard copy). That interval is
counted on the device, so the update stays capture-safe.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from noeira.agents.critics import project_categorical
from noeira.agents.offpolicy import OffPolicyAgent, OffPolicyConfig, online_and_target
from noeira.agents.prioritized import SumTree
from noeira.agents.qnet import QNet
from noeira.agents.replay import Batch
from noeira.core.config import at_least, one_of
from noeira.core.contracts import Backend, EnvSpec
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError
from noeira.core.recipes import UNTESTED, RecipeTables, pick_recipe

__all__ = ["C51", "DQN", "RECIPES", "Rainbow", "recipe"]


class DQN(OffPolicyAgent):
    """Deep Q-Network for ``Discrete`` action spaces, with the family's options."""

    discrete = True

    @attrs.frozen
    class Config(OffPolicyConfig):
        """DQN's keys (with those every off-policy agent takes)."""

        learning_rate: float = 2.5e-4
        """Learning rate."""
        adam_eps: float = 1e-8
        """Adam's epsilon (CleanRL's C51 and Rainbow on Atari: 0.01 / batch_size)."""
        epsilon_start: float = 1.0
        """ε of ε-greedy exploration at the start."""
        epsilon_end: float = 0.05
        """ε after ``exploration_steps`` env steps."""
        exploration_steps: int = attrs.field(default=250_000, validator=at_least(1))
        """Env steps (all envs together) over which ε falls linearly."""
        double: bool = True
        """Double DQN: the online network picks the next action, the target network rates it."""
        dueling: bool = False
        """Dueling streams: Q = V + A - mean(A) (per atom with num_atoms > 1)."""
        noisy: bool = False
        """Noisy nets: factorised-Gaussian NoisyLinear layers in the streams, noise redrawn every env step
        and every update (set the ε keys to 0 to explore by the noise alone)."""
        num_atoms: int = 1
        """1: Q-values (DQN); > 1: C51's categorical return distribution over this many atoms."""
        v_min: float = -10.0
        """num_atoms > 1: the smallest return of the support."""
        v_max: float = 10.0
        """num_atoms > 1: the largest return of the support."""
        prioritized: bool = False
        """Prioritized replay: draw transitions with probability ~ |TD error|^prio_alpha (a sum tree on the device)."""
        prio_alpha: float = 0.5
        """Prioritized replay: how much the priorities count (0: uniform)."""
        prio_beta0: float = 0.4
        """Prioritized replay: the importance-weight exponent at the start, annealed to 1 over the run."""
        prio_eps: float = 1e-6
        """Prioritized replay: added to |TD error| so no transition has priority 0."""
        network: str = "mlp"
        """Torso: mlp (the observation flattened) or a CNN for frames (nature-cnn, impala-cnn)."""
        network_options: dict[str, Any] = attrs.field(factory=dict)
        """The torso's own options (a CNN's channels, norm)."""
        reward_clamp: float = 0.0
        """Clip rewards to +- this before storing them (0: off; Atari recipes: 1)."""
        tau: float = 1.0
        """Target-network averaging rate at each target update (1.0: hard copy)."""
        target_update_interval: int = attrs.field(default=50, validator=at_least(1))
        """Gradient updates between target-network updates."""
        loss: str = attrs.field(default="mse", validator=one_of("mse", "huber"))
        """TD loss (num_atoms = 1): mse | huber."""
        max_grad_norm: float = 10.0
        """Clip the gradient norm to this (0: no clipping)."""
        ez_exponent: float = 0.0
        """εz-greedy: each random action is held for n ~ zeta(ez_exponent) steps, P(n) ~ n^-ez_exponent
        (the paper's choice: 2.0; smaller holds longer). 0: plain ε-greedy (one step each)."""
        ez_max_repeat: int = attrs.field(default=100, validator=at_least(1))
        """εz-greedy: the longest hold, in steps."""

    config: Config

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config, *, training: bool = True) -> None:
        super().__init__(spec, backend, config, training=training)
        cfg = config
        if cfg.ez_exponent != 0 and not cfg.ez_exponent > 1:
            raise ConfigError(f"agent.ez_exponent: must be 0 (off) or > 1, got {cfg.ez_exponent}")
        if cfg.num_atoms < 1 or cfg.num_atoms == 2 or not cfg.v_max > cfg.v_min:
            raise ConfigError(f"agent.num_atoms / v_min / v_max: num_atoms must be 1 or >= 3 and v_max > v_min, got "
                              f"{cfg.num_atoms}, {cfg.v_min}, {cfg.v_max}")
        if cfg.prioritized and not (cfg.prio_alpha >= 0 and 0 <= cfg.prio_beta0 <= 1 and cfg.prio_eps > 0):
            raise ConfigError("agent.prio_alpha / prio_beta0 / prio_eps: need alpha >= 0, beta0 in [0, 1], eps > 0")
        # εz-greedy: each env's held action and the steps it has left; the zeta law's CDF on 1..max
        self.hold_action = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self.hold_steps = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        pmf = torch.arange(1, cfg.ez_max_repeat + 1, dtype=torch.float64).pow(-cfg.ez_exponent)
        self.hold_cdf = (pmf.cumsum(0) / pmf.sum()).float().to(self.device)
        self.q, self.q_target = online_and_target(
            functools.partial(QNet, hidden=cfg.hidden, network=cfg.network, network_options=cfg.network_options,
                              num_atoms=cfg.num_atoms, dueling=cfg.dueling, noisy=cfg.noisy, device=self.device),
            tuple(spec.observation_space.shape), self.num_actions, device=self.device)
        self.nets.update({"q": self.q, "q_target": self.q_target})
        self.optimizer = self.add_optimizer("q", self.q.parameters(), cfg.learning_rate, eps=cfg.adam_eps)
        self.support = torch.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms, device=self.device)
        """C51's atoms (the returns its distributions put mass on)."""
        self.tree = SumTree(self.rb, cfg.prio_alpha, cfg.prio_eps) if cfg.prioritized else None
        self.total_steps = 1
        # prioritized: this learn()'s drawn leaves and importance weights [U, B], written in place
        self.drawn_leaf = torch.zeros((cfg.updates_per_step, cfg.batch_size), dtype=torch.int64, device=self.device)
        self.drawn_weight = torch.zeros((cfg.updates_per_step, cfg.batch_size), device=self.device)

    def set_total_steps(self, total_steps: int) -> None:
        """The run's length: prioritized replay's beta reaches 1 at its end."""
        self.total_steps = max(1, int(total_steps))

    # -- acting ---------------------------------------------------------------------------------
    def q_values(self, obs: Tensor) -> Tensor:
        """``[B, A]``: Q-values, or the means of the return distributions (num_atoms > 1)."""
        out = self.q(obs)
        if self.config.num_atoms == 1:
            return out
        return (out.float().softmax(-1) * self.support).sum(-1)

    def epsilon(self) -> Tensor:
        """ε now (device scalar), from the device step counter."""
        cfg = self.config
        frac = (self.env_steps.float() / cfg.exploration_steps).clamp(max=1.0)
        return cfg.epsilon_start + (cfg.epsilon_end - cfg.epsilon_start) * frac

    def _epsilon_greedy(self, obs: Tensor, eps: Tensor) -> Tensor:
        greedy = self.q_values(obs).argmax(-1)
        n = obs.shape[0]
        random = torch.randint(0, self.num_actions, (n,), generator=self.generator, device=self.device)
        coin = torch.rand(n, generator=self.generator, device=self.device)
        return torch.where(coin < eps, random, greedy)

    def explore(self, obs: Tensor) -> Tensor:
        if self.config.noisy:
            self.q.resample_noise(self.generator)
        if self.config.ez_exponent <= 0:
            return self._epsilon_greedy(obs, self.epsilon())
        return self._ez_greedy(obs, self.epsilon())

    def _ez_greedy(self, obs: Tensor, eps: Tensor) -> Tensor:
        """εz-greedy over the training envs: hold, start a hold with probability ε, else greedy."""
        greedy = self.q_values(obs).argmax(-1)
        n = obs.shape[0]
        random = torch.randint(0, self.num_actions, (n,), generator=self.generator, device=self.device)
        coin = torch.rand(n, generator=self.generator, device=self.device)
        u = torch.rand(n, generator=self.generator, device=self.device)
        length = torch.searchsorted(self.hold_cdf, u, right=True).clamp(max=self.config.ez_max_repeat - 1) + 1
        start = (self.hold_steps == 0) & (coin < eps)
        torch.where(start, random, self.hold_action, out=self.hold_action)
        torch.where(start, length, self.hold_steps, out=self.hold_steps)
        action = torch.where(self.hold_steps > 0, self.hold_action, greedy)
        self.hold_steps.sub_(1).clamp_(min=0)
        return action

    def stored_reward(self, reward: Tensor) -> Tensor:
        c = self.config.reward_clamp
        return reward.clamp(-c, c) if c > 0 else reward

    def after_step(self, done: Tensor) -> None:
        """A hold ends with its episode; prioritized: the row just written gets the max priority."""
        if self.config.ez_exponent > 0:
            self.hold_steps.mul_(~done)
        if self.tree is not None:
            self.tree.add_row((self.rb.pos - 1).remainder(self.rb.rows))

    def extra_state(self) -> dict[str, Tensor]:
        extra = super().extra_state()
        if self.config.ez_exponent > 0:
            extra = {**extra, "hold_action": self.hold_action, "hold_steps": self.hold_steps}
        if self.tree is not None:
            extra = {**extra, "prio_tree": self.tree.tree, "prio_max": self.tree.max_priority}
        return extra

    def policy_action(self, obs: Tensor, deterministic: bool) -> Tensor:
        """Greedy actions ``[B]`` (``deterministic``: noisy layers at their mean), else ε-greedy with the current ε."""
        if deterministic:
            with self.q.mean_only():
                return self.q_values(obs).argmax(-1)
        return self._epsilon_greedy(obs, self.epsilon())

    # -- learning -------------------------------------------------------------------------------
    def draw(self) -> Batch:
        if self.tree is None:
            return super().draw()
        cfg = self.config
        progress = (self.env_steps.double() / self.total_steps).clamp(max=1.0)
        beta = cfg.prio_beta0 + (1.0 - cfg.prio_beta0) * progress
        row, env, leaf, weight = self.tree.sample((cfg.updates_per_step, cfg.batch_size), beta, self.generator)
        self.drawn_leaf.copy_(leaf)
        self.drawn_weight.copy_(weight)
        return self.rb.gather(row, env, cfg.n_step, cfg.gamma)

    def update(self, batch: Batch, j: int) -> dict[str, Tensor]:
        cfg = self.config
        if cfg.noisy:  # fresh noise for this update, online and target alike
            self.q.resample_noise(self.generator)
            self.q_target.resample_noise(self.generator)
        discount = batch.discount * (1.0 - batch.terminated)
        with torch.no_grad(), self.autocast():
            next_out = self.q_target(batch.next_obs).float()
            if cfg.num_atoms == 1:
                next_q = next_out
            else:
                next_probs = next_out.softmax(-1)
                next_q = (next_probs * self.support).sum(-1)
            next_action = (self.q_values(batch.next_obs).float() if cfg.double else next_q).argmax(-1, keepdim=True)

        with self.autocast():
            out = self.q(batch.obs).float()
        if cfg.num_atoms == 1:
            target = batch.reward + discount * next_q.gather(-1, next_action).squeeze(-1)
            q = out.gather(-1, batch.action.unsqueeze(-1)).squeeze(-1)
            per_sample = (q - target).square() if cfg.loss == "mse" else F.smooth_l1_loss(q, target, reduction="none")
            priority = (q - target).abs()
            metrics = {"q_mean": q.mean()}
        else:
            k = cfg.num_atoms
            chosen = next_probs.gather(1, next_action.unsqueeze(-1).expand(-1, 1, k)).squeeze(1)
            # C51's target: the atoms moved to R + gamma^m (1 - terminated) z, projected back onto the support
            positions = batch.reward.unsqueeze(-1) + discount.unsqueeze(-1) * self.support
            m = project_categorical(chosen, positions, cfg.v_min, cfg.v_max)
            logits = out.gather(1, batch.action.view(-1, 1, 1).expand(-1, 1, k)).squeeze(1)
            per_sample = -(m * logits.log_softmax(-1)).sum(-1)  # cross-entropy to the projected target
            priority = per_sample
            metrics = {"q_mean": (logits.softmax(-1) * self.support).sum(-1).mean()}
        if self.tree is not None:
            loss = (self.drawn_weight[j] * per_sample).mean()
        else:
            loss = per_sample.mean()
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        sync_gradients(self.q.parameters())  # data-parallel: the ranks' mean gradient (no-op alone)
        if cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        if self.tree is not None:  # new priorities, written only once learning started
            self.tree.update(self.drawn_leaf[j], priority, self.learning)

        # target update every target_update_interval-th update, decided on the device
        due = (self.num_updates + j + 1).remainder(cfg.target_update_interval) == 0
        self.polyak(self.q_target, self.q, cfg.tau * self.learning * due)
        return {"q_loss": loss, **metrics, "epsilon": self.epsilon()}


class C51(DQN):
    """``c51``: DQN with a categorical return distribution (Bellemare et al. 2017): 51 atoms on
    [-10, 10] by default; every DQN key applies."""

    @attrs.frozen
    class Config(DQN.Config):
        """C51's defaults (DQN's keys)."""

        num_atoms: int = 51
        """The atoms of the return distribution (C51: 51)."""


class Rainbow(DQN):
    """``rainbow`` (Hessel et al. 2018): DQN with all of the family's options on: double, dueling,
    noisy nets (no ε), 3-step returns, prioritized replay (alpha 0.5, beta 0.4 -> 1) and C51's
    distribution over 51 atoms; every DQN key applies."""

    @attrs.frozen
    class Config(DQN.Config):
        """Rainbow's defaults (DQN's keys)."""

        num_atoms: int = 51
        """The atoms of the return distribution."""
        dueling: bool = True
        """Dueling streams."""
        noisy: bool = True
        """Noisy nets explore; ε is 0."""
        epsilon_start: float = 0.0
        """No ε-greedy: the noisy layers explore."""
        epsilon_end: float = 0.0
        """No ε-greedy: the noisy layers explore."""
        n_step: int = attrs.field(default=3, validator=at_least(1))
        """3-step returns."""
        prioritized: bool = True
        """Prioritized replay."""


# Atari (atari:<game>, any game): CleanRL's dqn_atari / c51_atari / rainbow_atari settings (Nature CNN, 512-unit
# stream(s), 1M transitions (56 GB of frames on cuda; 100k on cpu), batch 32, one update every 4 env steps (8 envs:
# 2 updates a step), target copied every 1,000 updates (CleanRL: every 1,000 env steps at one update per 4), rewards
# clipped to +-1, 10M agent steps). Not run to the end with noeira: each carries a note.
_ATARI_NOTE = "not verified: CleanRL's Atari settings, not yet run to the end with noeira"
_ATARI = {"network": "nature-cnn", "hidden": [512], "batch_size": 32, "updates_per_step": 2, "gamma": 0.99,
          "reward_clamp": 1.0, "learning_starts": 80_000, "exploration_steps": 1_000_000, "epsilon_end": 0.01,
          "target_update_interval": 1_000, "loss": "huber", "max_grad_norm": 10.0}
_ATARI_RUN = {"total_steps": 10_000_000, "log_interval": 1_000}


def _atari(agent: dict[str, Any]) -> dict[str, Any]:
    return {"cpu": {"env": {"num_envs": 8}, "agent": {**_ATARI, "buffer_size": 100_000, **agent}, "run": _ATARI_RUN,
                    "note": _ATARI_NOTE},
            "*": {"env": {"num_envs": 8}, "agent": {**_ATARI, "buffer_size": 1_000_000, "precision": "bf16", **agent},
                  "run": _ATARI_RUN, "note": _ATARI_NOTE}}


RECIPES: RecipeTables = {
    # Measured on the 2-core CPU (BENCHMARKS.md, "Recipes that solve"); on cuda ("*") not verified here.
    # CartPole-v1: rl-baselines3-zoo hyperparams/dqn.yml (lr 2.3e-3, batch 64, buffer 1e5, 1,000 steps of
    # warm-up, 128 updates per 256 steps, epsilon over 16% of 5e4 steps, [256, 256], SB3's Huber loss):
    # 4 envs x 2 updates keep its 0.5 updates per transition, and the target is copied every 128 updates
    # (SB3's is fixed through each burst of 128). Changed from the zoo: double-Q, the lr annealed to 0
    # over the run, and epsilon ending at 0.1 (not 0.04: the greedy policy reached 500 and then
    # collapsed on some seeds); the exploring policy keeps failures in the buffer.
    # Measured: BENCHMARKS.md, "Recipes that solve" ("What the recipe comments measured": dqn cartpole).
    "cartpole": {"*": {
        "env": {"num_envs": 4},
        "agent": {"learning_rate": 2.3e-3, "hidden": [256, 256], "batch_size": 64, "buffer_size": 100_000,
                  "learning_starts": 1_000, "exploration_steps": 8_000, "epsilon_end": 0.1,
                  "updates_per_step": 2, "target_update_interval": 128, "gamma": 0.99, "loss": "huber",
                  "double": True, "lr_anneal_steps": 50_000},
        "run": {"total_steps": 50_000, "log_interval": 250},
    }},
    # Acrobot-v1: rl-baselines3-zoo hyperparams/dqn.yml (lr 6.3e-4, batch 128, buffer 5e4, learning from the
    # start, target update every 250 env steps, one update per transition, epsilon to 0.1 over 12% of 1e5
    # steps, [256, 256], SB3's Huber loss, no double-Q): 4 envs x 4 updates, the target copied every 250
    # updates; 5e4 steps, not the zoo's 1e5 (the training return plateaus from 30k steps).
    # Measured: BENCHMARKS.md, "Recipes that solve" ("What the recipe comments measured": dqn acrobot).
    "acrobot": {"*": {
        "env": {"num_envs": 4},
        "agent": {"learning_rate": 6.3e-4, "hidden": [256, 256], "batch_size": 128, "buffer_size": 50_000,
                  "learning_starts": 0, "exploration_steps": 12_000, "epsilon_end": 0.1, "updates_per_step": 4,
                  "target_update_interval": 250, "gamma": 0.99, "loss": "huber", "double": False},
        "run": {"total_steps": 50_000, "log_interval": 250},
    }},
    # MountainCar-v0: rl-baselines3-zoo hyperparams/dqn.yml (lr 4e-3, batch 128, buffer 1e4, 1,000 steps of
    # warm-up, gamma 0.98, target update every 600 env steps, 8 updates per 16 steps, [256, 256], SB3's Huber
    # loss, no double-Q); 16 envs x 8 updates, the target copied every 300 updates. Changed: ε-greedy never
    # reached the flag here, so exploration is εz-greedy (random actions held for zeta(1.5) steps, which
    # alone reach the flag in ~10% of random episodes), ε falls to 0.05 over 60k steps, 3-step returns,
    # 3e5 steps with the lr annealed to 0.
    # Measured: BENCHMARKS.md, "Recipes that solve" ("What the recipe comments measured": dqn mountaincar).
    "mountaincar": {"*": {
        "env": {"num_envs": 16},
        "agent": {"learning_rate": 4e-3, "hidden": [256, 256], "batch_size": 128, "buffer_size": 10_000,
                  "learning_starts": 1_000, "exploration_steps": 60_000, "epsilon_end": 0.05, "updates_per_step": 8,
                  "target_update_interval": 300, "gamma": 0.98, "loss": "huber", "double": False,
                  "ez_exponent": 1.5, "n_step": 3, "lr_anneal_steps": 300_000},
        "run": {"total_steps": 300_000, "log_interval": 250},
    }},
    "atari": _atari({"learning_rate": 1e-4}),
    "*": {"*": {"note": UNTESTED, "run": {"total_steps": 500_000, "log_interval": 250}}},
}
"""DQN's tuned defaults: env name -> backend name -> recipe ("*": any other)."""

_UNVERIFIED = "not verified on 5 seeds yet (benchmarks/solve.py); see BENCHMARKS.md"


def _from_dqn(env: str, verified: bool = False, **agent: Any) -> dict[str, Any]:
    """DQN's classic-control recipe for ``env`` with ``agent``'s keys changed (C51 and Rainbow start
    from it); ``verified``: solved on >= 4 of 5 seeds by ``benchmarks/solve.py``, else a note says not yet."""
    out = copy.deepcopy(dict(RECIPES[env]["*"]))
    out["agent"] = {k: v for k, v in out["agent"].items() if k != "loss"} | agent
    return {"*": out if verified else {**out, "note": _UNVERIFIED}}


# C51 and Rainbow on CartPole / Acrobot: DQN's recipes for them (rl-baselines3-zoo's, see above) with the
# distribution's support covering the discounted returns (CartPole: 0..100, Acrobot: -100..0), 51 atoms.
# Rainbow adds its options (noisy nets, no ε, dueling, 3-step returns, prioritized replay). Measured on the
# 2-core CPU (BENCHMARKS.md, "Recipes that solve").
C51_RECIPES: RecipeTables = {
    "cartpole": _from_dqn("cartpole", verified=True, num_atoms=51, v_min=0.0, v_max=100.0),  # 4 of 5 seeds
    "acrobot": _from_dqn("acrobot", verified=True, num_atoms=51, v_min=-100.0, v_max=0.0),  # 5 seeds
    "atari": _atari({"learning_rate": 2.5e-4, "adam_eps": 0.01 / 32, "v_min": -10.0, "v_max": 10.0}),
    "*": {"*": {"note": UNTESTED, "run": {"total_steps": 500_000, "log_interval": 250}}},
}
"""C51's tuned defaults."""

RAINBOW_RECIPES: RecipeTables = {
    "cartpole": _from_dqn("cartpole", verified=True, num_atoms=51, v_min=0.0, v_max=100.0, epsilon_start=0.0,
                          epsilon_end=0.0, n_step=3),  # 5 seeds (BENCHMARKS.md)
    "acrobot": _from_dqn("acrobot", verified=True, num_atoms=51, v_min=-100.0, v_max=0.0, epsilon_start=0.0,
                         epsilon_end=0.0, n_step=3),  # 5 seeds
    "atari": _atari({"learning_rate": 6.25e-5, "adam_eps": 1.5e-4, "n_step": 3, "target_update_interval": 4_000,
                     "epsilon_start": 0.0, "epsilon_end": 0.0}),
    "*": {"*": {"note": UNTESTED, "run": {"total_steps": 500_000, "log_interval": 250}}},
}
"""Rainbow's tuned defaults."""


def recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """Tuned defaults for ``env`` (below whatever the user sets), from :data:`RECIPES`; the same
    at any ``num_envs`` the user chooses."""
    return pick_recipe(RECIPES, env, backend)


def c51_recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """C51's tuned defaults, from :data:`C51_RECIPES`."""
    return pick_recipe(C51_RECIPES, env, backend)


def rainbow_recipe(env: str, backend: str, num_envs: int | None) -> dict[str, Any] | None:
    """Rainbow's tuned defaults, from :data:`RAINBOW_RECIPES`."""
    return pick_recipe(RAINBOW_RECIPES, env, backend)
