"""Complex values (``complex64``/``complex128``) through the recorder, the
reference and every CPU strategy (``threads`` runs NumPy's complex loops,
``native`` the pair forms of ``record.complex_parts`` on the real parts,
within their written contract), portable numerics, and the derivative
convention (JAX's): values against NumPy, gradients and holomorphic
Jacobians in closed form, and against JAX where installed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
import isokernel.ops as iops
from isokernel.ir import Op

from .conftest import CPU_STRATEGIES as CPU
from .conftest import same

RNG = np.random.default_rng(3)
Z = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
Z64 = Z.astype(np.complex64)



def agrees(strategy: str, got, want) -> None:
    """The reference's bits, or on ``native`` (pair forms: products, moduli,
    roots and exponentials bounded) within 16 eps of the result's scale."""
    if strategy != "native":
        same(got, want)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    eps = np.finfo(want.dtype).eps
    np.testing.assert_allclose(got, want, rtol=16 * eps, atol=16 * eps * np.max(np.abs(want)))


@pytest.mark.parametrize("z", [Z, Z64], ids=["c128", "c64"])
def test_complex_arithmetic_and_functions_are_numpys(run, z, request):
    """Basic operations and NumPy's complex functions, in the input's
    precision: the reference's bits on every strategy but ``native``, which
    holds its contract."""
    strategy = request.node.callspec.params["run"]
    cases = [
        (lambda z: z * z + 2.0 * z - 1j, lambda z: z * z + 2.0 * z - 1j),
        (lambda z: inp.exp(z) / (z + 3.0), lambda z: np.exp(z) / (z + 3.0)),
        (lambda z: inp.sqrt(z) + inp.log(z) * inp.sin(z), lambda z: np.sqrt(z) + np.log(z) *
         np.sin(z)),
        (lambda z: inp.real(z) * inp.imag(z) + inp.abs(z), lambda z: np.real(z) * np.imag(z) +
         np.abs(z)),
        (lambda z: inp.conj(z) * z, lambda z: np.conj(z) * z),
        (lambda z: inp.angle(z), np.angle),
        (lambda z: inp.sum(z * 1j), lambda z: np.sum(z * 1j)),
        (lambda z: inp.dot(z, z), lambda z: np.dot(z, z)),
        (lambda z: inp.tanh(z) ** 2, lambda z: np.tanh(z) ** 2),
        (lambda z: inp.where(inp.real(z) > 0, z, inp.conj(z)),
         lambda z: np.where(np.real(z) > 0, z, np.conj(z))),
    ]
    for ours, numpys in cases:
        with np.errstate(all="ignore"):
            want = numpys(z)
            agrees(strategy, run(ours, z), want)


def test_parts_and_a_value_made_of_parts(run):
    x, y = RNG.standard_normal(5), RNG.standard_normal(5)
    y[0] = np.inf  # exact construction: no 0 * inf
    same(run(lambda x, y: iops.complex(x, y), x, y),
         np.array([complex(a, b) for a, b in zip(x, y)]))
    same(run(lambda x: inp.real(x) + inp.imag(x), x), x + 0.0)
    assert inp.iscomplexobj(Z) and not inp.iscomplexobj(x)


def test_dtype_rules_refuse_silent_casts_and_undefined_ops():
    x = RNG.standard_normal(6)
    with pytest.raises(ik.DTypeError, match=r"astype\(inp.complex128\)"):
        ik.jit(lambda z, x: z * x)(Z, x)  # strong complex and strong float: no silent cast
    same(ik.jit(lambda z: z * 2.5 + 1j, strategy="reference")(Z), Z * 2.5 + 1j)  # weak scalars
    for fn in (lambda z: inp.maximum(z, z), lambda z: z < z, lambda z: inp.floor(z),
               lambda z: inp.sort(z), lambda z: inp.max(z)):
        with pytest.raises(ik.DTypeError, match="complex"):
            ik.jit(fn)(Z)
    with pytest.raises(ik.DTypeError, match="imaginary part"):
        ik.jit(lambda z: inp.astype(z, inp.float64))(Z)
    assert Op.REAL in ik.trace(lambda z: inp.real(z), Z).ops()


