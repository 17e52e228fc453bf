"""Cases from JAX's own test suite (``tests/lax_autodiff_test.py`` and
``tests/api_test.py`` in JAX's public repository) that once failed on
``native`` alone, because the C it generated did not compile: the negation
of a negative literal came out as ``--0x1.7c6a7ef9db22dp-1`` (a decrement),
and a region that reads one value both by rows and whole defined its
elements twice under one name.

Each case runs under ``ik.jit`` on ``native`` and is compared with the
``reference`` strategy (always: IEEE basic operations only, so bit for
bit) and, where JAX is installed, with JAX's own value.
"""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen

pytestmark = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                                reason=f"native: {codegen.unavailable_reason()}")


def native_and_reference(fn, *args):
    """``fn`` jitted on native and on the reference; the results, leaf by leaf."""
    got = ik.jit(fn, strategy="native")(*args)
    want = ik.jit(fn, strategy="reference")(*args)
    leaves, expected = ik.tree_flatten(got)[0], ik.tree_flatten(want)[0]
    assert len(leaves) == len(expected)
    for g, w in zip(leaves, expected):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.array_equal(_bits(g), _bits(w)), (g, w)
    return got


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def agrees_with_jax(got, jax_fn, *args, rtol=1e-12):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    want = jax.jit(jax_fn)(*args)
    leaves, expected = ik.tree_flatten(got)[0], jax.tree_util.tree_leaves(want)
    assert len(leaves) == len(expected)
    for g, w in zip(leaves, expected):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


# ------------------------------------------------- lax_autodiff_test.py: testOpGrad[sub]

COTANGENT = -0.743  # the cotangent's negation was written "--0x1.7c6a7ef9db22dp-1"

X = np.random.default_rng(0).uniform(-3.0, 3.0, (3, 4))
Y = np.random.default_rng(1).uniform(-3.0, 3.0, (3, 4))


def sub_derivatives(x, y):
    """sub's derivatives, forward and reverse, to second order, with a
    constant (negative) tangent and cotangent as a user writes them."""
    ct = inp.full_like(x, COTANGENT)
    _, pullback = ik.vjp(inp.subtract, x, y)
    _, tangent = ik.jvp(inp.subtract, (x, y), (ct, -ct))

    def weighted(x, y):
        return inp.sum((x - y) * (x - y) * COTANGENT)
    second = ik.jacfwd(ik.grad(weighted, argnums=1), argnums=0)(x[0], y[0])
    return pullback(ct), tangent, second


def test_op_grad_sub():
    got = native_and_reference(sub_derivatives, X, Y)
    (dx, dy), tangent, second = got
    assert np.all(dx == COTANGENT) and np.all(dy == -COTANGENT)
    assert np.all(tangent == 2 * COTANGENT)
    np.testing.assert_array_equal(second, np.eye(4) * -2 * COTANGENT)


def test_op_grad_sub_agrees_with_jax():
    got = native_and_reference(sub_derivatives, X, Y)

    def jax_sub_derivatives(x, y):
        import jax
        import jax.numpy as jnp
        ct = jnp.full_like(x, COTANGENT)
        _, pullback = jax.vjp(jnp.subtract, x, y)
        _, tangent = jax.jvp(jnp.subtract, (x, y), (ct, -ct))
        second = jax.jacfwd(jax.grad(lambda x, y: jnp.sum((x - y) * (x - y) * COTANGENT),
                                     argnums=1), argnums=0)(x[0], y[0])
        return pullback(ct), tangent, second
    agrees_with_jax(got, jax_sub_derivatives, X, Y)


# ------------------------------------------------- lax_autodiff_test.py: testRemainder

