"""The ``isokernel`` command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from isokernel.cli import main


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
