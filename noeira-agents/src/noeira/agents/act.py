"""ACT, Action Chunking with Transformers (Zhao et al. 2023, "Learning Fine-Grained Bimanual
Manipulation with Low-Cost Hardware"): ``noeira train agent=act dataset=PATH``.

Read top to bottom: the hyperparameters (:class:`Config`), the transformer pieces, the CVAE
(:class:`ACTModel`), temporal ensembling, the agent. The policy predicts the next ``K =
chunk_size`` actions at once from the current observation; it is a conditional VAE whose
latent ``z`` carries the demonstrator's "style":

    training:  z ~ q(z | o, a_{t:t+K})         a transformer encoder over [CLS, o, a_t ... a_{t+K-1}]
               â_{t:t+K} = decoder(z, o)        K learned queries cross-attending to encoder([z, o, image tokens])
               loss = mean |â - a| over the frames inside the episode + kl_weight * KL(q(z|o,a) || N(0, I))
    acting:    z = 0;  a_t = sum_i w_i â^{(t-i)}_t / sum_i w_i,  w_i = exp(-m i), i = 0 the oldest prediction

(temporal ensembling: every step predicts a chunk, and the action taken at ``t`` averages
every chunk's prediction for ``t``, the oldest weighted most; ``m = temporal_ensemble_coeff``.)
Observations and actions are normalised by the dataset's mean and std (buffers, in the
checkpoint); a camera observation ``[3, H, W]`` goes through a small CNN trained from scratch
(no pretrained backbone), its feature map becoming one token per cell with 2-D sine positions.
Action chunks follow LeRobot's rule: past an episode's end they repeat its last action and
are masked out of the loss.

Offline: ``collect`` does nothing, ``learn`` is one gradient step (``run.total_steps`` counts
gradient steps). Capture-safe: batches, the latent's noise and dropout masks come from a
device generator, the learning rate is a device tensor. The ensemble's state (running weighted
sums for the next ``K`` steps) is the recurrent state of :meth:`ACT.act`, reset where ``done``,
so ``noeira eval`` and an exported policy carry it explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import Tensor, nn

from noeira.agents.bc import imitation_metadata
from noeira.agents.exportable import RecurrentPolicy
from noeira.agents.imitation import ConvEncoder, Demonstrations, Normalizer, action_chunks, dropout, load_demonstrations
from noeira.agents.optim import load_optimizer_state, make_optimizer, scale_lr
from noeira.core.contracts import Backend, BatchedEnv, EnvSpec, PolicyState
from noeira.core.distributed import sync_gradients
from noeira.core.errors import ConfigError, UserError
from noeira.core.spaces import Box

__all__ = ["ACT", "Config", "recipe"]


@attrs.frozen
class Config:
    """ACT hyperparameters (``agent.KEY=VALUE``); LeRobot's defaults are in brackets where ours,
    sized for small CPU-trainable tasks, differ."""

    observation_feature: str = "observation.state"
    """The dataset feature the policy reads (a vector, or a camera [3, H, W]); its shape must be the env's observation's."""
    action_feature: str = "action"
    """The dataset feature holding the actions to imitate."""
    chunk_size: int = 20
    """K: actions predicted per step [100]."""
    dim_model: int = 128
    """Width of the transformer [512]."""
    n_heads: int = 4
    """Attention heads [8]."""
    dim_feedforward: int = 512
    """Hidden width of each layer's feed-forward block [3200]."""
    n_encoder_layers: int = 2
    """Layers of the encoder over [z, observation, image tokens] [4]."""
    n_decoder_layers: int = 1
    """Layers of the decoder that turns K queries into the chunk [1]."""
    n_vae_encoder_layers: int = 2
    """Layers of the CVAE's encoder q(z | o, a) [4]."""
    latent_dim: int = 32
    """Size of the style latent z."""
    use_vae: bool = True
    """Train the CVAE (false: a deterministic transformer, z always 0)."""
    kl_weight: float = 10.0
    """Weight of the KL term."""
    dropout: float = 0.1
    """Dropout in the transformer layers while training."""
    image_channels: int = 64
    """A camera observation: channels of the CNN's feature map (trained from scratch)."""
    temporal_ensemble: bool = True
    """Act on the temporal ensemble of every chunk's prediction for the step (the paper's); false:
    on the first action of the chunk predicted now (re-planning every step, no averaging)."""
    temporal_ensemble_coeff: float = 0.01
    """m in w_i = exp(-m i), i = 0 the oldest prediction (the paper's 0.01: nearly uniform, the
    oldest weighted a little more; a negative m weights the newest more)."""
    batch_size: int = 64
    """Frames (each with its chunk) per gradient step [8]."""
    lr: float = 1e-4
    """AdamW learning rate (the start value when annealing) [1e-5]."""
    weight_decay: float = 1e-4
    """AdamW's decoupled weight decay."""
    anneal_lr: bool = True
    """Cosine-anneal the learning rate to 0 over run.total_steps gradient steps (LeRobot: constant)."""
    max_grad_norm: float = 10.0
    """Clip the global gradient norm to this (0: no clipping)."""
    torch_threads: int = 0
    """CPU: torch.set_num_threads(N) when the agent is built (0: leave torch's setting)."""


