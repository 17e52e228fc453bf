"""The ulp tables of the strategies whose transcendentals are not the
reference's: measured (``native``), documented by the vendor (CUDA's
libdevice) and derived from both (the GPU strategies). Several strategies
state these bounds in their capsules and one derives its bound from
another's, so they live here, beside no strategy in particular."""

from __future__ import annotations

from ..ir import Op

NATIVE_ULP_BOUND = {
    Op.CBRT: 5, Op.EXP: 5, Op.EXP2: 4, Op.EXPM1: 4, Op.LOG: 7, Op.LOG2: 3, Op.LOG10: 3,
    Op.LOG1P: 3, Op.SIN: 4, Op.COS: 4, Op.TAN: 4, Op.ASIN: 3, Op.ACOS: 3, Op.ATAN: 3,
    Op.SINH: 4, Op.COSH: 3, Op.TANH: 3, Op.ASINH: 4, Op.ACOSH: 2, Op.ATANH: 3,
    Op.POW: 2, Op.ATAN2: 4,
}
"""Largest distance, in ulp, between the C math library's transcendental
(``native``) and the reference's (NumPy's) over each function's domain,
float32 and float64; measured by ``tests/test_native.py``, which asserts it,
with glibc 2.36 libm/libmvec against NumPy 2.4's SIMD loops on two x86-64
machines: one with AVX-512 and one with AVX2 only (AMD EPYC). Each runs other
vector variants of both libraries; each bound is the larger measurement plus
one ulp of headroom (docs/cpu.md lists both machines' figures)."""

CUDA_DOC_ULP = {
    Op.CBRT: 1, Op.EXP: 2, Op.EXP2: 2, Op.EXPM1: 1, Op.LOG: 1, Op.LOG2: 1, Op.LOG10: 2,
    Op.LOG1P: 1, Op.SIN: 2, Op.COS: 2, Op.TAN: 4, Op.ASIN: 2, Op.ACOS: 2, Op.ATAN: 2,
    Op.SINH: 3, Op.COSH: 2, Op.TANH: 2, Op.ASINH: 3, Op.ACOSH: 4, Op.ATANH: 3,
    Op.POW: 4, Op.ATAN2: 3,
}
"""Maximum error of CUDA's libdevice functions in ulp of the exact result,
worst of float32 and float64 (CUDA C++ Programming Guide, "Mathematical
Functions"; no fast-math)."""

CUDA_ULP_BOUND = {op: CUDA_DOC_ULP[op] + NATIVE_ULP_BOUND[op] + 2 for op in CUDA_DOC_ULP}
"""Stated distance, in ulp, of the GPU strategies' transcendentals from the
reference (NumPy's ufunc loops): CUDA's documented error, plus NumPy's
distance from glibc as ``native`` measured it, plus 2 for glibc's own error.
Derived, not yet measured on a GPU: ``scripts/gpu-check`` measures each
function and checks it against this."""
