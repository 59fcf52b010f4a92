"""``noeira export RUN --format torchscript|onnx|pt2``: a trained policy as one file that runs
without noeira, and :func:`load_policy`, which runs such a file (or a run's checkpoint) the same way.

The policy is the agent's ``policy_module()`` (an optional method of the Agent contract): its
deterministic action with the observation normalisation inside and the action as the env
takes it. Feed-forward: ``action = f(obs)``. Recurrent (an LSTM or MinGRU policy, ACT's
temporal ensemble): ``action, state = f(obs, state, done)``, the state an explicit input and
output, zeros at an episode's start, reset inside where ``done`` is true. The batch is dynamic
(``--batch`` sets the example it is traced with).

- ``torchscript``: ``torch.jit.trace`` -> ``policy.pt`` (``torch.jit.load``; C++ ``torch::jit::load``).
- ``pt2``: ``torch.export`` -> ``policy.pt2`` (``torch.export.load(...).module()``; AOTInductor).
- ``onnx``: ``torch.onnx.export`` -> ``policy.onnx`` (onnxruntime and the rest; extra ``noeira-core[export]``).

Each file carries ``noeira.json``: agent, env, the observation's and action's shapes, dtypes,
bounds and names (a dataset's feature names for an imitation policy), the control rate, the
state's shape. ``noeira deploy`` reads it to check the policy fits the robot.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from noeira.core import contracts
from noeira.core.driver import LoadedRun, load_run
from noeira.core.errors import UserError

__all__ = ["FORMATS", "Policy", "export_policy", "load_policy"]

FORMATS = {"torchscript": ".pt", "pt2": ".pt2", "onnx": ".onnx"}
META_NAME = "noeira.json"
EXPORT_EXTRA = "noeira-core[export]"


def policy_module(agent: Any, name: str) -> torch.nn.Module:
    try:
        module = contracts.policy_module(agent)
    except NotImplementedError:
        raise UserError(f"agent {name!r} does not offer its policy as a module (policy_module()), so it cannot be "
                        "exported or deployed") from None
    module.eval()
    return module


def _space_meta(space: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": list(space.shape), "dtype": str(space.dtype).removeprefix("torch."),
                           "kind": type(space).__name__}
    for key in ("low", "high", "nvec"):
        value = getattr(space, key, None)
        if isinstance(value, Tensor):
            out[key] = value.detach().cpu().reshape(-1).tolist()
    if hasattr(space, "n"):
        out["n"] = int(space.n)
        out["start"] = int(getattr(space, "start", 0))
    return out


def describe(run: LoadedRun, module: torch.nn.Module, batch: int = 1) -> dict[str, Any]:
    """What ``noeira.json`` holds for ``run``'s policy ``module``."""
    spec = run.env.spec
    own = dict(getattr(module, "metadata", {}))
    meta: dict[str, Any] = {
        "noeira_export": 1, "agent": run.cfg.agent.name, "env": run.cfg.env.name, "run": str(run.path),
        "recurrent": bool(getattr(module, "recurrent", False)),
        "observation": {**_space_meta(spec.observation_space), **own.pop("observation", {})},
        "action": {**_space_meta(spec.action_space), **own.pop("action", {})},
        "fps": own.pop("fps", None) or contracts.render_fps(run.env),
    }
    if meta["recurrent"]:
        state = module.initial_state(batch)
        if bool(state.abs().sum() != 0):
            raise UserError(f"agent {run.cfg.agent.name!r}: an exported recurrent policy must start from a zero state")
        dim = int(module.state_batch_dim)
        shape = list(state.shape)
        shape[dim] = 1
        meta["state"] = {"shape": shape, "batch_dim": dim, "dtype": str(state.dtype).removeprefix("torch.")}
    meta.update(own)
    return meta


def _example(run: LoadedRun, module: torch.nn.Module, batch: int) -> tuple[Tensor, ...]:
    obs = run.env.reset(seed=run.cfg.run.seed + 1)[:batch].clone()
    if not getattr(module, "recurrent", False):
        return (obs,)
    state = module.initial_state(batch)
    done = torch.zeros(batch, dtype=torch.bool, device=obs.device)
    done[0] = True
    return obs, state, done


