"""``isokernel.numpy``: the functions models are written with.

Each function resolves dtypes (Python scalars are weak and take the dtype of
the array they meet; two different array dtypes are an error, never a silent
cast), broadcasts explicitly, and ``bind``s primitives — evaluated at once on
NumPy values, recorded inside a trace. Compositions (hypot, clip, mean,
isnan ...) are written here once, so eager code and recordings agree.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from ..ir import DTypeError, Op, ShapeError, TracerError
from ..ir import dtypes as _dt
from ..ir.source import user_where
from ..typing import Array, ArrayLike, Axis, DTypeLike, Shape
from . import complex_parts as _complex_parts
from . import overlay as _overlay
from . import portable as _portable
from .tracer import Tracer, as_tracer, bind, current_builder

float32, float64, int32, int64, bool_ = _dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.bool_
complex64, complex128 = _dt.complex64, _dt.complex128
pi, e, inf, nan, newaxis = math.pi, math.e, math.inf, math.nan, None

_PY_SCALARS = (bool, int, float, complex)


# ---------------------------------------------------------------- operands

MASKED = ("a NumPy masked array; isokernel computes on plain arrays and would drop its mask "
          "(masked values would be computed as data). Pass x.filled(np.nan) to carry masked "
          "values as NaN, or x.data and the mask separately, combined with inp.where")


def _is_weak_scalar(x) -> bool:
    return isinstance(x, _PY_SCALARS) and not isinstance(x, np.generic)


def dtype_of(x: ArrayLike, name: str) -> tuple[np.dtype, bool]:
    """(dtype, weak) of an operand, rejecting what isokernel cannot compute
    (a ``DTypeError`` naming the function ``name``)."""
    if isinstance(x, Tracer):
        return x.dtype, x.weak
    if isinstance(x, np.ma.MaskedArray):
        raise DTypeError(f"{name} at {user_where()}: {MASKED}")
    if _is_weak_scalar(x):
        return _dt.python_scalar_dtype(x), True
    dtype = np.result_type(x) if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x).dtype
    try:
        return _dt.canonical(dtype), False
    except DTypeError:
        raise DTypeError(f"{name} at {user_where()}: dtype {dtype} is not supported; "
                         f"convert with astype to float32, float64, int32, int64, bool, "
                         f"complex64 or complex128"
                         ) from None


def _shape_of(x) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def _result_dtype(name: str, operands) -> tuple[np.dtype, bool]:
    """The common dtype of ``operands`` and whether the result is weak."""
    strong, weak = [], []
    for x in operands:
        dtype, is_weak = dtype_of(x, name)
        (weak if is_weak else strong).append(dtype)
    kinds = list(dict.fromkeys(strong))
    if len(kinds) > 1:
        a, b = kinds[0].name, kinds[1].name
        wider = next((k for k in kinds if k in _dt.COMPLEX), kinds[1])
        fix = (f"x.astype(inp.{wider.name})" if wider in _dt.INEXACT else "x.astype(...)")
        raise DTypeError(f"{name} at {user_where()}: {a} and {b} operands; isokernel never "
                         f"casts silently, cast one explicitly, e.g. {fix}")
    try:
        return _dt.promote_weak(kinds[0] if kinds else None, weak), not kinds
    except DTypeError as err:
        raise DTypeError(f"{name} at {user_where()}: {err}") from None


def _to(x, dtype: np.dtype):
    """``x`` as ``dtype``; Python scalars become NumPy scalars of it."""
    if isinstance(x, Tracer):
        return bind(Op.CAST, x, dtype=dtype) if (x.dtype != dtype or x.weak) else x
    if _is_weak_scalar(x):
        try:
            return np.asarray(x, dtype=dtype)
        except OverflowError:
            raise DTypeError(f"Python integer {x} does not fit {dtype.name} at "
                             f"{user_where()}; cast the array to int64 first") from None
    array = np.asarray(x)
    return array if array.dtype == dtype else bind(Op.CAST, array, dtype=dtype)


def _broadcast_to_shape(x, shape: tuple[int, ...]):
    xs = _shape_of(x)
    if xs == shape:
        return x
    dims = tuple(range(len(shape) - len(xs), len(shape)))
    return bind(Op.BROADCAST, x, shape=tuple(shape), dims=dims)


def _common_shape(name: str, operands) -> tuple[int, ...]:
    shapes = [_shape_of(x) for x in operands]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        shown = " and ".join(str(tuple(s)) for s in shapes)
        raise ShapeError(f"{name} at {user_where()}: shapes {shown} do not broadcast; "
                         f"reshape or slice one so trailing axes match or are 1") from None


def unify(name: str, operands: Sequence[ArrayLike],
          dtype: np.dtype | None = None) -> tuple[list[Array], bool]:
    """Operands cast to one dtype (``dtype``, else their common one) and
    broadcast to one shape; also returns whether every operand was a weak
    Python scalar."""
    common, all_weak = _result_dtype(name, operands)
    dtype = dtype or common
    builder = current_builder()
    if builder is not None and builtins.any(isinstance(x, Tracer) for x in operands):
        operands = [as_tracer(_to(x, dtype), builder) for x in operands]
    else:
        operands = [_to(x, dtype) for x in operands]
    shape = _common_shape(name, operands)
    return [_broadcast_to_shape(x, shape) for x in operands], all_weak


def _finish(value, all_weak: bool):
    """Ops on Python scalars alone give Python scalars (they stay weak)."""
    if all_weak and not isinstance(value, Tracer):
        return np.asarray(value).item()
    return value


# ---------------------------------------------------------- elementwise ops


def _apply(op: Op, *operands):
    """``bind(op, ...)``, or under portable numerics the op's shared
    decomposition into basic operations (transcendentals, and the complex
    ops whose result differs between implementations: ``complex_parts``)."""
    if _complex_parts.lowers(op, *operands):
        return _complex_parts.lower(op, *operands)
    if _portable.lowers(op, *operands):
        return _portable.lower(op, *operands)
    return bind(op, *operands)


def _binary(op: Op, name: str,
            float_only: bool = False) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fn(x: ArrayLike, y: ArrayLike) -> Array:
        common, _ = _result_dtype(name, (x, y))
        target = _dt.float_of(common) if float_only else None
        (x, y), all_weak = unify(name, (x, y), target)
        return _finish(_apply(op, x, y), all_weak)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting."
    return fn


def _unary(op: Op, name: str, float_only: bool = True,
           ints_identity: bool = False) -> Callable[[ArrayLike], Array]:
    def fn(x: ArrayLike) -> Array:
        dtype, _ = dtype_of(x, name)
        if ints_identity and dtype in _dt.INTS:
            return x
        target = _dt.float_of(dtype) if float_only else None
        (x,), all_weak = unify(name, (x,), target)
        return _finish(_apply(op, x), all_weak)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``; integer operands are computed in float64."
    return fn


def iscomplexobj(x: ArrayLike) -> bool:
    """NumPy ``iscomplexobj``: whether ``x`` has a complex dtype."""
    return dtype_of(x, "iscomplexobj")[0] in _dt.COMPLEX


def isrealobj(x: ArrayLike) -> bool:
    return not iscomplexobj(x)


def real(x: ArrayLike) -> Array:
    """NumPy ``real``: the real part (a real value as it is)."""
    if not iscomplexobj(x):
        return x
    (x,), all_weak = unify("real", (x,))
    return _finish(bind(Op.REAL, x), all_weak)


def imag(x: ArrayLike) -> Array:
    """NumPy ``imag``: the imaginary part (zeros for a real value)."""
    if not iscomplexobj(x):
        return zeros_like(x)
    (x,), all_weak = unify("imag", (x,))
    return _finish(bind(Op.IMAG, x), all_weak)


def conj(x: ArrayLike) -> Array:
    """NumPy ``conj``: the complex conjugate (a real value as it is)."""
    if not iscomplexobj(x):
        return x
    (x,), all_weak = unify("conj", (x,))
    return _finish(bind(Op.CONJ, x), all_weak)


conjugate = conj


def angle(z: ArrayLike, deg: bool = False) -> Array:
    """NumPy ``angle``: ``arctan2(imag, real)`` (radians, or degrees)."""
    if iscomplexobj(z):
        a = arctan2(imag(z), real(z))
    else:
        z = astype(z, _dt.float_of(dtype_of(z, "angle")[0]))
        a = arctan2(zeros_like(z), z)
    return multiply(a, 180.0 / np.pi) if deg else a


def complex_from(re: ArrayLike, im: ArrayLike) -> Array:
    """The complex value with parts ``re`` and ``im`` (one float dtype),
    exactly: JAX's ``lax.complex``."""
    (re, im), _ = unify("complex", (re, im))
    return bind(Op.COMPLEX, re, im)


