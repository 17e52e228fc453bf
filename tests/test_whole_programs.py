"""The whole-program emitter on programs with control flow and fused runs
(under ``native-whole``, which always uses it, and under the default
strategy where ``native`` picks it).

``native`` compiles a graph it can write as one C program (``native-whole``
always does): top-level ``scan``, ``while`` (one predicate), ``cond`` and
``checkpoint`` become C loops and branches around the bodies' code, a loop's
carry lives in two buffers that swap after every step, and runs of
elementwise ops of one shape are one loop with their intermediates in
locals. Programs of IEEE basic operations keep the reference's bits; a
reduction or contraction folds in the fixed sequential order (n·eps of the
reference). Each case here checks the bits or the bound against the
reference and that the program was compiled whole (no op run by NumPy)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import get_strategy
from isokernel.codegen import whole as emitter
from isokernel.ir import Op

_REASON = get_strategy("native").unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"native: {_REASON}")


def compiled_whole(f, *args, strategy="native-whole"):
    """``f`` under ``strategy`` (the default one: ``auto``), checked to be one
    C program."""
    compiled = ik.jit(f, **({"strategy": strategy} if strategy else {})).lower(*args).compile()
    program = dict(compiled.report().extra)["program"]
    assert program.startswith("the whole graph as one C function"), program
    return compiled


def same_bits(got, want) -> None:
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes(), np.max(np.abs(g - w))


def _leaves(x):
    return [np.asarray(v) for v in (x if isinstance(x, tuple) else (x,))]


def check(f, *args, strategy="native-whole"):
    """``strategy`` compiles ``f`` whole and gives the reference's bits."""
    got = compiled_whole(f, *args, strategy=strategy)(*args)
    same_bits(got, ik.jit(f, strategy="reference")(*args))
    return got


# --------------------------------------------------------------------- loops

def heat(u0, steps=7):
    def step(_, u):
        interior = u[1:-1] + 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
        return inp.concatenate([u[:1], interior, u[-1:]])
    return ik.fori_loop(0, steps, step, u0)


def test_a_stencil_in_fori_loop_is_one_c_loop_with_the_reference_bits():
    check(heat, np.sin(np.linspace(0.0, 3.0, 301)), strategy=None)  # what auto picks
    check(lambda u: heat(u, 0), np.linspace(0.0, 1.0, 9))  # no step: the input's copy


def test_scan_carries_steps_and_stacked_outputs_forward_and_reversed():
    def f(c0, xs):
        def body(c, x):
            a, b = c
            return (b * 0.5 + x, a - x[::-1]), a * b  # a swap through the carry
        return ik.scan(body, (c0, c0 + 1.0), xs)

    def g(c0, xs):
        return ik.scan(lambda c, x: (c * 1.5 - x, c), c0, xs, reverse=True)
    xs = np.linspace(-1.0, 1.0, 20).reshape(5, 4)
    check(f, np.arange(4.0), xs)
    check(g, np.arange(4.0), xs)


def test_a_carry_passed_through_unchanged_and_an_output_twice():
    def f(x):
        out = ik.fori_loop(0, 4, lambda i, c: (c[1], c[0] * 2.0, c[2]), (x, x + 1.0, x * 3.0))
        return out[0], out[1], out[2], out[0]
    check(f, np.linspace(0.0, 1.0, 6))


def test_while_with_one_predicate_runs_until_it_fails():
    def f(x):
        return ik.while_loop(lambda c: c[0] < 9, lambda c: (c[0] + 2, inp.sqrt(c[1]) + 1.0),
                             (0, x))
    check(f, np.linspace(1.0, 4.0, 7))
    check(lambda x: ik.while_loop(lambda c: c > 10.0, lambda c: c * 2.0, x), np.float64(3.0))