def test_gradients_follow_jaxs_convention():
    """Real-valued f of complex z = x + iy: the transposes are not
    conjugated, so the gradient is df/dx - i df/dy, as JAX's: |z|^2 gives
    2 conj(z), re(z^2) gives 2 z, im(z) gives -i; with holomorphic=True a
    complex-valued f gives f'(z)."""
    np.testing.assert_allclose(ik.grad(lambda z: inp.sum(inp.abs(z) ** 2))(Z), 2 * np.conj(Z),
                               rtol=1e-15)
    np.testing.assert_allclose(ik.grad(lambda z: inp.sum(inp.real(z * z)))(Z), 2 * Z,
                               rtol=1e-15)
    np.testing.assert_allclose(ik.grad(lambda z: inp.sum(inp.imag(z)))(Z), -1j * np.ones(6))
    f = lambda z: z ** 3 + inp.exp(z)  # noqa: E731
    want = np.diag(3 * Z ** 2 + np.exp(Z))
    np.testing.assert_allclose(ik.jacfwd(f, holomorphic=True)(Z), want, rtol=1e-13)
    np.testing.assert_allclose(ik.jacrev(f, holomorphic=True)(Z), want, rtol=1e-13)
    np.testing.assert_allclose(ik.grad(lambda z: inp.sum(f(z)), holomorphic=True)(Z),
                               3 * Z ** 2 + np.exp(Z), rtol=1e-13)
    with pytest.raises(ik.DifferentiationError, match="holomorphic=True"):
        ik.grad(lambda z: inp.sum(z * z))(Z)
    with pytest.raises(ik.DifferentiationError, match="holomorphic=True"):
        ik.jacfwd(f)(Z)
    with pytest.raises(ik.DifferentiationError, match="complex inputs"):
        ik.grad(lambda x: inp.sum(x * 1j), holomorphic=True)(np.ones(3))


def test_vmap_and_real_inputs_made_complex():
    batched = ik.vmap(lambda z: inp.exp(z) * inp.conj(z))(np.stack([Z, 2 * Z]))
    np.testing.assert_allclose(batched, np.exp(np.stack([Z, 2 * Z])) * np.conj(
        np.stack([Z, 2 * Z])), rtol=1e-15)
    x = RNG.standard_normal(6)

    def energy(x):
        return inp.sum(inp.abs(inp.exp(1j * x) * inp.astype(x, inp.complex128)) ** 2)
    np.testing.assert_allclose(ik.grad(energy)(x), 2 * x, rtol=1e-14)  # |x e^{ix}|^2 = x^2


def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    cases = [
        (lambda z: inp.sum(inp.abs(z) ** 2), lambda z: jnp.sum(jnp.abs(z) ** 2)),
        (lambda z: inp.sum(inp.imag(inp.exp(z))), lambda z: jnp.sum(jnp.imag(jnp.exp(z)))),
        (lambda z: inp.sum(inp.abs(inp.sqrt(z) * inp.conj(z))),
         lambda z: jnp.sum(jnp.abs(jnp.sqrt(z) * jnp.conj(z)))),
        (lambda z: inp.sum(inp.angle(z * z) * inp.real(z)),
         lambda z: jnp.sum(jnp.angle(z * z) * jnp.real(z))),
    ]
    for f, g in cases:
        np.testing.assert_allclose(ik.jit(f)(Z), g(Z), rtol=1e-12)
        np.testing.assert_allclose(ik.grad(f)(Z), jax.grad(g)(Z), rtol=1e-12)
    h, k = (lambda z: inp.tanh(z) * z), (lambda z: jnp.tanh(z) * z)
    np.testing.assert_allclose(ik.jacrev(h, holomorphic=True)(Z),
                               jax.jacrev(k, holomorphic=True)(Z), rtol=1e-12, atol=1e-15)


def _parts(n, dtype, span, rng):
    real = np.float64 if dtype == np.complex128 else np.float32
    z = np.empty(n, dtype)
    z.real = (rng.standard_normal(n) * np.exp(rng.uniform(-span, span, n))).astype(real)
    z.imag = (rng.standard_normal(n) * np.exp(rng.uniform(-span, span, n))).astype(real)
    return z


@pytest.mark.parametrize("dtype,span", [(np.complex128, 300.0), (np.complex64, 40.0)],
                         ids=["c128", "c64"])
