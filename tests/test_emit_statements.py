"""Statements of the C emitter: blocks, ``for`` loops with a static or a
per-pixel trip count, ``while`` loops with a per-pixel condition, with
loop-carried values, and ``if`` chains. Bodies built from statements by hand, and by the
emitter from sub-graphs, run through the host wrapper against NumPy loops
and compile with NVRTC; rows beyond the unrolling cap run as loops in one
kernel, with the reference's bits."""

from __future__ import annotations

import ctypes
import platform
import re
import subprocess
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.codegen import cuda
from isokernel.codegen.emit import (
    MAX_LOOP_ELEMENTS,
    MAX_ROW_ELEMENTS,
    Assign,
    Block,
    Carry,
    Declare,
    Define,
    Emitter,
    For,
    If,
    Unsupported,
    While,
    assemble,
)
from isokernel.codegen.pixel import partition
from isokernel.ir import Attrs, Aval, Node, Op

from .conftest import compile_everywhere, nvrtc_or_skip
from .test_random_programs import BINARY, COMPARE, COMPOSED, REDUCE, UNARY, _check_parity

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")
TRANSCENDENTAL_KINDS = {"cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
                        "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
                        "arcsinh", "arccosh", "arctanh", "power", "arctan2", "pow_weak"}
PIXELS = 1000  # not a multiple of the host wrapper's block: the tail runs too
F64, I64 = np.dtype(np.float64), np.dtype(np.int64)


def _value(dtype, index: int, shape=(PIXELS,)) -> Node:
    aval = Aval(tuple(shape), np.dtype(dtype))
    return Node(Op.INPUT, (), Attrs({"aval": aval, "index": index}), aval)


