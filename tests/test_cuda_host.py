"""The GPU executables driven through a host-emulated runtime
(``tests/cuda_host.py``): the plumbing of cuda-eager and cuda-megakernel
(arguments, layouts, reductions, the region split, buffer release, launch
shapes, refusals, reports) checked in CI without a GPU. Region kernels run
the very C body of the CUDA source on the host, so IEEE basic operations
must give the reference's bits here exactly as they must on the GPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends import cuda as cuda_pkg
from isokernel.backends import get_strategy
from isokernel.backends.cuda.capsules import PROVIDERS as EAGER_PROVIDERS
from isokernel.backends.cuda.eager import CudaEagerExecutable
from isokernel.backends.cuda.executor import CUPY
from isokernel.backends.cuda.fused import fuse_pairs
from isokernel.backends.cuda.megakernel import CudaMegakernelExecutable
from isokernel.backends.cuda.namespace import DeviceNamespace
from isokernel.backends.cuda.runtime import LaunchError, architecture, launch_shape
from isokernel.backends.numerics import CUDA_ULP_BOUND as ULP_BOUND
from isokernel.backends.parity import bit_identical, bit_identical_but_nan, max_ulp
from isokernel.ir import EVAL, Op
from isokernel.ir.eval import EVAL_XP, NUMPY, ArrayNamespace
from isokernel.ir.ops import CONTROL, LEAF, PROJECTION, TRANSCENDENTAL, TRANSFORM_ONLY
from isokernel.models.tau_omega import synthetic_inputs, tau_omega
from isokernel.transforms import prepare_for_execution
from isokernel.transforms.complex_pairs import pairs

from .cuda_host import HostRuntime
from .test_random_programs import make_inputs, programs, run_program

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"host C compiler: {codegen.unavailable_reason()}")


def executables(fn, *args, runtime=None, **options):
    """Both strategies' executables built as ``jit`` builds them (prepare,
    plan once, build), on the emulated runtime."""
    graph = prepare_for_execution(ik.trace(fn, *args))
    rt = runtime or HostRuntime()
    eager, mega = get_strategy("cuda-eager"), get_strategy("cuda-megakernel")
    return (CudaEagerExecutable(eager.plan(eager.prepare(graph), {}), runtime=rt),
            CudaMegakernelExecutable(mega.plan(mega.prepare(graph), options), runtime=rt,
                                     **options), rt)


def reference(fn, *args):
    out = ik.jit(fn, strategy="reference")(*args)
    return out if isinstance(out, tuple) else (out,)


def test_every_computing_op_has_a_device_rule():
    # control flow and the gets that read its results have rules of their own
    exempt = LEAF | TRANSFORM_ONLY
    missing = [op.value for op in Op if op not in CUPY and op not in exempt]
    assert missing == [] and CONTROL | PROJECTION <= set(CUPY)


def test_layout_ops_the_product_and_control_flow_have_one_meaning():
    """Each rule written against a namespace is EVAL's, bound to NumPy, and the
    device's rule for the op runs it in the device's namespace."""
    for op, rule in EVAL_XP.items():
        assert EVAL[op].func is rule and EVAL[op].args == (NUMPY,), op
    assert CONTROL | {Op.PAD, Op.BROADCAST, Op.DOT_GENERAL} <= set(EVAL_XP)
    assert importlib.util.find_spec("isokernel.backends.cuda.control") is None


def test_the_device_namespace_has_every_function_the_rules_call():
    wanted = {name for name in vars(ArrayNamespace) if not name.startswith("_")}
    device = DeviceNamespace(HostRuntime(), run_graph=None)
    assert "run_graph" in wanted and "where" in wanted
    assert [n for n in sorted(wanted) if not hasattr(device, n)] == []
    assert [n for n in sorted(wanted) if not hasattr(NUMPY, n)] == []


def _leased(x) -> bool:
    """The array's memory is a block of the runtime's cache."""
    while isinstance(x, np.ndarray):
        x = x.base
    return type(x).__name__ == "_Lease"


def test_the_device_namespace_gives_numpys_values_in_the_allocators_buffers():
    rng = np.random.default_rng(3)
    rt = HostRuntime()
    xp = DeviceNamespace(rt, run_graph=None)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    mask = rng.random((2, 3)) < 0.5
    da, db, dmask = rt.upload(a), rt.upload(b), rt.upload(mask)
    lanes = xp.reshape(dmask, (2, 3, 1))
    cases = [
        (xp.matmul(da, db), np.matmul(a, b)),
        (xp.matmul(da[0], db[0]), np.matmul(a[0], b[0])),
        (xp.where(lanes, da, xp.zeros(a.shape, a.dtype)), np.where(mask[..., None], a, 0.0)),
        (xp.add(da, da), a + a),
        (xp.copy(da), a),
        (xp.full((3,), da[0, 0, 0], a.dtype), np.full((3,), a[0, 0, 0])),
        (xp.concatenate([da, da], axis=1), np.concatenate([a, a], axis=1)),
        (xp.reshape(xp.transpose(da, (2, 0, 1)), (4, 6)), np.reshape(a.transpose(2, 0, 1), (4, 6))),
    ]
    for k, (got, want) in enumerate(cases):
        assert _leased(got) and bit_identical(np.asarray(got), want), k
    assert xp.any(dmask) is True and xp.any(xp.zeros((3,), bool)) is False


def test_only_cuda_fused_fuses_and_nothing_on_the_device_unfuses():
    assert get_strategy("cuda-fused").prepare is fuse_pairs
    assert get_strategy("cuda-eager").prepare is pairs  # complex values as real parts
    assert get_strategy("cuda-megakernel").prepare is pairs
    sources = [Path(cuda_pkg.__file__).parent.glob("*.py"), [Path(codegen.cuda.__file__)]]
    found = [p.name for group in sources for p in group if "unfuse" in p.read_text()]
    assert found == []


@needs_cc
def test_the_plan_made_once_is_the_plan_that_runs_and_is_reported():
    """The megakernel's planner partitions the graph and binds each node's
    capsule; the build compiles that partition and keeps that plan."""
    args = synthetic_inputs(1000, np.float32)
    graph = prepare_for_execution(ik.trace(tau_omega, *args))
    spec = get_strategy("cuda-megakernel")
    made = spec.plan(graph, {"fma": True})
    mega = spec.compiler(made, runtime=HostRuntime(), fma=True)
    assert mega.plan is made and mega.partition is made.partition
    inside = {n for r in made.partition.regions for n in r.nodes}
    assert inside and {made.by_node[n].provider for n in inside} == {"cuda-region-fma"}
    eager_spec = get_strategy("cuda-eager")
    planned = eager_spec.plan(graph, {})
    assert CudaEagerExecutable(planned, runtime=HostRuntime()).plan is planned
    assert {c.provider for c in planned.by_node.values()} <= set(EAGER_PROVIDERS)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tau_omega_eager_is_the_reference_and_the_megakernel_within_the_bound(dtype):
    args = synthetic_inputs(5000, dtype)
    eager, mega, _ = executables(tau_omega, *args)
    want = reference(tau_omega, *args)
    for e, m, w in zip(eager(*args), mega(*args), want):
        assert bit_identical(e, w)  # the emulation evaluates one op at a time by EVAL
        assert max_ulp(m, w) <= 8  # the host's libm exp in the region, as native measures
    assert len(mega.module.kernels) == 1 and mega.partition.row_independent


def _basic(a, w, k):
    """Basic operations only, with whole inputs, a select, casts, integer ops
    and small reductions inside the region."""
    s = inp.sum(a * w, axis=1)  # (P, 4) · (4,): a whole input broadcast per row
    r = inp.where(s > 0.5, s / 3.0, -s) + inp.max(a, axis=1)
    q = (k * 7) // 3 - k % 5
    return r.astype(np.float32), q, inp.sqrt(inp.abs(r)) * 2.5


@needs_cc
def test_basic_ops_give_reference_bits_on_both_strategies():
    rng = np.random.default_rng(1)
    args = (rng.standard_normal((3000, 4)), rng.standard_normal(4),
            rng.integers(-1000, 1000, 3000))
    eager, mega, _ = executables(_basic, *args)
    want = reference(_basic, *args)
    for got in (eager(*args), mega(*args)):
        assert all(bit_identical(g, w) for g, w in zip(got, want))
    assert mega.module.kernels[0].body.whole_inputs  # the weights are read whole


def _split(x, m):
    """Ops between regions: a reduction along the pixel axis, a product
    through cuBLAS's stand-in, a pad and a slice across axis 0."""
    centred = x - inp.mean(x, axis=0)
    projected = inp.matmul(centred, m)
    return inp.concatenate([projected * 2.0, inp.pad(projected, 1)[1:-1, :] + 1.0], axis=1)