def export_policy(run_dir: str | Path, fmt: str, out: str | Path | None = None, *, batch: int = 2) -> dict[str, Any]:
    """Write run ``run_dir``'s policy in format ``fmt`` to ``out`` (default ``RUN/export/policy<ext>``);
    returns ``{"path", "format", "metadata"}``. Traced on the CPU with a batch of ``batch``."""
    if fmt not in FORMATS:
        raise UserError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if batch < 1:
        raise UserError(f"--batch: must be >= 1, got {batch}")
    if fmt == "onnx":
        for mod in ("onnx", "onnxscript"):
            try:
                __import__(mod)
            except ImportError:
                raise UserError(f"--format onnx needs {mod}: pip install '{EXPORT_EXTRA}'") from None
    run = load_run(run_dir, backend="cpu", num_envs=max(batch, 1))
    try:
        module = policy_module(run.agent, run.cfg.agent.name)
        meta = describe(run, module)
        meta["format"] = fmt
        path = Path(out) if out else run.path / "export" / f"policy{FORMATS[fmt]}"
        if path.suffix.lower() != FORMATS[fmt]:
            path = path.with_name(path.name + FORMATS[fmt])  # load_policy tells the format by the suffix
        path.parent.mkdir(parents=True, exist_ok=True)
        example = _example(run, module, batch)
        with torch.no_grad(), warnings.catch_warnings():
            # torch.jit is deprecated in favour of torch.export, yet TorchScript is still what C++ and
            # mobile runtimes load; the ONNX exporter warns about optional converters (torchvision)
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", UserWarning)
            if fmt == "torchscript":
                _torchscript(module, example, path, meta)
            elif fmt == "pt2":
                _pt2(module, example, path, meta)
            else:
                _onnx(module, example, path, meta)
    finally:
        run.env.close()
    return {"path": str(path), "format": fmt, "metadata": meta}


def _names(recurrent: bool) -> tuple[list[str], list[str]]:
    return (["obs", "state", "done"], ["action", "next_state"]) if recurrent else (["obs"], ["action"])


def _dynamic_shapes(example: tuple[Tensor, ...], meta: Mapping[str, Any]) -> tuple[dict[int, Any], ...]:
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    if len(example) == 1:
        return ({0: batch},)
    return ({0: batch}, {int(meta["state"]["batch_dim"]): batch}, {0: batch})


def _torchscript(module: torch.nn.Module, example: tuple[Tensor, ...], path: Path, meta: dict[str, Any]) -> None:
    traced = torch.jit.trace(module, example, check_trace=False, strict=False)
    torch.jit.save(traced, str(path), _extra_files={META_NAME: json.dumps(meta)})


def _pt2(module: torch.nn.Module, example: tuple[Tensor, ...], path: Path, meta: dict[str, Any]) -> None:
    program = torch.export.export(module, example, dynamic_shapes=_dynamic_shapes(example, meta), strict=False)
    torch.export.save(program, str(path), extra_files={META_NAME: json.dumps(meta)})


def _onnx(module: torch.nn.Module, example: tuple[Tensor, ...], path: Path, meta: dict[str, Any]) -> None:
    import onnx

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed" lines

    inputs, outputs = _names(len(example) > 1)
    torch.onnx.export(module, example, str(path), input_names=inputs, output_names=outputs,
                      dynamic_shapes=_dynamic_shapes(example, meta), dynamo=True, optimize=True, verbose=False)
    model = onnx.load(str(path))
    model.metadata_props.add(key=META_NAME, value=json.dumps(meta))
    onnx.save(model, str(path))


# -- running a policy: an exported file or a run's checkpoint ----------------------------------

