"""``isokernel run`` and the CLI under hostile input: nothing it did not
write is ever deleted or overwritten, interrupted runs leave no temporary
behind, and nonsense input is refused with one line instead of a
traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from isokernel import __version__
from isokernel.cli import main
from isokernel.models import run as run_module
from isokernel.models.run import run, scene_dataset, write_scene
from isokernel.models.soil_moisture import Grid, generate_scene

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")

GRID = Grid(8 * 16, 16)  # 8 rows × 16 columns
QUIET = {"progress": False, "echo": lambda *_: None, "strategy": "reference"}


@pytest.fixture(scope="module")
def scene():
    return generate_scene(GRID.pixels, seed=7)


@pytest.fixture
def scene_nc(tmp_path, scene):
    path = tmp_path / "scene.nc"
    scene_dataset(scene, GRID).to_netcdf(path)
    return path


def _cli(argv, capsys) -> tuple[int, str]:
    code = main(["run", *argv, "--no-progress", "--strategy", "reference"])
    return code, capsys.readouterr().err


def _one_line(err: str, command: str = "run") -> bool:
    return err.startswith(f"isokernel {command}: ") and err.strip().count("\n") == 0 and \
        "Traceback" not in err


def _leftovers(folder) -> list[str]:
    return [f for f in os.listdir(folder) if ".partial-" in f or ".replaced-" in f]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _manifest(path) -> dict:
    zarr = str(path).endswith(".zarr")
    with (xr.open_zarr(path, consolidated=False) if zarr else xr.open_dataset(path)) as ds:
        return json.loads(ds.attrs["isokernel_manifest"])


# ------------------------------------------------------------------ 1. no data loss


def test_an_existing_folder_is_refused_and_keeps_its_files(tmp_path, scene_nc, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "thesis.txt").write_text("four years")
    for extra in ([], ["--overwrite"]):
        code, err = _cli(["soil-moisture", str(scene_nc), f"{results}/", *extra], capsys)
        assert code == 2 and _one_line(err) and str(results) in err
        assert "not written by isokernel" in err
    assert (results / "thesis.txt").read_text() == "four years"


def test_the_working_directory_as_output_is_refused(tmp_path, scene_nc, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("keep me")
    code, err = _cli(["soil-moisture", "scene.nc", ".", "--overwrite"], capsys)
    assert code == 2 and _one_line(err)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "scene.nc"]


def test_the_input_is_never_the_output(tmp_path, scene_nc, capsys):
    before = scene_nc.read_bytes()
    for extra in ([], ["--overwrite"]):
        code, err = _cli(["soil-moisture", str(scene_nc), str(scene_nc), *extra], capsys)
        assert code == 2 and _one_line(err) and "is the input" in err
    link = tmp_path / "alias.nc"
    os.link(scene_nc, link)
    code, err = _cli(["soil-moisture", str(scene_nc), str(link), "--overwrite"], capsys)
    assert code == 2 and "is the input" in err
    store = tmp_path / "scene.zarr"
    with xr.open_dataset(scene_nc) as ds:
        ds.to_zarr(store, consolidated=False)
    code, err = _cli(["soil-moisture", str(store), str(store / "out.nc")], capsys)
    assert code == 2 and "inside the input" in err
    assert scene_nc.read_bytes() == before and not (store / "out.nc").exists()


def test_an_existing_output_needs_overwrite_and_must_be_isokernels(tmp_path, scene_nc):
    out = tmp_path / "out.nc"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    manifest = _manifest(out)
    assert manifest["model"] == "soil-moisture" and manifest["isokernel"] == __version__
    assert manifest["input"] == str(scene_nc) and manifest["utc"].endswith("Z")
    with pytest.raises(FileExistsError, match="--overwrite"):
        run("soil-moisture", str(scene_nc), str(out), **QUIET)
    run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    foreign = tmp_path / "foreign.nc"
    with xr.open_dataset(scene_nc) as ds:
        ds.to_netcdf(foreign)
    before = foreign.read_bytes()
    with pytest.raises(FileExistsError, match="not written by isokernel"):
        run("soil-moisture", str(scene_nc), str(foreign), overwrite=True, **QUIET)
    assert foreign.read_bytes() == before and not _leftovers(tmp_path)
    derived = tmp_path / "derived.nc"  # another tool's product keeps the global attributes
    with xr.open_dataset(out) as ds:
        ds[["mv"]].assign(anomaly=ds["mv"] - ds["mv"].mean()).to_netcdf(derived)
    with pytest.raises(FileExistsError, match="variables differ"):
        run("soil-moisture", str(scene_nc), str(derived), overwrite=True, **QUIET)


def test_a_zarr_store_is_swapped_with_the_old_one_aside(tmp_path, scene_nc, monkeypatch):
    out = tmp_path / "out.zarr"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    first = _manifest(out)["utc"]
    rename = os.rename

    def failing_move_in(src, dst):
        if ".partial-" in str(src):
            assert any(".replaced-" in f for f in os.listdir(tmp_path)) and not out.exists()
            raise OSError("disk vanished")
        rename(src, dst)

    monkeypatch.setattr(os, "rename", failing_move_in)
    with pytest.raises(OSError, match="disk vanished"):
        run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    monkeypatch.setattr(os, "rename", rename)
    assert _manifest(out)["utc"] == first and not _leftovers(tmp_path)
    time.sleep(1.1)  # the manifest's time has one-second resolution
    run("soil-moisture", str(scene_nc), str(out), overwrite=True, **QUIET)
    assert _manifest(out)["utc"] != first and not _leftovers(tmp_path)


def test_write_scene_replaces_its_own_scene_and_refuses_anything_else(tmp_path, scene):
    path = tmp_path / "scene.nc"
    write_scene(str(path), scene, GRID)
    write_scene(str(path), scene, GRID)  # `make demo` reruns it: no flag needed
    assert _manifest(path)["isokernel"] == __version__
    retrieved = tmp_path / "retrieved.nc"
    run("soil-moisture", str(path), str(retrieved), **QUIET)
    with pytest.raises(FileExistsError, match="not a synthetic scene"):
        write_scene(str(retrieved), scene, GRID)
    assert _manifest(retrieved)["model"] == "soil-moisture"
    folder = tmp_path / "scene.zarr"
    folder.mkdir()
    (folder / "data.csv").write_text("1,2,3")
    with pytest.raises(FileExistsError, match="not written by isokernel"):
        write_scene(str(folder), scene, GRID)
    assert (folder / "data.csv").read_text() == "1,2,3" and not _leftovers(tmp_path)


# ------------------------------------------------------------------ 2. temporaries


def _partial_writer(ds, path, client, progress):
    with open(path, "wb") as f:
        f.write(b"half a file")
    raise KeyboardInterrupt


def test_an_interrupted_cli_run_exits_130_and_leaves_no_temporary(tmp_path, scene_nc, capsys,
                                                                  monkeypatch):
    monkeypatch.setattr(run_module, "_write", _partial_writer)
    try:
        code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "out.nc")], capsys)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped the CLI")
    assert code == 130 and err == "isokernel run: interrupted\n"
    assert not _leftovers(tmp_path) and not (tmp_path / "out.nc").exists()


class _StillWritingClient:
    """A cluster whose workers keep writing chunks of the store until the
    client has closed, as Dask workers do after the caller is interrupted."""

    def __init__(self):
        self.stop = threading.Event()
        self.thread = None

    def write_until_closed(self, store: str) -> None:
        def chunks():
            i = 0
            while not self.stop.is_set():
                os.makedirs(os.path.join(store, "mv"), exist_ok=True)
                with open(os.path.join(store, "mv", str(i)), "wb") as f:
                    f.write(b"chunk")
                i += 1
                time.sleep(0.002)
        self.thread = threading.Thread(target=chunks)
        self.thread.start()

    def run(self, fn, *args):
        return {"worker": "reference"}

    def close(self):
        time.sleep(0.2)  # shutting a cluster down takes a while
        self.stop.set()
        self.thread.join()


def test_an_interrupt_waits_for_the_workers_before_removing_the_store(tmp_path, scene_nc,
                                                                       monkeypatch):
    client = _StillWritingClient()

    def interrupted(ds, path, client_, progress):
        client.write_until_closed(path)
        time.sleep(0.02)
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "open_client", lambda *_: client)
    monkeypatch.setattr(run_module, "_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run("soil-moisture", str(scene_nc), str(tmp_path / "out.zarr"), dask_address="tcp://x",
            **QUIET)
    assert not _leftovers(tmp_path)


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path, scene_nc):
    dead = _dead_pid()
    stale_file = tmp_path / f".old.partial-{dead}.nc"
    stale_file.write_bytes(b"half")
    stale_store = tmp_path / f".other.partial-{dead}.zarr"
    (stale_store / "mv").mkdir(parents=True)
    alive = tmp_path / f".busy.partial-{os.getppid()}.nc"
    alive.write_bytes(b"being written")
    foreign = tmp_path / f".theirs.partial-{dead}.nc"
    foreign.write_bytes(b"another user's")
    os.chown(foreign, 12345, 12345)
    unrelated = tmp_path / ".draft.partial.txt"
    unrelated.write_text("mine")
    run("soil-moisture", str(scene_nc), str(tmp_path / "out.nc"), **QUIET)
    assert not stale_file.exists() and not stale_store.exists()
    assert alive.exists() and foreign.exists() and unrelated.exists()


def test_a_store_set_aside_by_a_killed_swap_is_restored(tmp_path, scene_nc):
    out = tmp_path / "out.zarr"
    run("soil-moisture", str(scene_nc), str(out), **QUIET)
    aside = tmp_path / f".out.replaced-{_dead_pid()}.zarr"
    os.rename(out, aside)  # killed after setting the old store aside
    with pytest.raises(FileExistsError, match="--overwrite"):
        run("soil-moisture", str(scene_nc), str(out), **QUIET)
    assert out.exists() and not aside.exists() and _manifest(out)["model"] == "soil-moisture"


# ------------------------------------------------------------------ 3. one-line refusals


@pytest.mark.parametrize("spec,message", [
    ("y=0", "greater than 0"), ("y=-3", "greater than 0"), ("-3", "DIM=SIZE"),
    ("q=5", "dimensions of the inputs are y, x"),
])
def test_bad_chunks_are_refused_in_one_line(tmp_path, scene_nc, capsys, spec, message):
    code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "o.nc"),
                      f"--chunks={spec}"], capsys)
    assert code == 2 and _one_line(err) and message in err
    assert not (tmp_path / "o.nc").exists()


def test_an_unreachable_dask_address_fails_fast_naming_it(tmp_path, scene_nc, capsys):
    start = time.perf_counter()
    code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "o.nc"), "--dask",
                      "tcp://127.0.0.1:1"], capsys)
    assert time.perf_counter() - start < 15
    assert code == 2 and _one_line(err) and "tcp://127.0.0.1:1" in err
    assert not _leftovers(tmp_path)


def test_a_missing_output_folder_is_named_before_any_computing(tmp_path, scene_nc, capsys,
                                                               monkeypatch):
    def no_compute(*args, **kwargs):
        raise AssertionError("computed before checking the output folder")

    monkeypatch.setattr(run_module, "_compute", no_compute)
    folder = tmp_path / "missing" / "deeper"
    code, err = _cli(["soil-moisture", str(scene_nc), str(folder / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and f"output folder {folder} does not exist" in err
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    code, err = _cli(["soil-moisture", str(scene_nc), str(a_file / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and f"output folder {a_file} is not a folder" in err


def test_an_unwritable_output_folder_is_named_not_the_temporary(tmp_path, scene_nc, capsys,
                                                                monkeypatch):
    folder = tmp_path / "readonly"
    folder.mkdir()

    def denied(self, path=None, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(xr.Dataset, "to_netcdf", denied)
    code, err = _cli(["soil-moisture", str(scene_nc), str(folder / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and f"output folder {folder}" in err
    assert ".partial-" not in err and "Permission denied" in err


def test_a_zero_length_dimension_is_refused_naming_it(tmp_path, scene_nc, capsys):
    store = tmp_path / "empty.zarr"
    with xr.open_dataset(scene_nc) as ds:
        ds.isel(y=slice(0, 0)).to_zarr(store, consolidated=False)
    code, err = _cli(["soil-moisture", str(store), str(tmp_path / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and "dimension 'y' has length 0" in err


def test_an_extra_dimension_of_one_variable_is_announced(tmp_path, scene_nc):
    extra = tmp_path / "extra.nc"
    with xr.open_dataset(scene_nc) as ds:
        ds = ds.load()
    ds["tbv"] = ds["tbv"].expand_dims(t=3)
    ds.to_netcdf(extra)
    lines = []
    run("soil-moisture", str(extra), str(tmp_path / "o.nc"), progress=False,
        echo=lines.append, strategy="reference")
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1 and "'tbv'" in notes[0] and "(t: 3, y: 8, x: 16)" in notes[0]
    with xr.open_dataset(tmp_path / "o.nc") as out:
        assert dict(out["mv"].sizes) == {"t": 3, "y": 8, "x": 16}


@pytest.mark.parametrize("argv,option", [
    (["--repeats", "0"], "--repeats"), (["--pixels", "0"], "--pixels"),
    (["--chunks", "0"], "--chunks"), (["--chunks", "-2"], "--chunks"),
])
def test_demo_counts_must_be_at_least_one(argv, option, capsys, tmp_path):
    code = main(["demo", "--pixels", "500", "--no-figure", "--save-scene",
                 str(tmp_path / "s.nc"), *argv])
    captured = capsys.readouterr()
    assert code == 2 and _one_line(captured.err, "demo") and option in captured.err
    assert "at least 1" in captured.err and captured.out == ""


def test_workers_must_be_at_least_one(tmp_path, scene_nc, capsys):
    code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "o.nc"), "--dask",
                      "local", "--workers", "0"], capsys)
    assert code == 2 and _one_line(err) and "--workers" in err and "at least 1" in err
    assert not (tmp_path / "o.nc").exists()
