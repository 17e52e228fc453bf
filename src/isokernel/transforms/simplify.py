"""Graph -> Graph clean-up passes: dead-node elimination, common
subexpressions and constant folding, and the pass jit runs before planning.

``cse`` re-records a graph through the hash-consing builder, which merges
structurally equal nodes and folds constant subexpressions no larger than
their operands (the recorder's own rule), so the three clean-ups are the
recorder's invariants applied to a graph that came from elsewhere (a
hand-built graph, or one a transform wrote).
"""

from __future__ import annotations

from ..ir import DifferentiationError, Graph, Op
from ..ir.eval import CUSTOM_LIN_FORWARD
from ..ir.ops import TRANSFORM_ONLY
from ..record import replay
from .graphs import const, prune, replay_node, retrace


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


def prepare_for_execution(graph: Graph) -> Graph:
    """Inline custom-derivative calls (their primal sub-graphs) and drop
    stop-gradient markers, so strategies only see computing ops. A
    forward-mode use of a custom_vjp rule is refused here, before anything
    runs."""
    if not graph.ops() & TRANSFORM_ONLY:
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
    if node.op is Op.STOP_GRADIENT:
        return operands[0]
    if node.op in (Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL):
        fun = prepare_for_execution(node.attrs["fun"])
        return replay(fun, *operands[:len(fun.inputs)])[node.attrs["index"]]
    if node.op is Op.CUSTOM_LIN:
        message = CUSTOM_LIN_FORWARD.format(name=node.attrs["name"])
        raise DifferentiationError(f"{message} (at {node.where or '?'})")
    return replay_node(node, operands)
