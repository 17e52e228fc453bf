"""The reference's NumPy rules, shared by the CPU strategies: each node's
EVAL rule as a callable, and the capsules of provider ``numpy`` (the oracle's
own, trust ``reference``), which every CPU profile accepts for the ops it
runs whole by the reference rules."""

from __future__ import annotations

import functools

import numpy as np

from ... import control  # noqa: F401 - its primitives' EVAL rules exist before capsules
from ...ir import EVAL, Node, Op
from ...ir.ops import LINALG, TRANSCENDENTAL, TRANSFORM_ONLY
from ..capsules import Capsule, NumericalPolicy, register

NUMPY_PROVIDER = "numpy"


def eval_kernel(node: Node):
    """The node's EVAL rule with its attributes bound: ``kernel(*operands)``."""
    rule = EVAL[node.op]
    return functools.partial(rule, **node.attrs) if node.attrs else rule


_BASIC = NumericalPolicy()
_PAIRWISE = NumericalPolicy(reduction_order="numpy add.reduce: pairwise along a contiguous "
                                            "axis, sequential across others")
_EXACT_ORDER = NumericalPolicy(reduction_order="order-independent (exact)")
_BLAS = NumericalPolicy(contraction="implementation-defined (BLAS kernels may use FMA)",
                        reduction_order="implementation-defined (BLAS blocking)",
                        math_library=f"NumPy matmul over {np.__name__} BLAS")

_LAPACK = NumericalPolicy(contraction="implementation-defined (BLAS kernels may use FMA)",
                          reduction_order="implementation-defined (BLAS blocking)",
                          math_library="isokernel's NumPy factorizations (LAPACK's pivot order "
                                       "and triangles) over NumPy matmul and numpy.linalg")


def _mathlib() -> NumericalPolicy:
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
        simd = "+".join(k for k in ("AVX512F", "AVX2", "FMA3", "NEON") if features.get(k))
    except ImportError:  # pragma: no cover - older NumPy layout
        simd = "unknown"
    return NumericalPolicy(math_library=f"NumPy {np.__version__} ufunc loops "
                                        f"(SIMD dispatch on this CPU: {simd or 'none'})")


def _policy(op: Op) -> NumericalPolicy:
    if op in TRANSCENDENTAL:
        return _mathlib()
    if op in (Op.REDUCE_SUM, Op.REDUCE_PROD):
        return _PAIRWISE
    if op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
        return _EXACT_ORDER
    if op is Op.DOT_GENERAL:
        return _BLAS
    if op in LINALG:
        return _LAPACK
    return _BASIC


_NAMES = {
    Op.REDUCE_SUM: "numpy.sum", Op.REDUCE_PROD: "numpy.prod", Op.REDUCE_MAX: "numpy.max",
    Op.REDUCE_MIN: "numpy.min", Op.RESHAPE: "numpy.reshape", Op.BROADCAST: "numpy.broadcast_to",
    Op.TRANSPOSE: "numpy.transpose", Op.SLICE: "numpy.ndarray.__getitem__",
    Op.PAD: "numpy.full+__setitem__", Op.REV: "numpy.flip", Op.CONCATENATE: "numpy.concatenate",
    Op.DOT_GENERAL: "numpy.matmul",
    Op.LU: "isokernel getrf (NumPy: partial pivoting, rank-1 updates)",
    Op.TRIANGULAR_SOLVE: "isokernel trsm (NumPy: substitution, matmul by halves)",
    Op.CHOLESKY: "numpy.linalg.cholesky (LAPACK potrf 'L')",
    Op.GATHER: "numpy.take (axis 0)",
    Op.FFT: "numpy.fft (pocketfft), NumPy's normalization",
    Op.SORT: "numpy.argsort(kind='stable') / numpy.lexsort, then take_along_axis",
    Op.SCATTER: "numpy ufunc.at (sequential, in the indices' order); set: the last write",
    Op.QR: "numpy.linalg.qr (LAPACK geqrf + orgqr)",
    Op.EIGH: "numpy.linalg.eigh (LAPACK syevd 'L')",
    Op.SVD: "numpy.linalg.svd (LAPACK gesdd)", Op.CAST: "numpy.ndarray.astype",
    Op.LDEXP: "numpy.ldexp", Op.LOGB: "numpy.frexp (exponent - 1)",
    Op.TABLE_LOOKUP: "isokernel table_lookup (clamp, floor, lerp)",
    Op.FUSED: "isokernel fused form (its body, op by op)",
    Op.COND: "isokernel cond (the branch the index picks, op by op)",
    Op.WHILE: "isokernel while (the body while the predicate holds, per lane)",
    Op.WHILE_LIN: "isokernel while_lin (the JVP'd loop, for its tangents)",
    Op.WHILE_VJP: "isokernel while_vjp (checkpointed reverse sweep, O(sqrt(T) carry))",
    Op.SCAN: "isokernel scan (the body step by step, outputs stacked)",
    Op.CHECKPOINT: "isokernel checkpoint (its body, op by op)",
}


def _register_capsules() -> None:
    for op, rule in EVAL.items():
        if op is Op.CONST or op in TRANSFORM_ONLY:  # jit strips those before planning
            continue
        name = _NAMES.get(op) or f"numpy.{rule.__name__}"
        register(Capsule(name=name, op=op, provider=NUMPY_PROVIDER, device="cpu",
                         trust="reference", vjp_mode="isokernel-graph",
                         numerical_policy=_policy(op)))


_register_capsules()
