"""The C emitter: golden files for six representative graphs (one with rows
beyond the unrolling cap, as loops), the body independent of its host
wrapper, exact literals, and the compiler's cache (atomic entries, corrupted
ones rebuilt) and probe."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import isokernel as ik
from isokernel import codegen
from isokernel.backends import get_strategy
from isokernel.backends.cpu import loops
from isokernel.codegen import compiler as cc
from isokernel.codegen import driver
from isokernel.codegen.c_expr import literal
from isokernel.codegen.pixel import partition
from isokernel.record.tables import Table
from isokernel.reports import devices_table

from .conftest import compile_everywhere, nvrtc_or_skip

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ISOKERNEL_UPDATE_GOLDEN") == "1"
needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")


def _models():
    spec = importlib.util.spec_from_file_location("golden_models", GOLDEN / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _examples():
    f32, f64 = np.float32, np.float64
    return {
        "forward": [np.ones(8, f32)] * 3,
        "guarded": [np.ones(8, f64)] * 2,
        "per_pixel_stats": [np.ones((8, 4), f64), np.ones(4, f64)],
        "integer_bins": [np.ones(8, np.int64), np.ones(8, np.int64)],
        "layout": [np.ones((8, 2, 3), f32)],
        "spectra": [np.ones((128, 100), f64), np.ones(100, f64)],
        "kepler": [np.ones(8, f64)] * 2,
        "fori": [np.ones(8, f64)],
    }


def generated_c(name: str) -> str:
    """The translation unit of one model, with vector math declared (as on
    glibc) so the file does not depend on the machine that renders it."""
    graph = ik.trace(getattr(_models(), name), *_examples()[name])
    part = partition(graph, accept=codegen.supports)
    pairs = [(codegen.emit_body(f"isk_{name}_r{k}_point", stage, graph.index, stage.modes),
              f"isk_{name}_r{k}") for k, stage in enumerate(part.regions)]
    return codegen.host_source(pairs, graph.name, vector_math=True)


@pytest.mark.parametrize("name", sorted(_examples()))
def test_generated_c_matches_golden_file(name):
    path = GOLDEN / f"{name}.c"
    text = generated_c(name)
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"regenerate with ISOKERNEL_UPDATE_GOLDEN=1 ({path})"


def test_golden_files_show_provenance_literals_and_a_select():
    forward, guarded = (GOLDEN / "forward.c").read_text(), (GOLDEN / "guarded.c").read_text()
    assert "expf(" in forward and "sqrtf(" in forward and "// %" in forward
    assert "exp @ models.py:10" in forward or "@ models.py:10" in forward
    assert "0x1.15c29p+4f" in forward  # 17.36 rounded to float32, as a hex literal
    assert " ? " in guarded and "isk_f64_to_i32(" in guarded
    assert "isk_floordiv_i64" in (GOLDEN / "integer_bins.c").read_text()
    assert "isk_bits_f32(0x7f800000u)" in (GOLDEN / "layout.c").read_text()


def test_golden_rows_beyond_the_cap_are_loops():
    """The spectra model's rows of 100: loops over the row with provenance,
    arrays for the values read after a loop, index maps instead of copies."""
    spectra = (GOLDEN / "spectra.c").read_text()
    assert "    double v6[100];  // %6 add @ models.py:41" in spectra
    assert ("    for (int64_t k = 0; k < 100; k++) {  // for k < 100: %3 mul @ models.py:41 .. "
            "%6 add @ models.py:41" in spectra)
    assert "const double v14_k = (v12_k - v6[99 - k]);" in spectra  # the flip: an affine index
    assert "v6[isk_idx_" in spectra and "static const int32_t isk_idx_" in spectra
    assert "out3[i * 2 + 1] = v6[1];" in spectra  # a short slice: names again


def test_body_is_independent_of_the_host_wrapper():
    """The body a CUDA wrapper would take: only ISK_INLINE, <math.h> and
    <stdint.h> names; no block, tail or slice of the CPU wrapper."""
    graph = ik.trace(_models().guarded, *_examples()["guarded"])
    region = partition(graph, accept=codegen.supports).regions[0]
    body = codegen.emit_body("isk_guarded_point", region, graph.index, region.modes)
    assert body.text.count("ISK_INLINE") >= 1 and "ISK_BLOCK" not in body.text
    assert "malloc" not in body.text and "begin" not in body.text


@pytest.mark.parametrize("value,dtype,text", [
    (17.36, np.float64, "0x1.15c28f5c28f5cp+4"), (0.1, np.float32, "0x1.99999ap-4f"),
    (1.0, np.float64, "0x1.0p+0"),
    (-0.0, np.float64, "-0x0.0p+0"), (np.nan, np.float64, "isk_bits_f64(0x7ff8000000000000u)"),
    (-(2**63), np.int64, "INT64_MIN"), (7, np.int32, "7"), (True, np.bool_, "1"),
])
def test_literals_are_exact(value, dtype, text):
    assert literal(value, np.dtype(dtype)) == text
    if dtype in (np.float32, np.float64) and np.isfinite(value):
        assert np.asarray(float.fromhex(text.rstrip("f")), dtype) == np.asarray(value, dtype)


# --- compiler, cache, probe ---------------------------------------------------------------

SOURCE = "#include <stdint.h>\nint64_t isk_answer(void) { return 42; }\n"


@needs_cc
def test_cache_entry_is_written_atomically_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cc, "_LOADED", {})
    library, built = cc.build(SOURCE)
    assert library.isk_answer() == 42 and not built.cached
    names = sorted(p.name for p in tmp_path.iterdir())
    assert f"{built.key}.so" in names and f"{built.key}.sha256" in names
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(f".{built.key}")]
    monkeypatch.setattr(cc, "_LOADED", {})
    _, again = cc.build(SOURCE)
    assert again.cached and again.key == built.key


@needs_cc
def test_corrupted_cache_entry_is_rebuilt_not_loaded(tmp_path, monkeypatch):
    """An entry damaged on disk (here: truncated, as by a full disk in a
    process that wrote it without renaming) fails its digest and is rebuilt."""
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cc, "_LOADED", {})
    source = SOURCE.replace("42", "43")
    compiler = cc.current_compiler()
    key = cc.cache_key(source, compiler, compiler.flags(False))
    _, built = cc.build(source)
    assert not built.cached and built.key == key
    path = built.path
    damaged = path.read_bytes()[:100]
    path.unlink()
    path.write_bytes(damaged)
    monkeypatch.setattr(cc, "_LOADED", {})  # as in a new process
    library, rebuilt = cc.build(source)
    assert rebuilt.key == key and not rebuilt.cached and library.isk_answer() == 43


@needs_cc
def test_cache_key_covers_flags():
    _, off = cc.build(SOURCE, contract=False)
    _, on = cc.build(SOURCE, contract=True)
    assert off.key != on.key and "-ffp-contract=fast" in on.flags


def test_no_compiler_makes_native_unavailable_with_the_reason(monkeypatch):
    monkeypatch.setenv("ISOKERNEL_CC", "/nonexistent/isokernel-cc")
    cc.find_compiler_path.cache_clear()
    try:
        reason = get_strategy("native").unavailable_reason()
        assert reason is not None and "no C compiler found" in reason
        assert "unavailable: no C compiler found" in devices_table()
        with pytest.raises(ik.BackendUnavailableError, match="no C compiler"):
            ik.jit(lambda x: x + 1.0, strategy="native")(np.ones(3))
        compiled = ik.jit(lambda x: x + 1.0).lower(np.ones(3)).compile()
        assert "strategy   threads on cpu (auto" in str(compiled.report())
    finally:
        monkeypatch.delenv("ISOKERNEL_CC")
        cc.find_compiler_path.cache_clear()
        loops.unavailable_reason.cache_clear()  # threads probed the tile driver without one
        driver.load_driver.cache_clear()


# --- tables -------------------------------------------------------------------------------

def _twin_tables():
    """Two tables with equal values (and shape) under different names, and
    a model that looks up both."""
    values = np.linspace(0.0, 2.0, 9)
    a = Table(values, 0.0, 0.25, name="albedo")
    b = Table(values, 0.0, 0.25, name="emissivity")

    def model(x):
        return a.lookup(x) * 2.0 + b.lookup(x * 0.5)
    return model


@needs_cc
@pytest.mark.parametrize("strategy", ["native", "native-whole"])
def test_two_tables_with_equal_values_and_different_names_compile(strategy):
    """Each table is one static array of its own: equal values under two
    names once gave one ``isk_tab_`` symbol defined twice."""
    x = np.linspace(-0.5, 2.5, 64)
    model = _twin_tables()
    got = ik.jit(model, strategy=strategy)(x)
    want = ik.jit(model, strategy="reference")(x)
    assert np.array_equal(got, want)


def test_two_tables_with_equal_values_and_different_names_compile_with_nvrtc():
    compiler = nvrtc_or_skip()
    graph = ik.trace(_twin_tables(), np.linspace(-0.5, 2.5, 64))
    assert compile_everywhere([codegen.cuda_source(graph)], compiler) == []
