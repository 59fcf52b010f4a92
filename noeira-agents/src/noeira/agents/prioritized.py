"""Prioritized experience replay (Schaul et al. 2016) on the device: a sum tree over the
replay buffer's transitions, sampled and updated with fixed-shape tensor ops (capture-safe).

Transition ``(row, env)`` of a :class:`~noeira.agents.replay.ReplayBuffer` is leaf
``row * num_envs + env`` of a binary tree with ``P = 2^ceil(log2(capacity))`` leaves, stored
as one float64 array ``tree [2P]`` (node ``i`` has children ``2i`` and ``2i + 1``, the root is
node 1, leaf ``j`` is node ``P + j``); every inner node holds the sum of its children.

- Sampling: ``K`` draws stratified over the total priority (``u_k = (k + U_k) / K * total``),
  each walked down from the root in ``log2 P`` steps of gathers (go right when ``u`` is at least
  the left child's sum, subtracting it). A leaf of priority 0 (rows not yet written) is never
  reached: at a node whose right subtree sums to 0, ``u < node = left``.
- Updates: write the leaves, then recompute each ancestor from its two children, level by level
  (``log2 P`` gather-add-scatter steps; a node touched twice gets the same value twice).
- New transitions enter with the largest priority seen so far (a device scalar).
- Importance weights ``w = (M * P(i))^-beta / max w`` over the batch, ``M`` the transitions stored.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from noeira.agents.replay import ReplayBuffer

__all__ = ["SumTree"]


class SumTree:
    """Priorities of a replay buffer's transitions (see the module docstring)."""

    def __init__(self, rb: ReplayBuffer, alpha: float, eps: float = 1e-6) -> None:
        self.rb, self.alpha, self.eps = rb, alpha, eps
        self.leaves = 1 << max(0, math.ceil(math.log2(rb.capacity)))
        self.depth = int(math.log2(self.leaves))
        self.tree = torch.zeros(2 * self.leaves, dtype=torch.float64, device=rb.device)
        self.max_priority = torch.ones((), dtype=torch.float64, device=rb.device)
        """The largest ``(|td| + eps)^alpha`` seen (new transitions get it)."""
        self._env_ids = torch.arange(rb.num_envs, device=rb.device)

    def set(self, leaf: Tensor, priority: Tensor) -> None:
        """Leaves ``[K]`` to priorities ``[K]`` (already exponentiated), then their ancestors."""
        node = leaf + self.leaves
        self.tree.index_put_((node,), priority.to(self.tree.dtype))
        for _ in range(self.depth):
            node = node // 2
            self.tree.index_put_((node,), self.tree[2 * node] + self.tree[2 * node + 1])

    def add_row(self, row: Tensor) -> None:
        """The ``num_envs`` transitions just written at ``row`` (0-d device tensor) get the max priority."""
        leaf = row * self.rb.num_envs + self._env_ids
        self.set(leaf, self.max_priority.expand_as(leaf))

    def update(self, leaf: Tensor, td_abs: Tensor, active: Tensor) -> None:
        """New priorities ``(|td| + eps)^alpha`` for the sampled leaves (after an update), where
        ``active`` (a 0-d device flag: learning has started) is nonzero; else the old ones stay."""
        leaf = leaf.reshape(-1)
        p = (td_abs.detach().double().reshape(-1) + self.eps).pow(self.alpha)
        self.set(leaf, torch.where(active > 0, p, self.tree[leaf + self.leaves]))
        torch.maximum(self.max_priority, (p * (active > 0)).max(), out=self.max_priority)

    def sample(self, shape: tuple[int, ...], beta: Tensor | float,
               generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``prod(shape)`` stratified draws: ``(row, env, leaf, weight)`` each of ``shape``; the weights
        are normalised by their maximum over the last dimension (each batch's)."""
        k = math.prod(shape)
        total = self.tree[1]
        u = (torch.arange(k, device=self.tree.device, dtype=torch.float64)
             + torch.rand(k, generator=generator, device=self.tree.device, dtype=torch.float64)) / k * total
        node = torch.ones(k, dtype=torch.int64, device=self.tree.device)
        for _ in range(self.depth):
            left = self.tree[2 * node]
            right = (u >= left).long()
            u = u - left * right
            node = 2 * node + right
        leaf = (node - self.leaves).clamp(max=self.rb.capacity - 1)
        stored = (self.rb.size * self.rb.num_envs).double()
        prob = self.tree[node] / total
        weight = (stored * prob).clamp(min=1e-30).pow(-beta)
        # permuted draws: stratified blocks would otherwise put low and high priorities in fixed batches
        order = torch.randperm(k, generator=generator, device=self.tree.device)
        leaf, weight = leaf[order].view(shape), weight[order].view(shape)
        weight = (weight / weight.amax(-1, keepdim=True)).float()
        return leaf // self.rb.num_envs, leaf % self.rb.num_envs, leaf, weight

    def state_dict(self) -> dict[str, Tensor]:
        return {"tree": self.tree, "max_priority": self.max_priority}

    def load_state_dict(self, state: dict[str, Tensor]) -> bool:
        if tuple(state["tree"].shape) != tuple(self.tree.shape):
            return False
        self.tree.copy_(state["tree"])
        self.max_priority.copy_(state["max_priority"])
        return True
