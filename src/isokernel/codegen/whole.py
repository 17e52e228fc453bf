"""Graph -> one C function: every node a loop nest over static shapes.

``emit_whole`` writes a graph whose nodes are elementwise ops, reductions,
layout ops and ``dot_general`` as one C function ``uint32_t f(void **args)``
(arguments: the graph's inputs, its constants, a scratch arena, its outputs;
result: the floating-point flags raised, as NumPy's ``NPY_FPE_*`` bits). A
node's value lives in the arena at an offset fixed here; a buffer is reused
once its last reader has run, and a reshape is the same buffer under another
shape. The nodes' code sits in parts of ``PART_NODES`` nodes, which the
entry function calls in order. The small graphs of a training step
(hundreds of nodes over arrays of a few thousand elements) then run with no
per-node dispatch at all.

The function takes the call's stop flag too (``pool.Stop``; NULL: never
set), set when the caller is interrupted (Ctrl-C). It reads it between
parts and, in a nest of at least ``POLL_WORK`` iterations, every
``POLL_WORK`` iterations or fewer: in the outermost loop whose iterations
hold fewer, or, where one innermost loop alone holds more, between strips of
``POLL_WORK`` iterations of it (outside the innermost loop, which stays
vectorized). A stopped call returns at once, its outputs unfinished.

Orders of evaluation, fixed here and so the same on every call:
- elementwise ops are ``C_EXPR``'s expressions, one per element (NumPy's
  bits for IEEE basic operations; transcendentals call the C math library);
- a reduction folds each output's elements in the row-major order of the
  reduced axes, starting from NumPy's identity (``+0.0`` for sums, as
  NumPy's: a sum of negative zeros is ``+0.0``; ``1`` for products, ``-inf``
  and ``+inf`` for max and min, whose combine propagates NaN as NumPy's);
- ``dot_general`` sums ``a * b`` (two roundings: compiled without
  contraction) from ``+0.0`` over the contracting indices in row-major order.
The reduction and contraction orders are not NumPy's (pairwise sums, BLAS):
those results differ from the reference in the last bits, within the usual
bound of ``n·eps·Σ|terms|``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..ir import Attrs, Graph, Node, Op, dtypes, subgraphs
from ..ir.ops import ELEMENTWISE, INDEXING, REDUCE, TABLE
from .c_expr import C_EXPR, CTYPE, HOST_HELPERS, UTYPE, Ctx, literal, table_data
from .emit import called_helpers, expression, library_calls, prelude
from .host import HEADER, simd_declarations

COPIES = frozenset({Op.BROADCAST, Op.TRANSPOSE, Op.SLICE, Op.REV})
POINTWISE = ELEMENTWISE | TABLE
CONTROL = frozenset({Op.SCAN, Op.WHILE, Op.WHILE_LIN, Op.WHILE_VJP, Op.COND, Op.CHECKPOINT})
WHILES = frozenset({Op.WHILE, Op.WHILE_LIN, Op.WHILE_VJP})
NOMEM = 1 << 30
"""A program's return status bit: a ``while_vjp`` could not allocate its
checkpoints (the executable raises ``MemoryError``)."""
"""Region nodes written as C control flow around their bodies' code: ``scan``
a counted loop, ``while`` (one predicate for the whole carry) a loop on it,
``cond`` an if/else chain on the clamped index, ``checkpoint`` its body once;
their results are read by ``get`` nodes."""
LAPACK = frozenset({Op.LU, Op.CHOLESKY, Op.TRIANGULAR_SOLVE})
"""Factorizations and solves the vendor library computes inside a whole
program (``emit_whole(blas=True)``), one matrix at a time: LAPACKE's
row-major ``?getrf`` and ``?potrf``, CBLAS's ``?trsm``."""
LAPACK_MIN = 17
"""The smallest matrix order the vendor factorizes or solves inside a whole
program. Up to 16 the reference's own getrf is unblocked (``ir.eval._getf2``)
and ``native`` keeps its bits by running it staged."""
OPS = (POINTWISE | REDUCE | COPIES | CONTROL | LAPACK | INDEXING
       | {Op.RESHAPE, Op.CONCATENATE, Op.PAD, Op.DOT_GENERAL, Op.GET})
"""The ops ``emit_whole`` writes (an op's dtype may still have no C form:
``unsupported`` says)."""
ALIGN = 64  # bytes: every buffer of the arena starts on a cache line
VECTOR_LOOP = 8
"""An innermost loop of at least this many iterations is kept a loop: GCC
unrolls short loops of constant count completely, and then (in a loop nest
that accumulates, as ``dot_general``'s) no longer vectorizes them: 49 us
against 8.7 us for a 256x16 @ 16x16 product."""
TILE_M, TILE_N = 4, 8
"""The output block a matrix product keeps in registers: 4 rows of 8
(eight AVX2 vectors of doubles): each ``b`` row is read once per 4 output
rows; 128x64 by 64x64 took 50 us against 98 us for the plain nest."""
TILED_COLUMNS = 32
"""Products with fewer output columns keep the plain nest: at 16 columns
(the PINN of width 16) the blocks were slower than its short vector loop."""
PART_NODES = 40  # nodes per C function (``_parts``)
BLAS_MIN = 1 << 18
"""A float matrix product of at least this many multiply-adds calls the
vendor BLAS (``emit_whole(blas=True)``), where it is a plain (possibly
transposed) product of strided matrices; smaller ones keep the fixed-order
loops below."""
GEMM_BLOCK = 1 << 24
"""The most multiply-adds of one vendor BLAS call (a few milliseconds): a
larger product is called in blocks of rows, and a stopped call (Ctrl-C)
returns between them."""
BLAS = """static void (*isk_dgemm)(int, int, int, int, int, int, double, const double *, int,
                          const double *, int, double, double *, int);
static void (*isk_sgemm)(int, int, int, int, int, int, float, const float *, int,
                          const float *, int, float, float *, int);
static int (*isk_dgetrf)(int, int, int, double *, int, int32_t *);
static int (*isk_sgetrf)(int, int, int, float *, int, int32_t *);
static int (*isk_dpotrf)(int, char, int, double *, int);
static int (*isk_spotrf)(int, char, int, float *, int);
static void (*isk_dtrsm)(int, int, int, int, int, int, int, double, const double *, int,
                         double *, int);
static void (*isk_strsm)(int, int, int, int, int, int, int, float, const float *, int,
                         float *, int);
void {function}_blas(void **p)
{{  /* the vendor library's cblas_?gemm, LAPACKE_?getrf, LAPACKE_?potrf and
       cblas_?trsm, set once per executable */
    isk_dgemm = p[0];
    isk_sgemm = p[1];
    isk_dgetrf = p[2];
    isk_sgetrf = p[3];
    isk_dpotrf = p[4];
    isk_spotrf = p[5];
    isk_dtrsm = p[6];
    isk_strsm = p[7];
}}
"""
VENDOR_CALLS = ("cblas_dgemm", "cblas_sgemm", "LAPACKE_dgetrf", "LAPACKE_sgetrf",
                "LAPACKE_dpotrf", "LAPACKE_spotrf", "cblas_dtrsm", "cblas_strsm")
"""The vendor functions ``{function}_blas`` takes, in its order."""
POLL_WORK = 1 << 16
"""Most iterations of a nest between two reads of the stop flag (about
0.1 ms of work); smaller nests read it only between parts."""
WATCHED_WORK = 1 << 20
"""Iterations of a whole program (about a millisecond) from which a call is
worth a Ctrl-C inside it (``WholeProgram.polls``); a shorter one returns
before a person notices."""
MAX_STACK = 4096  # elements: a dot's rhs up to this size is repacked on the stack
DTYPES = frozenset(CTYPE)


class WholeUnsupported(Exception):
    """A node ``emit_whole`` has no C form for; the message names it."""


@dataclass(frozen=True)
class WholeProgram:
    """The C source and how to call it: ``function(args, stop)``, ``args`` =
    inputs, constants, the arena (``scratch`` bytes, ``ALIGN``-aligned),
    outputs; ``stop`` the call's stop flag or NULL. ``polls``: a program of
    at least ``WATCHED_WORK`` iterations, whose calls a Ctrl-C should reach
    (``backends.cpu.pool.interruptible``). ``parallel``: fused runs or
    single sums long enough to split over threads (``PARALLEL``,
    ``PAIRWISE_SPLIT``)."""
    source: str
    function: str
    inputs: tuple[Node, ...]
    consts: tuple[Node, ...]
    outputs: tuple[Node, ...]
    scratch: int
    polls: bool = False
    parallel: bool = False  # work split over the workers written into it
    blas: bool = False  # calls the vendor BLAS: ``{function}_blas(dgemm, sgemm)`` sets it


def unsupported(node: Node) -> str | None:
    """Why ``emit_whole`` cannot write ``node``, or None."""
    if node.op in (Op.INPUT, Op.CONST):
        return None if node.dtype in DTYPES else f"dtype {node.dtype}"
    if node.op not in OPS or (node.several and node.op not in CONTROL | {Op.LU}):
        return "no C form in a whole-graph function"
    if node.op is Op.GET:
        return None  # its control-flow node answers
    if any(a.dtype not in DTYPES for a in (*node.avals, *(x.aval for x in node.inputs))):
        return f"dtype {node.avals[0].dtype}"
    if node.op in CONTROL:
        return _control_unsupported(node)
    if node.op in LAPACK and node.inputs[0].shape[-1] < LAPACK_MIN:
        return (f"{node.inputs[0].shape[-1]}x{node.inputs[0].shape[-1]} matrices: below "
                f"{LAPACK_MIN}, the reference's unblocked factors and solves keep their bits")
    if node.op in POINTWISE and expression(node, ["x"] * len(node.inputs), host=True) is None:
        return f"no exact C expression at {node.inputs[0].dtype}"
    if node.op is Op.PAD and min((*node.attrs["lo"], *node.attrs["hi"])) < 0:
        return "negative padding"
    return None


def _control_unsupported(node: Node) -> str | None:
    """Why a control-flow node has no C form here: a predicate per lane, or
    a node of one of its bodies (named)."""
    if node.op in WHILES and node.attrs["cond"].graph.outputs[0].aval.ndim:
        return "a predicate per lane (the staged plan runs it)"
    if node.op is Op.COND and node.inputs[0].dtype in dtypes.FLOATS:
        return "a floating-point branch index"
    for name, sub in subgraphs(node):
        for inner in sub.graph.nodes:
            why = unsupported(inner)
            if why is not None:
                return f"in its body {name!r}: {inner.op.value}: {why}"
    return None


