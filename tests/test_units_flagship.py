"""The soil-moisture flagship in units (``models.soil_moisture.units``): called
with quantities it records the graph it records with bare arrays, node for
node, and gives the same bits on every CPU strategy; other units of an input
convert (°C → K, kg/m³ → g/cm³); five unit slips seeded into a copy of the
flagship's source are each caught while recording, naming the line;
``isokernel run`` reads each variable's CF units attribute, converts with a
note line, refuses an incompatible unit in one line naming the variable, and
records the units in the run manifest."""

from __future__ import annotations

import importlib
import json
import pathlib
import re
import sys

import numpy as np
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
    with_units = ik.jit(sm.retrieve, strategy=strategy)
    lowered = with_units.lower(*quantities), today.lower(*args)
    assert str(lowered[0].graph) == str(lowered[1].graph)
    if strategy == "native":  # the same compiled kernel
        kernels = [[line for line in str(x.compile().report()).splitlines()
                    if line.startswith("  kernel")] for x in lowered]
        assert kernels[0][0].split()[1] == kernels[1][0].split()[1]
    want, got = today(*args), with_units(*quantities)
    assert set(got) == set(want)
    for name, value in got.items():
        assert value.units == ik.units.parse(smu.OUTPUT_UNITS[name])
        assert value.magnitude.tobytes() == want[name].tobytes(), name


def test_the_refined_retrieval_in_units_records_todays_graph(scene):
    args = sm.scene_inputs(scene, names=sm.REFINED_INPUTS)
    quantities = _quantities(args, sm.REFINED_INPUTS)
    g_today = ik.jit(sm.retrieve_refined).lower(*args).graph
    g_units = ik.jit(sm.retrieve_refined).lower(*quantities).graph
    assert [(n.op, str(n.aval)) for n in g_units.nodes] == \
        [(n.op, str(n.aval)) for n in g_today.nodes]


def test_inputs_in_celsius_and_kilograms_per_cubic_metre_convert(scene):
    args = sm.scene_inputs(scene)
    quantities = list(_quantities(args))
    ts, rho = sm.RETRIEVAL_INPUTS.index("ts"), sm.RETRIEVAL_INPUTS.index("bulk_density")
    celsius = args[ts] - 273.15
    quantities[ts] = Q(celsius, "degC")
    quantities[rho] = Q(args[rho] * 1000.0, "kg/m^3")
    graph = ik.jit(sm.retrieve).lower(*quantities).graph
    today = ik.jit(sm.retrieve).lower(*args).graph
    assert len(graph.nodes) == len(today.nodes) + 6  # 273.15 and 0.001, broadcast, applied
    got = ik.jit(sm.retrieve, strategy="reference")(*quantities)
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


def test_bare_building_blocks_return_bare_values_and_quantities_return_quantities():
    vwc = sm.vegetation_water_content(np.array([0.5]), 0.8, 0.1, 1.0)
    assert isinstance(vwc, np.ndarray)
    gamma = sm.transmissivity(Q(0.1, "m^2/kg"), Q(vwc * 1000.0, "g/m^2"))
    assert isinstance(gamma, Q) and gamma.dimensionless
    assert gamma.magnitude.tobytes() == sm.transmissivity(0.1, vwc).tobytes()
    with pytest.raises(ik.units.UnitError, match="does not convert to m²/kg"):
        sm.transmissivity(Q(0.1, "m^2"), vwc)


# --- five unit slips seeded into a copy of the flagship -------------------------------------------

