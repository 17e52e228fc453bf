"""SMAP L1C_TB and L2_SM_P granules: read in the products' layout into the
model's names with fills and quality flags masked; ``isokernel run`` over a
granule computes the cells that pass the mask and no other, gives the bits
of ``jit(retrieve)`` on them, and writes the masked cells as NaN on
EASE-Grid 2.0 with a CF grid mapping."""

from __future__ import annotations

import json

import numpy as np
import pytest

from isokernel import jit
from isokernel.cli import main
from isokernel.models.soil_moisture import RETRIEVAL_INPUTS, retrieve
from isokernel.scenes import run, scene_dataset, smap
from isokernel.scenes.datasets import open_input

xr = pytest.importorskip("xarray")
h5py = pytest.importorskip("h5py")
pytest.importorskip("dask")

QUIET = {"progress": False, "echo": lambda *_: None, "strategy": "reference"}
NDVI = ["ndvi", "ndvi_max", "ndvi_min"]


@pytest.fixture(scope="module")
def l2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("smap")
    path = str(folder / "SMAP_L2_SM_P_synthetic.h5")
    truth = smap.write_synthetic_l2_sm_p(path, seed=3)
    ancillary = str(folder / "ndvi.nc")
    truth[NDVI].to_netcdf(ancillary)
    return path, truth, ancillary


@pytest.fixture(scope="module")
def l1c(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("smap") / "SMAP_L1C_TB_synthetic.h5")
    return path, smap.write_synthetic_l1c_tb(path, seed=5)


def _check_read(ds, truth, names):
    valid = truth["valid"].values
    assert 0 < valid.sum() < valid.size
    for name in names:
        got, want = ds[name].values, truth[name].values
        assert np.array_equal(got[valid], want[valid].astype(got.dtype)), name
        missing = got[~valid] == -1 if got.dtype.kind == "i" else np.isnan(got[~valid])
        assert missing.all(), name
    assert np.array_equal(ds["x"].values, truth["x"].values)


def test_an_l2_sm_p_granule_reads_into_the_model_names_with_fills_and_flags_masked(l2):
    path, truth, _ = l2
    with h5py.File(path) as f:  # the product's layout
        group = f["Soil_Moisture_Retrieval_Data"]
        assert group["tb_v_corrected"].dtype == np.float32
        assert group["EASE_row_index"].dtype == np.uint16
        assert group["tb_v_corrected"].attrs["_FillValue"] == np.float32(-9999.0)
        assert (group["tb_v_corrected"][()] == -9999.0).any()
        assert (group["retrieval_qual_flag"][()] & 1).any()
    ds = smap.open_granule(path, ancillary=truth[NDVI])
    _check_read(ds, truth, ("tbv", "tbh", "ts", "clay", "bulk_density", "landcover", *NDVI))
    assert ds["tbv"].attrs["units"] == "K" and ds["bulk_density"].attrs["units"] == "g cm-3"
    assert ds["crs"].attrs["grid_mapping_name"] == "lambert_cylindrical_equal_area"
    assert float(ds["latitude"].max()) < 90.0


def test_an_l1c_tb_granule_reads_its_aft_brightness_temperatures(l1c):
    path, truth = l1c
    assert smap.product_of(path).name == "L1C_TB"
    _check_read(smap.open_granule(path), truth, ("tbv", "tbh"))


def test_a_granule_is_known_by_its_groups_without_metadata_and_netcdf_is_not_one(l1c, tmp_path):
    path, _ = l1c
    bare = str(tmp_path / "no_metadata.h5")
    with h5py.File(path) as src, h5py.File(bare, "w") as dst:
        src.copy("Global_Projection", dst)
    assert smap.product_of(bare).name == "L1C_TB"
    netcdf = str(tmp_path / "scene.nc")
    xr.Dataset({"tbv": ("x", np.ones(3))}).to_netcdf(netcdf, engine="h5netcdf")
    assert smap.product_of(netcdf) is None


def test_another_smap_product_is_refused_by_name(tmp_path):
    path = str(tmp_path / "l3.h5")
    with h5py.File(path, "w") as f:
        f.create_group("Metadata/DatasetIdentification").attrs["shortName"] = "SPL3SMP"
    with pytest.raises(ValueError, match="SPL3SMP granule; isokernel reads SPL2SMP"):
        open_input(path)


def test_a_granule_missing_a_required_variable_is_refused_in_one_line(l2, tmp_path):
    path = str(tmp_path / "incomplete.h5")
    with h5py.File(l2[0]) as src, h5py.File(path, "w") as dst:
        src.copy("Metadata", dst)
        src.copy("Soil_Moisture_Retrieval_Data", dst)
        del dst["Soil_Moisture_Retrieval_Data/surface_temperature"]
    with pytest.raises(ValueError) as err:
        run("soil-moisture", path, str(tmp_path / "out.nc"), **QUIET)
    message = str(err.value)
    assert "\n" not in message
    assert "'surface_temperature' (model input 'ts')" in message