def emit_whole(graph: Graph, function: str, vector_math: bool, blas: bool = False,
               workers: int = 1) -> WholeProgram:
    """The C function of ``graph`` (raises ``WholeUnsupported`` naming the
    first node it cannot write). ``blas``: large matrix products call the
    vendor BLAS, whose ``cblas_?gemm`` the caller hands to
    ``{function}_blas`` (``WholeProgram.blas``). ``workers``: the threads a
    long fused run is split over, written into the source (so executables
    of other worker counts never share a compiled library's setting)."""
    lapack = not blas and next((n for n in _every_node(graph) if n.op in LAPACK), None)
    for node in [*graph.nodes, *([lapack] if lapack else [])]:
        why = unsupported(node) or ("no vendor LAPACK loaded" if node is lapack else None)
        if why is not None:
            where = f" at {node.where}" if node.where else ""
            raise WholeUnsupported(f"{node.op.value}{where}: {why}")
    consts = tuple(dict.fromkeys(_every_const(graph)))
    n_in = len(graph.inputs)
    lines = [f"    {CTYPE[x.dtype]} *in{k} = ({CTYPE[x.dtype]} *)args[{k}];"
             for k, x in enumerate(graph.inputs)]
    lines += [f"    {CTYPE[x.dtype]} *c{k} = ({CTYPE[x.dtype]} *)args[{n_in + k}];"
              for k, x in enumerate(consts)]
    scratch_at = n_in + len(consts)
    lines.append(f"    char *scratch = (char *)args[{scratch_at}];")
    given = {x: _Read(f"in{k}", _strides(x.shape), 0) for k, x in enumerate(graph.inputs)}
    first = n_in + len(consts) + 1
    direct = _direct_outputs(graph)
    lines += [f"    {CTYPE[x.dtype]} *out{k} = ({CTYPE[x.dtype]} *)args[{first + k}];"
              for x, k in direct.items()]
    outlined: list[str] = []
    scope = _Scope(graph, given, {x: f"out{k}" for x, k in direct.items()},
                   {x: f"c{k}" for k, x in enumerate(consts)}, "v", 0, outlined, blas)
    blocks, declared, scratch = scope.emit(top=True)
    slots = len(scope.slots)
    if slots:  # the malloc'd blocks' pointers, above the arena, never reused
        base, scratch = scratch, scratch + _aligned(8 * slots)
    lines += declared
    reads = scope.reads
    for k, x in enumerate(graph.outputs):
        if direct.get(x) == k:
            continue
        ctype = CTYPE[x.dtype]
        blocks.append(["    {", f"        {ctype} *o = ({ctype} *)args[{first + k}];",
                       *_copy(x.shape, "o", reads[x]), "    }"])
    parts = _parts(function, blocks, lines)
    text = "\n".join(parts)
    tables = dict.fromkeys(table_data(dict(n.attrs), n.dtype) for n in _every_node(graph)
                           if n.op in TABLE)
    calls = [f"    {function}_part0(args);"]
    done = "isk_end(args)" if slots else "isk_fpe()"
    for k in range(1, len(parts)):
        calls += ["    if (ISK_STOPPED(flag)" + (" || isk_nomem)" if slots else ")"),
                  f"        return {done};", f"    {function}_part{k}(args);"]
    start = []
    ending = ""
    if slots:
        start = [f"    for (int i = 0; i < {slots}; i++)",
                 f"        ((void **)((char *)args[{scratch_at}] + {base}))[i] = NULL;",
                 "    isk_nomem = 0;"]
        ending = SLOTS.format(slots=slots, scratch=scratch_at, base=base, nomem=NOMEM)
    source = "\n".join([
        HEADER.format(kernel=function, graph=graph.name, block=1),
        simd_declarations(library_calls(text + "\n".join(outlined))) if vector_math else "",
        prelude(called_helpers(text + "\n".join(outlined), HOST_HELPERS), host=True),
        *pairwise_helpers(text + "\n".join(outlined)),
        *tables,
        PARALLEL.format(workers=max(1, min(64, workers)), minimum=PARALLEL_MIN,
                        align=SPLIT_ALIGN)
        if outlined or "isk_pairwise_sum_split_" in text else "",
        *split_sum_helpers(text),
        BLAS.format(function=function) if _vendor(text) else "",
        *outlined,
        f"#define ISK_SLOTS ((void **)(scratch + {base}))\n"
        "static __thread int isk_nomem;" if slots else "",
        text,
        ending,
        f"uint32_t {function}(void **args, const int32_t *stop)\n{{",
        "    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);",
        "    const int32_t *const flag = stop ? stop : &isk_never_stopped;",
        "    isk_stop_flag = flag;",
        *start,
        *calls,
        f"    return {done};\n}}\n"])
    work = sum(iterations(node) for node in graph.nodes)
    loops = any(node.op in CONTROL for node in graph.nodes)
    return WholeProgram(source, function, tuple(graph.inputs), consts, tuple(graph.outputs),
                        scratch, loops or work >= WATCHED_WORK,
                        bool(outlined) or "isk_pairwise_sum_split_" in text,
                        _vendor(text))


SLOTS = """/* the end of a call: the blocks a stop or a failed allocation left behind
   freed, the floating-point flags returned ({nomem}: no memory) */
static uint32_t isk_end(void **args)
{{
    void **slots = (void **)((char *)args[{scratch}] + {base});
    for (int i = 0; i < {slots}; i++) {{
        free(slots[i]);
        slots[i] = NULL;
    }}
    return isk_fpe() | (isk_nomem ? {nomem}u : 0u);
}}
"""


def _vendor(text: str) -> bool:
    """Whether the program calls the vendor library."""
    return any(f"isk_{t}{f}(" in text for t in "ds" for f in ("gemm", "getrf", "potrf", "trsm"))


def arena_bytes(graph: Graph) -> int | None:
    """The bytes of the arena ``emit_whole`` lays out for ``graph`` (its
    static peak), or None where it cannot write the graph."""
    if any(unsupported(node) is not None for node in graph.nodes):
        return None
    given = {x: _Read(f"in{k}", _strides(x.shape), 0) for k, x in enumerate(graph.inputs)}
    consts = {x: f"c{k}" for k, x in enumerate(dict.fromkeys(_every_const(graph)))}
    forced = {x: f"out{k}" for x, k in _direct_outputs(graph).items()}
    scope = _Scope(graph, given, forced, consts, "v", 0)
    size = scope.emit(top=True)[2]
    return size + (_aligned(8 * len(scope.slots)) if scope.slots else 0)


def _direct_outputs(graph: Graph) -> dict[Node, int]:
    """The outputs computed straight into the caller's output arrays (output
    position by node): each computed value the first time it appears among
    the outputs; the others (inputs, constants, views, repeats) are copied
    out at the end."""
    direct: dict[Node, int] = {}
    for k, x in enumerate(graph.outputs):
        if x.op not in (Op.INPUT, Op.CONST) and x.op not in COPIES and x.op is not Op.RESHAPE \
                and not x.several and x not in direct:
            direct[x] = k
    return direct


def _every_node(graph: Graph):
    """The nodes of ``graph`` and of every body inside it."""
    for node in graph.nodes:
        yield node
        for _, sub in subgraphs(node):
            yield from _every_node(sub.graph)


def _every_const(graph: Graph):
    return (n for n in _every_node(graph) if n.op is Op.CONST)


WHILE_GUESS = 100
"""Steps a ``while`` is assumed to take where its work is estimated."""


