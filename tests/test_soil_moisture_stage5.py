"""Stage 5's Levenberg–Marquardt machinery, first with a central-difference
Jacobian, then wired to forward-mode autodiff (``jacfwd`` under ``vmap``):
the Jacobian itself, the forward → retrieve round trip in native and
portable numerics, and the gain on a noisy scene."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import isokernel
from isokernel.backends.parity import bit_identical
from isokernel.ir import Op
from isokernel.ir.graph import walk
from isokernel.models.soil_moisture import (
    REFINED_INPUTS,
    class_parameters,
    generate_scene,
    retrieve_refined,
    scene_inputs,
)
from isokernel.models.soil_moisture.stage5 import (
    ITERATIONS,
    observations,
    stage5_refine,
    stage5_solve,
)


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


def test_lm_recording_holds_one_iteration_whatever_the_cap(scene):
    """The LM loop is one ``while`` node whose body is one iteration: the
    recording does not grow with the most iterations a pixel may run."""
    args = (scene["mv"][:8], scene["vwc"][:8], scene["tbv"][:8], scene["sigma0_hh"][:8])
    ctx = {k: v[:8] for k, v in _ctx(scene).items()}

    def graph(iterations):
        def fn(mv0, vwc0, tbv, s0):
            return stage5_refine(mv0, vwc0, tbv, s0, ctx, central_difference_jacobian,
                                 (mv0, vwc0), (0.1, 1.0), iterations)
        return isokernel.jit(fn, strategy="reference").lower(*args).graph
    graphs = [graph(k) for k in (2, 4, 10)]
    assert len({(len(g.nodes), sum(1 for _ in walk(g))) for g in graphs}) == 1
    assert [n.op for n in graphs[0].nodes].count(Op.WHILE) == 1


def test_each_pixel_stops_on_its_step_tolerance(scene):
    """Pixels take different numbers of iterations; a pixel that stopped
    keeps its values while the others go on: its result equals a run capped
    at the iterations it took, bit for bit."""
    mv0 = np.clip(scene["mv"] + 0.05, 0.0, 0.6)
    prior = (np.full_like(mv0, 0.25), scene["vwc"])
    args = (mv0, scene["vwc"], scene["tbv"], scene["sigma0_hh"], _ctx(scene),
            central_difference_jacobian, prior, (1e3, 0.5))
    mv, vwc, taken = stage5_solve(*args)
    assert len(np.unique(taken)) > 1 and taken.max() <= ITERATIONS
    for k in np.unique(taken)[:4]:
        at = taken == k
        mv_k, vwc_k, taken_k = stage5_solve(*args, iterations=int(k))
        assert np.all(taken_k[at] == k)
        assert bit_identical(mv_k[at], mv[at]) and bit_identical(vwc_k[at], vwc[at])
    converged = taken < ITERATIONS
    assert np.mean(converged) > 0.99
    assert np.max(np.abs(mv - scene["mv"])[converged]) < 1e-5


# ---------------------------------------------- Stage 5 with autodiff: jacfwd

def test_jacfwd_jacobian_is_the_derivative_per_pixel(scene):
    from isokernel.models.soil_moisture.stage5 import jacfwd_jacobian
    ctx = _ctx(scene)
    model = functools.partial(observations, ctx=ctx)
    mv, vwc = scene["mv"], scene["vwc"]
    values, jac = jacfwd_jacobian(ctx)(model, mv, vwc)
    want_values, want = central_difference_jacobian(model, mv, vwc)
    for got, ref in zip(values, want_values):
        np.testing.assert_array_equal(got, ref)
    for got_row, ref_row in zip(jac, want):
        for got, ref in zip(got_row, ref_row):
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def round_trip():
    clean = generate_scene(3_000, seed=3, noise=False)
    return clean, scene_inputs(clean, names=REFINED_INPUTS)


@pytest.mark.parametrize("numerics", ["native", "portable"])
def test_stage5_round_trip_within_1e_5_in_native(round_trip, numerics):
    """Forward → retrieve with Stage 5 on a noise-free float64 scene, compiled
    by native: the Jacobian (jacfwd under vmap), the LM steps and the model
    are one pointwise region of generated C."""
    clean, args = round_trip
    compiled = isokernel.jit(retrieve_refined, strategy="native",
                             numerics=numerics).lower(*args).compile()
    out = compiled(*args)
    assert np.max(np.abs(out["mv"] - clean["mv"])) <= 1e-5
    assert np.max(np.abs(out["vwc"] - clean["vwc"])) <= 1e-5
    assert "row-independent" in dict(compiled.report().extra)["pixels"]
    if numerics == "portable":
        want = isokernel.jit(retrieve_refined, strategy="reference", numerics="portable")(*args)
        for key in want:
            assert bit_identical(out[key], want[key]), key


def test_stage5_lowers_the_error_of_a_noisy_retrieval():
    noisy = generate_scene(8_000, seed=5, noise=True)
    out = isokernel.jit(retrieve_refined, strategy="native")(
        *scene_inputs(noisy, names=REFINED_INPUTS))
    before = np.std(out["mv_stage4"] - noisy["mv"])
    after = np.std(out["mv"] - noisy["mv"])
    assert after < 0.9 * before
