"""Soil dielectric model: Mironov et al. (2009), as coded in NASA's
operational SMAP L2 passive soil-moisture processor, with complex values.

Reference: V. L. Mironov, L. G. Kosolapova and S. V. Fomin, "Physically and
mineralogically based spectroscopic dielectric model for moist soils", IEEE
TGRS 47(7), 2059–2070, 2009; coefficients as in the SMAP L2/3 Radiometer Soil
Moisture ATBD (O'Neill et al.). C is the clay content in percent *inside* the
formulas; the API takes a clay fraction 0–1. Frequency f in Hz.

Dry soil and the transition moisture::

    n*d = nd + i·kd,  nd = 1.634 − 0.539e−2·C + 0.2748e−4·C²,  kd = 0.03952 − 0.04038e−2·C
    mvt = 0.02863 + 0.30673e−2·C                   (max bound-water fraction, m³/m³)

Bound (b) and free/unbound (u) soil water, Debye relaxation plus ionic loss,
and the complex refractive index n*_i = n_i + i·k_i of each, the principal
square root of its complex permittivity::

    ε0b = 79.8 − 85.4e−2·C + 32.7e−4·C²,  τb = 1.062e−11 + 3.450e−14·C s,
    σb  = 0.3112 + 0.467e−2·C S/m,        ε0u = 100, τu = 8.5e−12 s,
    σu  = 0.3631 + 1.217e−2·C S/m,        ε∞ = 4.9
    ε_i = ε∞ + (ε0i − ε∞) / (1 + (2πfτi)²)
          + i·[(ε0i − ε∞)·2πfτi / (1 + (2πfτi)²) + σi / (2π·ε0·f)],  ε0 = 8.854e−12 F/m
    n*_i = √ε_i

Refractive mixing: n* is linear in mv on each side of mvt (a select here),
and the soil's permittivity is its square::

    mv ≤ mvt: n* = n*d + (n*b − 1)·mv
    mv > mvt: n* = n*d + (n*b − 1)·mvt + (n*u − 1)(mv − mvt)
    ε = ε' + iε'' = (n*)²

Because n* is affine in mv on each segment, ε'(mv) = Re((n*)²) is a
quadratic on each segment and inverts in closed form
(:func:`mv_from_eps_re`): the exact inverse that the retrieval uses until
the tabulated Stage 4 is wired, and the yardstick the table is measured by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ... import numpy as inp
from ...ops import complex as complex_from
from ...units import Quantity
from .units import in_unit, in_units

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
    ``dry`` is the dry soil's complex refractive index n*d = nd + i·kd,
    ``mvt`` the transition moisture (real), ``bound`` and ``free`` the
    complex slopes n*b − 1 (below mvt) and n*u − 1 (above)."""

    dry: object
    mvt: object
    bound: object
    free: object


def _as_complex(x):
    """A real ``x`` as the complex x + 0i (exactly: a complex value and a
    real one do not mix without an explicit conversion)."""
    return complex_from(x, inp.zeros_like(x))


@in_units(tau="s", sigma="S/m", freq_hz="Hz")
def water_permittivity(eps_static, tau, sigma, freq_hz):
    """Complex permittivity ε' + iε'' of one water phase: Debye relaxation
    (static ``eps_static``, relaxation time ``tau`` in s) plus the ionic
    loss of conductivity ``sigma`` (S/m) at ``freq_hz`` (Hz)."""
    omega_tau = (2.0 * math.pi * freq_hz) * tau
    denom = 1.0 + omega_tau * omega_tau
    eps_re = EPS_INF + (eps_static - EPS_INF) / denom
    eps_vacuum = Quantity(EPS_VACUUM, "F/m")
    eps_im = (eps_static - EPS_INF) * omega_tau / denom + sigma / (2.0 * math.pi * eps_vacuum
                                                                  * freq_hz)
    return complex_from(in_unit(eps_re, "1"), in_unit(eps_im, "1"))


def _water(eps_static, tau, sigma, freq_hz):
    """Complex refractive index n* = n + ik of one water phase: the
    principal square root of its permittivity (n > 0, k ≥ 0 for a lossy
    medium), in Mironov's closed form n = √((|ε| + ε')/2),
    k = √((|ε| − ε')/2), |ε| = √(ε'² + ε''²): for ε'' ≥ 0 the principal
    root, with a fraction of the operations of a general complex ``sqrt``
    (no branch cut or special values to handle)."""
    eps = water_permittivity(eps_static, tau, sigma, freq_hz)
    re, im = inp.real(eps), inp.imag(eps)
    modulus = inp.sqrt(re * re + im * im)
    return complex_from(inp.sqrt((modulus + re) * 0.5), inp.sqrt((modulus - re) * 0.5))