# slip: (module, the line as the flagship writes it, the line with the slip, how many lines
# below the slip it is reported: at the operation it breaks)
SLIPS = {
    # a canopy temperature written as the soil's plus an offset in °C
    "celsius": ("forward.py", "    tc = ts if tc is None else tc\n",
                '    tc = ts + Quantity(1.5, "degC") if tc is None else tc\n', 0),
    # the Water Cloud Model's soil backscatter used in dB as if it were linear
    "decibel": ("forward.py", "    soil = db_to_linear(c + d * mv)\n",
                "    soil = c + d * mv\n", 1),  # the dB term added to a linear one
    # the particle density written as a bare number in kg/m³ (the model's density is g/cm³)
    "density": ("retrieval.py",
                '    porosity = 1.0 - bulk_density / Quantity(PARTICLE_DENSITY, "g/cm^3")\n',
                "    porosity = 1.0 - bulk_density / 2650.0\n", 0),
    # the frequency written as a bare number in GHz
    "frequency": ("dielectric.py", "    omega_tau = (2.0 * math.pi * freq_hz) * tau\n",
                  "    omega_tau = (2.0 * math.pi * 1.41) * tau\n", 1),  # 1 + (ωτ)², in s²
    # the vegetation optical depth without its b parameter: exp of kg/m²
    "exp": ("forward.py", "    return inp.exp(-b * vwc / math.cos(math.radians(theta_deg)))\n",
            "    return inp.exp(-vwc / math.cos(math.radians(theta_deg)))\n", 0),
}
RELATIVE_IMPORT = re.compile(r"^from \.\.\.(\S*) import", re.M)


def flagship_copy(folder: pathlib.Path, slip: str | None, monkeypatch):
    """The flagship package's source copied into ``folder`` as a package of
    its own (its imports of isokernel made absolute), with ``slip`` seeded;
    returns (the imported copy, the slipped line as ``file:N``)."""
    name = f"soil_moisture_copy_{slip or 'clean'}"
    package = folder / name
    package.mkdir()
    where = None
    for path in pathlib.Path(sm.__file__).parent.glob("*.py"):
        text = RELATIVE_IMPORT.sub(
            lambda m: f"from isokernel{'.' + m.group(1) if m.group(1) else ''} import",
            path.read_text())
        if slip is not None and SLIPS[slip][0] == path.name:
            _, line, slipped, below = SLIPS[slip]
            assert line in text, (slip, line)
            head = text[:text.index(line)]
            text = head + slipped + text[len(head) + len(line):]
            where = f"{path.name}:{head.count(chr(10)) + 1 + below}"
        (package / path.name).write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name), where


def _record_observe_and_retrieve(copy, scene):
    observed = tuple(Q(scene[n], smu.INPUT_UNITS[n]) if smu.INPUT_UNITS[n] else scene[n]
                     for n in ("mv", "clay", "ts", "ndvi", "ndvi_max", "ndvi_min", "landcover"))
    retrieval = _quantities(sm.scene_inputs(scene))
    return (ik.jit(copy.observe).lower(*observed).graph,
            ik.jit(copy.retrieve).lower(*retrieval).graph)


def test_a_copy_of_the_flagship_records_the_flagships_graphs(scene, tmp_path, monkeypatch):
    copy, _ = flagship_copy(tmp_path, None, monkeypatch)
    mine = _record_observe_and_retrieve(copy, scene)
    theirs = _record_observe_and_retrieve(sm, scene)
    for a, b in zip(mine, theirs):
        assert [(n.op, str(n.aval)) for n in a.nodes] == [(n.op, str(n.aval)) for n in b.nodes]


@pytest.mark.parametrize("slip, op, words", [
    ("celsius", "add", ["°C is an offset unit", "x.to('K')"]),
    ("decibel", "add", ["dB is a logarithmic unit", "x.to('1')"]),
    ("density", "subtract", ["g/cm³ ([mass] / [length] ** 3)", "a bare number"]),
    ("frequency", "add", ["s² ([time] ** 2)", "a bare number"]),
    ("exp", "exp", ["the argument is in kg/m² ([mass] / [length] ** 2)"]),
])
def test_unit_slips_seeded_into_a_copy_of_the_flagship_are_caught_naming_the_line(
        scene, tmp_path, monkeypatch, slip, op, words):
    copy, where = flagship_copy(tmp_path, slip, monkeypatch)
    with pytest.raises(ik.units.UnitError) as err:
        _record_observe_and_retrieve(copy, scene)
    text = str(err.value)
    assert text.startswith(f"{op} at {where}: "), text
    for word in words:
        assert word in text, text


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
