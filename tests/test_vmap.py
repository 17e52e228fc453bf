"""vmap: every batching rule against a Python loop (bit for bit: the same
NumPy kernels on the same numbers), in_axes/out_axes, nesting, pytrees,
keywords, jit, and error messages."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import Op
from isokernel.ir.ops import CONTROL
from isokernel.record import bind
from isokernel.transforms.vmap import BATCH, NO_BATCH

from .test_autodiff_rules import OP_CASES


def _ints(x):
    return inp.astype(x * 64.0, inp.int64)


# ops without a derivative still batch
ZERO_TANGENT_CASES = {
    "rounding": lambda x, y: inp.floor(x) + inp.ceil(y) + inp.rint(x * y) + inp.trunc(x - y),
    "sign_floordiv": lambda x, y: inp.sign(x) * inp.floor_divide(x, y * y + 0.5),
    "logic": lambda x, y: inp.where(inp.logical_and(x < y, inp.logical_not(x == y)) |
                                    inp.logical_or(x >= y, x <= 0.0) & (x != y) & (x > 1.0),
                                    x, y),
    "stop_gradient": lambda x, y: ik.stop_gradient(x) * y,
    "integers": lambda x, y: inp.astype(inp.astype(x * 10.0, inp.int32) // 3, inp.float64),
    "logb": lambda x, y: bind(Op.LOGB, x * y) * y,
    "bits": lambda x, y: inp.astype(inp.bitwise_and(inp.bitwise_xor(
        inp.left_shift(_ints(x), 3), inp.invert(inp.right_shift(inp.bitwise_or(_ints(y), 5), 2))),
        0xFFFF), inp.float64) * x,
}
CASES = {**OP_CASES, **ZERO_TANGENT_CASES}
RNG = np.random.default_rng(7)
XS = RNG.uniform(-2, 2, (5, 3, 4))
Y = RNG.uniform(-2, 2, (3, 4))


def loop(f, xs, y, in_axes):
    out = []
    for i in range(5):
        a = xs[i] if in_axes[0] == 0 else (xs[:, i] if in_axes[0] == 1 else xs)
        b = y[i] if in_axes[1] == 0 else y
        out.append(f(a, b))
    return np.stack(out)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, None)])
def test_every_op_batches_like_a_loop(name, in_axes):
    f = CASES[name]
    xs = XS if in_axes[0] != 1 else np.moveaxis(XS, 0, 1)
    y = Y if in_axes[1] is None else XS[::-1]
    x = Y if in_axes[0] is None else xs
    got = ik.vmap(f, in_axes=in_axes)(x, y)
    want = loop(f, x, y, in_axes)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-300)


def test_cases_exercise_every_batching_rule():
    seen = set()
    for f in CASES.values():
        seen |= ik.trace(f, Y, Y).ops()
    # test_autodiff_custom and test_regions: the custom calls and the gets that read them
    custom = {Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL, Op.CUSTOM_LIN, Op.GET} | CONTROL
    # (control flow: test_control_flow.py)
    assert set(BATCH) - custom - seen == set()
    assert NO_BATCH == {Op.INPUT, Op.CONST}


def test_in_axes_out_axes_and_pytrees():
    def f(p, scale):
        return {"sum": p["a"] + p["b"] * scale, "a": p["a"]}
    p = {"a": np.arange(6.0).reshape(3, 2), "b": np.arange(3.0)}
    out = ik.vmap(f, in_axes=({"a": 1, "b": None}, None), out_axes={"sum": 1, "a": 0})(p, 2.0)
    np.testing.assert_array_equal(out["sum"], p["a"] + 2.0 * p["b"][:, None])
    np.testing.assert_array_equal(out["a"], p["a"].T)


def test_unbatched_outputs_are_broadcast_or_kept_with_out_axes_none():
    f = lambda x, c: (x * 2.0, c + 1.0)  # noqa: E731
    a, b = ik.vmap(f, in_axes=(0, None))(np.arange(3.0), np.ones(2))
    np.testing.assert_array_equal(b, np.full((3, 2), 2.0))
    a, b = ik.vmap(f, in_axes=(0, None), out_axes=(0, None))(np.arange(3.0), np.ones(2))
    np.testing.assert_array_equal(b, np.full(2, 2.0))
    with pytest.raises(ValueError, match="out_axes=None for an output that depends"):
        ik.vmap(f, in_axes=(0, None), out_axes=None)(np.arange(3.0), np.ones(2))


def test_keyword_arguments_are_mapped_over_axis_zero():
    f = lambda x, *, shift: x + shift  # noqa: E731
    out = ik.vmap(f, in_axes=None)(np.ones(2), shift=np.arange(3.0))
    np.testing.assert_array_equal(out, np.arange(3.0)[:, None] + np.ones(2))


def test_nested_vmap_is_an_outer_product():
    f = lambda a, b: a * b  # noqa: E731
    out = ik.vmap(ik.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(np.arange(3.0),
                                                                      np.arange(4.0))
    np.testing.assert_array_equal(out, np.outer(np.arange(3.0), np.arange(4.0)))


def test_unmapped_arguments_may_be_python_values():
    def f(x, n, mode):
        return x ** float(n) if mode == "pow" else x
    np.testing.assert_array_equal(ik.vmap(f, in_axes=(0, None, None))(np.arange(3.0), 2, "pow"),
                                  np.arange(3.0) ** 2)


def test_vmap_of_matrix_products_batches_either_side():
    a, b = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(3, 5))
    np.testing.assert_allclose(ik.vmap(inp.matmul, in_axes=(0, None))(a, b), a @ b,
                               rtol=1e-14)
    c = RNG.normal(size=(4, 3, 5))
    np.testing.assert_allclose(ik.vmap(inp.matmul, in_axes=(None, 0))(a[0], c), a[0] @ c,
                               rtol=1e-14)
    np.testing.assert_allclose(ik.vmap(inp.matmul)(a, c), a @ c, rtol=1e-14)
    np.testing.assert_allclose(ik.vmap(inp.dot, in_axes=(1, None))(a, b[:, 0]),
                               np.stack([a[:, i] @ b[:, 0] for i in range(2)]), rtol=1e-14)


def test_batched_padding_value():
    def f(x, v):
        return inp.pad(x, ((1, 1),), constant_values=v)
    out = ik.vmap(f)(np.ones((2, 3)), np.array([7.0, 8.0]))
    np.testing.assert_array_equal(out, [[7, 1, 1, 1, 7], [8, 1, 1, 1, 8]])


def test_jit_of_vmap_and_vmap_of_jit():
    f = lambda x: inp.sum(inp.sin(x) * x)  # noqa: E731
    want = np.sum(np.sin(XS) * XS, axis=(1, 2))
    # the default strategy sums in NumPy's order, or its own fixed one (and calls libm's
    # sin) where it compiles the graph as one C program: n·eps-bounded
    np.testing.assert_allclose(ik.jit(ik.vmap(f))(XS), want, rtol=1e-13)
    np.testing.assert_allclose(ik.vmap(ik.jit(f))(XS), want, rtol=1e-13)
    graph = ik.jit(ik.vmap(f)).lower(XS).graph
    ik.verify(graph)
    assert {n.aval.shape for n in graph.nodes if n.op is Op.SIN} == {(5, 3, 4)}


def test_batch_size_errors_name_the_arguments():
    with pytest.raises(ValueError, match=r"mapped axes differ in size \(x: 3, y: 4\)"):
        ik.vmap(lambda x, y: x + y)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="no argument is mapped"):
        ik.vmap(lambda x: x, in_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="in_axes 1 for 'x', which has rank 1"):
        ik.vmap(lambda x: x, in_axes=1)(np.ones(3))
    with pytest.raises(ValueError, match="in_axes has 2 entries for 1"):
        ik.vmap(lambda x: x, in_axes=(0, 0))(np.ones(3))


def test_axis_size_without_mapped_arguments():
    out = ik.vmap(lambda x: x * 2.0, in_axes=None, axis_size=3)(np.ones(2))
    np.testing.assert_array_equal(out, np.full((3, 2), 2.0))
