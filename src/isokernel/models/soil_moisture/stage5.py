"""Stage 5: per-pixel Levenberg–Marquardt refinement of x = (mv, VWC)
against the observations y = (TB_V, σ0_HH), with Gaussian priors — ten
fixed iterations, branch-free, inside the same pointwise graph.

Cost (whitened least squares, Rodgers 2000, "Inverse Methods for
Atmospheric Sounding", eq. 5.3 with diagonal covariances)::

    χ²(x) = Σ_i ((y_i − F_i(x)) / σ_i)² + Σ_j ((x_j − x_prior,j) / s_j)²

with σ_TB = 1 K and σ_σ0 = 0.5 dB (the scene's noise) and prior standard
deviations s. One LM step (Levenberg 1944, Marquardt 1963) solves the 2×2
system (A + λ·diag(A))·δ = g, A = JᵀJ + diag(1/s²) and
g = Jᵀr − (x − x_prior)/s², r_i = (y_i − F_i)/σ_i, J_ij = ∂F_i/∂x_j / σ_i, in
closed form (Cramer's rule). The step is kept only if χ² decreases; λ is
divided by 10 on success and multiplied by 10 otherwise (a select, not a
branch). x is clamped to mv ∈ [0, MV_MAX], VWC ≥ 0.

The Jacobian comes from a ``jacobian(fn, mv, vwc)`` argument returning
``((F_1, F_2), ((∂F_1/∂mv, ∂F_1/∂vwc), (∂F_2/∂mv, ∂F_2/∂vwc)))`` per pixel.
:func:`jacfwd_jacobian` gives it by forward-mode autodiff: ``isokernel.jacfwd``
of the per-pixel :func:`observations` under ``isokernel.vmap`` over the
pixels. Both transforms record into the enclosing recording, so under
``jit`` the whole refinement — model, derivatives, the 2×2 solves — is one
pointwise graph, which ``native`` compiles into one loop.
"""

from __future__ import annotations

from ... import numpy as inp
from ...transforms import jacfwd, vmap
from .dielectric import FREQ_HZ, MV_MAX, mironov
from .forward import (
    brightness_temperature,
    roughness_factor,
    transmissivity,
    water_cloud,
)
from .fresnel import THETA_DEG, fresnel

ITERATIONS = 10
SIGMA_TB = 1.0  # K
SIGMA_SIGMA0 = 0.5  # dB
LAMBDA0 = 1e-2


def observations(mv, vwc, ctx: dict):
    """(TB_V in K, σ0_HH in dB) of a pixel with moisture ``mv`` and
    vegetation water content ``vwc``; ``ctx`` holds the pixel's clay, ts,
    ndvi and class parameters b, omega, h, wcm_a … wcm_d."""
    eps_re, eps_im = mironov(mv, ctx["clay"], FREQ_HZ)
    _, r_v = fresnel(eps_re, eps_im, THETA_DEG)
    gamma = transmissivity(ctx["b"], vwc, THETA_DEG)
    tbv = brightness_temperature(r_v * roughness_factor(ctx["h"]), gamma, ctx["omega"],
                                 ctx["ts"])
    sigma0 = water_cloud(mv, ctx["ndvi"], ctx["wcm_a"], ctx["wcm_b"], ctx["wcm_c"],
                         ctx["wcm_d"], THETA_DEG)
    return tbv, sigma0


def jacfwd_jacobian(ctx: dict):
    """The ``jacobian`` argument of :func:`stage5_refine` for a model that is
    :func:`observations` with this ``ctx``: ``jacfwd`` in (mv, vwc) of one
    pixel, mapped over the pixels by ``vmap`` (mv, vwc and every ``ctx``
    field along axis 0), so each pixel gets its own 2×2 Jacobian and no
    pixel ever sees another."""
    per_pixel = vmap(jacfwd(observations, argnums=(0, 1)))

    def jacobian(fn, mv, vwc):
        return fn(mv, vwc), per_pixel(mv, vwc, ctx)
    return jacobian


def _chi2(model, obs, x, prior, prior_sd):
    (f1, f2), (y1, y2) = model, obs
    r1, r2 = (y1 - f1) / SIGMA_TB, (y2 - f2) / SIGMA_SIGMA0
    p1 = (x[0] - prior[0]) / prior_sd[0]
    p2 = (x[1] - prior[1]) / prior_sd[1]
    return r1 * r1 + r2 * r2 + p1 * p1 + p2 * p2


def lm_step(values, jac, obs, x, prior, prior_sd, lam):
    """The damped Gauss–Newton step δ = (A + λ·diag A)⁻¹ g (2×2, Cramer)."""
    (f1, f2), ((a, b), (c, d)) = values, jac
    r1, r2 = (obs[0] - f1) / SIGMA_TB, (obs[1] - f2) / SIGMA_SIGMA0
    j11, j12, j21, j22 = a / SIGMA_TB, b / SIGMA_TB, c / SIGMA_SIGMA0, d / SIGMA_SIGMA0
    w1, w2 = 1.0 / (prior_sd[0] * prior_sd[0]), 1.0 / (prior_sd[1] * prior_sd[1])
    a11 = (j11 * j11 + j21 * j21 + w1) * (1.0 + lam)
    a22 = (j12 * j12 + j22 * j22 + w2) * (1.0 + lam)
    a12 = j11 * j12 + j21 * j22
    g1 = j11 * r1 + j21 * r2 - (x[0] - prior[0]) * w1
    g2 = j12 * r1 + j22 * r2 - (x[1] - prior[1]) * w2
    det = a11 * a22 - a12 * a12
    return (a22 * g1 - a12 * g2) / det, (a11 * g2 - a12 * g1) / det


def stage5_refine(mv0, vwc0, tbv, sigma0, ctx: dict, jacobian, prior, prior_sd,
                  iterations: int = ITERATIONS):
    """(mv, VWC) after ``iterations`` LM iterations from (``mv0``, ``vwc0``)
    against (``tbv``, ``sigma0``); ``prior``/``prior_sd`` are (mv, VWC)
    pairs of arrays or scalars. See the module docstring for ``jacobian``."""
    def model(mv, vwc):
        return observations(mv, vwc, ctx)
    obs = (tbv, sigma0)
    x = (mv0, vwc0)
    lam = inp.full_like(mv0, LAMBDA0)
    cost = _chi2(model(*x), obs, x, prior, prior_sd)
    for _ in range(iterations):
        values, jac = jacobian(model, *x)
        d1, d2 = lm_step(values, jac, obs, x, prior, prior_sd, lam)
        trial = (inp.clip(x[0] + d1, 0.0, MV_MAX), inp.maximum(x[1] + d2, 0.0))
        trial_cost = _chi2(model(*trial), obs, trial, prior, prior_sd)
        better = trial_cost < cost
        x = (inp.where(better, trial[0], x[0]), inp.where(better, trial[1], x[1]))
        cost = inp.where(better, trial_cost, cost)
        lam = inp.where(better, lam * 0.1, lam * 10.0)
    return x[0], x[1]
