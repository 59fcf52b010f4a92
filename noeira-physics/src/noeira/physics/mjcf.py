"""Loading MJCF models, shared by the engines."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

import mujoco

from noeira.core.errors import UserError

__all__ = ["load_model", "mujoco_warnings"]


@contextlib.contextmanager
def mujoco_warnings() -> Iterator[None]:
    """Route MuJoCo's warnings to Python's ``warnings`` while compiling (MuJoCo would
    otherwise write them to ``MUJOCO_LOG.TXT`` in the working directory)."""
    def warn(msg: str) -> None:
        # a deprecation in a model file (gymnasium's half_cheetah.xml uses settotalmass) is
        # news for its author, not its user: a DeprecationWarning, hidden by default
        category = DeprecationWarning if "deprecated" in msg else UserWarning
        warnings.warn(f"MuJoCo: {msg}", category, stacklevel=4)

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(warn)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def load_model(model: str | mujoco.MjModel) -> mujoco.MjModel:
    """An ``MjModel`` from a path to an MJCF file, an MJCF string, or an ``MjModel`` (copied)."""
    if isinstance(model, mujoco.MjModel):
        return model.__copy__()
    text = model.lstrip()
    try:
        with mujoco_warnings():
            if text.startswith("<"):
                return mujoco.MjModel.from_xml_string(model)
            path = os.path.expanduser(model)
            if not os.path.exists(path):
                raise UserError(f"physics model: no such MJCF file: {model}")
            return mujoco.MjModel.from_xml_path(path)
    except ValueError as e:  # MuJoCo's compile errors
        raise UserError(f"physics model: MuJoCo cannot compile {model[:80]!r}: {e}") from e
