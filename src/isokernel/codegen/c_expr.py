"""C_EXPR: the C99 expression of every elementwise op, per dtype, matching
NumPy bit for bit wherever the op is an IEEE basic operation.

A rule takes a ``Ctx`` (operand dtype, result dtype, attributes) and the C
expressions of the operands (SSA names or literals) and returns the C
expression of the result, or None when no C expression reproduces NumPy
exactly for those dtypes (the node then runs by the reference rules).

NumPy's semantics, restated:
- integer ``+ - *`` and negation wrap (computed in the unsigned type, since
  signed overflow is undefined in C);
- ``maximum(a, b)`` is ``a`` when ``a > b`` or ``a`` is NaN, else ``b`` (so
  NaN propagates and ``maximum(0., -0.) == -0.``); ``minimum`` likewise;
- ``sign`` of NaN is that NaN and of ±0 is +0;
- float ``floor_divide``/``remainder`` follow ``npy_divmod`` (fmod, then the
  Python sign convention and the snap of the quotient); integer division by
  zero gives 0, and ``MIN // -1`` wraps to MIN;
- a float→integer cast of NaN, ±inf or an out-of-range value gives what
  NumPy's cast loop gives on this CPU: INT_MIN on x86-64 ("integer
  indefinite"), saturation elsewhere (probed once at import);
- integer ``power`` raises for negative exponents in NumPy, which C cannot
  reproduce: it has no rule;
- ``&``, ``|``, ``^``, ``~`` are C's on integers and on bools (0/1 bytes, where
  they are the logical ops; ``~`` of a bool is ``!``); ``<<`` and ``>>`` shift
  in the unsigned type of the operand's width (no undefined behaviour), ``>>``
  arithmetic for signed operands as NumPy's, and a count outside [0, bits)
  gives what NumPy's loops give: 0 for ``<<``, the sign fill for ``>>``;
- ``ldexp``, ``logb`` and ``copysign`` (the exact exponent and sign ops of
  portable numerics) and the table look-up restate ``isokernel.ir.eval``:
  ldexp is IEEE scaleB with the exponent truncated, clamped to ±4096 and a
  NaN exponent giving NumPy's NaN; logb reads the exponent bits; the look-up
  is the reference's clamp, floor and four-rounding lerp with its NaN rules
  written out (C's fmin/fmax would drop a NaN). All are branch-free
  (bit-mask selects, integer and bit operations), so loops over them
  vectorize with AVX2 as with AVX-512.

Host C (``Ctx.host``, ``HOST_HELPERS``) also raises the floating-point flags
NumPy's loops raise, and no others that NumPy's comparisons would not: its
float ordering comparisons are quiet (``ordered``), integer division by
zero raises divide by zero and ``MIN // -1`` overflow (as NumPy's integer
loops do), a float-to-integer cast of NaN, ±inf or an out-of-range value
raises invalid. The CUDA wrappers keep the plain rules (no flags there).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..ir import Op, dtypes

CTYPE = {dtypes.float32: "float", dtypes.float64: "double", dtypes.int32: "int32_t",
         dtypes.int64: "int64_t", dtypes.bool_: "uint8_t"}
UTYPE = {dtypes.int32: "uint32_t", dtypes.int64: "uint64_t"}
SHORT = {dtypes.float32: "f32", dtypes.float64: "f64", dtypes.int32: "i32",
         dtypes.int64: "i64", dtypes.bool_: "b"}


@dataclass(frozen=True)
class Ctx:
    dtype: np.dtype  # operand dtype (the first operand's; SELECT: the branches')
    out: np.dtype  # result dtype
    attrs: dict
    host: bool = False  # CPU host C, whose floating-point flags are read (``HOST_HELPERS``)

    @property
    def ctype(self) -> str:
        return CTYPE[self.out]


def math_name(dtype: np.dtype, name: str) -> str:
    """libm's name for ``name`` at ``dtype``: ``expf`` for float32."""
    return name + "f" if dtype == dtypes.float32 else name


def _float_to_int_style() -> str:
    with np.errstate(all="ignore"):
        probe = np.array([np.nan, np.inf], dtype=np.float64).astype(np.int32)
    return "indefinite" if probe.tolist() == [-(2**31), -(2**31)] else "saturate"


FLOAT_TO_INT = _float_to_int_style()


# --- literals -----------------------------------------------------------------------------

def literal(value, dtype: np.dtype) -> str:
    """An exact C literal: hex floats, bit patterns for NaN and inf."""
    value = np.asarray(value, dtype=dtype)[()]
    if dtype in dtypes.FLOATS:
        if not np.isfinite(value):
            bits = value.view(np.uint32 if dtype == dtypes.float32 else np.uint64)
            return f"isk_bits_{SHORT[dtype]}(0x{int(bits):x}u)"
        mantissa, exponent = float(value).hex().split("p")
        text = f"{mantissa.rstrip('0').rstrip('.')}p{exponent}".replace("0xp", "0x0p")
        if "." not in text:
            text = text.replace("p", ".0p", 1)
        return text + "f" if dtype == dtypes.float32 else text
    if dtype == dtypes.bool_:
        return "1" if value else "0"
    if dtype == dtypes.int64:
        return f"INT64_C({int(value)})" if value != -(2**63) else "INT64_MIN"
    return str(int(value)) if value != -(2**31) else "INT32_MIN"


