"""The ``isokernel`` command."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from isokernel.cli import main

ROOT = Path(__file__).parents[1]


def test_devices_lists_every_strategy_with_status(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    for name in ("reference", "threads", "native", "cuda-eager", "cuda-fused",
                 "cuda-megakernel"):
        assert name in out
    assert "reference        cpu     available" in out


def test_report_prints_graph_capsules_and_liveness(capsys):
    code = main(["report", "isokernel.models.tau_omega:tau_omega", "--shape",
                 "mv=1000:float32", "--shape", "vwc=1000:float32", "--shape", "ts=1000:float32",
                 "--strategy", "reference"])
    assert code == 0
    out = capsys.readouterr().out
    assert "graph tau_omega(mv: f32[1000], vwc: f32[1000], ts: f32[1000])" in out
    assert "exp: numpy.exp" in out and "agrees with static" in out


def test_report_of_a_model_file(tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text("import isokernel.numpy as inp\n\ndef f(x):\n    return inp.exp(x)\n")
    assert main(["report", f"{model}:f", "--shape", "x=4:float64", "--no-run"]) == 0
    assert "model.py:4" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["report", "nomodule", "--shape", "x=3"], "write MODULE:FUNCTION"),
    (["report", "isokernel.models.tau_omega:tau_omega", "--shape", "mv=3:float16"], "float16"),
    (["report", "isokernel.models.tau_omega:nothing"], "has no function"),
])
def test_report_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_demo_prints_a_parity_table(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes its figure into the working directory
    assert main(["demo", "--pixels", "20000"]) == 0
    out = capsys.readouterr().out
    assert "reference" in out and "bit-identical" in out and "capsules that ran" in out


@pytest.mark.parametrize("sub", [[], ["devices"], ["report"], ["demo"]])
def test_help_everywhere(sub):
    run = subprocess.run([sys.executable, "-m", "isokernel.cli", *sub, "--help"],
                         capture_output=True, text=True, check=True)
    assert "usage: isokernel" in run.stdout


def test_run_help_describes_overwrite():
    run = subprocess.run([sys.executable, "-m", "isokernel.cli", "run", "--help"],
                         capture_output=True, text=True, check=True)
    assert "--overwrite" in run.stdout and "isokernel_manifest" in run.stdout


def test_quickstart_mlp_prints_losses_and_the_capsules_that_ran(capsys):
    argv = ["quickstart-mlp", "--device", "cpu", "--steps", "2", "--seed", "2026",
            "--show-backend"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    losses = [float(line.split("loss ")[1]) for line in out.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 2 and losses[1] < losses[0]  # Adam(1e-2) lowers the loss at once
    assert "isokernel report: train_step" in out and "on cpu" in out
    assert "capsules that ran:" in out and "tanh:" in out
    assert main(argv) == 0
    again = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert again == [f"step {i + 1}: loss {x:.6f}" for i, x in enumerate(losses)]  # the seed


def test_quickstart_mlp_without_show_backend_prints_no_report(capsys):
    assert main(["quickstart-mlp", "--steps", "1", "--strategy", "reference"]) == 0
    out = capsys.readouterr().out
    assert "step 1: loss" in out and "capsules that ran" not in out


@pytest.mark.parametrize("device,message", [
    ("metal", "isokernel runs on cpu and cuda"),
    ("gpu", "use one of cpu, cuda"),
])
def test_quickstart_mlp_refuses_an_unavailable_device_with_the_fix(device, message, capsys):
    assert main(["quickstart-mlp", "--device", device, "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_quickstart_mlp_without_cupy_names_the_install(capsys):
    import importlib.util
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: cuda may be available here")
    assert main(["quickstart-mlp", "--device", "cuda", "--steps", "1"]) == 2
    assert "pip install 'isokernel[cuda]'" in capsys.readouterr().err


def test_quickstart_mlp_help():
    run = subprocess.run([sys.executable, "-m", "isokernel.cli", "quickstart-mlp", "--help"],
                         capture_output=True, text=True, check=True)
    assert "--show-backend" in run.stdout and "--device" in run.stdout


# --- Ctrl-C from the first instant, options as the help writes them, errors as one line -------

needs_io = pytest.mark.skipif(importlib.util.find_spec("xarray") is None
                              or importlib.util.find_spec("netCDF4") is None,
                              reason="the io extra (xarray, netCDF4) is not installed")

SLOW_MODEL = "import time\n\ndef f(ts):\n    time.sleep(60)\n    return {'out': ts}\n"


def _entry_point() -> tuple[str, str]:
    """pyproject's [project.scripts] entry of the ``isokernel`` command: (module, function)."""
    found = re.search(r'^isokernel = "([\w.]+):(\w+)"$',
                      (ROOT / "pyproject.toml").read_text(), re.M)
    return found.group(1), found.group(2)


