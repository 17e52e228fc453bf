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
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..ir import EVAL, Graph, Node, Op, dtypes
from ..ir.ops import ELEMENTWISE, LAYOUT, LEAF, REDUCE, TABLE
from .c_expr import (
    C_EXPR,
    CTYPE,
    HELPERS,
    HOST_HELPERS,
    REDUCE_IDENTITY,
    SHORT,
    Ctx,
    helper_for,
    literal,
    table_data,
)
from .reduce import plan as reduce_plan

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
(``reduce.plan``: below 8 elements a pairwise leaf is a left fold); from 8
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
    or an output."""

    target: str
    expr: str
    note: str = ""
    host: str | None = None

    def lines(self, host: bool, depth: int) -> list[str]:
        expr = self.host if host and self.host is not None else self.expr
        return [f"{INDENT * depth}{self.target} = {expr};{_note(self.note)}"]


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


@dataclass(frozen=True)
class For:
    """``for (int64_t index = start; index < stop; index++) { body }``;
    ``stop`` is a literal (a static trip count) or a value of the pixel (a
    per-pixel one)."""

    index: str
    stop: str
    body: tuple[Stmt, ...]
    note: str
    carries: tuple[Carry, ...] = ()
    start: str = "0"

    def lines(self, host: bool, depth: int) -> list[str]:
        pad, k = INDENT * depth, self.index
        head = f"{pad}for (int64_t {k} = {self.start}; {k} < {self.stop}; {k}++) {{"
        inner = (*self.body, *_updates(self.carries, self.note))
        return [*render(tuple(c.declare(self.note) for c in self.carries), host, depth),
                head + _note(self.note), *render(inner, host, depth + 1), f"{pad}}}"]


@dataclass(frozen=True)
class While:
    """``while (flag) { body }``: ``flag`` holds the per-pixel condition
    ``cond``, which ``test`` computes from the carried values, once before
    the loop (in a block of its own) and again at the end of every
    iteration."""

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
                *render(inner, host, depth + 1), f"{pad}}}"]


Stmt = Define | Declare | Assign | Block | For | While
"""A statement of a body; each renders its lines in plain C or host C."""


def render(stmts, host: bool = False, depth: int = 1) -> list[str]:
    """The lines of ``stmts`` in plain C (the CUDA wrappers') or host C."""
    return [line for s in stmts for line in s.lines(host, depth)]


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


def assemble(name: str, stmts, row_inputs, whole_inputs, outputs, data=()) -> CBody:
    """The body whose function runs ``stmts``: emitted from a region or built
    by hand. Row input ``k`` is ``in<k>``, whole input ``k`` is ``w<k>`` and
    output ``k`` is ``out<k>``; row ``i`` is the one to compute."""
    head = signature(name, row_inputs, whole_inputs, outputs)
    text, host = ("\n".join([head, "{", *render(stmts, h), "}"]) + "\n" for h in (False, True))
    return CBody(name, text, _called(text, HELPERS), tuple(row_inputs), tuple(whole_inputs),
                 tuple(outputs), _math(text), tuple(data), host, _called(host, HOST_HELPERS))


def _math(text: str) -> frozenset[str]:
    """The C library functions ``text`` calls (comments aside)."""
    code = re.sub(r"//[^\n]*", "", text)
    return frozenset(re.findall(r"\b([a-z][a-z0-9]*)\(", code))


# --- which nodes it emits -----------------------------------------------------------------

def supports(node: Node, modes: tuple[str, ...]) -> bool:
    """True when ``emit_body`` can emit ``node`` (read with ``modes``)."""
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
    names = ["x"] * len(node.inputs)
    return C_EXPR[node.op](_ctx(node), *names, **_rule_attrs(node)) is not None


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

    def __init__(self, name: str, region, index, modes: dict):
        self.name = name
        self.region = region
        self.index = index  # node -> its number in its graph (names and comments)
        self.modes = modes
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
                        self.region.outputs, tuple(self.data))

    def bind(self, node: Node, value) -> None:
        """Give ``node`` a value of this body (e.g. an output computed by a loop)."""
        self.values[node] = value

    def node(self, node: Node) -> None:
        """Emit ``node``, whose operands are emitted."""
        if self._ends_loop(node):
            self._close()
        if node in self.loops:
            self._in_loop(node)
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
        self.stmts.append(For(index, stop, tuple(body), note, carries, start))
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

    def sub_body(self, graph: Graph, bindings: list, prefix: str) -> tuple[list, list]:
        """The statements computing ``graph`` with its inputs bound to
        ``bindings`` (values of this body: carried variables, a loop index),
        in a scope of their own, its names prefixed with ``prefix``; and the
        values of its outputs. The caller checks that ``graph`` is row-local
        (``pixel.row_modes``) and within the caps of ``supports``; an op with
        no C form raises ``Unsupported``."""
        nodes = [n for n in graph.nodes if n.op not in LEAF]
        self.loops.update(_row_loops(nodes))
        self.escapes |= _escapes(nodes, self.loops, graph.outputs)
        with self._scope(graph.index, prefix) as stmts:
            self.values.update(zip(graph.inputs, bindings))
            for x in graph.nodes:
                if x.op is Op.CONST:
                    self.values[x] = self._constant(x)
            for node in nodes:
                self.node(node)
            self._close()
            results = [self.values[x] for x in graph.outputs]
        return stmts, results

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
        names = []
        for j in range(size):
            at = (f"i * {size} + {j}" if size > 1 else "i") if rows else str(j)
            name = f"{base}_{j}" if size > 1 else base
            note = f"{'row of ' if rows else ''}{self._label(x)}"
            self.stmts.append(Define(ctype, name, f"{pointer}[{at}]", note))
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
            for j, name in enumerate(_names(value).ravel()):
                at = f"i * {size} + {j}" if size > 1 else "i"
                self.stmts.append(Assign(f"out{n}[{at}]", name))

    def _elementwise(self, node: Node) -> np.ndarray:
        if node.op in TABLE:
            self.data[table_data(dict(node.attrs), node.dtype)] = None
        operands = [_names(x).ravel() for x in self._operands(node)]
        exprs = [[self._expr(node, [o[j] for o in operands], host)
                  for j in range(math.prod(node.shape[1:]))] for host in (False, True)]
        return self._define(node, *exprs)

    def _expr(self, node: Node, names: list[str], host: bool = False) -> str:
        expr = C_EXPR[node.op](_ctx(node, host), *names, **_rule_attrs(node))
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
        """NumPy's order (``reduce.plan``): a sum whose reduced axes are not
        all trailing adds the fold of each trailing run to an accumulator,
        in C order; everything else is one left fold in C order."""
        (x,) = node.inputs
        names = _names(self.values[x])
        layout = reduce_plan(names.shape, node.attrs["axes"], node.op)
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


def emit_body(name: str, region, index, modes: dict | None = None) -> CBody:
    """The body of ``region`` (anything with ``nodes``, ``row_inputs``,
    ``whole_inputs`` and ``outputs`` in tape order); ``index(node)`` numbers
    the temporaries."""
    return Emitter(name, region, index, modes or {}).emit()


def _called(text: str, table: dict) -> tuple[str, ...]:
    """The prelude functions ``text`` calls (``table`` keys)."""
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
    for callee in set(_called(table[name], table)) - {name}:
        _add_helper(callee, order, table)
    order[name] = None
