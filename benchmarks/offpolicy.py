"""Off-policy: SAC on Pendulum and DQN on CartPole, gradient updates per second and wall time
to a return threshold, ours beside Stable-Baselines3 in the same run.

For each algorithm x ``num_envs`` x graph backend, noeira's agent is built as the driver
builds it (the env's recipe, with ``env.num_envs`` and the update-to-data ratio set here:
``updates_per_step = num_envs``: one gradient update per transition, the recipes' ratio) and
run from a fresh seeded start:

- **updates/s**: gradient updates per second of wall time of the whole loop (collect + learn)
  once learning has started, the first calls (warm-up, graph recording) excluded;
- **time to threshold**: every ``--eval-every`` env steps the policy is evaluated
  deterministically on ``--eval-episodes`` envs (evaluation time excluded); the wall time of
  training until the mean first reaches the threshold (SAC: -250, DQN: 400), or ``-`` within
  ``--max-steps`` / ``--max-seconds``.

Stable-Baselines3's SAC and DQN (same hyperparameters where they have them; gymnasium's
Pendulum-v1 / CartPole-v1 in a DummyVecEnv of ``num_envs``; ``gradient_steps`` matching the
update-to-data ratio) are timed the same way, evaluated on the same noeira env with the same
seeds. SB3 is skipped when not installed or with ``--no-sb3``. Both use one-step returns
here (our Pendulum recipes use 3-step returns: ``--set n_step=3``).

    python benchmarks/offpolicy.py --quick                              # CPU smoke run
    python benchmarks/offpolicy.py --num-envs 1,8,64 --graph eager,stream,device \\
        --json offpolicy-h200.json                                      # the H200 table
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from noeira.core import registry
from noeira.core.api import get_backend, get_graph_backend
from noeira.core.driver import build_env, evaluate, resolve
from noeira.core.errors import UserError

TASKS = {
    # algo: (env, gymnasium id, threshold, our overrides, SB3 kwargs)
    "sac": ("pendulum", "Pendulum-v1", -250.0,
            {"hidden": [256, 256], "batch_size": 256, "actor_lr": 3e-4, "critic_lr": 1e-3, "learning_starts": 1000,
             "n_step": 1},
            {"batch_size": 256, "learning_rate": 1e-3, "learning_starts": 1000, "policy_kwargs": {"net_arch": [256, 256]}}),
    "dqn": ("cartpole", "CartPole-v1", 400.0, {"n_step": 1},
            {"learning_rate": 5e-4, "batch_size": 256, "buffer_size": 50_000, "learning_starts": 1000,
             "exploration_final_eps": 0.02, "gamma": 0.99, "max_grad_norm": 10.0,
             "policy_kwargs": {"net_arch": [64, 64]}}),
}


def updates_per_step(algo: str, num_envs: int) -> int:
    return num_envs  # one gradient update per transition, as both recipes do


def _build(algo: str, backend_name: str, num_envs: int, seed: int, extra: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    env_name, _, _, overrides, _ = TASKS[algo]
    raw = {"backend": backend_name, "env": {"name": env_name, "num_envs": num_envs},
           "agent": {"name": algo, **overrides, "updates_per_step": updates_per_step(algo, num_envs), **extra},
           "run": {"seed": seed, "progress": False}}
    cfg = resolve(raw)
    backend = get_backend(cfg.backend)
    backend.seed(seed)
    env = build_env(cfg, backend, seed=seed)
    agent = registry.load("agents", algo)(env.spec, backend, cfg.agent.config)
    agent.set_total_steps(cfg.run.total_steps)  # as the driver does
    return cfg, backend, env, agent


def run_ours(algo: str, backend_name: str, graph_name: str, num_envs: int, seed: int, args: argparse.Namespace,
             extra: dict[str, Any]) -> dict[str, Any]:
    cfg, backend, env, agent = _build(algo, backend_name, num_envs, seed, extra)
    graph = get_graph_backend(graph_name)
    if not graph.available(backend) or (graph_name != "eager" and not backend.supports_graphs):
        raise UserError(f"graph {graph_name!r} is not available on {backend.name}")
    collect = graph.wrap(agent.collect, backend) if env.capture_safe else agent.collect
    learn = graph.wrap(agent.learn, backend)
    threshold = TASKS[algo][2]
    eval_env = build_env(cfg, backend, num_envs=args.eval_episodes, seed=seed + 1)
    learning_starts = cfg.agent.config.learning_starts
    env.reset(seed=seed)
    steps, train_time, solved_at, solved_steps = 0, 0.0, None, None
    upd_time, upd_count, calls = 0.0, 0, 0
    next_eval = args.eval_every
    while steps < args.max_steps and train_time < args.max_seconds:
        t0 = time.perf_counter()
        chunk = 0
        while chunk < args.eval_every and steps + chunk < args.max_steps:
            collect(env)
            learn()
            chunk += num_envs
            calls += 1
        backend.synchronize()
        dt = time.perf_counter() - t0
        train_time += dt
        learning_from = steps  # this chunk's env steps before it ran
        steps += chunk
        if learning_from >= learning_starts and calls > 8:  # whole chunk past warm-up and recording
            upd_time += dt
            upd_count += (chunk // num_envs) * updates_per_step(algo, num_envs)
        if steps >= next_eval:
            next_eval += args.eval_every
            ret = evaluate(agent, eval_env, args.eval_episodes, seed=seed + 1)["mean_return"]
            if ret >= threshold:
                solved_at, solved_steps = train_time, steps
                break
    env.close()
    eval_env.close()
    return {"impl": "noeira", "algo": algo, "graph": graph_name, "num_envs": num_envs, "seed": seed,
            "updates_per_s": upd_count / upd_time if upd_time else None,
            "time_to_threshold_s": solved_at, "steps_to_threshold": solved_steps, "trained_steps": steps,
            "train_seconds": train_time}


class _SB3Actor:
    """SB3's (feed-forward) policy behind noeira's ``initial_state`` / ``act`` so the same evaluation runs it."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def initial_state(self, batch: int) -> None:
        return None

    def act(self, obs: torch.Tensor, state: None = None, done: torch.Tensor | None = None,
            deterministic: bool = True) -> tuple[torch.Tensor, None]:
        action, _ = self.model.predict(obs.cpu().numpy(), deterministic=deterministic)
        return torch.as_tensor(action, device=obs.device), None