def remainder_case(shape_x, shape_y, seed):
    """testRemainder's operands: x in (-9, 9), y away from zero with either
    sign, one of them broadcast along the first axis."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-9.0, 9.0, shape_x)
    y = rng.uniform(0.1, 5.0, shape_y) * rng.choice([-1.0, 1.0], shape_y)
    return x, y


def rem_derivatives(x, y):
    """fmod (lax.rem: the dividend's sign) differentiated forward and in
    reverse with constant negative tangents and cotangents, and to second
    order."""
    shape = np.broadcast_shapes(x.shape, y.shape)
    ct = inp.full(shape, COTANGENT)
    _, pullback = ik.vjp(inp.fmod, x, y)
    _, tangent = ik.jvp(inp.fmod, (x, y), (inp.full_like(x, COTANGENT),
                                            -inp.full_like(y, COTANGENT)))
    second = ik.grad(lambda y: inp.sum(ik.grad(lambda x: inp.sum(inp.fmod(x, y) * COTANGENT))(x)
                                      * COTANGENT))(y)
    return pullback(ct), tangent, second


@pytest.mark.parametrize("shapes", [((5, 8), (1, 8)), ((1, 8), (5, 8))])
def test_remainder(shapes):
    x, y = remainder_case(*shapes, seed=3)
    (dx, dy), tangent, second = native_and_reference(rem_derivatives, x, y)
    quotient = np.trunc(x / y)
    np.testing.assert_allclose(dy, np.sum(-quotient * COTANGENT, axis=tuple(
        a for a, n in enumerate(y.shape) if n == 1 and x.shape[a] > 1)).reshape(y.shape),
        rtol=1e-12)
    np.testing.assert_allclose(tangent, COTANGENT + quotient * COTANGENT, rtol=1e-12)
    assert second.shape == y.shape and np.all(second == 0.0)


@pytest.mark.parametrize("shapes", [((5, 8), (1, 8)), ((1, 8), (5, 8))])
def test_remainder_agrees_with_jax(shapes):
    x, y = remainder_case(*shapes, seed=3)
    got = native_and_reference(rem_derivatives, x, y)

    def jax_rem_derivatives(x, y):
        import jax
        import jax.numpy as jnp
        shape = np.broadcast_shapes(x.shape, y.shape)
        _, pullback = jax.vjp(jax.lax.rem, *jnp.broadcast_arrays(x, y))
        dx, dy = pullback(jnp.full(shape, COTANGENT))
        dx = jnp.sum(dx, axis=0, keepdims=True) if x.shape != shape else dx
        dy = jnp.sum(dy, axis=0, keepdims=True) if y.shape != shape else dy
        _, tangent = jax.jvp(lambda x, y: jax.lax.rem(*jnp.broadcast_arrays(x, y)), (x, y),
                             (jnp.full_like(x, COTANGENT), -jnp.full_like(y, COTANGENT)))

        def inner(y):
            return jax.grad(lambda x: jnp.sum(jax.lax.rem(*jnp.broadcast_arrays(x, y))
                                              * COTANGENT))(x)
        second = jax.grad(lambda y: jnp.sum(inner(y) * COTANGENT))(y)
        return (dx, dy), tangent, second
    agrees_with_jax(got, jax_rem_derivatives, x, y)


# ------------------------------------------------- api_test.py: test_issue1372

def quad(x):
    return inp.dot(x, x)


def two_quadratics(x, u):
    """Upstream's function: f(x, u) = x.x + u.u."""
    return quad(x) + quad(u)


def coupled(x, y, z, w):
    """Four arguments that meet: the second derivatives read the identity
    that seeds the Jacobians both by rows and whole in one region."""
    return inp.dot(x, y) * inp.sum(z) + inp.sum(w * x)


def mixed_second_derivatives(f, n):
    """Every mixed second derivative of ``f`` (``n`` arguments), reverse
    and forward mode inside and out, jitted together."""
    pairs = [(outer, inner) for outer in (ik.jacrev, ik.jacfwd) for inner in (ik.jacrev, ik.jacfwd)]

    def all_of_them(*args):
        return [outer(inner(f, i), j)(*args) for outer, inner in pairs
                for i in range(n) for j in range(n)]
    return all_of_them


COUPLED_ARGS = (np.full(3, 0.5), np.full(3, 1.5), np.ones(2), np.full(3, -0.7))


def test_issue1372():
    x, u = np.ones(5), np.ones(2)
    got = native_and_reference(mixed_second_derivatives(two_quadratics, 2), x, u)
    sizes = (5, 2)
    for k, g in enumerate(got):
        i, j = divmod(k % 4, 2)
        want = 2 * np.eye(sizes[i]) if i == j else np.zeros((sizes[i], sizes[j]))
        np.testing.assert_array_equal(g, want)
    got = native_and_reference(mixed_second_derivatives(coupled, 4), *COUPLED_ARGS)
    assert len(got) == 64


def test_issue1372_agrees_with_jax():
    got = native_and_reference(mixed_second_derivatives(coupled, 4), *COUPLED_ARGS)

    def jax_all(*args):
        import jax
        import jax.numpy as jnp

        def f(x, y, z, w):
            return jnp.dot(x, y) * jnp.sum(z) + jnp.sum(w * x)
        pairs = [(o, i) for o in (jax.jacrev, jax.jacfwd) for i in (jax.jacrev, jax.jacfwd)]
        return [o(i(f, a), b)(*args) for o, i in pairs for a in range(4) for b in range(4)]
    agrees_with_jax(got, jax_all, *COUPLED_ARGS)
