"""Hypothesis-generated programs: recorded-and-replayed equals eager, bit for
bit, on every strategy under its contract; programs of NumPy-equivalent ops
also equal plain NumPy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import all_strategies

from .conftest import assert_contract, owes_reference_bits

UNARY = ["sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
         "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh", "abs", "negative", "sign", "floor", "ceil", "rint", "trunc", "square",
         "reciprocal"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "arctan2",
          "floor_divide", "remainder"]
COMPARE = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]
REDUCE = ["sum", "prod", "max", "min"]
# Compositions: isokernel's own definitions, compared eager against recorded only.
COMPOSED = ["hypot", "clip", "mean", "isnan_select", "where_compare", "flip", "transpose2",
            "concat_self", "scale_weak", "pow_weak"]

ALL_KINDS = UNARY + BINARY + COMPARE + REDUCE + COMPOSED

BASE_SHAPES = st.tuples(st.integers(1, 4), st.integers(1, 5))


@st.composite
def programs(draw, direct_only: bool = False):
    n, m = draw(BASE_SHAPES)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shapes = [(n, m), (m,), (1, m), (n, 1), ()]
    n_inputs = draw(st.integers(1, 3))
    in_shapes = [(n, m)] + [draw(st.sampled_from(shapes)) for _ in range(n_inputs - 1)]
    kinds = UNARY + BINARY + COMPARE + REDUCE + ([] if direct_only else COMPOSED)
    steps = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(kinds))
        a = draw(st.integers(0, 1 << 16))
        b = draw(st.integers(0, 1 << 16))
        scalar = draw(st.sampled_from([0.5, 2.0, -1.5, 3]))
        steps.append((kind, a, b, scalar))
    seed = draw(st.integers(0, 2**32 - 1))
    return dtype, in_shapes, steps, seed


def make_inputs(dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        values = rng.uniform(-3, 3, shape) * rng.choice([1e-3, 1.0, 10.0], shape)
        out.append(np.asarray(values, dtype=dtype))
    return out


def frontend_only(steps):
    """``steps`` with ``x ** scalar`` taken through ``inp.power``: on a NumPy
    operand the operator is NumPy's own pow, which isokernel never sees (so
    under portable numerics eager evaluation would differ from a recording)."""
    return [("power_scalar", *rest) if kind == "pow_weak" else (kind, *rest)
            for kind, *rest in steps]


def run_program(ns, steps, inputs):
    """Interpret ``steps`` with the namespace ``ns`` (inp or NumPy)."""
    pool = list(inputs)
    for kind, a, b, scalar in steps:
        x, y = pool[a % len(pool)], pool[b % len(pool)]
        pool.append(_step(ns, kind, x, y, scalar))
    return pool[-1], pool[0 if len(pool) < 2 else -2]


def _step(ns, kind, x, y, scalar):
    if kind in UNARY:
        return getattr(ns, kind)(x)
    if kind in BINARY:
        return getattr(ns, kind)(x, y)
    if kind in COMPARE:
        return ns.where(getattr(ns, kind)(x, y), x, y)
    if kind in REDUCE:
        return getattr(ns, kind)(x, axis=-1, keepdims=True) if np.ndim(x) else x
    return _composed(kind, x, y, scalar)


def _composed(kind, x, y, scalar):
    if kind == "hypot":
        return inp.hypot(x, y)
    if kind == "clip":
        return inp.clip(x, -1.0, scalar)
    if kind == "mean":
        return inp.mean(x, axis=0, keepdims=True) if np.ndim(x) == 2 else x
    if kind == "isnan_select":
        return inp.where(inp.isnan(x), 0.0, x)
    if kind == "where_compare":
        return inp.where(x > scalar, y, x * scalar)
    if kind == "flip":
        return x[::-1] if np.ndim(x) else x
    if kind == "transpose2":
        return inp.transpose(inp.transpose(x))
    if kind == "concat_self":
        return inp.concatenate([x, x], axis=-1)[..., : np.shape(x)[-1]] if np.ndim(x) else x
    if kind == "scale_weak":
        return scalar * x - scalar
    if kind == "power_scalar":  # pow_weak through the frontend even for NumPy operands
        return inp.power(x, scalar)
    return x ** scalar


def _bit_contract(strategy_name, graph) -> bool:
    """Whether the strategy promises these programs' bits: ``native`` calls
    libm and the GPU strategies libdevice for transcendentals (ulp-bounded
    per op, tested in test_native.py and test_cuda_gpu.py; composed programs
    can amplify a bound without limit); ``native-whole`` also sums in its
    own order (checked in test_native_whole.py)."""
    return owes_reference_bits(strategy_name, graph)


def _check_parity(dtype, shapes, steps, seed):
    inputs = make_inputs(dtype, shapes, seed)
    with np.errstate(all="ignore"):
        eager = run_program(inp, steps, inputs)

        def program(*xs):
            return run_program(inp, steps, xs)
        graph = ik.verify(ik.trace(program, *inputs))
        replayed = ik.replay(graph, *inputs)
        for got, want in zip(replayed, eager):
            assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
            assert np.asarray(got).dtype == np.asarray(want).dtype
        for strategy in all_strategies():
            if strategy.unavailable_reason() is None and _bit_contract(strategy.name, graph):
                out = ik.jit(program, strategy=strategy.name)(*inputs)
                assert_contract(strategy.name, out, eager)
    return inputs, eager


@settings(max_examples=250)
@given(programs())
def test_recorded_equals_eager_bit_for_bit(program):
    _check_parity(*program)


@settings(max_examples=60)
@given(programs(direct_only=True))
def test_eager_equals_plain_numpy(program):
    dtype, shapes, steps, seed = program
    inputs, eager = _check_parity(dtype, shapes, steps, seed)
    with np.errstate(all="ignore"):
        plain = run_program(np, steps, inputs)
    for got, want in zip(eager, plain):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_generator_covers_thirty_op_kinds():
    assert len(set(ALL_KINDS)) >= 30
