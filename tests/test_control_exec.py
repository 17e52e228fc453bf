"""Control flow inside the compiled strategies: ``cond``, ``while``,
``scan`` (``fori_loop``) and ``checkpoint`` run inside row regions on
``threads`` (by their EVAL rule on each tile), ``native`` (as C statements;
lane-wise loops as a staged block of rows on the host) and the CUDA
strategies (op by op from the host on ``cuda-eager``; inside the region
kernel on ``cuda-megakernel``, one loop per thread), each with the
reference's bits under portable numerics; the report says they ran in the
region, and every CUDA kernel generated compiles with NVRTC."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends.parity import bit_identical
from isokernel.codegen import cuda
from isokernel.codegen.pixel import block_attrs, partition, region_rows
from isokernel.ir import Op
from isokernel.ir.ops import CONTROL
from isokernel.transforms import prepare_for_execution

from .conftest import compile_everywhere, nvrtc_or_skip
from .test_cuda_host import executables

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")
PIXELS = 3001  # not a multiple of the host's block of 256: the padded tail runs too
TOL = 1e-12


# --- models ---------------------------------------------------------------------------------

def kepler(m, e):
    """E - e sin E = M by Newton from E0 = M + e sin M; the step count too."""
    def step(state):
        big_e, _, n = state
        d = (big_e - e * inp.sin(big_e) - m) / (1.0 - e * inp.cos(big_e))
        return big_e - d, d, n + 1
    start = (m + e * inp.sin(m), inp.ones_like(m), 0)
    big_e, _, n = ik.while_loop(lambda s: inp.abs(s[1]) > TOL, step, start)
    return big_e, n


def newton_sqrt(a):
    """Basic operations only: the same bits in either numerics."""
    def step(state):
        x, n = state
        return 0.5 * (x + a / x), n + 1
    more = lambda s: (inp.abs(s[0] * s[0] - a) > 1e-12 * a) & (s[1] < 100)  # noqa: E731
    return ik.while_loop(more, step, (a + 1.0, 0))


def fori(x):
    return ik.fori_loop(0, 10, lambda i, v: v * 0.5 + i.astype(inp.float64), x)


def horner(x):
    """A scan over a constant sequence read whole, and its reversed twin."""
    coeffs = np.array([1.0, -0.5, 0.25, 3.0, -1.0])
    forward, _ = ik.scan(lambda c, a: (c * x + a, None), inp.zeros_like(x), coeffs)
    backward, _ = ik.scan(lambda c, a: (c * x + a, None), inp.zeros_like(x), coeffs,
                          reverse=True)
    return forward, backward


def branch(x, flag):
    return ik.cond(flag > 0, lambda v: v * 2.0 + 1.0, lambda v: -v, x) * x


def remat(x):
    return ik.checkpoint(lambda v: inp.sin(v) * v + 1.0)(x) - x


def nested(a):
    """A fori_loop inside a lane-wise while, and a while inside that."""
    def step(state):
        x, n = state
        y = ik.fori_loop(0, 3, lambda i, v: v * 0.5 + x, x)
        z = ik.while_loop(lambda v: v > y * 0.25, lambda v: v * 0.75, y)
        return z - 0.01, n + 1
    return ik.while_loop(lambda s: (s[0] > 1.0) & (s[1] < 50), step, (a, 0))


def fused(m, e, scale):
    """A loop between elementwise ops: its operands computed before it in the
    region, its result used after it and returned too."""
    big_e, n = ik.vmap(kepler)(m * scale, e)
    return inp.sqrt(inp.abs(big_e)) + m, big_e, n * 2


def traced_fori(x, n):
    """A fori_loop of traced bounds: a while loop whose predicate is the same
    whole value for every pixel."""
    return ik.fori_loop(0, n, lambda i, v: v * 0.5 + 1.0, x)


LARGE = 40_000  # pixels: above native's INLINE_ROWS, so its regions keep the pool


def _uniform(lo, hi, shape=(PIXELS,), seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


CASES = {
    "kepler": (ik.vmap(kepler), lambda: [_uniform(0, 2 * np.pi), _uniform(0, 0.9, seed=1)]),
    "newton_sqrt": (ik.vmap(newton_sqrt), lambda: [_uniform(0.01, 1e6)]),
    "fori": (fori, lambda: [_uniform(-5, 5)]),
    "horner": (horner, lambda: [_uniform(-2, 2)]),
    # beyond native's inline threshold: below it native compiles this graph (a region and
    # the flag's test outside it) as one C program (test_whole_programs.py)
    "cond_true": (branch, lambda: [_uniform(-5, 5, (LARGE,)), np.float64(1.0)]),
    "cond_false": (branch, lambda: [_uniform(-5, 5, (LARGE,)), np.float64(-1.0)]),
    "checkpoint": (remat, lambda: [_uniform(-5, 5)]),
    "nested": (ik.vmap(nested), lambda: [_uniform(0, 100)]),
    "fused": (fused, lambda: [_uniform(0, 2 * np.pi), _uniform(0, 0.9, seed=1),
                              np.float64(1.0001)]),
    "traced_fori": (traced_fori, lambda: [_uniform(-5, 5), np.int64(7)]),
}
CAPSULES = {"threads": "on row tiles (its EVAL rule per tile)", "native": "generated C ("}


def _tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _reference(fn, args) -> tuple:
    return _tuple(ik.jit(fn, strategy="reference")(*args))


def _control_ops(graph) -> set:
    return {n.op for n in graph.nodes if n.op in CONTROL}


def _check_in_region(compiled, fn, args) -> None:
    """The report: every node in one row region, and the control flow under
    the strategy's own capsule (not the reference's, which runs whole)."""
    report = str(compiled.report())
    assert "row-independent along axis 0" in report
    graph = prepare_for_execution(ik.trace(fn, *args))
    name = compiled.lowered.strategy.name
    for op in _control_ops(graph):
        line = next(x for x in report.splitlines() if x.strip().startswith(f"{op.value}: "))
        assert CAPSULES[name] in line, line


# --- threads and native against the reference -------------------------------------------------

@needs_cc
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("strategy, options", [("threads", {"workers": 2, "tile_rows": 300}),
                                               ("native", {"workers": 2})],
                         ids=["threads", "native"])
def test_control_flow_runs_in_the_region_with_the_reference_bits(name, strategy, options):
    fn, make = CASES[name]
    args = make()
    with ik.numerics("portable"):
        want = _reference(fn, args)
        compiled = ik.jit(fn, strategy=strategy, **options).lower(*args).compile()
        got = _tuple(compiled(*args))
    assert len(got) == len(want)
    assert all(bit_identical(g, w) for g, w in zip(got, want))
    _check_in_region(compiled, fn, args)


@needs_cc
@pytest.mark.parametrize("strategy", ["threads", "native"])
def test_lane_wise_loops_stop_per_pixel(strategy):
    args = CASES["newton_sqrt"][1]()
    args[0][:3] = [np.nan, 1.0, 4.0]  # a NaN lane stops at once, quietly
    fn = CASES["newton_sqrt"][0]
    want = _reference(fn, args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _tuple(ik.jit(fn, strategy=strategy, workers=2)(*args))
    assert all(bit_identical(g, w) for g, w in zip(got, want))
    steps = got[1]
    assert steps[0] == 0 and steps.min() < steps.max() and len(np.unique(steps)) > 5


@needs_cc
def test_native_numerics_solve_kepler_within_the_math_library_bound():
    """Native numerics: libm's sin and cos (vector variants in the staged
    block) are within a few ulp of NumPy's, and Newton converges to within
    the tolerance of the same root; the step counts differ by at most one."""
    fn, make = CASES["kepler"]
    args = make()
    want_e, want_n = _reference(fn, args)
    got_e, got_n = ik.jit(fn, strategy="native", workers=2)(*args)
    assert np.max(np.abs(got_e - want_e)) <= 1e-13
    assert np.max(np.abs(got_n - want_n)) <= 1
    residual = got_e - args[1] * np.sin(got_e) - args[0]
    assert np.max(np.abs(residual)) <= 1e-12


@needs_cc
def test_a_pixel_gets_the_same_bits_wherever_it_falls():
    """With vector math, every row of the staged block runs the same vector
    code (rows finish one by one only where the step has no libm call), so a
    pixel's bits do not depend on the slice or the worker count."""
    fn, make = CASES["kepler"]
    m, e = make()
    whole = ik.jit(fn, strategy="native", workers=1)(m, e)
    assert all(bit_identical(a, b)
               for a, b in zip(ik.jit(fn, strategy="native", workers=2)(m, e), whole))
    for begin, end in ((0, 300), (7, 1300), (2900, 3001)):
        part = ik.jit(fn, strategy="native", workers=1)(m[begin:end], e[begin:end])
        assert all(bit_identical(a, b[begin:end]) for a, b in zip(part, whole))


