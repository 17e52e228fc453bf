"""Solvers never report success on input they cannot solve: the Krylov
solvers' ``info`` (SciPy's convention: 0 converged, > 0 not converged after
that many steps, < 0 illegal input or breakdown) and ``odeint``'s
``success``, eagerly, under ``jit`` and per pixel under ``jit(vmap(...))``;
and the options that are static Python numbers are checked before anything
runs, with a one-line error naming the argument, its value and the fix."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends.parity import bit_identical
from isokernel.ode import odeint
from isokernel.scipy.sparse.linalg import bicgstab, cg, gmres

SOLVERS = {"cg": cg, "bicgstab": bicgstab, "gmres": gmres}
needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")
STRATEGIES = ["reference", "threads", pytest.param("native", marks=needs_cc)]

A = np.diag([2.0, 3.0, 4.0]) + 0.1
B = np.array([1.0, -2.0, 0.5])


def with_entry(x: np.ndarray, index, value: float) -> np.ndarray:
    x = x.copy()
    x[index] = value
    return x


BAD_INPUT = {"nan in A": (with_entry(A, (1, 1), np.nan), B),
             "inf in A": (with_entry(A, (0, 2), np.inf), B),
             "nan in b": (A, with_entry(B, 1, np.nan)),
             "inf in b": (A, with_entry(B, 1, np.inf))}


def quietly(fn, *args, **kwargs):
    """NaN and inf arithmetic warns in NumPy; the status is what is tested."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


# --- Krylov solvers: info ---------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(BAD_INPUT))
@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_krylov_nan_or_inf_input_is_not_reported_as_converged(name, case):
    """cg/bicgstab with NaN in A or b, and gmres with inf in b, returned
    x = 0 with info = 0: the NaN comparison stopped the loop after no step,
    and that looked like convergence. Now info is -1 and x is NaN."""
    a, b = BAD_INPUT[case]
    x, info = quietly(SOLVERS[name], a, b)
    assert int(info) == -1, (name, case, info)
    assert np.isnan(x).all()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_krylov_nan_or_inf_input_per_pixel_is_not_reported_as_converged(name, strategy):
    """Per pixel under jit(vmap(...)): each bad lane reports -1, the good
    lanes converge with the bits of their own eager solve."""
    good = np.stack([B, 2.0 * B])
    mats = np.stack([A, A] + [a for a, _ in BAD_INPUT.values()] + [A])
    rhs = np.concatenate([good, np.stack([b for _, b in BAD_INPUT.values()]), [3.0 * B]])
    fn = ik.jit(ik.vmap(lambda a, b: SOLVERS[name](a, b)), strategy=strategy)
    xs, infos = quietly(fn, mats, rhs)
    assert infos.tolist() == [0, 0, -1, -1, -1, -1, 0], infos
    assert np.isnan(xs[2:6]).all()
    for i in (0, 1, 6):
        x, _ = SOLVERS[name](mats[i], rhs[i])
        np.testing.assert_allclose(xs[i], x, rtol=1e-12)


def stencil(x):
    """A matrix-free SPD operator: under jit(vmap(...)) on native its loop
    is one C while per pixel."""
    padded = inp.pad(x, (1, 1))
    return 2.5 * x - padded[:-2] - padded[2:]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_krylov_nan_or_inf_input_in_a_per_pixel_loop_is_not_reported_as_converged(name,
                                                                                   strategy):
    rhs = np.stack([B, with_entry(B, 0, np.nan), with_entry(B, 2, -np.inf), 2.0 * B, B + 1.0])
    fn = ik.jit(ik.vmap(lambda b: SOLVERS[name](stencil, b)), strategy=strategy)
    xs, infos = quietly(fn, rhs)
    assert infos.tolist() == [0, -1, -1, 0, 0], infos
    assert np.isnan(xs[1:3]).all()
    for i in (0, 3, 4):
        x, _ = SOLVERS[name](stencil, rhs[i])
        np.testing.assert_allclose(xs[i], x, rtol=1e-12)


@pytest.mark.parametrize("option", ["tol", "atol"])
@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_krylov_negative_tol_is_refused(name, option):
    """tol < 0 gave info = 0 (the bound is squared). A static negative or
    NaN tolerance is refused, naming the argument, its value and the fix."""
    for value in (-1e-5, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name} at test_solver_status.py:\d+: "
                                             rf"{option}={value!r}; give a .*>= 0"):
            SOLVERS[name](A, B, **{option: value})


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_krylov_traced_negative_tol_reports_failure(name):
    """A tolerance traced under jit cannot be refused: the solve reports -1
    (illegal input) and takes no step."""
    fn = ik.jit(lambda tol, atol: SOLVERS[name](A, B, tol=tol, atol=atol), strategy="reference")
    assert int(fn(-1e-5, 0.0)[1]) == -1
    assert int(fn(1e-5, -1.0)[1]) == -1
    x, info = fn(1e-10, 0.0)
    assert int(info) == 0 and np.allclose(A @ x, B, rtol=1e-8)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_krylov_maxiter_zero_is_refused(name):
    """maxiter = 0 gave info = 0 without a step. SciPy's info is the step
    count when not converged, which 0 steps cannot say (SciPy's own cg then
    returns 0 and its gmres fails): a maxiter below 1 is refused."""
    for value in (0, -3):
        with pytest.raises(ValueError, match=rf"^{name} at test_solver_status.py:\d+: "
                                             rf"maxiter={value}; give a positive number"):
            SOLVERS[name](A, B, maxiter=value)


