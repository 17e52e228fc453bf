"""The models ``isokernel run`` knows by name: the shipped soil-moisture
models, with the CF attributes of their outputs, and any user function
given as ``MODULE:FUNCTION`` or ``file.py:FUNCTION``."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
from dataclasses import dataclass

from ..models.soil_moisture import (
    REFINED_INPUTS,
    RETRIEVAL_INPUTS,
    observe,
    retrieve,
    retrieve_refined,
)
from ..models.soil_moisture.units import INPUT_UNITS


@dataclass(frozen=True)
class Output:
    name: str
    units: str | None = None
    long_name: str | None = None
    standard_name: str | None = None

    def attrs(self) -> dict:
        keys = ("units", "long_name", "standard_name")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


@dataclass(frozen=True)
class Model:
    name: str
    fn: object
    inputs: tuple[str, ...]
    outputs: tuple[Output, ...]
    description: str
    # each input's unit (pint's syntax; None for a class index): ``run`` converts a data
    # set's variables from their CF units attribute (``input_units``)
    input_units: dict[str, str | None] | None = None


MODELS = {
    "soil-moisture": Model(
        "soil-moisture", retrieve, RETRIEVAL_INPUTS,
        (Output("mv", "m3 m-3", "volumetric soil moisture (Stages 1-4 retrieval)",
                "volume_fraction_of_condensed_water_in_soil"),
         Output("eps_re", "1", "real part of the soil relative permittivity (Stage 3)"),
         Output("vwc", "kg m-2", "vegetation water content from NDVI")),
        "soil moisture from V-pol brightness temperature (SMAP baseline, Stages 1-4)",
        INPUT_UNITS),
    "soil-moisture-stage5": Model(
        "soil-moisture-stage5", retrieve_refined, REFINED_INPUTS,
        (Output("mv", "m3 m-3", "volumetric soil moisture (Stages 1-5 retrieval)",
                "volume_fraction_of_condensed_water_in_soil"),
         Output("eps_re", "1", "real part of the soil relative permittivity (Stage 3)"),
         Output("vwc", "kg m-2", "vegetation water content (Stage 5, prior from NDVI)"),
         Output("mv_stage4", "m3 m-3", "volumetric soil moisture before Stage 5",
                "volume_fraction_of_condensed_water_in_soil")),
        "soil moisture and VWC from TB_V and sigma0_HH (Stages 1-4, then per-pixel "
        "Levenberg-Marquardt with Gaussian priors)", INPUT_UNITS),
    "soil-moisture-forward": Model(
        "soil-moisture-forward", observe,
        ("mv", "clay", "ts", "ndvi", "ndvi_max", "ndvi_min", "landcover"),
        (Output("tbh", "K", "H-pol brightness temperature at 40 deg (tau-omega)",
                "brightness_temperature"),
         Output("tbv", "K", "V-pol brightness temperature at 40 deg (tau-omega)",
                "brightness_temperature"),
         Output("sigma0_hh", "dB", "HH backscatter coefficient, Water Cloud Model"),
         Output("vwc", "kg m-2", "vegetation water content from NDVI"),
         Output("eps_re", "1", "real part of the soil relative permittivity (Mironov)"),
         Output("eps_im", "1", "imaginary part of the soil relative permittivity (Mironov)")),
        "TB_H, TB_V and sigma0_HH from soil moisture and ancillary data", INPUT_UNITS),
}


def stage5_model(target: str, stage5: bool) -> str:
    """The model ``run --stage5`` means: soil-moisture with Stage 5."""
    if not stage5 or target == "soil-moisture-stage5":
        return target
    if target != "soil-moisture":
        raise ValueError(f"--stage5 refines the soil-moisture retrieval; model {target!r} "
                         f"has no Stage 5")
    return "soil-moisture-stage5"


def resolve_model(target: str) -> Model:
    """A shipped model by name, or ``MODULE:FUNCTION`` / ``file.py:FUNCTION``
    (inputs named by its parameters, outputs by its dict keys)."""
    if target in MODELS:
        return MODELS[target]
    if ":" not in target:
        raise ValueError(f"unknown model {target!r}; use one of {', '.join(MODELS)} or "
                         f"MODULE:FUNCTION")
    fn = _load_function(target)
    params = tuple(inspect.signature(fn).parameters)
    return Model(target, fn, params, (), f"user model {target}")


def _load_function(target: str):
    module_name, _, attr = target.rpartition(":")
    if module_name.endswith(".py"):
        if not os.path.exists(module_name):
            raise FileNotFoundError(f"no such model file: {module_name}")
        spec = importlib.util.spec_from_file_location("isokernel_run_model", module_name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise AttributeError(f"{module_name} has no function {attr!r}")
    return getattr(module, attr)
