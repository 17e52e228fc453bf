"""The ``native`` strategy: the graph as generated C, compiled by the system
C compiler and called through ctypes, in one of two plans (``whole_reason``
chooses, the report's ``program`` line says which and why):

- *one C program* (``codegen.whole``, on the calling thread): every node a
  loop nest over an arena, runs of elementwise ops fused into one loop,
  top-level loops and branches as C control flow around their bodies, so a
  training step, a time-stepping stencil or a Krylov solve is one call.
  Taken when nothing keeps the graph staged (below);
- *staged*: each row region as a kernel called over slices of the pixel axis
  on the shared thread pool (ctypes releases the GIL), the other ops whole
  by the reference rules. Taken for a graph that is one row region, for row
  regions (and contractions batched over pixels) over more than
  ``INLINE_ROWS`` pixels that hold most of the work, and for graphs with an
  op the whole emitter has no form for (linear-algebra primitives, a loop
  with a predicate per lane), FMA contraction or tree reductions.

Contract: bit-identical to ``reference`` for IEEE basic operations (+ − × ÷
sqrt, casts, comparisons, selects, min/max, floor/ceil/rint/trunc,
floor_divide/remainder, small reductions in row regions); transcendentals
call the C math library and stay within the ulp bound measured against the
reference and stated in each capsule. In a graph compiled as one C program,
reductions and contractions fold in a fixed sequential order (row-major over
the reduced indices, from NumPy's identity, no FMA): the same bits on every
call and worker count, within ``n·eps·Σ|terms|`` of the reference's
pairwise or BLAS order, and max/min folds make their own NaN payloads.
``fma=True`` lets the compiler fuse ``a*b + c`` into FMA: faster, different
bits, recorded in the capsules and the report. Ops the emitter has no exact
C form for run whole by the reference rules.

Floating-point errors follow the caller's ``np.errstate`` as on the
reference: every kernel call returns the flags its rows raised (``host``);
where one that the error state does not ignore was raised, those rows are
run again by the reference rules for NumPy's own warnings, callbacks or
``FloatingPointError`` (``fpe.replay_errors``; the kernel's outputs
stand). Comparisons in the kernels are quiet, so NaN inputs raise nothing
NumPy would not.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np

from ... import codegen
from ...codegen.pixel import ROW_RULES, Outside, Partition, RowRegion, partition, row_modes
from ...codegen.whole import LAPACK as WHOLE_LAPACK
from ...codegen.whole import gemm_form, pairwise_form
from ...codegen.whole import iterations as whole_iterations
from ...codegen.whole import unsupported as whole_unsupported
from ...ir import Graph, Op
from ...ir.ops import ELEMENTWISE, LAYOUT, REDUCE, TABLE, TRANSCENDENTAL
from ...transforms.complex_pairs import pairs
from ..capsules import Capsule, NumericalPolicy, register
from ..numerics import NATIVE_ULP_BOUND
from ..planning import NodePlan, Profile
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .contraction import is_sliceable
from .fpe import replay_errors, watched_flags
from .numpy_rules import NUMPY_PROVIDER
from .pool import SLICE_ROWS, interruptible, resolve_workers, run_tasks, split, sub_slices
from .staged import StagedExecutable, StagedPlan, stage_value, staged_plan
from .whole import PROVIDER as WHOLE_PROVIDER
from .whole import WholeExecutable, vendor_blas, whole_plan

PROVIDER = "c-native"
PROVIDER_FMA = "c-native-fma"
MIN_CHUNK_ROWS = 16 * codegen.ISK_BLOCK
INLINE_ROWS = 1 << 15
"""Calls of at most this many pixels run their kernel on the calling thread,
without the pool: below it, handing slices to workers and waiting for them
costs more than the other cores gain. ``benchmarks/dispatch.py`` measures the
crossover. On the 2-core test machine (tau-omega, float64) the calling thread
took 203 us at 2^15 pixels against 601 us on the pool, and the pool first won
(by 10 %) at 2^18; the threshold stays at 2^15, where the calling thread won
by 3x, because with more cores the pool pays at smaller sizes."""
FPE_POLICY = ("each kernel call clears the flags and returns those its rows raised (quiet "
              "comparisons; integer division by zero and float-to-integer casts out of range "
              "raise NumPy's flags); rows whose flags the caller's np.errstate does not ignore "
              "are run again by the reference rules, for NumPy's own warnings or "
              "FloatingPointError, once per op in tape order; the kernel's outputs are kept")

ULP_BOUND = NATIVE_ULP_BOUND
"""This strategy's measured ulp bound per transcendental (``numerics``)."""


