"""Stage 5: per-pixel Levenberg–Marquardt refinement of x = (mv, VWC)
against the observations y = (TB_V, σ0_HH), with Gaussian priors — a
``while_loop`` of one pixel, mapped over the pixels by ``vmap``, that stops
each pixel on a step tolerance.

Cost (whitened least squares, Rodgers 2000, "Inverse Methods for
Atmospheric Sounding", eq. 5.3 with diagonal covariances)::

    χ²(x) = Σ_i ((y_i − F_i(x)) / σ_i)² + Σ_j ((x_j − x_prior,j) / s_j)²

with σ_TB = 1 K and σ_σ0 = 0.5 dB (the scene's noise) and prior standard
deviations s. One LM step (Levenberg 1944, Marquardt 1963) solves the 2×2
system (A + λ·diag(A))·δ = g, A = JᵀJ + diag(1/s²) and
g = Jᵀr − (x − x_prior)/s², r_i = (y_i − F_i)/σ_i, J_ij = ∂F_i/∂x_j / σ_i, in
closed form (Cramer's rule). x is clamped to mv ∈ [0, MV_MAX], VWC ≥ 0; a
variable on its bound whose g points out of the box is held there and the
other takes its own 1-D step (projected Newton). The trial is kept only if
χ² decreases; λ is divided by 10 on success and multiplied by 10 otherwise
(a select, not a branch). A pixel stops once its trial point moved at most
XTOL prior standard deviations, or after ITERATIONS iterations.

The Jacobian comes from a ``jacobian(fn, mv, vwc)`` argument returning
``((F_1, F_2), ((∂F_1/∂mv, ∂F_1/∂vwc), (∂F_2/∂mv, ∂F_2/∂vwc)))``; the loop
calls it with one pixel inside its body. :func:`jacfwd_jacobian` gives it
by forward-mode autodiff (``isokernel.jacfwd`` of the pixel's
:func:`observations`). The transforms record into the enclosing recording,
so under ``jit`` the whole refinement — model, derivatives, the 2×2 solves
— is one ``while`` node whose body holds one iteration.
"""

from __future__ import annotations

from ... import numpy as inp
from ...control import while_loop
from ...transforms import jacfwd, vmap
from .dielectric import FREQ_HZ, MV_MAX, mironov
from .forward import (
    brightness_temperature,
    roughness_factor,
    transmissivity,
    water_cloud,
)
from .fresnel import THETA_DEG, fresnel
from .pixels import per_pixel
from .units import in_units

ITERATIONS = 20  # the most LM iterations of a pixel (a safety net; pixels stop on XTOL)
XTOL = 1e-6  # a pixel stops once its trial point moved at most this many prior SDs
SIGMA_TB = 1.0  # K
SIGMA_SIGMA0 = 0.5  # dB
LAMBDA0 = 1e-2


@in_units(("K", "dB"), mv="m^3/m^3", vwc="kg/m^2")
def observations(mv, vwc, ctx: dict):
    """(TB_V in K, σ0_HH in dB) of a pixel with moisture ``mv`` and
    vegetation water content ``vwc``; ``ctx`` holds the pixel's clay, ts,
    ndvi and class parameters b, omega, h, wcm_a … wcm_d."""
    _, r_v = fresnel(mironov(mv, ctx["clay"], FREQ_HZ), THETA_DEG)
    gamma = transmissivity(ctx["b"], vwc, THETA_DEG)
    tbv = brightness_temperature(r_v * roughness_factor(ctx["h"]), gamma, ctx["omega"],
                                 ctx["ts"])
    sigma0 = water_cloud(mv, ctx["ndvi"], ctx["wcm_a"], ctx["wcm_b"], ctx["wcm_c"],
                         ctx["wcm_d"], THETA_DEG)
    return tbv, sigma0


def jacfwd_jacobian(ctx: dict):
    """The ``jacobian`` argument of :func:`stage5_refine` for a model that is
    :func:`observations` with this ``ctx``. Called with one pixel (as the
    per-pixel loop of :func:`stage5_solve` calls it), it is ``jacfwd`` of
    that pixel's model ``fn`` in (mv, vwc). Called with arrays of pixels, it
    is ``jacfwd`` of :func:`observations` mapped over them by ``vmap`` (mv,
    vwc and every ``ctx`` field along axis 0): each pixel gets its own 2×2
    Jacobian and no pixel ever sees another."""
    mapped = vmap(jacfwd(observations, argnums=(0, 1)))

    def jacobian(fn, mv, vwc):
        if inp.ndim(mv) == 0:
            return fn(mv, vwc), jacfwd(fn, argnums=(0, 1))(mv, vwc)
        return fn(mv, vwc), mapped(mv, vwc, ctx)
    return jacobian


def _chi2(model, obs, x, prior, prior_sd):
    (f1, f2), (y1, y2) = model, obs
    r1, r2 = (y1 - f1) / SIGMA_TB, (y2 - f2) / SIGMA_SIGMA0
    p1 = (x[0] - prior[0]) / prior_sd[0]
    p2 = (x[1] - prior[1]) / prior_sd[1]
    return r1 * r1 + r2 * r2 + p1 * p1 + p2 * p2


