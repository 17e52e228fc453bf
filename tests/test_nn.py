"""``isokernel.nn``: values against jax.nn / jax.lax (where installed) and
NumPy formulas, gradients against JAX and central differences, stable forms
at extreme inputs, attention with fully masked rows, convolution and
pooling in PyTorch's layout, and every CPU strategy under its contract."""

from __future__ import annotations

import math

import numpy as np
import pytest

import isokernel as ik
import isokernel.nn as nn
import isokernel.numpy as inp

from .conftest import folds_in_own_order

RNG = np.random.default_rng(16)
X = RNG.normal(size=(3, 9)) * 4.0
EXTREMES = np.array([-1e300, -800.0, -40.0, -1e-300, -0.0, 0.0, 1e-300, 40.0, 800.0, 1e300])
ACTIVATIONS = ["relu", "sigmoid", "softplus", "silu", "elu", "softmax", "log_softmax",
               "log_sigmoid", "leaky_relu", "relu6", "hard_tanh", "selu", "celu", "soft_sign",
               "mish", "glu"]
X[0, :4] = [0.0, 6.0, 1.0, -1.0]   # the kinks of relu, relu6, hard_tanh
STRICT = {"over": "raise", "invalid": "raise", "divide": "raise"}


def jax_or_skip():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    jax.config.update("jax_enable_x64", True)
    return jax


def relative(got, want) -> float:
    """Largest elementwise relative difference (exact zeros must match)."""
    got, want = np.asarray(got), np.asarray(want)
    gap = np.abs(got - want)
    return float(np.max(np.where(gap == 0, 0.0, gap / np.maximum(np.abs(want), 1e-300))))


def normwise(got, want) -> float:
    """Largest difference relative to the largest magnitude of ``want``."""
    return float(np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)))


# ------------------------------------------------------------- activations


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_jax_values_and_gradients(name):
    jax = jax_or_skip()
    ours, theirs = getattr(nn, name), getattr(jax.nn, name)
    x = X[:, :8] if name == "glu" else X   # glu halves its axis
    assert relative(ours(x), theirs(x)) <= 1e-15 * 4
    weights = np.cos(np.arange(ours(x).size)).reshape(ours(x).shape)
    got = ik.grad(lambda x: inp.sum(ours(x) * weights))(x)
    want = jax.jit(jax.grad(lambda x: (theirs(x) * weights).sum()))(x)
    assert normwise(got, want) <= 1e-12


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_matches_jax(approximate):
    jax = jax_or_skip()
    x = RNG.normal(size=500) * 6.0
    got = nn.gelu(x, approximate=approximate)
    want = np.asarray(jax.nn.gelu(x, approximate=approximate))
    # the tanh form cancels (1 + tanh -> 0) for negative x: compare against |x|
    assert np.max(np.abs(got - want) / np.abs(x)) <= 1e-15
    if not approximate:  # erfc keeps full relative accuracy where gelu is tiny; XLA's
        assert relative(got, want) <= 1e-13  # erfc is ~50 ulp off there (ours: 2 ulp)
    grad = ik.grad(lambda t: inp.sum(nn.gelu(t, approximate)))(x)
    want = jax.jit(jax.grad(lambda t: jax.nn.gelu(t, approximate).sum()))(x)
    assert normwise(grad, want) <= 1e-12


def test_gelu_default_is_jax_tanh_form():
    assert np.array_equal(nn.gelu(X), nn.gelu(X, approximate=True))
    assert not np.array_equal(nn.gelu(X), nn.gelu(X, approximate=False))


