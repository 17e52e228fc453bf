"""The unit registry and unit arithmetic at record time.

Units are pint ``Unit`` objects of one registry (``registry()``, pint's
default definitions), parsed from strings once and cached. Everything here
runs in Python while a model is recorded and nothing of it is recorded: the
graph sees only the factors and offsets a conversion multiplies and adds.

Conversion factors are exact: each unit name's factor to its root unit is
read as a fraction (a second registry with ``non_int_type=Fraction``), the
products and quotients are taken as fractions and rounded to a float once, so
g/cm³ → kg/m³ is 1000.0 (pint's float path gives 999.9999999999999) and
degree → radian is ``math.pi / 180``, the constants a model in bare floats
would write.

pint is imported on the first use of a unit (it takes a second), not when
isokernel is.
"""

from __future__ import annotations

import functools
import re
import threading
from fractions import Fraction
from typing import Any

from ..ir.errors import IsokernelError
from ..ir.source import user_where


class UnitError(IsokernelError, TypeError):
    """Operands whose units do not fit the operation: different dimensions
    in an addition or comparison, a dimensioned argument to ``exp``, an
    offset (°C) or logarithmic (dB) unit where it has no meaning, an
    unknown unit string. The message names the operation, the units, the
    user's line and the fix."""


_LOCK = threading.Lock()
_REGISTRIES: dict[str, Any] = {}


def registry():
    """The ``pint.UnitRegistry`` every quantity's unit belongs to."""
    found = _REGISTRIES.get("float")
    if found is None:
        with _LOCK:
            if "float" not in _REGISTRIES:
                import pint
                _REGISTRIES["float"] = pint.UnitRegistry()
            found = _REGISTRIES["float"]
    return found


def _exact():
    """A registry of the same definitions with fractions for factors."""
    found = _REGISTRIES.get("exact")
    if found is None:
        with _LOCK:
            if "exact" not in _REGISTRIES:
                import pint
                _REGISTRIES["exact"] = pint.UnitRegistry(non_int_type=Fraction)
            found = _REGISTRIES["exact"]
    return found


# --- parsing -----------------------------------------------------------------------------------

def parse(units) -> Any:
    """A unit of ``registry()`` from a string (pint's syntax: ``"K"``,
    ``"g/cm**3"``, ``"m^3/m^3"``, ``"degC"``, ``"dB"``), a unit of this or
    another pint registry, or None (dimensionless)."""
    if units is None:
        return _parse_text("dimensionless")
    if isinstance(units, str):
        return _parse_text(units)
    reg = registry()
    if isinstance(units, reg.Unit):
        return units
    if type(units).__module__.startswith("pint"):  # a unit of another registry
        return _parse_text(str(units))
    raise UnitError(f"Quantity at {user_where()}: units must be a string such as 'K' or "
                    f"'kg/m**3' (or a pint unit), got a {type(units).__name__}")


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str):
    reg = registry()
    try:
        return reg.Unit(text)
    except Exception as err:  # pint's UndefinedUnitError, its parser's errors
        raise UnitError(f"unit {text!r} at {user_where()}: pint does not know it "
                        f"({type(err).__name__}: {err}); write it in pint's syntax, e.g. "
                        f"'kg/m**3', 'degC', 'GHz', or read a file's CF units with "
                        f"isokernel.units.parse_cf") from None


# CF (UDUNITS) spellings pint does not read, lower-cased: whole strings, then unit names
_CF_WHOLE = {
    "": "dimensionless", "1": "dimensionless", "-": "dimensionless", "none": "dimensionless",
    "unitless": "dimensionless", "fraction": "dimensionless", "%": "percent",
}
_CF_NAMES = {
    "degc": "degree_Celsius", "deg_c": "degree_Celsius", "degree_c": "degree_Celsius",
    "degrees_c": "degree_Celsius", "degree_celsius": "degree_Celsius",
    "degrees_celsius": "degree_Celsius", "celsius": "degree_Celsius",
    "degk": "kelvin", "deg_k": "kelvin", "degree_k": "kelvin", "degrees_k": "kelvin",
    "degree_kelvin": "kelvin", "degrees_kelvin": "kelvin",
    "degf": "degree_Fahrenheit", "degree_f": "degree_Fahrenheit",
    "degrees_f": "degree_Fahrenheit", "degree_fahrenheit": "degree_Fahrenheit",
    "degrees_fahrenheit": "degree_Fahrenheit",
    "degrees_north": "degree", "degree_north": "degree", "degrees_n": "degree",
    "degree_n": "degree", "degrees_east": "degree", "degree_east": "degree",
    "degrees_e": "degree", "degree_e": "degree", "degrees": "degree", "%": "percent",
}
_SEPARATORS = re.compile(r"([\s*/()^]+|\.(?=[A-Za-z_(]))")
_EXPONENT = re.compile(r"(?<=[A-Za-z_])(-?\d+)$")