def _normal_equations(values, jac, obs, x, prior, prior_sd, lam):
    """(a11, a22, a12, g1, g2): the damped matrix A + λ·diag A and g."""
    (f1, f2), ((a, b), (c, d)) = values, jac
    r1, r2 = (obs[0] - f1) / SIGMA_TB, (obs[1] - f2) / SIGMA_SIGMA0
    j11, j12, j21, j22 = a / SIGMA_TB, b / SIGMA_TB, c / SIGMA_SIGMA0, d / SIGMA_SIGMA0
    w1, w2 = 1.0 / (prior_sd[0] * prior_sd[0]), 1.0 / (prior_sd[1] * prior_sd[1])
    a11 = (j11 * j11 + j21 * j21 + w1) * (1.0 + lam)
    a22 = (j12 * j12 + j22 * j22 + w2) * (1.0 + lam)
    a12 = j11 * j12 + j21 * j22
    g1 = j11 * r1 + j21 * r2 - (x[0] - prior[0]) * w1
    g2 = j12 * r1 + j22 * r2 - (x[1] - prior[1]) * w2
    return a11, a22, a12, g1, g2


def lm_step(values, jac, obs, x, prior, prior_sd, lam):
    """The damped Gauss–Newton step δ = (A + λ·diag A)⁻¹ g (2×2, Cramer).
    A variable on its bound (mv at 0 or MV_MAX, VWC at 0) whose g points
    out of the box is held there, and the other takes its own damped
    Newton step (projected Newton: Bertsekas, SIAM J. Control Optim. 20(2),
    1982); a free pair takes the 2×2 step."""
    a11, a22, a12, g1, g2 = _normal_equations(values, jac, obs, x, prior, prior_sd, lam)
    det = a11 * a22 - a12 * a12
    d1, d2 = (a22 * g1 - a12 * g2) / det, (a11 * g2 - a12 * g1) / det
    hold_mv = ((x[0] <= 0.0) & (g1 < 0.0)) | ((x[0] >= MV_MAX) & (g1 > 0.0))
    hold_vwc = (x[1] <= 0.0) & (g2 < 0.0)
    d1 = inp.where(hold_mv, 0.0, inp.where(hold_vwc, g1 / a11, d1))
    d2 = inp.where(hold_vwc, 0.0, inp.where(hold_mv, g2 / a22, d2))
    return d1, d2


def stage5_refine(mv0, vwc0, tbv, sigma0, ctx: dict, jacobian, prior, prior_sd,
                  iterations: int = ITERATIONS):
    """(mv, VWC) after the LM iterations of each pixel (at most
    ``iterations``) from (``mv0``, ``vwc0``) against (``tbv``, ``sigma0``);
    ``prior``/``prior_sd`` are (mv, VWC) pairs of arrays or scalars. See
    the module docstring for ``jacobian`` and :func:`stage5_solve`."""
    return stage5_solve(mv0, vwc0, tbv, sigma0, ctx, jacobian, prior, prior_sd,
                        iterations)[:2]


def stage5_solve(mv0, vwc0, tbv, sigma0, ctx: dict, jacobian, prior, prior_sd,
                 iterations: int = ITERATIONS, xtol: float = XTOL):
    """(mv, VWC, iterations taken) per pixel: the LM iteration as a
    ``while_loop`` of one pixel, mapped over the pixels by ``vmap``. A pixel
    stops after the iteration whose trial point moved at most ``xtol``
    prior standard deviations in both mv and VWC (the trial is kept if it
    lowers χ²), or after ``iterations`` iterations."""
    return per_pixel(_pixel_lm(jacobian, iterations, xtol), mv0, vwc0, tbv, sigma0, ctx,
                     prior, prior_sd)


def _pixel_lm(jacobian, iterations: int, xtol: float):
    """Stage 5 of one pixel: (mv, VWC, iterations taken)."""
    def more(state):
        *_, step, k = state
        return (step > xtol) & (k < iterations)

    def stage5_pixel(mv0, vwc0, tbv, sigma0, ctx, prior, prior_sd):
        def model(mv, vwc):
            return observations(mv, vwc, ctx)

        def iterate(state):
            x, cost, lam, _, k = state
            return (*lm_iteration(model, jacobian, (tbv, sigma0), x, cost, lam, prior,
                                  prior_sd), k + 1)
        x = (mv0, vwc0)
        cost = _chi2(model(*x), (tbv, sigma0), x, prior, prior_sd)
        start = (x, cost, inp.full_like(mv0, LAMBDA0), inp.full_like(mv0, inp.inf), 0)
        (mv, vwc), *_, taken = while_loop(more, iterate, start)
        return mv, vwc, taken
    return stage5_pixel


def lm_iteration(model, jacobian, obs, x, cost, lam, prior, prior_sd):
    """One LM iteration: the trial point from ``x``, kept if it lowers χ²
    (λ/10), else not (λ·10). Returns (x, χ², λ, how far the trial point
    moved, in prior standard deviations)."""
    values, jac = jacobian(model, *x)
    d1, d2 = lm_step(values, jac, obs, x, prior, prior_sd, lam)
    trial = (inp.clip(x[0] + d1, 0.0, MV_MAX), inp.maximum(x[1] + d2, 0.0))
    trial_cost = _chi2(model(*trial), obs, trial, prior, prior_sd)
    better = trial_cost < cost
    step = inp.maximum(inp.abs(trial[0] - x[0]) / prior_sd[0],
                       inp.abs(trial[1] - x[1]) / prior_sd[1])
    x = (inp.where(better, trial[0], x[0]), inp.where(better, trial[1], x[1]))
    return (x, inp.where(better, trial_cost, cost), inp.where(better, lam * 0.1, lam * 10.0),
            step)
