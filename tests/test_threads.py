"""The threads strategy: bit-identical to the reference for every graph,
dtype, size, tile size and worker count; the INTO rules equal EVAL; graphs
that are not row-independent are split; workers come from the CPU budget
unless ``workers=`` says otherwise."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends.cpu import loops, threads
from isokernel.backends.parity import bit_identical
from isokernel.backends.platform import cpu_budget
from isokernel.codegen.pixel import partition
from isokernel.ir import EVAL, Op, dtypes
from isokernel.ir.ops import COMPARE, LAYOUT, TRANSFORM_ONLY

from .conftest import LIBM_CPU, assert_contract
from .test_random_programs import (
    ALL_KINDS,
    BINARY,
    UNARY,
    _step,
    make_inputs,
    run_program,
)
from .test_random_programs import COMPARE as COMPARE_KINDS

# --- INTO: the reference rules writing into a buffer --------------------------------------

FLOAT_VALUES = np.array([0.0, -0.0, 1.5, -2.5, 3.0, np.inf, -np.inf, np.nan, 1e-310, 7.0,
                         0.25, -7.5, 2.0, 40.0, -1.0, 0.5])
SAMPLES = {
    dtypes.float32: FLOAT_VALUES.astype(np.float32),
    dtypes.float64: FLOAT_VALUES,
    dtypes.int32: np.array([0, 1, -1, 7, -7, 2, 3, -(2**31), 2**31 - 1, 5, -2, 9, 4, 0, 6, -3],
                           dtype=np.int32),
    dtypes.int64: np.array([0, 1, -1, 7, -7, 2, 3, -(2**63), 2**63 - 1, 5, -2, 9, 4, 0, 6, -3],
                           dtype=np.int64),
    dtypes.bool_: np.array([True, False] * 8),
    dtypes.complex128: FLOAT_VALUES + 1j * np.roll(FLOAT_VALUES, 5),
    dtypes.complex64: (FLOAT_VALUES + 1j * np.roll(FLOAT_VALUES, 5)).astype(np.complex64),
}


def _cases(op: Op):
    """(operands, attrs) for every dtype the op accepts."""
    for dtype, values in SAMPLES.items():
        x = values.reshape(4, 4)
        y = np.roll(values, 3).reshape(4, 4)
        try:
            ik.ir.SHAPE[op](*(ik.ir.Aval(x.shape, dtype),) * _arity(op), **_attrs(op, x))
        except (ik.DTypeError, ik.ShapeError, TypeError):
            continue
        yield (x, y, x)[:_arity(op)] if op is not Op.SELECT else (x != 0, x, y), _attrs(op, x)


def _arity(op: Op) -> int:
    if op is Op.SELECT:
        return 3
    return 1 if op in ik.ir.ops.UNARY or op in ik.ir.ops.REDUCE else 2


def _attrs(op: Op, x) -> dict:
    if op is Op.TABLE_LOOKUP:
        return dict(inp.Table(np.cos(np.arange(14.0)).reshape(2, 7), -3.0, 0.75,
                              name="into").attrs())
    if op is Op.CAST:
        return {"dtype": np.dtype(np.int32)}
    if op in ik.ir.ops.REDUCE:
        return {"axes": (1,)}
    return {}


INTO_OPS = sorted(set(threads.INTO) - {Op.PAD, Op.CONCATENATE}, key=lambda op: op.value)


@pytest.mark.parametrize("op", INTO_OPS, ids=lambda op: op.value)
def test_into_rules_equal_eval_bit_for_bit(op):
    checked = 0
    for args, attrs in _cases(op):
        if op is Op.SELECT:
            args = (args[0].astype(bool), args[1], args[2])
        with np.errstate(all="ignore"):
            try:
                want = np.asarray(EVAL[op](*args, **attrs))
            except ValueError:  # integer powers with negative exponents
                continue
            out = np.empty(want.shape, want.dtype)
            threads.INTO[op](*args, out=out, **attrs)
        assert bit_identical(out, want), f"{op.value} {args[-1].dtype}"
        checked += 1
    assert checked > 0


def test_into_layout_rules_equal_eval():
    x = np.arange(12.0).reshape(3, 4)
    pad = {"lo": (0, 1), "hi": (0, 2), "interior": (0, 1)}
    want = EVAL[Op.PAD](x, np.float64(-1.0), **pad)
    out = np.empty_like(want)
    assert bit_identical(threads.INTO[Op.PAD](x, np.float64(-1.0), out=out, **pad), want)
    want = EVAL[Op.CONCATENATE](x, x * 2, axis=1)
    out = np.empty_like(want)
    assert bit_identical(threads.INTO[Op.CONCATENATE](x, x * 2, out=out, axis=1), want)


def test_every_op_has_a_tile_rule_or_is_a_view_or_runs_whole():
    views = set(threads.VIEW_OPS)
    covered = set(threads.INTO) | views | threads.NOT_IN_TILES | TRANSFORM_ONLY
    assert [op.value for op in Op if op not in covered] == []
    assert views <= LAYOUT and not (COMPARE - set(threads.INTO))


# --- Hypothesis programs ------------------------------------------------------------------

@st.composite
def pixel_programs(draw):
    pixels = draw(st.integers(1, 90))
    m = draw(st.integers(1, 4))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shapes = [(pixels, m), (m,), (1, m), (pixels, 1), ()]
    in_shapes = [(pixels, m)] + [draw(st.sampled_from(shapes))
                                 for _ in range(draw(st.integers(0, 2)))]
    steps = [(draw(st.sampled_from(ALL_KINDS)), draw(st.integers(0, 99)),
              draw(st.integers(0, 99)), draw(st.sampled_from([0.5, 2.0, -1.5, 3])))
             for _ in range(draw(st.integers(1, 8)))]
    return (dtype, in_shapes, steps, draw(st.integers(0, 2**32 - 1)),
            draw(st.integers(1, 4)), draw(st.integers(1, 9)))


@settings(max_examples=150)
@given(pixel_programs())
def test_threads_is_bit_identical_to_reference(case):
    dtype, shapes, steps, seed, workers, tile_rows = case
    inputs = make_inputs(dtype, shapes, seed)

    def program(*xs):
        return run_program(inp, steps, xs)
    with np.errstate(all="ignore"):
        want = ik.jit(program, strategy="reference")(*inputs)
        got = ik.jit(program, strategy="threads", workers=workers, tile_rows=tile_rows)(*inputs)
    for a, b in zip(got, want):
        assert bit_identical(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pixels", [1, 2, 7, 1000, 4099])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_tau_omega_bit_identical_at_awkward_sizes(dtype, pixels, workers):
    from isokernel.models.tau_omega import synthetic_inputs, tau_omega
    args = synthetic_inputs(pixels, dtype)
    want = ik.jit(tau_omega, strategy="reference")(*args)
    got = ik.jit(tau_omega, strategy="threads", workers=workers, tile_rows=97)(*args)
    assert all(bit_identical(a, b) for a, b in zip(got, want))


# --- the split, the workers, the errors ---------------------------------------------------

def _centered(x, w):
    """Not row-independent: the mean over the pixels couples every row."""
    y = inp.exp(x) * w
    return inp.sqrt(inp.abs(y - inp.mean(y, axis=0))) + x[::-1]


def test_a_graph_that_is_not_row_independent_is_split_and_still_exact():
    x = np.linspace(-1.0, 1.0, 3001)
    w = np.float64(0.5)
    graph = ik.trace(_centered, x, w)
    part = partition(graph)
    assert not part.row_independent and len(part.regions) == 2
    assert "split along axis 0" in part.describe()
    want = ik.jit(_centered, strategy="reference")(x, w)
    got = ik.jit(_centered, strategy="threads", workers=2, tile_rows=100)(x, w)
    assert bit_identical(got, want)


def test_row_independent_graph_is_one_region():
    graph = ik.trace(lambda x, p: inp.sum(x * p, axis=1) + inp.max(x, axis=1),
                     np.ones((50, 3)), np.ones(3))
    part = partition(graph)
    assert part.row_independent and len(part.regions) == 1


def test_workers_come_from_the_cpu_budget_unless_given():
    x = np.linspace(0.0, 1.0, 100)
    budget = cpu_budget()
    compiled = ik.jit(inp.exp, strategy="threads").lower(x).compile()
    lines = dict(compiled.executable.report_lines())
    assert lines["workers"] == f"{budget.value} ({budget.source})"
    compiled = ik.jit(inp.exp, strategy="threads", workers=3).lower(x).compile()
    assert "3 (workers= option)" in str(compiled.report())
    with pytest.raises(ValueError, match="positive integer"):
        ik.jit(inp.exp, strategy="threads", workers=0)(x)


def test_errstate_reaches_the_workers():
    x = np.zeros(4000)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        ik.jit(lambda v: 1.0 / v, strategy="threads", workers=2, tile_rows=100)(x)


def test_report_and_source_of_threads():
    x = np.linspace(0.0, 1.0, 5000)
    compiled = ik.jit(lambda v: inp.exp(v) * 2.0, strategy="threads", workers=2).lower(x)
    compiled = compiled.compile()
    text = str(compiled.report())
    assert "bit-identical to reference" in text
    assert "numpy.exp strided loop on row tiles (GIL-free C driver)" in text
    assert "region 0: NumPy's strided loops, GIL-free C driver" in text
    assert "fp errors" in text and "np.errstate" in text
    assert "row-independent along axis 0 (5000 rows)" in text
    source = compiled.source()
    assert "loop exp" in source and "# exp @ test_threads.py:" in source


def test_report_and_source_of_the_python_tiles(monkeypatch):
    monkeypatch.setattr(loops, "unavailable_reason", lambda: "no driver (test)")
    x = np.linspace(0.0, 1.0, 5000)
    compiled = ik.jit(lambda v: inp.exp(v) * 2.0, strategy="threads", workers=2).lower(x)
    compiled = compiled.compile()
    text = str(compiled.report())
    assert "numpy.exp on row tiles (out=)" in text and "GIL-free C driver" not in text
    assert "region 0: NumPy ufunc calls from Python (out=); not GIL-free: no driver" in text
    assert "out=" in compiled.source() and "# exp @ test_threads.py:" in compiled.source()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_strategy_meets_its_contract_on_tau_omega(strategy, dtype):
    """Through the shared fixture: the CPU strategies on the forward model;
    native's transcendental (one exp) reaches the outputs within 8 ulp."""
    from isokernel.models.tau_omega import synthetic_inputs, tau_omega

    args = synthetic_inputs(3000, dtype)
    want = ik.jit(tau_omega, strategy="reference")(*args)
    got = ik.jit(tau_omega, strategy=strategy.name)(*args)
    assert_contract(strategy.name, got, want, ulp_bound=_tau_omega_ulp(strategy.name))


