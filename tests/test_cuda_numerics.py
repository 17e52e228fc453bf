"""The numerical contracts on the GPU strategies, through the host-emulated
runtime (``tests/cuda_host.py``): exact table look-ups and portable numerics
give the reference's bits, ``cuda-fused`` runs a kernel per fused form with
the composition's bits, hardware look-ups stay within their stated
tolerance, and pixel-axis reductions follow the deterministic tree when
asked. On a GPU, ``tests/test_cuda_portable.py`` checks the same on the
device."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends import get_strategy
from isokernel.backends.cuda.eager import CudaEagerExecutable
from isokernel.backends.cuda.fused import CudaFusedExecutable
from isokernel.backends.cuda.megakernel import CudaMegakernelExecutable
from isokernel.backends.parity import bit_identical, bit_identical_but_nan
from isokernel.backends.reductions import REDUCTION_BLOCK
from isokernel.codegen import cuda
from isokernel.ir import Op
from isokernel.record.portable import numerics
from isokernel.transforms import prepare_for_execution

from .cuda_host import HostRuntime

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"host C compiler: {codegen.unavailable_reason()}")
VALUES = np.cos(np.linspace(0.0, 6.0, 2 * 41)).reshape(2, 41) * 50.0
TABLE = inp.Table(VALUES, -2.0, 0.25, name="wave")
HARDWARE = inp.Table(VALUES, -2.0, 0.25, name="wave-hw", mode="hardware")

EXECUTABLES = {"cuda-eager": CudaEagerExecutable, "cuda-fused": CudaFusedExecutable,
               "cuda-megakernel": CudaMegakernelExecutable}


def build(name, fn, *args, runtime=None, numerics_mode="native", **options):
    """The strategy's executable built as ``jit`` builds it (prepare, plan
    once, build), on the emulated runtime."""
    spec = get_strategy(name)
    with numerics(numerics_mode):
        graph = spec.prepare(prepare_for_execution(ik.trace(fn, *args)))
    rt = runtime or HostRuntime()
    return EXECUTABLES[name](spec.plan(graph, options), runtime=rt, **options)


def reference(fn, *args, numerics_mode="native", **options):
    out = ik.jit(fn, strategy="reference", numerics=numerics_mode, **options)(*args)
    return out if isinstance(out, tuple) else (out,)


def _lookups(x, layer):
    return TABLE.lookup(x, layer) * 2.0 + TABLE.lookup(x * 0.5, 1)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(EXECUTABLES))
def test_exact_lookups_are_the_reference_bits(name, dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-4.0, 10.0, 5000).astype(dtype)
    x[:3] = [np.nan, -np.inf, np.inf]
    layer = rng.integers(-1, 3, 5000).astype(dtype)
    got = build(name, _lookups, x, layer)(x, layer)
    assert bit_identical_but_nan(got[0], reference(_lookups, x, layer)[0])


def test_tables_live_in_device_memory_in_the_cuda_source():
    x = np.zeros(8, np.float32)
    source = codegen.cuda_source(ik.trace(lambda v: TABLE.lookup(v, 0), x))
    assert "static __device__ const float isk_tab_" in source and "isk_lookup_f32(" in source
    assert "static const float" not in source


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hardware_lookups_stay_within_the_stated_tolerance(dtype):
    """The emulation filters as the texture unit does (8-bit fraction);
    the stated bound is |v[i+1] − v[i]|/256 plus float32 rounding."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-3.0, 9.0, 20000).astype(dtype)
    layer = rng.integers(0, 2, 20000).astype(dtype)
    exe = build("cuda-eager", lambda v, lay: HARDWARE.lookup(v, lay), x, layer)
    (got,) = exe(x, layer)
    (want,) = reference(lambda v, lay: TABLE.lookup(v, lay), x, layer)
    step = np.max(np.abs(np.diff(VALUES, axis=1)))
    error = np.max(np.abs(got.astype(np.float64) - want))
    assert 0 < error <= step / 256 + 1e-5 * np.max(np.abs(VALUES))
    assert {c.provider for c, _ in exe.plan.capsule_counts()} >= {"cuda-texture"}


