"""Complex values as pairs of real values: the graph the compiling
strategies (``native``, the GPU strategies) run.

``pairs(graph)`` rewrites every complex op that has a pair form
(``record.complex_parts``: arithmetic, comparisons, selects, casts, parts,
``abs``, ``sqrt``, ``exp``; layout ops part by part) into real ops on the
parts of its operands. A
complex value stays one complex node only where a node without a pair form
reads or makes it (a reduction, a product, an FFT, an index, a complex
``log``, a loop carry, a graph input or output): ``real``/``imag`` split it
where a pair form reads it, ``complex`` joins its parts where such a node
reads it. Bodies of control flow are rewritten inside, their interfaces
kept. The rewritten ops carry the source line of the op they came from.

The C and CUDA emitters see only the real ops; the complex nodes left run
by the strategy's rules for them (the reference's NumPy rules on the CPU).
"""

from __future__ import annotations

from ..ir import Graph, Op, SubGraph, dtypes, walk
from ..ir.ops import LAYOUT
from ..ir.source import pinned_where
from ..record import Tracer, bind, current_builder
from ..record.complex_parts import PAIR_OPS, apply
from .graphs import const, retrace


class Pair(tuple):
    """A complex value held as its (re, im) parts (a tuple of results is
    not one)."""


def _complex(aval) -> bool:
    return aval.dtype in dtypes.COMPLEX


def _involves_complex(node) -> bool:
    return any(_complex(a) for a in (*node.avals, *(a for x in node.inputs for a in x.avals)))


def has_complex(graph: Graph) -> bool:
    return any(_complex(a) for node in walk(graph) for a in node.avals)


def pairs(graph: Graph) -> Graph:
    """``graph`` with every complex op that has a pair form written on real
    parts (the graph itself when it has no complex value)."""
    if not has_complex(graph):
        return graph

    def body(*args):
        env = dict(zip(graph.inputs, args))
        split, joined = {}, {}

        def parts(x):  # a complex value as (re, im)
            value = env[x]
            if isinstance(value, Pair):
                return value
            if x not in split:
                split[x] = tuple(bind(op, value, where=x.where) for op in (Op.REAL, Op.IMAG))
            return split[x]

        def whole(x):  # a value as one node
            value = env[x]
            if not isinstance(value, Pair):
                return value
            if x not in joined:
                joined[x] = bind(Op.COMPLEX, *value, where=x.where)
            return joined[x]

        for node in graph.nodes:
            if node in env:
                continue
            if node.op is Op.CONST:
                env[node] = _const(node)
            elif node.op in LAYOUT and _complex(node.aval) and not node.several:
                ins = [parts(x) for x in node.inputs]
                env[node] = Pair(bind(node.op, *(p[k] for p in ins), where=node.where,
                                      **node.attrs) for k in (0, 1))
            elif node.op in PAIR_OPS and _involves_complex(node):
                operands = [parts(x) if _complex(x.aval) else env[x] for x in node.inputs]
                with pinned_where(node.where):
                    result = apply(node.op, operands, dict(node.attrs))
                env[node] = Pair(result) if isinstance(result, tuple) else result
            else:
                env[node] = bind(node.op, *(whole(x) for x in node.inputs), where=node.where,
                                 **_rewritten_bodies(node))
        return [whole(x) for x in graph.outputs]
    return retrace([x.aval for x in graph.inputs], body, graph.input_names, graph.name)


def _const(node):
    value = node.attrs["value"].value
    if not _complex(node.aval):
        return const(node)
    builder = current_builder()
    return Pair(Tracer(builder.const(part.copy()), builder) for part in (value.real, value.imag))


def _rewritten_bodies(node) -> dict:
    def rewritten(value):
        return SubGraph(pairs(value.graph)) if isinstance(value, SubGraph) else value
    return {name: tuple(map(rewritten, value)) if isinstance(value, tuple) else rewritten(value)
            for name, value in node.attrs.items()}
