"""On an NVIDIA GPU only (skipped elsewhere with the reason): the contracts
of the GPU strategies measured on the device.

- ``cuda-megakernel`` and ``cuda-fused`` are bit-identical to ``cuda-eager``
  on Hypothesis programs, and the megakernel on the science models;
- both meet ``reference`` bit for bit on basic operations (NaN payloads
  aside: a GPU makes its own NaNs), and within the stated ulp bound on
  every transcendental (the measured maxima are written to
  ``$ISOKERNEL_GPU_RESULTS/ulp.json`` when that directory is set);
- sums of contiguous operands give NumPy's bits; float32 subnormals are kept;
- device arrays stay on the device; the allocator's cap works in fresh
  processes (finite, unbounded, malformed, overflowing); compiled kernels
  come from the disk cache; a block size beyond a kernel's limit is refused.

``scripts/gpu-check`` runs this file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import get_strategy
from isokernel.backends.numerics import CUDA_ULP_BOUND as ULP_BOUND
from isokernel.backends.parity import bit_identical, bit_identical_but_nan, max_ulp
from isokernel.ir import Op
from isokernel.ir.ops import TRANSCENDENTAL
from isokernel.models.tau_omega import synthetic_inputs, tau_omega

from .test_native import DOMAINS, _binary_bank, _sample, _unary_bank
from .test_random_programs import make_inputs, programs, run_program

REASON = (get_strategy("cuda-eager").unavailable_reason()
          or get_strategy("cuda-megakernel").unavailable_reason())
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no GPU strategy here: {REASON}")
ROOT = Path(__file__).resolve().parent.parent


def _record(name: str, data) -> None:
    folder = os.environ.get("ISOKERNEL_GPU_RESULTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        Path(folder, f"{name}.json").write_text(json.dumps(data, indent=2, default=str))


def both(fn, *args, **options):
    with np.errstate(all="ignore"):
        eager = ik.jit(fn, strategy="cuda-eager")(*args)
        mega = ik.jit(fn, strategy="cuda-megakernel", **options)(*args)
    return ik.tree_flatten(eager)[0], ik.tree_flatten(mega)[0]


def fused(fn, *args):
    with np.errstate(all="ignore"):
        return ik.tree_flatten(ik.jit(fn, strategy="cuda-fused")(*args))[0]


@settings(max_examples=40, deadline=None)
@given(programs())
def test_eager_fused_and_megakernel_agree_and_basic_ops_equal_the_reference(program):
    dtype, shapes, steps, seed = program
    inputs = make_inputs(dtype, shapes, seed)

    def fn(*xs):
        return run_program(inp, steps, xs)
    eager, mega = both(fn, *inputs)
    forms = fused(fn, *inputs)
    with np.errstate(all="ignore"):
        want = ik.tree_flatten(ik.jit(fn, strategy="reference")(*inputs))[0]
        graph = ik.trace(fn, *inputs)
    for e, f, m, w in zip(eager, forms, mega, want):
        # NaN payloads aside: the compiler may fold sign operations into a NaN-producing op
        assert bit_identical_but_nan(e, m), "cuda-megakernel differs from cuda-eager"
        assert bit_identical_but_nan(e, f), "cuda-fused differs from cuda-eager"
        if not graph.ops() & TRANSCENDENTAL:
            assert bit_identical_but_nan(e, w), "basic operations differ from the reference"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendentals_within_the_stated_bound(dtype):
    rng = np.random.default_rng(7)
    xs = [_sample(lo, hi, dtype, rng) for _, lo, hi in DOMAINS.values()]
    two = [rng.uniform(0, 10, 40000), rng.uniform(-30, 30, 40000),
           rng.uniform(-10, 10, 40000), rng.uniform(-10, 10, 40000)]
    two = [t.astype(dtype) for t in two]
    measured = {}
    for bank, args, ops in ((_unary_bank, xs, list(DOMAINS)),
                            (_binary_bank, two, [Op.POW, Op.ATAN2])):
        eager, mega = both(bank, *args)
        with np.errstate(all="ignore"):
            want = ik.jit(bank, strategy="reference")(*args)
        for op, e, m, w in zip(ops, eager, mega, want):
            assert bit_identical(e, m), f"{op.value}: megakernel differs from eager"
            measured[op.value] = max_ulp(e, w)
    _record(f"ulp-{np.dtype(dtype).name}", {"measured": measured,
                                            "stated": {k.value: v for k, v in ULP_BOUND.items()}})
    over = {op: (ulp, ULP_BOUND[Op(op)]) for op, ulp in measured.items()
            if ulp > ULP_BOUND[Op(op)]}
    assert over == {}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_models_run_bit_identical_on_both(dtype):
    from isokernel.models.soil_moisture import retrieve, scene_inputs
    from isokernel.models.soil_moisture.scene import generate_scene
    args = synthetic_inputs(200_003, dtype)
    eager, mega = both(tau_omega, *args)
    want = ik.jit(tau_omega, strategy="reference")(*args)
    for e, m, w in zip(eager, mega, want):
        assert bit_identical(e, m)
        assert max_ulp(e, w) <= ULP_BOUND[Op.EXP] + 3
    scene = generate_scene(50_000, seed=1, noise=False)
    args = scene_inputs(scene, np.dtype(dtype).name)
    eager, mega = both(retrieve, *args)
    assert all(bit_identical(e, m) for e, m in zip(eager, mega))
    mv = ik.jit(retrieve, strategy="cuda-megakernel")(*args)["mv"]
    assert np.max(np.abs(mv - scene["mv"])) <= (1e-5 if dtype == np.float64 else 1e-4)


def test_whole_programs_are_the_reference_bits_on_the_device():
    """Loops around launches (tests/test_cuda_programs.py on the device): a
    stencil, its gradient, a Krylov solve, a training gradient, nested loops
    and a switch, basic operations only, bit for bit on both strategies."""
    from .test_cuda_programs import CASES
    for name, (fn, make) in sorted(CASES.items()):
        args = make()
        eager, mega = both(fn, *args)
        want = ik.tree_flatten(ik.jit(fn, strategy="reference")(*args))[0]
        for e, m, w in zip(eager, mega, want):
            assert bit_identical(e, m) and bit_identical_but_nan(m, w), name


@pytest.mark.parametrize("shape,axes", [((10_000_019,), (0,)), ((3000, 1000), (1,)),
                                        ((3000, 1000), (0,)), ((64, 50, 70), (0, 2))])
def test_sums_of_contiguous_operands_give_numpys_bits(shape, axes):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    got, = both(lambda v: inp.sum(v, axis=axes), x)[0]
    assert bit_identical(got, np.sum(x, axis=axes))


def test_float32_subnormals_are_kept():
    x = (np.arange(1, 1001, dtype=np.float32) * np.float32(1e-42))  # subnormal
    got, = both(lambda v: v * 0.5 + v, x)[1]
    assert bit_identical(got, x * np.float32(0.5) + x) and np.all(got != 0)


def test_device_arrays_stay_on_the_device_and_host_arrays_come_back():
    import cupy
    args = synthetic_inputs(10_000, np.float32)
    f = ik.jit(tau_omega, strategy="cuda-megakernel")
    on_device = f(*(cupy.asarray(a) for a in args))
    assert all(isinstance(o, cupy.ndarray) for o in on_device)
    on_host = f(*args)
    assert all(type(o) is np.ndarray for o in on_host)
    assert bit_identical(on_device[0].get(), on_host[0])
    report = str(f.lower(*args).compile().report())
    assert "cuda-megakernel on cuda" in report and "--fmad=false" in report


CAP_PROBE = textwrap.dedent("""
    import json, warnings
    import numpy as np, cupy, isokernel as ik
    from isokernel.backends.cuda.runtime import allocator_stats
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = ik.jit(lambda a, b: (a * b + 1.0) / b, strategy="cuda-eager")
        for n in (100_000, 200_000, 300_000, 400_000):
            x = cupy.ones(n, dtype=cupy.float64)
            f(x, x)
    s = allocator_stats()
    print(json.dumps({"cap": s.cap_bytes, "cached": s.cache_bytes, "frees": s.frees,
                      "source": s.cap_source,
                      "warnings": [str(w.message) for w in caught
                                   if type(w.message).__name__ == "CacheCapWarning"],
                      "report": s.format()}))