def test_erf_and_erfc_are_within_two_ulps_of_the_true_value():
    mpmath = pytest.importorskip("mpmath", reason="mpmath is not installed")
    mpmath.mp.prec = 80
    x = np.concatenate([RNG.uniform(-7, 7, 150), RNG.uniform(-1.3, 1.3, 100),
                        RNG.uniform(20, 27, 20), RNG.uniform(-1e-5, 1e-5, 10)])
    for fn, exact, bound in ((nn.erf, mpmath.erf, 1), (nn.erfc, mpmath.erfc, 2)):
        want = np.array([float(exact(mpmath.mpf(float(v)))) for v in x])
        ulp = np.abs(fn(x) - want) / np.spacing(np.abs(want))
        assert np.max(ulp) <= bound, fn.__name__
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    assert np.array_equal(nn.erf(special)[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(nn.erf(special)[1]) and np.isnan(nn.erf(special)[4])
    assert np.array_equal(nn.erfc(special)[:4], [1.0, 1.0, 0.0, 2.0])


def test_erf_derivative_is_the_analytic_one():
    x = np.linspace(-3, 3, 13)
    want = 2.0 / math.sqrt(math.pi) * np.exp(-x * x)
    assert np.array_equal(ik.grad(lambda t: inp.sum(nn.erf(t)))(x), want)
    assert np.array_equal(ik.grad(lambda t: inp.sum(nn.erfc(t)))(x), -want)
    second = -2 * 0.7 * 2 / math.sqrt(math.pi) * math.exp(-0.49)
    assert abs(ik.hessian(lambda t: nn.erf(t))(0.7) - second) <= 1e-15


def test_float32_stays_float32():
    x = X[:, :8].astype(np.float32)
    for name in ACTIVATIONS + ["gelu", "erf", "erfc", "layer_norm"]:
        assert getattr(nn, name)(x).dtype == np.float32, name
    x64 = x.astype(np.float64)
    assert np.max(np.abs(nn.gelu(x, False) - nn.gelu(x64, False))) <= 1e-6 * np.max(np.abs(x))


def test_float32_network_and_its_gradient_have_no_float64_node():
    x, w1, w2 = (a.astype(np.float32) for a in network_inputs())

    def loss(x, w1, w2):
        out = small_network(x, w1, w2)
        q = inp.reshape(out, (1, 2, 6))
        return inp.sum(nn.dot_product_attention(q, q, q, q[..., :2] > 0, is_causal=True)
                       + nn.sigmoid(q) + nn.softplus(q) + nn.erf(q) + nn.mish(q))

    for graph in (ik.trace(loss, x, w1, w2),
                  ik.jit(ik.grad(loss, (0, 1, 2))).lower(x, w1, w2).graph):
        assert {str(a.dtype) for node in graph.nodes for a in node.avals} == {"float32", "bool"}


@pytest.mark.parametrize("name", ACTIVATIONS + ["gelu_exact", "gelu_tanh", "logsumexp"])
def test_extreme_inputs_give_no_warning_nan_or_infinite_gradient(name):
    fn = {"gelu_exact": lambda x: nn.gelu(x, False), "gelu_tanh": nn.gelu}.get(
        name, getattr(nn, name, None))
    with np.errstate(**STRICT):
        value = fn(EXTREMES)
        grad = ik.grad(lambda x: inp.sum(fn(x)))(EXTREMES)
    assert not np.any(np.isnan(value)) and np.all(np.isfinite(grad))


def test_stable_forms_reach_their_limits():
    with np.errstate(**STRICT):
        assert np.array_equal(nn.sigmoid(np.array([-800.0, 0.0, 800.0])), [0.0, 0.5, 1.0])
        assert np.array_equal(nn.softplus(np.array([-800.0, 800.0])), [0.0, 800.0])
        assert nn.sigmoid(-700.0) == math.exp(-700.0) / (1 + math.exp(-700.0)) > 0
        assert nn.log_softmax(np.array([0.0, -1e300]))[1] == -1e300
        grad = ik.grad(lambda x: inp.sum(nn.softplus(x)))(np.array([-800.0, 0.0, 800.0]))
        assert np.array_equal(grad, [0.0, 0.5, 1.0])
        assert np.array_equal(ik.grad(lambda x: inp.sum(nn.relu(x)))(np.array([-1., 0., 2.])),
                              [0.0, 0.0, 1.0])
    assert np.isnan(nn.relu(np.nan)) and np.isnan(nn.sigmoid(np.nan))


def test_softmax_family_and_layer_norm_match_numpy_formulas():
    shifted = X - X.max(0, keepdims=True)
    want = np.exp(shifted) / np.exp(shifted).sum(0, keepdims=True)
    assert np.array_equal(nn.softmax(X, axis=0), want)
    assert np.array_equal(nn.log_softmax(X, axis=0),
                          shifted - np.log(np.exp(shifted).sum(0, keepdims=True)))
    assert np.array_equal(nn.logsumexp(X, axis=1), inp.logsumexp(X, axis=1))
    centred = X - X.mean(-1, keepdims=True)
    norm = centred / np.sqrt((centred * centred).mean(-1, keepdims=True) + 1e-5)
    scale, offset = RNG.normal(size=9), RNG.normal(size=9)
    assert np.array_equal(nn.layer_norm(X, scale, offset), norm * scale + offset)


def test_layer_norm_and_one_hot_match_jax_and_torch_conventions():
    jax = jax_or_skip()
    labels = np.array([[0, 3], [2, 7]])
    assert np.array_equal(nn.one_hot(labels, 4), jax.nn.one_hot(labels, 4))
    assert np.array_equal(nn.one_hot(labels, 4, axis=0), jax.nn.one_hot(labels, 4, axis=0))
    scale = RNG.normal(size=9)
    got = ik.grad(lambda x: inp.sum(nn.layer_norm(x, scale) ** 3))(X)

    def reference(x):
        jnp = jax.numpy
        centred = x - x.mean(-1, keepdims=True)
        return ((centred / jnp.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5) * scale)
                ** 3).sum()

    assert normwise(got, jax.jit(jax.grad(reference))(X)) <= 1e-12


# --------------------------------------------------------------- attention


def attention_reference(q, k, v, mask=None):
    """NumPy: softmax over the kept keys, zero rows where none is kept."""
    logits = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    mask = np.ones(logits.shape, bool) if mask is None else np.broadcast_to(mask, logits.shape)
    peak = np.max(np.where(mask, logits, -np.inf), -1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.where(mask, np.exp(np.where(mask, logits - peak, 0.0)), 0.0)
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total > 0, total, 1.0)) @ v


