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

import numpy as np

from ..ir import DTypeError, Op, ShapeError, TracerError
from ..ir import dtypes as _dt
from ..ir.source import user_where
from . import portable as _portable
from .tracer import Tracer, as_tracer, bind, current_builder

float32, float64, int32, int64, bool_ = _dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.bool_
pi, e, inf, nan, newaxis = math.pi, math.e, math.inf, math.nan, None

_PY_SCALARS = (bool, int, float)


# ---------------------------------------------------------------- operands

MASKED = ("a NumPy masked array; isokernel computes on plain arrays and would drop its mask "
          "(masked values would be computed as data). Pass x.filled(np.nan) to carry masked "
          "values as NaN, or x.data and the mask separately, combined with inp.where")


def _is_weak_scalar(x) -> bool:
    return isinstance(x, _PY_SCALARS) and not isinstance(x, np.generic)


def _dtype_of(x, name: str) -> tuple[np.dtype, bool]:
    """(dtype, weak) of an operand, rejecting what isokernel cannot compute."""
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
                         f"convert with astype to float32, float64, int32, int64 or bool"
                         ) from None


def _shape_of(x) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def _result_dtype(name: str, operands) -> tuple[np.dtype, bool]:
    """The common dtype of ``operands`` and whether the result is weak."""
    strong, weak = [], []
    for x in operands:
        dtype, is_weak = _dtype_of(x, name)
        (weak if is_weak else strong).append(dtype)
    kinds = list(dict.fromkeys(strong))
    if len(kinds) > 1:
        a, b = kinds[0].name, kinds[1].name
        fix = f"x.astype(inp.{kinds[1].name})" if kinds[1] in _dt.FLOATS else "x.astype(...)"
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


