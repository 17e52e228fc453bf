"""Zero-order tau-omega forward model of L-band brightness temperature.

The SMAP L2 passive baseline (O'Neill et al., SMAP L2/3 Radiometer Soil
Moisture ATBD), with a real permittivity from the Dobson-style quadratic fit
eps = 3.1 + 17.36 mv + 63.12 mv² (mv in m³/m³):

    r*_H = ((cosθ − √(ε − sin²θ)) / (cosθ + √(ε − sin²θ)))²
    r*_V = ((ε cosθ − √(ε − sin²θ)) / (ε cosθ + √(ε − sin²θ)))²
    r_p  = r*_p · exp(−h cos²θ)                    (roughness)
    γ    = exp(−b · VWC / cosθ)                    (vegetation transmissivity)
    TB_p = Ts (1 − r_p) γ + Ts (1 − ω)(1 − γ)(1 + r_p γ)

θ = 40°, b = 0.11, ω = 0.05, h = 0.13; VWC in kg/m², Ts in K, TB in K.
"""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as inp

THETA_DEG = 40.0
B, OMEGA, H = 0.11, 0.05, 0.13


def permittivity(mv):
    return 3.1 + 17.36 * mv + 63.12 * mv * mv


def tau_omega(mv, vwc, ts):
    """(TB_H, TB_V) in kelvin for soil moisture ``mv``, vegetation water
    content ``vwc`` and effective temperature ``ts``; arrays of one dtype."""
    cos_t = math.cos(math.radians(THETA_DEG))
    sin2_t = math.sin(math.radians(THETA_DEG)) ** 2
    eps = permittivity(mv)
    root = inp.sqrt(eps - sin2_t)
    r_h = inp.square((cos_t - root) / (cos_t + root))
    r_v = inp.square((eps * cos_t - root) / (eps * cos_t + root))
    roughness = math.exp(-H * cos_t * cos_t)
    gamma = inp.exp(-B * vwc / cos_t)
    return tuple(_brightness(r * roughness, gamma, ts) for r in (r_h, r_v))


def _brightness(r, gamma, ts):
    return ts * (1.0 - r) * gamma + ts * (1.0 - OMEGA) * (1.0 - gamma) * (1.0 + r * gamma)


def synthetic_inputs(pixels: int, dtype=np.float64, seed: int = 0):
    """Plausible (mv, vwc, ts) for ``pixels`` pixels."""
    rng = np.random.default_rng(seed)
    mv = rng.uniform(0.02, 0.5, pixels).astype(dtype)
    vwc = rng.uniform(0.0, 6.0, pixels).astype(dtype)
    ts = rng.uniform(270.0, 320.0, pixels).astype(dtype)
    return mv, vwc, ts