def _damped(x):
    """A loop of seven damped steps (a counter in the carry: one predicate)."""
    def body(c):
        v, i = c
        return v * 0.9 + (v * v) * 0.05 - 0.01 * i, i + 1
    return ik.while_loop(lambda c: c[1] < 7, body, (x, 0))[0]


def test_the_tangent_loop_of_a_while_is_a_c_loop_with_the_reference_bits():
    """``linearize`` of a while loop gives its tangent map (``while_lin``):
    the body's JVP looped from the residuals, as a C loop over the primal
    and tangent carries (the primal ones in the temporary)."""
    x, t = np.linspace(0.0, 1.0, 50), np.cos(np.arange(50.0))

    def tangent(x, t):
        return ik.linearize(_damped, x)[1](t)
    assert Op.WHILE_LIN in ik.trace(tangent, x, t).ops()
    check(tangent, x, t, strategy=None)
    check(lambda x, t: ik.linearize(_damped, x)[1](t * 2.0) + 1.0, x, t)


@pytest.mark.parametrize("steps,every", [(23, None), (23, 3), (1, None), (0, None)])
def test_the_reverse_sweep_of_a_while_is_c_with_the_reference_bits(steps, every):
    """``grad`` through a while loop (``while_vjp``): the steps counted, the
    carry kept every K steps in a block from malloc, then the body's VJP
    pulled back segment by segment; a loop that runs no step passes the
    cotangent through and gives the captures zero. A float carry, an integer
    counter and a capture, each to the reference's bits."""
    def loop(x, a):
        def body(c):
            v, i = c
            return v * 0.9 + (v * v) * a - 0.01 * i, i + 1
        return ik.while_loop(lambda c: c[1] < steps, body, (x, 0),
                             checkpoint_every=every)[0]
    f = ik.grad(lambda x, a: inp.sum(loop(x, a) ** 2), argnums=(0, 1))
    x, a = np.linspace(0.0, 1.0, 50), np.float64(0.05)
    assert Op.WHILE_VJP in ik.trace(f, x, a).ops()
    check(f, x, a, strategy=None)
    assert "isk_end(args)" in compiled_whole(f, x, a).source()


def test_reverse_sweeps_inside_a_loop_free_their_blocks_every_step():
    """A while loop's gradient taken inside each step of a fori_loop: each
    sweep allocates and frees its block; the bits stay the reference's."""
    def inner(v):
        return ik.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 1.5 - c[0] * c[0] * 0.1,
                                                            c[1] + 1), (v, 0))[0]

    def f(x):
        def step(_, u):
            return u - 0.01 * ik.grad(lambda w: inp.sum(inner(w) ** 2))(u)
        return ik.fori_loop(0, 4, step, x)
    check(f, np.linspace(0.1, 0.9, 30), strategy=None)


def test_nested_loops_and_a_cond_inside_a_loop():
    def f(x):
        def outer(i, c):
            inner = ik.fori_loop(0, 3, lambda j, d: d * 0.5 + 1.0, c)
            return ik.cond(i % 2 == 0, lambda v: v - 1.0, lambda v: v + 2.0, inner)
        return ik.fori_loop(0, 5, outer, x)
    check(f, np.linspace(0.0, 1.0, 10))


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_takes_the_clamped_branch(index):
    def f(i, x):
        return ik.switch(i, [lambda v: v * 2.0, lambda v: v - 1.0, lambda v: -v], x)
    check(f, np.int32(index), np.linspace(0.0, 1.0, 5))


def test_checkpoint_runs_its_body_once():
    f = ik.checkpoint(lambda x: inp.sin(x) * x + 1.0)
    x = np.linspace(0.0, 1.0, 33)
    got = compiled_whole(f, x)(x)
    np.testing.assert_allclose(got, ik.jit(f, strategy="reference")(x), rtol=1e-15)


