"""The numerical-contract ops on every strategy: ldexp, logb and copysign at
their edges, table look-ups (NaN, clamping, layers), and portable numerics
on generated programs, each bit-identical to the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ir import EVAL, Op
from isokernel.models.tau_omega import synthetic_inputs, tau_omega
from isokernel.record import bind
from isokernel.record.portable import numerics

from .conftest import assert_contract
from .test_random_programs import frontend_only, make_inputs, programs, run_program

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _edges(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    return np.array([0.0, -0.0, 1.0, -1.5, 0.75, 3.0, fi.max, -fi.max, fi.tiny, -fi.tiny,
                     fi.smallest_subnormal, -fi.smallest_subnormal, 3 * fi.smallest_subnormal,
                     fi.tiny * (1 - fi.eps), np.inf, -np.inf, np.nan, -np.nan, 1.0 + fi.eps,
                     np.pi, -np.e, 1e-30, 1e30], dtype=dtype)


def _exponents(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    low, high = fi.minexp - fi.nmant, fi.maxexp
    return np.array([0.0, 1.0, -1.0, 2.7, -2.7, low, low - 1, low + 1, high, high - 1,
                     -high, 4096.0, -4096.0, 5000.0, -5000.0, 1e30, -1e30, np.inf, -np.inf,
                     np.nan, fi.minexp, fi.minexp - 1, fi.minexp - 2, 300, -300, 1200, -1200],
                    dtype=dtype)


def _pairs(dtype):
    x, n = np.meshgrid(_edges(dtype), _exponents(dtype))
    return np.ascontiguousarray(x.ravel()), np.ascontiguousarray(n.ravel())


def _run(strategy, fn, *args):
    with np.errstate(all="ignore"):
        return ik.jit(fn, strategy=strategy.name)(*args)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_ldexp_at_its_edges_is_the_reference(strategy, dtype):
    x, n = _pairs(dtype)
    with np.errstate(all="ignore"):
        want = EVAL[Op.LDEXP](x, n)
    got = _run(strategy, lambda x, n: bind(Op.LDEXP, x, n), x, n)
    assert_contract(strategy.name, got, want)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_ldexp_rounds_subnormal_results_once(strategy, dtype):
    """Mantissas with every low bit pattern, scaled into the subnormal range,
    where a two-step scaling would round twice."""
    fi = np.finfo(dtype)
    rng = np.random.default_rng(3)
    x = ((1.0 + rng.random(4000)) * np.where(rng.random(4000) < 0.5, 1, -1)).astype(dtype)
    n = rng.integers(fi.minexp - fi.nmant - 3, fi.minexp + 2, 4000).astype(dtype)
    want = EVAL[Op.LDEXP](x, n)
    assert np.count_nonzero((want != 0) & (np.abs(want) < fi.tiny)) > 1000
    assert_contract(strategy.name, _run(strategy, lambda x, n: bind(Op.LDEXP, x, n), x, n),
                    want)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_logb_and_copysign_at_their_edges_are_the_reference(strategy, dtype):
    x, y = _pairs(dtype)
    rng = np.random.default_rng(4)
    x = np.concatenate([x, rng.standard_normal(500).astype(dtype) * 1e3])
    y = np.concatenate([y, -rng.standard_normal(500).astype(dtype)])
    with np.errstate(all="ignore"):
        want = (EVAL[Op.LOGB](x), EVAL[Op.COPYSIGN](x, y))
    got = _run(strategy, lambda x, y: (bind(Op.LOGB, x), bind(Op.COPYSIGN, x, y)), x, y)
    assert_contract(strategy.name, got, want)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_table_lookup_is_bit_identical_everywhere(strategy, dtype):
    """Nodes, interior points, both clamps, ±inf, NaN abscissas and layers,
    layers out of range (clamped) and fractional (truncated)."""
    values = np.stack([np.sin(np.linspace(0, 4, 41)) * (k + 1) for k in range(3)])
    table = inp.Table(values, -1.0, 0.1, name="waves")
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-2.0, 4.0, 600), -1.0 + 0.1 * np.arange(41),
                        [np.inf, -np.inf, np.nan, 3.0, -1.0, 2.9999999]]).astype(dtype)
    layer = rng.choice([0.0, 1.0, 2.0, 2.7, -1.0, 5.0, np.nan, 1.5], x.size).astype(dtype)
    want = table.lookup(x, layer)
    assert np.isnan(want).any() and want.dtype == dtype
    got = _run(strategy, lambda x, layer: table.lookup(x, layer), x, layer)
    assert_contract(strategy.name, got, want)


def test_native_runs_table_lookups_in_its_kernel():
    """The look-up is compiled (the table is static data in the C), not run
    whole by the reference."""
    table = inp.Table(np.arange(10.0) ** 2, 0.0, 1.0, name="squares")
    x = np.linspace(-1, 11, 1000)
    compiled = ik.jit(lambda x: table.lookup(x) * 2.0, strategy="native").lower(x).compile()
    assert "isk_lookup_f64(isk_tab_" in compiled.source()
    assert "0x1.44p+6" in compiled.source()  # the node value 81, as an exact literal
    assert "row-independent" in dict(compiled.report().extra)["pixels"]


@settings(max_examples=40)
@given(programs())
def _portable_programs(strategy, program):
    dtype, shapes, steps, seed = program
    inputs = make_inputs(dtype, shapes, seed)
    steps = frontend_only(steps)
    with np.errstate(all="ignore"):
        with numerics("portable"):
            eager = run_program(inp, steps, inputs)
        out = ik.jit(lambda *xs: run_program(inp, steps, xs), strategy=strategy.name,
                     numerics="portable")(*inputs)
    assert_contract(strategy.name, out, eager)


def test_portable_numerics_give_the_reference_bits_on_generated_programs(strategy):
    """The contract of portable numerics: basic operations only, contraction
    off, so every strategy computes the eager bits."""
    _portable_programs(strategy)


def test_portable_forward_model_on_many_rows_is_the_reference(strategy):
    """Enough rows for several native blocks, slices and a tail, every
    transcendental of the frontend once."""
    rng = np.random.default_rng(9)
    x = rng.uniform(0.05, 0.95, 3001).astype(np.float32)

    def model(x):
        return (inp.exp(x) + inp.log(x) * inp.sin(3 * x) - inp.cos(x) * inp.tan(x)
                + inp.arctan2(x, 1 - x) + inp.power(x, 1.7) + inp.cbrt(x) + inp.tanh(x)
                + inp.arcsin(x) + inp.arccos(x) + inp.log1p(x) + inp.expm1(-x)
                + inp.sinh(x) + inp.cosh(x) + inp.arcsinh(x) + inp.arctanh(0.9 * x)
                + inp.arccosh(1 + x) + inp.exp2(x) + inp.log2(x) + inp.log10(x))
    with numerics("portable"):
        want = model(x)
    got = ik.jit(model, strategy=strategy.name, numerics="portable")(x)
    assert_contract(strategy.name, got, want)


# --------------------------------------------- the generated C vectorizes

def _block_loop_report(source: str, tmp_path, arch: str | None = None) -> list[str]:
    """GCC's vectorizer notes for the block loop of a generated kernel,
    compiled with the kernel's flags (``arch``, e.g. ``-march=x86-64-v3``,
    in place of the host's ``-march=native``)."""
    import subprocess

    from isokernel import codegen
    try:
        compiler = codegen.current_compiler()
    except ik.BackendUnavailableError as error:
        pytest.skip(str(error))
    if "clang" in compiler.version.lower():
        pytest.skip(f"vectorizer notes are GCC's; the compiler is {compiler.name}")
    path = tmp_path / "kernel.c"
    path.write_text(source)
    flags = [f for f in compiler.flags(False) if f != "-shared"]
    if arch is not None:
        flags = [f for f in flags if not f.startswith("-march=")] + [arch]
    done = subprocess.run([compiler.path, *flags, "-fopt-info-vec-all", "-c", str(path), "-o",
                           str(tmp_path / "kernel.o")], capture_output=True, text=True)
    if done.returncode != 0:
        taken = f"-fopt-info-vec-all {arch or ''}".strip()
        pytest.skip(f"{compiler.name} does not take {taken}: {done.stderr[:200]}")
    lines = source.splitlines()
    loop = next(i for i, text in enumerate(lines, 1) if "j < ISK_BLOCK" in text)
    return [n for n in done.stderr.splitlines() if f"kernel.c:{loop}:" in n]


