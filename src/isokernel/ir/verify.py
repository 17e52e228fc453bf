"""``verify(graph)``: topological order, defined inputs, and every aval
re-derived from its operands by the SHAPE rules."""

from __future__ import annotations

from .errors import GraphError, IsokernelError
from .graph import Graph
from .ops import Op
from .shapes import SHAPE


def verify(graph: Graph) -> Graph:
    """Return ``graph`` unchanged, or raise ``GraphError`` naming the first
    malformed node by its text line."""
    defined = set()
    for i, node in enumerate(graph.nodes):
        where = f"%{i} ({node.op.value}{' at ' + node.where if node.where else ''})"
        if node in defined:
            raise GraphError(f"{where} appears twice in the node list")
        if node.op is Op.INPUT and node not in graph.inputs:
            raise GraphError(f"{where} is an input node that is not a graph input")
        for x in node.inputs:
            if x not in defined:
                raise GraphError(f"{where} uses a value not defined before it")
        _check_aval(node, where)
        defined.add(node)
    for x in graph.inputs:
        if x.op is not Op.INPUT:
            raise GraphError(f"graph input {x!r} is not an input node")
    for x in graph.outputs:
        if x not in defined:
            raise GraphError(f"output {x!r} is not a node of the graph")
    return graph


def _check_aval(node, where: str) -> None:
    rule = SHAPE.get(node.op)
    if rule is None:
        raise GraphError(f"{where}: op has no SHAPE rule")
    try:
        aval = rule(*(x.aval for x in node.inputs), **node.attrs)
    except IsokernelError as e:
        raise GraphError(f"{where}: {e}") from None
    if aval != node.aval:
        raise GraphError(f"{where}: recorded as {node.aval}, its operands give {aval}")