def test_gradient_through_a_stencil_loop_is_one_program():
    def energy(u0):
        u = heat(u0, 5)
        return inp.sum(u * u)
    u0 = np.sin(np.linspace(0.0, 3.0, 64))
    got = compiled_whole(ik.grad(energy), u0, strategy=None)(u0)
    want = ik.jit(ik.grad(energy), strategy="reference")(u0)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.max(np.abs(want)))


def test_a_krylov_solve_is_one_program_within_its_tolerance():
    def laplacian(u):
        p = inp.pad(u, ((1, 1), (1, 1)))
        return 4.0 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]

    def solve(b):
        return ik.linalg.cg(laplacian, b, tol=1e-10)[0]
    b = np.sin(np.arange(256.0)).reshape(16, 16)
    x = compiled_whole(solve, b, strategy=None)(b)
    assert np.max(np.abs(np.asarray(laplacian(x)) - b)) <= 1e-8 * np.max(np.abs(b))


# ---------------------------------------------------------------- fused runs

def test_a_run_with_shared_values_a_flip_and_a_broadcast_scalar():
    """Values read twice stay in locals; a member read through a reversal
    starts a new loop (its elements sit elsewhere); a scalar chain feeding
    the run through a broadcast runs before it."""
    def f(x, s):
        t = s * 2.0 + 1.0
        a = x * t
        b = a * a - x
        c = b[::-1] + a
        return c * c, b
    check(f, np.linspace(-1.0, 1.0, 50), np.float64(0.75))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_division_by_a_power_of_two_constant_is_a_shift_with_numpys_floor(dtype):
    def f(x):
        return x // 8, x % 16, (x * 3) // 1, x // 6, x % 7
    x = np.arange(-50, 50, dtype=dtype) * 7919
    check(f, x)
    source = compiled_whole(f, x).executable.source()
    assert ">> 3)" in source and "& (" in source  # the shift and the mask in the fused loop


def test_outputs_are_written_in_place_and_copied_where_they_must_be():
    def f(x):
        y = x * 2.0
        return y, x, y[::2], y
    got = check(f, np.linspace(0.0, 1.0, 8))
    assert not np.shares_memory(got[0], got[3])
    # y is computed straight into the first output: the arena is its one-line minimum
    assert emitter.arena_bytes(ik.jit(f).lower(np.ones(8)).graph) == emitter.ALIGN


def test_a_long_elementwise_chain_needs_no_intermediate_buffer():
    """Only the tiled input (a reshape of a broadcast: copied) has a buffer;
    the 60 ops are one loop into the output."""
    def f(x):
        y = inp.tile(x, 50_000)
        for i in range(60):
            y = inp.sin(y) if i % 3 == 0 else (y * 1.0001 if i % 3 == 1 else y + 0.5)
        return y
    x = np.array([0.1, 0.2])
    assert emitter.arena_bytes(ik.jit(f).lower(x).graph) == 8 * 100_000
    got = compiled_whole(f, x, strategy=None)(x)
    np.testing.assert_allclose(got, ik.jit(f, strategy="reference")(x), rtol=1e-13)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["add", "mul", "flip", "sub", "max", "half", "shift"]),
                min_size=1, max_size=12),
       st.integers(1, 40), st.integers(0, 6))
def test_random_elementwise_loops_keep_the_reference_bits(ops, n, steps):
    """Random bodies of IEEE basic ops and layout ops in a ``fori_loop``:
    bit for bit the reference's."""
    def body(i, c):
        x, y = c
        for op in ops:
            if op == "add":
                x = x + y
            elif op == "mul":
                y = y * 0.75 + x
            elif op == "flip":
                x = x[::-1]
            elif op == "sub":
                y = x - y
            elif op == "max":
                x = inp.maximum(x, y * 0.5)
            elif op == "half":
                y = y * 0.5
            else:
                x = inp.concatenate([x[1:], x[:1]])
        return x, y

    def f(x, y):
        x, y = ik.fori_loop(0, steps, body, (x, y))
        return x + y, x * y, x - 1.0, y  # buffers laid out after the loop's
    x, y = np.linspace(-1.0, 1.0, n), np.cos(np.arange(n, dtype=np.float64))
    check(f, x, y)


