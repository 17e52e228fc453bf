"""Data-dependent indexing (``record.indexing`` on the ``gather`` and
``scatter`` primitives): values against NumPy (``np.take``, ``ufunc.at``,
fancy indexing) on every CPU strategy and eagerly, derivatives against
finite-free closed forms, vmap against a Python loop, the repeated-index
order, and JAX itself where it is installed (values, ``jacfwd``,
``jacrev``, ``vmap``; its default out-of-range modes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
import isokernel.ops as iops
from isokernel.ir import Op

from .conftest import CPU_STRATEGIES as STRATEGIES
from .conftest import same

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4))
IDX = np.array([4, 0, 4, 2, -1, 3])
UPD = RNG.standard_normal((6, 4))




# --- values against NumPy -----------------------------------------------------------------

@pytest.mark.parametrize("key", [
    (IDX,), (slice(None), IDX % 4), (IDX % 5, IDX % 4), (slice(1, 4), IDX % 4),
    (IDX.reshape(2, 3) % 5,), (2, IDX % 4), (IDX % 5, 1), (IDX % 5, slice(None, None, -1)),
    (Ellipsis, IDX % 4),
])
def test_integer_array_indexing_is_numpys(run, key):
    """NumPy's advanced indexing: the arrays' broadcast shape where the
    first array is when the arrays (and integers) are adjacent, else first."""
    def f(x, *arrays):
        it = iter(arrays)
        return x[tuple(next(it) if isinstance(k, np.ndarray) else k for k in key)]
    arrays = [k for k in key if isinstance(k, np.ndarray)]
    same(run(f, X, *arrays), X[key])


def test_non_adjacent_arrays_put_their_axes_first(run):
    x = RNG.standard_normal((3, 4, 5))
    i, j = np.array([0, 2]), np.array([1, 3])
    same(run(lambda x, i, j: x[i, :, j], x, i, j), x[i, :, j])  # (2, 4)
    same(run(lambda x, j: x[:, j, 1], x, j), x[:, j, 1])  # adjacent: (3, 2)
    same(run(lambda x, i: x[i, 1:3, 2], x, i), x[i, 1:3, 2])  # non-adjacent: (2, 2)


def test_take_and_take_along_axis_are_numpys_in_range(run):
    same(run(lambda x, i: inp.take(x, i, axis=1), X, IDX % 4), np.take(X, IDX % 4, axis=1))
    same(run(lambda x, i: inp.take(x, i), X, IDX % 20), np.take(X, IDX % 20))
    order = np.argsort(X, axis=0)
    same(run(lambda x, o: inp.take_along_axis(x, o, axis=0), X, order),
         np.take_along_axis(X, order, axis=0))
    column = order[:, :1]  # broadcast along axis 1
    same(run(lambda x, o: inp.take_along_axis(x, o, axis=0), X, column),
         np.take_along_axis(X, np.broadcast_to(column, X.shape), axis=0))


def test_out_of_range_modes(run):
    i = np.array([7, -1, 2, -9])
    same(run(lambda x, i: inp.take(x, i, axis=0), X, i)[[0, 3]],
         np.full((2, 4), np.nan))  # fill: NaN
    same(run(lambda x, i: inp.take(x, i, axis=0, mode="clip"), X, i),
         X[[4, 4, 2, 0]])  # negative first counts from the end, then clip
    same(run(lambda x, i: inp.take(x, i, axis=0, mode="wrap"), X, i), np.take(X, i, 0,
                                                                              mode="wrap"))
    same(run(lambda x, i: inp.take(x, i, axis=0, mode="fill", fill_value=-2.0), X, i)[0],
         np.full(4, -2.0))
    # x[i] clamps under a recording, as JAX's (eagerly it is NumPy's, which raises)
    same(ik.jit(lambda x, i: x[i])(X, i), X[[4, 4, 2, 0]])


def test_updates_apply_repeated_indices_in_order(run):
    """``set`` keeps the last write of a repeated index; ``add`` sums in the
    indices' order (``np.add.at``); min, max and multiply as their ufuncs."""
    want_set = X.copy()
    for k, i in enumerate(IDX):
        want_set[i] = UPD[k]
    same(run(lambda x, u: inp.at(x)[IDX].set(u), X, UPD), want_set)
    for name, ufunc in (("add", np.add), ("multiply", np.multiply), ("min", np.minimum),
                        ("max", np.maximum)):
        want = X.copy()
        ufunc.at(want, IDX, UPD)
        same(run(lambda x, u, name=name: getattr(inp.at(x)[IDX], name)(u), X, UPD), want)