def _tau_omega_ulp(name: str) -> int:
    """The one exp's bound, plus 3 for the roundings it passes through."""
    from isokernel.backends.numerics import CUDA_ULP_BOUND
    from isokernel.ir import Op
    if name in LIBM_CPU:
        return 8
    return CUDA_ULP_BOUND[Op.EXP] + 3 if name.startswith("cuda") else 0


# --- the GIL-free path: NumPy's own strided loops called from C ---------------------------

GIL_FREE_KINDS = UNARY + BINARY + COMPARE_KINDS + ["hypot", "clip", "isnan_select", "where_compare",
                                              "scale_weak", "pow_weak", "to_other_float",
                                              "through_bool", "through_int", "square_view"]


def _gil_free_step(x, y, kind, scalar):
    """The elementwise ops, selects and the casts the driver runs itself."""
    other = inp.float32 if x.dtype == np.float64 else inp.float64
    if kind == "to_other_float":  # there and back: both float casts
        return inp.astype(inp.astype(x, other) * scalar, x.dtype)
    if kind == "through_bool":
        return inp.astype(inp.astype(x, bool), x.dtype) + y
    if kind == "through_int":  # bool -> int32 -> int64 -> float
        flags = inp.astype(inp.astype(x > y, inp.int32), inp.int64)
        return inp.astype(flags, x.dtype) * x
    if kind == "square_view":  # a reshape view read by a loop, and a view output
        return inp.reshape(x * x, (x.shape[0], 1))[:, 0] if np.ndim(x) else x * x
    return _step(inp, kind, x, y, scalar)


