"""The megakernel's whole-program structure, without a GPU: a time-stepping
stencil, its gradient, a Krylov solve, a training step's gradient, random
draws and nested control flow, each compiled as one CUDA module (the
graph's regions and runs of elementwise ops, and every loop or branch
body's), NVRTC-compiled for sm_80 and sm_90, and run on the host-emulated
runtime (``tests/cuda_host.py``), whose region and run kernels are the very
C bodies of that module. On basic operations the results are the
reference's bits, as ``cuda-eager``'s are; the launch counts show each body
step is its kernels, not one launch per op."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends.parity import bit_identical, max_ulp
from isokernel.codegen import cuda
from isokernel.ir import Op
from isokernel.linalg import cg

from .conftest import compile_everywhere, nvrtc_or_skip
from .test_cuda_host import executables, reference

pytestmark = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                                reason=f"host C compiler: {codegen.unavailable_reason()}")

STEPS = 12


def heat(u0):
    def step(_, u):
        interior = u[1:-1] + 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2])
        return inp.concatenate([u[:1], interior, u[-1:]])
    return ik.fori_loop(0, STEPS, step, u0)


def energy(u0):
    u = heat(u0)
    return inp.sum(u * u)


def laplacian(u):
    p = inp.pad(u, ((1, 1), (1, 1)))
    return 4.0 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]


def poisson(b):
    return cg(laplacian, b, tol=1e-10)[0]


def relu_mlp_grad(w1, b1, w2, x, y):
    def loss(w1, b1, w2):
        h = inp.maximum(inp.dot(x, w1) + b1, 0.0)
        r = inp.dot(h, w2) - y
        return inp.mean(r * r)
    return ik.grad(loss, argnums=(0, 1, 2))(w1, b1, w2)


def nested(x):
    def outer(i, carry):
        def inner(j, c):
            return c * 0.5 + (c[::-1] - 1.0) * 0.25
        return ik.fori_loop(0, 3, inner, carry) + 1.0 / (i + 2.0)
    return ik.fori_loop(0, 4, outer, x)


def branches(x, k):
    return ik.switch(k, [lambda v: v * 2.0 - v[::-1],
                         lambda v: (v + 1.0) * (v - 1.0) + v[0],
                         lambda v: v * v * v], x)


def _start(n):
    x = np.linspace(0.0, 1.0, n)
    return np.sin(np.pi * x) + 0.5 * np.sin(7 * np.pi * x)


def _grid(n):
    y, x = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    return (np.sin(3 * np.pi * x) * np.cos(2 * np.pi * y),)


def _mlp():
    rng = np.random.default_rng(4)
    return (rng.standard_normal((3, 8)), rng.standard_normal(8), rng.standard_normal(8),
            rng.standard_normal((40, 3)), rng.standard_normal(40))


CASES = {
    "heat": (heat, lambda: (_start(64),)),
    "heat-grad": (ik.grad(energy), lambda: (_start(64),)),
    "cg": (poisson, lambda: _grid(12)),
    "nested": (nested, lambda: (_start(33),)),
    "switch": (branches, lambda: (_start(17), np.int32(1))),
}
"""Programs of basic operations only: every strategy owes the reference's bits."""


def _mlp_contraction_bounds(w1, b1, w2, x, y):
    """Per gradient of ``relu_mlp_grad``, the bound on the difference of two
    evaluations that sum its contraction or reduction in different orders:
    2·γ_n·(Σ |terms|), n the terms summed (γ_n = n·eps/(1 - n·eps))."""
    pre = x @ w1 + b1
    h = np.maximum(pre, 0.0)
    dr = 2.0 * (h @ w2 - y) / len(y)
    dpre = np.outer(dr, w2) * (pre > 0)
    def gamma(n):
        return n * np.finfo(float).eps / (1 - n * np.finfo(float).eps)
    n = len(y)
    return (2 * gamma(n) * (np.abs(x).T @ np.abs(dpre)),
            2 * gamma(n) * np.abs(dpre).sum(axis=0),
            2 * gamma(n) * (np.abs(h).T @ np.abs(dr)))


def test_a_program_with_contractions_is_within_their_bound():
    """A gradient through matrix products: the reference's NumPy (its BLAS,
    whose kernel and so its summation order depend on the CPU: on an
    AVX-512 host its w1 gradient differs from a sequential sum by 2 ulp)
    and the GPU strategies' contractions sum in different orders, so their
    results agree within the rounding bound of a sum of n terms, not bit
    for bit (the strategies' contract)."""
    args = _mlp()
    eager, mega, _ = executables(relu_mlp_grad, *args)
    want = reference(relu_mlp_grad, *args)
    bounds = _mlp_contraction_bounds(*args)
    for got in (mega(*args), eager(*args)):
        assert len(got) == len(want) == len(bounds)
        for g, w, bound in zip(got, want, bounds):
            assert np.all(np.abs(np.asarray(g) - w) <= bound)
    assert all(np.all(b < 1e-12) for b in bounds)  # the bound is a few ulp, not a tolerance


