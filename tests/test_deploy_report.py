"""The deploy lines of ``compiled.report()`` and ``isokernel report``, and
the measured probe beside the static shape."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
from isokernel import deploy
from isokernel.cli import main
from isokernel.deploy.probe import rss_available
from isokernel.models.tau_omega import synthetic_inputs, tau_omega

TAU_OMEGA = ["report", "isokernel.models.tau_omega:tau_omega", "--strategy", "reference",
             "--shape", "mv=1000000:float32", "--shape", "vwc=1000000:float32",
             "--shape", "ts=1000000:float32"]


def test_isokernel_report_prints_shape_intensity_sizing_and_probe(capsys):
    assert main(TAU_OMEGA) == 0
    out = capsys.readouterr().out
    assert ("memory     reference: bytes(P) = 36 B + 40 B·P = 38.1 MiB at P=1000000; eager "
            "peak of 10 live buffers in tape order (a lower bound)") in out
    assert "cuda-megakernel: bytes(P) = 36 B + 20 B·P" in out
    assert "intensity  reference 0.126 flop/B (eager: 47000000 flop" in out
    assert "fused 2.35; roofline knee not known for cpu" in out
    assert "maxLive    10 buffers" in out
    budget = next(line for line in out.splitlines() if line.startswith("  budget"))
    assert "CPUs" in budget and "(scheduler affinity" in budget and "memory" in budget
    sizing = next(line for line in out.splitlines() if line.startswith("  sizing"))
    assert "block concurrency:" in sizing and "[scheduler affinity" in sizing
    assert "per-block 38.1 MiB [reference bytes(P=1000000)" in sizing
    assert "max block  largest block:" in out
    assert "probe      measured peak for a block of 1000000 rows: tracemalloc" in out


def test_measured_host_peak_is_within_twice_the_static_shape():
    args = synthetic_inputs(1_000_000, np.float32)
    compiled = ik.jit(tau_omega, strategy="reference").lower(*args).compile()
    compiled.measure(*args)
    probe = deploy.probe_of(compiled)
    assert probe.static == 36 + 40 * 1_000_000
    ratios = probe.ratios()
    assert 0.95 <= ratios["tracemalloc"] <= 2.0, probe
    if rss_available():
        assert 0.5 <= ratios["RSS"] <= 2.0, probe
    else:
        assert probe.rss is None and probe.rss_reason


def test_probe_of_a_chunked_call_measures_one_block():
    args = synthetic_inputs(100_000, np.float64)
    compiled = ik.jit(tau_omega, strategy="reference", block=25_000).lower(*args).compile()
    outs = compiled.measure(*args)
    probe = deploy.probe_of(compiled)
    assert probe.rows == 25_000 and probe.static == 72 + 80 * 25_000
    assert 0.95 <= probe.ratios()["tracemalloc"] <= 2.0
    assert np.array_equal(outs[0], ik.jit(tau_omega, strategy="reference")(*args)[0])
    text = str(compiled.report())
    assert "blocks     largest block: 25000 (operator override" in text
    assert "probe      measured peak for a block of 25000 rows" in text


def test_report_without_a_measured_run_has_no_probe():
    args = synthetic_inputs(1000, np.float64)
    report = ik.jit(tau_omega).lower(*args).compile().report()
    keys = [key for key, _ in report.extra]
    assert {"memory", "intensity", "maxLive", "budget", "sizing", "max block"} <= set(keys)
    assert "probe" not in keys


def test_report_lines_for_a_graph_without_pixels():
    compiled = ik.jit(lambda s: s * 2.0).lower(3.0).compile()
    text = str(compiled.report())
    # the weak scalar is cast to float64: three 8-byte buffers and the 8-byte constant
    assert "reference: bytes(P) = 32 B + 0 B·P; eager peak of 3 live buffers" in text
    assert "max block  no input has a pixel axis" in text and "bytes(no pixel axis)" in text


@pytest.mark.parametrize("argv", [["report", "isokernel.models.tau_omega:tau_omega",
                                   "--shape", "mv=100:float64", "--shape", "vwc=100:float64",
                                   "--shape", "ts=100:float64", "--no-run",
                                   "--strategy", "reference"]])
def test_no_run_report_still_sizes(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sizing     block concurrency" in out and "probe " not in out
