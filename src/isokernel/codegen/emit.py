"""The one C emitter: a row region of a graph as an SSA body.

The body is a prelude of helper functions and one per-element function

    ISK_INLINE void isk_<name>_point(int64_t i, const double *restrict in0, ...,
                                     double *restrict out0, ...)

that reads row ``i`` of every row input, the whole of every whole input, and
writes row ``i`` of every output. Each node is one ``const`` temporary per
element of its row (``v7``, or ``v7_0, v7_1, ...`` for a row of several
elements); constants are exact hex-float literals; ``where`` is a select
whose both sides were already computed; layout ops (broadcast, reshape,
transpose, slice, rev, pad, concatenate) only rename elements, by applying
the reference's own rule to an array of names; small reductions are
unrolled in NumPy's order. Every line carries its provenance
(``// exp @ model.py:14``).

The body depends on nothing of its caller: the CPU host wrapper
(``host.py``) calls it over a slice of rows, and a CUDA wrapper can call the
same function from a grid-stride loop after defining ``ISK_INLINE`` as a
device function. The host's copy (``host_function``) differs in one respect:
its kernels report their floating-point flags to NumPy's error state, so its
float ordering comparisons are quiet (no FE_INVALID at a NaN, as NumPy's)
and its helpers raise the flags NumPy's loops raise (``HOST_HELPERS``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..ir import EVAL, Node, Op, dtypes
from ..ir.ops import ELEMENTWISE, LAYOUT, REDUCE, TABLE
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
"""Largest row (elements per pixel) of a node the emitter unrolls."""
MAX_REDUCED = 7
"""Largest reduction it unrolls, in NumPy's order for a fresh operand
(``reduce.plan``: below 8 elements a pairwise leaf is a left fold); from 8
on, pairwise summation makes the order depend on the memory layout, so
those reductions run whole."""


class Unsupported(Exception):
    """A node the emitter has no exact C form for."""


@dataclass(frozen=True)
class Body:
    name: str  # the per-element function
    function: str  # its definition
    helpers: tuple[str, ...]  # prelude functions it calls (``c_expr.HELPERS`` keys)
    row_inputs: tuple[Node, ...]
    whole_inputs: tuple[Node, ...]  # non-constant whole inputs, passed as pointers
    outputs: tuple[Node, ...]
    math: frozenset[str]  # libm functions called, e.g. {"exp", "sqrtf"}
    data: tuple[str, ...] = ()  # static arrays it reads (the tables of look-ups)
    host_function: str = ""  # the host C copy: quiet comparisons (module docstring)
    host_helpers: tuple[str, ...] = ()  # its prelude functions (``HOST_HELPERS`` keys)

    @property
    def text(self) -> str:
        """Prelude, data and function: everything a wrapper needs besides
        ``ISK_INLINE``, <math.h> and <stdint.h>."""
        return prelude(self.helpers) + "".join(self.data) + self.function


def supports(node: Node, modes: tuple[str, ...]) -> bool:
    """True when ``emit_body`` can emit ``node`` (read with ``modes``)."""
    if any(math.prod(x.shape[1:] if m == "rows" else x.shape) > MAX_ROW_ELEMENTS
           for x, m in zip(node.inputs, modes)):
        return False
    if math.prod(node.shape[1:]) > MAX_ROW_ELEMENTS:
        return False
    if node.op in LAYOUT:
        return True
    if node.op in REDUCE:
        # NumPy folds a fresh (C-contiguous) operand in index order; a view's
        # order follows its strides, so only fresh operands are unrolled
        x = node.inputs[0]
        reduced = math.prod(x.shape[a] for a in node.attrs["axes"])
        fresh = x.op in ELEMENTWISE or x.op in REDUCE
        return fresh and 0 < reduced <= MAX_REDUCED
    if node.op not in ELEMENTWISE | TABLE:
        return False
    names = ["x"] * len(node.inputs)
    return C_EXPR[node.op](_ctx(node), *names, **_rule_attrs(node)) is not None


def _ctx(node: Node, host: bool = False) -> Ctx:
    operand = node.inputs[-1] if node.op is Op.SELECT else node.inputs[0]
    return Ctx(operand.dtype, node.dtype, dict(node.attrs), host)


def _rule_attrs(node: Node) -> dict:
    return {"dtype": node.attrs["dtype"]} if node.op is Op.CAST else {}


class _Emitter:
    def __init__(self, name: str, region, index, modes: dict):
        self.name = name
        self.region = region
        self.index = index  # node -> its number in the graph (names and comments)
        self.modes = modes
        self.lines: list[str] = []
        self.host_lines: list[str] = []  # the host copy (quiet comparisons)
        self.values: dict[Node, np.ndarray] = {}  # row names, shape (1, *row shape)
        self.whole: dict[Node, np.ndarray] = {}  # names of values read whole, their shape
        self.math: set[str] = set()
        self.data: dict[str, None] = {}  # table definitions, in first-use order

    def emit(self) -> Body:
        params = self._inputs()
        for node in self.region.nodes:
            self._node(node)
        params += self._outputs()
        head = f"ISK_INLINE void {self.name}(int64_t i, {', '.join(params)})"
        text = "\n".join([head, "{", *self.lines, "}"]) + "\n"
        host = "\n".join([head, "{", *self.host_lines, "}"]) + "\n"
        whole = tuple(x for x in self.region.whole_inputs if x.op is not Op.CONST)
        return Body(self.name, text, _called(text, HELPERS), tuple(self.region.row_inputs),
                    whole, tuple(self.region.outputs), frozenset(self.math), tuple(self.data),
                    host, _called(host, HOST_HELPERS))

    def _line(self, text: str, host: str | None = None) -> None:
        """A line of the body, and of its host copy (``host``, when it differs)."""
        self.lines.append(text)
        self.host_lines.append(text if host is None else host)

    def _inputs(self) -> list[str]:
        params = []
        for k, x in enumerate(self.region.row_inputs):
            size, ctype = math.prod(x.shape[1:]), CTYPE[x.dtype]
            params.append(f"const {ctype} *restrict in{k}")
            self.values[x] = self._load(x, f"in{k}", size, (1, *x.shape[1:]), rows=True)
        for k, x in enumerate(xs for xs in self.region.whole_inputs if xs.op is not Op.CONST):
            params.append(f"const {CTYPE[x.dtype]} *restrict w{k}")
            self.whole[x] = self._load(x, f"w{k}", x.aval.size, x.shape, rows=False)
        for x in self.region.whole_inputs:
            if x.op is Op.CONST:
                value = x.attrs["value"].value
                names = [literal(v, x.dtype) for v in value.ravel()]
                self.whole[x] = np.array(names, dtype=object).reshape(value.shape)
        return params

    def _load(self, x: Node, pointer: str, size: int, shape, rows: bool) -> np.ndarray:
        ctype, base = CTYPE[x.dtype], self._base(x)
        names = []
        for j in range(size):
            at = (f"i * {size} + {j}" if size > 1 else "i") if rows else str(j)
            name = f"{base}_{j}" if size > 1 else base
            self._line(f"    const {ctype} {name} = {pointer}[{at}];"
                       f"  // {'row of ' if rows else ''}{self._label(x)}")
            names.append(name)
        return np.array(names, dtype=object).reshape(shape)

    def _base(self, node: Node) -> str:
        return f"v{self.index(node)}"

    def _operands(self, node: Node) -> list[np.ndarray]:
        modes = self.modes.get(node) or ("rows",) * len(node.inputs)
        return [self.whole[x] if mode == "whole" else self.values[x]
                for x, mode in zip(node.inputs, modes)]

    def _label(self, node: Node) -> str:
        label = f"%{self.index(node)} {node.op.value}"
        return f"{label} @ {node.where}" if node.where else label

    def _outputs(self) -> list[str]:
        params = []
        for k, node in enumerate(self.region.outputs):
            size = math.prod(node.shape[1:])
            params.append(f"{CTYPE[node.dtype]} *restrict out{k}")
            for j, name in enumerate(self.values[node].ravel()):
                at = f"i * {size} + {j}" if size > 1 else "i"
                self._line(f"    out{k}[{at}] = {name};")
        return params

    def _node(self, node: Node) -> None:
        if node.op in LAYOUT:
            self.values[node] = self._layout(node)
        elif node.op in REDUCE:
            self.values[node] = self._reduce(node)
        else:
            if node.op in TABLE:
                self.data[table_data(dict(node.attrs), node.dtype)] = None
            operands = [x.ravel() for x in self._operands(node)]
            exprs = [[self._expr(node, [o[j] for o in operands], host)
                      for j in range(math.prod(node.shape[1:]))] for host in (False, True)]
            self.values[node] = self._define(node, *exprs)

    def _expr(self, node: Node, names: list[str], host: bool = False) -> str:
        expr = C_EXPR[node.op](_ctx(node, host), *names, **_rule_attrs(node))
        if expr is None:
            raise Unsupported(f"{node.op.value} of {dtypes.SHORT[node.dtype]}")
        if not host:
            self.math.update(re.findall(r"\b([a-z][a-z0-9]*)\(", expr))
        return expr

    def _define(self, node: Node, exprs: list[str], host_exprs: list[str]) -> np.ndarray:
        base, ctype = self._base(node), CTYPE[node.dtype]
        names = []
        for j, (expr, host) in enumerate(zip(exprs, host_exprs)):
            name = f"{base}_{j}" if len(exprs) > 1 else base
            self._line(f"    const {ctype} {name} = {expr};  // {self._label(node)}",
                       f"    const {ctype} {name} = {host};  // {self._label(node)}")
            names.append(name)
        return np.array(names, dtype=object).reshape((1, *node.shape[1:]))

    def _layout(self, node: Node) -> np.ndarray:
        """The reference rule applied to arrays of names, with the pixel axis
        of length 1: the rule itself decides which element goes where."""
        attrs = dict(node.attrs)
        if node.op in (Op.BROADCAST, Op.RESHAPE):
            attrs["shape"] = (1, *attrs["shape"][1:])
        elif node.op is Op.SLICE:
            attrs["limit"] = (1, *attrs["limit"][1:])
        return np.array(EVAL[node.op](*self._operands(node), **attrs), dtype=object)

    def _reduce(self, node: Node) -> np.ndarray:
        """NumPy's order (``reduce.plan``): a sum whose reduced axes are not
        all trailing adds the fold of each trailing run to an accumulator,
        in C order; everything else is one left fold in C order."""
        (x,) = node.inputs
        names = self.values[x]
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


def emit_body(name: str, region, index, modes: dict | None = None) -> Body:
    """The body of ``region`` (anything with ``nodes``, ``row_inputs``,
    ``whole_inputs`` and ``outputs`` in tape order); ``index(node)`` numbers
    the temporaries."""
    return _Emitter(name, region, index, modes or {}).emit()


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