class Policy:
    """A policy loaded by :func:`load_policy`: ``act(obs, state, done) -> (action, state)`` on
    torch tensors (``state`` None for a feed-forward policy), ``initial_state(batch)``, and
    ``metadata`` (what ``noeira.json`` holds)."""

    def __init__(self, run: Any, metadata: dict[str, Any], source: str) -> None:
        self._run = run
        self.metadata = metadata
        self.recurrent = bool(metadata.get("recurrent"))
        self.source = source

    def reset(self) -> None:
        """Start an episode for :meth:`step` (a recurrent state back to zeros)."""
        self._state = self.initial_state(1)
        self._done = torch.ones(1, dtype=torch.bool)

    def step(self, obs: Any) -> list[float]:
        """One observation (a flat sequence of numbers) -> the action as a list of floats, the
        state carried from the previous call (:meth:`reset` starts afresh). What a control loop
        needs, without handling tensors itself."""
        if not hasattr(self, "_state"):
            self.reset()
        x = torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1)
        shape = self.metadata.get("observation", {}).get("shape")
        if shape and len(shape) > 1:
            x = x.reshape(1, *shape)
        action, self._state = self.act(x, self._state, self._done)
        self._done = torch.zeros(1, dtype=torch.bool)
        return [float(v) for v in action.reshape(-1).tolist()]

    def initial_state(self, batch: int) -> Tensor | None:
        if not self.recurrent:
            return None
        st = self.metadata["state"]
        shape = list(st["shape"])
        shape[st["batch_dim"]] = batch
        return torch.zeros(shape, dtype=getattr(torch, st.get("dtype", "float32")))

    @torch.no_grad()
    def act(self, obs: Tensor, state: Tensor | None = None, done: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        if self.recurrent:
            if state is None:
                state = self.initial_state(obs.shape[0])
            if done is None:
                done = torch.zeros(obs.shape[0], dtype=torch.bool)
            action, state = self._run(obs, state, done)
            return action, state
        return self._run(obs), None


def _onnx_runner(path: Path) -> tuple[Any, dict[str, Any]]:
    try:
        import onnxruntime as ort
    except ImportError:
        raise UserError(f"{path.name}: running an ONNX policy needs onnxruntime: pip install '{EXPORT_EXTRA}'") from None
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    raw = session.get_modelmeta().custom_metadata_map.get(META_NAME)
    if raw is None:
        raise UserError(f"{path}: an ONNX file without noeira's metadata (not written by noeira export)")
    names = [i.name for i in session.get_inputs()]

    def run(*args: Tensor) -> Any:
        feeds = {n: a.detach().cpu().numpy() for n, a in zip(names, args, strict=True)}
        out = [torch.from_numpy(o) for o in session.run(None, feeds)]
        return (out[0], out[1]) if len(out) > 1 else out[0]

    return run, json.loads(raw)


def load_policy(source: str | Path, *, backend: str = "cpu") -> Policy:
    """A run directory (its checkpoint's policy module) or a file ``noeira export`` wrote
    (``.pt`` TorchScript, ``.pt2`` torch.export, ``.onnx``), ready to act on ``backend``'s
    device (exported files run on the CPU)."""
    p = Path(source)
    if p.is_dir():
        run = load_run(p, backend=backend, num_envs=1)
        try:
            module = policy_module(run.agent, run.cfg.agent.name)
            meta = describe(run, module)
        finally:
            run.env.close()
        return Policy(module, meta, f"checkpoint of {p}")
    if not p.is_file():
        raise UserError(f"{source}: no such run directory or exported policy")
    suffix = p.suffix.lower()
    try:
        if suffix == ".onnx":
            runner, meta = _onnx_runner(p)
            return Policy(runner, meta, f"onnx {p}")
        extra = {META_NAME: ""}
        if suffix == ".pt2":
            program = torch.export.load(str(p), extra_files=extra)
            module = program.module()
        elif suffix == ".pt":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit: see export_policy
                module = torch.jit.load(str(p), map_location="cpu", _extra_files=extra)
        else:
            raise UserError(f"{p.name}: not an exported policy (expected .pt, .pt2 or .onnx, or a run directory)")
    except UserError:
        raise
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        raise UserError(f"{p}: cannot load the policy ({type(err).__name__}: {first})") from None
    raw = extra[META_NAME]
    if not raw:
        raise UserError(f"{p}: no noeira metadata inside (not written by noeira export)")
    return Policy(module, json.loads(raw), f"{suffix[1:]} {p}")
