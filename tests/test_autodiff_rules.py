"""Every derivative rule, op by op: forward mode against central finite
differences, reverse mode by the inner-product identity <c, J t> = <Jᵀ c, t>,
and jit of the derivative against eager."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import Op
from isokernel.ir.ops import CONTROL
from isokernel.record import bind
from isokernel.transforms.fusion import fuse
from isokernel.transforms.jvp import JVP


def _pad(x, y):
    return inp.pad(x, ((1, 2), (0, 1)), constant_values=0.5) + \
        inp.pad(y, ((0, 3), (1, 0)), constant_values=inp.sum(x * y))


_TABLE = inp.Table(np.sin(np.linspace(0.0, 3.0, 13)) + np.linspace(0.0, 1.0, 13), -2.5, 0.4,
                   name="wiggle")


def _fused(x, y):
    """A recording holding a fused node (gaussian), as jit's graphs do."""
    graph = fuse(ik.trace(lambda a, b: inp.exp(-0.5 * (a * a)) * b, x, y))
    assert Op.FUSED in graph.ops()
    return ik.replay(graph, x, y)[0]


# name -> a function of two float64 (3, 4) arrays that exercises that op
OP_CASES = {
    "neg": lambda x, y: -x,
    "abs": lambda x, y: inp.abs(x) * y,
    "sqrt": lambda x, y: inp.sqrt(x * x + 1.0),
    "cbrt": lambda x, y: inp.cbrt(x),
    "exp": lambda x, y: inp.exp(x),
    "exp2": lambda x, y: inp.exp2(x),
    "expm1": lambda x, y: inp.expm1(x),
    "log": lambda x, y: inp.log(x * x + 0.5),
    "log2": lambda x, y: inp.log2(x * x + 0.5),
    "log10": lambda x, y: inp.log10(x * x + 0.5),
    "log1p": lambda x, y: inp.log1p(x * x),
    "sin": lambda x, y: inp.sin(x),
    "cos": lambda x, y: inp.cos(x),
    "tan": lambda x, y: inp.tan(0.5 * x),
    "arcsin": lambda x, y: inp.arcsin(0.4 * x),
    "arccos": lambda x, y: inp.arccos(0.4 * x),
    "arctan": lambda x, y: inp.arctan(x),
    "sinh": lambda x, y: inp.sinh(x),
    "cosh": lambda x, y: inp.cosh(x),
    "tanh": lambda x, y: inp.tanh(x),
    "arcsinh": lambda x, y: inp.arcsinh(x),
    "arccosh": lambda x, y: inp.arccosh(x * x + 1.5),
    "arctanh": lambda x, y: inp.arctanh(0.4 * x),
    "cast": lambda x, y: x * inp.astype(inp.astype(y * 3.0, inp.int64), inp.float64),
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y * y + 0.5),
    "pow": lambda x, y: inp.power(x * x + 0.5, y),
    "max": lambda x, y: inp.maximum(x, y),
    "min": lambda x, y: inp.minimum(x, y),
    "arctan2": lambda x, y: inp.arctan2(x, y),
    "rem": lambda x, y: inp.remainder(x, y * y + 0.7),
    "select": lambda x, y: inp.where(x > y, inp.sin(x), inp.cos(y)),
    "reduce_sum": lambda x, y: inp.sum(x * y, axis=1),
    "reduce_prod": lambda x, y: inp.prod(x, axis=0) + inp.prod(y),
    "reduce_max": lambda x, y: inp.max(x * y, axis=1),
    "reduce_min": lambda x, y: inp.min(x, axis=(0, 1)),
    "reshape": lambda x, y: inp.reshape(x, (2, 6)) * 2.0,
    "broadcast": lambda x, y: x[:, :1] * y + x[0],
    "transpose": lambda x, y: inp.transpose(x) * 1.5,
    "slice": lambda x, y: x[::2, 1::2] * y[1:, :2],
    "pad": _pad,
    "rev": lambda x, y: x[::-1, ::-1] * y,
    "concatenate": lambda x, y: inp.concatenate([x, y * y], axis=1),
    "dot_general": lambda x, y: x @ inp.transpose(y),
    "dot_batched": lambda x, y: inp.reshape(x, (3, 2, 2)) @ inp.reshape(y, (3, 2, 2)),
    "ldexp": lambda x, y: bind(Op.LDEXP, x * y, inp.floor(3.0 * y)),
    "copysign": lambda x, y: bind(Op.COPYSIGN, x * x - 1.0, y),
    "table_lookup": lambda x, y: _TABLE.lookup(x * 1.3) * y,
    "fused": _fused,
    # dense linear algebra primitives (the functions users call: test_linalg.py)
    "lu_triangular_solve": lambda x, y: bind(
        Op.TRIANGULAR_SOLVE, bind(Op.LU, x[:, :3] + 4.0 * np.eye(3))[0], y, lower=False,
        transpose_a=True, unit_diagonal=False),
    "cholesky": lambda x, y: bind(Op.CHOLESKY, x[:, :3] @ x[:, :3].T + 3.0 * np.eye(3)) @ y,
    "qr": lambda x, y: bind(Op.QR, x.T + y.T, mode="reduced")[1] * 2.0,
    "eigh": lambda x, y: bind(Op.EIGH, x[:, :3] @ x[:, :3].T + y[:, 1:],
                              lower=True)[0] * y[0, 0],
    "svd": lambda x, y: bind(Op.SVD, x * y, full_matrices=False)[1],
    # data-dependent indexing and sorting (test_indexing.py, test_sorting.py)
    "gather": lambda x, y: x[np.array([2, 0, 2])] * y[0],
    "scatter_add": lambda x, y: inp.at(x)[np.array([1, 1])].add(y[:2] * y[:2]),
    "scatter_set": lambda x, y: inp.at(x)[np.array([2, 0, 2])].set(y * 2.0),
    "scatter_max": lambda x, y: inp.at(x)[np.array([1, 1, 2])].max(y),
    "sort": lambda x, y: inp.sort(x * y, axis=1),
    # Fourier transforms (test_fft.py)
    "fft": lambda x, y: inp.real(inp.fft.fft(x * y)) + inp.fft.irfft(inp.fft.rfft(x), n=4),
    # complex values (test_complex.py): parts, conjugate, and a value made of parts
    "complex": lambda x, y: inp.real(inp.exp(bind(Op.COMPLEX, x, y)) * bind(Op.CONJ, bind(
        Op.COMPLEX, y, x))) + inp.imag(bind(Op.COMPLEX, x * y, x)),
}


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-2, 2, (2, 3, 4))
    tx, ty = rng.normal(size=(2, 3, 4))
    return x, y, tx, ty