# --- the C: statements per pixel, and the host's staged block ----------------------------------

@needs_cc
def test_native_source_shows_the_staged_block_and_the_statements():
    m, e = CASES["kepler"][1]()
    text = ik.jit(CASES["kepler"][0], strategy="native").lower(m, e).compile().source()
    assert "while (isk_running(isk_l" in text and "kept where stopped: %" in text
    assert "ISK_BLOCK / 8" not in text  # sin and cos: the whole block runs every step
    text = ik.jit(fori, strategy="native").lower(m).compile().source()
    assert "for (int64_t s2_t = 0; s2_t < 10; s2_t++) {  // %2 scan @ " in text
    large = _uniform(-5, 5, (LARGE,))
    text = ik.jit(branch, strategy="native").lower(large, np.float64(1.0)).compile().source()
    assert "if (v4 <= 0) {  // branch 0: %5 cond @ " in text and "} else {" in text
    text = ik.jit(ik.vmap(newton_sqrt), strategy="native").lower(m + 1.0).compile().source()
    assert "while (isk_running(isk_l4) > ISK_BLOCK / 8) {" in text  # basic operations only
    assert "while (isk_l4[j])" in text


def test_the_megakernel_runs_one_while_per_thread():
    m, e = CASES["kepler"][1]()
    source = cuda.cuda_source(ik.trace(CASES["kepler"][0], m, e))
    assert "    while (w9_go) {  // %9 while @ test_control_exec.py:" in source
    assert "        w9_c0 = w9_v15;  // carry: %9 while @ " in source
    assert "isk_running" not in source and "isk_select" not in source