def _kernel(body):
    name = body.name.removesuffix("_point")
    library, _ = codegen.build(codegen.host_source([(body, name)], name, vector_math=False))
    fn = getattr(library, name)
    count = len(body.row_inputs) + len(body.whole_inputs) + len(body.outputs)
    fn.argtypes = [ctypes.c_void_p] * count + [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    fn.restype = ctypes.c_uint32
    return fn


def run(body, *inputs, stop=None):
    """The body over every pixel through the host wrapper: (outputs, the
    floating-point flags the rows raised). ``stop``: the address of the
    call's stop flag (an int32), or None (never stopped)."""
    arrays = [np.ascontiguousarray(a, dtype=x.dtype) for a, x in zip(inputs, body.row_inputs)]
    outs = [np.empty(x.shape, x.dtype) for x in body.outputs]
    flags = _kernel(body)(*[a.ctypes.data for a in (*arrays, *outs)], 0, PIXELS, stop)
    return outs, flags


def _same(got, want) -> bool:
    return got.dtype == want.dtype and got.tobytes() == want.tobytes()


# --- bodies built from statements -----------------------------------------------------------

def static_for():
    """c <- c * a + b, 100 times, from c = x."""
    x, a, b = (_value(F64, k) for k in range(3))
    loop = For("t", "100", (Define("double", "ca", "(c * a)", "c * a"),
                            Define("double", "cab", "(ca + b)", "c * a + b")),
               "for t < 100 @ test_emit_statements.py", (Carry("double", "c", "x", "cab"),))
    stmts = [Define("double", "x", "in0[i]", "row of x"), Define("double", "a", "in1[i]", "a"),
             Define("double", "b", "in2[i]", "b"), loop, Assign("out0[i]", "c")]
    return assemble("isk_static_for_point", stmts, (x, a, b), (), (_value(F64, 3),))


def dynamic_for():
    """c <- c * 0.5 + x * t for t < n, n read per pixel."""
    x, n = _value(F64, 0), _value(I64, 1)
    body = (Define("double", "h", "(c * 0x1.0p-1)", "c * 0.5"),
            Define("double", "xt", "(x * (double)t)", "x * t"),
            Define("double", "c1", "(h + xt)", "c * 0.5 + x * t"))
    loop = For("t", "n", body, "for t < n @ test_emit_statements.py",
               (Carry("double", "c", "0x0.0p+0", "c1"),))
    stmts = [Define("double", "x", "in0[i]", "row of x"),
             Define("int64_t", "n", "in1[i]", "row of n"), loop, Assign("out0[i]", "c")]
    return assemble("isk_dynamic_for_point", stmts, (x, n), (), (_value(F64, 2),))


def halving_while():
    """Halve c while c > 1, counting the steps: a per-pixel condition,
    quiet in host C (a NaN pixel raises no invalid flag)."""
    x = _value(F64, 0)
    test = (Define("uint8_t", "more", "(uint8_t)(c > 0x1.0p+0)", "c > 1",
                   host="isk_gt_f64(c, 0x1.0p+0)"),)
    body = (Define("double", "h", "(c * 0x1.0p-1)", "c * 0.5"),
            Define("int64_t", "s1", "(s + INT64_C(1))", "steps + 1"))
    loop = While("go", test, "more", body, "while c > 1 @ test_emit_statements.py",
                 (Carry("double", "c", "x", "h"), Carry("int64_t", "s", "INT64_C(0)", "s1")))
    stmts = [Define("double", "x", "in0[i]", "row of x"), loop,
             Assign("out0[i]", "c"), Assign("out1[i]", "s")]
    return assemble("isk_halving_point", stmts, (x,), (), (_value(F64, 1), _value(I64, 2)))


def fibonacci():
    """(a, b) <- (b, a + b), n times: a next value that is another carried
    variable, so the carries must be assigned as one parallel assignment."""
    n = _value(I64, 0)
    loop = For("t", "n", (Define("int64_t", "s", "(a + b)", "a + b"),),
               "for t < n @ test_emit_statements.py",
               (Carry("int64_t", "a", "INT64_C(0)", "b"), Carry("int64_t", "b", "INT64_C(1)", "s")))
    stmts = [Define("int64_t", "n", "in0[i]", "row of n"), loop, Assign("out0[i]", "a")]
    return assemble("isk_fibonacci_point", stmts, (n,), (), (_value(I64, 1),))


def nested():
    """Two nested loops (the inner one's carry starts from the outer one's)
    and two nested blocks whose names end with them."""
    x = _value(F64, 0)
    inner = For("u", "4", (Define("double", "w", "(x * (double)(t * 4 + u))", "x * (4t + u)"),
                           Define("double", "v", "(acc2 + w)", "acc + x * (4t + u)")),
                "for u < 4 @ test_emit_statements.py", (Carry("double", "acc2", "acc", "v"),))
    outer = For("t", "3", (inner,), "for t < 3 @ test_emit_statements.py",
                (Carry("double", "acc", "0x0.0p+0", "acc2"),))
    blocks = Block((Define("double", "s", "(x * 0x1.0p+1)", "x * 2"),
                    Block((Define("double", "s1", "(s + 0x1.0p+0)", "x * 2 + 1"),
                           Assign("out1[i]", "s1")), "inner block")), "outer block")
    stmts = [Define("double", "x", "in0[i]", "row of x"), outer, blocks,
             Declare("double", "s", "x", note="a new s: the block's has ended"),
             Assign("s", "(s - acc)", "x - acc"), Assign("out0[i]", "s")]
    return assemble("isk_nested_point", stmts, (x,), (), (_value(F64, 1), _value(F64, 2)))


def branches():
    """``if`` / ``else if`` / ``else`` on a per-pixel integer: each pixel runs
    one arm, whose temporaries end with it, and assigns the result."""
    k, x = _value(I64, 0), _value(F64, 1)

    def arm(expr: str, note: str):
        return (Define("double", "t", expr, note), Assign("r", "t", "the result"))
    inner = If("k <= 1", arm("(x + 0x1.0p+0)", "x + 1"), arm("(-x)", "-x"), "k == 1")
    chain = If("k <= 0", arm("(x * 0x1.0p+1)", "x * 2"), (inner,), "k <= 0")
    stmts = [Define("int64_t", "k", "in0[i]", "row of k"),
             Define("double", "x", "in1[i]", "row of x"),
             Declare("double", "r", note="assigned by every arm"), chain, Assign("out0[i]", "r")]
    return assemble("isk_branches_point", stmts, (k, x), (), (_value(F64, 2),))


BODIES = {"static_for": static_for, "dynamic_for": dynamic_for, "halving": halving_while,
          "fibonacci": fibonacci, "nested": nested, "branches": branches}


def test_statements_render_with_provenance_and_carries():
    text = static_for().function
    assert "    double c = x;  // carry in: for t < 100 @ test_emit_statements.py" in text
    assert ("    for (int64_t t = 0; t < 100; t++) {  // for t < 100 @ test_emit_statements.py"
            in text)
    assert "        c = cab;  // carry: for t < 100 @ test_emit_statements.py" in text
    assert "for (int64_t t = 0; t < n; t++) {" in dynamic_for().function
    halving = halving_while()
    assert "    while (go) {  // while c > 1" in halving.function
    assert "isk_gt_f64(c, 0x1.0p+0)" in halving.host_function
    assert "isk_gt_f64" not in halving.function and halving.host_helpers == ("isk_lt_f64",)
    assert "    {  // outer block\n        const double s = (x * 0x1.0p+1);" in nested().function


def test_an_if_chain_renders_as_else_if():
    text = branches().function
    assert "    if (k <= 0) {  // k <= 0\n        const double t = (x * 0x1.0p+1);" in text
    assert "    } else if (k <= 1) {  // k == 1\n" in text
    assert "    } else {\n        const double t = (-x);  // -x\n" in text


@needs_cc
def test_each_pixel_runs_one_arm():
    rng = np.random.default_rng(9)
    k, x = rng.integers(-2, 4, PIXELS), rng.uniform(-1, 1, PIXELS)
    (got,), flags = run(branches(), k, x)
    assert _same(got, np.where(k <= 0, x * 2.0, np.where(k <= 1, x + 1.0, -x))) and flags == 0


def test_a_next_value_that_is_another_carry_is_copied_first():
    text = fibonacci().function
    assert text.index("const int64_t a_next = b;") < text.index("a = a_next;")
    assert text.index("a = a_next;") < text.index("b = s;")


@needs_cc
def test_static_for_is_the_numpy_loop():
    rng = np.random.default_rng(1)
    x, a, b = rng.uniform(-1, 1, PIXELS), rng.uniform(-0.9, 0.9, PIXELS), rng.uniform(-1, 1, PIXELS)
    (got,), flags = run(static_for(), x, a, b)
    c = x.copy()
    for _ in range(100):
        c = c * a + b
    assert _same(got, c) and flags == 0


@needs_cc
def test_dynamic_for_runs_each_pixels_own_trip_count():
    rng = np.random.default_rng(2)
    x, n = rng.uniform(-1, 1, PIXELS), rng.integers(0, 40, PIXELS)
    (got,), _ = run(dynamic_for(), x, n)
    c = np.zeros(PIXELS)
    for t in range(int(n.max())):
        c = np.where(t < n, c * 0.5 + x * float(t), c)
    assert _same(got, c) and (got[n == 0] == 0).all()


@needs_cc
def test_while_stops_on_each_pixels_condition_without_flags_at_nan():
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 5, PIXELS) * 10.0 ** rng.integers(0, 300, PIXELS)
    x[:5] = [np.nan, 0.0, -0.0, 1.0, np.nextafter(1.0, 2.0)]
    (c, steps), flags = run(halving_while(), x)
    want, count = x.copy(), np.zeros(PIXELS, np.int64)
    with np.errstate(invalid="ignore"):
        while (more := want > 1.0).any():
            want, count = np.where(more, want * 0.5, want), count + more
    assert _same(c, want) and _same(steps, count) and steps.max() > 900
    assert flags == 0  # the comparisons of host C are quiet: NaN > 1 raises nothing


