"""The on-policy actor-critic: observation normalizer, actor MLP + action head, critic MLP.

Separate actor and critic networks (no shared trunk), orthogonal init with a small last
actor layer (gain 0.01) so the first policy is close to uniform / zero-mean: the recipe of
"The 37 implementation details of PPO". Capture-safe: no host sync, fixed shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.distributions import make_head
from noeira.agents.nets import RunningMeanStd, mlp, space_dim
from noeira.core.contracts import EnvSpec
from noeira.core.errors import ConfigError

__all__ = ["ACTIVATIONS", "ActorCritic", "ActorCriticConfig"]

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU,
                                           "silu": nn.SiLU}


@attrs.frozen
class ActorCriticConfig:
    """The keys PPO and A2C share: their networks (:class:`ActorCritic`) and the observation and
    reward normalisation (each algorithm's own keys are in its ``Config``)."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and of the critic (separate networks)."""
    activation: str = "tanh"
    """Hidden activation: tanh | relu | elu | gelu | silu."""
    log_std_init: float = 0.0
    """Continuous actions: initial log standard deviation (a learned, state-independent parameter)."""
    norm_obs: bool = False
    """Normalise observations by a running mean/std kept on the device (saved in checkpoints)."""
    norm_reward: bool = False
    """Scale rewards by the running std of the discounted return (saved in checkpoints)."""
    reward_clip: float = 10.0
    """With norm_reward: clip scaled rewards to +- this."""
    bf16: bool = False
    """Run the networks under bfloat16 autocast (losses and advantages stay float32)."""


class ActorCritic(nn.Module):
    """``obs [B, *obs_shape]`` -> action distribution and value ``[B]``.

    With ``norm_obs`` the running mean / variance of observations (buffers ``obs_rms.*``, so
    they are in ``state_dict``) normalise every input; :meth:`observe` updates them.
    """

    def __init__(self, spec: EnvSpec, hidden: Sequence[int], activation: str = "tanh", log_std_init: float = 0.0,
                 norm_obs: bool = False, device: torch.device | str = "cpu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError(f"agent.activation: unknown {activation!r} (known: {', '.join(ACTIVATIONS)})")
        if any(h < 1 for h in hidden):
            raise ConfigError(f"agent.hidden_sizes: every layer needs >= 1 unit, got {list(hidden)}")
        act = ACTIVATIONS[activation]
        self.obs_shape = tuple(spec.observation_space.shape)
        self.obs_dim = space_dim(self.obs_shape)
        self.head = make_head(spec.action_space, log_std_init, device)
        self.obs_rms = RunningMeanStd(self.obs_shape, device=device) if norm_obs else None
        self.actor = mlp(self.obs_dim, hidden, self.head.num_outputs, act, out_gain=0.01).to(device)
        self.critic = mlp(self.obs_dim, hidden, 1, act, out_gain=1.0).to(device)

    def observe(self, obs: Tensor, update: bool = False) -> Tensor:
        """Raw ``[B, *obs_shape]`` -> the network input ``[B, obs_dim]`` (float, normalised);
        ``update`` first folds the batch into the running statistics."""
        if self.obs_rms is not None:
            if update:
                self.obs_rms.update(obs)
            obs = self.obs_rms.normalize(obs.float())
        return obs.reshape(obs.shape[0], self.obs_dim).float()

    def value(self, x: Tensor) -> Tensor:
        """``x [B, obs_dim]`` (from :meth:`observe`) -> ``V(x) [B]`` (float32)."""
        return self.critic(x).squeeze(-1).float()

    def act(self, x: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """Sample: ``(action [B, *act_shape], log_prob [B], value [B])``."""
        action, log_prob = self.head.sample(self.actor(x), generator)
        return action, log_prob, self.value(x)

    def evaluate(self, x: Tensor, action: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Stored actions under the current weights: ``(log_prob [B], entropy [B], value [B])``."""
        log_prob, entropy = self.head.log_prob_entropy(self.actor(x), action)
        return log_prob, entropy, self.value(x)

    def mode(self, x: Tensor) -> Tensor:
        return self.head.mode(self.actor(x))
