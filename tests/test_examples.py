"""The README's example program runs and says what the README says."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

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


def _last_figure(stdout: str, prefix: str) -> float:
    line = next(x for x in stdout.splitlines() if x.startswith(prefix))
    return float(line[len(prefix):].split()[0])


def test_pinn_poisson_quick_reaches_its_error_bound():
    """32 points, 300 Adam and 60 L-BFGS steps: relative L2 error <= 1e-2
    (measured 1.0e-3; the untrained network's is about 1)."""
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "pinn_poisson.py"), "--quick"],
                         capture_output=True, text=True, check=True, timeout=300)
    error = _last_figure(run.stdout, "relative L2 error against sin(pi x): ")
    assert error <= 1e-2, run.stdout


def test_mlp_digits_quick_reaches_its_accuracy_bound():
    """10 epochs of a 64-32-32-10 MLP: test accuracy >= 0.90 (measured 0.93;
    chance is 0.10)."""
    pytest.importorskip("sklearn", reason="the digits data set needs scikit-learn "
                                          "(pip install 'isokernel[examples]')")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "mlp_digits.py"), "--quick"],
                         capture_output=True, text=True, check=True, timeout=300)
    assert _last_figure(run.stdout, "test accuracy: ") >= 0.90, run.stdout


def test_spectral_burgers_matches_the_cole_hopf_solution():
    """The pseudo-spectral solve (inp.fft inside odeint, jitted) agrees with
    the exact solution to 1e-9 (measured 7.6e-12)."""
    pytest.importorskip("scipy")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "spectral_burgers.py")],
                         capture_output=True, text=True, check=True, timeout=300)
    error = _last_figure(run.stdout, "max error against the Cole-Hopf solution: ")
    assert error <= 1e-9, run.stdout


def test_cluster_example_prints_the_batch_script_of_single_thread_workers():
    """dask-jobqueue renders the SLURM script of one job without submitting
    it: 4 worker processes of one thread each on 4 cores."""
    pytest.importorskip("dask_jobqueue", reason="pip install 'isokernel[hpc]'")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "cluster_run.py"),
                          "--job-script", "--cores", "4", "--memory", "8GB",
                          "--host", "127.0.0.1", "--queue", "normal"],
                         capture_output=True, text=True, check=True, timeout=120)
    script = run.stdout
    assert "#SBATCH -p normal" in script and "#SBATCH --cpus-per-task=4" in script
    assert "--nthreads 1" in script and "--nworkers 4" in script


def test_cluster_example_runs_a_scene_on_a_local_cluster(tmp_path):
    """The example's --local path: the scene on a one-worker LocalCluster,
    the bits of the same run in this process."""
    pytest.importorskip("xarray")
    pytest.importorskip("dask.distributed")
    import xarray as xr

    from isokernel.models import soil_moisture as sm
    from isokernel.scenes import run as run_scene
    from isokernel.scenes import write_scene

    grid = sm.Grid(32 * 24, 32)
    scene = str(tmp_path / "scene.nc")
    write_scene(scene, sm.generate_scene(grid.pixels, seed=3), grid, echo=lambda *a: None)
    out = str(tmp_path / "cluster.nc")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "cluster_run.py"), scene,
                           out, "--local", "1"], capture_output=True, text=True, check=True,
                          timeout=300)
    assert done.stdout.splitlines()[-1].startswith(f"wrote {out} on 1 local worker(s)")
    here = str(tmp_path / "here.nc")
    run_scene("soil-moisture", scene, here, progress=False, echo=lambda *a: None)
    with xr.open_dataset(out) as a, xr.open_dataset(here) as b:
        assert a["mv"].values.tobytes() == b["mv"].values.tobytes()
