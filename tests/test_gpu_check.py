"""``scripts/gpu-check --dry-run`` works without a GPU: it lists its parts
and checks that every test and benchmark it names exists and imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dry_run_lists_the_parts_and_finds_everything_it_names():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu-check"), "--dry-run"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for part in ("environment", "gpu-tests", "nccl-tests", "contract-tests", "benchmark"):
        assert part in out
    assert "tests collected" in out and "benchmark imports: tau_omega, retrieval" in out
    assert "dry run: everything named exists and imports" in out
    assert not list((ROOT / "benchmarks" / "results").glob("gpu-check-*"))  # nothing written
