"""CUDA wrappers around the one C body: the megakernel's region kernels, the
eager strategy's one-op kernels and the deterministic reductions.

Every kernel is CUDA C++ for NVRTC, produced without a GPU:

- a *region kernel* calls the SSA body ``emit_body`` makes for a row region
  (the very function the CPU host wrapper calls) from a grid-stride loop
  with 64-bit indices and ``__restrict__`` pointers;
- an *elementwise kernel* is the same emitter run on a one-op graph, so the
  eager strategy evaluates each node with the expression the megakernel
  inlines: fusion changes where a value lives, never the arithmetic;
- the *reduction kernels* combine with the same ``C_EXPR`` rules, in the
  order ``reduce.py`` fixes (NumPy's, for contiguous operands).

Compile options are part of the source's header and of every cache key:
contraction off (``--fmad=false``) unless ``contract=True``; IEEE division
and square root and preserved subnormals always (no fast-math, no
flush-to-zero).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..ir import Attrs, Aval, Graph, Literal, Node, Op, dtypes
from ..ir.graph import subgraphs
from ..ir.ops import ELEMENTWISE
from .c_expr import C_EXPR, CTYPE, HELPERS, REDUCE_IDENTITY, SHORT, Ctx, helper_for, literal
from .emit import CBody, emit_body, prelude, supports
from .pixel import ROWS, WHOLE, Outside, Partition, RowRegion, partition

BASE_OPTIONS = ("--std=c++17", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")
FMAD = {False: "--fmad=false", True: "--fmad=true"}

PRELUDE = """\
#define ISK_INLINE static __device__ __forceinline__
#define restrict __restrict__
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned char uint8_t;
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_C(c) c##LL
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
"""
"""What the C body takes from <stdint.h> and the host wrapper's defines:
NVRTC has no C library headers, and the body's math functions are CUDA's
own device functions of the same names (libdevice)."""

HEADER = """\
/* isokernel CUDA kernels {kernels} -- generated, do not edit.
 * {what}; compile with NVRTC {options}
 * (no fast-math: IEEE division and square root, subnormals preserved). */
