"""Fused forms: named graph rewrites that are refinements.

A fused form replaces one recurring shape of the graph (say exp(c·x·y)) by a
single ``fused`` node whose ``body`` attribute is exactly the subgraph it
replaces: the same operations in the same association. Its meaning (the
EVAL rule) is to run that body, so the rewrite is a refinement by
construction: bit-identical to the composition. A strategy with a kernel for
the form runs it in one pass with the intermediates in registers; one
without runs the body, or calls ``unfuse`` first.

    fuse(graph)     -> graph with every match of FORMS replaced
    unfuse(graph)   -> graph with every fused node inlined again
    fired(graph)    -> which forms fired where (for the report)

Matching rules. A region is rooted at the form's last op; every other op it
absorbs must be used only inside the region (so no value is computed twice);
scalar constants (a constant or a broadcast of one) are copied into the body
and never count as uses. Larger forms are tried first and the graph is
scanned from its outputs back, so logsumexp claims its exp before any
exponential form sees it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Attrs, Aval, Graph, GraphError, Node, Op, ShapeError, SubGraph
from ..ir.eval import run_graph
from ..record import replay
from .graphs import is_float
from .jvp import jvp_graph
from .regions import RegionRules, register
from .vmap import batch_size, batched_subgraph


@dataclass(frozen=True)
class Match:
    """A match of a form: the root, the non-constant ops absorbed (root included),
    and the values flowing in (the fused node's operands, in order)."""

    form: str
    root: Node
    internal: frozenset[Node]
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Form:
    name: str
    shape: str
    match: Callable[[Node, dict], Match | None]


@dataclass(frozen=True)
class Fired:
    form: str
    index: int
    where: str


# ------------------------------------------------------------ match helpers

def is_scalar_const(node: Node) -> bool:
    """A 0-d constant, or a broadcast of one (the frontend's constants)."""
    if node.op is Op.CONST:
        return node.aval.shape == ()
    return node.op is Op.BROADCAST and is_scalar_const(node.inputs[0])


def const_value(node: Node) -> float:
    while node.op is Op.BROADCAST:
        node = node.inputs[0]
    return float(node.attrs["value"].value)


def _match(form: str, root: Node, internal, operands) -> Match:
    return Match(form, root, frozenset(internal) | {root}, tuple(operands))


def _operands(*nodes: Node) -> list[Node]:
    """The non-constant ones, first occurrence order."""
    return list(dict.fromkeys(n for n in nodes if not is_scalar_const(n)))


def _is(node: Node, op: Op) -> bool:
    return node.op is op and not is_scalar_const(node)


# ---------------------------------------------------------------- the forms

def _rsqrt(root: Node, users) -> Match | None:
    """1 / sqrt(x)."""
    if root.op is not Op.DIV:
        return None
    one, root_of = root.inputs
    if not (is_scalar_const(one) and const_value(one) == 1.0 and root_of.op is Op.SQRT):
        return None
    return _match("rsqrt", root, [root_of], root_of.inputs)


def _gaussian(root: Node, users) -> Match | None:
    """exp(g · (x·x)) and exp(-(g · (x·x))), either factor order."""
    if root.op is not Op.EXP:
        return None
    arg, internal = root.inputs[0], []
    if arg.op is Op.NEG:
        internal.append(arg)
        arg = arg.inputs[0]
    if not _is(arg, Op.MUL):
        return None
    for square, coeff in (arg.inputs, arg.inputs[::-1]):
        if _is(square, Op.MUL) and square.inputs[0] is square.inputs[1]:
            return _match("gaussian", root, [*internal, arg, square],
                           _operands(coeff, square.inputs[0]))
    return None


def _scaled_product_exp(root: Node, users) -> Match | None:
    """exp(c · x · y): a product of three factors, exactly one a scalar
    constant, in either association."""
    if root.op is not Op.EXP or not _is(root.inputs[0], Op.MUL):
        return None
    outer = root.inputs[0]
    for inner, third in (outer.inputs, outer.inputs[::-1]):
        if not _is(inner, Op.MUL):
            continue
        factors = [*inner.inputs, third]
        if sum(is_scalar_const(f) for f in factors) == 1:
            return _match("scaled_product_exp", root, [outer, inner], _operands(*factors))
    return None


def _affine_exp(root: Node, users) -> Match | None:
    """exp(a + c·x) and exp(a - c·x) (a sum with a product, either order)."""
    if root.op is not Op.EXP or root.inputs[0].op not in (Op.ADD, Op.SUB):
        return None
    total = root.inputs[0]
    for index, product in enumerate(total.inputs):
        if _is(product, Op.MUL) and not (total.op is Op.SUB and index == 0):
            other = total.inputs[1 - index]
            return _match("affine_exp", root, [total, product],
                           _operands(other, *product.inputs))
    return None


def _logsumexp(root: Node, users) -> Match | None:
    """The frontend's stable logsumexp: log(sum(exp(x - s))) + s with s the
    maximum where finite, else 0."""
    if root.op is not Op.ADD or root.inputs[0].op is not Op.LOG:
        return None
    log, kept = root.inputs
    total = _skip_reshape(log.inputs[0])
    shift = _skip_reshape(kept)
    if total.op is not Op.REDUCE_SUM or total.inputs[0].op is not Op.EXP:
        return None
    diff = total.inputs[0].inputs[0]
    if diff.op is not Op.SUB or diff.inputs[1].op is not Op.BROADCAST:
        return None
    x, spread = diff.inputs
    if spread.inputs[0] is not shift or not _is_stable_shift(shift, x):
        return None
    test, m, _ = shift.inputs
    internal = {log, total, total.inputs[0], diff, spread, shift, test, test.inputs[0], m,
                m.inputs[0] if m.op is Op.RESHAPE else m}
    internal |= {n for n in (log.inputs[0], kept) if n.op is Op.RESHAPE}
    return _match("logsumexp", root, internal, [x])


def _skip_reshape(node: Node) -> Node:
    return node.inputs[0] if node.op is Op.RESHAPE else node


def _is_stable_shift(shift: Node, x: Node) -> bool:
    """select(|m| < inf, m, 0) with m = (reshaped) reduce_max(x)."""
    if shift.op is not Op.SELECT:
        return False
    test, m, zero = shift.inputs
    top = _skip_reshape(m)
    return (test.op is Op.LT and test.inputs[0].op is Op.ABS and test.inputs[0].inputs[0] is m
            and is_scalar_const(test.inputs[1]) and const_value(test.inputs[1]) == float("inf")
            and is_scalar_const(zero) and const_value(zero) == 0.0
            and top.op is Op.REDUCE_MAX and top.inputs[0] is x)


FORMS = (
    Form("logsumexp", "log(sum(exp(x - m))) + m, m = max(x) where finite", _logsumexp),
    Form("gaussian", "exp(-g x²)", _gaussian),
    Form("scaled_product_exp", "exp(c x y)", _scaled_product_exp),
    Form("affine_exp", "exp(a + c x)", _affine_exp),
    Form("rsqrt", "1 / sqrt(x)", _rsqrt),
)
FORM_NAMES = tuple(f.name for f in FORMS)


# --------------------------------------------------------------- the rewrite

def users_of(graph: Graph) -> dict[Node, list[Node]]:
    users = defaultdict(list)
    for node in graph.nodes:
        for x in node.inputs:
            users[x].append(node)
    return users


def find(graph: Graph, forms=FORMS) -> list[Match]:
    """Non-overlapping matches, scanning from the outputs back."""
    users = users_of(graph)
    outputs = Counter(graph.outputs)
    claimed: set[Node] = set()
    regions = []
    for node in reversed(graph.nodes):
        if node in claimed:
            continue
        for form in forms:
            region = form.match(node, users)
            if region is not None and _closed(region, users, outputs, claimed):
                claimed |= region.internal
                regions.append(region)
                break
    return regions[::-1]


def _closed(region: Match, users, outputs, claimed) -> bool:
    """Every absorbed op other than the root is used only inside the region
    and is not an output, and none is already part of another region."""
    for node in region.internal - {region.root}:
        if node in claimed or outputs[node] or any(u not in region.internal
                                                   for u in users[node]):
            return False
    return region.root not in claimed


def fuse(graph: Graph, forms=FORMS) -> Graph:
    """``graph`` with every match of ``forms`` replaced by a fused node."""
    regions = {r.root: r for r in find(graph, forms)}
    if not regions:
        return graph
    absorbed = set().union(*(r.internal - {r.root} for r in regions.values()))
    mapping: dict[Node, Node] = {}
    order = []
    for node in graph.nodes:
        if node in absorbed:
            continue
        region = regions.get(node)
        new = _fused_node(region, mapping) if region else _remap(node, mapping)
        mapping[node] = new
        order.append(new)
    return _rebuilt(graph, mapping, order)


def _remap(node: Node, mapping: dict[Node, Node]) -> Node:
    inputs = tuple(mapping.get(x, x) for x in node.inputs)
    if all(a is b for a, b in zip(inputs, node.inputs)):
        return node
    return Node(node.op, inputs, node.attrs, node.aval, node.where)


def _fused_node(region: Match, mapping) -> Node:
    body = _body(region)
    attrs = Attrs({"form": region.form, "body": SubGraph(body)})
    operands = tuple(mapping.get(x, x) for x in region.operands)
    return Node(Op.FUSED, operands, attrs, region.root.aval.strong(), region.root.where)


def _body(region: Match) -> Graph:
    """The region as a graph of its own: fresh inputs for the operands,
    constants copied in, the absorbed ops in their original order."""
    env: dict[Node, Node] = {}
    inputs = []
    for i, x in enumerate(region.operands):
        aval = Aval(x.aval.shape, x.aval.dtype)
        env[x] = Node(Op.INPUT, (), Attrs({"aval": aval, "index": i}), aval)
        inputs.append(env[x])
    order = []
    for node in _region_nodes(region):
        if node not in env:
            env[node] = Node(node.op, tuple(env[x] for x in node.inputs), node.attrs,
                             node.aval, node.where)
            order.append(env[node])
    names = [f"x{i}" for i in range(len(inputs))]
    return Graph.build(inputs, [env[region.root]], names, region.form, order=order)


def _region_nodes(region: Match) -> list[Node]:
    """The region's ops and copied constants, inputs before users."""
    seen, order = set(region.operands), []

    def visit(node: Node) -> None:
        stack = [(node, iter(node.inputs))]
        while stack:
            top, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                order.append(top)
            elif child not in seen:
                if child not in region.internal and not is_scalar_const(child):
                    raise GraphError(f"fused form {region.form}: %{child!r} feeds the region "
                                     f"but is neither an operand nor absorbed")
                seen.add(child)
                stack.append((child, iter(child.inputs)))

    seen.add(region.root)
    visit(region.root)
    return order


def _rebuilt(graph: Graph, mapping, order) -> Graph:
    outputs = [mapping.get(x, x) for x in graph.outputs]
    inputs = [mapping.get(x, x) for x in graph.inputs]
    body = [n for n in order if n.op is not Op.INPUT]
    return Graph.build(inputs, outputs, graph.input_names, graph.name, order=body)


def unfuse(graph: Graph) -> Graph:
    """``graph`` with every fused node replaced by its body's ops again."""
    if not any(n.op is Op.FUSED for n in graph.nodes):
        return graph
    mapping: dict[Node, Node] = {}
    order = []
    for node in graph.nodes:
        if node.op is Op.FUSED:
            mapping[node] = _inline(node, mapping, order)
        else:
            mapping[node] = _remap(node, mapping)
            order.append(mapping[node])
    return _rebuilt(graph, mapping, order)


def _inline(node: Node, mapping, order) -> Node:
    body = node.attrs["body"].graph
    env = {i: mapping.get(x, x) for i, x in zip(body.inputs, node.inputs)}
    for inner in body.nodes:
        if inner not in env:
            env[inner] = Node(inner.op, tuple(env[x] for x in inner.inputs), inner.attrs,
                              inner.aval, inner.where)
            order.append(env[inner])
    return env[body.outputs[0]]


# -------------------------------------------------------------- the report

def fired(graph: Graph) -> list[Fired]:
    """Every fused node of ``graph``: its form, node index and source line."""
    return [Fired(n.attrs["form"], i, n.where) for i, n in enumerate(graph.nodes)
            if n.op is Op.FUSED]


def report_lines(graph: Graph, how: str | None = None) -> list[tuple[str, str]]:
    """``("fused", text)`` for a report: per form, how often and where, then
    how the strategy ran them (``how``), when any fired."""
    sites = defaultdict(list)
    for f in fired(graph):
        sites[f.form].append(f.where or f"%{f.index}")
    if not sites:
        return [("fused", "no fused form fired")]
    text = "; ".join(f"{form} x{len(w)} ({', '.join(w)})" for form, w in sites.items())
    return [("fused", f"{text}. {how}" if how else text)]


# --------------------------------------------------- the fused primitive's rules

def _shape(*args: Aval, form, body: SubGraph) -> Aval:
    graph = body.graph
    expected = [x.aval for x in graph.inputs]
    if [a.strong() for a in args] != [a.strong() for a in expected]:
        shown = ", ".join(str(a) for a in args)
        raise ShapeError(f"fused form '{form}': operands ({shown}) do not match its body's "
                         f"inputs ({', '.join(str(a) for a in expected)})")
    return graph.outputs[0].aval.strong()


def _eval(*args, form, body: SubGraph):
    """A fused form means exactly its body: run it node by node."""
    return run_graph(body.graph, args)[0]


def _jvp(operands, tangents, *, form, body: SubGraph):
    """Differentiated as its body: the body's JVP, replayed inline, so the
    derivative holds the composition (jit fuses it again)."""
    graph = body.graph
    derivative = jvp_graph(graph, [t is not None for t in tangents])
    given = [t for t, x in zip(tangents, graph.inputs) if t is not None and is_float(x.aval)]
    primal, tangent = replay(derivative, *operands, *given)
    return primal, tangent


def _batch(args, bdims, *, form, body: SubGraph):
    """Batched as its body, inlined (jit fuses it again)."""
    size = batch_size(args, bdims)
    return replay(batched_subgraph(body.graph, tuple(bdims), size), *args)[0], 0


register(RegionRules(Op.FUSED, shape=_shape, eval=_eval, jvp=_jvp, batch=_batch))
