"""Type aliases for annotating code written with isokernel.

The same model function receives NumPy arrays and Python scalars when it
runs eagerly and recorded values (tracers) when it runs under ``jit`` or a
transform, so array values are typed loosely: ``Array`` and ``ArrayLike``
are ``Any``, and a checker accepts either kind wherever an array goes.
They say what a parameter means; the strict parts of the public API are
its functions' own arguments and options (``strategy: str``,
``keepdims: bool``, ``argnums: int | Sequence[int]`` ...).

    from isokernel.typing import Array, ArrayLike, PyTree

    def loss(params: PyTree, x: ArrayLike) -> Array:
        ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

Array: TypeAlias = Any
"""An array value as isokernel's functions return it: a NumPy array or
scalar when run eagerly, a tracer inside a recording."""

ArrayLike: TypeAlias = Any
"""What isokernel's functions take as an array operand: an ``Array``, a
NumPy array or scalar, a Python scalar, or a (nested) list of them."""

PyTree: TypeAlias = Any
"""A nested structure of tuples, lists, dicts (and registered nodes) whose
leaves are arrays: parameters, optimizer states, a loop's carry."""

DTypeLike: TypeAlias = Any
"""A dtype as NumPy takes it: ``inp.float64``, ``np.float32``, ``"int64"``."""

Shape: TypeAlias = int | Sequence[int]
"""An array shape: one size or a sequence of sizes."""

Axis: TypeAlias = int | Sequence[int] | None
"""The axis (or axes) a function works along; None for all of them."""

__all__ = ["Array", "ArrayLike", "Axis", "DTypeLike", "PyTree", "Shape"]
