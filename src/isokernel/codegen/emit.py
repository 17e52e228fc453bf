"""The one C emitter: a row region of a graph as a C body of SSA values and
statements.

The body is a prelude of helper functions and one per-element function

    ISK_INLINE void isk_<name>_point(int64_t i, const double *restrict in0, ...,
                                     double *restrict out0, ...)

that reads row ``i`` of every row input, the whole of every whole input, and
writes row ``i`` of every output. A node whose row has at most
``MAX_ROW_ELEMENTS`` elements is one ``const`` temporary per element
(``v7``, or ``v7_0, v7_1, ...``); constants are exact hex-float literals;
``where`` is a select whose both sides were already computed; layout ops
(broadcast, reshape, transpose, slice, rev, pad, concatenate) only rename
elements, by applying the reference's own rule to an array of names; small
reductions are unrolled in NumPy's order. Every line carries its provenance
(``// exp @ model.py:14``).

Around the SSA lines a body holds statements (``Stmt``): scoped blocks,
``for`` loops with a static or a per-pixel trip count, ``while`` loops with
a per-pixel condition, their loop-carried values in mutable variables
declared before the loop (``Carry``). Rows beyond the unrolling cap use
them today: consecutive elementwise ops (and table look-ups) whose rows have
more than ``MAX_ROW_ELEMENTS`` elements are one ``for`` loop over the
elements, ``const`` temporaries inside, and the values read after the loop
stored in arrays of the per-element function (``double v7[100];``). Layout
ops on such rows are index maps (an affine index or a static index table),
which move no data unless several operands meet in one row (concatenate,
pad). A region primitive lowers through ``Emitter.for_loop`` and
``Emitter.while_loop``: a sub-graph as the body of a loop, with carried
values.

The body depends on nothing of its caller: the CPU host wrapper
(``host.py``) calls it over a slice of rows, and a CUDA wrapper can call the
same function from a grid-stride loop after defining ``ISK_INLINE`` as a
device function. The host's copy (``host_function``) differs in one respect:
its kernels report their floating-point flags to NumPy's error state, so its
float ordering comparisons are quiet (no FE_INVALID at a NaN, as NumPy's)
and its helpers raise the flags NumPy's loops raise (``HOST_HELPERS``).

The base other C programs build on (``whole.py``'s whole-graph functions,
the host and CUDA wrappers) is this public API; the rest is private:

- ``expression(node, operands, host)``: a pointwise node's C expression;
- ``Stmt`` classes (``Define``, ``Declare``, ``Assign``, ``Block``, ``For``,
  ``While``, ``If``, ``Carry``) and ``render(stmts, host)``, ``polls``;
- ``called_helpers(text, table)`` and ``prelude(helpers, host)``: the
  helper functions a text calls, and their definitions in dependency order;
  ``library_calls(text)``: the C math library functions it calls;
- ``signature``, ``assemble`` and ``CBody``: a per-element function;
  ``emit_body``, ``lane_block``, ``supports``: a row region's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import re
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace

import numpy as np

from ..ir import EVAL, Graph, Node, Op, dtypes, subgraphs, walk
from ..ir.ops import CONTROL, ELEMENTWISE, LAYOUT, LEAF, REDUCE, TABLE, TRANSCENDENTAL
from .c_expr import (
    C_EXPR,
    CTYPE,
    HELPERS,
    HOST_HELPERS,
    REDUCE_IDENTITY,
    SHORT,
    TRANSCENDENTAL_NAMES,
    Ctx,
    helper_for,
    literal,
    table_data,
)
from .pixel import (
    ROWS,
    WHOLE,
    BodyModes,
    RegionRows,
    pixel_results,
    region_pixels,
    region_rows,
)
from .reduce import layout_of

MAX_ROW_ELEMENTS = 64
"""Largest row (elements per pixel) of a node the emitter unrolls into one
temporary per element; a longer row is a loop over its elements."""
MAX_LOOP_ELEMENTS = 1024
"""Largest row of a node (and whole operand) the emitter runs as a loop. The
values read after a loop live in arrays of the per-element function (the
stack on the CPU, a GPU thread's local memory, at most 512 KiB), so longer
rows run whole."""
MAX_REDUCED = 7
"""Largest reduction it unrolls, in NumPy's order for a fresh operand
(``reduce.layout_of``: below 8 elements a pairwise leaf is a left fold); from 8
on, pairwise summation makes the order depend on the memory layout, so
those reductions run whole."""


class Unsupported(Exception):
    """A node the emitter has no exact C form for."""


# --- statements ---------------------------------------------------------------------------

INDENT = "    "


def _note(text: str) -> str:
    return f"  // {text}" if text else ""


@dataclass(frozen=True)
class Define:
    """``const T name = expr;``: one SSA value (``host``: its expression in
    host C, where that differs: quiet comparisons)."""

    ctype: str
    name: str
    expr: str
    note: str = ""
    host: str | None = None

    def lines(self, host: bool, depth: int) -> list[str]:
        expr = self.host if host and self.host is not None else self.expr
        return [f"{INDENT * depth}const {self.ctype} {self.name} = {expr};{_note(self.note)}"]


@dataclass(frozen=True)
class Declare:
    """A mutable variable, ``T name = init;``, or an array, ``T name[size];``."""

    ctype: str
    name: str
    init: str | None = None
    size: int | None = None
    note: str = ""

    def lines(self, host: bool, depth: int) -> list[str]:
        size = "" if self.size is None else f"[{self.size}]"
        init = "" if self.init is None else f" = {self.init}"
        return [f"{INDENT * depth}{self.ctype} {self.name}{size}{init};{_note(self.note)}"]


@dataclass(frozen=True)
class Assign:
    """``target = expr;``: a store to a mutable variable, an array element
    or an output (``host_target``: where host C stores it, where that
    differs: an output laid out by columns)."""

    target: str
    expr: str
    note: str = ""
    host: str | None = None
    host_target: str | None = None

    def lines(self, host: bool, depth: int) -> list[str]:
        expr = self.host if host and self.host is not None else self.expr
        target = self.host_target if host and self.host_target is not None else self.target
        return [f"{INDENT * depth}{target} = {expr};{_note(self.note)}"]


@dataclass(frozen=True)
class Block:
    """``{ ... }``: a scope; what is defined inside is not seen after it."""

    body: tuple[Stmt, ...]
    note: str = ""

    def lines(self, host: bool, depth: int) -> list[str]:
        pad = INDENT * depth
        return [f"{pad}{{{_note(self.note)}", *render(self.body, host, depth + 1), f"{pad}}}"]


@dataclass(frozen=True)
class Carry:
    """A loop-carried value: the mutable variable ``name``, declared before
    the loop with the value ``init`` (carry in), assigned ``next`` (a value
    the loop body computes) at the end of every iteration, and holding the
    final value after the loop (carry out)."""

    ctype: str
    name: str
    init: str
    next: str

    def declare(self, note: str) -> Declare:
        return Declare(self.ctype, self.name, self.init, note=f"carry in: {note}")


def _updates(carries: tuple[Carry, ...], note: str) -> list[Stmt]:
    """``name = next`` for every carry as one parallel assignment: a next
    value that reads another carried variable is copied before any is set."""
    names = {c.name for c in carries}
    staged, stores = [], []
    for c in carries:
        value = c.next
        if any(re.search(rf"\b{re.escape(n)}\b", c.next) for n in names - {c.name}):
            value = f"{c.name}_next"
            staged.append(Define(c.ctype, value, c.next, f"next: {note}"))
        stores.append(Assign(c.name, value, f"carry: {note}"))
    return staged + stores


def _poll(host: bool, depth: int) -> list[str]:
    """The first lines of a control-flow loop in host C: every ``ISK_POLL``
    iterations, the end of the loop once the call was stopped (``host.py``)."""
    if not host:
        return []
    pad = INDENT * depth
    return [f"{pad}if (ISK_POLLED(isk_polls))  // the call was stopped", f"{pad}{INDENT}break;"]


@dataclass(frozen=True)
class For:
    """``for (int64_t index = start; index < stop; index++) { body }``;
    ``stop`` is a literal (a static trip count) or a value of the pixel (a
    per-pixel one). ``polls``: a loop of control flow (a scan), which in
    host C reads the call's stop flag every ``ISK_POLL`` iterations; a loop
    over a row's elements does not."""

    index: str
    stop: str
    body: tuple[Stmt, ...]
    note: str
    carries: tuple[Carry, ...] = ()
    start: str = "0"
    polls: bool = False

    def lines(self, host: bool, depth: int) -> list[str]:
        pad, k = INDENT * depth, self.index
        head = f"{pad}for (int64_t {k} = {self.start}; {k} < {self.stop}; {k}++) {{"
        inner = (*self.body, *_updates(self.carries, self.note))
        poll = _poll(host, depth + 1) if self.polls else []
        return [*render(tuple(c.declare(self.note) for c in self.carries), host, depth),
                head + _note(self.note), *poll, *render(inner, host, depth + 1), f"{pad}}}"]


@dataclass(frozen=True)
class While:
    """``while (flag) { body }``: ``flag`` holds the per-pixel condition
    ``cond``, which ``test`` computes from the carried values, once before
    the loop (in a block of its own) and again at the end of every
    iteration. In host C it reads the call's stop flag every ``ISK_POLL``
    iterations: a pixel's loop may never end."""

    flag: str
    test: tuple[Stmt, ...]
    cond: str
    body: tuple[Stmt, ...]
    note: str
    carries: tuple[Carry, ...] = ()

    def lines(self, host: bool, depth: int) -> list[str]:
        pad = INDENT * depth
        check = (*self.test, Assign(self.flag, self.cond, f"condition: {self.note}"))
        before = (*(c.declare(self.note) for c in self.carries),
                  Declare("uint8_t", self.flag, note=f"condition: {self.note}"),
                  Block(check, f"first test: {self.note}"))
        inner = (*self.body, *_updates(self.carries, self.note), *check)
        return [*render(before, host, depth), f"{pad}while ({self.flag}) {{{_note(self.note)}",
                *_poll(host, depth + 1), *render(inner, host, depth + 1), f"{pad}}}"]


@dataclass(frozen=True)
class If:
    """``if (cond) { then } else { otherwise }``; an ``otherwise`` that is one
    ``If`` renders as ``else if``, an empty one not at all."""

    cond: str
    then: tuple[Stmt, ...]
    otherwise: tuple[Stmt, ...]
    note: str

    def lines(self, host: bool, depth: int, keyword: str = "if") -> list[str]:
        pad = INDENT * depth
        lines = [f"{pad}{keyword} ({self.cond}) {{{_note(self.note)}",
                 *render(self.then, host, depth + 1)]
        rest = self.otherwise
        if len(rest) == 1 and isinstance(rest[0], If):
            return lines + rest[0].lines(host, depth, "} else if")
        if rest:
            lines += [f"{pad}}} else {{", *render(rest, host, depth + 1)]
        return lines + [f"{pad}}}"]


Stmt = Define | Declare | Assign | Block | For | While | If
"""A statement of a body; each renders its lines in plain C or host C."""


def render(stmts, host: bool = False, depth: int = 1) -> list[str]:
    """The lines of ``stmts`` in plain C (the CUDA wrappers') or host C."""
    return [line for s in stmts for line in s.lines(host, depth)]


def polls(stmts) -> bool:
    """Whether ``stmts`` hold a loop that reads the stop flag in host C."""
    for s in stmts:
        if isinstance(s, While) or (isinstance(s, For) and s.polls):
            return True
        if isinstance(s, (Block, For)) and polls(s.body):
            return True
        if isinstance(s, If) and polls((*s.then, *s.otherwise)):
            return True
    return False


# --- the body -----------------------------------------------------------------------------

@dataclass(frozen=True)
class CBody:
    """The C function of a row region and what it needs."""

    name: str  # the per-element function
    function: str  # its definition
    helpers: tuple[str, ...]  # prelude functions it calls (``c_expr.HELPERS`` keys)
    row_inputs: tuple[Node, ...]
    whole_inputs: tuple[Node, ...]  # non-constant whole inputs, passed as pointers
    outputs: tuple[Node, ...]
    math: frozenset[str]  # libm functions called, e.g. {"exp", "sqrtf"}
    data: tuple[str, ...] = ()  # static arrays it reads (tables, index maps, constants)
    host_function: str = ""  # the host C copy: quiet comparisons (module docstring)
    host_helpers: tuple[str, ...] = ()  # its prelude functions (``HOST_HELPERS`` keys)
    lanes: LaneBlock | None = None  # the host's block of rows in stages (lane-wise loops)
    columns: tuple[str, ...] = ()  # pointers its host copy reads or writes by columns
    loops: bool = False  # its host copy has loops of control flow (``polls``)

    @property
    def polls(self) -> bool:
        """Whether the host kernel of this body has loops that read the stop
        flag (control flow), so that a call may run long and a Ctrl-C
        should reach it (``backends.cpu.pool.interruptible``)."""
        return self.loops or self.lanes is not None

    @property
    def text(self) -> str:
        """Prelude, data and function: everything a wrapper needs besides
        ``ISK_INLINE``, <math.h> and <stdint.h>."""
        return prelude(self.helpers) + "".join(self.data) + self.function


def signature(name: str, row_inputs, whole_inputs, outputs) -> str:
    """``ISK_INLINE void name(int64_t i, <in0.., w0.., out0..>)``."""
    params = [f"const {CTYPE[x.dtype]} *restrict in{k}" for k, x in enumerate(row_inputs)]
    params += [f"const {CTYPE[x.dtype]} *restrict w{k}" for k, x in enumerate(whole_inputs)]
    params += [f"{CTYPE[x.dtype]} *restrict out{k}" for k, x in enumerate(outputs)]
    return f"ISK_INLINE void {name}(int64_t i, {', '.join(params)})"


def assemble(name: str, stmts, row_inputs, whole_inputs, outputs, data=(),
             columns=()) -> CBody:
    """The body whose function runs ``stmts``: emitted from a region or built
    by hand. Row input ``k`` is ``in<k>``, whole input ``k`` is ``w<k>`` and
    output ``k`` is ``out<k>``; row ``i`` is the one to compute. ``columns``:
    the pointers whose rows the host copy reads or writes by columns
    (``column_at``)."""
    head = signature(name, row_inputs, whole_inputs, outputs)
    loops = polls(stmts)
    count = [f"{INDENT}uint32_t isk_polls = 0;  // loop iterations, for ISK_POLLED"]
    text, host = ("\n".join([head, "{", *(count if h and loops else []), *render(stmts, h), "}"])
                  + "\n" for h in (False, True))
    return CBody(name, text, called_helpers(text, HELPERS), tuple(row_inputs),
                 tuple(whole_inputs), tuple(outputs), library_calls(text), tuple(data), host,
                 called_helpers(host, HOST_HELPERS), columns=tuple(columns), loops=loops)


def column_at(pointer: str, j: int) -> str:
    """Element ``j`` of row ``i`` of a block's rows laid out by columns: the
    host block function copies the rows of ``ISK_BLOCK`` pixels into one
    array per element (``host.py``), so consecutive pixels are adjacent."""
    return f"{pointer}[{j} * ISK_BLOCK + i]"


def library_calls(text: str) -> frozenset[str]:
    """The C library functions ``text`` calls (comments aside)."""
    code = re.sub(r"//[^\n]*", "", text)
    return frozenset(re.findall(r"\b([a-z][a-z0-9]*)\(", code))


# --- which nodes it emits -----------------------------------------------------------------

def supports(node: Node, modes: tuple[str, ...]) -> bool:
    """True when ``emit_body`` can emit ``node`` (read with ``modes``): never
    a complex value (the compiling strategies split those into real parts
    first, ``transforms.complex_pairs``; what is left runs outside)."""
    inner = (n for _, sub in subgraphs(node) for n in walk(sub.graph))
    if any(a.dtype in dtypes.COMPLEX for n in (node, *node.inputs, *inner) for a in n.avals):
        return False
    if node.op in CONTROL:
        return _supports_control(node)
    if node.op is Op.GET:
        return math.prod(node.shape[1:]) <= MAX_ROW_ELEMENTS
    sizes = [math.prod(x.shape[1:] if m == "rows" else x.shape)
             for x, m in zip(node.inputs, modes)]
    sizes.append(math.prod(node.shape[1:]))
    if max(sizes) > MAX_LOOP_ELEMENTS:
        return False
    if node.op in LAYOUT:
        return True
    if node.op in REDUCE:
        return max(sizes) <= MAX_ROW_ELEMENTS and _unrolled_reduction(node)
    if node.op not in ELEMENTWISE | TABLE:
        return False
    return expression(node, ["x"] * len(node.inputs)) is not None


def _supports_control(node: Node) -> bool:
    """A row-local control-flow node whose bodies the emitter can emit, whose
    operands read whole and whose results with the pixel axis fit its caps
    (results are carried or assigned: at most ``MAX_ROW_ELEMENTS`` per row)."""
    found = region_rows(node, region_pixels(node))
    if found is None or node.op not in _LOWERINGS:
        return False
    wholes = [x for x, m in zip(node.inputs, found.operands) if m == WHOLE]
    if any(x.aval.size > MAX_LOOP_ELEMENTS for x in wholes):
        return False
    if any(math.prod(node.avals[k].shape[1:]) > MAX_ROW_ELEMENTS for k in pixel_results(node)):
        return False
    bodies = [b for v in found.bodies.values() for b in (v if isinstance(v, tuple) else (v,))]
    return all(_supports_body(b) for b in bodies)


def _supports_body(body: BodyModes) -> bool:
    """Every node of ``body``: a row node the emitter supports, or a whole
    one it computes per pixel (an elementwise op of a few elements)."""
    for node in body.graph.nodes:
        if node.op in LEAF:
            continue
        if body.kinds[node] == ROWS:
            if not supports(node, body.modes[node]):
                return False
        elif not _whole_supported(node):
            return False
    return True


def _whole_supported(node: Node) -> bool:
    if node.several or max(x.aval.size for x in (node, *node.inputs)) > MAX_ROW_ELEMENTS:
        return False
    if node.op in LAYOUT:
        return True
    if node.op not in ELEMENTWISE:
        return False
    return expression(node, ["x"] * len(node.inputs)) is not None


def _unrolled_reduction(node: Node) -> bool:
    # NumPy folds a fresh (C-contiguous) operand in index order; a view's
    # order follows its strides, so only fresh operands are unrolled
    x = node.inputs[0]
    reduced = math.prod(x.shape[a] for a in node.attrs["axes"])
    fresh = x.op in ELEMENTWISE or x.op in REDUCE
    return fresh and 0 < reduced <= MAX_REDUCED


def _looped(node: Node) -> bool:
    """An elementwise node whose row is beyond the unrolling cap."""
    return node.op in ELEMENTWISE | TABLE and math.prod(node.shape[1:]) > MAX_ROW_ELEMENTS


def _row_loops(nodes) -> dict[Node, Node]:
    """The loop of every looped node, named by its first node: consecutive
    looped nodes of one row length share a loop. A node between them that
    reads none of the loop's values is emitted before the loop; one that
    reads any ends it."""
    loops: dict[Node, Node] = {}
    head, size = None, None
    for node in nodes:
        if _looped(node):
            n = math.prod(node.shape[1:])
            if head is None or n != size:
                head, size = node, n
            loops[node] = head
        elif head is not None and any(loops.get(x) is head for x in node.inputs):
            head = None
    return loops


def _escapes(nodes, loops: dict, results=()) -> set[Node]:
    """Looped nodes read after their loop (or in ``results``): stored in arrays."""
    out = {x for x in results if x in loops}
    for node in nodes:
        out |= {x for x in node.inputs if x in loops and loops.get(node) is not loops[x]}
    return out


def _ctx(node: Node, host: bool = False) -> Ctx:
    operand = node.inputs[-1] if node.op is Op.SELECT else node.inputs[0]
    return Ctx(operand.dtype, node.dtype, dict(node.attrs), host)


def _rule_attrs(node: Node) -> dict:
    return {"dtype": node.attrs["dtype"]} if node.op is Op.CAST else {}


def expression(node: Node, operands, host: bool = False) -> str | None:
    """The C expression of an elementwise or table node over the C names of
    its operands (``C_EXPR`` with the node's dtypes and attributes); None
    where the op has no C form for these dtypes. ``host``: the host's form
    (quiet float comparisons, see ``HOST_HELPERS``)."""
    return C_EXPR[node.op](_ctx(node, host), *operands, **_rule_attrs(node))


# --- values beyond the cap ----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Indexed:
    """A value of more than ``MAX_ROW_ELEMENTS`` elements: element ``k`` (C
    order) is ``base`` with ``{k}`` replaced by ``map[k]`` (``k`` itself
    when ``map`` is None); a base without ``{k}`` is one value for all."""

    base: str  # e.g. "in0[i * 100 + {k}]", "v7[{k}]", "w1[{k}]", "v7_k", "0x1.0p-1"
    shape: tuple[int, ...]  # (1, *row) for a row, the value's shape when read whole
    map: np.ndarray | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def element(self, k: int) -> str:
        """Element ``k``, a static index."""
        return self.base.replace("{k}", str(k if self.map is None else int(self.map[k])))

    def view(self, element: np.ndarray, shape) -> Indexed:
        """Elements ``element[k]`` of this value, as a value of ``shape``."""
        mapped = element if self.map is None else self.map[element]
        if np.array_equal(mapped, np.arange(len(mapped))):
            mapped = None
        return Indexed(self.base, tuple(shape), mapped)


def _affine(a: int, b: int, var: str) -> str:
    """``a * var + b`` as C, e.g. ``k``, ``k + 3``, ``99 - k``, ``2 * k + 1``."""
    if a == 0:
        return str(b)
    term = var if abs(a) == 1 else f"{abs(a)} * {var}"
    if a < 0:
        return f"{b} - {term}"
    return term if b == 0 else f"{term} {'+' if b > 0 else '-'} {abs(b)}"


def _digest(values: np.ndarray) -> str:
    return hashlib.sha1(values.tobytes()).hexdigest()[:12]


def index_data(table: np.ndarray) -> tuple[str, str]:
    """(name, definition) of a static index table."""
    name = f"isk_idx_{_digest(table.astype(np.int64))}"
    return name, _static_array("int32_t", name, [str(int(t)) for t in table],
                               f"index map: {len(table)} elements")


def const_data(value: np.ndarray, dtype) -> tuple[str, str]:
    """(name, definition) of a constant as a static array of exact literals."""
    value = np.asarray(value, dtype)
    name = f"isk_const_{_digest(value)}_{SHORT[dtype]}"
    return name, _static_array(CTYPE[dtype], name, [literal(v, dtype) for v in value.ravel()],
                               f"constant: {value.size} elements")


def _static_array(ctype: str, name: str, items: list[str], what: str) -> str:
    rows = [", ".join(items[k:k + 8]) for k in range(0, len(items), 8)]
    body = ",\n    ".join(rows)
    return f"/* {what} */\nstatic const {ctype} {name}[{len(items)}] = {{\n    {body}\n}};\n"


@dataclass
class _Loop:
    """The row loop being built: its first node, trip count, nodes, body."""

    head: Node
    size: int
    nodes: list = field(default_factory=list)
    body: list = field(default_factory=list)


# --- the emitter --------------------------------------------------------------------------

class Emitter:
    """Emits a region's nodes as statements (``emit``). A region primitive's
    lowering puts a sub-graph in a loop with ``for_loop`` or ``while_loop``."""

    def __init__(self, name: str, region, index, modes: dict, columns=frozenset()):
        self.name = name
        self.region = region
        self.columns = frozenset(columns)  # pointers read or written by columns in host C
        self.index = index  # node -> its number in its graph (names and comments)
        self.modes = dict(modes)  # the region's, and those of the bodies emitted
        self.prefix = ""  # of the names of a sub-graph's values
        self.stmts: list = []  # the statements of the scope being emitted
        self.values: dict[Node, np.ndarray | Indexed] = {}  # rows: names, shape (1, *row)
        self.whole: dict[Node, np.ndarray | Indexed] = {}  # values read whole, their shape
        self.data: dict[str, None] = {}  # static arrays, in first-use order
        self.packed: dict[Node, Indexed] = {}  # values up to the cap as arrays, this scope
        self.loops = _row_loops(region.nodes)
        self.escapes = _escapes(region.nodes, self.loops)
        self.out_index = {node: k for k, node in enumerate(region.outputs)}
        self.stored: set[Node] = set()  # outputs written inside their row loop
        self.loop: _Loop | None = None  # the row loop being built
        self.whole_only: set[Node] = set()  # body values without the pixel axis, per pixel

    def emit(self) -> CBody:
        self.begin()
        for node in self.region.nodes:
            self.node(node)
        return self.finish()

    def begin(self) -> None:
        """Read the inputs: up to the cap into temporaries, longer ones in place."""
        for n, x in enumerate(self.region.row_inputs):
            self.values[x] = self._read(x, f"in{n}", rows=True)
        pointers = [x for x in self.region.whole_inputs if x.op is not Op.CONST]
        for n, x in enumerate(pointers):
            self.whole[x] = self._read(x, f"w{n}", rows=False)
        for x in self.region.whole_inputs:
            if x.op is Op.CONST:
                self.whole[x] = self._constant(x)

    def finish(self) -> CBody:
        """Write the outputs; the body."""
        self._close()
        self._outputs()
        whole = tuple(x for x in self.region.whole_inputs if x.op is not Op.CONST)
        return assemble(self.name, self.stmts, self.region.row_inputs, whole,
                        self.region.outputs, tuple(self.data), sorted(self.columns))

    def bind(self, node: Node, value) -> None:
        """Give ``node`` a value of this body (e.g. an output computed by a loop)."""
        self.values[node] = value

    def node(self, node: Node) -> None:
        """Emit ``node``, whose operands are emitted."""
        if self._ends_loop(node):
            self._close()
        if node in self.loops:
            self._in_loop(node)
        elif node in self.whole_only:
            self.whole[node] = self._whole_value(node)
        elif node.op in _LOWERINGS:
            self.values[node] = _LOWERINGS[node.op](self, node)
        elif node.op is Op.GET:
            self.values[node] = self.values[node.inputs[0]][node.attrs["index"]]
        elif node.op in LAYOUT:
            self.values[node] = self._layout(node)
        elif node.op in REDUCE:
            self.values[node] = self._reduce(node)
        elif node.op in ELEMENTWISE | TABLE:
            self.values[node] = self._elementwise(node)
        else:
            raise Unsupported(f"{node.op.value} at {node.where or 'an unknown line'}: no C "
                              f"form in a body (a region runs it whole, by the reference)")

    # --- loops of a region primitive ------------------------------------------------------

    def for_loop(self, graph: Graph, init: list, stop: str, note: str, prefix: str,
                 start: str = "0") -> list[np.ndarray]:
        """Append ``graph`` as the body of a loop from ``start`` to ``stop`` (a
        literal or a value of this body). Its inputs are the loop index and the
        carried values, its outputs their next values; ``init`` holds the
        carried values' first values. Returns the carried variables: after the
        loop, the last values."""
        index = f"{prefix}t"
        counter = _counter(graph.inputs[0], index)
        variables = [_variables(x, f"{prefix}c{j}") for j, x in enumerate(graph.inputs[1:])]
        body, nexts = self.sub_body(graph, [counter, *variables], prefix)
        carries = _carries(graph.inputs[1:], variables, init, nexts)
        self.stmts.append(For(index, stop, tuple(body), note, carries, start, polls=True))
        return variables

    def while_loop(self, cond: Graph, body: Graph, init: list, note: str,
                   prefix: str) -> list[np.ndarray]:
        """Append a ``while`` loop: ``cond`` (the carried values to a boolean
        of the pixel) decides before every iteration whether ``body`` (the
        carried values to their next values) runs again. Returns the carried
        variables, as ``for_loop``."""
        variables = [_variables(x, f"{prefix}c{j}") for j, x in enumerate(body.inputs)]
        test, (flag,) = self.sub_body(cond, variables, f"{prefix}q")
        stmts, nexts = self.sub_body(body, variables, prefix)
        carries = _carries(body.inputs, variables, init, nexts)
        self.stmts.append(While(f"{prefix}go", tuple(test), _scalar(flag), tuple(stmts), note,
                                carries))
        return variables

    def sub_body(self, graph: Graph, bindings: list, prefix: str, body: BodyModes | None = None,
                 outputs=None) -> tuple[list, list]:
        """The statements computing ``outputs`` (default: every output of
        ``graph``) with its inputs bound to ``bindings`` (values of this body:
        carried variables, a loop index), in a scope of their own, its names
        prefixed with ``prefix``; and the values of the outputs. ``body``:
        how the graph runs on the pixel rows (``pixel.body_modes``): which
        nodes read which operands whole, which are whole values (computed
        per pixel); without it every node reads its operands by rows. The
        caller checks that ``graph`` is row-local and within the caps of
        ``supports``; an op with no C form raises ``Unsupported``."""
        outputs = list(graph.outputs if outputs is None else outputs)
        nodes = ([n for n in graph.nodes if n.op not in LEAF] if body is None
                 else body.needed(outputs))
        self.loops.update(_row_loops(nodes))
        self.escapes |= _escapes(nodes, self.loops, outputs)
        whole = set() if body is None else {x for x, k in body.kinds.items() if k == WHOLE}
        if body is not None:
            self.modes.update(body.modes)
            self.whole_only |= {n for n in nodes if n in whole}
        with self._scope(graph.index, prefix) as stmts:
            for x, value in zip(graph.inputs, bindings):
                (self.whole if x in whole else self.values)[x] = value
            for x in graph.nodes:
                if x.op is Op.CONST:
                    self.values[x] = self.whole[x] = self._constant(x)
            for node in nodes:
                self.node(node)
            self._close()
            results = [(self.whole if x in whole else self.values)[x] for x in outputs]
        return stmts, results

    # --- control flow: region nodes as statements -----------------------------------------

    def _lower_while(self, node: Node) -> tuple:
        """One C ``while`` per pixel: its predicate (one per pixel for a
        lane-wise loop, else the same whole value for every pixel) decides
        before every step, so each pixel stops on its own and keeps its
        carry, as the reference's frozen lanes do."""
        rows, operands, prefix = self._control(node, "w")
        n, cond, body = node.attrs["n_carry"], node.attrs["cond"], node.attrs["body"]
        variables = [_variables(x, f"{prefix}c{j}") for j, x in
                     enumerate(body.graph.inputs[:n])]
        bound = [*variables, *operands[n:]]
        test, (flag,) = self.sub_body(cond.graph, bound, f"{prefix}q", rows.bodies["cond"])
        stmts, nexts = self.sub_body(body.graph, bound, prefix, rows.bodies["body"])
        carries = _carries(body.graph.inputs[:n], variables, operands[:n], nexts)
        self.stmts.append(While(f"{prefix}go", tuple(test), _scalar(flag), tuple(stmts),
                                self._label(node), carries))
        return tuple(variables)

    def _lower_scan(self, node: Node) -> tuple:
        """A ``for`` loop of the static step count; each step reads element
        t of the sequences (whole values) and updates the carry. Stacked
        outputs are whole and never read in a region: not computed."""
        rows, operands, prefix = self._control(node, "s")
        n, nx, steps = node.attrs["n_carry"], node.attrs["n_xs"], node.attrs["length"]
        graph = node.attrs["body"].graph
        index = f"{prefix}t"
        t = f"({steps - 1} - {index})" if node.attrs["reverse"] else index
        variables = [_variables(x, f"{prefix}c{j}") for j, x in enumerate(graph.inputs[:n])]
        xs = [self._step(x, v, t) for x, v in zip(node.inputs[n:n + nx], operands[n:n + nx])]
        stmts, nexts = self.sub_body(graph, [*variables, *xs, *operands[n + nx:]], prefix,
                                     rows.bodies["body"], graph.outputs[:n])
        carries = _carries(graph.inputs[:n], variables, operands[:n], nexts)
        self.stmts.append(For(index, str(steps), tuple(stmts), self._label(node), carries,
                              polls=True))
        return (*variables, *[None] * (len(graph.outputs) - n))

    def _step(self, x: Node, value, t: str) -> np.ndarray:
        """Element ``t`` (a loop index) along axis 0 of a whole value."""
        stored = value if isinstance(value, Indexed) else self._pack(x, _names(value))
        size = math.prod(x.shape[1:])
        at = [t] if size == 1 else [f"({t} * {size} + {j})" for j in range(size)]
        names = [self._element(stored, k) for k in at]
        return np.array(names, dtype=object).reshape(x.shape[1:])

    def _lower_cond(self, node: Node) -> tuple:
        """The branch the index picks (clamped, as the reference), as an
        ``if``/``else if`` chain on the whole index: only that branch runs.
        Each result with the pixel axis is a variable every branch assigns."""
        rows, operands, prefix = self._control(node, "b")
        index = _scalar(operands[0])
        wanted = pixel_results(node)
        graphs = [b.graph for b in node.attrs["branches"]]
        results = {k: _variables(graphs[0].outputs[k], f"{prefix}r{k}") for k in wanted}
        for k, names in results.items():
            for name in names.ravel():
                self.stmts.append(Declare(CTYPE[graphs[0].outputs[k].dtype], name,
                                          note=f"result {k}: {self._label(node)}"))
        chain: tuple = ()
        for j in range(len(graphs) - 1, -1, -1):
            outs = [graphs[j].outputs[k] for k in wanted]
            stmts, values = self.sub_body(graphs[j], operands[1:], f"{prefix}{j}_",
                                          rows.bodies["branches"][j], outs)
            taken = (*stmts, *(Assign(a, b) for k, v in zip(wanted, values)
                               for a, b in zip(results[k].ravel(), _names(v).ravel())))
            note = f"branch {j}: {self._label(node)}"
            chain = (If(f"{index} <= {j}", taken, chain, note),) if chain else taken
        self.stmts += list(chain)
        return tuple(results.get(k) for k in range(len(node.avals)))

    def _lower_checkpoint(self, node: Node) -> tuple:
        """Its body, inlined (``checkpoint`` only changes reverse mode)."""
        rows, operands, prefix = self._control(node, "k")
        graph, wanted = node.attrs["body"].graph, pixel_results(node)
        stmts, values = self.sub_body(graph, operands, prefix, rows.bodies["body"],
                                      [graph.outputs[k] for k in wanted])
        self.stmts += stmts
        found = dict(zip(wanted, values))
        return tuple(found.get(k) for k in range(len(node.avals)))

    def _control(self, node: Node, letter: str):
        """(how it runs on the rows, its operands' values, its names' prefix)."""
        rows = region_rows(node, region_pixels(node))
        if rows is None:
            raise Unsupported(f"{node.op.value} at {node.where or 'an unknown line'}: not "
                              f"row-local (it runs whole, by the reference)")
        return rows, self._operands(node), f"{self.prefix}{letter}{self.index(node)}_"

    @contextlib.contextmanager
    def _scope(self, index, prefix: str):
        """What is emitted inside the ``with`` goes to a list of its own."""
        saved = (self.stmts, self.packed, self.loop, self.index, self.prefix)
        self.stmts, self.packed, self.loop = [], {}, None
        self.index, self.prefix = index, prefix
        try:
            yield self.stmts
        finally:
            self.stmts, self.packed, self.loop, self.index, self.prefix = saved

    # --- values up to the cap -------------------------------------------------------------

    def _read(self, x: Node, pointer: str, rows: bool) -> np.ndarray | Indexed:
        """Row ``i`` of ``x`` (``rows``), or the whole of it, from ``pointer``."""
        shape = (1, *x.shape[1:]) if rows else x.shape
        size = math.prod(shape)
        if size <= MAX_ROW_ELEMENTS:
            return self._load(x, pointer, size, shape, rows)
        return Indexed(f"{pointer}[i * {size} + {{k}}]" if rows else f"{pointer}[{{k}}]", shape)

    def _load(self, x: Node, pointer: str, size: int, shape, rows: bool) -> np.ndarray:
        ctype, base = CTYPE[x.dtype], self._base(x)
        if not rows and x in self.values:  # read by rows too: its row has these names
            base = f"{base}_w"
        names = []
        for j in range(size):
            at = (f"i * {size} + {j}" if size > 1 else "i") if rows else str(j)
            name = f"{base}_{j}" if size > 1 else base
            note = f"{'row of ' if rows else ''}{self._label(x)}"
            host = column_at(pointer, j) if pointer in self.columns else None
            self.stmts.append(Define(ctype, name, f"{pointer}[{at}]", note, host))
            names.append(name)
        return np.array(names, dtype=object).reshape(shape)

    def _constant(self, x: Node) -> np.ndarray | Indexed:
        """Literals up to the cap; a longer constant as a static array."""
        value = x.attrs["value"].value
        if value.size <= MAX_ROW_ELEMENTS:
            names = [literal(v, x.dtype) for v in value.ravel()]
            return np.array(names, dtype=object).reshape(value.shape)
        name, text = const_data(value, x.dtype)
        self.data[text] = None
        return Indexed(f"{name}[{{k}}]", value.shape)

    def _base(self, node: Node) -> str:
        return f"{self.prefix}v{self.index(node)}"

    def _operands(self, node: Node) -> list:
        modes = self.modes.get(node) or ("rows",) * len(node.inputs)
        return [self.whole[x] if mode == "whole" else self.values[x]
                for x, mode in zip(node.inputs, modes)]

    def _label(self, node: Node) -> str:
        label = f"%{self.index(node)} {node.op.value}"
        return f"{label} @ {node.where}" if node.where else label

    def _outputs(self) -> None:
        for n, node in enumerate(self.region.outputs):
            if node in self.stored:
                continue
            value, size = self.values[node], math.prod(node.shape[1:])
            if size > MAX_ROW_ELEMENTS:
                store = Assign(f"out{n}[i * {size} + k]", self._element(value))
                note = f"for k < {size}: out{n} = {self._label(node)}"
                self.stmts.append(For("k", str(size), (store,), note))
                continue
            pointer = f"out{n}"
            for j, name in enumerate(_names(value).ravel()):
                at = f"i * {size} + {j}" if size > 1 else "i"
                host = column_at(pointer, j) if pointer in self.columns else None
                self.stmts.append(Assign(f"{pointer}[{at}]", name, host_target=host))

    def _elementwise(self, node: Node) -> np.ndarray:
        if node.op in TABLE:
            self.data[table_data(dict(node.attrs), node.dtype)] = None
        operands = [_names(x).ravel() for x in self._operands(node)]
        exprs = [[self._expr(node, [o[j] for o in operands], host)
                  for j in range(math.prod(node.shape[1:]))] for host in (False, True)]
        return self._define(node, *exprs)

    def _whole_value(self, node: Node) -> np.ndarray:
        """A body value without the pixel axis (a loop counter), computed per
        pixel: one ``const`` per element, of the node's own shape; a layout
        op renames elements by the reference's rule."""
        if node.op in LAYOUT:
            operands = [_names(self.whole[x]) for x in node.inputs]
            return np.array(EVAL[node.op](*operands, **node.attrs), dtype=object)
        operands = [_names(self.whole[x]).ravel() for x in node.inputs]
        base, ctype, names = self._base(node), CTYPE[node.dtype], []
        for j in range(node.aval.size):
            plain, host = (self._expr(node, [o[j] for o in operands], h) for h in (False, True))
            name = f"{base}_{j}" if node.aval.ndim else base
            self.stmts.append(Define(ctype, name, plain, self._label(node), host))
            names.append(name)
        return np.array(names, dtype=object).reshape(node.shape)

    def _expr(self, node: Node, names: list[str], host: bool = False) -> str:
        expr = expression(node, names, host)
        if expr is None:
            raise Unsupported(f"{node.op.value} of {dtypes.SHORT[node.dtype]}")
        return expr

    def _define(self, node: Node, exprs: list[str], host_exprs: list[str]) -> np.ndarray:
        base, ctype = self._base(node), CTYPE[node.dtype]
        names = []
        for j, (expr, host) in enumerate(zip(exprs, host_exprs)):
            name = f"{base}_{j}" if len(exprs) > 1 else base
            self.stmts.append(Define(ctype, name, expr, self._label(node), host))
            names.append(name)
        return np.array(names, dtype=object).reshape((1, *node.shape[1:]))

    def _layout(self, node: Node) -> np.ndarray | Indexed:
        """The reference rule applied to arrays of names, with the pixel axis
        of length 1: the rule itself decides which element goes where."""
        operands = self._operands(node)
        small = all(isinstance(v, np.ndarray) for v in operands)
        if small and math.prod(node.shape[1:]) <= MAX_ROW_ELEMENTS:
            return np.array(self._rule(node, operands), dtype=object)
        return self._mapped(node, operands)

    def _rule(self, node: Node, operands: list):
        """The reference rule of a layout op on per-pixel arrays (pixel axis 1)."""
        attrs = dict(node.attrs)
        if node.op in (Op.BROADCAST, Op.RESHAPE):
            attrs["shape"] = (1, *attrs["shape"][1:])
        elif node.op is Op.SLICE:
            attrs["limit"] = (1, *attrs["limit"][1:])
        return EVAL[node.op](*operands, **attrs)

    def _reduce(self, node: Node) -> np.ndarray:
        """NumPy's order (``reduce.layout_of``): a sum whose reduced axes are not
        all trailing adds the fold of each trailing run to an accumulator,
        in C order; everything else is one left fold in C order."""
        (x,) = node.inputs
        names = _names(self.values[x])
        layout = layout_of(names.shape, node.attrs["axes"], node.op)
        lanes = np.transpose(names, layout.perm).reshape(-1, layout.chunks, layout.length)
        return self._define(node, *(self._lanes(node, lanes, host) for host in (False, True)))

    def _lanes(self, node: Node, lanes: np.ndarray, host: bool) -> list[str]:
        """One expression per reduced lane (chunks of a lane folded, then added)."""
        exprs = []
        for lane in lanes:
            if len(lane) == 1:  # identity + fold(lane) has fold(lane)'s bits
                exprs.append(self._fold(node, list(lane[0]), host))
                continue
            acc = literal(REDUCE_IDENTITY[node.op], node.dtype)
            for chunk in lane:
                acc = C_EXPR[node.op](_ctx(node, host), acc, self._fold(node, list(chunk), host))
            exprs.append(acc)
        return exprs

    def _fold(self, node: Node, names: list[str], host: bool) -> str:
        """NumPy's left fold, from the identity for sum and product. For a
        float max/min along the contiguous last axis NumPy's loop returns its
        own NaN (not the element's payload) when the first element is NaN;
        along other axes the first NaN met wins, as the fold does."""
        combine = C_EXPR[node.op]
        ctx = _ctx(node, host)
        if node.op in REDUCE_IDENTITY:
            acc = literal(REDUCE_IDENTITY[node.op], node.dtype)
        else:
            acc, names = names[0], names[1:]
        first = acc
        for name in names:
            acc = combine(ctx, acc, name)
        x = node.inputs[0]
        if node.op not in REDUCE_IDENTITY and node.dtype in dtypes.FLOATS and \
                x.aval.ndim - 1 in node.attrs["axes"]:
            nan = literal(np.nan, node.dtype)
            acc = f"isk_select_{SHORT[node.dtype]}((uint8_t)({first} != {first}), {nan}, {acc})"
        return acc

    # --- rows beyond the cap --------------------------------------------------------------

    def _ends_loop(self, node: Node) -> bool:
        """Whether the row loop being built ends before ``node`` (``_row_loops``)."""
        if self.loop is None:
            return False
        head = self.loop.head
        if node in self.loops:
            return self.loops[node] is not head
        return any(self.loops.get(x) is head for x in node.inputs)

    def _in_loop(self, node: Node) -> None:
        """``node`` as a temporary of the row loop, ``v7_k`` for element k."""
        if self.loop is None:
            self.loop = _Loop(node, math.prod(node.shape[1:]))
        if node.op in TABLE:
            self.data[table_data(dict(node.attrs), node.dtype)] = None
        names = [self._element(v) for v in self._operands(node)]
        plain, host = (self._expr(node, names, h) for h in (False, True))
        name = f"{self._base(node)}_k"
        self.loop.body.append(Define(CTYPE[node.dtype], name, plain, self._label(node), host))
        self.loop.nodes.append(node)
        self.values[node] = Indexed(name, (1, *node.shape[1:]))

    def _close(self) -> None:
        """Append the row loop being built, after the arrays of its values that
        are read after it."""
        loop, self.loop = self.loop, None
        if loop is None:
            return
        body = list(loop.body)
        for node in loop.nodes:
            body += self._keep(node, loop.size)
        first, last = loop.nodes[0], loop.nodes[-1]
        span = self._label(first) + ("" if first is last else f" .. {self._label(last)}")
        self.stmts.append(For("k", str(loop.size), tuple(body), f"for k < {loop.size}: {span}"))

    def _keep(self, node: Node, size: int) -> list:
        """The stores of a loop value: to its array when it is read after the
        loop, to its output when it is one."""
        name, array = f"{self._base(node)}_k", self._base(node)
        stores = []
        if node in self.escapes:
            self.stmts.append(Declare(CTYPE[node.dtype], array, size=size, note=self._label(node)))
            stores.append(Assign(f"{array}[k]", name))
            self.values[node] = Indexed(f"{array}[{{k}}]", (1, *node.shape[1:]))
        else:
            del self.values[node]
        if node in self.out_index:
            stores.append(Assign(f"out{self.out_index[node]}[i * {size} + k]", name))
            self.stored.add(node)
        return stores

    def _element(self, value: Indexed, var: str = "k") -> str:
        """Element ``var`` (a loop index) of ``value``."""
        if "{k}" not in value.base:
            return value.base
        return value.base.replace("{k}", self._index(value.map, var))

    def _index(self, table: np.ndarray | None, var: str) -> str:
        """``table[var]`` as C: the index itself, a constant, an affine
        index, or a static index table."""
        if table is None:
            return var
        step = int(table[1] - table[0]) if len(table) > 1 else 0
        if np.array_equal(table, table[0] + step * np.arange(len(table))):
            return _affine(step, int(table[0]), var)
        name, text = index_data(table)
        self.data[text] = None
        return f"{name}[{var}]"

    def _mapped(self, node: Node, operands: list) -> np.ndarray | Indexed:
        """A layout op beyond the cap: the rule applied to the numbers of the
        operands' elements says which operand element each element is."""
        offsets = np.cumsum([0] + [v.size for v in operands])
        numbered = [np.arange(offsets[j], offsets[j + 1]).reshape(v.shape)
                    for j, v in enumerate(operands)]
        flat = np.asarray(self._rule(node, numbered)).ravel()
        source = np.searchsorted(offsets, flat, side="right") - 1
        element = flat - offsets[source]
        shape = (1, *node.shape[1:])
        if flat.size and (source == source[0]).all():
            return self._view(node.inputs[source[0]], operands[source[0]], element, shape)
        if flat.size <= MAX_ROW_ELEMENTS:
            names = [_at(operands[j], int(e)) for j, e in zip(source, element)]
            return np.array(names, dtype=object).reshape(shape)
        return self._gather(node, operands, source, element)

    def _view(self, x: Node, value, element: np.ndarray, shape) -> np.ndarray | Indexed:
        """Elements ``element`` of ``x``'s value, as a value of ``shape``
        (names up to the cap stay names)."""
        if isinstance(value, np.ndarray) and len(element) <= MAX_ROW_ELEMENTS:
            return value.ravel()[element].reshape(shape)
        return self._indexed(x, value, element, shape)

    def _indexed(self, x: Node, value, element: np.ndarray, shape) -> Indexed:
        """Elements ``element`` of ``x``'s value as an ``Indexed``: a view of a
        ``Indexed``; of names, one name for all or the names as an array."""
        if isinstance(value, Indexed):
            return value.view(element, shape)
        if (element == element[0]).all():
            return Indexed(value.ravel()[element[0]], tuple(shape))
        return self._pack(x, value).view(element, shape)

    def _pack(self, x: Node, names: np.ndarray) -> Indexed:
        """A value up to the cap as an array, read at a computed index."""
        if x not in self.packed:
            array = f"{self.prefix}p{self.index(x)}"
            items = "{" + ", ".join(names.ravel()) + "}"
            self.stmts.append(Define(CTYPE[x.dtype], f"{array}[{names.size}]", items,
                                     f"{self._label(x)}, as an array"))
            self.packed[x] = Indexed(f"{array}[{{k}}]", names.shape)
        return self.packed[x]

    def _gather(self, node: Node, operands: list, source, element) -> Indexed:
        """A row beyond the cap made of several operands (concatenate, pad):
        an array, filled by one loop per operand."""
        array = self._base(node)
        self.stmts.append(Declare(CTYPE[node.dtype], array, size=len(source),
                                  note=self._label(node)))
        for j in dict.fromkeys(source.tolist()):
            spots = np.flatnonzero(source == j)
            value = self._indexed(node.inputs[j], operands[j], element[spots], (len(spots),))
            store = Assign(f"{array}[{self._index(spots, 'k')}]", self._element(value))
            note = f"for k < {len(spots)}: {self._label(node)}, operand {j}"
            self.stmts.append(For("k", str(len(spots)), (store,), note))
        return Indexed(f"{array}[{{k}}]", (1, *node.shape[1:]))


_LOWERINGS = {Op.WHILE: Emitter._lower_while, Op.SCAN: Emitter._lower_scan,
              Op.COND: Emitter._lower_cond, Op.CHECKPOINT: Emitter._lower_checkpoint}
"""How each control-flow primitive becomes statements (``pixel.region_rows``
says when it may): a result with the pixel axis is carried or assigned
variables; a whole one (a loop counter) is not read after the node."""


def _names(value) -> np.ndarray:
    """The names of a value's elements (an ``Indexed`` up to the cap: its elements)."""
    if isinstance(value, np.ndarray):
        return value
    names = [value.element(k) for k in range(value.size)]
    return np.array(names, dtype=object).reshape(value.shape)


def _at(value, k: int) -> str:
    """Element ``k`` of a value (names, or an ``Indexed``)."""
    return value.ravel()[k] if isinstance(value, np.ndarray) else value.element(k)


def _row_shape(x: Node) -> tuple[int, ...]:
    """The shape of a value's names: ``(1, *row)``, or ``()`` for a scalar."""
    return (1, *x.shape[1:]) if x.aval.ndim else ()


def _counter(x: Node, index: str) -> np.ndarray:
    """The loop index as the value of ``x`` (cast to its dtype)."""
    name = index if x.dtype == dtypes.int64 else f"(({CTYPE[x.dtype]}){index})"
    return np.full(_row_shape(x), name, dtype=object)


def _variables(x: Node, stem: str) -> np.ndarray:
    """The carried variables of ``x``: one per element of its row."""
    shape = _row_shape(x)
    size = math.prod(shape)
    if size > MAX_ROW_ELEMENTS:
        raise Unsupported(f"a carried row of {size} elements (at most {MAX_ROW_ELEMENTS})")
    names = [stem] if size == 1 else [f"{stem}_{j}" for j in range(size)]
    return np.array(names, dtype=object).reshape(shape)


def _carries(inputs, variables, init, nexts) -> tuple[Carry, ...]:
    """One carry per element of every carried value (``_variables`` checked
    their size): its variable, first value and next value."""
    carries = []
    for x, names, first, last in zip(inputs, variables, init, nexts):
        first = np.broadcast_to(_names(first), names.shape)
        for name, a, b in zip(names.ravel(), first.ravel(), _names(last).ravel()):
            carries.append(Carry(CTYPE[x.dtype], name, a, b))
    return tuple(carries)


def _scalar(value) -> str:
    """The one name of a loop condition."""
    if value.size != 1:
        raise Unsupported(f"a loop condition of {value.size} elements; it must be one "
                          f"boolean per pixel")
    return _names(value).ravel()[0]


BLOCK_ROWS = 256
"""Rows of the host's block (``host.ISK_BLOCK``), the length of a staged
block's arrays."""
LANE_BYTES = 256 * 1024
"""Most bytes of the block-local arrays of a block (on the worker's stack):
a staged block's arrays and the columns it reads and writes; a staged block
that needs more runs its loops one pixel at a time."""


def emit_body(name: str, region, index, modes: dict | None = None,
              lanes: bool = True) -> CBody:
    """The body of ``region`` (anything with ``nodes``, ``row_inputs``,
    ``whole_inputs`` and ``outputs`` in tape order); ``index(node)`` numbers
    the temporaries. ``lanes``: a region with lane-wise ``while`` loops also
    gets the host's staged block (``lane_block``); the CUDA wrappers, whose
    threads each run one pixel's loop, do without."""
    staged = lane_block(name, region, index, modes or {}) if lanes else None
    columns = column_pointers(region) if staged is None else ()
    body = Emitter(name, region, index, modes or {}, columns).emit()
    return body if staged is None else dataclass_replace(body, lanes=staged)


INTERLEAVED = frozenset({1, 2, 3, 4, 8, 16, 32, 64})
"""Row lengths whose interleaved reads and writes GCC vectorizes (permuting
vectors of several pixels' rows; GCC 12, x86-64 with AVX2): a block of such
rows keeps them. Rows of 5, 6, 7, 9, ... elements keep the block's loop
scalar: ``column_pointers``."""


def _by_columns(row: int) -> bool:
    """Whether rows of ``row`` elements are laid out by columns in a block."""
    return 1 < row <= MAX_ROW_ELEMENTS and row not in INTERLEAVED


def calls_math_library(nodes) -> bool:
    """Whether ``nodes`` (or their bodies) call the C math library. Such a
    region keeps its rows: columns would let GCC vectorize a loop that ran
    scalar, turning its libm calls into libmvec's vector variants and
    moving their bits (within native's bound, but no longer the bits it
    gave before); in portable numerics a region calls none."""
    for node in nodes:
        if node.op in TRANSCENDENTAL:
            return True
        if any(n.op in TRANSCENDENTAL for _, sub in subgraphs(node) for n in walk(sub.graph)):
            return True
    return False


def column_pointers(region, budget: int = LANE_BYTES) -> tuple[str, ...]:
    """The row inputs and outputs the host block reads and writes by
    columns (``column_at``), in order while their arrays fit ``budget``:
    those whose rows (up to ``MAX_ROW_ELEMENTS`` elements) are not
    ``INTERLEAVED``. Such a pixel's values (a 3x3 matrix: 9) keep GCC from
    vectorizing the block's loop; columns put consecutive pixels side by
    side, and the loop vectorizes. A row GCC interleaves is left as it is:
    its copies would cost more than they save. A region with a longer row
    has loops over its rows, vectorized along them: it keeps its rows; so
    does one that calls the math library (``calls_math_library``)."""
    nodes = (*region.row_inputs, *region.nodes)
    if any(not x.several and _row(x) > MAX_ROW_ELEMENTS for x in nodes):
        return ()
    if calls_math_library(region.nodes):
        return ()
    chosen, used = [], 0
    named = [*((f"in{k}", x) for k, x in enumerate(region.row_inputs)),
             *((f"out{k}", x) for k, x in enumerate(region.outputs))]
    for pointer, x in named:
        size = _ROW_BYTES[CTYPE[x.dtype]] * _row(x) * BLOCK_ROWS
        if _by_columns(_row(x)) and used + size <= budget:
            chosen.append(pointer)
            used += size
    return tuple(chosen)


# --- lane-wise loops over a block of rows (host C) ----------------------------------------

RUNNING = """/* how many rows of the block still run their lane-wise loop */
static inline int64_t isk_running(const uint8_t *restrict go)
{
    int64_t n = 0;
    for (int64_t j = 0; j < ISK_BLOCK; j++)
        n += go[j];
    return n;
}
"""


@dataclass(frozen=True)
class LaneStage:
    """One stage of a staged block: its per-element function, called for
    every row of the block with ``args`` (pointers of the block function),
    once (``flags`` None), or, for a lane-wise loop's step, while rows of
    the block run (``flags``: their predicates). ``finish``: the step has
    IEEE operations only (the same bits in vector and scalar code), so the
    last few running rows finish one by one instead of the whole block."""

    name: str
    args: tuple[str, ...]
    flags: str | None = None
    finish: bool = False


@dataclass(frozen=True)
class LaneBlock:
    """The host's block of ``ISK_BLOCK`` rows for a region with lane-wise
    ``while`` loops: the region in stages, each a per-element function the
    block calls for every row (so the compiler vectorizes it), values
    between stages in block-local arrays. A loop is an init stage (carry in,
    first predicate) and a step stage run while any row of the block runs:
    every row computes the step and keeps its carry, bit for bit, where its
    predicate had failed (a select), as the reference's frozen lanes do."""

    arrays: tuple[tuple[str, str, int], ...]  # (C type, name, elements per row)
    stages: tuple[LaneStage, ...]
    functions: str  # the stages' functions, host C
    helpers: tuple[str, ...]  # host helpers they call (``HOST_HELPERS`` keys)
    math: frozenset[str]
    data: tuple[str, ...]
    columns: tuple[str, ...] = ()  # kernel pointers the block copies to and from columns
    column_arrays: frozenset[str] = frozenset()  # its arrays laid out by columns


def lane_block(name: str, region, index, modes: dict) -> LaneBlock | None:
    """The staged block of a region with top-level lane-wise ``while``
    loops (one predicate per pixel), or None: a region without one, or
    whose block-local arrays would pass ``LANE_BYTES``. Its arrays of rows
    GCC does not interleave are laid out by columns, and so are the kernel's
    rows (``column_pointers``) that fit the budget its arrays leave."""
    if not any(_lane_loop(n) for n in region.nodes):
        return None
    staged = _Lanes(name, region, index, modes).build()
    if staged is None:
        return None
    used = sum(_ROW_BYTES[c] * n * BLOCK_ROWS for c, _, n in staged.arrays)
    columns = column_pointers(region, LANE_BYTES - used)
    return _Lanes(name, region, index, modes, columns).build() if columns else staged


def _lane_loop(node: Node) -> bool:
    if node.op is not Op.WHILE:
        return False
    rows = region_rows(node, region_pixels(node))
    cond = node.attrs["cond"].graph
    return rows is not None and rows.bodies["cond"].kinds[cond.outputs[0]] == ROWS


class _Lanes:
    """Builds a ``LaneBlock``: the region's nodes cut at its lane-wise loops
    into pieces (row segments and loops), each a stage. A value a later
    piece reads lives in a block-local array (``isk_l<n>``); a region input
    or output in its kernel pointer; a loop's result in its carry's array."""

    def __init__(self, name: str, region, index, modes: dict, columns=()):
        self.name = name.removesuffix("_point")
        self.columns = tuple(columns)  # kernel pointers read and written by columns
        self.math = calls_math_library(region.nodes)  # then its arrays keep their rows
        self.by_columns = set(columns)  # every pointer of the block laid out by columns
        self.region, self.index, self.modes = region, index, modes
        self.source: dict[Node, str] = {x: f"in{k}" for k, x in enumerate(region.row_inputs)}
        pointers = [x for x in region.whole_inputs if x.op is not Op.CONST]
        self.source.update({x: f"w{k}" for k, x in enumerate(pointers)})
        self.target: dict[Node, str] = {x: f"out{k}" for k, x in enumerate(region.outputs)}
        self.source.update(self.target)
        self.arrays: list[tuple[str, str, int]] = []
        self.stages: list[LaneStage] = []
        self.bodies: list[CBody] = []
        self.last_loop: Node | None = None

    def build(self) -> LaneBlock | None:
        pieces = self._pieces()
        reads = [{x for n in _nodes(p) for x in n.inputs} - set(_nodes(p)) for p in pieces]
        for k, piece in enumerate(pieces):
            if isinstance(piece, Node):
                self._loop(piece, k)
            else:
                self._segment(piece, set().union(*reads[k + 1:]), k)
        if sum(_ROW_BYTES[c] * n * BLOCK_ROWS for c, _, n in self.arrays) > LANE_BYTES:
            return None
        return LaneBlock(tuple(self.arrays), tuple(self.stages),
                         "\n".join([RUNNING, *(b.host_function for b in self.bodies)]),
                         tuple(sorted({h for b in self.bodies for h in b.host_helpers})),
                         frozenset().union(*(b.math for b in self.bodies)),
                         tuple(dict.fromkeys(d for b in self.bodies for d in b.data)),
                         self.columns, frozenset(self.by_columns) - set(self.columns))

    def _pieces(self) -> list:
        """Row segments (lists of nodes) and lane-wise loops, in tape order;
        a loop's gets are not computed (its carries' arrays are its
        results); the segment after a loop, which always exists, copies
        those that are outputs of the region."""
        pieces: list = [[]]
        for node in self.region.nodes:
            if _lane_loop(node):
                pieces += [node, []]
            elif not (node.op is Op.GET and _lane_loop(node.inputs[0])):
                pieces[-1].append(node)
        return pieces

    def _array(self, dtype, row: int) -> str:
        """A block-local array, by columns where its rows are not ``INTERLEAVED``."""
        name = f"isk_l{len(self.arrays)}"
        self.arrays.append((CTYPE[dtype], name, row))
        if _by_columns(row) and not self.math:
            self.by_columns.add(name)
        return name

    def _layout(self, reads, targets) -> frozenset[str]:
        """The pointers of a stage (``in<k>`` for ``reads``, ``out<k>`` for
        ``targets``) bound to block pointers laid out by columns."""
        names = [*((f"in{k}", self.source[x]) for k, x in enumerate(reads)),
                 *((f"out{k}", t) for k, t in enumerate(targets))]
        return frozenset(local for local, bound in names if bound in self.by_columns)

    def _segment(self, nodes: list, read_later: set, k: int) -> None:
        """Row nodes as one stage: it reads what earlier pieces computed and
        writes what later ones read, and the region's outputs."""
        inside = set(nodes)
        rows, whole = {}, {}
        for node in nodes:
            for x, mode in zip(node.inputs, self.modes[node]):
                if x not in inside:
                    (rows if mode == ROWS else whole)[x] = None
        copies = [g for g in self.region.outputs
                  if g.op is Op.GET and g.inputs[0] is self.last_loop]
        rows.update(dict.fromkeys(copies))
        outputs = [n for n in nodes if n in self.target or n in read_later] + copies
        for node in outputs:
            if node not in self.source:
                self.source[node] = self.target[node] = self._array(node.dtype, _row(node))
        if outputs:
            region = _Region(tuple(nodes), tuple(rows), tuple(whole), tuple(outputs))
            columns = self._layout(rows, [self.target[x] for x in outputs])
            body = Emitter(f"{self.name}_s{k}_point", region, self.index, self.modes,
                           columns).emit()
            self._stage(body, [self.target[x] for x in body.outputs])

    def _stage(self, body: CBody, targets: list[str], flags: str | None = None) -> None:
        args = [self.source[x] for x in (*body.row_inputs, *body.whole_inputs)] + targets
        finish = flags is not None and not _transcendental(body.math)
        self.stages.append(LaneStage(body.name, tuple(args), flags, finish))
        self.bodies.append(body)

    def _loop(self, node: Node, k: int) -> None:
        """A lane-wise loop: its carries and predicates in block arrays, an
        init stage and a step stage; its gets read the carries' arrays."""
        n = node.attrs["n_carry"]
        carries = node.attrs["body"].graph.inputs[:n]
        arrays = [self._array(x.dtype, _row(x)) for x in carries]
        flags = self._array(dtypes.bool_, 1)
        self.source.update({g: arrays[g.attrs["index"]] for g in self.region.nodes
                            if g.op is Op.GET and g.inputs[0] is node})
        self.last_loop = node
        rows = region_rows(node, region_pixels(node))
        layout = functools.partial(self._layout, targets=[*arrays, flags])
        self._stage(_loop_init(f"{self.name}_s{k}i_point", node, rows, self.index, layout),
                    [*arrays, flags])
        self._stage(_loop_step(f"{self.name}_s{k}s_point", node, rows, self.index, layout),
                    [*arrays, flags], flags)


@dataclass(frozen=True)
class _Region:
    """A piece of a region, as ``Emitter`` reads one."""

    nodes: tuple[Node, ...]
    row_inputs: tuple[Node, ...]
    whole_inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]


