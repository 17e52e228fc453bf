"""``isokernel run``'s run manifest (``OUTPUT.manifest.json``) and its
per-worker progress: what the manifest records is checked against
independent computations (xxhash and hashlib over the input's bytes, the kernels
compiled again here), it is replaced together with its output and never
left mismatched, and the progress lines on a cluster name the workers."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from isokernel import __version__
from isokernel.cli import main
from isokernel.models.soil_moisture import RETRIEVAL_INPUTS, Grid, generate_scene, retrieve
from isokernel.pipeline import jit
from isokernel.scenes import (
    ChunkError,
    read_run_manifest,
    run,
    run_manifest_path,
    scene_dataset,
)
from isokernel.scenes import outputs as outputs_module
from isokernel.scenes import run_manifest as manifest_module
from isokernel.scenes import runner as run_module

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
xxhash = pytest.importorskip("xxhash")

GRID = Grid(8 * 16, 16)  # 8 rows × 16 columns
QUIET = {"progress": False, "echo": lambda *_: None, "strategy": "reference"}
PROVENANCE = re.compile(r" +# .*$", re.MULTILINE)


@pytest.fixture(scope="module")
def scene():
    return generate_scene(GRID.pixels, seed=11)


@pytest.fixture
def scene_nc(tmp_path, scene):
    path = tmp_path / "scene.nc"
    scene_dataset(scene, GRID).to_netcdf(path)
    return path


@pytest.fixture(scope="module")
def written(tmp_path_factory, scene):
    """One single-process run of the retrieval in 2 chunks: (input, output,
    summary, manifest)."""
    folder = tmp_path_factory.mktemp("manifest")
    source, out = folder / "scene.nc", folder / "out.nc"
    scene_dataset(scene, GRID).to_netcdf(source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_module, "HASH_BLOCK", 1000)  # many blocks, even for this file
        summary = run("soil-moisture", str(source), str(out), chunks={"y": 4}, **QUIET)
    return source, out, summary, _manifest(out)


def _manifest(output) -> dict:
    with open(run_manifest_path(str(output)), encoding="utf-8") as f:
        return json.load(f)


def _attribute(path) -> dict:
    zarr = str(path).endswith(".zarr")
    with (xr.open_zarr(path, consolidated=False) if zarr else xr.open_dataset(path)) as ds:
        return json.loads(ds.attrs["isokernel_manifest"])


def _leftovers(folder) -> list[str]:
    return [f for f in os.listdir(folder) if ".partial-" in f or ".replaced-" in f]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _graph_sha256(fn, arrays) -> str:
    """The documented kernel digest, computed here from a fresh compile."""
    compiled = jit(fn, strategy="reference").lower(*arrays).compile()
    return hashlib.sha256(PROVENANCE.sub("", str(compiled.graph)).encode()).hexdigest()


# ------------------------------------------------------------------ what it records


def test_the_manifest_lies_beside_the_output_with_the_inputs_checksum(written):
    source, out, summary, record = written
    assert summary["run_manifest"] == f"{out}.manifest.json"
    assert os.path.isfile(f"{out}.manifest.json")
    data = source.read_bytes()
    checksum = record["input"]["checksum"]  # the default, XXH3-128 (xxhsum -H2), in 1000-byte reads
    assert checksum["algorithm"] == "xxh3-128"
    assert checksum["digest"] == xxhash.xxh3_128(data).hexdigest()
    assert checksum["bytes"] == len(data) and checksum["files"] == 1
    assert record["input"]["path"] == str(source)
    assert record["run"] == _attribute(out)["run"] and len(record["run"]) == 32
    assert record["output"]["attribute"] == _attribute(out)


def test_the_manifest_lists_each_input_and_output_variable(written):
    source, out, _, record = written
    with xr.open_dataset(source) as ds:
        # the file's units attribute, and the model's unit of each quantity (none converted)
        model_units = {"tbv": "K", "ndvi": "1", "ndvi_max": "1", "ndvi_min": "1", "ts": "K",
                       "clay": "1", "bulk_density": "g cm-3"}
        want = [{"input": name, "name": name, "dims": ["y", "x"], "shape": [8, 16],
                 "dtype": str(ds[name].dtype), "units": ds[name].attrs["units"],
                 "computed_as": "int32" if name == "landcover" else "float64",
                 **({"model_units": model_units[name], "converted": False}
                    if name in model_units else {})}
                for name in RETRIEVAL_INPUTS]
    assert record["input"]["variables"] == want
    with xr.open_dataset(out) as ds:
        got = {v["name"]: (v["shape"], v["dtype"]) for v in record["output"]["variables"]}
        assert got == {n: ([8, 16], str(ds[n].dtype)) for n in ("mv", "eps_re", "vwc")}


def test_the_manifest_records_kernels_numerics_strategy_chunks_and_versions(written, scene):
    _, _, summary, record = written
    assert record["model"]["name"] == "soil-moisture" and record["numerics"] == ["native"]
    assert record["strategy"] == {"requested": "reference",
                                  "per_worker": {"this process": "reference"}}
    assert record["chunks"] == {"requested": {"y": 4}, "count": 2,
                                "sizes": {"y": [[4, 2]], "x": [[16, 1]]}}
    [kernel] = record["kernels"]
    assert kernel["strategy"] == "reference" and kernel["numerics"] == "native"
    assert kernel["chunk_pixels"] == 64 and kernel["workers"] == ["this process"]
    chunk = [np.ascontiguousarray(scene[name][:64]) for name in RETRIEVAL_INPUTS]
    assert kernel["dtypes"] == [a.dtype.str for a in chunk]
    assert kernel["graph_sha256"] == _graph_sha256(retrieve, chunk)
    assert re.fullmatch(r"[0-9a-f]{64}", kernel["source_sha256"])
    [worker] = record["workers"].values()
    assert worker["chunks"] == 2 and worker["pixels"] == 128 and worker["pid"] == os.getpid()
    assert record["versions"]["isokernel"] == __version__
    assert record["versions"]["numpy"] == np.__version__
    assert record["started_utc"] <= record["finished_utc"] and record["wall_seconds"] > 0
    assert "isokernel run soil-moisture" in record["command"]
    assert "--chunks=y=4" in record["command"] and "--strategy reference" in record["command"]


@pytest.mark.parametrize("algorithm, new", [("xxh3-128", xxhash.xxh3_128),
                                            ("sha256", hashlib.sha256)])
def test_a_zarr_inputs_checksum_hashes_every_file_of_the_store_in_sorted_order(
        tmp_path, scene_nc, monkeypatch, algorithm, new):
    monkeypatch.setattr(manifest_module, "HASH_BLOCK", 100)
    store = tmp_path / "scene.zarr"
    with xr.open_dataset(scene_nc) as ds:
        ds.to_zarr(store, consolidated=False)
    run("soil-moisture", str(store), str(tmp_path / "out.nc"), checksum=algorithm, **QUIET)
    names = sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())
    listing = "".join(f"{new((store / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
    record = _manifest(tmp_path / "out.nc")
    checksum = record["input"]["checksum"]
    assert len(names) > 10 and checksum["files"] == len(names)
    assert checksum["algorithm"] == algorithm
    assert checksum["digest"] == new(listing.encode()).hexdigest()
    assert checksum["bytes"] == sum((store / n).stat().st_size for n in names)
    assert f"--checksum {algorithm}" in record["command"]


def test_an_unknown_checksum_is_refused_before_any_work(tmp_path, scene_nc):
    with pytest.raises(ValueError, match="unknown checksum 'md5'; choose one of xxh3-128, "
                                         "sha256"):
        run("soil-moisture", str(scene_nc), str(tmp_path / "out.nc"), checksum="md5", **QUIET)
    assert os.listdir(tmp_path) == ["scene.nc"]


MODELS = '''
import isokernel as ik
import isokernel.numpy as inp

def native(x):
    return {"e": inp.exp(x) * 0.5}

@ik.numerics("portable")
def portable(x):
    return {"e": inp.exp(x) * 0.5}
'''


def test_the_numerics_and_kernel_digest_are_those_of_the_model_that_ran(tmp_path, scene_nc):
    model = tmp_path / "models.py"
    model.write_text(MODELS)
    records = {}
    for name in ("native", "portable"):
        out = tmp_path / f"{name}.nc"
        run(f"{model}:{name}", str(scene_nc), str(out), ["x=ts"], **QUIET)
        records[name] = _manifest(out)
    assert records["native"]["numerics"] == ["native"]
    assert records["portable"]["numerics"] == ["portable"]
    digests = {n: r["kernels"][0]["graph_sha256"] for n, r in records.items()}
    assert digests["native"] != digests["portable"]
    import importlib.util
    spec = importlib.util.spec_from_file_location("models_again", model)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ts = [np.zeros(GRID.pixels)]
    assert digests == {n: _graph_sha256(getattr(module, n), ts) for n in digests}


# ------------------------------------------------------------------ never orphaned


def test_overwrite_replaces_the_output_and_its_manifest_together(tmp_path, scene_nc):
    out = tmp_path / "out.nc"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    path = run_manifest_path(str(out))
    first = open(path, "rb").read()
    with pytest.raises(FileExistsError, match="--overwrite"):
        run("soil-moisture", str(scene_nc), str(out), **QUIET)
    assert open(path, "rb").read() == first
    run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    again = _manifest(out)
    assert again["run"] != json.loads(first)["run"] and again["run"] == _attribute(out)["run"]
    assert sorted(os.listdir(tmp_path)) == ["out.nc", "out.nc.manifest.json", "scene.nc"]


def _interrupted_writer(ds, path, client, progress):
    if path.endswith(".zarr"):
        os.makedirs(os.path.join(path, "mv"))
    else:
        with open(path, "wb") as f:
            f.write(b"half a file")
    raise KeyboardInterrupt


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_an_interrupted_overwrite_keeps_the_old_output_and_manifest(tmp_path, scene_nc,
                                                                    monkeypatch, suffix):
    out = tmp_path / f"out{suffix}"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    before, manifest = _attribute(out), open(run_manifest_path(str(out)), "rb").read()
    monkeypatch.setattr(run_module, "_write", _interrupted_writer)
    with pytest.raises(KeyboardInterrupt):
        run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    assert _attribute(out) == before and not _leftovers(tmp_path)
    assert open(run_manifest_path(str(out)), "rb").read() == manifest


def test_a_failed_swap_of_a_store_keeps_the_old_pair(tmp_path, scene_nc, monkeypatch):
    out = tmp_path / "out.zarr"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    manifest = open(run_manifest_path(str(out)), "rb").read()
    rename = os.rename

    def failing_move_in(src, dst):
        if ".partial-" in str(src) and str(dst) == str(out):
            raise OSError("disk vanished")
        rename(src, dst)

    monkeypatch.setattr(os, "rename", failing_move_in)
    with pytest.raises(OSError, match="disk vanished"):
        run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    assert open(run_manifest_path(str(out)), "rb").read() == manifest
    assert _attribute(out)["run"] == json.loads(manifest)["run"] and not _leftovers(tmp_path)


def test_an_interrupt_right_after_the_output_moved_in_still_moves_its_manifest_in(
        tmp_path, scene_nc, monkeypatch):
    out = tmp_path / "out.nc"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    old = _manifest(out)["run"]
    place = outputs_module._place

    def interrupted_place(*args, **kwargs):
        place(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs_module, "_place", interrupted_place)
    with pytest.raises(KeyboardInterrupt):
        run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    new = _manifest(out)["run"]
    assert new != old and new == _attribute(out)["run"] and not _leftovers(tmp_path)


def test_a_manifest_left_by_a_killed_run_follows_its_output_or_goes(tmp_path, scene_nc):
    out = tmp_path / "out.nc"
    path = run_manifest_path(str(out))
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    old = open(path, "rb").read()
    run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    new = open(path, "rb").read()
    dead = _dead_pid()
    stale = tmp_path / f".out.nc.manifest.partial-{dead}.json"
    # killed after the new output moved in, before its manifest followed
    stale.write_bytes(new)
    open(path, "wb").write(old)
    lines = []
    run("soil-moisture", str(scene_nc), str(tmp_path / "other.nc"), progress=False,
        echo=lines.append, strategy="reference")
    assert open(path, "rb").read() == new and not stale.exists()
    assert any(line.startswith(f"completed {path}") for line in lines)
    # killed before its output moved in: the manifest describes nothing there
    stale.write_bytes(old)
    run("soil-moisture", str(scene_nc), str(tmp_path / "third.nc"), **QUIET)
    assert open(path, "rb").read() == new and not stale.exists()


def test_a_file_that_is_no_run_manifest_is_never_replaced(tmp_path, scene_nc):
    out = tmp_path / "out.nc"
    notes = tmp_path / "out.nc.manifest.json"
    notes.write_text('{"my": "notes"}')
    with pytest.raises(FileExistsError, match="not a run manifest isokernel wrote"):
        run("soil-moisture", str(scene_nc), str(out), **QUIET)
    assert notes.read_text() == '{"my": "notes"}' and not out.exists()
    assert read_run_manifest(str(notes)) is None


FAILING_MODEL = '''
def half(x):
    if x.shape[0] == 4 * 16:   # static shapes: this fails for the last chunk only
        raise ValueError("this chunk is cursed")
    return {"half": x * 0.5}
'''


def test_a_failed_run_writes_neither_output_nor_manifest(tmp_path, scene_nc):
    model = tmp_path / "model.py"
    model.write_text(FAILING_MODEL)
    with pytest.raises(ChunkError, match="cursed"):
        run(f"{model}:half", str(scene_nc), str(tmp_path / "o.nc"), ["x=tbv"],
            chunks={"y": 4}, **QUIET)
    assert sorted(os.listdir(tmp_path)) == ["model.py", "scene.nc"]


# ------------------------------------------------------------------ progress


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster
    local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=":0")
    yield local
    local.close()


def test_progress_on_a_cluster_names_each_worker_and_the_manifest_records_them(
        tmp_path, scene_nc, cluster, capsys):
    out = tmp_path / "out.nc"
    summary = run("soil-moisture", str(scene_nc), str(out), chunks={"y": 1},
                  dask_address=cluster.scheduler_address, progress=True,
                  echo=lambda *_: None, strategy="reference")
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("isokernel run: ")]
    workers = sorted(summary["strategies"])
    assert len(workers) == 2 and lines and lines[-1].startswith("isokernel run: done, 8/8 ")
    assert all("running" in line for line in lines[:-1])
    seconds = [float(re.search(r"chunks, ([0-9.]+) s \|", line)[1]) for line in lines]
    assert all(b - a >= 0.9 for a, b in zip(seconds[:-1], seconds[1:-1]))  # about 1 per s
    counts = {w: int(re.search(re.escape(w) + r" (\d+) chunks?", lines[-1])[1])
              for w in workers}
    assert sum(counts.values()) == 8 and "pixel/s" in lines[-1]
    record = _manifest(out)
    assert sorted(record["workers"]) == workers
    assert record["strategy"]["per_worker"] == summary["strategies"]
    assert {w: record["workers"][w]["chunks"] for w in workers} == counts
    assert os.getpid() not in [r["pid"] for r in record["workers"].values()]
    assert all(set(k["workers"]) <= set(workers) for k in record["kernels"])
    assert record["cluster"]["dask"] == cluster.scheduler_address
    run("soil-moisture", str(scene_nc), str(out), chunks={"y": 1}, overwrite=True,
        dask_address=cluster.scheduler_address, **QUIET)
    assert "isokernel run: " not in capsys.readouterr().err


def test_the_cli_progress_flags(tmp_path, scene_nc, capsys):
    base = ["run", "soil-moisture", str(scene_nc), str(tmp_path / "o.nc"), "--strategy",
            "reference"]
    assert main([*base, "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*base, "--progress", "--overwrite"]) == 0
    err = capsys.readouterr().err  # in this process too: one line a second and a final one
    assert err.startswith("isokernel run: ") and "done, 1/1 chunks" in err.splitlines()[-1]
    assert "this process 1 chunk " in err
    assert "--overwrite" in _manifest(tmp_path / "o.nc")["command"]