def test_a_long_fused_run_splits_over_threads_with_the_same_bits():
    """A run of at least PARALLEL_MIN elements along one axis is a function of
    its own, called over slices by the program's workers; each element is
    computed alone, so every worker count gives the same bits."""
    import isokernel.random as rnd
    n = emitter.PARALLEL_MIN + 12_345
    draw = lambda k: rnd.normal(k, (n,))  # noqa: E731
    key = rnd.key(7)
    one = ik.jit(draw, strategy="native", workers=1)
    compiled = ik.jit(draw, strategy="native", workers=3).lower(key).compile()
    assert compiled.executable.program.parallel
    assert "split over 3 threads" in dict(compiled.report().extra)["program"]
    assert "isk_parallel(isk_run0, &context" in compiled.source()
    # the worker count is written into each program: another count is another library
    assert "isk_workers = 3;" in compiled.source()
    assert "isk_workers = 1;" in one.lower(key).compile().source()
    same_bits(compiled(key), one(key))
    small = ik.jit(lambda k: rnd.normal(k, (1000,)), strategy="native").lower(key).compile()
    assert not small.executable.program.parallel


@pytest.mark.parametrize("n", [emitter.SPLIT_SUM_MIN + 12_345, (1 << 20) + 77])
def test_a_long_sum_splits_its_pairwise_tree_over_threads_with_numpys_bits(n):
    """A sum with one output of at least SPLIT_SUM_MIN elements: the subtrees
    of NumPy's pairwise recursion on the workers, added back in its order, so
    any worker count gives np.sum's bits; beyond WHOLE_MAX_REDUCED such a sum
    no longer keeps the staged plan. (The draw is a fused run split over the
    same workers: its slices start at multiples of SPLIT_ALIGN, so libmvec's
    vector and scalar calls fall on the same elements for every count.)"""
    import isokernel.random as rnd

    def f(k):
        z = rnd.normal(k, (n,))
        return inp.sum(z * z), z
    key = rnd.key(3)
    compiled = {w: ik.jit(f, strategy="native", workers=w).lower(key).compile()
                for w in (1, 2, 3, 4)}
    for w, c in compiled.items():
        assert c.executable.program.parallel and f"isk_workers = {w};" in c.source()
        assert "isk_pairwise_sum_split_float64(" in c.source()
        total, z = c(key)
        assert total == np.sum(z * z)  # NumPy's pairwise order, every bit
    same_bits(compiled[1](key), compiled[4](key))
    assert "sums of one output" in dict(compiled[2].report().extra)["program"]


def test_many_long_sums_are_shared_out_among_the_workers_with_numpys_bits():
    """Sums of 2000 rows (over one axis, and over the last of three) of at
    least PARALLEL_MIN elements in all: the outputs shared out among the
    workers, each NumPy's pairwise sum of its row, for any worker count."""
    import isokernel.random as rnd

    def f(k):
        z = rnd.normal(k, (2000, 700))
        return inp.sum(z * z, axis=1), inp.sum(z.reshape(2000, 7, 100), axis=2), z
    key = rnd.key(1)
    results = []
    for w in (1, 2, 3):
        compiled = ik.jit(f, strategy="native", workers=w).lower(key).compile()
        assert compiled.source().count("isk_split(isk_run") == 2
        rows, blocks, z = compiled(key)
        assert np.array_equal(rows, np.sum(z * z, axis=1))
        assert np.array_equal(blocks, np.sum(z.reshape(2000, 7, 100), axis=2))
        results.append((rows, blocks, z))
    same_bits(results[0], results[2])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.lists(st.integers(0, 6), min_size=1, max_size=4),
       st.floats(-2.0, 2.0))
