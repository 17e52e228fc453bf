"""Arithmetic intensity per strategy: flops over bytes moved.

``COST`` gives each op's floating-point operations for one node. IEEE basic
operations (+ − × ÷ sqrt, comparisons, min/max, select, rounding) count 1
per result element. A transcendental counts the basic operations of the
range reduction and polynomial a typical libm evaluates — a convention, not
a measurement, stated here so every figure can be recomputed:

    exp, exp2, expm1, log, log2, log10, log1p, cbrt      10
    sinh, cosh, tanh                                       12   (an exp and a few ops)
    sin, cos, arcsin, arccos, arctan                       15   (reduction + polynomial)
    arcsinh, arccosh, arctanh                              15   (a log and a sqrt)
    tan, pow, arctan2                                      20   (pow = log, ×, exp)

Layout ops and casts move data and count 0; reductions count one operation
per element reduced; ``dot_general`` counts 2·K per result element; the
dense factorizations count LAPACK's leading terms per matrix (``lu`` 2n³/3,
``cholesky`` n³/3, ``triangular_solve`` n² per right-hand-side column; ``qr``,
``eigh`` and ``svd`` the usual operation counts of geqrf+orgqr, syevd and
gesdd with vectors, as the rules state them). The
exact exponent and sign ops (ldexp, logb, copysign) count 1 like any basic
operation; a table look-up counts the 11 basic operations of its reference
meaning (offset, scale, clamp ×2, floor, index clamp, fraction, lerp ×4);
a region node (a fused form) counts its bodies, op by op (``subgraphs``),
unless its primitive gives a cost rule of its own.

Bytes moved depend on the strategy's memory model (its ``traffic``): *eager* — every
non-view result is written to memory and every operand read back from it
(a view reads the storage it views; a broadcast scalar is read once);
*fused* — inputs and outputs only, constants once, every intermediate in a
register (``threads`` counts here too: its tiles keep intermediates in cache,
so memory traffic is its inputs and outputs).

The roofline knee (peak flops / memory bandwidth) is printed beside the
intensity when the device is in ``KNEES``: below the knee a kernel is
memory-bound, above it compute-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..backends import get_strategy
from ..backends.liveness import VIEW_OPS
from ..ir import Graph, Node, Op, subgraphs
from ..ir.ops import ELEMENTWISE, LAYOUT, REDUCE
from ..transforms.regions import REGION_RULES

_WEIGHT = {
    **{op: 10 for op in (Op.EXP, Op.EXP2, Op.EXPM1, Op.LOG, Op.LOG2, Op.LOG10, Op.LOG1P,
                         Op.CBRT)},
    **{op: 12 for op in (Op.SINH, Op.COSH, Op.TANH)},
    **{op: 15 for op in (Op.SIN, Op.COS, Op.ASIN, Op.ACOS, Op.ATAN, Op.ASINH, Op.ACOSH,
                         Op.ATANH)},
    **{op: 20 for op in (Op.TAN, Op.POW, Op.ATAN2)},
    Op.FLOORDIV: 2,  # divide, floor
    Op.REM: 3,  # divide, floor, multiply-subtract
    Op.CAST: 0,
    # and, or, xor, not and the shifts take the default weight of 1: one integer instruction
    # each (a shift's count check is a compare and a mask beside it, as a select costs)
}


def _per_element(weight: int):
    return lambda node: weight * node.aval.size


def _reduce(node: Node) -> int:
    return node.inputs[0].aval.size


def _dot(node: Node) -> int:
    a = node.inputs[0].aval
    k = math.prod(a.shape[i] for i in node.attrs["contracting"][0])
    return 2 * k * node.aval.size


def _matrices(node: Node) -> tuple[int, int]:
    """(matrix count, n) of a dense linear algebra node's first operand."""
    a = node.inputs[0].aval
    return math.prod(a.shape[:-2]), a.shape[-1]


def _lu(node: Node) -> int:
    count, n = _matrices(node)
    return count * (2 * n ** 3) // 3


def _triangular_solve(node: Node) -> int:
    count, n = _matrices(node)
    return count * n * n * node.aval.shape[-1]


def _cholesky(node: Node) -> int:
    count, n = _matrices(node)
    return count * n ** 3 // 3


