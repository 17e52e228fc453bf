"""Table look-ups: the reference meaning, CSE by name, strategies, the
hardware mode's refusal on CPU, the inverse table and the derivative."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import all_strategies
from isokernel.ir import BackendUnavailableError, Op
from isokernel.ir.eval import table_lookup
from isokernel.record.tables import Table, lookup_jvp, lookup_slope

from .conftest import assert_contract

VALUES = np.array([[0.0, 1.0, 4.0, 9.0, 16.0], [5.0, 3.0, 2.0, 2.5, 7.0]])


def _table(name="t", mode="exact"):
    return Table(VALUES, x0=-1.0, dx=0.5, name=name, mode=mode)


def _naive(values, x0, dx, x, layer):
    """The documented meaning, written out element by element."""
    out = []
    n = values.shape[1]
    for xi, li in zip(x, layer):
        u = min(max((xi - x0) / dx, 0.0), n - 1.0)
        i = min(int(np.floor(u)), n - 2)
        f = u - i
        row = values[min(max(int(li), 0), values.shape[0] - 1)]
        out.append((1 - f) * row[i] + f * row[i + 1])
    return np.array(out)


def test_reference_is_clamp_floor_and_lerp():
    x = np.array([-5.0, -1.0, -0.75, -0.5, 0.2, 0.999, 1.0, 7.0])
    for layer in (0, 1):
        got = _table().lookup(x, layer)
        assert np.array_equal(got, _naive(VALUES, -1.0, 0.5, x, [layer] * len(x)))
    assert _table().lookup(-5.0, 1) == 5.0 and _table().lookup(7.0, 0) == 16.0


def test_node_values_come_back_exactly_in_both_dtypes():
    nodes = -1.0 + 0.5 * np.arange(5)
    for dtype in (np.float32, np.float64):
        got = _table().lookup(nodes.astype(dtype), 1)
        assert got.dtype == dtype and np.array_equal(got, VALUES[1].astype(dtype))


def test_layers_are_per_element_and_clamped():
    x = np.full(4, -0.75)
    got = _table().lookup(x, np.array([0, 1, 5, -3]))
    assert np.array_equal(got, [0.5, 4.0, 4.0, 0.5])


def test_nan_abscissa_gives_nan_and_inf_clamps():
    got = _table().lookup(np.array([np.nan, np.inf, -np.inf]), 0)
    assert np.isnan(got[0]) and got[1] == 16.0 and got[2] == 0.0


def test_float32_lookup_computes_in_float32():
    x = np.linspace(-1, 1, 9, dtype=np.float32)
    got = _table().lookup(x, 0)
    want = _naive(VALUES.astype(np.float32), np.float32(-1.0), np.float32(0.5), x, [0] * 9)
    assert got.dtype == np.float32 and np.array_equal(got, want.astype(np.float32))


@settings(max_examples=60)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=9),
       st.floats(-10, 10), st.floats(1e-3, 10),
       st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=20))
def test_reference_matches_the_naive_meaning(values, x0, dx, xs):
    table = Table(values, x0, dx, name="h")
    x = np.array(xs)
    got = table.lookup(x, 0)
    assert np.array_equal(got, _naive(np.array([values]), x0, dx, x, [0] * len(x)))


def test_name_is_part_of_the_node():
    a, b = _table("a"), _table("b")

    def model(x):
        return a.lookup(x) + b.lookup(x) + a.lookup(x)
    graph = ik.trace(model, np.zeros(3))
    lookups = [n for n in graph.nodes if n.op is Op.TABLE_LOOKUP]
    assert sorted(n.attrs["name"] for n in lookups) == ["a", "b"]


def test_default_name_follows_the_contents():
    assert Table(VALUES, 0.0, 1.0).name == Table(VALUES.copy(), 0.0, 1.0).name
    assert Table(VALUES, 0.0, 1.0).name != Table(VALUES, 0.0, 2.0).name


def test_every_strategy_is_bit_identical_to_eager():
    table = _table()
    x = np.random.default_rng(0).uniform(-2, 2, (5, 7))
    layer = np.random.default_rng(1).integers(0, 2, (5, 7))

    def model(x, layer):
        return table.lookup(x, layer) * 2.0 + table.lookup(x * 0.5, 1)
    eager = model(x, layer)
    for strategy in all_strategies():
        if strategy.unavailable_reason() is None:
            assert_contract(strategy.name, ik.jit(model, strategy=strategy.name)(x, layer), eager)


def test_bad_tables_and_arguments_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="at least two nodes"):
        Table([1.0], 0.0, 1.0)
    with pytest.raises(ValueError, match="dx positive"):
        Table([1.0, 2.0], 0.0, 0.0)
    with pytest.raises(ValueError, match="mode"):
        Table([1.0, 2.0], 0.0, 1.0, mode="fast")
    with pytest.raises(IndexError, match="layer 2 is outside 0..1"):
        _table().lookup(np.zeros(2), 2)


# --------------------------------------------------------------- hardware

def test_hardware_mode_is_refused_eagerly_and_on_cpu_strategies():
    table = _table(mode="hardware")
    with pytest.raises(BackendUnavailableError, match="runs only on GPU strategies"):
        table.lookup(np.zeros(3))
    graph = ik.trace(lambda x: table.lookup(x), np.zeros(3))
    assert graph.nodes[-1].attrs["mode"] == "hardware"
    with pytest.raises(BackendUnavailableError, match="table 't'.*mode='exact'"):
        ik.jit(lambda x: table.lookup(x), strategy="reference").lower(np.zeros(3)).compile()


def test_exact_lookup_into_a_hardware_table_is_allowed():
    table = _table(mode="hardware")
    assert table.lookup(np.array([0.0]), 0, mode="exact")[0] == 4.0


# ---------------------------------------------------------------- inverse

def test_inverse_error_is_the_true_maximum():
    x = np.array([0.0, 0.3, 1.1, 1.7, 3.0])
    y = x ** 2 + x
    inv = Table.inverse(x, y, 9)
    dense = np.linspace(y[0], y[-1], 200001)
    true_error = np.max(np.abs(inv.table.lookup(dense) - np.interp(dense, y, x)))
    assert 0 < inv.max_error and abs(inv.max_error - true_error) <= 1e-3 * inv.max_error
    assert inv.table.nodes == 9 and inv.table.x0 == y[0]


def test_inverse_places_nodes_on_kinks():
    x = np.array([0.0, 1.0, 2.0, 5.0])
    y = np.array([0.0, 0.7, 2.3, 3.0])
    plain = Table.inverse(x, y, 6)
    kinked = Table.inverse(x, y, 6, kinks=[0.7])
    assert kinked.table.lookup(0.7) == pytest.approx(1.0, abs=1e-12)
    offsets = (0.7 - kinked.table.x0) / kinked.table.dx
    assert abs(offsets - round(offsets)) < 1e-9
    assert kinked.max_error >= 0 and plain.max_error > 0


def test_inverse_of_a_decreasing_layered_table():
    x = np.array([[0.0, 1.0, 3.0], [0.0, 2.0, 3.0]])
    y = np.array([[9.0, 4.0, 1.0], [8.0, 5.0, 2.0]])
    inv = Table.inverse(x, y, 17, name="inv")
    assert inv.table.layers == 2 and inv.table.name == "inv"
    assert inv.table.lookup(4.0, 0) == pytest.approx(1.0, abs=inv.max_error + 1e-12)


def test_inverse_refuses_what_has_no_inverse():
    with pytest.raises(ValueError, match="strictly monotone"):
        Table.inverse([0, 1, 2], [0, 1, 0], 5)
    with pytest.raises(ValueError, match="no uniform grid"):
        Table.inverse([0, 1, 2, 4], [0, 1, 2, 4], 4, kinks=[0.1, 1.0, np.pi])
    with pytest.raises(ValueError, match="within y's range"):
        Table.inverse([0, 1], [0, 1], 4, kinks=[2.0])


# ------------------------------------------------------------- derivative

def test_slope_matches_finite_differences_inside_segments():
    table = _table()
    rng = np.random.default_rng(4)
    u = rng.integers(0, 4, 200) + rng.uniform(0.05, 0.95, 200)
    x = -1.0 + 0.5 * u
    layer = rng.integers(0, 2, 200).astype(float)
    h = 1e-6
    fd = (table.lookup(x + h, layer) - table.lookup(x - h, layer)) / (2 * h)
    slope = lookup_slope(x, layer, **table.attrs())
    assert np.allclose(slope, fd, rtol=1e-6, atol=1e-6)


def test_slope_is_zero_outside_and_one_sided_at_nodes():
    table = _table()
    attrs = table.attrs()
    assert np.array_equal(lookup_slope(np.array([-3.0, 9.0]), np.zeros(2), **attrs), [0, 0])
    at_node = lookup_slope(np.array([-0.5, 1.0]), np.zeros(2), **attrs)
    assert np.array_equal(at_node, [6.0, 14.0])  # right segment; last node: last segment
    assert np.isnan(lookup_slope(np.array([np.nan]), np.zeros(1), **attrs)[0])


def test_jvp_rule_records_and_is_linear_in_the_tangent():
    table = _table()
    attrs = table.attrs()
    x, layer, t = np.array([0.1, 0.6]), np.array([0.0, 1.0]), np.array([2.0, -3.0])
    tangent = lookup_jvp(t, x, layer, out=None, **attrs)
    assert np.array_equal(tangent, lookup_slope(x, layer, **attrs) * t)
    assert np.array_equal(lookup_jvp(2.0 * t, x, layer, **attrs), 2.0 * tangent)
    graph = ik.trace(lambda x, t: lookup_jvp(t, x, layer, **attrs), x, t)
    lookups = [n for n in graph.nodes if n.op is Op.TABLE_LOOKUP]
    assert [n.attrs["name"] for n in lookups] == ["t'"]
    assert np.array_equal(ik.replay(graph, x, t)[0], tangent)


def test_table_lookup_reference_function_is_the_eval_rule():
    from isokernel.ir import EVAL
    assert EVAL[Op.TABLE_LOOKUP] is table_lookup
    assert inp.Table is Table
