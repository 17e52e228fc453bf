"""``linearize``: split a JVP graph into its primal part and its linear part
(partial evaluation), and ``vjp_graph`` = transpose ∘ linearize.

In the JVP graph every node either depends on a tangent input (it is linear
in the tangents, by construction of the JVP rules) or not (primal). The
primal nodes become the primal graph, which also returns the *residuals*:
the primal values the linear nodes read. The linear nodes become the linear
graph, a function of the residuals and the tangents. Transposing the linear
graph gives the reverse pass, so reverse mode needs no rules of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Graph, Op
from ..record import replay
from .graphs import const, depending, replay_node, retrace
from .jvp import jvp_graph
from .transpose import transpose_graph


def _residuals(jg: Graph, linear: set, touts) -> list:
    """Primal, non-constant values that the linear part reads, in tape order."""
    found: dict = {}
    for node in jg.nodes:
        if node in linear:
            for x in node.inputs:
                if x not in linear and x.op is not Op.CONST:
                    found.setdefault(x, None)
    for t in touts:
        if t not in linear and t.op is not Op.CONST:
            found.setdefault(t, None)
    return list(found)


def linearize_graph(graph: Graph, diff: Sequence[bool] | None = None,
                    wrt: Sequence[int] | None = None) -> tuple[Graph, Graph]:
    """(primal, linear). ``primal``: the graph's inputs to its outputs, then
    the residuals. ``linear``: the residuals, then one tangent per
    differentiated float input, to the tangents of the outputs in ``wrt``."""
    jg = jvp_graph(graph, diff, wrt)
    n, k = len(graph.inputs), len(graph.outputs)
    tangents = list(jg.inputs[n:])
    linear = depending(jg, tangents)
    touts = jg.outputs[k:]
    residuals = _residuals(jg, linear, touts)
    primal = Graph.build(jg.inputs[:n], [*jg.outputs[:k], *residuals], graph.input_names,
                         graph.name, order=jg.nodes)

    def body(*args):
        env = dict(zip(residuals, args[:len(residuals)]))
        env.update(zip(tangents, args[len(residuals):]))
        for node in jg.nodes:
            if node in env:
                continue
            if node.op is Op.CONST:
                env[node] = const(node)
            elif node in linear:
                env[node] = replay_node(node, [env[x] for x in node.inputs])
        return [env[t] for t in touts]

    avals = [r.aval for r in residuals] + [t.aval for t in tangents]
    names = [f"res{i}" for i in range(len(residuals))] + list(jg.input_names[n:])
    return primal, retrace(avals, body, names, f"lin_{graph.name}")


def vjp_graph(graph: Graph, diff: Sequence[bool] | None = None,
              wrt: Sequence[int] | None = None, seeds=None) -> Graph:
    """Reverse mode as one graph. Inputs: the graph's inputs, then one
    cotangent per output in ``wrt`` (default all), unless ``seeds`` gives
    those cotangents as constants. Outputs: the graph's outputs, then the
    cotangent of each differentiated float input."""
    wrt = list(range(len(graph.outputs))) if wrt is None else list(wrt)
    primal, linear = linearize_graph(graph, diff, wrt)
    n, k = len(graph.inputs), len(graph.outputs)
    n_res = len(primal.outputs) - k
    n_tan = len(linear.inputs) - n_res
    back = transpose_graph(linear, [False] * n_res + [True] * n_tan, seeds)

    def body(*args):
        outs = replay(primal, *args[:n])
        return outs[:k] + replay(back, *outs[k:], *args[n:])

    avals = [x.aval for x in graph.inputs]
    names = list(graph.input_names)
    if seeds is None:
        avals += [graph.outputs[i].aval.strong() for i in wrt]
        names += [f"ct{i}" for i in wrt]
    return retrace(avals, body, names, f"vjp_{graph.name}")