def _qr(node: Node) -> int:
    a = node.inputs[0].aval
    m, n = a.shape[-2:]
    k = min(m, n)
    return math.prod(a.shape[:-2]) * (2 * m * n * k - 2 * k ** 3 // 3 + 2 * m * n * k)


def _eigh(node: Node) -> int:
    count, n = _matrices(node)
    return count * 9 * n ** 3  # tridiagonal reduction, divide and conquer, back-transform


def _svd(node: Node) -> int:
    a = node.inputs[0].aval
    m, n = a.shape[-2:]
    return math.prod(a.shape[:-2]) * 22 * max(m, n) * min(m, n) ** 2  # gesdd with vectors


# Floating-point operations of one node.
COST = {
    Op.INPUT: _per_element(0),
    Op.CONST: _per_element(0),
    Op.GET: lambda node: 0,  # a result of its node, which counts the work
    **{op: _per_element(_WEIGHT.get(op, 1)) for op in ELEMENTWISE},
    **{op: _per_element(0) for op in LAYOUT},
    **{op: _reduce for op in REDUCE},
    Op.DOT_GENERAL: _dot,
    Op.GATHER: _per_element(0),  # a copy of the rows it reads
    Op.FFT: lambda node: 5 * node.aval.size * max(1, math.ceil(math.log2(max(
        math.prod(node.attrs["lengths"]), 2)))),  # 5 n log2 n, the radix-2 count
    Op.SORT: lambda node: node.inputs[0].aval.size * max(
        1, math.ceil(math.log2(max(node.inputs[0].shape[node.attrs["axis"]], 2)))),
    Op.SCATTER: lambda node: node.inputs[2].aval.size,  # one combine per update
    Op.TABLE_LOOKUP: _per_element(11),
    Op.LU: _lu,  # getrf: 2n³/3 per matrix
    Op.TRIANGULAR_SOLVE: _triangular_solve,  # trsm: n² per right-hand-side column
    Op.CHOLESKY: _cholesky,  # potrf: n³/3
    Op.QR: _qr,  # geqrf + orgqr
    Op.EIGH: _eigh,
    Op.SVD: _svd,
}
"""Region primitives (``ops.REGION``) cost their bodies (``region_flops``)."""


def flops(graph: Graph) -> int:
    return sum(node_flops(node) for node in graph.nodes)


def node_flops(node: Node) -> int:
    """One node's flops; a region node's are its primitive's cost rule given
    the cost of a body, else the sum of its bodies (a fused form: its body)."""
    if node.op in COST:
        return COST[node.op](node)
    rules = REGION_RULES[node.op]
    if rules.cost is not None:
        return rules.cost(node, flops)
    return sum(flops(sub.graph) for _, sub in subgraphs(node))


def eager_bytes(graph: Graph) -> int:
    """Every non-view result written once, every operand's storage read."""
    total = 0
    for node in graph.nodes:
        if node.op in (Op.INPUT, Op.CONST, Op.GET) or node.op in VIEW_OPS:
            continue  # a get reads what its node wrote
        read = {_viewed(x) for x in node.inputs}
        total += node.nbytes + sum(x.nbytes for x in read)
    return total


def _viewed(node: Node) -> Node:
    """The value whose storage a view reads (itself if not a view)."""
    while node.op in VIEW_OPS or node.op is Op.GET:
        node = node.inputs[0]
    return node


def fused_bytes(graph: Graph) -> int:
    ends = {*graph.inputs, *graph.outputs, *graph.consts()}
    return sum(x.nbytes for x in ends)


@dataclass(frozen=True)
class Intensity:
    strategy: str
    traffic: str
    flops: int
    bytes: int

    @property
    def value(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    def __str__(self) -> str:
        return f"{self.value:.3g} flop/B ({self.traffic}: {self.flops} flop / {self.bytes} B)"


def intensity(graph: Graph, strategy: str) -> Intensity:
    return traffic_intensity(graph, get_strategy(strategy).memory.traffic, strategy)


def traffic_intensity(graph: Graph, traffic: str, strategy: str = "") -> Intensity:
    """Flops over the bytes ``traffic`` (``eager`` or ``fused``) moves."""
    moved = eager_bytes(graph) if traffic == "eager" else fused_bytes(graph)
    return Intensity(strategy, traffic, flops(graph), moved)


@dataclass(frozen=True)
class Knee:
    """Peak flops over memory bandwidth, from the vendor's data sheet."""

    flop_per_byte: float
    source: str

    def __str__(self) -> str:
        return f"{self.flop_per_byte:.3g} flop/B ({self.source})"


# device name fragment -> (FP32 TFLOP/s, FP64 TFLOP/s, memory TB/s), data-sheet peaks
KNEES = {
    "H200": (67.0, 34.0, 4.8),
    "H100 SXM": (67.0, 34.0, 3.35),
    "H100 PCIe": (51.0, 26.0, 2.0),
    "A100-SXM4-80GB": (19.5, 9.7, 2.039),
    "A100": (19.5, 9.7, 1.555),
    "V100": (15.7, 7.8, 0.9),
    "L4": (30.3, 0.49, 0.3),
    "T4": (8.1, 0.25, 0.32),
}


def roofline_knee(device_name: str | None, double: bool = False) -> Knee | None:
    """The knee of a known device (FP64 peak when ``double``), else None."""
    for fragment, (fp32, fp64, bandwidth) in KNEES.items():
        if device_name and fragment.lower() in device_name.lower():
            peak = fp64 if double else fp32
            kind = "FP64" if double else "FP32"
            return Knee(peak / bandwidth, f"{fragment} data sheet: {peak} TFLOP/s {kind} / "
                                          f"{bandwidth} TB/s")
    return None