# -- the transformer, written out ---------------------------------------------------------------

class Attention(nn.Module):
    """Multi-head attention: ``softmax(Q K^T / sqrt(d)) V`` per head, then an output projection."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        if dim % heads:
            raise ConfigError(f"agent.dim_model: {dim} must be a multiple of agent.n_heads ({heads})")
        self.heads, self.scale = heads, 1.0 / math.sqrt(dim // heads)
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_pad: Tensor | None = None) -> Tensor:
        """``query [B, Lq, d]``, ``key``/``value [B, Lk, d]``, ``key_pad [B, Lk]`` (True: ignore) -> ``[B, Lq, d]``."""
        b, lq, d = query.shape
        h = self.heads

        def split(x: Tensor) -> Tensor:
            return x.view(b, x.shape[1], h, d // h).transpose(1, 2)   # [B, h, L, d/h]

        q, k, v = split(self.q(query)), split(self.k(key)), split(self.v(value))
        scores = (q @ k.transpose(-1, -2)) * self.scale               # [B, h, Lq, Lk]
        if key_pad is not None:
            scores = scores.masked_fill(key_pad[:, None, None, :], float("-inf"))
        out = scores.softmax(-1) @ v
        return self.out(out.transpose(1, 2).reshape(b, lq, d))


class EncoderLayer(nn.Module):
    """Post-norm (as ACT): ``x = norm(x + attn(x + pos, x + pos, x)); x = norm(x + ff(x))``."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.attn = Attention(cfg.dim_model, cfg.n_heads)
        self.ff = nn.Sequential(nn.Linear(cfg.dim_model, cfg.dim_feedforward), nn.ReLU(),
                                nn.Linear(cfg.dim_feedforward, cfg.dim_model))
        self.norm1, self.norm2 = nn.LayerNorm(cfg.dim_model), nn.LayerNorm(cfg.dim_model)
        self.p = cfg.dropout

    def forward(self, x: Tensor, pos: Tensor, key_pad: Tensor | None, gen: torch.Generator | None) -> Tensor:
        qk = x + pos
        x = self.norm1(x + dropout(self.attn(qk, qk, x, key_pad), self.p, gen, self.training))
        return self.norm2(x + dropout(self.ff(x), self.p, gen, self.training))


class DecoderLayer(nn.Module):
    """Post-norm: self-attention over the queries, cross-attention to the encoder's output, feed-forward."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.self_attn = Attention(cfg.dim_model, cfg.n_heads)
        self.cross_attn = Attention(cfg.dim_model, cfg.n_heads)
        self.ff = nn.Sequential(nn.Linear(cfg.dim_model, cfg.dim_feedforward), nn.ReLU(),
                                nn.Linear(cfg.dim_feedforward, cfg.dim_model))
        self.norms = nn.ModuleList(nn.LayerNorm(cfg.dim_model) for _ in range(3))
        self.p = cfg.dropout

    def forward(self, x: Tensor, query_pos: Tensor, memory: Tensor, memory_pos: Tensor,
                gen: torch.Generator | None) -> Tensor:
        qk = x + query_pos
        x = self.norms[0](x + dropout(self.self_attn(qk, qk, x), self.p, gen, self.training))
        x = self.norms[1](x + dropout(self.cross_attn(x + query_pos, memory + memory_pos, memory), self.p, gen,
                                      self.training))
        return self.norms[2](x + dropout(self.ff(x), self.p, gen, self.training))


def sine_positions(length: int, dim: int) -> Tensor:
    """The fixed 1-D sinusoidal embedding ``[length, dim]`` (Vaswani et al.)."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    out = torch.zeros(length, dim)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return out