_TABLE = inp.Table(np.sin(np.arange(40.0)).reshape(2, 20), 0.0, 1.0, name="vector")
VECTOR_CASES = {
    "tau_omega": lambda mv, vwc, ts: tau_omega(mv, vwc, ts),
    "exponent_ops": lambda mv, vwc, ts: (bind(Op.LDEXP, mv, vwc), bind(Op.LOGB, ts),
                                         bind(Op.COPYSIGN, mv, vwc)),
    "table_lookup": lambda mv, vwc, ts: _TABLE.lookup(mv * 20.0, vwc),
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", sorted(VECTOR_CASES))
def test_portable_kernels_vectorize_fully(case, dtype, tmp_path):
    """A branch-free body must vectorize: selects, ldexp, logb, copysign and
    table look-ups are emitted without control flow or conversions GCC
    would keep scalar."""
    args = synthetic_inputs(512, dtype)
    compiled = ik.jit(VECTOR_CASES[case], strategy="native",
                      numerics="portable").lower(*args).compile()
    notes = _block_loop_report(compiled.source(), tmp_path)
    assert any("loop vectorized" in n for n in notes), notes


AVX2_ONLY = "-march=x86-64-v3"
"""x86-64 with AVX2 and FMA but no AVX-512: no masked vector instructions."""


def _x86_64_or_skip() -> None:
    import platform
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"{AVX2_ONLY} is an x86-64 target; this host is {platform.machine()}")


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", sorted(VECTOR_CASES))
def test_portable_kernels_vectorize_with_avx2_alone(case, dtype, tmp_path):
    """The same loops for a CPU without AVX-512, checked on any x86-64 host:
    GCC if-converts arithmetic inside a ``?:`` arm only with masked vector
    instructions, so every choice in the helpers is a bit-mask select."""
    _x86_64_or_skip()
    args = synthetic_inputs(512, dtype)
    compiled = ik.jit(VECTOR_CASES[case], strategy="native",
                      numerics="portable").lower(*args).compile()
    notes = _block_loop_report(compiled.source(), tmp_path, arch=AVX2_ONLY)
    assert any("loop vectorized" in n for n in notes), notes


