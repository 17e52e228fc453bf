"""The ``native-whole`` strategy: the whole graph as one generated C
function (``codegen.whole``), compiled by the system C compiler and called
once per call through ctypes, with every intermediate in an arena allocated
once per executable and reused by every call. This is ``native``'s
one-program plan, which ``native`` (and so ``auto``) takes wherever it can
and pays; ``native-whole`` asks for it by name, and refuses a graph it cannot
write instead of staging it.

For the small graphs of a training step, where the other CPU strategies pay
Python's and NumPy's few microseconds per node for hundreds of nodes over a
few thousand elements each, this is one call. It runs on the calling
thread (no pool: it is for graphs too small to share), and calls of one
executable from several threads take turns on its arena.

Contract: elementwise ops as ``native`` (bit-identical to ``reference`` for
IEEE basic operations; transcendentals call the C math library within
``native``'s measured ulp bounds); layout ops exact; reductions and
``dot_general`` in a fixed sequential order (the row-major order of the
reduced or contracted indices, no FMA) that is not NumPy's pairwise or
BLAS's order, so their results differ from the reference within
``n·eps·Σ|terms|`` and are the same bits on every call and every machine
with the same compiler. Control flow at the top level (``scan``, ``while``
with one predicate, ``cond``, ``checkpoint``) is C loops and branches with
the bodies' bits as above. Not for loops with a predicate per lane,
linear-algebra primitives or other ops without a C form: the error names
them.

Floating-point errors follow the caller's ``np.errstate``: the function
returns the flags it raised, and when one the error state watches was
raised the graph runs again by the reference rules for NumPy's own
warnings, callbacks or ``FloatingPointError`` (the C results stand).
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ... import codegen
from ...codegen.whole import (
    ALIGN,
    BLAS_MIN,
    LAPACK,
    NOMEM,
    OPS,
    PARALLEL_MIN,
    POINTWISE,
    SPLIT_SUM_MIN,
    VENDOR_CALLS,
    WholeUnsupported,
    emit_whole,
)
from ...ir import Op
from ...ir.errors import BackendUnavailableError
from ...ir.ops import REDUCE, TABLE, TRANSCENDENTAL
from ...transforms.complex_pairs import pairs
from ..capsules import Capsule, NumericalPolicy, lookup, register
from ..executable import ExecutableBase
from ..numerics import NATIVE_ULP_BOUND
from ..planning import NodePlan, Plan, Profile, plan
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .fpe import watched_flags
from .pool import interruptible, resolve_workers
from .reference import ReferenceExecutable

PROVIDER = "c-whole"
CONTRACT = ("elementwise as native; reductions and contractions in a fixed sequential order "
            "(not NumPy's): n*eps-bounded against reference")
UNSUPPORTED = ("strategy 'native-whole' cannot write {what} as C in one function; use "
               "strategy='native' (which runs such nodes by the reference rules)")


def whole_plan(graph, profile: Profile) -> NodePlan:
    """Every node of ``graph`` under the whole emitter's capsule (``native``'s
    plan for a graph it compiles as one C program)."""
    accepted = plan(graph, profile)
    by_node = {n: lookup(n.op, PROVIDER) for n in graph.nodes if n.op not in (Op.INPUT, Op.CONST)}
    return NodePlan(graph, profile, accepted.capsules, by_node)


class WholeExecutable(ExecutableBase):
    """``workers``: threads a long fused run is split over (default: the CPU
    budget, as the pool's)."""

    def __init__(self, plan: Plan, workers: int | None = None):
        super().__init__(plan)
        self.graph = plan.graph
        self.compiler = codegen.current_compiler()
        stem = re.sub(r"\W", "_", self.graph.name) or "f"
        self.vendor = vendor_blas()
        self.workers, self.workers_source = resolve_workers(workers)
        try:
            self.program = emit_whole(self.graph, f"isk_{stem}_whole", self.compiler.vector_math,
                                      blas=self.vendor is not None, workers=self.workers)
        except WholeUnsupported as err:
            raise BackendUnavailableError(UNSUPPORTED.format(what=err)) from None
        library, self.built = codegen.build(self.program.source, False, program=True)
        self._fn = getattr(library, self.program.function)
        if self.program.blas:
            getattr(library, f"{self.program.function}_blas")(self.vendor.pointers)
        self._fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]  # args, the stop flag
        self._fn.restype = ctypes.c_uint32
        self._consts = [np.ascontiguousarray(x.attrs["value"].value, x.dtype)
                        for x in self.program.consts]
        raw = np.empty(self.program.scratch + ALIGN, np.uint8)
        start = -raw.ctypes.data % ALIGN
        self._scratch = raw[start:start + self.program.scratch]  # kept for every call
        n = len(self.program.inputs) + len(self._consts) + 1 + len(self.program.outputs)
        self._args = (ctypes.c_void_p * n)()
        fixed = [a.ctypes.data for a in self._consts] + [self._scratch.ctypes.data]
        first = len(self.program.inputs)
        self._args[first:first + len(fixed)] = fixed
        self._outputs_at = first + len(fixed)
        self._lock = threading.Lock()
        self._reference = None

    def call_flat(self, arrays: Sequence) -> tuple:
        ins = [np.ascontiguousarray(a, x.dtype) for a, x in zip(arrays, self.program.inputs)]
        outs = [np.empty(x.shape, x.dtype) for x in self.program.outputs]
        pointers = [_address(a) for a in ins] + [_address(a) for a in outs]
        with self._lock:
            args = self._args
            args[:len(ins)] = pointers[:len(ins)]
            args[self._outputs_at:] = pointers[len(ins):]
            if self.program.polls:  # long nests: a Ctrl-C must reach them
                with interruptible() as stop:
                    status = self._fn(args, stop.address)
            else:
                status = self._fn(args, None)
        if status & NOMEM:
            raise MemoryError(f"{self.graph.name}: a while_loop's reverse sweep could not "
                              f"allocate its checkpoints; pass checkpoint_every= to keep "
                              f"fewer, or free memory")
        if status and status & watched_flags():
            self._diagnose(arrays)
        return tuple(outs)

    def _diagnose(self, arrays: Sequence) -> None:
        """NumPy's warnings or FloatingPointError, from the reference rules
        (on the caller's arrays: ``ascontiguousarray`` makes 0-d ones 1-d)."""
        if self._reference is None:
            self._reference = ReferenceExecutable(self.plan)
        self._reference.call_flat(list(arrays))

    def source(self) -> str:
        return self.program.source

    def report_lines(self) -> list[tuple[str, str]]:
        cc = self.compiler
        mathlib = ("glibc libmvec vector variants (simd declarations)" if cc.vector_math
                   else "scalar libm")
        built = f"{self.built.path.name} ({'cache hit' if self.built.cached else 'compiled'})"
        runs = (f"; fused runs of >= {PARALLEL_MIN} elements and sums of one output over "
                f">= {SPLIT_SUM_MIN} split over {self.workers} threads "
                f"({self.workers_source}), the same bits for any split"
                if self.program.parallel else "")
        return [("program", "the whole graph as one C function on the calling thread; "
                            "reductions and contractions in a fixed sequential order" + runs),
                ("compiler", f"{cc.name} {' '.join(cc.flags(False, program=True))}"),
                ("fma", "off (-ffp-contract=off)"),
                ("mathlib", mathlib),
                ("kernel", built),
                ("arena", f"{self.program.scratch} bytes, allocated once, reused every call"),
                *([("blas", f"matrix products of >= {BLAS_MIN} multiply-adds, LU and Cholesky "
                            f"factorizations, triangular solves: {self.vendor}; "
                            f"{BLAS_CONTRACT}")] if self.program.blas else []),
                ("fp errors", "the function returns its flags; watched ones rerun the graph "
                              "by the reference rules for NumPy's diagnostics")]