""")


@pytest.mark.parametrize("value,cap,warns", [("1048576", 1048576, False), ("0", 0, False),
                                             ("512MB", 0, True),
                                             ("99999999999999999999999", 0, True)])
def test_the_cache_cap_in_a_fresh_process(value, cap, warns):
    env = dict(os.environ, ISOKERNEL_CUDA_CACHE_CAP_BYTES=value,
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", CAP_PROBE], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cap"] == cap and bool(found["warnings"]) == warns
    if cap:
        assert found["cached"] <= cap and found["frees"] > 0
    else:
        assert found["frees"] == 0
    assert "cudaMemGetInfo" in found["report"]


def test_kernels_come_from_the_disk_cache(tmp_path, monkeypatch):
    from isokernel.backends.cuda.runtime import runtime
    from isokernel.codegen import cuda, nvrtc
    monkeypatch.setenv("ISOKERNEL_CUDA_CACHE_DIR", str(tmp_path))
    rt = runtime()
    source = cuda.cuda_source(ik.trace(lambda x: x * 3.0 + 1.0, np.ones(8, np.float32)))
    first = nvrtc.compile_cuda(source, rt.arch, cuda.nvrtc_options(), rt.nvrtc)
    again = nvrtc.compile_cuda(source, rt.arch, cuda.nvrtc_options(), rt.nvrtc)
    assert not first.cached and again.cached and again.data == first.data


def test_a_block_size_beyond_the_kernels_limit_is_refused():
    from isokernel.backends.cuda.runtime import LaunchError
    x = np.ones(1000, np.float64)
    with pytest.raises(LaunchError, match="compiled limit is"):
        ik.jit(lambda v: v * 2.0, strategy="cuda-megakernel", block_size=4096)(x)
    small = ik.jit(lambda v: v * 2.0, strategy="cuda-megakernel", block_size=64)(x)
    assert bit_identical(small, x * 2.0)


def test_contraction_on_is_recorded():
    args = synthetic_inputs(100_000, np.float64)
    f = ik.jit(tau_omega, strategy="cuda-megakernel", fma=True)
    got = f(*args)
    want = ik.jit(tau_omega, strategy="cuda-eager")(*args)
    assert all(max_ulp(g, w) <= 64 for g, w in zip(got, want))
    text = str(f.lower(*args).compile().report())
    assert "--fmad=true" in text and "cuda-region-fma" in text


def test_allocator_telemetry_follows_live_buffers():
    import cupy

    from isokernel.backends.cuda.runtime import allocator_stats
    f = ik.jit(lambda a: a * 2.0 + 1.0, strategy="cuda-eager")
    x = cupy.ones(1_000_000, dtype=cupy.float64)
    before = allocator_stats().live_bytes
    out = f(x)
    during = allocator_stats().live_bytes
    del out
    after = allocator_stats()
    assert during - before >= 8_000_000 and after.live_bytes <= during - 8_000_000
    assert after.cache_bytes > 0 and "cudaMemGetInfo" in after.format()