def _forms(x, y):
    return (inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y) + inp.exp(-1.5 * x ** 2)
            + inp.exp(0.25 - 0.75 * x))


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_fused_runs_each_form_as_one_kernel_with_the_composition_bits(dtype):
    """Kernels compiled for the host on both sides (scalar libm), so the
    exponentials agree too: the form kernel is the composition."""
    rng = np.random.default_rng(5)
    x, y = (rng.uniform(0.1, 2.0, 3000).astype(dtype) for _ in range(2))
    rt = HostRuntime(compile_elementwise=True)
    fused = build("cuda-fused", _forms, x, y, runtime=rt)
    eager = build("cuda-eager", _forms, x, y, runtime=rt)
    assert bit_identical(fused(x, y)[0], eager(x, y)[0])
    assert fused.ex.forms_as_kernels == 4 and eager.ex.forms_as_kernels == 0
    providers = {c.provider for c, _ in fused.plan.capsule_counts()}
    assert "cuda-fused-form" in providers
    assert "4 form call(s) as one kernel" in dict(fused.report_lines())["forms"]


@needs_cc
def test_a_form_that_is_not_one_row_region_runs_as_its_composition():
    x = np.random.default_rng(6).uniform(-3, 3, (400, 30))
    fused = build("cuda-fused", lambda v: inp.logsumexp(v, axis=-1), x)
    (got,) = fused(x)
    assert bit_identical(got, reference(lambda v: inp.logsumexp(v, axis=-1), x)[0])
    assert fused.ex.forms_as_composition == 1


@needs_cc
@pytest.mark.parametrize("name", sorted(EXECUTABLES))
def test_portable_numerics_give_the_reference_bits(name):
    """Every transcendental recorded as basic operations, ldexp and logb:
    the shared C body computes the reference's bits."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.05, 3.0, 4001).astype(np.float32)

    def model(v):
        return inp.exp(v) * inp.log(v) + inp.sin(3.0 * v) / inp.cosh(v) + inp.arctan2(v, 1.5)
    got = build(name, model, x, numerics_mode="portable")(x)
    want = reference(model, x, numerics_mode="portable")
    assert bit_identical_but_nan(got[0], want[0])


def _pixel_sums(x, w):
    return inp.sum(x * w[:, None], axis=0), inp.max(x), inp.sum(x, axis=(0, 1)) * 2.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_reductions_give_the_reference_tree_bits(dtype):
    rng = np.random.default_rng(8)
    rows = 3 * REDUCTION_BLOCK + 77
    x = (rng.standard_normal((rows, 3)) * 10.0 ** rng.integers(-2, 3, (rows, 3))).astype(dtype)
    w = rng.uniform(-1, 1, rows).astype(dtype)
    want = reference(_pixel_sums, x, w, deterministic_reductions=True)
    default = reference(_pixel_sums, x, w)
    for name in EXECUTABLES:
        exe = build(name, _pixel_sums, x, w, reductions="tree")
        got = exe(x, w)
        assert all(bit_identical(g, t) for g, t in zip(got, want)), name
    assert not bit_identical(want[0], default[0])  # the tree is another order


def test_new_kernels_are_generated_for_every_dtype():
    for dtype in (np.float32, np.float64):
        assert "tex2D<float>" in cuda.texture_kernel(dtype).source
        assert "_halving" in cuda.halving_kernels(Op.REDUCE_SUM, dtype).source
        for op in (Op.LDEXP, Op.COPYSIGN):
            cuda.elementwise_kernel(op, {}, (dtype, dtype), dtype, "vv")
        cuda.elementwise_kernel(Op.LOGB, {}, (dtype,), dtype, "v")
