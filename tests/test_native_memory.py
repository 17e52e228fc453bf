"""Memory of the compiled CPU strategies on graphs with no row region: every
value is released after its last reader inside a stage (not only at stage
boundaries), the memory model states the peak that a call reaches, and
admission refuses a call that does not fit by that figure.

Peaks are measured in a subprocess, each as what the call holds that existed
before it (its inputs, the graph's constants) plus: the rise of the resident
set (``VmHWM`` after ``/proc/self/clear_refs`` reset it, less ``VmRSS``
before the call), and tracemalloc's peak (NumPy reports every array to it);
both are compared with the model's figure (``within_model``), and the
process's own peak (``VmHWM``) with a fixed bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
import isokernel.random
from isokernel import codegen, deploy
from isokernel.backends.parity import max_ulp
from isokernel.backends.platform import Figure
from isokernel.codegen.pixel import partition
from isokernel.deploy import HostBudget, memory_shape

pytestmark = [
    pytest.mark.skipif(codegen.unavailable_reason() is not None,
                       reason=f"native: {codegen.unavailable_reason()}"),
    pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                       reason="peak measurement needs Linux's /proc/self/clear_refs"),
]

MIB = 1 << 20
MODEL_MARGIN = 1.5  # measured peak and model within this factor of each other
NORMAL_ULP = 8  # native's normal draws against the reference's (3 measured on 10^5 draws)
NORMAL_BOUND = 400 * 10**6  # bytes: the whole process's peak for normal(key, (10**6,))

SCRIPT = r"""
import ctypes, json, sys, tracemalloc
import numpy as np
import isokernel as ik, isokernel.numpy as inp, isokernel.random
from isokernel import deploy

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

which, strategy, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if which == "normal":
    fn, args = (lambda k: isokernel.random.normal(k, (n,))), (isokernel.random.key(0),)
elif which == "flips":  # row regions between whole flips of the pixel axis
    def fn(x):
        for _ in range(20):
            x = inp.flip(inp.sin(x) * 2.0)
        return x
    args = (np.linspace(0.0, 1.0, n),)
