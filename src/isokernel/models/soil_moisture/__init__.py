"""SMAP–NISAR per-pixel soil moisture: forward models, the retrieval and a
synthetic scene, written once with ``isokernel.numpy``.

Every function is branch-free (the iterative Stages 3 and 5 are per-pixel
``while_loop``s, each pixel stopping on its own tolerance) and works on
float32 or float64 arrays (the permittivity and the Fresnel amplitudes as
complex64 or complex128 values); the equations, units and sources are in each
module's docstring and in ``docs/soil_moisture.md``.

- ``dielectric``: Mironov (2009) complex permittivity, its exact inverse in mv
- ``fresnel``: smooth-surface reflectivities and their real inverses
- ``forward``: VWC from NDVI, tau-omega TB, Water Cloud Model σ0
- ``landcover``: per-class vegetation, roughness and backscatter parameters
- ``rng`` / ``scene``: counter-based RNG and the synthetic scene
- ``retrieval``: Stages 1–4 of the retrieval, and Stage 5 (``retrieve_refined``)
- ``stage5``: the Levenberg–Marquardt refinement, its Jacobian by ``jacfwd``
- ``pixels``: a function of one pixel mapped over the pixels (``vmap``), so
  Stages 3 and 5 are ``while_loop``s that stop each pixel on its own
- ``tables``: Mironov table values and the Stage-4 inverse-table error budget
- ``lookups``: κ and Stage 4 through layered tables (the lookup passed in)
"""

from .dielectric import (
    FREQ_HZ,
    MV_MAX,
    MironovCoefficients,
    eps_im_of_eps_re,
    mironov,
    mironov_coefficients,
    mv_from_eps_re,
    permittivity,
)
from .forward import (
    brightness_temperature,
    roughness_factor,
    tau_omega,
    transmissivity,
    vegetation_water_content,
    water_cloud,
)
from .fresnel import THETA_DEG, fresnel, fresnel_real, inverse_fresnel_h, inverse_fresnel_v
from .landcover import CLASSES, LandCover, class_parameters
from .pixels import per_pixel
from .retrieval import (
    REFINED_INPUTS,
    RETRIEVAL_INPUTS,
    STAGE3_RTOL,
    SWEEPS,
    PixelLoss,
    retrieve,
    retrieve_iterations,
    retrieve_refined,
    retrieve_refined_iterations,
    scene_inputs,
    stage1_reflectivity,
    stage2_smooth,
    stage3_permittivity,
    stage3_solve,
    stage3_sweeps,
    stage3_tolerance,
    stage4_soil_moisture,
)
from .scene import Grid, generate_scene, observe, scene_model
from .stage5 import stage5_refine, stage5_solve

__all__ = [
    "CLASSES", "FREQ_HZ", "MV_MAX", "REFINED_INPUTS", "RETRIEVAL_INPUTS", "STAGE3_RTOL",
    "SWEEPS", "THETA_DEG", "Grid", "LandCover", "MironovCoefficients", "PixelLoss",
    "brightness_temperature", "class_parameters", "eps_im_of_eps_re", "fresnel",
    "fresnel_real", "generate_scene", "inverse_fresnel_h", "inverse_fresnel_v", "mironov",
    "mironov_coefficients", "mv_from_eps_re", "observe", "per_pixel", "permittivity",
    "retrieve", "retrieve_iterations", "retrieve_refined", "retrieve_refined_iterations",
    "roughness_factor", "scene_inputs", "scene_model", "stage1_reflectivity", "stage2_smooth",
    "stage3_permittivity", "stage3_solve", "stage3_sweeps", "stage3_tolerance",
    "stage4_soil_moisture", "stage5_refine", "stage5_solve", "tau_omega", "transmissivity",
    "vegetation_water_content", "water_cloud",
]
