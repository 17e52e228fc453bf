"""Region nodes: several results, closed sub-graphs as pure data, one walker
for bodies, and per-primitive rules (partial evaluation included)."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import (
    EVAL,
    Attrs,
    Aval,
    Graph,
    GraphError,
    Literal,
    Node,
    Op,
    SubGraph,
    dtypes,
    subgraphs,
    verify,
    walk,
)
from isokernel.record import replay, trace
from isokernel.transforms.fusion import fuse
from isokernel.transforms.linearize import PARTIAL_EVAL, Split
from isokernel.transforms.regions import REGION_RULES

X = np.linspace(0.1, 2.0, 8)


@ik.custom_vjp
def polar(r):
    """Two outputs from one body: cos and sin of r."""
    return inp.cos(r), inp.sin(r)


polar.defvjp(lambda r: (polar(r), (r,)),
             lambda res, cts: (-cts[0] * inp.sin(res[0]) + cts[1] * inp.cos(res[0]),))


@ik.custom_jvp
def twin(x):
    return inp.exp(x), inp.exp(x) * 2.0


@twin.defjvp
def _twin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    e = inp.exp(x)
    return (e, e * 2.0), (e * t, e * 2.0 * t)


def _custom_nodes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.op in (Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL)]


# ----------------------------------------------------------- several results


def test_a_two_output_custom_call_is_one_node_with_two_results():
    graph = trace(lambda r: polar(r), X)
    (node,) = _custom_nodes(graph)
    assert node.several and len(node.avals) == 2
    gets = [n for n in graph.nodes if n.op is Op.GET]
    assert [g.attrs["index"] for g in gets] == [0, 1] and all(g.inputs == (node,) for g in gets)
    assert "%1:(f64[8], f64[8]) = custom_vjp_call %0" in str(graph)


class _Counter:
    def __init__(self, rule):
        self.rule, self.calls = rule, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.rule(*args, **kwargs)


def test_evaluating_a_two_output_call_runs_its_body_once(monkeypatch):
    """EVAL of the node (what the reference and eager replays run) computes
    both results from one run of the body: its cos is evaluated once."""
    graph = trace(lambda r: polar(r), X)
    counter = _Counter(EVAL[Op.COS])
    monkeypatch.setitem(EVAL, Op.COS, counter)
    c, s = replay(graph, X)
    assert counter.calls == 1
    assert np.array_equal(c, np.cos(X)) and np.array_equal(s, np.sin(X))


@pytest.mark.parametrize("strategy", ["reference", "threads", "native"])
def test_a_jitted_two_output_call_runs_its_body_once_per_call(strategy, monkeypatch):
    f = ik.jit(lambda r: polar(r), strategy=strategy)
    compiled = f.lower(X).compile()
    ops = [n.op for n in compiled.graph.nodes]
    assert ops.count(Op.COS) == 1 and ops.count(Op.SIN) == 1  # the body, inlined once
    c, s = f(X)
    assert np.array_equal(c, np.cos(X)) and np.array_equal(s, np.sin(X))


def test_gradients_through_a_two_output_custom_vjp_use_bwd_once():
    g = ik.grad(lambda r: inp.sum(polar(r)[0] * 3.0 + polar(r)[1]))(X)
    np.testing.assert_allclose(g, -3.0 * np.sin(X) + np.cos(X), rtol=1e-15)
    graph = trace(ik.grad(lambda r: inp.sum(polar(r)[0] + polar(r)[1])), X)
    assert not _custom_nodes(graph)  # bwd replayed: one custom_lin, transposed once


def test_a_two_output_custom_jvp_differentiates_and_batches():
    t = ik.jvp(lambda x: twin(x)[1], (X,), (np.ones(8),))[1]
    np.testing.assert_allclose(t, 2.0 * np.exp(X))
    rows = np.stack([X, X + 1.0])
    got = ik.vmap(lambda x: twin(x)[0] + twin(x)[1])(rows)
    np.testing.assert_allclose(got, 3.0 * np.exp(rows))
    grads = ik.vmap(ik.grad(lambda x: inp.sum(twin(x)[1])))(rows)
    np.testing.assert_allclose(grads, 2.0 * np.exp(rows))


# ------------------------------------------------------------ sub-graphs


def test_attributes_are_pure_data():
    """No builder, no lazy rule: every attribute of every node of every body
    is a value (numbers, dtypes, tuples, literals, sub-graphs)."""
    pure = (int, float, str, bool, tuple, np.dtype, Literal, SubGraph, Aval)
    graph = trace(ik.grad(lambda x: inp.sum(twin(x)[0] + polar(x)[1])), X)
    recorded = trace(lambda x: (twin(x), polar(x)), X)
    for g in (graph, recorded):
        for node in walk(g):
            for value in node.attrs.values():
                assert isinstance(value, pure), (node.op, type(value))


def test_sub_graphs_compare_by_structure_not_source_line():
    def f(x):
        return inp.exp(x) * 2.0
    a = SubGraph(trace(f, X))
    b = SubGraph(trace(lambda x: inp.exp(x) * 2.0, X))  # another line, another name
    c = SubGraph(trace(lambda x: inp.exp(x) * 3.0, X))
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert len({a, b, c}) == 2


def test_equal_custom_calls_are_one_node():
    graph = trace(lambda x: twin(x)[0] + twin(x)[0], X)
    assert len(_custom_nodes(graph)) == 1


def test_the_printer_shows_a_fused_forms_body_indented():
    graph = fuse(trace(lambda x, y: inp.exp(2.0 * x * y), X, X))
    text = str(graph)
    fused = next(n for n in graph.nodes if n.op is Op.FUSED)
    (name, sub), = subgraphs(fused)
    assert name == "body"
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if " = fused " in line)
    assert lines[at + 1].startswith("    body = graph ")
    assert any(line.startswith("      %") and " = exp " in line for line in lines[at + 1:])
    assert lines[-1].startswith("  return ")


def _fused_with_body(body: Graph, operand: Node) -> Graph:
    node = Node(Op.FUSED, (operand,), Attrs({"form": "test", "body": SubGraph(body)}),
                body.outputs[0].aval)
    return Graph((operand,), (operand, node), (node,), ("x",), "outer")


def _input(aval: Aval) -> Node:
    return Node(Op.INPUT, (), Attrs({"aval": aval, "index": 0}), aval)


def test_verify_checks_bodies_and_names_the_carrier():
    f64 = Aval((8,), dtypes.float64)
    inner = _input(f64)
    bad = Node(Op.EXP, (inner,), Attrs(), Aval((8,), dtypes.float32))  # wrong dtype
    body = Graph((inner,), (inner, bad), (bad,), ("x",), "body")
    with pytest.raises(GraphError, match=r"%1 \(fused\), body 'body': %1 \(exp\): recorded "
                                         r"as f32\[8\], its operands give f64\[8\]"):
        verify(_fused_with_body(body, _input(f64)))
    good = Node(Op.EXP, (inner,), Attrs(), f64)
    verify(_fused_with_body(Graph((inner,), (inner, good), (good,), ("x",), "body"),
                            _input(f64)))


def test_verify_refuses_reading_several_results_without_get():
    graph = trace(lambda r: polar(r), X)
    node = _custom_nodes(graph)[0]
    direct = Node(Op.NEG, (node,), Attrs(), node.avals[0])
    broken = Graph(graph.inputs, (*graph.nodes, direct), (direct,), graph.input_names)
    with pytest.raises(GraphError, match="reads custom_vjp_call, which has several results"):
        verify(broken)
    with pytest.raises(GraphError, match="has several results; return its get nodes"):
        verify(Graph(graph.inputs, graph.nodes, (node,), graph.input_names))


def test_region_primitives_keep_their_rules_together():
    for op in (Op.FUSED, Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL, Op.CUSTOM_LIN):
        rules = REGION_RULES[op]
        assert rules.shape is not None and rules.eval is not None and rules.batch is not None
    assert REGION_RULES[Op.CUSTOM_LIN].transpose is not None


# ----------------------------------------------------- partial evaluation


def test_linearize_calls_a_partial_evaluation_rule_and_keeps_the_result(monkeypatch):
    """A rule for mul that splits x * t as the default would (x a residual,
    the product staged): linearize calls it and the gradient is the same."""
    from isokernel.record import bind
    calls = []

    def split_mul(node, operands, known):
        calls.append(known)
        k = known.index(True)
        residual = operands[k]

        def staged(residuals, ops):
            linear = ops[1 - k]
            return bind(Op.MUL, residuals[0], linear) if k == 0 else \
                bind(Op.MUL, linear, residuals[0])
        return Split(known=None, residuals=(residual,), staged=staged)

    def f(x):
        return inp.sum(inp.sin(x) * x)
    want = ik.grad(f)(X)
    monkeypatch.setitem(PARTIAL_EVAL, Op.MUL, split_mul)
    got = ik.grad(f)(X)
    assert calls and all(sum(k) == 1 for k in calls)
    assert np.array_equal(got, want)


# ------------------------------------------------------------ planning


def test_planning_descends_into_bodies_and_names_the_op_it_refused(monkeypatch):
    """A profile whose provider has every capsule but exp's refuses a graph
    whose only exp sits in a fused form's body, naming exp and the body."""
    import dataclasses

    from isokernel.backends import capsules
    from isokernel.backends.planning import Profile, plan
    from isokernel.ir import PlanningError

    monkeypatch.setattr(capsules, "_REGISTRY", dict(capsules._REGISTRY))
    for c in capsules.registered():
        if c.provider == "numpy" and c.op is not Op.EXP:
            capsules.register(dataclasses.replace(c, provider="no-exp"))
    profile = Profile("no-exp", "cpu", ("no-exp",), frozenset({"reference"}))
    graph = fuse(trace(lambda x, y: inp.exp(2.0 * x * y), X, X))
    assert [n.op for n in graph.nodes if n.op is Op.EXP] == []  # only inside the body
    with pytest.raises(PlanningError, match=r"no accepted capsule for: exp \(.*in body "
                                            r"'body' of fused at "):
        plan(graph, profile)
    plan(trace(lambda x, y: 2.0 * x * y, X, X), profile)  # no exp anywhere: accepted
