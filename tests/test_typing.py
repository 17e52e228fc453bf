"""The typed public API: the PEP 561 marker ships with the package, and
tests/typing/usage.py (which ``make lint`` checks with ``mypy --strict``)
runs and computes what its annotations say."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import isokernel
import isokernel.numpy as inp
from isokernel import typing as ik_typing

ROOT = Path(__file__).resolve().parents[1]


def _usage():
    spec = importlib.util.spec_from_file_location("isokernel_typing_usage",
                                                  ROOT / "tests" / "typing" / "usage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_is_marked_typed():
    assert (Path(isokernel.__file__).parent / "py.typed").is_file()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11's")
def test_the_marker_is_package_data_and_mypy_checks_the_usage_file():
    import tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["isokernel"]
    mypy = config["tool"]["mypy"]
    assert mypy["strict"] is True
    assert {"examples", "tests/typing/usage.py"} <= set(mypy["files"])


def test_the_aliases_are_public():
    assert set(ik_typing.__all__) == {"Array", "ArrayLike", "Axis", "DTypeLike", "PyTree",
                                      "Shape"}


def test_the_numpy_surface_exports_every_public_name():
    """Strict checkers see only what ``__all__`` lists as re-exported."""
    public = {n for n in dir(inp) if not n.startswith("_")}
    assert public == set(inp.__all__)


def test_the_typed_usage_program_runs():
    usage = _usage()
    out = usage.main()
    ndvi = np.linspace(-0.1, 0.9, 64)
    assert out["eager"].tobytes() == out["compiled"].tobytes()
    np.testing.assert_allclose(out["portable"], out["eager"], rtol=1e-15)
    x = np.sin(np.arange(6.0))
    np.testing.assert_allclose(out["smooth"], np.roll(x, -1) + x + np.roll(x, 1), rtol=1e-15)
    np.testing.assert_allclose(out["hess"], np.diag(6 * x), atol=1e-14)
    np.testing.assert_allclose(out["partial"], np.cumsum(x), rtol=1e-14)
    assert out["total"] == out["partial"][-1]
    assert int(out["halvings"]) == 50  # 20 -> 10 -> 5 -> 2.5 -> 1.25 -> 0.625: 5 halvings
    np.testing.assert_allclose(out["solve"], np.full(3, 0.5))
    np.testing.assert_allclose(out["power"], [1.0, 0.0, 0.0], atol=1e-8)
    assert np.isfinite(out["loss"])
    assert usage.attenuation(ndvi, 0.12).shape == ndvi.shape