add = _binary(Op.ADD, "add")
subtract = _binary(Op.SUB, "subtract")
multiply = _binary(Op.MUL, "multiply")
divide = true_divide = _binary(Op.DIV, "divide", float_only=True)
floor_divide = _binary(Op.FLOORDIV, "floor_divide")
remainder = mod = _binary(Op.REM, "remainder")
maximum = _binary(Op.MAX, "maximum")
minimum = _binary(Op.MIN, "minimum")
arctan2 = _binary(Op.ATAN2, "arctan2", float_only=True)
equal = _binary(Op.EQ, "equal")
not_equal = _binary(Op.NE, "not_equal")
less = _binary(Op.LT, "less")
less_equal = _binary(Op.LE, "less_equal")
greater = _binary(Op.GT, "greater")
greater_equal = _binary(Op.GE, "greater_equal")

negative = _unary(Op.NEG, "negative", float_only=False)
absolute = abs = _unary(Op.ABS, "abs", float_only=False)
sign = _unary(Op.SIGN, "sign", float_only=False)
floor = _unary(Op.FLOOR, "floor", ints_identity=True)
ceil = _unary(Op.CEIL, "ceil", ints_identity=True)
rint = _unary(Op.ROUND, "rint", ints_identity=True)
trunc = _unary(Op.TRUNC, "trunc", ints_identity=True)
sqrt = _unary(Op.SQRT, "sqrt")
cbrt = _unary(Op.CBRT, "cbrt")
exp = _unary(Op.EXP, "exp")
exp2 = _unary(Op.EXP2, "exp2")
expm1 = _unary(Op.EXPM1, "expm1")
log = _unary(Op.LOG, "log")
log2 = _unary(Op.LOG2, "log2")
log10 = _unary(Op.LOG10, "log10")
log1p = _unary(Op.LOG1P, "log1p")
sin = _unary(Op.SIN, "sin")
cos = _unary(Op.COS, "cos")
tan = _unary(Op.TAN, "tan")
arcsin = _unary(Op.ASIN, "arcsin")
arccos = _unary(Op.ACOS, "arccos")
arctan = _unary(Op.ATAN, "arctan")
sinh = _unary(Op.SINH, "sinh")
cosh = _unary(Op.COSH, "cosh")
tanh = _unary(Op.TANH, "tanh")
arcsinh = _unary(Op.ASINH, "arcsinh")
arccosh = _unary(Op.ACOSH, "arccosh")
arctanh = _unary(Op.ATANH, "arctanh")


def positive(x: ArrayLike) -> Array:
    """``+x``: the operand itself."""
    dtype_of(x, "positive")
    return x


def power(x: ArrayLike, y: ArrayLike) -> Array:
    """``x ** y``. Python-scalar exponents 2, 0.5 and -1 take NumPy's own
    fast paths (x*x, sqrt, 1/x), so results match ``ndarray ** y`` bit for bit."""
    if _is_weak_scalar(y) and not isinstance(y, bool) and not _is_weak_scalar(x):
        dtype, _ = dtype_of(x, "power")
        if y == 2 and dtype != bool_:
            return multiply(x, x)
        if dtype in _dt.FLOATS and y == 1:
            return x
        if dtype in _dt.FLOATS and y == 0.5:
            return sqrt(x)
        if dtype in _dt.FLOATS and y == -1:
            return divide(1.0, x)
    (x, y), all_weak = unify("power", (x, y))
    return _finish(_apply(Op.POW, x, y), all_weak)


def square(x: ArrayLike) -> Array:
    return multiply(x, x)


def reciprocal(x: ArrayLike) -> Array:
    return divide(1.0, x)


def round(x: ArrayLike, decimals: int = 0) -> Array:  # noqa: A001 - NumPy's name
    """Round half to even; ``decimals`` as NumPy does it (scale, rint, unscale)."""
    if decimals == 0:
        return rint(x)
    scale = 10.0 ** decimals
    return divide(rint(multiply(x, scale)), scale)


around = round


def hypot(x: ArrayLike, y: ArrayLike) -> Array:
    """sqrt(x² + y²) without overflow: scaled by the larger magnitude; an
    infinite operand gives inf even when the other is NaN (C99)."""
    ax, ay = abs(_float(x, "hypot")), abs(_float(y, "hypot"))
    big, small = maximum(ax, ay), minimum(ax, ay)
    ratio = divide(small, where(equal(big, 0.0), 1.0, big))
    h = multiply(big, sqrt(add(1.0, multiply(ratio, ratio))))
    return where(logical_or(equal(ax, inf), equal(ay, inf)), inf, h)


def _float(x, name: str):
    dtype, _ = dtype_of(x, name)
    return x if dtype in _dt.FLOATS else _to(x, _dt.float64)


def clip(x: ArrayLike, a_min: ArrayLike = None, a_max: ArrayLike = None) -> Array:
    """``minimum(maximum(x, a_min), a_max)``, either bound optional."""
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def isnan(x: ArrayLike) -> Array:
    dtype, _ = dtype_of(x, "isnan")
    return not_equal(x, x) if dtype in _dt.FLOATS else _const_like(x, False)


def isinf(x: ArrayLike) -> Array:
    dtype, _ = dtype_of(x, "isinf")
    return equal(abs(x), inf) if dtype in _dt.FLOATS else _const_like(x, False)


def isfinite(x: ArrayLike) -> Array:
    dtype, _ = dtype_of(x, "isfinite")
    return less(abs(x), inf) if dtype in _dt.FLOATS else _const_like(x, True)


def _const_like(x, value):
    return full_like(x, value, dtype=bool_)


# ------------------------------------------------------------- logical ops


def _logical(op: Op, name: str) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fn(x: ArrayLike, y: ArrayLike) -> Array:
        for v in (x, y):
            if dtype_of(v, name)[0] != bool_:
                raise DTypeError(f"{name} at {user_where()}: expects bool operands, got "
                                 f"{dtype_of(v, name)[0].name}; compare first, e.g. x > 0")
        (x, y), all_weak = unify(name, (x, y))
        return _finish(bind(op, x, y), all_weak)
    fn.__name__ = fn.__qualname__ = name
    return fn


logical_and = _logical(Op.AND, "logical_and")
logical_or = _logical(Op.OR, "logical_or")


def logical_xor(x: ArrayLike, y: ArrayLike) -> Array:
    for v in (x, y):
        if dtype_of(v, "logical_xor")[0] != bool_:
            raise DTypeError(f"logical_xor at {user_where()}: expects bool operands; "
                             f"compare first, e.g. x > 0")
    return not_equal(x, y)


def logical_not(x: ArrayLike) -> Array:
    if dtype_of(x, "logical_not")[0] != bool_:
        raise DTypeError(f"logical_not at {user_where()}: expects a bool operand; "
                         f"compare first, e.g. x == 0")
    (x,), all_weak = unify("logical_not", (x,))
    return _finish(bind(Op.NOT, x), all_weak)


# ------------------------------------------------------------- bit operations


def _bitwise(op: Op, name: str) -> Callable[[ArrayLike, ArrayLike], Array]:
    """NumPy's bitwise ufunc ``name`` on integers (two's complement) and, for
    ``&``, ``|``, ``^``, on bools, where it is the logical op; the op's shape
    rule refuses floats (and bools for shifts), naming the fix."""
    def fn(x: ArrayLike, y: ArrayLike) -> Array:
        (x, y), all_weak = unify(name, (x, y))
        return _finish(bind(op, x, y), all_weak)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``numpy.{name}`` with NumPy broadcasting."
    return fn


bitwise_and = _bitwise(Op.AND, "bitwise_and")
bitwise_or = _bitwise(Op.OR, "bitwise_or")
bitwise_xor = _bitwise(Op.XOR, "bitwise_xor")
left_shift = _bitwise(Op.SHIFT_LEFT, "left_shift")
right_shift = _bitwise(Op.SHIFT_RIGHT, "right_shift")


def invert(x: ArrayLike) -> Array:
    """Elementwise ``numpy.invert`` (``~``): the bits complemented on integers,
    ``logical_not`` on bools."""
    (x,), all_weak = unify("invert", (x,))
    return _finish(bind(Op.NOT, x), all_weak)


bitwise_not = invert


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Array:
    """``x`` where ``condition`` holds, else ``y``. Both sides are computed
    (it is a select, not a branch)."""
    if dtype_of(condition, "where")[0] != bool_:
        raise DTypeError(f"where at {user_where()}: condition must be bool; "
                         f"compare first, e.g. inp.where(c != 0, x, y)")
    dtype, all_weak = _result_dtype("where", (x, y))
    (x, y), _ = unify("where", (x, y), dtype)
    (condition, x, y), _ = _prepare_mixed("where", (condition, x, y))
    return _finish(bind(Op.SELECT, condition, x, y), all_weak and not _shape_of(condition))