def run_sb3(algo: str, num_envs: int, seed: int, args: argparse.Namespace, backend_name: str) -> dict[str, Any]:
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    env_name, gym_id, threshold, _, kwargs = TASKS[algo]
    cfg = resolve({"backend": backend_name, "env": {"name": env_name, "num_envs": 1}, "agent": {"name": algo},
                   "run": {"seed": seed, "progress": False}})
    backend = get_backend(cfg.backend)
    eval_env = build_env(cfg, backend, num_envs=args.eval_episodes, seed=seed + 1)
    venv = make_vec_env(gym_id, n_envs=num_envs, seed=seed)
    extra: dict[str, Any] = {"train_freq": 1, "gradient_steps": updates_per_step(algo, num_envs)}
    if algo == "dqn":
        # our target update every 250 gradient updates = every 250 env steps at this ratio
        extra.update(exploration_fraction=min(1.0, 12_000 / args.max_steps), target_update_interval=250)
    cls = {"sac": sb3.SAC, "dqn": sb3.DQN}[algo]
    model = cls("MlpPolicy", venv, seed=seed, device=args.sb3_device, verbose=0, **kwargs, **extra)
    state = {"train": 0.0, "solved": None, "steps": None, "upd_time": 0.0, "upd": 0, "last": time.perf_counter(),
             "next_eval": args.eval_every}
    actor = _SB3Actor(model)

    class Timer(BaseCallback):
        def _on_step(self) -> bool:
            now = time.perf_counter()
            dt = now - state["last"]
            state["train"] += dt
            if self.num_timesteps > kwargs["learning_starts"] + 8 * num_envs:
                state["upd_time"] += dt
                state["upd"] += updates_per_step(algo, num_envs)
            cont = state["train"] < args.max_seconds
            if self.num_timesteps >= state["next_eval"]:
                state["next_eval"] += args.eval_every
                ret = evaluate(actor, eval_env, args.eval_episodes, seed=seed + 1)["mean_return"]
                if ret >= threshold:
                    state["solved"], state["steps"] = state["train"], self.num_timesteps
                    cont = False
            state["last"] = time.perf_counter()
            return cont

    state["last"] = time.perf_counter()
    model.learn(total_timesteps=args.max_steps, callback=Timer())
    eval_env.close()
    return {"impl": "sb3", "algo": algo, "graph": "-", "num_envs": num_envs, "seed": seed,
            "updates_per_s": state["upd"] / state["upd_time"] if state["upd_time"] else None,
            "time_to_threshold_s": state["solved"], "steps_to_threshold": state["steps"],
            "trained_steps": model.num_timesteps, "train_seconds": state["train"]}


