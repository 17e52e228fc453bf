"""The reference strategy's live-buffer accounting: four graphs whose live
sets are computed by hand; static walk and measured run agree."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import static_liveness

X = np.linspace(0.1, 1.0, 10)  # 80 bytes


def _chain(x):
    return inp.sin(inp.cos(inp.exp(x)))


def _fan(x):
    a, b, c = inp.exp(x), inp.sin(x), inp.cos(x)
    return a + b + c


def _scaled(x, s):
    return x * s  # s is broadcast: a view of the input, no new buffer


CASES = [
    # (function, args, peak buffers, peak bytes)
    (inp.exp, (X,), 2, 160),            # x, exp(x)
    (_chain, (X,), 3, 240),             # x, e, cos(e) — then e dies
    (_fan, (X,), 5, 400),               # x, a, b, c, a+b before a and b die
    (_scaled, (X, np.float64(2.0)), 3, 168),  # x, s (8 B), x*s
]


@pytest.mark.parametrize("fn,args,buffers,nbytes", CASES)
def test_static_and_measured_liveness_match_hand_counts(fn, args, buffers, nbytes):
    compiled = ik.jit(fn, strategy="reference").lower(*args).compile()
    static = static_liveness(compiled.graph)
    out = compiled.measure(*args)
    measured = compiled.executable.measured_liveness
    assert (static.peak_buffers, static.peak_bytes) == (buffers, nbytes)
    assert (measured.peak_buffers, measured.peak_bytes) == (buffers, nbytes)
    assert np.asarray(out).tobytes() == np.asarray(fn(*args)).tobytes()


def test_buffers_are_released_after_last_use():
    source = ik.jit(_chain, strategy="reference").lower(X).compile().source()
    assert "del v0" not in source  # the input belongs to the caller
    assert source.count("del ") == 2  # exp and cos results die once used


def test_report_shows_both_liveness_figures():
    compiled = ik.jit(_fan, strategy="reference").lower(X).compile()
    compiled.measure(X)
    text = str(compiled.report())
    assert "static:   peak 5 live buffers" in text and "agrees with static" in text
