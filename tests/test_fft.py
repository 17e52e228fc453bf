"""``inp.fft`` (the ``fft`` primitive: NumPy's pocketfft over trailing
axes): NumPy's values (its bits at the default norm) eagerly and on every
CPU strategy for every function, ``n``/``s``, axes and norm; derivatives by
the inner-product identity and against JAX where installed; round trips;
vmap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import Op

from .conftest import CPU_STRATEGIES as STRATEGIES

RNG = np.random.default_rng(5)
Z = RNG.standard_normal((4, 6)) + 1j * RNG.standard_normal((4, 6))
X = RNG.standard_normal((4, 6))
X7 = RNG.standard_normal((3, 7))

CASES = [
    ("fft", lambda a: inp.fft.fft(a), np.fft.fft, Z, True),
    ("fft n=8 axis 0", lambda a: inp.fft.fft(a, n=8, axis=0),
     lambda a: np.fft.fft(a, n=8, axis=0), Z, True),
    ("fft n=3 (crop)", lambda a: inp.fft.fft(a, n=3), lambda a: np.fft.fft(a, n=3), Z, True),
    ("ifft", lambda a: inp.fft.ifft(a), np.fft.ifft, Z, True),
    ("ifft ortho", lambda a: inp.fft.ifft(a, norm="ortho"),
     lambda a: np.fft.ifft(a, norm="ortho"), Z, False),
    ("fft forward", lambda a: inp.fft.fft(a, norm="forward"),
     lambda a: np.fft.fft(a, norm="forward"), Z, False),
    ("fft of reals", lambda a: inp.fft.fft(a), np.fft.fft, X, True),
    ("fft float32", lambda a: inp.fft.fft(a), np.fft.fft, X.astype(np.float32), True),
    ("rfft", lambda a: inp.fft.rfft(a), np.fft.rfft, X, True),
    ("rfft odd", lambda a: inp.fft.rfft(a), np.fft.rfft, X7, True),
    ("irfft", lambda a: inp.fft.irfft(a), np.fft.irfft, Z, True),
    ("irfft n=7", lambda a: inp.fft.irfft(a, n=7), lambda a: np.fft.irfft(a, n=7), Z, True),
    ("fft2", lambda a: inp.fft.fft2(a), np.fft.fft2, Z, True),
    ("ifft2", lambda a: inp.fft.ifft2(a), np.fft.ifft2, Z, True),
    ("rfft2", lambda a: inp.fft.rfft2(a), np.fft.rfft2, X, True),
    ("irfft2", lambda a: inp.fft.irfft2(a), np.fft.irfft2, Z, True),
    ("fftn s", lambda a: inp.fft.fftn(a, s=(3, 5)),
     lambda a: np.fft.fftn(a, s=(3, 5), axes=(0, 1)), Z, True),
    ("rfftn axes 0", lambda a: inp.fft.rfftn(a, axes=(0,)),
     lambda a: np.fft.rfftn(a, axes=(0,)), X, True),
    ("irfftn", lambda a: inp.fft.irfftn(a), np.fft.irfftn, Z, True),
    ("hfft", lambda a: inp.fft.hfft(a), np.fft.hfft, Z, False),
    ("ihfft", lambda a: inp.fft.ihfft(a), np.fft.ihfft, X, False),
    ("fftshift", lambda a: inp.fft.fftshift(a), np.fft.fftshift, X7, True),
    ("ifftshift", lambda a: inp.fft.ifftshift(a, axes=1), lambda a: np.fft.ifftshift(a, axes=1),
     X7, True),
]



@pytest.mark.parametrize("name,ours,numpys,a,bits", CASES, ids=[c[0] for c in CASES])
def test_values_are_numpys(run, name, ours, numpys, a, bits):
    """NumPy's bits at the default norm (the same pocketfft); another norm
    scales afterwards, within a few ulp of NumPy's in-transform scaling."""
    got, want = np.asarray(run(ours, a)), numpys(a)
    assert got.dtype == want.dtype and got.shape == want.shape
    if bits:
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(got.real.dtype).eps,
                                   atol=4 * np.finfo(got.real.dtype).eps * np.abs(want).max())


