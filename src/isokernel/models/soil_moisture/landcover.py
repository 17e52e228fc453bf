"""Land-cover classes and their per-class parameters.

The values are representative of the per-IGBP-class tables of the SMAP
L2/3 Radiometer Soil Moisture ATBD (b, ω, h, stem factor) and of L-band
HH Water Cloud Model fits in the literature (A, B, C, D); they are a
synthetic scene's choice, not an operational ancillary data set.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import numpy as inp
from ...units import magnitude_of


@dataclass(frozen=True)
class LandCover:
    name: str
    b: float  # vegetation b-parameter, m²/kg (τ = b·VWC)
    omega: float  # single-scattering albedo
    h: float  # roughness parameter
    stem_factor: float  # kg/m²
    wcm_a: float  # Water Cloud Model A, linear units
    wcm_b: float  # Water Cloud Model B, per NDVI unit
    wcm_c: float  # bare-soil backscatter at mv = 0, dB
    wcm_d: float  # bare-soil sensitivity, dB per m³/m³


CLASSES = (
    LandCover("barren", 0.00, 0.00, 0.150, 0.0, 0.0010, 0.10, -19.0, 28.0),
    LandCover("grassland", 0.10, 0.05, 0.156, 0.0, 0.0120, 0.30, -17.0, 26.0),
    LandCover("cropland", 0.11, 0.065, 0.108, 3.5, 0.0200, 0.40, -16.0, 25.0),
    LandCover("shrubland", 0.11, 0.05, 0.110, 1.0, 0.0150, 0.35, -16.5, 24.0),
    LandCover("savanna", 0.12, 0.08, 0.130, 6.0, 0.0400, 0.55, -15.0, 22.0),
    LandCover("forest", 0.10, 0.12, 0.160, 15.96, 0.0800, 0.80, -13.0, 18.0),
)

FIELDS = ("b", "omega", "h", "stem_factor", "wcm_a", "wcm_b", "wcm_c", "wcm_d")


def per_class(landcover, field: str, like):
    """The ``field`` of each pixel's class: a chain of selects over the
    class index (no gather: the vocabulary is branch-free and index-free).
    ``like`` (an array, or a quantity: its magnitude) gives the float dtype
    and shape of the result, a bare array in the unit of the table's
    comment."""
    values = [getattr(c, field) for c in CLASSES]
    out = inp.full_like(magnitude_of(like), values[-1])
    for index in range(len(values) - 2, -1, -1):
        out = inp.where(landcover == index, values[index], out)
    return out


def class_parameters(landcover, like) -> dict:
    """Every per-class parameter of every pixel, by field name."""
    return {field: per_class(landcover, field, like) for field in FIELDS}