def test_native_pair_forms_hold_their_contract(dtype, span):
    """``native``'s pair forms against NumPy's complex loops on operands over
    ~260 (c128) / ~35 (c64) decades: division, parts and comparisons are
    NumPy's bits; a product part is within 2 eps (|ar br| + |ai bi|) (NumPy
    contracts into FMA here and there: measured 1.0); |z| within 2 ulp
    (measured 1.4/1.6); sqrt within 2 ulp of |sqrt z| (1.2/1.0); exp within
    8 ulp of |exp z| (0 here: libm's exp, cos and sin as glibc's cexp)."""
    rng = np.random.default_rng(11)
    a, b = _parts(20000, dtype, span, rng), _parts(20000, dtype, span, rng)
    eps = np.finfo(np.real(a).dtype).eps
    tiny = np.finfo(np.real(a).dtype).tiny

    def native(fn, *args):
        with np.errstate(all="ignore"):
            return ik.jit(fn, strategy="native")(*args)

    with np.errstate(all="ignore"):
        for fn in (lambda a, b: a / b, lambda a, b: a + b, lambda a, b: a - b,
                   lambda a, b: inp.conj(a) == b, lambda a, b: inp.where(a != b, -a, b)):
            same(native(fn, a, b), ik.jit(fn, strategy="reference")(a, b))
        product = a * b
        for got, want, scale in (
                (native(lambda a, b: inp.real(a * b), a, b), product.real,
                 np.abs(a.real * b.real) + np.abs(a.imag * b.imag)),
                (native(lambda a, b: inp.imag(a * b), a, b), product.imag,
                 np.abs(a.real * b.imag) + np.abs(a.imag * b.real)),
                (native(lambda a: inp.abs(a), a), np.abs(a), np.abs(a)),
                (native(lambda a: inp.sqrt(a), a), np.sqrt(a), np.abs(np.sqrt(a)))):
            bound = 2.0
            ok = np.isfinite(scale) & (scale > tiny / eps)
            error = np.abs(got.astype(complex) - want.astype(complex))[ok] / (scale[ok] * eps)
            assert np.max(error) <= bound, np.max(error)
        e = np.empty(20000, dtype)
        e.real = rng.uniform(-80.0, 80.0, e.size)
        e.imag = rng.uniform(-50.0, 50.0, e.size)
        got, want = native(lambda z: inp.exp(z), e), np.exp(e)
        error = np.abs(got.astype(complex) - want.astype(complex)) / (np.abs(want) * eps)
        assert np.max(error) <= 8.0, np.max(error)


