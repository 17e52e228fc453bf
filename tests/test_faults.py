"""Fault injection: what a careful or a hostile user can do to isokernel,
and what happens instead of lost data, a crash, planted code or a silent
change of meaning. ``docs/reliability.md`` lists every case with its test.

Sections: ``isokernel run`` and the CLI; CPU calls (interrupts, worker
failures, bookkeeping, ``np.errstate`` on native); the kernel cache; NumPy
semantics, retraces and resources."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import __version__, codegen
from isokernel.backends import get_strategy, strategies
from isokernel.backends.cpu import loops, native, pool, threads
from isokernel.backends.parity import bit_identical
from isokernel.backends.platform import memory_budget
from isokernel.cli import main
from isokernel.codegen import cache, cuda, nvrtc
from isokernel.codegen import compiler as cc
from isokernel.codegen import driver as drv
from isokernel.deploy import BudgetError
from isokernel.ir import BackendUnavailableError, Op
from isokernel.models.soil_moisture import Grid, generate_scene
from isokernel.reports import devices_table
from isokernel.scenes import datasets as datasets_module
from isokernel.scenes import run, scene_dataset, write_scene
from isokernel.scenes import runner as run_module

from .conftest import nvrtc_or_skip

# ==== isokernel run and the CLI: no data lost, no traceback, no nonsense accepted ================
# Nothing isokernel did not write is deleted or overwritten, interrupted runs
# leave no temporary behind, nonsense input gets one line, not a traceback.

try:
    import dask  # noqa: F401
    import xarray as xr
    IO_MISSING = None
except ImportError as err:  # the io extra
    xr, IO_MISSING = None, str(err)
needs_io = pytest.mark.skipif(IO_MISSING is not None, reason=f"io extra: {IO_MISSING}")

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


@needs_io
def test_an_existing_folder_is_refused_and_keeps_its_files(tmp_path, scene_nc, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "thesis.txt").write_text("four years")
    for extra in ([], ["--overwrite"]):
        code, err = _cli(["soil-moisture", str(scene_nc), f"{results}/", *extra], capsys)
        assert code == 2 and _one_line(err) and str(results) in err
        assert "not written by isokernel" in err
    assert (results / "thesis.txt").read_text() == "four years"


@needs_io
def test_the_working_directory_as_output_is_refused(tmp_path, scene_nc, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("keep me")
    code, err = _cli(["soil-moisture", "scene.nc", ".", "--overwrite"], capsys)
    assert code == 2 and _one_line(err)
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "scene.nc"]


@needs_io
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


@needs_io
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


@needs_io
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


@needs_io
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


@needs_io
def test_an_interrupted_cli_run_exits_130_and_leaves_no_temporary(tmp_path, scene_nc, capsys,
                                                                  monkeypatch):
    monkeypatch.setattr(run_module, "_write", _partial_writer)
    try:
        code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "out.nc")], capsys)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped the CLI")
    assert code == 130 and err == "isokernel run: interrupted\n"
    assert not _leftovers(tmp_path) and not (tmp_path / "out.nc").exists()


SIGTERM_RUN = """
import os, signal, sys, time
from isokernel.cli import main
from isokernel.scenes import runner as run_module
def writer(ds, path, client, progress):
    with open(path, "wb") as f:
        f.write(b"half a file")
    print("writing", flush=True)
    time.sleep(60)
run_module._write = writer
sys.exit(main(sys.argv[1:]))
"""


@needs_io
def test_sigterm_unwinds_like_ctrl_c_and_leaves_no_temporary(tmp_path, scene_nc):
    """A batch scheduler's time limit (SIGTERM) during a write: exit code 130,
    one line, no temporary left."""
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_RUN, "run", "soil-moisture",
                             str(scene_nc), str(tmp_path / "out.nc"), "--no-progress",
                             "--strategy", "reference"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    assert _leftovers(tmp_path)  # the temporary exists while the write runs
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "isokernel run: interrupted\n"
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


@needs_io
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


@needs_io
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


@needs_io
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
@needs_io
def test_bad_chunks_are_refused_in_one_line(tmp_path, scene_nc, capsys, spec, message):
    code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "o.nc"),
                      f"--chunks={spec}"], capsys)
    assert code == 2 and _one_line(err) and message in err
    assert not (tmp_path / "o.nc").exists()


@needs_io
def test_an_unreachable_dask_address_fails_fast_naming_it(tmp_path, scene_nc, capsys,
                                                         monkeypatch):
    monkeypatch.setattr(run_module, "CONNECT_SECONDS", 2)
    start = time.perf_counter()
    code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "o.nc"), "--dask",
                      "tcp://127.0.0.1:1"], capsys)
    # over ten times the 2 s given, under Dask's own 30 s that a missing timeout would cost
    assert time.perf_counter() - start < 25
    assert code == 2 and _one_line(err) and "tcp://127.0.0.1:1" in err and "within 2 s" in err
    assert not _leftovers(tmp_path)


@needs_io
def test_a_missing_output_folder_is_named_before_any_computing(tmp_path, scene_nc, capsys,
                                                               monkeypatch):
    def no_compute(*args, **kwargs):
        raise AssertionError("computed before checking the output folder")

    monkeypatch.setattr(datasets_module, "_compute", no_compute)
    folder = tmp_path / "missing" / "deeper"
    code, err = _cli(["soil-moisture", str(scene_nc), str(folder / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and f"output folder {folder} does not exist" in err
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    code, err = _cli(["soil-moisture", str(scene_nc), str(a_file / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and f"output folder {a_file} is not a folder" in err


@needs_io
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


@needs_io
def test_a_zero_length_dimension_is_refused_naming_it(tmp_path, scene_nc, capsys):
    store = tmp_path / "empty.zarr"
    with xr.open_dataset(scene_nc) as ds:
        ds.isel(y=slice(0, 0)).to_zarr(store, consolidated=False)
    code, err = _cli(["soil-moisture", str(store), str(tmp_path / "o.nc")], capsys)
    assert code == 2 and _one_line(err) and "dimension 'y' has length 0" in err


@needs_io
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
@needs_io
def test_demo_counts_must_be_at_least_one(argv, option, capsys, tmp_path):
    code = main(["demo", "--pixels", "500", "--no-figure", "--save-scene",
                 str(tmp_path / "s.nc"), *argv])
    captured = capsys.readouterr()
    assert code == 2 and _one_line(captured.err, "demo") and option in captured.err
    assert "at least 1" in captured.err and captured.out == ""


@needs_io
def test_workers_must_be_at_least_one(tmp_path, scene_nc, capsys):
    code, err = _cli(["soil-moisture", str(scene_nc), str(tmp_path / "o.nc"), "--dask",
                      "local", "--workers", "0"], capsys)
    assert code == 2 and _one_line(err) and "--workers" in err and "at least 1" in err
    assert not (tmp_path / "o.nc").exists()


# ==== CPU calls: interrupts, worker failures, bounded bookkeeping, np.errstate on native =========
# Ctrl-C (a notebook's "interrupt kernel") and an exception in one worker stop
# the call promptly, no worker writes into freed buffers, the next call is
# exact; tile bookkeeping does not grow with the pixel count; native gives
# NumPy's floating-point warnings and errors under np.errstate.

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")

# --- Ctrl-C during a call -----------------------------------------------------------------

INTERRUPTS = r'''
import random, signal, sys, threading, time
import numpy as np
import isokernel as ik
import isokernel.numpy as inp


def model(a, b, c):
    """IEEE basic ops only: every CPU strategy gives the reference's bits."""
    d = a * b + c
    e = inp.sqrt(inp.abs(d) + 1.0)
    return inp.where(a > b, d / e, e - a * c), inp.maximum(d, e) * 0.5