@needs_cc
def test_a_split_graph_runs_region_by_region():
    rng = np.random.default_rng(2)
    args = (rng.standard_normal((500, 3)), rng.standard_normal((3, 5)))
    eager, mega, _ = executables(_split, *args)
    want = reference(_split, *args)
    assert len(mega.module.kernels) >= 2 and not mega.partition.row_independent
    for got in (eager(*args), mega(*args)):
        assert all(bit_identical(g, w) for g, w in zip(got, want))
    source = mega.source()
    assert "between the kernels" in source and "dot_general" in source


@pytest.mark.parametrize("shape,axes", [((100_003,), (0,)), ((300, 200), (1,)),
                                        ((300, 200), (0,)), ((40, 30, 20), (0, 2)),
                                        ((40, 30, 20), (0, 1, 2))])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_device_reductions_follow_numpys_order(shape, axes, op):
    x = np.random.default_rng(3).uniform(0.5, 1.5, shape).astype(np.float32)

    def f(x):
        return getattr(inp, op)(x * 1.0, axis=axes)
    eager, _, rt = executables(f, x)
    (got,) = eager(x)
    assert bit_identical(got, reference(f, x)[0])
    if x.size > 1000 and op != "prod" and len(axes) == len(shape):
        assert rt.kernels[f"isk_reduce_{op}_f32_leaf"].launches >= 1  # the pairwise tree ran