def test_updates_drop_what_is_out_of_range(run):
    i = np.array([1, 9, -7, 3])
    want = X.copy()
    np.add.at(want, [1, 3], 1.0)
    same(run(lambda x: inp.at(x)[i].add(1.0), X), want)
    got = run(lambda x: inp.at(x)[i].add(1.0, mode="clip"), X)
    want = X.copy()
    np.add.at(want, np.clip(np.where(i < 0, i + 5, i), 0, 4), 1.0)
    same(got, want)


def test_segments_and_bincount(run):
    ids = np.array([3, 0, 3, 1, -1, 9])
    want = np.zeros((4, 4))
    np.add.at(want, [3, 0, 3, 1], UPD[[0, 1, 2, 3]])
    same(run(lambda d, s: iops.segment_sum(d, s, 4), UPD, ids), want)
    want = np.full((4, 4), -np.inf)
    np.maximum.at(want, [3, 0, 3, 1], UPD[[0, 1, 2, 3]])
    same(run(lambda d, s: iops.segment_max(d, s, 4), UPD, ids), want)
    values = np.array([0, 3, 3, 1, 5, 3])
    same(run(lambda v: inp.bincount(v, length=6), values), np.bincount(values, minlength=6))
    w = RNG.standard_normal(6)
    want = np.bincount(values, w, minlength=7)
    same(run(lambda v, w: inp.bincount(v, w, length=7), values, w), want)


def test_dynamic_slices_clamp_their_starts(run):
    same(run(lambda x, a: iops.dynamic_slice(x, (a, np.int64(1)), (2, 3)), X, np.int64(4)),
         X[3:5, 1:4])  # start 4 clamped to 3 so the block fits
    block = np.ones((2, 3))
    want = X.copy()
    want[1:3, 0:3] = block
    same(run(lambda x, u, a: iops.dynamic_update_slice(x, u, (a, np.int64(-2))), X, block,
             np.int64(1)), want)


def test_masks_and_new_axes_are_refused_with_the_fix():
    with pytest.raises(ik.TracerError, match="inp.where"):
        ik.jit(lambda x: x[x > 0])(X)
    with pytest.raises(ik.TracerError, match="expand_dims"):
        ik.jit(lambda x, i: x[None, i])(X, IDX)
    with pytest.raises(TypeError, match="integers"):
        ik.jit(lambda x, i: x[i])(X, IDX * 0.5)


# --- derivatives ------------------------------------------------------------------------

def test_gradients_of_gather_and_updates():
    """d/dx sum(x[i]^2) puts 2 x[r] on row r once per time r is read; the
    updates of ``set`` get the cotangent only where theirs was the last
    write; ``add`` passes it to both; min/max share it among the values
    that reach the result."""
    i = np.array([1, 1, 3])
    g = ik.grad(lambda x: inp.sum(x[i] ** 2))(X)
    want = np.zeros_like(X)
    want[1], want[3] = 4 * X[1], 2 * X[3]
    np.testing.assert_allclose(g, want, rtol=1e-15)
    u = RNG.standard_normal((3, 4))
    gu = ik.grad(lambda u: inp.sum(inp.at(X)[i].set(u) * 2.0))(u)
    np.testing.assert_array_equal(gu, np.array([[0.0] * 4, [2.0] * 4, [2.0] * 4]))
    gx, gu = ik.grad(lambda x, u: inp.sum(inp.at(x)[i].add(u) * 3.0), argnums=(0, 1))(X, u)
    np.testing.assert_array_equal(gx, np.full_like(X, 3.0))
    np.testing.assert_array_equal(gu, np.full_like(u, 3.0))
    same_value = np.full((2, 4), X[2, 0])
    gx, gu = ik.grad(lambda x, u: inp.sum(inp.at(x)[np.array([2, 2])].max(u)),
                     argnums=(0, 1))(X, same_value)
    # column 0: the row and both updates tie, each gets a third of the unit
    np.testing.assert_allclose([gx[2, 0], *gu[:, 0]], [1 / 3] * 3, rtol=1e-15)


def test_multiply_refuses_its_derivative_in_the_updates():
    with pytest.raises(ik.DifferentiationError, match="scatter multiply"):
        ik.grad(lambda u: inp.sum(inp.at(X)[IDX].multiply(u)))(UPD)
    g = ik.grad(lambda x: inp.sum(inp.at(x)[IDX].multiply(UPD)))(X)
    want = np.ones_like(X)
    np.multiply.at(want, IDX, UPD)
    np.testing.assert_allclose(g, want, rtol=1e-15)


