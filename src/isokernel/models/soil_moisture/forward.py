"""Forward models: vegetation water content, the zero-order tau-omega
radiative transfer model (passive) and the Water Cloud Model (active).

Sources: SMAP L2/3 Radiometer Soil Moisture ATBD (O'Neill et al., JPL D-66480)
for VWC from NDVI, the tau-omega model and the roughness correction (after
Mo et al., JGR 87, 1982, and Choudhury et al., JGR 84, 1979); Attema and
Ulaby, Radio Science 13(2), 1978, for the Water Cloud Model.
"""

from __future__ import annotations

import math

from ... import numpy as inp
from ...units import Quantity
from .fresnel import THETA_DEG, fresnel
from .units import in_units


@in_units("kg/m^2", ndvi="1", ndvi_max="1", ndvi_min="1", stem_factor="kg/m^2")
def vegetation_water_content(ndvi, ndvi_max, ndvi_min, stem_factor):
    """VWC in kg/m² from NDVI (SMAP ATBD)::

        VWC = 1.9134·NDVI² − 0.3215·NDVI + stem_factor·(NDVImax − NDVImin)/(1 − NDVImin)

    foliage (the quadratic) plus stems (``stem_factor`` in kg/m², per land
    cover, times the normalised seasonal NDVI range). NDVI is dimensionless.
    The result is clamped at 0: the foliage quadratic dips below zero for
    NDVI < 0.168.
    """
    foliage = Quantity(1.9134, "kg/m^2") * ndvi * ndvi - Quantity(0.3215, "kg/m^2") * ndvi
    return inp.maximum(foliage + stem_factor * (ndvi_max - ndvi_min) / (1.0 - ndvi_min), 0.0)


@in_units("1", b="m^2/kg", vwc="kg/m^2")
def transmissivity(b, vwc, theta_deg: float = THETA_DEG):
    """One-way vegetation transmissivity γ = exp(−b·VWC / cosθ), with the
    optical depth τ = b·VWC (b in m²/kg)."""
    return inp.exp(-b * vwc / math.cos(math.radians(theta_deg)))


def roughness_factor(h, theta_deg: float = THETA_DEG):
    """exp(−h·cos²θ): rough reflectivity r_p = r*_p · exp(−h·cos²θ)."""
    cos_t = math.cos(math.radians(theta_deg))
    return inp.exp(-h * (cos_t * cos_t))


@in_units("K", ts="K", tc="K")
def brightness_temperature(r, gamma, omega, ts, tc=None):
    """Zero-order tau-omega brightness temperature in K::

        TB = Ts·(1 − r)·γ + Tc·(1 − ω)·(1 − γ)·(1 + r·γ)

    ``r`` rough-surface reflectivity, ``gamma`` transmissivity, ``omega``
    single-scattering albedo, ``ts``/``tc`` soil/canopy temperatures in K
    (Tc = Ts when ``tc`` is None, the SMAP baseline)."""
    tc = ts if tc is None else tc
    return ts * (1.0 - r) * gamma + tc * (1.0 - omega) * (1.0 - gamma) * (1.0 + r * gamma)


@in_units(("K", "K"), vwc="kg/m^2", b="m^2/kg", ts="K")
def tau_omega(eps, vwc, b, omega, h, ts, theta_deg: float = THETA_DEG):
    """(TB_H, TB_V) in K from the complex soil permittivity ``eps``, VWC
    (kg/m²), the vegetation parameters b (m²/kg), ω and the roughness h, and
    Ts = Tc."""
    r_h, r_v = fresnel(eps, theta_deg)
    rough = roughness_factor(h, theta_deg)
    gamma = transmissivity(b, vwc, theta_deg)
    return (brightness_temperature(r_h * rough, gamma, omega, ts),
            brightness_temperature(r_v * rough, gamma, omega, ts))


@in_units("1", db="dB")
def db_to_linear(db):
    """10^(dB/10), as exp(dB·ln10/10)."""
    return db.to("1")


@in_units("dB", x="1")
def linear_to_db(x):
    """10·log10(x)."""
    return x.to("dB")


@in_units("dB", mv="m^3/m^3", ndvi="1", a="1", b="1", c="dB", d="dB")
def water_cloud(mv, ndvi, a, b, c, d, theta_deg: float = THETA_DEG):
    """Water Cloud Model backscatter σ0 in dB (Attema and Ulaby 1978)::

        σ0 = A·V·cosθ·(1 − T²) + T²·σ0_soil,  T² = exp(−2·B·V / cosθ),
        σ0_soil[dB] = C + D·mv,  V = NDVI

    summed in linear units (m²/m²). ``a`` linear, ``b`` per NDVI unit,
    ``c`` dB, ``d`` dB per m³/m³. T² is the two-way canopy attenuation, the
    scaled-product exponential exp(c·x·y) of the strategies chapter."""
    cos_t = math.cos(math.radians(theta_deg))
    two_way = inp.exp(-2.0 * b * ndvi / cos_t)
    soil = db_to_linear(c + d * mv)
    return linear_to_db(a * ndvi * cos_t * (1.0 - two_way) + two_way * soil)