def attention_inputs():
    q, k, v = (RNG.normal(size=s) for s in ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3)))
    mask = RNG.uniform(size=(2, 1, 5, 6)) > 0.4
    mask[0, 0, 1] = False          # one query of every head of batch 0 sees no key
    mask[1, 0, :, 2:] = False      # batch 1 attends to the first two keys only
    mask[1, 0, 3] = False
    return q, k, v, mask


def test_attention_matches_numpy_with_and_without_mask():
    q, k, v, mask = attention_inputs()
    assert normwise(nn.dot_product_attention(q, k, v), attention_reference(q, k, v)) <= 1e-14
    got = nn.dot_product_attention(q, k, v, mask)
    assert normwise(got, attention_reference(q, k, v, mask)) <= 1e-14
    scale = 0.3
    manual = nn.dot_product_attention(q * (scale * 2.0), k, v)   # default scale: 1/sqrt(4)
    assert normwise(nn.dot_product_attention(q, k, v, scale=scale), manual) <= 1e-14


def _loss(q, k, v, mask):
    return inp.sum(nn.dot_product_attention(q, k, v, mask) ** 2)


def test_fully_masked_rows_give_zeros_and_zero_gradients_eagerly():
    q, k, v, mask = attention_inputs()
    with np.errstate(**STRICT):
        out = nn.dot_product_attention(q, k, v, mask)
        dq, dk, dv = ik.grad(_loss, (0, 1, 2))(q, k, v, mask)
    assert np.array_equal(out[0, :, 1], np.zeros((3, 3)))
    assert np.array_equal(out[1, :, 3], np.zeros((3, 3)))
    assert np.array_equal(dq[0, :, 1], np.zeros((3, 4)))
    assert np.array_equal(dq[1, :, 3], np.zeros((3, 4)))
    assert all(np.all(np.isfinite(g)) for g in (dq, dk, dv))
    assert np.array_equal(dk[1, :, 2:], np.zeros((3, 4, 4)))   # keys nobody attends to
    assert np.array_equal(dv[1, :, 2:], np.zeros((3, 4, 3)))


def test_attention_gradient_matches_central_differences():
    q, k, v, mask = (a[:1, :1] for a in attention_inputs())
    grads = ik.grad(_loss, (0, 1, 2))(q, k, v, mask)
    for position, grad in enumerate(grads):
        args = [q, k, v]

        def loss(x, position=position, args=args):
            args_x = list(args)
            args_x[position] = x
            return float(np.sum(attention_reference(*args_x, mask) ** 2))

        x, h = args[position], 1e-6
        want = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            up[index] += h
            down[index] -= h
            want[index] = (loss(up) - loss(down)) / (2 * h)
        np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)


