"""Soil-moisture science: Fresnel, Mironov (complex permittivities and
refractive indices), tau-omega and the Water Cloud Model against analytic
identities and independent (complex128 NumPy) implementations of the
published equations."""

from __future__ import annotations

import math

import numpy as np
import pytest

import isokernel
from isokernel.backends.parity import bit_identical
from isokernel.models.soil_moisture import (
    brightness_temperature,
    fresnel,
    fresnel_real,
    inverse_fresnel_h,
    inverse_fresnel_v,
    mironov,
    mironov_coefficients,
    mv_from_eps_re,
    stage1_reflectivity,
    tau_omega,
    water_cloud,
)
from isokernel.models.soil_moisture.dielectric import (
    EPS_VACUUM,
    FREQ_HZ,
    eps_im_of_eps_re,
    water_permittivity,
)

RNG = np.random.default_rng(20240601)


# ------------------------------------------------------------------------ Fresnel


def _fresnel_complex128(eps, theta_deg):
    c, s2 = math.cos(math.radians(theta_deg)), math.sin(math.radians(theta_deg)) ** 2
    root = np.sqrt(eps - s2)
    return (np.abs((c - root) / (c + root)) ** 2,
            np.abs((eps * c - root) / (eps * c + root)) ** 2)


def _lossless(eps):
    """ε' + 0i in the complex dtype of ``eps``'s precision."""
    return eps.astype(np.complex128 if eps.dtype == np.float64 else np.complex64)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-15), (np.float32, 1e-7)])
def test_fresnel_at_nadir_with_eps_4_is_one_ninth(dtype, tol):
    eps = np.array([4.0], dtype)
    for r_h, r_v in (fresnel(_lossless(eps), 0.0), fresnel_real(eps, 0.0)):
        assert r_h.dtype == dtype
        assert abs(float(r_h[0]) - 1 / 9) <= tol and abs(float(r_v[0]) - 1 / 9) <= tol


@pytest.mark.parametrize("eps", [1.5, 3.0, 10.0, 25.0, 80.0])
def test_brewster_angle_zeroes_r_v_for_real_eps(eps):
    theta_b = math.degrees(math.atan(math.sqrt(eps)))
    _, r_v = fresnel(np.array([eps + 0j]), theta_b)
    _, r_v_near = fresnel(np.array([eps + 0j]), theta_b - 5.0)
    assert r_v[0] < 1e-28 and r_v_near[0] > 1e-4


def test_fresnel_matches_complex128_formula():
    """|·|² of NumPy's complex quotients as the oracle, including ε' below
    sin²θ (s off the right half-line: the principal branch matters)."""
    eps = np.concatenate([RNG.uniform(1.0, 80.0, 2000) + 1j * RNG.uniform(0.0, 30.0, 2000),
                          RNG.uniform(-5.0, 0.9, 200) + 1j * RNG.uniform(0.1, 10.0, 200)])
    for theta in (0.0, 25.0, 40.0, 60.0, 85.0):
        got = fresnel(eps, theta)
        for g, w in zip(got, _fresnel_complex128(eps, theta)):
            assert g.dtype == np.float64
            np.testing.assert_allclose(g, w, rtol=1e-12)


def test_fresnel_in_complex64_is_single_precision():
    eps = (RNG.uniform(1.0, 80.0, 500) + 1j * RNG.uniform(0.0, 30.0, 500))
    got = fresnel(eps.astype(np.complex64), 40.0)
    for g, w in zip(got, _fresnel_complex128(eps, 40.0)):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2e-5)


def test_fresnel_with_zero_loss_is_bitwise_the_real_form():
    eps = RNG.uniform(1.0, 80.0, 5000)
    for theta in (0.0, 40.0, 70.0):
        for a, b in zip(fresnel(_lossless(eps), theta), fresnel_real(eps, theta)):
            assert bit_identical(a, b)