@needs_cc
def test_carried_values_are_assigned_in_parallel():
    n = np.arange(PIXELS) % 91
    (got,), _ = run(fibonacci(), n)
    fib = [0, 1]
    while len(fib) < 91:
        fib.append(fib[-1] + fib[-2])
    assert _same(got, np.array(fib, np.int64)[n])


@needs_cc
def test_nested_loops_and_blocks():
    x = np.random.default_rng(4).uniform(-1, 1, PIXELS)
    (diff, shadowed), _ = run(nested(), x)
    acc = np.zeros(PIXELS)
    for t in range(3):
        for u in range(4):
            acc = acc + x * float(t * 4 + u)
    assert _same(diff, x - acc) and _same(shadowed, x * 2.0 + 1.0)


def test_statement_bodies_compile_with_nvrtc():
    compiler = nvrtc_or_skip()
    sources = [cuda.body_source(make(), f"isk_{name}", f"Statements: {name}")
               for name, make in BODIES.items()]
    assert "while (go) {" in sources[2] and 'extern "C" __global__ void isk_halving(' in sources[2]
    assert compile_everywhere(sources, compiler) == []


# --- the emitter puts a sub-graph in a loop ---------------------------------------------------

def _emitter(name: str, inputs, outputs) -> Emitter:
    numbers = {x: k for k, x in enumerate((*inputs, *outputs))}
    region = types.SimpleNamespace(nodes=(), row_inputs=tuple(inputs), whole_inputs=(),
                                   outputs=tuple(outputs))
    emitter = Emitter(name, region, numbers.__getitem__, {})
    emitter.begin()
    return emitter


