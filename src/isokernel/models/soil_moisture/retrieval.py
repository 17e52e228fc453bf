"""Per-pixel soil-moisture retrieval from L-band brightness temperature:
branch-free, fixed cost, one function per stage.

Stage 1 — reflectivity. With Tc = Ts the tau-omega model is affine in the
rough reflectivity r::

    TB = Ts·[γ + (1 − ω)(1 − γ)] + r·Ts·γ·[(1 − ω)(1 − γ) − 1]

so r = (TB − Ts·[γ + (1 − ω)(1 − γ)]) / (Ts·γ·[(1 − ω)(1 − γ) − 1]).

Stage 2 — roughness: r* = r · exp(h·cos²θ).

Stage 3 — permittivity. Inv, the closed-form real inverse of Fresnel
(``fresnel.inverse_fresnel_v``/``_h``), gives ε'_0 = Inv(r*) as if the soil
were lossless. The loss ε'' = κ(ε') raises the reflectivity; an eight-sweep
fixed point removes it::

    ε'_{k+1} = Inv(r* − [R(ε'_k + iκ(ε'_k)) − R(ε'_k)])

whose fixed point satisfies R(ε' + iκ(ε')) = r* exactly. κ is the Mironov
loss at the moisture that explains ε' (``dielectric.eps_im_of_eps_re``; a
table lookup can replace it). The iterate ε'_k is used three times per sweep
(κ, the lossy and the lossless reflectivity); the recorder shares it as one
node, so recording is linear in the number of sweeps.

Stage 4 — soil moisture from ε': the exact closed-form inverse of the
Mironov real part (``dielectric.mv_from_eps_re``) by default, or the
tabulated inverse (``lookups``/``tables``, error budget measured there)
when ``retrieve`` is given table lookups. Clamped to [0, porosity].

Stage 5 (optional: :func:`retrieve_refined`) — a per-pixel Levenberg–
Marquardt refinement of (mv, VWC) against TB_V and σ0_HH with Gaussian
priors centred on the Stage-4 mv and the NDVI-derived VWC, ten fixed
iterations, the Jacobian by ``jacfwd`` (``stage5``).
"""

from __future__ import annotations

from ... import numpy as inp
from .dielectric import FREQ_HZ, MV_MAX, eps_im_of_eps_re, mironov_coefficients, mv_from_eps_re
from .forward import roughness_factor, transmissivity, vegetation_water_content
from .fresnel import INVERSES, THETA_DEG, fresnel, fresnel_real
from .landcover import class_parameters
from .lookups import TableLookups, table_kappa, table_mv
from .scene import PARTICLE_DENSITY
from .stage5 import jacfwd_jacobian, stage5_refine

SWEEPS = 8
R_MAX = 0.9  # reflectivities are clipped to [0, R_MAX] before inversion
PRIOR_SD = (0.1, 0.5)  # Stage 5 prior standard deviations: mv (m³/m³), VWC (kg/m²)


def stage1_reflectivity(tb, ts, gamma, omega):
    """Rough-surface reflectivity from TB (K), Ts = Tc (K), transmissivity
    and single-scattering albedo: the exact inverse of the tau-omega model."""
    scatter = (1.0 - omega) * (1.0 - gamma)
    return (tb - ts * (gamma + scatter)) / (ts * gamma * (scatter - 1.0))


def stage2_smooth(r, h, theta_deg: float = THETA_DEG):
    """Smooth-surface reflectivity r* = r·exp(h·cos²θ), clipped to [0, R_MAX]."""
    return inp.clip(r / roughness_factor(h, theta_deg), 0.0, R_MAX)


def _reflectivity(pol: str):
    index = {"h": 0, "v": 1}[pol]
    return (lambda re, im, t: fresnel(re, im, t)[index],
            lambda re, t: fresnel_real(re, t)[index])


def stage3_sweeps(r_smooth, kappa, pol: str = "v", sweeps: int = SWEEPS,
                  theta_deg: float = THETA_DEG) -> list:
    """Every iterate ε'_0 … ε'_sweeps of the loss-coupling fixed point.
    ``kappa(eps_re) -> eps_im`` is the loss model; ``pol`` 'v' or 'h'."""
    if pol not in INVERSES:
        raise ValueError(f"stage 3: polarisation {pol!r} is not 'v' or 'h'")
    inverse = INVERSES[pol]
    lossy, lossless = _reflectivity(pol)
    iterates = [inverse(r_smooth, theta_deg)]
    for _ in range(sweeps):
        eps = iterates[-1]
        excess = lossy(eps, kappa(eps), theta_deg) - lossless(eps, theta_deg)
        iterates.append(inverse(inp.clip(r_smooth - excess, 0.0, R_MAX), theta_deg))
    return iterates


