"""``verify(graph)``: topological order, defined inputs, and every aval
re-derived from its operands by the SHAPE rules."""

from __future__ import annotations

from .errors import GraphError, IsokernelError
from .graph import Graph, aval_text, subgraphs
from .ops import Op
from .shapes import SHAPE


def verify(graph: Graph) -> Graph:
    """Return ``graph`` unchanged, or raise ``GraphError`` naming the first
    malformed node by its text line (inside a sub-graph: the node that
    carries it and the attribute, then the body's node)."""
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
        _check_operands(node, where)
        _check_aval(node, where)
        _check_bodies(node, where)
        defined.add(node)
    for x in graph.inputs:
        if x.op is not Op.INPUT:
            raise GraphError(f"graph input {x!r} is not an input node")
    for x in graph.outputs:
        if x not in defined:
            raise GraphError(f"output {x!r} is not a node of the graph")
        if x.several:
            raise GraphError(f"output {x!r} has several results; return its get nodes")
    return graph


def _check_bodies(node, where: str) -> None:
    for name, sub in subgraphs(node):
        try:
            verify(sub.graph)
        except GraphError as e:
            raise GraphError(f"{where}, body {name!r}: {e}") from None


def _check_operands(node, where: str) -> None:
    """Only a get reads a node with several results, and only as its one operand."""
    for x in node.inputs:
        if x.several and node.op is not Op.GET:
            raise GraphError(f"{where} reads {x.op.value}, which has several results, "
                             f"directly; read one through a get node")
    if node.op is Op.GET and not node.inputs[0].several:
        raise GraphError(f"{where} reads result {node.attrs['index']} of "
                         f"{node.inputs[0].op.value}, which has one result")


def _check_aval(node, where: str) -> None:
    rule = SHAPE.get(node.op)
    if rule is None:
        raise GraphError(f"{where}: op has no SHAPE rule")
    try:
        aval = rule(*(x.aval for x in node.inputs), **node.attrs)
    except IsokernelError as e:
        raise GraphError(f"{where}: {e}") from None
    if aval != node.aval:
        raise GraphError(f"{where}: recorded as {aval_text(node.aval)}, its operands give "
                         f"{aval_text(aval)}")
