"""Where in the user's code an op was written: ``model.py:14``."""

from __future__ import annotations

import contextlib
import os
import sys
from contextvars import ContextVar

_PINNED: ContextVar[str | None] = ContextVar("isokernel_pinned_where", default=None)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_where() -> str:
    """``file:line`` of the innermost frame outside the isokernel package, or
    the line a transform pinned (see ``pinned_where``)."""
    pinned = _PINNED.get()
    if pinned is not None:
        return pinned
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR) and not filename.startswith("<frozen"):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


@contextlib.contextmanager
def pinned_where(where: str):
    """While a transform writes the derivative (or batched form) of a node,
    the ops it records carry that node's source line, not the transform's
    caller."""
    token = _PINNED.set(where)
    try:
        yield
    finally:
        _PINNED.reset(token)