def test_pads_in_a_fused_run_keep_the_reference_bits(n, shifts, fill):
    """Edge pads of one 1-D length summed in one run (a stencil's transpose):
    the run is cut where each pad's operand starts and ends, each piece a
    plain loop; the bits are the reference's."""
    def f(x):
        total = x[0] * 0.0 + inp.pad(x * 1.5, (3, 3), constant_values=fill)
        for k, lo in enumerate(shifts):
            total = total * 0.5 + inp.pad(x * (k + 2.0) - 1.0, (lo, 6 - lo))
        return total
    x = np.cos(np.arange(n, dtype=np.float64))
    check(f, x)
    # a piece starts where the first pad's operand does: the pads are in the run's loops
    assert "for (int64_t i0 = 3; i0 < " in compiled_whole(f, x).source()


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (1, 5), (4, 1)])
@pytest.mark.parametrize("widths", [(0, 0), (1, 2), (0, 3), (2, 0)])
def test_a_pad_writes_its_value_to_the_edges_only(shape, widths):
    """A pad node (not in a run: N-D) fills only the slabs around its
    operand, every element once: the reference's bits."""
    def f(v):
        return inp.pad(v * 2.0, [widths] * len(shape), constant_values=7.5) + 1.0
    check(f, np.cos(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", ["ab", "aTb", "abT", "bTaT"])
def test_a_large_matrix_product_calls_the_vendor_blas(dtype, form):
    """A plain matrix product of at least BLAS_MIN multiply-adds, its
    operands read with a unit stride along one axis (transposed views
    included), is one cblas_?gemm call inside the program: within n·eps of
    the reference, the same bits on every call; a small one keeps the
    fixed-order loops."""
    g = np.random.default_rng(5)
    a, b = (g.standard_normal((300, 400)).astype(dtype),
            g.standard_normal((400, 200)).astype(dtype))
    f = {"ab": lambda a, b: inp.tanh(a @ b), "aTb": lambda a, b: (a.T).T @ b,
         "abT": lambda a, b: a @ (b.T).T, "bTaT": lambda a, b: b.T @ a.T}[form]
    compiled = compiled_whole(f, a, b)
    call = "isk_dgemm(" if dtype == np.float64 else "isk_sgemm("
    assert call in compiled.source() and compiled.executable.program.blas
    assert "vendor: n*eps-bounded" in dict(compiled.report().extra)["blas"]
    got, want = compiled(a, b), ik.jit(f, strategy="reference")(a, b)
    eps = np.finfo(dtype).eps
    sizes = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    bound = 400 * eps * (sizes if form != "bTaT" else sizes.T)
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= bound)
    same_bits(compiled(a, b), got)
    small = compiled_whole(lambda a, b: a @ b, a[:8, :8], b[:8, :8])
    assert "gemm(" not in small.source()


# ------------------------------------------------------- factorizations and solves

def _within(got, want, bound=1e3):
    """Within ``bound`` eps of each output's largest magnitude (the vendor
    contract: n·eps-bounded), with the same NaN positions."""
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(np.isnan(g), np.isnan(w))
        if g.dtype.kind == "f":
            scale = np.max(np.abs(np.nan_to_num(w)), initial=1.0)
            assert np.max(np.abs(np.nan_to_num(g - w)), initial=0.0) <= \
                bound * np.finfo(g.dtype).eps * scale
        else:
            assert np.array_equal(g, w)


def _vendor_called(compiled, *names):
    source = compiled.source()
    assert all(f"isk_{name}(" in source for name in names), names
    assert "LU and Cholesky" in dict(compiled.report().extra)["blas"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_solve_and_det_call_the_vendor_lapack_inside_the_program(dtype):
    """``lu_factor`` (packed factors, 0-based pivots), ``solve`` and ``det``
    of a batch of 20x20 matrices: LAPACKE's row-major getrf and CBLAS's trsm
    in the one C program, within the vendor's n·eps bound of the reference's
    getrf by halves, the pivots equal. Matrices below LAPACK_MIN keep the
    staged plan, which runs the reference's own unblocked getrf: its bits."""
    import isokernel.scipy.linalg as sl
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((3, 20, 20)) + 4 * np.eye(20)).astype(dtype)
    b = rng.standard_normal((3, 20, 5)).astype(dtype)

    def f(a, b):
        lu, piv = sl.lu_factor(a[1])
        return lu, piv, inp.linalg.solve(a, b) * 2.0, inp.linalg.det(a)
    compiled = compiled_whole(f, a, b, strategy=None)
    _vendor_called(compiled, "sgetrf" if dtype == np.float32 else "dgetrf",
                   "strsm" if dtype == np.float32 else "dtrsm")
    _within(compiled(a, b), ik.jit(f, strategy="reference")(a, b))
    small = ik.jit(f).lower(a[:, :6, :6], b[:, :6]).compile()
    assert "below 17" in dict(small.report().extra)["program"]
    same_bits(small(a[:, :6, :6], b[:, :6]),
              ik.jit(f, strategy="reference")(a[:, :6, :6], b[:, :6]))


def test_cholesky_gives_nan_for_a_matrix_that_is_not_positive_definite():
    rng = np.random.default_rng(12)
    m = rng.standard_normal((4, 19, 19))
    spd = m @ np.swapaxes(m, -1, -2) + 0.5 * np.eye(19)
    spd[2] -= 80 * np.eye(19)  # no longer positive definite: that factor is NaN

    def f(s):
        return inp.linalg.cholesky(s) + 0.0
    compiled = compiled_whole(f, spd)
    _vendor_called(compiled, "dpotrf")
    got = compiled(spd)
    assert np.isnan(got[2]).all() and not np.isnan(got[[0, 1, 3]]).any()
    assert (np.triu(got[0], 1) == 0).all()
    _within(got, ik.jit(f, strategy="reference")(spd))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solves_read_one_triangle_of_a_strided_matrix(lower, transpose_a,
                                                                 unit_diagonal):
    """Every flag of ``solve_triangular``, with the matrix a transposed view
    (copied to a contiguous temporary for trsm) and the other triangle full
    of values the solve must not read."""
    import isokernel.scipy.linalg as sl
    rng = np.random.default_rng(13)
    a = rng.standard_normal((2, 24, 24)) + 6 * np.eye(24)
    b = rng.standard_normal((2, 24, 3))

    def f(a, b):
        at = inp.swapaxes(a, -1, -2) * 1.0 if lower else inp.swapaxes(a, -1, -2)
        return sl.solve_triangular(at, b, lower=lower, trans=1 if transpose_a else 0,
                                   unit_diagonal=unit_diagonal)
    compiled = compiled_whole(f, a, b)
    _vendor_called(compiled, "dtrsm")
    _within(compiled(a, b), ik.jit(f, strategy="reference")(a, b))


def test_newton_steps_with_a_solve_in_a_loop_and_the_gradient_of_a_solve():
    """A Newton iteration whose Jacobian is solved in each step of a
    ``fori_loop`` (the LAPACK calls inside the C loop), and ``grad`` of a
    solve (triangular solves with the transposed factors): one C program."""
    rng = np.random.default_rng(14)
    a = rng.standard_normal((24, 24)) + 8 * np.eye(24)
    y = rng.standard_normal(24)

    def newton(x0):
        def step(_, x):
            residual = a @ x + 0.1 * x ** 3 - y
            jacobian = a + inp.diag(0.3 * x ** 2)
            return x - inp.linalg.solve(jacobian, residual)
        return ik.fori_loop(0, 6, step, x0)

    def loss(m):
        return inp.sum(inp.linalg.solve(m, y) ** 2)
    x0 = np.zeros(24)
    compiled = compiled_whole(newton, x0, strategy=None)
    _vendor_called(compiled, "dgetrf")
    got = compiled(x0)
    _within(got, ik.jit(newton, strategy="reference")(x0))
    assert np.max(np.abs(a @ got + 0.1 * got ** 3 - y)) < 1e-12  # converged
    grad = compiled_whole(ik.grad(loss), a, strategy=None)
    _within(grad(a), ik.jit(ik.grad(loss), strategy="reference")(a), bound=1e4)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.lists(st.tuples(st.integers(0, 2),
                                                               st.integers(0, 2)),
                                                     min_size=1, max_size=4),
       st.floats(-2.0, 2.0))