# --- the CUDA strategies, host-emulated ------------------------------------------------------

@needs_cc
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_strategies_give_the_reference_bits(name):
    """cuda-eager runs control flow op by op from the host (the predicate read
    each iteration); cuda-megakernel inside its region kernel."""
    fn, make = CASES[name]
    args = make()
    with ik.numerics("portable"):
        want = _reference(fn, args)
        eager, mega, _ = executables(fn, *args)
        got_eager, got_mega = _tuple(eager(*args)), _tuple(mega(*args))
    assert all(bit_identical(g, w) for g, w in zip(got_eager, want))
    assert all(bit_identical(g, w) for g, w in zip(got_mega, want))
    inside = {n.op for r in mega.partition.regions for n in r.nodes}
    assert mega.partition.row_independent and _control_ops(mega.graph) <= inside


def test_every_cuda_kernel_of_the_cases_compiles_with_nvrtc():
    compiler = nvrtc_or_skip()
    sources = []
    for fn, make in CASES.values():
        with ik.numerics("portable"):
            sources.append(cuda.cuda_source(ik.trace(fn, *make())))
        sources.append(cuda.cuda_source(ik.trace(fn, *make())))
    assert compile_everywhere(sources, compiler) == []


@needs_cc
def test_reverse_passes_run_whole_on_the_device_with_the_reference_bits():
    """while_lin and while_vjp (reverse mode through a while loop) have device
    rules too: the bodies op by op, the checkpointed sweep on the device (a
    lane-wise one under vmap)."""
    def loss(x):
        def step(v):
            return v * 0.75 + 0.1
        return inp.sum(ik.while_loop(lambda v: inp.sum(v) > 20.0, step, x) ** 2)
    def lanes(a):  # per element: a lane-wise reverse sweep
        return ik.while_loop(lambda v: v > 1.0, lambda v: v * 0.75 + 0.1, a) ** 2
    x = _uniform(1, 2, (40,))  # the sum falls from about 60 towards 16
    for grad, args in ((ik.grad(loss), x), (ik.vmap(ik.grad(lanes)), _uniform(0, 9, (300,)))):
        eager, mega, _ = executables(grad, args)
        want = _reference(grad, [args])
        assert bit_identical(eager(args)[0], want[0]) and bit_identical(mega(args)[0], want[0])
        assert Op.WHILE_VJP in {n.op for n in eager.graph.nodes}
    _, tangent_map = ik.linearize(lambda a: ik.while_loop(lambda v: inp.sum(v) > 20.0,
                                                          lambda v: v * 0.75 + 0.1, a) ** 2, x)
    eager, mega, _ = executables(tangent_map, x)
    want = _reference(tangent_map, [x])
    assert bit_identical(eager(x)[0], want[0]) and bit_identical(mega(x)[0], want[0])
    assert Op.WHILE_LIN in {n.op for n in eager.graph.nodes}


# --- floating-point errors -----------------------------------------------------------------

def _dividing(x, y):
    def step(state):
        v, n = state
        return v / y, n + 1
    return ik.while_loop(lambda s: s[1] < 3, step, (x, 0))[0]


@needs_cc
@pytest.mark.parametrize("strategy", ["threads", "native"])
def test_a_running_lane_gives_the_reference_warning(strategy):
    fn = ik.vmap(_dividing)
    x, y = _uniform(1, 2), _uniform(1, 2, seed=3)
    y[[5, 2000]] = 0.0
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in divide"):
        want = ik.jit(fn, strategy="reference")(x, y)
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in divide"):
        got = ik.jit(fn, strategy=strategy, workers=2)(x, y)
    assert bit_identical(got, want)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide"):
        ik.jit(fn, strategy=strategy, workers=2)(x, y)