def sine_positions_2d(h: int, w: int, dim: int) -> Tensor:
    """``[h * w, dim]``: half the channels encode the row, half the column (DETR's embedding)."""
    rows = sine_positions(h, dim // 2).unsqueeze(1).expand(h, w, dim // 2)
    cols = sine_positions(w, dim - dim // 2).unsqueeze(0).expand(h, w, dim - dim // 2)
    return torch.cat([rows, cols], -1).reshape(h * w, dim)


# -- the CVAE ---------------------------------------------------------------------------------

class ACTModel(nn.Module):
    """Normalised observation -> normalised action chunk ``[B, K, A]`` (see the module docstring)."""

    def __init__(self, spec: EnvSpec, cfg: Config, device: torch.device) -> None:
        super().__init__()
        obs_shape, space = tuple(spec.observation_space.shape), spec.action_space
        if not (isinstance(space, Box) and len(space.shape) == 1):
            raise ConfigError(f"agent: act predicts chunks of continuous actions (a vector Box), got {space!r}")
        self.cfg, d, k = cfg, cfg.dim_model, cfg.chunk_size
        self.action_dim = space.shape[0]
        self.image = len(obs_shape) == 3
        if self.image:
            if obs_shape[0] != 3:
                raise ConfigError(f"agent: a camera observation must be [3, H, W], got {list(obs_shape)}")
            self.backbone = ConvEncoder(cfg.image_channels)
            h, w = self.backbone.output_shape(obs_shape[1:])
            self.image_proj = nn.Conv2d(cfg.image_channels, d, 1)
            self.register_buffer("image_pos", sine_positions_2d(h, w, d).unsqueeze(0))
            state_dim = 0
        elif len(obs_shape) == 1:
            state_dim = obs_shape[0]
        else:
            raise ConfigError(f"agent: act reads a vector or a [3, H, W] camera observation, got {list(obs_shape)}")
        # the CVAE encoder q(z | o, a): [CLS, o, a_1..a_K] -> CLS -> (mu, log sigma^2)
        if cfg.use_vae:
            self.vae_cls = nn.Embedding(1, d)
            self.vae_state = nn.Linear(state_dim, d) if state_dim else None
            self.vae_action = nn.Linear(self.action_dim, d)
            self.vae_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_vae_encoder_layers))
            self.vae_out = nn.Linear(d, 2 * cfg.latent_dim)
            self.register_buffer("vae_pos", sine_positions(2 + k, d).unsqueeze(0))
        # the encoder over [z, o, image tokens] and the decoder of K queries
        self.latent_proj = nn.Linear(cfg.latent_dim, d)
        self.state_proj = nn.Linear(state_dim, d) if state_dim else None
        self.token_pos = nn.Embedding(2, d)  # learned positions of the latent and state tokens
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.query_pos = nn.Embedding(k, d)
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.decoder_norm = nn.LayerNorm(d)
        self.action_head = nn.Linear(d, self.action_dim)
        for layer in [*self.encoder, *self.decoder, *(self.vae_layers if cfg.use_vae else [])]:
            for p in layer.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)  # as ACT (DETR's transformer) initialises its layers
        self.to(device)

    def latent(self, obs: Tensor, chunk: Tensor, pad: Tensor, gen: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
        """``z ~ q(z | o, a)`` by the reparameterisation trick, with ``(mu, log sigma^2)`` ``[B, latent]``."""
        b = chunk.shape[0]
        tokens = [self.vae_cls.weight.expand(b, 1, -1)]
        if self.vae_state is not None:
            tokens.append(self.vae_state(obs).unsqueeze(1))
        tokens.append(self.vae_action(chunk))
        x = torch.cat(tokens, 1)
        pos = self.vae_pos[:, : x.shape[1]]
        keep_prefix = torch.zeros(b, x.shape[1] - chunk.shape[1], dtype=torch.bool, device=x.device)
        key_pad = torch.cat([keep_prefix, pad], 1)
        for layer in self.vae_layers:
            x = layer(x, pos, key_pad, gen)
        mu, log_var = self.vae_out(x[:, 0]).chunk(2, -1)
        eps = torch.randn(mu.shape, generator=gen, device=mu.device)
        return mu + eps * (0.5 * log_var).exp(), mu, log_var

    def forward(self, obs: Tensor, z: Tensor, gen: torch.Generator | None = None) -> Tensor:
        """``obs`` (normalised vector, or the camera frame) and ``z [B, latent]`` -> ``[B, K, A]``."""
        b = z.shape[0]
        tokens, pos = [self.latent_proj(z).unsqueeze(1)], [self.token_pos.weight[:1].expand(b, 1, -1)]
        if self.state_proj is not None:
            tokens.append(self.state_proj(obs).unsqueeze(1))
            pos.append(self.token_pos.weight[1:].expand(b, 1, -1))
        if self.image:
            features = self.image_proj(self.backbone(obs)).flatten(2).transpose(1, 2)   # [B, h*w, d]
            tokens.append(features)
            pos.append(self.image_pos.expand(b, -1, -1))
        memory, memory_pos = torch.cat(tokens, 1), torch.cat(pos, 1)
        for layer in self.encoder:
            memory = layer(memory, memory_pos, None, gen)
        query_pos = self.query_pos.weight.unsqueeze(0).expand(b, -1, -1)
        x = torch.zeros_like(query_pos)
        for layer in self.decoder:
            x = layer(x, query_pos, memory, memory_pos, gen)
        return self.action_head(self.decoder_norm(x))


# -- temporal ensembling ------------------------------------------------------------------------

def ensemble_step(chunk: Tensor, state: Tensor, done: Tensor, coeff: float) -> tuple[Tensor, Tensor]:
    """Fold a new chunk ``[B, K, A]`` into the ensemble ``state [K, B, A + 2]`` (for each of the
    next ``K`` steps: the weighted sum of its predictions, the sum of weights, how many; the
    batch in dimension 1, as the Agent contract has it), take step 0's weighted mean as the
    action, shift the window by one. Zeroed where ``done [B]``."""
    a = chunk.shape[-1]
    state = state * (~done).to(state.dtype).view(1, -1, 1)
    total, weight, count = state[..., :a], state[..., a], state[..., a + 1]
    w = torch.exp(-coeff * count)                       # the new prediction is the count-th for its step
    total = total + w.unsqueeze(-1) * chunk.transpose(0, 1)
    weight, count = weight + w, count + 1
    action = total[0] / weight[0].unsqueeze(-1)
    folded = torch.cat([total, weight.unsqueeze(-1), count.unsqueeze(-1)], -1)
    shifted = torch.cat([folded[1:], torch.zeros_like(folded[:1])], 0)
    return action, shifted


class ACTPolicy(nn.Module):
    """Acting: ``(obs, state, done) -> (env action, state)``: the chunk for ``z = 0``, denormalised,
    temporally ensembled, clipped to the action space."""

    def __init__(self, spec: EnvSpec, cfg: Config, device: torch.device) -> None:
        super().__init__()
        self.model = ACTModel(spec, cfg, device)
        obs_shape = tuple(spec.observation_space.shape)
        self.obs_norm = Normalizer(obs_shape, device) if len(obs_shape) == 1 else None
        self.action_norm = Normalizer((self.model.action_dim,), device)
        self.register_buffer("low", spec.action_space.low.to(device).float())
        self.register_buffer("high", spec.action_space.high.to(device).float())
        self.cfg = cfg

    def observe(self, obs: Tensor) -> Tensor:
        return self.obs_norm(obs) if self.obs_norm is not None else obs

    def initial_state(self, batch: int) -> Tensor:
        return torch.zeros(self.cfg.chunk_size, batch, self.model.action_dim + 2, device=self.low.device)

    def chunk(self, obs: Tensor) -> Tensor:
        """The predicted chunk ``[B, K, A]`` in env units (z = 0)."""
        z = torch.zeros(obs.shape[0], self.cfg.latent_dim, device=obs.device)
        return self.action_norm.inverse(self.model(self.observe(obs), z))

    def forward(self, obs: Tensor, state: Tensor, done: Tensor) -> tuple[Tensor, Tensor]:
        chunk = self.chunk(obs)
        if self.cfg.temporal_ensemble:
            action, state = ensemble_step(chunk, state, done, self.cfg.temporal_ensemble_coeff)
        else:
            action = chunk[:, 0]
        return torch.maximum(torch.minimum(action, self.high), self.low), state


# -- the agent --------------------------------------------------------------------------------

class ACT:
    """ACT (see the module docstring); keeps the Agent contract, learning from a dataset."""

    Config = Config
    learns_from_dataset = True
    """The driver hands this agent ``run.dataset`` (:func:`noeira.core.dataset.offline.attach_dataset`)."""

    def __init__(self, spec: EnvSpec, backend: Backend, config: Config | None = None, *, training: bool = True) -> None:
        # training=False (acting alone) changes nothing: the dataset is read by load_dataset, not here
        cfg = config or Config()
        validate(cfg)
        if cfg.torch_threads > 0 and backend.device.type == "cpu":
            torch.set_num_threads(cfg.torch_threads)
        self.config, self.spec, self.backend, self.device = cfg, spec, backend, backend.device
        self.policy = ACTPolicy(spec, cfg, self.device)
        self.policy.eval()
        self.optimizer = make_optimizer("adam", self.policy.parameters(), cfg.lr)
        self.generator = backend.generator(int(torch.randint(0, 2**62, ())))
        self.steps_per_collect = 1
        self.total_steps = 1
        self.updates = torch.zeros((), dtype=torch.float32, device=self.device)
        """Gradient steps made, on the device (the learning-rate schedule reads it)."""
        self.data: Demonstrations | None = None
        self.metadata: dict[str, Any] = {}

    def load_dataset(self, path: str) -> None:
        """Read the demonstrations onto the device and fit the normalisation to them."""
        cfg = self.config
        data = load_demonstrations(path, self.spec, cfg.observation_feature, cfg.action_feature, self.device)
        if self.policy.obs_norm is not None:
            self.policy.obs_norm.fit(data.obs)
        self.policy.action_norm.fit(data.actions)
        self.data = data
        self.metadata = imitation_metadata(data, cfg.observation_feature, cfg.action_feature)
        self.metadata["chunk_size"] = cfg.chunk_size

    # -- the Agent contract ------------------------------------------------------------------
    def set_total_steps(self, total_steps: int) -> None:
        self.total_steps = max(int(total_steps), 1)

    def initial_state(self, batch: int) -> PolicyState:
        """The temporal ensemble's state ``[K, batch, A + 2]``: nothing predicted yet."""
        return self.policy.initial_state(batch)

    @torch.no_grad()
    def act(self, obs: Tensor, state: PolicyState = None, done: Tensor | None = None,
            deterministic: bool = False) -> tuple[Tensor, PolicyState]:
        """The ensembled action for ``obs [B, ...]`` and the next ensemble state (``done [B]``
        starts an env's ensemble afresh). ACT acts the same whether ``deterministic`` or not (z = 0)."""
        obs = obs.to(self.device)
        b = obs.shape[0]
        if state is None:
            state = self.policy.initial_state(b)
        if done is None:
            done = torch.zeros(b, dtype=torch.bool, device=self.device)
        return self.policy(obs, state, done)

    def collect(self, env: BatchedEnv) -> None:
        """Nothing: the data is the dataset's."""

    def learn(self) -> dict[str, Tensor]:
        """One gradient step: ``batch_size`` frames with their chunks, L1 on the chunk + KL."""
        if self.data is None:
            raise UserError("agent act: no dataset loaded (train with dataset=PATH)")
        cfg, data, gen = self.config, self.data, self.generator
        model = self.policy.model
        idx = torch.randint(0, data.frames, (cfg.batch_size,), generator=gen, device=self.device)
        chunk, pad = action_chunks(data.actions, data.episode_end, idx, cfg.chunk_size)
        target = self.policy.action_norm(chunk)
        obs = self.policy.observe(data.obs[idx])
        model.train()
        if cfg.use_vae:
            z, mu, log_var = model.latent(obs, target, pad, gen)
            kl = (-0.5 * (1 + log_var - mu.square() - log_var.exp())).sum(-1).mean()
        else:
            z = torch.zeros(cfg.batch_size, cfg.latent_dim, device=self.device)
            kl = torch.zeros((), device=self.device)
        pred = model(obs, z, gen)
        model.eval()
        l1 = ((pred - target).abs() * (~pad).unsqueeze(-1)).mean()
        loss = l1 + cfg.kl_weight * kl
        if cfg.anneal_lr:
            scale_lr(self.optimizer, 0.5 * (1.0 + torch.cos(math.pi * (self.updates / self.total_steps).clamp(max=1.0))))
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        params = [p for p in self.policy.parameters()]
        sync_gradients(params)
        norm = (nn.utils.clip_grad_norm_(params, cfg.max_grad_norm) if cfg.max_grad_norm > 0
                else torch.zeros((), device=self.device))
        if cfg.weight_decay > 0:  # AdamW's decoupled decay: p <- p (1 - lr wd), on the matrices
            with torch.no_grad():
                lr = self.optimizer.param_groups[0]["lr"]
                torch._foreach_mul_([p for p in params if p.dim() >= 2], 1.0 - lr * cfg.weight_decay)
        self.optimizer.step()
        self.updates.add_(1)
        return {"loss": loss.detach(), "l1": l1.detach(), "kl": kl.detach(), "grad_norm": norm.detach()}

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates.clone(), "generator": self.generator.get_state(), "metadata": self.metadata}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.updates.copy_(torch.as_tensor(state["updates"]))
        self.generator.set_state(state["generator"].cpu())
        self.metadata = dict(state.get("metadata", {}))

    def policy_module(self) -> nn.Module:
        """The policy for ``noeira export`` / ``deploy``: ``(obs, state, done) -> (action, state)``,
        the ensemble's state explicit (batch in dimension 1)."""
        return RecurrentPolicy(self.policy, self.policy.forward, self.policy.initial_state, state_batch_dim=1,
                               metadata=self.metadata)



