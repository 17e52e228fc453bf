"""``isokernel run`` chunk by chunk: the writer holds one chunk's outputs at
a time however many chunks there are, and a run killed with SIGKILL is
resumed (``--resume``) into the bits of a run that was never stopped; a
resume of a finished run is a note, of another run a one-line refusal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import weakref

import numpy as np
import pytest

from isokernel.cli import main
from isokernel.models.soil_moisture import Grid, generate_scene
from isokernel.scenes import chunk_store, run, run_manifest_path, scene_dataset
from isokernel.scenes import datasets as datasets_module

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")

GRID = Grid(16 * 16, 16)  # 16 rows × 16 columns
QUIET = {"progress": False, "echo": lambda *_: None, "strategy": "reference"}


@pytest.fixture(autouse=True)
def pinned_code(monkeypatch):
    """The digest of isokernel's sources pinned, here and in the killed
    child, so that an edit of a source file during the tests changes
    nothing (a changed digest is refused like any other field)."""
    monkeypatch.setattr(chunk_store, "_CODE", ["pinned"])


@pytest.fixture(scope="module")
def scene():
    return generate_scene(GRID.pixels, seed=5)


@pytest.fixture
def scene_nc(tmp_path, scene):
    path = tmp_path / "scene.nc"
    scene_dataset(scene, GRID).to_netcdf(path)
    return path


def _values(path) -> dict[str, bytes]:
    zarr = str(path).endswith(".zarr")
    with (xr.open_zarr(path, consolidated=False) if zarr else xr.open_dataset(path)) as ds:
        return {name: ds[name].values.tobytes() for name in ds.data_vars}


def _base(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


@pytest.mark.parametrize("rows", [1, 8])
def test_the_writer_holds_one_chunks_outputs_at_a_time(tmp_path, scene_nc, monkeypatch, rows):
    """When a chunk starts, the outputs of at most one earlier chunk are
    held (the one the writer thread writes meanwhile), for 16 chunks as
    for 2: memory does not grow with the number of chunks."""
    live, most, calls = set(), [0], []  # live: (chunk, buffer) of every output still held

    def counted(*blocks, **kwargs):
        chunks_held = {chunk for chunk, _ in live}  # earlier chunks with an output still held
        most[0] = max(most[0], len(chunks_held))
        calls.append(1)
        result = original(*blocks, **kwargs)
        for array in result if isinstance(result, tuple) else (result,):
            key = (len(calls), id(_base(array)))
            live.add(key)
            weakref.finalize(_base(array), live.discard, key)
        return result

    original = datasets_module.run_chunk
    monkeypatch.setattr(datasets_module, "run_chunk", counted)
    summary = run("soil-moisture", str(scene_nc), str(tmp_path / "out.nc"),
                  chunks={"y": rows}, **QUIET)
    assert summary["chunks"] == 16 // rows
    assert len(calls) == 16 // rows  # each chunk once
    assert most[0] <= 1, most


KILLED_RUN = """
import sys, time
from isokernel.cli import main
from isokernel.scenes import chunk_store
pause_after, add = int(sys.argv[1]), chunk_store.DoneLog.add
chunk_store._CODE[:] = ["pinned"]
def paused(self, index):
    add(self, index)
    paused.count += 1
    if paused.count == pause_after:
        print("paused", flush=True)
        time.sleep(600)
paused.count = 0
chunk_store.DoneLog.add = paused
sys.exit(main(sys.argv[2:]))
"""


def _killed_run(scene_nc, out, after: int) -> str:
    """Run in a child that stops after ``after`` chunks are recorded done;
    kill it with SIGKILL once its chunk store records the input's checksum.
    Returns the chunk store it left."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(after), "run",
                             "soil-moisture", str(scene_nc), str(out), "--chunks", "y=2",
                             "--no-progress", "--strategy", "reference"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "paused", proc.stderr.read()
        store = chunk_store.store_path(str(out), proc.pid)
        deadline = time.monotonic() + 60  # a guard against hanging, not a synchronisation
        while chunk_store.read_header(store)["checksum"] is None:
            assert time.monotonic() < deadline, "the input's checksum was never recorded"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert chunk_store.read_done(store) == set(range(after))
    return store


