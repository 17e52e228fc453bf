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
