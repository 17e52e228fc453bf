"""``isokernel demo`` on a small scene: the parity table, accuracy, the
figure and the saved scene that ``isokernel run`` reads."""

from __future__ import annotations

import importlib.util
import io

import numpy as np
import pytest

from isokernel.cli import main
from isokernel.models.demo import ProgressBar, accuracy, run_demo
from isokernel.models.soil_moisture import SWEEPS


def test_demo_reports_parity_accuracy_speed_and_capsules(tmp_path):
    lines = []
    figure = tmp_path / "demo.png"
    result = run_demo(pixels=20_000, repeats=1, chunks=4, figure=str(figure),
                      echo=lines.append)
    text = "\n".join(lines)
    assert result["parity"]["reference"] == "bit-identical"
    assert result["parity"]["numpy eager"] == "bit-identical"
    assert all(v > 0 for v in result["mpixel_s"].values())
    subsets = {row[0]: row for row in result["accuracy"]}
    assert 0.002 < subsets["all pixels"][4] < 0.1  # ubRMSE, m³/m³
    mean, most, capped = result["loops"]["stage3_sweeps"]
    assert 2 < mean < most <= SWEEPS and capped < 0.01  # each pixel stops on its own
    for needle in ("parity vs reference", "Mpixel/s", "memory limit", "ubRMSE",
                   "iterations per pixel", "capsules that ran", "unavailable:"):
        assert needle in text, needle
    if importlib.util.find_spec("matplotlib") is None:
        assert result["figure"] is None and "matplotlib is not installed" in text
    else:
        assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert figure.stat().st_size > 50_000


def test_demo_can_skip_the_figure_and_save_the_scene(tmp_path, capsys):
    pytest.importorskip("xarray")
    scene = tmp_path / "scene.nc"
    assert main(["demo", "--pixels", "5000", "--repeats", "1", "--no-figure",
                 "--save-scene", str(scene)]) == 0
    assert "scene written" in capsys.readouterr().out
    out = tmp_path / "retrieved.nc"
    assert main(["run", "soil-moisture", str(scene), str(out), "--no-progress"]) == 0
    import xarray as xr
    with xr.open_dataset(out) as ds, xr.open_dataset(scene) as truth:
        err = (ds["mv"] - truth["mv"]).values
        assert np.nanstd(err) < 0.1 and ds["mv"].shape == truth["mv"].shape


def test_accuracy_is_unbiased_rmse():
    truth = np.array([0.1, 0.2, 0.3, 0.4])
    rows = accuracy(truth + np.array([0.01, 0.03, 0.01, 0.03]), truth, np.zeros(4))
    label, n, bias, rmse, ub = rows[0]
    assert n == 4 and abs(bias - 0.02) < 1e-15 and abs(ub - 0.01) < 1e-15
    assert abs(rmse - np.sqrt(0.02 ** 2 + 0.01 ** 2)) < 1e-15


def test_progress_bar_prints_one_final_line_off_a_terminal():
    stream = io.StringIO()
    bar = ProgressBar("reference", 4, stream=stream)
    for i in range(1, 5):
        bar.update(i)
    assert stream.getvalue().count("\n") == 1 and "4/4 chunks" in stream.getvalue()


def test_demo_and_run_take_the_stage5_flag(tmp_path, capsys):
    """``--stage5`` adds the Levenberg–Marquardt refinement (Jacobian by
    jacfwd) to the demo's candidates and to ``isokernel run``."""
    pytest.importorskip("xarray")
    scene = tmp_path / "scene.nc"
    assert main(["demo", "--pixels", "3000", "--repeats", "1", "--no-figure", "--stage5",
                 "--chunks", "2", "--save-scene", str(scene)]) == 0
    text = capsys.readouterr().out
    assert "Stages 1–5" in text and "Jacobian by jacfwd" in text and "sigma0_hh" in text
    assert "Stage 5 iterations" in text and "per-pixel while_loop" in text
    assert "parity vs reference" in text
    out = tmp_path / "refined.nc"
    assert main(["run", "soil-moisture", str(scene), str(out), "--stage5",
                 "--no-progress"]) == 0
    import xarray as xr
    with xr.open_dataset(out) as ds, xr.open_dataset(scene) as truth:
        assert "mv_stage4" in ds and "Stages 1-5" in ds["mv"].attrs["long_name"]
        before = np.nanstd((ds["mv_stage4"] - truth["mv"]).values)
        after = np.nanstd((ds["mv"] - truth["mv"]).values)
        assert after < before
    assert main(["run", "soil-moisture-forward", str(scene), str(tmp_path / "x.nc"),
                 "--stage5"]) == 2
    assert "has no Stage 5" in capsys.readouterr().err
