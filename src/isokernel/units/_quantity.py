"""``Quantity``: an array with a unit, and the unit rules of the
``isokernel.numpy`` functions.

A quantity holds a magnitude (a NumPy array, a Python or NumPy scalar, or a
traced value) and a pint unit. Every operation computes on the magnitudes
with the plain ``isokernel.numpy`` functions and works out the result's
unit in Python, at once; a conversion multiplies by a Python float (and adds
one for °C), which folds into a constant on a constant magnitude. A recording
of a model written with quantities therefore holds the operations the same
model in bare floats would hold, and nothing else.

The conventions (pint's, with two choices of where the conversion goes):

- operands of one operation that must share a dimension (``+``, ``-``,
  comparisons, ``maximum``, ``where``, ``concatenate`` ...) are converted to
  the unit of the first traced one (else the largest): converting a
  constant costs nothing, converting a traced value is a multiply;
- in a quotient (or product) of a constant and a traced value of the same
  (reciprocal) dimension, the constant is converted to the traced value's
  unit, so ``rho / Quantity(2.65, "g/cm**3")`` with ``rho`` in kg/m³ records
  ``rho / 2650.0``; run eagerly, the smaller operand is the one converted,
  so eager runs give the recorded bits;
- a bare number (or array) is dimensionless; a bare 0, inf or NaN may meet
  any linear unit (as pint allows in comparisons);
- offset units (°C, °F) are refused in sums, products and functions, with
  the fix (convert to K first), and allowed where only order and position
  matter (comparisons, ``maximum``, ``where``, ``clip``, shape operations,
  ``mean``, ``median``);
- dB (a logarithmic unit) adds to dB and scales by a dimensionless factor;
  anything else with it is refused, and ``.to("1")`` converts it to a linear
  ratio as ``exp(x * ln(10) / 10)``, ``Quantity(x, "1").to("dB")`` back as
  ``10 * log10(x)``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.pytree import register_pytree_node
from ..ir.source import user_where
from ..record import Tracer, overlay
from ..record import frontend as F
from . import _registry as R
from ._registry import UnitError

LN10_OVER_10 = math.log(10.0) / 10.0  # dB to a natural exponent (the models' db_to_linear)


class Quantity:
    """An array with a unit: ``Quantity(x, "K")``.

    ``x`` is a NumPy array, a Python or NumPy scalar, a list, a traced value
    (inside ``jit`` or a transform), a ``pint.Quantity`` (its unit is read;
    ``units``, when given too, converts) or a ``Quantity`` (converted to
    ``units``). ``units`` is a string in pint's syntax (``"K"``,
    ``"kg/m**3"``, ``"m^3/m^3"``, ``"degC"``, ``"GHz"``, ``"dB"``), a pint
    unit, or None for dimensionless.

    Arithmetic, comparisons and the ``isokernel.numpy`` functions check and
    carry the units (``UnitError`` names the operation, the units, the
    line and the fix); ``.to(units)`` converts, ``.magnitude`` (``.m``) is
    the array, ``.m_as(units)`` the array in a unit. A quantity is a pytree
    node whose one leaf is its magnitude and whose unit is static, so
    ``jit``, ``grad``, ``vmap``, ``scan`` and the other transforms take and
    return quantities.
    """

    __slots__ = ("magnitude", "units")
    __array_ufunc__ = None  # ``ndarray + quantity`` is the quantity's __radd__
    __hash__ = None  # type: ignore[assignment]

    magnitude: Any
    units: Any

    def __init__(self, value: Any, units: Any = None) -> None:
        if isinstance(value, Quantity):
            q = value if units is None else value.to(units)
        elif _is_pint_quantity(value):
            q = _make(_as_magnitude(value.magnitude), R.parse(value.units))
            if units is not None:
                q = q.to(units)
        else:
            q = _make(_as_magnitude(value), R.parse(units))
        self.magnitude, self.units = q.magnitude, q.units

    # --- reading -----------------------------------------------------------------------------

    @property
    def m(self) -> Any:
        """The magnitude."""
        return self.magnitude

    @property
    def u(self) -> Any:
        """The unit."""
        return self.units

    @property
    def dimensionality(self) -> Any:
        """The unit's dimensions (pint's), e.g. ``[temperature]``."""
        return R.dimensionality(self.units)

    @property
    def dimensionless(self) -> bool:
        return R.is_dimensionless(self.units)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(F.shape(self.magnitude))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> Any:
        return F.dtype_of(self.magnitude, "dtype")[0]

    def to(self, units: Any) -> Quantity:
        """This quantity in ``units`` (a multiply by the factor, plus the
        offset for °C/°F; dB ↔ a linear ratio as in the module doc)."""
        dst = R.parse(units)
        return _make(convert(self, dst, "to"), dst)

    def m_as(self, units: Any) -> Any:
        """The magnitude in ``units``."""
        return convert(self, R.parse(units), "m_as")

    def to_base_units(self) -> Quantity:
        """In SI base units (pint's)."""
        return self.to(R.registry().get_base_units(self.units)[1])

    def is_compatible_with(self, units: Any) -> bool:
        """Whether ``.to(units)`` would convert."""
        other = R.parse(units)
        return _compatible(self.units, other)

    def __repr__(self) -> str:
        return f"Quantity({self.magnitude!r}, {R.code(self.units)})"

    def __str__(self) -> str:
        return f"{self.magnitude} {R.show(self.units)}"

    # --- Python's protocols ----------------------------------------------------------------------

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d quantity")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key: Any) -> Quantity:
        if isinstance(key, Quantity):
            raise UnitError(f"indexing at {user_where()}: the index is a quantity in "
                            f"{R.show(key.units)}; index with a bare integer array")
        return _make(self.magnitude[key], self.units)

    def __bool__(self) -> bool:
        return bool(self.magnitude)

    def __float__(self) -> float:
        return float(_plain(self, "float()"))

    def __int__(self) -> int:
        return int(_plain(self, "int()"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if not R.is_dimensionless(self.units):
            raise UnitError(f"conversion to a NumPy array at {user_where()}: the quantity is "
                            f"in {R.show(self.units)}, and an array has no unit; take "
                            f"q.m_as({R.code(self.units)}) (or q.magnitude)")
        return np.asarray(_plain(self, "conversion to a NumPy array"), dtype=dtype)

    # --- arithmetic (the operators call the same rules as the functions) --------------------------

    def __add__(self, other: Any) -> Any:
        return _additive("add", F.add, self, other)

    def __radd__(self, other: Any) -> Any:
        return _additive("add", F.add, other, self)

    def __sub__(self, other: Any) -> Any:
        return _additive("subtract", F.subtract, self, other)

    def __rsub__(self, other: Any) -> Any:
        return _additive("subtract", F.subtract, other, self)

    def __mul__(self, other: Any) -> Any:
        return _product("multiply", F.multiply, self, other)

    def __rmul__(self, other: Any) -> Any:
        return _product("multiply", F.multiply, other, self)

    def __truediv__(self, other: Any) -> Any:
        return _product("divide", F.divide, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _product("divide", F.divide, other, self)

    def __floordiv__(self, other: Any) -> Any:
        return _same_dimension("floor_divide", F.floor_divide, (self, other), "dimensionless")

    def __rfloordiv__(self, other: Any) -> Any:
        return _same_dimension("floor_divide", F.floor_divide, (other, self), "dimensionless")

    def __mod__(self, other: Any) -> Any:
        return _same_dimension("remainder", F.remainder, (self, other), "linear")

    def __rmod__(self, other: Any) -> Any:
        return _same_dimension("remainder", F.remainder, (other, self), "linear")

    def __pow__(self, other: Any) -> Any:
        return _power("power", F.power, self, other)

    def __rpow__(self, other: Any) -> Any:
        return _power("power", F.power, other, self)

    def __matmul__(self, other: Any) -> Any:
        return _product("matmul", F.matmul, self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _product("matmul", F.matmul, other, self)

    def __neg__(self) -> Quantity:
        return _unary_linear("negative", F.negative, self)

    def __pos__(self) -> Quantity:
        return self

    def __abs__(self) -> Quantity:
        return _unary_linear("abs", F.absolute, self)

    def __lt__(self, other: Any) -> Any:
        return _same_dimension("less", F.less, (self, other), "bare")

    def __le__(self, other: Any) -> Any:
        return _same_dimension("less_equal", F.less_equal, (self, other), "bare")

    def __gt__(self, other: Any) -> Any:
        return _same_dimension("greater", F.greater, (self, other), "bare")

    def __ge__(self, other: Any) -> Any:
        return _same_dimension("greater_equal", F.greater_equal, (self, other), "bare")

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return _same_dimension("equal", F.equal, (self, other), "bare")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return _same_dimension("not_equal", F.not_equal, (self, other), "bare")

    # --- ndarray-style methods ------------------------------------------------------------------

    def astype(self, dtype: Any) -> Quantity:
        return _make(F.astype(self.magnitude, dtype), self.units)

    def reshape(self, *shape: Any) -> Quantity:
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) \
            else shape
        return _make(F.reshape(self.magnitude, shape), self.units)

    def ravel(self) -> Quantity:
        return _make(F.ravel(self.magnitude), self.units)

    flatten = ravel

    def squeeze(self, axis: Any = None) -> Quantity:
        return _make(F.squeeze(self.magnitude, axis), self.units)

    def transpose(self, *axes: Any) -> Quantity:
        axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) \
            else axes
        return _make(F.transpose(self.magnitude, axes or None), self.units)

    @property
    def T(self) -> Quantity:  # noqa: N802 - NumPy's name
        return _make(F.transpose(self.magnitude), self.units)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Quantity:
        return _call("sum", F.sum, (self, axis, keepdims), {})

    def mean(self, axis: Any = None, keepdims: bool = False) -> Quantity:
        return _call("mean", F.mean, (self, axis, keepdims), {})

    def max(self, axis: Any = None, keepdims: bool = False) -> Quantity:
        return _call("max", F.max, (self, axis, keepdims), {})

    def min(self, axis: Any = None, keepdims: bool = False) -> Quantity:
        return _call("min", F.min, (self, axis, keepdims), {})

    def clip(self, a_min: Any = None, a_max: Any = None) -> Quantity:
        return _call("clip", F.clip, (self, a_min, a_max), {})

    def round(self, decimals: int = 0) -> Quantity:
        return _call("round", F.round, (self, decimals), {})

    def dot(self, other: Any) -> Any:
        return _product("dot", F.dot, self, other)

    # --- the overlay protocol -------------------------------------------------------------------

    @staticmethod
    def __isokernel_function__(name: str, fn: Callable[..., Any], args: tuple,
                               kwargs: dict) -> Any:
        """An ``isokernel.numpy`` function called with a quantity operand."""
        return _call(name, fn, args, kwargs)


def _make(magnitude: Any, unit: Any) -> Quantity:
    """A quantity from a magnitude and a parsed unit, unchecked."""
    q = object.__new__(Quantity)
    q.magnitude = magnitude
    q.units = unit
    return q


def _is_pint_quantity(x: Any) -> bool:
    return type(x).__module__.startswith("pint") and hasattr(x, "magnitude") and \
        hasattr(x, "units")


def _as_magnitude(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return F.array(x)
    return x


def _plain(q: Quantity, what: str) -> Any:
    """The magnitude of a dimensionless quantity as a plain number."""
    if not R.is_dimensionless(q.units):
        raise UnitError(f"{what} at {user_where()}: the quantity is in {R.show(q.units)}, "
                        f"and a plain number has no unit; take q.m_as({R.code(q.units)})")
    return convert(q, R.dimensionless(), what)


def units_of(x: Any) -> Any:
    """The unit of a quantity; None for anything else (a bare value)."""
    return x.units if type(x) is Quantity else None


def magnitude_of(x: Any) -> Any:
    return x.magnitude if type(x) is Quantity else x


def _weight(q: Quantity) -> tuple[bool, int]:
    """Which of two operands to keep in its unit (the heavier): a traced
    value before a constant, then the larger. In a recording the model's
    inputs are traced and its constants are not; run eagerly they are the
    larger arrays: the same choices, so eager runs give the recorded bits."""
    m = q.magnitude
    return isinstance(m, Tracer), getattr(m, "size", 1)


# --- messages ------------------------------------------------------------------------------------

def _error(op: str, problem: str, fix: str) -> UnitError:
    return UnitError(f"{op} at {user_where()}: {problem}; {fix}")


def _offset_error(op: str, unit: Any) -> UnitError:
    return _error(op, f"{R.show(unit)} is an offset unit (a temperature scale with its own "
                      f"zero), which {op} cannot take",
                  "convert it to an absolute unit first, e.g. x.to('K')")


def _log_error(op: str, unit: Any, other: str = "") -> UnitError:
    return _error(op, f"{R.show(unit)} is a logarithmic unit{other}, which {op} cannot take "
                      f"as it is",
                  "convert it to a linear ratio first with x.to('1') (10^(x/10) for dB), "
                  "or keep dB to dB")


def _mismatch(op: str, a: Any, b: Any) -> UnitError:
    bare = " (a bare number is dimensionless)" if b is None or a is None else ""
    shown_a = R.describe(a) if a is not None else "a bare number"
    shown_b = R.describe(b) if b is not None else "a bare number"
    return _error(op, f"operands in {shown_a} and {shown_b} have different dimensions{bare}",
                  "convert one to the other's unit with .to(...) if they measure the same "
                  "thing, else check the units of the inputs (a dimensioned constant is "
                  "written Quantity(value, 'unit'))")


# --- conversion ----------------------------------------------------------------------------------

def _compatible(a: Any, b: Any) -> bool:
    if a == b:
        return True
    ka, kb = R.kind(a), R.kind(b)
    if "mixed-log" in (ka, kb):
        return False
    if ka == "log" or kb == "log":
        db = R.parse("dB")
        return (a == db and R.is_dimensionless(b)) or (b == db and R.is_dimensionless(a))
    return R.dimensionality(a) == R.dimensionality(b)


def _scale(magnitude: Any, factor: float, offset: float) -> Any:
    if factor != 1.0:
        magnitude = F.multiply(magnitude, factor)
    if offset != 0.0:
        magnitude = F.add(magnitude, offset)
    return magnitude


def convert(q: Quantity, dst: Any, op: str = "to") -> Any:
    """The magnitude of ``q`` in ``dst``."""
    src = q.units
    if src is dst or src == dst:
        return q.magnitude
    ks, kd = R.kind(src), R.kind(dst)
    if ks == "mixed-log" or kd == "mixed-log":
        raise _log_error(op, src if ks == "mixed-log" else dst, " inside a product")
    if ks == "log" or kd == "log":
        return _convert_log(q, src, dst, ks, kd, op)
    if R.dimensionality(src) != R.dimensionality(dst):
        raise _error(op, f"{R.describe(src)} does not convert to {R.describe(dst)}",
                     "convert to a unit of the same dimension, or check the input's unit")
    for unit, k in ((src, ks), (dst, kd)):
        if k == "offset" and len(unit._units) != 1:
            raise _offset_error(op, unit)
    factor, offset = R.affine(src, dst)
    return _scale(q.magnitude, factor, offset)


def _convert_log(q: Quantity, src: Any, dst: Any, ks: str, kd: str, op: str) -> Any:
    db = R.parse("dB")
    if ks == "log" and kd == "log":
        raise _error(op, f"{R.show(src)} does not convert to {R.show(dst)}",
                     "only dB converts, to and from a linear ratio")
    if ks == "log":
        if src != db:
            raise _error(op, f"{R.show(src)} does not convert to {R.show(dst)}",
                         "only dB converts to a linear ratio; take the magnitude")
        if not R.is_dimensionless(dst):
            raise _error(op, f"dB converts to a dimensionless ratio, not {R.describe(dst)}",
                         "convert with .to('1') and multiply by a quantity in the unit "
                         "the ratio refers to")
        linear = F.exp(F.multiply(q.magnitude, LN10_OVER_10))
        return _scale(linear, *R.affine(R.dimensionless(), dst))
    if dst != db or not R.is_dimensionless(src):
        raise _error(op, f"{R.describe(src)} does not convert to {R.show(dst)}",
                     "only a dimensionless ratio converts to dB")
    ratio = _scale(q.magnitude, *R.affine(src, R.dimensionless()))
    return F.multiply(10.0, F.log10(ratio))


def _in_unit(op: str, x: Any, unit: Any, allow: str) -> Any:
    """The magnitude of ``x`` (a quantity or a bare value) in ``unit``, for
    an operation whose operands share a dimension; ``allow``: ``"offset"``
    where offset units may meet (order, not sums)."""
    k = R.kind(unit)
    if type(x) is Quantity:
        if x.units is unit or x.units == unit:
            return x.magnitude
        kx = R.kind(x.units)
        if (kx in _LOGS) != (k in _LOGS):  # only .to() converts between dB and a ratio
            log, other = (x.units, unit) if kx in _LOGS else (unit, x.units)
            raise _log_error(op, log, f" and the other operand is in {R.show(other)}")
        if not _compatible(x.units, unit):
            raise _mismatch(op, unit, x.units)
        if (kx == "offset" or k == "offset") and allow != "offset":
            raise _offset_error(op, x.units if kx == "offset" else unit)
        return convert(x, unit, op)
    if x is None:
        return None
    if k == "linear" and R.is_dimensionless(unit):
        factor, _ = R.affine(R.dimensionless(), unit)
        return _scale(x, factor, 0.0)
    if k == "linear" and _zero_like(x):
        return x
    if k in _LOGS:
        raise _log_error(op, unit, " and the other operand is a bare number")
    if k == "offset":
        raise _error(op, f"a bare number meets {R.show(unit)}, an offset unit",
                     f"write the number as a quantity, e.g. Quantity(0.0, {R.code(unit)})")
    raise _mismatch(op, unit, None)


_LOGS = ("log", "mixed-log")


def _zero_like(x: Any) -> bool:
    """A concrete 0, inf or NaN (or an array of them): the same in every
    linear unit."""
    if isinstance(x, Tracer):
        return False
    try:
        a = np.asarray(x)
    except Exception:
        return False
    if a.dtype.kind not in "biuf":
        return False
    return bool(np.all((a == 0) | ~np.isfinite(a))) if a.dtype.kind == "f" else \
        bool(np.all(a == 0))


def _target(values) -> Any:
    """The unit operands that share a dimension are converted to: the
    heaviest quantity's (``_weight``: traced, then larger; the first of
    equals), so a conversion scales a constant where it can."""
    best, unit = None, None
    for v in values:
        if type(v) is Quantity:
            w = _weight(v)
            if best is None or w > best:
                best, unit = w, v.units
    return unit


# --- the rules -----------------------------------------------------------------------------------

def _result(value: Any, unit: Any) -> Any:
    if isinstance(value, list):
        return [_make(v, unit) for v in value]
    if isinstance(value, tuple):
        return tuple(_make(v, unit) for v in value)
    return _make(value, unit)


def _check_kinds(op: str, unit: Any, allow: str) -> None:
    k = R.kind(unit)
    if k == "offset" and allow not in ("offset", "any"):
        raise _offset_error(op, unit)
    if k in ("log", "mixed-log") and allow not in ("log", "any"):
        raise _log_error(op, unit)


def _additive(op: str, fn: Callable, a: Any, b: Any) -> Any:
    """``a ± b``: one dimension, no offset unit; dB ± dB stays dB."""
    unit = _target((a, b))
    for x in (a, b):
        u = units_of(x)
        if u is not None:
            _check_kinds(op, u, "log")
    return _make(fn(_in_unit(op, a, unit, "linear"), _in_unit(op, b, unit, "linear")), unit)


def _same_dimension(op: str, fn: Callable, values: tuple, result: str,
                    allow: str = "offset") -> Any:
    """``fn`` of operands that share a dimension, converted to one unit.
    ``result``: ``"unit"`` (that unit), ``"bare"`` (a comparison),
    ``"radian"``, ``"dimensionless"`` or ``"linear"`` (the unit, refusing
    offset and log units)."""
    unit = _target(values)
    if result in ("linear", "dimensionless"):
        for v in values:
            if type(v) is Quantity:
                _check_kinds(op, v.units, "none")
    out = fn(*(_in_unit(op, v, unit, allow) for v in values))
    if result == "bare":
        return out
    if result == "radian":
        return _result(out, R.radian())
    if result == "dimensionless":
        return out
    return _result(out, unit)


def _product(op: str, fn: Callable, a: Any, b: Any) -> Any:
    """``a * b``, ``a / b``, ``a @ b``: the units multiply (divide); a
    constant meeting a traced value of the same (reciprocal) dimension is
    converted to its unit first."""
    ua, ub = units_of(a), units_of(b)
    for u in (ua, ub):
        if u is not None and R.kind(u) == "offset":
            raise _offset_error(op, u)
    if (ua is not None and R.kind(ua) != "linear") or (ub is not None and R.kind(ub) != "linear"):
        return _log_product(op, fn, a, b, ua, ub)
    divide = op in ("divide", "true_divide")
    if ua is not None and ub is not None and ua != ub:
        a, b = _fold_constant(a, b, ua, ub, divide)
        ua, ub = a.units, b.units
    out = fn(magnitude_of(a), magnitude_of(b))
    if ua is None:
        unit = R.quotient(R.dimensionless(), ub) if divide else ub
    elif ub is None:
        unit = ua
    else:
        unit = R.quotient(ua, ub) if divide else R.product(ua, ub)
    return _make(out, unit)


def _fold_constant(a: Quantity, b: Quantity, ua: Any, ub: Any, divide: bool):
    """Convert the constant of a constant and a traced operand to the other's
    unit when the two cancel (a quotient of one dimension, a product of
    reciprocal ones)."""
    weight_a, weight_b = _weight(a), _weight(b)
    if weight_a == weight_b:
        return a, b
    keep_a = weight_a > weight_b
    target = ua if keep_a else ub
    if not divide:
        target = R.quotient(R.dimensionless(), target)
    const = b if keep_a else a
    if R.dimensionality(const.units) != R.dimensionality(target):
        return a, b
    folded = _make(convert(const, target, "multiply"), target)
    return (a, folded) if keep_a else (folded, b)


def _log_product(op: str, fn: Callable, a: Any, b: Any, ua: Any, ub: Any) -> Any:
    """dB scaled by a dimensionless factor stays dB; dB / dB is a ratio."""
    divide = op in ("divide", "true_divide")
    ka = R.kind(ua) if ua is not None else "bare"
    kb = R.kind(ub) if ub is not None else "bare"
    if "mixed-log" in (ka, kb):
        raise _log_error(op, ua if ka == "mixed-log" else ub, " inside a product")
    if ka == "log" and kb == "log":
        if divide and ua == ub:
            return _make(fn(a.magnitude, b.magnitude), R.dimensionless())
        raise _log_error(op, ua, f" and so is the other operand ({R.show(ub)})")
    log_unit, log_first = (ua, True) if ka == "log" else (ub, False)
    if divide and not log_first:
        raise _log_error(op, log_unit, " (a divisor)")
    other = b if log_first else a
    other_unit = units_of(other)
    if other_unit is not None and not R.is_dimensionless(other_unit):
        raise _log_error(op, log_unit, f" and the other factor is in {R.describe(other_unit)}")
    plain = _in_unit(op, other, R.dimensionless(), "linear") if other_unit is not None \
        else other
    out = fn(a.magnitude, plain) if log_first else fn(plain, b.magnitude)
    return _make(out, log_unit)


def _power(op: str, fn: Callable, x: Any, y: Any) -> Any:
    """``x ** y``: ``y`` dimensionless; a dimensioned ``x`` needs a concrete
    scalar ``y`` (the unit is raised to it)."""
    uy = units_of(y)
    if uy is not None:
        if not R.is_dimensionless(uy):
            raise _error(op, f"the exponent is in {R.describe(uy)}",
                         "an exponent must be dimensionless: divide it by a quantity in "
                         "its unit first")
        y = convert(y, R.dimensionless(), op)
    ux = units_of(x)
    if ux is None:
        return fn(x, y)
    _check_kinds(op, ux, "none")
    if R.is_dimensionless(ux) and (isinstance(y, Tracer) or np.ndim(y) != 0):
        return _make(fn(convert(x, R.dimensionless(), op), y), R.dimensionless())
    if isinstance(y, Tracer) or np.ndim(y) != 0:
        raise _error(op, f"the base is in {R.describe(ux)} and the exponent is "
                         f"{'traced' if isinstance(y, Tracer) else 'an array'}",
                     "a dimensioned base needs a constant scalar exponent (the unit is "
                     "raised to it); make the base dimensionless first")
    exponent = y.item() if isinstance(y, np.generic) else y
    return _make(fn(x.magnitude, y), R.power(ux, exponent))


def _unary_linear(op: str, fn: Callable, x: Quantity) -> Quantity:
    """A function that keeps the unit but not the meaning of an offset's
    zero (negation, absolute value, sums)."""
    allow = "log" if op in ("negative", "abs", "absolute") else "none"
    _check_kinds(op, x.units, allow)
    return _make(fn(x.magnitude), x.units)


def _dimensionless_arguments(op: str, values, unit: Any = None) -> list:
    """The magnitudes of ``values`` as plain numbers, each required to be
    dimensionless (an angle: radians)."""
    out = []
    for v in values:
        u = units_of(v)
        if u is None:
            out.append(v)
            continue
        if R.kind(u) in ("log", "mixed-log"):
            raise _log_error(op, u)
        if R.kind(u) == "offset" or not R.is_dimensionless(u):
            raise _error(op, f"the argument is in {R.describe(u)}, and {op} takes a "
                             f"dimensionless argument",
                         f"divide it by a quantity in {R.show(u)} first (e.g. "
                         f"x / Quantity(1.0, {R.code(u)})), or check the input's unit")
        out.append(convert(v, unit or R.dimensionless(), op))
    return out


# --- the function table --------------------------------------------------------------------------

_SIGNATURES: dict[Callable, inspect.Signature] = {}


def _bind(fn: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    return sig.bind(*args, **kwargs)


def _only_first(op: str, args: tuple, kwargs: dict) -> Quantity:
    """The quantity of a function that takes one array (the first argument);
    a quantity anywhere else is refused."""
    q = args[0] if args else None
    extra = [a for a in (*args[1:], *kwargs.values()) if units_of(a) is not None]
    if type(q) is not Quantity or extra:
        where = extra[0] if extra else next(v for v in kwargs.values() if type(v) is Quantity)
        raise _error(op, f"an argument other than the array is a quantity in "
                         f"{R.show(where.units)}",
                     "pass it as a bare number (its magnitude)")
    return q


def _keep(allow: str):
    """Unit unchanged: shape operations, order statistics, rounding."""
    def rule(op, fn, args, kwargs):
        q = _only_first(op, args, kwargs)
        _check_kinds(op, q.units, allow)
        return _result(fn(q.magnitude, *args[1:], **kwargs), q.units)
    return rule


def _bare(op, fn, args, kwargs):
    """A result without a unit (isnan, argmax, shape ...)."""
    q = _only_first(op, args, kwargs)
    return fn(q.magnitude, *args[1:], **kwargs)


def _dimensionless(result: str = "dimensionless", angle: bool = False):
    """Dimensionless arguments (an angle in radians where ``angle``)."""
    def rule(op, fn, args, kwargs):
        unit = R.radian() if angle else None
        args = _dimensionless_arguments(op, args, unit)
        if kwargs:
            kwargs = dict(zip(kwargs, _dimensionless_arguments(op, kwargs.values(), unit)))
        out = fn(*args, **kwargs)
        return _make(out, R.radian()) if result == "radian" else _make(out, R.dimensionless())
    return rule


def _sequence(values, result: str):
    """Functions of a sequence of arrays of one dimension (concatenate, stack)."""
    def rule(op, fn, args, kwargs):
        bound = _bind(fn, args, kwargs)
        arrays = list(bound.arguments[values])
        unit = _target(arrays)
        bound.arguments[values] = [_in_unit(op, v, unit, "offset") for v in arrays]
        return _result(fn(*bound.args, **bound.kwargs), unit)
    return rule


def _matching(names: tuple[str, ...], result: str, allow: str = "offset"):
    """The arguments ``names`` share a dimension; converted to one unit."""
    def rule(op, fn, args, kwargs):
        if not kwargs and len(args) == len(names):
            return _same_dimension(op, fn, args, result, allow)
        bound = _bind(fn, args, kwargs)
        present = [n for n in names if n in bound.arguments]
        others = [n for n, v in bound.arguments.items()
                  if n not in names and units_of(v) is not None]
        if others:
            raise _error(op, f"argument {others[0]!r} is a quantity",
                         "pass it as a bare number")

        def call(*values):
            bound.arguments.update(zip(present, values))
            return fn(*bound.args, **bound.kwargs)
        return _same_dimension(op, call, tuple(bound.arguments[n] for n in present), result,
                               allow)
    return rule


def _where(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    if units_of(bound.arguments["condition"]) is not None:
        raise _error(op, "the condition is a quantity", "compare first, e.g. x > Quantity(0, 'K')")
    return _same_dimension(op, lambda x, y: fn(bound.arguments["condition"], x, y),
                           (bound.arguments["x"], bound.arguments["y"]), "unit")


def _binary_product(op, fn, args, kwargs):
    if kwargs or len(args) != 2:
        bound = _bind(fn, args, kwargs)
        args = tuple(bound.arguments.values())[:2]
    return _product(op, fn, args[0], args[1])


def _binary_additive(op, fn, args, kwargs):
    if kwargs or len(args) != 2:
        bound = _bind(fn, args, kwargs)
        args = tuple(bound.arguments.values())[:2]
    return _additive(op, fn, args[0], args[1])


def _powered(exponent):
    def rule(op, fn, args, kwargs):
        q = _only_first(op, args, kwargs)
        _check_kinds(op, q.units, "none")
        return _make(fn(q.magnitude, *args[1:], **kwargs), R.power(q.units, exponent))
    return rule


def _power_rule(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    x, y = bound.arguments.values()
    return _power(op, fn, x, y)


def _reciprocal(op, fn, args, kwargs):
    q = _only_first(op, args, kwargs)
    _check_kinds(op, q.units, "none")
    return _make(fn(q.magnitude), R.quotient(R.dimensionless(), q.units))


def _linear(op, fn, args, kwargs):
    """Sums and signs: the unit kept, offset units refused (dB negates)."""
    q = _only_first(op, args, kwargs)
    _check_kinds(op, q.units, "log" if op in ("negative", "abs", "absolute") else "none")
    return _result(fn(q.magnitude, *args[1:], **kwargs), q.units)


def _contract(op, fn, args, kwargs):
    """tensordot, kron, cross, outer, inner, vdot: the units multiply."""
    bound = _bind(fn, args, kwargs)
    names = list(bound.arguments)[:2]
    a, b = (bound.arguments[n] for n in names)

    def call(x, y):
        bound.arguments.update(zip(names, (x, y)))
        return fn(*bound.args, **bound.kwargs)
    return _product(op, call, a, b)


def _einsum(op, fn, args, kwargs):
    subscripts, operands = args[0], args[1:]
    unit = R.dimensionless()
    plain = []
    for x in operands:
        u = units_of(x)
        if u is not None:
            _check_kinds(op, u, "none")
            unit = R.product(unit, u)
        plain.append(magnitude_of(x))
    return _make(fn(subscripts, *plain, **kwargs), unit)


def _var(op, fn, args, kwargs):
    q = _only_first(op, args, kwargs)
    _check_kinds(op, q.units, "none")
    return _make(fn(q.magnitude, *args[1:], **kwargs), R.power(q.units, 2))


def _like(op, fn, args, kwargs):
    """zeros_like, ones_like, empty_like: the unit of the model array."""
    q = _only_first(op, args, kwargs)
    return _make(fn(q.magnitude, *args[1:], **kwargs), q.units)


def _full_like(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    x = bound.arguments["x"]
    unit = units_of(x) or units_of(bound.arguments["fill_value"])
    fill = _in_unit(op, bound.arguments["fill_value"], unit, "offset")
    bound.arguments.update(x=magnitude_of(x), fill_value=fill)
    return _make(fn(*bound.args, **bound.kwargs), unit)


def _full(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    fill = bound.arguments["fill_value"]
    bound.arguments["fill_value"] = fill.magnitude
    return _make(fn(*bound.args, **bound.kwargs), fill.units)


def _interp(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    a = bound.arguments
    if units_of(a.get("period")) is not None:
        a["period"] = _in_unit(op, a["period"], _target((a["x"], a["xp"])), "linear")
    x_unit = _target((a["x"], a["xp"]))
    f_unit = _target(tuple(a.get(n) for n in ("fp", "left", "right")))
    for n in ("x", "xp"):
        a[n] = _in_unit(op, a[n], x_unit, "offset") if x_unit is not None else a[n]
    for n in ("fp", "left", "right"):
        if n in a and f_unit is not None:
            a[n] = _in_unit(op, a[n], f_unit, "offset")
    out = fn(*bound.args, **bound.kwargs)
    return out if f_unit is None else _make(out, f_unit)


def _trapezoid(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    a = bound.arguments
    y_unit = units_of(a.get("y")) or R.dimensionless()
    step = a.get("x") if a.get("x") is not None else a.get("dx")
    s_unit = units_of(step) or R.dimensionless()
    for u in (y_unit, s_unit):
        _check_kinds(op, u, "none")
    for n in ("y", "x", "dx"):
        if n in a:
            a[n] = magnitude_of(a[n])
    return _make(fn(*bound.args, **bound.kwargs), R.product(y_unit, s_unit))


def _angle_to(unit_name: str, via: str):
    """deg2rad/rad2deg: the argument in ``via``, the result in ``unit_name``."""
    def rule(op, fn, args, kwargs):
        q = _only_first(op, args, kwargs)
        (plain,) = _dimensionless_arguments(op, [q], R.parse(via))
        return _make(fn(plain), R.parse(unit_name))
    return rule


def _copysign(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    x1, x2 = bound.arguments.values()
    unit = units_of(x1)
    if unit is not None:
        _check_kinds(op, unit, "none")
    out = fn(magnitude_of(x1), magnitude_of(x2))
    return out if unit is None else _make(out, unit)


def _split(op, fn, args, kwargs):
    q = _only_first(op, args, kwargs)
    return [_make(p, q.units) for p in fn(q.magnitude, *args[1:], **kwargs)]


def _meshgrid(op, fn, args, kwargs):
    units = [units_of(x) for x in args]
    grids = fn(*(magnitude_of(x) for x in args), **kwargs)
    return [g if u is None else _make(g, u) for g, u in zip(grids, units)]


def _isclose(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    a = bound.arguments
    unit = _target((a["a"], a["b"]))
    if "atol" in a and units_of(a["atol"]) is not None:
        a["atol"] = _in_unit(op, a["atol"], unit, "linear")
    a["a"], a["b"] = _in_unit(op, a["a"], unit, "offset"), _in_unit(op, a["b"], unit, "offset")
    return fn(*bound.args, **bound.kwargs)


def _asarray(op, fn, args, kwargs):
    """asarray/array of a quantity, or of a list of them (one unit, stacked)."""
    if args and isinstance(args[0], (list, tuple)):
        unit = _target(args[0])
        values = [_in_unit(op, v, unit, "offset") for v in args[0]]
        return _make(fn(values, *args[1:], **kwargs), unit)
    q = _only_first(op, args, kwargs)
    return _make(fn(q.magnitude, *args[1:], **kwargs), q.units)


def _average(op, fn, args, kwargs):
    bound = _bind(fn, args, kwargs)
    a = bound.arguments
    q = a["a"]
    w = a.get("weights")
    if units_of(w) is not None:
        _check_kinds(op, w.units, "none")
        a["weights"] = w.magnitude
    if type(q) is not Quantity:
        return fn(*bound.args, **bound.kwargs)
    a["a"] = q.magnitude
    return _make(fn(*bound.args, **bound.kwargs), q.units)


_ANY, _OFFSET, _LINEAR = "any", "offset", "none"
RULES: dict[str, Callable] = {}

for _name in ("reshape", "ravel", "transpose", "swapaxes", "moveaxis", "broadcast_to",
              "expand_dims", "squeeze", "flip", "roll", "tile", "repeat", "take",
              "take_along_axis", "diagonal", "diag", "tril", "triu", "astype", "real", "imag",
              "conj", "conjugate", "positive"):
    RULES[_name] = _keep(_ANY)
for _name in ("max", "amax", "min", "amin", "sort", "median", "nanmedian", "percentile",
              "nanpercentile", "quantile", "nanquantile", "mean", "nanmean", "floor", "ceil",
              "rint", "trunc", "round", "around", "nan_to_num"):
    RULES[_name] = _keep(_OFFSET)
for _name in ("sum", "nansum", "cumsum", "ptp", "std", "trace", "negative", "abs",
              "absolute"):
    RULES[_name] = _linear
for _name in ("isnan", "isinf", "isfinite", "signbit", "sign", "argmax", "argmin", "argsort",
              "shape", "ndim", "iscomplexobj", "isrealobj", "count_nonzero"):
    RULES[_name] = _bare
for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sinh", "cosh", "tanh",
              "arcsinh", "arccosh", "arctanh", "logaddexp", "logaddexp2", "logsumexp", "sinc",
              "cumprod", "prod", "heaviside", "polyval"):
    RULES[_name] = _dimensionless()
for _name in ("sin", "cos", "tan"):
    RULES[_name] = _dimensionless(angle=True)
for _name in ("arcsin", "arccos", "arctan", "angle"):
    RULES[_name] = _dimensionless(result="radian")
RULES["add"] = RULES["subtract"] = _binary_additive
for _name in ("multiply", "divide", "true_divide", "matmul", "dot"):
    RULES[_name] = _binary_product
for _name in ("tensordot", "kron", "cross", "outer", "inner", "vdot"):
    RULES[_name] = _contract
for _name in ("maximum", "minimum"):
    RULES[_name] = _matching(("x", "y"), "unit")
for _name in ("fmod", "remainder", "mod", "hypot"):
    RULES[_name] = _matching(("x", "y"), "linear", allow="linear")
for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    RULES[_name] = _matching(("x", "y"), "bare")
RULES["floor_divide"] = _matching(("x", "y"), "dimensionless", allow="linear")
RULES["arctan2"] = _matching(("x", "y"), "radian", allow="linear")
RULES["clip"] = _matching(("x", "a_min", "a_max"), "unit")
RULES["searchsorted"] = _matching(("a", "v"), "bare")
RULES["digitize"] = _matching(("x", "bins"), "bare")
RULES["linspace"] = _matching(("start", "stop"), "unit")
RULES["arange"] = _matching(("start", "stop", "step"), "unit")
RULES["diff"] = _matching(("a", "prepend", "append"), "linear", allow="linear")
RULES["pad"] = _matching(("x", "constant_values"), "unit")
RULES["where"] = _where
RULES["concatenate"] = _sequence("arrays", "unit")
RULES["stack"] = _sequence("arrays", "unit")
RULES["power"] = _power_rule
RULES["square"] = _powered(2)
RULES["sqrt"] = _powered(0.5)
RULES["cbrt"] = _powered(1 / 3)
RULES["reciprocal"] = _reciprocal
RULES["var"] = _var
RULES["einsum"] = _einsum
RULES["zeros_like"] = RULES["ones_like"] = RULES["empty_like"] = _like
RULES["full_like"] = _full_like
RULES["full"] = _full
RULES["interp"] = _interp
RULES["trapezoid"] = _trapezoid
RULES["deg2rad"] = RULES["radians"] = _angle_to("radian", "degree")
RULES["rad2deg"] = RULES["degrees"] = _angle_to("degree", "radian")
RULES["copysign"] = _copysign
RULES["split"] = RULES["array_split"] = _split
RULES["meshgrid"] = _meshgrid
RULES["isclose"] = _isclose
RULES["asarray"] = RULES["array"] = _asarray
RULES["average"] = _average


def _call(name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    rule = RULES.get(name)
    if rule is None:
        raise UnitError(f"{name} at {user_where()}: isokernel.units has no unit rule for "
                        f"{name}; call it on magnitudes, e.g. inp.{name}(q.m_as('unit')), "
                        f"and wrap the result with Quantity(result, 'unit')")
    return rule(name, fn, args, kwargs)


overlay.register(Quantity)


# --- the pytree node: the magnitude is the leaf, the unit static ----------------------------------

def _derivative_unit(unit_in: Any, unit_out: Any) -> Any:
    """d out / d in: the output's unit per the input's (None: bare)."""
    if unit_in is None:
        return unit_out
    return R.quotient(unit_out if unit_out is not None else R.dimensionless(), unit_in)


def _unflatten(unit: Any, children: list) -> Quantity:
    """A quantity from its unit and leaf. A leaf that is itself a quantity is
    a block of a Jacobian (``jacfwd``, ``jacrev``, ``hessian``: the output's
    structure around the input's): the output's unit per the input's."""
    m = children[0]
    if type(m) is Quantity:
        return _make(m.magnitude, R.quotient(unit, m.units))
    return _make(m, unit)


register_pytree_node(Quantity, lambda q: ((q.magnitude,), q.units), _unflatten,
                     annotation=R.show, derivative=_derivative_unit)


def conversion_text(src: Any, dst: Any) -> str:
    """How a value in ``src`` becomes one in ``dst``, for a note:
    ``x * 0.001``, ``x + 273.15``, ``exp(x * ln(10) / 10)``."""
    src, dst = R.parse(src), R.parse(dst)
    if R.kind(src) == "log":
        return "exp(x * ln(10) / 10), a ratio from dB"
    if R.kind(dst) == "log":
        return "10 * log10(x), dB from a ratio"
    factor, offset = R.affine(src, dst)
    parts = ["x"] + ([f"* {factor!r}"] if factor != 1.0 else []) + \
        ([f"{'+' if offset > 0 else '-'} {abs(offset)!r}"] if offset else [])
    return " ".join(parts)