def _runs(module):
    return [s for p in module.programs for s in p.steps if isinstance(s, cuda.RunKernel)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_whole_program_gives_the_reference_bits(name):
    fn, make = CASES[name]
    args = make()
    eager, mega, _ = executables(fn, *args)
    want = reference(fn, *args)
    got_m, got_e = mega(*args), eager(*args)
    assert len(got_m) == len(want)
    for m, e, w in zip(got_m, got_e, want):
        assert bit_identical(m, w) and bit_identical(e, w)
    kernels = [s for p in mega.module.programs for s in p.steps if not isinstance(s, ik.ir.Node)]
    assert kernels, "the row regions and the runs of elementwise ops run as kernels"


@pytest.mark.parametrize("name", ["heat", "heat-grad", "cg", "nested"])
def test_every_loop_body_has_its_own_program(name):
    fn, make = CASES[name]
    _, mega, _ = executables(fn, *make())
    programs = mega.module.programs
    assert len(programs) >= 2
    loops = [s for s in programs[0].steps if isinstance(s, ik.ir.Node)
             and s.op in (Op.SCAN, Op.WHILE)]
    assert loops
    bodies = {id(p.graph) for p in programs[1:]}
    for loop in loops:
        assert {id(sub.graph) for _, sub in ik.ir.graph.subgraphs(loop)} <= bodies
    names = [k.name for k in mega.module.kernels]
    assert len(names) == len(set(names))


def test_one_heat_step_is_one_launch_of_its_run():
    """The stencil's step (three shifted reads, four basic operations) is one
    run kernel launched once per step, not an eager kernel per op."""
    fn, make = CASES["heat"]
    args = make()
    _, mega, rt = executables(fn, *args)
    mega(*args)
    (run,) = _runs(mega.module)
    assert len(run.nodes) >= 4
    assert rt.kernels[run.kernel.name].launches == STEPS
    eager = [k for k in rt.kernels if k.startswith("isk_e_")]
    assert eager == ["isk_e_add_i64v_i64v_i64"]  # the step counter alone runs op by op


def test_a_run_closes_before_another_op_reads_it():
    """A reduction reads a run's last value: the run is launched before it
    and writes that value out, and a later run of the same shape reads it.
    (The shifted read keeps the ops off the pixel axis, out of a region.)"""
    def f(x):
        a = x[1:] * 2.0 + 1.0
        s = inp.sum(a)
        return (a - s) * (a + s), a * 3.0
    x = np.linspace(-1.0, 1.0, 50)
    _, mega, _ = executables(f, x)
    runs = _runs(mega.module)
    assert len(runs) == 2
    (written,) = runs[0].outputs
    assert written.op is Op.ADD and written in runs[1].inputs
    steps = mega.module.programs[0].steps
    reduce_at = next(i for i, s in enumerate(steps) if getattr(s, "op", None) is Op.REDUCE_SUM)
    assert steps.index(runs[0]) < reduce_at < steps.index(runs[1])
    for got, want in zip(mega(x), reference(f, x)):
        assert bit_identical(got, want)


def test_random_draws_run_as_integer_kernels():
    def f(key):
        return ik.random.normal(key, (1000,))
    key = ik.random.key(7)
    _, mega, _ = executables(f, key)
    (got,), (want,) = mega(key), reference(f, key)
    assert max_ulp(got, want) <= 8  # the host's libm log in the kernel against NumPy's
    assert _runs(mega.module)


def test_the_report_counts_runs_and_bodies():
    fn, make = CASES["heat"]
    args = make()
    _, mega, _ = executables(fn, *args)
    mega(*args)
    kernels = dict(mega.report_lines())["kernels"]
    assert "1 run(s) of elementwise ops" in kernels and "1 loop or branch bod" in kernels
    assert "between the kernels" in mega.source()


@pytest.mark.parametrize("name", sorted([*CASES, "mlp-grad"]))
def test_every_program_module_compiles_with_nvrtc(name):
    compiler = nvrtc_or_skip()
    fn, make = CASES[name] if name in CASES else (relu_mlp_grad, _mlp)
    _, mega, _ = executables(fn, *make())
    sources = [mega.module.source, cuda.cuda_module(mega.graph, contract=True).source]
    assert compile_everywhere(sources, compiler) == []


def fresnel_like(eps_re, eps_im):
    """Complex arithmetic (products, a quotient, a root, a modulus) from real
    inputs to real outputs: the GPU strategies run it on the real parts."""
    eps = ik.ops.complex(eps_re, eps_im)
    s = inp.sqrt(eps - 0.41)
    r = (eps * 0.77 - s) / (eps * 0.77 + s)
    return inp.real(r) ** 2 + inp.imag(r) ** 2, inp.abs(inp.exp(eps * 0.01j))


def test_complex_values_run_as_real_parts_on_the_gpu_strategies():
    """Every complex op here has a pair form: the modules hold real kernels
    only (NVRTC compiles them) and give native's bits (the same pair forms;
    the emulated runtime's math is the host's libm, as native's)."""
    rng = np.random.default_rng(5)
    args = (rng.uniform(3.0, 30.0, 64), rng.uniform(0.1, 8.0, 64))
    eager, mega, _ = executables(fresnel_like, *args)
    assert not any(n.dtype.kind == "c" for n in mega.plan.graph.nodes)
    want = ik.jit(fresnel_like, strategy="native")(*args)
    for got in (eager(*args), mega(*args)):
        for g, w in zip(got, want):
            assert max_ulp(g, w) <= 4
    refs = reference(fresnel_like, *args)
    for g, w in zip(mega(*args), refs):
        np.testing.assert_allclose(g, w, rtol=1e-14)
    assert mega.module.kernels, "the pair forms run as kernels (NVRTC-compiled after the session)"


def test_complex_ops_without_a_gpu_form_are_refused_at_planning():
    with pytest.raises(ik.PlanningError, match="complex log has no CUDA form"):
        executables(lambda z: inp.log(z), np.ones(4) + 1j)