def _supports(node, modes) -> bool:
    return codegen.supports(node, modes)


WHOLE_MAX_REDUCED = 1 << 20
"""The most elements one reduction of a program compiled whole may read in
its sequential fold (one addition per cycle or so, where NumPy's pairwise
sum vectorizes); a larger one keeps the staged plan (NumPy's order). A
float sum in pairwise form (``codegen.whole.pairwise_form``) has no cap: it
is NumPy's sum, split over the workers when it has one output."""
WHOLE_MAX_PRODUCTS = 1 << 24
"""The most multiply-adds one contraction of a program compiled whole may
take in its own loops (about 5 ms in the register-blocked loops); a larger
one that is a plain matrix product calls the vendor BLAS inside the program
(``codegen.whole.gemm_form``), any other keeps the staged plan (NumPy's)."""


def whole_reason(graph: Graph, part: Partition, options: dict) -> str | None:
    """Why ``native`` does not compile ``graph`` as one C program
    (``codegen.whole``), or None when it does: a graph that is one row
    region over every pixel keeps its parallel kernel; row regions and
    contractions batched over more than ``INLINE_ROWS`` pixels that hold at
    least half the work (loop iterations, ``codegen.whole.iterations``) keep
    the pool; a node the whole emitter has
    no C form for, FMA contraction, deterministic (tree) reductions and
    reductions or contractions too large for its fixed sequential order keep
    the staged plan."""
    regions = [s for s in part.stages if isinstance(s, RowRegion)]
    if regions and len(part.stages) == 1:
        return "the graph is one row region: its kernel runs over the pixel rows"
    polymorphic = options.get("polymorphic")
    if polymorphic and part.pixels >= 2 and (polymorphic == "asked"
                                             or batch_obstacle(part) is None):
        return (f"polymorphic batch axis: the row-region kernels take the row range at run "
                f"time, so every batch size runs the same compiled C ({part.pixels} rows now)"
                + ("" if batch_obstacle(part) is None else
                   "; what works across rows runs by the reference rules"))
    if part.pixels > INLINE_ROWS:
        pooled = [n for r in regions for n in r.nodes] + [
            n for n in graph.nodes if n.op is Op.DOT_GENERAL and is_sliceable(n, part.pixels)]
        if pooled and 2 * sum(map(whole_iterations, pooled)) >= sum(
                map(whole_iterations, graph.nodes)):
            return (f"row regions and contractions batched over {part.pixels} pixels "
                    f"(> {INLINE_ROWS}), most of the work, run in parallel on the pool")
    if options.get("fma"):
        return "fma=True: only the row-region kernels are compiled with contraction"
    if options.get("reductions", "reference") != "reference":
        return "deterministic reductions: pixel-axis reductions run in the tree order"
    for node in graph.nodes:
        why = whole_unsupported(node)
        if why is None and node.op in WHOLE_LAPACK and vendor_blas() is None:
            why = "no vendor LAPACK (pip install scipy-openblas32)"
        if why is None and node.op in REDUCE and node.inputs[0].aval.size > WHOLE_MAX_REDUCED \
                and not pairwise_form(node):
            why = f"reads {node.inputs[0].aval.size} elements (> {WHOLE_MAX_REDUCED})"
        if why is None and node.op is Op.DOT_GENERAL and \
                whole_iterations(node) > WHOLE_MAX_PRODUCTS and \
                (gemm_form(node) is None or vendor_blas() is None):
            why = (f"{whole_iterations(node)} products (> {WHOLE_MAX_PRODUCTS}) in no plain "
                   f"matrix form for the vendor BLAS: NumPy's")
        if why is not None:
            where = f" at {node.where}" if node.where else ""
            return f"{node.op.value}{where}: {why}"
    return None


