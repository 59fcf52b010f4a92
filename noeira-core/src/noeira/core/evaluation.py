"""Evaluation: a policy's deterministic returns over any number of episodes, batched.

``evaluate(agent, env, episodes, seed)`` runs ``env.num_envs`` envs side by side (as many as
:func:`eval_batch` says for a run), each counting its share of the episodes; with a graph
backend each step is recorded once and replayed. The driver's final evaluation, ``noeira eval``
and ``benchmarks/eval_craftax.py`` use it.
"""

from __future__ import annotations

from typing import Any

import torch

from noeira.core.config import RunConfig
from noeira.core.contracts import Agent, Backend, BatchedEnv, GraphBackend

__all__ = ["EVAL_CHECK_EVERY", "eval_batch", "evaluate"]

EVAL_CHECK_EVERY = 32
"""Evaluation steps between host reads of whether every episode is done."""


def eval_batch(cfg: RunConfig, episodes: int) -> int:
    """How many envs an evaluation of ``episodes`` episodes runs side by side: all of them, up to
    the run's ``num_envs`` (at least 16); each env then runs its share of the episodes."""
    return max(1, min(episodes, max(cfg.num_envs, 16)))


@torch.no_grad()
def evaluate(agent: Agent, env: BatchedEnv, episodes: int, seed: int, graph: GraphBackend | None = None,
             backend: Backend | None = None) -> dict[str, Any]:
    """Mean and std of the returns of ``episodes`` episodes, acting deterministically (a recurrent
    policy carries its state). The env's ``N`` envs run side by side, env ``i`` counting the
    first ``episodes // N`` (one more for ``i < episodes % N``) episodes it completes, so no env
    waits for another's long episodes to count short ones. With ``graph`` (and a capture-safe
    env) a step is recorded once and replayed; whether all are done is read every
    ``EVAL_CHECK_EVERY`` steps (``steps``: how many the envs took). An episode still running at
    the step limit counts what it got."""
    n, dev = env.num_envs, env.device
    shares = [episodes // n + (i < episodes % n) for i in range(n)]
    q = max(shares)
    quota = torch.tensor(shares, device=dev)
    returns = torch.zeros((n, q), dtype=torch.float64, device=dev)  # env i's j-th episode
    running = torch.zeros(n, dtype=torch.float64, device=dev)
    count = torch.zeros(n, dtype=torch.int64, device=dev)
    done = torch.ones(n, dtype=torch.bool, device=dev)
    initial = agent.initial_state(n)
    state = None if initial is None else initial.clone()
    env.reset(seed=seed)

    def step() -> None:
        action, new_state = agent.act(env.obs, state, done, deterministic=True)
        if state is not None:
            state.copy_(new_state)
        result = env.step(action)
        running.add_(result.reward.double())
        ended = result.terminated | result.truncated
        record = ended & (count < quota)
        col = count.clamp(max=q - 1).unsqueeze(1)
        returns.scatter_(1, col, torch.where(record, running, returns.gather(1, col).squeeze(1)).unsqueeze(1))
        count.add_(record.long())
        running.masked_fill_(ended, 0.0)
        done.copy_(ended)

    run_step = graph.wrap(step, backend) if graph is not None and backend is not None and env.capture_safe else step
    limit = (env.max_episode_steps or 100_000) * q + 1
    steps = 0
    while steps < limit:
        run_step()
        steps += 1
        if steps % EVAL_CHECK_EVERY == 0 and bool((count >= quota).all()):
            break
    counted = count.cpu()
    cut = counted < torch.tensor(shares)  # an episode cut by the step limit counts what it got
    r = torch.cat([returns.cpu()[torch.arange(q) < counted[:, None]], running.cpu()[cut]])
    return {"mean_return": float(r.mean()), "std_return": float(r.std(unbiased=False)) if r.numel() > 1 else 0.0,
            "episodes": int(r.numel()), "steps": steps}
