"""Fault injection: what a careful or hostile user can do to isokernel, and
what must happen instead of data loss, a crash, planted code or a silent
change of meaning. ``docs/reliability.md`` lists every case with its test."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import strategies
from isokernel.backends.platform import memory_budget
from isokernel.deploy import BudgetError

CPU = ["reference", "threads", "native"]


# ------------------------------------------------- every output is its own array


@pytest.mark.parametrize("strategy", CPU)
def test_equal_outputs_are_two_arrays(strategy):
    a, b = ik.jit(lambda x: (x * 2.0, x * 2.0), strategy=strategy)(np.arange(4.0))
    assert not np.shares_memory(a, b)
    a[0] = 99.0
    assert b[0] == 0.0


@pytest.mark.parametrize("strategy", CPU)
@pytest.mark.parametrize("model", [lambda x: x.astype(inp.float64), lambda x: x ** 1,
                                   lambda x: inp.reshape(x, (2, 2)), lambda x: x + 0 * x[0]],
                         ids=["astype", "power-1", "reshape", "plus-zero"])
def test_an_output_is_never_the_callers_input(strategy, model):
    x = np.arange(4.0)
    out = ik.jit(model, strategy=strategy)(x)
    assert not np.shares_memory(out, x)
    out[...] = -1.0
    assert np.array_equal(x, np.arange(4.0))


@pytest.mark.parametrize("strategy", CPU)
def test_writing_a_constant_output_does_not_change_the_next_call(strategy):
    f = ik.jit(lambda x: (x * 2.0, inp.full(3, 7.0)), strategy=strategy)
    f(np.arange(4.0))[1][:] = 0.0
    assert np.array_equal(f(np.arange(4.0))[1], np.full(3, 7.0))


# ------------------------------------------------------------- masked arrays


def test_jit_refuses_a_masked_array_naming_the_argument():
    masked = np.ma.masked_array([1.0, -9999.0], mask=[False, True])
    with pytest.raises(ik.DTypeError, match=r"argument 'state\['mv'\]' is a NumPy masked "
                                            r"array.*filled\(np.nan\)"):
        ik.jit(lambda state: state["mv"] + 1.0)({"mv": masked})


@pytest.mark.parametrize("op", [lambda m: inp.exp(m), lambda m: inp.asarray(m),
                                lambda m: inp.where(m > 0, m, 0.0)],
                         ids=["exp", "asarray", "where"])
def test_eager_functions_refuse_a_masked_array(op):
    masked = np.ma.masked_array([1.0, -9999.0], mask=[False, True])
    with pytest.raises(ik.DTypeError, match=r"test_faults.py:\d+: a NumPy masked array"):
        op(masked)


# ---------------------------------------------------------------- byte order


@pytest.mark.parametrize("strategy", CPU)
def test_big_endian_inputs_run_as_their_values(strategy):
    little = np.linspace(-3.0, 3.0, 1001)
    big = little.astype(">f8")
    f = ik.jit(lambda x: inp.exp(x) * x + 1.0, strategy=strategy)
    want = f(little)
    got = f(big)
    assert got.dtype == np.float64 and got.dtype.isnative
    assert np.array_equal(got, want)
    assert f.retraces == 0  # the same values, the same compiled function


# ------------------------------------------------------------------- retraces


def test_a_static_nan_records_once():
    f = ik.jit(lambda x, c: x + c, static_argnames="c", strategy="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ik.RetraceWarning)
        for _ in range(5):
            f(np.arange(3.0), c=float("nan"))
    assert f.retraces == 0


def test_static_one_and_one_point_zero_are_two_recordings():
    f = ik.jit(lambda x, c: x * c, static_argnames="c", strategy="reference")
    assert f(np.arange(3), c=2).dtype == np.int64
    assert f(np.arange(3), c=2.0).dtype == np.float64


def test_concurrent_first_calls_record_once():
    recordings = []

    def model(x):
        recordings.append(1)
        time.sleep(0.05)  # a slow recording: every thread arrives while it runs
        return x * 2.0

    f = ik.jit(model, strategy="reference")
    x = np.arange(8.0)
    results = [None] * 8

    def call(k):
        results[k] = f(x)
    threads = [threading.Thread(target=call, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(recordings) == 1
    assert all(np.array_equal(r, x * 2.0) for r in results)


# ----------------------------------------------------------- bounded resources


@pytest.mark.parametrize("strategy", CPU)
def test_a_call_that_cannot_fit_is_refused_before_work_with_the_sizing_line(strategy):
    huge = np.broadcast_to(np.float64(1.0), (2 ** 44,))
    started = time.perf_counter()
    with pytest.raises(BudgetError, match=r"needs at least .* nothing was run\. Sizing: "
                                          r"largest block: .*block='auto'"):
        ik.jit(lambda x: x * 2.0, strategy=strategy)(huge)
    assert time.perf_counter() - started < 20.0


def test_small_calls_are_not_checked():
    compiled = ik.jit(lambda x: x * 2.0, strategy="reference").lower(np.ones(8)).compile()
    assert compiled._admit is None


def _limits_tree(tmp_path, address_space: str, data: str, vm_size_kib: int):
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "limits").write_text(textwrap.dedent(f"""\
        Limit                     Soft Limit           Hard Limit           Units
        Max data size             {data:<20} unlimited            bytes
        Max address space         {address_space:<20} unlimited            bytes
        """))
    (proc / "status").write_text(f"VmSize:\t{vm_size_kib} kB\nVmData:\t{vm_size_kib // 2} kB\n")
    (tmp_path / "proc" / "meminfo").write_text("MemAvailable: 16777216 kB\n")
    return str(tmp_path)


def test_rlimit_as_below_the_host_sets_the_budget(tmp_path):
    root = _limits_tree(tmp_path, str(4 << 30), "unlimited", vm_size_kib=1 << 20)
    budget = memory_budget(root)
    assert budget.value == (4 << 30) - (1 << 30)
    assert budget.source.startswith("RLIMIT_AS soft limit") and "MemAvailable" in budget.source


def test_rlimit_data_counts_too_and_the_tighter_wins(tmp_path):
    root = _limits_tree(tmp_path, str(8 << 30), str(2 << 30), vm_size_kib=1 << 20)
    budget = memory_budget(root)
    assert budget.value == (2 << 30) - (512 << 20)
    assert budget.source.startswith("RLIMIT_DATA")


def test_an_unlimited_process_keeps_the_host_figure(tmp_path):
    root = _limits_tree(tmp_path, "unlimited", "unlimited", vm_size_kib=1 << 20)
    budget = memory_budget(root)
    assert budget.value == 16 << 30 and "RLIMIT" not in budget.source


def test_block_auto_plans_within_ulimit_v():
    script = textwrap.dedent("""\
        import resource
        import numpy as np
        import isokernel as ik
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
        f = ik.jit(lambda x: x * 2.0 + 1.0, strategy="reference", block="auto")
        x = np.ones(50_000_000)
        print(f.lower(x).compile().block_choice.line)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "RLIMIT_AS soft limit" in done.stdout


# ------------------------------------------------------------- auto's choice


def test_the_report_says_why_auto_passed_over_native(monkeypatch):
    native = strategies.get_strategy("native")
    broken = dataclasses.replace(native, profile=dataclasses.replace(
        native.profile, probe=lambda: "the C compiler probe failed (ISOKERNEL_CC=/bin/true)"))
    monkeypatch.setitem(strategies._STRATEGIES, "native", broken)
    compiled = ik.jit(lambda x: x + 1.0).lower(np.ones(4)).compile()
    assert compiled.lowered.strategy.name == "threads"
    assert ("threads on cpu (auto: native unavailable: the C compiler probe failed "
            "(ISOKERNEL_CC=/bin/true))") in str(compiled.report())
