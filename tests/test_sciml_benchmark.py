"""benchmarks/sciml.py: a ``--quick`` run prints a row per workload, and each
workload's result under the default strategy matches the reference
strategy's (threads bit for bit on the flagship). JAX and Numba are used when
installed and skipped with a note when not."""

from __future__ import annotations

import importlib.util
import math
import os
import pathlib
import sys

import numpy as np
import pytest

_BENCH = pathlib.Path(__file__).parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def sciml():
    """The benchmark module, imported with benchmarks/ on the path (its siblings are
    top-level modules there) and the environment it sets restored afterwards."""
    environ, path = dict(os.environ), list(sys.path)
    sys.path.insert(0, str(_BENCH))
    try:
        spec = importlib.util.spec_from_file_location("sciml", _BENCH / "sciml.py")
        module = sys.modules.setdefault("sciml", importlib.util.module_from_spec(spec))
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
    return module


@pytest.fixture(scope="module")
def quick(sciml):
    return sciml.main(["--quick"])


def test_quick_run_prints_a_row_per_workload(sciml, quick):
    workloads = {row["workload"] for row in quick}
    assert len(workloads) == len(sciml.WORKLOADS) + len(sciml.ROW_LOCAL)
    flagship = [row for row in quick if row["workload"].startswith("flagship")]
    assert len(flagship) == 3  # default, threads, reference
    for row in quick:
        assert "refused" not in row, f"{row['workload']}: {row['refused']}"
        assert 0.0 < row["seconds"] < math.inf
        traced, _ = row["peak"]
        assert traced > 0
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError:
        return  # the JAX columns are empty, with a printed note
    timed = [row for row in quick if row["strategy"].startswith("default")
             and not row["workload"].startswith("flagship")]
    assert all(row["jax"] and row["jax"] > 0 for row in timed)


def test_default_strategy_matches_the_reference_on_every_workload(quick):
    defaults = [row for row in quick if row["strategy"].startswith("default")]
    assert len(defaults) == len({row["workload"] for row in quick})
    for row in defaults:
        assert row["check"].startswith("ok"), f"{row['workload']}: {row['check']}"
    flagship = next(row for row in defaults if row["workload"].startswith("flagship"))
    assert flagship["check"].endswith("threads bit-identical")


def test_the_check_reports_differences(sciml):
    a = {"w": np.array([1.0, 2.0]), "n": np.array([3, 4])}
    assert sciml.close(a, a) == "ok (0)"
    assert sciml.close(a, {"w": np.array([1.0, 2.0 + 1e-6]), "n": a["n"]}).startswith("DIFFERS")
    assert sciml.close(a, {"w": a["w"], "n": np.array([3, 5])}).startswith("int")
    assert sciml.close((np.ones(2),), (np.ones(3),)).startswith("shape")