def _fmt(x: Any, spec: str) -> str:
    width = int("".join(c for c in spec.split(".")[0] if c.isdigit()) or 0)
    return "-".rjust(width) if x is None else format(x, spec)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto")
    p.add_argument("--algos", default="sac,dqn", help="comma list: sac, dqn")
    p.add_argument("--num-envs", default="", help="comma list (default 1,8,64; --quick: 1,8)")
    p.add_argument("--graph", default="eager,stream,device", help="comma list; unavailable ones are skipped")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=1000, help="env steps between evaluations")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=0, help="env steps per run (default 30000; --quick 4000)")
    p.add_argument("--max-seconds", type=float, default=0, help="training seconds per run (default 600; --quick 40)")
    p.add_argument("--no-sb3", action="store_true", help="skip Stable-Baselines3")
    p.add_argument("--sb3-device", default="auto", help="SB3's torch device")
    p.add_argument("--quick", action="store_true", help="small budgets for a CPU")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra agent.KEY=VALUE for ours")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    args.max_steps = args.max_steps or (4_000 if args.quick else 30_000)
    args.max_seconds = args.max_seconds or (40.0 if args.quick else 600.0)
    num_envs = [int(n) for n in (args.num_envs or ("1,8" if args.quick else "1,8,64")).split(",")]
    extra: dict[str, Any] = {}
    for item in args.set:
        key, _, value = item.partition("=")
        extra[key] = json.loads(value) if value[:1] in "[{0123456789-tf" else value
    backend = get_backend(args.backend)
    if backend.name == "cpu":
        torch.set_num_threads(1)  # small networks: one thread is fastest and steadiest
    rows: list[dict[str, Any]] = []
    for algo in args.algos.split(","):
        for n in num_envs:
            for graph in args.graph.split(","):
                try:
                    rows.append(run_ours(algo, backend.name, graph, n, args.seed, args, extra))
                except UserError as err:  # graph backend not installed or not available here
                    print(f"skip {algo} {graph} x{n}: {err}")
                    continue
                print(rows[-1])
            if not args.no_sb3:
                try:
                    rows.append(run_sb3(algo, n, args.seed, args, backend.name))
                    print(rows[-1])
                except ImportError as err:
                    print(f"skip SB3: {err}")
    head = f"{'algo':5} {'impl':7} {'graph':7} {'envs':>5} {'updates/s':>10} {'to threshold (s)':>17} {'steps':>7}"
    print()
    print(f"device: {backend.device_name()} ({backend.name}), torch {torch.__version__}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['algo']:5} {r['impl']:7} {r['graph']:7} {r['num_envs']:>5} {_fmt(r['updates_per_s'], '10.0f')} "
              f"{_fmt(r['time_to_threshold_s'], '17.1f')} {_fmt(r['steps_to_threshold'], '>7')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": backend.device_name(), "backend": backend.name, "torch": torch.__version__,
                       "args": vars(args), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
