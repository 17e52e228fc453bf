"""Fresnel reflectivities of a smooth air–soil interface, and their closed-
form inverses for a real permittivity.

Reflectivities (Ulaby, Moore and Fung, Microwave Remote Sensing vol. I,
1981, §2-8; SMAP L2/3 Radiometer Soil Moisture ATBD, O'Neill et al.), θ the
incidence angle, ε = ε' + iε'' the relative permittivity, s = √(ε − sin²θ)
(principal branch)::

    r*_H = |(cosθ − s) / (cosθ + s)|²
    r*_V = |(ε·cosθ − s) / (ε·cosθ + s)|²

computed as |numerator|² / |denominator|² (the modulus of a quotient is the
quotient of the moduli), with complex values: ``inp.sqrt`` of a complex
value is the principal root, and |z|² is Re(z)² + Im(z)² (no square root,
no hypot).

Inverses for real ε ≥ 1 at θ < 45° (each reflection amplitude ρ = √r* is
then real and ≥ 0):

- H: s = cosθ·(1 + ρ)/(1 − ρ), ε = sin²θ + s².
- V: with q = (1 − ρ)/(1 + ρ) = s/(ε cosθ), squaring gives
  q²cos²θ·ε² − ε + sin²θ = 0, whose larger root is
  ε = (1 + √(1 − 4q²cos²θ sin²θ)) / (2q²cos²θ). The discriminant is
  ≥ cos²2θ > 0, and at ρ = 0 the root is ε = 1 (the smaller root is the
  Brewster branch ε = tan²θ < 1).
"""

from __future__ import annotations

import math

from ... import numpy as inp

THETA_DEG = 40.0  # SMAP radiometer and NISAR-like look angle used by the retrieval


def _angle(theta_deg: float) -> tuple[float, float]:
    """(cosθ, sin²θ) as Python floats: the angle is a static parameter."""
    theta = math.radians(theta_deg)
    return math.cos(theta), math.sin(theta) ** 2


def _abs2(z):
    """|z|² = Re(z)² + Im(z)² of a complex ``z``, real."""
    re, im = inp.real(z), inp.imag(z)
    return re * re + im * im


def fresnel(eps, theta_deg: float = THETA_DEG):
    """Smooth-surface reflectivities (r_H, r_V), dimensionless in [0, 1],
    for the complex relative permittivity ``eps`` = ε' + iε'' (complex64 or
    complex128) at incidence ``theta_deg`` degrees (a static Python float)."""
    cos_t, sin2_t = _angle(theta_deg)
    s = inp.sqrt(eps - sin2_t)
    r_h = _abs2(cos_t - s) / _abs2(cos_t + s)
    e = eps * cos_t
    return r_h, _abs2(e - s) / _abs2(e + s)


def fresnel_real(eps_re, theta_deg: float = THETA_DEG):
    """(r_H, r_V) for a real permittivity ε' ≥ sin²θ: :func:`fresnel` of
    ε' + 0i written with real values only (the same operations on the real
    parts, so the results are the same bits)."""
    cos_t, sin2_t = _angle(theta_deg)
    s = inp.sqrt(eps_re - sin2_t)
    r_h = _sq(cos_t - s) / _sq(cos_t + s)
    e = eps_re * cos_t
    return r_h, _sq(e - s) / _sq(e + s)


def _sq(x):
    return x * x


def inverse_fresnel_h(r_h, theta_deg: float = THETA_DEG):
    """The real ε ≥ 1 whose smooth H reflectivity is ``r_h`` (0 ≤ r_h < 1)."""
    cos_t, sin2_t = _angle(theta_deg)
    rho = inp.sqrt(r_h)
    s = cos_t * (1.0 + rho) / (1.0 - rho)
    return sin2_t + s * s


def inverse_fresnel_v(r_v, theta_deg: float = THETA_DEG):
    """The real ε ≥ 1 whose smooth V reflectivity is ``r_v`` (0 ≤ r_v < 1,
    θ < 45°); see the module docstring for the derivation."""
    cos_t, sin2_t = _angle(theta_deg)
    if not cos_t * cos_t > sin2_t:
        raise ValueError(f"inverse_fresnel_v: θ = {theta_deg}° must be below 45°, where "
                         f"r_V(ε) is increasing for ε ≥ 1")
    rho = inp.sqrt(r_v)
    q = (1.0 - rho) / (1.0 + rho)
    a = q * q * (cos_t * cos_t)
    return (1.0 + inp.sqrt(1.0 - 4.0 * sin2_t * a)) / (2.0 * a)


INVERSES = {"h": inverse_fresnel_h, "v": inverse_fresnel_v}