@pytest.mark.parametrize("strategy_name", ["reference", "threads"])
def test_fresnel_under_jit_is_the_eager_complex_arithmetic(strategy_name):
    eps = RNG.uniform(1.0, 80.0, 3000) + 1j * RNG.uniform(0.0, 30.0, 3000)
    want = fresnel(eps, 40.0)
    got = isokernel.jit(fresnel, strategy=strategy_name, static_argnames="theta_deg")(
        eps, theta_deg=40.0)
    assert all(bit_identical(g, w) for g, w in zip(got, want))


def test_fresnel_derivative_in_the_permittivity_parts():
    """grad through the complex square root and |·|²: d r_V / dε' and
    d r_V / dε'' against central differences of the NumPy oracle."""
    from isokernel.ops import complex as complex_from
    re, im = RNG.uniform(3.0, 30.0, 200), RNG.uniform(0.1, 5.0, 200)

    def total(re, im):
        return isokernel.numpy.sum(fresnel(complex_from(re, im))[1])
    d_re, d_im = isokernel.grad(total, argnums=(0, 1))(re, im)
    h = 1e-6
    for got, step in ((d_re, h), (d_im, 1j * h)):
        want = (_fresnel_complex128(re + 1j * im + step, 40.0)[1]
                - _fresnel_complex128(re + 1j * im - step, 40.0)[1]) / (2 * h)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("theta", [0.0, 20.0, 40.0, 44.0])
def test_closed_form_inverses_recover_real_eps(theta):
    eps = np.concatenate([[1.0001, 1.5], RNG.uniform(1.0, 90.0, 3000)])
    r_h, r_v = fresnel_real(eps, theta)
    np.testing.assert_allclose(inverse_fresnel_h(r_h, theta), eps, rtol=1e-9)
    np.testing.assert_allclose(inverse_fresnel_v(r_v, theta), eps, rtol=1e-9)


def test_inverse_v_refuses_angles_without_a_unique_root():
    with pytest.raises(ValueError, match="below 45"):
        inverse_fresnel_v(np.array([0.1]), 50.0)


# ------------------------------------------------------------------------ Mironov


def _water_complex128(e0, tau, sigma, f):
    wt = 2 * np.pi * f * tau
    return (4.9 + (e0 - 4.9) / (1 + wt ** 2)
            + 1j * ((e0 - 4.9) * wt / (1 + wt ** 2) + sigma / (2 * np.pi * EPS_VACUUM * f)))


def _mironov_complex128(mv, clay_fraction, f):
    """The published equations with NumPy's complex arithmetic: n + ik = √ε_water."""
    c = clay_fraction * 100.0
    nd = 1.634 - 0.539e-2 * c + 0.2748e-4 * c ** 2
    kd = 0.03952 - 0.04038e-2 * c
    mvt = 0.02863 + 0.30673e-2 * c
    b = np.sqrt(_water_complex128(79.8 - 85.4e-2 * c + 32.7e-4 * c ** 2,
                                  1.062e-11 + 3.450e-14 * c, 0.3112 + 0.467e-2 * c, f))
    u = np.sqrt(_water_complex128(100.0, 8.5e-12, 0.3631 + 1.217e-2 * c, f))
    low = nd + (b.real - 1) * mv + 1j * (kd + b.imag * mv)
    high = (nd + (b.real - 1) * mvt + (u.real - 1) * (mv - mvt)
            + 1j * (kd + b.imag * mvt + u.imag * (mv - mvt)))
    return np.where(mv <= mvt, low, high) ** 2