def _transcendental(names) -> bool:
    """Whether a body calls a libm transcendental (``expf`` as ``exp``)."""
    return any(n in TRANSCENDENTAL_NAMES or n[:-1] in TRANSCENDENTAL_NAMES for n in names)


def _nodes(piece) -> list[Node]:
    return [piece] if isinstance(piece, Node) else piece


def _row(x: Node) -> int:
    return math.prod(x.shape[1:])


_ROW_BYTES = {"float": 4, "double": 8, "int32_t": 4, "int64_t": 8, "uint8_t": 1}


def _loop_emitter(name: str, node: Node, rows: RegionRows, index, captures: bool,
                  layout) -> tuple:
    """An emitter whose inputs are the loop's operands (``captures``: only
    the captured ones) and whose outputs are its carries' and predicates'
    arrays; with the operands' values. ``layout(row inputs)``: its pointers
    laid out by columns."""
    n = node.attrs["n_carry"]
    pairs = list(zip(node.inputs, rows.operands))[n if captures else 0:]
    reads = [x for x, m in pairs if m == ROWS]
    whole = [x for x, m in pairs if m == WHOLE]
    carries = node.attrs["body"].graph.inputs[:n]
    outputs = (*carries, node.attrs["cond"].graph.outputs[0])
    region = _Region((), tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(whole)), outputs)
    emitter = Emitter(name, region, index, {}, layout(region.row_inputs))
    emitter.begin()
    values = [emitter.values[x] if m == ROWS else emitter.whole[x] for x, m in pairs]
    return emitter, values


