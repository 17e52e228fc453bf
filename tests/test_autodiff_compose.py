"""Transforms composed in any order (grad of grad, hessian, vmap of grad,
grad of vmap, jacobian of vmap, closures over enclosing tracers) and jit of
all of them; the PINN acceptance check."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp

X = np.linspace(0.2, 1.4, 5)


def test_grad_of_grad_of_grad():
    f = lambda x: inp.sin(x) * x  # noqa: E731
    d3 = ik.grad(ik.grad(ik.grad(f)))
    x = 0.7
    np.testing.assert_allclose(d3(x), -3 * np.sin(x) - x * np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(ik.jit(d3)(x), d3(x), rtol=1e-15)


def mlp(params, x):
    """A 3-layer tanh MLP from R^4 to R."""
    h = x
    for w, b in params[:-1]:
        h = inp.tanh(w @ h + b)
    w, b = params[-1]
    return inp.sum(w @ h + b)


def mlp_params(seed=0, sizes=(4, 6, 5, 1)):
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, 1 / np.sqrt(m), (n, m)), rng.normal(0, 0.1, n))
            for m, n in zip(sizes[:-1], sizes[1:])]


def test_hessian_of_a_three_layer_tanh_mlp():
    params, x = mlp_params(), np.array([0.3, -0.2, 0.5, 0.1])
    hess = ik.hessian(mlp, argnums=1)(params, x)
    assert hess.shape == (4, 4)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-12, atol=1e-15)
    grad = ik.grad(mlp, argnums=1)
    h = 1e-5
    fd = np.stack([(grad(params, x + h * e) - grad(params, x - h * e)) / (2 * h)
                   for e in np.eye(4)])
    np.testing.assert_allclose(hess, fd, rtol=1e-7, atol=1e-9)
    # forward over reverse, reverse over reverse and forward over forward agree
    for other in (ik.jacrev(ik.jacrev(mlp, argnums=1), argnums=1),
                  ik.jacfwd(ik.jacfwd(mlp, argnums=1), argnums=1)):
        np.testing.assert_allclose(other(params, x), hess, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ik.jit(ik.hessian(mlp, argnums=1))(params, x), hess,
                               rtol=1e-13, atol=1e-15)


def test_hessian_with_respect_to_parameters_is_a_nested_pytree():
    params, x = mlp_params(sizes=(4, 3, 1)), np.array([0.3, -0.2, 0.5, 0.1])
    hess = ik.hessian(mlp)(params, x)
    (w0, b0), (w1, b1) = params
    assert hess[0][0][0][0].shape == w0.shape + w0.shape
    assert hess[1][1][1][1].shape == b1.shape + b1.shape
    np.testing.assert_allclose(hess[1][1][1][1], np.zeros((1, 1)), atol=1e-15)  # linear in b1


def test_vmap_of_grad_is_per_example_gradients():
    def loss(w, x):
        return inp.sum(inp.tanh(w * x) ** 2.0)
    w, xs = np.array([0.5, -1.0, 2.0]), np.linspace(-1, 1, 12).reshape(4, 3)
    per_example = ik.vmap(ik.grad(loss), in_axes=(None, 0))(w, xs)
    loop = np.stack([ik.grad(loss)(w, x) for x in xs])
    np.testing.assert_allclose(per_example, loop, rtol=1e-14)
    np.testing.assert_allclose(ik.jit(ik.vmap(ik.grad(loss), in_axes=(None, 0)))(w, xs), loop,
                               rtol=1e-14)


def test_grad_of_vmap_sums_over_examples():
    def loss(w, x):
        return inp.sum(inp.sin(w * x))

    def total(w, xs):
        return inp.sum(ik.vmap(loss, in_axes=(None, 0))(w, xs))
    w, xs = np.array([0.5, -1.0, 2.0]), np.linspace(-1, 1, 12).reshape(4, 3)
    expected = np.sum(np.cos(w * xs) * xs, axis=0)
    # the middle column sums to zero: compare it absolutely (the compiled strategy's
    # cos differs from NumPy's by an ulp, which leaves a 1e-16 residue)
    np.testing.assert_allclose(ik.grad(total)(w, xs), expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(ik.jit(ik.grad(total))(w, xs), expected, rtol=1e-14,
                               atol=1e-15)


def test_jacobian_of_vmap_is_block_diagonal():
    def f(x):
        return inp.sin(x) * inp.sum(x)
    xs = np.linspace(0.1, 1.0, 6).reshape(2, 3)
    for jac in (ik.jacfwd, ik.jacrev, ik.jacobian):
        j = jac(ik.vmap(f))(xs)
        assert j.shape == (2, 3, 2, 3)
        np.testing.assert_allclose(j[0, :, 0], ik.jacobian(f)(xs[0]), rtol=1e-14)
        np.testing.assert_allclose(j[0, :, 1], np.zeros((3, 3)), atol=0)
        np.testing.assert_allclose(ik.jit(jac(ik.vmap(f)))(xs), j, rtol=1e-14)


def test_vmap_of_jacobian_and_of_hessian():
    def f(x):
        return inp.sum(inp.exp(x) * x[::-1])
    xs = np.linspace(0.1, 1.0, 6).reshape(2, 3)
    batched = ik.vmap(ik.hessian(f))(xs)
    np.testing.assert_allclose(batched, np.stack([ik.hessian(f)(x) for x in xs]), rtol=1e-14)


def test_nested_closures_over_enclosing_tracers():
    def outer(y):
        inner = ik.grad(lambda x: inp.sin(x * y) * y)  # closes over the outer tracer y
        return inner(0.3) + y
    # d/dy [y^2 cos(0.3 y) + y] = 2y cos(0.3y) - 0.3 y^2 sin(0.3y) + 1
    y = 1.7
    expected = 2 * y * np.cos(0.3 * y) - 0.3 * y * y * np.sin(0.3 * y) + 1
    np.testing.assert_allclose(ik.grad(outer)(y), expected, rtol=1e-14)
    np.testing.assert_allclose(ik.jit(ik.grad(outer))(y), expected, rtol=1e-14)
    np.testing.assert_allclose(ik.vmap(ik.grad(outer))(np.array([y, y])), [expected] * 2,
                               rtol=1e-14)


def test_jit_inside_transforms_and_transforms_inside_jit():
    f = ik.jit(lambda x: inp.sum(inp.exp(x) * x))
    np.testing.assert_allclose(ik.grad(f)(X), np.exp(X) * (1 + X), rtol=1e-14)
    np.testing.assert_allclose(ik.vmap(ik.grad(f))(np.stack([X, X])),
                               np.stack([np.exp(X) * (1 + X)] * 2), rtol=1e-14)


def test_linearize_and_vjp_functions_compose_with_vmap_and_jit():
    def f(x):
        return inp.sin(x) * x
    out, f_jvp = ik.linearize(f, X)
    basis = np.eye(5)
    np.testing.assert_allclose(ik.vmap(f_jvp)(basis), np.diag(np.cos(X) * X + np.sin(X)),
                               rtol=1e-14)
    _, pull = ik.vjp(f, X)
    rows = ik.vmap(pull)(basis)[0]
    np.testing.assert_allclose(rows, np.diag(np.cos(X) * X + np.sin(X)), rtol=1e-14)
    jitted = ik.jit(lambda x, c: ik.vjp(f, x)[1](c)[0])
    np.testing.assert_allclose(jitted(X, np.ones(5)), np.cos(X) * X + np.sin(X), rtol=1e-14)


# ------------------------------------------------------------------ PINN


def u(params, x):
    """A 16-unit tanh MLP u(x) for a scalar x."""
    hidden = inp.tanh(params["w1"] * x + params["b1"])
    return inp.sum(params["w2"] * hidden) + params["b2"]


u_xx = ik.grad(ik.grad(u, argnums=1), argnums=1)


def pinn_params(seed=0, width=16):
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(0, 1.0, width), "b1": rng.normal(0, 1.0, width),
            "w2": rng.normal(0, 1.0 / np.sqrt(width), width), "b2": np.array(0.0)}


@pytest.mark.parametrize("x", [0.0, 0.37, 0.9])
def test_pinn_second_derivative_matches_central_differences(x):
    params = pinn_params()
    h = 5e-4  # truncation error (h^2 / 12) u'''' ~ 2e-7 relative; rounding ~1e-9
    central = (u(params, x + h) - 2 * u(params, x) + u(params, x - h)) / h ** 2
    assert abs(u_xx(params, x) - central) <= 1e-6 * abs(central)
    np.testing.assert_allclose(ik.jit(u_xx)(params, x), u_xx(params, x), rtol=1e-14)


def test_pinn_trains_on_poisson_with_plain_gradient_descent():
    """-u'' = pi^2 sin(pi x) on [0, 1] with u(0) = u(1) = 0: the residual at
    24 collocation points (vmap of grad of grad) plus the boundary terms,
    minimized by hand-written gradient descent on the parameter pytree."""
    xs = np.linspace(0.0, 1.0, 24)
    source = np.pi ** 2 * np.sin(np.pi * xs)

    def loss(params):
        residual = ik.vmap(u_xx, in_axes=(None, 0))(params, xs) + source
        return inp.mean(residual * residual) + u(params, 0.0) ** 2 + u(params, 1.0) ** 2
    step = ik.jit(ik.value_and_grad(loss))
    params = pinn_params()
    first, _ = step(params)
    for _ in range(1500):
        value, grads = step(params)
        params = {k: params[k] - 1e-3 * grads[k] for k in params}
    final = loss(params)  # eager, after the last step
    assert first / final >= 100, (first, final)
    np.testing.assert_allclose(step(params)[0], final, rtol=1e-13)