# --- rules --------------------------------------------------------------------------------

def _wrap(op: str):
    """Integer arithmetic that wraps like NumPy; plain for floats."""
    def rule(t: Ctx, x, y):
        if t.dtype in dtypes.INTS:
            u = UTYPE[t.dtype]
            return f"({t.ctype})(({u}){x} {op} ({u}){y})"
        return f"({x} {op} {y})"
    return rule


def _neg(t: Ctx, x):
    if t.dtype in dtypes.INTS:
        return f"({t.ctype})(({UTYPE[t.dtype]})0 - ({UTYPE[t.dtype]}){x})"
    if x.startswith("-"):  # a negative literal: "--0x1p+0" would be a decrement
        return f"(-({x}))"
    return f"(-{x})"


def _abs(t: Ctx, x):
    if t.dtype in dtypes.INTS:
        return f"({x} < 0 ? {_neg(t, x)} : {x})"
    return f"{math_name(t.dtype, 'fabs')}({x})"


def _pick(dtype, cond: str, x: str, y: str) -> str:
    """``cond ? x : y`` for a float dtype, as the bit-mask select helper:
    GCC threads chains of ``?:`` on related conditions (a class index
    compared with 0, 1, 2 ...; a value's sign) into branches, and a loop
    with branches does not vectorize."""
    return _blend(SHORT[dtype], cond, x, y)


def _sign(t: Ctx, x):
    if t.dtype in dtypes.INTS:
        return f"({t.ctype})(({x} > 0) - ({x} < 0))"
    one, zero = literal(1, t.dtype), literal(0, t.dtype)
    inner = _pick(t.dtype, f"{x} == 0", zero, x)
    z = zero if t.host else "0"
    return _pick(t.dtype, ordered(t, x, ">", z), one,
                 _pick(t.dtype, ordered(t, x, "<", z), f"-{one}", inner))


def _float_only(name: str):
    def rule(t: Ctx, *xs):
        if t.dtype not in dtypes.FLOATS:
            return None
        return f"{math_name(t.dtype, name)}({', '.join(xs)})"
    return rule


def _extreme(cmp: str):
    def rule(t: Ctx, x, y):
        if t.dtype in dtypes.FLOATS:
            return _pick(t.dtype, f"({ordered(t, x, cmp, y)}) | ({x} != {x})", x, y)
        return f"({x} {cmp} {y} ? {x} : {y})"
    return rule


def _helper(name: str):
    """A call to a prelude function, e.g. ``isk_floordiv_f64(x, y)``."""
    def rule(t: Ctx, x, y):
        return f"isk_{name}_{SHORT[t.dtype]}({x}, {y})"
    return rule


def _float_helper(name: str):
    """A call to a one-operand prelude function on floats, e.g. ``isk_floor_f64(x)``."""
    def rule(t: Ctx, x):
        if t.dtype not in dtypes.FLOATS:
            return None
        return f"isk_{name}_{SHORT[t.dtype]}({x})"
    return rule


QUIET = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
"""The quiet ordering comparisons of host C (``isk_lt_f64`` ...), by operator."""


def ordered(t: Ctx, x: str, op: str, y: str) -> str:
    """``x op y``. In host C, a float ordering comparison is quiet: C's ``<``
    raises FE_INVALID at a NaN, NumPy's comparisons do not, and the host
    kernel reports its flags to NumPy's error state."""
    if t.host and op in QUIET and t.dtype in dtypes.FLOATS:
        return f"isk_{QUIET[op]}_{SHORT[t.dtype]}({x}, {y})"
    return f"{x} {op} {y}"


def _compare(op: str):
    return lambda t, x, y: f"(uint8_t)({ordered(t, x, op, y)})"


def _cast(t: Ctx, x, *, dtype=None):
    src, dst = t.dtype, t.out
    if src == dst:
        return x
    if dst == dtypes.bool_:
        return f"(uint8_t)({x} != 0)"
    if src in dtypes.FLOATS and dst in dtypes.INTS:
        return f"isk_{SHORT[src]}_to_{SHORT[dst]}({x})"
    return f"({CTYPE[dst]}){x}"


def _bitwise(op: str):
    """``&``, ``|``, ``^``: C's operators, on integers and on 0/1 bool bytes
    alike (no short-circuit branch, so loops over them vectorize)."""
    def rule(t: Ctx, x, y):
        if t.dtype in dtypes.FLOATS:
            return None
        return f"({t.ctype})({x} {op} {y})"
    return rule


