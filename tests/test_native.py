"""The native strategy: generated C compiled by the system compiler.
Bit-identical to the reference for IEEE basic operations (checked on
special values and on Hypothesis programs); each transcendental within the
ulp bound its capsule states; the same bits for every worker count and
slicing; ``fma=True`` changes the bits of ``a*b + c`` and says so;
``auto`` picks native when a compiler exists."""

from __future__ import annotations

import platform
import re
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends import get_strategy
from isokernel.backends.cpu import native
from isokernel.backends.parity import bit_identical, max_ulp
from isokernel.ir import Op

from .test_threads import SAMPLES

pytestmark = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                                reason=f"native: {codegen.unavailable_reason()}")

# --- IEEE basic operations on special values ----------------------------------------------

BINARY = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "maximum": inp.maximum, "minimum": inp.minimum, "floor_divide": inp.floor_divide,
    "remainder": inp.remainder, "less": lambda x, y: x < y, "le": lambda x, y: x <= y,
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
}
FLOAT_BINARY = {"divide": lambda x, y: x / y}
UNARY = {
    "negative": inp.negative, "abs": inp.abs, "sign": inp.sign, "square": inp.square,
}
FLOAT_UNARY = {"sqrt": inp.sqrt, "floor": inp.floor, "ceil": inp.ceil, "rint": inp.rint,
               "trunc": inp.trunc}
CASTS = ["float32", "float64", "int32", "int64", "bool"]


def _pairs(values):
    x, y = np.meshgrid(values, values, indexing="ij")
    return x.ravel(), y.ravel()


def _basic_ops(x, y):
    floats = x.dtype.kind == "f"
    out = [f(x, y) for f in BINARY.values()]
    out += [f(x, y) for f in FLOAT_BINARY.values()] if floats else []
    out += [f(x) for f in UNARY.values()]
    out += [f(x) for f in FLOAT_UNARY.values()] if floats else []
    out += [x.astype(name) for name in CASTS]
    out.append(inp.where(x > y, x * y, x - y))
    return tuple(out)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_basic_ops_bit_identical_on_special_values(dtype):
    x, y = _pairs(SAMPLES[np.dtype(dtype)])
    with np.errstate(all="ignore"):
        want = ik.jit(_basic_ops, strategy="reference")(x, y)
        got = ik.jit(_basic_ops, strategy="native", workers=2)(x, y)
    names = [*BINARY, *(FLOAT_BINARY if "float" in dtype else {}), *UNARY,
             *(FLOAT_UNARY if "float" in dtype else {}), *CASTS, "where"]
    bad = [name for name, a, b in zip(names, got, want) if not bit_identical(a, b)]
    assert bad == []


# --- Hypothesis programs of basic ops -----------------------------------------------------

KINDS = ["add", "sub", "mul", "div", "sqrt", "abs", "neg", "where", "cast", "compare",
         "rowsum", "rowmax", "bcast", "minimum", "floor"]


