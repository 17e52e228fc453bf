"""``linearize``: split a JVP graph into its primal part and its linear part
(partial evaluation), and ``vjp_graph`` = transpose ∘ linearize.

In the JVP graph every node either depends on a tangent input (it is linear
in the tangents, by construction of the JVP rules) or not (primal). The
primal nodes become the primal graph, which also returns the *residuals*:
the primal values the linear nodes read. The linear nodes become the linear
graph, a function of the residuals and the tangents. Transposing the linear
graph gives the reverse pass, so reverse mode needs no rules of its own.

That dependency split is the default. A primitive that computes primal and
tangent work in one node (a loop carrying both) splits itself instead, by a
rule in ``PARTIAL_EVAL`` (``Split``): its known part runs in the primal graph
and hands residuals over, its unknown part runs in the linear graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..ir import Graph, Node, Op
from ..record import replay
from .graphs import const, depending, replay_node, retrace
from .jvp import jvp_graph
from .transpose import transpose_graph


@dataclass(frozen=True)
class Split:
    """What a partial-evaluation rule gives for one node: ``known``, its
    results the primal graph computes (one value, or a tuple with ``None``
    for each result left to the linear graph); ``residuals``, primal values
    the linear part reads; ``staged(residuals, operands)``, the linear part,
    called in the linear graph with those residuals and the node's operands
    (linear ones as values, the others ``None``), giving the unknown results
    (a tuple with ``None`` for the known ones)."""

    known: object
    residuals: tuple
    staged: Callable


PARTIAL_EVAL: dict[Op, Callable] = {}
"""``rule(node, operands, known: tuple[bool, ...]) -> Split | None`` for a
node that reads some linear values; ``operands`` are the primal graph's
values (``None`` where ``known`` is False). Ops without one, or whose rule
returns None for this node, are linear as a whole when they read a linear
value (the dependency split)."""


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
    if any(node.op in PARTIAL_EVAL for node in linear):
        return _split_by_rules(graph, jg, n, k)
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


def _split_by_rules(graph: Graph, jg: Graph, n: int, k: int) -> tuple[Graph, Graph]:
    """``linearize_graph`` when some linear node has a ``PARTIAL_EVAL`` rule:
    both halves are recorded anew, the primal one first (it decides the
    residuals), then the linear one."""
    walk = _Walk(jg, n, k)
    primal = retrace([x.aval for x in jg.inputs[:n]], walk.primal, graph.input_names,
                     graph.name)
    avals = [r.aval for r in primal.outputs[k:]] + [t.aval for t in walk.tangents]
    names = [f"res{i}" for i in range(len(avals) - len(walk.tangents))]
    names += list(jg.input_names[n:])
    return primal, retrace(avals, walk.linear, names, f"lin_{graph.name}")


class _Walk:
    """The two walks of ``_split_by_rules`` over the JVP graph. A node is
    known (primal), unknown (linear), or split by its rule: then its known
    results come from the primal walk and the others from the linear one."""

    def __init__(self, jg: Graph, n: int, k: int):
        self.jg, self.k = jg, k
        self.tangents = list(jg.inputs[n:])
        self.touts = list(jg.outputs[k:])
        self.unknown: set[Node] = set(self.tangents)
        self.splits: dict[Node, tuple[Split, range]] = {}
        self.residuals: dict[Node, None] = {}  # known values the default split reads
        self.handed: list = []  # residuals the rules hand over (primal walk values)

    def primal(self, *args):
        env = dict(zip(self.jg.inputs, args))
        for node in self.jg.nodes:
            if node not in env and node not in self.unknown:
                self._primal_node(node, env)
        for t in self.touts:
            if t not in self.unknown:
                self._need(t)
        outs = [env[x] for x in self.jg.outputs[:self.k]]
        return outs + [env[x] for x in self.residuals] + self.handed

    def _primal_node(self, node: Node, env: dict) -> None:
        if node.op is Op.CONST:
            env[node] = const(node)
            return
        if node.op is Op.GET and node.inputs[0] in self.splits:
            value = env[node.inputs[0]][node.attrs["index"]]
            if value is None:
                self.unknown.add(node)
            else:
                env[node] = value
            return
        known = tuple(x not in self.unknown for x in node.inputs)
        if all(known):
            env[node] = replay_node(node, [env[x] for x in node.inputs])
            return
        self.unknown.add(node)
        rule = PARTIAL_EVAL.get(node.op)
        split = None if rule is None else rule(
            node, [env[x] if is_known else None for x, is_known in zip(node.inputs, known)],
            known)
        if split is None:  # no rule, or none for this node: the dependency split
            for x, is_known in zip(node.inputs, known):
                if is_known:
                    self._need(x)
            return
        start = len(self.handed)
        self.handed += list(split.residuals)
        self.splits[node] = (split, range(start, len(self.handed)))
        env[node] = split.known

    def _need(self, x: Node) -> None:
        if x.op is not Op.CONST:
            self.residuals.setdefault(x, None)

    def linear(self, *args):
        n_res, n_handed = len(self.residuals), len(self.handed)
        env = dict(zip(self.residuals, args[:n_res]))
        handed = args[n_res:n_res + n_handed]
        env.update(zip(self.tangents, args[n_res + n_handed:]))
        for node in self.jg.nodes:
            if node not in env and node in self.unknown:
                env[node] = self._linear_node(node, env, handed)
        return [env[t] if t in env else const(t) for t in self.touts]

    def _linear_node(self, node: Node, env: dict, handed):
        if node in self.splits:
            split, where = self.splits[node]
            return split.staged([handed[i] for i in where],
                                [env[x] if x in self.unknown else None for x in node.inputs])
        if node.op is Op.GET and node.inputs[0] in self.splits:
            return env[node.inputs[0]][node.attrs["index"]]
        return replay_node(node, [env[x] if x in env else const(x) for x in node.inputs])