def _invert(t: Ctx, x):
    if t.dtype in dtypes.FLOATS:
        return None
    if t.dtype == dtypes.bool_:
        return f"(uint8_t)(!{x})"
    return f"({t.ctype})(~{x})"


def _shift(name: str):
    """``<<``/``>>``: prelude helpers in the unsigned type (``isk_shl_i32`` ...)."""
    def rule(t: Ctx, x, y):
        if t.dtype not in dtypes.INTS:
            return None
        return f"isk_{name}_{SHORT[t.dtype]}({x}, {y})"
    return rule


def _exponent_op(name: str):
    """ldexp and logb: prelude helpers (no libm call, so they vectorize)."""
    def rule(t: Ctx, *xs):
        if t.dtype not in dtypes.FLOATS:
            return None
        return f"isk_{name}_{SHORT[t.dtype]}({', '.join(xs)})"
    return rule


def table_name(attrs: dict, dtype: np.dtype) -> str:
    """The C name of a table's data in ``dtype``: a digest of the table's
    name and values (their dtype and shape too), so two look-ups into one
    table share one array, and two tables (equal values under two names
    included: each array's comment names its table) never share a name."""
    values = attrs["values"].value
    key = f"{attrs['name']}\0{values.dtype.str}\0{values.shape}\0".encode()
    digest = hashlib.sha1(key + values.tobytes()).hexdigest()[:12]
    return f"isk_tab_{digest}_{SHORT[dtype]}"


def table_data(attrs: dict, dtype: np.dtype) -> str:
    """The table's values, rounded to ``dtype`` as the reference rounds
    them, as a static array of exact literals (layers one after another)."""
    values = attrs["values"].value
    items = [literal(v, dtype) for v in values.astype(dtype).ravel()]
    rows = [", ".join(items[k:k + 6]) for k in range(0, len(items), 6)]
    body = ",\n    ".join(rows)
    return (f"/* table '{attrs['name']}': {values.shape[0]} layer(s) x {values.shape[1]} "
            f"nodes */\nstatic const {CTYPE[dtype]} {table_name(attrs, dtype)}"
            f"[{values.size}] = {{\n    {body}\n}};\n")


def _table_lookup(t: Ctx, x, layer):
    if t.dtype not in dtypes.FLOATS or t.attrs["mode"] != "exact":
        return None
    layers, nodes = t.attrs["values"].value.shape
    return (f"isk_lookup_{SHORT[t.dtype]}({table_name(t.attrs, t.dtype)}, {layers}, {nodes}, "
            f"{literal(t.attrs['x0'], t.dtype)}, {literal(t.attrs['step'], t.dtype)}, "
            f"{x}, {layer})")


def _select(t: Ctx, c, x, y):
    if t.out in dtypes.FLOATS:
        return f"isk_select_{SHORT[t.out]}({c}, {x}, {y})"
    return f"({c} ? {x} : {y})"


MATH = {
    Op.SQRT: "sqrt", Op.CBRT: "cbrt", Op.EXP: "exp", Op.EXP2: "exp2", Op.EXPM1: "expm1",
    Op.LOG: "log", Op.LOG2: "log2", Op.LOG10: "log10", Op.LOG1P: "log1p", Op.SIN: "sin",
    Op.COS: "cos", Op.TAN: "tan", Op.ASIN: "asin", Op.ACOS: "acos", Op.ATAN: "atan",
    Op.SINH: "sinh", Op.COSH: "cosh", Op.TANH: "tanh", Op.ASINH: "asinh", Op.ACOSH: "acosh",
    Op.ATANH: "atanh", Op.POW: "pow", Op.ATAN2: "atan2", Op.ROUND: "rint",
}
"""libm functions by op (float64 names; float32 adds ``f``). ``rint`` is
NumPy's ``round`` (half to even in the default rounding mode)."""

C_EXPR = {
    **{op: _float_only(name) for op, name in MATH.items()},
    Op.NEG: _neg,
    Op.ABS: _abs,
    Op.SIGN: _sign,
    Op.NOT: _invert,
    Op.CAST: _cast,
    Op.ADD: _wrap("+"),
    Op.SUB: _wrap("-"),
    Op.MUL: _wrap("*"),
    Op.DIV: lambda t, x, y: f"({x} / {y})",
    Op.MAX: _extreme(">"),
    Op.MIN: _extreme("<"),
    Op.FLOORDIV: _helper("floordiv"),
    Op.REM: _helper("rem"),
    Op.EQ: _compare("=="),
    Op.NE: _compare("!="),
    Op.LT: _compare("<"),
    Op.LE: _compare("<="),
    Op.GT: _compare(">"),
    Op.GE: _compare(">="),
    Op.AND: _bitwise("&"),
    Op.OR: _bitwise("|"),
    Op.XOR: _bitwise("^"),
    Op.SHIFT_LEFT: _shift("shl"),
    Op.SHIFT_RIGHT: _shift("shr"),
    Op.SELECT: _select,
    # floor, ceil and trunc as rint corrected (prelude helpers): GCC vectorizes rint but
    # not floor/ceil/trunc under -ftrapping-math
    Op.FLOOR: _float_helper("floor"),
    Op.CEIL: _float_helper("ceil"),
    Op.TRUNC: _float_helper("trunc"),
    Op.LDEXP: _exponent_op("ldexp"),
    Op.LOGB: _exponent_op("logb"),
    Op.COPYSIGN: _float_only("copysign"),
    Op.TABLE_LOOKUP: _table_lookup,
    # complex values have no C form yet: the strategies run them by the reference rules
    **{op: (lambda t, *xs: None) for op in (Op.REAL, Op.IMAG, Op.CONJ, Op.COMPLEX)},
    # reductions: the expression that combines two partial results
    Op.REDUCE_SUM: _wrap("+"),
    Op.REDUCE_PROD: _wrap("*"),
    Op.REDUCE_MAX: _extreme(">"),
    Op.REDUCE_MIN: _extreme("<"),
}

