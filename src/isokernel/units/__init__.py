"""Units: quantities whose dimensions are checked while a model is recorded
and erased before anything runs.

``Quantity(x, "K")`` is an array (NumPy, a Python scalar, or a traced value
inside ``jit`` and the transforms) with a pint unit. Arithmetic and the
``isokernel.numpy`` functions check dimensions and work out the result's
unit in Python at record time; a conversion is a multiply by a Python float
(and an add for °C), which folds into a constant on a constant. The recorded
graph of a model written with quantities is the graph of the same model in
bare floats in consistent units, node for node, so every strategy runs it
with the same bits and no overhead. A quantity is a pytree node (the
magnitude its leaf, the unit static): ``jit`` takes and returns quantities
(its report lists the units), ``grad`` gives d y/d x in y's unit per x's,
``jvp``'s tangents are in the primals' units, ``vmap``, ``scan``, ``cond``
and ``while_loop`` carry them, and ``odeint`` checks that ``func`` returns
y's unit per t's.

    import isokernel as ik
    import isokernel.numpy as inp
    from isokernel.units import Quantity

    tb = Quantity(np.array([250.0, 270.0]), "K")
    ts = Quantity(np.array([21.0, 24.0]), "degC").to("K")   # + 273.15
    emissivity = tb / ts                                     # dimensionless
    tb + Quantity(0.3, "m^3/m^3")                            # UnitError

``docs/units.md`` has the rules (offset and logarithmic units, where a
conversion goes, derivatives) and the NetCDF/CF side (``parse_cf``).
"""

from ._quantity import RULES, Quantity, conversion_text, convert, magnitude_of, units_of
from ._registry import UnitError, cf_to_pint, describe, parse, parse_cf, registry, show
from ._solvers import odeint

__all__ = ["RULES", "Quantity", "UnitError", "cf_to_pint", "conversion_text", "convert",
           "describe", "magnitude_of", "odeint", "parse", "parse_cf", "registry", "show",
           "units_of"]
