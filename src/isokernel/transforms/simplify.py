"""Graph -> Graph clean-up passes: dead-node elimination, common
subexpressions and constant folding, and the pass jit runs before planning.

``cse`` re-records a graph through the hash-consing builder, which merges
structurally equal nodes and folds constant subexpressions no larger than
their operands (the recorder's own rule), so the three clean-ups are the
recorder's invariants applied to a graph that came from elsewhere (a
hand-built graph, or one a transform wrote).
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Graph, Op, SubGraph, walk
from ..record import bind, replay
from .graphs import const, prune, retrace


def dce(graph: Graph) -> Graph:
    """Drop every node no output reaches (inputs stay)."""
    return prune(graph)


def cse(graph: Graph) -> Graph:
    """Merge structurally equal nodes and fold small constant subexpressions."""
    def body(*args):
        return replay(graph, *args)
    return retrace([x.aval for x in graph.inputs], body, graph.input_names, graph.name)


def simplify(graph: Graph) -> Graph:
    """``dce`` then ``cse``."""
    return cse(dce(graph))


LOWER: dict[Op, Callable] = {
    Op.STOP_GRADIENT: lambda node, operands: operands[0],
}
"""How an op only the transforms interpret becomes computing ops before
planning: ``rule(node, operands) -> value`` (a tuple for several results).
A stop-gradient marker is its operand; region primitives add theirs when
they register (a custom-derivative call: its primal body, inlined)."""


def prepare_for_execution(graph: Graph) -> Graph:
    """Lower every op of ``LOWER`` (custom-derivative calls inline their
    primal bodies, stop-gradient markers go), so strategies only see
    computing ops. A lowering may refuse (a forward-mode use of a custom_vjp
    rule), before anything runs."""
    if not {n.op for n in walk(graph)} & LOWER.keys():
        return graph

    def body(*args):
        env = dict(zip(graph.inputs, args))
        for node in graph.nodes:
            if node not in env:
                env[node] = _lower(node, [env[x] for x in node.inputs])
        return [env[x] for x in graph.outputs]
    return retrace([x.aval for x in graph.inputs], body, graph.input_names, graph.name)


def _lower(node, operands: list):
    if node.op is Op.CONST:
        return const(node)
    rule = LOWER.get(node.op)
    if rule is not None:
        return rule(node, operands)
    return bind(node.op, *operands, where=node.where, **_lowered_bodies(node))


def _lowered_bodies(node) -> dict:
    """A region node's attributes with its sub-graphs lowered too (a custom
    rule inside a loop body)."""
    def lowered(value):
        return SubGraph(prepare_for_execution(value.graph)) if isinstance(value, SubGraph) \
            else value
    return {name: tuple(lowered(v) for v in value) if isinstance(value, tuple) else lowered(value)
            for name, value in node.attrs.items()}