REDUCE_IDENTITY = {Op.REDUCE_SUM: 0, Op.REDUCE_PROD: 1}
"""NumPy starts ``add.reduce`` and ``multiply.reduce`` from the identity and
``maximum``/``minimum.reduce`` from the first element."""

TRANSCENDENTAL_NAMES = frozenset(
    name for op, name in MATH.items()
    if op not in (Op.SQRT, Op.ROUND))


# --- the prelude: helpers the expressions call --------------------------------------------

def _plain(x: str, op: str, y: str) -> str:
    return f"{x} {op} {y}"


def _quiet(s: str):
    """Ordering comparisons of host C helpers: ``isk_lt_f64(x, y)`` ..."""
    return lambda x, op, y: f"isk_{QUIET[op]}_{s}({x}, {y})"


def _divmod_helpers(s: str, t: str, cmp=_plain) -> str:
    f = "f" if t == "float" else ""
    return f"""\
ISK_INLINE {t} isk_divmod_{s}({t} a, {t} b, {t} *mod_out)
{{  /* npy_divmod: fmod, the Python sign convention, the snapped quotient */
    {t} mod = fmod{f}(a, b);
    {t} div = (a - mod) / b;
    {t} floordiv;
    if (mod != 0) {{
        if (({cmp("b", "<", "0")}) != ({cmp("mod", "<", "0")})) {{ mod += b; div -= 1; }}
    }} else {{
        mod = copysign{f}(({t})0, b);
    }}
    if (div != 0) {{
        floordiv = floor{f}(div);
        if ({cmp("div - floordiv", ">", f"({t})0.5")}) floordiv += 1;
    }} else {{
        floordiv = copysign{f}(({t})0, a / b);
    }}
    *mod_out = mod;
    return floordiv;
}}
ISK_INLINE {t} isk_floordiv_{s}({t} a, {t} b)
{{
    {t} mod;
    return b == 0 ? a / b : isk_divmod_{s}(a, b, &mod);
}}
ISK_INLINE {t} isk_rem_{s}({t} a, {t} b)
{{
    {t} mod;
    if (b == 0) return fmod{f}(a, b);
    isk_divmod_{s}(a, b, &mod);
    return mod;
}}
"""


def _int_division_helpers(s: str, t: str, u: str, lo: str = "", flags: bool = False) -> str:
    """NumPy's integer floor division and remainder; with ``flags`` (host C)
    they also raise NumPy's flags: divide by zero for ``x // 0`` and
    ``x % 0``, overflow for ``MIN // -1``."""
    divide = "{ feraiseexcept(FE_DIVBYZERO); return 0; }" if flags else "return 0;"
    wrap = f"({t})(({u})0 - ({u})a)"
    negate = (f"{{ if (a == {lo}) feraiseexcept(FE_OVERFLOW); return {wrap}; }}" if flags
              else f"return {wrap};")
    remainder_zero = (f"if (b == 0) {divide}\n    if (b == -1) return 0;" if flags
                      else "if (b == 0 || b == -1) return 0;")
    return f"""\
ISK_INLINE {t} isk_floordiv_{s}({t} a, {t} b)
{{  /* NumPy: x // 0 == 0, MIN // -1 wraps to MIN, rounds toward -inf */
    if (b == 0) {divide}
    if (b == -1) {negate}
    {t} q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}
ISK_INLINE {t} isk_rem_{s}({t} a, {t} b)
{{  /* NumPy: x % 0 == 0; the result takes the divisor's sign */
    {remainder_zero}
    {t} r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}}
"""


_RANGE_NOTE = "  /* NaN, inf, out of range: FE_INVALID, as NumPy's cast */"


