"""The threads strategy: bit-identical to the reference for every graph,
dtype, size, tile size and worker count; the INTO rules equal EVAL; graphs
that are not row-independent are split; workers come from the CPU budget
unless ``workers=`` says otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import threads
from isokernel.backends.parity import bit_identical
from isokernel.backends.pixel import partition
from isokernel.backends.platform import cpu_budget
from isokernel.ir import EVAL, Op, dtypes
from isokernel.ir.ops import COMPARE, LAYOUT, TRANSFORM_ONLY

from .conftest import assert_contract
from .test_random_programs import ALL_KINDS, make_inputs, run_program

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
    assert "bit-identical to reference" in text and "numpy.exp on row tiles" in text
    assert "row-independent along axis 0 (5000 rows)" in text
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
    from isokernel.backends import cuda_eager
    from isokernel.ir import Op
    if name == "native":
        return 8
    return cuda_eager.ULP_BOUND[Op.EXP] + 3 if name.startswith("cuda") else 0
