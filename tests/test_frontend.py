"""``isokernel.numpy`` outside a trace: NumPy values, NumPy's semantics, and
clear errors for what isokernel refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp

X64 = np.linspace(-0.9, 0.9, 12).reshape(3, 4)
X32 = X64.astype(np.float32)

DIRECT = [
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
    "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh", "abs",
    "negative", "sign", "floor", "ceil", "rint", "trunc", "square", "reciprocal",
]


@pytest.mark.parametrize("name", DIRECT)
@pytest.mark.parametrize("x", [X32, X64], ids=["f32", "f64"])
def test_unary_matches_numpy_bits(name, x):
    with np.errstate(all="ignore"):
        got = getattr(inp, name)(np.abs(x) + 1.0 if name == "arccosh" else x)
        want = getattr(np, name)(x)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power", "maximum",
                                  "minimum", "arctan2", "floor_divide", "remainder"])
def test_binary_matches_numpy_bits_with_broadcasting(name):
    y = np.linspace(0.5, 2.0, 4)
    with np.errstate(all="ignore"):
        got, want = getattr(inp, name)(X64, y), getattr(np, name)(X64, y)
    assert got.tobytes() == want.tobytes() and got.shape == want.shape


def test_python_scalars_are_weak():
    assert (X32 * 2.5).dtype == np.float32
    assert inp.multiply(X32, 2.5).dtype == np.float32
    assert inp.add(np.arange(3, dtype=np.int32), 1).dtype == np.int32
    assert inp.add(np.arange(3, dtype=np.int32), 0.5).dtype == np.float64  # NumPy's rule
    assert inp.exp(1.0) == math.exp(1.0) and isinstance(inp.exp(1.0), float)
    assert inp.add(2, 3) == 5 and isinstance(inp.add(2, 3), int)


def test_mixing_float_dtypes_names_op_line_and_fix():
    with pytest.raises(ik.DTypeError) as err:
        inp.add(X32, X64)
    text = str(err.value)
    assert "add at test_frontend.py:" in text
    assert "float32 and float64" in text and "astype" in text
    assert isinstance(err.value, TypeError)


def test_integer_overflow_of_weak_scalar_is_an_error():
    with pytest.raises(ik.DTypeError, match="does not fit int32"):
        inp.add(np.arange(3, dtype=np.int32), 2**40)


def test_unsupported_dtype_is_refused():
    with pytest.raises(ik.DTypeError, match="float16"):
        inp.exp(np.ones(3, np.float16))


def test_shape_mismatch_names_shapes_and_fix():
    with pytest.raises(ik.ShapeError, match=r"\(3, 4\) and \(3,\) do not broadcast"):
        inp.add(X64, np.ones(3))


def test_where_needs_bool_and_computes_a_select():
    got = inp.where(X64 > 0, X64, 0.0)
    assert got.tobytes() == np.where(X64 > 0, X64, 0.0).tobytes()
    with pytest.raises(ik.DTypeError, match="condition must be bool"):
        inp.where(X64, X64, 0.0)


def test_compositions():
    a, b = np.array([3.0, 0.0, np.inf, 1e300]), np.array([4.0, 0.0, np.nan, 1e300])
    assert np.allclose(inp.hypot(a, b)[[0, 1, 3]], np.hypot(a, b)[[0, 1, 3]], rtol=1e-15)
    assert inp.hypot(a, b)[2] == np.inf
    assert inp.clip(X64, -0.5, 0.5).tobytes() == np.clip(X64, -0.5, 0.5).tobytes()
    assert inp.mean(X64, axis=1).tobytes() == np.mean(X64, axis=1).tobytes()
    v = np.array([1.0, np.nan, np.inf, -np.inf])
    for name in ("isnan", "isinf", "isfinite"):
        assert (getattr(inp, name)(v) == getattr(np, name)(v)).all()
    assert inp.round(np.array([0.125, 2.5]), 2).tobytes() == np.round([0.125, 2.5], 2).tobytes()


@pytest.mark.parametrize("fn,kw", [(np.sum, {}), (np.prod, {}), (np.max, {}), (np.min, {})])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(fn, kw, axis, keepdims):
    got = getattr(inp, fn.__name__)(X64, axis=axis, keepdims=keepdims)
    want = fn(X64, axis=axis, keepdims=keepdims)
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_reduction_errors():
    with pytest.raises(ik.ShapeError, match="axis 2 is out of range"):
        inp.sum(X64, axis=2)
    with pytest.raises(ik.ShapeError, match="zero-size"):
        inp.max(np.ones((0, 3)), axis=0)


def test_layout_ops_match_numpy():
    cases = [
        (lambda m: m.reshape(4, 3), lambda x: inp.reshape(x, (4, -1))),
        (lambda m: m.T, lambda x: inp.transpose(x)),
        (lambda m: np.broadcast_to(m[0], (2, 4)), lambda x: inp.broadcast_to(x[0], (2, 4))),
        (lambda m: np.expand_dims(m, 1), lambda x: inp.expand_dims(x, 1)),
        (lambda m: np.squeeze(m[:1]), lambda x: inp.squeeze(x[:1])),
        (lambda m: np.concatenate([m, m], 1), lambda x: inp.concatenate([x, x], 1)),
        (lambda m: np.stack([m, m], -1), lambda x: inp.stack([x, x], -1)),
        (lambda m: m[::-2, 1:3], lambda x: x[::-2, 1:3]),
        (lambda m: m[..., None, -1], lambda x: x[..., None, -1]),
        (lambda m: m[2:0:-1, ::3], lambda x: x[2:0:-1, ::3]),
        (lambda m: m[5:], lambda x: x[5:]),
        (lambda m: np.pad(m, 1), lambda x: inp.pad(x, 1)),
        (lambda m: np.flip(m, 1), lambda x: inp.flip(x, 1)),
    ]
    for want_fn, got_fn in cases:
        want = want_fn(X64)
        for run in (got_fn, ik.jit(got_fn)):
            got = run(X64)
            assert got.shape == want.shape and got.tobytes() == np.ascontiguousarray(want).tobytes()


def test_indexing_takes_integers_slices_and_integer_arrays():
    np.testing.assert_array_equal(ik.jit(lambda x: x[np.array([0, 1])])(X64), X64[[0, 1]])
    with pytest.raises(ik.TracerError, match="integer arrays"):
        ik.jit(lambda x: x[1.5])(X64)
    with pytest.raises(IndexError, match="out of bounds"):
        ik.jit(lambda x: x[7])(X64)  # a static integer is checked as NumPy checks it


def test_matmul_and_dot():
    a, b, v = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4), np.arange(3.0)
    batch = np.arange(24.0).reshape(2, 3, 4)
    for want, got in [
        (a @ b, inp.matmul(a, b)), (v @ b, inp.matmul(v, b)), (a @ v, inp.matmul(a, v)),
        (v @ v, inp.matmul(v, v)), (a @ batch, inp.matmul(a, batch)),
        (np.dot(a, b), inp.dot(a, b)), (np.dot(batch.T, a), inp.dot(batch.T, a)),
        (np.dot(2.0, a), inp.dot(2.0, a)),
    ]:
        assert np.shape(got) == np.shape(want) and np.allclose(got, want)
    with pytest.raises(ik.ShapeError, match="inner sizes"):
        inp.matmul(a, a)


def test_constructors():
    assert inp.zeros((2, 3)).dtype == np.float64 and inp.ones(3, inp.float32).dtype == np.float32
    assert (inp.full((2,), 7) == 7).all() and inp.full((2,), 7).dtype == np.int64
    assert inp.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert inp.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert inp.zeros_like(X32).dtype == np.float32 and inp.ones_like(X32).shape == (3, 4)

    def f(x):
        return x + inp.zeros_like(x) + inp.full(x.shape, 2.0, x.dtype)
    graph = ik.trace(f, np.ones(10**6))
    assert max(n.aval.size for n in graph.consts()) == 1  # never materialized


def test_logical_ops_need_bools():
    m = X64 > 0
    assert ((m & ~m) == np.zeros_like(m)).all()
    with pytest.raises(ik.DTypeError, match="bool"):
        inp.logical_and(X64, m)


def test_astype_is_the_only_cast():
    assert inp.astype(X64, inp.float32).tobytes() == X64.astype(np.float32).tobytes()
    assert inp.add(inp.astype(X32, "float64"), X64).dtype == np.float64


@pytest.mark.parametrize("strategy", ["reference", "native"])
def test_array_of_nested_lists_holding_traced_values(strategy):
    # JAX's testPinvGradIssue2792 builds its matrix as jnp.array([[0., 0.], [-p, 1.]])
    def f(p, q):
        return inp.array([[0.0, q], [-p, 1.0]]), inp.array([[[p]], [[q]]])

    m, c = ik.jit(f, strategy=strategy)(2.0, 3.0)
    np.testing.assert_array_equal(m, np.array([[0.0, 3.0], [-2.0, 1.0]]))
    np.testing.assert_array_equal(c, np.array([[[2.0]], [[3.0]]]))
    d = ik.jacfwd(lambda p: inp.linalg.pinv(inp.array([[0.0, 0.0], [-p, 1.0]])))(0.5)
    np.testing.assert_allclose(d, [[0.0, -0.48], [0.0, -0.64]], rtol=1e-14)
