"""Complex values (``complex64``/``complex128``) through the recorder, the
reference and every CPU strategy (which run complex ops by the reference
rules), and the derivative convention (JAX's): values against NumPy,
gradients and holomorphic Jacobians in closed form, and against JAX where
installed."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
import isokernel.ops as iops
from isokernel.ir import Op

from .conftest import same

RNG = np.random.default_rng(3)
Z = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
Z64 = Z.astype(np.complex64)



@pytest.mark.parametrize("z", [Z, Z64], ids=["c128", "c64"])
def test_complex_arithmetic_and_functions_are_numpys(run, z):
    """Basic operations and NumPy's complex functions, in the input's
    precision, the reference's bits on every strategy (they run whole)."""
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
            same(run(ours, z), want)


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
    same(ik.jit(lambda z: z * 2.5 + 1j)(Z), Z * 2.5 + 1j)  # Python scalars are weak
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