def _stores(carries, values, columns) -> list[Stmt]:
    """``out<k>[...] = value`` for every element of every carry (by columns
    in host C for the pointers in ``columns``)."""
    stmts = []
    for k, (x, value) in enumerate(zip(carries, values)):
        size = _row(x)
        for j, name in enumerate(_names(value).ravel()):
            host = column_at(f"out{k}", j) if f"out{k}" in columns else None
            stmts.append(Assign(f"out{k}[{f'i * {size} + {j}' if size > 1 else 'i'}]", name,
                                host_target=host))
    return stmts


def _loop_init(name: str, node: Node, rows: RegionRows, index, layout) -> CBody:
    """Carry in (each carry's array from its first value) and the first
    predicate of every row."""
    n, cond = node.attrs["n_carry"], node.attrs["cond"].graph
    emitter, values = _loop_emitter(name, node, rows, index, False, layout)
    carries = node.attrs["body"].graph.inputs[:n]
    emitter.stmts += _stores(carries, values[:n], emitter.columns)
    test, (flag,) = emitter.sub_body(cond, values, "q", rows.bodies["cond"])
    emitter.stmts += [*test, Assign(f"out{n}[i]", _scalar(flag), f"first test: "
                                    f"{emitter._label(node)}")]
    return _by_hand(emitter)