def cf_to_pint(text: str) -> str:
    """A CF (UDUNITS) unit string in pint's syntax: ``"kg m-3"`` →
    ``"kg*m**-3"``, ``"m3 m-3"`` → ``"m**3*m**-3"``, ``"degrees_Celsius"``
    → ``"degree_Celsius"``, ``"1"`` → ``"dimensionless"``."""
    stripped = text.strip()
    whole = _CF_WHOLE.get(stripped.lower())
    if whole is not None:
        return whole
    out = []
    for i, part in enumerate(_SEPARATORS.split(stripped)):
        if i % 2:  # a separator: blanks and UDUNITS' "." multiply
            blank = not part.strip(" \t.")
            out.append("*" if blank else part.replace(" ", ""))
        else:
            name = _CF_NAMES.get(part.lower(), part)
            out.append(_EXPONENT.sub(r"**\1", name))
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def parse_cf(text: str):
    """The unit of a CF ``units`` attribute (UDUNITS spellings: ``"K"``,
    ``"degC"``, ``"degrees_Celsius"``, ``"kg m-3"``, ``"g cm-3"``,
    ``"m3 m-3"``, ``"GHz"``, ``"dB"``, ``"1"``)."""
    try:
        return _parse_text(cf_to_pint(text))
    except UnitError:
        raise UnitError(f"CF units {text!r}: not a unit isokernel.units reads (read as "
                        f"{cf_to_pint(text)!r} in pint's syntax); write UDUNITS such as "
                        f"'kg m-3', 'degC', 'm3 m-3' or '1'") from None


# --- what kind of unit --------------------------------------------------------------------------

def _items(unit) -> tuple[tuple[str, Any], ...]:
    """(name, exponent) of each unit name in ``unit``."""
    return tuple(unit._units.items())  # pint keeps them in a UnitsContainer


@functools.lru_cache(maxsize=1024)
def _definition_kind(name: str) -> str:
    definition = registry()._units[name]
    if getattr(definition, "is_logarithmic", False):
        return "log"
    return "multiplicative" if definition.is_multiplicative else "offset"


@functools.lru_cache(maxsize=4096)
def kind(unit) -> str:
    """``"offset"`` (°C, °F: a temperature scale with its own zero),
    ``"log"`` (dB, Np: a logarithmic unit, alone), ``"mixed-log"`` (a
    logarithmic unit in a product) or ``"linear"``."""
    items = _items(unit)
    kinds = {_definition_kind(name) for name, _ in items}
    if "log" in kinds:
        return "log" if len(items) == 1 and items[0][1] == 1 else "mixed-log"
    return "offset" if "offset" in kinds else "linear"


@functools.lru_cache(maxsize=4096)
def dimensionality(unit):
    return unit.dimensionality


@functools.lru_cache(maxsize=4096)
def is_dimensionless(unit) -> bool:
    """Dimensionless and linear (radian, percent and m³/m³ are; dB is not)."""
    return kind(unit) == "linear" and not dimensionality(unit)


@functools.lru_cache(maxsize=4096)
def show(unit) -> str:
    """The unit for a message or a report: ``K``, ``kg/m³``, ``°C``,
    ``dimensionless``."""
    return format(unit, "~P") or "dimensionless"


@functools.lru_cache(maxsize=4096)
def code(unit) -> str:
    """The unit as a string to write in code: ``'kg/m**3'``."""
    return repr(format(unit, "~C") or "dimensionless")


def describe(unit) -> str:
    """``K ([temperature])``: the unit and its dimension."""
    dims, shown = dimensionality(unit), show(unit)
    if dims:
        return f"{shown} ({dims})"
    return shown if shown == "dimensionless" else f"{shown} (dimensionless)"


# --- unit arithmetic (cached: each pair is worked out once) -------------------------------------

@functools.lru_cache(maxsize=4096)
def product(a, b):
    return a * b


@functools.lru_cache(maxsize=4096)
def quotient(a, b):
    return a / b


@functools.lru_cache(maxsize=4096)
def power(a, exponent):
    return a ** exponent


DIMENSIONLESS_NAME = "dimensionless"
RADIAN_NAME = "radian"


def dimensionless():
    return _parse_text(DIMENSIONLESS_NAME)


def radian():
    return _parse_text(RADIAN_NAME)


# --- conversions -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def _name_affine(name: str) -> tuple[Fraction, Fraction]:
    """(scale, offset) of one unit name to its root unit, exactly:
    root = value·scale + offset (offset 0 but for °C and °F)."""
    exact = _exact()
    scale, root = exact.get_root_units(name)
    if _definition_kind(name) == "offset":
        zero = exact.convert(Fraction(0), name, root)
        one = exact.convert(Fraction(1), name, root)
        return Fraction(one - zero), Fraction(zero)
    return Fraction(scale), Fraction(0)


def _scale(unit):
    """The factor from ``unit`` to its root units (a fraction where the
    exponents are integers)."""
    total: Any = Fraction(1)
    for name, exponent in _items(unit):
        factor = _name_affine(name)[0]
        if float(exponent).is_integer():
            total = total * factor ** int(exponent)
        else:
            total = float(total) * float(factor) ** float(exponent)
    return total


@functools.lru_cache(maxsize=4096)
def affine(src, dst) -> tuple[float, float]:
    """(factor, offset): a value in ``src`` is ``value * factor + offset``
    in ``dst``; both exact fractions rounded once. The units have one
    dimension and are linear or offset (a lone °C or °F)."""
    if kind(src) == "offset" or kind(dst) == "offset":
        (name_s, exp_s), = _items(src) if kind(src) == "offset" else ((None, 1),)
        (name_d, exp_d), = _items(dst) if kind(dst) == "offset" else ((None, 1),)
        a_s, b_s = _name_affine(name_s) if name_s else (_scale(src), Fraction(0))
        a_d, b_d = _name_affine(name_d) if name_d else (_scale(dst), Fraction(0))
        factor = Fraction(a_s) / Fraction(a_d)
        return float(factor), float((b_s - b_d) / Fraction(a_d))
    return float(_scale(src) / _scale(dst)) if src != dst else 1.0, 0.0