SPECIALS = {
    np.float64: np.array([0x7FF8000000000123, 0xFFF8000000000000, 0x7FF0000000000001,
                          0x0000000000000001, 0x8000000000000000, 0x7FF0000000000000,
                          0xFFF0000000000000, 0x000FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF],
                         np.uint64).view(np.float64),
    np.float32: np.array([0x7FC00123, 0xFFC00000, 0x7F800001, 0x00000001, 0x80000000,
                          0x7F800000, 0xFF800000, 0x007FFFFF, 0x7F7FFFFF],
                         np.uint32).view(np.float32),
}
"""NaN with a payload, negative NaN, signalling NaN, the smallest
subnormal, -0, ±inf, the largest subnormal, the largest finite value."""


@st.composite
def gil_free_programs(draw):
    pixels = draw(st.integers(1, 90))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shapes = [(pixels,)] + [draw(st.sampled_from([(pixels,), ()]))
                            for _ in range(draw(st.integers(0, 2)))]
    steps = [(draw(st.sampled_from(GIL_FREE_KINDS)), draw(st.integers(0, 99)),
              draw(st.integers(0, 99)), draw(st.sampled_from([0.5, 2.0, -1.5, 3])))
             for _ in range(draw(st.integers(1, 8)))]
    specials = draw(st.lists(st.integers(0, 10**6), max_size=6))
    return (dtype, shapes, steps, draw(st.integers(0, 2**32 - 1)), specials,
            draw(st.integers(1, 4)), draw(st.integers(1, 9)))


