"""custom_jvp and custom_vjp: the rule is used by every derivative (also
under vmap and jit), the primal is what runs, and misuse is refused with a
message that says what to do."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import Op
from isokernel.ir.ops import TRANSFORM_ONLY

X = np.linspace(-1.0, 2.0, 4)


@ik.custom_jvp
def softplus(x):
    return inp.log1p(inp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    # the exact derivative, written so that it stays finite for large x
    return softplus(x), t / (1.0 + inp.exp(-x))


@ik.custom_jvp
def doubled_derivative(x):
    return inp.sin(x)


@doubled_derivative.defjvp
def _doubled_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return inp.sin(x), 2.0 * inp.cos(x) * t  # deliberately not the true derivative


def test_eager_call_runs_the_primal():
    np.testing.assert_allclose(softplus(X), np.log1p(np.exp(X)))


def test_custom_jvp_rule_drives_forward_and_reverse_mode():
    expected = 2.0 * np.cos(X)
    _, t = ik.jvp(doubled_derivative, (X,), (np.ones(4),))
    np.testing.assert_allclose(t, expected)
    np.testing.assert_allclose(ik.grad(lambda x: inp.sum(doubled_derivative(x)))(X), expected)
    np.testing.assert_allclose(ik.jacfwd(doubled_derivative)(X), np.diag(expected))
    np.testing.assert_allclose(ik.jit(ik.grad(lambda x: inp.sum(doubled_derivative(x))))(X),
                               expected)


def test_custom_jvp_rule_is_differentiated_for_higher_orders():
    # d/dx of the rule's tangent 2 cos(x): -2 sin(x)
    np.testing.assert_allclose(ik.grad(ik.grad(doubled_derivative))(0.4), -2 * np.sin(0.4))
    big = np.array([50.0, 300.0])
    np.testing.assert_allclose(ik.grad(lambda x: inp.sum(softplus(x)))(big), [1.0, 1.0])


def test_custom_jvp_under_vmap_keeps_its_rule():
    xs = np.stack([X, 2 * X])
    np.testing.assert_allclose(ik.vmap(doubled_derivative)(xs), np.sin(xs))
    g = ik.grad(lambda xs: inp.sum(ik.vmap(doubled_derivative)(xs)))(xs)
    np.testing.assert_allclose(g, 2 * np.cos(xs))
    per_row = ik.vmap(ik.grad(lambda x: inp.sum(doubled_derivative(x))))(xs)
    np.testing.assert_allclose(per_row, 2 * np.cos(xs))


def test_jit_inlines_the_primal_of_custom_calls():
    f = lambda x: inp.sum(softplus(x) * ik.stop_gradient(x))  # noqa: E731
    graph = ik.jit(f).lower(X).graph
    assert not graph.ops() & TRANSFORM_ONLY
    np.testing.assert_allclose(ik.jit(f)(X), f(X))
    recorded = ik.trace(f, X)
    assert Op.CUSTOM_JVP_CALL in recorded.ops() and Op.STOP_GRADIENT in recorded.ops()
    assert "<graph softplus:" in str(recorded)


@ik.custom_vjp
def clip_gradient(x):
    return x * 1.0


def _clip_fwd(x):
    return x * 1.0, None


def _clip_bwd(residuals, ct):
    return (inp.clip(ct, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@ik.custom_vjp
def scaled_square(x, scale):
    return scale * x * x


def _square_fwd(x, scale):
    return scale * x * x, (x, scale)


def _square_bwd(res, ct):
    x, scale = res
    return 2.0 * scale * x * ct, None  # scale gets a zero cotangent


scaled_square.defvjp(_square_fwd, _square_bwd)


def test_custom_vjp_bwd_drives_reverse_mode():
    g = ik.grad(lambda x: inp.sum(clip_gradient(x) * 5.0))(X)
    np.testing.assert_array_equal(g, np.ones(4))
    gx, gs = ik.grad(lambda x, s: inp.sum(scaled_square(x, s)), argnums=(0, 1))(X, 3.0)
    np.testing.assert_allclose(gx, 6.0 * X)
    assert gs == 0.0
    jitted = ik.jit(ik.grad(lambda x: inp.sum(clip_gradient(x) * 5.0)))
    np.testing.assert_array_equal(jitted(X), np.ones(4))


def test_custom_vjp_second_order_by_forward_over_reverse():
    hess = ik.hessian(lambda x: inp.sum(scaled_square(x, 3.0) * x))(X)
    # f = 3 x^3 with the custom first derivative 6x * x + 3x^2 = 9 x^2: second 18 x
    np.testing.assert_allclose(hess, np.diag(18.0 * X))


def test_custom_vjp_forward_over_reverse_batches_compiles_and_goes_to_third_order():
    # the value of scaled_square inside the gradient is differentiated forward as
    # its primal body (the rule has no forward map); its reverse pass stays bwd
    f = lambda x: inp.sum(scaled_square(x, 3.0) * x)  # noqa: E731
    xs = np.stack([X, X + 1.0])
    np.testing.assert_allclose(ik.vmap(ik.hessian(f))(xs), [np.diag(18.0 * r) for r in xs])
    np.testing.assert_allclose(ik.jit(ik.hessian(f))(X), np.diag(18.0 * X))
    third = np.zeros((4, 4, 4))
    third[np.arange(4), np.arange(4), np.arange(4)] = 18.0
    np.testing.assert_allclose(ik.jacfwd(ik.hessian(f))(X), third)
    np.testing.assert_allclose(ik.grad(ik.grad(lambda x: scaled_square(x, 3.0)))(0.5), 6.0)


@ik.custom_jvp
def doubled_exp(x):
    return inp.exp(x)


@doubled_exp.defjvp
def _doubled_exp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    # the rule's own call on its primals is the call's value, rule included
    return doubled_exp(x), 2.0 * doubled_exp(x) * t


def test_a_rule_calling_its_function_on_its_primals_holds_at_every_order():
    x, want = 0.3, np.exp(0.3)
    fn = doubled_exp
    for order in (1, 2, 3):
        fn = ik.grad(fn)
        np.testing.assert_allclose(fn(x), 2.0 ** order * want)
        np.testing.assert_allclose(ik.jit(fn)(x), 2.0 ** order * want)
    np.testing.assert_allclose(ik.jacfwd(ik.jacfwd(doubled_exp))(x), 4.0 * want)


@ik.custom_jvp
def shifted_rule(x):
    return inp.sin(x)


@shifted_rule.defjvp
def _shifted_rule_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return shifted_rule(x), 2.0 * shifted_rule(x + 1.0) * t


def test_a_rule_calling_its_function_on_other_arguments_differentiates_its_body():
    # documented in docs/autodiff.md: inside its own rule, a call on other
    # arguments records the primal body (JAX would apply the rule again: 4 sin(x + 2))
    x = 0.3
    np.testing.assert_allclose(ik.grad(shifted_rule)(x), 2.0 * np.sin(x + 1.0))
    np.testing.assert_allclose(ik.grad(ik.grad(shifted_rule))(x), 2.0 * np.cos(x + 1.0))


def test_custom_vjp_under_vmap_sums_cotangents_of_shared_arguments():
    xs = np.stack([X, X + 1.0])
    f = ik.vmap(scaled_square, in_axes=(0, None))
    g = ik.grad(lambda xs, s: inp.sum(f(xs, s)), argnums=0)(xs, 2.0)
    np.testing.assert_allclose(g, 4.0 * xs)
    np.testing.assert_allclose(f(xs, 2.0), 2.0 * xs * xs)
    g = ik.grad(lambda xs: inp.sum(ik.vmap(clip_gradient)(xs) * 5.0))(xs)
    np.testing.assert_array_equal(g, np.ones((2, 4)))


def test_forward_mode_through_custom_vjp_is_refused():
    with pytest.raises(ik.DifferentiationError, match="custom_vjp function 'clip_gradient'.*"
                                                      "reverse mode.*custom_jvp"):
        ik.jvp(clip_gradient, (X,), (np.ones(4),))
    with pytest.raises(ik.DifferentiationError, match="clip_gradient"):
        ik.jit(lambda x, t: ik.jvp(clip_gradient, (x,), (t,))[1])(X, X)
    _, f_jvp = ik.linearize(lambda x: clip_gradient(x) * 2.0, X)
    with pytest.raises(ik.DifferentiationError, match="custom_vjp function 'clip_gradient'"):
        ik.jvp(f_jvp, (X,), (X,))


def test_closing_over_a_differentiated_value_is_refused():
    def f(x):
        @ik.custom_jvp
        def g(y):
            return y * x
        g.defjvp(lambda p, t: (g(*p), t[0] * x))
        return inp.sum(g(X))
    with pytest.raises(ik.DifferentiationError, match="closes over a value that is being "
                                                      "differentiated.*argument"):
        ik.grad(f)(X)


def test_rule_misuse_messages():
    @ik.custom_jvp
    def no_rule(x):
        return x
    with pytest.raises(ik.DifferentiationError, match="defjvp"):
        ik.grad(lambda x: inp.sum(no_rule(x)))(X)

    @ik.custom_vjp
    def bad_bwd(x, y):
        return x * y
    bad_bwd.defvjp(lambda x, y: (x * y, (x, y)), lambda res, ct: (ct,))
    with pytest.raises(ik.DifferentiationError, match="one cotangent per argument"):
        ik.grad(lambda x: inp.sum(bad_bwd(x, x)))(X)

    @ik.custom_jvp
    def bad_tangent(x):
        return x
    bad_tangent.defjvp(lambda p, t: (p[0], inp.sum(t[0])))
    with pytest.raises(ik.DifferentiationError, match=r"got f64\[\] where f64\[4\]"):
        ik.grad(lambda x: inp.sum(bad_tangent(x)))(X)


def test_a_rule_may_only_close_over_what_its_function_uses():
    def f(x, y):
        @ik.custom_jvp
        def g(z):
            return z * 2.0
        g.defjvp(lambda p, t: (g(*p), t[0] * y))  # y: traced, but g does not use it
        return inp.sum(g(x))
    with pytest.raises(ik.DifferentiationError, match="closes over a traced value that 'g' "
                                                      "itself does not use"):
        ik.jit(ik.grad(f))(X, X)