def test_frequencies_and_round_trips():
    np.testing.assert_array_equal(inp.fft.fftfreq(8, 0.5), np.fft.fftfreq(8, 0.5))
    np.testing.assert_array_equal(inp.fft.rfftfreq(7), np.fft.rfftfreq(7))
    for x in (X, X7):
        back = ik.jit(lambda a: inp.fft.irfft(inp.fft.rfft(a), n=a.shape[-1]))(x)
        np.testing.assert_allclose(back, x, rtol=0, atol=1e-10 * np.abs(x).max())
    back = ik.jit(lambda a: inp.fft.ifftn(inp.fft.fftn(a)))(Z)
    np.testing.assert_allclose(back, Z, rtol=0, atol=1e-10)
    assert Op.FFT in ik.trace(lambda a: inp.fft.fft(a), Z).ops()


@pytest.mark.parametrize("name,ours,a", [
    ("fft", lambda a: inp.fft.fft(a), Z), ("ifft", lambda a: inp.fft.ifft(a), Z),
    ("rfft", lambda a: inp.fft.rfft(a), X), ("rfft odd", lambda a: inp.fft.rfft(a), X7),
    ("irfft", lambda a: inp.fft.irfft(a), Z), ("irfft odd", lambda a: inp.fft.irfft(a, n=7), Z),
    ("rfft2", lambda a: inp.fft.rfft2(a), X), ("irfft2", lambda a: inp.fft.irfft2(a), Z),
])
def test_transposes_satisfy_the_bilinear_identity(name, ours, a):
    """For the linear map L and any t, c: sum(c * L t) = sum(L^T c * t) in
    the real part (JAX's convention pairs real and imaginary parts; for a
    map whose input is real, L^T c is real)."""
    out, pull = ik.vjp(ours, a)
    t = RNG.standard_normal(a.shape) + (1j * RNG.standard_normal(a.shape)
                                        if np.iscomplexobj(a) else 0)
    c = RNG.standard_normal(out.shape) + (1j * RNG.standard_normal(out.shape)
                                          if np.iscomplexobj(out) else 0)
    (ct,) = pull(c)
    left = np.sum(np.real(c) * np.real(ik.jvp(ours, (a,), (t,))[1])) - np.sum(
        np.imag(c) * np.imag(ik.jvp(ours, (a,), (t,))[1]))
    right = np.sum(np.real(ct) * np.real(t)) - np.sum(np.imag(ct) * np.imag(t))
    np.testing.assert_allclose(left, right, rtol=1e-11)


def test_vmap_of_transforms():
    xs = np.stack([X, -2 * X])
    np.testing.assert_allclose(ik.vmap(lambda a: inp.fft.rfft(a))(xs), np.fft.rfft(xs),
                               rtol=1e-15)
    np.testing.assert_allclose(ik.vmap(lambda a: inp.fft.fft2(a))(np.stack([Z, Z * 1j])),
                               np.fft.fft2(np.stack([Z, Z * 1j])), rtol=1e-15, atol=1e-15)


def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    cases = [
        (lambda a: inp.sum(inp.abs(inp.fft.fft(a)) ** 2),
         lambda a: jnp.sum(jnp.abs(jnp.fft.fft(a)) ** 2), Z),
        (lambda a: inp.sum(inp.abs(inp.fft.rfft(a)) * inp.arange(4.0)),
         lambda a: jnp.sum(jnp.abs(jnp.fft.rfft(a)) * jnp.arange(4.0)), X),
        (lambda a: inp.sum(inp.fft.irfft(a) * inp.arange(10.0)),
         lambda a: jnp.sum(jnp.fft.irfft(a) * jnp.arange(10.0)), Z),
        (lambda a: inp.sum(inp.fft.irfft(a, n=7) ** 2),
         lambda a: jnp.sum(jnp.fft.irfft(a, n=7) ** 2), Z),
        (lambda a: inp.sum(inp.fft.irfft2(inp.fft.rfft2(a) * (1.0 + 0.5j)) ** 2),
         lambda a: jnp.sum(jnp.fft.irfft2(jnp.fft.rfft2(a) * (1.0 + 0.5j)) ** 2), X),
    ]
    for f, g, a in cases:
        np.testing.assert_allclose(ik.jit(f)(a), g(a), rtol=1e-12)
        np.testing.assert_allclose(ik.grad(f)(a), jax.grad(g)(a), rtol=1e-10, atol=1e-12)


# --- Fourier layers -------------------------------------------------------------------------