BLAS_CONTRACT = ("vendor: n*eps-bounded against reference, the same bits on every call with a "
                 "fixed thread count")


class VendorBlas:
    """The matrix product, LU and Cholesky factorizations and triangular
    solve of the ``scipy-openblas32`` wheel (OpenBLAS with LAPACK, built for
    Python packages, a core dependency; ``codegen.whole.VENDOR_CALLS``):
    their addresses for a whole program, and what the report says of them."""

    def __init__(self, module):
        found = sorted(Path(module.get_lib_dir()).glob(f"lib{module.get_library()}.*"))
        library = ctypes.CDLL(str(found[0]))  # the wheel's one shared library
        prefix = "scipy_" if hasattr(library, "scipy_cblas_dgemm") else ""
        self.pointers = (ctypes.c_void_p * len(VENDOR_CALLS))(
            *(ctypes.cast(getattr(library, prefix + name), ctypes.c_void_p).value
              for name in VENDOR_CALLS))
        self.threads = library[f"{prefix}openblas_get_num_threads"]()
        self.config = module.get_openblas_config()

    def __str__(self) -> str:
        threads = f", {self.threads} thread(s)" if self.threads else ""
        return f"scipy-openblas32 ({self.config.split(' DYNAMIC')[0]}{threads})"


_VENDOR: list = []


