"""Running a compiled function block by block along the pixel axis.

The *pixel axis* is axis 0 of the inputs whose leading dimension is the
largest one (the pixel count P, ``codegen.pixel.pixel_count``; a graph whose
P is 0 has no pixel axis and runs whole). A graph is *row-independent* when row i of
every value with a pixel axis depends only on row i of the pixel inputs:
every op on such a value is pointwise along axis 0 or keeps axis 0 in place
(broadcasts, reshapes, transposes, slices, pads, reverses and reductions
over other axes; matrix products only with the pixel axis as a batch axis).
``pixel_rows`` decides this per node and refuses, naming the op and the
user's line, what would not give the unchunked bits: reductions over axis 0,
products that run the pixel rows through BLAS (whose blocking depends on
the row count), values that span the pixel axis without coming from the
pixel inputs (a constant of length P).

``resize_rows`` then rewrites the graph for n rows instead of P — only the
shape attributes that carry P change, every aval is re-derived by the SHAPE
rules, and constants (including any the model computed from P) are kept —
so each block runs the very program of the unchunked call on its rows and
produces the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..backends.executable import Executable
from ..codegen.pixel import ROWS, WHOLE, pixel_count, row_modes
from ..ir import SHAPE, Attrs, Aval, Graph, IsokernelError, Node, Op, SubGraph


class BlockError(IsokernelError, ValueError):
    """A graph that cannot run block by block along the pixel axis."""


_FIX = "call the function without block=, or move the step out of the blocked function"


def _refuse(node: Node, problem: str, fix: str = _FIX) -> BlockError:
    where = f" at {node.where}" if node.where else ""
    return BlockError(f"{node.op.value}{where}: {problem}, so it cannot run block by block "
                      f"along the pixel axis; {fix}")


_SPANS = ("combines pixel rows with a value that spans the pixel axis without coming from "
          "the pixel inputs (e.g. a constant array of length P)")

# Why an op that ``row_modes`` does not accept on pixel rows breaks them.
_WHY = {
    Op.BROADCAST: "moves the pixel axis away from axis 0",
    Op.TRANSPOSE: "moves the pixel axis away from axis 0",
    Op.RESHAPE: "reshapes across the pixel axis",
    Op.SLICE: "slices the pixel axis",
    Op.PAD: "pads the pixel axis",
    Op.CONCATENATE: "concatenates along the pixel axis",
}
_ALONG = "works along the pixel axis (axis 0)"


def _rows_problem(node: Node, rows: list[bool], pixels: int) -> str | None:
    """None if ``node`` (with pixel-row operands ``rows``) keeps the pixel
    rows at axis 0 row for row, else the reason it does not. The decision is
    the pixel-axis analysis's own (``row_modes``), plus provenance: a value
    read by rows must carry the pixel rows, and one that does may not be
    read whole."""
    if node.op is Op.FUSED:
        return _rows_fused(node, rows, pixels)
    if node.op is Op.DOT_GENERAL:
        return _rows_dot(node, rows, pixels)
    modes = row_modes(node, pixels)
    if modes is None:
        return _WHY.get(node.op, _ALONG)
    for carried, mode in zip(rows, modes):
        if mode == ROWS and not carried:
            return _SPANS
        if mode == WHOLE and carried:
            return _WHY.get(node.op, _ALONG)
    return None


def _rows_dot(node, rows, pixels):
    (ba, bb) = node.attrs["batch"]
    if all(rows) and ba[:1] == (0,) and bb[:1] == (0,):
        return None
    return "multiplies over the pixel rows through BLAS, whose blocking depends on the " \
           "row count (a block would not give the same bits); make the pixel axis a batch " \
           "axis of both operands (a per-pixel product)"


def _rows_fused(node, rows, pixels):
    """A fused form is row-independent when its body is, with the body's
    pixel inputs exactly the pixel-row operands."""
    try:
        body = pixel_rows(node.attrs["body"].graph, pixels)
    except BlockError as error:
        return f"its body ({node.attrs['form']}) cannot: {error}"
    inner = [body[x] for x in node.attrs["body"].graph.inputs]
    return None if inner == list(rows) else _SPANS


def pixel_rows(graph: Graph, pixels: int) -> dict[Node, bool]:
    """For every node: True when it carries the pixel rows at axis 0 (row i
    from row i of the pixel inputs, or the same for every row), False when
    it has no pixel axis. Raises ``BlockError`` for a graph that is not
    row-independent."""
    rows: dict[Node, bool] = {}
    for node in graph.nodes:
        if node.op is Op.INPUT:
            rows[node] = node.aval.ndim >= 1 and node.aval.shape[0] == pixels
            continue
        operand_rows = [rows[x] for x in node.inputs]
        if any(operand_rows):
            problem = _rows_problem(node, operand_rows, pixels)
            if problem is not None:
                raise _refuse(node, problem)
            rows[node] = True
        else:
            rows[node] = _uniform_rows(node, pixels)
    return rows


def _uniform_rows(node: Node, pixels: int) -> bool:
    """A broadcast of a value without a pixel axis onto one: every row is the
    same, so it is a pixel-row value like any other."""
    if node.op is not Op.BROADCAST or node.aval.shape[:1] != (pixels,):
        return False
    dims, operand = node.attrs["dims"], node.inputs[0].aval
    return not (dims[:1] == (0,) and operand.shape[:1] == (pixels,))


def _resize_body(attrs, n, node):
    """A fused node's body for n rows (P is the operands' leading length)."""
    graph = attrs["body"].graph
    pixels = max(x.aval.shape[0] for x in node.inputs if x.aval.ndim >= 1)
    return {"body": SubGraph(resize_rows(graph, pixel_rows(graph, pixels), n))}


# The attributes that carry the row count, per op, rewritten for n rows.
_RESIZE = {
    Op.FUSED: _resize_body,
    Op.INPUT: lambda a, n, node: {"aval": Aval((n, *a["aval"].shape[1:]), a["aval"].dtype)},
    Op.BROADCAST: lambda a, n, node: {"shape": (n, *a["shape"][1:])},
    Op.RESHAPE: lambda a, n, node: {"shape": (n, *a["shape"][1:])},
    Op.SLICE: lambda a, n, node: {"limit": (n, *a["limit"][1:])},
}


def resize_rows(graph: Graph, rows: dict[Node, bool], n: int) -> Graph:
    """``graph`` for ``n`` pixel rows: pixel-row nodes get their row-count
    attributes rewritten and their avals re-derived; every other node
    (constants included) is kept as it is."""
    new: dict[Node, Node] = {}
    for node in graph.nodes:
        inputs = tuple(new[x] for x in node.inputs)
        if not rows[node] and inputs == node.inputs:
            new[node] = node
            continue
        attrs = node.attrs
        if rows[node] and node.op in _RESIZE:
            attrs = Attrs(dict(attrs) | _RESIZE[node.op](attrs, n, node))
        aval = SHAPE[node.op](*(x.aval for x in inputs), **attrs)
        new[node] = Node(node.op, inputs, attrs, aval, node.where)
    return Graph(tuple(new[x] for x in graph.inputs), tuple(new[x] for x in graph.nodes),
                 tuple(new[x] for x in graph.outputs), graph.input_names, graph.name)


class BlockRunner:
    """Calls a compiled function ``block`` pixel rows at a time: pixel inputs
    are sliced (views, no copy), each block runs the same program resized to
    its rows, and results are written into outputs allocated once for the
    whole call. Outputs without a pixel axis are the same in every block and
    are taken from the first."""

    def __init__(self, compiled, block: int):
        if not isinstance(block, int) or isinstance(block, bool) or block < 1:
            raise ValueError(f"block must be a positive number of pixel rows, got {block!r}")
        self.compiled = compiled
        self.block = block
        self.graph = compiled.graph
        self.pixels = pixel_count(self.graph)
        self.rows = pixel_rows(self.graph, self.pixels) if self.pixels else {}
        self._executables = {self.pixels: compiled.executable}

    def executable(self, n: int) -> Executable:
        """The strategy's executable for ``n`` pixel rows."""
        if n not in self._executables:
            graph = resize_rows(self.graph, self.rows, n)
            strategy, options = self.compiled.lowered.strategy, self.compiled.lowered.options
            self._executables[n] = strategy.build(strategy.plan(graph, options), options)
        return self._executables[n]

    def call_flat(self, arrays: Sequence) -> tuple:
        if not self.pixels or self.pixels <= self.block:
            return self.compiled.executable.call_flat(arrays)
        graph = self.graph
        pixel_in = [self.rows[x] for x in graph.inputs]
        outs = [None] * len(graph.outputs)
        for start in range(0, self.pixels, self.block):
            stop = min(self.pixels, start + self.block)
            args = [a[start:stop] if p else a for a, p in zip(arrays, pixel_in)]
            for k, value in enumerate(self.executable(stop - start).call_flat(args)):
                node = graph.outputs[k]
                if outs[k] is None:
                    outs[k] = _empty_like(value, node.aval.shape) if self.rows[node] else value
                if self.rows[node]:
                    outs[k][start:stop] = value
        return tuple(outs)


def _empty_like(value, shape):
    """An uninitialised array for the whole call, on the block result's device
    (NumPy for host strategies, the array's own namespace otherwise)."""
    if isinstance(value, np.ndarray):
        return np.empty(shape, dtype=value.dtype)
    return value.__array_namespace__().empty(shape, dtype=value.dtype)