def test_slices_of_a_pad_are_read_in_place_with_the_reference_bits(rows, cols, shifts, fill):
    """A 2-D stencil (slices of one padded array, as the 5-point Laplacian
    reads its neighbours): the pad is never stored, the run's index space
    is cut into boxes where each slice is wholly the operand shifted or the
    padding value; any sizes, shifts and padding value keep the bits."""
    def f(u):
        p = inp.pad(u * 1.0, ((2, 2), (2, 2)), constant_values=fill)
        total = 4.0 * u
        for k, (a, b) in enumerate(shifts):
            total = total - (k + 1.0) * p[a:a + rows, b:b + cols]
        return total
    u = np.cos(np.arange(rows * cols, dtype=np.float64)).reshape(rows, cols)
    check(f, u)
    reads_padding = any((a, b) != (2, 2) for a, b in shifts)
    if rows > 1 and cols > 1 and reads_padding:  # (a one-element run is not fused)
        source = compiled_whole(f, u).source()
        assert re.search(r"\br\d+v\[", source), source  # a slice read as the padding value


def test_a_laplacian_in_a_loop_reads_its_pad_in_place():
    """The cg benchmark's operator in a fori_loop: no pad buffer in the
    loop, the reference's bits."""
    def lap(u):
        p = inp.pad(u, ((1, 1), (1, 1)))
        return 4.0 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]

    def f(u):
        return ik.fori_loop(0, 3, lambda i, v: v - 0.1 * lap(v), u)
    u = np.sin(np.arange(48.0)).reshape(6, 8)
    check(f, u, strategy=None)