def _traced_for():
    """A ``for`` loop of 25 steps around a traced body, c <- c * 0.5 + t."""
    graph = ik.trace(lambda t, c: c * 0.5 + t.astype(inp.float64),
                     np.asarray(0, np.int64), np.ones(PIXELS))
    x, y = _value(F64, 0), _value(F64, 1)
    emitter = _emitter("isk_traced_for_point", [x], [y])
    (final,) = emitter.for_loop(graph, [emitter.values[x]], "25", "for t < 25 @ test", "b0_")
    emitter.bind(y, final)
    return emitter.finish()


def _traced_while():
    """Halve c while c > 1, counting, with the condition and the step traced."""
    c, n = np.ones(PIXELS), np.zeros(PIXELS, np.int64)
    cond = ik.trace(lambda c, n: c > 1.0, c, n)
    step = ik.trace(lambda c, n: (c * 0.5, n + 1), c, n)
    x, y, count = _value(F64, 0), _value(F64, 1), _value(I64, 2)
    emitter = _emitter("isk_traced_while_point", [x], [y, count])
    zero = np.array(["INT64_C(0)"], dtype=object)
    final, steps = emitter.while_loop(cond, step, [emitter.values[x], zero], "while c > 1",
                                      "b0_")
    emitter.bind(y, final)
    emitter.bind(count, steps)
    return emitter.finish()


@needs_cc
def test_a_traced_body_as_a_for_loop():
    body = _traced_for()
    assert "for (int64_t b0_t = 0; b0_t < 25; b0_t++) {  // for t < 25 @ test" in body.function
    assert "const double b0_v5 = (double)b0_t;  // %5 cast @ " in body.function
    x = np.random.default_rng(5).uniform(-1, 1, PIXELS)
    (got,), _ = run(body, x)
    c = x.copy()
    for t in range(25):
        c = c * 0.5 + float(t)
    assert _same(got, c)


@needs_cc
def test_a_traced_condition_and_step_as_a_while_loop():
    body = _traced_while()
    assert "while (b0_go) {  // while c > 1" in body.function
    assert "isk_gt_f64(b0_c0, 0x1.0p+0)" in body.host_function  # the quiet host comparison
    x = np.random.default_rng(6).uniform(-3, 3, PIXELS) * 1e3
    x[0] = np.nan
    (c, steps), flags = run(body, x)
    want, count = x.copy(), np.zeros(PIXELS, np.int64)
    with np.errstate(invalid="ignore"):
        while (more := want > 1.0).any():
            want, count = np.where(more, want * 0.5, want), count + more
    assert _same(c, want) and _same(steps, count) and flags == 0


def test_control_loops_read_the_stop_flag_in_host_c_only():
    """A while loop and the loop of a region primitive read the call's stop
    flag every ``ISK_POLL`` iterations in host C (``ISK_POLLED``, one counter
    per function); the plain C a CUDA wrapper takes has no such line, and a
    loop over a row's elements (a ``For`` built without ``polls``) reads
    nothing."""
    for body in (halving_while(), _traced_for(), _traced_while()):
        assert body.polls and "uint32_t isk_polls = 0;" in body.host_function
        assert body.host_function.count("if (ISK_POLLED(isk_polls))") == 1
        assert "ISK_POLLED" not in body.function and "isk_polls" not in body.function
    for body in (static_for(), nested()):
        assert not body.polls and "ISK_POLLED" not in body.host_function


def test_traced_loops_compile_with_nvrtc():
    compiler = nvrtc_or_skip()
    sources = [cuda.body_source(_traced_for(), "isk_traced_for", "A traced for loop"),
               cuda.body_source(_traced_while(), "isk_traced_while", "A traced while loop")]
    assert compile_everywhere(sources, compiler) == []