@settings(max_examples=40)
@given(programs())
def test_hypothesis_programs_on_the_emulated_device(program):
    """Random programs: eager (EVAL per op) and the megakernel's host-
    compiled regions give the reference's bits on basic operations. (With a
    transcendental the host decides the last bits: libm in the regions, and
    even NumPy's own float32 loops differ between a strided view, which the
    reference passes, and the contiguous copy a kernel reads.)"""
    if codegen.unavailable_reason() is not None:
        pytest.skip("no host C compiler")
    dtype, shapes, steps, seed = program
    inputs = make_inputs(dtype, shapes, seed)

    def fn(*xs):
        return run_program(inp, steps, xs)
    with np.errstate(all="ignore"):
        want = reference(fn, *inputs)
        eager, mega, _ = executables(fn, *inputs)
        got_e, got_m = eager(*inputs), mega(*inputs)
    if mega.graph.ops() & TRANSCENDENTAL:
        return
    for e, m, w in zip(got_e, got_m, want):  # NumPy's own max reduce may flip a NaN's sign
        assert bit_identical_but_nan(e, w)
        assert bit_identical_but_nan(m, w)


@needs_cc
def test_buffers_go_back_to_the_cache_after_a_call():
    args = synthetic_inputs(10_000, np.float64)
    eager, mega, rt = executables(tau_omega, *args)
    baseline = rt.memory.live_bytes  # uploaded constants
    outs = eager(*args)
    assert rt.memory.live_bytes == baseline + sum(rt.memory.size_of(o.nbytes) for o in outs)
    assert rt.memory.peak_live_bytes > rt.memory.live_bytes  # intermediates came and went
    del outs
    assert rt.memory.live_bytes == baseline
    before = rt.memory.device_allocations
    eager(*args)
    assert rt.memory.device_allocations == before  # the second call reuses every block


@needs_cc
def test_a_capped_cache_frees_what_does_not_fit():
    args = synthetic_inputs(10_000, np.float64)
    eager, _, rt = executables(tau_omega, *args, runtime=HostRuntime(cap=100_000))
    eager(*args)
    assert rt.memory.cache_bytes <= 100_000 and rt.memory.frees > 0