else:  # a chain of 60 elementwise ops on n elements built from a (2,) input
    def fn(x):
        y = inp.tile(x, n // 2)
        for i in range(60):
            y = inp.sin(y) if i % 3 == 0 else (y * 1.0001 if i % 3 == 1 else y + 0.5)
        return y
    args = (np.array([0.1, 0.2]),)
compiled = ik.jit(fn, strategy=strategy).lower(*args).compile()
name = compiled.lowered.strategy.name
cpus = deploy.host_budget(gpu=False).cpus.value
shape = deploy.memory_shape(compiled.graph, name, workers=cpus)
resident = sum(np.asarray(a).nbytes for a in args)
resident += sum(c.nbytes for c in compiled.graph.consts())
# a whole program's arena (native-whole's, native's on a graph it compiles whole) is allocated
# with the executable: before the traced call (its pages are first touched by the call, so
# RSS counts them there)
program = getattr(compiled.executable, "program", None)
arena = program.scratch if program is not None else 0
ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages back, so the call faults its own
tracemalloc.start()
# the process's own peak is VmHWM (before the reset and after the call), not ru_maxrss: Linux
# carries ru_maxrss across exec, so a child started by a large test process would report
# its parent's peak
startup = status("VmHWM")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before, (base, _) = status("VmRSS"), tracemalloc.get_traced_memory()
out = compiled(*args)
rss, (_, traced) = status("VmHWM") - before, tracemalloc.get_traced_memory()
traced += resident + arena - base
print(json.dumps({"strategy": name, "rss": rss + resident, "traced": traced,
                  "model": shape.bytes(), "shape": str(shape), "report": str(compiled.report()),
                  "process": max(startup, status("VmHWM"))}))
"""


def measure(which: str, strategy: str, n: int) -> dict:
    """Run one reproducer in a fresh interpreter; its peaks and model."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, which, strategy, str(n)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def within_model(found: dict) -> bool:
    """The call's peak within ``MODEL_MARGIN`` of the model: by RSS from
    above, by tracemalloc (every array allocation) from both sides. The
    kernel's high-water mark can miss pages returned before it is read, so
    RSS may read low under load, never high."""
    model = found["model"]
    return (found["rss"] <= model * MODEL_MARGIN
            and model / MODEL_MARGIN <= found["traced"] <= model * MODEL_MARGIN)


def test_normal_under_auto_runs_native_below_the_bound_and_as_modelled():
    found = measure("normal", "auto", 10**6)
    assert found["strategy"] == "native"
    assert found["process"] < NORMAL_BOUND, found
    assert within_model(found), found


@pytest.mark.parametrize("strategy", ["threads", "native-whole", "reference"])
def test_normal_on_the_other_cpu_strategies_is_as_modelled(strategy):
    found = measure("normal", strategy, 10**6)
    assert found["process"] < NORMAL_BOUND, found
    assert within_model(found), found


CHAIN = 10**6


@pytest.fixture(scope="module")
def chain_on_reference() -> dict:
    return measure("chain", "reference", CHAIN)


@pytest.mark.parametrize("strategy", ["native", "threads", "native-whole"])
def test_a_long_chain_from_a_small_input_peaks_near_the_reference(strategy, chain_on_reference):
    n, reference = CHAIN, chain_on_reference
    found = measure("chain", strategy, n)
    assert within_model(found), found
    # a few buffers of 8 MB at once as the reference holds (native-whole: one more, the
    # output copied out of its arena), not one per op (60)
    assert found["rss"] <= reference["traced"] + 3 * 8 * n, (found, reference)
    assert found["traced"] <= reference["traced"] + 3 * 8 * n, (found, reference)
    assert f"{strategy}: {found['shape']}" in found["report"]


@pytest.mark.parametrize("strategy", ["native", "threads"])
def test_regions_between_whole_ops_are_as_modelled(strategy):
    found = measure("flips", strategy, 10**6)
    assert within_model(found), found


# --- the model and admission, without running the calls ----------------------------------

def _normal(n: int):
    return ik.jit(lambda k: isokernel.random.normal(k, (n,)), strategy="native")


def test_the_native_model_counts_the_whole_ops_intermediates():
    graph = _normal(10**5).lower(isokernel.random.key(0)).graph
    native = memory_shape(graph, "native")
    reference = memory_shape(graph, "reference")
    # nothing is row-local at P=2: native compiles the graph as one C program whose fused
    # elementwise runs keep no intermediate: the draws (8e5 bytes) go straight into the
    # output, beside the graph's constants (the 8e5-byte counter), where the reference
    # holds several live buffers of the draws' size
    consts = sum(c.nbytes for c in graph.consts())
    assert 8 * 10**5 + consts <= native.bytes() <= 8 * 10**5 + consts + 64 * 1024
    assert native.bytes() + 3 * 8 * 10**5 < reference.bytes()
    assert native.basis.startswith("arena: the whole-program emitter's layout")


def test_values_die_inside_a_whole_stage():
    from isokernel.backends.liveness import staged_release

    def chain(x):
        y = inp.tile(x, 500)
        for _ in range(10):
            y = inp.sin(y)
        return y
    graph = ik.jit(chain, strategy="reference").lower(np.array([0.1, 0.2])).graph
    part = partition(graph, accept=codegen.supports)
    steps = staged_release(part)
    # each sin's operand dies right after it, inside the one whole stage
    released = [len(dead) for stage in steps for dead in stage]
    assert sum(1 for k in released if k) >= 9


def _flips(x):
    for _ in range(3):
        x = inp.flip(inp.sin(x) * 2.0)
    return x


def test_the_staged_walk_holds_region_outputs_and_copies_of_strided_views():
    from isokernel.backends.liveness import staged_liveness

    graph = ik.jit(_flips, strategy="reference").lower(np.linspace(0.0, 1.0, 1000)).graph
    part = partition(graph, accept=codegen.supports)
    # at the second region: x, the broadcast 2.0 (a region output later regions read), the
    # flipped product it reads, its own output, and (copies) a contiguous copy of the flip
    assert staged_liveness(part).peak_buffers == 4
    walk = staged_liveness(part, copies=True)
    assert (walk.peak_buffers, walk.peak_bytes) == (5, 5 * 8000)


def _tight(memory: int):
    return lambda *a, **k: HostBudget(Figure(2, "affinity"), Figure(memory, "cgroup v2 test"))


def test_admission_refuses_normal_of_2e7_by_the_true_peak(monkeypatch):
    compiled = _normal(2 * 10**7).lower(isokernel.random.key(0)).compile()
    need = memory_shape(compiled.graph, "native").bytes()
    # the 160 MB output and the 160 MB counter constant, no intermediate of that size
    assert 320 * 10**6 <= need < 330 * 10**6
    assert deploy.admission(compiled) is not None  # checked: above the admission floor
    monkeypatch.setattr(deploy.decisions, "host_budget", _tight(250 * MIB))
    with pytest.raises(deploy.BudgetError, match=r"on native: this call needs at least .*Sizing: "):
        compiled(isokernel.random.key(0))


def test_block_sizing_holds_for_a_graph_with_no_row_region(monkeypatch):
    key = isokernel.random.key(0)
    monkeypatch.setattr(deploy.decisions, "host_budget", _tight(60 * MIB))
    with pytest.raises(deploy.BudgetError, match="nothing fits"):
        ik.jit(lambda k: isokernel.random.normal(k, (10**7,)), strategy="native",
               block="auto")(key)
    small = ik.jit(lambda k: isokernel.random.normal(k, (1000,)), strategy="native",
                   block="auto")
    want = ik.jit(lambda k: isokernel.random.normal(k, (1000,)), strategy="reference")(key)
    # native's log1p is the C math library's (vector variants): ulp-bounded, not the bits
    assert max_ulp(small(key), want) <= NORMAL_ULP