def vendor_blas() -> VendorBlas | None:
    """The vendor BLAS, loaded once; None where the wheel is missing (a whole
    program then keeps its own fixed-order products)."""
    if not _VENDOR:
        try:
            import scipy_openblas32
            _VENDOR.append(VendorBlas(scipy_openblas32))
        except (ImportError, OSError, AttributeError, IndexError):
            _VENDOR.append(None)
    return _VENDOR[0]


_ADDRESS_OF = ctypes.addressof
_BYTE = ctypes.c_char


def _address(a: np.ndarray) -> int:
    """The address of a contiguous array's data: ``c_char.from_buffer``
    costs a sixth of ``ndarray.ctypes.data`` (0.5 against 2.9 us here), which
    a training step's forty arrays feel; read-only and empty arrays take the
    slow path."""
    if a.flags.writeable and a.nbytes:
        return _ADDRESS_OF(_BYTE.from_buffer(a))
    return a.ctypes.data


# --- capsules -----------------------------------------------------------------------------

def _policy(op: Op) -> NumericalPolicy:
    if op in NATIVE_ULP_BOUND:
        return NumericalPolicy(contraction="off", math_library=(
            f"C math library (libm or libmvec); max {NATIVE_ULP_BOUND[op]} ulp vs reference "
            f"(measured for native)"))
    if op in TABLE:
        return NumericalPolicy(contraction="off", math_library=(
            "the reference clamp-floor-lerp in C over the table as static data, "
            "bit-identical to the reference"))
    if op in LAPACK:
        return NumericalPolicy(subnormals="implementation-defined", contraction="vendor's",
                               reduction_order="the vendor's blocking",
                               math_library=f"scipy-openblas32 LAPACK/BLAS; {BLAS_CONTRACT}")
    if op in REDUCE or op is Op.DOT_GENERAL:
        return NumericalPolicy(contraction="off", reduction_order=(
            "sequential, row-major over the reduced indices (not NumPy's pairwise or BLAS "
            "order)"), math_library="IEEE basic operations in C")
    return NumericalPolicy(contraction="off",
                           math_library="IEEE basic operation in C, bit-identical to NumPy")


def _register_capsules() -> None:
    for op in (*OPS, Op.FUSED):
        kind = ("libm call" if op in TRANSCENDENTAL else "C expression" if op in POINTWISE
                else "vendor LAPACK call" if op in LAPACK
                else "its body, written out" if op is Op.FUSED else "loop nest")
        register(Capsule(name=f"generated C, whole graph ({kind})", op=op, provider=PROVIDER,
                         device="cpu", trust="checked", vjp_mode="isokernel-graph",
                         numerical_policy=_policy(op)))


_register_capsules()

SPEC = register_strategy(StrategySpec(
    name="native-whole", device="cpu", contract=CONTRACT,
    profile=Profile("native-whole-cpu", "cpu", (PROVIDER,), frozenset({"checked"}),
                    probe=codegen.unavailable_reason),
    memory=MemoryModel("arena", "eager"),
    compiler=WholeExecutable, auto_priority=None, prepare=pairs))