def _prepare_mixed(name: str, operands):
    """Broadcast operands that already have their dtypes to one shape."""
    builder = current_builder()
    if builder is not None and builtins.any(isinstance(x, Tracer) for x in operands):
        operands = [as_tracer(_to(x, dtype_of(x, name)[0]), builder) for x in operands]
    else:
        operands = [_to(x, dtype_of(x, name)[0]) for x in operands]
    shape = _common_shape(name, operands)
    return [_broadcast_to_shape(x, shape) for x in operands], False


# -------------------------------------------------------------- conversions


def astype(x: ArrayLike, dtype: DTypeLike) -> Array:
    """``x`` converted to ``dtype`` (an explicit cast: the only kind there is)."""
    return _to(x, _dt.canonical(dtype))


def asarray(x: ArrayLike, dtype: DTypeLike = None) -> Array:
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    if isinstance(x, np.ma.MaskedArray):
        raise DTypeError(f"asarray at {user_where()}: {MASKED}")
    array = np.asarray(x, dtype=None if dtype is None else _dt.canonical(dtype))
    dtype_of(array, "asarray")
    return array


def shape(x: ArrayLike) -> tuple[int, ...]:
    return tuple(_shape_of(x))


def ndim(x: ArrayLike) -> int:
    return len(_shape_of(x))


# ---------------------------------------------------------------- reductions


def _axes(axis, rank: int, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(rank))
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        a = operator.index(a)
        if not -rank <= a < rank:
            raise ShapeError(f"{name} at {user_where()}: axis {a} is out of range for "
                             f"rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise ShapeError(f"{name} at {user_where()}: repeated axis in {axis}")
    return tuple(sorted(out))


class _Reduction(Protocol):
    def __call__(self, x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array: ...


def _reduce(op: Op, name: str) -> _Reduction:
    def fn(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
        dtype, weak = dtype_of(x, name)
        if dtype == bool_:
            x, dtype = _to(x, int64), int64
        elif not isinstance(x, Tracer):
            x = _to(x, dtype)
        axes = _axes(axis, len(_shape_of(x)), name)
        out = bind(op, x, axes=axes)
        if keepdims:
            out = reshape(out, _kept_shape(_shape_of(x), axes))
        return _finish(out, weak and not isinstance(x, Tracer))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}`` over ``axis`` (all axes by default), in the operand's dtype."
    return fn


def _kept_shape(shape, axes) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


sum = _reduce(Op.REDUCE_SUM, "sum")  # noqa: A001 - NumPy's name
prod = _reduce(Op.REDUCE_PROD, "prod")
max = amax = _reduce(Op.REDUCE_MAX, "max")  # noqa: A001
min = amin = _reduce(Op.REDUCE_MIN, "min")  # noqa: A001


def mean(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """``sum / count`` in the operand's float dtype (NumPy's own definition)."""
    x = _float(x, "mean")
    axes = _axes(axis, len(_shape_of(x)), "mean")
    count = int(np.prod([_shape_of(x)[a] for a in axes], dtype=np.int64))
    return divide(sum(x, axes, keepdims), float(count))


def logsumexp(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """log(sum(exp(x))) without overflow: the maximum is subtracted before
    exp and added back after log (a slice whose maximum is ±inf shifts by
    0, so all -inf gives -inf and +inf gives +inf)."""
    x = _float(x, "logsumexp")
    m = max(x, axis, keepdims=True)
    shift = where(isfinite(m), m, 0.0)
    total = sum(exp(subtract(x, shift)), axis, keepdims=keepdims)
    kept = shift if keepdims else reshape(shift, shape(total))
    return add(log(total), kept)


# ----------------------------------------------------------------- layout


def _resolve_shape(size: int, new_shape, name: str) -> tuple[int, ...]:
    if isinstance(new_shape, (int, np.integer)):
        new_shape = (new_shape,)
    new_shape = [operator.index(d) for d in new_shape]
    if new_shape.count(-1) > 1:
        raise ShapeError(f"{name} at {user_where()}: only one dimension may be -1")
    if -1 in new_shape:
        known = int(np.prod([d for d in new_shape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ShapeError(f"{name} at {user_where()}: cannot reshape {size} elements "
                             f"into {tuple(new_shape)}")
        new_shape[new_shape.index(-1)] = size // known
    return tuple(new_shape)


def reshape(x: ArrayLike, newshape: Shape) -> Array:
    old = _shape_of(x)
    size = int(np.prod(old, dtype=np.int64))
    new = _resolve_shape(size, newshape, "reshape")
    if new == tuple(old):
        return x
    return bind(Op.RESHAPE, _operand(x, "reshape"), shape=new)


def _operand(x, name: str):
    """An array operand: tracers as they are, anything else as NumPy."""
    if isinstance(x, Tracer):
        return x
    dtype, _ = dtype_of(x, name)
    return np.asarray(x, dtype=dtype)


def ravel(x: ArrayLike) -> Array:
    return reshape(x, (-1,))


def transpose(x: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    rank = len(_shape_of(x))
    perm = tuple(reversed(range(rank))) if axes is None else tuple(
        operator.index(a) % rank if rank else a for a in axes)
    if perm == tuple(range(rank)):
        return x
    return bind(Op.TRANSPOSE, _operand(x, "transpose"), perm=perm)


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Array:
    rank = len(_shape_of(x))
    perm = list(range(rank))
    a, b = _axes(axis1, rank, "swapaxes")[0], _axes(axis2, rank, "swapaxes")[0]
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def broadcast_to(x: ArrayLike, shape: Shape) -> Array:
    shape = tuple(operator.index(d) for d in ((shape,) if isinstance(shape, int) else shape))
    old = _shape_of(x)
    if len(old) > len(shape) or np.broadcast_shapes(old, shape) != shape:
        raise ShapeError(f"broadcast_to at {user_where()}: cannot broadcast {tuple(old)} "
                         f"to {shape}")
    return _broadcast_to_shape(_operand(x, "broadcast_to"), shape)


def expand_dims(x: ArrayLike, axis: Axis) -> Array:
    old = _shape_of(x)
    rank = len(old) + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    axes = _axes(axis, rank, "expand_dims")
    it = iter(old)
    return reshape(x, tuple(1 if i in axes else next(it) for i in range(rank)))


def squeeze(x: ArrayLike, axis: Axis = None) -> Array:
    old = _shape_of(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(old) if d == 1)
    else:
        axes = _axes(axis, len(old), "squeeze")
        if builtins.any(old[a] != 1 for a in axes):
            raise ShapeError(f"squeeze at {user_where()}: axis {axis} of {tuple(old)} does "
                             f"not have size 1")
    return reshape(x, tuple(d for i, d in enumerate(old) if i not in axes))


def concatenate(arrays: Iterable[ArrayLike], axis: int | None = 0) -> Array:
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"concatenate at {user_where()}: needs at least one array")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    dtype, _ = _result_dtype("concatenate", arrays)
    arrays = _same_recording([_to(_operand_or_scalar(a), dtype) for a in arrays])
    rank = len(_shape_of(arrays[0]))
    if rank == 0:
        raise ShapeError(f"concatenate at {user_where()}: zero-dimensional arrays cannot be "
                         f"concatenated; use stack")
    (axis,) = _axes(axis, rank, "concatenate")
    if len(arrays) == 1:
        return arrays[0]
    return bind(Op.CONCATENATE, *arrays, axis=axis)


def _operand_or_scalar(x):
    return x if isinstance(x, Tracer) or _is_weak_scalar(x) else np.asarray(x)


def _same_recording(operands):
    builder = current_builder()
    if builder is not None and builtins.any(isinstance(x, Tracer) for x in operands):
        return [as_tracer(x, builder) for x in operands]
    return operands


def stack(arrays: Iterable[ArrayLike], axis: int = 0) -> Array:
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"stack at {user_where()}: needs at least one array")
    shapes = {tuple(_shape_of(a)) for a in arrays}
    if len(shapes) != 1:
        raise ShapeError(f"stack at {user_where()}: all arrays need one shape, got "
                         f"{sorted(shapes)}")
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)


def pad(x: ArrayLike, pad_width: Any, constant_values: ArrayLike = 0) -> Array:
    """Constant padding: ``pad_width`` as NumPy's (an int, a pair, or a pair
    per axis)."""
    old = _shape_of(x)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(old), 2))
    dtype, _ = dtype_of(x, "pad")
    operands = _same_recording([_operand(x, "pad"), _to(constant_values, dtype)])
    return bind(Op.PAD, *operands, lo=tuple(int(a) for a in widths[:, 0]),
                hi=tuple(int(b) for b in widths[:, 1]), interior=(0,) * len(old))


def flip(x: ArrayLike, axis: Axis = None) -> Array:
    axes = _axes(axis, len(_shape_of(x)), "flip")
    return bind(Op.REV, _operand(x, "flip"), axes=axes) if axes else x


def getitem(x: ArrayLike, key: Any) -> Array:
    """Indexing: integers, slices (any step), ``None`` and ``...``; integer
    arrays (NumPy's advanced indexing; an index out of range is clamped, as
    JAX's, with no derivative: ``record.indexing``)."""
    key = key if isinstance(key, tuple) else (key,)
    if builtins.any(isinstance(k, (Tracer, list, np.ndarray)) for k in key):
        from .indexing import gather
        return gather(x, key, "promise_in_bounds", None, "indexing")
    static = (int, np.integer, slice, type(None), type(Ellipsis))
    for k in key:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, static):
            raise TracerError(
                f"indexing at {user_where()}: indices are integers, slices, None, ... or "
                f"integer arrays; for a selection by a condition use inp.where")
    old = _shape_of(x)
    key = _expand_ellipsis(key, len(old))
    starts, limits, strides, reverse, out_shape = [], [], [], [], []
    axis = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = old[axis]
        if isinstance(k, slice):
            b, lim, s, count, rev = _slice_bounds(k, n)
            out_shape.append(count)
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n} "
                                 f"at {user_where()}")
            b, lim, s, rev = i % n, i % n + 1, 1, False
        starts.append(b), limits.append(lim), strides.append(s)
        if rev:
            reverse.append(axis)
        axis += 1
    return _apply_index(x, old, reverse, starts, limits, strides, out_shape)