def test_launch_shapes_take_the_kernels_limit():
    assert launch_shape(10**8, max_threads=1024, sm_count=132, kernel="k") == (132 * 32, 256)
    assert launch_shape(1000, max_threads=128, sm_count=132, kernel="k") == (8, 128)
    assert launch_shape(1, max_threads=1024, sm_count=132, kernel="k") == (1, 256)
    with pytest.raises(LaunchError, match=r"kernel k: a block of 1024 threads does not fit; its "
                                          r"compiled limit is 896 threads per block \(72 "
                                          r"registers per thread\)"):
        launch_shape(10, max_threads=896, sm_count=1, kernel="k", block=1024, registers=72)


@needs_cc
def test_a_fixed_block_size_beyond_the_limit_is_refused_at_build():
    args = synthetic_inputs(100, np.float32)
    with pytest.raises(LaunchError, match="compiled limit is 128 threads per block"):
        executables(tau_omega, *args, runtime=HostRuntime(max_threads=128), block_size=256)
    _, mega, _ = executables(tau_omega, *args, runtime=HostRuntime(max_threads=128))
    assert "128 threads/block (limit 128" in dict(mega.report_lines())["launch"]


def test_architecture_choice():
    assert architecture(90, (75, 80, 86, 89, 90)) == "sm_90"
    assert architecture(120, (80, 90, 100)) == "compute_100"  # PTX the driver compiles
    with pytest.raises(LaunchError, match="no architecture at or below sm_50"):
        architecture(50, (75, 80))


def test_integer_power_is_refused_at_build_with_the_line():
    def f(k):
        return k ** k
    with pytest.raises(ik.PlanningError, match=r"pow of i64 at test_cuda_host.py:\d+: no CUDA "
                                               r"kernel reproduces NumPy"):
        executables(f, np.arange(5))


@needs_cc
def test_report_lines_say_where_and_how():
    args = synthetic_inputs(1000, np.float32)
    eager, mega, _ = executables(tau_omega, *args, fma=True)
    eager(*args)
    lines = dict(mega.report_lines())
    assert lines["fma"].startswith("on: --fmad=true")
    assert "row-independent along axis 0 (1000 rows)" in lines["pixels"]
    assert "uploaded" in dict(eager.report_lines())["transfers"]
    assert "--fmad=false" in eager.source() and "isk_e_" in eager.source()
    capsules = {c.provider for c, _ in mega.plan.capsule_counts()}
    assert capsules == {"cuda-region-fma"}


def test_stated_bounds_cover_every_transcendental():
    assert set(ULP_BOUND) == TRANSCENDENTAL


def test_gathers_and_sorts_run_on_the_device_and_scatters_are_refused():
    """The GPU strategies' rules for the indexing and sorting primitives:
    a gather is CuPy's take and a sort CuPy's stable sort (here the host
    emulation's NumPy), each the reference's bits; a scatter is refused at
    build, naming the op and the fix (no device kernel applies repeated
    indices in a fixed order)."""
    x = np.random.default_rng(7).standard_normal((6, 5))
    x[2, 1] = np.nan

    def f(x):
        i = inp.argsort(x[:, 0])
        return x[i], inp.sort(x, axis=1), inp.median(x, axis=0)
    eager, mega, _ = executables(f, x)
    want = reference(f, x)
    for got in (eager(x), mega(x)):
        assert all(bit_identical(g, w) for g, w in zip(got, want))
    with pytest.raises(ik.PlanningError, match="scatter"):
        executables(lambda x: inp.at(x)[np.array([0, 0])].add(1.0), x)


def test_the_device_sort_orders_several_keys_along_any_axis():
    """lexsort and searchsorted (two keys) on the emulated device: the
    keys sorted least significant first by stable argsorts, NumPy's order."""
    a = np.array([[3, 1, 3, 0, 1], [2, 2, 0, 0, 1]])
    b = np.array([[0.5, 2.0, -1.0, 3.0, 2.0], [1.0, 0.0, 1.0, 0.0, 2.0]])

    def f(a, b):
        return inp.lexsort((b, a), axis=1), inp.lexsort((b.T, a.T), axis=0)
    eager, mega, _ = executables(f, a, b)
    want = reference(f, a, b)
    for got in (eager(a, b), mega(a, b)):
        assert all(bit_identical(g, w) for g, w in zip(got, want))
