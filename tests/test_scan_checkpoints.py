"""Checkpoint policies of ``scan`` and ``fori_loop``: the values and the
gradients of the carry and the sequences are the unchecked loop's bits
(basic operations on every CPU strategy; the reference's bits with
transcendentals too), for any segment length, forwards and reversed; the
gradient of a value the body closes over sums per segment (within a few
eps); reverse mode keeps a fraction of the unchecked tape; the default
checkpoints above ``CHECKPOINT_BYTES``."""

from __future__ import annotations

import importlib
import tracemalloc

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp

from .conftest import CPU_STRATEGIES, same

scan_module = importlib.import_module("isokernel.control.scan")  # the module, not the function
T = 53


def loop(every, reverse=False, transcendental=False):
    def f(x, w):
        def step(c, xt):
            nxt = (inp.sin(c) if transcendental else c * c * 0.25 - c) * w + xt * 0.125 + c * 0.5
            return nxt, inp.sum(nxt * nxt)
        c, ys = ik.scan(step, x, inp.ones((T,)) * w, reverse=reverse, checkpoint_every=every)
        return inp.sum(c * c) + inp.sum(ys * 0.01)
    return f


X = np.linspace(-0.5, 1.0, 40)


@pytest.mark.parametrize("strategy", CPU_STRATEGIES)
@pytest.mark.parametrize("reverse", [False, True])
def test_checkpointed_scans_give_the_unchecked_bits(strategy, reverse):
    want = ik.jit(loop(False, reverse), strategy=strategy)(X, 0.75)
    grad = ik.jit(ik.grad(loop(False, reverse), argnums=(0, 1)), strategy=strategy)(X, 0.75)
    for every in (1, 5, 7, T - 1, T):
        f = loop(every, reverse)
        same(ik.jit(f, strategy=strategy)(X, 0.75), want)
        dx, dw = ik.jit(ik.grad(f, argnums=(0, 1)), strategy=strategy)(X, 0.75)
        same(dx, grad[0])  # the carry's: the same chain of operations
        np.testing.assert_allclose(dw, grad[1], rtol=8 * np.finfo(float).eps * T)


def test_transcendental_steps_keep_the_reference_bits():
    f, g = loop(False, transcendental=True), loop(6, transcendental=True)
    same(ik.grad(f)(X, 0.75), ik.grad(g)(X, 0.75))  # eager: the reference's rules


def test_fori_loop_passes_its_policy_and_the_report_states_it():
    def heat(u, every):
        def step(_, v):
            return inp.concatenate([v[:1], v[1:-1] + 0.25 * (v[2:] - 2 * v[1:-1] + v[:-2]),
                                    v[-1:]])
        return inp.sum(ik.fori_loop(0, 40, step, u, checkpoint_every=every) ** 2)
    u = np.sin(np.linspace(0.0, 3.0, 30))
    want = ik.jit(ik.grad(lambda u: heat(u, False)))(u)
    jitted = ik.jit(ik.grad(lambda u: heat(u, 9)))
    same(jitted(u), want)
    assert "scan checkpointed: 4 segments of 9 steps" in str(jitted.lower(u).compile().report())


def test_the_default_checkpoints_above_the_threshold(monkeypatch):
    f = loop(None)
    graph = ik.trace(f, X, 0.75)
    assert not any(n.op is ik.ir.Op.CHECKPOINT for n in ik.ir.walk(graph))
    monkeypatch.setattr(scan_module, "CHECKPOINT_BYTES", 1024)  # 53 steps x 320 B
    graph = ik.trace(f, X, 0.75)
    kept = [n for n in ik.ir.walk(graph) if n.op is ik.ir.Op.SCAN and n.attrs["length"] == 8]
    assert kept, "ceil(sqrt(53)) = 8 steps per segment"
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        ik.trace(loop(0), X, 0.75)


def test_reverse_mode_keeps_a_fraction_of_the_tape():
    """1,000 steps on 4,000 float64 (the full-size figure, 10^4 steps on
    10^4, is in docs/control_flow.md): the checkpointed reverse pass keeps
    under 15 % of the unchecked one's peak, with the same gradient bits."""
    def f(every):
        def g(x):
            def step(c, _):
                return inp.sin(c) * 0.99 + 0.01, None
            return inp.sum(ik.scan(step, x, length=1000, checkpoint_every=every)[0])
        return ik.jit(ik.grad(g), strategy="reference")
    x = np.linspace(0.0, 1.0, 4000)
    peaks, grads = [], []
    for every in (False, 32):
        tracemalloc.start()
        grads.append(f(every)(x))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    same(grads[1], grads[0])
    assert peaks[1] < 0.15 * peaks[0], peaks