def central_difference(f, primals, tangents, h=1e-6):
    plus = f(*(p + h * t for p, t in zip(primals, tangents)))
    minus = f(*(p - h * t for p, t in zip(primals, tangents)))
    return (np.asarray(plus) - np.asarray(minus)) / (2 * h)


def test_cases_exercise_every_jvp_rule():
    x, y, _, _ = inputs()
    seen = set()
    for f in OP_CASES.values():
        seen |= ik.trace(f, x, y).ops()
    # test_autodiff_custom.py: the custom-derivative calls, the results they are read by
    # (get), and custom_lin, whose forward-mode rule is a refusal
    custom = {Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL, Op.CUSTOM_LIN, Op.GET} | CONTROL
    # (control flow: test_control_flow.py)
    assert set(JVP) - custom <= seen


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_jvp_matches_central_differences(name):
    f = OP_CASES[name]
    x, y, tx, ty = inputs()
    out, tangent = ik.jvp(f, (x, y), (tx, ty))
    np.testing.assert_array_equal(out, f(x, y))
    fd = central_difference(f, (x, y), (tx, ty))
    np.testing.assert_allclose(tangent, fd, rtol=1e-7, atol=1e-8 * (1 + np.max(np.abs(fd))))


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_vjp_satisfies_the_inner_product_identity(name):
    f = OP_CASES[name]
    x, y, tx, ty = inputs(1)
    _, tangent = ik.jvp(f, (x, y), (tx, ty))
    out, pull = ik.vjp(f, x, y)
    c = np.random.default_rng(2).normal(size=np.shape(out))
    cx, cy = pull(c)
    lhs, rhs = np.sum(c * tangent), np.sum(cx * tx) + np.sum(cy * ty)
    scale = np.sum(np.abs(c * tangent)) + np.sum(np.abs(cx * tx)) + np.sum(np.abs(cy * ty))
    assert abs(lhs - rhs) <= 1e-13 * scale


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_jit_of_derivatives_equals_eager(name):
    f = OP_CASES[name]
    x, y, tx, ty = inputs(3)

    def both(x, y, tx, ty):
        _, tangent = ik.jvp(f, (x, y), (tx, ty))
        _, pull = ik.vjp(f, x, y)
        return tangent, pull(tangent)
    eager = both(x, y, tx, ty)
    jitted = ik.jit(both)(x, y, tx, ty)
    np.testing.assert_allclose(jitted[0], eager[0], rtol=1e-14, atol=1e-300)
    for got, want in zip(jitted[1], eager[1]):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)


def test_prod_derivative_is_exact_at_zeros():
    x = np.array([[2.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 1.0]])
    g = ik.grad(lambda x: inp.sum(inp.prod(x, axis=1)))(x)
    np.testing.assert_array_equal(g, [[0.0, 24.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


@np.errstate(divide="ignore", invalid="ignore")
def test_pow_derivative_conventions():
    # d/dx x**0 = 0 even at x = 0; d/dy 0**y = 0 for y > 0
    gx, gy = ik.grad(lambda x, y: inp.sum(inp.power(x, y)), argnums=(0, 1))(
        np.array([0.0, 2.0]), np.array([0.0, 3.0]))
    np.testing.assert_array_equal(gx, [0.0, 12.0])
    np.testing.assert_allclose(gy, [0.0, 8.0 * np.log(2.0)])
    gy = ik.grad(lambda y: inp.sum(inp.power(np.zeros(2), y)))(np.array([1.0, 2.5]))
    np.testing.assert_array_equal(gy, [0.0, 0.0])