@pytest.mark.parametrize("name", ["isk_floor", "isk_ldexp", "isk_logb", "isk_lookup"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_exact_helpers_choose_by_bit_masks(name, dtype):
    """No ``?:`` in the exact prelude helpers, whatever the host: GCC moves
    arithmetic into its arms (``x * (c ? k : 1)`` becomes ``c ? x * k : x``),
    and the loop stays scalar without AVX-512; the prelude defines the select
    they call first."""
    from isokernel.codegen.c_expr import HELPERS, SHORT
    from isokernel.codegen.emit import prelude
    helper, select = f"{name}_{SHORT[dtype]}", f"isk_select_{SHORT[dtype]}"
    assert "?" not in HELPERS[helper] and f"{select}((uint8_t)(" in HELPERS[helper]
    text = prelude([helper])
    assert text.count(f"{select}(uint8_t c,") == 1
    assert text.index(f"{select}(uint8_t c,") < text.index(f"{helper}(")


def test_portable_benchmark_runs_and_native_portable_is_the_reference(capsys, monkeypatch):
    """benchmarks/portable_forward.py on a small scene (JAX optional)."""
    import pathlib
    import sys
    bench = pathlib.Path(__file__).parents[1] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    sys.modules.pop("portable_forward", None)
    import portable_forward
    speed = portable_forward.main(["--pixels", "20000", "--rounds", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    assert speed["isokernel native, portable"] > 0
    line = next(x for x in out.splitlines() if "isokernel native, portable" in x)
    assert line.endswith("bit-identical")


def test_every_new_op_runs_under_a_capsule_on_every_strategy(strategy):
    """The plan that ran binds a capsule to every node (none missing), and
    the report names them."""
    x = np.linspace(-3.0, 12.0, 2000)

    def model(x):
        return (bind(Op.LDEXP, x, inp.floor(x)) + bind(Op.LOGB, x + 20.0)
                + bind(Op.COPYSIGN, x, -x) + _TABLE.lookup(x, 1.0))
    compiled = ik.jit(model, strategy=strategy.name).lower(x).compile()
    capsules = compiled.plan.capsule_counts()
    assert all(c is not None for c, _ in capsules)
    ran = {c.op for c, _ in capsules}
    assert {Op.LDEXP, Op.LOGB, Op.COPYSIGN, Op.TABLE_LOOKUP} <= ran
    assert "table_lookup:" in str(compiled.report())


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_row_max_and_min_return_numpys_nan_on_every_strategy(strategy, dtype):
    """NumPy's max/min along the contiguous last axis return its own NaN
    when the first element is NaN, the first NaN's payload otherwise; along
    another axis the first NaN met wins. The generated C folds the same."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((600, 3, 4)).astype(dtype)
    payload = np.array([0x7FC00123] if dtype == F32 else [0x7FF8000000012300],
                       np.uint32 if dtype == F32 else np.uint64).view(dtype)[0]
    negative = -np.abs(np.array(np.nan, dtype))
    x[::3, 0, 0], x[1::3, 1, 2], x[2::5, 2, 0] = negative, payload, payload

    def model(x):
        y = x * 2.0  # a fresh operand: the generated C unrolls its reductions
        return (inp.max(y, axis=2), inp.min(y, axis=(1, 2)), inp.max(y, axis=1),
                inp.min(y, axis=2))
    want = ik.jit(model, strategy="reference")(x)
    # a strategy folding in its own order (native compiling this small graph as one C
    # program) keeps every value and NaN, with NaN payloads of its own
    assert_contract(strategy.name, ik.jit(model, strategy=strategy.name)(x), want,
                    graph=ik.jit(model).lower(x).graph)


@pytest.mark.parametrize("tables", [False, True], ids=["closed-form", "tables"])
@pytest.mark.parametrize("numerics", ["native", "portable"])
def test_the_soil_moisture_retrieval_kernel_vectorizes(numerics, tables, tmp_path):
    """The flagship's row region (class parameters as select chains on an
    integer class, bool logic, max/min, Stage 3's sweeps, and with tables the
    float-to-int clay layer feeding the look-ups) is one vectorized loop:
    selects and max/min are bit-mask selects, and/or are bitwise, and the
    float-to-int cast is a blend."""
    import functools

    from isokernel.models.soil_moisture import generate_scene, retrieve, scene_inputs
    from isokernel.models.soil_moisture.lookups import mironov_lookups
    args = scene_inputs(generate_scene(600, seed=1))
    model = functools.partial(retrieve, lookups=mironov_lookups().lookups if tables else None)
    model.__name__ = "retrieve"
    compiled = ik.jit(model, strategy="native", numerics=numerics).lower(*args).compile()
    notes = _block_loop_report(compiled.source(), tmp_path)
    assert any("loop vectorized" in n for n in notes), notes


@pytest.mark.parametrize("tables", [False, True], ids=["closed-form", "tables"])
@pytest.mark.parametrize("numerics", ["native", "portable"])
def test_the_soil_moisture_retrieval_kernel_vectorizes_with_avx2_alone(numerics, tables,
                                                                         tmp_path):
    """The flagship's row region for a CPU without AVX-512 (ldexp, floor and
    the look-ups among its helpers), checked on any x86-64 host."""
    import functools

    from isokernel.models.soil_moisture import generate_scene, retrieve, scene_inputs
    from isokernel.models.soil_moisture.lookups import mironov_lookups
    _x86_64_or_skip()
    args = scene_inputs(generate_scene(600, seed=1))
    model = functools.partial(retrieve, lookups=mironov_lookups().lookups if tables else None)
    model.__name__ = "retrieve"
    compiled = ik.jit(model, strategy="native", numerics=numerics).lower(*args).compile()
    notes = _block_loop_report(compiled.source(), tmp_path, arch=AVX2_ONLY)
    assert any("loop vectorized" in n for n in notes), notes
