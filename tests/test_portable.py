"""Portable numerics: the decompositions' accuracy, special values and op
vocabulary; eager == recorded == every strategy bit for bit; the jit option.

The accuracy tests sample each function's documented domain with the same
samplers and reference as benchmarks/ulp_table.py (the thorough run), with
fewer points: float32 against NumPy's float64 functions, float64 against
mpmath.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import all_strategies
from isokernel.ir import Op
from isokernel.pipeline import CallKey
from isokernel.record import portable
from isokernel.record.portable import BASIC_OPS, LOWERINGS, numerics

from .conftest import assert_contract
from .test_random_programs import frontend_only, make_inputs, programs, run_program

_PATH = pathlib.Path(__file__).parents[1] / "benchmarks" / "ulp_table.py"
_SPEC = importlib.util.spec_from_file_location("ulp_table", _PATH)
ulp_table = sys.modules.setdefault("ulp_table", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(ulp_table)

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
NAMES = list(ulp_table.FUNCTIONS)
UNARY = [n for n in NAMES if ulp_table.FUNCTIONS[n].arity == 1]
ONE_ULP = {"exp", "log", "sin", "cos"}


def test_every_transcendental_of_the_frontend_is_lowered():
    from isokernel.ir.ops import TRANSCENDENTAL
    assert set(LOWERINGS) == set(TRANSCENDENTAL)
    assert {f.name for f in ulp_table.FUNCTIONS.values()} >= {
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
        "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan", "arctan2", "arcsinh",
        "arccosh", "arctanh", "power", "cbrt"}


def test_stated_bounds_are_the_contract():
    for name, fn in ulp_table.FUNCTIONS.items():
        assert fn.bound == (1.0 if name in ONE_ULP else 2.0), name


# ------------------------------------------------------------- accuracy

@pytest.mark.parametrize("name", NAMES)
def test_float32_accuracy_within_bound(name):
    fn = ulp_table.FUNCTIONS[name]
    worst, at, count = ulp_table.measure(fn, F32, 4000, seed=1)
    assert count > 4000
    assert worst <= fn.bound, f"{name} float32: {worst:.3f} ulp at {at}"


@pytest.mark.parametrize("name", NAMES)
def test_float64_accuracy_within_bound(name):
    pytest.importorskip("mpmath")
    fn = ulp_table.FUNCTIONS[name]
    worst, at, count = ulp_table.measure(fn, F64, 400, seed=2)
    assert count > 400
    assert worst <= fn.bound, f"{name} float64: {worst:.3f} ulp at {at}"


def test_the_error_measure_can_fail():
    """A deliberately wrong result (one ulp off, then 3) is measured as such."""
    x = np.linspace(0.1, 2.0, 50)
    ref = np.exp(x)
    one_off = np.nextafter(ref.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    assert 0.5 <= np.max(ulp_table._ulps(one_off, ref, F32)) <= 1.5
    assert np.min(ulp_table._ulps(ref * (1 + 3 * 2.0 ** -23), ref, F32)) > 1.4
    assert np.all(np.isinf(ulp_table._ulps(np.full(3, np.nan), np.ones(3), F32)))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_trig_hard_arguments_are_sampled(dtype):
    """The continued-fraction arguments really are close to multiples of π/2."""
    pytest.importorskip("mpmath")
    import mpmath as mp
    x = ulp_table.near_pio2_multiples(dtype, portable._SPECS[dtype].TRIG_MAX)
    big = x[x > 1e3].astype(np.float64)
    with mp.workprec(300):
        r = [abs(mp.mpf(v) - mp.nint(mp.mpf(v) * 2 / mp.pi) * mp.pi / 2) for v in big]
    ulp = np.spacing(big.astype(dtype)).astype(np.float64)
    assert x.size > 100 and float(min(r[i] / ulp[i] for i in range(len(r)))) < 2.0 ** -6


# ------------------------------------------------------- special values

def _specials(dtype):
    fi = np.finfo(dtype)
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
                     fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, fi.max, -fi.max,
                     1e-30, 100.0, -100.0, 3.0, -3.0], dtype=dtype)


def _agree(got, want, dtype, bound=2.0):
    """C99 agreement: NaN where NumPy gives NaN, ±0 and ±inf exactly (sign
    included), other values within the bound."""
    got, want = np.asarray(got, dtype), np.asarray(want, dtype)
    nan = np.isnan(want)
    exact = np.isinf(want) | (want == 0)
    with np.errstate(invalid="ignore"):
        close = np.abs(got.astype(np.float64) - want) <= bound * np.spacing(np.abs(want))
    same_bits = (got == want) & (np.signbit(got) == np.signbit(want))
    ok = np.where(nan, np.isnan(got), np.where(exact, same_bits, close))
    return ok


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", UNARY)
def test_special_values_follow_c99(name, dtype):
    x = _specials(dtype)
    if name in ("sin", "cos", "tan"):
        x = x[np.abs(x) < portable._SPECS[dtype].TRIG_MAX]
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
        with numerics("portable"):
            got = getattr(inp, name)(x)
    ok = _agree(got, want, dtype)
    assert ok.all(), f"{name}: {list(zip(x[~ok], got[~ok], want[~ok]))}"


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", ["power", "arctan2"])
def test_special_pairs_follow_c99(name, dtype):
    base = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5,
                     3.0, -3.0, 2.5, -2.5], dtype=dtype)
    x, y = (a.ravel() for a in np.meshgrid(base, base))
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x, y)
        with numerics("portable"):
            got = getattr(inp, name)(x, y)
    ok = _agree(got, want, dtype)
    assert ok.all(), f"{name}: {list(zip(x[~ok], y[~ok], got[~ok], want[~ok]))}"


@pytest.mark.parametrize("dtype", [F32, F64])
def test_trig_outside_the_reduction_range_is_nan(dtype):
    top = portable._SPECS[dtype].TRIG_MAX
    x = np.array([top, -top * 4, np.finfo(dtype).max], dtype=dtype)
    with numerics("portable"):
        for fn in (inp.sin, inp.cos, inp.tan):
            assert np.isnan(fn(x)).all()
        assert not np.isnan(inp.sin(np.nextafter(x[:1], dtype.type(0)))).any()


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", NAMES)
def test_no_invalid_or_divide_warnings(name, dtype):
    """Discarded select lanes are sanitized: only a genuinely overflowing
    result may raise a floating-point flag."""
    fn = ulp_table.FUNCTIONS[name]
    args = list(fn.sample(np.random.default_rng(3), 200, dtype))
    specials = _specials(dtype)
    if fn.arity == 1:
        args = [np.concatenate([args[0], specials])]
    else:
        grid = [g.ravel() for g in np.meshgrid(specials, specials)]
        args = [np.concatenate([a, g]) for a, g in zip(args, grid)]
    with np.errstate(invalid="raise", divide="raise", over="ignore", under="ignore"):
        fn.portable(*args)


# ------------------------------------------------------------ vocabulary

@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op", sorted(LOWERINGS, key=lambda o: o.value))
def test_decomposition_records_only_basic_ops_in_its_own_dtype(op, dtype):
    names = {Op.POW: "power", Op.ATAN2: "arctan2"}
    fn = getattr(inp, names.get(op, op.value))
    args = [np.ones(5, dtype)] * (2 if op in (Op.POW, Op.ATAN2) else 1)
    graph = ik.verify(ik.jit(fn, strategy="reference", numerics="portable").lower(*args).graph)
    assert graph.ops() - {Op.INPUT} <= BASIC_OPS, graph.ops() - BASIC_OPS
    floats = {n.aval.dtype for n in graph.nodes} - {np.dtype(bool)}
    assert floats == {dtype}, "a float32 decomposition must never compute in float64"


def test_native_numerics_keep_the_primitive():
    graph = ik.jit(inp.exp, strategy="reference").lower(np.ones(3)).graph
    assert Op.EXP in graph.ops()


def test_integer_power_is_not_lowered():
    with numerics("portable"):
        assert inp.power(np.array([2, 3]), np.array([3, 2])).tolist() == [8, 9]
        graph = ik.trace(lambda a, b: inp.power(a, b), np.array([2]), np.array([3]))
    assert Op.POW in graph.ops()


# ------------------------------------------------- one bit pattern everywhere

def _portable_parity(dtype, shapes, steps, seed):
    inputs = make_inputs(dtype, shapes, seed)
    steps = frontend_only(steps)
    with np.errstate(all="ignore"):
        with numerics("portable"):
            eager = run_program(inp, steps, inputs)

        def program(*xs):
            return run_program(inp, steps, xs)
        for strategy in all_strategies():
            if strategy.unavailable_reason() is None:
                out = ik.jit(program, strategy=strategy.name, numerics="portable")(*inputs)
                assert_contract(strategy.name, out, eager)
    return eager


@settings(max_examples=60)
@given(programs())
def test_portable_eager_equals_every_strategy_bit_for_bit(program):
    _portable_parity(*program)


def test_portable_differs_from_native_somewhere():
    """The mode is really switched: NumPy's exp and the decomposition differ
    in the last bit for some inputs."""
    x = np.linspace(-20, 20, 20001)
    with numerics("portable"):
        port = inp.exp(x)
    assert not np.array_equal(port, np.exp(x))
    assert np.max(np.abs(port - np.exp(x)) / np.spacing(np.exp(x))) <= 2


# ---------------------------------------------------------- the jit option

def _model(x):
    return inp.exp(x) * inp.sin(x)


def test_jit_numerics_option_records_the_decomposition_and_reports_it():
    x = np.linspace(0, 1, 7)
    f = ik.jit(_model, strategy="reference", numerics="portable")
    with numerics("portable"):
        eager = _model(x)
    assert f(x).tobytes() == eager.tobytes()
    report = str(f.lower(x).compile().report())
    assert "numerics   portable" in report and "exp: numpy.exp" not in report
    native = str(ik.jit(_model, strategy="reference").lower(x).compile().report())
    assert "numerics   native" in native and "exp: numpy.exp" in native


def test_numerics_is_part_of_the_cache_key():
    x = np.linspace(0, 1, 7)
    f = ik.jit(_model, strategy="reference")
    a = f(x)
    with numerics("portable"):
        b = f(x)
    assert len(f._cache) == 2
    assert a.dtype == b.dtype and f.lower(x).key.numerics == "native"


def test_decorator_sets_a_model_default_that_jit_and_context_override():
    x = np.linspace(-3, 3, 11)
    model = ik.numerics("portable")(_model)
    with numerics("portable"):
        want = _model(x)
    assert model(x).tobytes() == want.tobytes()
    assert ik.jit(model, strategy="reference")(x).tobytes() == want.tobytes()
    assert ik.jit(model, strategy="reference").lower(x).key.numerics == "portable"
    assert ik.jit(model, strategy="reference", numerics="native").lower(x).key.numerics == "native"
    with numerics("native"):
        assert model(x).tobytes() == _model(x).tobytes()


def test_jitted_helper_inside_a_recording_keeps_its_numerics():
    helper = ik.jit(inp.exp, numerics="portable")
    graph = ik.trace(lambda x: helper(x), np.ones(3))
    assert Op.EXP not in graph.ops() and Op.LDEXP in graph.ops()


def test_unknown_numerics_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="'native' uses each platform"):
        ik.jit(_model, numerics="fast")
    with pytest.raises(ValueError, match="portable"):
        ik.numerics("exact")


def test_retrace_message_names_a_numerics_change():
    key = CallKey((), None, (), (), "reference", "native")
    assert "numerics changed from native to portable" in dataclasses.replace(
        key, numerics="portable").changed_from(key, [])


def test_weak_python_scalars_stay_python_scalars():
    with numerics("portable"):
        value = inp.exp(1.0)
    assert isinstance(value, float) and abs(value - np.e) <= np.spacing(np.e)


# ------------------------------------------------- the exponent primitives

@pytest.mark.parametrize("dtype", [F32, F64])
def test_ldexp_is_exact_scaling_rounded_once(dtype):
    from isokernel.ir import EVAL
    fi = np.finfo(dtype)
    low = fi.minexp - fi.nmant  # the exponent of the smallest subnormal
    x = np.array([1.5, 0.75, 0.5, 1.5, 3.0, -1.0, 1.0, 1.0], dtype=dtype)
    n = np.array([low, low, low, 3, 1e6, -1e6, np.nan, 2.7], dtype=dtype)
    with np.errstate(over="ignore"):
        got = EVAL[Op.LDEXP](x, n)
    tiny = fi.smallest_subnormal
    assert got.dtype == dtype
    assert got[:3].tolist() == [2 * tiny, tiny, 0.0]  # ties round to even
    assert got[3] == 12.0 and got[4] == np.inf and got[5] == 0.0 and np.signbit(got[5])
    assert np.isnan(got[6]) and got[7] == 4.0  # a fractional exponent truncates


@pytest.mark.parametrize("dtype", [F32, F64])
def test_logb_is_the_exact_exponent(dtype):
    from isokernel.ir import EVAL
    fi = np.finfo(dtype)
    x = np.array([fi.smallest_subnormal, fi.tiny, 1.0, 1.999, -8.0, 0.0, -np.inf, np.nan],
                 dtype=dtype)
    got = EVAL[Op.LOGB](x)
    assert got.dtype == dtype
    assert got[:5].tolist() == [fi.minexp - fi.nmant, fi.minexp, 0, 0, 3]
    assert got[5] == -np.inf and got[6] == np.inf and np.isnan(got[7])


def test_exponent_ops_refuse_integers():
    from isokernel.record import bind
    for op, args in ((Op.LOGB, (np.array([1, 2]),)),
                     (Op.LDEXP, (np.array([1, 2]), np.array([1, 2]))),
                     (Op.COPYSIGN, (np.array([1, 2]), np.array([1, 2])))):
        with pytest.raises(ik.DTypeError, match="expects float operands"):
            bind(op, *args)


# ------------------------------------------------ the same bits from plain C

_C_BINARY = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/", Op.EQ: "==", Op.NE: "!=",
             Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=", Op.AND: "&&", Op.OR: "||"}
_C_CALL = {Op.ABS: "fabs", Op.SQRT: "sqrt", Op.ROUND: "rint", Op.FLOOR: "floor",
           Op.LOGB: "logb", Op.COPYSIGN: "copysign"}


def _c_constant(value: float, ctype: str) -> str:
    if np.isnan(value):
        return "NAN"
    if np.isinf(value):
        return "-INFINITY" if value < 0 else "INFINITY"
    return value.hex() + ("f" if ctype == "float" else "")


def _c_expr(node, args, ctype, suffix):
    if node.op is Op.CONST:
        return _c_constant(float(node.attrs["value"].value), ctype)
    if node.op is Op.BROADCAST:
        return args[0]
    if node.op in _C_BINARY:
        return f"({args[0]} {_C_BINARY[node.op]} {args[1]})"
    if node.op in _C_CALL:
        return f"{_C_CALL[node.op]}{suffix}({', '.join(args)})"
    if node.op is Op.SELECT:
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if node.op is Op.LDEXP:
        clamp = f"(int)fmin{suffix}(fmax{suffix}({args[1]}, -4096), 4096)"
        return f"(isnan({args[1]}) ? NAN : ldexp{suffix}({args[0]}, {clamp}))"
    return {Op.NEG: f"(-{args[0]})", Op.NOT: f"(!{args[0]})"}[node.op]


def _c_function(name, graph, ctype):
    """One C loop evaluating ``graph`` per element, op by op: the smallest
    faithful C rendering (a check of the contract, not a code generator)."""
    suffix = "f" if ctype == "float" else ""
    names, lines = {}, []
    for i, node in enumerate(graph.nodes):
        names[node] = f"v{i}"
        if node.op is Op.INPUT:
            expr = f"in{node.attrs['index']}[j]"
        else:
            expr = _c_expr(node, [names[x] for x in node.inputs], ctype, suffix)
        kind = "int" if node.aval.dtype == np.dtype(bool) else ctype
        lines.append(f"    {kind} v{i} = {expr};")
    params = ", ".join(f"const {ctype} *in{i}" for i in range(len(graph.inputs)))
    body = "\n".join(lines)
    return (f"void {name}({params}, {ctype} *out, long n) {{\n"
            f"  for (long j = 0; j < n; j++) {{\n{body}\n"
            f"    out[j] = {names[graph.outputs[0]]};\n  }}\n}}\n")


def test_decomposition_as_plain_c_gives_the_same_bits(tmp_path):
    """Compiled by the system C compiler (contraction off, vectorized at -O3),
    the recorded decompositions reproduce the reference bit for bit: the
    contract every strategy's code generation inherits."""
    import ctypes
    import shutil
    import subprocess
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    cases, sources = [], ["#include <math.h>\n"]
    for fname in ("exp", "expm1", "log1p", "sin", "tan", "arctan2", "arcsinh", "cbrt",
                  "power"):
        for dtype, ctype in ((F32, "float"), (F64, "double")):
            fn = ulp_table.FUNCTIONS[fname]
            args = [np.ascontiguousarray(a) for a in
                    fn.sample(np.random.default_rng(5), 1500, dtype)]
            jitted = ik.jit(getattr(inp, fname), strategy="reference", numerics="portable")
            symbol = f"{fname}_{ctype}"
            sources.append(_c_function(symbol, jitted.lower(*args).graph, ctype))
            with np.errstate(all="ignore"):
                cases.append((symbol, args, jitted(*args)))
    (tmp_path / "portable.c").write_text("\n".join(sources))
    library = tmp_path / "portable.so"
    subprocess.run([compiler, "-O3", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC",
                    str(tmp_path / "portable.c"), "-o", str(library), "-lm"], check=True)
    lib = ctypes.CDLL(str(library))
    for symbol, args, want in cases:
        out = np.empty_like(want)
        getattr(lib, symbol)(*(a.ctypes.data_as(ctypes.c_void_p) for a in (*args, out)),
                             ctypes.c_long(out.size))
        assert out.tobytes() == want.tobytes(), symbol
