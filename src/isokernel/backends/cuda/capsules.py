"""The capsules of the GPU strategies' eager kernels, which all three
accept (``cuda-eager`` runs every node with them; ``cuda-fused`` and
``cuda-megakernel`` run with them the nodes outside their fused kernels), the
providers that name them, and the numerical-policy texts the strategies'
own capsules share."""

from __future__ import annotations

from ...codegen.c_expr import MATH
from ...ir import Op
from ...ir.ops import ELEMENTWISE, LAYOUT, REDUCE, TABLE, TRANSCENDENTAL
from ..capsules import Capsule, NumericalPolicy, register
from ..numerics import CUDA_ULP_BOUND

PROVIDER = "cuda-kernel"
REDUCE_PROVIDER = "cuda-reduce"
LAYOUT_PROVIDER = "cupy-layout"
BLAS_PROVIDER = "cublas"
TEXTURE_PROVIDER = "cuda-texture"
FORM_PROVIDER = "cuda-fused-form"
CONTROL_PROVIDER = "cuda-control"
PROVIDERS = (PROVIDER, REDUCE_PROVIDER, LAYOUT_PROVIDER, BLAS_PROVIDER, CONTROL_PROVIDER)
"""The providers of ``cuda-eager``'s profile, in order of preference."""

CUDA_TRUST = frozenset({"checked", "trusted"})
"""What the GPU profiles accept: checked kernels, and the one vendor library
they call (cuBLAS) as trusted."""

ULP_BOUND = CUDA_ULP_BOUND
"""The GPU strategies' stated ulp bound per transcendental (``numerics``)."""

LIBDEVICE = "CUDA libdevice (NVRTC, no fast-math)"
BASIC = "IEEE basic operation in CUDA C, bit-identical to NumPy"
SUBNORMALS = "preserved (--ftz=false)"


EXACT = {
    Op.LDEXP: "exact scaleB in CUDA C (the shared branch-free C), bit-identical to numpy.ldexp",
    Op.LOGB: "exponent bits in CUDA C, bit-identical to the reference's frexp",
    Op.COPYSIGN: "sign bit (CUDA copysign), bit-identical to numpy.copysign",
    Op.TABLE_LOOKUP: "exact mode: the reference's clamp-floor-lerp in CUDA C over the table in "
                     "device memory, bit-identical to the reference",
}
HARDWARE_TABLE = ("hardware mode: texture-unit linear filtering over float32 texels; the blend "
                  "weight is 9-bit fixed point (8 fractional bits), so |error| <= "
                  "|v[i+1] - v[i]|/256 plus float32 rounding of the texels (stated; measured "
                  "by scripts/gpu-check); never bit-reproducible")


def _kernel_policy(op: Op) -> NumericalPolicy:
    if op in ULP_BOUND:
        return NumericalPolicy(subnormals=SUBNORMALS,
                               math_library=f"{LIBDEVICE} {MATH[op]}; stated bound "
                                            f"{ULP_BOUND[op]} ulp vs reference (derived, "
                                            f"measured by scripts/gpu-check)")
    return NumericalPolicy(subnormals=SUBNORMALS, math_library=EXACT.get(op, BASIC))


CONTROL_NAMES = {
    Op.COND: "cond on the device: the index read on the host, the branch taken op by op",
    Op.WHILE: "while on the device: the bodies op by op each step, the predicate read on the "
              "host (lane-wise: a device copy keeps the carry of lanes that stopped)",
    Op.WHILE_LIN: "while_lin on the device: the JVP'd loop op by op, as while",
    Op.WHILE_VJP: "while_vjp on the device: the checkpointed reverse sweep op by op",
    Op.SCAN: "scan on the device: the body op by op each step, outputs stacked on the device",
    Op.CHECKPOINT: "checkpoint on the device: its body op by op",
    Op.GET: "a result of its control-flow node (no computation)",
}
"""How the op-by-op strategies run control flow (``executor.CUPY``,
``control``); the bodies' ops keep their own capsules."""
BODIES = "the bodies' ops, each under its own capsule"

REDUCTION_ORDER = ("NumPy's order for C-contiguous operands (pairwise along a trailing run of "
                   "reduced axes, in order across the others; prod a left fold), fixed from "
                   "run to run")


def _register_capsules() -> None:
    for op in (*ELEMENTWISE, *TABLE):
        kind = "libdevice call" if op in TRANSCENDENTAL else "C expression"
        register(Capsule(f"isokernel CUDA kernel ({kind})", op, PROVIDER, "cuda", "checked",
                         "isokernel-graph", _kernel_policy(op)))
    register(Capsule("texture object (CuPy) with linear filtering", Op.TABLE_LOOKUP,
                     TEXTURE_PROVIDER, "cuda", "checked", "isokernel-graph",
                     NumericalPolicy(subnormals="implementation-defined (texture unit)",
                                     math_library=HARDWARE_TABLE)))
    register(Capsule("fused form as its composition (one kernel per op)", Op.FUSED, PROVIDER,
                     "cuda", "checked", "isokernel-graph",
                     NumericalPolicy(subnormals=SUBNORMALS, math_library="the body's ops")))
    register(Capsule("fused form as one kernel (its body through the shared emitter)",
                     Op.FUSED, FORM_PROVIDER, "cuda", "checked", "isokernel-graph",
                     NumericalPolicy(subnormals=SUBNORMALS,
                                     math_library="the body's ops in one pass, --fmad=false: "
                                                  "bit-identical to the composition")))
    for op, name in CONTROL_NAMES.items():
        register(Capsule(name, op, CONTROL_PROVIDER, "cuda", "checked", "isokernel-graph",
                         NumericalPolicy(subnormals=SUBNORMALS, math_library=BODIES)))
    for op in REDUCE:
        register(Capsule("isokernel deterministic reduction", op, REDUCE_PROVIDER, "cuda",
                         "checked", "isokernel-graph",
                         NumericalPolicy(subnormals=SUBNORMALS, reduction_order=REDUCTION_ORDER,
                                         math_library=BASIC)))
    for op in LAYOUT:
        register(Capsule(f"cupy {op.value} (view or device copy)", op, LAYOUT_PROVIDER, "cuda",
                         "checked", "isokernel-graph",
                         NumericalPolicy(math_library="data movement only (exact)")))
    register(Capsule("cupy.take (axis 0, indices in range)", Op.GATHER, LAYOUT_PROVIDER, "cuda",
                     "checked", "isokernel-graph",
                     NumericalPolicy(math_library="data movement only (exact)")))
    register(Capsule("cupy stable argsort/lexsort, then take_along_axis", Op.SORT,
                     LAYOUT_PROVIDER, "cuda", "checked", "isokernel-graph",
                     NumericalPolicy(math_library="comparisons and data movement (exact)")))
    register(Capsule("cupy.matmul (cuBLAS)", Op.DOT_GENERAL, BLAS_PROVIDER, "cuda", "trusted",
                     "isokernel-graph",
                     NumericalPolicy(subnormals="implementation-defined",
                                     contraction="implementation-defined (cuBLAS uses FMA)",
                                     reduction_order="implementation-defined (cuBLAS algorithm)",
                                     math_library="cuBLAS via CuPy (TF32 only if CUPY_TF32=1)")))


_register_capsules()