def test_water_refractive_index_is_the_principal_root_of_its_permittivity():
    """n* of each water phase is Mironov's closed form n = √((|ε| + ε')/2),
    k = √((|ε| − ε')/2) (its bits), the principal √ε (NumPy's complex sqrt
    within a few ulp)."""
    clay = RNG.uniform(0.0, 0.76, 2000)
    c = clay * 100.0
    for f in (1.26e9, FREQ_HZ, 5.0e9):
        args = (79.8 - 85.4e-2 * c + 32.7e-4 * c * c, 1.062e-11 + 3.450e-14 * c,
                0.3112 + 0.467e-2 * c, f)
        eps = water_permittivity(*args)
        assert eps.dtype == np.complex128
        np.testing.assert_allclose(eps, _water_complex128(*args), rtol=1e-15)
        modulus = np.sqrt(eps.real * eps.real + eps.imag * eps.imag)
        closed = np.empty_like(eps)
        closed.real = np.sqrt((modulus + eps.real) * 0.5)
        closed.imag = np.sqrt((modulus - eps.real) * 0.5)
        assert bit_identical(mironov_coefficients(clay, f).bound, closed - 1.0)
        n = np.sqrt(eps)
        assert np.all(n.real > 0) and np.all(n.imag > 0)
        np.testing.assert_allclose(closed.real, n.real, rtol=1e-14)
        np.testing.assert_allclose(closed.imag, n.imag, rtol=1e-13)


def test_mironov_matches_an_independent_complex_implementation():
    mv = RNG.uniform(0.0, 0.6, 4000)
    clay = RNG.uniform(0.0, 0.76, 4000)
    for f in (1.26e9, FREQ_HZ, 5.0e9):
        eps = mironov(mv, clay, f)
        assert eps.dtype == np.complex128
        want = _mironov_complex128(mv, clay, f)
        np.testing.assert_allclose(eps.real, want.real, rtol=1e-12)
        np.testing.assert_allclose(eps.imag, want.imag, rtol=1e-11)


def test_mironov_in_float32_is_complex64():
    mv = RNG.uniform(0.0, 0.6, 4000)
    clay = RNG.uniform(0.0, 0.76, 4000)
    eps = mironov(mv.astype(np.float32), clay.astype(np.float32))
    assert eps.dtype == np.complex64
    np.testing.assert_allclose(eps, _mironov_complex128(mv, clay, FREQ_HZ), rtol=2e-5)


@pytest.mark.parametrize("strategy_name", ["reference", "threads"])
def test_mironov_under_jit_is_the_eager_complex_arithmetic(strategy_name):
    mv = RNG.uniform(0.0, 0.6, 3000)
    clay = RNG.uniform(0.0, 0.76, 3000)
    got = isokernel.jit(mironov, strategy=strategy_name)(mv, clay)
    assert got.dtype == np.complex128 and bit_identical(got, mironov(mv, clay))


def test_mironov_derivative_is_twice_the_index_times_its_slope():
    """dε/dmv = 2·n*·dn*/dmv, by jacfwd through the complex mixing rule and
    square, on each side of the kink."""
    clay = RNG.uniform(0.05, 0.6, 300)
    m = mironov_coefficients(clay)
    mv = np.where(RNG.uniform(size=300) < 0.5, 0.5 * m.mvt, m.mvt + 0.2)

    def parts(mv):
        eps = mironov(mv, clay)
        return isokernel.numpy.real(eps), isokernel.numpy.imag(eps)
    d_re, d_im = isokernel.jvp(parts, (mv,), (np.ones_like(mv),))[1]
    n = np.sqrt(_mironov_complex128(mv, clay, FREQ_HZ))
    slope = np.where(mv <= m.mvt, m.bound, m.free)
    np.testing.assert_allclose(d_re + 1j * d_im, 2.0 * n * slope, rtol=1e-12)


def test_mironov_is_plausible_at_l_band():
    eps = mironov(np.array([0.0, 0.3]), np.array([0.2, 0.2]))
    assert 2.0 < eps.real[0] < 3.5 and 14.0 < eps.real[1] < 20.0
    assert 0.0 < eps.imag[0] < 0.5 and 1.0 < eps.imag[1] < 4.0