def _child_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep +
                os.environ.get("PYTHONPATH", ""))


@contextmanager
def _children_get_default_ctrl_c():
    """A command started from a terminal has SIGINT at its default disposition. A test
    runner started as a background job has it ignored, and children would inherit that;
    while Python's handler is installed here, exec gives children the default instead."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="module")
def python_start_up() -> float:
    """Seconds for a bare Python to start and exit (the most of three): Python's own
    start-up (its runtime, ``site``), before any code of isokernel's can run. A Ctrl-C
    inside it is Python's to report."""
    times = []
    for _ in range(3):
        begin = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sys"], env=_child_env(), check=True)
        times.append(time.perf_counter() - begin)
    return max(times)


def test_the_entry_point_imports_isokernel_inside_its_ctrl_c_handling():
    """Importing the entry point's module must not import isokernel (or NumPy): that import
    takes about half a second and has to run where a Ctrl-C is handled."""
    module, _ = _entry_point()
    probe = (f"import sys\nimport {module}\n"
             f"print(sorted(m for m in ('isokernel', 'numpy') if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-c", probe], env=_child_env(), capture_output=True,
                         text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_an_import_left_half_made_by_ctrl_c_is_an_interruption(monkeypatch, capsys):
    """A Ctrl-C inside an import can surface as another error (an ImportError of the
    module it left half made, raised with the KeyboardInterrupt as its context): still
    status 130 and one line. Any other error is not turned into one."""
    import importlib

    import isokernel.cli as cli
    module, function = _entry_point()
    entry = getattr(importlib.import_module(module), function)

    def cut_short():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("cannot import name 'Interface' from partially initialized "
                              "module") from None  # the context stays: Python's chaining

    monkeypatch.setattr(cli, "main", cut_short)
    monkeypatch.setattr(sys, "argv", ["isokernel", "run", "x"])
    assert entry() == 130
    assert capsys.readouterr().err == "isokernel run: interrupted\n"

    def broken():
        raise ImportError("a real error")
    monkeypatch.setattr(cli, "main", broken)
    with pytest.raises(ImportError, match="a real error"):
        entry()