def recipe(env: str, backend: str, num_envs: int | None = None) -> dict[str, Any] | None:
    """Any env: a transformer of width 64 predicting 10-step chunks, Adam at 1e-3 (cosine), the run
    counting gradient steps (6,000 on the CPU, 30,000 elsewhere) and logging every 100; the
    training env (never stepped: the data is the dataset's) is one env, the final evaluation
    builds its own. On the CPU one torch thread (a busy 2-core machine runs these small
    networks several times slower on two). Measured on Pendulum from 50 expert episodes
    (BENCHMARKS.md, "Imitation"): the imitation there wants more steps than the CPU budget."""
    agent: dict[str, Any] = {"dim_model": 64, "dim_feedforward": 256, "chunk_size": 10, "lr": 1e-3, "batch_size": 64}
    steps = 30_000
    if backend == "cpu":
        agent["torch_threads"] = 1
        steps = 6_000
    return {"env": {"num_envs": 1}, "agent": agent, "run": {"total_steps": steps, "log_interval": 100}}

def validate(cfg: Config) -> None:
    for key in ("chunk_size", "dim_model", "n_heads", "dim_feedforward", "n_encoder_layers", "n_decoder_layers",
                "latent_dim", "batch_size", "image_channels"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"agent.{key}: must be >= 1, got {getattr(cfg, key)}")
    if cfg.use_vae and cfg.n_vae_encoder_layers < 1:
        raise ConfigError(f"agent.n_vae_encoder_layers: must be >= 1 with use_vae, got {cfg.n_vae_encoder_layers}")
    if not 0 <= cfg.dropout < 1:
        raise ConfigError(f"agent.dropout: must lie in [0, 1), got {cfg.dropout}")
    if not cfg.lr > 0:
        raise ConfigError(f"agent.lr: must be > 0, got {cfg.lr}")
    for key in ("kl_weight", "weight_decay", "max_grad_norm"):
        if getattr(cfg, key) < 0:
            raise ConfigError(f"agent.{key}: must be >= 0, got {getattr(cfg, key)}")