def same_bits(got, want):
    return all(np.array_equal(g.view(np.uint8), w.view(np.uint8)) for g, w in zip(got, want))


def interrupted_calls(f, inputs, want, tries):
    """Calls of f interrupted by SIGINT at a random moment, each followed by a
    call on freshly allocated copies of the inputs (likely in the memory the
    interrupted call let go) that must give the reference's bits. A signal
    sent after the call returned (the call ran faster than the shortest one
    seen so far: a loaded machine's timings vary) is not an interrupt; the
    delays follow the shortest call seen, and there are attempts enough."""
    start = time.perf_counter()
    f(*inputs)
    duration = time.perf_counter() - start
    main = threading.main_thread().ident
    interrupts, latencies, attempts = 0, [], 0
    while interrupts < tries and attempts < 15 * tries:
        attempts += 1
        sent = []

        def fire(delay=random.uniform(0.05, 0.8) * duration):
            time.sleep(delay)
            sent.append(time.perf_counter())
            signal.pthread_kill(main, signal.SIGINT)
        helper = threading.Thread(target=fire)
        try:
            try:
                helper.start()
                f(*inputs)
            except KeyboardInterrupt:
                latencies.append(time.perf_counter() - sent[0])
                interrupts += 1
            helper.join()
            time.sleep(0.02)
        except KeyboardInterrupt:
            pass  # the signal came after the call had returned
        fresh = [np.empty_like(x) for x in inputs]
        for x, y in zip(fresh, inputs):
            np.copyto(x, y)
        start = time.perf_counter()
        got = f(*fresh)
        duration = min(duration, time.perf_counter() - start)
        if not same_bits(got, want):
            print("MISMATCH after an interrupted call")
            sys.exit(3)
    return interrupts, max(latencies, default=0.0), duration


strategy, pixels = sys.argv[1], int(sys.argv[2])
random.seed(11)
rng = np.random.default_rng(7)
inputs = [rng.uniform(-1.0, 1.0, pixels) for _ in range(3)]
want = ik.jit(model, strategy="reference")(*inputs)
for workers, tries in ((2, 20), (1, 5)):
    f = ik.jit(model, strategy=strategy, workers=workers)
    count, latency, duration = interrupted_calls(f, inputs, want, tries)
    print(f"workers={workers} interrupts={count} max_latency={latency:.4f} "
          f"duration={duration:.4f}", flush=True)
'''


SIGINT_AS_PYTHON = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def _run_script(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    src = str(Path(__file__).parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    # Python's own Ctrl-C handler even when started from a background job, whose
    # children inherit SIGINT ignored (and Python then installs no handler)
    script = SIGINT_AS_PYTHON + script
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _counts(stdout: str) -> dict[int, tuple[int, float]]:
    """workers -> (interrupts, largest latency in seconds) from the script's lines."""
    found = {}
    for line in stdout.splitlines():
        fields = dict(item.split("=") for item in line.split())
        found[int(fields["workers"])] = (int(fields["interrupts"]),
                                         float(fields["max_latency"]))
    return found


@pytest.mark.parametrize("strategy", [pytest.param("native", marks=needs_cc), "threads"])
def test_ctrl_c_at_a_random_moment_stops_the_call_and_the_next_call_is_exact(strategy):
    """The acceptance test: 10^7-pixel float64 calls, 20 interrupted with 2
    workers and 5 with one (the inline path returns to Python between C
    calls), in a subprocess so that a segfault fails the test. The process
    exits 0, every interrupt lands, control returns within half a second of
    the signal, and each later call on fresh arrays has the reference's bits."""
    done = _run_script(INTERRUPTS, strategy, str(10**7))
    assert done.returncode == 0, (done.returncode, done.stdout[-1000:], done.stderr[-3000:])
    counts = _counts(done.stdout)
    assert counts[2][0] == 20 and counts[1][0] == 5, done.stdout
    assert max(latency for _, latency in counts.values()) < 0.5, done.stdout


SECOND_INTERRUPT = r'''
import signal, threading, time
from isokernel.backends.cpu import pool

