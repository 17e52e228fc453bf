"""``isokernel demo``: one model on every available strategy, with a parity
table against the reference."""

from __future__ import annotations

import time

import numpy as np

from ..backends import all_strategies, jit
from ..backends.parity import bit_identical, max_ulp
from .tau_omega import synthetic_inputs, tau_omega


def _best_time(fn, args, repeats: int) -> tuple[float, object]:
    out = fn(*args)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def _parity(out, ref) -> str:
    if all(bit_identical(a, b) for a, b in zip(out, ref)):
        return "bit-identical"
    return f"max {max(max_ulp(a, b) for a, b in zip(out, ref)):.0f} ulp"


def run_demo(pixels: int = 1_000_000, dtype=np.float64, repeats: int = 3, echo=print) -> None:
    """Print a parity and speed table of the tau-omega forward model."""
    args = synthetic_inputs(pixels, dtype)
    echo(f"tau-omega forward model, {pixels:,} pixels, {np.dtype(dtype).name}")
    ref_time, ref = _best_time(jit(tau_omega, strategy="reference"), args, repeats)
    eager_time, eager = _best_time(tau_omega, args, repeats)
    rows = [("numpy eager", eager_time, _parity(eager, ref))]
    unavailable = []
    for strategy in all_strategies():
        reason = strategy.unavailable_reason()
        if reason is not None:
            unavailable.append((strategy.name, reason))
            continue
        seconds, out = _best_time(jit(tau_omega, strategy=strategy.name), args, repeats)
        rows.append((strategy.name, seconds, _parity(out, ref)))
    echo(f"{'strategy':<18}{'Mpixel/s':>10}{'vs reference':>14}  parity vs reference")
    for name, seconds, parity in rows:
        echo(f"{name:<18}{pixels / seconds / 1e6:>10.1f}{ref_time / seconds:>13.2f}x  {parity}")
    for name, reason in unavailable:
        echo(f"{name:<18}{'—':>10}{'—':>14}  unavailable: {reason}")
    compiled = jit(tau_omega).lower(*args).compile()
    compiled.measure(*args)
    echo("")
    echo(str(compiled.report()))