def _contract(name: str, graph):
    """Portable numerics: the eager bits on every CPU strategy, except where
    one sums and contracts in its own fixed order (``native`` compiling a
    small graph as one C program): within 1e-12 relative to the largest
    magnitude there."""
    if not folds_in_own_order(name, graph):
        return np.array_equal
    return lambda a, b: bool(np.all(np.abs(np.asarray(a) - b)
                                    <= 1e-12 * max(np.max(np.abs(b)), 1.0)))


@pytest.mark.parametrize("name", ["reference", "threads", "native"])
def test_fully_masked_attention_under_jit_on_every_cpu_strategy(name):
    q, k, v, mask = attention_inputs()
    grad = ik.grad(_loss, (0, 1, 2))

    def both(*args):
        return nn.dot_product_attention(*args), grad(*args)

    with ik.numerics("portable"):   # the same bits on every strategy
        eager_out, eager_grads = both(q, k, v, mask)
    jitted = ik.jit(both, strategy=name, numerics="portable")
    out, grads = jitted(q, k, v, mask)
    same = _contract(name, jitted.lower(q, k, v, mask).graph)
    assert same(out, eager_out)
    assert all(same(g, e) for g, e in zip(grads, eager_grads))
    assert np.array_equal(out[0, :, 1], np.zeros((3, 3))) and not np.isnan(out).any()
    assert np.array_equal(grads[0][0, :, 1], np.zeros((3, 4)))
    native = ik.jit(grad, strategy=name)(q, k, v, mask)   # the platform's exp: ulp-bounded
    assert np.array_equal(native[0][0, :, 1], np.zeros((3, 4)))
    assert all(normwise(g, e) <= 1e-14 for g, e in zip(native, eager_grads))


def test_causal_attention_is_the_lower_triangular_mask():
    q, k, v, mask = attention_inputs()
    k, v = k[..., :5, :], v[..., :5, :]
    causal = np.tril(np.ones((5, 5), bool))
    assert np.array_equal(nn.dot_product_attention(q, k, v, is_causal=True),
                          nn.dot_product_attention(q, k, v, causal))
    both = nn.dot_product_attention(q, k, v, mask[..., :5], is_causal=True)
    assert np.array_equal(both, nn.dot_product_attention(q, k, v, mask[..., :5] & causal))


def test_attention_errors_name_the_line_and_the_fix():
    q, k, v, mask = attention_inputs()
    with pytest.raises(ik.DTypeError, match=r"dot_product_attention at test_nn.py:\d+.*bool"):
        nn.dot_product_attention(q, k, v, mask.astype(np.float64))
    with pytest.raises(ik.ShapeError, match=r"dot_product_attention at test_nn.py:\d+"):
        nn.dot_product_attention(q, v, v)
    with pytest.raises(ik.ShapeError, match=r"dot_product_attention at test_nn.py:\d+.*mask"):
        nn.dot_product_attention(q, k, v, mask[..., :5])


# ---------------------------------------------------- convolution and pooling


