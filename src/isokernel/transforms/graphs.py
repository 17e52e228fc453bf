"""What every graph transform shares: re-recording a graph node by node into
a fresh builder, pruning, and symbolic zeros.

A transform is a walk over the nodes of a graph that writes a new graph
through ``bind`` (so the new graph is hash-consed and small constant
subexpressions fold exactly as in a user's recording). ``retrace`` runs such
a walk and returns the graph it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..ir import Aval, Graph, Node, dtypes, toposort
from ..record import Builder, Tracer, bind, current_builder
from ..record import frontend as F


def retrace(in_avals: Sequence[Aval], body: Callable, names: Sequence[str] = (),
            name: str = "f") -> Graph:
    """The graph ``body`` records when called with one tracer per aval.
    ``body`` returns a list of output values (tracers or NumPy arrays)."""
    builder = Builder()
    tracers = [Tracer(builder.new_input(aval), builder) for aval in in_avals]
    with builder.active():
        outs = [builder.lift(x) for x in body(*tracers)]
    return Graph.build(builder.inputs, outs, tuple(names), name, order=builder.recorded())


def const(node: Node):
    """A CONST node's value as a node of the active recording."""
    return Tracer(current_builder().const(node.attrs["value"].value), current_builder())


def replay_node(node: Node, ins: list):
    """``node``'s op applied to new operands, keeping its source line."""
    return bind(node.op, *ins, where=node.where, **node.attrs)


def prune(graph: Graph, outputs: Sequence[Node] | None = None) -> Graph:
    """Dead-node elimination: only what ``outputs`` (default: the graph's)
    reach; every input stays an input, so gradients exist for all of them."""
    outputs = graph.outputs if outputs is None else tuple(outputs)
    return Graph.build(graph.inputs, outputs, graph.input_names, graph.name, order=graph.nodes)


def reaching(outputs: Sequence[Node]) -> set[Node]:
    """Every node some of ``outputs`` depend on."""
    return set(toposort(outputs))


def depending(graph: Graph, roots: Sequence[Node]) -> set[Node]:
    """Every node of ``graph`` that depends on one of ``roots``."""
    marked = set(roots)
    for node in graph.nodes:
        if node not in marked and any(x in marked for x in node.inputs):
            marked.add(node)
    return marked


def is_float(aval: Aval) -> bool:
    """Whether values of ``aval`` carry tangents: float and complex ones."""
    return aval.dtype in dtypes.INEXACT


def zeros(aval: Aval):
    """A zero of ``aval`` inside a recording: one scalar constant and a
    broadcast, never a materialized array."""
    return F.zeros(aval.shape, aval.dtype)


def scalar(value, like) -> np.ndarray:
    """A typed scalar constant of ``like``'s dtype (strong, so float32 rules
    stay float32)."""
    return np.asarray(value, dtype=like.dtype)


def input_names(graph: Graph, prefix: str, which: Sequence[int]) -> list[str]:
    return [f"{prefix}{graph.input_names[i]}" for i in which]