@needs_io
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5])
def test_ctrl_c_at_startup_exits_130_with_one_line(tmp_path, delay, python_start_up):
    """Ctrl-C while Python imports isokernel (about the first half second) printed a
    traceback of 10 to 43 lines. The signal goes ``delay`` seconds after Python's own
    start-up (five times its measured length, a margin for a loaded machine), through the
    installed command's entry point. The model sleeps for a minute, so every signal lands
    before the end."""
    import xarray as xr
    data = tmp_path / "in.nc"
    xr.Dataset({"ts": (("y", "x"), np.ones((2, 3)))}).to_netcdf(data)
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    module, function = _entry_point()
    script = f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    argv = ["run", f"{tmp_path / 'slow.py'}:f", str(data), str(tmp_path / "out.nc"),
            "--no-progress", "--strategy", "reference"]
    with _children_get_default_ctrl_c():
        proc = subprocess.Popen([sys.executable, "-c", script, *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=_child_env())
    time.sleep(5 * python_start_up + delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == -signal.SIGINT:
        # Python's handler was not installed yet: the process ended as any program does on
        # Ctrl-C (a shell shows status 130), printing nothing
        assert err == ""
    else:
        assert (proc.returncode, err) == (130, "isokernel run: interrupted\n")
    assert not (tmp_path / "out.nc").exists()


def test_counts_accept_float_notation_that_is_a_whole_number(capsys):
    """The help writes the default as 1e6; --pixels 1e3 was refused as not an int."""
    from isokernel.cli import _parser
    args = _parser().parse_args(["demo", "--pixels", "1e3", "--repeats", "2.0", "--chunks",
                                 "1_000"])
    assert (args.pixels, args.repeats, args.chunks) == (1000, 2, 1000)
    assert _parser().parse_args(["run", "m", "i", "o", "--workers", "4e0"]).workers == 4


@pytest.mark.parametrize("value", ["1.5e0", "2.5", "abc", "inf", "nan", "1e400"])
def test_a_count_that_is_not_a_whole_number_is_one_line(value, capsys):
    assert main(["demo", "--pixels", value, "--no-figure"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.count("\n") == 1 and captured.err.startswith("isokernel demo: ")
    assert f"--pixels: {value!r}" in captured.err and "1e3" in captured.err


def test_argument_errors_are_one_line(capsys):
    assert main(["run", "soil-moisture"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("isokernel run: ")
    assert "OUTPUT" in err and "isokernel run --help" in err


def test_the_figure_is_reported_where_it_was_written(tmp_path):
    """--figure mydir wrote mydir.png and reported mydir."""
    pytest.importorskip("matplotlib")
    from isokernel.models.demo import accuracy, report_figure
    from isokernel.models.soil_moisture import Grid, generate_scene
    scene, grid = generate_scene(64, seed=1), Grid.square(64)
    rows = accuracy(scene["mv"], scene["mv"], scene["vwc"])
    lines = []
    written = report_figure(str(tmp_path / "mydir"), scene, scene["mv"], grid, rows,
                            lines.append)
    assert written == str(tmp_path / "mydir.png") and (tmp_path / "mydir.png").is_file()
    assert lines == [f"figure: {tmp_path / 'mydir.png'}"]
    folder = tmp_path / "figures"
    folder.mkdir()
    written = report_figure(str(folder), scene, scene["mv"], grid, rows, lines.append)
    assert written == str(folder / "soil-moisture-demo.png") and Path(written).is_file()
    assert lines[-1] == f"figure: {written}"


def test_report_of_a_file_that_is_not_python_says_so(tmp_path, capsys):
    """An existing file that is not a .py file was reported as 'no such model file'."""
    text = tmp_path / "model.txt"
    text.write_text("def f(x):\n    return x\n")
    assert main(["report", f"{text}:f", "--shape", "x=4"]) == 2
    err = capsys.readouterr().err
    assert "no such" not in err and str(text) in err and "not a Python file" in err
    assert main(["report", f"{tmp_path}{os.sep}:f", "--shape", "x=4"]) == 2
    err = capsys.readouterr().err
    assert "no such" not in err and "is a folder" in err
    assert main(["report", f"{tmp_path / 'missing.py'}:f", "--shape", "x=4"]) == 2
    assert "no such model file" in capsys.readouterr().err


def test_a_model_file_that_fails_to_load_is_one_line(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(x):\n    return x +\n")
    raising = tmp_path / "raising.py"
    raising.write_text("import isokernel.numpy as inp\n\ndef f(x):\n    return inp.exp(y)\n")
    for target, words in [(f"{broken}:f", ("SyntaxError", str(broken))),
                          (f"{raising}:f", ("NameError", "'y'", f"{raising}:4"))]:
        assert main(["report", target, "--shape", "x=4", "--no-run"]) != 0
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("isokernel report: ")
        assert "Traceback" not in err and all(w in err for w in words), err
