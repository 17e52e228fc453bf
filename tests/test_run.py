"""``isokernel run``: NetCDF/Zarr through xarray, variables by name, CF
attributes, chunk failures with coordinates and no partial output, and a
Dask LocalCluster of two worker processes giving the single-process bits."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from isokernel.backends.parity import bit_identical
from isokernel.backends.platform import cpu_budget
from isokernel.cli import main
from isokernel.models.soil_moisture import Grid, generate_scene, retrieve, scene_inputs
from isokernel.scenes import ChunkError, parse_chunks, run, scene_dataset
from isokernel.scenes.runner import local_threads

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")

GRID = Grid(48 * 64, 64)  # 48 rows × 64 columns


@pytest.fixture(scope="module")
def scene():
    return generate_scene(GRID.pixels, seed=4)


@pytest.fixture(scope="module")
def scene_nc(tmp_path_factory, scene):
    path = str(tmp_path_factory.mktemp("run") / "scene.nc")
    ds = scene_dataset(scene, GRID)
    ds.to_netcdf(path, encoding={v: {"chunksizes": (16, 64)} for v in ds.data_vars})
    return path


def _bits(path):
    with xr.open_dataset(path) as ds:
        return {name: ds[name].values.copy() for name in ds.data_vars}


def _leftovers(folder) -> list[str]:
    return [f for f in os.listdir(folder) if ".partial-" in f]


def test_single_process_run_equals_the_retrieval_with_cf_attributes(tmp_path, scene_nc, scene):
    out = str(tmp_path / "out.nc")
    summary = run("soil-moisture", scene_nc, out, chunks={"y": 16}, progress=False,
                  echo=lambda *_: None, strategy="reference")
    assert summary["chunks"] == 3 and summary["outputs"] == ["mv", "eps_re", "vwc"]
    want = retrieve(*scene_inputs(scene))
    with xr.open_dataset(out) as ds:
        assert bit_identical(ds["mv"].values.ravel(), want["mv"])
        assert ds["mv"].attrs["units"] == "m3 m-3"
        assert ds["mv"].attrs["standard_name"] == "volume_fraction_of_condensed_water_in_soil"
        assert "long_name" in ds["eps_re"].attrs and ds["vwc"].attrs["units"] == "kg m-2"
        for name in ("eps_re", "vwc"):  # no standard name, and none taken from an input
            assert set(ds[name].attrs) == {"units", "long_name"}, ds[name].attrs
        assert ds.attrs["Conventions"].startswith("CF-") and list(ds["mv"].dims) == ["y", "x"]
        assert np.array_equal(ds["x"].values, np.arange(64))


def test_dask_local_cluster_with_two_workers_gives_the_single_process_bits(tmp_path,
                                                                          scene_nc):
    single, multi = str(tmp_path / "single.nc"), str(tmp_path / "multi.nc")
    run("soil-moisture", scene_nc, single, chunks={"y": 16}, progress=False,
        echo=lambda *_: None)
    summary = run("soil-moisture", scene_nc, multi, chunks={"y": 16}, dask_address="local",
                  workers=2, progress=False, echo=lambda *_: None)
    assert len(summary["strategies"]) == 2  # two worker processes answered
    with open(summary["run_manifest"], encoding="utf-8") as f:
        workers = json.load(f)["workers"]
    share = local_threads(cpu_budget().value, 2)  # the CPUs split between the two
    assert [w["threads"] for w in workers.values()] == [share, share]
    a, b = _bits(single), _bits(multi)
    assert set(a) == set(b) == {"mv", "eps_re", "vwc"}
    for name in a:
        assert bit_identical(a[name], b[name]), name
    assert not _leftovers(tmp_path)


def test_a_local_cluster_splits_the_cpus_between_its_workers():
    assert [local_threads(2, n) for n in (1, 2, 3)] == [2, 1, 1]
    assert [local_threads(16, n) for n in (1, 4, 5, 16, 32)] == [16, 4, 3, 1, 1]


def test_variables_are_mapped_by_name(tmp_path, scene_nc):
    renamed = str(tmp_path / "renamed.nc")
    with xr.open_dataset(scene_nc) as ds:
        ds.rename({"tbv": "TB_V_obs", "ts": "T_eff"}).to_netcdf(renamed)
    with pytest.raises(ValueError, match="--var tbv=VARIABLE"):
        run("soil-moisture", renamed, str(tmp_path / "x.nc"), progress=False)
    out = str(tmp_path / "mapped.nc")
    run("soil-moisture", renamed, out, ["tbv=TB_V_obs", "ts=T_eff"], progress=False,
        echo=lambda *_: None)
    direct = str(tmp_path / "direct.nc")
    run("soil-moisture", scene_nc, direct, progress=False, echo=lambda *_: None)
    assert bit_identical(_bits(out)["mv"], _bits(direct)["mv"])


FAILING_MODEL = '''
import isokernel.numpy as inp

def half(x):
    if x.shape[0] == 16 * 64:   # static shapes: this fails for the last chunk only
        raise ValueError("this chunk is cursed")
    return {"half": x * 0.5}
'''


def test_a_failed_chunk_names_its_coordinates_and_leaves_no_output(tmp_path, scene_nc):
    model = tmp_path / "model.py"
    model.write_text(FAILING_MODEL)
    out = tmp_path / "out.nc"
    with pytest.raises(ChunkError) as info:
        run(f"{model}:half", scene_nc, str(out), ["x=tbv"], chunks={"y": 32},
            progress=False)
    message = str(info.value)
    assert "y[32:48]" in message and "x[0:64]" in message and "cursed" in message
    assert "y = 32 … 47" in message
    assert not out.exists() and not _leftovers(tmp_path)


def test_zarr_in_and_out_match_netcdf(tmp_path, scene_nc):
    store = str(tmp_path / "scene.zarr")
    with xr.open_dataset(scene_nc) as ds:
        ds.to_zarr(store, mode="w", consolidated=False)
    out_zarr, out_nc = str(tmp_path / "out.zarr"), str(tmp_path / "out.nc")
    run("soil-moisture", store, out_zarr, progress=False, echo=lambda *_: None)
    run("soil-moisture", scene_nc, out_nc, progress=False, echo=lambda *_: None)
    with xr.open_zarr(out_zarr, consolidated=False) as z:
        assert bit_identical(z["mv"].values, _bits(out_nc)["mv"])
        assert z["mv"].attrs["units"] == "m3 m-3"


def test_forward_model_reproduces_the_scene_observations(tmp_path, scene, scene_nc):
    clean = generate_scene(GRID.pixels, seed=4, noise=False)
    out = str(tmp_path / "obs.nc")
    run("soil-moisture-forward", scene_nc, out, progress=False, echo=lambda *_: None,
        strategy="reference")
    got = _bits(out)
    for name in ("tbv", "tbh", "sigma0_hh"):
        assert bit_identical(got[name].ravel(), clean[name]), name


def test_cli_run_and_its_errors(tmp_path, scene_nc, capsys):
    out = tmp_path / "cli.nc"
    assert main(["run", "soil-moisture", scene_nc, str(out), "--chunks", "y=24",
                 "--no-progress"]) == 0
    assert "wrote" in capsys.readouterr().out and out.exists()
    assert main(["run", "nothing", scene_nc, str(tmp_path / "n.nc")]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["run", "soil-moisture", str(tmp_path / "missing.nc"), "o.nc"]) == 2
    assert "no such input" in capsys.readouterr().err


def test_parse_chunks():
    assert parse_chunks("y=512,x=256") == {"y": 512, "x": 256}
    assert parse_chunks(None) is None
    with pytest.raises(ValueError, match="DIM=SIZE"):
        parse_chunks("y=big")


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_a_chunk_read_without_dask_is_what_apply_ufunc_hands_run_chunk(tmp_path, scene, suffix,
                                                                        monkeypatch):
    """``run`` reads a chunk's inputs from the data set opened without dask
    (``ChunkArguments.read``, here or on a worker); its blocks must be bit for
    bit those ``xarray.apply_ufunc`` gives ``run_chunk`` over the lazy inputs:
    a unit converted (ts in °C), a float32 variable cast to float64, a variable
    without the x dimension broadcast along it, the dims' indices and
    coordinates."""
    from isokernel.scenes import datasets
    from isokernel.scenes.catalog import resolve_model
    from isokernel.scenes.chunk_store import block_index, layout, region
    ds = scene_dataset(scene, GRID)
    ds["ts"] = (ds["ts"] - 273.15).assign_attrs(units="degC")
    ds["ndvi"] = ds["ndvi"].astype(np.float32)
    ds["clay"] = ds["clay"].isel(x=0)  # (y,): repeated along x
    path = str(tmp_path / f"scene{suffix}")
    ds.to_zarr(path, consolidated=False) if suffix == ".zarr" else ds.to_netcdf(path)
    handed: list = []

    def recording(*blocks, **kwargs):
        handed.append(blocks)
        return real(*blocks, **kwargs)
    real = datasets.run_chunk
    monkeypatch.setattr(datasets, "run_chunk", recording)
    model = resolve_model("soil-moisture")
    lazy = datasets.open_input(path)
    try:
        template, results, arguments = datasets.lazy_results(
            lazy, model, (), {"y": 8, "x": 40}, "float64", path, lambda *_: None, "reference",
            "read-test")
        assert arguments.portable
        chunks = layout(template)
        count = len(chunks["chunks"][0]) * len(chunks["chunks"][1])
        for k in range(count):
            index = block_index(chunks["chunks"], k)
            handed.clear()
            results["mv"].data.blocks[index].compute(scheduler="synchronous")
            [want] = handed
            got = arguments.read(region(chunks["dims"], chunks["chunks"], index))
            assert len(got) == len(want) == len(model.inputs) + 4
            for a, b in zip(want, got):
                assert a.shape == b.shape and a.dtype == b.dtype
                assert bit_identical(np.asarray(a), b)
    finally:
        datasets.release(path, "read-test")
        lazy.close()
