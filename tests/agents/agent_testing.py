"""What the agent tests share: a log of the aten ops an agent's call runs, for the capture-safety
checks (no host sync, the same op sequence on every call). The test modules import it by name
(pytest puts tests/agents on ``sys.path``)."""

from __future__ import annotations

import collections

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
