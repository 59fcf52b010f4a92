"""The on-policy rollout buffer PPO and A2C share (:class:`RolloutBuffer`, storage on the device),
the advantage estimators computed over it (GAE and PufferLib's "puff advantage") and reward
scaling. The acting and collecting that fill it are :class:`~noeira.agents.onpolicy.ActorCriticRollout`'s.

Shapes: ``T = horizon``, ``N = num_envs``. Row ``t`` of every buffer describes the step taken
from ``obs[t]``: ``reward[t]``, ``terminated[t]``, ``truncated[t]`` are what that step
returned, ``final_values[t] = V(final_obs[t])`` the value of the state it reached (before any
autoreset). Everything is allocated once and written in place (capture-safe).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from noeira.agents.layers import RunningMeanStd
from noeira.core.contracts import PolicyState

__all__ = ["RewardScaler", "RolloutBuffer", "gae", "puff_advantage"]


class RolloutBuffer(nn.Module):
    """``T x N`` transitions, preallocated on the device (buffers, not saved in checkpoints)."""

    def __init__(self, horizon: int, num_envs: int, obs_dim: int, action_shape: tuple[int, ...],
                 action_dtype: torch.dtype, device: torch.device | str, initial_state: PolicyState = None,
                 obs_code: tuple[tuple[int, ...], torch.dtype] | None = None) -> None:
        super().__init__()
        t, n = horizon, num_envs
        self.horizon, self.num_envs = t, n

        def buf(name: str, *shape: int, dtype: torch.dtype = torch.float32) -> None:
            self.register_buffer(name, torch.zeros((t, n, *shape), dtype=dtype, device=device), persistent=False)

        if obs_code is None:
            buf("obs", obs_dim)                      # the policy's (normalised) input
        else:                                        # an Encoded observation's code, decoded where it is read
            buf("obs", *obs_code[0], dtype=obs_code[1])
        buf("actions", *action_shape, dtype=action_dtype if not action_dtype.is_floating_point else torch.float32)
        buf("logprobs")                              # log pi_old(a_t | s_t)
        buf("values")                                # V(s_t) at collect time (puff: refreshed by updates)
        buf("final_values")                          # V(final_obs_t): bootstrap through truncation
        buf("rewards")                               # after reward scaling, if on
        buf("terminated")                            # 1.0 where the step ended the episode for real
        buf("truncated", dtype=torch.bool)           # time limit: bootstrap from final_values
        buf("dones")                                 # terminated | truncated, as 1.0 / 0.0
        buf("advantages")
        buf("returns")                               # advantages + values: the critic's target
        buf("starts", dtype=torch.bool)              # obs[t] begins an episode (a recurrent state resets there)
        # recurrent policies: the state before row 0 ([layers, N, hidden]), replayed by the update
        self.register_buffer("state0", None if initial_state is None else torch.zeros_like(initial_state),
                             persistent=False)

    def next_values(self) -> Tensor:
        """``[T, N]`` the value each step bootstraps from: ``V(s_{t+1})`` (the next row's value;
        for the last row ``V(final_obs)``, which is ``V(s_T)`` where the env did not reset),
        replaced by ``V(final_obs_t)`` where the episode was truncated. Where it terminated the
        estimators multiply it by 0."""
        shifted = torch.cat([self.values[1:], self.final_values[-1:]], 0)
        return torch.where(self.truncated, self.final_values, shifted)

    def compute_advantages(self, gamma: float, lam: float, ratio: Tensor | None = None,
                           rho_clip: float = 1.0, c_clip: float = 1.0) -> None:
        """Fill ``advantages`` and ``returns`` (GAE, or puff advantage when ``ratio`` is given)."""
        nv = self.next_values()
        if ratio is None:
            gae(self.rewards, self.values, nv, self.terminated, self.dones, gamma, lam, out=self.advantages)
        else:
            puff_advantage(self.rewards, self.values, nv, self.terminated, self.dones, ratio, gamma, lam,
                           rho_clip, c_clip, out=self.advantages)
        torch.add(self.advantages, self.values, out=self.returns)


def gae(rewards: Tensor, values: Tensor, next_values: Tensor, terminated: Tensor, dones: Tensor,
        gamma: float, lam: float, out: Tensor) -> Tensor:
    """Generalised advantage estimation over ``[T, N]`` (Schulman et al. 2016)::

        delta_t = r_t + gamma * (1 - terminated_t) * V_next_t - V_t
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},      A_T = 0

    ``V_next_t`` from :meth:`RolloutBuffer.next_values` (so truncation bootstraps, termination does
    not); the recursion stops at every episode end. Writes and returns ``out``.
    """
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values
    carry = gamma * lam * (1.0 - dones)
    last = torch.zeros_like(deltas[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        last = deltas[t] + carry[t] * last
        out[t] = last
    return out


def puff_advantage(rewards: Tensor, values: Tensor, next_values: Tensor, terminated: Tensor, dones: Tensor,
                   ratio: Tensor, gamma: float, lam: float, rho_clip: float, c_clip: float, out: Tensor) -> Tensor:
    """PufferLib's "puff advantage": GAE with V-trace's clipped importance weights, so data
    gathered by an older policy is corrected as the policy moves during the update::

        rho_t   = min(ratio_t, rho_clip),   c_t = min(ratio_t, c_clip)
        delta_t = rho_t * (r_t + gamma * (1 - terminated_t) * V_next_t - V_t)
        A_t     = delta_t + gamma * lam * c_t * (1 - done_t) * A_{t+1},      A_T = 0

    ``ratio = pi_current(a|s) / pi_old(a|s)`` ``[T, N]``. With ``ratio == 1`` (on-policy) and
    clips ``>= 1`` it is exactly :func:`gae`; with ``lam = 1`` it is V-trace's advantage.
    Written here from the math of PufferLib's ``compute_puff_advantage`` kernel, in this
    module's row layout (the reward and flags of row ``t`` belong to the step from ``s_t``).
    """
    rho = ratio.clamp(max=rho_clip)
    c = ratio.clamp(max=c_clip)
    deltas = rho * (rewards + gamma * (1.0 - terminated) * next_values - values)
    carry = gamma * lam * c * (1.0 - dones)
    last = torch.zeros_like(deltas[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        last = deltas[t] + carry[t] * last
        out[t] = last
    return out


class RewardScaler(nn.Module):
    """Divide rewards by the running std of the discounted return (as SB3's VecNormalize and
    gymnasium's NormalizeReward), then clip. Statistics are buffers in ``state_dict``; the
    per-env running return is not saved (it depends on num_envs)."""

    def __init__(self, num_envs: int, gamma: float, clip: float, device: torch.device | str) -> None:
        super().__init__()
        self.gamma, self.clip = gamma, clip
        self.rms = RunningMeanStd((), device=device)
        self.register_buffer("ret", torch.zeros(num_envs, dtype=torch.float64, device=device), persistent=False)

    @torch.no_grad()
    def forward(self, reward: Tensor, done: Tensor) -> Tensor:
        self.ret.mul_(self.gamma).add_(reward)
        self.rms.update(self.ret)
        scaled = (reward / torch.sqrt(self.rms.var + 1e-8).to(reward.dtype)).clamp(-self.clip, self.clip)
        self.ret.masked_fill_(done, 0.0)
        return scaled
