"""A synthetic SMAP–NISAR scene, regenerated from (seed, pixel index).

Every field is a function of the pixel index alone (``scene_model``), written
with ``isokernel.numpy``: eagerly it is NumPy, under ``jit`` any strategy
computes it, and no scene needs to be stored. Pixels lie on a row-major grid
of ``width`` columns; x = (col + ½)/width and y = (row + ½)/height lie in
(0, 1).

Smooth fields are sums of J = 5 sinusoids s(x, y) = ½ + ½·Σ a_j sin(2π(k_j·x
+ l_j·y) + φ_j) / Σ a_j with integer wavenumbers k_j, l_j ∈ [−5, 5], random
phases φ_j and amplitudes a_j = 1/√j, all drawn from the counter-based RNG
(``rng``) on the host, so s ∈ [0, 1]. They give clay, bulk density, soil
moisture, NDVI (min, max, season) and temperature; land cover follows the
NDVI maximum plus a smooth perturbation. Observations are the forward
models of the truth plus Gaussian noise σ_TB = 1 K and σ_σ0 = 0.5 dB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import numpy as inp
from . import rng
from .dielectric import FREQ_HZ, mironov
from .forward import tau_omega, vegetation_water_content, water_cloud
from .landcover import CLASSES, class_parameters
from .units import OUTPUT_UNITS, in_units

COMPONENTS = 5
MAX_WAVENUMBER = 5
NOISE_TB_K = 1.0
NOISE_SIGMA0_DB = 0.5
PARTICLE_DENSITY = 2.65  # g/cm³, mineral soil: porosity = 1 − ρb/2.65

# field name -> (stream id, low, high) of the smooth field
_FIELDS = {
    "clay": (101, 0.05, 0.55),
    "bulk_density": (102, 1.1, 1.6),
    "wetness": (103, 0.0, 1.0),
    "ts": (104, 275.0, 315.0),
    "ndvi_min": (105, 0.05, 0.25),
    "ndvi_range": (106, 0.05, 1.0),
    "season": (107, 0.2, 1.0),
    "landcover_noise": (108, 0.0, 1.0),
}
_NOISE_STREAMS = (0, 2)  # Box–Muller pairs: (TB_H, TB_V) and (σ0, spare)


@dataclass(frozen=True)
class Grid:
    pixels: int
    width: int

    @property
    def height(self) -> int:
        return -(-self.pixels // self.width)

    @classmethod
    def square(cls, pixels: int) -> Grid:
        if pixels < 1:
            raise ValueError(f"a scene needs at least one pixel, got {pixels}")
        return cls(pixels, math.isqrt(pixels - 1) + 1)


def _components(stream: int, seed: int) -> list[tuple[float, int, int, float]]:
    """(amplitude, k, l, phase) of each sinusoid of one field, drawn on the
    host from the same RNG (counters 0..3·J−1 of the field's stream)."""
    draws = rng.uniform(np.arange(3 * COMPONENTS, dtype=np.int64), stream, seed)
    span = 2 * MAX_WAVENUMBER + 1
    out = []
    for j in range(COMPONENTS):
        k = int(draws[3 * j] * span) - MAX_WAVENUMBER
        l_ = int(draws[3 * j + 1] * span) - MAX_WAVENUMBER
        k = k if (k, l_) != (0, 0) else 1  # a constant is not a wave
        out.append((1.0 / math.sqrt(j + 1), k, l_, 2.0 * math.pi * float(draws[3 * j + 2])))
    return out


def smooth_field(x, y, stream: int, seed: int, low: float, high: float):
    """A smooth field in [low, high] over unit coordinates (x, y)."""
    parts = _components(stream, seed)
    total = sum(a for a, _, _, _ in parts)
    acc = None
    for a, k, l_, phase in parts:
        wave = (a / total) * inp.sin((2.0 * math.pi) * (k * x + l_ * y) + phase)
        acc = wave if acc is None else acc + wave
    return low + (high - low) * (0.5 + 0.5 * acc)


def coordinates(index, grid: Grid):
    """Unit coordinates (x, y) of each pixel index on ``grid``."""
    col = inp.astype(index % grid.width, inp.float64)
    row = inp.astype(index // grid.width, inp.float64)
    return (col + 0.5) / grid.width, (row + 0.5) / grid.height


def truth_fields(index, grid: Grid, seed: int) -> dict:
    """Clay, bulk density, mv, Ts, NDVI (now, min, max) and land cover."""
    x, y = coordinates(index, grid)
    f = {name: smooth_field(x, y, stream, seed, lo, hi)
         for name, (stream, lo, hi) in _FIELDS.items()}
    porosity = 1.0 - f["bulk_density"] / PARTICLE_DENSITY
    ndvi_max = f["ndvi_min"] + (0.9 - f["ndvi_min"]) * f["ndvi_range"]
    greenness = 0.75 * (ndvi_max - 0.1) / 0.8 + 0.25 * f["landcover_noise"]
    greenness = inp.clip(0.5 + 1.6 * (greenness - 0.5), 0.0, 0.99999)
    return {
        "clay": f["clay"], "bulk_density": f["bulk_density"], "ts": f["ts"],
        "mv": 0.02 + f["wetness"] * (0.9 * porosity - 0.02),
        "ndvi": f["ndvi_min"] + f["season"] * (ndvi_max - f["ndvi_min"]),
        "ndvi_max": ndvi_max, "ndvi_min": f["ndvi_min"],
        "landcover": inp.astype(inp.floor(greenness * len(CLASSES)), inp.int32),
    }


@in_units({name: OUTPUT_UNITS[name] for name in ("tbh", "tbv", "sigma0_hh", "vwc", "eps_re",
                                                 "eps_im")},
          mv="m^3/m^3", clay="1", ts="K", ndvi="1", ndvi_max="1", ndvi_min="1")
def observe(mv, clay, ts, ndvi, ndvi_max, ndvi_min, landcover) -> dict:
    """The noise-free observations of a pixel: TB_H and TB_V (K, tau-omega
    over the Mironov permittivity) and σ0_HH (dB, Water Cloud Model), with
    the VWC (kg/m²) and the real and imaginary parts ε', ε'' of the complex
    permittivity they came from (real fields, as a data set stores them)."""
    p = class_parameters(landcover, ts)
    vwc = vegetation_water_content(ndvi, ndvi_max, ndvi_min, p["stem_factor"])
    eps = mironov(mv, clay, FREQ_HZ)
    tbh, tbv = tau_omega(eps, vwc, p["b"], p["omega"], p["h"], ts)
    sigma0 = water_cloud(mv, ndvi, p["wcm_a"], p["wcm_b"], p["wcm_c"], p["wcm_d"])
    return {"tbh": tbh, "tbv": tbv, "sigma0_hh": sigma0, "vwc": vwc, "eps_re": inp.real(eps),
            "eps_im": inp.imag(eps)}


def scene_model(index, grid: Grid, seed: int = 0, noise: bool = True) -> dict:
    """Truth and observations (TB_H, TB_V in K; σ0_HH in dB) of every pixel
    in ``index`` (int64). ``grid``, ``seed`` and ``noise`` are static."""
    t = truth_fields(index, grid, seed)
    obs = observe(t["mv"], t["clay"], t["ts"], t["ndvi"], t["ndvi_max"], t["ndvi_min"],
                  t["landcover"])
    if noise:
        n_h, n_v = rng.normal_pair(index, _NOISE_STREAMS[0], seed)
        n_s, _ = rng.normal_pair(index, _NOISE_STREAMS[1], seed)
        obs["tbh"] = obs["tbh"] + NOISE_TB_K * n_h
        obs["tbv"] = obs["tbv"] + NOISE_TB_K * n_v
        obs["sigma0_hh"] = obs["sigma0_hh"] + NOISE_SIGMA0_DB * n_s
    return t | obs


def generate_scene(pixels: int, seed: int = 0, noise: bool = True, jitted=None) -> dict:
    """Every field of a ``pixels``-pixel scene as float64 NumPy arrays
    (``landcover`` int32). Evaluated eagerly (the NumPy meaning of every
    op), or by ``jitted``, a ``jit``-like wrapper, to run on a strategy."""
    grid = Grid.square(pixels)
    index = np.arange(pixels, dtype=np.int64)

    def model(index):
        return scene_model(index, grid, seed, noise)
    fn = model if jitted is None else jitted(model)
    return dict(fn(index))
