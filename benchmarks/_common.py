"""What the benchmarks share: optional contenders skipped with their reason,
and interleaved timing (every candidate once per round, the best call of
each), so a shared, noisy machine slows every candidate alike."""

from __future__ import annotations

import math
import time


def try_import(name: str, notes: list, fix: str = "pip install 'isokernel[bench]'"):
    """The module, or None with a note saying why it is skipped and how to install it."""
    try:
        return __import__(name)
    except Exception as err:  # noqa: BLE001 - any broken install is a skip with its reason
        notes.append(f"{name}: skipped ({type(err).__name__}: {err}); {fix}")
        return None


def interleaved_best(rows: dict, args: tuple, rounds: int) -> tuple[dict, dict]:
    """(first result, best seconds) of every callable of ``rows`` on ``args``:
    one warm-up call each (compiles), then ``rounds`` rounds calling each once."""
    first = {name: fn(*args) for name, fn in rows.items()}
    best = dict.fromkeys(rows, math.inf)
    for _ in range(rounds):
        for name, fn in rows.items():
            t = time.perf_counter()
            fn(*args)
            best[name] = min(best[name], time.perf_counter() - t)
    return first, best