def batch_obstacle(part: Partition) -> str | None:
    """Why the compiled code of ``part`` depends on the batch size, or None:
    every value with the pixel axis is computed in a row region (whose
    kernels take the row range at run time), nothing whole reads or makes
    one."""
    if part.pixels < 2:
        return "the graph has no batch axis (no input longer than 1 along axis 0)"
    for stage in part.stages:
        if isinstance(stage, RowRegion):
            continue
        for node in stage.nodes:
            avals = (*node.avals, *(a for x in node.inputs for a in x.avals))
            if node.op not in (Op.INPUT, Op.CONST) and any(
                    a.ndim and a.shape[0] == part.pixels for a in avals):
                where = f" at {node.where}" if node.where else ""
                return f"{node.op.value}{where}: {_whole_reason(node, part.pixels)}"
    return None


def compiles_whole(graph: Graph) -> bool:
    """Whether ``native`` at its default options compiles ``graph`` as one C
    program."""
    return whole_reason(graph, partition(graph, accept=_supports), {}) is None


def plan_native(graph: Graph, profile: Profile, options: dict) -> NodePlan:
    """``native``'s plan: the whole graph as one C program where
    ``whole_reason`` finds nothing against it (every node under the whole
    emitter's capsule); else the row regions the C emitter accepts, their
    nodes under the generated C's capsules (with FMA contraction when
    asked), the rest under the reference's."""
    part = partition(graph, accept=_supports)
    if whole_reason(graph, part, options) is None:
        return whole_plan(graph, profile)
    provider = PROVIDER_FMA if options.get("fma") else PROVIDER
    return staged_plan(graph, profile, part, provider)


def build_native(plan: NodePlan, workers: int | None = None, fma: bool = False,
                 reductions: str = "reference", polymorphic: bool | str = False):
    """The executable of ``plan_native``'s plan: one C program, or the
    staged run of row regions and whole ops. ``polymorphic``: the batch
    axis's size is a run-time one (``whole_reason``); a one-C-program
    executable says in ``batch_obstacle`` why its compiled code is not
    shared across batch sizes (a staged one compiles only row regions, whose
    kernels take the row range at run time: always shared)."""
    if isinstance(plan, StagedPlan):  # only row regions compile: no batch size in the C
        executable = NativeExecutable(plan, workers, fma, reductions)
        executable.polymorphic = polymorphic
    else:
        executable = WholeExecutable(plan, workers)
        part = partition(plan.graph, accept=_supports) if polymorphic else None
        executable.batch_obstacle = (batch_obstacle(part) or "compiled as one C program") \
            if part is not None and part.pixels >= 2 else None  # no batch axis: nothing to share
    return executable