def _numpy_spectral_1d(x, wr, wi, modes):
    s = np.fft.rfft(x)[..., :modes]
    mixed = np.einsum("ncm,com->nom", s, wr + 1j * wi)
    full = np.zeros(x.shape[:1] + (wr.shape[1], x.shape[-1] // 2 + 1), complex)
    full[..., :modes] = mixed
    return np.fft.irfft(full, n=x.shape[-1])


def _numpy_spectral_2d(x, wr, wi, modes):
    (m1, m2), (h, w) = modes, x.shape[-2:]
    s, weights = np.fft.rfft2(x), wr + 1j * wi
    full = np.zeros((x.shape[0], wr.shape[2], h, w // 2 + 1), complex)
    full[:, :, :m1, :m2] = np.einsum("nchw,cohw->nohw", s[:, :, :m1, :m2], weights[0])
    full[:, :, h - m1:, :m2] = np.einsum("nchw,cohw->nohw", s[:, :, h - m1:, :m2], weights[1])
    return np.fft.irfft2(full, s=(h, w))


def test_spectral_convolutions_are_the_fourier_layer():
    """``nn.spectral_conv1d``/``2d`` against the layer written in NumPy
    (rfft, the kept modes mixed by complex weights, irfft), and their
    gradient with respect to the weights against finite differences."""
    from isokernel import nn
    x, (wr, wi) = RNG.standard_normal((2, 3, 16)), RNG.standard_normal((2, 3, 4, 5))
    for strategy in STRATEGIES:
        got = ik.jit(lambda x, a, b: nn.spectral_conv1d(x, a, b, 5), strategy=strategy)(x, wr,
                                                                                       wi)
        np.testing.assert_allclose(got, _numpy_spectral_1d(x, wr, wi, 5), rtol=0, atol=1e-13)
    x2, (w2r, w2i) = RNG.standard_normal((2, 3, 8, 10)), RNG.standard_normal((2, 2, 3, 4, 3, 4))
    got = ik.jit(lambda x, a, b: nn.spectral_conv2d(x, a, b, (3, 4)))(x2, w2r, w2i)
    np.testing.assert_allclose(got, _numpy_spectral_2d(x2, w2r, w2i, (3, 4)), rtol=0,
                               atol=1e-13)

    def loss(a):
        return inp.sum(nn.spectral_conv1d(x, a, wi, 5) ** 2)
    g = ik.grad(loss)(wr)
    d = RNG.standard_normal(wr.shape)
    h = 1e-6
    fd = (np.sum(_numpy_spectral_1d(x, wr + h * d, wi, 5) ** 2)
          - np.sum(_numpy_spectral_1d(x, wr - h * d, wi, 5) ** 2)) / (2 * h)
    np.testing.assert_allclose(np.sum(g * d), fd, rtol=1e-6)
    with pytest.raises(ValueError, match="modes"):
        nn.spectral_conv1d(x, wr, wi, 12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.sampled_from(["fft", "ifft", "rfft", "irfft"]),
       st.integers(0, 2**31 - 1))
def test_hypothesis_transforms_are_numpys_bits(rank, n, kind, seed):
    """Random shapes (the transformed axis of any length, odd ones included)
    and axes: each kind's values are NumPy's bits on every CPU strategy, and
    a real round trip comes back within 1e-10."""
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 4, rank - 1)) + (n,)
    axis = int(rng.integers(0, rank))
    a = rng.standard_normal(shape)
    if kind in ("fft", "ifft", "irfft"):
        a = a + 1j * rng.standard_normal(shape)
    ours = getattr(inp.fft, kind)
    numpys = getattr(np.fft, kind)
    if kind == "irfft" and shape[axis] == 1:  # 2 * (1 - 1) points: both refuse
        with pytest.raises(ValueError):
            numpys(a, axis=axis)
        with pytest.raises(ValueError, match="points"):
            ik.jit(lambda a: ours(a, axis=axis))(a)
        return
    want = numpys(a, axis=axis)
    for strategy in STRATEGIES:
        got = ik.jit(lambda a: ours(a, axis=axis), strategy=strategy)(a)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    if kind == "rfft":
        length = shape[axis]
        back = ik.jit(lambda a: inp.fft.irfft(inp.fft.rfft(a, axis=axis), n=length,
                                              axis=axis))(a)
        np.testing.assert_allclose(back, a, rtol=0, atol=1e-10 * max(1.0, np.abs(a).max()))
