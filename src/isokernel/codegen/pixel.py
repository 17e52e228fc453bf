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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Graph, Node, Op
from ..ir.ops import ELEMENTWISE, LEAF, REDUCE, TABLE

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
}
"""For each row-local op: how a node reads each operand (``ROWS`` or
``WHOLE``), or None when this node of the op is not row-local. A table
look-up is pointwise in its abscissa and layer (the table rides in the
node). A fused form has no rule: the strategies that partition run its
composition, so they unfuse the graph first (a fused node that reached
``partition`` would run whole, by the reference)."""
# RESHAPE and SLICE also need the result's axis 0 to be the pixel axis,
# which ``row_modes`` checks for every op.


def row_modes(node: Node, pixels: int) -> tuple[str, ...] | None:
    """How a row-local ``node`` reads its operands, or None."""
    rule = ROW_RULES.get(node.op)
    if rule is None or node.aval.ndim == 0 or node.shape[0] != pixels:
        return None
    return rule(node, pixels)


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
    return Partition(graph, pixels, _stages(graph, modes))


def _levels(graph: Graph, modes: dict) -> dict[Node, int]:
    """Region k runs after whole group k-1 and before whole group k; a row
    node waits for every whole value it reads, a whole node for every row
    value it reads."""
    level: dict[Node, int] = {}
    for node in graph.nodes:
        if node.op in LEAF:
            continue
        if node in modes:
            # a value read by rows may come from this region; one read whole
            # must be complete, so it comes from an earlier stage
            level[node] = max([0] + [level[x] + (x not in modes or mode == WHOLE)
                                     for x, mode in zip(node.inputs, modes[node])
                                     if x in level])
        else:
            level[node] = max([-1] + [level[x] for x in node.inputs if x in level])
    return level


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
