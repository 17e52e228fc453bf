"""The five dtypes isokernel computes in, and the weak-typing rule for
Python scalars."""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

DTYPES = (float32, float64, int32, int64, bool_)
FLOATS = frozenset({float32, float64})
INTS = frozenset({int32, int64})

SHORT = {float32: "f32", float64: "f64", int32: "i32", int64: "i64", bool_: "bool"}
_BY_NAME = {
    **{d.name: d for d in DTYPES},
    **{s: d for d, s in SHORT.items()},
    "bool_": bool_,
}

# A Python scalar is "weak": it takes the dtype of the array it meets. These
# exemplars let NumPy's own promotion (NEP 50) decide, so the rule is NumPy's.
_WEAK_EXEMPLAR = {bool_: False, int64: 0, float64: 0.0}


def canonical(dtype) -> np.dtype:
    """The isokernel dtype for ``dtype`` (a NumPy dtype, type or name)."""
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is not None and not d.isnative:  # big-endian data: the same values, converted on use
        d = d.newbyteorder("=")
    if d not in DTYPES:
        names = ", ".join(d.name for d in DTYPES)
        raise DTypeError(f"dtype {dtype!r} is not supported; use one of {names}")
    return d


def python_scalar_dtype(value) -> np.dtype:
    """The dtype a weak Python scalar has on its own."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    return float64


def promote_weak(strong: np.dtype | None, weak: list[np.dtype]) -> np.dtype:
    """The result dtype of one strong dtype (or none) meeting weak scalars."""
    exemplars = [_WEAK_EXEMPLAR[d] for d in weak]
    if strong is None:
        return canonical(np.result_type(*exemplars))
    return canonical(np.result_type(strong, *exemplars))


def float_of(dtype: np.dtype) -> np.dtype:
    """The float dtype an integer or bool operand is computed in by math
    functions (as NumPy does for int32/int64)."""
    return dtype if dtype in FLOATS else float64
