"""Stage 5's Levenberg–Marquardt machinery, exercised with a central-
difference Jacobian standing in for forward-mode autodiff (which wires in
through the same ``jacobian`` argument)."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel
from isokernel.models.soil_moisture import class_parameters, generate_scene
from isokernel.models.soil_moisture.stage5 import observations, stage5_refine


def central_difference_jacobian(fn, mv, vwc, h=1e-6):
    """((F1, F2), ((dF1/dmv, dF1/dvwc), (dF2/dmv, dF2/dvwc))) by central
    differences — test scaffolding only."""
    def d(a_plus, a_minus, step):
        return [(p - m) / (2 * step) for p, m in zip(fn(*a_plus), fn(*a_minus))]
    d_mv = d((mv + h, vwc), (mv - h, vwc), h)
    d_vwc = d((mv, vwc + h), (mv, vwc - h), h)
    return fn(mv, vwc), ((d_mv[0], d_vwc[0]), (d_mv[1], d_vwc[1]))


@pytest.fixture(scope="module")
def scene():
    return generate_scene(4_000, seed=8, noise=False)


def _ctx(scene):
    return class_parameters(scene["landcover"], scene["ts"]) | {
        k: scene[k] for k in ("clay", "ts", "ndvi")}


def test_observations_are_the_scene_forward_model(scene):
    tbv, sigma0 = observations(scene["mv"], scene["vwc"], _ctx(scene))
    np.testing.assert_allclose(tbv, scene["tbv"], rtol=1e-14)
    np.testing.assert_allclose(sigma0, scene["sigma0_hh"], rtol=1e-13)


def test_lm_recovers_the_truth_from_a_perturbed_start(scene):
    """A weak prior on mv, the NDVI-derived VWC as the VWC prior (TB can be
    nearly insensitive to VWC, where soil attenuation and canopy emission
    balance, so VWC needs its prior); noise-free data agree with both."""
    mv0 = np.clip(scene["mv"] + 0.05, 0.0, 0.6)
    vwc0 = scene["vwc"] * 1.2 + 0.1
    prior = (np.full_like(mv0, 0.25), scene["vwc"])
    sd = (np.full_like(mv0, 1e3), np.full_like(mv0, 0.5))
    mv, vwc = stage5_refine(mv0, vwc0, scene["tbv"], scene["sigma0_hh"], _ctx(scene),
                            central_difference_jacobian, prior, sd)
    assert np.max(np.abs(mv - scene["mv"])) < 1e-5
    assert np.max(np.abs(vwc - scene["vwc"])) < 1e-3


def test_lm_with_tight_priors_stays_at_the_prior(scene):
    prior = (np.full(4_000, 0.2), scene["vwc"])
    tight = (np.full(4_000, 1e-8), np.full(4_000, 1e-8))
    mv, _ = stage5_refine(prior[0], prior[1], scene["tbv"], scene["sigma0_hh"], _ctx(scene),
                          central_difference_jacobian, prior, tight)
    assert np.max(np.abs(mv - 0.2)) < 1e-10  # the data move it by ~s²·Jᵀr


def test_lm_recording_is_linear_in_the_iteration_count(scene):
    args = (scene["mv"][:8], scene["vwc"][:8], scene["tbv"][:8], scene["sigma0_hh"][:8])
    ctx = {k: v[:8] for k, v in _ctx(scene).items()}

    def nodes(iterations):
        def fn(mv0, vwc0, tbv, s0):
            return stage5_refine(mv0, vwc0, tbv, s0, ctx, central_difference_jacobian,
                                 (mv0, vwc0), (0.1, 1.0), iterations)
        return len(isokernel.jit(fn, strategy="reference").lower(*args).graph.nodes)
    n2, n4, n10 = nodes(2), nodes(4), nodes(10)
    assert n10 - n2 == 4 * (n4 - n2)