def test_a_run_killed_with_sigkill_resumes_into_the_uninterrupted_bits(tmp_path, scene_nc):
    out, full = tmp_path / "out.nc", tmp_path / "full.nc"
    store = _killed_run(scene_nc, out, after=3)
    assert not out.exists()
    run("soil-moisture", str(scene_nc), str(full), chunks={"y": 2}, **QUIET)
    lines = []
    summary = run("soil-moisture", str(scene_nc), str(out), chunks={"y": 2}, resume=True,
                  progress=False, echo=lines.append, strategy="reference")
    assert any(line.startswith(f"note: resuming {out}: 3 of 8 chunks") for line in lines)
    assert summary["chunks"] == 8 and summary["computed"] == 5
    got, want = _values(out), _values(full)
    assert sorted(got) == ["eps_re", "mv", "vwc"] and got == want
    record = json.loads(open(run_manifest_path(str(out))).read())
    assert record["resume"]["chunks_done_before"] == 3
    assert record["resume"]["resumed_from"]["pid"] == int(store.rsplit("-", 1)[1])
    assert record["workers"]["this process"]["chunks"] == 5
    with xr.open_dataset(out) as ds:
        assert json.loads(ds.attrs["isokernel_manifest"])["run"] == record["run"]
    assert not os.path.exists(store) and not chunk_store.stores_of(str(out))


def test_resuming_a_finished_or_another_run_is_a_note_or_one_line(tmp_path, scene_nc, capsys):
    """A Zarr output: resumed into the uninterrupted bits; resumed again, a
    note; another run's chunks (other options, a changed input) refused in
    one line; a run without --resume starts over."""
    out, full = tmp_path / "out.zarr", tmp_path / "full.zarr"
    store = _killed_run(scene_nc, out, after=2)
    kept = shutil.copytree(store, tmp_path / "kept")
    base = ["run", "soil-moisture", str(scene_nc), str(out), "--chunks", "y=2",
            "--no-progress", "--strategy", "reference", "--resume"]
    assert main(base) == 0
    assert "note: resuming" in capsys.readouterr().out
    run("soil-moisture", str(scene_nc), str(full), chunks={"y": 2}, **QUIET)
    first = _values(out)
    assert first == _values(full)
    # finished: a note, nothing computed, nothing replaced
    assert main(base) == 0
    said = capsys.readouterr().out
    assert f"note: {out} is complete" in said and "wrote" not in said
    assert _values(out) == first
    # another run's chunks: other options, then another input
    shutil.copytree(kept, store)
    assert main([*base, "--dtype", "float32", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot resume" in err and "dtype" in err
    with xr.open_dataset(scene_nc) as ds:
        changed = ds.load()
    changed["tbv"] = changed["tbv"] + 1.0
    changed.to_netcdf(scene_nc)
    assert main([*base, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "changed" in err and "xxh3-128" in err
    assert os.path.isdir(store)  # refused: left as it was
    # without --resume the run starts over, removing the interrupted run's chunks
    assert main([*base[:-1], "--overwrite"]) == 0
    assert f"removed {store}, 2 chunks of an interrupted run" in capsys.readouterr().out
    assert not os.path.exists(store) and _values(out) != first


def test_a_resume_with_nothing_to_resume_runs_from_the_first_chunk(tmp_path, scene_nc):
    lines = []
    summary = run("soil-moisture", str(scene_nc), str(tmp_path / "o.zarr"), resume=True,
                  progress=False, echo=lines.append, strategy="reference")
    assert summary["computed"] == summary["chunks"]
    assert lines[0].startswith("note: no interrupted run of")


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_a_coordinate_read_lazily_is_written_with_the_outputs(tmp_path, scene, suffix):
    """A 2-D coordinate of a Zarr input, stored in other chunks than the run's,
    is written chunk by chunk into the chunk store and reaches either format."""
    ds = scene_dataset(scene, GRID)
    lat = np.arange(GRID.pixels, dtype=np.float64).reshape(16, 16)
    ds.assign_coords(lat=(("y", "x"), lat)).to_zarr(tmp_path / "in.zarr", consolidated=False)
    out = tmp_path / f"out{suffix}"
    run("soil-moisture", str(tmp_path / "in.zarr"), str(out), chunks={"y": 4}, **QUIET)
    with (xr.open_zarr(out, consolidated=False) if suffix == ".zarr"
          else xr.open_dataset(out)) as got:
        assert got["lat"].values.tobytes() == lat.tobytes() and "lat" in got.coords