# --- the analysis ------------------------------------------------------------------------------

def test_a_loop_that_reads_across_pixels_runs_whole():
    def shrink(x):
        return ik.while_loop(lambda v: inp.sum(v) > 10.0, lambda v: v * 0.5, x)
    graph = prepare_for_execution(ik.trace(shrink, np.ones(500)))
    node = next(n for n in graph.nodes if n.op is Op.WHILE)
    assert region_rows(node, 500) is None
    assert partition(graph).regions == ()


def test_a_scan_whose_whole_result_is_read_runs_whole():
    """A region writes single arrays by rows: a loop whose scalar carry (the
    counter) is read after it stays out of the region, and so do its gets."""
    def counted(x):
        (n, v), _ = ik.scan(lambda c, _: ((c[0] + 1, c[1] * 0.5), None), (0, x), length=4)
        return v, n
    graph = prepare_for_execution(ik.trace(counted, np.ones(500)))
    inside = {n.op for r in partition(graph).regions for n in r.nodes}
    assert Op.SCAN not in inside and Op.GET not in inside
    graph = prepare_for_execution(ik.trace(fori, np.ones(500)))
    assert {Op.SCAN, Op.GET} <= {n.op for r in partition(graph).regions for n in r.nodes}


def test_a_control_node_resized_for_a_block_of_rows():
    m, e = CASES["kepler"][1]()
    graph = prepare_for_execution(ik.trace(CASES["kepler"][0], m, e))
    node = next(n for n in graph.nodes if n.op is Op.WHILE)
    attrs = block_attrs(node, 7)
    cond, body = attrs["cond"].graph, attrs["body"].graph
    assert cond.outputs[0].aval.shape == (7,)
    assert [x.aval.shape for x in body.inputs] == [(7,)] * len(body.inputs)
    env = dict(zip(graph.inputs, (m[:7], e[:7])))
    for x in graph.nodes[:graph.index(node)]:  # the operands, on the block's rows
        if x not in env:
            env[x] = ik.ir.EVAL[x.op](*(env[y] for y in x.inputs), **block_attrs(x, 7))
    got = ik.ir.EVAL[Op.WHILE](*(env[x] for x in node.inputs), **attrs)
    want = ik.jit(CASES["kepler"][0], strategy="reference")(m[:7], e[:7])
    assert bit_identical(got[0], want[0]) and bit_identical(got[2], want[1])


def _frozen_divides(x):
    """A lane that stops at v = 1 would divide by zero in the next step,
    which the reference computes (and discards) while other lanes run."""
    def step(state):
        v, _ = state
        return v - 1.0, 1.0 / (v - 1.0)
    return ik.while_loop(lambda s: s[0] > 1.5, step, (x, x))


def _messages(fn, strategy: str, *args) -> set[str]:
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        ik.jit(fn, strategy=strategy)(*args)
    return {str(w.message) for w in found}


@needs_cc
def test_warnings_of_lanes_that_stopped_are_never_more_than_the_reference():
    """The staged block computes the step for a stopped row while rows of its
    block run, as the reference does for a stopped lane: the kernel's flag
    sends those rows to the reference rules, whose warning is the
    reference's. Rows that raise nothing in the kernel give no warning."""
    fn = ik.vmap(_frozen_divides)
    x = np.full(PIXELS, 4.0)
    x[10] = 2.0
    want = _messages(fn, "reference", x)
    assert want == {"divide by zero encountered in divide"}
    assert _messages(fn, "native", x) == want and _messages(fn, "threads", x) == want
    assert _messages(fn, "native", np.full(PIXELS, 4.0)) == set()


def _passing(x, flag):
    y = x * 3.0
    z = ik.cond(flag > 0, lambda v: v, lambda v: v + 1.0, y)
    return z * ((x + 1.0) * 2.0)


@pytest.mark.parametrize("flag", [1.0, -1.0])
def test_a_branch_that_returns_its_operand_keeps_that_scratch_alive(flag):
    """The taken branch may return its operand's very array: a tile must not
    reuse that operand's scratch (here for ``x + 1``) while a get of the
    cond still reads it."""
    x = _uniform(-1, 1, (50000,))
    want = ik.jit(_passing, strategy="reference")(x, np.float64(flag))
    got = ik.jit(_passing, strategy="threads", workers=2, tile_rows=999)(x, np.float64(flag))
    assert bit_identical(got, want)
