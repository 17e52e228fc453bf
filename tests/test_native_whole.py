"""native-whole: the whole graph as one C function.

Elementwise IEEE operations and layout ops give the reference's bits;
reductions and dot_general give the bits of the sequential order written out
here in NumPy (not NumPy's own pairwise or BLAS order, which the tests show
differs); transcendentals stay within native's measured bounds; graphs it
cannot write are refused naming the op and the fix; NumPy's floating-point
diagnostics follow the caller's errstate; concurrent calls share the arena
safely."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import get_strategy
from isokernel.backends.numerics import NATIVE_ULP_BOUND
from isokernel.ir import Op
from isokernel.ir.errors import BackendUnavailableError, PlanningError

_REASON = get_strategy("native-whole").unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"native-whole: {_REASON}")


def whole(f):
    return ik.jit(f, strategy="native-whole")


def reference(f):
    return ik.jit(f, strategy="reference")


def same_bits(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and \
        got.tobytes() == want.tobytes()


def rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------- exact ops


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_and_layout_ops_are_the_reference_bits(dtype):
    def f(a, b, c):
        x = a * b + c[None, :] - a / (b + 3.0)
        y = inp.sqrt(inp.abs(x)) * inp.floor(a) - inp.maximum(a, b) + inp.minimum(x, 0.5)
        z = inp.where(a > b, a, -b) + inp.sign(x) * inp.rint(b * 4.0)
        cut = a[1:6:2, ::-1]  # a strided slice and a reversal
        turned = (x.T * 2.0).reshape(-1)  # a reshape of a transposed value
        joined = inp.concatenate([a, z, b[:, :2]], axis=1)
        padded = inp.pad(a[:3, :2], ((1, 2), (0, 1)), constant_values=-7.0)
        return x, y, z, cut, turned, joined, padded, inp.floor_divide(a, b + 0.25), a % 0.75

    g = rng()
    a = g.normal(size=(7, 5)).astype(dtype)
    b = (g.normal(size=(7, 5)) * 3).astype(dtype)
    c = g.normal(size=5).astype(dtype)
    for got, want in zip(whole(f)(a, b, c), reference(f)(a, b, c)):
        assert same_bits(got, want)


def test_integer_ops_wrap_and_divide_as_numpy():
    def f(i, j):
        return (i * j + 7, i // (j | 1), i % (j | 1), i << 3, i >> 2, i ^ j,
                inp.sum(i * 1000003, axis=0))

    g = rng(1)
    i = g.integers(-2**31, 2**31, size=(6, 4), dtype=np.int64).astype(np.int32)
    j = g.integers(-50, 50, size=(6, 4), dtype=np.int32)
    for got, want in zip(whole(f)(i, j), reference(f)(i, j)):
        assert same_bits(got, want)


# --------------------------------------------------------- fixed-order sums


def sequential_fold(x, axes, combine, first):
    """Each output folds its elements in the row-major order of ``axes``,
    starting from ``first`` (written out, independently of the C)."""
    axes = tuple(a % x.ndim for a in axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    n = int(np.prod([x.shape[a] for a in axes]))
    columns = moved.reshape(*[x.shape[d] for d in kept], n)
    acc = np.full(columns.shape[:-1], first, dtype=x.dtype)
    for k in range(n):
        acc = combine(acc, columns[..., k])
    return acc


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (0, 1, 2)])
def test_reductions_fold_in_row_major_order(axes):
    g = rng(2)
    x = (g.normal(size=(9, 13, 6)) * 10.0 ** g.integers(-8, 8, size=(9, 13, 6)))
    x[4, 5, 1] = np.nan

    def f(v):
        return (inp.sum(v, axis=axes), inp.prod(v / 3.0, axis=axes), inp.max(v, axis=axes),
                inp.min(v, axis=axes))

    got = whole(f)(x)
    trailing = axes in ((2,), (0, 1, 2))  # NumPy's pairwise sum: np.sum's bits
    want = (np.sum(x, axis=axes) if trailing else sequential_fold(x, axes, np.add, 0.0),
            sequential_fold(x / 3.0, axes, np.multiply, 1.0),
            sequential_fold(x, axes, np.maximum, -np.inf),
            sequential_fold(x, axes, np.minimum, np.inf))
    for a, b in zip(got, want):
        assert same_bits(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_trailing_sum_is_numpys_pairwise_sum(dtype):
    """A float sum over trailing axes read as one run is NumPy's pairwise
    sum (np.sum's bits on a C-contiguous operand, rows of every length class:
    < 8, <= 128, recursive); the oracle can tell it from the sequential fold,
    which a sum over a leading axis keeps."""
    g = rng(3)
    for n in (5, 8, 127, 129, 4096, 100_003):
        x = (g.normal(size=n) * 1e3).astype(dtype)
        assert same_bits(whole(lambda v: inp.sum(v))(x), np.sum(x)), n
    x = (g.normal(size=4096) * 1e3).astype(dtype)
    assert not same_bits(sequential_fold(x, (0,), np.add, 0.0), np.sum(x))
    m = (g.normal(size=(3, 200, 5)) * 1e3).astype(dtype)
    assert same_bits(whole(lambda v: inp.sum(v, axis=(1, 2)))(m), np.sum(m, axis=(1, 2)))
    column = whole(lambda v: inp.sum(v, axis=0))(m[:, :, 0].T.copy())
    assert same_bits(column, sequential_fold(m[:, :, 0].T.copy(), (0,), np.add, 0.0))


def test_sums_start_from_numpys_identity():
    z = np.array([-0.0, -0.0])
    assert same_bits(whole(lambda v: inp.sum(v))(z), np.sum(z))  # +0.0, as NumPy's
    assert same_bits(whole(lambda v: inp.prod(v))(z[:1]), np.prod(z[:1]))  # -0.0


def sequential_contraction(a, b, contract_a, contract_b):
    """``tensordot`` with the products summed in the row-major order of the
    contracting axes, one product and one sum at a time."""
    fa = [d for d in range(a.ndim) if d not in contract_a]
    fb = [d for d in range(b.ndim) if d not in contract_b]
    n = int(np.prod([a.shape[d] for d in contract_a]))
    am = np.transpose(a, fa + list(contract_a)).reshape(*[a.shape[d] for d in fa], n)
    bm = np.transpose(b, list(contract_b) + fb).reshape(n, *[b.shape[d] for d in fb])
    acc = np.full([a.shape[d] for d in fa] + [b.shape[d] for d in fb], 0.0, a.dtype)
    for k in range(n):
        acc = acc + np.multiply.outer(am[..., k], bm[k])
    return acc


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dot_general_sums_products_in_contracting_order(dtype):
    g = rng(4)
    a = g.normal(size=(12, 16)).astype(dtype)
    b = g.normal(size=(16, 16)).astype(dtype)
    c = g.normal(size=(12, 16)).astype(dtype)
    t = g.normal(size=(3, 4, 5)).astype(dtype)
    u = g.normal(size=(4, 5, 2)).astype(dtype)

    wide = g.normal(size=(16, 45)).astype(dtype)

    def f(a, b, c, t, u, wide):
        return (a @ b, a @ b.T, a.T @ c, inp.dot(a[0], b[:, 3]), inp.tensordot(t, u, axes=2),
                a[:10] @ wide[:, :37])  # blocks of 4 x 8 and the rows and columns beyond them

    got = whole(f)(a, b, c, t, u, wide)
    want = (sequential_contraction(a, b, (1,), (0,)),
            sequential_contraction(a, b.T.copy(), (1,), (0,)),
            sequential_contraction(a, c, (0,), (0,)),
            sequential_contraction(a[0], b[:, 3].copy(), (0,), (0,)),
            sequential_contraction(t, u, (1, 2), (0, 1)),
            sequential_contraction(a[:10], wide[:, :37].copy(), (1,), (0,)))
    for x, y in zip(got, want):
        assert same_bits(x, y)
    source = whole(f).lower(a, b, c, t, u, wide).compile().source()
    assert source.count("s[r][c] = s[r][c] +") == 1  # the last product ran in blocks
    ref = reference(f)(a, b, c, t, u, wide)
    eps = np.finfo(dtype).eps
    assert all(np.allclose(x, y, rtol=64 * eps, atol=64 * eps) for x, y in zip(got, ref))


def test_batched_products_keep_the_batch_axis():
    g = rng(5)
    x, y = g.normal(size=(4, 3, 6)), g.normal(size=(4, 6, 2))
    got = whole(lambda p, q: inp.einsum("bij,bjk->bik", p, q))(x, y)
    want = np.stack([sequential_contraction(x[i], y[i], (1,), (0,)) for i in range(4)])
    assert same_bits(got, want)


# ------------------------------------------------------------ transcendentals


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendentals_stay_within_native_bounds(dtype):
    x = np.linspace(-3.0, 3.0, 4001).astype(dtype)
    ops = {Op.TANH: inp.tanh, Op.EXP: inp.exp, Op.SIN: inp.sin, Op.LOG1P: inp.log1p}

    def f(v):
        return tuple(fn(inp.abs(v) if op is Op.LOG1P else v) for op, fn in ops.items())

    for op, got, want in zip(ops, whole(f)(x), reference(f)(x)):
        ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(dtype))
        assert np.nanmax(ulps) <= NATIVE_ULP_BOUND[op], op


# --------------------------------------------------------------- the strategy


def test_a_graph_it_cannot_write_is_refused_naming_the_op():
    def lanes(x):  # under vmap: one predicate per lane
        return ik.while_loop(lambda c: c < 3.0, lambda c: c * 2.0, x)
    with pytest.raises(BackendUnavailableError, match="native-whole.*while.*per lane"):
        whole(ik.vmap(lanes))(np.ones(3))
    with pytest.raises((PlanningError, BackendUnavailableError), match="native-whole"):
        whole(lambda a: ik.linalg.solve(a, a[0]))(np.eye(6) * 2.0)  # LU beyond 4x4


def test_floating_point_errors_follow_the_callers_errstate():
    f = whole(lambda a, b: a / b)
    a, b = np.ones(4), np.array([1.0, 0.0, 2.0, 4.0])
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide"):
        f(a, b)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        got = f(a, b)
    with np.errstate(divide="ignore"):
        assert same_bits(got, reference(lambda a, b: a / b)(a, b))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        f(a, b)


def test_concurrent_calls_take_turns_on_the_arena():
    f = whole(lambda a, b: inp.tanh(a @ b) @ b.T)
    g = rng(6)
    cases = [(g.normal(size=(20, 8)), g.normal(size=(8, 8))) for _ in range(8)]
    expected = [f(*c) for c in cases]
    failures = []

    def worker(k):
        for _ in range(30):
            if not same_bits(f(*cases[k]), expected[k]):
                failures.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_the_arena_reuses_buffers_and_outputs_are_fresh():
    def chain(x):
        for _ in range(40):
            x = inp.sin(x) * 1.5 + 0.25
        return x, x * 2.0

    jitted = whole(chain)
    x = np.linspace(0.0, 1.0, 1000)
    first = jitted(x)
    program = jitted.lower(x).compile().executable.program
    assert program.scratch <= 4 * 8 * 1024  # 120 values of 8 kB, in a few buffers
    second = jitted(x)
    assert first[0] is not second[0] and same_bits(first[0], second[0])
    assert not np.shares_memory(first[0], first[1])


# ------------------------------------------------- nests that read the stop flag


def test_nests_that_read_the_stop_flag_keep_their_bits():
    """Nests of at least ``POLL_WORK`` iterations read the call's stop flag
    (between strips of a long innermost loop, in an outer loop, in the
    blocks of a matrix product and its remainder): the loops still compute
    the same values in the same order. A program of at least
    ``WATCHED_WORK`` iterations is one a Ctrl-C reaches; a small one is not
    watched (no cost for a training step's small graphs)."""
    from isokernel.codegen.whole import POLL_WORK, WATCHED_WORK

    def f(x, m, a, b):
        y = x * 1.5 - 0.25  # one loop of 3 POLL_WORK iterations: strips
        s = inp.sum(m * m, axis=1)  # 2000 pairwise sums of 300: polled between them
        return y, s, a @ b  # 101 x 50 by 50 x 45: blocks and a remainder (below BLAS_MIN)

    g = rng(9)
    x = g.normal(size=3 * POLL_WORK + 5)
    m, a, b = g.normal(size=(2000, 300)), g.normal(size=(101, 50)), g.normal(size=(50, 45))
    jitted = whole(f)
    y, s, p = jitted(x, m, a, b)
    program = jitted.lower(x, m, a, b).compile().executable.program
    assert program.source.count("halt = 1;") >= 5 and program.polls
    assert same_bits(y, reference(f)(x, m, a, b)[0])
    assert same_bits(s, np.sum(m * m, axis=1))  # NumPy's pairwise order
    assert same_bits(p, sequential_contraction(a, b, (1,), (0,)))
    small = whole(lambda v: inp.tanh(v @ v.T) * 2.0)
    v = g.normal(size=(16, 16))
    small(v)
    assert not small.lower(v).compile().executable.program.polls
    assert 16**3 + 2 * 16**2 < WATCHED_WORK