def _loop_step(name: str, node: Node, rows: RegionRows, index, layout) -> CBody:
    """One step of every row: the body, the new carry selected by the row's
    predicate (a row that has stopped keeps its carry, bit for bit), and
    the predicate of the new carry for the rows that ran."""
    n, cond, body = node.attrs["n_carry"], node.attrs["cond"].graph, node.attrs["body"].graph
    emitter, caps = _loop_emitter(name, node, rows, index, True, layout)
    label = emitter._label(node)
    emitter.stmts.append(Define("uint8_t", "g", f"out{n}[i]", f"running: {label}"))
    carried = []
    for k, x in enumerate(body.inputs[:n]):
        names = _variables(x, f"a{k}")
        for j, name in enumerate(names.ravel()):
            at = f"i * {_row(x)} + {j}" if _row(x) > 1 else "i"
            host = column_at(f"out{k}", j) if f"out{k}" in emitter.columns else None
            emitter.stmts.append(Define(CTYPE[x.dtype], name, f"out{k}[{at}]", f"carry: {label}",
                                        host))
        carried.append(names)
    stmts, nexts = emitter.sub_body(body, [*carried, *caps], "b", rows.bodies["body"])
    emitter.stmts += stmts
    kept = []
    for k, (x, old, new) in enumerate(zip(body.inputs[:n], carried, nexts)):
        picks = [C_EXPR[Op.SELECT](Ctx(x.dtype, x.dtype, {}), "g", b, a)
                 for a, b in zip(old.ravel(), _names(new).ravel())]
        names = _variables(x, f"n{k}")
        emitter.stmts += [Define(CTYPE[x.dtype], m, e, f"kept where stopped: {label}")
                          for m, e in zip(names.ravel(), picks)]
        kept.append(names)
    emitter.stmts += _stores(body.inputs[:n], kept, emitter.columns)
    test, (flag,) = emitter.sub_body(cond, [*kept, *caps], "q", rows.bodies["cond"])
    emitter.stmts += [*test, Assign(f"out{n}[i]", f"(uint8_t)(g & {_scalar(flag)})",
                                    f"test: {label}")]
    return _by_hand(emitter)