def _expand_ellipsis(key, rank: int):
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > rank:
        raise IndexError(f"too many indices ({used}) for a rank-{rank} value at {user_where()}")
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError(f"an index can only have one ellipsis, at {user_where()}")
    out = []
    for k in key:
        out.extend([slice(None)] * (rank - used) if k is Ellipsis else [k])
    if Ellipsis not in key:
        out.extend([slice(None)] * (rank - used))
    return out


def _slice_bounds(k: slice, n: int):
    """(start, limit, stride, count, reversed) with a positive stride, on the
    axis reversed first when the step is negative."""
    b, e, s = k.indices(n)
    count = len(range(b, e, s))
    if s < 0:
        b, s = n - 1 - b, -s
    start = b if count else 0
    limit = start + (count - 1) * s + 1 if count else 0
    return start, limit, s, count, k.indices(n)[2] < 0


def _apply_index(x, old, reverse, starts, limits, strides, out_shape):
    x = _operand(x, "indexing")
    if reverse:
        x = bind(Op.REV, x, axes=tuple(reverse))
    full = builtins.all(b == 0 and e == n and s == 1
                        for b, e, s, n in zip(starts, limits, strides, old))
    if not full:
        x = bind(Op.SLICE, x, start=tuple(starts), limit=tuple(limits), stride=tuple(strides))
    return reshape(x, tuple(out_shape))


# --------------------------------------------------------- linear algebra


def matmul(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy ``matmul``: 1-D operands promoted and squeezed, batch axes
    broadcast."""
    dtype, _ = _result_dtype("matmul", (a, b))
    a, b = _same_recording([_to(_operand_or_scalar(a), dtype), _to(_operand_or_scalar(b), dtype)])
    sa, sb = _shape_of(a), _shape_of(b)
    if not sa or not sb:
        raise ShapeError(f"matmul at {user_where()}: operands must be at least 1-D; "
                         f"use multiply for scalars")
    a2 = reshape(a, (1, sa[0])) if len(sa) == 1 else a
    b2 = reshape(b, (sb[0], 1)) if len(sb) == 1 else b
    sa2, sb2 = _shape_of(a2), _shape_of(b2)
    if sa2[-1] != sb2[-2]:
        raise ShapeError(f"matmul at {user_where()}: inner sizes of {tuple(sa)} and "
                         f"{tuple(sb)} differ ({sa2[-1]} vs {sb2[-2]})")
    batch = _common_shape("matmul", [np.empty(sa2[:-2], bool), np.empty(sb2[:-2], bool)])
    a2 = _broadcast_to_shape(a2, batch + tuple(sa2[-2:]))
    b2 = _broadcast_to_shape(b2, batch + tuple(sb2[-2:]))
    nb = len(batch)
    out = bind(Op.DOT_GENERAL, a2, b2, contracting=((nb + 1,), (nb,)),
               batch=(tuple(range(nb)), tuple(range(nb))))
    shape_out = batch + tuple(sa[-2:-1]) + tuple(sb[-1:] if len(sb) > 1 else ())
    return reshape(out, shape_out)


def dot(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy ``dot``: scalars multiply; otherwise the last axis of ``a``
    contracts with the second-to-last (or only) axis of ``b``."""
    if not _shape_of(a) or not _shape_of(b):
        return multiply(a, b)
    dtype, _ = _result_dtype("dot", (a, b))
    a, b = _same_recording([_to(_operand_or_scalar(a), dtype), _to(_operand_or_scalar(b), dtype)])
    sa, sb = _shape_of(a), _shape_of(b)
    cb = 0 if len(sb) == 1 else len(sb) - 2
    if sa[-1] != sb[cb]:
        raise ShapeError(f"dot at {user_where()}: shapes {tuple(sa)} and {tuple(sb)} are not "
                         f"aligned ({sa[-1]} vs {sb[cb]})")
    return bind(Op.DOT_GENERAL, a, b, contracting=((len(sa) - 1,), (cb,)), batch=((), ()))


# ------------------------------------------------------------- constructors


def _shape_arg(shape) -> tuple[int, ...]:
    return tuple(operator.index(d) for d in ((shape,) if isinstance(shape, int) else shape))


def full(shape: Shape, fill_value: ArrayLike, dtype: DTypeLike = None) -> Array:
    """An array of ``shape`` filled with ``fill_value``. Inside a recording it
    is a broadcast of one scalar, never a materialized constant."""
    shape = _shape_arg(shape)
    dtype = _dt.canonical(dtype) if dtype is not None else dtype_of(fill_value, "full")[0]
    value = _to(fill_value, dtype)
    if isinstance(value, Tracer) or current_builder() is not None:
        return _broadcast_to_shape(as_tracer(value, current_builder()), shape)
    return np.full(shape, value, dtype=dtype)


def zeros(shape: Shape, dtype: DTypeLike = float64) -> Array:
    return full(shape, 0, dtype)


def ones(shape: Shape, dtype: DTypeLike = float64) -> Array:
    return full(shape, 1, dtype)


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike = None) -> Array:
    return full(_shape_of(x), fill_value, dtype_of(x, "full_like")[0] if dtype is None else dtype)


def zeros_like(x: ArrayLike, dtype: DTypeLike = None) -> Array:
    return full_like(x, 0, dtype)


def ones_like(x: ArrayLike, dtype: DTypeLike = None) -> Array:
    return full_like(x, 1, dtype)


def arange(start: ArrayLike, stop: ArrayLike = None, step: ArrayLike = 1,
           dtype: DTypeLike = None) -> Array:
    """NumPy ``arange`` (a constant: its bounds are static)."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return asarray(values, dtype if dtype is not None else _dt.canonical(values.dtype))


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             dtype: DTypeLike = float64) -> Array:
    """NumPy ``linspace`` (a constant: its bounds are static)."""
    return np.linspace(start, stop, num, endpoint=endpoint, dtype=_dt.canonical(dtype))


# ------------------------------------------------ NumPy names: compositions
#
# Each function below is a composition of the primitives above, so its
# derivative, batching rule and code generation come from theirs. Where
# NumPy computes the same IEEE operations in the same order the results are
# NumPy's bits; the docstring says where they are not.

SUBSCRIPTS = ("einsum subscripts are letters, one comma-separated group per operand and an "
              "optional '->' output, e.g. 'ij,jk->ik'; write the ellipsis axes out as letters")


def _axis1(axis, rank: int, name: str) -> int:
    return _axes(axis, rank, name)[0]


def _index_along(x, axis: int, key):
    """``x[..., key, ...]`` with ``key`` on ``axis`` (static)."""
    index = [slice(None)] * len(_shape_of(x))
    index[axis] = key
    return getitem(x, tuple(index))


def _flat_or_axis(a, axis, name: str):
    """(operand, axis): ``axis=None`` works on the flattened operand."""
    x = _operand(a, name)
    if axis is None:
        return ravel(x), 0
    return x, _axis1(axis, len(_shape_of(x)), name)


def _scan(a, axis, dtype, name: str, combine, identity):
    """Inclusive prefix ``combine`` along ``axis``: log2(n) passes that each
    combine the array with itself shifted by 1, 2, 4 ... (Hillis-Steele)."""
    x, axis = _flat_or_axis(a, axis, name)
    if dtype is not None:
        x = astype(x, dtype)
    elif dtype_of(x, name)[0] == bool_:
        x = astype(x, int64)
    n, rank, shift = _shape_of(x)[axis], len(_shape_of(x)), 1
    while shift < n:
        widths = [(0, 0)] * rank
        widths[axis] = (shift, 0)
        head = _index_along(x, axis, slice(0, n - shift))
        x = combine(x, pad(head, widths, constant_values=identity(x)))
        shift *= 2
    return x


def _zero_of(x):
    """-0.0 for floats (x + -0.0 is x, also for x = -0.0), 0 for integers."""
    return -0.0 if dtype_of(x, "cumsum")[0] in _dt.FLOATS else 0


def cumsum(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Array:
    """NumPy ``cumsum``. Integer results are NumPy's; float sums are added
    in a log-depth tree (log2(n) shifted adds), not left to right as NumPy
    does, so they can differ from NumPy's in the last bits."""
    return _scan(a, axis, dtype, "cumsum", add, _zero_of)