def test_a_carried_row_beyond_the_cap_is_refused():
    wide = np.ones((PIXELS, MAX_ROW_ELEMENTS + 1))
    graph = ik.trace(lambda t, c: c * 2.0, np.asarray(0, np.int64), wide)
    x = _value(F64, 0, wide.shape)
    emitter = _emitter("isk_wide_point", [x], [])
    with pytest.raises(Unsupported, match="carried row"):
        emitter.for_loop(graph, [emitter.values[x]], "3", "for t < 3", "b0_")


def test_an_op_without_a_c_form_in_a_loop_body_is_refused():
    graph = ik.trace(lambda t, c: inp.matmul(c, np.eye(3)), np.asarray(0, np.int64),
                     np.ones((PIXELS, 3)))
    x = _value(F64, 0, (PIXELS, 3))
    emitter = _emitter("isk_matmul_point", [x], [])
    with pytest.raises(Unsupported, match="dot_general at .*test_emit_statements.py"):
        emitter.for_loop(graph, [emitter.values[x]], "3", "for t < 3", "b0_")


# --- rows beyond the unrolling cap ------------------------------------------------------------

TABLE = inp.Table(np.cos(np.arange(24.0)).reshape(2, 12), -1.0, 0.25, name="bands")


def long_rows(x, w, col):
    """Rows of 256 elements: weights read whole, a column broadcast along
    the row, a select, a table look-up, flips, a transposing reshape, a
    pad, a concatenation, a slice down to a short row and a cast."""
    r = x * w - col
    g = inp.where(r > 0.25, inp.sqrt(inp.abs(r)), r * r) / (1.0 + inp.abs(r))
    looked = TABLE.lookup(g * 4.0, 1)
    turned = inp.transpose(inp.reshape(g, (-1, 16, 16)), (0, 2, 1))
    padded = inp.pad(inp.flip(g, 1)[:, 8:], ((0, 0), (4, 4)), constant_values=-1.0)
    joined = inp.concatenate([r[:, :100], looked[:, 100:]], axis=1)
    return g, turned * 2.0, padded - joined, (g[:, :3] > 0).astype(np.int32)


def _long_inputs(dtype=np.float64, pixels=PIXELS, row=256):
    rng = np.random.default_rng(7)
    return (rng.uniform(-2, 2, (pixels, row)).astype(dtype),
            rng.uniform(0.5, 1.5, row).astype(dtype),
            rng.uniform(-1, 1, (pixels, 1)).astype(dtype))


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_beyond_the_cap_run_in_one_kernel_with_the_reference_bits(dtype):
    args = _long_inputs(dtype)
    compiled = ik.jit(long_rows, strategy="native").lower(*args).compile()
    want = ik.jit(long_rows, strategy="reference")(*args)
    assert all(_same(g, w) for g, w in zip(compiled(*args), want))
    assert "row-independent along axis 0 (1000 rows): 1 region(s)" in str(compiled.report())
    source = compiled.source()
    assert "for (int64_t k = 0; k < 256; k++) {" in source
    assert "isk_lookup_" in source and "isk_idx_" in source  # the transpose: an index table


@needs_cc
def test_a_long_row_gets_the_same_bits_wherever_it_falls():
    """With vector math, the elements of a row loop run in vector or scalar
    code by their index alone: a row gives the same bits in any slice, in
    the padded tail block or not, for any worker count."""
    def fn(x, w):
        return inp.exp(x * w) - inp.sin(x)
    rng = np.random.default_rng(8)
    x, w = rng.uniform(-3, 3, (9000, 101)), rng.uniform(0.5, 1.5, 101)
    whole = ik.jit(fn, strategy="native", workers=1)(x, w)
    assert _same(ik.jit(fn, strategy="native", workers=2)(x, w), whole)
    for begin, end in ((0, 300), (7, 1300), (8237, 9000)):
        assert _same(ik.jit(fn, strategy="native", workers=1)(x[begin:end], w),
                     whole[begin:end])


@needs_cc
def test_the_megakernel_body_runs_long_rows_with_the_reference_bits():
    """cuda-megakernel's region kernel, its C body run on the host
    (tests/cuda_host.py): one kernel, the reference's bits."""
    from .test_cuda_host import executables, reference
    args = _long_inputs(np.float64, pixels=600)
    _, mega, _ = executables(long_rows, *args)
    assert all(_same(g, w) for g, w in zip(mega(*args), reference(long_rows, *args)))
    assert len(mega.module.kernels) == 1 and mega.partition.row_independent


