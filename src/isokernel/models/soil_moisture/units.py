"""The soil-moisture models' units: every input, output and physical
constant, and the models with quantities at their boundary.

``retrieve``, ``retrieve_refined`` and ``observe`` here take
``isokernel.units.Quantity`` arguments (a bare array is taken to be in the
unit the model works in), convert each to that unit — a multiply by an exact
factor (kg/m³ → g/cm³ is 0.001), an add for °C → K, nothing when the unit is
already the model's — run the flagship unchanged on the magnitudes and
return its outputs as quantities. With inputs in the model's units the
recording is the flagship's own, node for node, and the outputs its bits on
every strategy (``tests/test_units_flagship.py`` measures both).

``INPUT_UNITS`` and ``OUTPUT_UNITS`` are what ``isokernel run`` checks a
data set's CF ``units`` attributes against (``scenes.catalog``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...units import Quantity, parse
from .dielectric import FREQ_HZ, MV_MAX
from .fresnel import THETA_DEG
from .retrieval import REFINED_INPUTS, RETRIEVAL_INPUTS
from .retrieval import retrieve as _retrieve
from .retrieval import retrieve_refined as _retrieve_refined
from .scene import PARTICLE_DENSITY
from .scene import observe as _observe

INPUT_UNITS: dict[str, str | None] = {
    "tbv": "K",  # brightness temperatures
    "tbh": "K",
    "sigma0_hh": "dB",  # backscatter coefficient
    "ndvi": "1",
    "ndvi_max": "1",
    "ndvi_min": "1",
    "ts": "K",  # effective soil (= canopy) temperature
    "clay": "1",  # clay mass fraction
    "bulk_density": "g/cm^3",
    "mv": "m^3/m^3",  # volumetric soil moisture
    "landcover": None,  # a class index, not a quantity
}
"""The unit each model input is computed in (pint's syntax)."""

OUTPUT_UNITS: dict[str, str] = {
    "mv": "m^3/m^3",
    "mv_stage4": "m^3/m^3",
    "vwc": "kg/m^2",  # vegetation water content
    "eps_re": "1",  # relative permittivity, real and imaginary parts
    "eps_im": "1",
    "tbh": "K",
    "tbv": "K",
    "sigma0_hh": "dB",
}
"""The unit of each model output."""

@functools.lru_cache(maxsize=1)
def constants() -> dict[str, Quantity]:
    """The physical constants the models are written with, as quantities
    (built on first use: pint loads then, not when ``isokernel run`` starts)."""
    return {
        "particle_density": Quantity(PARTICLE_DENSITY, "g/cm^3"),  # porosity = 1 − ρb/ρs
        "frequency": Quantity(FREQ_HZ, "Hz"),  # SMAP's L-band radiometer
        "incidence": Quantity(THETA_DEG, "degree"),
        "mv_max": Quantity(MV_MAX, "m^3/m^3"),  # the upper end of the Mironov tables
    }


def _in_model_units(name: str, value: Any) -> Any:
    unit = INPUT_UNITS[name]
    if not isinstance(value, Quantity):
        return value
    if unit is None:
        raise TypeError(f"input {name!r} is a class index, not a quantity; pass the array")
    return value.m_as(unit)


def _with_units(fn: Callable[..., dict], names: tuple[str, ...]) -> Callable[..., dict]:
    @functools.wraps(fn)
    def model(*args: Any, **kwargs: Any) -> dict:
        values = [_in_model_units(n, a) for n, a in zip(names, args)]
        dynamic = {k: _in_model_units(k, v) if k in INPUT_UNITS else v
                   for k, v in kwargs.items()}
        out = fn(*values, *args[len(names):], **dynamic)
        return {k: Quantity(v, OUTPUT_UNITS[k]) for k, v in out.items()}
    model.__doc__ = (f"``{fn.__name__}`` with quantities: each input converted to the unit "
                     f"of ``INPUT_UNITS``, each output in the unit of ``OUTPUT_UNITS``.")
    return model


retrieve = _with_units(_retrieve, RETRIEVAL_INPUTS)
retrieve_refined = _with_units(_retrieve_refined, REFINED_INPUTS)
observe = _with_units(_observe, ("mv", "clay", "ts", "ndvi", "ndvi_max", "ndvi_min",
                                 "landcover"))


def unit_of(name: str):
    """The pint unit of input or output ``name`` (None for the class index)."""
    text = INPUT_UNITS.get(name, OUTPUT_UNITS.get(name))
    return None if text is None else parse(text)


__all__ = ["INPUT_UNITS", "OUTPUT_UNITS", "observe", "retrieve",
           "retrieve_refined", "constants", "unit_of"]