def test_native_pair_forms_at_special_values():
    """Signed zeros, infinities and NaN where NumPy (C99) defines them: the
    same values as NumPy's complex loops (NaN payloads aside)."""
    inf, nan = np.inf, np.nan
    parts = [0.0, -0.0, 1.5, -2.0, inf, -inf, nan]
    z = np.array([complex(r, i) for r in parts for i in parts])
    w = np.array([complex(r, i) for r in (0.0, -0.0, 3.0, -inf) for i in (0.0, -0.0, 2.0, inf)])
    zz, ww = np.repeat(z, w.size), np.tile(w, z.size)
    finite_sqrt = np.array([complex(r, i) for r, i in (
        (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (4.0, 0.0), (-4.0, 0.0), (-4.0, -0.0), (0.0, 8.0),
        (-0.0, -8.0), (2.0, inf), (nan, -inf), (-inf, 1.0), (inf, -1.0), (-3.0, -inf))])
    finite_exp = np.array([complex(r, i) for r, i in (
        (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (710.0, 0.0), (710.0, -0.0), (-inf, 0.0),
        (-1.0, -0.0), (nan, 0.0))])

    def check(fn, *args):
        with np.errstate(all="ignore"):
            got, want = ik.jit(fn, strategy="native")(*args), fn(*args)
        for g, w_ in ((got.real, want.real), (got.imag, want.imag)):
            assert np.array_equal(np.isnan(g), np.isnan(w_))
            keep = ~np.isnan(w_)
            assert np.array_equal(np.signbit(g[keep]), np.signbit(w_[keep])), (args, got, want)
            assert np.array_equal(g[keep], w_[keep]), (args, got, want)
    check(lambda a, b: a / b, zz, ww)
    check(lambda a: np.sqrt(a) if isinstance(a, np.ndarray) else inp.sqrt(a), finite_sqrt)
    check(lambda a: np.exp(a) if isinstance(a, np.ndarray) else inp.exp(a), finite_exp)


def test_portable_numerics_record_complex_as_parts():
    """Under numerics='portable' the complex ops that differ between
    implementations are recorded on their parts (no complex product,
    modulus, root or exponential left), so every CPU strategy computes the
    same bits; an op without a pair form is refused, naming the fix."""
    def f(z, w):
        return inp.sqrt(z * w) + inp.exp(z) / (w + 2.0) - inp.abs(z) * 1j

    graph = ik.trace(ik.numerics("portable")(f), Z, 2 * Z)
    complex_ops = {n.op for n in graph.nodes if n.dtype in (np.complex64, np.complex128)}
    assert not complex_ops & {Op.MUL, Op.DIV, Op.SQRT, Op.EXP, Op.ABS}, complex_ops
    runs = [ik.jit(f, strategy=s, numerics="portable")(Z, 2 * Z) for s in CPU]
    for got in runs[1:]:
        same(got, runs[0])
    np.testing.assert_allclose(runs[0], f(Z, 2 * Z), rtol=1e-14)
    with pytest.raises(ik.DTypeError, match="numerics='native'"):
        ik.jit(lambda z: inp.log(z), numerics="portable")(Z)


_UNARY = {"neg": (lambda z: -z, np.negative), "conj": (inp.conj, np.conj),
          "sqrt": (inp.sqrt, np.sqrt), "exp": (lambda z: inp.exp(z * 0.25),
                                              lambda z: np.exp(z * 0.25)),
          "abs": (lambda z: inp.abs(z) + 0j, lambda z: np.abs(z) + 0j)}
_BINARY = {"+": (lambda a, b: a + b,) * 2, "-": (lambda a, b: a - b,) * 2,
           "*": (lambda a, b: a * b,) * 2, "/": (lambda a, b: a / (b + 3.0),) * 2,
           "where": (lambda a, b: inp.where(inp.real(a) > inp.imag(b), a, b),
                     lambda a, b: np.where(np.real(a) > np.imag(b), a, b))}


@st.composite
def _programs(draw):
    """A random expression of two complex inputs as (ours, NumPy's)."""
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(_UNARY) + sorted(_BINARY)),
                                    st.integers(0, 10), st.integers(0, 10)),
                          min_size=1, max_size=6))

    def build(table):
        def program(a, b):
            values = [a, b]
            for name, i, j in steps:
                x, y = values[i % len(values)], values[j % len(values)]
                values.append(_UNARY[name][table](x) if name in _UNARY else
                              _BINARY[name][table](x, y))
            return values[-1]
        return program
    return build(0), build(1)


@settings(max_examples=25, deadline=None)
@given(program=_programs(), seed=st.integers(0, 2**16))
def test_random_complex_programs_on_every_cpu_strategy(program, seed):
    """Hypothesis programs of complex ops: reference and threads give NumPy's
    bits, native agrees within its contract's bounds (16 eps of the
    result's scale after at most six ops), portable numerics the same bits
    on every strategy."""
    ours, numpys = program
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(33) + 1j * rng.standard_normal(33) for _ in range(2))
    with np.errstate(all="ignore"):
        want = numpys(a, b)
        for strategy in CPU:
            got = ik.jit(ours, strategy=strategy)(a, b)
            if np.all(np.isfinite(want)) and np.max(np.abs(want)) < 1e100:
                agrees(strategy, got, want)
        portable = [ik.jit(ours, strategy=s, numerics="portable")(a, b) for s in CPU]
    for got in portable[1:]:
        same(got, portable[0])


def test_graph_text_names_complex_constants():
    """A complex constant prints as itself (two graphs differing only in one
    have different text, so different digests)."""
    text = str(ik.trace(lambda z: z * (0.5 + 2j), Z))
    assert "(0.5+2j)" in text
    assert str(ik.trace(lambda z: z * (0.5 + 3j), Z)) != text
