"""Per-pixel soil-moisture retrieval from L-band brightness temperature:
branch-free straight-line stages and per-pixel loops, one function per stage.

Stage 1 — reflectivity. With Tc = Ts the tau-omega model is affine in the
rough reflectivity r::

    TB = Ts·[γ + (1 − ω)(1 − γ)] + r·Ts·γ·[(1 − ω)(1 − γ) − 1]

so r = (TB − Ts·[γ + (1 − ω)(1 − γ)]) / (Ts·γ·[(1 − ω)(1 − γ) − 1]).

Stage 2 — roughness: r* = r · exp(h·cos²θ).

Stage 3 — permittivity. Inv, the closed-form real inverse of Fresnel
(``fresnel.inverse_fresnel_v``/``_h``), gives ε'_0 = Inv(r*) as if the soil
were lossless. The loss ε'' = κ(ε') raises the reflectivity; a fixed point
removes it::

    ε'_{k+1} = Inv(r* − [R(ε'_k + iκ(ε'_k)) − R(ε'_k)])

whose fixed point satisfies R(ε' + iκ(ε')) = r* exactly. κ is the Mironov
loss at the moisture that explains ε' (``dielectric.eps_im_of_eps_re``; a
table lookup can replace it). The sweep is written for one pixel and run as
a ``while_loop`` mapped over the pixels by ``vmap``: each pixel stops when
its relative step is at most STAGE3_RTOL (float64; 64 ulps in float32), or
after ``sweeps`` sweeps (:func:`stage3_solve`). The recording holds one
sweep, whatever the number of sweeps.

Stage 4 — soil moisture from ε': the exact closed-form inverse of the
Mironov real part (``dielectric.mv_from_eps_re``) by default, or the
tabulated inverse (``lookups``/``tables``, error budget measured there)
when ``retrieve`` is given table lookups. Clamped to [0, porosity].

Stage 5 (optional: :func:`retrieve_refined`) — a per-pixel Levenberg–
Marquardt refinement of (mv, VWC) against TB_V and σ0_HH with Gaussian
priors centred on the Stage-4 mv and the NDVI-derived VWC, the Jacobian by
``jacfwd``, a ``while_loop`` per pixel that stops on a step tolerance
(``stage5``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ... import numpy as inp
from ...control import while_loop
from ...ir import ShapeError
from ...ir.pytree import tree_flatten, tree_unflatten
from ...ops import complex as complex_from
from ...units import Quantity
from .dielectric import FREQ_HZ, MV_MAX, eps_im_of_eps_re, mironov_coefficients, mv_from_eps_re
from .forward import roughness_factor, transmissivity, vegetation_water_content
from .fresnel import INVERSES, THETA_DEG, fresnel, fresnel_real
from .landcover import class_parameters
from .lookups import TableLookups, table_kappa, table_mv
from .pixels import per_pixel
from .scene import PARTICLE_DENSITY
from .stage5 import jacfwd_jacobian, stage5_solve
from .units import OUTPUT_UNITS, in_unit, in_units

SWEEPS = 16  # the most Stage-3 sweeps of a pixel: a safety net (pixels stop on STAGE3_RTOL)
STAGE3_RTOL = 1e-10  # a pixel stops once its step |ε'_{k+1} − ε'_k| ≤ STAGE3_RTOL·ε'_{k+1}
KAPPA_SHAPE = ("stage 3: κ returns shape {} for ε' of shape {}: a κ that reads per-pixel "
               "arrays gets them one pixel at a time; give PixelLoss(fn, fields), fn(eps_re, "
               "*fields), with those arrays as fields")
R_MAX = 0.9  # reflectivities are clipped to [0, R_MAX] before inversion
PRIOR_SD = (0.1, 0.5)  # Stage 5 prior standard deviations: mv (m³/m³), VWC (kg/m²)


@in_units("1", tb="K", ts="K")
def stage1_reflectivity(tb, ts, gamma, omega):
    """Rough-surface reflectivity from TB (K), Ts = Tc (K), transmissivity
    and single-scattering albedo: the exact inverse of the tau-omega model."""
    scatter = (1.0 - omega) * (1.0 - gamma)
    return (tb - ts * (gamma + scatter)) / (ts * gamma * (scatter - 1.0))


def stage2_smooth(r, h, theta_deg: float = THETA_DEG):
    """Smooth-surface reflectivity r* = r·exp(h·cos²θ), clipped to [0, R_MAX]."""
    return inp.clip(r / roughness_factor(h, theta_deg), 0.0, R_MAX)


def _reflectivity(pol: str):
    """(lossy, lossless): the smooth reflectivity at ``pol`` of the complex
    permittivity ε' + iε'' built from its parts, and of a real ε'."""
    index = {"h": 0, "v": 1}[pol]
    return (lambda re, im, t: fresnel(complex_from(re, im), t)[index],
            lambda re, t: fresnel_real(re, t)[index])


@dataclass(frozen=True)
class PixelLoss:
    """κ as a function of one pixel: ``fn(eps_re, *fields) -> eps_im``, with
    ``fields`` (pytrees) holding one value per pixel, or scalars shared by
    all. Stage 3 maps ``fn`` over the pixels with the fields; calling the
    object applies it to whole arrays."""

    fn: Callable
    fields: tuple = ()

    def __call__(self, eps_re):
        return self.fn(eps_re, *self.fields)


def _fixed_point(pol: str, theta_deg: float):
    """(first guess, one sweep) of the loss-coupling fixed point."""
    if pol not in INVERSES:
        raise ValueError(f"stage 3: polarisation {pol!r} is not 'v' or 'h'")
    inverse = INVERSES[pol]
    lossy, lossless = _reflectivity(pol)

    def first(r_smooth):
        return inverse(r_smooth, theta_deg)

    def sweep(r_smooth, eps, kappa):
        loss = kappa(eps)
        if np.broadcast_shapes(np.shape(loss), np.shape(eps)) != np.shape(eps):
            raise ShapeError(KAPPA_SHAPE.format(np.shape(loss), np.shape(eps)))
        excess = lossy(eps, loss, theta_deg) - lossless(eps, theta_deg)
        return inverse(inp.clip(r_smooth - excess, 0.0, R_MAX), theta_deg)
    return first, sweep


def stage3_sweeps(r_smooth, kappa, pol: str = "v", sweeps: int = SWEEPS,
                  theta_deg: float = THETA_DEG) -> list:
    """Every iterate ε'_0 … ε'_sweeps of the loss-coupling fixed point, a
    fixed number of sweeps over whole arrays (the convergence record; the
    retrieval stops each pixel on its own, :func:`stage3_solve`).
    ``kappa(eps_re) -> eps_im`` is the loss model; ``pol`` 'v' or 'h'."""
    first, sweep = _fixed_point(pol, theta_deg)
    iterates = [first(r_smooth)]
    for _ in range(sweeps):
        iterates.append(sweep(r_smooth, iterates[-1], kappa))
    return iterates


def stage3_tolerance(dtype) -> float:
    """The relative step at which a pixel's sweeps stop: STAGE3_RTOL, or 64
    ulps where the dtype cannot resolve it (float32)."""
    return max(STAGE3_RTOL, 64.0 * float(np.finfo(dtype).eps))


def stage3_solve(r_smooth, kappa, pol: str = "v", sweeps: int = SWEEPS,
                 theta_deg: float = THETA_DEG, rtol: float | None = None):
    """(ε', sweeps taken) per pixel: the fixed point as a ``while_loop`` of
    one pixel, mapped over the pixels by ``vmap``. A pixel stops after the
    sweep whose step |ε'_{k+1} − ε'_k| is at most ``rtol``·ε'_{k+1}
    (default :func:`stage3_tolerance`), or after ``sweeps`` sweeps. ``kappa``
    is a :class:`PixelLoss`, or a callable that holds no per-pixel values
    (one loss model for every pixel)."""
    loss = kappa if isinstance(kappa, PixelLoss) else PixelLoss(kappa)
    tol = stage3_tolerance(inp.asarray(r_smooth).dtype) if rtol is None else rtol
    pixel = _pixel_fixed_point(_fixed_point(pol, theta_deg), loss.fn, tol, sweeps)
    return per_pixel(pixel, r_smooth, *loss.fields)


def _pixel_fixed_point(fixed_point, kappa, tol: float, sweeps: int):
    """Stage 3 of one pixel: (ε', sweeps taken) from r* and κ's fields."""
    first, sweep = fixed_point

    def more(state):
        eps, step, k = state
        return (step > tol * eps) & (k < sweeps)

    def stage3_pixel(r_smooth, *fields):
        parts, rebuild = _real_parts(fields)

        def one_sweep(state):
            eps, _, k = state
            new = sweep(r_smooth, eps, lambda e: kappa(e, *rebuild(parts)))
            return new, inp.abs(new - eps), k + 1
        eps = first(r_smooth)
        eps, _, taken = while_loop(more, one_sweep, (eps, inp.full_like(eps, inp.inf), 0))
        return eps, taken
    return stage3_pixel


def _real_parts(tree):
    """(leaves, rebuild): the leaves of ``tree`` with each complex leaf as
    its (real, imaginary) parts, and the function that makes the tree again
    from them. κ's fields (the complex Mironov indices) enter Stage 3's loop
    as real parts and are made complex again inside its body (exactly), so
    the loop reads real values only: a strategy that compiles complex values
    as real parts then keeps the whole loop in its compiled code."""
    leaves, treedef = tree_flatten(tree)
    split = [inp.iscomplexobj(x) for x in leaves]
    parts = [(inp.real(x), inp.imag(x)) if c else x for x, c in zip(leaves, split)]

    def rebuild(parts):
        return tree_unflatten(treedef, [complex_from(*p) if c else p
                                        for p, c in zip(parts, split)])
    return parts, rebuild


def stage3_permittivity(r_smooth, kappa, pol: str = "v", sweeps: int = SWEEPS,
                        theta_deg: float = THETA_DEG):
    """ε' of the loss-coupling fixed point, each pixel swept until its step
    is within :func:`stage3_tolerance` (at most ``sweeps`` sweeps); see
    :func:`stage3_solve` for ``kappa``."""
    return stage3_solve(r_smooth, kappa, pol, sweeps, theta_deg)[0]


def stage4_soil_moisture(eps_re, coefficients, porosity, inverse=None):
    """mv (m³/m³) from ε', clamped to [0, porosity]. ``inverse(eps_re) ->
    mv`` overrides the exact Mironov inverse (e.g. a table lookup)."""
    if inverse is None:
        mv = mv_from_eps_re(eps_re, coefficients, MV_MAX)
    else:
        mv = inverse(eps_re)
    return inp.clip(mv, 0.0, porosity)


_INPUTS = {"tbv": "K", "ndvi": "1", "ndvi_max": "1", "ndvi_min": "1", "ts": "K", "clay": "1",
           "bulk_density": "g/cm^3", "freq_hz": "Hz"}
_OUTPUTS = {name: OUTPUT_UNITS[name] for name in ("mv", "eps_re", "vwc")}
_REFINED_INPUTS = {k: v for k, v in _INPUTS.items() if k != "freq_hz"} | {"sigma0_hh": "dB"}
_REFINED_OUTPUTS = _OUTPUTS | {"mv_stage4": OUTPUT_UNITS["mv_stage4"]}


@in_units(_OUTPUTS, **_INPUTS)
def retrieve(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
             sweeps: int = SWEEPS, freq_hz: float = FREQ_HZ, theta_deg: float = THETA_DEG,
             lookups: TableLookups | None = None):
    """Soil moisture from V-pol brightness temperature, Stages 1–4.

    Inputs per pixel: ``tbv`` (K), NDVI now/max/min, ``ts`` (K, = Tc),
    ``clay`` fraction 0–1, ``bulk_density`` (g/cm³), ``landcover`` class
    index (int, see ``landcover.CLASSES``). Returns a dict of ``mv``
    (m³/m³), ``eps_re`` (Stage-3 real permittivity) and ``vwc`` (kg/m²).
    Inputs may be quantities (``isokernel.units``), converted to those
    units; the outputs are then quantities too.
    ``sweeps`` (the most Stage-3 sweeps of a pixel), ``freq_hz`` and
    ``theta_deg`` are static. ``lookups`` (static) switches κ and Stage 4
    from the direct Mironov relations to layered tables
    (``lookups.TableLookups``).
    """
    return _stages_1_to_4(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
                          sweeps, freq_hz, theta_deg, lookups)[0]


@in_units(**_INPUTS)
def retrieve_iterations(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
                        sweeps: int = SWEEPS, freq_hz: float = FREQ_HZ,
                        theta_deg: float = THETA_DEG, lookups: TableLookups | None = None):
    """The loop counts of :func:`retrieve` (same arguments), per pixel:
    ``{"stage3_sweeps": ...}``."""
    return _stages_1_to_4(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
                          sweeps, freq_hz, theta_deg, lookups)[1]


def _stages_1_to_4(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density, landcover,
                   sweeps, freq_hz, theta_deg, lookups):
    """(the retrieval's outputs, its loop counts) for :func:`retrieve`."""
    p = class_parameters(landcover, ts)
    vwc = vegetation_water_content(ndvi, ndvi_max, ndvi_min, p["stem_factor"])
    gamma = transmissivity(p["b"], vwc, theta_deg)
    r = stage2_smooth(stage1_reflectivity(tbv, ts, gamma, p["omega"]), p["h"], theta_deg)
    r_smooth = in_unit(r, "1")
    m = mironov_coefficients(clay, freq_hz)
    clay = in_unit(clay, "1")
    if lookups is None:
        kappa, inverse = PixelLoss(eps_im_of_eps_re, (m,)), None
    else:
        kappa = PixelLoss(functools.partial(table_kappa, t=lookups), (clay, m))
        inverse = lambda e: table_mv(e, clay, m, lookups)  # noqa: E731
    eps_re, taken = stage3_solve(r_smooth, kappa, "v", sweeps, theta_deg)
    porosity = 1.0 - bulk_density / Quantity(PARTICLE_DENSITY, "g/cm^3")
    mv = stage4_soil_moisture(eps_re, m, in_unit(porosity, "m^3/m^3"), inverse)
    return {"mv": mv, "eps_re": eps_re, "vwc": vwc}, {"stage3_sweeps": taken}


@in_units(_REFINED_OUTPUTS, **_REFINED_INPUTS)
def retrieve_refined(tbv, sigma0_hh, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density,
                     landcover, sweeps: int = SWEEPS, lookups: TableLookups | None = None,
                     prior_sd: tuple[float, float] = PRIOR_SD):
    """Stages 1–5: :func:`retrieve`, then the Levenberg–Marquardt refinement
    of (mv, VWC) against TB_V (K) and σ0_HH (dB), with Gaussian priors
    centred on the Stage-4 mv and the NDVI-derived VWC (standard deviations
    ``prior_sd``, static). Returns ``mv`` (refined, clamped to [0,
    porosity]), ``vwc`` (refined), ``eps_re`` and ``mv_stage4``. The forward
    model of Stage 5 uses the module's θ = 40° and f = 1.41 GHz."""
    return _stages_1_to_5(tbv, sigma0_hh, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density,
                          landcover, sweeps, lookups, prior_sd)[0]


@in_units(**_REFINED_INPUTS)
def retrieve_refined_iterations(tbv, sigma0_hh, ndvi, ndvi_max, ndvi_min, ts, clay,
                                bulk_density, landcover, sweeps: int = SWEEPS,
                                lookups: TableLookups | None = None,
                                prior_sd: tuple[float, float] = PRIOR_SD):
    """The loop counts of :func:`retrieve_refined` (same arguments), per
    pixel: ``{"stage3_sweeps": ..., "stage5_iterations": ...}``."""
    return _stages_1_to_5(tbv, sigma0_hh, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density,
                          landcover, sweeps, lookups, prior_sd)[1]


def _stages_1_to_5(tbv, sigma0_hh, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density,
                   landcover, sweeps, lookups, prior_sd):
    """(the refined retrieval's outputs, its loop counts)."""
    first, counts = _stages_1_to_4(tbv, ndvi, ndvi_max, ndvi_min, ts, clay, bulk_density,
                                   landcover, sweeps, Quantity(FREQ_HZ, "Hz"), THETA_DEG, lookups)
    # Stage 5's loop carries bare values in the model's units; its forward
    # model (stage5.observations) works in quantities again
    ctx = class_parameters(landcover, ts) | {"clay": in_unit(clay, "1"), "ts": in_unit(ts, "K"),
                                             "ndvi": in_unit(ndvi, "1")}
    prior = (in_unit(first["mv"], "m^3/m^3"), in_unit(first["vwc"], "kg/m^2"))
    mv, vwc, taken = stage5_solve(*prior, in_unit(tbv, "K"), in_unit(sigma0_hh, "dB"), ctx,
                                  jacfwd_jacobian(ctx), prior, prior_sd)
    porosity = 1.0 - bulk_density / Quantity(PARTICLE_DENSITY, "g/cm^3")
    mv, vwc = Quantity(mv, "m^3/m^3"), Quantity(vwc, "kg/m^2")
    return ({"mv": inp.clip(mv, 0.0, porosity), "eps_re": first["eps_re"], "vwc": vwc,
             "mv_stage4": first["mv"]}, counts | {"stage5_iterations": taken})


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