def stage3_permittivity(r_smooth, kappa, pol: str = "v", sweeps: int = SWEEPS,
                        theta_deg: float = THETA_DEG):
    """ε' after ``sweeps`` sweeps of the loss-coupling fixed point."""
    return stage3_sweeps(r_smooth, kappa, pol, sweeps, theta_deg)[-1]


def stage4_soil_moisture(eps_re, coefficients, porosity, inverse=None):
    """mv (m³/m³) from ε', clamped to [0, porosity]. ``inverse(eps_re) ->
    mv`` overrides the exact Mironov inverse (e.g. a table lookup)."""
    if inverse is None:
        mv = mv_from_eps_re(eps_re, coefficients, MV_MAX)
    else:
        mv = inverse(eps_re)
    return inp.clip(mv, 0.0, porosity)


def retrieve(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
             sweeps: int = SWEEPS, freq_hz: float = FREQ_HZ, theta_deg: float = THETA_DEG,
             lookups: TableLookups | None = None):
    """Soil moisture from V-pol brightness temperature, Stages 1–4.

    Inputs per pixel: ``tbv`` (K), NDVI now/max/min, ``ts`` (K, = Tc),
    ``clay`` fraction 0–1, ``bulk_density`` (g/cm³), ``landcover`` class
    index (int, see ``landcover.CLASSES``). Returns a dict of ``mv``
    (m³/m³), ``eps_re`` (Stage-3 real permittivity) and ``vwc`` (kg/m²).
    ``sweeps``, ``freq_hz`` and ``theta_deg`` are static. ``lookups``
    (static) switches κ and Stage 4 from the direct Mironov relations to
    layered tables (``lookups.TableLookups``).
    """
    p = class_parameters(landcover, ts)
    vwc = vegetation_water_content(ndvi, ndvi_max, ndvi_min, p["stem_factor"])
    gamma = transmissivity(p["b"], vwc, theta_deg)
    r_smooth = stage2_smooth(stage1_reflectivity(tbv, ts, gamma, p["omega"]), p["h"], theta_deg)
    m = mironov_coefficients(clay, freq_hz)
    if lookups is None:
        kappa, inverse = (lambda e: eps_im_of_eps_re(e, m)), None
    else:
        kappa = lambda e: table_kappa(e, clay, m, lookups)  # noqa: E731
        inverse = lambda e: table_mv(e, clay, m, lookups)  # noqa: E731
    eps_re = stage3_permittivity(r_smooth, kappa, "v", sweeps, theta_deg)
    porosity = 1.0 - bulk_density / PARTICLE_DENSITY
    mv = stage4_soil_moisture(eps_re, m, porosity, inverse)
    return {"mv": mv, "eps_re": eps_re, "vwc": vwc}


def retrieve_refined(tbv, sigma0_hh, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density,
                     landcover, sweeps: int = SWEEPS, lookups: TableLookups | None = None,
                     prior_sd: tuple[float, float] = PRIOR_SD):
    """Stages 1–5: :func:`retrieve`, then the Levenberg–Marquardt refinement
    of (mv, VWC) against TB_V (K) and σ0_HH (dB), with Gaussian priors
    centred on the Stage-4 mv and the NDVI-derived VWC (standard deviations
    ``prior_sd``, static). Returns ``mv`` (refined, clamped to [0,
    porosity]), ``vwc`` (refined), ``eps_re`` and ``mv_stage4``. The forward
    model of Stage 5 uses the module's θ = 40° and f = 1.41 GHz."""
    first = retrieve(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
                     sweeps, lookups=lookups)
    ctx = class_parameters(landcover, ts) | {"clay": clay, "ts": ts, "ndvi": ndvi}
    prior = (first["mv"], first["vwc"])
    mv, vwc = stage5_refine(first["mv"], first["vwc"], tbv, sigma0_hh, ctx,
                            jacfwd_jacobian(ctx), prior, prior_sd)
    porosity = 1.0 - bulk_density / PARTICLE_DENSITY
    return {"mv": inp.clip(mv, 0.0, porosity), "eps_re": first["eps_re"], "vwc": vwc,
            "mv_stage4": first["mv"]}


RETRIEVAL_INPUTS = ("tbv", "ndvi", "ndvi_max", "ndvi_min", "ts", "clay", "bulk_density",
                    "landcover")
REFINED_INPUTS = ("tbv", "sigma0_hh", "ndvi", "ndvi_max", "ndvi_min", "ts", "clay",
                  "bulk_density", "landcover")


def scene_inputs(scene: dict, dtype="float64", names=RETRIEVAL_INPUTS) -> tuple:
    """The retrieval's inputs (``names``; :data:`REFINED_INPUTS` for
    Stage 5) from a scene dict, floats cast to ``dtype``."""
    out = []
    for name in names:
        x = scene[name]
        out.append(x if name == "landcover" else x.astype(dtype, copy=False))
    return tuple(out)