class NativeExecutable(StagedExecutable):
    polymorphic: bool | str = False  # the batch axis is a run-time size (``build_native``)
    batch_obstacle: str | None = None
    def __init__(self, plan: StagedPlan, workers: int | None = None, fma: bool = False,
                 reductions: str = "reference"):
        count, self.workers_source = resolve_workers(workers)
        super().__init__(plan, count, reductions)
        self.fma = bool(fma)
        self.compiler = codegen.current_compiler()
        self._kernels = self._compile()
        self._direct = _Direct.of(self) if self.partition.pixels <= INLINE_ROWS else None

    def call_flat(self, arrays) -> tuple:
        """Small calls of a graph that is one row region go straight to its
        kernel (``_Direct``); the rest run stage by stage."""
        if self._direct is not None:
            return self._direct(arrays)
        return super().call_flat(arrays)

    def _compile(self) -> dict[int, tuple]:
        stem = re.sub(r"\W", "_", self.graph.name) or "f"
        pairs = {}
        for k, stage in enumerate(self.partition.stages):
            if isinstance(stage, RowRegion):
                body = codegen.emit_body(f"isk_{stem}_r{k}_point", stage, self.graph.index,
                                         stage.modes)
                pairs[k] = (body, f"isk_{stem}_r{k}")
        self._source = codegen.host_source(list(pairs.values()), self.graph.name,
                                           self.compiler.vector_math)
        if not pairs:
            self.built = None
            return {}
        library, self.built = codegen.build(self._source, self.fma)
        kernels = {}
        for k, (body, name) in pairs.items():
            fn = getattr(library, name)
            count = len(body.row_inputs) + len(body.whole_inputs) + len(body.outputs)
            fn.argtypes = [ctypes.c_void_p] * count + [ctypes.c_int64, ctypes.c_int64,
                                                       ctypes.c_void_p]  # + the stop flag
            fn.restype = ctypes.c_uint32  # the floating-point flags the rows raised
            kernels[k] = (body, fn)
        return kernels

    def run_region(self, k: int, region: RowRegion, env: dict) -> None:
        body, fn = self._kernels[k]
        arrays = [np.ascontiguousarray(stage_value(env, x), dtype=x.dtype)
                  for x in (*body.row_inputs, *body.whole_inputs)]
        outs = self.allocate_outputs(region)
        flagged = self._run_kernel(fn, [a.ctypes.data for a in (*arrays, *outs)], body.polls)
        self._diagnose(region, env, flagged)
        env.update(zip(region.outputs, outs))

    def _run_kernel(self, fn, pointers: list[int], polls: bool) -> list[tuple[int, int, int]]:
        """``fn`` over the pixel axis: slices on the pool, each in calls of at
        most ``SLICE_ROWS`` rows, between which the stop flag (and, on the
        calling thread, a Ctrl-C) is seen. Returns ``(begin, end, flags)`` of
        the calls whose rows raised floating-point flags."""
        pixels = self.partition.pixels
        chunks = min(4 * self.workers, max(1, pixels // MIN_CHUNK_ROWS))
        if pixels <= INLINE_ROWS:
            chunks = 1  # on the calling thread: run_tasks runs one task inline
        slices = split(pixels, chunks, align=codegen.ISK_BLOCK)
        flagged: list[list[tuple[int, int, int]]] = [[] for _ in slices]

        def work(c: int) -> None:
            with interruptible(polls) as stop:  # a kernel with loops reads it inside them
                for a, b in sub_slices(*slices[c], SLICE_ROWS):
                    if stop:
                        return
                    status = fn(*pointers, a, b, stop.address)
                    if status:
                        flagged[c].append((a, b, status))
        run_tasks(work, len(slices), self.workers)
        return [f for found in flagged for f in found]

    def _diagnose(self, region: RowRegion, env: dict, flagged: list) -> None:
        """NumPy's warnings or FloatingPointError for the rows whose flags the
        caller's ``np.errstate`` does not ignore (none: nothing to do)."""
        watched = watched_flags() if flagged else 0
        ranges = [(a, b) for a, b, status in flagged if status & watched]
        if ranges:
            replay_errors(region, [stage_value(env, x) for x in region.row_inputs],
                          [stage_value(env, x) for x in region.whole_inputs], ranges)

    def source(self) -> str:
        return self._source

    def report_lines(self) -> list[tuple[str, str]]:
        cc = self.compiler
        contraction = ("on: FMA contraction allowed (-ffp-contract=fast); bits differ from "
                       "reference" if self.fma else "off (-ffp-contract=off)")
        built = "no kernel (nothing row-local)" if self.built is None else (
            f"{self.built.path.name} ({'cache hit' if self.built.cached else 'compiled'})")
        mathlib = ("glibc libmvec vector variants (simd declarations)" if cc.vector_math
                   else "scalar libm")
        why = whole_reason(self.graph, self.partition, {
            "fma": self.fma, "reductions": self.reductions,
            "polymorphic": self.polymorphic})
        lines = [("workers", f"{self.workers} ({self.workers_source})"),
                 ("program", f"staged: row regions and whole ops (not one C program: {why})"),
                 ("pixels", self.partition.describe()),
                 *([("not in C", whole_reasons(self.partition))]
                   if any(isinstance(s, Outside) and s.nodes for s in self.partition.stages)
                   else []),
                 ("compiler", f"{cc.name} {' '.join(cc.flags(self.fma))}"),
                 ("fma", contraction),
                 ("mathlib", mathlib),
                 ("kernel", built)]
        small = (f"calls of <= {INLINE_ROWS} pixels run on the calling thread (no pool)"
                 + ("; this one is, one kernel call" if self._direct is not None else ""))
        lines.append(("small calls", small))
        lines += [("fp errors", FPE_POLICY)] if self.built is not None else []
        return lines + self.contraction_lines()


WHOLE_REASONS_SHOWN = 6


def whole_reasons(part: Partition) -> str:
    """Why the ops outside the row regions run whole by the reference rules
    instead of in the generated C: grouped by op and reason, the most
    frequent first."""
    counts: dict[tuple[str, str], int] = {}
    for stage in part.stages:
        if isinstance(stage, Outside):
            for node in stage.nodes:
                key = (node.op.value, _whole_reason(node, part.pixels))
                counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    shown = "; ".join(f"{op} x{n} ({why})" for (op, why), n in ranked[:WHOLE_REASONS_SHOWN])
    rest = len(ranked) - WHOLE_REASONS_SHOWN
    return shown + (f"; {rest} more kind(s)" if rest > 0 else "")


def _whole_reason(node, pixels: int) -> str:
    if pixels < 2:
        return "the graph has no pixel axis: no input is longer than 1 along axis 0"
    if not node.several and (node.aval.ndim == 0 or node.shape[0] != pixels):
        return f"its result's axis 0 is not the pixel axis (P = {pixels})"
    if node.op not in ROW_RULES:
        return "no per-row form: this op always runs whole"
    modes = row_modes(node, pixels)
    if modes is None:
        return "it works across pixel rows"
    if not _supports(node, modes):
        return "no C form in the emitter"
    return "it reads, or is read by, a node with several results outside a region"


# --- the small-call path ------------------------------------------------------------------

_ADDRESS_OF = ctypes.addressof
_BYTE = ctypes.c_char


class _Direct:
    """One kernel call for a whole small call, on the calling thread: the
    graph is one row region whose inputs are the call's arguments (or
    constants) and whose outputs hold every result. Pointers come from the
    arrays' buffers (``ctypes.c_char.from_buffer``: a fraction of the cost of
    ``ndarray.ctypes``); a read-only or non-contiguous argument is copied to
    a contiguous one first. Floating-point flags are handled as on the staged
    path."""

    def __init__(self, native: NativeExecutable, region: RowRegion, body, fn):
        graph = native.graph
        position = {x: i for i, x in enumerate(graph.inputs)}
        self.native, self.region, self.fn, self.polls = native, region, fn, body.polls
        self.pixels = native.partition.pixels
        self.sources = [(position.get(x), x) for x in (*body.row_inputs, *body.whole_inputs)]
        self.consts = [np.ascontiguousarray(x.attrs["value"].value, x.dtype)
                       if i is None else None for i, x in self.sources]
        self.outs = [((self.pixels, *n.shape[1:]), n.dtype) for n in body.outputs]
        where = {n: k for k, n in enumerate(body.outputs)}
        self.results = [where[x] for x in graph.outputs]

    @classmethod
    def of(cls, native: NativeExecutable):
        """The direct path of ``native``, or None when its graph is not one
        row region fed by arguments and constants that yields every output."""
        stages = native.partition.stages
        if len(stages) != 1 or not isinstance(stages[0], RowRegion):
            return None
        body, fn = native._kernels[0]
        feeds = (*body.row_inputs, *body.whole_inputs)
        if any(x.op not in (Op.INPUT, Op.CONST) for x in feeds):
            return None
        if any(x not in body.outputs for x in native.graph.outputs):
            return None
        return cls(native, stages[0], body, fn)

    def __call__(self, arrays) -> tuple:
        keep, pointers = [], []
        for (i, node), const in zip(self.sources, self.consts):
            array = const if i is None else arrays[i]
            try:
                pointers.append(_ADDRESS_OF(_BYTE.from_buffer(array)))
            except (TypeError, ValueError):  # read-only, non-contiguous or empty
                array = np.ascontiguousarray(array, node.dtype)
                keep.append(array)
                pointers.append(array.ctypes.data)
        outs = [np.empty(shape, dtype) for shape, dtype in self.outs]
        pointers += [_ADDRESS_OF(_BYTE.from_buffer(o)) if o.size else o.ctypes.data
                     for o in outs]
        if self.polls:  # loops: a Ctrl-C must reach them
            with interruptible() as stop:
                status = self.fn(*pointers, 0, self.pixels, stop.address)
        else:
            status = self.fn(*pointers, 0, self.pixels, None)
        if status:
            env = dict(zip(self.native.graph.inputs, arrays))
            self.native._diagnose(self.region, env, [(0, self.pixels, status)])
        return tuple(outs[k] for k in self.results)


# --- capsules -----------------------------------------------------------------------------

BASIC = "IEEE basic operation in C, bit-identical to NumPy"
EXACT = {
    Op.LDEXP: "exact scaleB in C (musl's steps, one rounding), bit-identical to numpy.ldexp",
    Op.LOGB: "exponent bits in C, bit-identical to the reference's frexp",
    Op.COPYSIGN: "sign bit in C, bit-identical to numpy.copysign",
    Op.TABLE_LOOKUP: "the reference clamp-floor-lerp in C over the table as static data, "
                     "bit-identical to the reference",
}
LIBM = ("C math library (glibc libm, or libmvec vector variants where the compiler "
        "links them; the report says which)")


def _policy(op: Op, fma: bool) -> NumericalPolicy:
    contraction = "on (FMA allowed, -ffp-contract=fast)" if fma else "off"
    if op in ULP_BOUND:
        return NumericalPolicy(contraction=contraction,
                               math_library=f"{LIBM}; max {ULP_BOUND[op]} ulp vs reference "
                                            f"(measured)")
    if op in REDUCE:
        return NumericalPolicy(contraction=contraction,
                               reduction_order="NumPy's left fold, unrolled (<= 7 elements)",
                               math_library=BASIC)
    return NumericalPolicy(contraction=contraction, math_library=EXACT.get(op, BASIC))


CONTROL_KINDS = {
    Op.WHILE: "one C while per pixel: each pixel stops on its own predicate",
    Op.SCAN: "a C for loop of the static step count",
    Op.COND: "an if/else chain on the whole index: only the branch taken runs",
    Op.CHECKPOINT: "its body, inlined",
    Op.GET: "a result of its control-flow node: its variables",
}
"""How the emitter lowers the control flow that runs inside a row region
(``codegen.emit``); the ops of the bodies keep their own capsules' policies."""


def _register_capsules() -> None:
    kinds = [(op, "element renaming" if op in LAYOUT else (
        "libm call" if op in TRANSCENDENTAL else "C expression"))
        for op in (*ELEMENTWISE, *REDUCE, *LAYOUT, *TABLE)]
    kinds += list(CONTROL_KINDS.items())
    for op, kind in kinds:
        for provider, fma in ((PROVIDER, False), (PROVIDER_FMA, True)):
            register(Capsule(name=f"generated C ({kind})", op=op, provider=provider,
                             device="cpu", trust="checked", vjp_mode="isokernel-graph",
                             numerical_policy=_policy(op, fma)))


_register_capsules()


CONTRACT = ("bit-identical to reference for IEEE basic ops; transcendentals ulp-bounded; "
            "a graph compiled as one C program folds reductions and contractions in a fixed "
            "sequential order (n*eps-bounded against reference), and factorizations and "
            "triangular solves of order >= 17 are the vendor LAPACK's (n*eps-bounded); complex "
            "ops with a pair form run on their real parts (record.complex_parts: exact but "
            "for products, moduli, sqrt and exp, which are bounded)")

SPEC = register_strategy(StrategySpec(
    name="native", device="cpu", contract=CONTRACT,
    profile=Profile("native-cpu", "cpu", (PROVIDER, NUMPY_PROVIDER, WHOLE_PROVIDER),
                    frozenset({"checked", "reference"}), probe=codegen.unavailable_reason),
    memory=MemoryModel("fused", "fused", marshal=True, arena_when=compiles_whole),
    compiler=build_native, auto_priority=30,
    options=frozenset({"workers", "fma", "reductions", "polymorphic"}), prepare=pairs,
    planner=plan_native))
