"""A run's input variables in the units its model takes: each variable's CF
``units`` attribute read (``isokernel.units.parse_cf``), a compatible unit
converted with a note line (°C → K, kg/m³ → g/cm³, a ratio → dB), an
incompatible or unreadable one refused with a one-line error naming the
input and the variable."""

from __future__ import annotations

from ..units import Quantity, UnitError, conversion_text, convert, describe, parse, parse_cf

# xarray (the optional io extra) is imported in the function that uses it


def in_model_units(array, name: str, variable: str, unit: str | None, model: str, echo):
    """``array`` (the data set's ``variable``, model input ``name``) in
    ``unit`` (pint's syntax; None: not a quantity, as it is), and the
    conversion as ``convert_block``'s ``(have, want)``, or None."""
    if unit is None:
        return array, None
    want = parse(unit)
    found = array.attrs.get("units")
    label = f"input {name!r}" + (f" (variable {variable!r})" if variable != name else "")
    if found is None:
        echo(f"note: {label} has no units attribute; read as {describe(want)}, the unit "
             f"{model} takes")
        return array, None
    try:
        have = parse_cf(str(found))
    except UnitError:
        raise ValueError(f"{label} has units {found!r}, which are not CF units isokernel "
                         f"reads; correct the attribute (e.g. units = \"{_cf(want)}\")"
                         ) from None
    if have == want:
        return array, None
    if not Quantity(1.0, have).is_compatible_with(want):
        raise ValueError(f"{label} is in {found!r} ({describe(have)}), which does not "
                         f"convert to {describe(want)}, the unit {model} takes; correct its "
                         f"units attribute or map another variable with --var "
                         f"{name}=VARIABLE")
    echo(f"note: {label} is in {found!r}; converted to {describe(want)} for {model} "
         f"({conversion_text(have, want)})")
    import xarray as xr
    # the units travel as text: a chunk may be converted in another process (a Dask worker)
    conversion = {"have": str(have), "want": str(want)}
    converted = xr.apply_ufunc(convert_block, array, dask="parallelized",
                               output_dtypes=[array.dtype], kwargs=conversion)
    converted = converted.assign_attrs({**array.attrs, "units": _cf(want)}).rename(array.name)
    return converted, conversion


def convert_block(block, have: str, want: str):
    """A block of values in ``have`` converted to ``want`` (pint's syntax),
    eagerly: the exact factor, the offset, or dB's formula."""
    return convert(Quantity(block, have), parse(want))


def _cf(unit) -> str:
    """A unit as a CF attribute would write it: ``K``, ``g cm-3``, ``1``."""
    text = format(unit, "~C") or "1"
    for a, b in (("**", ""), ("*", " "), ("/", " /"), ("°C", "degC")):
        text = text.replace(a, b)
    parts = text.split(" /")
    if len(parts) == 1:
        return parts[0]
    below = " ".join(f"{p.rstrip('0123456789')}-{p[len(p.rstrip('0123456789')):] or '1'}"
                     for p in " ".join(parts[1:]).split())
    return f"{parts[0]} {below}" if parts[0] != "1" else below


def units_record(array, unit: str | None) -> dict:
    """The manifest's units of an input: the file's attribute, the model's
    unit, and whether the values were converted."""
    if unit is None:
        return {}
    found = array.attrs.get("units")
    converted = False
    if found is not None:
        try:
            converted = parse_cf(str(found)) != parse(unit)
        except UnitError:
            converted = False
    return {"units": None if found is None else str(found), "model_units": _cf(parse(unit)),
            "converted": converted}