main = threading.main_thread().ident
started, finished = [], []


def work(k):
    started.append(k)
    time.sleep(1.0)  # a long tile: it does not look at the stop flag
    finished.append(k)


def fire():
    while len(started) < 2:  # both tasks run, however late a busy machine starts them
        time.sleep(0.01)
    for _ in range(2):
        time.sleep(0.1)
        signal.pthread_kill(main, signal.SIGINT)


threading.Thread(target=fire).start()
begin = time.perf_counter()
try:
    pool.run_tasks(work, 8, 2)
    print("returned")
except KeyboardInterrupt:
    print(f"interrupted {time.perf_counter() - begin:.3f} {len(started)} {len(finished)}")
'''


def test_a_second_ctrl_c_does_not_abandon_the_wait_for_running_tasks():
    """Ctrl-C twice while two tasks run: ``run_tasks`` raises KeyboardInterrupt
    only once both have finished (leaving earlier would free buffers they
    write into), and the six tasks not yet started never start."""
    done = _run_script(SECOND_INTERRUPT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    word, elapsed, started, finished = done.stdout.split()
    assert word == "interrupted"
    assert float(elapsed) > 0.95  # after the two 1 s tasks (a sleep never ends early)
    assert int(started) == int(finished) == 2


# --- an exception in one worker -----------------------------------------------------------

def test_a_failing_task_stops_the_others_and_every_started_task_ends_first():
    """``run_tasks``: task 0 fails while the other started task is running;
    that one sees the stop flag and returns, tasks not yet started never
    start, and ``run_tasks`` raises the failure only after every started
    task has finished."""
    started, finished, saw_stop = [], [], []
    running = threading.Event()

    def work(k: int) -> None:
        started.append(k)
        try:
            if k == 0:
                running.wait(60)
                raise ValueError("tile 0 failed")
            running.set()
            stop = pool.stop_flag()
            deadline = time.perf_counter() + 60  # against a hang only
            while not stop and time.perf_counter() < deadline:
                time.sleep(0.001)
            saw_stop.append(bool(stop))
        finally:
            finished.append(k)
    with pytest.raises(ValueError, match="tile 0 failed"):
        pool.run_tasks(work, 16, 2)
    assert saw_stop == [True]  # the other task returned on the flag, not at its deadline
    assert sorted(finished) == sorted(started)
    assert len(started) == 2


def _negative_power(k, e):
    return inp.power(k, e) + k


def test_an_exception_in_one_workers_tile_propagates_and_stops_the_others(monkeypatch):
    """A Python-tile region (integer ``power``) whose first tile raises
    NumPy's ValueError: the call raises it, as the reference does, after
    the other workers have run only the tiles already in progress; the
    next call is exact."""
    k = np.arange(1, 400_001, dtype=np.int64)
    e = np.full(k.shape, 2, np.int64)
    bad = e.copy()
    bad[0] = -1
    f = ik.jit(_negative_power, strategy="threads", workers=2, tile_rows=50)
    run = [0]
    tiles = threads.loops.tiles

    def counted(begin, end, rows):
        for tile in tiles(begin, end, rows):
            run[0] += 1
            yield tile
    monkeypatch.setattr(threads.loops, "tiles", counted)
    with pytest.raises(ValueError) as want:
        ik.jit(_negative_power, strategy="reference")(k, bad)
    with pytest.raises(ValueError) as got:
        f(k, bad)
    assert str(got.value) == str(want.value)
    assert run[0] < 4000  # of 8000 tiles: 8 slices of 1000
    assert np.array_equal(f(k, e), k * k + k)


# --- bookkeeping that does not grow with the pixel count ----------------------------------

BROADCAST = r'''
import json, resource, sys, time, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a runaway fails, not the host
import numpy as np
import isokernel as ik

found = {}
for strategy in sys.argv[1:]:
    x = np.broadcast_to(np.float64(1.0), (2**44,))
    tracemalloc.start()
    begin = time.process_time()  # this process's CPU time (not the C compiler's, nor other jobs')
    compiled = ik.jit(lambda x: x * 2.0 + 1.0, strategy=strategy, workers=2).lower(x).compile()
    peak = tracemalloc.get_traced_memory()[1]
    try:
        compiled.executable(x)  # the executable itself: no admission check before it
        outcome = "returned"
    except MemoryError:
        outcome = "MemoryError"
    elapsed = time.process_time() - begin
    # NumPy traces the failed allocation itself (128 TiB): leave it out
    kept = sum(t.size for t in tracemalloc.take_snapshot().traces if t.size < 1 << 40)
    tracemalloc.stop()
    found[strategy] = {"outcome": outcome, "elapsed": elapsed, "peak": peak, "kept": kept}