def _prepare(name: str, operands, dtype: np.dtype | None = None):
    """Operands cast to one dtype and broadcast to one shape; also returns
    whether every operand was a weak Python scalar."""
    common, all_weak = _result_dtype(name, operands)
    dtype = dtype or common
    builder = current_builder()
    if builder is not None and any(isinstance(x, Tracer) for x in operands):
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
    decomposition into basic operations (transcendentals only)."""
    if _portable.lowers(op, *operands):
        return _portable.lower(op, *operands)
    return bind(op, *operands)


def _binary(op: Op, name: str, float_only: bool = False):
    def fn(x, y):
        common, _ = _result_dtype(name, (x, y))
        target = _dt.float_of(common) if float_only else None
        (x, y), all_weak = _prepare(name, (x, y), target)
        return _finish(_apply(op, x, y), all_weak)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting."
    return fn


def _unary(op: Op, name: str, float_only: bool = True, ints_identity: bool = False):
    def fn(x):
        dtype, _ = _dtype_of(x, name)
        if ints_identity and dtype in _dt.INTS:
            return x
        target = _dt.float_of(dtype) if float_only else None
        (x,), all_weak = _prepare(name, (x,), target)
        return _finish(_apply(op, x), all_weak)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``; integer operands are computed in float64."
    return fn


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


def positive(x):
    """``+x``: the operand itself."""
    _dtype_of(x, "positive")
    return x


def power(x, y):
    """``x ** y``. Python-scalar exponents 2, 0.5 and -1 take NumPy's own
    fast paths (x*x, sqrt, 1/x), so results match ``ndarray ** y`` bit for bit."""
    if _is_weak_scalar(y) and not isinstance(y, bool) and not _is_weak_scalar(x):
        dtype, _ = _dtype_of(x, "power")
        if y == 2 and dtype != bool_:
            return multiply(x, x)
        if dtype in _dt.FLOATS and y == 1:
            return x
        if dtype in _dt.FLOATS and y == 0.5:
            return sqrt(x)
        if dtype in _dt.FLOATS and y == -1:
            return divide(1.0, x)
    (x, y), all_weak = _prepare("power", (x, y))
    return _finish(_apply(Op.POW, x, y), all_weak)


def square(x):
    return multiply(x, x)


def reciprocal(x):
    return divide(1.0, x)


def round(x, decimals: int = 0):  # noqa: A001 - NumPy's name
    """Round half to even; ``decimals`` as NumPy does it (scale, rint, unscale)."""
    if decimals == 0:
        return rint(x)
    scale = 10.0 ** decimals
    return divide(rint(multiply(x, scale)), scale)


around = round


def hypot(x, y):
    """sqrt(x² + y²) without overflow: scaled by the larger magnitude; an
    infinite operand gives inf even when the other is NaN (C99)."""
    ax, ay = abs(_float(x, "hypot")), abs(_float(y, "hypot"))
    big, small = maximum(ax, ay), minimum(ax, ay)
    ratio = divide(small, where(equal(big, 0.0), 1.0, big))
    h = multiply(big, sqrt(add(1.0, multiply(ratio, ratio))))
    return where(logical_or(equal(ax, inf), equal(ay, inf)), inf, h)


def _float(x, name: str):
    dtype, _ = _dtype_of(x, name)
    return x if dtype in _dt.FLOATS else _to(x, _dt.float64)


def clip(x, a_min=None, a_max=None):
    """``minimum(maximum(x, a_min), a_max)``, either bound optional."""
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def isnan(x):
    dtype, _ = _dtype_of(x, "isnan")
    return not_equal(x, x) if dtype in _dt.FLOATS else _const_like(x, False)


def isinf(x):
    dtype, _ = _dtype_of(x, "isinf")
    return equal(abs(x), inf) if dtype in _dt.FLOATS else _const_like(x, False)


def isfinite(x):
    dtype, _ = _dtype_of(x, "isfinite")
    return less(abs(x), inf) if dtype in _dt.FLOATS else _const_like(x, True)


def _const_like(x, value):
    return full_like(x, value, dtype=bool_)


# ------------------------------------------------------------- logical ops


def _logical(op: Op, name: str):
    def fn(x, y):
        for v in (x, y):
            if _dtype_of(v, name)[0] != bool_:
                raise DTypeError(f"{name} at {user_where()}: expects bool operands, got "
                                 f"{_dtype_of(v, name)[0].name}; compare first, e.g. x > 0")
        (x, y), all_weak = _prepare(name, (x, y))
        return _finish(bind(op, x, y), all_weak)
    fn.__name__ = fn.__qualname__ = name
    return fn


logical_and = _logical(Op.AND, "logical_and")
logical_or = _logical(Op.OR, "logical_or")


def logical_xor(x, y):
    for v in (x, y):
        if _dtype_of(v, "logical_xor")[0] != bool_:
            raise DTypeError(f"logical_xor at {user_where()}: expects bool operands; "
                             f"compare first, e.g. x > 0")
    return not_equal(x, y)


def logical_not(x):
    if _dtype_of(x, "logical_not")[0] != bool_:
        raise DTypeError(f"logical_not at {user_where()}: expects a bool operand; "
                         f"compare first, e.g. x == 0")
    (x,), all_weak = _prepare("logical_not", (x,))
    return _finish(bind(Op.NOT, x), all_weak)


def where(condition, x, y):
    """``x`` where ``condition`` holds, else ``y``. Both sides are computed
    (it is a select, not a branch)."""
    if _dtype_of(condition, "where")[0] != bool_:
        raise DTypeError(f"where at {user_where()}: condition must be bool; "
                         f"compare first, e.g. inp.where(c != 0, x, y)")
    dtype, all_weak = _result_dtype("where", (x, y))
    (x, y), _ = _prepare("where", (x, y), dtype)
    (condition, x, y), _ = _prepare_mixed("where", (condition, x, y))
    return _finish(bind(Op.SELECT, condition, x, y), all_weak)


def _prepare_mixed(name: str, operands):
    """Broadcast operands that already have their dtypes to one shape."""
    builder = current_builder()
    if builder is not None and any(isinstance(x, Tracer) for x in operands):
        operands = [as_tracer(_to(x, _dtype_of(x, name)[0]), builder) for x in operands]
    else:
        operands = [_to(x, _dtype_of(x, name)[0]) for x in operands]
    shape = _common_shape(name, operands)
    return [_broadcast_to_shape(x, shape) for x in operands], False


# -------------------------------------------------------------- conversions


def astype(x, dtype):
    """``x`` converted to ``dtype`` (an explicit cast: the only kind there is)."""
    return _to(x, _dt.canonical(dtype))


def asarray(x, dtype=None):
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    if isinstance(x, np.ma.MaskedArray):
        raise DTypeError(f"asarray at {user_where()}: {MASKED}")
    array = np.asarray(x, dtype=None if dtype is None else _dt.canonical(dtype))
    _dtype_of(array, "asarray")
    return array


def shape(x) -> tuple[int, ...]:
    return tuple(_shape_of(x))


def ndim(x) -> int:
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


def _reduce(op: Op, name: str):
    def fn(x, axis=None, keepdims: bool = False):
        dtype, weak = _dtype_of(x, name)
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


def mean(x, axis=None, keepdims: bool = False):
    """``sum / count`` in the operand's float dtype (NumPy's own definition)."""
    x = _float(x, "mean")
    axes = _axes(axis, len(_shape_of(x)), "mean")
    count = int(np.prod([_shape_of(x)[a] for a in axes], dtype=np.int64))
    return divide(sum(x, axes, keepdims), float(count))


def logsumexp(x, axis=None, keepdims: bool = False):
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


def reshape(x, newshape):
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
    dtype, _ = _dtype_of(x, name)
    return np.asarray(x, dtype=dtype)


def ravel(x):
    return reshape(x, (-1,))


def transpose(x, axes=None):
    rank = len(_shape_of(x))
    perm = tuple(reversed(range(rank))) if axes is None else tuple(
        operator.index(a) % rank if rank else a for a in axes)
    if perm == tuple(range(rank)):
        return x
    return bind(Op.TRANSPOSE, _operand(x, "transpose"), perm=perm)


def swapaxes(x, axis1: int, axis2: int):
    rank = len(_shape_of(x))
    perm = list(range(rank))
    a, b = _axes(axis1, rank, "swapaxes")[0], _axes(axis2, rank, "swapaxes")[0]
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def broadcast_to(x, shape):
    shape = tuple(operator.index(d) for d in ((shape,) if isinstance(shape, int) else shape))
    old = _shape_of(x)
    if len(old) > len(shape) or np.broadcast_shapes(old, shape) != shape:
        raise ShapeError(f"broadcast_to at {user_where()}: cannot broadcast {tuple(old)} "
                         f"to {shape}")
    return _broadcast_to_shape(_operand(x, "broadcast_to"), shape)


def expand_dims(x, axis):
    old = _shape_of(x)
    rank = len(old) + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    axes = _axes(axis, rank, "expand_dims")
    it = iter(old)
    return reshape(x, tuple(1 if i in axes else next(it) for i in range(rank)))


def squeeze(x, axis=None):
    old = _shape_of(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(old) if d == 1)
    else:
        axes = _axes(axis, len(old), "squeeze")
        if any(old[a] != 1 for a in axes):
            raise ShapeError(f"squeeze at {user_where()}: axis {axis} of {tuple(old)} does "
                             f"not have size 1")
    return reshape(x, tuple(d for i, d in enumerate(old) if i not in axes))


def concatenate(arrays, axis=0):
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
    if builder is not None and any(isinstance(x, Tracer) for x in operands):
        return [as_tracer(x, builder) for x in operands]
    return operands


def stack(arrays, axis=0):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"stack at {user_where()}: needs at least one array")
    shapes = {tuple(_shape_of(a)) for a in arrays}
    if len(shapes) != 1:
        raise ShapeError(f"stack at {user_where()}: all arrays need one shape, got "
                         f"{sorted(shapes)}")
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)


def pad(x, pad_width, constant_values=0):
    """Constant padding: ``pad_width`` as NumPy's (an int, a pair, or a pair
    per axis)."""
    old = _shape_of(x)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(old), 2))
    dtype, _ = _dtype_of(x, "pad")
    operands = _same_recording([_operand(x, "pad"), _to(constant_values, dtype)])
    return bind(Op.PAD, *operands, lo=tuple(int(a) for a in widths[:, 0]),
                hi=tuple(int(b) for b in widths[:, 1]), interior=(0,) * len(old))


def flip(x, axis=None):
    axes = _axes(axis, len(_shape_of(x)), "flip")
    return bind(Op.REV, _operand(x, "flip"), axes=axes) if axes else x


def getitem(x, key):
    """Static indexing: integers, slices (any step), ``None`` and ``...``."""
    key = key if isinstance(key, tuple) else (key,)
    static = (int, np.integer, slice, type(None), type(Ellipsis))
    for k in key:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, static):
            raise TracerError(
                f"indexing at {user_where()}: only static integers, slices, None and ... "
                f"are supported; for data-dependent selection use inp.where")
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
    full = all(b == 0 and e == n and s == 1 for b, e, s, n in zip(starts, limits, strides, old))
    if not full:
        x = bind(Op.SLICE, x, start=tuple(starts), limit=tuple(limits), stride=tuple(strides))
    return reshape(x, tuple(out_shape))


# --------------------------------------------------------- linear algebra


def matmul(a, b):
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
    out = bind(Op.DOT_GENERAL, a2, b2, contract=((nb + 1,), (nb,)),
               batch=(tuple(range(nb)), tuple(range(nb))))
    shape_out = batch + tuple(sa[-2:-1]) + tuple(sb[-1:] if len(sb) > 1 else ())
    return reshape(out, shape_out)


def dot(a, b):
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
    return bind(Op.DOT_GENERAL, a, b, contract=((len(sa) - 1,), (cb,)), batch=((), ()))


# ------------------------------------------------------------- constructors


def _shape_arg(shape) -> tuple[int, ...]:
    return tuple(operator.index(d) for d in ((shape,) if isinstance(shape, int) else shape))


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value``. Inside a recording it
    is a broadcast of one scalar, never a materialized constant."""
    shape = _shape_arg(shape)
    dtype = _dt.canonical(dtype) if dtype is not None else _dtype_of(fill_value, "full")[0]
    value = _to(fill_value, dtype)
    if isinstance(value, Tracer) or current_builder() is not None:
        return _broadcast_to_shape(as_tracer(value, current_builder()), shape)
    return np.full(shape, value, dtype=dtype)


def zeros(shape, dtype=float64):
    return full(shape, 0, dtype)


def ones(shape, dtype=float64):
    return full(shape, 1, dtype)


def full_like(x, fill_value, dtype=None):
    return full(_shape_of(x), fill_value, _dtype_of(x, "full_like")[0] if dtype is None else dtype)


def zeros_like(x, dtype=None):
    return full_like(x, 0, dtype)


def ones_like(x, dtype=None):
    return full_like(x, 1, dtype)


def arange(start, stop=None, step=1, dtype=None):
    """NumPy ``arange`` (a constant: its bounds are static)."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return asarray(values, dtype if dtype is not None else _dt.canonical(values.dtype))


def linspace(start, stop, num: int = 50, endpoint: bool = True, dtype=float64):
    """NumPy ``linspace`` (a constant: its bounds are static)."""
    return np.linspace(start, stop, num, endpoint=endpoint, dtype=_dt.canonical(dtype))