@pytest.mark.parametrize("n", [5, 128, 1000, 4099])
def test_an_inner_product_sums_its_products_without_storing_them(n):
    """sum(a * b) where the product is a fused run's value nothing else
    reads: the sum multiplies as it adds (NumPy's pairwise order over the
    same products): np.sum(a * b)'s bits, in a loop as a Krylov method's."""
    def f(a, b):
        c = a * 1.5 + b
        return inp.sum(c * b), inp.sum((a - b) * (a - b)), c

    def g(a, b):
        return ik.fori_loop(0, 2, lambda i, v: v * (1.0 / (1.0 + inp.sum(v * v))), a)
    a, b = np.cos(np.arange(n, dtype=np.float64)), np.sin(np.arange(n, dtype=np.float64))
    compiled = compiled_whole(f, a, b)
    assert compiled.source().count("isk_pairwise_dot_float64(") >= 3  # 2 calls + the helper
    got = compiled(a, b)
    same_bits(got, ik.jit(f, strategy="reference")(a, b))
    c = a * 1.5 + b
    assert got[0] == np.sum(c * b) and got[1] == np.sum((a - b) * (a - b))
    check(g, a, b)


def test_an_inner_product_of_strided_steps_keeps_its_product():
    """A scan over the columns of a matrix (each step a strided read): the
    inner product of a step cannot be summed as one run, so its product is
    stored and summed as before; the reference's bits either way."""
    def f(m):
        def body(c, col):
            v = col * 2.0 + c  # (fused with the product below)
            return c + inp.sum(col * col), v
        return ik.scan(body, np.float64(0.0), inp.transpose(m))
    m = np.cos(np.arange(60.0)).reshape(6, 10)
    check(f, m)