def _cast_helper(src: str, dst: str, t: str, lo: str, hi: str, bits: int,
                 flags: bool = False) -> str:
    """Float to integer as NumPy does it on this CPU. Branch-free: only
    in-range values reach the conversion (an out-of-range one is undefined in
    C), so GCC can if-convert and vectorize loops that contain it. With
    ``flags`` (host C) the range test raises FE_INVALID for NaN, ±inf and
    out-of-range values, as NumPy's cast loop does: the square root of a
    negative number raises it, a NaN reaching the (signaling) comparison
    too, and neither costs a branch."""
    limit = f"{2.0 ** (bits - 1):.1f}"
    below = float(np.nextafter(2.0 ** (bits - 1), 0)).hex()  # the largest double < limit
    ctype = "float" if src == "f32" else "double"
    if FLOAT_TO_INT == "indefinite":
        out = f"{lo}"  # x86 cvtt: NaN, inf, out of range -> MIN
    else:
        out = f"(x != x ? ({t})0 : ((double)x < 0 ? {lo} : {hi}))"  # saturating
    test = f"((double)x >= -{limit}) & ((double)x < {limit})"
    if flags:  # out of range, NaN: a square root of a negative or the compare raises
        test = f"(sqrt({below} - (double)x) + sqrt((double)x + {limit})) >= 0"
    body = (f"const {t} ok = {test};{_RANGE_NOTE if flags else ''}\n"
            f"    const {t} r = ({t})(ok ? x : ({ctype})0);\n"
            f"    const {t} m = -ok;  /* all ones when in range: a blend, not a branch */\n"
            f"    return (r & m) | (({t}){out} & ~m);")
    return f"ISK_INLINE {t} isk_{src}_to_{dst}({ctype} x)\n{{\n    {body}\n}}\n"


def _select_helper(s: str, t: str, u: str) -> str:
    """``c ? a : b`` as bit masks (exact: the chosen operand's bits, NaN
    payloads and signed zeros included); GCC emits a blend."""
    return (f"ISK_INLINE {t} isk_select_{s}(uint8_t c, {t} a, {t} b)\n"
            f"{{\n    union {{ {u} u; {t} f; }} x, y;\n"
            f"    const {u} m = ({u})0 - ({u})c;\n"
            f"    x.f = a;\n    y.f = b;\n    x.u = (x.u & m) | (y.u & ~m);\n"
            f"    return x.f;\n}}\n")


def _shift_helpers(s: str, t: str, u: str, bits: int) -> str:
    """NumPy's ``left_shift`` and ``right_shift`` on a signed integer type,
    computed in the unsigned type of its width: the count is masked into
    [0, bits) (never undefined behaviour) and a count outside [0, bits) is
    then selected away by a mask, as NumPy's ``npy_lshift``/``npy_rshift``
    define it (0, or the sign fill). ``>>`` is arithmetic: the bits are
    complemented around a logical shift when the operand is negative."""
    return f"""\
ISK_INLINE {t} isk_shl_{s}({t} a, {t} b)
{{  /* NumPy: a << b, 0 when b is outside [0, {bits}) */
    const {u} n = ({u})b;
    const {u} keep = ({u})0 - ({u})(n < {bits}u);  /* all ones when in range */
    return ({t})((({u})a << (n & {bits - 1}u)) & keep);
}}
ISK_INLINE {t} isk_shr_{s}({t} a, {t} b)
{{  /* NumPy: a >> b arithmetic, the sign fill when b is outside [0, {bits}) */
    const {u} n = ({u})b;
    const {u} fill = ({u})0 - ({u})(a < 0);  /* all ones when negative */
    const {u} count = n < {bits}u ? n : {bits - 1}u;
    return ({t})(((({u})a ^ fill) >> count) ^ fill);
}}
"""


def _blend(s: str, cond: str, a: str, b: str) -> str:
    """``cond ? a : b`` inside a prelude helper, as the bit-mask select.

    A ``?:`` is a branch until GCC if-converts it, and passes before that
    may move arithmetic into its arms (``x * (c ? k : 1)`` becomes
    ``c ? x * k : x``). Under -ftrapping-math GCC predicates arithmetic in
    an arm only with masked vector instructions (AVX-512's ``.COND_MUL``);
    with AVX2 alone it reports "control flow in loop" and the loop stays
    scalar. Both operands are computed, then one is chosen by its bits, so
    the helpers contain no control flow on any target, and the result is
    the chosen operand exactly (NaN payloads and signed zeros included)."""
    return f"isk_select_{s}((uint8_t)({cond}), {a}, {b})"


def _rounding_helpers(s: str, t: str, cmp=_plain) -> str:
    """floor, ceil and trunc from rint (nearest integer, exact): the nearest
    integer, moved one step when it lies on the wrong side of x; copysign
    gives the result x's sign, as the C functions do (ceil(-0.5) is -0.0).
    Exact for every float: integers, ±0, ±inf and NaN come back as they are
    (the step is selected away for them: NaN, inf and integers never lie on
    the wrong side)."""
    f = "f" if t == "float" else ""
    one = f"1.0{f}"
    return f"""\
ISK_INLINE {t} isk_floor_{s}({t} x)
{{
    const {t} near = rint{f}(x);
    return copysign{f}({_blend(s, cmp("near", ">", "x"), f"near - {one}", "near")}, x);
}}
ISK_INLINE {t} isk_ceil_{s}({t} x)
{{
    const {t} near = rint{f}(x);
    return copysign{f}({_blend(s, cmp("near", "<", "x"), f"near + {one}", "near")}, x);
}}
ISK_INLINE {t} isk_trunc_{s}({t} x)
{{
    return {_blend(s, cmp("x", "<", "0"), f"isk_ceil_{s}(x)", f"isk_floor_{s}(x)")};
}}
"""