"""


def nvrtc_options(contract: bool = False) -> tuple[str, ...]:
    """The NVRTC options every isokernel kernel is compiled with."""
    return (*BASE_OPTIONS, FMAD[bool(contract)])


def _header(kernels, what: str, contract: bool) -> str:
    return HEADER.format(kernels=", ".join(kernels) or "(none)", what=what,
                         options=" ".join(nvrtc_options(contract)))


def grid_stride(rows: str = "rows") -> str:
    """The loop head every elementwise-style kernel uses: 64-bit indices."""
    return (f"    const int64_t step = (int64_t)blockDim.x * gridDim.x;\n"
            f"    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < {rows};"
            f" i += step)\n")


# --- region kernels: the megakernel -------------------------------------------------------

@dataclass(frozen=True)
class RegionKernel:
    """One ``__global__`` kernel: its name, the body it calls and the region
    it computes. Arguments: row inputs, whole inputs, outputs, row count."""

    name: str
    body: CBody
    region: RowRegion

    @property
    def arity(self) -> int:
        return len(self.body.row_inputs) + len(self.body.whole_inputs) + len(self.body.outputs)


@dataclass(frozen=True)
class RunKernel:
    """A run of elementwise ops outside the regions (one shape; operands of
    that shape, or scalars broadcast) as one kernel over the flattened
    elements: the body computes ``nodes``, reads ``inputs`` (graph values,
    passed contiguous and flat, in the kernel's order: row inputs, then
    whole ones) and writes ``outputs`` (graph values, in the body's order)."""

    kernel: RegionKernel
    nodes: tuple[Node, ...]
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    size: int


@dataclass(frozen=True)
class GraphProgram:
    """How one graph (the top level, or a control-flow body at any depth)
    runs: its partition, and its steps in run order: a ``RegionKernel``, a
    ``RunKernel``, or a node the executor runs as a library operation
    (control flow among them, whose bodies have programs of their own)."""

    graph: Graph
    partition: Partition
    steps: tuple


@dataclass(frozen=True)
class CudaModule:
    """The CUDA source of a graph's programs: the row regions and runs of
    elementwise ops of the graph and of every control-flow body it holds,
    all in one translation unit; ``programs[0]`` is the graph's own, and the
    stages between kernels run as library operations."""

    source: str
    kernels: tuple[RegionKernel, ...]
    partition: Partition
    contract: bool
    options: tuple[str, ...] = field(default=())
    programs: tuple[GraphProgram, ...] = field(default=())


def _pointer_params(body: CBody) -> list[str]:
    params = []
    groups = (("in", body.row_inputs, "const "), ("w", body.whole_inputs, "const "),
              ("out", body.outputs, ""))
    for tag, nodes, qualifier in groups:
        params += [f"{qualifier}{CTYPE[n.dtype]} *restrict {tag}{k}" for k, n in enumerate(nodes)]
    return params


def region_wrapper(body: CBody, kernel: str) -> str:
    """``kernel(<pointers>, rows)``: the body for every row, grid-stride."""
    params = _pointer_params(body)
    names = [p.rsplit(" ", 1)[1] for p in params]
    return (f'extern "C" __global__ void {kernel}({", ".join(params)}, const int64_t rows)\n'
            f"{{\n{grid_stride()}"
            f"        {body.name}(i, {', '.join(names)});\n}}\n")


def body_source(body: CBody, kernel: str, what: str, contract: bool = False) -> str:
    """One body (emitted, or built from statements by hand) in its region
    wrapper ``kernel``, as a translation unit for NVRTC."""
    parts = [_header([kernel], what, contract), PRELUDE, "\n", prelude(body.helpers),
             device_data(body.data), body.function, "\n", region_wrapper(body, kernel)]
    return record("".join(parts))


def _stem(graph: Graph) -> str:
    return re.sub(r"\W", "_", graph.name) or "f"


def _outside_lines(lines: list[str]) -> str:
    """A comment naming what runs between the kernels, as library operations
    (each line: the body, the node's number in it, its op and source line)."""
    if not lines:
        return ""
    return "// between the kernels, as library operations (not in this file):\n" + \
        "\n".join(lines) + "\n\n"


def region_partition(graph: Graph) -> Partition:
    """The partition of ``graph`` into row regions the C emitter accepts
    (one kernel each) and the nodes that run between them."""
    return partition(graph, accept=supports)


def cuda_module(graph: Graph, contract: bool = False,
                part: Partition | None = None) -> CudaModule:
    """The megakernel's translation unit for ``graph``: a program for the
    graph and for every control-flow body that runs between its kernels, at
    any depth (``GraphProgram``): one kernel per row region of each
    partition (the top level's is ``part``, default
    ``region_partition(graph)``) and one per run of elementwise ops between
    them (``elementwise_runs``); a region of elementwise ops whose rows hold
    several elements runs as a run, one thread per element (``_flat``). A
    loop runs on the host around its body's launches. The graph runs as
    given: nothing fuses named forms first, and a ``fused`` node (which only
    ``cuda-fused`` makes) runs between the kernels."""
    stem = _stem(graph)
    programs: list[GraphProgram] = []
    kernels: list[RegionKernel] = []
    outside: list[str] = []
    pending = [(graph, region_partition(graph) if part is None else part, "")]
    seen = {id(graph)}
    while pending:
        g, p, tag = pending.pop(0)
        steps = []
        for k, stage in enumerate(p.stages):
            if isinstance(stage, RowRegion) and _flat(stage):
                steps.append(_run_kernel(f"isk_{stem}{tag}_r{k}", g, list(stage.nodes)))
                continue
            if isinstance(stage, RowRegion):
                body = emit_body(f"isk_{stem}{tag}_r{k}_point", stage, g.index, stage.modes,
                                 lanes=False)
                steps.append(RegionKernel(f"isk_{stem}{tag}_r{k}", body, stage))
                continue
            for j, step in enumerate(elementwise_runs(g, stage)):
                if isinstance(step, Node):
                    steps.append(step)
                    where = f" @ {step.where}" if step.where else ""
                    outside.append(f"//   {tag[1:]}{' ' if tag else ''}%{g.index(step)} "
                                   f"{step.op.value}{where}")
                    for name, sub in subgraphs(step):
                        if id(sub.graph) in seen:
                            continue
                        seen.add(id(sub.graph))
                        pending.append((sub.graph, region_partition(sub.graph),
                                        f"{tag}_n{g.index(step)}{_attr_tag(name)}"))
                else:
                    steps.append(_run_kernel(f"isk_{stem}{tag}_s{k}_e{j}", g, step))
        programs.append(GraphProgram(g, p, tuple(steps)))
        kernels += [s.kernel if isinstance(s, RunKernel) else s for s in steps
                    if not isinstance(s, Node)]
    parts = [_header([k.name for k in kernels], f"Graph {graph.name}", contract), PRELUDE,
             "\n", _outside_lines(outside), prelude([h for k in kernels for h in k.body.helpers]),
             device_data(d for k in kernels for d in k.body.data)]
    for kernel in kernels:
        parts += [kernel.body.function, "\n", region_wrapper(kernel.body, kernel.name), "\n"]
    source = record("".join(parts).rstrip("\n") + "\n")
    return CudaModule(source, tuple(kernels), programs[0].partition, bool(contract),
                      nvrtc_options(contract), tuple(programs))


def _attr_tag(name: str) -> str:
    """A body's attribute name as part of a C identifier (``branches[1]``: ``branches1``)."""
    return "_" + re.sub(r"\W", "", name)


# --- runs of elementwise ops between the regions -------------------------------------------

RUN_MIN_OPS = 2
"""A run computes at least this many ops (scalar broadcasts not counted);
a lone op runs as the eager kernel of its op, which is the same kernel."""


def _run_member(node: Node) -> bool:
    """Whether ``node`` can join a run: an elementwise op of more than one
    element whose operands all have its shape, or a broadcast of a scalar,
    that the emitter can write."""
    if node.several or math.prod(node.shape) < 2 or node.dtype in dtypes.COMPLEX:
        return False
    if node.op is Op.BROADCAST:
        return node.inputs[0].aval.ndim == 0
    return (node.op in ELEMENTWISE and all(x.shape == node.shape for x in node.inputs)
            and supports(node, (ROWS,) * len(node.inputs)))


def elementwise_runs(graph: Graph, stage: Outside) -> list:
    """The nodes of ``stage`` in run order, each run of elementwise ops of
    one shape gathered into a list: a run stays open while no other node
    reads its values, takes every later elementwise node of its shape, and
    is placed where it closes (before the first other node that reads it,
    or at the stage's end), after every operand of its nodes. A run of
    fewer than ``RUN_MIN_OPS`` ops gives its nodes back one by one."""
    steps: list = []
    open_runs: dict[tuple, list[Node]] = {}
    run_of: dict[Node, list[Node]] = {}

    def close(run: list[Node]) -> None:
        del open_runs[run[0].shape]
        counted = sum(n.op is not Op.BROADCAST for n in run)
        steps.extend([run] if counted >= RUN_MIN_OPS else run)

    for node in stage.nodes:
        joins = _run_member(node)
        for x in node.inputs:
            run = run_of.get(x)
            if run is not None and open_runs.get(run[0].shape) is run and not (
                    joins and x.shape == node.shape):
                close(run)
        if not joins:
            steps.append(node)
            continue
        run = open_runs.setdefault(node.shape, [])
        run.append(node)
        run_of[node] = run
    for run in list(open_runs.values()):
        close(run)
    return steps


def _flat(region: RowRegion) -> bool:
    """Whether ``region`` runs better as a run over its elements: rows of
    several elements, every node elementwise on operands of its own shape
    (or a broadcast scalar), so one thread per element does the same
    arithmetic with more threads."""
    if not all(_run_member(n) for n in region.nodes):
        return False
    shapes = {n.shape for n in region.nodes}
    return len(shapes) == 1 and math.prod(next(iter(shapes))[1:]) > 1


def _run_kernel(name: str, graph: Graph, run: list[Node]) -> RunKernel:
    """The kernel of one run: its nodes over the flattened elements, values
    from outside read as flat rows (or whole, for broadcast scalars), every
    node that a later step or the caller reads written out."""
    size = math.prod(run[0].shape)
    members = set(run)
    new: dict[Node, Node] = {}
    row_inputs: dict[Node, Node] = {}
    whole_inputs: dict[Node, Node] = {}
    modes = {}
    for node in run:
        operands = []
        for x in node.inputs:
            if x in members:
                operands.append(new[x])
                continue
            found = whole_inputs if x.aval.ndim == 0 else row_inputs
            if x not in found:
                aval = Aval(() if x.aval.ndim == 0 else (size,), x.dtype, x.aval.weak)
                found[x] = _input(aval, len(row_inputs) + len(whole_inputs))
            operands.append(found[x])
        attrs = Attrs({"shape": (size,), "dims": ()}) if node.op is Op.BROADCAST else node.attrs
        new[node] = Node(node.op, tuple(operands), attrs,
                         Aval((size,), node.dtype, node.aval.weak), node.where)
        modes[new[node]] = (WHOLE,) if node.op is Op.BROADCAST else (ROWS,) * len(operands)
    read_later = _read_outside(graph, members)
    outputs = tuple(n for n in run if n in read_later)
    region = RowRegion(tuple(new[n] for n in run), modes, tuple(row_inputs.values()),
                       tuple(whole_inputs.values()), tuple(new[n] for n in outputs))
    numbers = {n: i for i, n in enumerate((*region.row_inputs, *region.whole_inputs,
                                          *region.nodes))}
    body = emit_body(f"{name}_point", region, numbers.__getitem__, modes, lanes=False)
    return RunKernel(RegionKernel(name, body, region), tuple(run),
                     (*row_inputs, *whole_inputs), outputs, size)


def _read_outside(graph: Graph, members: set) -> set[Node]:
    """The members some node outside the run, or the caller, reads."""
    found = {x for x in graph.outputs if x in members}
    for node in graph.nodes:
        if node not in members:
            found.update(x for x in node.inputs if x in members)
    return found


def device_data(data) -> str:
    """The bodies' static arrays (table values), each once, in device
    memory: a file-scope ``static const`` array is host data in CUDA C++."""
    return "".join(d.replace("static const ", "static __device__ const ", 1)
                   for d in dict.fromkeys(data))


def cuda_source(graph: Graph, contract: bool = False) -> str:
    """The CUDA C++ the ``cuda-megakernel`` strategy compiles for ``graph``:
    readable, diffable and compilable with NVRTC on any machine (no GPU is
    needed to produce it). ``contract`` only changes the recorded options."""
    return cuda_module(graph, contract).source


# --- elementwise kernels: one op of the eager strategy ------------------------------------

VECTOR, SCALAR = "v", "s"
"""How an eager kernel reads an operand: a contiguous array of the result's
size, or one value broadcast to every element (a stride-0 view)."""


@dataclass(frozen=True)
class ElementwiseKernel:
    """``name(in0.., w0.., out0, rows)``: vector operands, then scalar ones."""

    name: str
    source: str
    vectors: tuple[int, ...]  # operand positions passed as ``in<k>``, in order
    scalars: tuple[int, ...]  # operand positions passed as ``w<k>``, in order
    op: Op
    attrs: dict
    body: CBody


def _input(aval: Aval, index: int) -> Node:
    return Node(Op.INPUT, (), Attrs({"aval": aval, "index": index}), aval)


def _signature_text(op: Op, attrs: dict, operand_dtypes, out_dtype, kinds) -> str:
    parts = [op.value, *(f"{SHORT[d]}{k}" for d, k in zip(operand_dtypes, kinds)),
             SHORT[out_dtype]]
    parts += [f"{k}={_attr_text(v)}" for k, v in sorted(attrs.items())]
    return "_".join(parts)


def _attr_text(value) -> str:
    if isinstance(value, np.dtype):
        return dtypes.SHORT[value]
    if isinstance(value, Literal):  # a table's values: a digest names them
        return hashlib.sha1(value.value.tobytes()).hexdigest()[:10]
    return str(value)


def elementwise_kernel(op: Op, attrs: dict, operand_dtypes, out_dtype, kinds) -> ElementwiseKernel:
    """The eager kernel of one elementwise op: the emitter's body for a
    one-op graph (``kinds[k]`` says how operand k is read), in the same
    grid-stride wrapper as a region."""
    rows = 2  # the body does not depend on the row count
    operand_dtypes = [np.dtype(d) for d in operand_dtypes]
    out_dtype = np.dtype(out_dtype)
    operands, inputs, nodes, modes = [], [], [], {}
    vectors, scalars = [], []
    for k, (dtype, kind) in enumerate(zip(operand_dtypes, kinds)):
        if kind == VECTOR:
            x = _input(Aval((rows,), np.dtype(dtype)), k)
            vectors.append(k)
        else:
            leaf = _input(Aval((), np.dtype(dtype)), k)
            x = Node(Op.BROADCAST, (leaf,), Attrs({"shape": (rows,), "dims": ()}),
                     Aval((rows,), np.dtype(dtype)))
            nodes.append(x)
            modes[x] = (WHOLE,)
            scalars.append(k)
        inputs.append(x if kind == VECTOR else x.inputs[0])
        operands.append(x)
    node = Node(op, tuple(operands), Attrs(attrs), Aval((rows,), np.dtype(out_dtype)))
    nodes.append(node)
    modes[node] = (ROWS,) * len(operands)
    row_inputs = tuple(inputs[k] for k in vectors)
    whole_inputs = tuple(inputs[k] for k in scalars)
    region = RowRegion(tuple(nodes), modes, row_inputs, whole_inputs, (node,))
    numbers = {n: i for i, n in enumerate((*row_inputs, *whole_inputs, *nodes))}
    text = _signature_text(op, attrs, operand_dtypes, out_dtype, kinds)
    name = "isk_e_" + re.sub(r"\W", "_", text)
    body = emit_body(f"{name}_point", region, numbers.__getitem__, modes)
    source = "".join([_header([name], f"Eager kernel: {text}", False), PRELUDE, "\n",
                      prelude(body.helpers), device_data(body.data), body.function, "\n",
                      region_wrapper(body, name)])
    return ElementwiseKernel(name, record(source), tuple(vectors), tuple(scalars), op,
                             dict(attrs), body)


# --- reduction kernels --------------------------------------------------------------------

@dataclass(frozen=True)
class ReductionKernels:
    """The kernels of one reduction op and dtype, in one module."""

    source: str
    op: Op
    dtype: np.dtype
    leaf: str  # pairwise leaves (NumPy's 8-accumulator block)
    combine: str  # one level of the pairwise tree
    fold: str  # acc ⊕ chunk results, in order, per output
    sequential: str  # a left fold over every reduced element, per output


def _combine_function(op: Op, ctype: str, dtype: np.dtype) -> str:
    expr = C_EXPR[op](Ctx(dtype, dtype, {}), "a", "b")
    return f"ISK_INLINE {ctype} isk_combine({ctype} a, {ctype} b)\n{{\n    return {expr};\n}}\n"


def _helpers_of(text: str) -> str:
    """The prelude of the helpers ``text`` calls."""
    names = {helper_for(n) for n in re.findall(r"\bisk_\w+(?=\()", text)} & set(HELPERS)
    return prelude(names)


def _start(op: Op, dtype: np.dtype, first: str) -> tuple[str, str]:
    """(initial accumulator, index of the first element folded in): the
    identity for sum and product, the first element for max and min."""
    if op in REDUCE_IDENTITY:
        return literal(REDUCE_IDENTITY[op], dtype), "0"
    return first, "1"


def _leaf_kernel(name: str, t: str, op: Op, dtype: np.dtype) -> str:
    init, begin = _start(op, dtype, "a[0]")
    acc = "\n".join(f"                r{j} = isk_combine(r{j}, a[j + {j}]);" for j in range(8))
    return f"""\
extern "C" __global__ void {name}(const {t} *restrict x, {t} *restrict vals,
    const int64_t *restrict leaf_offset, const int64_t *restrict leaf_length,
    const int64_t *restrict leaf_node, const int64_t leaves, const int64_t length,
    const int64_t nodes, const int64_t rows)
{{  /* NumPy's pairwise leaf: below 8 a left fold, else 8 accumulators */
{grid_stride("rows * leaves")}    {{
        const int64_t q = i / leaves, l = i - q * leaves;
        const {t} *restrict a = x + q * length + leaf_offset[l];
        const int64_t n = leaf_length[l];
        {t} res;
        if (n < 8) {{
            res = {init};
            for (int64_t k = {begin}; k < n; k++) res = isk_combine(res, a[k]);
        }} else {{
            {t} r0 = a[0], r1 = a[1], r2 = a[2], r3 = a[3];
            {t} r4 = a[4], r5 = a[5], r6 = a[6], r7 = a[7];
            int64_t j = 8;
            for (; j < n - (n % 8); j += 8) {{
{acc}
            }}
            res = isk_combine(isk_combine(isk_combine(r0, r1), isk_combine(r2, r3)),
                              isk_combine(isk_combine(r4, r5), isk_combine(r6, r7)));
            for (; j < n; j++) res = isk_combine(res, a[j]);
        }}
        vals[q * nodes + leaf_node[l]] = res;
    }}
}}
"""


def _combine_kernel(name: str, t: str) -> str:
    return f"""\
extern "C" __global__ void {name}({t} *restrict vals, const int64_t *restrict parent,
    const int64_t *restrict left, const int64_t *restrict right, const int64_t count,
    const int64_t nodes, const int64_t rows)
{{  /* one level of the pairwise tree: parent = left (+) right */
{grid_stride("rows * count")}    {{
        const int64_t q = i / count, k = i - q * count;
        {t} *restrict v = vals + q * nodes;
        v[parent[k]] = isk_combine(v[left[k]], v[right[k]]);
    }}
}}
"""


def _fold_kernel(name: str, t: str, op: Op, dtype: np.dtype) -> str:
    init, begin = _start(op, dtype, "part[(m * chunks) * stride]")
    return f"""\
extern "C" __global__ void {name}(const {t} *restrict part, {t} *restrict out,
    const int64_t outputs, const int64_t chunks, const int64_t stride)
{{  /* NumPy's outer loop: the accumulator takes each chunk's result in order */
{grid_stride("outputs")}    {{
        const int64_t m = i;
        {t} acc = {init};
        for (int64_t r = {begin}; r < chunks; r++)
            acc = isk_combine(acc, part[(m * chunks + r) * stride]);
        out[m] = acc;
    }}
}}
"""


def _sequential_kernel(name: str, t: str, op: Op, dtype: np.dtype) -> str:
    init, begin = _start(op, dtype, "x[m * length]")
    nan = ""
    if op not in REDUCE_IDENTITY and dtype in dtypes.FLOATS:
        # the C emitter's rule (NumPy's loop along the contiguous axis): a NaN
        # first element gives NumPy's own NaN, not its payload
        nan = (f"        if (nan_first && x[m * length] != x[m * length]) "
               f"acc = {literal(np.nan, dtype)};\n")
    return f"""\
extern "C" __global__ void {name}(const {t} *restrict x, {t} *restrict out,
    const int64_t outputs, const int64_t length, const int64_t nan_first)
{{  /* a left fold over every reduced element, in C order */
{grid_stride("outputs")}    {{
        const int64_t m = i;
        {t} acc = {init};
        for (int64_t k = {begin}; k < length; k++) acc = isk_combine(acc, x[m * length + k]);
{nan}        out[m] = acc;
    }}
}}
"""


def reduction_kernels(op: Op, dtype) -> ReductionKernels:
    """Leaf, tree-level, fold and sequential kernels of ``op`` at ``dtype``."""
    dtype = np.dtype(dtype)
    t = CTYPE[dtype]
    stem = f"isk_{op.value}_{SHORT[dtype]}"
    names = [f"{stem}_{part}" for part in ("leaf", "combine", "fold", "sequential")]
    body = "".join([_combine_function(op, t, dtype), "\n", _leaf_kernel(names[0], t, op, dtype),
                    "\n", _combine_kernel(names[1], t), "\n",
                    _fold_kernel(names[2], t, op, dtype), "\n",
                    _sequential_kernel(names[3], t, op, dtype)])
    what = f"Deterministic {op.value} of {SHORT[dtype]} (order: isokernel.codegen.reduce)"
    source = _header(names, what, False) + PRELUDE + "\n" + _helpers_of(body) + body
    return ReductionKernels(record(source), op, dtype, *names)


# --- every source generated in this process -----------------------------------------------

_GENERATED: dict[str, str] = {}


def record(source: str) -> str:
    """Remember ``source`` (by digest) so a test session can compile every
    CUDA source it made; returns it unchanged."""
    _GENERATED.setdefault(hashlib.sha256(source.encode()).hexdigest(), source)
    return source


def generated_sources() -> list[str]:
    """Every distinct CUDA source generated so far in this process."""
    return list(_GENERATED.values())


# --- fused forms, the deterministic tree, hardware table filtering ------------------------

def fused_module(node: Node) -> CudaModule | None:
    """One kernel for a ``fused`` node: its body graph as a megakernel
    module, when the whole body is one row region (the elementwise forms);
    None otherwise (e.g. a logsumexp across the pixel axis), and the form
    then runs as its composition. The body holds exactly the ops the form
    stands for, so the kernel computes the composition's bits."""
    module = cuda_module(node.attrs["body"].graph)
    stages = module.partition.stages
    if len(stages) == 1 and len(module.kernels) == 1:
        return module
    return None


@dataclass(frozen=True)
class HalvingKernels:
    source: str
    op: Op
    dtype: np.dtype
    level: str  # one level of the halving tree in every block


def halving_kernels(op: Op, dtype) -> HalvingKernels:
    """One level of the deterministic tree (``backends.reductions``) over
    the rows of a (rows, cols) array cut into blocks of ``block`` rows:
    with n the block's current length and h = ceil(n/2), r[i] ⊕= r[i+h]
    for i < n − h. Full blocks have length ``n_full``, the last ``n_last``.
    In place: a level writes rows below n − h and reads rows from h on,
    which never overlap."""
    dtype = np.dtype(dtype)
    t = CTYPE[dtype]
    name = f"isk_{op.value}_{SHORT[dtype]}_halving"
    kernel = f"""\
extern "C" __global__ void {name}({t} *restrict r, const int64_t blocks, const int64_t block,
    const int64_t n_full, const int64_t n_last, const int64_t cols)
{{  /* one level of the halving tree, in every block at once */
    const int64_t half = (n_full + 1) / 2;
{grid_stride("blocks * half * cols")}    {{
        const int64_t c = i % cols, rest = i / cols;
        const int64_t k = rest / half, j = rest - k * half;
        const int64_t n = k == blocks - 1 ? n_last : n_full;
        const int64_t h = (n + 1) / 2;
        if (j < n - h) {{
            {t} *restrict a = r + (k * block + j) * cols + c;
            *a = isk_combine(*a, r[(k * block + j + h) * cols + c]);
        }}
    }}
}}
"""
    body = _combine_function(op, t, dtype) + "\n" + kernel
    what = f"Deterministic tree of {op.value} over {SHORT[dtype]} (backends.reductions)"
    source = _header([name], what, False) + PRELUDE + "\n" + _helpers_of(body) + body
    return HalvingKernels(record(source), op, dtype, name)


@dataclass(frozen=True)
class TextureKernel:
    source: str
    dtype: np.dtype
    name: str


def texture_kernel(dtype) -> TextureKernel:
    """A table look-up in ``hardware`` mode: the texture unit's linear
    filtering over float32 texels (a 2-D texture: nodes across, layers
    down, clamped addressing). The abscissa is scaled and clamped as the
    reference does, in ``dtype``; the texel coordinate is then u + 0.5 and
    the layer's row centre, so the layer is never blended. The blend weight
    is the hardware's 9-bit fixed-point fraction (8 bits after the point):
    the result is within |v[i+1] − v[i]|/256 of the exact lerp, plus the
    float32 rounding of the texels; never bit-reproducible."""
    dtype = np.dtype(dtype)
    t = CTYPE[dtype]
    f = "f" if dtype == dtypes.float32 else ""
    name = f"isk_texture_lookup_{SHORT[dtype]}"
    nan = literal(np.nan, dtype)
    kernel = f"""\
extern "C" __global__ void {name}(const {t} *restrict x, const {t} *restrict layer,
    {t} *restrict out, const cudaTextureObject_t table, const {t} x0, const {t} spacing,
    const {t} last_node, const {t} last_layer, const int64_t rows)
{{  /* hardware-filtered table look-up (tolerance-bounded, not bit-exact) */
{grid_stride()}    {{
        const {t} u = (x[i] - x0) / spacing;
        const {t} l = layer[i];
        const {t} uc = fmin{f}(fmax{f}(u, ({t})0), last_node);
        const {t} lc = fmin{f}(fmax{f}(trunc{f}(l), ({t})0), last_layer);
        const float texel = tex2D<float>(table, (float)uc + 0.5f, (float)lc + 0.5f);
        out[i] = (u != u || l != l) ? {nan} : ({t})texel;
    }}
}}
"""
    source = (_header([name], f"Hardware table look-up, {SHORT[dtype]}", False) + PRELUDE +
              "\n" + _helpers_of(kernel) + kernel)
    return TextureKernel(record(source), dtype, name)