@st.composite
def basic_programs(draw):
    pixels = draw(st.sampled_from([1, 5, 255, 256, 257, 700]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    steps = [(draw(st.sampled_from(KINDS)), draw(st.integers(0, 99)), draw(st.integers(0, 99)))
             for _ in range(draw(st.integers(1, 8)))]
    return pixels, dtype, steps, draw(st.integers(0, 2**32 - 1)), draw(st.integers(1, 3))


def _basic_step(kind, x, y, p):
    if kind in ("add", "sub", "mul", "div"):
        return {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[kind]
    if kind in ("sqrt", "abs", "neg", "floor"):
        return {"sqrt": inp.sqrt(x), "abs": inp.abs(x), "neg": -x, "floor": inp.floor(x)}[kind]
    if kind == "where":
        return inp.where(x < y, y, x * 0.5)
    if kind == "cast":
        other = inp.float32 if x.dtype == np.float64 else inp.float64
        return (x * 1e3).astype(inp.int32).astype(other).astype(x.dtype)
    if kind == "compare":
        return (x >= y).astype(x.dtype) - (x != y).astype(x.dtype)
    if kind == "rowsum":
        return inp.sum(x, axis=1, keepdims=True) + x
    if kind == "rowmax":
        return inp.max(x, axis=1, keepdims=True) - x
    if kind == "bcast":
        return x * p
    return inp.minimum(x, y)


def _run_basic(steps, x, p):
    pool = [x, x * -2.0]
    for kind, a, b in steps:
        pool.append(_basic_step(kind, pool[a % len(pool)], pool[b % len(pool)], p))
    return pool[-1]


@settings(max_examples=25)
@given(basic_programs())
def test_native_is_bit_identical_on_basic_programs(case):
    pixels, dtype, steps, seed, workers = case
    rng = np.random.default_rng(seed)
    x = (rng.uniform(-3, 3, (pixels, 3)) * rng.choice([1e-3, 1.0, 1e3], (pixels, 3)))
    x, p = x.astype(dtype), rng.uniform(-2, 2, 3).astype(dtype)

    def program(x, p):
        return _run_basic(steps, x, p)
    with np.errstate(all="ignore"):
        want = ik.jit(program, strategy="reference")(x, p)
        got = ik.jit(program, strategy="native", workers=workers)(x, p)
    assert bit_identical(got, want)


# --- transcendentals: the measured bound --------------------------------------------------

DOMAINS = {
    Op.CBRT: ("cbrt", -1e6, 1e6), Op.EXP: ("exp", -80, 80), Op.EXP2: ("exp2", -120, 120),
    Op.EXPM1: ("expm1", -50, 50), Op.LOG: ("log", 1e-30, 1e30), Op.LOG2: ("log2", 1e-30, 1e30),
    Op.LOG10: ("log10", 1e-30, 1e30), Op.LOG1P: ("log1p", -0.999, 1e10),
    Op.SIN: ("sin", -1e4, 1e4), Op.COS: ("cos", -1e4, 1e4), Op.TAN: ("tan", -1e4, 1e4),
    Op.ASIN: ("arcsin", -1, 1), Op.ACOS: ("arccos", -1, 1), Op.ATAN: ("arctan", -1e6, 1e6),
    Op.SINH: ("sinh", -80, 80), Op.COSH: ("cosh", -80, 80), Op.TANH: ("tanh", -20, 20),
    Op.ASINH: ("arcsinh", -1e10, 1e10), Op.ACOSH: ("arccosh", 1, 1e10),
    Op.ATANH: ("arctanh", -0.9999, 0.9999),
}


def _unary_bank(*xs):
    return tuple(getattr(inp, DOMAINS[op][0])(x) for op, x in zip(DOMAINS, xs))


def _binary_bank(base, exponent, y, x):
    return inp.power(base, exponent), inp.arctan2(y, x)


def _sample(lo, hi, dtype, rng, n=20000):
    wide = rng.uniform(lo, hi, n)
    near = rng.uniform(max(lo, -1.0), min(hi, 1.0), n)
    return np.concatenate([wide, near]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendentals_within_their_stated_ulp_bound(dtype):
    rng = np.random.default_rng(7)
    xs = [_sample(lo, hi, dtype, rng) for _, lo, hi in DOMAINS.values()]
    two = [rng.uniform(0, 10, 40000), rng.uniform(-30, 30, 40000),
           rng.uniform(-10, 10, 40000), rng.uniform(-10, 10, 40000)]
    two = [t.astype(dtype) for t in two]
    with np.errstate(all="ignore"):
        want = ik.jit(_unary_bank, strategy="reference")(*xs)
        got = ik.jit(_unary_bank, strategy="native", workers=2)(*xs)
        want += ik.jit(_binary_bank, strategy="reference")(*two)
        got += ik.jit(_binary_bank, strategy="native", workers=2)(*two)
    measured = {op: max_ulp(a, b) for op, a, b in zip([*DOMAINS, Op.POW, Op.ATAN2], got, want)}
    over = {op.value: (ulp, native.ULP_BOUND[op]) for op, ulp in measured.items()
            if ulp > native.ULP_BOUND[op]}
    assert over == {}
    assert set(measured) == set(native.ULP_BOUND)


def test_capsules_state_the_bound():
    compiled = ik.jit(inp.exp, strategy="native").lower(np.ones(10)).compile()
    text = str(compiled.report())
    assert f"max {native.ULP_BOUND[Op.EXP]} ulp vs reference (measured)" in text


def _mixed(x):
    return inp.exp(x) * inp.sin(x) + inp.log1p(x * x)


def test_same_bits_for_every_worker_count_and_slicing():
    x = np.random.default_rng(3).uniform(-2, 2, 5000)
    runs = [ik.jit(_mixed, strategy="native", workers=w)(x) for w in (1, 2, 3, 4)]
    assert all(bit_identical(r, runs[0]) for r in runs)
    prefix = ik.jit(_mixed, strategy="native", workers=3)(x[:1234])
    assert bit_identical(prefix, runs[0][:1234])


# --- contraction, auto, source, what runs outside -----------------------------------------

def _axpy(a, b, c):
    return a * b + c


def test_fma_true_changes_the_bits_and_says_so():
    rng = np.random.default_rng(5)
    a, b, c = (rng.uniform(-1, 1, 4096) for _ in range(3))
    plain = ik.jit(_axpy, strategy="native").lower(a, b, c).compile()
    fused = ik.jit(_axpy, strategy="native", fma=True).lower(a, b, c).compile()
    want = ik.jit(_axpy, strategy="reference")(a, b, c)
    assert bit_identical(plain(a, b, c), want)
    assert not bit_identical(fused(a, b, c), want)
    assert max_ulp(fused(a, b, c), want) > 0
    text = str(fused.report())
    assert "fma        on: FMA contraction allowed (-ffp-contract=fast)" in text
    assert "fma=on (FMA allowed, -ffp-contract=fast)" in text
    assert "-ffp-contract=off" in str(plain.report())


def test_contract_is_the_old_name_of_fma_and_warns():
    rng = np.random.default_rng(5)
    a, b, c = (rng.uniform(-1, 1, 4096) for _ in range(3))
    with pytest.warns(DeprecationWarning, match=r"jit\(contract=...\) is now jit\(fma=...\)"):
        old = ik.jit(_axpy, strategy="native", contract=True)(a, b, c)
    new = ik.jit(_axpy, strategy="native", fma=True)(a, b, c)
    assert old.tobytes() == new.tobytes()
    with pytest.raises(TypeError, match="pass fma= alone"):
        ik.jit(_axpy, strategy="native", contract=True, fma=True)(a, b, c)


def test_auto_picks_native_and_reports_its_contract():
    compiled = ik.jit(_axpy).lower(*(np.ones(8),) * 3).compile()
    text = str(compiled.report())
    assert "strategy   native on cpu (auto: fastest available)" in text
    assert f"contract   {get_strategy('native').contract}" in text
    assert "fma        off (-ffp-contract=off)" in text


def test_source_is_the_generated_c():
    source = ik.jit(inp.exp, strategy="native").lower(np.ones(4)).compile().source()
    assert "ISK_INLINE void isk_exp_r0_point(int64_t i" in source
    assert "= exp(v0);  // %1 exp @ test_native.py:" in source


def _awkward(x, m, k):
    """An integer power (no exact C form), a matrix product and a reduction
    over the pixels: these run whole by the reference rules."""
    return (x @ m) * inp.sum(x) + inp.power(k, k % 3).astype(x.dtype)[:, None]


def test_ops_without_exact_c_run_whole_by_the_reference():
    rng = np.random.default_rng(2)
    x, m, k = rng.uniform(size=(600, 3)), rng.uniform(size=(3, 3)), np.arange(600)
    compiled = ik.jit(_awkward, strategy="native").lower(x, m, k).compile()
    assert bit_identical(compiled(x, m, k), ik.jit(_awkward, strategy="reference")(x, m, k))
    text = str(compiled.report())
    assert "dot_general: numpy.matmul" in text and "pow: numpy.power" in text
    assert "split along axis 0" in text



# --- rows read and written by columns -----------------------------------------------------

def _systems(pixels: int, seed: int = 4):
    """Per-pixel 3x3 matrices (9 interleaved values a pixel) and 3-vectors."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(pixels, 3, 3))
    return m @ np.swapaxes(m, -1, -2) + 3 * np.eye(3), rng.normal(size=(pixels, 3))


def test_per_pixel_solve_reads_its_matrices_by_columns_with_the_reference_bits():
    """The 9 values of a pixel's matrix would keep the block's loop scalar:
    the block copies them into one column per element, and the per-element
    function reads the columns. A row of 3 stays interleaved (GCC
    vectorizes it). Copies change no value: the reference's bits, for
    every worker count and a last partial block."""
    solve = ik.vmap(inp.linalg.solve)
    a, b = _systems(1000)
    want = ik.jit(solve, strategy="reference")(a, b)
    compiled = ik.jit(solve, strategy="native").lower(a, b).compile()
    text = compiled.source()
    assert "isk_c_in1[k * ISK_BLOCK + j] = in1[j * 9 + k];" in text
    assert "const double v0_8 = in1[8 * ISK_BLOCK + i];  // row of %0 input" in text
    assert "const double v1_2 = in0[i * 3 + 2];  // row of %1 input" in text
    assert "isk_c_in0" not in text and "isk_c_out0" not in text
    for workers in (1, 2, 3):
        got = ik.jit(solve, strategy="native", workers=workers)(a, b)
        assert bit_identical(got, want)
    prefix = ik.jit(solve, strategy="native", workers=1)(a[:300], b[:300])
    assert bit_identical(prefix, want[:300])


def _rows_of_six(x, y):
    """Rows of 5 in, rows of 6 out (a concatenation), and a row of 3 out."""
    z = inp.concatenate([x * y[:, :1] - 0.5, inp.sqrt(inp.abs(x[:, :1]))], axis=1)
    return z, x[:, 1:4] / y


def test_outputs_are_written_by_columns_and_copied_back_unchanged():
    """An output row of 6: the per-element function writes columns, the
    block copies them back to rows; NaN payloads, infinities, signed zeros
    and subnormals come through bit for bit."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(777, 5))
    x.ravel()[:8] = [np.nan, -np.inf, np.inf, -0.0, 5e-324, -5e-324, 1e308, -1e-310]
    x.ravel()[8] = np.frombuffer(np.uint64(0x7FF8DEADBEEF0001).tobytes(), np.float64)[0]
    y = rng.normal(size=(777, 3))
    compiled = ik.jit(_rows_of_six, strategy="native").lower(x, y).compile()
    text = compiled.source()
    assert "isk_c_in1[k * ISK_BLOCK + j] = in1[j * 5 + k];" in text  # x: 5 a row
    assert "in0[i * 3 + 2]" in text and "isk_c_in0" not in text  # y: 3 a row
    assert "out0[j * 6 + k] = isk_c_out0[k * ISK_BLOCK + j];" in text
    assert "out1[i * 3 + 0] = " in text  # a row of 3: interleaved, as before
    want = ik.jit(_rows_of_six, strategy="reference")(x, y)
    for got, ref in zip(compiled(x, y), want):
        assert bit_identical(got, ref)


def _three_long_rows(x, y, z):
    return x * 2.0 + y, y - z, z * x


def test_column_arrays_stay_within_the_block_budget():
    """Rows of 63 float64: 126 KiB of columns each a block; two fit the
    256 KiB budget, the third input and the outputs keep their rows."""
    rng = np.random.default_rng(8)
    x, y, z = (rng.normal(size=(300, 63)) for _ in range(3))
    compiled = ik.jit(_three_long_rows, strategy="native").lower(x, y, z).compile()
    text = compiled.source()
    assert "double isk_c_in0[ISK_BLOCK * 63];" in text
    assert "double isk_c_in1[ISK_BLOCK * 63];" in text
    assert "isk_c_in2" not in text and "isk_c_out" not in text
    assert "in2[i * 63 + 62]" in text
    want = ik.jit(_three_long_rows, strategy="reference")(x, y, z)
    for got, ref in zip(compiled(x, y, z), want):
        assert bit_identical(got, ref)


def _gcc() -> codegen.Compiler | None:
    """The strategy's compiler when it is GCC on x86-64."""
    if codegen.unavailable_reason() is not None:
        return None
    cc = codegen.current_compiler()
    said = subprocess.run([cc.path, "-v"], capture_output=True, text=True).stderr
    gcc = any(line.startswith("gcc version") for line in said.splitlines())
    return cc if gcc and platform.machine() == "x86_64" else None


@pytest.mark.skipif(_gcc() is None, reason="GCC on x86-64 (its vectorizer's report)")
def test_the_block_loop_of_a_per_pixel_solve_vectorizes(tmp_path):
    """GCC's own report (``-fopt-info-vec``) on the kernel, compiled with
    the strategy's flags: the block's loop over the rows is vectorized."""
    a, b = _systems(8)
    text = ik.jit(ik.vmap(inp.linalg.solve), strategy="native").lower(a, b).compile().source()
    lines = text.splitlines()
    call = next(k for k, line in enumerate(lines) if "_point(j, in0, isk_c_in1, out0);" in line)
    assert lines[call - 1] == "    for (int64_t j = 0; j < ISK_BLOCK; j++)"
    source = tmp_path / "solve.c"
    source.write_text(text)
    cc = _gcc()
    done = subprocess.run([cc.path, *cc.flags(False), "-fopt-info-vec-optimized", str(source),
                           "-o", str(tmp_path / "solve.so")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert re.search(rf"solve\.c:{call}:\d+: optimized: loop vectorized", done.stderr)


def _quartic_root(c, x0):
    """Newton on c0 + c1 x + ... + c4 x^4 (5 coefficients a pixel), one
    ``while`` per pixel under ``vmap``."""
    def step(state):
        x, _ = state
        p, d = c[4], 0.0 * x
        for k in (3, 2, 1, 0):
            d, p = d * x + p, p * x + c[k]
        return x - p / d, p / d
    return ik.while_loop(lambda s: inp.abs(s[1]) > 1e-12, step, (x0, inp.ones_like(x0)))[0]


def _shrink(v, tol):
    """A carry of 5 a pixel, mixed with its reverse until its first element is small."""
    def step(state):
        w, k = state
        return w * 0.75 + w[::-1] * 0.125, k + 1.0
    def running(state):
        return (inp.abs(state[0][0]) > tol) & (state[1] < 60.0)
    return ik.while_loop(running, step, (v, 0.0 * tol))[0]


def test_staged_block_reads_its_rows_and_carries_by_columns():
    """A staged block's step reads a pixel's 5 coefficients from the
    block's columns, and carries of 5 live in block arrays by columns, so
    the step vectorizes; the reference's bits, tail block included."""
    rng = np.random.default_rng(9)
    c = rng.uniform(-1, 1, (700, 5))
    c[:, 1] += 4.0 * np.sign(c[:, 1])
    v, tol = rng.normal(size=(700, 5)), rng.uniform(1e-3, 1e-1, 700)
    sources = []
    for fn, args in ((_quartic_root, (c, np.zeros(700))), (_shrink, (v, tol))):
        compiled = ik.jit(ik.vmap(fn), strategy="native").lower(*args).compile()
        want = ik.jit(ik.vmap(fn), strategy="reference")(*args)
        assert bit_identical(compiled(*args), want)
        sources.append(compiled.source())
        assert "while (isk_running(isk_l" in sources[-1]
    root, shrink = sources
    assert "isk_c_in1[k * ISK_BLOCK + j] = in1[j * 5 + k];" in root
    assert "_s1s_point(j, isk_c_in1, isk_l1, isk_l2, isk_l3);" in root
    assert "const double a0_4 = out0[4 * ISK_BLOCK + i];  // carry: %" in shrink
    assert "double isk_l1[ISK_BLOCK * 5];  /* between the stages, by columns */" in shrink
    assert "out0[j * 5 + k] = isk_c_out0[k * ISK_BLOCK + j];" in shrink


def test_the_report_says_why_each_op_outside_the_c_runs_whole():
    def model(x, m):
        y = inp.sin(inp.cos(x) * 2.0 + x) * 2.0  # the row regions: most of the work
        return y - inp.mean(y, axis=0), x @ m
    pixels = 2 * native.INLINE_ROWS  # row regions this long keep the pool: staged
    x, m = np.linspace(0.0, 1.0, 3 * pixels).reshape(pixels, 3), np.ones((3, 3))
    lines = dict(ik.jit(model, strategy="native").lower(x, m).compile().report().extra)
    why = lines["not in C"]
    assert "dot_general x1 (no per-row form: this op always runs whole)" in why
    assert f"reduce_sum x1 (its result's axis 0 is not the pixel axis (P = {pixels}))" in why
    assert lines["program"] == (f"staged: row regions and whole ops (not one C program: row "
                                f"regions and contractions batched over {pixels} pixels (> "
                                f"{native.INLINE_ROWS}), most of the work, run in parallel on "
                                f"the pool)")
    everything = dict(ik.jit(lambda a: inp.exp(a) * 2.0, strategy="native")
                      .lower(x).compile().report().extra)
    assert "not in C" not in everything  # one region: nothing runs whole
    assert "the graph is one row region" in everything["program"]


def test_native_compiles_a_small_graph_with_whole_ops_as_one_c_program():
    """Below the pool's threshold a graph of row regions and whole ops (a
    training step's shape) is one C function; ``auto`` (native) picks it, the
    report says so, and the results keep the contract: elementwise bits,
    reductions and contractions within n·eps of the reference."""
    def model(x, m):
        y = inp.sin(x) * 2.0
        return y - inp.mean(y, axis=0), x @ m
    x, m = np.linspace(0.0, 1.0, 3000).reshape(1000, 3), np.linspace(-1.0, 1.0, 9).reshape(3, 3)
    compiled = ik.jit(model).lower(x, m).compile()
    lines = dict(compiled.report().extra)
    assert compiled.lowered.strategy.name == "native"
    assert lines["program"].startswith("the whole graph as one C function")
    assert "not in C" not in lines
    assert {c.provider for c in compiled.plan.by_node.values()} == {"c-whole"}
    got, want = compiled(x, m), ik.jit(model, strategy="reference")(x, m)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e3 * np.finfo(float).eps)
    scalar = dict(ik.jit(lambda a: inp.exp(a) + 1.0, strategy="native")
                  .lower(np.float64(2.0)).compile().report().extra)
    assert scalar["program"].startswith("the whole graph as one C function")
    big = np.ones((native.WHOLE_MAX_REDUCED + 1,))
    staged = dict(ik.jit(lambda a: inp.max(a), strategy="native").lower(big).compile()
                  .report().extra)
    assert f"reads {native.WHOLE_MAX_REDUCED + 1} elements" in staged["program"]
    summed = ik.jit(lambda a: inp.sum(a), strategy="native").lower(big).compile()
    assert dict(summed.report().extra)["program"].startswith("the whole graph as one C")
    assert summed(big) == np.sum(big)  # NumPy's pairwise sum has no size cap