def _bits_helper(s: str, t: str, u: str) -> str:
    return (f"ISK_INLINE {t} isk_bits_{s}({u} bits)\n"
            f"{{\n    union {{ {u} u; {t} f; }} v;\n    v.u = bits;\n    return v.f;\n}}\n")


def _ldexp_helper(s: str, t: str, u: str, top: int, low: int, step: int, bits: int,
                  magic: str) -> str:
    """numpy.ldexp with EVAL's exponent rules, by musl's scalbn steps: up to
    two scalings by 2^top (or by 2^-step) bring n into the normal range
    and only the last product can round, so the result is the one correctly
    rounded x·2^n (also in the subnormal range).

    Written so that loops over it vectorize: no control flow (every choice
    is a bit-mask select, ``_blend``) and no float-to-integer conversion
    (GCC turns a conversion of a clamped value into branches, will not
    vectorize truncf under -ftrapping-math, and AVX2 has no double-to-int64
    conversion). The exponent stays an exact small integer in floating
    point: trunc is rint corrected towards zero, each step multiplies by a
    constant selected on n (2^top or 1), and 2^m is built by adding m to a
    magic constant whose low bits then hold m + bias."""
    f = "f" if t == "float" else ""
    nan = "0x7fc00000u" if t == "float" else "0x7ff8000000000000ull"
    one, zero = f"1.0{f}", f"0.0{f}"

    def pick(cond, a, b):
        return _blend(s, cond, a, b)
    return f"""\
ISK_INLINE {t} isk_ldexp_{s}({t} x, {t} nf)
{{  /* n = trunc(clamp(nf, -4096, 4096)); NaN n gives NumPy's NaN */
    const {t} z = {pick("nf == nf", "nf", zero)};
    const {t} lo = {pick(f"z < -4096.0{f}", f"-4096.0{f}", "z")};
    const {t} c = {pick(f"z > 4096.0{f}", f"4096.0{f}", "lo")};
    const {t} near = rint{f}(c);
    const {t} n = {pick(f"fabs{f}(near) > fabs{f}(c)", f"near - copysign{f}({one}, c)", "near")};
    const {t} y = x * {pick(f"n > {top}.0{f}", f"0x1p{top}{f}", one)}
                  * {pick(f"n > {2 * top}.0{f}", f"0x1p{top}{f}", one)}
                  * {pick(f"n < {low}.0{f}", f"0x1p-{step}{f}", one)}
                  * {pick(f"n < {low - step}.0{f}", f"0x1p-{step}{f}", one)};
    const {t} m0 = n - {pick(f"n > {top}.0{f}", f"{top}.0{f}", zero)}
                   - {pick(f"n > {2 * top}.0{f}", f"{top}.0{f}", zero)}
                   + {pick(f"n < {low}.0{f}", f"{step}.0{f}", zero)}
                   + {pick(f"n < {low - step}.0{f}", f"{step}.0{f}", zero)};
    const {t} m1 = {pick(f"m0 > {top}.0{f}", f"{top}.0{f}", "m0")};
    const {t} m = {pick(f"m1 < {low}.0{f}", f"{low}.0{f}", "m1")};
    union {{ {u} u; {t} f; }} scale, nan;
    scale.f = m + ({top}.0{f} + 0x1p{bits}{f});
    scale.u = (scale.u - {magic}) << {bits};
    nan.u = {nan};
    const {t} r = y * scale.f;
    return {pick("nf != nf", "nan.f", "r")};
}}
"""


def _logb_helper(s: str, t: str, u: str, bits: int, bias: int, lift: int, magic: str) -> str:
    """EVAL's logb: the unbiased exponent read from the bits (a subnormal is
    first scaled by 2^lift, exactly), converted to a float exactly by the
    2^mantissa-bits trick; -inf at ±0, +inf at ±inf, x itself at NaN. Both
    readings are computed and one is selected (``_blend``), so no branch."""
    f = "f" if t == "float" else ""
    inf = "0x7f800000u" if t == "float" else "0x7ff0000000000000ull"
    return f"""\
ISK_INLINE {t} isk_logb_{s}({t} x)
{{
    union {{ {u} u; {t} f; }} a, b, e, inf;
    a.f = x;
    a.u &= ~(({u})1 << {bits + (11 if t == "double" else 8)});
    b.f = a.f * 0x1p{lift}{f};
    e.u = ({u}){magic} | (a.u >> {bits});
    const {t} normal = (e.f - 0x1p{bits}{f}) - {bias}.0{f};
    e.u = ({u}){magic} | (b.u >> {bits});
    const {t} tiny = (e.f - 0x1p{bits}{f}) - {bias + lift}.0{f};
    inf.u = {inf};
    {t} r = {_blend(s, f"a.u < (({u})1 << {bits})", "tiny", "normal")};
    r = {_blend(s, "a.f == 0", "-inf.f", "r")};
    r = {_blend(s, "a.f == inf.f", "inf.f", "r")};
    return {_blend(s, "x != x", "x", "r")};
}}
"""


