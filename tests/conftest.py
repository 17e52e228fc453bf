"""Shared fixtures: the strategy fixture that checks every available
strategy against the reference under its contract, and Hypothesis profiles."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from isokernel import jit as ik_jit
from isokernel.backends import all_strategies
from isokernel.backends.parity import bit_identical, bit_identical_but_nan, max_ulp
from isokernel.ir import Op
from isokernel.ir.pytree import tree_leaves

# "ci" (the default) draws the same examples on every run, so a red CI is
# reproducible and never a coin toss; "explore" draws new ones each run (use it
# locally to hunt for failures); "dev" is a quick pass.
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("ISOKERNEL_HYPOTHESIS_PROFILE", "ci"))

STRATEGIES = [s.name for s in all_strategies()]
REQUIRE_NVRTC = os.environ.get("ISOKERNEL_REQUIRE_NVRTC") == "1"
NVRTC_ARCHS = ("sm_80", "sm_90")


def nvrtc_or_skip():
    """The NVRTC binding for compile tests; missing, they skip with the
    reason, or fail where ``ISOKERNEL_REQUIRE_NVRTC=1`` (``make test``)."""
    from isokernel.codegen import nvrtc

    found = nvrtc.find_nvrtc(("cuda-bindings", "cupy"))
    if found is None:
        reason = nvrtc.unavailable_reason(("cuda-bindings", "cupy"))
        if REQUIRE_NVRTC:
            pytest.fail(f"ISOKERNEL_REQUIRE_NVRTC=1 but {reason}")
        pytest.skip(reason)
    return found


def compile_everywhere(sources, nvrtc) -> list[str]:
    """Compile every source for every architecture in ``NVRTC_ARCHS``;
    returns the failures (NVRTC's messages)."""
    from concurrent.futures import ThreadPoolExecutor

    from isokernel.codegen import cuda
    from isokernel.codegen import nvrtc as nv

    def one(job):
        source, arch = job
        options = cuda.nvrtc_options("--fmad=true" in source.split("\n", 3)[1])
        try:
            nv.compile_cuda(source, arch, options, nvrtc)
        except nv.NvrtcError as err:
            return f"{arch}: {err}"
        return None
    jobs = [(s, a) for s in sources for a in NVRTC_ARCHS]
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        return [r for r in pool.map(one, jobs) if r is not None]


@pytest.fixture(scope="session", autouse=True)
def every_cuda_source_compiles():
    """After the session: every CUDA source the tests generated compiles
    with NVRTC for sm_80 and sm_90 (from the cache when it already did)."""
    yield
    if os.environ.get("ISOKERNEL_SESSION_NVRTC") == "0":  # scripts/gpu-check saves the time
        return
    from isokernel.codegen import cuda, nvrtc

    sources = cuda.generated_sources()
    found = nvrtc.find_nvrtc(("cuda-bindings", "cupy"))
    if not sources or found is None:
        if sources and REQUIRE_NVRTC:
            pytest.fail(f"{len(sources)} CUDA sources left uncompiled: "
                        f"{nvrtc.unavailable_reason()}")
        return
    failures = compile_everywhere(sources, found)
    assert not failures, f"{len(failures)} generated CUDA source(s) failed NVRTC:\n" + \
        "\n".join(failures[:3])


CPU_STRATEGIES = ("reference", "threads", "native")


@pytest.fixture(params=("eager", *CPU_STRATEGIES))
def run(request):
    """``run(fn, *args)``: ``fn(*args)`` eagerly, or under ``jit`` with each
    CPU strategy (a module may define its own ``run``)."""
    if request.param == "eager":
        return lambda fn, *args: fn(*args)
    return lambda fn, *args: ik_jit(fn, strategy=request.param)(*args)


def same(got, want) -> None:
    """One dtype, one shape, every bit."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    assert got.tobytes() == want.tobytes(), (got, want)


@pytest.fixture(params=STRATEGIES)
def strategy(request):
    """Every strategy of this version; unavailable ones skip with their reason."""
    found = next(s for s in all_strategies() if s.name == request.param)
    reason = found.unavailable_reason()
    if reason is not None:
        pytest.skip(f"{found.name}: {reason}")
    return found


LIBM_CPU = frozenset({"native", "native-whole"})
"""CPU strategies whose transcendentals call the C math library (ulp-bounded)."""
OWN_ORDER = frozenset({"native-whole"})
"""Strategies that fold reductions and contractions in their own fixed order
(not NumPy's), with their own NaN payloads in max/min folds; their order is
checked against its written-out form in their own tests."""


def calls_libm(strategy_name: str) -> bool:
    return strategy_name in LIBM_CPU or strategy_name.startswith("cuda")


def native_whole(graph) -> bool:
    """Whether ``native`` compiles ``graph`` (at its recorded shapes, default
    options) as one C program, folding reductions and contractions in its
    fixed sequential order as ``native-whole`` does."""
    from isokernel.backends.cpu.native import compiles_whole
    return compiles_whole(graph)


def folds_in_own_order(strategy_name: str, graph) -> bool:
    """Whether ``strategy_name`` folds ``graph``'s reductions and contractions
    in its own fixed order (not NumPy's): ``native-whole`` always, ``native``
    where it compiles the graph whole."""
    return strategy_name in OWN_ORDER or (strategy_name == "native" and native_whole(graph))


def owes_reference_bits(strategy_name: str, graph) -> bool:
    """Whether ``strategy_name``'s contract is the reference's bits on
    ``graph``: not for transcendentals where it calls a math library, not
    for reductions and contractions where it sums in its own order."""
    from isokernel.ir.ops import REDUCE, TRANSCENDENTAL
    ops = graph.ops()
    if calls_libm(strategy_name) and ops & TRANSCENDENTAL:
        return False
    return not (ops & (REDUCE | {Op.DOT_GENERAL}) and folds_in_own_order(strategy_name, graph))


def same_bits(strategy_name: str, got, want, graph=None) -> bool:
    """Bit identity; a GPU strategy's NaNs carry the GPU's payload, and a
    strategy folding in its own order (on ``graph``, where given) its own
    NaN payloads."""
    if strategy_name.startswith("cuda") or strategy_name in OWN_ORDER or (
            graph is not None and folds_in_own_order(strategy_name, graph)):
        return bit_identical_but_nan(got, want)
    return bit_identical(got, want)


def assert_contract(strategy_name: str, result, reference, ulp_bound: float = 0,
                    graph=None) -> None:
    """``result`` meets ``strategy_name``'s contract against ``reference``:
    bit-identical (NaN payloads aside where the strategy folds ``graph``'s
    reductions in its own order), or within ``ulp_bound`` where the contract
    allows one."""
    got_leaves, want_leaves = tree_leaves(result), tree_leaves(reference)
    got_leaves = [g.get() if hasattr(g, "__cuda_array_interface__") else g for g in got_leaves]
    assert len(got_leaves) == len(want_leaves)
    for got, want in zip(got_leaves, want_leaves):
        if ulp_bound == 0:
            assert same_bits(strategy_name, got, want, graph), \
                f"{strategy_name}: bits differ from reference"
        else:
            assert max_ulp(got, want) <= ulp_bound, f"{strategy_name}: beyond {ulp_bound} ulp"
