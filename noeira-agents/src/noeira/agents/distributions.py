"""Action heads for on-policy agents: the policy net's last layer -> a distribution over actions.

Every head is capture-safe: sampling draws from an explicit ``torch.Generator`` on the device
(so runs are seeded and CUDA graphs can replay the draw), nothing syncs with the host, and all
shapes are fixed at construction. ``B`` is the batch size.

- :class:`CategoricalHead` serves ``Discrete(n)`` (actions ``[B]``) and ``MultiDiscrete(nvec)``
  (actions ``[B, K]``, one independent categorical per component). Components of different
  sizes are padded to ``max(nvec)`` logits with a large negative number, so the math is one
  ``[B, K, max_n]`` tensor op instead of a Python loop over components. Sampling is Gumbel-max.
- :class:`GaussianHead` serves ``Box``: a diagonal Gaussian whose mean is the net's output and
  whose **log-std is a state-independent parameter** (one per action dimension, as in CleanRL
  and the original PPO). Actions are **sampled unbounded**; the env receives them **clipped to
  the Box** (:meth:`GaussianHead.to_env`), while the rollout stores the unclipped sample, so the
  log-probabilities used in the update are those of what was actually sampled.

- :class:`SDEGaussianHead` serves ``Box`` with generalized State-Dependent Exploration (gSDE,
  Raffin et al. 2022; ``sde = true``): the net's actor output is a feature vector ``phi(s) =
  tanh(out)``, the mean ``mu(phi)`` a linear layer of the head, and the noise ``phi(s) W`` with
  ``W ~ N(0, sigma^2)`` a ``[features, act_dim]`` matrix per env, kept ``sample_freq`` samples
  (steps) and then drawn again; ``sigma = exp(log_std)`` is learned per entry. An action's density
  is ``N(mu, sqrt(phi^2 @ sigma^2 + 1e-6))`` (``phi`` detached there, as SB3's
  ``learn_features=False``). The noise is a smooth function of the state while ``W`` is kept, so
  exploration persists across steps.

Sampling needs the device generator, which ``torch.distributions`` does not take, hence the
few lines of log-softmax / Gaussian log-density here.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from noeira.core.errors import ConfigError
from noeira.core.spaces import Box, Discrete, MultiDiscrete, Space

__all__ = ["ActionHead", "CategoricalHead", "GaussianHead", "SDEGaussianHead", "gaussian_log_prob", "make_head",
           "sde_draw", "sde_noise", "sde_redraw_", "sde_std"]

_NEG = -1e9  # logit of a padding entry: exp() underflows to exactly 0, unlike -inf it keeps 0 * logit finite


class ActionHead(nn.Module):
    """The interface: ``num_outputs`` logits/means the net produces, then sample / evaluate."""

    num_outputs: int
    output_gain: float = 0.01
    """Initial scale of the net's actor output layer (small: a near-uniform first policy)."""
    action_shape: tuple[int, ...]
    action_dtype: torch.dtype

    def sample(self, out: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``out`` ``[B, num_outputs]`` -> ``(action [B, *action_shape], log_prob [B])``."""
        raise NotImplementedError

    def mode(self, out: Tensor) -> Tensor:
        """The most likely action ``[B, *action_shape]`` (deterministic evaluation)."""
        raise NotImplementedError

    def log_prob_entropy(self, out: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        """``(log_prob [B], entropy [B])`` of stored actions under the current outputs."""
        raise NotImplementedError

    def to_env(self, action: Tensor) -> Tensor:
        """What the env receives for a stored action (clipped / offset / cast)."""
        return action


class CategoricalHead(ActionHead):
    """Independent categoricals over ``nvec`` choices; ``squeeze`` gives ``Discrete``'s ``[B]``."""

    def __init__(self, nvec: list[int], start: int = 0, squeeze: bool = False, device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.k, self.max_n = len(nvec), max(nvec)
        self.num_outputs = sum(nvec)
        self.squeeze, self.start = squeeze, start
        self.action_shape = () if squeeze else (self.k,)
        self.action_dtype = torch.int64
        # where each of the sum(nvec) outputs lands in the padded [K * max_n] layout
        scatter = torch.cat([torch.arange(n) + i * self.max_n for i, n in enumerate(nvec)])
        self.register_buffer("scatter_index", scatter.to(device), persistent=False)

    def _logits(self, out: Tensor) -> Tensor:
        """``[B, sum(nvec)]`` -> log-probabilities ``[B, K, max_n]`` (padding ~ -1e9)."""
        if self.k == 1:
            return torch.log_softmax(out.float(), -1).unsqueeze(1)
        padded = out.new_full((out.shape[0], self.k * self.max_n), _NEG, dtype=torch.float32)
        padded = padded.index_copy(1, self.scatter_index, out.float())
        return torch.log_softmax(padded.view(-1, self.k, self.max_n), -1)

    def _shape(self, idx: Tensor) -> Tensor:
        return idx.squeeze(1) + self.start if self.squeeze else idx

    def sample(self, out: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        logp = self._logits(out)
        u = torch.rand(logp.shape, generator=generator, device=logp.device).clamp_(1e-12, 1.0 - 1e-7)
        idx = torch.argmax(logp - torch.log(-torch.log(u)), dim=-1)  # Gumbel-max: a draw from softmax
        log_prob = logp.gather(-1, idx.unsqueeze(-1)).squeeze(-1).sum(-1)
        return self._shape(idx), log_prob

    def mode(self, out: Tensor) -> Tensor:
        return self._shape(torch.argmax(self._logits(out), dim=-1))

    def log_prob_entropy(self, out: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        logp = self._logits(out)
        idx = (action - self.start).unsqueeze(1) if self.squeeze else action
        log_prob = logp.gather(-1, idx.long().unsqueeze(-1)).squeeze(-1).sum(-1)
        entropy = -(logp.exp() * logp).sum((-1, -2))
        return log_prob, entropy


class GaussianHead(ActionHead):
    """Diagonal Gaussian: mean from the net, log-std a free parameter ``[act_dim]``."""

    def __init__(self, space: Box, log_std_init: float = 0.0, device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.action_shape = space.shape
        self.action_dtype = space.dtype
        self.dim = int(math.prod(space.shape)) if space.shape else 1
        self.num_outputs = self.dim
        self.log_std = nn.Parameter(torch.full((self.dim,), float(log_std_init), device=device))
        self.register_buffer("low", space.low.to(device).reshape(-1).float(), persistent=False)
        self.register_buffer("high", space.high.to(device).reshape(-1).float(), persistent=False)

    def _log_prob(self, mean: Tensor, action: Tensor) -> Tensor:
        log_std = self.log_std.float()
        z = (action - mean) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def sample(self, out: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        mean = out.float()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        action = mean + noise * torch.exp(self.log_std.float())
        return action.view(-1, *self.action_shape), self._log_prob(mean, action)

    def mode(self, out: Tensor) -> Tensor:
        return out.float().view(-1, *self.action_shape)

    def log_prob_entropy(self, out: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        mean = out.float()
        log_prob = self._log_prob(mean, action.reshape(mean.shape).float())
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std.float()).sum().expand(mean.shape[0])
        return log_prob, entropy

    def to_env(self, action: Tensor) -> Tensor:
        flat = action.reshape(action.shape[0], -1)
        return torch.maximum(torch.minimum(flat, self.high), self.low).view_as(action).to(self.action_dtype)


# -- gSDE's pieces (this head's and SAC's actor's) --------------------------------------------------
def sde_std(phi: Tensor, log_std: Tensor) -> Tensor:
    """The action noise's standard deviation ``[B, A]`` for features ``phi [B, F]`` (detached by
    the caller) and ``log_std [F, A]``: ``sqrt(phi^2 @ sigma^2 + 1e-6)``."""
    return (phi.square() @ log_std.exp().square() + 1e-6).sqrt()


def sde_draw(log_std: Tensor, batch: tuple[int, ...], generator: torch.Generator) -> Tensor:
    """Noise matrices ``W [*batch, F, A]``, each entry ``N(0, sigma^2)`` (differentiable in
    ``log_std`` unless the caller detaches it)."""
    std = log_std.exp()
    return std * torch.randn((*batch, *std.shape), generator=generator, device=std.device, dtype=std.dtype)


def sde_noise(phi: Tensor, w: Tensor) -> Tensor:
    """``phi W`` ``[B, A]``: one ``W [F, A]`` for the batch, or one per row ``[B, F, A]``."""
    return phi @ w if w.dim() == 2 else torch.bmm(phi.unsqueeze(1), w).squeeze(1)


def sde_redraw_(weights: Tensor, clock: Tensor, freq: int, fresh: Tensor) -> None:
    """Each env's ``W`` in ``weights`` replaced by ``fresh`` where a redraw is due (``clock`` a
    multiple of ``freq``), then ``clock`` + 1: a draw every call, kept only where due, so every
    step does the same work (recordable) and the host never branches."""
    weights.copy_(torch.where((clock % freq) == 0, fresh, weights))
    clock.add_(1)


def gaussian_log_prob(deviation: Tensor, std: Tensor) -> Tensor:
    """Diagonal Gaussian log-density ``[B]`` of a sample ``deviation = x - mean`` away from its mean."""
    return (-0.5 * (deviation / std).square() - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)


class SDEGaussianHead(GaussianHead):
    """gSDE (module docstring): ``features`` outputs of the net -> ``mu(phi) + phi W``, one ``W``
    per env of ``num_envs`` (a batch of another size draws one ``W`` for all its rows)."""

    output_gain = 1.0  # the features must not start near zero: they scale the noise

    def __init__(self, space: Box, features: int, num_envs: int, sample_freq: int, log_std_init: float = -2.0,
                 device: torch.device | str = "cpu") -> None:
        super().__init__(space, log_std_init, device)
        if sample_freq < 1:
            raise ConfigError(f"agent.sde_sample_freq: must be >= 1, got {sample_freq}")
        self.num_outputs, self.num_envs, self.sample_freq = features, num_envs, sample_freq
        self.mu = nn.Linear(features, self.dim, device=device)
        nn.init.orthogonal_(self.mu.weight, 0.01)
        nn.init.zeros_(self.mu.bias)
        self.log_std = nn.Parameter(torch.full((features, self.dim), float(log_std_init), device=device))
        self.register_buffer("weights", torch.zeros(num_envs, features, self.dim, device=device))
        """Each env's ``W``; in checkpoints, so a resumed run explores on as it would have."""
        self.register_buffer("clock", torch.zeros((), dtype=torch.int64, device=device))
        """Samples drawn from :attr:`weights` (a new ``W`` is due at each multiple of ``sample_freq``)."""

    def _features(self, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(mean, phi detached, std)`` each ``[B, ...]`` (float32; the mean's layer runs under
        the caller's autocast like the net's, the noise's matmuls in float32)."""
        phi = torch.tanh(out.float())
        mean = self.mu(phi).float()
        phi = phi.detach()
        with torch.autocast(phi.device.type, enabled=False):
            std = sde_std(phi, self.log_std.float())
        return mean, phi, std

    def sample(self, out: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        mean, phi, std = self._features(out)
        log_std = self.log_std.detach().float()
        with torch.autocast(phi.device.type, enabled=False):
            if phi.shape[0] == self.num_envs:
                sde_redraw_(self.weights, self.clock, self.sample_freq, sde_draw(log_std, (self.num_envs,), generator))
                noise = sde_noise(phi, self.weights)
            else:
                noise = sde_noise(phi, sde_draw(log_std, (), generator))
        action = (mean + noise).detach()
        return action.view(-1, *self.action_shape), gaussian_log_prob(action - mean, std)

    def mode(self, out: Tensor) -> Tensor:
        return self._features(out)[0].view(-1, *self.action_shape)

    def log_prob_entropy(self, out: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        mean, _, std = self._features(out)
        log_prob = gaussian_log_prob(action.reshape(mean.shape).float() - mean, std)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
        return log_prob, entropy


def make_head(space: Space, log_std_init: float = 0.0, device: torch.device | str = "cpu", *, sde: bool = False,
              features: int = 64, num_envs: int = 1, sde_sample_freq: int = 8) -> ActionHead:
    """The head for an action space; anything else (a mixed or unknown space) is a ConfigError.
    ``sde`` (a ``Box`` only): :class:`SDEGaussianHead` with ``features`` net outputs, a noise
    matrix per env of ``num_envs``, redrawn every ``sde_sample_freq`` steps."""
    if sde:
        if not isinstance(space, Box):
            raise ConfigError(f"agent.sde: state-dependent exploration needs a Box action space, got {space!r}")
        return SDEGaussianHead(space, features, num_envs, sde_sample_freq, log_std_init, device=device)
    if isinstance(space, Discrete):
        return CategoricalHead([space.n], start=space.start, squeeze=True, device=device)
    if isinstance(space, MultiDiscrete):
        return CategoricalHead([int(n) for n in space.nvec.tolist()], device=device)
    if isinstance(space, Box):
        return GaussianHead(space, log_std_init, device=device)
    raise ConfigError(f"action space {space!r} is not supported by on-policy agents "
                      "(supported: Discrete, MultiDiscrete, Box; a mixed/composite space needs a custom head)")