@pytest.mark.parametrize("axes", [(0, 0), (0, None), (None, 0)])
def test_vmap_of_gather_and_scatter_is_the_loop(axes):
    xs, js = RNG.standard_normal((3, 5, 4)), np.array([[1, 2], [0, 0], [4, 3]])
    args = (xs if axes[0] == 0 else xs[0], js if axes[1] == 0 else js[0])
    for f in (lambda x, j: x[j], lambda x, j: inp.at(x)[j].add(1.5),
              lambda x, j: inp.at(x)[j].set(-1.0), lambda x, j: inp.at(x)[j].min(0.0)):
        got = ik.jit(ik.vmap(f, in_axes=axes))(*args)
        want = [f(args[0][b] if axes[0] == 0 else args[0],
                  args[1][b] if axes[1] == 0 else args[1]) for b in range(3)]
        same(got, np.stack(want))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-6, 8), min_size=1, max_size=12), st.integers(1, 3))
def test_scatter_add_is_the_same_bits_on_every_strategy(indices, workers):
    """Repeated indices sum in one fixed order, whatever the strategy and
    its worker count: ``np.add.at``'s bits."""
    idx = np.array(indices)
    u = np.cos(np.arange(len(indices) * 3, dtype=np.float64)).reshape(-1, 3) * 1e3 + 0.1
    x = np.linspace(-1.0, 1.0, 15).reshape(5, 3)
    want = x.copy()
    np.add.at(want, np.where(idx < 0, idx + 5, idx)[(idx >= -5) & (idx < 5)],
              u[(idx >= -5) & (idx < 5)])

    def f(x, u):
        return inp.at(x)[idx].add(u)
    same(ik.jit(f, strategy="reference")(x, u), want)
    same(ik.jit(f, strategy="threads", workers=workers)(x, u), want)
    same(ik.jit(f, strategy="native", workers=workers)(x, u), want)


def test_the_primitives_are_recorded_once():
    graph = ik.trace(lambda x, i: x[i] + inp.at(x)[i].add(1.0)[i], X, IDX % 5)
    assert {Op.GATHER, Op.SCATTER} <= graph.ops()


# --- JAX itself, where it is installed ----------------------------------------------------

def test_against_jax_values_jacobians_and_vmap():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    i = IDX
    cases = [
        (lambda x: x[i], lambda x: x[i]),
        (lambda x: x[:, i % 4], lambda x: x[:, i % 4]),
        (lambda x: inp.take(x, i * 3), lambda x: jnp.take(x, i * 3)),
        (lambda x: inp.at(x)[i].set(UPD[:, 0:1] * x[0]), lambda x: x.at[i].set(UPD[:, 0:1]
                                                                                * x[0])),
        (lambda x: inp.at(x)[i].add(x[i] * 2.0), lambda x: x.at[i].add(x[i] * 2.0)),
        (lambda x: inp.at(x)[i].max(UPD), lambda x: x.at[i].max(UPD)),
        (lambda x: iops.segment_sum(x, np.array([1, 1, 0, -1, 3]), 4),
         lambda x: jax.ops.segment_sum(x, np.array([1, 1, 0, -1, 3]), 4)),
        (lambda x: iops.dynamic_slice(x, (np.int64(3), np.int64(1)), (3, 2)),
         lambda x: jax.lax.dynamic_slice(x, (np.int64(3), np.int64(1)), (3, 2))),
    ]
    for f, g in cases:
        want = np.asarray(jax.jit(g)(X))
        for strategy in STRATEGIES:
            got = ik.jit(f, strategy=strategy)(X)
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
        for ours, theirs in ((ik.jacrev, jax.jacrev), (ik.jacfwd, jax.jacfwd)):
            want = np.asarray(theirs(g)(X))  # within 1e-12 of its largest element
            np.testing.assert_allclose(ours(f)(X), want, rtol=0,
                                       atol=1e-12 * np.max(np.abs(want)))
        xs = np.stack([X, X * 2.0])
        np.testing.assert_allclose(ik.vmap(f)(xs), jax.vmap(g)(xs), rtol=1e-12)


def test_native_compiles_gathers_and_updates_into_its_one_c_program():
    """An embedding look-up and its gradient (a scatter-add) in a training
    step's shape: ``native`` writes both as C loops (the index clamped as
    the reference's rule clamps; updates in the indices' order, each
    combination the elementwise op's own expression): the reference's bits."""
    table, ids = RNG.standard_normal((50, 8)), np.array([3, 17, 3, 49, 0, 17, 17])
    target = RNG.standard_normal((7, 8))

    def step(table):
        def loss(t):
            return inp.sum((t[ids] * 2.0 - target) ** 2)
        return table - 0.1 * ik.grad(loss)(table)
    compiled = ik.jit(step).lower(table).compile()
    assert dict(compiled.report().extra)["program"].startswith("the whole graph as one C")
    same(compiled(table), ik.jit(step, strategy="reference")(table))
    for name in ("set", "multiply", "min", "max"):
        def update(x, u, name=name):
            return getattr(inp.at(x)[IDX], name)(u) * 1.0
        got = ik.jit(update, strategy="native-whole")(X, UPD)
        same(got, ik.jit(update, strategy="reference")(X, UPD))