def cumprod(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None) -> Array:
    """NumPy ``cumprod``, multiplied in a log-depth tree (see ``cumsum``)."""
    return _scan(a, axis, dtype, "cumprod", multiply, lambda x: 1)


def var(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0,
        keepdims: bool = False) -> Array:
    """NumPy ``var``: the mean as ``sum / count``, then the sum of squared
    deviations over ``count - ddof`` (NumPy's operations, in its order)."""
    x = _float(a if dtype is None else astype(a, dtype), "var")
    axes = _axes(axis, len(_shape_of(x)), "var")
    count = int(np.prod([_shape_of(x)[i] for i in axes], dtype=np.int64))
    centred = subtract(x, divide(sum(x, axes, keepdims=True), float(count)))
    total = sum(multiply(centred, centred), axes, keepdims)
    return divide(total, float(builtins.max(count - ddof, 0)))


def std(a: ArrayLike, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0,
        keepdims: bool = False) -> Array:
    """NumPy ``std``: ``sqrt(var)``. Its derivative is infinite (NaN in a
    gradient) where the variance is zero, as ``sqrt``'s is at 0."""
    return sqrt(var(a, axis, dtype, ddof, keepdims))


def outer(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy ``outer``: ``ravel(a)[:, None] * ravel(b)[None, :]``."""
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def _contract_axes(axes, ra: int, rb: int):
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        return tuple(range(ra - n, ra)), tuple(range(n))
    left, right = axes
    left = (left,) if isinstance(left, (int, np.integer)) else tuple(left)
    right = (right,) if isinstance(right, (int, np.integer)) else tuple(right)
    return (tuple(_axis1(i, ra, "tensordot") for i in left),
            tuple(_axis1(i, rb, "tensordot") for i in right))


def tensordot(a: ArrayLike, b: ArrayLike, axes: Any = 2) -> Array:
    """NumPy ``tensordot``: one ``dot_general`` (NumPy's matmul on the CPU)."""
    dtype, _ = _result_dtype("tensordot", (a, b))
    a, b = _same_recording([_to(_operand_or_scalar(a), dtype), _to(_operand_or_scalar(b), dtype)])
    sa, sb = _shape_of(a), _shape_of(b)
    ca, cb = _contract_axes(axes, len(sa), len(sb))
    if len(ca) != len(cb) or builtins.any(sa[i] != sb[j] for i, j in zip(ca, cb)):
        raise ShapeError(f"tensordot at {user_where()}: axes {axes} pair sizes "
                         f"{[sa[i] for i in ca]} with {[sb[j] for j in cb]}; they must match")
    return bind(Op.DOT_GENERAL, a, b, contracting=(ca, cb), batch=((), ()))


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike = None,
         append: ArrayLike = None) -> Array:
    """NumPy ``diff``: ``a[1:] - a[:-1]`` along ``axis``, ``n`` times."""
    x = _operand(a, "diff")
    axis = _axis1(axis, len(_shape_of(x)), "diff")
    parts = [_edge(v, x, axis) for v in (prepend,) if v is not None] + [x]
    parts += [_edge(v, x, axis) for v in (append,) if v is not None]
    x = concatenate(parts, axis) if len(parts) > 1 else x
    for _ in range(operator.index(n)):
        m = _shape_of(x)[axis]
        x = subtract(_index_along(x, axis, slice(1, m)), _index_along(x, axis, slice(0, m - 1)))
    return x


def _edge(value, x, axis: int):
    """``prepend``/``append`` of ``diff``: a scalar is broadcast to one slice."""
    if _shape_of(value):
        return value
    shape = list(_shape_of(x))
    shape[axis] = 1
    return full(shape, value, dtype_of(x, "diff")[0])


def trapezoid(y: ArrayLike, x: ArrayLike = None, dx: float = 1.0, axis: int = -1) -> Array:
    """NumPy ``trapezoid``: ``sum(d * (y[1:] + y[:-1]) / 2)`` along ``axis``."""
    y = _float(_operand(y, "trapezoid"), "trapezoid")
    rank = len(_shape_of(y))
    axis = _axis1(axis, rank, "trapezoid")
    d = dx
    if x is not None and len(_shape_of(x)) == 1:
        shape = [1] * rank
        shape[axis] = _shape_of(x)[0] - 1
        d = reshape(diff(x), shape)
    elif x is not None:
        d = diff(x, axis=axis)
    n = _shape_of(y)[axis]
    pair = add(_index_along(y, axis, slice(1, n)), _index_along(y, axis, slice(0, n - 1)))
    return sum(divide(multiply(d, pair), 2.0), axis)


def roll(a: ArrayLike, shift: int | Sequence[int], axis: Axis = None) -> Array:
    """NumPy ``roll``: two slices concatenated per rolled axis."""
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape_of(a))
    x = _operand(a, "roll")
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    for s, ax in np.broadcast(np.asarray(shifts), np.asarray(axes)):
        ax = _axis1(int(ax), len(_shape_of(x)), "roll")
        n = _shape_of(x)[ax]
        k = int(s) % n if n else 0
        if k:
            x = concatenate([_index_along(x, ax, slice(n - k, n)),
                             _index_along(x, ax, slice(0, n - k))], ax)
    return x


def tile(a: ArrayLike, reps: int | Sequence[int]) -> Array:
    """NumPy ``tile``: a broadcast over new interleaved axes and a reshape."""
    x = _operand(a, "tile")
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    rank = builtins.max(len(_shape_of(x)), len(reps))
    shape = (1,) * (rank - len(_shape_of(x))) + tuple(_shape_of(x))
    reps = (1,) * (rank - len(reps)) + tuple(operator.index(r) for r in reps)
    spread = tuple(d for s in shape for d in (1, s))
    grown = tuple(d for r, s in zip(reps, shape) for d in (r, s))
    out = broadcast_to(reshape(x, spread), grown)
    return reshape(out, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a: ArrayLike, repeats: int | Sequence[int], axis: Axis = None) -> Array:
    """NumPy ``repeat`` with static ``repeats`` (an int, or one per element)."""
    x, axis = _flat_or_axis(a, axis, "repeat")
    shape = list(_shape_of(x))
    if isinstance(repeats, (int, np.integer)):
        r = operator.index(repeats)
        wide = broadcast_to(expand_dims(x, axis + 1),
                            tuple(shape[:axis + 1]) + (r,) + tuple(shape[axis + 1:]))
        return reshape(wide, tuple(shape[:axis]) + (shape[axis] * r,) + tuple(shape[axis + 1:]))
    counts = [operator.index(r) for r in repeats]
    if len(counts) != shape[axis]:
        raise ShapeError(f"repeat at {user_where()}: {len(counts)} repeats for an axis of "
                         f"size {shape[axis]}; give one count per element or one int")
    parts = [repeat(_index_along(x, axis, slice(i, i + 1)), r, axis)
             for i, r in enumerate(counts) if r]
    return concatenate(parts, axis) if parts else _index_along(x, axis, slice(0, 0))