@in_units(clay="1", freq_hz="Hz")
def mironov_coefficients(clay, freq_hz: float = FREQ_HZ) -> MironovCoefficients:
    """Dry-soil, bound- and free-water parameters for clay fraction ``clay``
    (0–1) at ``freq_hz`` (Hz): ``mvt`` of ``clay``'s shape and dtype, the
    refractive indices complex (complex64 for float32, complex128 for
    float64)."""
    c = clay * 100.0
    nd = 1.634 - 0.539e-2 * c + 0.2748e-4 * c * c
    kd = 0.03952 - 0.04038e-2 * c
    mvt = Quantity(0.02863, "m^3/m^3") + Quantity(0.30673e-2, "m^3/m^3") * c
    eps0b = 79.8 - 85.4e-2 * c + 32.7e-4 * c * c
    tau_b = Quantity(1.062e-11, "s") + Quantity(3.450e-14, "s") * c
    sigma_b = Quantity(0.3112, "S/m") + Quantity(0.467e-2, "S/m") * c
    sigma_u = Quantity(0.3631, "S/m") + Quantity(1.217e-2, "S/m") * c
    bound = _water(eps0b, tau_b, sigma_b, freq_hz) - 1.0
    free = _water(EPS0_U, Quantity(TAU_U, "s"), sigma_u, freq_hz) - 1.0
    return MironovCoefficients(complex_from(in_unit(nd, "1"), in_unit(kd, "1")),
                               in_unit(mvt, "m^3/m^3"), bound, free)


def _at_transition(m: MironovCoefficients):
    """n*(mvt), the complex refractive index at the Mironov kink."""
    return m.dry + m.bound * _as_complex(m.mvt)


def refractive_index(mv, m: MironovCoefficients):
    """Complex refractive index n* = nm + i·km of moist soil: the mixing
    rule, branch-free on both sides of mvt (both sides are computed;
    ``where`` selects)."""
    low = m.dry + m.bound * _as_complex(mv)
    high = _at_transition(m) + m.free * _as_complex(mv - m.mvt)
    return inp.where(mv <= m.mvt, low, high)


def permittivity(mv, m: MironovCoefficients):
    """Complex relative permittivity ε = ε' + iε'' = (n*)² of soil at
    moisture ``mv``."""
    n = refractive_index(mv, m)
    return n * n


@in_units(mv="m^3/m^3", clay="1", freq_hz="Hz")
def mironov(mv, clay, freq_hz: float = FREQ_HZ):
    """Mironov (2009) permittivity of moist soil.

    ``mv``: volumetric soil moisture, m³/m³; ``clay``: clay mass fraction
    0–1; ``freq_hz``: frequency in Hz (a Python float). Returns the complex
    relative permittivity ε = ε' + iε'', dimensionless, ε'' ≥ 0 (loss):
    complex128 for float64 arrays, complex64 for float32.
    """
    return permittivity(in_unit(mv, "m^3/m^3"), mironov_coefficients(clay, freq_hz))


def _segment_inverse(eps_re, n0, n1):
    """The root x ≥ 0 of Re((n0 + n1·x)²) = ε' for complex n0 (the index at
    the segment's start) and n1 (its slope): a·x² + b·x + Re(n0²) = ε' with
    a = Re(n1²), b = 2·Re(n0·n1), solved in the cancellation-free form
    x = 2d / (b + √(b² + 4ad)), d = ε' − Re(n0²); ``eps_re`` must not lie
    below the segment's start (the caller clamps it)."""
    a = inp.real(n1 * n1)
    b = 2.0 * inp.real(n0 * n1)
    d = eps_re - inp.real(n0 * n0)
    return 2.0 * d / (b + inp.sqrt(b * b + 4.0 * a * d))


def eps_re_at_transition(m: MironovCoefficients):
    """ε'(mvt): the real permittivity at the Mironov kink."""
    n_t = _at_transition(m)
    return inp.real(n_t * n_t)


def mv_from_eps_re(eps_re, m: MironovCoefficients, mv_max=MV_MAX):
    """The soil moisture whose Mironov ε' is ``eps_re``: the exact inverse of
    the real part, clamped to [0, ``mv_max``] (m³/m³).

    ε'(mv) is increasing and a quadratic on each side of mvt, so each side
    inverts in closed form; the side is chosen by comparing with ε'(mvt).
    Each side's argument is clamped into its own domain so the side not
    selected stays finite.
    """
    n_t = _at_transition(m)
    eps_t = inp.real(n_t * n_t)
    eps_dry = inp.real(m.dry * m.dry)
    low = _segment_inverse(inp.clip(eps_re, eps_dry, eps_t), m.dry, m.bound)
    high = m.mvt + _segment_inverse(inp.maximum(eps_re, eps_t), n_t, m.free)
    return inp.clip(inp.where(eps_re <= eps_t, low, high), 0.0, mv_max)


def eps_im_of_eps_re(eps_re, m: MironovCoefficients, mv_max=MV_MAX):
    """κ(ε') = ε''(mv(ε')): the Mironov loss at the moisture that explains
    the real part ``eps_re`` (the direct form; a table lookup replaces it
    once tabulated data is available, see ``tables``)."""
    return inp.imag(permittivity(mv_from_eps_re(eps_re, m, mv_max), m))
