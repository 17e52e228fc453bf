"""The soil-moisture flagship in units (``models.soil_moisture.units``): with
quantities at its boundary it records the flagship's graph node for node and
gives its bits on every CPU strategy; other units of an input convert (°C →
K, kg/m³ → g/cm³); ``isokernel run`` reads each variable's CF units
attribute, converts with a note line, refuses an incompatible unit in one line
naming the variable, and records the units in the run manifest."""

from __future__ import annotations

import json

import pytest

import isokernel as ik
from isokernel.cli import main
from isokernel.models import soil_moisture as sm
from isokernel.models.soil_moisture import units as smu
from isokernel.units import Quantity as Q

CPU = ("reference", "threads", "native")


@pytest.fixture(scope="module")
def scene():
    return sm.generate_scene(3000, seed=11)


def _quantities(args, names=sm.RETRIEVAL_INPUTS):
    return tuple(a if smu.INPUT_UNITS[n] is None else Q(a, smu.INPUT_UNITS[n])
                 for n, a in zip(names, args))


@pytest.mark.parametrize("strategy", CPU)
def test_the_retrieval_in_units_gives_todays_bits_and_nodes(scene, strategy):
    args = sm.scene_inputs(scene)
    quantities = _quantities(args)
    today = ik.jit(sm.retrieve, strategy=strategy)
    with_units = ik.jit(smu.retrieve, strategy=strategy)
    assert len(with_units.lower(*quantities).graph.nodes) == \
        len(today.lower(*args).graph.nodes)
    want, got = today(*args), with_units(*quantities)
    assert set(got) == set(want)
    for name, value in got.items():
        assert value.units == ik.units.parse(smu.OUTPUT_UNITS[name])
        assert value.magnitude.tobytes() == want[name].tobytes(), name


def test_the_refined_retrieval_in_units_records_todays_graph(scene):
    args = sm.scene_inputs(scene, names=sm.REFINED_INPUTS)
    quantities = _quantities(args, sm.REFINED_INPUTS)
    g_today = ik.jit(sm.retrieve_refined).lower(*args).graph
    g_units = ik.jit(smu.retrieve_refined).lower(*quantities).graph
    assert [(n.op, str(n.aval)) for n in g_units.nodes] == \
        [(n.op, str(n.aval)) for n in g_today.nodes]


def test_inputs_in_celsius_and_kilograms_per_cubic_metre_convert(scene):
    args = sm.scene_inputs(scene)
    quantities = list(_quantities(args))
    ts, rho = sm.RETRIEVAL_INPUTS.index("ts"), sm.RETRIEVAL_INPUTS.index("bulk_density")
    celsius = args[ts] - 273.15
    quantities[ts] = Q(celsius, "degC")
    quantities[rho] = Q(args[rho] * 1000.0, "kg/m^3")
    graph = ik.jit(smu.retrieve).lower(*quantities).graph
    today = ik.jit(sm.retrieve).lower(*args).graph
    assert len(graph.nodes) == len(today.nodes) + 6  # 273.15 and 0.001, broadcast, applied
    got = ik.jit(smu.retrieve, strategy="reference")(*quantities)
    moved = list(args)  # the conversions done first, in NumPy
    moved[ts], moved[rho] = celsius + 273.15, args[rho] * 1000.0 * 0.001
    want = ik.jit(sm.retrieve, strategy="reference")(*moved)
    assert got["mv"].magnitude.tobytes() == want["mv"].tobytes()


def test_constants_and_units_are_declared():
    assert smu.constants()["particle_density"].m_as("kg/m^3") == 2650.0
    assert smu.constants()["frequency"].m_as("GHz") == pytest.approx(1.41, rel=1e-15)
    assert set(sm.REFINED_INPUTS) <= set(smu.INPUT_UNITS)
    assert str(smu.unit_of("bulk_density")) == "gram / centimeter ** 3"
    assert smu.unit_of("landcover") is None


# --- isokernel run ------------------------------------------------------------------------------

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
GRID = sm.Grid(24 * 32, 32)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same scene three times: ts in K, ts in °C (the K file holds
    °C + 273.15, so both are one retrieval), and ts with a wrong unit."""
    from isokernel.scenes import scene_dataset
    folder = tmp_path_factory.mktemp("units")
    scene = sm.generate_scene(GRID.pixels, seed=5)
    ds = scene_dataset(scene, GRID)
    celsius = ds.copy()
    celsius["ts"] = (ds["ts"] - 273.15).assign_attrs({**ds["ts"].attrs, "units": "degC"})
    celsius["bulk_density"] = (ds["bulk_density"] * 1000.0).assign_attrs(
        {**ds["bulk_density"].attrs, "units": "kg m-3"})
    kelvin = ds.copy()
    kelvin["ts"] = (celsius["ts"] + 273.15).assign_attrs(ds["ts"].attrs)
    kelvin["bulk_density"] = (celsius["bulk_density"] * 0.001).assign_attrs(
        ds["bulk_density"].attrs)
    wrong = ds.copy()
    wrong["ts"] = ds["ts"].assign_attrs({**ds["ts"].attrs, "units": "m3 m-3"})
    paths = {}
    for name, data in (("kelvin", kelvin), ("celsius", celsius), ("wrong", wrong)):
        paths[name] = str(folder / f"{name}.nc")
        data.to_netcdf(paths[name])
    return folder, paths


def test_run_converts_celsius_with_a_note_and_gives_the_kelvin_retrieval(files, capsys):
    folder, paths = files
    outs = {}
    for name in ("kelvin", "celsius"):
        outs[name] = str(folder / f"out_{name}.nc")
        assert main(["run", "soil-moisture", paths[name], outs[name], "--no-progress",
                     "--strategy", "reference", "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert "note: input 'ts' is in 'degC'; converted to K ([temperature]) for soil-moisture " \
           "(x + 273.15)" in printed
    assert "note: input 'bulk_density' is in 'kg m-3'; converted to g/cm³ ([mass] / " \
           "[length] ** 3) for soil-moisture (x * 0.001)" in printed
    with xr.open_dataset(outs["kelvin"]) as k, xr.open_dataset(outs["celsius"]) as c:
        for name in ("mv", "eps_re", "vwc"):
            assert k[name].values.tobytes() == c[name].values.tobytes()
        assert c["mv"].attrs["units"] == "m3 m-3" and c["vwc"].attrs["units"] == "kg m-2"
    with open(f"{outs['celsius']}.manifest.json") as f:
        record = json.load(f)
    inputs = {v["input"]: v for v in record["input"]["variables"]}
    assert inputs["ts"]["units"] == "degC" and inputs["ts"]["model_units"] == "K"
    assert inputs["ts"]["converted"] is True and inputs["tbv"]["converted"] is False
    assert inputs["bulk_density"]["model_units"] == "g cm-3"
    assert {v["name"]: v["units"] for v in record["output"]["variables"]} == \
        {"mv": "m3 m-3", "eps_re": "1", "vwc": "kg m-2"}


def test_run_refuses_an_incompatible_unit_in_one_line_naming_the_variable(files, capsys):
    folder, paths = files
    code = main(["run", "soil-moisture", paths["wrong"], str(folder / "never.nc"),
                 "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in err
    assert "input 'ts' is in 'm3 m-3' (dimensionless), which does not convert to K " \
           "([temperature]), the unit soil-moisture takes" in err
    assert "--var ts=VARIABLE" in err
    assert not (folder / "never.nc").exists()
