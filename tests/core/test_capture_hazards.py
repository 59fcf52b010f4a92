"""The CPU-side detector of work a CUDA-graph recording cannot hold (``noeira.core.testing.capture``)
catches every kind it names, at the caller's line, and passes what is fine on CUDA; the
conformance kit runs it on every env that declares ``capture_safe``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from acme_corridor.env import Corridor

from noeira.core import get_backend
from noeira.core.testing import CaptureHazards, check_env, check_env_capture, find_capture_hazards

T = torch.arange(10)
M = T > 4
F = T.float()

# (what the code does, the code, the hazard's kind, words of its description)
HAZARDS = [
    ("tensor literal", lambda: torch.tensor([1, 2, 3]), "host-to-device", "torch.tensor"),
    ("0-d literal on a device", lambda: torch.tensor(0.5, device="cpu"), "host-to-device", "torch.tensor"),
    ("as_tensor of a list", lambda: torch.as_tensor([1, 2]), "host-to-device", "torch.as_tensor"),
    ("new_tensor", lambda: T.new_tensor([1]), "host-to-device", "Tensor.new_tensor"),
    ("from_numpy", lambda: torch.from_numpy(np.arange(3)), "host-to-device", "NumPy"),
    ("list index", lambda: T[[1, 2]], "host-to-device", "Python sequence"),
    ("tuple index of a dim", lambda: T.view(2, 5)[:, (0, 3)], "host-to-device", "Python sequence"),
    ("bool-list index", lambda: T[[True, False] * 5], "host-to-device", "Python sequence"),
    ("list-index assignment", lambda: T.clone().__setitem__([1, 2], 0), "host-to-device", "Python sequence"),
    ("factory without device", lambda: torch.zeros(3), "host tensor", "torch.zeros"),
    ("arange without device", lambda: torch.arange(4), "host tensor", "torch.arange"),
    ("item", lambda: T.sum().item(), "host sync", "Tensor.item"),
    ("tolist", lambda: T.tolist(), "host sync", "Tensor.tolist"),
    ("numpy", lambda: T.numpy(), "host sync", "Tensor.numpy"),
    ("cpu", lambda: T.cpu(), "host sync", "Tensor.cpu"),
    ("to('cpu')", lambda: T.to("cpu"), "host sync", "Tensor.to('cpu')"),
    ("python branch", lambda: 1 if M.any() else 0, "host sync", "bool(tensor)"),
    ("int of a tensor", lambda: int(T[0]), "host sync", "int(tensor)"),
    ("range over a tensor", lambda: list(range(T[2])), "host sync", "Python index"),
    ("nonzero", lambda: M.nonzero(), "host sync", "aten.nonzero"),
    ("masked_select", lambda: T.masked_select(M), "host sync", "aten.masked_select"),
    ("unique", lambda: T.unique(), "host sync", "torch.unique"),
    ("boolean-mask index", lambda: T[M], "host sync", "boolean mask"),
    ("boolean-mask assignment", lambda: T.clone().__setitem__(M, 0), "host sync", "boolean mask"),
    ("repeat_interleave", lambda: torch.repeat_interleave(T, T), "host sync", "repeat_interleave"),
    ("one_hot without num_classes", lambda: torch.nn.functional.one_hot(T), "host sync", "_local_scalar_dense"),
]

FINE = [
    ("python scalar in an op", lambda: T + 1),
    ("where with a python scalar", lambda: torch.where(M, 1.5, F)),
    ("clamp with a python bound", lambda: T.clamp(min=0)),
    ("factory on a device", lambda: torch.full((3,), 7, device=T.device)),
    ("like-factory", lambda: torch.zeros_like(T)),
    ("scalar assignment", lambda: T.clone().__setitem__(3, 5)),
    ("tensor-index assignment", lambda: F.clone().__setitem__(T[:2], 5.0)),
    ("tensor index", lambda: T[T[:3]]),
    ("index_select", lambda: T.index_select(0, T[:3])),
    ("masked_fill", lambda: T.masked_fill(M, 0)),
    ("nonzero_static", lambda: torch.nonzero_static(M, size=10)),
    ("repeat_interleave with output_size", lambda: torch.repeat_interleave(T, T, output_size=45)),
    ("one_hot with num_classes", lambda: torch.nn.functional.one_hot(T, 10)),
    ("as_tensor of a tensor", lambda: torch.as_tensor(T)),
    ("to the env's device", lambda: T.to(T.device)),
]


@pytest.mark.parametrize(("what", "fn", "kind", "words"), HAZARDS, ids=[h[0] for h in HAZARDS])
def test_each_hazard_is_found_at_its_line(what: str, fn, kind: str, words: str) -> None:  # noqa: ANN001
    hazards = find_capture_hazards(fn)
    assert any(h.kind == kind and words in h.what for h in hazards), (what, [str(h) for h in hazards])
    assert len(hazards) == (2 if what == "bool-list index" else 1), (what, [str(h) for h in hazards])  # + its mask
    for h in hazards:
        file, line, _ = h.stack[0]
        assert file == __file__ and line == inspect.getsourcelines(fn)[1], (what, h.site)


@pytest.mark.parametrize(("what", "fn"), FINE, ids=[f[0] for f in FINE])
def test_what_is_fine_on_cuda_is_not_reported(what: str, fn) -> None:  # noqa: ANN001
    assert find_capture_hazards(fn) == [], what


def _helper_with_a_literal() -> torch.Tensor:
    return T + torch.tensor([1])


def test_stack_names_the_callers_and_counts_repeats() -> None:
    def outer() -> None:
        for _ in range(3):
            _helper_with_a_literal()

    with CaptureHazards() as det:
        outer()
        with det.quiet():
            torch.tensor([1])  # not checked
    (h,) = det.hazards
    assert h.count == 3
    assert [fn for _, _, fn in h.stack[:3]] == ["_helper_with_a_literal", "outer",
                                                "test_stack_names_the_callers_and_counts_repeats"]
    assert "_helper_with_a_literal" in str(h) and "(x3)" in str(h)


class _Literal(Corridor):
    """Capture-safe as declared, but its step copies a tensor literal to the device."""

    def _advance(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        reward, done = super()._advance(action)
        return reward * torch.tensor(1.0, device=self.device), done


class _Branchy(Corridor):
    """Resets only when some env ended: a Python branch on a tensor value (in the autoresets)."""

    def _reset_envs(self, mask: torch.Tensor) -> None:
        if mask.any():
            super()._reset_envs(mask)


def _corridor(cls: type[Corridor]):  # noqa: ANN202
    return lambda seed: cls(Corridor.Config(length=4), num_envs=6, backend=get_backend("cpu"), seed=seed)


def test_kit_passes_a_capture_safe_env() -> None:
    check_env_capture(_corridor(Corridor))


@pytest.mark.parametrize(("cls", "words"), [(_Literal, "torch.tensor"), (_Branchy, "bool(tensor)")])
def test_kit_catches_capture_unsafe_steps(cls: type[Corridor], words: str) -> None:
    with pytest.raises(AssertionError, match="declares capture_safe") as err:
        check_env_capture(_corridor(cls))
    assert words in str(err.value) and "test_capture_hazards.py" in str(err.value)
    with pytest.raises(AssertionError, match="declares capture_safe"):  # check_env runs it for capture_safe envs
        check_env(_corridor(cls))


def test_kit_skips_envs_that_do_not_claim_capture_safe() -> None:
    class Honest(_Branchy):
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            self.capture_safe = False

    check_env(_corridor(Honest))