def _with_specials(dtype, shapes, seed, picks):
    inputs = make_inputs(dtype, shapes, seed)
    first = inputs[0]
    for k, pick in enumerate(picks):
        first[pick % first.size] = SPECIALS[dtype][k % len(SPECIALS[dtype])]
    return inputs


def _interpret(steps):
    def program(*xs):
        pool = list(xs)
        for kind, a, b, scalar in steps:
            pool.append(_gil_free_step(pool[a % len(pool)], pool[b % len(pool)], kind, scalar))
        return pool[-1], pool[0 if len(pool) < 2 else -2]
    return program


def _warned(fn, args):
    with warnings.catch_warnings(record=True) as seen, np.errstate(all="warn"):
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [str(w.message) for w in seen if w.category is RuntimeWarning]


@settings(max_examples=150)
@given(gil_free_programs())
def test_gil_free_path_is_bit_identical_and_warns_as_the_reference(case):
    """Elementwise programs with selects and casts over special values: the
    region runs on the driver (asserted), gives the reference's bits, and
    the floating-point warnings are the reference's, op by op: in the
    reference's order where the graph is one stage; where an op on whole
    values runs in a stage of its own, the stages' order (the known gap in
    docs/cpu.md: a region's ops warn together)."""
    dtype, shapes, steps, seed, picks, workers, tile_rows = case
    inputs = _with_specials(dtype, shapes, seed, picks)
    program = _interpret(steps)
    reference = ik.jit(program, strategy="reference").lower(*inputs).compile()
    compiled = ik.jit(program, strategy="threads", workers=workers,
                      tile_rows=tile_rows).lower(*inputs).compile()
    want, want_warnings = _warned(reference, inputs)
    got, got_warnings = _warned(compiled, inputs)
    paths = [r.path for r in compiled.executable._runners.values()]
    assert all(p == loops.PATH for p in paths), paths
    assert all(bit_identical(a, b) for a, b in zip(got, want))
    if len(compiled.executable.partition.stages) == 1:
        assert got_warnings == want_warnings
    else:
        assert sorted(got_warnings) == sorted(want_warnings)


def test_gil_free_covers_two_dimensional_rows_and_column_inputs():
    """Rows of several elements: contiguous (P, m) operands take one loop
    call per tile; a (P, 1) column and a scalar broadcast too."""
    x = np.linspace(-2.0, 2.0, 4001 * 3).reshape(4001, 3)
    c = np.linspace(1.0, 2.0, 4001).reshape(4001, 1)

    def f(x, c):
        return inp.where(x > 0.5, inp.exp(x) * 3.0, -x), inp.sqrt(c) + 1.0
    compiled = ik.jit(f, strategy="threads", workers=3, tile_rows=77).lower(x, c).compile()
    assert [r.path for r in compiled.executable._runners.values()] == [loops.PATH]
    want = ik.jit(f, strategy="reference")(x, c)
    assert all(bit_identical(a, b) for a, b in zip(compiled(x, c), want))