print(json.dumps(found))
'''


def test_a_huge_broadcast_input_fails_fast_at_allocation_without_bookkeeping():
    """A 2^44-pixel broadcast of one float (in a subprocess whose address
    space is capped at 4 GiB): lowering, compiling and the call up to the
    failing allocation (threads: the output; native: its contiguous copy of
    the input) take well under a second of CPU time, and nothing proportional to the
    pixel count is built, while compiling or after (before, ``threads``
    listed every tile: GBs and tens of seconds, then a bare MemoryError)."""
    strategies = ["threads"] + (["native"] if codegen.unavailable_reason() is None else [])
    done = _run_script(BROADCAST, *strategies)
    assert done.returncode == 0, done.stderr[-3000:]
    for strategy, found in json.loads(done.stdout).items():
        assert found["outcome"] == "MemoryError", strategy
        assert found["elapsed"] < 1.0, (strategy, found)
        assert found["peak"] < 8 << 20, (strategy, found)
        assert found["kept"] < 8 << 20, (strategy, found)


def test_tile_lengths_are_few_and_the_tiles_cover_each_slice():
    """The distinct tile lengths (one program each) do not depend on the
    pixel count, and the derived tiles cover every slice exactly."""
    for pixels in (1000, 10**6, 2**44):
        chunks = pool.split(pixels, 8)
        assert len(threads.loops.tile_lengths(chunks, 4096)) <= 4
    chunks = pool.split(100_003, 8)
    for begin, end in chunks:
        tiles = list(threads.loops.tiles(begin, end, 997))
        assert tiles[0][0] == begin and tiles[-1][1] == end
        assert all(a[1] == b[0] for a, b in zip(tiles, tiles[1:]))
        assert {b - a for a, b in tiles} <= set(threads.loops.tile_lengths(chunks, 997))


# --- native under np.errstate -------------------------------------------------------------

class _Target:
    """The ``call`` and ``log`` targets of NumPy's error modes, in one."""

    def __init__(self):
        self.records: list = []

    def __call__(self, text: str, flags: int) -> None:
        self.records.append(("call", text, flags))

    def write(self, text: str) -> None:
        self.records.append(("log", text))


def _errors(strategy: str, fn, args, **modes) -> dict:
    """What a call under ``np.errstate(**modes)`` gives: the exception, the
    warnings, and what the ``call`` and ``log`` modes recorded."""
    target = _Target()
    options = {} if strategy == "reference" else {"workers": 2}
    f = ik.jit(fn, strategy=strategy, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(**modes, call=target):
            try:
                f(*args)
                raised = None
            except FloatingPointError as error:
                raised = str(error)
    return {"raised": raised, "warnings": [(w.category, str(w.message)) for w in caught],
            "records": target.records}


def _divide(x, y):
    return 1.0 / x + y


def _invalid(x, y):
    return inp.sqrt(x) * y + (x - x) / (y - y)


def _overflow(x, y):
    return x * 1e300 + inp.exp(y)


def _mixed(x, y):
    return (inp.log(x) + y / x) * 1e300


def _inputs(n: int = 100_000):
    x = np.linspace(-2.0, 3.0, n)
    x[::9973] = 0.0
    y = np.linspace(1.0, 800.0, n)
    y[::7919] = 0.0
    return x, y


MODES = [{"all": "raise"}, {"all": "warn"}, {"all": "ignore"}, {"all": "call"},
         {"all": "log"}, {"divide": "raise", "invalid": "warn", "over": "ignore"},
         {"divide": "ignore", "invalid": "call", "over": "raise"}, {}]


@needs_cc
@pytest.mark.parametrize("fn", [_divide, _invalid, _overflow, _mixed])
@pytest.mark.parametrize("modes", MODES, ids=lambda m: ",".join(f"{k}={v}" for k, v in
                                                                 m.items()) or "default")
def test_native_gives_the_references_errors_under_every_errstate(fn, modes):
    """Divide by zero, invalid and overflow in rows spread over several
    kernel calls and both workers: the same exception (text included), the
    same warnings (category and text, once per op), the same ``call`` and
    ``log`` records as the reference, for raise/warn/ignore/call/log and
    mixed modes."""
    args = _inputs()
    want = _errors("reference", fn, args, **modes)
    got = _errors("native", fn, args, **modes)
    assert got == want
    if set(modes) <= {"all"} and modes.get("all") != "ignore":  # the check can fail
        assert want != {"raised": None, "warnings": [], "records": []}


@needs_cc
def test_native_keeps_its_outputs_when_it_warns():
    x, y = _inputs()
    with np.errstate(all="ignore"):
        quiet = ik.jit(_mixed, strategy="native")(x, y)
    with pytest.warns(RuntimeWarning):
        loud = ik.jit(_mixed, strategy="native")(x, y)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(quiet, loud))


def _comparisons(x, y):
    """Everything that compares floats: comparisons, max/min, sign, floor,
    ceil, trunc, selects, row max over a fresh operand."""
    z = x * 2.0
    return ((x < y), (x <= y), (x > y), (x >= y), inp.maximum(x, y), inp.minimum(x, y),
            inp.sign(x), inp.floor(x), inp.ceil(x), inp.trunc(x),
            inp.where(x > 0.5, x, y), inp.max(inp.stack([z, y], axis=1), axis=1))


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_inputs_to_comparisons_raise_nothing_on_native(dtype, monkeypatch):
    """NumPy's comparisons are quiet, C's ``<`` is not: with NaN inputs and
    ``np.errstate(all='raise')`` the reference raises nothing, and neither
    does native, whose kernels report no flag at all (no rows are run again)."""
    x, y = (np.linspace(-3.0, 3.0, 5000).astype(dtype) for _ in range(2))
    x[::7], y[::5] = np.nan, np.nan
    replays = []
    monkeypatch.setattr(native, "replay_errors", lambda *args: replays.append(args))
    with np.errstate(all="raise"):
        want = ik.jit(_comparisons, strategy="reference")(x, y)
        got = ik.jit(_comparisons, strategy="native", workers=2)(x, y)
    assert replays == []
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))


def _integer_division(k, d):
    return k // d, k % d


def _casts(x):
    return x.astype(inp.int32), x.astype(inp.int64) + 1, x.astype(inp.float32)


@needs_cc
@pytest.mark.parametrize("modes", [{"all": "raise"}, {"all": "warn"}, {"all": "call"}])
def test_integer_division_by_zero_and_casts_out_of_range_as_numpy(modes):
    """C gives no flag for integer division by zero or a float-to-integer
    cast out of range (undefined behaviour there); the host helpers raise
    NumPy's: divide by zero in floor_divide and remainder, overflow for
    MIN // -1, invalid value in cast, overflow in a cast to float32."""
    k = np.arange(-5000, 5000, dtype=np.int64)
    d = (k % 13) - 6
    d[-1], k[-1] = -1, np.iinfo(np.int64).min
    x = np.linspace(-1e3, 1e3, 10_000)
    x[100], x[2000], x[3000] = np.nan, 1e20, -np.inf
    x[4000] = 1e300
    for fn, args in ((_integer_division, (k, d)), (_casts, (x,))):
        want = _errors("reference", fn, args, **modes)
        assert want["raised"] or want["warnings"] or want["records"]
        assert _errors("native", fn, args, **modes) == want


@needs_cc
def test_native_reports_its_floating_point_policy():
    x, y = _inputs(1000)
    text = str(ik.jit(_divide, strategy="native").lower(x, y).compile().report())
    assert f"fp errors  {native.FPE_POLICY}" in text
    assert "quiet comparisons" in native.FPE_POLICY


# ==== the kernel cache: planted code never runs, failures explain themselves =====================
# A shared object planted by another local user never runs; the cache is 0700
# with 0600 files; an unusable cache or a broken compiler makes native
# unavailable with a reason; a full disk only warns; Ctrl-C and kill -9
# during a compile leave no temporaries once the next compile has run.

SOURCE = "#include <stdint.h>\nint64_t isk_answer(void) {{ return {}; }}\n"
PLANTED = r"""
#include <stdint.h>
#include <stdio.h>
__attribute__((constructor)) static void isk_plant(void)
{
    FILE *f = fopen("%s", "w");
    if (f) { fputs("planted code ran", f); fclose(f); }
}
int64_t isk_answer(void) { return 666; }
"""


@dataclass
class Planted:
    data: bytes  # a shared object whose constructor writes ``marker``
    path: Path
    marker: Path


@pytest.fixture
def planted(tmp_path) -> Planted:
    marker = tmp_path / "planted-code-ran"
    source, path = tmp_path / "planted.c", tmp_path / "planted.so"
    source.write_text(PLANTED % marker)
    compiler = cc.current_compiler().path
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(path), str(source)], check=True)
    return Planted(path.read_bytes(), path, marker)


@pytest.fixture
def fresh(monkeypatch):
    """A process-like state for this test: no library loaded yet, and the
    per-process probes (compiler, tile driver) cleared before and after."""
    monkeypatch.setattr(cc, "_LOADED", {})
    _clear_probes()
    yield
    _clear_probes()


def _clear_probes() -> None:
    cc.find_compiler_path.cache_clear()
    loops.unavailable_reason.cache_clear()
    drv.load_driver.cache_clear()


def _key(source: str) -> str:
    compiler = cc.current_compiler()
    return cc.cache_key(source, compiler, compiler.flags(False))


def _plant(directory: Path, key: str, data: bytes, suffix: str = ".so") -> None:
    """An entry with a matching digest, as an attacker would write it."""
    (directory / f"{key}{suffix}").write_bytes(data)
    (directory / f"{key}.sha256").write_text(hashlib.sha256(data).hexdigest())


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def _build_warned(source: str):
    """``cc.build(source)`` and the text of the cache's warnings, in that
    order, so that planted code which ran is what a failure shows first."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        library, built = cc.build(source)
    text = " ".join(str(w.message) for w in warned if w.category is cache.CacheWarning)
    return library, built, text


def _temporaries(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- planted code never runs --------------------------------------------------------------

@needs_cc
def test_a_world_writable_cache_is_refused_and_its_planted_entry_never_runs(
        tmp_path, monkeypatch, planted, fresh):
    source = SOURCE.format(101)
    key = _key(source)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    _plant(shared, key, planted.data)
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(shared))
    library, built, text = _build_warned(source)
    assert library.isk_answer() == 101 and not planted.marker.exists()
    assert not built.cached and shared not in built.path.parents
    assert f"{shared} is writable by group or others (mode 777)" in text
    assert f"chmod 700 {shared}" in text and "ISOKERNEL_CACHE_DIR" in text


@needs_cc
def test_b_an_entry_of_another_user_in_a_private_cache_is_not_loaded(
        tmp_path, monkeypatch, planted, fresh):
    source = SOURCE.format(102)
    key = _key(source)
    directory = _private_dir(tmp_path / "cache")
    _plant(directory, key, planted.data)
    for name in (f"{key}.so", f"{key}.sha256"):
        os.chown(directory / name, 12345, 12345)
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    library, built, text = _build_warned(source)
    assert library.isk_answer() == 102 and not planted.marker.exists() and not built.cached
    assert f"{directory / key}.so is owned by uid 12345" in text
    assert os.stat(directory / f"{key}.so").st_uid == os.geteuid()  # replaced by ours


def test_c_the_cuda_cache_never_falls_back_to_a_fixed_temporary_folder(tmp_path, monkeypatch):
    """With HOME unusable, the CUDA cache used ``$TMP/isokernel-cuda-<uid>``,
    a name another user could create first and fill; now it is a private
    directory of a new random name, one per process."""
    compiler = nvrtc_or_skip()
    system_tmp = _private_dir(tmp_path / "tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    monkeypatch.setattr(cache, "_PRIVATE", {})
    fixed = system_tmp / f"isokernel-cuda-{os.getuid()}"
    fixed.mkdir()
    os.chmod(fixed, 0o777)
    source = cuda.elementwise_kernel(Op.MUL, {}, (np.float32,) * 2, np.float32, "vv").source
    options = cuda.nvrtc_options()
    key = nvrtc.cache_key(source, "compute_80", compiler,
                          ("--gpu-architecture=compute_80", *options))
    _plant(fixed, key, b"// planted PTX\n", ".ptx")
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("HOME", str(tmp_path / "a-file" / "home"))
    monkeypatch.delenv("ISOKERNEL_CACHE_DIR", raising=False)
    monkeypatch.delenv("ISOKERNEL_CUDA_CACHE_DIR", raising=False)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        compiled = nvrtc.compile_cuda(source, "compute_80", options, compiler)
    assert not compiled.cached and b".entry" in compiled.data and b"planted" not in compiled.data
    assert [w for w in warned if f"{tmp_path / 'a-file'} is a file" in str(w.message)]
    private = compiled.path.parent.parent
    assert private.parent == system_tmp and private != fixed
    assert private.name.startswith("isokernel-") and _mode(private) == 0o700
    assert sorted(os.listdir(fixed)) == [f"{key}.ptx", f"{key}.sha256"]  # never read
    assert fixed not in _private_roots(system_tmp, 2)


def _private_roots(system_tmp: Path, count: int) -> list[Path]:
    """The private temporary cache of ``count`` new processes."""
    code = "from isokernel.codegen import cache; print(cache._private_root())"
    env = dict(os.environ, TMPDIR=str(system_tmp))
    roots = [Path(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip())
             for _ in range(count)]
    assert len(set(roots)) == count and all(r.name.startswith("isokernel-") for r in roots)
    return roots


@needs_cc
def test_d_a_swap_after_verification_is_never_loaded(tmp_path, monkeypatch, planted, fresh):
    """The shared object is loaded from the bytes that were verified, not
    opened again by path: replacing the file right after it was read and
    checked changes nothing, and the next process rebuilds the entry."""
    source = SOURCE.format(104)
    directory = _private_dir(tmp_path / "cache")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    _, first = cc.build(source)
    monkeypatch.setattr(cc, "_LOADED", {})
    verified = cache.read

    def read_then_swap(where: Path, key: str, suffix: str):
        data = verified(where, key, suffix)
        swapped = where / "swapped.so"
        swapped.write_bytes(planted.data)
        os.replace(swapped, where / f"{key}{suffix}")
        return data

    monkeypatch.setattr(cache, "read", read_then_swap)
    library, built = cc.build(source)
    assert built.cached and library.isk_answer() == 104 and not planted.marker.exists()
    assert (directory / f"{first.key}.so").read_bytes() == planted.data
    monkeypatch.setattr(cache, "read", verified)
    monkeypatch.setattr(cc, "_LOADED", {})
    library, rebuilt = cc.build(source)
    assert not rebuilt.cached and library.isk_answer() == 104 and not planted.marker.exists()


@needs_cc
def test_e_a_symbolic_link_planted_as_the_entry_is_not_followed(
        tmp_path, monkeypatch, planted, fresh):
    source = SOURCE.format(105)
    key = _key(source)
    directory = _private_dir(tmp_path / "cache")
    os.symlink(planted.path, directory / f"{key}.so")
    (directory / f"{key}.sha256").write_text(hashlib.sha256(planted.data).hexdigest())
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    library, built, text = _build_warned(source)
    assert library.isk_answer() == 105 and not planted.marker.exists() and not built.cached
    assert f"{directory / key}.so is a symbolic link" in text
    assert not (directory / f"{key}.so").is_symlink()


# --- modes --------------------------------------------------------------------------------

@needs_cc
def test_the_cache_is_created_0700_with_0600_files(tmp_path, monkeypatch, fresh):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ISOKERNEL_CACHE_DIR", raising=False)
    _, built = cc.build(SOURCE.format(106))
    assert built.path.parent == home / ".cache" / "isokernel" / "native"
    for directory in (home / ".cache", home / ".cache" / "isokernel", built.path.parent):
        assert _mode(directory) == 0o700, directory
    names = os.listdir(built.path.parent)
    assert {f"{built.key}.so", f"{built.key}.sha256", f"{built.key}.c"} <= set(names)
    assert {n: _mode(built.path.parent / n) for n in names} == {n: 0o600 for n in names}


# --- failures that explain themselves -----------------------------------------------------

def _under_a_file(tmp_path, monkeypatch) -> list[str]:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("HOME", str(tmp_path / "a-file" / "home"))
    monkeypatch.delenv("ISOKERNEL_CACHE_DIR", raising=False)
    return [f"{tmp_path / 'a-file'} is a file", f"HOME={tmp_path / 'a-file' / 'home'}",
            "set ISOKERNEL_CACHE_DIR"]


def _cache_is_a_file(tmp_path, monkeypatch) -> list[str]:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(tmp_path / "a-file"))
    return [f"ISOKERNEL_CACHE_DIR={tmp_path / 'a-file'}", "is a file, not a directory",
            "set ISOKERNEL_CACHE_DIR"]


def _cannot_be_written(tmp_path, monkeypatch) -> list[str]:
    target = _private_dir(tmp_path / "read-only")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(target))
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw:
                        Path(path) != target and real(path, mode, **kw))
    return [f"{target} (ISOKERNEL_CACHE_DIR={target}) cannot be written",
            "set ISOKERNEL_CACHE_DIR"]


def _compiler_writes_nothing(tmp_path, monkeypatch) -> list[str]:
    monkeypatch.setenv("ISOKERNEL_CC", "/bin/true")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    return ["ISOKERNEL_CC=/bin/true", "writes no shared object", "set ISOKERNEL_CC"]


BROKEN = {"home under a file": _under_a_file, "cache dir is a file": _cache_is_a_file,
          "cache dir cannot be written": _cannot_be_written,
          "compiler writes nothing": _compiler_writes_nothing}


@pytest.mark.skipif(not Path("/bin/true").exists(), reason="no /bin/true")
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_cache_or_compiler_makes_native_unavailable_and_auto_runs_threads(
        case, tmp_path, monkeypatch, fresh):
    expected = BROKEN[case](tmp_path, monkeypatch)
    reason = get_strategy("native").unavailable_reason()
    assert reason is not None and all(part in reason for part in expected), reason
    assert f"unavailable: {reason}" in devices_table()
    with pytest.raises(BackendUnavailableError, match=re.escape(reason)):
        cc.current_compiler()
    assert reason in loops.unavailable_reason()  # threads keeps to its Python tiles
    x = np.linspace(-2.0, 2.0, 1001)
    compiled = ik.jit(lambda v: v * 3.0 + 1.0).lower(x).compile()
    assert "strategy   threads on cpu (auto" in str(compiled.report())
    assert bit_identical(compiled(x), x * 3.0 + 1.0)


# --- a full disk, Ctrl-C, kill -9 ---------------------------------------------------------

def _full_disk(real):
    """``write_new`` that fills the disk on an entry's temporary (``.tmp``)."""
    def write_new(path: Path, data: bytes) -> None:
        if path.suffix != ".tmp":
            return real(path, data)
        real(path, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return write_new


@needs_cc
def test_a_full_disk_warns_and_the_compiled_kernel_still_runs(tmp_path, monkeypatch, fresh):
    directory = _private_dir(tmp_path / "cache")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    cc.current_compiler()
    monkeypatch.setattr(cache, "write_new", _full_disk(cache.write_new))
    with pytest.warns(cache.CacheWarning, match="could not store .*No space left on device"):
        library, built = cc.build(SOURCE.format(107))
    assert library.isk_answer() == 107 and not built.cached
    assert not built.path.exists() and _temporaries(directory) == []


def test_a_full_disk_leaves_a_readable_cuda_kernel(tmp_path, monkeypatch):
    compiler = nvrtc_or_skip()
    directory = _private_dir(tmp_path / "cuda")
    monkeypatch.setenv("ISOKERNEL_CUDA_CACHE_DIR", str(directory))
    monkeypatch.setattr(cache, "write_new", _full_disk(cache.write_new))
    source = cuda.elementwise_kernel(Op.SUB, {}, (np.float32,) * 2, np.float32, "vv").source
    with pytest.warns(cache.CacheWarning, match="could not store .*No space left on device"):
        compiled = nvrtc.compile_cuda(source, "compute_80", cuda.nvrtc_options(), compiler)
    assert b".entry" in compiled.data and compiled.path.read_bytes() == compiled.data
    assert directory not in compiled.path.parents and _temporaries(directory) == []


@needs_cc
def test_ctrl_c_during_the_compiler_leaves_no_temporaries(tmp_path, monkeypatch, fresh):
    directory = _private_dir(tmp_path / "cache")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    cc.current_compiler()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cc.subprocess, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cc.build(SOURCE.format(108))
    assert _temporaries(directory) == []


SLOW_CC = """#!/bin/sh
for arg in "$@"; do
    case "$arg" in *.c) grep -q isk_slow_marker "$arg" 2>/dev/null && sleep 120;; esac
done
exec {compiler} "$@"
"""


@needs_cc
def test_a_compile_killed_with_sigkill_leaves_nothing_after_the_next_compile(
        tmp_path, monkeypatch, fresh):
    slow = tmp_path / "slow-cc"
    slow.write_text(SLOW_CC.format(compiler=cc.current_compiler().path))
    slow.chmod(0o755)
    directory = tmp_path / "cache"
    env = dict(os.environ, ISOKERNEL_CC=str(slow), ISOKERNEL_CACHE_DIR=str(directory))
    code = ("from isokernel.codegen import compiler\n"
            "compiler.build('/* isk_slow_marker */ int isk_slow(void) { return 1; }\\n')\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        _wait_for_a_compile(child, directory)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the process, its shell script and the sleep
        child.wait()
    assert _temporaries(directory)  # what the killed compile left behind
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    library, built = cc.build(SOURCE.format(109))
    assert library.isk_answer() == 109 and not built.cached
    assert _temporaries(directory) == []


def _wait_for_a_compile(child: subprocess.Popen, directory: Path) -> None:
    """Until the child's compile of the marked source is under way."""
    deadline = time.monotonic() + 120
    while True:
        names = os.listdir(directory) if directory.is_dir() else []
        if [n for n in names if n.endswith(".c") and not n.startswith((".probe.", "probe"))
                and n.startswith(".")]:
            return
        assert child.poll() is None, "the compiling process ended before it was killed"
        assert time.monotonic() < deadline, "the compile never started"
        time.sleep(0.05)


# ==== NumPy semantics, retraces, admission, memory limits, auto's choice =========================
# Every output its own array, masked arrays refused, any byte order, one
# recording per key, calls that cannot fit refused before work, ulimit in the
# memory budget, and the report says why auto passed a strategy over.


CPU = ["reference", "threads", "native"]


# ------------------------------------------------- every output is its own array


@pytest.mark.parametrize("strategy", CPU)
def test_equal_outputs_are_two_arrays(strategy):
    a, b = ik.jit(lambda x: (x * 2.0, x * 2.0), strategy=strategy)(np.arange(4.0))
    assert not np.shares_memory(a, b)
    a[0] = 99.0
    assert b[0] == 0.0


@pytest.mark.parametrize("strategy", CPU)
@pytest.mark.parametrize("model", [lambda x: x.astype(inp.float64), lambda x: x ** 1,
                                   lambda x: inp.reshape(x, (2, 2)), lambda x: x + 0 * x[0]],
                         ids=["astype", "power-1", "reshape", "plus-zero"])
def test_an_output_is_never_the_callers_input(strategy, model):
    x = np.arange(4.0)
    out = ik.jit(model, strategy=strategy)(x)
    assert not np.shares_memory(out, x)
    out[...] = -1.0
    assert np.array_equal(x, np.arange(4.0))


@pytest.mark.parametrize("strategy", CPU)
def test_writing_a_constant_output_does_not_change_the_next_call(strategy):
    f = ik.jit(lambda x: (x * 2.0, inp.full(3, 7.0)), strategy=strategy)
    f(np.arange(4.0))[1][:] = 0.0
    assert np.array_equal(f(np.arange(4.0))[1], np.full(3, 7.0))


# ------------------------------------------------------------- masked arrays


def test_jit_refuses_a_masked_array_naming_the_argument():
    masked = np.ma.masked_array([1.0, -9999.0], mask=[False, True])
    with pytest.raises(ik.DTypeError, match=r"argument 'state\['mv'\]' is a NumPy masked "
                                            r"array.*filled\(np.nan\)"):
        ik.jit(lambda state: state["mv"] + 1.0)({"mv": masked})


@pytest.mark.parametrize("op", [lambda m: inp.exp(m), lambda m: inp.asarray(m),
                                lambda m: inp.where(m > 0, m, 0.0)],
                         ids=["exp", "asarray", "where"])
def test_eager_functions_refuse_a_masked_array(op):
    masked = np.ma.masked_array([1.0, -9999.0], mask=[False, True])
    with pytest.raises(ik.DTypeError, match=r"test_faults.py:\d+: a NumPy masked array"):
        op(masked)


# ---------------------------------------------------------------- byte order


@pytest.mark.parametrize("strategy", CPU)
def test_big_endian_inputs_run_as_their_values(strategy):
    little = np.linspace(-3.0, 3.0, 1001)
    big = little.astype(">f8")
    f = ik.jit(lambda x: inp.exp(x) * x + 1.0, strategy=strategy)
    want = f(little)
    got = f(big)
    assert got.dtype == np.float64 and got.dtype.isnative
    assert np.array_equal(got, want)
    assert f.retraces == 0  # the same values, the same compiled function


# ------------------------------------------------------------------- retraces


def test_a_static_nan_records_once():
    f = ik.jit(lambda x, c: x + c, static_argnames="c", strategy="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ik.RetraceWarning)
        for _ in range(5):
            f(np.arange(3.0), c=float("nan"))
    assert f.retraces == 0


def test_static_one_and_one_point_zero_are_two_recordings():
    f = ik.jit(lambda x, c: x * c, static_argnames="c", strategy="reference")
    assert f(np.arange(3), c=2).dtype == np.int64
    assert f(np.arange(3), c=2.0).dtype == np.float64


def test_concurrent_first_calls_record_once():
    recordings = []

    def model(x):
        recordings.append(1)
        time.sleep(0.05)  # a slow recording: every thread arrives while it runs
        return x * 2.0

    f = ik.jit(model, strategy="reference")
    x = np.arange(8.0)
    results = [None] * 8

    def call(k):
        results[k] = f(x)
    threads = [threading.Thread(target=call, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(recordings) == 1
    assert all(np.array_equal(r, x * 2.0) for r in results)


# ----------------------------------------------------------- bounded resources


@pytest.mark.parametrize("strategy", CPU)
def test_a_call_that_cannot_fit_is_refused_before_work_with_the_sizing_line(strategy):
    huge = np.broadcast_to(np.float64(1.0), (2 ** 44,))
    started = time.process_time()  # this process's CPU time: not the C compiler's, nor other jobs'
    with pytest.raises(BudgetError, match=r"needs at least .* nothing was run\. Sizing: "
                                          r"largest block: .*block='auto'"):
        ik.jit(lambda x: x * 2.0, strategy=strategy)(huge)
    assert time.process_time() - started < 20.0


def test_small_calls_are_not_checked():
    compiled = ik.jit(lambda x: x * 2.0, strategy="reference").lower(np.ones(8)).compile()
    assert compiled._admit is None


def _limits_tree(tmp_path, address_space: str, data: str, vm_size_kib: int):
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "limits").write_text(textwrap.dedent(f"""\
        Limit                     Soft Limit           Hard Limit           Units
        Max data size             {data:<20} unlimited            bytes
        Max address space         {address_space:<20} unlimited            bytes
        """))
    (proc / "status").write_text(f"VmSize:\t{vm_size_kib} kB\nVmData:\t{vm_size_kib // 2} kB\n")
    (tmp_path / "proc" / "meminfo").write_text("MemAvailable: 16777216 kB\n")
    return str(tmp_path)


def test_rlimit_as_below_the_host_sets_the_budget(tmp_path):
    root = _limits_tree(tmp_path, str(4 << 30), "unlimited", vm_size_kib=1 << 20)
    budget = memory_budget(root)
    assert budget.value == (4 << 30) - (1 << 30)
    assert budget.source.startswith("RLIMIT_AS soft limit") and "MemAvailable" in budget.source


def test_rlimit_data_counts_too_and_the_tighter_wins(tmp_path):
    root = _limits_tree(tmp_path, str(8 << 30), str(2 << 30), vm_size_kib=1 << 20)
    budget = memory_budget(root)
    assert budget.value == (2 << 30) - (512 << 20)
    assert budget.source.startswith("RLIMIT_DATA")


def test_an_unlimited_process_keeps_the_host_figure(tmp_path):
    root = _limits_tree(tmp_path, "unlimited", "unlimited", vm_size_kib=1 << 20)
    budget = memory_budget(root)
    assert budget.value == 16 << 30 and "RLIMIT" not in budget.source


def test_block_auto_plans_within_ulimit_v():
    script = textwrap.dedent("""\
        import resource
        import numpy as np
        import isokernel as ik
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
        f = ik.jit(lambda x: x * 2.0 + 1.0, strategy="reference", block="auto")
        x = np.ones(50_000_000)
        print(f.lower(x).compile().block_choice.line)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "RLIMIT_AS soft limit" in done.stdout


# ------------------------------------------------------------- auto's choice


def test_the_report_says_why_auto_passed_over_native(monkeypatch):
    native = strategies.get_strategy("native")
    broken = dataclasses.replace(native, profile=dataclasses.replace(
        native.profile, probe=lambda: "the C compiler probe failed (ISOKERNEL_CC=/bin/true)"))
    monkeypatch.setitem(strategies._STRATEGIES, "native", broken)
    compiled = ik.jit(lambda x: x + 1.0).lower(np.ones(4)).compile()
    assert compiled.lowered.strategy.name == "threads"
    assert ("threads on cpu (auto: native unavailable: the C compiler probe failed "
            "(ISOKERNEL_CC=/bin/true))") in str(compiled.report())
