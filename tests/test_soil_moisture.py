"""Soil-moisture science: Fresnel, complex helpers, Mironov, tau-omega and
the Water Cloud Model against analytic identities and independent
(complex128 NumPy) implementations of the published equations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from isokernel.backends.parity import bit_identical
from isokernel.models.soil_moisture import (
    brightness_temperature,
    cdiv,
    cmul,
    csqrt,
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
from isokernel.models.soil_moisture.dielectric import EPS_VACUUM, FREQ_HZ

RNG = np.random.default_rng(20240601)


# ----------------------------------------------------------------- complex helpers


def test_complex_helpers_match_numpy_complex128():
    a = RNG.normal(size=1000) * 10 + 1j * RNG.normal(size=1000) * 10
    b = RNG.normal(size=1000) * 10 + 1j * RNG.normal(size=1000) * 10
    for got, want in ((cmul(a.real, a.imag, b.real, b.imag), a * b),
                      (cdiv(a.real, a.imag, b.real, b.imag), a / b),
                      (csqrt(a.real, a.imag), np.sqrt(a))):
        np.testing.assert_allclose(got[0] + 1j * got[1], want, rtol=1e-14, atol=1e-14)


def test_csqrt_principal_branch_on_the_axes():
    re = np.array([-4.0, 4.0, 0.0, 0.0, -9.0, 1e-300])
    im = np.array([0.0, 0.0, 0.0, 2.0, -1e-30, 0.0])
    got_re, got_im = csqrt(re, im)
    want = np.sqrt(re + 1j * im)
    np.testing.assert_allclose(got_re, want.real, rtol=1e-15)
    np.testing.assert_allclose(got_im, want.imag, rtol=1e-15)
    assert got_im[0] == 2.0 and got_re[0] == 0.0  # √−4 = +2i
    assert got_re[2] == 0.0 and got_im[2] == 0.0


# ------------------------------------------------------------------------ Fresnel


def _fresnel_complex128(eps, theta_deg):
    c, s2 = math.cos(math.radians(theta_deg)), math.sin(math.radians(theta_deg)) ** 2
    root = np.sqrt(eps - s2)
    return (np.abs((c - root) / (c + root)) ** 2,
            np.abs((eps * c - root) / (eps * c + root)) ** 2)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-15), (np.float32, 1e-7)])
def test_fresnel_at_nadir_with_eps_4_is_one_ninth(dtype, tol):
    eps = np.array([4.0], dtype)
    for r_h, r_v in (fresnel(eps, np.zeros_like(eps), 0.0), fresnel_real(eps, 0.0)):
        assert r_h.dtype == dtype
        assert abs(float(r_h[0]) - 1 / 9) <= tol and abs(float(r_v[0]) - 1 / 9) <= tol


@pytest.mark.parametrize("eps", [1.5, 3.0, 10.0, 25.0, 80.0])
def test_brewster_angle_zeroes_r_v_for_real_eps(eps):
    theta_b = math.degrees(math.atan(math.sqrt(eps)))
    _, r_v = fresnel(np.array([eps]), np.array([0.0]), theta_b)
    _, r_v_near = fresnel(np.array([eps]), np.array([0.0]), theta_b - 5.0)
    assert r_v[0] < 1e-28 and r_v_near[0] > 1e-4


def test_fresnel_matches_complex128_formula():
    eps = RNG.uniform(1.0, 80.0, 2000) + 1j * RNG.uniform(0.0, 30.0, 2000)
    for theta in (0.0, 25.0, 40.0, 60.0, 85.0):
        got = fresnel(eps.real, eps.imag, theta)
        for g, w in zip(got, _fresnel_complex128(eps, theta)):
            np.testing.assert_allclose(g, w, rtol=1e-12)


def test_fresnel_with_zero_loss_is_bitwise_the_real_form():
    eps = RNG.uniform(1.0, 80.0, 5000)
    for theta in (0.0, 40.0, 70.0):
        for a, b in zip(fresnel(eps, np.zeros_like(eps), theta), fresnel_real(eps, theta)):
            assert bit_identical(a, b)


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


def _mironov_complex128(mv, clay_fraction, f):
    """The published equations with complex arithmetic: n + ik = √ε_water."""
    c = clay_fraction * 100.0
    nd = 1.634 - 0.539e-2 * c + 0.2748e-4 * c ** 2
    kd = 0.03952 - 0.04038e-2 * c
    mvt = 0.02863 + 0.30673e-2 * c

    def water(e0, tau, sigma):
        wt = 2 * np.pi * f * tau
        eps = (4.9 + (e0 - 4.9) / (1 + wt ** 2)
               + 1j * ((e0 - 4.9) * wt / (1 + wt ** 2) + sigma / (2 * np.pi * EPS_VACUUM * f)))
        return np.sqrt(eps)
    b = water(79.8 - 85.4e-2 * c + 32.7e-4 * c ** 2, 1.062e-11 + 3.450e-14 * c,
              0.3112 + 0.467e-2 * c)
    u = water(100.0, 8.5e-12, 0.3631 + 1.217e-2 * c)
    low = nd + (b.real - 1) * mv + 1j * (kd + b.imag * mv)
    high = (nd + (b.real - 1) * mvt + (u.real - 1) * (mv - mvt)
            + 1j * (kd + b.imag * mvt + u.imag * (mv - mvt)))
    return np.where(mv <= mvt, low, high) ** 2


def test_mironov_matches_an_independent_complex_implementation():
    mv = RNG.uniform(0.0, 0.6, 4000)
    clay = RNG.uniform(0.0, 0.76, 4000)
    for f in (1.26e9, FREQ_HZ, 5.0e9):
        eps_re, eps_im = mironov(mv, clay, f)
        want = _mironov_complex128(mv, clay, f)
        np.testing.assert_allclose(eps_re, want.real, rtol=1e-12)
        np.testing.assert_allclose(eps_im, want.imag, rtol=1e-11)


def test_mironov_is_plausible_at_l_band():
    eps_re, eps_im = mironov(np.array([0.0, 0.3]), np.array([0.2, 0.2]))
    assert 2.0 < eps_re[0] < 3.5 and 14.0 < eps_re[1] < 20.0
    assert 0.0 < eps_im[0] < 0.5 and 1.0 < eps_im[1] < 4.0


@pytest.mark.parametrize("clay", [0.0, 0.1, 0.35, 0.6])
def test_mironov_is_continuous_at_mvt_with_a_kink(clay):
    mvt = float(mironov_coefficients(np.float64(clay)).mvt)
    h = 1e-7
    x = np.array([mvt - h, np.nextafter(mvt, 0.0), mvt, np.nextafter(mvt, 1.0), mvt + h])
    eps_re, eps_im = mironov(x, np.full_like(x, clay))
    assert abs(eps_re[3] - eps_re[1]) < 1e-12 and abs(eps_im[3] - eps_im[1]) < 1e-12
    left = (eps_re[2] - eps_re[0]) / h
    right = (eps_re[4] - eps_re[2]) / h
    assert abs(right - left) > 0.02 * abs(left)  # the slope changes: the select is real


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_mv_from_eps_re_is_the_exact_inverse(dtype, tol):
    mv = RNG.uniform(0.0, 0.6, 5000).astype(dtype)
    clay = RNG.uniform(0.0, 0.7, 5000).astype(dtype)
    m = mironov_coefficients(clay)
    eps_re, _ = mironov(mv, clay)
    got = mv_from_eps_re(eps_re, m)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, mv, atol=tol)


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
    tbh, tbv = tau_omega(eps, 0.1 * eps, np.zeros(100), 0.1, 0.05, 0.0, ts)
    r_h, r_v = fresnel(eps, 0.1 * eps)
    np.testing.assert_allclose(tbv, ts * (1 - r_v), rtol=1e-14)
    np.testing.assert_allclose(tbh, ts * (1 - r_h), rtol=1e-14)


def test_tau_omega_opaque_canopy_emits_tc_times_one_minus_omega():
    ts = RNG.uniform(250, 320, 100)
    eps = RNG.uniform(3, 30, 100)
    tbh, tbv = tau_omega(eps, 0.1 * eps, np.full(100, 1e4), 0.1, 0.08, 0.1, ts)
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