@pytest.mark.parametrize(("program", "reason"), [
    (lambda x, p: inp.sum(x * 2.0, axis=1), "reduce_sum"),
    (lambda x, p: x * p, "row by row or buffer"),  # (P, m) times a broadcast row (m,)
    (lambda x, p: inp.astype(x, inp.int32) + 1, "cast float64 to int32"),
])
def test_regions_the_driver_cannot_run_use_the_python_tiles(program, reason):
    x = np.linspace(-3.0, 3.0, 700 * 3).reshape(700, 3)
    p = np.array([0.5, 2.0, -1.0])
    compiled = ik.jit(program, strategy="threads", workers=2, tile_rows=50).lower(x, p).compile()
    (path,) = [r.path for r in compiled.executable._runners.values()]
    assert path.startswith(loops.PYTHON_PATH) and reason in path, path
    want = ik.jit(program, strategy="reference")(x, p)
    assert bit_identical(compiled(x, p), want)


def test_a_layout_numpy_iterates_differently_falls_back_for_that_call():
    """Planned for C-contiguous rows; a Fortran-ordered (P, m) input is not
    one loop call per tile for NumPy, so that call runs the Python tiles
    (bits still the reference's), and a later contiguous call the driver."""
    def f(v):
        return inp.exp(v) - v
    x = np.linspace(-3.0, 3.0, 500 * 2).reshape(500, 2)
    compiled = ik.jit(f, strategy="threads", workers=2, tile_rows=64).lower(x).compile()
    reference = ik.jit(f, strategy="reference")
    (runner,) = compiled.executable._runners.values()
    for other in (np.asfortranarray(x), np.linspace(-3.0, 3.0, 4000).reshape(1000, 4)[::2, 1:3]):
        assert bit_identical(compiled(other), reference(other))
        assert runner.path.startswith(loops.PYTHON_PATH)
    assert bit_identical(compiled(x), reference(x)) and runner.path == loops.PATH
    rows = np.linspace(-3.0, 3.0, 1000)[::2]  # 1-D with a stride of 16 B: still one call
    compiled = ik.jit(f, strategy="threads", workers=2, tile_rows=64).lower(rows).compile()
    assert bit_identical(compiled(rows), reference(rows))
    assert [r.path for r in compiled.executable._runners.values()] == [loops.PATH]


