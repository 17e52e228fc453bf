"""CUDA source without a GPU: golden .cu files, NVRTC compiles for sm_80 and
sm_90 (every op and dtype, every reduction, the golden models, Hypothesis
programs), contraction visible in the PTX, and the on-disk cache."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
from isokernel import codegen
from isokernel.codegen import cuda, nvrtc
from isokernel.codegen.emit import Unsupported
from isokernel.ir import Op, dtypes
from isokernel.ir.ops import COMPARE, ELEMENTWISE, LOGICAL, REDUCE
from isokernel.ir.shapes import BOOL_ONLY, FLOAT_ONLY

from .conftest import NVRTC_ARCHS, compile_everywhere, nvrtc_or_skip
from .test_codegen import _examples, _models
from .test_random_programs import make_inputs, programs, run_program

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ISOKERNEL_UPDATE_GOLDEN") == "1"
ALL_DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.bool_)


@pytest.fixture(scope="module")
def compiler():
    return nvrtc_or_skip()


def golden_cuda(name: str) -> str:
    graph = ik.trace(getattr(_models(), name), *_examples()[name])
    return codegen.cuda_source(graph)


@pytest.mark.parametrize("name", sorted(_examples()))
def test_cuda_source_matches_golden_file(name):
    path = GOLDEN / f"{name}.cu"
    text = golden_cuda(name)
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"regenerate with ISOKERNEL_UPDATE_GOLDEN=1 ({path})"


@pytest.mark.parametrize("name", sorted(_examples()))
def test_golden_cuda_compiles_for_sm80_and_sm90(name, compiler):
    assert compile_everywhere([golden_cuda(name)], compiler) == []


def test_cuda_wraps_the_very_c_body():
    """The region function of the .cu file is the C body of the CPU
    strategy, character for character; the wrapper is a grid-stride loop
    with 64-bit indices and __restrict__ pointers."""
    cu, c = (GOLDEN / "forward.cu").read_text(), (GOLDEN / "forward.c").read_text()
    body = c[c.index("ISK_INLINE void"):c.index("\n}\n") + 3]
    assert body in cu
    assert "#define restrict __restrict__" in cu
    assert "for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows;" in cu
    assert 'extern "C" __global__ void isk_forward_r0(' in cu
    assert "--fmad=false" in cu.splitlines()[1] and "--ftz=false" in cu.splitlines()[1]


def test_cuda_wraps_the_very_c_body_with_its_loops():
    """Rows beyond the unrolling cap: the loops and arrays of the C body,
    character for character; static index maps in device memory."""
    cu, c = (GOLDEN / "spectra.cu").read_text(), (GOLDEN / "spectra.c").read_text()
    start = c.index("ISK_INLINE void")
    body = c[start:c.index("\n}\n", start) + 3]
    assert body in cu and "for (int64_t k = 0; k < 100; k++) {" in body
    assert "static __device__ const int32_t isk_idx_" in cu


def test_cuda_source_is_public_and_records_the_contraction():
    graph = ik.trace(lambda a, b, c: a * b + c, *[np.ones(4, np.float32)] * 3)
    off, on = ik.codegen.cuda_source(graph), ik.codegen.cuda_source(graph, contract=True)
    assert "--fmad=false" in off and "--fmad=true" in on
    assert off.split("\n", 3)[3] == on.split("\n", 3)[3]  # only the recorded options differ


def test_ops_between_regions_are_named_in_the_source():
    graph = ik.trace(lambda x: ik.numpy.sum(ik.numpy.exp(x)) * x, np.ones(64))
    source = codegen.cuda_source(graph)
    assert "between the kernels" in source and "reduce_sum" in source
    assert source.count("__global__") == 2  # exp before the sum, the product after it


# --- contraction in the PTX ---------------------------------------------------------------

def _ptx(fn, dtype, contract, compiler) -> str:
    graph = ik.trace(fn, *[np.ones(16, dtype)] * 4)
    source = codegen.cuda_source(graph, contract)
    return nvrtc.compile_cuda(source, "compute_80", cuda.nvrtc_options(contract), compiler).ptx


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ptx_has_no_fma_with_contraction_off_and_has_one_with_it_on(dtype, compiler):
    """``--fmad=false``: every product and sum carries an explicit rounding
    (``mul.rn``, which ptxas never fuses) and no ``fma`` appears;
    ``--fmad=true`` fuses ``a*b + c`` into ``fma.rn``."""
    width = "f32" if dtype == np.float32 else "f64"
    off = _ptx(lambda a, b, c, d: a * b + c * d + a, dtype, False, compiler)
    on = _ptx(lambda a, b, c, d: a * b + c * d + a, dtype, True, compiler)
    assert "fma" not in off
    assert re.search(rf"\bmul\.rn\.{width}\b", off) and re.search(rf"\badd\.rn\.{width}", off)
    assert re.search(rf"\bfma\.rn\.{width}\b", on)


def test_a_shared_product_is_never_fused_with_contraction_off(compiler):
    off = _ptx(lambda a, b, c, d: (a * b + c, a * b - c * d), np.float32, False, compiler)
    assert "fma" not in off and not re.search(r"\bmul\.f32\b", off)  # only mul.rn.f32


# --- every op, every dtype, every reduction -----------------------------------------------

def _valid(op: Op, dtype) -> bool:
    if op in FLOAT_ONLY:
        return dtype in dtypes.FLOATS
    if op in BOOL_ONLY:
        return dtype == dtypes.bool_
    if op in COMPARE or op is Op.SELECT:
        return True
    return dtype != dtypes.bool_


def _one_op_kernels():
    found = []
    for op in sorted(ELEMENTWISE, key=lambda o: o.value):
        arity = 3 if op is Op.SELECT else (1 if op in ELEMENTWISE - _binary() else 2)
        for dtype in ALL_DTYPES:
            if not _valid(op, dtype):
                continue
            targets = ALL_DTYPES if op is Op.CAST else (dtype,)
            for out in targets:
                found += _kernels_for(op, dtype, out, arity)
    return found


def _binary():
    from isokernel.ir.ops import BINARY
    return BINARY | {Op.SELECT}


def _kernels_for(op, dtype, out, arity):
    operands = (dtypes.bool_, dtype, dtype) if op is Op.SELECT else (dtype,) * arity
    if op in COMPARE or (op in LOGICAL and op is not Op.NOT):
        out = dtypes.bool_
    attrs = {"dtype": out} if op is Op.CAST else {}
    kinds = ["v" * arity, "v" * (arity - 1) + "s"] if arity > 1 else ["v"]
    kernels = []
    for k in kinds:
        try:
            kernels.append(cuda.elementwise_kernel(op, attrs, operands, out, k))
        except Unsupported:
            pass  # no exact C form (integer power): the strategies refuse it at build time
    return kernels


def test_every_op_and_dtype_has_a_kernel_that_compiles(compiler):
    kernels = _one_op_kernels()
    assert len(kernels) > 150
    assert compile_everywhere([k.source for k in kernels], compiler) == []


def test_reduction_kernels_compile_for_every_op_and_dtype(compiler):
    sources = [cuda.reduction_kernels(op, dtype).source
               for op in sorted(REDUCE, key=lambda o: o.value)
               for dtype in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64)]
    sources.append(cuda.reduction_kernels(Op.REDUCE_MAX, dtypes.bool_).source)
    assert compile_everywhere(sources, compiler) == []


def test_numerical_contract_kernels_compile(compiler):
    """Exact table look-ups (tables in device memory), ldexp/logb/copysign,
    a fused form's kernel, the deterministic tree's level and the texture
    look-up, in both float dtypes."""
    from isokernel.transforms.fusion import fuse
    table = ik.numpy.Table(np.cos(np.arange(14.0)).reshape(2, 7), -3.0, 0.75, name="c")
    sources = []
    for dtype in (np.float32, np.float64):
        x = np.ones(16, dtype)
        graph = ik.trace(lambda v: (table.lookup(v, 1), ik.numpy.exp(-1.5 * v ** 2)), x)
        sources.append(codegen.cuda_source(graph))
        fused = fuse(ik.trace(lambda v: ik.numpy.exp(-1.5 * v ** 2), x))
        node = next(n for n in fused.nodes if n.op is Op.FUSED)
        sources.append(cuda.fused_module(node).source)
        sources += [cuda.halving_kernels(op, dtype).source for op in REDUCE]
        sources.append(cuda.texture_kernel(dtype).source)
        sources += [cuda.elementwise_kernel(op, {}, (dtype,) * k, dtype, "v" * k).source
                    for op, k in ((Op.LDEXP, 2), (Op.LOGB, 1), (Op.COPYSIGN, 2))]
    assert compile_everywhere(sources, compiler) == []


def test_the_tau_omega_model_compiles_with_contraction_on(compiler):
    from isokernel.models.tau_omega import tau_omega
    graph = ik.trace(tau_omega, *[np.ones(8, np.float64)] * 3)
    assert compile_everywhere([codegen.cuda_source(graph, contract=True)], compiler) == []


@settings(max_examples=40)
@given(programs())
def test_hypothesis_programs_compile(program):
    """Random programs (the generator of test_random_programs) as megakernel
    sources; NVRTC compiles each for sm_80 here and both architectures when
    the session ends."""
    dtype, shapes, steps, seed = program
    inputs = make_inputs(dtype, shapes, seed)
    with np.errstate(all="ignore"):
        graph = ik.trace(lambda *xs: run_program(ik.numpy, steps, xs), *inputs)
    source = codegen.cuda_source(graph)
    found = nvrtc.find_nvrtc(("cuda-bindings", "cupy"))
    if found is not None:
        nvrtc.compile_cuda(source, NVRTC_ARCHS[0], cuda.nvrtc_options(), found)


# --- the cache ----------------------------------------------------------------------------

def test_cache_is_keyed_by_source_arch_version_and_options(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("ISOKERNEL_CUDA_CACHE_DIR", str(tmp_path))
    source = cuda.elementwise_kernel(Op.ADD, {}, (np.float32,) * 2, np.float32, "vv").source
    first = nvrtc.compile_cuda(source, "sm_80", cuda.nvrtc_options(), compiler)
    again = nvrtc.compile_cuda(source, "sm_80", cuda.nvrtc_options(), compiler)
    other = nvrtc.compile_cuda(source, "sm_90", cuda.nvrtc_options(), compiler)
    fma = nvrtc.compile_cuda(source, "sm_80", cuda.nvrtc_options(True), compiler)
    assert not first.cached and again.cached and again.data == first.data
    assert len({first.key, other.key, fma.key}) == 3
    assert f"{compiler.version[0]}.{compiler.version[1]}" in compiler.name
    names = {p.name for p in tmp_path.iterdir()}
    assert {f"{first.key}.cubin", f"{first.key}.sha256", f"{first.key}.cu"} <= names
    assert not [n for n in names if n.endswith(".tmp")]


def test_corrupted_cache_entry_is_compiled_again(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("ISOKERNEL_CUDA_CACHE_DIR", str(tmp_path))
    source = cuda.elementwise_kernel(Op.SUB, {}, (np.float64,) * 2, np.float64, "vv").source
    first = nvrtc.compile_cuda(source, "sm_90", cuda.nvrtc_options(), compiler)
    first.path.write_bytes(first.data[:64])
    again = nvrtc.compile_cuda(source, "sm_90", cuda.nvrtc_options(), compiler)
    assert not again.cached and again.data == first.data


def test_rejected_source_names_the_emitter_and_keeps_the_file(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("ISOKERNEL_CUDA_CACHE_DIR", str(tmp_path))
    with pytest.raises(nvrtc.NvrtcError, match="bug in isokernel's CUDA emitter") as err:
        nvrtc.compile_cuda("this is not CUDA", "sm_80", cuda.nvrtc_options(), compiler)
    assert "rejected-" in str(err.value) and list(tmp_path.glob("rejected-*.cu"))