def _lookup_helper(s: str, t: str, u: str, bits: int, magic: str, cmp=_plain) -> str:
    """EVAL's table_lookup, operation for operation, with the same care for
    vectorization as ldexp: every choice a bit-mask select, floor is rint
    corrected downwards, the indices come out of the bits of a magic sum,
    not from a conversion. The layer index floor(clamp(layer, 0, L-1))
    equals clip(trunc(layer), 0, L-1)."""
    f = "f" if t == "float" else ""
    nan = "0x7fc00000u" if t == "float" else "0x7ff8000000000000ull"
    index = "int32_t" if t == "float" else "int64_t"  # one vector width with the floats
    zero = f"({t})0"

    def pick(cond, a, b):
        return _blend(s, cond, a, b)
    return f"""\
ISK_INLINE {t} isk_lookup_{s}(const {t} *table, int32_t layers, int32_t nodes, {t} x0,
                             {t} step, {t} x, {t} layer)
{{  /* u = clamp((x - x0) / step, 0, n-1) as numpy.maximum/minimum (NaN stays) */
    const {t} top = ({t})(nodes - 1), last = ({t})(nodes - 2), deepest = ({t})(layers - 1);
    const {t} q = (x - x0) / step;
    const {t} low = {pick(f"({cmp('q', '>', '0')}) | (q != q)", "q", zero)};
    const {t} u = {pick(f"({cmp('low', '<', 'top')}) | (low != low)", "low", "top")};
    const {t} probe = u + layer;  /* NaN iff either is: u is finite or NaN here */
    const uint8_t bad = probe != probe;
    const {t} us = {pick("bad", zero, "u")};
    const {t} near = rint{f}(us);
    const {t} fl = {pick("near > us", f"near - ({t})1", "near")};
    const {t} i = {pick("fl < last", "fl", "last")};
    const {t} w = u - i;
    const {t} l0 = {pick("bad", zero, "layer")};
    const {t} l1 = {pick("l0 > 0", "l0", zero)};
    const {t} l2 = {pick("l1 < deepest", "l1", "deepest")};
    const {t} lnear = rint{f}(l2);
    const {t} l = {pick("lnear > l2", f"lnear - ({t})1", "lnear")};
    union {{ {u} u; {t} f; }} at_i, at_l, nan;
    at_i.f = i + 0x1p{bits}{f};
    at_l.f = l + 0x1p{bits}{f};
    const {index} at = ({index})(at_l.u - {magic}) * nodes + ({index})(at_i.u - {magic});
    const {t} r = (({t})1 - w) * table[at] + w * table[at + 1];
    nan.u = {nan};
    return {pick("bad", "nan.f", "r")};
}}
"""


HELPERS = {
    "isk_bits_f32": _bits_helper("f32", "float", "uint32_t"),
    "isk_bits_f64": _bits_helper("f64", "double", "uint64_t"),
    "isk_select_f32": _select_helper("f32", "float", "uint32_t"),
    "isk_select_f64": _select_helper("f64", "double", "uint64_t"),
    "isk_floor_f32": _rounding_helpers("f32", "float"),
    "isk_floor_f64": _rounding_helpers("f64", "double"),
    "isk_floordiv_f32": _divmod_helpers("f32", "float"),
    "isk_floordiv_f64": _divmod_helpers("f64", "double"),
    "isk_floordiv_i32": _int_division_helpers("i32", "int32_t", "uint32_t"),
    "isk_floordiv_i64": _int_division_helpers("i64", "int64_t", "uint64_t"),
    "isk_shl_i32": _shift_helpers("i32", "int32_t", "uint32_t", 32),
    "isk_shl_i64": _shift_helpers("i64", "int64_t", "uint64_t", 64),
    **{f"isk_{s}_to_{d}": _cast_helper(s, d, t, lo, hi, bits)
       for s in ("f32", "f64")
       for d, t, lo, hi, bits in (("i32", "int32_t", "INT32_MIN", "INT32_MAX", 32),
                                  ("i64", "int64_t", "INT64_MIN", "INT64_MAX", 64))},
    "isk_ldexp_f32": _ldexp_helper("f32", "float", "uint32_t", 127, -126, 102, 23,
                                   "0x4b000000u"),
    "isk_ldexp_f64": _ldexp_helper("f64", "double", "uint64_t", 1023, -1022, 969, 52,
                                   "0x4330000000000000ull"),
    "isk_logb_f32": _logb_helper("f32", "float", "uint32_t", 23, 127, 25, "0x4b000000u"),
    "isk_logb_f64": _logb_helper("f64", "double", "uint64_t", 52, 1023, 54,
                                 "0x4330000000000000ull"),
    "isk_lookup_f32": _lookup_helper("f32", "float", "uint32_t", 23, "0x4b000000u"),
    "isk_lookup_f64": _lookup_helper("f64", "double", "uint64_t", 52,
                                     "0x4330000000000000ull"),
}
"""Prelude functions by name; the floordiv entry also defines rem (and the
shared divmod), the floor entry ceil and trunc, and the shl entry shr, so
``helper_for`` maps those names to them."""


