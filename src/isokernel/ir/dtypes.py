"""The seven dtypes isokernel computes in, and the weak-typing rule for
Python scalars."""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

DTYPES = (float32, float64, int32, int64, bool_, complex64, complex128)
FLOATS = frozenset({float32, float64})
INTS = frozenset({int32, int64})
COMPLEX = frozenset({complex64, complex128})
INEXACT = FLOATS | COMPLEX

REAL_OF = {complex64: float32, complex128: float64}
"""The dtype of a complex dtype's real and imaginary parts."""
COMPLEX_OF = {float32: complex64, float64: complex128}
"""The complex dtype whose parts are of a float dtype."""

SHORT = {float32: "f32", float64: "f64", int32: "i32", int64: "i64", bool_: "bool",
         complex64: "c64", complex128: "c128"}
_BY_NAME = {
    **{d.name: d for d in DTYPES},
    **{s: d for d, s in SHORT.items()},
    "bool_": bool_,
}

# A Python scalar is "weak": it takes the dtype of the array it meets. These
# exemplars let NumPy's own promotion (NEP 50) decide, so the rule is NumPy's.
_WEAK_EXEMPLAR = {bool_: False, int64: 0, float64: 0.0, complex128: 0j}


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
    if isinstance(value, complex):
        return complex128
    return float64


def promote_weak(strong: np.dtype | None, weak: list[np.dtype]) -> np.dtype:
    """The result dtype of one strong dtype (or none) meeting weak scalars."""
    exemplars = [_WEAK_EXEMPLAR[d] for d in weak]
    if strong is None:
        return canonical(np.result_type(*exemplars))
    return canonical(np.result_type(strong, *exemplars))


def float_of(dtype: np.dtype) -> np.dtype:
    """The float dtype an integer or bool operand is computed in by math
    functions (as NumPy does for int32/int64); float and complex dtypes stay."""
    return dtype if dtype in INEXACT else float64