def moveaxis(a: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Array:
    """NumPy ``moveaxis``: one transpose."""
    rank = len(_shape_of(a))
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    src = [_axis1(s, rank, "moveaxis") for s in src]
    dst = [_axis1(d, rank, "moveaxis") for d in dst]
    if len(src) != len(dst):
        raise ValueError(f"moveaxis at {user_where()}: source and destination need the same "
                         f"number of axes")
    order = [i for i in range(rank) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def _diagonal_span(n: int, m: int, k: int) -> tuple[int, int]:
    """(first flat index, count) of the ``k``-th diagonal of an n x m matrix."""
    count = builtins.max(0, builtins.min(n, m - k) if k >= 0 else builtins.min(n + k, m))
    return (k if k >= 0 else -k * m), count


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """NumPy ``diagonal``: the diagonal becomes the last axis (a strided
    slice of the flattened pair of axes)."""
    x = _operand(a, "diagonal")
    rank = len(_shape_of(x))
    ax1, ax2 = _axis1(axis1, rank, "diagonal"), _axis1(axis2, rank, "diagonal")
    if ax1 == ax2:
        raise ValueError(f"diagonal at {user_where()}: axis1 and axis2 are both {ax1}; "
                         f"name two different axes")
    x = transpose(x, [i for i in range(rank) if i not in (ax1, ax2)] + [ax1, ax2])
    *lead, n, m = _shape_of(x)
    first, count = _diagonal_span(n, m, operator.index(offset))
    flat = reshape(x, (*lead, n * m))
    last = first + (count - 1) * (m + 1) + 1 if count else first
    return _index_along(flat, len(lead), slice(first, last, m + 1))


def _place_diagonal(v, n: int, m: int, k: int):
    """An n x m matrix with the vector ``v`` on its ``k``-th diagonal: ``v``
    padded with m zeros between elements (interior padding), reshaped."""
    first, count = _diagonal_span(n, m, k)
    dtype, _ = dtype_of(v, "diag")
    if count == 0:
        return zeros((n, m), dtype)
    hi = n * m - (first + (count - 1) * (m + 1) + 1)
    operands = _same_recording([_operand(v, "diag"), _to(0, dtype)])
    flat = bind(Op.PAD, *operands, lo=(first,), hi=(hi,), interior=(m,))
    return reshape(flat, (n, m))


def diag(v: ArrayLike, k: int = 0) -> Array:
    """NumPy ``diag``: a 1-D operand becomes a square matrix with it on the
    ``k``-th diagonal; a 2-D operand gives its ``k``-th diagonal."""
    rank = len(_shape_of(v))
    if rank == 2:
        return diagonal(v, k)
    if rank != 1:
        raise ShapeError(f"diag at {user_where()}: expects a 1-D or 2-D operand, got rank "
                         f"{rank}; use diagonal for higher ranks")
    size = _shape_of(v)[0] + builtins.abs(operator.index(k))
    return _place_diagonal(v, size, size, operator.index(k))


def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike = float64) -> Array:
    """NumPy ``eye``. Inside a recording a broadcast one padded onto the
    diagonal, never a materialized constant."""
    dtype = _dt.canonical(dtype)
    M = N if M is None else M
    if current_builder() is None:
        return np.eye(N, M, k, dtype=dtype)
    _, count = _diagonal_span(N, M, k)
    return _place_diagonal(ones((count,), dtype), N, M, k)


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1,
          dtype: DTypeLike = None) -> Array:
    """NumPy ``trace``: the sum of ``diagonal``."""
    d = diagonal(a, offset, axis1, axis2)
    return sum(d if dtype is None else astype(d, dtype), -1)


def tril(m: ArrayLike, k: int = 0) -> Array:
    """NumPy ``tril``: ``where(tri(k), m, 0)`` over the last two axes."""
    *_, rows, cols = _shape_of(m)
    return where(np.tri(rows, cols, k, dtype=bool), m, 0)


def triu(m: ArrayLike, k: int = 0) -> Array:
    """NumPy ``triu``: ``where(tri(k - 1), 0, m)`` over the last two axes."""
    *_, rows, cols = _shape_of(m)
    return where(np.tri(rows, cols, k - 1, dtype=bool), 0, m)