def conv_reference(x, w, stride, pads, dilation):
    """PyTorch's definition, written as loops over the output."""
    rank = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    sizes = [(x.shape[2 + i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
             for i in range(rank)]
    out = np.zeros((x.shape[0], w.shape[0], *sizes))
    for index in np.ndindex(*sizes):
        window = tuple(slice(i * s, i * s + d * (k - 1) + 1, d)
                       for i, s, d, k in zip(index, stride, dilation, w.shape[2:]))
        patch = x[(slice(None), slice(None)) + window]
        out[(slice(None), slice(None)) + index] = np.tensordot(
            patch, w, (list(range(1, rank + 2)), list(range(1, rank + 2))))
    return out


CONV_CASES = [  # (x shape, w shape, stride, padding, dilation, explicit pads)
    ((2, 3, 11), (4, 3, 3), 1, 0, 1, [(0, 0)]),
    ((2, 3, 11), (4, 3, 3), 2, 1, 2, [(1, 1)]),
    ((2, 3, 11), (4, 3, 4), 3, "SAME", 1, [(1, 2)]),
    ((2, 3, 9, 8), (5, 3, 3, 2), 1, 0, 1, [(0, 0), (0, 0)]),
    ((2, 3, 9, 8), (5, 3, 3, 2), (2, 1), (1, 2), (1, 2), [(1, 1), (2, 2)]),
    ((2, 3, 9, 8), (5, 3, 3, 3), 2, "SAME", 1, [(1, 1), (0, 1)]),
    ((2, 3, 9, 8), (5, 3, 2, 3), 1, "VALID", 1, [(0, 0), (0, 0)]),
    ((2, 3, 9, 8), (5, 3, 3, 2), 1, ((0, 2), (1, 0)), 1, [(0, 2), (1, 0)]),
]


# also against jax.lax.conv_general_dilated, values and VJP (each new shape costs JAX ~3 s of
# compilation, so a strided and dilated 1-D case, a 1-D 'SAME' and a 2-D 'SAME' one)
JAX_CHECKED = (1, 2, 5)


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
def test_conv_matches_the_definition_and_jax(case):
    xs, ws, stride, padding, dilation, pads = case
    x, w = RNG.normal(size=xs), RNG.normal(size=ws)
    rank = len(ws) - 2
    st = (stride,) * rank if isinstance(stride, int) else stride
    dl = (dilation,) * rank if isinstance(dilation, int) else dilation
    got = nn.conv(x, w, stride, padding, dilation)
    assert normwise(got, conv_reference(x, w, st, pads, dl)) <= 1e-14
    if CONV_CASES.index(case) not in JAX_CHECKED:
        return
    jax = jax_or_skip()
    layout = ("NCH", "OIH", "NCH") if rank == 1 else ("NCHW", "OIHW", "NCHW")
    want = jax.lax.conv_general_dilated(x, w, st, pads, rhs_dilation=dl,
                                        dimension_numbers=layout)
    assert normwise(got, want) <= 1e-14
    ct = RNG.normal(size=got.shape)
    ours = ik.vjp(lambda a, b: nn.conv(a, b, stride, padding, dilation), x, w)[1](ct)
    theirs = jax.vjp(lambda a, b: jax.lax.conv_general_dilated(
        a, b, st, pads, rhs_dilation=dl, dimension_numbers=layout), x, w)[1](ct)
    assert all(normwise(o, t) <= 1e-13 for o, t in zip(ours, theirs))


def test_grouped_conv_is_one_conv_per_group():
    x, w = RNG.normal(size=(2, 6, 9, 8)), RNG.normal(size=(4, 3, 3, 2))
    got = nn.conv(x, w, (2, 1), 1, (1, 2), groups=2)
    want = np.concatenate([nn.conv(x[:, :3], w[:2], (2, 1), 1, (1, 2)),
                           nn.conv(x[:, 3:], w[2:], (2, 1), 1, (1, 2))], axis=1)
    assert normwise(got, want) <= 1e-15
    depthwise = RNG.normal(size=(6, 1, 3))
    x1 = RNG.normal(size=(2, 6, 10))
    got = nn.conv(x1, depthwise, 1, "SAME", groups=6)
    want = np.stack([nn.conv(x1[:, i:i + 1], depthwise[i:i + 1], 1, "SAME")[:, 0]
                     for i in range(6)], axis=1)
    assert normwise(got, want) <= 1e-15
    grad = ik.grad(lambda t: inp.sum(nn.conv(x1, t, 1, "SAME", groups=6) ** 2))(depthwise)
    assert grad.shape == depthwise.shape and np.all(np.isfinite(grad))


def test_conv_unbatched_input_and_bias_by_broadcast():
    x, w = RNG.normal(size=(3, 7, 6)), RNG.normal(size=(2, 3, 3, 3))
    assert np.array_equal(nn.conv(x, w, padding=1), nn.conv(x[None], w, padding=1)[0])
    b = RNG.normal(size=2)
    assert (nn.conv(x, w) + b[:, None, None]).shape == (2, 5, 4)


def pool_reference(x, kernel, stride, pad, fill, reduce):
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad], constant_values=fill)
    sizes = [(n - k) // s + 1 for n, k, s in zip(x.shape[2:], kernel, stride)]
    out = np.zeros(x.shape[:2] + tuple(sizes))
    for index in np.ndindex(*sizes):
        window = tuple(slice(i * s, i * s + k) for i, s, k in zip(index, stride, kernel))
        out[(...,) + index] = reduce(x[(slice(None), slice(None)) + window],
                                     axis=tuple(range(2, 2 + len(kernel))))
    return out


def test_pools_match_the_definition():
    x = RNG.normal(size=(2, 3, 9, 8))
    assert np.array_equal(nn.max_pool(x, 2), pool_reference(x, (2, 2), (2, 2), (0, 0),
                                                            -np.inf, np.max))
    assert np.array_equal(nn.max_pool(x, (3, 2), (2, 1), 1),
                          pool_reference(x, (3, 2), (2, 1), (1, 1), -np.inf, np.max))
    assert normwise(nn.avg_pool(x, 3, 2, 1),
                    pool_reference(x, (3, 3), (2, 2), (1, 1), 0.0, np.mean)) <= 1e-15
    x1 = x[:, :, 0]
    assert np.array_equal(nn.max_pool(x1, (3,)), pool_reference(x1, (3,), (3,), (0,), -np.inf,
                                                                np.max))


def test_max_pool_gradient_goes_to_the_maximum_and_shares_ties():
    x = np.array([[[[1.0, 4.0], [2.0, 3.0]], [[5.0, 5.0], [0.0, 5.0]]]])
    grad = ik.grad(lambda t: inp.sum(nn.max_pool(t, 2)))(x)
    assert np.array_equal(grad[0, 0], [[0.0, 1.0], [0.0, 0.0]])
    assert np.array_equal(grad[0, 1], np.array([[1.0, 1.0], [0.0, 1.0]]) / 3.0)


def small_network(x, w1, w2):
    h = nn.gelu(nn.conv(x, w1, 1, "SAME"), approximate=False)
    h = nn.max_pool(nn.layer_norm(h, axis=(1, 2, 3)), 2)
    h = nn.silu(nn.conv(h, w2, 2, 1))
    pooled = nn.avg_pool(h, 2)
    return nn.log_softmax(inp.reshape(pooled, (pooled.shape[0], -1)))


def network_inputs():
    return (RNG.normal(size=(2, 3, 8, 8)), RNG.normal(size=(4, 3, 3, 3)) * 0.3,
            RNG.normal(size=(6, 4, 3, 3)) * 0.3)


@pytest.mark.parametrize("name", ["reference", "threads", "native"])
def test_network_and_gradient_under_jit_on_every_cpu_strategy(name):
    args = network_inputs()

    def loss(*a):
        return -inp.sum(small_network(*a)[:, 0])

    with ik.numerics("portable"):
        eager = ik.value_and_grad(loss, (0, 1, 2))(*args)
    jitted = ik.jit(ik.value_and_grad(loss, (0, 1, 2)), strategy=name, numerics="portable")
    value, grads = jitted(*args)
    same = _contract(name, jitted.lower(*args).graph)
    assert same(value, eager[0]) and all(same(g, e) for g, e in zip(grads, eager[1]))


def test_vmap_over_images_is_the_batched_call():
    x, w1, w2 = network_inputs()
    batched = ik.vmap(lambda img: nn.max_pool(nn.conv(img, w1, padding=1), (2, 2)))(x)
    assert np.array_equal(batched, nn.max_pool(nn.conv(x, w1, padding=1), (2, 2)))
    per_row = ik.vmap(lambda r: nn.softmax(r) + nn.gelu(r, False))(X)
    assert np.array_equal(per_row, np.stack([nn.softmax(r) + nn.gelu(r, False) for r in X]))


def test_conv_errors_name_the_line_and_the_fix():
    x, w = RNG.normal(size=(2, 3, 8, 8)), RNG.normal(size=(4, 2, 3, 3))
    with pytest.raises(ik.ShapeError, match=r"conv at test_nn.py:\d+.*channels"):
        nn.conv(x, w)
    with pytest.raises(ik.ShapeError, match=r"conv at test_nn.py:\d+.*'SAME'"):
        nn.conv(x, RNG.normal(size=(4, 3, 3, 3)), padding="FULL")
    with pytest.raises(ik.ShapeError, match=r"conv/pool at test_nn.py:\d+.*pad more"):
        nn.max_pool(x, 9)
