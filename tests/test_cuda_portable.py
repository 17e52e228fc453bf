"""On an NVIDIA GPU only: the numerical contracts on the device.

- portable numerics: every GPU strategy computes the CPU reference's bits
  (NaN payloads aside) on Hypothesis programs and on the forward model;
- exact table look-ups give the reference's bits; hardware look-ups stay
  within the stated tolerance (the measured figure is written to
  ``$ISOKERNEL_GPU_RESULTS/hardware-table.json``);
- ``cuda-fused`` runs each elementwise form as one kernel, bit-identical to
  ``cuda-eager``'s composition;
- with deterministic reductions, pixel-axis reductions give the CPU tree's
  bits on every GPU strategy.

``scripts/gpu-check`` runs this file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import get_strategy
from isokernel.backends.parity import bit_identical, bit_identical_but_nan
from isokernel.backends.reductions import REDUCTION_BLOCK
from isokernel.models.tau_omega import synthetic_inputs, tau_omega
from isokernel.record.portable import numerics

from .test_random_programs import frontend_only, make_inputs, programs, run_program

GPU = ("cuda-eager", "cuda-fused", "cuda-megakernel")
REASON = next((r for r in (get_strategy(s).unavailable_reason() for s in GPU) if r), None)
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no GPU strategy here: {REASON}")
VALUES = np.cos(np.linspace(0.0, 6.0, 2 * 41)).reshape(2, 41) * 50.0
TABLE = inp.Table(VALUES, -2.0, 0.25, name="wave")
HARDWARE = inp.Table(VALUES, -2.0, 0.25, name="wave-hw", mode="hardware")


def leaves(out):
    return ik.tree_flatten(out)[0]


def on_every_gpu_strategy(fn, *args, **options):
    with np.errstate(all="ignore"):
        return {s: leaves(ik.jit(fn, strategy=s, **options)(*args)) for s in GPU}


@settings(max_examples=40, deadline=None)
@given(programs())
def test_portable_programs_give_the_cpu_bits(program):
    dtype, shapes, steps, seed = program
    inputs = make_inputs(dtype, shapes, seed)
    steps = frontend_only(steps)

    def fn(*xs):
        return run_program(inp, steps, xs)
    with np.errstate(all="ignore"), numerics("portable"):
        want = leaves(run_program(inp, steps, inputs))
    for name, got in on_every_gpu_strategy(fn, *inputs, numerics="portable").items():
        for g, w in zip(got, want):
            assert bit_identical_but_nan(g, w), f"{name}: portable bits differ from the CPU's"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_portable_forward_model_gives_the_cpu_bits(dtype):
    args = synthetic_inputs(100_003, dtype)
    want = leaves(ik.jit(tau_omega, strategy="reference", numerics="portable")(*args))
    for name, got in on_every_gpu_strategy(tau_omega, *args, numerics="portable").items():
        assert all(bit_identical(g, w) for g, w in zip(got, want)), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_lookups_give_the_reference_bits(dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-4.0, 10.0, 50_000).astype(dtype)
    layer = rng.integers(-1, 3, 50_000).astype(dtype)

    def fn(v, lay):
        return TABLE.lookup(v, lay) * 2.0 + TABLE.lookup(v * 0.5, 1)
    want = ik.jit(fn, strategy="reference")(x, layer)
    for name, (got,) in on_every_gpu_strategy(fn, x, layer).items():
        assert bit_identical(got, want), name


def test_hardware_lookups_within_the_stated_tolerance():
    rng = np.random.default_rng(4)
    found = {}
    for dtype in (np.float32, np.float64):
        x = rng.uniform(-3.0, 9.0, 200_000).astype(dtype)
        layer = rng.integers(0, 2, 200_000).astype(dtype)
        got = ik.jit(lambda v, lay: HARDWARE.lookup(v, lay), strategy="cuda-eager")(x, layer)
        mega = ik.jit(lambda v, lay: HARDWARE.lookup(v, lay), strategy="cuda-megakernel")
        want = ik.jit(lambda v, lay: TABLE.lookup(v, lay), strategy="reference")(x, layer)
        step = float(np.max(np.abs(np.diff(VALUES, axis=1))))
        error = float(np.max(np.abs(got.astype(np.float64) - want)))
        found[np.dtype(dtype).name] = {"max_abs_error": error, "largest_step": step,
                                       "error_in_steps": error / step,
                                       "stated_steps": 1 / 256}
        assert bit_identical(mega(x, layer), got)  # the same texture kernel on both
        assert error <= step / 256 + 2e-6 * float(np.max(np.abs(VALUES)))
    folder = os.environ.get("ISOKERNEL_GPU_RESULTS")
    if folder:
        Path(folder, "hardware-table.json").write_text(json.dumps(found, indent=2))


def _forms(x, y):
    return (inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y) + inp.exp(-1.5 * x ** 2)
            + inp.exp(0.25 - 0.75 * x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_form_is_one_kernel_with_the_composition_bits(dtype):
    rng = np.random.default_rng(5)
    x, y = (rng.uniform(0.1, 2.0, 300_000).astype(dtype) for _ in range(2))
    runs = on_every_gpu_strategy(_forms, x, y)
    assert bit_identical(runs["cuda-fused"][0], runs["cuda-eager"][0])
    assert bit_identical(runs["cuda-megakernel"][0], runs["cuda-eager"][0])
    compiled = ik.jit(_forms, strategy="cuda-fused").lower(x, y).compile()
    compiled(x, y)
    assert "4 form call(s) as one kernel" in dict(compiled.report().extra)["forms"]


def _pixel_reductions(x, w):
    return (inp.sum(x * w[:, None], axis=0), inp.max(x), inp.sum(x, axis=(0, 1)) * 2.0,
            inp.mean(w), inp.prod(1.0 + 1e-4 * w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deterministic_reductions_give_the_cpu_tree_bits(dtype):
    rng = np.random.default_rng(8)
    rows = 40 * REDUCTION_BLOCK + 77
    x = (rng.standard_normal((rows, 3)) * 10.0 ** rng.integers(-2, 3, (rows, 3))).astype(dtype)
    w = rng.uniform(-1, 1, rows).astype(dtype)
    want = leaves(ik.jit(_pixel_reductions, strategy="reference",
                         deterministic_reductions=True)(x, w))
    runs = on_every_gpu_strategy(_pixel_reductions, x, w, deterministic_reductions=True)
    for name, got in runs.items():
        assert all(bit_identical(g, t) for g, t in zip(got, want)), name
