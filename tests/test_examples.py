"""The README's example program runs and says what the README says."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quickstart_example():
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")],
                         capture_output=True, text=True, check=True, timeout=300)
    lines = run.stdout.splitlines()
    assert lines[0] == "reference == eager NumPy, bit for bit: True"
    assert lines[2] == "portable numerics, native == reference bit for bit: True"
    assert "isokernel report: vegetation_attenuation" in run.stdout


def test_stiff_kinetics_example():
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "stiff_kinetics.py")],
                         capture_output=True, text=True, check=True, timeout=300)
    assert run.stdout.startswith("Robertson kinetics to t = 100000, rosenbrock23")