def kron(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy ``kron``: a broadcast product over interleaved axes, reshaped."""
    ra, rb = len(_shape_of(a)), len(_shape_of(b))
    if ra == 0 or rb == 0:
        return multiply(a, b)
    rank = builtins.max(ra, rb)
    sa = (1,) * (rank - ra) + tuple(_shape_of(a))
    sb = (1,) * (rank - rb) + tuple(_shape_of(b))
    wide_a = reshape(a, tuple(d for s in sa for d in (s, 1)))
    wide_b = reshape(b, tuple(d for s in sb for d in (1, s)))
    return reshape(multiply(wide_a, wide_b), tuple(x * y for x, y in zip(sa, sb)))


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: Axis = None) -> Array:
    """NumPy ``cross`` of 3-vectors (``a1*b2 - a2*b1`` ..., NumPy's own
    operations), or of 2-vectors (the z component)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(_operand(a, "cross"), axisa, -1)
    b = moveaxis(_operand(b, "cross"), axisb, -1)
    na, nb = _shape_of(a)[-1], _shape_of(b)[-1]
    if na != nb or na not in (2, 3):
        raise ShapeError(f"cross at {user_where()}: vectors of length {na} and {nb}; both "
                         f"must have length 3 (or 2) along the cross axis")
    ca = [_index_along(a, -1 % len(_shape_of(a)), i) for i in range(na)]
    cb = [_index_along(b, -1 % len(_shape_of(b)), i) for i in range(nb)]
    if na == 2:
        return subtract(multiply(ca[0], cb[1]), multiply(ca[1], cb[0]))
    parts = [subtract(multiply(ca[1], cb[2]), multiply(ca[2], cb[1])),
             subtract(multiply(ca[2], cb[0]), multiply(ca[0], cb[2])),
             subtract(multiply(ca[0], cb[1]), multiply(ca[1], cb[0]))]
    out = stack(parts, -1)
    return moveaxis(out, -1, axisc)


def polyval(p: ArrayLike, x: ArrayLike) -> Array:
    """NumPy ``polyval``: Horner's rule from ``zeros_like(x)``, as NumPy."""
    coefficients = [p[i] for i in range(_shape_of(p)[0])] if _shape_of(p) else [p]
    dtype, _ = _result_dtype("polyval", [x] + coefficients)
    y = full_like(x, 0, dtype)
    for c in coefficients:
        y = add(multiply(y, x), c)
    return y


def logaddexp(x1: ArrayLike, x2: ArrayLike) -> Array:
    """log(exp(x1) + exp(x2)) without overflow: ``max + log1p(exp(-|x1 - x2|))``
    (equal infinities give themselves). NumPy evaluates the same formula; its
    scalar ``exp``/``log1p`` may differ from the vectorized ones by an ulp."""
    x1, x2 = _float(x1, "logaddexp"), _float(x2, "logaddexp")
    delta = subtract(x1, x2)
    out = add(maximum(x1, x2), log1p(exp(negative(abs(delta)))))
    return where(isnan(delta), add(x1, x2), out)


def nan_to_num(x: ArrayLike, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Array:
    """NumPy ``nan_to_num``: NaN, +inf and -inf replaced (by default with 0
    and the dtype's largest finite magnitudes)."""
    dtype, _ = dtype_of(x, "nan_to_num")
    if dtype not in _dt.FLOATS:
        return x
    big = float(np.finfo(dtype).max)
    x = where(isnan(x), nan, x)
    x = where(equal(x, inf), big if posinf is None else posinf, x)
    return where(equal(x, -inf), -big if neginf is None else neginf, x)


def fmod(x1: ArrayLike, x2: ArrayLike) -> Array:
    """C's ``fmod`` (the remainder takes the dividend's sign), exact:
    ``copysign(remainder(|x1|, |x2|), x1)`` (for positive operands NumPy's
    ``remainder`` is ``fmod``)."""
    common, _ = _result_dtype("fmod", (x1, x2))
    (a, b), all_weak = unify("fmod", (x1, x2))
    magnitude = remainder(_abs_one_at_zero(a), abs(b))
    if common not in _dt.FLOATS:
        return _finish(multiply(sign(a), magnitude), all_weak)
    return _finish(bind(Op.COPYSIGN, *_same_recording([magnitude, a])), all_weak)


def _abs_one_at_zero(x):
    """|x| whose derivative at +0 is 1 (``abs``'s is 0 there)."""
    return where(greater_equal(x, 0), x, negative(x))


def split(ary: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Array]:
    """NumPy ``split``: static slices along ``axis``."""
    n = _shape_of(ary)[_axis1(axis, len(_shape_of(ary)), "split")]
    if isinstance(indices_or_sections, (int, np.integer)) and n % indices_or_sections:
        raise ValueError(f"split at {user_where()}: {n} elements do not divide into "
                         f"{indices_or_sections} equal sections; use array_split")
    return array_split(ary, indices_or_sections, axis)


def array_split(ary: ArrayLike, indices_or_sections: int | Sequence[int],
                axis: int = 0) -> list[Array]:
    """NumPy ``array_split``: like ``split``, sections may differ by one."""
    x = _operand(ary, "array_split")
    axis = _axis1(axis, len(_shape_of(x)), "array_split")
    n = _shape_of(x)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        size, extra = divmod(n, operator.index(indices_or_sections))
        sizes = [size + 1] * extra + [size] * (operator.index(indices_or_sections) - extra)
        bounds = [0, *np.cumsum(sizes).tolist()]
    else:
        bounds = [0, *[operator.index(i) for i in indices_or_sections], n]
    return [_index_along(x, axis, slice(builtins.min(lo, n), builtins.min(builtins.max(lo, hi),
                                                                         n)))
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> tuple[Array, ...]:
    """NumPy ``meshgrid`` (a tuple; broadcasts unless ``sparse``)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid at {user_where()}: indexing must be 'xy' or 'ij', "
                         f"got {indexing!r}")
    rank = len(xi)
    ones_ = (1,) * rank
    out = [reshape(x, ones_[:i] + (-1,) + ones_[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and rank > 1:
        out[0] = reshape(out[0], (1, -1) + ones_[2:])
        out[1] = reshape(out[1], (-1, 1) + ones_[2:])
    if sparse:
        return tuple(out)
    shape = _common_shape("meshgrid", out)
    return tuple(broadcast_to(x, shape) for x in out)


def any(a: ArrayLike, axis: Axis = None,  # noqa: A001 - NumPy's name
        keepdims: bool = False) -> Array:
    """NumPy ``any``: whether some element is nonzero (a max of 0/1)."""
    return greater(max(_truth(a, "any"), axis, keepdims), 0)


def all(a: ArrayLike, axis: Axis = None,  # noqa: A001 - NumPy's name
        keepdims: bool = False) -> Array:
    """NumPy ``all``: whether every element is nonzero (a min of 0/1)."""
    return greater(min(_truth(a, "all"), axis, keepdims), 0)


def _truth(a, name: str):
    dtype, _ = dtype_of(a, name)
    truth = a if dtype == bool_ else not_equal(a, 0)
    return astype(truth, int32)


def _arg_extreme(a, axis, keepdims: bool, reduce, name: str):
    """Index of the first extreme element (the first NaN if there is one)."""
    x, ax = _flat_or_axis(a, axis, name)
    n = _shape_of(x)[ax]
    if n == 0:
        raise ValueError(f"{name} at {user_where()}: attempt to get {name} of an empty "
                         f"sequence")
    hit = equal(x, reduce(x, ax, keepdims=True))
    if dtype_of(x, name)[0] in _dt.FLOATS:
        hit = logical_or(hit, isnan(x))
    index_shape = [1] * len(_shape_of(x))
    index_shape[ax] = n
    index = np.arange(n, dtype=np.int64).reshape(index_shape)
    out = min(where(hit, index, n), ax, keepdims=keepdims and axis is not None)
    if keepdims and axis is None:
        return reshape(out, (1,) * len(_shape_of(a)))
    return out


def argmax(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy ``argmax`` on a static axis (int64 indices; ties and NaN as
    NumPy: the first)."""
    return _arg_extreme(a, axis, keepdims, max, "argmax")


def argmin(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy ``argmin`` on a static axis (see ``argmax``)."""
    return _arg_extreme(a, axis, keepdims, min, "argmin")


def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Array:
    """NumPy ``isclose``: ``|a - b| <= atol + rtol * |b|``; equal infinities
    are close."""
    close = less_equal(abs(subtract(a, b)), add(atol, multiply(rtol, abs(b))))
    close = logical_or(logical_and(close, isfinite(b)), equal(a, b))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike = None,
           right: ArrayLike = None, period: ArrayLike = None) -> Array:
    """NumPy ``interp`` for increasing ``xp``: the interval of each ``x`` is
    found by comparisons with every ``xp`` and picked out by selects, then
    ``slope * (x - xp[j]) + fp[j]`` as NumPy computes it (same bits, except
    that a ``fp`` of -0.0 at a knot gives +0.0). At a knot the derivative is
    the slope on its right (as JAX's). Costs O(len(xp)) operations per
    element: for a long grid use a ``Table``."""
    if period is not None:
        raise ValueError(f"interp at {user_where()}: period is not supported; reduce x "
                         f"first, e.g. inp.remainder(x - xp[0], period) + xp[0]")
    x, xp, fp = (_float(_operand(v, "interp"), "interp") for v in (x, xp, fp))
    m = _shape_of(xp)[0]
    if len(_shape_of(xp)) != 1 or _shape_of(fp) != (m,) or m == 0:
        raise ShapeError(f"interp at {user_where()}: xp and fp must be 1-D of one non-zero "
                         f"length, got {tuple(_shape_of(xp))} and {tuple(_shape_of(fp))}")
    last_x, last_f = xp[m - 1], fp[m - 1]
    left = fp[0] if left is None else left
    right = last_f if right is None else right
    if m == 1:
        return where(less(x, last_x), left, where(greater(x, last_x), right, last_f))
    return _interp_inside(x, xp, fp, m, left, right)


def _interp_inside(x, xp, fp, m: int, left, right):
    widths = subtract(xp[1:], xp[:-1])  # an empty interval (repeated xp) is never picked
    slopes = divide(subtract(fp[1:], fp[:-1]), where(equal(widths, 0.0), 1.0, widths))
    xl, yl, xr, yr, slope = xp[0], fp[0], xp[1], fp[1], slopes[0]
    for j in range(1, m - 1):
        take = greater_equal(x, xp[j])
        xl, yl = where(take, xp[j], xl), where(take, fp[j], yl)
        xr, yr = where(take, xp[j + 1], xr), where(take, fp[j + 1], yr)
        slope = where(take, slopes[j], slope)
    out = add(multiply(slope, subtract(x, xl)), yl)
    retry = add(multiply(slope, subtract(x, xr)), yr)
    out = where(isnan(out), where(logical_and(isnan(retry), equal(yl, yr)), yl, retry), out)
    at_knot = add(yl, multiply(where(isfinite(slope), slope, 0.0), subtract(x, xl)))
    out = where(equal(x, xl), at_knot, out)  # yl, with the right-hand slope as derivative
    out = where(equal(x, xp[m - 1]), fp[m - 1], out)
    out = where(greater(x, xp[m - 1]), right, where(less(x, xp[0]), left, out))
    return where(isnan(x), x, out)


def einsum(subscripts: str, *operands: ArrayLike, optimize: Any = None) -> Array:
    """NumPy ``einsum`` with static subscripts, lowered to diagonals, sums,
    ``dot_general`` (left to right, one per operand pair) and a transpose.
    Contractions run through NumPy's matmul, so sums may be ordered unlike
    NumPy's own ``einsum`` loops (ulp-level differences)."""
    inputs, output = _parse_subscripts(subscripts, len(operands))
    terms = [_einsum_operand(op, labels, inputs, output, i)
             for i, (op, labels) in enumerate(zip(operands, inputs))]
    value, labels = terms[0]
    for i, (other, other_labels) in enumerate(terms[1:], start=1):
        later = set(output).union(*[set(s) for s in inputs[i + 1:]])
        value, labels = _einsum_pair(value, labels, other, other_labels, later)
    value, labels = _sum_labels(value, labels, set(output))
    return transpose(value, [labels.index(c) for c in output])


def _parse_subscripts(subscripts: str, count: int):
    spec = subscripts.replace(" ", "")
    left, arrow, right = spec.partition("->")
    inputs = left.split(",")
    letters = "".join(inputs) + right
    if "." in letters or not builtins.all(c.isalpha() for c in letters) or len(inputs) != count:
        raise ValueError(f"einsum at {user_where()}: cannot read {subscripts!r} for {count} "
                         f"operand(s); {SUBSCRIPTS}")
    if not arrow:
        counts = {c: left.count(c) for c in left if c != ","}
        right = "".join(sorted(c for c, n in counts.items() if n == 1))
    if len(set(right)) != len(right) or builtins.any(c not in left for c in right):
        raise ValueError(f"einsum at {user_where()}: output {right!r} repeats a letter or "
                         f"names one no operand has; {SUBSCRIPTS}")
    return inputs, right


def _einsum_operand(x, labels: str, inputs, output: str, position: int):
    """One operand with repeated letters reduced to diagonals and letters no
    other term needs summed out."""
    x = _operand(x, "einsum")
    if len(labels) != len(_shape_of(x)):
        raise ShapeError(f"einsum at {user_where()}: operand {position} has rank "
                         f"{len(_shape_of(x))} but subscripts {labels!r}")
    labels = list(labels)
    for c in dict.fromkeys(labels):
        while labels.count(c) > 1:
            first = labels.index(c)
            second = labels.index(c, first + 1)
            x = diagonal(x, 0, first, second)
            labels = [d for i, d in enumerate(labels) if i not in (first, second)] + [c]
    others = set(output).union(*[set(s) for i, s in enumerate(inputs) if i != position])
    return _sum_labels(x, labels, others)


def _sum_labels(x, labels, keep: set):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, list(labels)
    return sum(x, axes), [c for c in labels if c in keep]


def _einsum_pair(a, la, b, lb, later: set):
    """One ``dot_general``: shared letters needed later are batch axes, the
    other shared letters are contracted."""
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in later]
    contracting = [c for c in shared if c not in later]
    for c in shared:
        if _shape_of(a)[la.index(c)] != _shape_of(b)[lb.index(c)]:
            raise ShapeError(f"einsum at {user_where()}: letter {c!r} has sizes "
                             f"{_shape_of(a)[la.index(c)]} and {_shape_of(b)[lb.index(c)]}")
    dtype, _ = _result_dtype("einsum", (a, b))
    a, b = _same_recording([_to(a, dtype), _to(b, dtype)])
    def positions(letters):
        return tuple(la.index(c) for c in letters), tuple(lb.index(c) for c in letters)

    out = bind(Op.DOT_GENERAL, a, b, contracting=positions(contracting), batch=positions(batch))
    free_a = [c for c in la if c not in shared]
    free_b = [c for c in lb if c not in shared]
    return out, batch + free_a + free_b


def array(object: ArrayLike, dtype: DTypeLike = None) -> Array:  # noqa: A002 - NumPy's name
    """NumPy ``array``: ``asarray`` (values are never mutated, so no copy); nested
    lists holding traced values are stacked level by level."""
    if _holds_tracer(object):
        return stack([array(v, dtype) for v in object])
    return asarray(object, dtype)


def _holds_tracer(obj) -> bool:
    return isinstance(obj, (list, tuple)) and builtins.any(
        isinstance(v, Tracer) or _holds_tracer(v) for v in obj)


LOG2E = 1.4426950408889634  # NumPy's NPY_LOG2E
copysign = _binary(Op.COPYSIGN, "copysign", float_only=True)


def signbit(x: ArrayLike) -> Array:
    """NumPy ``signbit``: the sign bit (set for -0.0 and negative NaNs)."""
    dtype, _ = dtype_of(x, "signbit")
    if dtype not in _dt.FLOATS:
        return less(x, 0)
    return less(copysign(1.0, x), 0.0)


def heaviside(x1: ArrayLike, x2: ArrayLike) -> Array:
    """NumPy ``heaviside``: 0 below zero, 1 above, ``x2`` at zero, NaN at NaN."""
    x1 = _float(x1, "heaviside")
    step = where(less(x1, 0.0), 0.0, where(greater(x1, 0.0), 1.0, x2))
    return where(isnan(x1), x1, step)


def deg2rad(x: ArrayLike) -> Array:
    """NumPy ``deg2rad``: ``x * (pi / 180)``."""
    return multiply(_float(x, "deg2rad"), math.pi / 180.0)


def rad2deg(x: ArrayLike) -> Array:
    """NumPy ``rad2deg``: ``x * (180 / pi)``."""
    return multiply(_float(x, "rad2deg"), 180.0 / math.pi)


radians, degrees = deg2rad, rad2deg


def sinc(x: ArrayLike) -> Array:
    """NumPy ``sinc``: ``sin(pi y) / (pi y)`` with y = 1e-20 at 0, as NumPy."""
    x = _float(x, "sinc")
    y = multiply(math.pi, where(equal(x, 0.0), 1.0e-20, x))
    return divide(sin(y), y)


def logaddexp2(x1: ArrayLike, x2: ArrayLike) -> Array:
    """log2(2**x1 + 2**x2) without overflow (see ``logaddexp``)."""
    x1, x2 = _float(x1, "logaddexp2"), _float(x2, "logaddexp2")
    delta = subtract(x1, x2)
    tail = multiply(log1p(exp2(negative(abs(delta)))), LOG2E)  # 1 exactly at delta = 0
    return where(isnan(delta), add(x1, x2), add(maximum(x1, x2), tail))


def inner(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy ``inner``: the last axes contracted (one ``dot_general``)."""
    if not _shape_of(a) or not _shape_of(b):
        return multiply(a, b)
    return tensordot(a, b, ((len(_shape_of(a)) - 1,), (len(_shape_of(b)) - 1,)))


def vdot(a: ArrayLike, b: ArrayLike) -> Array:
    """NumPy ``vdot`` of real arrays: ``dot(ravel(a), ravel(b))``."""
    return dot(ravel(a), ravel(b))


def identity(n: int, dtype: DTypeLike = float64) -> Array:
    """NumPy ``identity``: ``eye(n)``."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike = float64) -> Array:
    """NumPy ``tri`` (a constant: its shape is static)."""
    return asarray(np.tri(N, M, k), _dt.canonical(dtype))


def empty(shape: Shape, dtype: DTypeLike = float64) -> Array:
    """Zeros: isokernel has no uninitialized memory."""
    return zeros(shape, dtype)


def empty_like(x: ArrayLike, dtype: DTypeLike = None) -> Array:
    """Zeros like ``x``: isokernel has no uninitialized memory."""
    return zeros_like(x, dtype)


def count_nonzero(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy ``count_nonzero``: an int64 count of the nonzero elements."""
    dtype, _ = dtype_of(a, "count_nonzero")
    return sum(a if dtype == bool_ else not_equal(a, 0), axis, keepdims)


def ptp(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy ``ptp``: ``max - min``."""
    return subtract(max(a, axis, keepdims), min(a, axis, keepdims))


def nansum(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy ``nansum``: NaNs replaced by 0, then ``sum``."""
    a = _operand(a, "nansum")
    dtype, _ = dtype_of(a, "nansum")
    return sum(where(isnan(a), 0, a) if dtype in _dt.FLOATS else a, axis, keepdims)


def nanmean(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy ``nanmean``: the sum of the non-NaN elements over their count."""
    a = _float(_operand(a, "nanmean"), "nanmean")
    count = sum(logical_not(isnan(a)), axis, keepdims)
    return divide(nansum(a, axis, keepdims), astype(count, dtype_of(a, "nanmean")[0]))


def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike = None,
            keepdims: bool = False) -> Array:
    """NumPy ``average``: ``mean``, or ``sum(a * w) / sum(w)`` with weights
    (1-D weights lie along ``axis``)."""
    if weights is None:
        return mean(a, axis, keepdims)
    a = _float(_operand(a, "average"), "average")
    w = _operand(weights, "average")
    rank = len(_shape_of(a))
    if len(_shape_of(w)) == 1 and rank > 1 and axis is not None:
        shape = [1] * rank
        shape[_axis1(axis, rank, "average")] = _shape_of(w)[0]
        w = reshape(w, shape)
    total = sum(broadcast_to(w, _shape_of(a)), axis, keepdims)
    return divide(sum(multiply(a, w), axis, keepdims), total)


# ------------------------------------------------ operators and methods on tracers

def _swapped(fn):
    return lambda self, other: fn(other, self)


def _shape_args(args: tuple):
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _install_array_methods() -> None:
    """Python operators and ndarray-style methods on tracers, each one
    frontend function (set here: ``tracer.py`` sits below the frontend)."""
    ops = {
        "add": add, "sub": subtract, "mul": multiply, "truediv": divide,
        "floordiv": floor_divide, "mod": remainder, "pow": power,
        "matmul": matmul, "and": bitwise_and, "or": bitwise_or,
        "xor": bitwise_xor, "lshift": left_shift, "rshift": right_shift,
    }
    # an overlay operand (a quantity) takes the operator: NotImplemented asks its reflection
    overlays = _overlay.TYPES
    for name, fn in ops.items():
        setattr(Tracer, f"__{name}__", lambda self, other, fn=fn:
                NotImplemented if type(other) in overlays else fn(self, other))
        setattr(Tracer, f"__r{name}__", _swapped(fn))
    compare = {"lt": less, "le": less_equal, "gt": greater, "ge": greater_equal,
               "eq": equal, "ne": not_equal}
    for name, fn in compare.items():
        setattr(Tracer, f"__{name}__", lambda self, other, fn=fn:
                NotImplemented if type(other) in overlays else fn(self, other))
    Tracer.__neg__ = negative
    Tracer.__pos__ = positive
    Tracer.__abs__ = absolute
    Tracer.__invert__ = invert
    Tracer.__getitem__ = getitem
    Tracer.astype = astype
    Tracer.sum, Tracer.prod, Tracer.mean = sum, prod, mean
    Tracer.max, Tracer.min = max, min
    Tracer.clip, Tracer.dot, Tracer.round = clip, dot, round
    Tracer.squeeze, Tracer.ravel, Tracer.flatten = squeeze, ravel, ravel
    Tracer.swapaxes = swapaxes
    Tracer.reshape = lambda self, *shape: reshape(self, _shape_args(shape))
    Tracer.transpose = lambda self, *axes: transpose(self, _shape_args(axes) or None)
    Tracer.T = property(lambda self: transpose(self))


_install_array_methods()
