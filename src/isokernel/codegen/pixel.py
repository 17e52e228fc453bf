"""Pixel-axis analysis: which nodes of a graph are row-independent along
axis 0, and the split of the graph into row regions and the ops between them.

Axis 0 of the graph's inputs is the pixel axis (length ``P``). A node is
*row-local* when row ``i`` of its result depends only on row ``i`` of its
row operands and on whole values that do not carry the pixel axis: every
elementwise op, a broadcast that keeps or introduces axis 0, and reductions
and layout ops that leave axis 0 alone. Everything else (a reduction over
the pixels, a flip of axis 0, a matrix product whose BLAS blocking could
depend on the row count) runs whole, by the reference rules.

The split orders the graph into stages: ``Outside`` groups (whole ops, in
tape order) and ``RowRegion`` s (row-local nodes that one pass over the rows
computes). A region reads some values by rows and some whole, and writes
every value a later stage or the caller needs as a full array.

Control flow (``cond``, ``while``, ``scan``, ``checkpoint``) is row-local
when its bodies are: the same analysis runs on each body with its inputs'
modes, and a body may also compute values without the pixel axis (a loop
counter), which are the same for every row. ``region_rows`` says how such a
node reads its operands and how each body runs; ``block_attrs`` rewrites a
row-local node (bodies included) for a block of fewer rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace

from ..ir import SHAPE, Attrs, Graph, Node, Op, SubGraph
from ..ir.ops import CONTROL, ELEMENTWISE, LEAF, REDUCE, TABLE

ROWS, WHOLE = "rows", "whole"


def _elementwise(node: Node, pixels: int):
    return (ROWS,) * len(node.inputs)


def _broadcast(node: Node, pixels: int):
    (x,) = node.inputs
    dims = node.attrs["dims"]
    keeps_rows = x.aval.ndim > 0 and dims[0] == 0 and x.shape[0] == pixels
    return (ROWS,) if keeps_rows else (WHOLE,)


def _keeps_axis0(test: Callable[[dict], bool]):
    def rule(node: Node, pixels: int):
        x = node.inputs[0]
        if x.aval.ndim == 0 or x.shape[0] != pixels or not test(node.attrs):
            return None
        return (ROWS,) + (WHOLE,) * (len(node.inputs) - 1)
    return rule


def _concatenate(node: Node, pixels: int):
    if node.attrs["axis"] == 0:
        return None
    return (ROWS,) * len(node.inputs)


ROW_RULES: dict[Op, Callable] = {
    **{op: _elementwise for op in ELEMENTWISE | TABLE},
    **{op: _keeps_axis0(lambda a: 0 not in a["axes"]) for op in REDUCE},
    Op.BROADCAST: _broadcast,
    Op.RESHAPE: _keeps_axis0(lambda a: len(a["shape"]) > 0),
    Op.TRANSPOSE: _keeps_axis0(lambda a: a["perm"][0] == 0),
    Op.SLICE: _keeps_axis0(lambda a: (a["start"][0], a["stride"][0]) == (0, 1)),
    Op.REV: _keeps_axis0(lambda a: 0 not in a["axes"]),
    Op.PAD: _keeps_axis0(lambda a: (a["lo"][0], a["hi"][0], a["interior"][0]) == (0, 0, 0)),
    Op.CONCATENATE: _concatenate,
    **{op: lambda node, pixels: _control(node, pixels)
       for op in (Op.COND, Op.WHILE, Op.SCAN, Op.CHECKPOINT)},
    Op.GET: lambda node, pixels: _get(node, pixels),
    Op.GATHER: lambda node, pixels: None,  # an index may name any row
    Op.SCATTER: lambda node, pixels: None,
    Op.SORT: lambda node, pixels: None,  # runs whole (NumPy's sort)
    Op.FFT: lambda node, pixels: None,  # runs whole (NumPy's pocketfft)
}
"""For each row-local op: how a node reads each operand (``ROWS`` or
``WHOLE``), or None when this node of the op is not row-local. A table
look-up is pointwise in its abscissa and layer (the table rides in the
node). A control-flow node is row-local when its bodies are
(``region_rows``), a get when it reads a result with the pixel axis of such
a node. A fused form has no rule: the strategies that partition run its
composition, so they unfuse the graph first (a fused node that reached
``partition`` would run whole, by the reference); neither have the reverse
passes of a loop (``while_lin``, ``while_vjp``), which run whole."""
# RESHAPE and SLICE also need the result's axis 0 to be the pixel axis,
# which ``row_modes`` checks for every op with one result.


def row_modes(node: Node, pixels: int) -> tuple[str, ...] | None:
    """How a row-local ``node`` reads its operands, or None."""
    rule = ROW_RULES.get(node.op)
    if rule is None:
        return None
    if not node.several and (node.aval.ndim == 0 or node.shape[0] != pixels):
        return None
    return rule(node, pixels)


# --- control flow: row-local bodies -------------------------------------------------------

@dataclass(frozen=True, eq=False)
class BodyModes:
    """How a body of a row-local region node runs on the pixel rows."""

    graph: Graph
    kinds: dict  # every node: ROWS (axis 0 is the pixel axis) or WHOLE (no pixel axis)
    modes: dict  # every node of kind ROWS but the inputs: how it reads its operands

    def needed(self, outputs) -> list[Node]:
        """The nodes (inputs and constants aside) that ``outputs`` depend on,
        in tape order."""
        wanted = set(outputs)
        for node in reversed(self.graph.nodes):
            if node in wanted:
                wanted.update(node.inputs)
        return [n for n in self.graph.nodes if n in wanted and n.op not in LEAF]


@dataclass(frozen=True, eq=False)
class RegionRows:
    """A row-local control-flow node: how it reads each operand, and how each
    body runs, by attribute (``branches``: one per branch)."""

    operands: tuple[str, ...]
    bodies: dict  # attribute name -> BodyModes, or a tuple of them


def body_modes(graph: Graph, inputs, pixels: int) -> BodyModes | None:
    """The body ``graph`` on the pixel rows, its inputs read as ``inputs``
    (ROWS or WHOLE): every node either row-local on values of the right kinds
    (``row_modes``), or computed from whole values only and without the
    pixel axis (the same for every row). None when a node is neither."""
    kinds = dict(zip(graph.inputs, inputs))
    modes = {}
    for node in graph.nodes:
        if node in kinds:
            continue
        found = None if node.op is Op.CONST else row_modes(node, pixels)
        if found is not None and all(kinds[x] == m for x, m in zip(node.inputs, found)):
            kinds[node], modes[node] = ROWS, found
        elif all(kinds[x] == WHOLE for x in node.inputs) and not _has_pixel_axis(node, pixels):
            kinds[node] = WHOLE
        else:
            return None
    return BodyModes(graph, kinds, modes)


def _has_pixel_axis(node: Node, pixels: int) -> bool:
    return any(a.ndim and a.shape[0] == pixels for a in node.avals)


def _operand_modes(operands, pixels: int) -> tuple[str, ...]:
    return tuple(ROWS if x.aval.ndim and x.shape[0] == pixels else WHOLE for x in operands)


def region_pixels(node: Node) -> int:
    """P of a row-local control-flow node, from its own results: axis 0 of
    the first result (of a scan: carry) with an axis (its rule requires
    every such result to have the pixel axis there)."""
    avals = node.avals[:node.attrs["n_carry"]] if node.op is Op.SCAN else node.avals
    return next((a.shape[0] for a in avals if a.ndim), 0)


def pixel_results(node: Node) -> tuple[int, ...]:
    """The results of a control-flow node that carry the pixel axis when it
    is row-local (a scan's stacked outputs never do)."""
    avals = node.avals[:node.attrs["n_carry"]] if node.op is Op.SCAN else node.avals
    return tuple(k for k, a in enumerate(avals) if a.ndim)


def region_rows(node: Node, pixels: int) -> RegionRows | None:
    """How a control-flow node runs on the pixel rows, or None when it is
    not row-local: its bodies row-local with its operands' modes (axis 0
    of length P: by rows; else whole), every result (of a loop: carry) with
    the pixel axis computed by rows and every other one a scalar computed
    whole, at least one with the pixel axis. A lane-wise ``while`` needs one
    predicate per pixel; a ``scan`` reads its sequences whole and stacks
    only whole outputs (those are never read by rows); a ``cond`` takes a
    scalar index."""
    if node.op not in _REGION_ROWS or region_pixels(node) != pixels:
        return None
    return _REGION_ROWS[node.op](node, pixels)


def _carried(modes, body: BodyModes, avals) -> bool:
    """Each carry's next value has the carry's kind; whole carries are scalars."""
    nexts = body.graph.outputs
    return all(body.kinds[y] == m and (m == ROWS or a.ndim == 0)
               for m, y, a in zip(modes, nexts, avals)) and ROWS in modes


def _while_rows(node: Node, pixels: int) -> RegionRows | None:
    ops = _operand_modes(node.inputs, pixels)
    cond = body_modes(node.attrs["cond"].graph, ops, pixels)
    body = body_modes(node.attrs["body"].graph, ops, pixels)
    if cond is None or body is None:
        return None
    pred = cond.graph.outputs[0]
    if cond.kinds[pred] == ROWS and pred.aval.shape != (pixels,):
        return None  # a predicate per lane of more than the pixel axis
    if not _carried(ops[:node.attrs["n_carry"]], body, node.avals):
        return None
    return RegionRows(ops, {"cond": cond, "body": body})


def _scan_rows(node: Node, pixels: int) -> RegionRows | None:
    n, nx = node.attrs["n_carry"], node.attrs["n_xs"]
    graph = node.attrs["body"].graph
    if any(_has_pixel_axis(x, pixels) for x in graph.inputs[n:n + nx]):
        return None  # a step of the sequences with the pixel axis (xs mapped by vmap)
    ops = _operand_modes(node.inputs, pixels)
    ops = ops[:n] + (WHOLE,) * nx + ops[n + nx:]
    body = body_modes(graph, ops, pixels)
    if body is None or not _carried(ops[:n], body, node.avals):
        return None
    if any(body.kinds[y] != WHOLE for y in graph.outputs[n:]):
        return None
    return RegionRows(ops, {"body": body})


def _results_by_kind(bodies, avals) -> bool:
    """Every body computes each result with the pixel axis by rows and each
    scalar one whole; at least one result has the pixel axis."""
    for body in bodies:
        for y, a in zip(body.graph.outputs, avals):
            if body.kinds[y] != (ROWS if a.ndim else WHOLE):
                return False
    return any(a.ndim for a in avals)


def _cond_rows(node: Node, pixels: int) -> RegionRows | None:
    ops = _operand_modes(node.inputs[1:], pixels)
    branches = tuple(body_modes(b.graph, ops, pixels) for b in node.attrs["branches"])
    if any(b is None for b in branches) or not _results_by_kind(branches, node.avals):
        return None
    return RegionRows((WHOLE, *ops), {"branches": branches})


def _checkpoint_rows(node: Node, pixels: int) -> RegionRows | None:
    ops = _operand_modes(node.inputs, pixels)
    body = body_modes(node.attrs["body"].graph, ops, pixels)
    if body is None or not _results_by_kind([body], node.avals):
        return None
    return RegionRows(ops, {"body": body})


_REGION_ROWS = {Op.WHILE: _while_rows, Op.SCAN: _scan_rows, Op.COND: _cond_rows,
                Op.CHECKPOINT: _checkpoint_rows}


def _control(node: Node, pixels: int) -> tuple[str, ...] | None:
    found = region_rows(node, pixels)
    return None if found is None else found.operands


def _get(node: Node, pixels: int) -> tuple[str, ...] | None:
    source = node.inputs[0]
    if source.op not in CONTROL or node.attrs["index"] not in pixel_results(source):
        return None
    return (ROWS,)


# --- a row-local node for a block of rows -------------------------------------------------

def block_attrs(node: Node, rows: int) -> Attrs:
    """The attributes of a row-local ``node`` for a block of ``rows`` pixel
    rows: the shape attributes that carry the pixel count, and a
    control-flow node's bodies rewritten likewise (``resize_body``)."""
    a = node.attrs
    if node.op in (Op.BROADCAST, Op.RESHAPE):
        return Attrs(dict(a) | {"shape": (rows, *a["shape"][1:])})
    if node.op is Op.SLICE:
        return Attrs(dict(a) | {"limit": (rows, *a["limit"][1:])})
    if node.op is Op.INPUT:
        aval = a["aval"]
        return Attrs(dict(a) | {"aval": dataclass_replace(aval, shape=(rows, *aval.shape[1:]))})
    if node.op in _REGION_ROWS:
        found = region_rows(node, region_pixels(node))
        return Attrs(dict(a) | {k: _resized(v, rows) for k, v in found.bodies.items()})
    return a


def _resized(bodies, rows: int):
    if isinstance(bodies, tuple):
        return tuple(SubGraph(resize_body(b, rows)) for b in bodies)
    return SubGraph(resize_body(bodies, rows))


def resize_body(body: BodyModes, rows: int) -> Graph:
    """``body.graph`` for ``rows`` pixel rows: its row nodes get their
    row-count attributes rewritten and their avals re-derived by the SHAPE
    rules; whole nodes are kept as they are."""
    new: dict[Node, Node] = {}
    for node in body.graph.nodes:
        if body.kinds[node] == WHOLE:
            new[node] = node
            continue
        inputs = tuple(new[x] for x in node.inputs)
        attrs = block_attrs(node, rows)
        aval = SHAPE[node.op](*(x.aval for x in inputs), **attrs)
        new[node] = Node(node.op, inputs, attrs, aval, node.where)
    g = body.graph
    return Graph(tuple(new[x] for x in g.inputs), tuple(new[x] for x in g.nodes),
                 tuple(new[x] for x in g.outputs), g.input_names, g.name)


@dataclass(frozen=True)
class RowRegion:
    """Row-local nodes computed in one pass over the rows."""

    nodes: tuple[Node, ...]
    modes: dict  # node -> how it reads each operand
    row_inputs: tuple[Node, ...]  # values from before the region, read by rows
    whole_inputs: tuple[Node, ...]  # values from before the region, read whole
    outputs: tuple[Node, ...]  # region values that later stages or the caller need

    def row_shape(self, node: Node) -> tuple[int, ...]:
        return node.shape[1:]


@dataclass(frozen=True)
class Outside:
    """Ops that run whole by the reference rules, in tape order."""

    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Partition:
    graph: Graph
    pixels: int  # length of the pixel axis; 0 when the graph has none
    stages: tuple[RowRegion | Outside, ...]

    @property
    def regions(self) -> tuple[RowRegion, ...]:
        return tuple(s for s in self.stages if isinstance(s, RowRegion))

    @property
    def row_independent(self) -> bool:
        """True when every op that depends on the pixel-indexed inputs runs
        inside one region: no whole op reads a pixel-dependent value."""
        if len(self.regions) != 1:
            return False
        dependent = {x for x in self.graph.inputs
                     if x.aval.ndim > 0 and x.shape[0] == self.pixels}
        for node in self.graph.nodes:
            if any(x in dependent for x in node.inputs):
                dependent.add(node)
        return not any(n in dependent for s in self.stages if isinstance(s, Outside)
                       for n in s.nodes)

    def describe(self) -> str:
        regions = self.regions
        inside = sum(len(r.nodes) for r in regions)
        outside = sum(len(s.nodes) for s in self.stages if isinstance(s, Outside))
        if not regions:
            return f"no row region (pixel axis {self.pixels or 'absent'}); all ops whole"
        kind = "row-independent" if self.row_independent else "split"
        return (f"{kind} along axis 0 ({self.pixels} rows): {len(regions)} region(s) of "
                f"{inside} node(s), {outside} node(s) whole by the reference rules")


def pixel_count(graph: Graph) -> int:
    """P, the pixel-axis length: the longest axis 0 among the inputs; for a
    graph without array inputs (a model that builds its pixels from scalars),
    the longest among its outputs; 0 when neither has an axis, which means
    the graph has no pixel axis. The one definition: the partition, the
    pixel-axis reductions, the block runner and deploy's memory shape all
    read it."""
    leading = [x.shape[0] for x in graph.inputs if x.aval.ndim > 0]
    if not leading:
        leading = [x.shape[0] for x in graph.outputs if x.aval.ndim > 0]
    return max(leading, default=0)


def partition(graph: Graph, accept: Callable[[Node, tuple], bool] = lambda node, modes: True,
              min_pixels: int = 2) -> Partition:
    """Split ``graph`` into row regions and whole stages. ``accept(node,
    modes)`` narrows which row-local nodes a strategy can run inside a region
    (the C emitter accepts fewer than the tile interpreter)."""
    pixels = pixel_count(graph)
    modes = {}
    if pixels >= min_pixels:
        for node in graph.nodes:
            if node.op not in LEAF:
                found = row_modes(node, pixels)
                if found is not None and accept(node, found):
                    modes[node] = found
    _settle(graph, modes)
    return Partition(graph, pixels, _stages(graph, modes))


def _settle(graph: Graph, modes: dict) -> None:
    """A node with several results stays in a region only when every reader
    is a get in a region (a region writes single arrays), and a get only
    when the node it reads is in one."""
    users = _users(graph)
    changed = True
    while changed:
        changed = False
        for node in list(modes):
            several = node.several and any(u not in modes for u in users[node])
            if several or (node.op is Op.GET and node.inputs[0] not in modes):
                del modes[node]
                changed = True


def _levels(graph: Graph, modes: dict) -> dict[Node, int]:
    """Region k runs after whole group k-1 and before whole group k; a row
    node waits for every whole value it reads, a whole node for every row
    value it reads."""
    level: dict[Node, int] = {}
    feeds = _feeds_rows(graph, modes)
    latest = -1  # the level of the last row node so far, in tape order
    for node in graph.nodes:
        if node.op in LEAF:
            continue
        if node in modes:
            # a value read by rows may come from this region; one read whole
            # must be complete, so it comes from an earlier stage
            level[node] = max([0] + [level[x] + (x not in modes or mode == WHOLE)
                                     for x, mode in zip(node.inputs, modes[node])
                                     if x in level])
            latest = max(latest, level[node])
        else:
            # a whole node no row node waits for runs after the regions before it in
            # tape order: its floating-point warnings keep the reference's order
            level[node] = max([-1 if node in feeds else latest]
                              + [level[x] for x in node.inputs if x in level])
    return level


def _feeds_rows(graph: Graph, modes: dict) -> set[Node]:
    """The nodes some row node reads, directly or through others."""
    feeds: set[Node] = set()
    for node in reversed(graph.nodes):
        if node in modes or node in feeds:
            feeds.update(node.inputs)
    return feeds


def _stages(graph: Graph, modes: dict) -> tuple[RowRegion | Outside, ...]:
    level = _levels(graph, modes)
    top = max(level.values(), default=-1)
    users = _users(graph)
    stages: list[RowRegion | Outside] = []
    for k in range(-1, top + 1):
        rows = [n for n in graph.nodes if n in modes and level[n] == k]
        whole = [n for n in graph.nodes if n in level and n not in modes and level[n] == k]
        if rows:
            stages.append(_region(graph, rows, modes, users))
        if whole:
            stages.append(Outside(tuple(whole)))
    return tuple(stages)


def _users(graph: Graph) -> dict[Node, list[Node]]:
    users: dict[Node, list[Node]] = {n: [] for n in graph.nodes}
    for node in graph.nodes:
        for x in node.inputs:
            users[x].append(node)
    return users


def _region(graph: Graph, nodes: list[Node], modes: dict, users: dict) -> RowRegion:
    inside = set(nodes)
    row_inputs: dict[Node, None] = {}
    whole_inputs: dict[Node, None] = {}
    for node in nodes:
        for x, mode in zip(node.inputs, modes[node]):
            if x not in inside:
                (row_inputs if mode == ROWS else whole_inputs)[x] = None
    results = set(graph.outputs)
    outputs = tuple(n for n in nodes
                    if n in results or any(u not in inside for u in users[n]))
    return RowRegion(tuple(nodes), {n: modes[n] for n in nodes}, tuple(row_inputs),
                     tuple(whole_inputs), outputs)