def _by_hand(emitter: Emitter) -> CBody:
    """The body of an emitter whose outputs its statements wrote."""
    region = emitter.region
    whole = tuple(x for x in region.whole_inputs if x.op is not Op.CONST)
    return assemble(emitter.name, emitter.stmts, region.row_inputs, whole, region.outputs,
                    tuple(emitter.data), sorted(emitter.columns))


def called_helpers(text: str, table: dict) -> tuple[str, ...]:
    """The prelude functions ``text`` calls (``table`` keys: ``HELPERS`` or
    ``HOST_HELPERS``), for ``prelude``."""
    return tuple(sorted({helper_for(n) for n in re.findall(r"\bisk_\w+(?=\()", text)}
                        & set(table)))


def prelude(helpers, host: bool = False) -> str:
    """The definitions of the named helpers and of the helpers they call
    (ldexp calls select; host helpers call the quiet comparisons), each once
    and each after its callees; ``host``: from ``HOST_HELPERS``."""
    table = HOST_HELPERS if host else HELPERS
    order: dict[str, None] = {}
    for name in sorted(set(helpers)):
        _add_helper(name, order, table)
    return "".join(table[n] for n in order) + ("\n" if order else "")


def _add_helper(name: str, order: dict, table: dict) -> None:
    if name in order:
        return
    for callee in set(called_helpers(table[name], table)) - {name}:
        _add_helper(callee, order, table)
    order[name] = None