@pytest.mark.parametrize("clay", [0.0, 0.1, 0.35, 0.6])
def test_mironov_is_continuous_at_mvt_with_a_kink(clay):
    mvt = float(mironov_coefficients(np.float64(clay)).mvt)
    h = 1e-7
    x = np.array([mvt - h, np.nextafter(mvt, 0.0), mvt, np.nextafter(mvt, 1.0), mvt + h])
    eps = mironov(x, np.full_like(x, clay))
    eps_re, eps_im = eps.real, eps.imag
    assert abs(eps_re[3] - eps_re[1]) < 1e-12 and abs(eps_im[3] - eps_im[1]) < 1e-12
    left = (eps_re[2] - eps_re[0]) / h
    right = (eps_re[4] - eps_re[2]) / h
    assert abs(right - left) > 0.02 * abs(left)  # the slope changes: the select is real


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_mv_from_eps_re_is_the_exact_inverse(dtype, tol):
    mv = RNG.uniform(0.0, 0.6, 5000).astype(dtype)
    clay = RNG.uniform(0.0, 0.7, 5000).astype(dtype)
    m = mironov_coefficients(clay)
    eps = mironov(mv, clay)
    got = mv_from_eps_re(eps.real, m)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, mv, atol=tol)
    kappa = eps_im_of_eps_re(eps.real, m)
    assert kappa.dtype == dtype
    np.testing.assert_allclose(kappa, eps.imag, rtol=1e3 * tol)


def test_mv_from_eps_re_clamps_outside_the_physical_range():
    m = mironov_coefficients(np.array([0.2, 0.2]))
    got = mv_from_eps_re(np.array([1.0, 200.0]), m)
    assert got[0] == 0.0 and got[1] == 0.6


# ------------------------------------------------------- tau-omega, Water Cloud Model


def _tb(r, gamma, omega, ts):
    return brightness_temperature(np.asarray(r), np.asarray(gamma), np.asarray(omega),
                                  np.asarray(ts))


def test_tau_omega_without_vegetation_is_the_bare_soil_emission():
    r = RNG.uniform(0, 1, 100)
    ts = RNG.uniform(250, 320, 100)
    np.testing.assert_allclose(_tb(r, 1.0, 0.07, ts), ts * (1 - r), rtol=1e-15)
    eps = RNG.uniform(3, 30, 100)
    eps = eps + 0.1j * eps
    tbh, tbv = tau_omega(eps, np.zeros(100), 0.1, 0.05, 0.0, ts)
    r_h, r_v = fresnel(eps)
    np.testing.assert_allclose(tbv, ts * (1 - r_v), rtol=1e-14)
    np.testing.assert_allclose(tbh, ts * (1 - r_h), rtol=1e-14)


def test_tau_omega_opaque_canopy_emits_tc_times_one_minus_omega():
    ts = RNG.uniform(250, 320, 100)
    eps = RNG.uniform(3, 30, 100) * (1.0 + 0.1j)
    tbh, tbv = tau_omega(eps, np.full(100, 1e4), 0.1, 0.08, 0.1, ts)
    np.testing.assert_allclose(tbh, ts * 0.92, rtol=1e-15)
    np.testing.assert_allclose(tbv, ts * 0.92, rtol=1e-15)


def test_tau_omega_blackbody_limit_is_ts():
    gamma = RNG.uniform(0, 1, 100)
    ts = RNG.uniform(250, 320, 100)
    np.testing.assert_allclose(_tb(0.0, gamma, 0.0, ts), ts, rtol=1e-15)


def test_stage1_inverts_tau_omega_exactly():
    r, gamma = RNG.uniform(0, 0.6, 1000), RNG.uniform(0.05, 1, 1000)
    omega, ts = RNG.uniform(0, 0.15, 1000), RNG.uniform(260, 320, 1000)
    got = stage1_reflectivity(_tb(r, gamma, omega, ts), ts, gamma, omega)
    np.testing.assert_allclose(got, r, atol=1e-11)


def test_water_cloud_limits():
    mv = RNG.uniform(0.02, 0.5, 100)
    bare = water_cloud(mv, np.zeros(100), 0.05, 0.5, -15.0, 25.0)
    np.testing.assert_allclose(bare, -15.0 + 25.0 * mv, rtol=1e-13)
    opaque = water_cloud(mv, np.full(100, 0.9), 0.05, 1e4, -15.0, 25.0)
    canopy = 10 * np.log10(0.05 * 0.9 * math.cos(math.radians(40.0)))
    np.testing.assert_allclose(opaque, canopy, rtol=1e-13)