def test_gil_free_errors_follow_the_callers_errstate():
    x = np.array([1.0, 0.0, -1.0, 4.0] * 500)
    divide = ik.jit(lambda v: 1.0 / v, strategy="threads", workers=2, tile_rows=100)
    root = ik.jit(lambda v: inp.sqrt(v) + 1.0, strategy="threads", workers=2, tile_rows=100)
    assert divide.lower(x).compile().executable._runners[0].path == loops.PATH
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError,
                                                     match="divide by zero encountered in divide"):
        divide(x)
    with np.errstate(invalid="warn"), pytest.warns(RuntimeWarning,
                                                   match="invalid value encountered in sqrt"):
        root(x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        root(x)
    calls = []
    with np.errstate(divide="call", invalid="log"), np.errstate(call=_Log(calls)):
        divide(x)
        root(x)
    assert calls == [("divide by zero", 1), "Warning: invalid value encountered in sqrt\n"]


class _Log:
    """Both an errstate callback and a log (an object with ``write``)."""

    def __init__(self, seen):
        self.seen = seen

    def __call__(self, text, flags):
        self.seen.append((text, flags))

    def write(self, message):
        self.seen.append(message)


CAST_TYPES = [dtypes.bool_, dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]


@pytest.mark.parametrize("source", CAST_TYPES, ids=str)
def test_driver_casts_equal_astype_bit_for_bit(source):
    """Every pair the driver converts, on special values (f64 -> f32
    overflow, subnormals, NaN payloads, integer extremes), with the
    flags NumPy's cast raises."""
    extra = [SPECIALS[np.float64], np.array([1e300, -1e-300, 3e38, 2.0**-1070])]
    with np.errstate(all="ignore"):
        values = np.concatenate([SAMPLES[source], *(x.astype(source) for x in extra
                                                    if source in dtypes.FLOATS)])
    for target in CAST_TYPES:
        if source in dtypes.FLOATS and target in dtypes.INTS:
            continue
        with np.errstate(all="ignore"):
            want = values.astype(target)
        got, flags = _driver_cast(values, target)
        assert bit_identical(got, want), f"{source} -> {target}"
        with np.errstate(all="raise"):
            try:
                values.astype(target)
                numpy_flags = 0
            except FloatingPointError:
                numpy_flags = 1
        assert bool(flags) == bool(numpy_flags), f"{source} -> {target}: flags {flags}"


def _driver_cast(values: np.ndarray, target) -> tuple[np.ndarray, int]:
    """``values`` through one driver cast step."""
    from isokernel.codegen import driver

    out = np.empty(values.shape, target)
    operands = [loops.Operand(values, 0), loops.Operand(out, 1)]
    step = loops.cast_step(operands)
    program = loops.Program.build({values.size: [step]}, [(0, values.size)], values.size)
    fpe = np.zeros(1, np.uint32)
    bases = np.array([values.ctypes.data, out.ctypes.data], np.uintp)
    stop = np.zeros(1, np.int32)
    assert driver.load_driver().run(program.steps, program.slices, 0, 1, bases, fpe,
                                    stop.ctypes.data) == 0
    return out, int(fpe[0])


def test_integer_regions_on_the_driver_and_integer_power_in_python():
    """Integer loops run on the driver, and their division by zero reaches
    errstate as NumPy's; integer ``power`` (which raises through Python for
    negative exponents) keeps its region on the Python tiles."""
    v = np.arange(-350, 350, dtype=np.int64)
    w = (v % 7) - 3

    def divide(v, w):
        return v // w + v % w
    compiled = ik.jit(divide, strategy="threads", workers=2, tile_rows=40).lower(v, w).compile()
    assert [r.path for r in compiled.executable._runners.values()] == [loops.PATH]
    with np.errstate(divide="ignore"):
        assert bit_identical(compiled(v, w), ik.jit(divide, strategy="reference")(v, w))
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="floor_divide"):
        compiled(v, w)
    power = ik.jit(lambda v, w: v ** w, strategy="threads", workers=2, tile_rows=40)
    (runner,) = power.lower(v, w).compile().executable._runners.values()
    assert "reports errors through Python" in runner.path
    with pytest.raises(ValueError, match="negative integer powers"):
        power(v, w)


def test_the_driver_capsules_cover_exactly_what_the_program_builder_runs():
    ufuncs = {op for op, rule in EVAL.items() if isinstance(rule, np.ufunc)}
    assert set(threads.LOOP_CAPSULE_NAMES) == ufuncs | {Op.SELECT, Op.CAST} | threads.VIEW_OPS
    x = np.linspace(0.0, 1.0, 64)
    text = str(ik.jit(lambda v: inp.where(v > 0.5, inp.astype(inp.astype(v, inp.float32),
                                                              inp.float64), v),
                      strategy="threads", workers=2).lower(x).compile().report())
    assert "numpy.where as a bit copy per element on row tiles (GIL-free C driver)" in text
    assert "numpy.ndarray.astype as NumPy's C conversion on row tiles" in text


def test_without_the_private_numpy_api_or_a_compiler_the_reason_is_given(monkeypatch):
    from isokernel.codegen import driver
    from isokernel.ir import BackendUnavailableError

    assert loops.numpy_reason() is None and loops.unavailable_reason() is None
    monkeypatch.setattr(loops, "CALL_INFO", b"numpy_9.99_ufunc_call_info")
    assert "ufunc._get_strided_loop changed" in loops.numpy_reason()
    monkeypatch.undo()

    def no_compiler():
        raise BackendUnavailableError("no C compiler found (test)")
    monkeypatch.setattr(driver, "load_driver", no_compiler)
    assert loops._driver_reason() == "tile driver unavailable: no C compiler found (test)"
