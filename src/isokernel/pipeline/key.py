"""The compile-cache key of a jitted function: what a call must share with
an earlier one to reuse its compilation, and the words for what changed when
it does not.

The key is the argument tree, each leaf's shape and dtype (Python scalars
are weakly typed: keyed by their Python type), the values of static
arguments, and the reduction and numerics modes of the call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backends import reductions
from ..ir import dtypes
from ..ir.pytree import TreeDef

_WEAK = (bool, int, float)


@dataclass(frozen=True, slots=True)
class CallKey:
    """One compilation's key: the dynamic arguments' names and tree, each
    leaf's key (``leaf_key``), the static arguments as ``(name, Static)``
    pairs, and the reduction and numerics modes."""

    names: tuple[str, ...]
    tree: TreeDef
    leaves: tuple
    statics: tuple
    reductions: str
    numerics: str

    def changed_from(self, old: CallKey, leaf_names) -> str:
        """What differs from ``old``, in the user's words (the first difference)."""
        if old.numerics != self.numerics:
            return f"numerics changed from {old.numerics} to {self.numerics}"
        if old.reductions != self.reductions:
            return (f"reductions changed from {old.reductions} to {self.reductions} "
                    f"({reductions.ENV} or the deterministic_reductions option)")
        if old.statics != self.statics:
            before, after = dict(old.statics), dict(self.statics)
            for name in after:
                if before.get(name) != after[name]:
                    return (f"static argument '{name}' changed from {before.get(name)!r} to "
                            f"{after[name]!r}")
        if old.names != self.names or old.tree != self.tree:
            return f"the argument structure changed from {old.names} to {self.names}"
        for name, a, b in zip(leaf_names, old.leaves, self.leaves):
            if a != b:
                return f"argument '{name}' changed from {_describe(a)} to {_describe(b)}"
        return "nothing visible changed"


class MaskedArgument(TypeError):
    """A masked array among the arguments (``Jitted`` names it)."""


class Static:
    """A static argument as a cache key. Equal to another when both are the
    same value of the same type: NaN equals NaN (a static ``float('nan')``
    does not record again on every call), and ``1``, ``1.0`` and ``True``
    stay three keys (they record different graphs)."""

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value = value
        self.key = _static_identity(value)

    def __eq__(self, other) -> bool:
        return isinstance(other, Static) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return repr(self.value)


def _static_identity(value):
    if isinstance(value, tuple):
        return tuple, tuple(_static_identity(v) for v in value)
    if isinstance(value, (float, complex, np.inexact)) and value != value:
        return type(value), "nan"
    return type(value), value


def on_device(x) -> bool:
    """Whether ``x`` is a device (CUDA) array."""
    return hasattr(x, "__cuda_array_interface__")


def leaf_key(x):
    """A leaf's part of the key: shape and dtype (native byte order), the
    Python type of a weakly typed scalar, or shape, dtype and ``cuda`` for a
    device array. A masked array raises ``MaskedArgument``."""
    if type(x) is np.ndarray:
        return x.shape, (x.dtype if x.dtype.isnative else x.dtype.newbyteorder("="))
    if isinstance(x, _WEAK) and not isinstance(x, np.generic):
        return (type(x),)
    if isinstance(x, np.ma.MaskedArray):
        raise MaskedArgument
    if on_device(x):  # the same shape on another device is another compilation
        return tuple(x.shape), np.dtype(x.dtype), "cuda"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return tuple(x.shape), np.dtype(x.dtype)
    array = np.asarray(x)
    return array.shape, array.dtype


def _describe(leaf: tuple) -> str:
    if len(leaf) == 1:
        return f"a Python {leaf[0].__name__}"
    shape, dtype = leaf[:2]
    try:
        short = dtypes.SHORT[dtypes.canonical(dtype)]
    except TypeError:
        short = str(dtype)
    return f"{short}{list(shape)}"
