"""Soil dielectric model: Mironov et al. (2009), as coded in NASA's
operational SMAP L2 passive soil-moisture processor.

Reference: V. L. Mironov, L. G. Kosolapova and S. V. Fomin, "Physically and
mineralogically based spectroscopic dielectric model for moist soils", IEEE
TGRS 47(7), 2059–2070, 2009; coefficients as in the SMAP L2/3 Radiometer Soil
Moisture ATBD (O'Neill et al.). C is the clay content in percent *inside* the
formulas; the API takes a clay fraction 0–1. Frequency f in Hz.

Dry soil and the transition moisture::

    nd  = 1.634 − 0.539e−2·C + 0.2748e−4·C²        (refractive index of dry soil)
    kd  = 0.03952 − 0.04038e−2·C                   (its normalised attenuation)
    mvt = 0.02863 + 0.30673e−2·C                   (max bound-water fraction, m³/m³)

Bound (b) and free/unbound (u) soil water, Debye relaxation plus ionic loss::

    ε0b = 79.8 − 85.4e−2·C + 32.7e−4·C²,  τb = 1.062e−11 + 3.450e−14·C s,
    σb  = 0.3112 + 0.467e−2·C S/m,        ε0u = 100, τu = 8.5e−12 s,
    σu  = 0.3631 + 1.217e−2·C S/m,        ε∞ = 4.9
    ε'_i  = ε∞ + (ε0i − ε∞) / (1 + (2πfτi)²)
    ε''_i = (ε0i − ε∞)·2πfτi / (1 + (2πfτi)²) + σi / (2π·ε0·f),  ε0 = 8.854e−12 F/m
    n_i = √((|ε_i| + ε'_i)/2),  k_i = √((|ε_i| − ε'_i)/2)

Refractive mixing (linear in mv on each side of mvt, a select here)::

    mv ≤ mvt: nm = nd + (nb − 1)·mv,                     km = kd + kb·mv
    mv > mvt: nm = nd + (nb − 1)·mvt + (nu − 1)(mv − mvt), km = kd + kb·mvt + ku(mv − mvt)
    ε = (nm² − km²) + i·2·nm·km

Because nm and km are affine in mv on each segment, ε'(mv) = nm² − km² is a
quadratic on each segment and inverts in closed form
(:func:`mv_from_eps_re`): the exact inverse that the retrieval uses until
the tabulated Stage 4 is wired, and the yardstick the table is measured by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ... import numpy as inp

EPS_VACUUM = 8.854e-12  # F/m, as in the SMAP code
EPS_INF = 4.9
EPS0_U = 100.0
TAU_U = 8.5e-12  # s
FREQ_HZ = 1.41e9  # SMAP L-band radiometer centre frequency (1.41 GHz)
MV_MAX = 0.6  # m³/m³: upper end of every Mironov table and inverse


@dataclass(frozen=True)
class MironovCoefficients:
    """The per-pixel quantities that depend on clay (and frequency) only:
    computed once per pixel and shared by every evaluation in a retrieval.
    ``n1``/``k1`` are the slopes below mvt, ``n2``/``k2`` above."""

    nd: object
    kd: object
    mvt: object
    n1: object
    k1: object
    n2: object
    k2: object


def _water(eps_static, tau, sigma, freq_hz):
    """Refractive index (n, k) of one water phase (Debye + ionic loss)."""
    omega_tau = (2.0 * math.pi * freq_hz) * tau
    denom = 1.0 + omega_tau * omega_tau
    eps_re = EPS_INF + (eps_static - EPS_INF) / denom
    eps_im = (eps_static - EPS_INF) * omega_tau / denom + sigma / (2.0 * math.pi * EPS_VACUUM
                                                                  * freq_hz)
    modulus = inp.sqrt(eps_re * eps_re + eps_im * eps_im)
    return inp.sqrt((modulus + eps_re) * 0.5), inp.sqrt((modulus - eps_re) * 0.5)


def mironov_coefficients(clay, freq_hz: float = FREQ_HZ) -> MironovCoefficients:
    """Dry-soil, bound- and free-water parameters for clay fraction ``clay``
    (0–1) at ``freq_hz``; arrays of ``clay``'s shape and dtype."""
    c = clay * 100.0
    nd = 1.634 - 0.539e-2 * c + 0.2748e-4 * c * c
    kd = 0.03952 - 0.04038e-2 * c
    mvt = 0.02863 + 0.30673e-2 * c
    eps0b = 79.8 - 85.4e-2 * c + 32.7e-4 * c * c
    tau_b = 1.062e-11 + 3.450e-14 * c
    sigma_b = 0.3112 + 0.467e-2 * c
    sigma_u = 0.3631 + 1.217e-2 * c
    nb, kb = _water(eps0b, tau_b, sigma_b, freq_hz)
    nu, ku = _water(EPS0_U, TAU_U, sigma_u, freq_hz)
    return MironovCoefficients(nd, kd, mvt, nb - 1.0, kb, nu - 1.0, ku)


