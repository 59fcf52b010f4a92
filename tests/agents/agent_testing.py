"""What the agent tests share: a log of the aten ops an agent's call runs, and the capture-safety
check built on it (no host sync, the same op sequence on every call). The test modules import it by name
(pytest puts tests/agents on ``sys.path``)."""

from __future__ import annotations

import collections
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = {"aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::masked_select", "aten::is_nonzero"}
"""The aten ops that read a device value on the host."""


class OpLog(TorchDispatchMode):
    """Records every aten op run inside; flags the ones that read a device value on the host."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.syncs: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = func._schema.name
        self.ops.append(name)
        if name in SYNC_OPS:
            self.syncs[name] += 1
        return func(*args, **(kwargs or {}))


def check_capture_safe_calls(agent: Any, env: Any, calls: int = 5) -> None:
    """``calls`` collect + learn calls: no host sync in any, their metrics on the env's device, and
    from the second call on the same op sequence (the first also creates gradients and optimizer
    state, which graph backends run before recording; then every call, warming up or learning,
    runs the same ops)."""
    sequences = []
    for _ in range(calls):
        log = OpLog()
        with log:
            agent.collect(env)
            metrics = agent.learn()
        assert not log.syncs, f"host syncs in collect/learn: {dict(log.syncs)}"
        sequences.append(log.ops)
        assert all(v.device == env.device for v in metrics.values())
    assert all(s == sequences[1] for s in sequences[2:]), "the op sequence changes between calls"
