"""Derivatives: analytic cases, the call forms (argnums, has_aux, pytrees),
the written conventions (docs/autodiff.md), float32, error messages, graph
size and the graph passes."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.cli import main
from isokernel.ir import Op
from isokernel.transforms import (
    cse,
    dce,
    jvp_graph,
    linearize_graph,
    simplify,
    transpose_graph,
    vjp_graph,
    vmap_graph,
)

X = np.linspace(0.2, 1.4, 7)


# ------------------------------------------------------------- analytic


def test_grad_of_a_polynomial_and_a_transcendental():
    np.testing.assert_allclose(ik.grad(lambda x: x ** 3.0)(2.0), 12.0)
    np.testing.assert_allclose(ik.grad(lambda x: inp.sum(inp.exp(x) * inp.sin(x)))(X),
                               np.exp(X) * (np.sin(X) + np.cos(X)), rtol=1e-14)


def test_jvp_and_linearize_agree_with_the_analytic_tangent():
    t = np.arange(7.0)
    out, tangent = ik.jvp(inp.tanh, (X,), (t,))
    np.testing.assert_allclose(out, np.tanh(X))
    np.testing.assert_allclose(tangent, (1 - np.tanh(X) ** 2) * t, rtol=1e-14)
    out2, f_jvp = ik.linearize(inp.tanh, X)
    np.testing.assert_array_equal(out2, out)
    np.testing.assert_allclose(f_jvp(t), tangent, rtol=1e-15)


def test_vjp_returns_one_cotangent_per_primal():
    out, pull = ik.vjp(lambda a, b: a * b, X, 2.0 * X)
    ca, cb = pull(np.ones(7))
    np.testing.assert_allclose(ca, 2.0 * X)
    np.testing.assert_allclose(cb, X)


def test_value_and_grad_argnums_tuple():
    def f(a, b, scale):
        return inp.sum(a * b) * scale
    value, (ga, gb) = ik.value_and_grad(f, argnums=(0, 1))(X, X + 1.0, 3.0)
    np.testing.assert_allclose(value, np.sum(X * (X + 1)) * 3.0)
    np.testing.assert_allclose(ga, 3.0 * (X + 1.0))
    np.testing.assert_allclose(gb, 3.0 * X)


def test_non_differentiated_arguments_may_drive_python_control_flow():
    def f(x, n):
        for _ in range(n):
            x = inp.sin(x)
        return inp.sum(x)
    np.testing.assert_allclose(ik.grad(f)(X, 2), np.cos(np.sin(X)) * np.cos(X), rtol=1e-14)


def test_has_aux_returns_aux_undifferentiated():
    def f(x):
        y = inp.sin(x)
        return inp.sum(y), {"y": y, "n": 3}
    (g, aux) = ik.grad(f, has_aux=True)(X)
    np.testing.assert_allclose(g, np.cos(X))
    np.testing.assert_allclose(aux["y"], np.sin(X))
    (value, aux2), g2 = ik.value_and_grad(f, has_aux=True)(X)
    np.testing.assert_allclose(value, np.sum(np.sin(X)))
    np.testing.assert_array_equal(g2, g)


class Params(NamedTuple):
    w: np.ndarray
    b: float


def test_gradients_keep_the_pytree_structure():
    def loss(params, data):
        return inp.sum((params["layer"].w * data["x"] + params["layer"].b) ** 2)
    params = {"layer": Params(np.array([1.0, 2.0]), 0.5)}
    data = {"x": np.array([3.0, 4.0])}
    g = ik.grad(loss)(params, data)
    r = 2.0 * (params["layer"].w * data["x"] + 0.5)
    assert isinstance(g["layer"], Params)
    np.testing.assert_allclose(g["layer"].w, r * data["x"])
    np.testing.assert_allclose(g["layer"].b, np.sum(r))


def test_jacobian_shapes_follow_output_then_input():
    def f(x):
        return inp.reshape(x, (2, 3)) * 2.0
    x = np.arange(6.0)
    for jac in (ik.jacfwd(f), ik.jacrev(f), ik.jacobian(f)):
        j = jac(x)
        assert j.shape == (2, 3, 6)
        np.testing.assert_array_equal(j.reshape(6, 6), 2.0 * np.eye(6))


def test_jacobian_of_a_pytree_output_and_input():
    def f(p):
        return {"s": inp.sum(p[0] * p[1]), "v": p[0] * 3.0}
    p = (np.array([1.0, 2.0]), np.array([5.0, 7.0]))
    for jac in (ik.jacfwd(f), ik.jacrev(f)):
        j = jac(p)
        np.testing.assert_allclose(j["s"][0], p[1])
        np.testing.assert_allclose(j["s"][1], p[0])
        np.testing.assert_allclose(j["v"][0], 3.0 * np.eye(2))
        np.testing.assert_allclose(j["v"][1], np.zeros((2, 2)))


def test_jacobian_takes_the_cheaper_direction():
    assert ik.transforms.jacobian_mode(n_in=2048, n_out=1) == "reverse"
    assert ik.transforms.jacobian_mode(n_in=3, n_out=100) == "forward"
    assert ik.transforms.jacobian_mode(n_in=5, n_out=5) == "forward"

    def f(x):
        return inp.sum(inp.sin(x) ** 2.0)
    x = np.linspace(0, 1, 256)
    graph = ik.jit(ik.jacobian(f)).lower(x).graph
    assert all(n.aval.size <= 256 for n in graph.nodes)  # no 256x256 basis: reverse mode
    forward = ik.jit(ik.jacobian(f, mode="forward")).lower(x).graph
    assert any(n.aval.shape == (256, 256) for n in forward.nodes)
    np.testing.assert_allclose(ik.jacobian(f)(x), ik.jacobian(f, mode="forward")(x),
                               rtol=1e-13, atol=1e-15)


def test_hvp_is_hessian_times_vector():
    def f(x):
        return inp.sum(inp.exp(x) * x[::-1])
    v = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(ik.hvp(f, (X,), (v,)), ik.hessian(f)(X) @ v, rtol=1e-13)


# ------------------------------------------------------------ conventions


def test_abs_derivative_at_zero_is_zero():
    g = ik.grad(lambda x: inp.sum(inp.abs(x)))(np.array([-2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(g, [-1.0, 0.0, 1.0])


def test_max_min_ties_split_evenly():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0])
    ga, gb = ik.grad(lambda a, b: inp.sum(inp.maximum(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(gb, [0.5, 1.0, 0.0])
    ga, gb = ik.grad(lambda a, b: inp.sum(inp.minimum(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gb, [0.5, 0.0, 1.0])
    g = ik.grad(lambda x: inp.max(x))(np.array([2.0, 7.0, 7.0, 7.0]))
    np.testing.assert_allclose(g, [0.0, 1 / 3, 1 / 3, 1 / 3])
    g = ik.grad(lambda x: inp.min(x))(np.array([2.0, 7.0, 2.0]))
    np.testing.assert_array_equal(g, [0.5, 0.0, 0.5])


def test_where_unselected_branch_gets_zero_and_never_leaks_nan():
    def safe_log(x):
        return inp.sum(inp.where(x > 0, inp.log(inp.abs(x)), x * 2.0))
    with np.errstate(all="ignore"):
        g = ik.grad(safe_log)(np.array([-1.0, 0.0, 2.0]))
        np.testing.assert_array_equal(g, [2.0, 2.0, 0.5])

        def inf_branch(x):  # 1/x is inf at 0, but is not selected there
            return inp.sum(inp.where(x == 0, 3.0 * x, 1.0 / x))
        g = ik.grad(inf_branch)(np.array([0.0, 2.0]))
        np.testing.assert_array_equal(g, [3.0, -0.25])
        _, t = ik.jvp(inf_branch, (np.array([0.0, 2.0]),), (np.ones(2),))
        assert t == 3.0 - 0.25

        def nan_branch(x):  # sqrt(x) is NaN for x < 0, and so is its derivative
            return inp.sum(inp.where(x > 0, inp.sqrt(x), x))
        g = ik.grad(nan_branch)(np.array([-4.0, 4.0]))
        np.testing.assert_array_equal(g, [1.0, 0.25])
        g = ik.jit(ik.grad(nan_branch))(np.array([-4.0, 4.0]))
        np.testing.assert_array_equal(g, [1.0, 0.25])


def test_sqrt_derivative_at_zero_is_plus_inf():
    with np.errstate(all="ignore"):
        assert ik.grad(inp.sqrt)(0.0) == np.inf
        assert ik.grad(lambda x: inp.sqrt(x))(np.float32(0.0)) == np.inf


def test_integer_and_bool_inputs_get_zero_tangents():
    def f(x, n, flag):
        return x * inp.astype(n, inp.float64) + inp.where(flag, x, 0.0)
    n, flag = np.array([2, 3]), np.array([True, False])
    out, t = ik.jvp(f, (np.ones(2), n, flag), (np.ones(2), np.array([9, 9]), flag))
    np.testing.assert_array_equal(t, [3.0, 3.0])
    _, pull = ik.vjp(f, np.ones(2), n, flag)
    cx, cn, cf = pull(np.ones(2))
    np.testing.assert_array_equal(cx, [3.0, 3.0])
    assert cn.dtype == np.int64 and not cn.any() and not cf.any()
    # an integer intermediate carries no derivative
    g = ik.grad(lambda x: inp.sum(inp.astype(inp.astype(x * 10.0, inp.int64), inp.float64)))(X)
    np.testing.assert_array_equal(g, np.zeros(7))


def test_float32_programs_differentiate_in_float32():
    x32 = X.astype(np.float32)

    def f(x):
        return inp.sum(inp.tanh(x) * 0.5 + inp.sqrt(x) / 3.0 + inp.maximum(x, 0.7) ** 2.0)
    for transform in (ik.grad, ik.hessian, ik.jacfwd):
        graph = ik.jit(transform(f)).lower(x32).graph
        floats = {n.aval.dtype for n in graph.nodes if n.aval.dtype.kind == "f"}
        assert floats == {np.dtype(np.float32)}, transform.__name__
    g = ik.grad(f)(x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, ik.grad(f)(X), rtol=2e-6)


def test_stop_gradient_blocks_tangents_and_cotangents():
    def f(x):
        return inp.sum(x * ik.stop_gradient(x))
    np.testing.assert_allclose(ik.grad(f)(X), X)
    assert ik.jvp(ik.stop_gradient, (X,), (np.ones(7),))[1].tolist() == [0.0] * 7
    np.testing.assert_array_equal(ik.stop_gradient(X), X)
    assert Op.STOP_GRADIENT not in ik.jit(f).lower(X).graph.ops()
    np.testing.assert_allclose(ik.jit(ik.grad(f))(X), X)


# ----------------------------------------------------------------- errors


def first_line(fn):
    return fn.__code__.co_firstlineno


def test_grad_of_a_non_scalar_output_names_function_problem_and_fix():
    def vector_model(x):
        return inp.sin(x)
    with pytest.raises(ik.DifferentiationError) as err:
        ik.grad(vector_model)(X)
    text = str(err.value)
    assert "vector_model" in text and f"test_autodiff.py:{first_line(vector_model)}" in text
    assert "f64[7]" in text and "scalar" in text and "inp.sum" in text and "jacobian" in text


def test_grad_of_an_integer_output_is_refused():
    def counts(x):
        return inp.sum(inp.astype(x > 0.5, inp.int64))
    with pytest.raises(ik.DifferentiationError, match=r"counts.*i64\[\].*only float outputs"):
        ik.grad(counts)(X)


def test_grad_with_respect_to_an_integer_input_is_refused():
    def f(n):
        return inp.sum(inp.astype(n, inp.float64))
    with pytest.raises(ik.DifferentiationError,
                       match=r"argument 'n' is i64\[3\]; only float and complex inputs.*argnums"):
        ik.grad(f)(np.arange(3))
    with pytest.raises(ik.DifferentiationError, match="only float values"):
        ik.jacrev(f)(np.arange(3))


def test_has_aux_requires_a_pair_and_argnums_in_range():
    with pytest.raises(ik.DifferentiationError, match="pair"):
        ik.grad(lambda x: inp.sum(x), has_aux=True)(X)
    with pytest.raises(ik.DifferentiationError, match="out of range"):
        ik.grad(lambda x: inp.sum(x), argnums=1)(X)
    with pytest.raises(ik.DifferentiationError, match="tuple of 2 values"):
        ik.grad(lambda x: (inp.sum(x), inp.sum(x)))(X)


def test_tangent_of_the_wrong_shape_is_refused():
    with pytest.raises(ik.DifferentiationError, match=r"tangent 0 is f64\[3\].*primal is f64"):
        ik.jvp(inp.sin, (X,), (np.ones(3),))


# ------------------------------------------------------ graph size and passes


def chain(n_steps: int):
    def model(x):
        y = x
        for i in range(n_steps):
            y = inp.sin(y) * (1.0 + 0.01 * i) + y * 0.5
        return inp.sum(y * y)
    return model


def derivative_sizes(steps: int) -> tuple[int, int, int]:
    x = np.linspace(0, 1, 4)
    model = chain(steps)
    n = len(ik.trace(model, x).nodes)
    grad_nodes = len(ik.jit(ik.grad(model)).lower(x).graph.nodes)
    hvp_nodes = len(ik.jit(lambda x, v: ik.hvp(model, (x,), (v,))).lower(x, x).graph.nodes)
    return n, grad_nodes, hvp_nodes


def test_derivative_graphs_grow_linearly():
    """Models of about n = 50 and n = 500 nodes: the gradient graph and the
    Hessian-vector graph (forward over reverse) stay within a fixed multiple
    of the model, the same multiple at both sizes."""
    small, large = derivative_sizes(8), derivative_sizes(83)
    assert 45 <= small[0] <= 55 and 450 <= large[0] <= 550
    for n, grad_nodes, hvp_nodes in (small, large):
        assert grad_nodes <= 2.5 * n and hvp_nodes <= 5 * n, (n, grad_nodes, hvp_nodes)
    assert large[1] / large[0] <= 1.1 * small[1] / small[0]
    assert large[2] / large[0] <= 1.1 * small[2] / small[0]


def test_unreachable_nodes_are_pruned_before_transforming():
    x = np.linspace(0, 1, 4)
    graph = ik.trace(lambda x: (inp.sum(inp.sin(x)), inp.exp(x)), x)
    only_first = ik.Graph.build(graph.inputs, graph.outputs[:1], graph.input_names)
    dead = ik.Graph(graph.inputs, graph.nodes, graph.outputs[:1], graph.input_names)
    assert Op.EXP in dead.ops()
    for transform in (jvp_graph, vjp_graph):
        derived = ik.verify(transform(dead))
        assert Op.EXP not in derived.ops()
        assert len(derived.nodes) == len(transform(only_first).nodes)


def test_every_pass_output_verifies():
    x = np.linspace(0.1, 1, 4)
    graph = ik.trace(lambda x, y: (inp.sum(inp.sin(x) * y), x[::-1] * 2.0), x, x)
    for derived in (jvp_graph(graph), vjp_graph(graph), vmap_graph(graph, [0, None], 3)[0],
                    dce(graph), cse(graph), simplify(graph)):
        ik.verify(derived)
    primal, linear = linearize_graph(graph)
    ik.verify(primal), ik.verify(linear)
    n_res = len(primal.outputs) - 2
    ik.verify(transpose_graph(linear, [False] * n_res + [True] * 2))


def test_cse_merges_equal_nodes_of_a_hand_built_graph():
    graph = ik.trace(lambda x: inp.sin(x) + inp.cos(x), np.ones(3))
    sin = next(n for n in graph.nodes if n.op is Op.SIN)
    twin = ik.ir.Node(Op.SIN, sin.inputs, sin.attrs, sin.aval)
    add = ik.ir.Node(Op.ADD, (sin, twin), ik.ir.EMPTY, sin.aval)
    doubled = ik.Graph.build(graph.inputs, [add], graph.input_names)
    assert [n.op for n in doubled.nodes].count(Op.SIN) == 2
    merged = ik.verify(cse(doubled))
    assert [n.op for n in merged.nodes].count(Op.SIN) == 1
    np.testing.assert_array_equal(ik.replay(merged, X)[0], 2 * np.sin(X))


def test_derivative_nodes_carry_the_model_line(tmp_path):
    graph = ik.jit(ik.grad(lambda x: inp.sum(inp.exp(x)))).lower(X).graph
    exp_where = next(n.where for n in graph.nodes if n.op is Op.EXP)
    assert exp_where.startswith("test_autodiff.py:")
    assert all(n.where == exp_where for n in graph.nodes if n.op is Op.MUL)


def test_report_shows_a_derivative_graph(tmp_path, capsys):
    model = tmp_path / "pixel_model.py"
    model.write_text("import isokernel\nimport isokernel.numpy as inp\n\n"
                     "def loss(x):\n    return inp.sum(inp.exp(x) * x)\n\n"
                     "grad_loss = isokernel.grad(loss)\n")
    assert main(["report", f"{model}:grad_loss", "--shape", "x=4:float64",
                 "--strategy", "reference"]) == 0
    out = capsys.readouterr().out
    assert "graph grad_loss(x: f64[4]) -> (f64[4])" in out
    assert "exp %0" in out and "pixel_model.py:5" in out and "exp: numpy.exp" in out
