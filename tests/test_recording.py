"""The recorder: hash-consing, folding, linear recording of reuse-heavy
loops, the text form, the verifier and tracer misuse."""

from __future__ import annotations

import time

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import Attrs, Aval, Graph, Node, Op, dtypes

X = np.linspace(0.1, 1.0, 8)


def test_structurally_equal_nodes_are_one_node():
    def f(x):
        return inp.exp(x) + inp.exp(x), inp.sin(x) * 2.0 + inp.sin(x) * 2.0
    graph = ik.trace(f, X)
    assert [n.op for n in graph.nodes].count(Op.EXP) == 1
    assert [n.op for n in graph.nodes].count(Op.SIN) == 1
    assert [n.op for n in graph.nodes].count(Op.MUL) == 1


def test_constant_subexpressions_fold():
    def f(x):
        c = inp.exp(np.array([1.0, 2.0])) * 3.0  # no tracer involved: computed now
        return x[:2] * c + inp.sqrt(2.0)
    graph = ik.trace(f, X)
    ops = [n.op for n in graph.nodes]
    assert Op.EXP not in ops and Op.SQRT not in ops
    np.testing.assert_array_equal(ik.replay(graph, X)[0], f(X))


def _fixed_point(sweeps: int):
    def f(x):
        acc = x
        for _ in range(sweeps):
            # the accumulator is used four times per sweep
            acc = 0.5 * (acc + x / acc) + 0.01 * acc * acc - 0.01 * inp.sqrt(acc * acc)
        return acc
    return f


def test_recording_is_linear_in_the_sweep_count():
    n8 = len(ik.trace(_fixed_point(8), X).nodes)
    start = time.process_time()  # this process's CPU time: other jobs on the machine do not count
    n64 = len(ik.trace(_fixed_point(64), X).nodes)
    seconds = time.process_time() - start
    assert n64 <= 8 * n8, (n8, n64)
    assert seconds < 1.0, seconds  # about 0.05 s


def test_text_form_carries_user_file_and_line():
    def f(x):
        return inp.exp(x)  # the line below must appear in the graph
    text = str(ik.trace(f, X))
    line = f.__code__.co_firstlineno + 1
    assert "= exp %0" in text and f"test_recording.py:{line}" in text
    assert text.splitlines()[0] == "graph f(x: f64[8]) -> (f64[8])"


def test_verify_catches_malformed_graphs():
    aval = Aval((3,), dtypes.float64)
    x = Node(Op.INPUT, (), Attrs({"aval": aval, "index": 0}), aval)
    bad_aval = Node(Op.EXP, (x,), Attrs(), Aval((3,), dtypes.float32))
    with pytest.raises(ik.GraphError, match="recorded as f32"):
        ik.verify(Graph((x,), (x, bad_aval), (bad_aval,)))
    y = Node(Op.EXP, (x,), Attrs(), aval)
    z = Node(Op.SIN, (y,), Attrs(), aval)
    with pytest.raises(ik.GraphError, match="not defined before"):
        ik.verify(Graph((x,), (x, z, y), (z,)))
    with pytest.raises(ik.GraphError, match="not a node of the graph"):
        ik.verify(Graph((x,), (x,), (y,)))


def test_python_control_flow_on_a_tracer_is_explained():
    def f(x):
        return x if x.sum() > 0 else -x
    with pytest.raises(ik.TracerError, match="inp.where"):
        ik.trace(f, X)


def test_escaped_tracer_is_refused():
    leaked = []
    ik.trace(lambda x: leaked.append(x) or x, X)
    with pytest.raises(ik.TracerError, match="pass it to the traced function"):
        ik.trace(lambda y: y + leaked[0], X)


def test_numpy_operands_defer_to_tracers():
    graph = ik.trace(lambda x: np.ones(8) + x * np.float64(2.0), X)
    assert ik.replay(graph, X)[0].tobytes() == (np.ones(8) + X * 2.0).tobytes()


def test_shape_errors_inside_a_trace_name_op_and_line():
    with pytest.raises(ik.ShapeError, match=r"add at test_recording.py:\d+"):
        ik.trace(lambda x: x + np.ones(3), X)