def test_layout_beyond_the_cap_is_an_index_map():
    graph = ik.trace(lambda x: inp.flip(x, 1) * 2.0 + x[:, ::-1][:, ::-1], np.ones((300, 100)))
    region = partition(graph, accept=codegen.supports).regions[0]
    text = codegen.emit_body("isk_maps_point", region, graph.index, region.modes).function
    assert "in0[i * 100 + 99 - k]" in text and "in0[i * 100 + k]" in text  # flipped twice: k
    assert "[100];" not in text  # views, no array


def test_reductions_and_rows_beyond_the_loop_cap_run_whole():
    graph = ik.trace(lambda x, y: (inp.sum(x * 2.0, axis=1), y + 1.0),
                     np.ones((2000, 100)), np.ones((2000, MAX_LOOP_ELEMENTS + 1)))
    part = partition(graph, accept=codegen.supports)
    inside = {n.op for r in part.regions for n in r.nodes}
    whole = {n.op for s in part.stages if s not in part.regions for n in s.nodes}
    assert Op.MUL in inside and Op.REDUCE_SUM in whole and Op.ADD in whole


@needs_cc
def test_row_loops_vectorize(tmp_path):
    """GCC vectorizes the loop over a long row (natively, and for AVX2 alone
    on x86-64), as it does the block loop over short rows."""
    compiler = codegen.current_compiler()
    if "clang" in compiler.version.lower():
        pytest.skip(f"vectorizer notes are GCC's; the compiler is {compiler.name}")
    args = (np.ones((512, 256)), np.ones(256), np.ones((512, 1)))
    source = ik.jit(lambda x, w, c: long_rows(x, w, c)[0], strategy="native").lower(
        *args).compile().source()
    (tmp_path / "kernel.c").write_text(source)
    loop = next(n for n, line in enumerate(source.splitlines(), 1) if "k < 256;" in line)
    for arch in [None] + (["-march=x86-64-v3"] if platform.machine() == "x86_64" else []):
        notes = _vectorizer_notes(compiler, tmp_path, arch)
        assert re.search(rf"kernel\.c:{loop}:\d+: optimized: loop vectorized", notes), \
            (arch, notes[-2000:])


def _vectorizer_notes(compiler, tmp_path, arch: str | None) -> str:
    """GCC's vectorizer notes on ``kernel.c``, with the kernel's flags
    (``arch`` in place of ``-march=native``)."""
    flags = [f for f in compiler.flags(False)
             if f != "-shared" and (arch is None or not f.startswith("-march="))]
    done = subprocess.run([compiler.path, *flags, *([arch] if arch else []), "-fopt-info-vec",
                           "-c", str(tmp_path / "kernel.c"), "-o", str(tmp_path / "kernel.o")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"{compiler.name} does not take {arch or 'its flags'}: {done.stderr[:200]}")
    return done.stderr


BASIC_KINDS = [k for k in UNARY + BINARY + COMPARE + REDUCE + COMPOSED
               if k not in TRANSCENDENTAL_KINDS]
"""Kinds whose ops are IEEE basic operations, which ``native`` promises bit
for bit (a transcendental anywhere would leave it out of the comparison)."""


@st.composite
def long_programs(draw):
    """The random programs of test_random_programs over rows of 65 to 160
    elements (more pixels than elements, so axis 0 is the pixel axis)."""
    n, m = draw(st.integers(200, 400)), draw(st.integers(MAX_ROW_ELEMENTS + 1, 160))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shapes = [(n, m), (m,), (1, m), (n, 1), ()]
    in_shapes = [(n, m)] + [draw(st.sampled_from(shapes)) for _ in range(draw(st.integers(0, 2)))]
    steps = [(draw(st.sampled_from(BASIC_KINDS)), draw(st.integers(0, 1 << 16)),
              draw(st.integers(0, 1 << 16)), draw(st.sampled_from([0.5, 2.0, -1.5, 3])))
             for _ in range(draw(st.integers(1, 8)))]
    return dtype, in_shapes, steps, draw(st.integers(0, 2**32 - 1))


@needs_cc
@settings(max_examples=25)
@given(long_programs())
def test_random_programs_on_long_rows_meet_every_contract(program):
    _check_parity(*program)
