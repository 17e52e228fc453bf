"""The soil-moisture models' units: every input, output and physical
constant, and :func:`in_units`, which declares the units of a model
function's arguments and results.

The flagship is written with quantities: each function that takes or gives a
dimensioned value is declared with :func:`in_units`, and its body computes on
``isokernel.units.Quantity`` values, so a unit slip inside it (a temperature
in °C added to one in K, a backscatter in dB used as a linear ratio, a
density in the wrong unit, a frequency in GHz, a dimensioned argument to
``exp``) is a ``UnitError`` naming the line while the model is recorded.
A bare argument is taken to be in the declared unit; a quantity is converted
to it (a multiply by an exact factor, an add for °C → K; nothing when it is
already in that unit). Called with bare values a function returns bare
values, with any quantity argument it returns quantities in the declared
units. Every
conversion between the model's own units has the factor 1, so the recording
is the one the same model in bare floats gives, node for node, and every
strategy runs it with the same bits (``tests/test_units_flagship.py``).

``INPUT_UNITS`` and ``OUTPUT_UNITS`` are also what ``isokernel run`` checks a
data set's CF ``units`` attributes against (``scenes.catalog``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ...units import Quantity, convert, parse

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


def in_units(returns: Any = None, **arguments: str) -> Callable[[Callable], Callable]:
    """Declare the units (pint's syntax) of a model function's ``arguments``
    by name, and of what it ``returns``: a unit, a tuple of units (one per
    result), a dict of output units by name, or None (returned as it is).

    The body then sees each declared argument as a quantity in its unit (a
    bare one taken to be in it, a quantity converted to it; an argument that
    is None stays None). If any argument was given as a quantity, the
    results are quantities in the declared units; else their bare
    magnitudes in those units."""
    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)
        missing = set(arguments) - set(signature.parameters)
        if missing:
            raise TypeError(f"in_units: {fn.__name__} has no argument {sorted(missing)}")

        @functools.wraps(fn)
        def model(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = any(type(v) is Quantity for v in bound.arguments.values())
            for name, text in arguments.items():
                unit = parse(text)  # pint loads at the first call, not at import
                value = bound.arguments[name]
                if value is None:
                    continue
                bound.arguments[name] = as_quantity(value, unit, f"{fn.__name__}({name})")
            return _results(fn(*bound.args, **bound.kwargs), returns, given, fn.__name__)
        return model
    return decorate


def as_quantity(value: Any, unit: Any, what: str = "as_quantity") -> Quantity:
    """``value`` as a quantity in ``unit``: a bare value is taken to be in it,
    a quantity converted to it."""
    unit = parse(unit) if isinstance(unit, str) else unit
    if type(value) is Quantity:
        return Quantity(convert(value, unit, what), unit)
    return Quantity(value, unit)


def in_unit(value: Any, unit: str, what: str = "in_unit") -> Any:
    """The bare magnitude of ``value`` in ``unit`` (a bare value is taken to
    be dimensionless: only a dimensionless ``unit`` accepts it)."""
    return convert(value if type(value) is Quantity else Quantity(value, "1"), parse(unit),
                   what)


def _results(out: Any, returns: Any, given: bool, name: str) -> Any:
    if returns is None:
        return out
    if isinstance(returns, tuple):
        return tuple(_result(o, r, given, name) for o, r in zip(out, returns, strict=True))
    if isinstance(returns, dict):
        return {k: _result(v, returns[k], given, name) for k, v in out.items()}
    return _result(out, returns, given, name)


def _result(value: Any, unit: str, given: bool, name: str) -> Any:
    magnitude = in_unit(value, unit, f"the result of {name}")
    return Quantity(magnitude, unit) if given else magnitude


def constants() -> dict[str, Quantity]:
    """The physical constants the models are written with, as quantities."""
    from .dielectric import FREQ_HZ, MV_MAX
    from .fresnel import THETA_DEG
    from .scene import PARTICLE_DENSITY
    return {
        "particle_density": Quantity(PARTICLE_DENSITY, "g/cm^3"),  # porosity = 1 − ρb/ρs
        "frequency": Quantity(FREQ_HZ, "Hz"),  # SMAP's L-band radiometer
        "incidence": Quantity(THETA_DEG, "degree"),
        "mv_max": Quantity(MV_MAX, "m^3/m^3"),  # the upper end of the Mironov tables
    }


def unit_of(name: str):
    """The pint unit of input or output ``name`` (None for the class index)."""
    text = INPUT_UNITS.get(name, OUTPUT_UNITS.get(name))
    return None if text is None else parse(text)


__all__ = ["INPUT_UNITS", "OUTPUT_UNITS", "as_quantity", "constants", "in_unit", "in_units",
           "unit_of"]