def test_model_inputs_a_granule_lacks_are_named_with_the_fix(l2, tmp_path):
    with pytest.raises(ValueError, match=r"has no ndvi, ndvi_max, ndvi_min; supply them"):
        smap.granule_cells(l2[0], inputs=RETRIEVAL_INPUTS)
    with pytest.raises(ValueError, match=r"no variable 'ndvi'; map it with --var"):
        run("soil-moisture", l2[0], str(tmp_path / "out.nc"), **QUIET)


def test_an_ancillary_off_the_grid_is_refused(l2):
    path, truth, _ = l2
    shifted = truth[NDVI].assign_coords(x=truth["x"] + 1000.0)
    with pytest.raises(ValueError, match="not cell centres of EASE-Grid 2.0 36 km"):
        smap.granule_cells(path, shifted)


def test_run_computes_only_the_unmasked_cells_with_the_bits_of_the_retrieval(l2, tmp_path):
    path, truth, ancillary = l2
    out = str(tmp_path / "retrieved.nc")
    assert main(["run", "soil-moisture", path, out, "--ancillary", ancillary,
                 "--no-progress", "--strategy", "reference"]) == 0
    valid = truth["valid"].values
    with open(f"{out}.manifest.json") as f:
        record = json.load(f)
    assert f"--ancillary {ancillary}" in record["command"]
    workers = record["workers"]
    assert sum(w["pixels"] for w in workers.values()) == valid.sum()  # masked: not computed
    arrays = [truth[n].values[valid] for n in RETRIEVAL_INPUTS]
    arrays = [a if a.dtype.kind == "i" else a.astype(np.float64) for a in arrays]
    assert not any(np.isnan(a).any() for a in arrays if a.dtype.kind == "f")
    want = jit(retrieve, strategy="reference")(*arrays)
    with xr.open_dataset(out) as ds:
        for name in ("mv", "eps_re", "vwc"):
            got = ds[name].values
            assert got[valid].tobytes() == np.asarray(want[name]).tobytes(), name
            assert np.isnan(got[~valid]).all(), name
            assert ds[name].attrs["grid_mapping"] == "crs"
    zarr = str(tmp_path / "retrieved.zarr")  # a Zarr output: the same grid and bits
    run("soil-moisture", path, zarr, ancillary=ancillary, **QUIET)
    with xr.open_zarr(zarr, consolidated=False) as z, xr.open_dataset(out) as nc:
        for name in ("mv", "eps_re", "vwc"):
            assert z[name].dims == ("y", "x") and z[name].attrs["grid_mapping"] == "crs"
            assert z[name].values.tobytes() == nc[name].values.tobytes(), name


def test_the_output_is_cf_on_ease_grid_2_and_replaceable(l1c, tmp_path):
    path, truth = l1c
    model = tmp_path / "ratio.py"
    model.write_text("def ratio(tbv, tbh):\n    return {'pr': (tbv - tbh) / (tbv + tbh)}\n")
    out = str(tmp_path / "ratio.nc")
    run(f"{model}:ratio", path, out, **QUIET)
    run(f"{model}:ratio", path, out, overwrite=True, **QUIET)  # isokernel's own: replaced
    valid = truth["valid"].values
    tbv, tbh = (truth[n].values[valid].astype(np.float64) for n in ("tbv", "tbh"))
    with xr.open_dataset(out, decode_coords="all") as ds:  # crs: a coordinate
        assert list(ds.data_vars) == ["pr"] and ds["pr"].dims == ("y", "x")
        assert ds["pr"].encoding["grid_mapping"] == "crs"
        assert ds["pr"].values[valid].tobytes() == ((tbv - tbh) / (tbv + tbh)).tobytes()
        assert np.isnan(ds["pr"].values[~valid]).all()
        crs = ds["crs"].attrs
        assert crs["grid_mapping_name"] == "lambert_cylindrical_equal_area"
        assert crs["standard_parallel"] == 30.0
        assert crs["false_easting"] == crs["false_northing"] == 0.0
        assert ds["x"].attrs["units"] == "m" and ds["y"].attrs["standard_name"] == (
            "projection_y_coordinate")
        column0, row0 = 480, 120  # the synthetic window's corner
        corner = (-17367530.445161499, 7314540.830638599)  # NSIDC's EASE2_M36km, metres
        cell = 36032.220840584
        assert ds["x"].values[0] == pytest.approx(corner[0] + (column0 + 0.5) * cell, abs=1e-6)
        assert ds["y"].values[0] == pytest.approx(corner[1] - (row0 + 0.5) * cell, abs=1e-6)
        assert np.allclose(np.diff(ds["x"].values), cell, rtol=0, atol=1e-6)
        assert ds.attrs["Conventions"].startswith("CF-")


def test_a_netcdf_scene_still_runs_as_before(tmp_path):
    from isokernel.models.soil_moisture import Grid, generate_scene
    grid = Grid(12, 4)
    path = str(tmp_path / "scene.nc")
    scene_dataset(generate_scene(grid.pixels, seed=1), grid).to_netcdf(path)
    out = str(tmp_path / "out.nc")
    run("soil-moisture", path, out, **QUIET)
    with xr.open_dataset(out) as ds:
        assert "crs" not in ds.variables and ds["mv"].dims == ("y", "x")