QUIET_RULE = {"lt": "(isk_key_{s}(x) < isk_key_{s}(y)) & (x != y)",
              "le": "((isk_key_{s}(x) <= isk_key_{s}(y)) | (x == y))",
              "gt": "(isk_key_{s}(x) > isk_key_{s}(y)) & (x != y)",
              "ge": "((isk_key_{s}(x) >= isk_key_{s}(y)) | (x == y))"}


def _compare_helpers(s: str, t: str, u: str, i: str, top: int) -> str:
    """Quiet ``<``, ``<=``, ``>``, ``>=`` (``isk_lt_f64`` ...): 0 when an operand
    is NaN and no FE_INVALID, as NumPy's comparisons. The order is read from
    the bits (``isk_key_f64``): for non-NaN floats, the bits as a signed
    integer with the magnitude bits of negative numbers flipped are in the
    floats' order (-0 just below +0, which ``x == y`` settles). Only ``==``,
    ``!=`` and integer compares remain: none raises at a quiet NaN, and GCC
    if-converts and vectorizes them (not C99's ``isless``: GCC 12 vectorizes
    it as a signaling compare; nor a plain ``<`` of NaN-free operands: GCC
    keeps a compare that may trap behind a branch)."""
    parts = [f"ISK_INLINE {i} isk_key_{s}({t} x)\n"
             f"{{  /* the floats' order as integers: negatives' magnitude bits flipped */\n"
             f"    union {{ {u} u; {t} f; }} v;\n    v.f = x;\n"
             f"    return ({i})v.u ^ ({i})(({u})(({i})v.u >> {top}) >> 1);\n}}\n"]
    for word, rule in QUIET_RULE.items():
        parts.append(f"ISK_INLINE uint8_t isk_{word}_{s}({t} x, {t} y)\n"
                     f"{{  /* quiet: 0 at a NaN, without FE_INVALID */\n"
                     f"    return (uint8_t)((x == x) & (y == y) & {rule.format(s=s)});\n}}\n")
    return "".join(parts)


HOST_HELPERS = {
    **HELPERS,
    "isk_lt_f32": _compare_helpers("f32", "float", "uint32_t", "int32_t", 31),
    "isk_lt_f64": _compare_helpers("f64", "double", "uint64_t", "int64_t", 63),
    "isk_floor_f32": _rounding_helpers("f32", "float", _quiet("f32")),
    "isk_floor_f64": _rounding_helpers("f64", "double", _quiet("f64")),
    "isk_floordiv_f32": _divmod_helpers("f32", "float", _quiet("f32")),
    "isk_floordiv_f64": _divmod_helpers("f64", "double", _quiet("f64")),
    "isk_floordiv_i32": _int_division_helpers("i32", "int32_t", "uint32_t", "INT32_MIN",
                                              flags=True),
    "isk_floordiv_i64": _int_division_helpers("i64", "int64_t", "uint64_t", "INT64_MIN",
                                              flags=True),
    **{f"isk_{s}_to_{d}": _cast_helper(s, d, t, lo, hi, bits, flags=True)
       for s in ("f32", "f64")
       for d, t, lo, hi, bits in (("i32", "int32_t", "INT32_MIN", "INT32_MAX", 32),
                                  ("i64", "int64_t", "INT64_MIN", "INT64_MAX", 64))},
    "isk_lookup_f32": _lookup_helper("f32", "float", "uint32_t", 23, "0x4b000000u",
                                     _quiet("f32")),
    "isk_lookup_f64": _lookup_helper("f64", "double", "uint64_t", 52,
                                     "0x4330000000000000ull", _quiet("f64")),
}
"""The prelude of host C, whose kernels report their floating-point flags
to NumPy's error state (``host.py``): the same functions, with the quiet
comparisons (``isk_lt_f64`` ...) and the flags NumPy's loops raise (integer
division by zero, ``MIN // -1``, float-to-integer casts out of range)."""


def helper_for(name: str) -> str:
    name = name.replace("isk_ceil_", "isk_floor_").replace("isk_trunc_", "isk_floor_")
    for op in ("le", "gt", "ge", "key"):
        name = name.replace(f"isk_{op}_", "isk_lt_")
    name = name.replace("isk_shr_", "isk_shl_")
    return name.replace("isk_rem_", "isk_floordiv_")