def iterations(node: Node) -> int:
    """About how many loop iterations ``node`` takes: its elements, or the
    elements it reads (a reduction), or its products (``dot_general``); a
    control-flow node its bodies' (a ``scan`` its length times, a ``while``
    ``WHILE_GUESS`` times, a ``cond`` its largest branch's)."""
    if node.op in CONTROL:
        inner = [sum(iterations(n) for n in sub.graph.nodes) for _, sub in subgraphs(node)]
        if node.op is Op.SCAN:
            return node.attrs["length"] * inner[0]
        return WHILE_GUESS * sum(inner) if node.op in WHILES else max(inner)
    if node.op in (Op.GET, Op.INPUT, Op.CONST) or node.op in COPIES or node.op is Op.RESHAPE:
        return 0
    if node.op in REDUCE:
        return node.inputs[0].aval.size
    if node.op is Op.DOT_GENERAL:
        a = node.inputs[0]
        return node.aval.size * math.prod(a.shape[d] for d in node.attrs["contracting"][0])
    if node.op in LAPACK:  # n^3/3 for a factorization, n^2 k for a solve
        a, n = node.inputs[0], node.inputs[0].shape[-1]
        return a.aval.size * (node.inputs[1].shape[-1] if len(node.inputs) > 1 else n // 3 + 1)
    return node.aval.size


def _parts(function: str, blocks: list, declarations: list) -> list[str]:
    """The nodes' code as functions of at most ``PART_NODES`` nodes each,
    each declaring the buffers it uses: GCC's time grows faster than the
    size of one function (a portable-numerics model of 3 000 nodes took
    90 s as one function)."""
    named = {}
    for line in declarations:
        found = re.match(r"\s+\w+ \*(\w+) = ", line)
        if found:
            named[found.group(1)] = line
    base = [line for line in declarations if "char *scratch" in line]
    parts = []
    for k in range(0, len(blocks), PART_NODES):
        code = [line for block in blocks[k:k + PART_NODES] for line in block]
        used = set(re.findall(r"\b(?:in|c|v|out)\d+\b", "\n".join(code)))
        head = [named[n] for n in named if n in used]
        parts.append("\n".join([
            f"static __attribute__((noinline)) void {function}_part{len(parts)}(void **args)",
            "{", *base, *head, *code, "}"]))
    return parts


@dataclass(frozen=True)
class _Read:
    """How a value is read: ``name[offset + sum(index[d] * strides[d])]``."""
    name: str
    strides: list
    offset: int


@dataclass(frozen=True)
class _View:
    """A value that is another buffer read with strides (no copy)."""
    source: Node  # the node that owns the buffer
    strides: list
    offset: int


def _restricted(node: Node, out: str, reads: dict, blas: bool = False,
                outlined: list | None = None) -> list[str]:
    """The node's code over local ``restrict`` pointers: its output never
    shares memory with a value it reads (the arena hands a buffer on only
    after its last reader), which lets the compiler vectorize without
    run-time overlap checks."""
    lines = [f"        {CTYPE[node.dtype]} *restrict o = {out};"]
    local = {}
    for x in dict.fromkeys(node.inputs):
        r = reads[x]
        name = f"r{len(local)}"
        lines.append(f"        const {CTYPE[x.dtype]} *restrict {name} = {r.name};")
        local[x] = _Read(name, r.strides, r.offset)
    return lines + _node_code(node, "o", local, blas, outlined)


def _run_code(run: list[Node], stored: dict, reads: dict, views: dict,
              outlined: list | None = None) -> list[str]:
    """One loop over the shape of a run of elementwise nodes: each computed
    into a local in graph order, those read after the run (``stored``: node
    -> buffer name) also written to memory. The same operations and
    roundings as one loop per node, in one pass over memory."""
    members = set(run)
    if any(node.op is Op.PAD for node in run):
        return _segments(run, stored, reads, views)
    leaves: dict[Node, int] = {}
    for node in run:
        for x in node.inputs:
            if x not in members:
                leaves.setdefault(x, len(leaves))
    lines = [f"        const {CTYPE[y.dtype]} *restrict r{k} = {reads[y].name};"
             for y, k in leaves.items()]
    outs = {node: f"o{j}" for j, node in enumerate(n for n in run if n in stored)}
    lines += [f"        {CTYPE[n.dtype]} *restrict {o} = {stored[n]};" for n, o in outs.items()]
    shape = run[0].shape
    arrays = [(_strides(shape), 0)] + [(reads[y].strides, reads[y].offset) for y in leaves]

    def statement(ix):
        return _run_statement(run, {y: f"r{k}[{ix[1 + k]}]" for y, k in leaves.items()},
                              outs, ix[0], views)
    flat = _flat(shape, arrays)
    if outlined is None or flat is None or math.prod(shape) < PARALLEL_MIN:
        return lines + _nest(shape, arrays, statement, simd=True)
    # one merged axis, long enough: a function of its own, run over slices in parallel
    name = f"isk_run{len(outlined)}"
    fields = [(f"r{k}", f"const {CTYPE[y.dtype]} *") for y, k in leaves.items()]
    fields += [(o, f"{CTYPE[n.dtype]} *") for n, o in outs.items()]
    indices = [" + ".join([str(base)] * bool(base) + [_term("i0", step)] * bool(step)) or "0"
               for step, base in flat]
    outlined.append("\n".join([
        f"struct {name}_ctx {{ {' '.join(f'{t}{f};' for f, t in fields)} }};",
        f"static void {name}(const void *context, int64_t begin, int64_t end)",
        "{",
        f"    const struct {name}_ctx *c = (const struct {name}_ctx *)context;",
        *[f"    {t.replace('*', '*restrict ')}{f} = c->{f};" for f, t in fields],
        "#pragma omp simd",
        "    for (int64_t i0 = begin; i0 < end; i0++)",
        f"        {statement(indices)}",
        "}"]))
    members = ", ".join(f for f, _ in fields)
    return lines + [f"        const struct {name}_ctx context = {{ {members} }};",
                    f"        isk_parallel({name}, &context, {math.prod(shape)});",
                    "        if (ISK_STOPPED(isk_stop_flag))",
                    "            return;"]


def _dot_sums(graph: Graph, member: dict, users: dict, loose: set, names: dict,
              views: dict, given: dict) -> dict:
    """{sum: product} for the float sums over every axis of a product of a
    fused run that nothing else reads (a Krylov method's inner products),
    shorter than ``SPLIT_SUM_MIN`` (a longer one splits over the workers):
    the product is never stored, the sum multiplies its operands as it adds
    (``PAIRWISE_DOT``: NumPy's pairwise order over the same products, so the
    bits of storing them and summing)."""
    found = {}
    for node in graph.nodes:
        if node.op is not Op.REDUCE_SUM or node.dtype not in dtypes.FLOATS:
            continue
        product = node.inputs[0]
        if (product.op is not Op.MUL or len(member.get(product, ())) < 2
                or users.get(product) != {node} or product in names or product in graph.outputs
                or sorted(node.attrs["axes"]) != list(range(product.aval.ndim))
                or not 2 <= product.aval.size < SPLIT_SUM_MIN):  # (longer: split sums)
            continue
        if any(x in loose or x in views or x.aval.shape != product.aval.shape
               or (x in given and list(given[x].strides) != _strides(x.shape))
               for x in product.inputs):  # (the sum reads each operand as one run)
            continue
        found[node] = product
    return found


def _fused_pads(graph: Graph, views: dict, member: dict, users: dict, names: dict) -> set:
    """Pads read only through unit-stride slices of their own rank by fused
    runs (a stencil's shifted neighbours, ``pad(u)[:-2, 1:-1]``): such a pad
    is never stored, each slice is read as its operand shifted, or as the
    padding value outside it (``_boxes``)."""
    found = set()
    for node in graph.nodes:
        if node.op is not Op.PAD or node in names or node in graph.outputs:
            continue
        a = node.attrs
        if any(a["interior"]) or min((*a["lo"], *a["hi"])) < 0:
            continue
        readers = users.get(node, set())
        if readers and all(
                r.op is Op.SLICE and r in views and all(st == 1 for st in r.attrs["stride"])
                and r not in graph.outputs and r not in names and users.get(r)
                and all(len(member.get(u, ())) > 1 for u in users[r]) for r in readers):
            found.add(node)
    return found


def _padded_read(y: Node, reads: dict) -> tuple:
    """(operand's read, padding value's read, shift, operand's shape) of a
    slice ``y`` of a fused pad: element ``i`` of ``y`` is the operand at
    ``i + shift`` where that is inside it, else the padding value."""
    pad = y.inputs[0]
    x, value = pad.inputs
    shift = [s - lo for s, lo in zip(y.attrs["start"], pad.attrs["lo"])]
    return reads[x], reads[value], shift, x.shape


def _boxes(run: list[Node], stored: dict, reads: dict, views: dict, padded: dict
           ) -> list[str]:
    """A run reading slices of fused pads: its index space cut, axis by axis,
    where a padded slice's operand starts and ends, into boxes in each of
    which every such read is wholly the shifted operand or wholly the
    padding value: one plain nest per box, the same values and order."""
    members = set(run)
    shape = run[0].shape
    leaves: dict[Node, int] = {}
    for node in run:
        for x in node.inputs:
            if x not in members:
                leaves.setdefault(x, len(leaves))
    lines = []
    for y, k in leaves.items():
        if y in padded:
            xr, vr, _, _ = padded[y]
            lines += [f"        const {CTYPE[y.dtype]} *restrict r{k} = {xr.name};",
                      f"        const {CTYPE[y.dtype]} *restrict r{k}v = {vr.name};"]
        else:
            lines.append(f"        const {CTYPE[y.dtype]} *restrict r{k} = {reads[y].name};")
    outs = {node: f"o{j}" for j, node in enumerate(n for n in run if n in stored)}
    lines += [f"        {CTYPE[n.dtype]} *restrict {o} = {stored[n]};" for n, o in outs.items()]
    cuts = [{0, n} for n in shape]
    for _, _, shift, inner in padded.values():
        for d, n in enumerate(shape):
            cuts[d] |= {min(max(-shift[d], 0), n), min(max(inner[d] - shift[d], 0), n)}
    edges = [sorted(c) for c in cuts]
    so = _strides(shape)

    def boxes(d):
        if d == len(shape):
            yield []
            return
        for a, b in zip(edges[d], edges[d][1:]):
            for rest in boxes(d + 1):
                yield [(a, b), *rest]
    for box in boxes(0):
        starts = [a for a, _ in box]
        sizes = [b - a for a, b in box]
        if 0 in sizes:
            continue
        arrays, names = [(so, sum(a * s for a, s in zip(starts, so)))], {}
        for y, k in leaves.items():
            if y in padded:
                xr, vr, shift, inner = padded[y]
                inside = all(0 <= a + sh and a + sh + n <= m
                             for a, n, sh, m in zip(starts, sizes, shift, inner))
                if inside:
                    base = xr.offset + sum((a + sh) * st
                                           for a, sh, st in zip(starts, shift, xr.strides))
                    arrays.append((list(xr.strides), base))
                    names[y] = f"r{k}"
                else:
                    arrays.append(([0] * len(shape), vr.offset))
                    names[y] = f"r{k}v"
            else:
                r = reads[y]
                base = r.offset + sum(a * st for a, st in zip(starts, r.strides))
                arrays.append((list(r.strides), base))
                names[y] = f"r{k}"

        def statement(ix, names=names):
            return _run_statement(run, {y: f"{names[y]}[{ix[1 + k]}]"
                                        for y, k in leaves.items()}, outs, ix[0], views)
        lines += _nest(sizes, arrays, statement, simd=True)
    return lines


def _run_statement(run: list[Node], value: dict, outs: dict, at: str, views: dict) -> str:
    """One element of a run: each node's expression into a local, in graph
    order, over ``value`` (each leaf's read); the stored ones written at
    index ``at``."""
    body = []
    for j, node in enumerate(run):
        expr = _run_expression(node, [value[x] for x in node.inputs], views)
        body.append(f"const {CTYPE[node.dtype]} t{j} = {expr};")
        value[node] = f"t{j}"
        if node in outs:
            body.append(f"{outs[node]}[{at}] = t{j};")
    return "{ " + " ".join(body) + " }"


def _segments(run: list[Node], stored: dict, reads: dict, views: dict) -> list[str]:
    """A 1-D run holding pads, as one loop per segment between the places
    where a pad's operand starts or ends: inside a segment each pad is a
    shifted read of its operand or its padding value, so every loop is a
    plain vectorizable one (the values and their order are the run's)."""
    members, n = set(run), run[0].shape[0]
    names: dict[Node, str] = {}
    lines = []
    for node in run:
        for x in node.inputs:
            if x not in members and x not in names:
                names[x] = f"r{len(names)}"
                lines.append(f"        const {CTYPE[x.dtype]} *restrict {names[x]} = "
                             f"{reads[x].name};")
    outs = {node: f"o{j}" for j, node in enumerate(m for m in run if m in stored)}
    lines += [f"        {CTYPE[m.dtype]} *restrict {o} = {stored[m]};" for m, o in outs.items()]
    cuts = {0, n}
    for node in run:
        if node.op is Op.PAD:
            lo = node.attrs["lo"][0]
            cuts |= {min(lo, n), min(lo + node.inputs[0].shape[0], n)}
    edges = sorted(cuts)

    def read(x: Node, shift: int = 0) -> str:
        """``x`` at ``i0 - shift`` (a 0-d value: its one element)."""
        r = reads[x]
        step = r.strides[0] if x.aval.ndim else 0
        base = r.offset - shift * step
        terms = ([str(base)] if base else []) + ([_term("i0", step)] if step else [])
        return f"{names[x]}[{' + '.join(terms) or '0'}]"

    for a, b in zip(edges, edges[1:]):
        body = []
        for j, node in enumerate(run):
            if node.op is Op.PAD:
                x, v = node.inputs
                lo = node.attrs["lo"][0]
                inside = lo <= a and b <= lo + x.shape[0]
                value = (f"t{run.index(x)}" if x in members else read(x, lo)) if inside else (
                    f"t{run.index(v)}" if v in members else read(v))
                expr = value
            else:
                expr = _run_expression(node, [f"t{run.index(x)}" if x in members else read(x)
                                              for x in node.inputs], views)
            body.append(f"const {CTYPE[node.dtype]} t{j} = {expr};")
            if node in outs:
                body.append(f"{outs[node]}[i0] = t{j};")
        lines += ["        if (ISK_STOPPED(isk_stop_flag))", "            return;",
                  "#pragma omp simd", f"        for (int64_t i0 = {a}; i0 < {b}; i0++)",
                  "            { " + " ".join(body) + " }"]
    return lines


def _edges(node: Node, out: str, value: str) -> list[str]:
    """``value`` into the edges of a pad without interior padding: per axis
    ``d``, the slabs before and after the operand along ``d``, inside it along
    the axes before ``d`` and whole along the axes after (every element
    outside the operand exactly once)."""
    x, lo, shape = node.inputs[0], node.attrs["lo"], node.shape
    so = _strides(shape)
    lines = []
    for d in range(len(shape)):
        for start, stop in ((0, lo[d]), (lo[d] + x.shape[d], shape[d])):
            if stop <= start:
                continue
            box = [x.shape[e] if e < d else (stop - start if e == d else shape[e])
                   for e in range(len(shape))]
            base = sum(lo[e] * so[e] for e in range(d)) + start * so[d]
            lines += _nest(box, [(so, base)], lambda ix: f"{out}[{ix[0]}] = {value};")
    return lines


def _merged(shape, arrays) -> list[tuple[int, list[int]]]:
    """The axes of a nest over ``shape``: size-1 axes dropped, adjacent axes
    merged where every array's strides allow; ``(size, strides per array)``."""
    dims = [(n, [s[d] for s, _ in arrays]) for d, n in enumerate(shape) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, strides in dims:
        if merged and all(p == q * n for p, q in zip(merged[-1][1], strides)):
            merged[-1] = (merged[-1][0] * n, strides)
        else:
            merged.append((n, strides))
    return merged


def _flat(shape, arrays) -> list[tuple[int, int]] | None:
    """Per array ``(stride, base)`` where the nest over ``shape`` merges into
    one axis for every array (``_merged``); else None."""
    merged = _merged(shape, arrays)
    if len(merged) != 1:
        return None
    return [(step, base) for step, (_, base) in zip(merged[0][1], arrays)]


def _run_expression(node: Node, operands: list[str], views: dict) -> str:
    """``node``'s C expression in a fused run: an integer floordiv or rem by
    a constant power of two as a shift or mask (``_power_of_two_divisor``)."""
    if node.op in (Op.FLOORDIV, Op.REM) and node.dtype not in dtypes.FLOATS:
        k = _power_of_two_divisor(node, views)
        ctype = CTYPE[node.dtype]
        if node.op is Op.FLOORDIV:
            return f"({ctype})({operands[0]} >> {k})"
        return f"({ctype})({operands[0]} & ({ctype}){(1 << k) - 1})"
    return expression(node, operands, host=True)


def _views(graph: Graph, seeds: dict) -> dict[Node, _View]:
    """Broadcasts, transposes, slices and reversals of any value, and
    reshapes of values read in C order, as strided reads of the buffer they
    come from; everything else gets a buffer of its own. ``seeds``: how the
    graph's given inputs are read (a body's carries, steps and captures)."""
    views: dict[Node, _View] = {}
    for node in graph.nodes:
        if node.op not in COPIES and node.op is not Op.RESHAPE:
            continue
        x = node.inputs[0]
        seen = views.get(x) or seeds.get(x) or _View(x, _strides(x.shape), 0)
        if node.op is Op.RESHAPE:
            if seen.strides == _strides(x.shape) or x.aval.size <= 1:
                views[node] = _View(seen.source, _strides(node.shape), seen.offset)
            continue
        strides, offset = _source_view(node, seen.strides)
        views[node] = _View(seen.source, strides, seen.offset + offset)
    return views


def _copy(shape, out: str, read: _Read) -> list[str]:
    """``out`` (C order) = the value ``read`` describes."""
    return _nest(shape, [(_strides(shape), 0), (read.strides, read.offset)],
                 lambda ix: f"{out}[{ix[0]}] = {read.name}[{ix[1]}];")


# --- the arena ----------------------------------------------------------------------------

class _Scope:
    """The code of one graph, the program's or a body inside a control-flow
    node: a buffer for every value that is not a view, laid out in an arena
    from byte ``origin`` of the scratch (a body's arena lies in its node's
    temporary), a buffer taken back after the last node that reads it (or a
    view of it) and handed to the next node of the same byte size, outputs
    kept to the end. ``given``: how the graph's inputs are read; ``forced``:
    buffers named from outside (a body's outputs written straight into a
    loop's next carry or its row of stacked outputs); ``consts``: the
    program's names of the constants; ``prefix``: of the buffers' names."""

    def __init__(self, graph: Graph, given: dict, forced: dict, consts: dict, prefix: str,
                 origin: int, outlined: list | None = None, blas: bool = False,
                 slots: list | None = None):
        self.graph, self.given, self.consts = graph, given, consts
        self.slots = [] if slots is None else slots  # the program's malloc'd blocks
        self.outlined = outlined  # the program's run functions (None: runs stay inline)
        self.blas = blas  # large matrix products call the vendor BLAS
        self.prefix, self.origin = prefix, origin
        self.views = _views(graph, {x: _View(x, r.strides, r.offset) for x, r in given.items()})
        self.names = {x: r.name for x, r in given.items()}
        self.names.update({x: consts[x] for x in graph.nodes if x.op is Op.CONST})
        self.names.update(forced)
        self.reads: dict[Node, _Read] = {}

    def emit(self, top: bool = False) -> tuple[list[list[str]], list[str], int]:
        """The nodes' code blocks, the buffers' declarations and the arena's
        bytes."""
        graph, views, names = self.graph, self.views, self.names
        root = {x: v.source for x, v in views.items()}
        order = {node: i for i, node in enumerate(graph.nodes)}
        runs = self._runs()
        at = dict(order)  # where a node's reads happen: a run's members' at its last
        for run in runs:
            for node in run:
                at[node] = order[run[-1]]
        member = {node: run for run in runs for node in run}
        last: dict[Node, int] = {}
        gets: dict[Node, list[Node]] = {}
        users: dict[Node, set] = {}
        for node in graph.nodes:
            for x in node.inputs:
                users.setdefault(x, set()).add(node)
        fused = _fused_pads(graph, views, member, users, names)
        self.fused = fused
        outputs = set(graph.outputs)
        # a run's member is stored when something outside the run reads it
        loose = {node for run in runs if len(run) > 1 for node in run
                 if node not in outputs and node not in names
                 and users.get(node, set()) <= set(member[node])}
        dots = _dot_sums(graph, member, users, loose, names, views, self.given)
        loose |= set(dots.values())  # a product read by its sum alone is never stored
        for node in graph.nodes:
            if node.op is Op.GET:  # a result of its control node, which has no buffer
                gets.setdefault(node.inputs[0], []).append(node)
                continue
            if node in views:
                continue
            for x in (dots[node].inputs if node in dots else node.inputs):
                source = root.get(x, x)
                # a fused pad has no buffer: its readers read its operand and value
                for y in (source.inputs if source in fused else (source,)):
                    r = root.get(y, y)
                    last[r] = max(last.get(r, -1), at[node])
        for x in graph.outputs:
            last[root.get(x, x)] = len(graph.nodes)
        dies: dict[int, list[Node]] = {}
        for x, i in last.items():
            dies.setdefault(i, []).append(x)
        free: dict[int, list[int]] = {}
        offsets: dict[Node, tuple[int, int]] = {}
        temps: dict[Node, tuple[int, int]] = {}
        declared: list[str] = []
        top_ = 0

        def take(size: int) -> int:
            nonlocal top_
            if free.get(size):
                return free[size].pop()
            offset, top_ = top_, top_ + size
            return offset

        def own(node: Node) -> None:
            ctype, name = CTYPE[node.dtype], f"{self.prefix}{order[node]}"
            size = _aligned(node.aval.size * node.dtype.itemsize)
            offset = take(size)
            names[node] = name
            offsets[node] = (offset, size)
            declared.append(f"    {ctype} *{name} = ({ctype} *)(scratch + "
                            f"{self.origin + offset});")

        for i, node in enumerate(graph.nodes):
            skip = (node in names or node in views or node.op is Op.GET or node in loose
                    or node in fused)
            if not skip and (node.op in CONTROL or node.several):
                for g in gets.get(node, []):
                    if g not in names:
                        own(g)
            elif not skip:
                own(node)
            if node.op in CONTROL | LAPACK:  # (its result may be a caller's array)
                size = _aligned(self._temp_bytes(node))
                temps[node] = (take(size), size)
            for x in [x for x in dies.get(i, ()) if x in offsets]:
                offset, size = offsets.pop(x)  # taken back once
                free.setdefault(size, []).append(offset)
            if node in temps:  # a temporary lives while its node runs
                free.setdefault(temps[node][1], []).append(temps[node][0])
        for x, v in views.items():
            if v.source not in fused:
                self.reads[x] = _Read(names[v.source], v.strides, v.offset)
        for node in graph.nodes:
            if node in self.reads or node.several or node in loose or node in fused or (
                    node in views and views[node].source in fused):
                continue
            self.reads[node] = self.given.get(node) or _Read(names[node], _strides(node.shape), 0)
        blocks = []
        for node in graph.nodes:
            if node.op in (Op.INPUT, Op.CONST, Op.GET) or node in views or node in fused:
                continue
            run = member.get(node)
            if node.op in CONTROL:
                lines, _ = self._control(node, self.origin + temps[node][0])
                blocks.append(["    {", *lines, "    }"])
            elif node.op in LAPACK:
                blocks.append(["    {", *self._lapack(node, self.origin + temps[node][0])[0],
                               "    }"])
            elif run is not None and len(run) > 1:
                if node is run[-1]:
                    stored = {n: names[n] for n in run if n not in loose}
                    padded = {y: _padded_read(y, self.reads) for n in run for y in n.inputs
                              if y in views and views[y].source in fused}
                    code = (_boxes(run, stored, self.reads, views, padded) if padded else
                            _run_code(run, stored, self.reads, views, self.outlined))
                    blocks.append(["    {", *code, "    }"])
            elif node in dots:
                a, b = (self.reads[x] for x in dots[node].inputs)
                blocks.append(["    {", f"        {names[node]}[0] = "
                               f"{literal(0.0, node.dtype)} + isk_pairwise_dot_{node.dtype}("
                               f"{a.name} + {a.offset}, {b.name} + {b.offset}, "
                               f"{node.inputs[0].aval.size});", "    }"])
            else:
                blocks.append(["    {", *_restricted(node, names[node], self.reads, self.blas,
                                                         self.outlined),
                               "    }"])
        return blocks, declared, max(top_, ALIGN) if top else top_

    def _runs(self) -> list[list[Node]]:
        """Runs of elementwise nodes of one shape, each computed in one loop
        at the place of its last member (``_run_code``). Runs of different
        shapes may be open at once. An elementwise node joins the open run
        of its shape unless it reads a member of it through a view (whose
        elements sit elsewhere in the loop); a node that reads members of
        other open runs closes them (they run before it), and a node that
        is not elementwise closes the runs it reads."""
        runs: list[list[Node]] = []
        open_: dict[tuple, list[Node]] = {}
        owner: dict[Node, tuple] = {}  # member -> its run's shape, while open
        root = {x: v.source for x, v in self.views.items()}
        for node in self.graph.nodes:
            if node.op in (Op.INPUT, Op.CONST, Op.GET) or node in self.views:
                continue
            read = {owner[r] for r in (root.get(x, x) for x in node.inputs) if r in owner}
            viewed = {owner[root[x]] for x in node.inputs if x in self.views and root[x] in owner}
            fusible = _fusible(node, self.views)
            joins = fusible and node.shape in open_ and node.shape not in viewed
            for shape in read - ({node.shape} if joins else set()):
                for member in open_.pop(shape):
                    del owner[member]
            if not fusible:
                continue
            if joins:
                open_[node.shape].append(node)
            else:
                for member in open_.pop(node.shape, []):
                    del owner[member]
                open_[node.shape] = [node]
                runs.append(open_[node.shape])
            owner[node] = node.shape
        return runs

    def _control(self, node: Node, origin: int, probe: bool = False) -> tuple[list[str], int]:
        """The C of a control-flow node and the bytes of its temporary (its
        next carries, results nobody reads, its bodies' arenas), laid out
        from ``origin``. ``probe``: only the size is wanted (the operands'
        buffers may not be named yet)."""
        tag = f"{self.prefix}{self.graph.index(node)}"
        operands = [self._operand(x, probe) for x in node.inputs]
        results = {g.attrs["index"]: self.names.get(g, "?") for g in self.graph.nodes
                   if g.op is Op.GET and g.inputs[0] is node}
        return _ControlWriter(self, node, tag, operands, results, origin).write()

    def _temp_bytes(self, node: Node) -> int:
        if node.op in CONTROL:
            return self._control(node, 0, probe=True)[1]
        return self._lapack(node, 0, probe=True)[1]

    def _lapack(self, node: Node, origin: int, probe: bool = False) -> tuple[list[str], int]:
        """The vendor calls of a factorization or solve, one matrix at a
        time, and the bytes of its temporary (results nobody reads, the
        pivots LAPACK writes, a strided matrix made contiguous), laid out
        from ``origin``."""
        a = self._operand(node.inputs[0], probe)
        n = node.inputs[0].shape[-1]
        count = node.inputs[0].aval.size // (n * n) if n else 0
        dt = node.inputs[0].dtype
        t, f = CTYPE[dt], "d" if dt == dtypes.float64 else "s"
        used = 0
        lines: list[str] = []

        def temporary(ctype: str, size: int, name: str) -> str:
            nonlocal used
            lines.append(f"        {ctype} *{name} = ({ctype} *)(scratch + {origin + used});")
            used += _aligned(size)
            return name

        if node.op is Op.LU:
            results = {g.attrs["index"]: self.names.get(g, "?") for g in self.graph.nodes
                       if g.op is Op.GET and g.inputs[0] is node}
            lu, piv, perm = (results.get(k) or temporary(c, size, f"unread{k}")
                             for k, (c, size) in enumerate(
                                 [(t, node.inputs[0].aval.nbytes), ("int32_t", 4 * count * n),
                                  ("int32_t", 4 * count * n)]))
            temporary("int32_t", 4 * n, "ipiv")  # the interchanges LAPACK writes
            lines += [f"        {t} *lu = {lu};",
                      *_copy(node.inputs[0].shape, "lu", a),
                      f"        for (int64_t b = 0; b < {count}; b++) {{",
                      f"            isk_{f}getrf(101, {n}, {n}, lu + b * {n * n}, {max(1, n)}, "
                      f"ipiv);",
                      f"            int32_t *p = {piv} + b * {n}, *q = {perm} + b * {n};",
                      f"            for (int k = 0; k < {n}; k++) {{ p[k] = ipiv[k] - 1; "
                      f"q[k] = k; }}",
                      f"            for (int k = 0; k < {n}; k++) {{ const int32_t j = p[k], "
                      f"s = q[k]; q[k] = q[j]; q[j] = s; }}",
                      "        }"]
            return lines, used
        out = self.names.get(node, "?")
        if node.op is Op.CHOLESKY:
            nan = literal(float("nan"), dt)
            zero = literal(0.0, dt)
            lines += [*_copy(node.shape, out, a),
                      f"        for (int64_t b = 0; b < {count}; b++) {{",
                      f"            {t} *m = {out} + b * {n * n};",
                      f"            const int bad = isk_{f}potrf(101, 'L', {n}, m, {n}) != 0;",
                      f"            for (int i = 0; i < {n}; i++)",
                      f"                for (int j = 0; j < {n}; j++)",
                      f"                    if (bad) m[i * {n} + j] = {nan};",
                      f"                    else if (j > i) m[i * {n} + j] = {zero};",
                      "        }"]
            return lines, used
        b = self._operand(node.inputs[1], probe)
        k = node.shape[-1]
        if a.strides == _strides(node.inputs[0].shape):
            matrix = f"{a.name} + {a.offset}"
        else:
            matrix = temporary(t, node.inputs[0].aval.nbytes, "a")
            lines += _copy(node.inputs[0].shape, matrix, a)
        lower, trans = node.attrs["lower"], node.attrs["transpose_a"]
        flags = (f"{122 if lower else 121}, {112 if trans else 111}, "
                 f"{132 if node.attrs['unit_diagonal'] else 131}")
        lines += [*_copy(node.shape, out, b),
                  f"        for (int64_t b = 0; b < {count}; b++)",
                  f"            isk_{f}trsm(101, 141, {flags}, {n}, {k}, 1, "
                  f"{matrix} + b * {n * n}, {max(1, n)}, {out} + b * {n * k}, {max(1, k)});"]
        return lines, used

    def _operand(self, x: Node, probe: bool) -> _Read:
        if x in self.views:
            v = self.views[x]
            return _Read(self.names.get(v.source, "?"), v.strides, v.offset)
        if x in self.given:
            return self.given[x]
        return _Read(self.names.get(x, "?"), _strides(x.shape), 0)


def _fusible(node: Node, views: dict) -> bool:
    """Elementwise, and without branches that would keep a fused loop from
    vectorizing: integer division and remainder test their divisor, unless
    it is a constant power of two (``_power_of_two_divisor``). A 1-D pad
    (edges only) joins too: its run is cut where its operand starts and
    ends (``_segments``)."""
    if node.op is Op.PAD:
        a = node.attrs
        return (node.aval.ndim == 1 and node.shape[0] > 1 and tuple(a["interior"]) == (0,)
                and min(a["lo"][0], a["hi"][0]) >= 0 and node.inputs[0].shape[0] >= 1)
    if node.op not in ELEMENTWISE:
        return False
    if node.op in (Op.FLOORDIV, Op.REM) and node.dtype not in dtypes.FLOATS:
        return _power_of_two_divisor(node, views) is not None
    return True


def _power_of_two_divisor(node: Node, views: dict) -> int | None:
    """``k`` where ``node`` (an integer floordiv or rem) divides by the
    constant ``2**k`` (k >= 0; every element, through broadcasts); else None.
    Then ``a // 2**k`` is ``a >> k`` and ``a % 2**k`` is ``a & (2**k - 1)``,
    exactly, for every int64 ``a`` (floor division, two's complement)."""
    b = node.inputs[1]
    source = views[b].source if b in views else b
    if source.op is not Op.CONST or node.dtype not in (dtypes.int32, dtypes.int64):
        return None
    values = np.unique(np.asarray(source.attrs["value"].value))
    if values.size != 1 or values[0] < 1 or int(values[0]) & (int(values[0]) - 1):
        return None
    return int(values[0]).bit_length() - 1


class _ControlWriter:
    """Writes one control-flow node of a ``_Scope``: its results in the GET
    nodes' buffers (or its temporary), a loop's carry in two buffers that
    swap after every step (the body writes its next carry straight into the
    other), its bodies as nested ``_Scope``s."""

    def __init__(self, scope: _Scope, node: Node, tag: str, operands: list, results: dict,
                 origin: int):
        self.scope, self.node, self.tag, self.operands = scope, node, tag, operands
        self.origin, self.top, self.inner, self.lines = origin, 0, 0, []
        self.results = []
        for j, aval in enumerate(node.avals):
            name = results.get(j)
            if name is None:
                name = self.buffer(f"{tag}_r{j}", aval)
            self.results.append(name)

    def buffer(self, name: str, aval) -> str:
        ctype = CTYPE[aval.dtype]
        self.lines.append(f"        {ctype} *{name} = ({ctype} *)(scratch + "
                          f"{self.origin + self.top});")
        self.top += _aligned(aval.size * aval.dtype.itemsize)
        return name

    def write(self) -> tuple[list[str], int]:
        op = self.node.op
        if op is Op.SCAN:
            body = self._scan()
        elif op in (Op.WHILE, Op.WHILE_LIN):
            body = self._while()
        elif op is Op.WHILE_VJP:
            body = self._while_vjp()
        else:
            body = self._branches()
        return self.lines + body, self.top + self.inner

    def body(self, graph: Graph, given: list, outs: list[str], suffix: str) -> list[str]:
        """``graph``'s code in a block: inputs read as ``given``, each output
        written to the buffer named in ``outs`` (straight, where the output
        is a value of its own the first time it appears, else copied)."""
        forced, copies = {}, []
        plain = {n for n in graph.nodes if n.op not in (Op.INPUT, Op.CONST, Op.GET)
                 and n.op not in CONTROL and n.op not in COPIES and n.op is not Op.RESHAPE}
        for x, name in zip(graph.outputs, outs):
            if x in plain and x not in forced:
                forced[x] = name
            else:
                copies.append((x, name))
        scope = _Scope(graph, dict(zip(graph.inputs, given)), forced, self.scope.consts,
                       f"{self.tag}{suffix}_", self.origin + self.top, self.scope.outlined,
                       self.scope.blas, self.scope.slots)
        blocks, declared, size = scope.emit()
        self.inner = max(self.inner, size)
        code = ["        {", *declared, *[line for block in blocks for line in block]]
        for x, name in copies:
            code += _copy(x.shape, name, scope.reads[x])
        return code + ["        }"]

    def _carries(self, n: int, avals=None, results=None, operands=None
                 ) -> tuple[list[str], list[str]]:
        """The results' first values and the two buffers of each carry
        (default: the node's first ``n`` results and operands)."""
        avals, lines = (avals or self.node.avals)[:n], []
        results, operands = results or self.results, operands or self.operands
        nxt = [self.buffer(f"{self.tag}_b{j}", a) for j, a in enumerate(avals)]
        for j, a in enumerate(avals):
            lines += _copy(a.shape, results[j], operands[j])
            ctype = CTYPE[a.dtype]
            lines += [f"        {ctype} *{self.tag}_cur{j} = {results[j]};",
                      f"        {ctype} *{self.tag}_nxt{j} = {nxt[j]};"]
        return lines, [f"{self.tag}_cur{j}" for j in range(n)]

    def _swap_and_finish(self, n: int, avals=None, results=None
                         ) -> tuple[list[str], list[str]]:
        swap, finish = [], []
        results = results or self.results
        for j, a in enumerate((avals or self.node.avals)[:n]):
            ctype, cur, nxt = CTYPE[a.dtype], f"{self.tag}_cur{j}", f"{self.tag}_nxt{j}"
            swap.append(f"            {{ {ctype} *t = {cur}; {cur} = {nxt}; {nxt} = t; }}")
            finish.append(f"        if ({cur} != {results[j]}) memcpy({results[j]}, "
                          f"{cur}, {a.size * a.dtype.itemsize});")
        return swap, finish

    def _scan(self) -> list[str]:
        a = self.node.attrs
        n, nx, length, tag = a["n_carry"], a["n_xs"], a["length"], self.tag
        body = a["body"].graph
        head, cur = self._carries(n)
        step = f"{tag}_s"
        given = [_Read(c, _strides(x.shape), 0) for c, x in zip(cur, body.inputs)]
        slots = []
        for k in range(nx):
            r, x = self.operands[n + k], self.node.inputs[n + k]
            ctype = CTYPE[x.dtype]
            slots.append(f"            const {ctype} *{tag}_x{k} = {r.name} + {r.offset} + "
                         f"{step} * {r.strides[0]};")
            given.append(_Read(f"{tag}_x{k}", r.strides[1:], 0))
        given += self.operands[n + nx:]
        outs = [f"{tag}_nxt{j}" for j in range(n)]
        for k, aval in enumerate(self.node.avals[n:]):
            ctype, row = CTYPE[aval.dtype], math.prod(aval.shape[1:])
            slots.append(f"            {ctype} *{tag}_y{k} = {self.results[n + k]} + "
                         f"{step} * {row};")
            outs.append(f"{tag}_y{k}")
        code = self.body(body, given, outs, "")
        swap, finish = self._swap_and_finish(n)
        first = f"{length - 1} - {tag}_t" if a["reverse"] else f"{tag}_t"
        return head + [
            f"        for (int64_t {tag}_t = 0; {tag}_t < {length}; {tag}_t++) {{",
            f"            const int64_t {step} = {first};",
            "            if (ISK_STOPPED(isk_stop_flag))",
            "                return;",
            *slots, *code, *swap, "        }", *finish]

    def _while(self) -> list[str]:
        a = self.node.attrs
        if self.node.op is Op.WHILE:
            return self._loop(a["cond"].graph, a["body"].graph, a["n_carry"], None, None,
                              None)
        # while_lin: the loop of the body's JVP over (carry, tangent carry), run from the
        # residuals; its results are the tangents (the primal carries go to the temporary)
        n, m = a["n_carry"], len(a["tangent_carries"])
        body = a["body_jvp"].graph
        c = len(a["body"].graph.inputs) - n
        ops = self.operands
        operands = ops[:n] + ops[n + c:n + c + m] + ops[n:n + c] + ops[n + c + m:]
        avals = [x.aval.strong() for x in body.inputs[:n + m]]
        results = [self.buffer(f"{self.tag}_p{j}", av) for j, av in enumerate(avals[:n])]
        return self._loop(a["cond_jvp"].graph, body, n + m, avals, results + self.results,
                          operands)

    def _loop(self, cond: Graph, body: Graph, n: int, avals, results, operands) -> list[str]:
        tag = self.tag
        head, cur = self._carries(n, avals, results, operands)
        given = [_Read(c, _strides(x.shape), 0) for c, x in zip(cur, body.inputs)]
        given += (operands or self.operands)[n:]
        holder = self.buffer(f"{tag}_go", cond.outputs[0].aval)  # the predicate
        pred = self.body(cond, given, [holder], "c")
        code = self.body(body, given, [f"{tag}_nxt{j}" for j in range(n)], "")
        swap, finish = self._swap_and_finish(n, avals, results)
        return head + [
            "        for (;;) {",
            "            if (ISK_STOPPED(isk_stop_flag))",
            "                return;",
            *pred,
            f"            if (!{holder}[0])",
            "                break;",
            *code, *swap, "        }", *finish]

    def _while_vjp(self) -> list[str]:
        """The checkpointed reverse sweep of ``control.while_loop._vjp_eval``:
        count the steps T; keep the carry before every K-th step (K the
        node's ``checkpoint_every``, else isqrt(T - 1) + 1) in a block from
        ``malloc`` of (T/K + K) carries, freed at the end (or by the program
        when a stop returns early: ``ISK_SLOTS``); then pull the cotangent
        back through the body's VJP segment by segment, last first,
        recomputing each segment's carries. The captures' cotangents add up
        in the reference's order."""
        a = self.node.attrs
        n, tag, ops = a["n_carry"], self.tag, self.operands
        cond, body, back = a["cond"].graph, a["body"].graph, a["body_vjp"].graph
        m = len(a["tangent_carries"])
        c = len(body.inputs) - n
        caps = ops[n:n + c]
        avals = [x.aval for x in body.inputs[:n]]
        ct_avals = [x.aval for x in back.outputs[n:n + m]]
        # every buffer first: the bodies' arenas lie above them
        prim = [self.buffer(f"{tag}_p{j}", av) for j, av in enumerate(avals)]
        head, cur = self._carries(n, avals, prim, ops)
        holder = self.buffer(f"{tag}_go", cond.outputs[0].aval)
        ct_next = [self.buffer(f"{tag}_q{j}", av) for j, av in enumerate(ct_avals)]
        pulled = [self.buffer(f"{tag}_g{j}", x.aval) for j, x in enumerate(back.outputs[n + m:])]
        spare = [self.buffer(f"{tag}_d{j}", x.aval) for j, x in enumerate(back.outputs[:n])]
        if tag not in self.scope.slots:  # (sizing the temporary writes the code once before)
            self.scope.slots.append(tag)
        slot = self.scope.slots.index(tag)
        sizes = [_aligned(av.size * av.dtype.itemsize) for av in avals]
        offsets = [sum(sizes[:j]) for j in range(n)]
        width = max(ALIGN, sum(sizes))  # one carry's bytes in the block
        given = [_Read(x, _strides(y.shape), 0) for x, y in zip(cur, body.inputs)] + caps
        pred = self.body(cond, given, [holder], "c")
        step = self.body(body, given, [f"{tag}_nxt{j}" for j in range(n)], "")
        swap, _ = self._swap_and_finish(n, avals, prim)
        seg = [_Read(f"{tag}_sa{j}", _strides(x.shape), 0) for j, x in enumerate(body.inputs[:n])]
        again = self.body(body, seg + caps, [f"{tag}_sb{j}" for j in range(n)], "r")
        cts = [_Read(f"{tag}_ct{j}", _strides(av.shape), 0) for j, av in enumerate(ct_avals)]
        pull = self.body(back, seg + caps + cts,
                         [*spare, *[f"{tag}_cn{j}" for j in range(m)], *pulled], "v")

        def at(base: str, j: int, name: str) -> str:
            ctype = CTYPE[avals[j].dtype]
            return f"{ctype} *{name} = ({ctype} *)({base} + {offsets[j]});"
        stop = ["            if (ISK_STOPPED(isk_stop_flag))", "                return;"]
        every = a["checkpoint_every"] or 0
        T, K, S, M = (f"{tag}_{x}" for x in "TKSm")
        lines = head + [
            f"        int64_t {T} = 0;", "        for (;;) {", *stop, *pred,
            f"            if (!{holder}[0])", "                break;",
            *step, *swap, f"            {T}++;", "        }",
            f"        int64_t {K} = {every};",
            f"        if ({K} <= 0) {{  /* isqrt(T - 1) + 1, as math.isqrt */",
            f"            const int64_t v = {T} > 1 ? {T} - 1 : 0;",
            "            int64_t r = (int64_t)sqrt((double)v);",
            "            while (r * r > v) r--;",
            "            while ((r + 1) * (r + 1) <= v) r++;",
            f"            {K} = r + 1;", "        }",
            f"        const int64_t {S} = ({T} + {K} - 1) / {K};",
            f"        char *{M} = (char *)malloc((size_t)({S} + {K}) * {width});",
            f"        ISK_SLOTS[{slot}] = {M};",
            f"        if (!{M}) {{ isk_nomem = 1; return; }}"]
        for j, av in enumerate(avals):
            lines += _copy(av.shape, f"{tag}_cur{j}", ops[j])
        lines += [f"        for (int64_t t = 0; t < {T}; t++) {{", *stop,
                  f"            if (t % {K} == 0) {{"]
        lines += [f"                memcpy({M} + (t / {K}) * {width} + {offsets[j]}, "
                  f"{tag}_cur{j}, {av.size * av.dtype.itemsize});" for j, av in enumerate(avals)]
        lines += ["            }", *step, *swap, "        }"]
        for j, av in enumerate(ct_avals):
            ctype = CTYPE[av.dtype]
            lines += [f"        {ctype} *{tag}_ct{j} = {self.results[j]};",
                      f"        {ctype} *{tag}_cn{j} = {ct_next[j]};",
                      *_copy(av.shape, self.results[j], ops[n + c + j])]
        lines += [f"        int {tag}_first = 1;",
                  f"        for (int64_t s = {S} - 1; s >= 0; s--) {{",
                  f"            const int64_t length = {T} - s * {K} < {K} ? {T} - s * {K} : {K};",
                  f"            char *states = {M} + {S} * {width};",
                  f"            memcpy(states, {M} + s * {width}, {width});",
                  "            for (int64_t i = 1; i < length; i++) {", *stop,
                  *[f"            {at(f'states + (i - 1) * {width}', j, f'{tag}_sa{j}')}"
                    for j in range(n)],
                  *[f"            {at(f'states + i * {width}', j, f'{tag}_sb{j}')}"
                    for j in range(n)],
                  *again, "            }",
                  "            for (int64_t i = length - 1; i >= 0; i--) {", *stop,
                  *[f"            {at(f'states + i * {width}', j, f'{tag}_sa{j}')}"
                    for j in range(n)],
                  *pull]
        for j, av in enumerate(ct_avals):
            ctype = CTYPE[av.dtype]
            lines.append(f"            {{ {ctype} *t = {tag}_ct{j}; {tag}_ct{j} = {tag}_cn{j}; "
                         f"{tag}_cn{j} = t; }}")
        for g, x in zip(pulled, back.outputs[n + m:]):
            acc = self.results[m + pulled.index(g)]
            size = x.aval.size
            lines += [f"            if ({tag}_first)",
                      f"                memcpy({acc}, {g}, {size * x.dtype.itemsize});",
                      "            else",
                      f"                for (int64_t e = 0; e < {size}; e++) "
                      f"{acc}[e] = {acc}[e] + {g}[e];"]
        lines += [f"            {tag}_first = 0;", "            }", "        }"]
        for g, x in zip(pulled, back.outputs[n + m:]):
            acc = self.results[m + pulled.index(g)]
            lines += [f"        if ({tag}_first)",
                      f"            for (int64_t e = 0; e < {x.aval.size}; e++) "
                      f"{acc}[e] = {literal(0.0, x.dtype)};"]
        for j, av in enumerate(ct_avals):
            lines.append(f"        if ({tag}_ct{j} != {self.results[j]}) memcpy("
                         f"{self.results[j]}, {tag}_ct{j}, {av.size * av.dtype.itemsize});")
        return lines + [f"        free({M});", f"        ISK_SLOTS[{slot}] = NULL;"]

    def _branches(self) -> list[str]:
        node = self.node
        if node.op is Op.CHECKPOINT:
            return self.body(node.attrs["body"].graph, self.operands, self.results, "")
        branches = node.attrs["branches"]
        index = self.operands[0]
        last = len(branches) - 1
        raw = f"{index.name}[{index.offset}]"
        lines = [f"        const int64_t {self.tag}_k = {raw} <= 0 ? 0 : {raw} >= {last} ? "
                 f"{last} : (int64_t){raw};"]
        for k, sub in enumerate(branches):
            test = "if" if k == 0 else "else if"
            lines += [f"        {test} ({self.tag}_k == {k})",
                      *self.body(sub.graph, self.operands[1:], self.results, f"k{k}")]
        return lines


def _aligned(size: int) -> int:
    return max(ALIGN, -(-size // ALIGN) * ALIGN)


# --- loop nests ---------------------------------------------------------------------------

def _strides(shape) -> list[int]:
    """C-order element strides of ``shape``."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return out[::-1]


def _nest(shape, arrays: list[tuple[list[int], int]], statement, simd: bool = False,
          inner: int = 1) -> list[str]:
    """Loops over ``shape`` (size-1 axes dropped, adjacent axes merged where
    every array's strides allow); ``arrays``: per array its element strides
    over ``shape`` and its base offset. ``statement(indices)`` gets each
    array's index expression and returns the loop body. A nest of at least
    ``POLL_WORK`` iterations reads the stop flag (``_poll_level``). ``simd``:
    the innermost loop is marked ``omp simd`` (its iterations independent).
    ``inner``: iterations each statement takes (a call of a loop), counted
    when choosing where to read the stop flag."""
    merged = _merged(shape, arrays)
    indices = []
    for k, (_, base) in enumerate(arrays):
        terms = [str(base)] if base else []
        terms += [_term(f"i{d}", strides[k]) for d, (_, strides) in enumerate(merged)
                  if strides[k]]
        indices.append(" + ".join(terms) or "0")
    sizes = [n for n, _ in merged]
    poll = _poll_level(sizes + [inner])
    if poll is not None and poll[0] == len(sizes):  # a statement alone holds more
        poll = (len(sizes) - 1, 1) if sizes else None
    if poll is None:
        return _loops(sizes, None, 1, "        ", statement(indices), simd)
    return _halting_block(_loops(sizes, *poll, "            ", statement(indices), simd))


def _loops(sizes: list[int], level: int | None, every: int, pad: str, body: str,
           simd: bool = False) -> list[str]:
    """The loops of ``_nest``; at ``level`` (and above) the loops also end
    once ``halt`` is set, which that level sets every ``every`` iterations
    when the call was stopped; a ``level`` that is the innermost loop runs
    in strips of ``POLL_WORK`` iterations, read between strips."""
    lines, ends = [], []
    for d, n in enumerate(sizes):
        last, start = d == len(sizes) - 1, "0"
        go = " && !halt" if level is not None and d <= level else ""
        if d == level and last:  # one innermost loop of more than POLL_WORK: strips of it
            lines += [f"{pad}for (int64_t i{d}s = 0; i{d}s < {n}{go}; i{d}s += {POLL_WORK}) {{",
                      *_halting(pad + "    ", f"i{d}s", 1),
                      f"{pad}    const int64_t i{d}e = i{d}s + {POLL_WORK} < {n} ? "
                      f"i{d}s + {POLL_WORK} : {n};"]
            ends.append(f"{pad}}}")
            pad += "    "
            n, start, go = f"i{d}e", f"i{d}s", ""
        elif d == level:
            lines += [f"{pad}for (int64_t i{d} = 0; i{d} < {n}{go}; i{d}++) {{",
                      *_halting(pad + "    ", f"i{d}", every)]
            ends.append(f"{pad}}}")
            pad += "    "
            continue
        if last and (not isinstance(n, int) or n >= VECTOR_LOOP):
            lines.append("#pragma omp simd" if simd else "#pragma GCC unroll 1")
        lines.append(f"{pad}for (int64_t i{d} = {start}; i{d} < {n}{go}; i{d}++)")
        pad += "    "
    return lines + [pad + body] + ends[::-1]


def _halting_block(lines: list[str]) -> list[str]:
    """``lines`` (loops that set ``halt``) in a block of their own that
    declares it, and leaves the part function once it is set: the loops
    have no exit of their own (a ``return`` inside them kept GCC from
    vectorizing a matrix product's blocks: 4x slower)."""
    return ["        {", "            uint8_t halt = 0;  /* the call was stopped */", *lines,
            "            if (halt)", "                return;", "        }"]


_POLL = "ISK_STOPPED(isk_stop_flag)"


def _poll_level(sizes: list[int]) -> tuple[int, int] | None:
    """Where a nest of ``sizes`` reads the stop flag: ``(level, every)``, the
    outermost level whose iterations hold at most ``POLL_WORK`` iterations
    of the nest, read every ``every`` (a power of two) of its iterations;
    the innermost level when it alone holds more (read between strips of
    it). None for a nest of fewer than ``POLL_WORK`` iterations."""
    if not sizes or math.prod(sizes) < POLL_WORK:
        return None
    for level in range(len(sizes)):
        inner = math.prod(sizes[level + 1:])
        if inner <= POLL_WORK and level < len(sizes) - 1:
            return level, _power_of_two(POLL_WORK // inner)
    return len(sizes) - 1, 1


def _power_of_two(n: int) -> int:
    """The largest power of two no larger than ``n`` (1 for n < 2)."""
    return 1 << max(n, 1).bit_length() - 1


def _halting(pad: str, index: str, every: int) -> list[str]:
    """The lines that set ``halt`` once the call was stopped, read when
    ``index`` is a multiple of ``every`` (``_halting_block``)."""
    test = _POLL if every == 1 else f"({index} & {every - 1}) == 0 && {_POLL}"
    return [f"{pad}if ({test})", f"{pad}    halt = 1;"]


def _term(var: str, stride: int) -> str:
    return var if stride == 1 else f"{var} * {stride}"


# --- one node -----------------------------------------------------------------------------

def _node_code(node: Node, out: str, reads: dict, blas: bool = False,
               outlined: list | None = None) -> list[str]:
    if node.op in POINTWISE:
        ins = [reads[x] for x in node.inputs]
        arrays = [(_strides(node.shape), 0)] + [(r.strides, r.offset) for r in ins]
        def statement(ix):
            expr = expression(node, [f"{r.name}[{i}]" for r, i in zip(ins, ix[1:])], host=True)
            return f"{out}[{ix[0]}] = {expr};"
        return _nest(node.shape, arrays, statement)
    if node.op is Op.RESHAPE:  # of a value read with strides: copied in C order
        return _copy(node.inputs[0].shape, out, reads[node.inputs[0]])
    if node.op in REDUCE:
        return _reduce(node, out, reads[node.inputs[0]], outlined)
    if node.op is Op.DOT_GENERAL:
        return _dot(node, out, *(reads[x] for x in node.inputs), blas)
    if node.op is Op.CONCATENATE:
        return _concatenate(node, out, reads)
    if node.op is Op.GATHER:
        return _gather(node, out, *(reads[x] for x in node.inputs))
    if node.op is Op.SCATTER:
        return _scatter(node, out, *(reads[x] for x in node.inputs))
    return _pad(node, out, reads)


def _row(index: str, n: int) -> str:
    """An index read, clamped into [0, n) as the reference's rule clamps."""
    return (f"int64_t k = (int64_t){index}; k = k < 0 ? 0 : k > {n - 1} ? {n - 1} : k;")


def _gather(node: Node, out: str, rx: _Read, ri: _Read) -> list[str]:
    """``out[p, r] = x[idx[p], r]``: one nest over the result, the index
    read at its position and the row's element at its own."""
    x, idx = node.inputs
    if x.shape[0] == 0:
        return [f"        for (int64_t k = 0; k < {node.aval.size}; k++) {out}[k] = 0;"]
    k, rest = idx.aval.ndim, x.aval.ndim - 1
    arrays = [(_strides(node.shape), 0), (list(ri.strides) + [0] * rest, ri.offset),
              ([0] * k + list(rx.strides[1:]), rx.offset)]
    return _nest(node.shape, arrays, lambda ix: (
        f"{{ {_row(f'{ri.name}[{ix[1]}]', x.shape[0])} "
        f"{out}[{ix[0]}] = {rx.name}[{ix[2]} + k * {rx.strides[0]}]; }}"))


def _scatter(node: Node, out: str, rx: _Read, ri: _Read, ru: _Read) -> list[str]:
    """``out = x``, then each update combined into its row in the indices'
    row-major order (``ufunc.at``'s order; ``set``: the last write stays),
    each combination the elementwise op's own expression."""
    x, idx, u = node.inputs
    lines = _copy(x.shape, out, rx)
    if x.shape[0] == 0 or u.aval.size == 0:
        return lines
    k, rest = idx.aval.ndim, x.aval.ndim - 1
    combine = node.attrs["combine"]
    if combine == "set":
        value = "{u}"
    else:
        op = {"add": Op.ADD, "mul": Op.MUL, "min": Op.MIN, "max": Op.MAX}[combine]
        pair = Node(op, (x, x), Attrs({}), x.aval.strong())
        value = expression(pair, ["{a}", "{u}"], host=True)
    row = math.prod(x.shape[1:])
    arrays = [(list(ru.strides), ru.offset), (list(ri.strides) + [0] * rest, ri.offset),
              ([0] * k + _strides(x.shape[1:]), 0)]

    def statement(ix):
        target = f"{out}[{ix[2]} + k * {row}]"
        update = value.replace("{a}", target).replace("{u}", f"{ru.name}[{ix[0]}]")
        return f"{{ {_row(f'{ri.name}[{ix[1]}]', x.shape[0])} {target} = {update}; }}"
    return lines + _nest(u.shape, arrays, statement)


def _source_view(node: Node, src: list) -> tuple[list[int], int]:
    """Per output axis, the element stride into the operand (whose strides
    are ``src``), and the offset."""
    x = node.inputs[0]
    if node.op is Op.BROADCAST:
        strides = [0] * len(node.shape)
        for j, d in enumerate(node.attrs["dims"]):
            strides[d] = src[j] if x.shape[j] != 1 else 0
        return strides, 0
    if node.op is Op.TRANSPOSE:
        return [src[p] for p in node.attrs["perm"]], 0
    if node.op is Op.SLICE:
        a = node.attrs
        base = sum(b * s for b, s in zip(a["start"], src))
        return [s * step for s, step in zip(src, a["stride"])], base
    axes = set(node.attrs["axes"])  # REV
    base = sum((n - 1) * s for d, (n, s) in enumerate(zip(x.shape, src)) if d in axes)
    return [-s if d in axes else s for d, s in enumerate(src)], base


def _fold(node: Node) -> tuple[str, str]:
    """(the fold's first value, the combine of ``acc`` and ``v``)."""
    dt, ctype = node.dtype, CTYPE[node.dtype]
    floating = dt in dtypes.FLOATS
    if node.op is Op.REDUCE_SUM:
        first = literal(0.0, dt) if floating else f"({ctype})0"
        return first, "{acc} + {v}" if floating else _wrapped("+", dt)
    if node.op is Op.REDUCE_PROD:
        return (literal(1.0, dt) if floating else f"({ctype})1",
                "{acc} * {v}" if floating else _wrapped("*", dt))
    pick = Op.MAX if node.op is Op.REDUCE_MAX else Op.MIN
    ctx = Ctx(dt, dt, {}, True)
    if dt == dtypes.bool_:
        start = pick is Op.MIN
    elif floating:
        start = -np.inf if pick is Op.MAX else np.inf
    else:
        start = np.iinfo(dt).min if pick is Op.MAX else np.iinfo(dt).max
    return literal(start, dt), C_EXPR[pick](ctx, "{acc}", "{v}")


def _wrapped(op: str, dt) -> str:
    if dt == dtypes.bool_:
        return "(uint8_t)({acc} " + ("|" if op == "+" else "&") + " {v})"
    u = UTYPE[dt]
    return f"({CTYPE[dt]})(({u}){{acc}} {op} ({u}){{v}})"


PAIRWISE_BLOCK = 128
PAIRWISE = """static {t} isk_pairwise_sum_{s}(const {t} *a, int64_t n, int64_t step)
{{  /* NumPy's pairwise summation (loops_utils.h.src), the same order and roundings */
    if (n < 8) {{
        {t} res = -0.0;
        for (int64_t i = 0; i < n; i++)
            res = res + a[i * step];
        return res;
    }}
    if (n <= {block}) {{
        {t} r[8];
        for (int j = 0; j < 8; j++)
            r[j] = a[j * step];
        int64_t i = 8;
        if (step == 1)  /* the same sums, written so that they vectorize */
            for (; i < n - n % 8; i += 8)
                for (int j = 0; j < 8; j++)
                    r[j] = r[j] + a[i + j];
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++)
                r[j] = r[j] + a[(i + j) * step];
        {t} res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res = res + a[i * step];
        return res;
    }}
    int64_t half = n / 2;
    half -= half % 8;
    return isk_pairwise_sum_{s}(a, half, step) +
           isk_pairwise_sum_{s}(a + half * step, n - half, step);
}}
"""
"""NumPy's pairwise sum in C, per float type (``_pairwise_run``)."""


PAIRWISE_DOT = """static {t} isk_pairwise_dot_{s}(const {t} *a, const {t} *b, int64_t n)
{{  /* isk_pairwise_sum_{s} of the products a[i] * b[i], each rounded once */
    if (n < 8) {{
        {t} res = -0.0;
        for (int64_t i = 0; i < n; i++)
            res = res + a[i] * b[i];
        return res;
    }}
    if (n <= {block}) {{
        {t} r[8];
        for (int j = 0; j < 8; j++)
            r[j] = a[j] * b[j];
        int64_t i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++)
                r[j] = r[j] + a[i + j] * b[i + j];
        {t} res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res = res + a[i] * b[i];
        return res;
    }}
    int64_t half = n / 2;
    half -= half % 8;
    return isk_pairwise_dot_{s}(a, b, half) + isk_pairwise_dot_{s}(a + half, b + half, n - half);
}}
"""
"""NumPy's pairwise sum of the products ``a[i] * b[i]`` (contiguous), each
product rounded once as a stored product is: ``_dot_sums``."""

PARALLEL_MIN = 1 << 18
SPLIT_ALIGN = 64
"""Slices of a split run start at multiples of this many elements (a
multiple of every vector length), so each element takes the same vector
or scalar path through libmvec as in the unsplit loop."""
"""A fused run of at least this many elements, read and written along one
merged axis, runs split over the program's workers (``PARALLEL``): each
element is computed alone, so the bits do not depend on the split."""
PARALLEL = """#include <pthread.h>
static const int isk_workers = {workers};  /* the executable's worker count */
typedef struct {{
    void (*fn)(const void *, int64_t, int64_t);
    const void *ctx;
    int64_t begin, end;
    const int32_t *stop;
    int fpe;
}} isk_task;
static void *isk_task_main(void *p)
{{
    isk_task *t = (isk_task *)p;
    isk_stop_flag = t->stop;
    feclearexcept(FE_ALL_EXCEPT);
    t->fn(t->ctx, t->begin, t->end);
    t->fpe = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    return NULL;
}}
/* fn over [0, n) in isk_workers nearly equal slices, each starting at a
   multiple of `align`: the first on this thread, the others on threads of
   their own (joined here); their floating-point flags are raised here too.
   A thread that cannot start leaves its slice to this one. */
static void isk_split(void (*fn)(const void *, int64_t, int64_t), const void *ctx, int64_t n,
                      int64_t align)
{{
    const int k = isk_workers;
    if (k < 2)
        {{ fn(ctx, 0, n); return; }}
    isk_task tasks[64];
    pthread_t threads[64];
    int started[64] = {{0}};
    for (int w = 0; w < k; w++) {{
        const int64_t begin = w == 0 ? 0 : n * w / k / align * align;
        const int64_t end = w == k - 1 ? n : n * (w + 1) / k / align * align;
        tasks[w] = (isk_task){{fn, ctx, begin, end, isk_stop_flag, 0}};
        if (w > 0)
            started[w] = pthread_create(&threads[w], NULL, isk_task_main, &tasks[w]) == 0;
    }}
    fn(ctx, tasks[0].begin, tasks[0].end);
    for (int w = 1; w < k; w++) {{
        if (started[w]) {{
            pthread_join(threads[w], NULL);
            feraiseexcept(tasks[w].fpe);
        }} else {{
            fn(ctx, tasks[w].begin, tasks[w].end);
        }}
    }}
}}
/* the same over a fused run of at least {minimum} elements (else on this
   thread), cut at multiples of {align} elements: every slice but the last
   runs whole vectors, and the last ends where the unsplit loop ends, so the
   vector and scalar math calls fall on the same elements for any split */
static void isk_parallel(void (*fn)(const void *, int64_t, int64_t), const void *ctx, int64_t n)
{{
    if (n < {minimum})
        {{ fn(ctx, 0, n); return; }}
    isk_split(fn, ctx, n, {align});
}}
"""

PAIRWISE_SPLIT = """typedef struct {{
    const {t} *a;
    int64_t step;
    const int64_t *off, *len;
    {t} *sums;
}} isk_psum_{s}_ctx;
static void isk_psum_{s}_leaves(const void *p, int64_t begin, int64_t end)
{{
    const isk_psum_{s}_ctx *c = (const isk_psum_{s}_ctx *)p;
    for (int64_t j = begin; j < end; j++)
        c->sums[j] = isk_pairwise_sum_{s}(c->a + c->off[j] * c->step, c->len[j], c->step);
}}
/* isk_pairwise_sum_{s} with the top levels of its recursion split over the
   workers: the subtrees it would recurse into, each summed on a thread by
   the same function, then added back pairwise in its order: its bits. */
static {t} isk_pairwise_sum_split_{s}(const {t} *a, int64_t n, int64_t step)
{{
    int depth = 0;
    while (depth < 6 && (2 << depth) <= isk_workers)
        depth++;
    if (depth == 0 || n < ((int64_t){block} << (depth + 2)))
        return isk_pairwise_sum_{s}(a, n, step);
    int64_t off[64] = {{0}}, len[64] = {{n}};
    for (int d = 0; d < depth; d++)  /* every leaf split where the recursion splits it */
        for (int j = (1 << d) - 1; j >= 0; j--) {{
            const int64_t o = off[j], l = len[j];
            int64_t half = l / 2;
            half -= half % 8;
            off[2 * j] = o;
            len[2 * j] = half;
            off[2 * j + 1] = o + half;
            len[2 * j + 1] = l - half;
        }}
    {t} sums[64];
    const isk_psum_{s}_ctx c = {{a, step, off, len, sums}};
    isk_split(isk_psum_{s}_leaves, &c, (int64_t)1 << depth, 1);
    for (int d = depth; d > 0; d--)
        for (int j = 0; j < (1 << (d - 1)); j++)
            sums[j] = sums[2 * j] + sums[2 * j + 1];
    return sums[0];
}}
"""
"""A long single pairwise sum split over the workers (``_reduce``)."""
SPLIT_SUM_MIN = 1 << 18
"""A sum with one output over at least this many elements splits its
pairwise recursion over the workers (``PAIRWISE_SPLIT``)."""


def pairwise_helpers(text: str) -> list[str]:
    """The pairwise-sum helpers ``text`` calls."""
    return [PAIRWISE.format(t=CTYPE[dt], s=str(dt), block=PAIRWISE_BLOCK)
            for dt in (dtypes.float32, dtypes.float64) if f"isk_pairwise_sum_{dt}(" in text
            or f"isk_pairwise_sum_split_{dt}(" in text] + [
        PAIRWISE_DOT.format(t=CTYPE[dt], s=str(dt), block=PAIRWISE_BLOCK)
        for dt in (dtypes.float32, dtypes.float64) if f"isk_pairwise_dot_{dt}(" in text]


def split_sum_helpers(text: str) -> list[str]:
    """The split pairwise sums ``text`` calls (after ``PARALLEL``)."""
    return [PAIRWISE_SPLIT.format(t=CTYPE[dt], s=str(dt), block=PAIRWISE_BLOCK)
            for dt in (dtypes.float32, dtypes.float64)
            if f"isk_pairwise_sum_split_{dt}(" in text]


def _pairwise_run(node: Node, x: _Read) -> tuple[int, int] | None:
    """``(n, step)`` where ``node`` is a float sum whose reduced axes are the
    trailing ones and are read as one strided run of ``n`` elements per
    output (their strides merge); else None. Such a sum is NumPy's pairwise
    sum of that run added to ``+0.0``: the bits of ``np.sum`` on a
    C-contiguous operand."""
    shape, axes = node.inputs[0].shape, sorted(node.attrs["axes"])
    if node.op is not Op.REDUCE_SUM or node.dtype not in dtypes.FLOATS or not axes:
        return None
    if axes != list(range(len(shape) - len(axes), len(shape))):
        return None
    n, step = 1, None
    for d in reversed(axes):
        if shape[d] == 1:
            continue
        if step is not None and x.strides[d] != step * n:
            return None
        step = x.strides[d] if step is None else step
        n *= shape[d]
    return n, step if step is not None else 1


def pairwise_form(node: Node) -> bool:
    """Whether ``node`` is a float sum over trailing axes of a value read
    in C order (through reshapes only): its emitted form is NumPy's pairwise
    sum (``_pairwise_run``, vectorized, split over the workers for one
    output), as fast as NumPy's at any size."""
    if node.op is not Op.REDUCE_SUM or node.dtype not in dtypes.FLOATS:
        return False
    shape, axes = node.inputs[0].shape, sorted(node.attrs["axes"])
    if not axes or axes != list(range(len(shape) - len(axes), len(shape))):
        return False
    x = node.inputs[0]
    while x.op is Op.RESHAPE:
        x = x.inputs[0]
    return x.op not in COPIES


def _reduce(node: Node, out: str, x: _Read, outlined: list | None = None) -> list[str]:
    """Each output starts at the fold's first value; the operand is then
    walked in its row-major order (each output's elements in order). A float
    sum over trailing axes read as one run per output is NumPy's pairwise
    sum of the run instead (``_pairwise_run``): a long one split over the
    workers (``PAIRWISE_SPLIT``), and many of them, at least ``PARALLEL_MIN``
    elements in all, shared out among the workers by outputs."""
    shape = node.inputs[0].shape
    axes = set(node.attrs["axes"])
    run = _pairwise_run(node, x)
    if run is not None:
        n, step = run
        zero = literal(0.0, node.dtype)
        outer = [d for d in range(len(shape)) if d not in axes]
        if node.aval.size == 1 and n >= SPLIT_SUM_MIN:
            return [f"        {out}[0] = {zero} + isk_pairwise_sum_split_{node.dtype}("
                    f"{x.name} + {x.offset}, {n}, {step});"]
        sizes = [shape[d] for d in outer]
        flat = _flat(sizes, [(_strides(sizes), 0), ([x.strides[d] for d in outer], x.offset)])
        if outlined is not None and flat is not None and node.aval.size > 1 and \
                node.inputs[0].aval.size >= PARALLEL_MIN:
            return _outlined_sums(node, out, x, n, step, flat, outlined)
        return _nest([shape[d] for d in outer],
                     [(_strides([shape[d] for d in outer]), 0),
                      ([x.strides[d] for d in outer], x.offset)],
                     lambda ix: f"{out}[{ix[0]}] = {zero} + isk_pairwise_sum_{node.dtype}("
                                f"{x.name} + {ix[1]}, {n}, {step});", inner=n)
    first, combine = _fold(node)
    lines = [f"        for (int64_t k = 0; k < {node.aval.size}; k++) {out}[k] = {first};"]
    kept = iter(_strides(node.shape))
    out_strides = [0 if d in axes else next(kept) for d in range(len(shape))]
    return lines + _nest(shape, [(out_strides, 0), (x.strides, x.offset)],
                         lambda ix: f"{out}[{ix[0]}] = " + combine.format(
                             acc=f"{out}[{ix[0]}]", v=f"{x.name}[{ix[1]}]") + ";")


def _outlined_sums(node: Node, out: str, x: _Read, n: int, step: int, flat: list,
                   outlined: list) -> list[str]:
    """Pairwise sums of many outputs as a function of their own, the outputs
    shared out among the workers: each is summed alone, so the bits are the
    same for any split."""
    name, t = f"isk_run{len(outlined)}", CTYPE[node.dtype]
    (ostep, obase), (xstep, xbase) = flat
    outlined.append("\n".join([
        f"struct {name}_ctx {{ const {t} *x; {t} *o; }};",
        f"static void {name}(const void *context, int64_t begin, int64_t end)",
        "{",
        f"    const struct {name}_ctx *c = (const struct {name}_ctx *)context;",
        "    for (int64_t i0 = begin; i0 < end; i0++)",
        f"        c->o[{obase} + {_term('i0', ostep)}] = {literal(0.0, node.dtype)} + "
        f"isk_pairwise_sum_{node.dtype}(c->x + {xbase} + {_term('i0', xstep)}, {n}, {step});",
        "}"]))
    return [f"        const struct {name}_ctx context = {{ {x.name}, {out} }};",
            f"        isk_split({name}, &context, {node.aval.size}, 1);",
            "        if (ISK_STOPPED(isk_stop_flag))",
            "            return;"]


def _dot(node: Node, out: str, ra: _Read, rb: _Read, blas: bool = False) -> list[str]:
    """Loops: batch, the lhs's free axes, the contracting axes, the rhs's
    free axes (innermost: contiguous in the output)."""
    a, b = node.inputs
    (ca, cb), (ba, bb) = node.attrs["contracting"], node.attrs["batch"]
    fa = [i for i in range(len(a.shape)) if i not in ca and i not in ba]
    fb = [i for i in range(len(b.shape)) if i not in cb and i not in bb]
    call = blas and _gemm(node, out, ra, rb)
    if call:
        return call
    lines = []
    if fb and rb.strides[fb[-1]] != 1 and b.aval.size <= MAX_STACK:
        lines, rb = _contiguous_rhs(b, rb, [*bb, *cb, *fb])
    sa, sb = ra.strides, rb.strides
    so = iter(_strides(node.shape))
    axes = []  # (size, out stride, a stride, b stride)
    axes += [(a.shape[i], next(so), sa[i], sb[j]) for i, j in zip(ba, bb)]
    axes += [(a.shape[i], next(so), sa[i], 0) for i in fa]
    contract = [(a.shape[i], 0, sa[i], sb[j]) for i, j in zip(ca, cb)]
    axes += contract + [(b.shape[j], next(so), 0, sb[j]) for j in fb]
    dt = node.dtype
    zero = literal(0.0, dt) if dt in dtypes.FLOATS else f"({CTYPE[dt]})0"
    tiled = _matrix_product([ax for ax in axes if ax[0] != 1])
    if tiled is not None and dt in dtypes.FLOATS:
        return lines + _tiled_product(out, ra, rb, CTYPE[dt], zero, *tiled)
    add = "{acc} + {a} * {b}" if dt in dtypes.FLOATS else _dot_wrapped(dt)
    lines.append(f"        for (int64_t k = 0; k < {node.aval.size}; k++) {out}[k] = {zero};")
    shape = [n for n, *_ in axes]
    arrays = [([ax[1 + i] for ax in axes], base)
              for i, base in enumerate((0, ra.offset, rb.offset))]
    return lines + _nest(shape, arrays, lambda ix: f"{out}[{ix[0]}] = " + add.format(
        acc=f"{out}[{ix[0]}]", a=f"{ra.name}[{ix[1]}]", b=f"{rb.name}[{ix[2]}]") + ";")


def gemm_form(node: Node, ra: _Read | None = None, rb: _Read | None = None) -> tuple | None:
    """``(m, n, k, trans_a, lda, trans_b, ldb)`` where ``node`` is a float
    ``dot_general`` of at least ``BLAS_MIN`` products that is one ``M x K``
    by ``K x N`` product (size-1 axes aside, no batch) of operands read with
    a unit stride along one axis each, into a contiguous output; else None.
    ``ra``, ``rb``: how the operands are read (default: C order)."""
    a, b = node.inputs
    (ca, cb), (ba, bb) = node.attrs["contracting"], node.attrs["batch"]
    if node.op is not Op.DOT_GENERAL or node.dtype not in (dtypes.float32, dtypes.float64):
        return None
    if iterations(node) < BLAS_MIN:
        return None
    sa = ra.strides if ra is not None else _strides(a.shape)
    sb = rb.strides if rb is not None else _strides(b.shape)
    fa = [i for i in range(len(a.shape)) if i not in ca and i not in ba and a.shape[i] != 1]
    fb = [i for i in range(len(b.shape)) if i not in cb and i not in bb and b.shape[i] != 1]
    pairs = [(i, j) for i, j in zip(ca, cb) if a.shape[i] != 1]
    if any(a.shape[i] != 1 for i in ba) or len(fa) != 1 or len(fb) != 1 or len(pairs) != 1:
        return None
    (i, j), m, n = pairs[0], a.shape[fa[0]], b.shape[fb[0]]
    k = a.shape[i]
    am, ak, bk, bn = sa[fa[0]], sa[i], sb[j], sb[fb[0]]
    if ak == 1 and am >= k:
        trans_a, lda = 111, am  # CblasNoTrans, a row-major M x K
    elif am == 1 and ak >= m:
        trans_a, lda = 112, ak  # CblasTrans: a stored as K x M
    else:
        return None
    if bn == 1 and bk >= n:
        trans_b, ldb = 111, bk
    elif bk == 1 and bn >= k:
        trans_b, ldb = 112, bn
    else:
        return None
    return m, n, k, trans_a, lda, trans_b, ldb


def _gemm(node: Node, out: str, ra: _Read, rb: _Read) -> list[str] | None:
    """The vendor BLAS call of a large matrix product (``gemm_form``), its
    result written row-major into ``out``; None where it does not apply. The
    output's axes are the lhs's free axis then the rhs's (``dot_general``),
    so ``out`` is the ``M x N`` row-major matrix whatever the size-1 axes."""
    form = gemm_form(node, ra, rb)
    if form is None:
        return None
    m, n, k, trans_a, lda, trans_b, ldb = form
    fn, one, zero = (("isk_dgemm", "1.0", "0.0") if node.dtype == dtypes.float64
                     else ("isk_sgemm", "1.0f", "0.0f"))
    rows = max(1, min(m, GEMM_BLOCK // (n * k)))  # calls of at most GEMM_BLOCK products
    row = lda if trans_a == 111 else 1  # the next row of op(a): a row of a, or a column
    return ["        /* the vendor BLAS (CblasRowMajor), in row blocks between which a stop",
            "           of the call is seen */",
            f"        for (int64_t i = 0; i < {m}; i += {rows}) {{",
            "            if (ISK_STOPPED(isk_stop_flag))",
            "                return;",
            f"            const int rows = {m} - i < {rows} ? (int)({m} - i) : {rows};",
            f"            {fn}(101, {trans_a}, {trans_b}, rows, {n}, {k}, {one}, "
            f"{ra.name} + {ra.offset} + i * {row}, {lda}, {rb.name} + {rb.offset}, {ldb}, "
            f"{zero}, {out} + i * {n}, {n});",
            "        }"]


def _matrix_product(axes: list) -> tuple | None:
    """``(M, K, N, a's row stride, a's k stride, b's k stride)`` when the
    product (size-1 axes aside) is one ``M x K`` by ``K x N`` product into a
    contiguous ``M x N`` output with ``b``'s rows contiguous; else None."""
    if len(axes) != 3:
        return None
    (m, om, am, bm), (k, ok, ak, bk), (n, on, an, bn) = axes
    if (om, on, bm, ok, an, bn) != (n, 1, 0, 0, 0, 1) or m < TILE_M or n < TILED_COLUMNS:
        return None
    return m, k, n, am, ak, bk


def _tiled_product(out: str, ra: _Read, rb: _Read, ctype: str, zero: str, m, k, n, am, ak,
                   bk) -> list:
    """A ``TILE_M x TILE_N`` block of the output at a time, its sums held in
    local arrays (registers) over the whole ``k`` loop, then stored: each
    output still sums its products one at a time in ``k`` order, the same
    bits as the plain nest, with each ``b`` row read once per block."""
    mt, nt = m - m % TILE_M, n - n % TILE_N
    a = f"{ra.name}[{ra.offset} + (i + r) * {am} + p * {ak}]"
    b = f"{rb.name}[{rb.offset} + p * {bk} + j + c]"
    pad = "        "
    blocks, rows, rest, go = [], [], [], ""
    polls = m * n * k >= POLL_WORK  # then read every POLL_WORK products or fewer
    if polls:
        pad, go = "            ", " && !halt"
        every = _power_of_two(POLL_WORK // (TILE_M * TILE_N * k))
        blocks = _halting(pad + "        ", "j", TILE_N * every)
        rows = _halting(pad + "    ", "i", _power_of_two(POLL_WORK // max(1, (n - nt) * k)))
        rest = _halting(pad + "        ", "j", _power_of_two(POLL_WORK // k))
    lines = [
        f"{pad}for (int64_t i = 0; i < {mt}{go}; i += {TILE_M})",
        f"{pad}    for (int64_t j = 0; j < {nt}{go}; j += {TILE_N}) {{",
        *blocks,
        f"{pad}        {ctype} s[{TILE_M}][{TILE_N}];",
        f"{pad}        for (int r = 0; r < {TILE_M}; r++)",
        f"{pad}            for (int c = 0; c < {TILE_N}; c++) s[r][c] = {zero};",
        f"{pad}        for (int64_t p = 0; p < {k}; p++)",
        f"{pad}            for (int r = 0; r < {TILE_M}; r++)",
        f"{pad}                for (int c = 0; c < {TILE_N}; c++)",
        f"{pad}                    s[r][c] = s[r][c] + {a} * {b};",
        f"{pad}        for (int r = 0; r < {TILE_M}; r++)",
        f"{pad}            for (int c = 0; c < {TILE_N}; c++) {out}[(i + r) * {n} + j + c] = "
        f"s[r][c];",
        f"{pad}    }}",
        f"{pad}for (int64_t i = 0; i < {m}{go}; i++) {{",  # the rows and columns beyond the blocks
        *rows,
        f"{pad}    for (int64_t j = i < {mt} ? {nt} : 0; j < {n}{go}; j++) {{",
        *rest,
        f"{pad}        {ctype} t = {zero};",
        f"{pad}        for (int64_t p = 0; p < {k}; p++) t = t + "
        f"{a.replace('(i + r)', 'i')} * {b.replace('j + c', 'j')};",
        f"{pad}        {out}[i * {n} + j] = t;",
        f"{pad}    }}",
        f"{pad}}}"]
    return _halting_block(lines) if polls else lines


def _contiguous_rhs(b: Node, rb: _Read, order: list) -> tuple[list[str], _Read]:
    """A copy of the rhs on the stack with its axes in ``order`` (batch,
    contracting, free: the innermost loop then reads it with stride 1)."""
    shape = [b.shape[d] for d in order]
    packed = _strides(shape)
    strides = [0] * len(b.shape)
    for d, s in zip(order, packed):
        strides[d] = s
    lines = [f"        {CTYPE[b.dtype]} rt[{max(1, b.aval.size)}];"]
    lines += _nest(shape, [(packed, 0), ([rb.strides[d] for d in order], rb.offset)],
                   lambda ix: f"rt[{ix[0]}] = {rb.name}[{ix[1]}];")
    return lines, _Read("rt", strides, 0)


def _dot_wrapped(dt) -> str:
    if dt == dtypes.bool_:
        return "(uint8_t)({acc} | ({a} & {b}))"
    u = UTYPE[dt]
    return f"({CTYPE[dt]})(({u}){{acc}} + ({u}){{a}} * ({u}){{b}})"


def _concatenate(node: Node, out: str, reads: dict) -> list[str]:
    axis = node.attrs["axis"]
    so = _strides(node.shape)
    lines, at = [], 0
    for x in node.inputs:
        r = reads[x]
        lines += _nest(x.shape, [(so, at * so[axis]), (r.strides, r.offset)],
                       lambda ix, r=r: f"{out}[{ix[0]}] = {r.name}[{ix[1]}];")
        at += x.shape[axis]
    return lines


def _pad(node: Node, out: str, reads: dict) -> list[str]:
    """The padding value, then the operand copied in. Without interior
    padding the value goes to the edges only (``_edges``)."""
    x, value = node.inputs
    a, rx, rv = node.attrs, reads[x], reads[value]
    so = _strides(node.shape)
    if any(a["interior"]) or x.aval.size == 0:
        lines = [f"        for (int64_t k = 0; k < {node.aval.size}; k++) "
                 f"{out}[k] = {rv.name}[{rv.offset}];"]
    else:
        lines = _edges(node, out, f"{rv.name}[{rv.offset}]")
    strides = [s * (i + 1) for s, i in zip(so, a["interior"])]
    base = sum(lo * s for lo, s in zip(a["lo"], so))
    return lines + _nest(x.shape, [(strides, base), (rx.strides, rx.offset)],
                         lambda ix: f"{out}[{ix[0]}] = {rx.name}[{ix[1]}];")