def refractive_index(mv, m: MironovCoefficients):
    """(nm, km) of moist soil: the mixing rule, branch-free on both sides of
    mvt (both sides are computed; ``where`` selects)."""
    below = mv <= m.mvt
    n_low = m.nd + m.n1 * mv
    k_low = m.kd + m.k1 * mv
    wet = mv - m.mvt
    n_high = m.nd + m.n1 * m.mvt + m.n2 * wet
    k_high = m.kd + m.k1 * m.mvt + m.k2 * wet
    return inp.where(below, n_low, n_high), inp.where(below, k_low, k_high)


def permittivity(mv, m: MironovCoefficients):
    """Complex relative permittivity (ε', ε'') of soil at moisture ``mv``."""
    nm, km = refractive_index(mv, m)
    return nm * nm - km * km, 2.0 * nm * km


def mironov(mv, clay, freq_hz: float = FREQ_HZ):
    """Mironov (2009) permittivity of moist soil.

    ``mv``: volumetric soil moisture, m³/m³; ``clay``: clay mass fraction
    0–1; ``freq_hz``: frequency in Hz (a Python float). Returns (ε', ε''),
    dimensionless, with ε = ε' + iε'' and ε'' ≥ 0 (loss). Arrays of one
    dtype, float32 or float64.
    """
    return permittivity(mv, mironov_coefficients(clay, freq_hz))


def _segment_inverse(eps_re, n0, k0, n1, k1):
    """The root x ≥ 0 of (n0 + n1 x)² − (k0 + k1 x)² = ε', in the
    cancellation-free form x = 2d / (b + √(b² + 4ad)), d = ε' − (n0² − k0²),
    a = n1² − k1², b = 2(n0 n1 − k0 k1); ``eps_re`` must not lie below the
    segment's start (the caller clamps it)."""
    a = n1 * n1 - k1 * k1
    b = 2.0 * (n0 * n1 - k0 * k1)
    d = eps_re - (n0 * n0 - k0 * k0)
    return 2.0 * d / (b + inp.sqrt(b * b + 4.0 * a * d))


def _at_transition(m: MironovCoefficients):
    n_t = m.nd + m.n1 * m.mvt
    k_t = m.kd + m.k1 * m.mvt
    return n_t, k_t, n_t * n_t - k_t * k_t


def eps_re_at_transition(m: MironovCoefficients):
    """ε'(mvt): the real permittivity at the Mironov kink."""
    return _at_transition(m)[2]


def mv_from_eps_re(eps_re, m: MironovCoefficients, mv_max=MV_MAX):
    """The soil moisture whose Mironov ε' is ``eps_re``: the exact inverse of
    the real part, clamped to [0, ``mv_max``] (m³/m³).

    ε'(mv) is increasing and a quadratic on each side of mvt, so each side
    inverts in closed form; the side is chosen by comparing with ε'(mvt).
    Each side's argument is clamped into its own domain so the side not
    selected stays finite.
    """
    n_t, k_t, eps_t = _at_transition(m)
    eps_dry = m.nd * m.nd - m.kd * m.kd
    low = _segment_inverse(inp.clip(eps_re, eps_dry, eps_t), m.nd, m.kd, m.n1, m.k1)
    high = m.mvt + _segment_inverse(inp.maximum(eps_re, eps_t), n_t, k_t, m.n2, m.k2)
    return inp.clip(inp.where(eps_re <= eps_t, low, high), 0.0, mv_max)


def eps_im_of_eps_re(eps_re, m: MironovCoefficients, mv_max=MV_MAX):
    """κ(ε') = ε''(mv(ε')): the Mironov loss at the moisture that explains
    the real part ``eps_re`` (the direct form; a table lookup replaces it
    once tabulated data is available, see ``tables``)."""
    nm, km = refractive_index(mv_from_eps_re(eps_re, m, mv_max), m)
    return 2.0 * nm * km