# --- odeint: success --------------------------------------------------------------------

def decay(y, t):
    return -y


Y0 = np.array([1.0])
GOOD_T = np.array([0.0, 0.5, 1.0, 2.0])
BAD_T = {"decreasing": np.array([0.0, -1.0, -2.0, -3.0]),
         "non-monotonic": np.array([0.0, 1.0, 0.5, 2.0]),
         "nan": np.array([0.0, np.nan, 1.0, 2.0]),
         "inf": np.array([0.0, 0.5, 1.0, np.inf])}


def solve_in(t, y0=None, **options):
    return odeint(decay, Y0 if y0 is None else y0, t, full_output=True, **options)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", sorted(BAD_T))
def test_odeint_jit_with_invalid_traced_t_reports_failure(case, strategy):
    """Decreasing t under jit returned y0 repeated with success=True, a
    non-monotonic t a value extrapolated backwards (1.6e-4 off), NaN in t a
    NaN row: all with success=True. Now success is False, no step is taken
    and every row after the first (y0) is NaN."""
    ys, info = quietly(ik.jit(solve_in, strategy=strategy), BAD_T[case])
    assert not info["success"] and int(info["steps"]) == 0
    assert np.array_equal(ys[0], Y0) and np.isnan(ys[1:]).all()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_odeint_invalid_t_per_pixel_reports_failure(strategy):
    """Report times mapped per pixel: the bad lanes fail, the good lanes
    keep the bits of their own eager solve."""
    ts = np.stack([GOOD_T, *[BAD_T[k] for k in sorted(BAD_T)], 2.0 * GOOD_T])
    fn = ik.jit(ik.vmap(solve_in), strategy=strategy)
    ys, info = quietly(fn, ts)
    assert info["success"].tolist() == [True, False, False, False, False, True]
    assert np.isnan(ys[1:5, 1:]).all()
    for i in (0, 5):
        want, _ = solve_in(ts[i])
        assert bit_identical(ys[i], want) if strategy != "native" else np.allclose(ys[i], want)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_odeint_invalid_traced_t_in_a_per_pixel_loop_reports_failure(strategy):
    """t a traced argument shared by every pixel (the per-pixel loop of
    native): each pixel reports failure for a bad t, and a good t is
    unchanged."""
    y0s = np.linspace(1.0, 2.0, 5)[:, None]
    fn = ik.jit(lambda y, t: ik.vmap(lambda y: solve_in(t, y0=y))(y), strategy=strategy)
    for case in sorted(BAD_T):
        ys, info = quietly(fn, y0s, BAD_T[case])
        assert not info["success"].any() and not info["steps"].any(), case
        assert np.array_equal(ys[:, 0], y0s) and np.isnan(ys[:, 1:]).all(), case
    ys, info = fn(y0s, GOOD_T)
    assert info["success"].all()
    np.testing.assert_allclose(ys[..., 0], y0s * np.exp(-GOOD_T), rtol=1e-6)


@pytest.mark.parametrize("case", sorted(BAD_T))
def test_odeint_invalid_concrete_t_is_refused_eagerly_and_inside_jit(case):
    """NaN and inf in t were accepted eagerly; a t known while tracing (a
    constant of the model) is refused inside jit with the eager message."""
    pattern = r"^odeint at test_solver_status.py:\d+: t.*t\[\d\] = .*; give "
    with pytest.raises(ValueError, match=pattern):
        odeint(decay, Y0, BAD_T[case])
    with pytest.raises(ValueError, match=pattern):
        ik.jit(lambda y: odeint(decay, y, BAD_T[case]), strategy="reference")(Y0)


@pytest.mark.parametrize("option", ["rtol", "atol"])
def test_odeint_negative_rtol_or_atol_is_refused(option):
    """Negative tolerances were accepted (the error ratio squares them)."""
    for value in (-1e-6, float("nan")):
        with pytest.raises(ValueError, match=rf"^odeint at test_solver_status.py:\d+: "
                                             rf"{option}={value!r}; give a .*>= 0"):
            odeint(decay, Y0, GOOD_T, **{option: value})


def test_odeint_traced_negative_tolerance_reports_failure():
    """Traced tolerances cannot be refused: a negative one reports failure
    and takes no step (both negative would otherwise act as positive)."""
    fn = ik.jit(lambda r, a: solve_in(GOOD_T, rtol=r, atol=a), strategy="reference")
    for rtol, atol in ((-1e-6, -1e-6), (1e-6, -1e-9)):
        ys, info = fn(rtol, atol)
        assert not info["success"] and int(info["steps"]) == 0 and np.isnan(ys[1:]).all()
    ys, info = fn(1e-6, 1e-6)
    assert info["success"] and np.allclose(ys[:, 0], np.exp(-GOOD_T), rtol=1e-4)
