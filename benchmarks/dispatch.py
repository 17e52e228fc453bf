"""Python overhead of a cached jitted call.

A 100-node pointwise model on 1,000 float64 elements, called through
``isokernel.jit`` (the cache hit path and the reference strategy), against
the same NumPy ufunc calls made directly. Both are timed in the same run,
interleaved, best of many repeats; the difference is isokernel's overhead.

    python benchmarks/dispatch.py [--elements 1000] [--repeats 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import isokernel as ik
import isokernel.numpy as inp

STEPS = 25  # four ops per step: 100 nodes of work


def model_isokernel(x):
    y = x
    for _ in range(STEPS):
        y = inp.sin(y * 1.0001 + 0.5) - x
    return y


def model_numpy(x):
    y = x
    for _ in range(STEPS):
        y = np.sin(y * 1.0001 + 0.5) - x
    return y


_C1, _C2 = np.float64(1.0001), np.float64(0.5)


def model_numpy_hoisted(x):
    """The same ufunc calls with the constants converted once, outside the
    call: the least NumPy work there is for this model."""
    y = x
    for _ in range(STEPS):
        y = np.sin(y * _C1 + _C2) - x
    return y


def best_of(fn, x, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args(argv)
    x = np.linspace(0.0, 1.0, args.elements)
    jitted = ik.jit(model_isokernel, strategy="reference")
    graph = jitted.lower(x).graph
    compute_nodes = sum(1 for n in graph.nodes if n.op.value not in ("input", "const",
                                                                       "broadcast"))
    assert jitted(x).tobytes() == model_numpy(x).tobytes(), "results differ"
    numpy_s = hoisted_s = jit_s = float("inf")
    for _ in range(5):  # interleave so all see the same machine state
        numpy_s = min(numpy_s, best_of(model_numpy, x, args.repeats // 5))
        hoisted_s = min(hoisted_s, best_of(model_numpy_hoisted, x, args.repeats // 5))
        jit_s = min(jit_s, best_of(jitted, x, args.repeats // 5))
    base_s = min(numpy_s, hoisted_s)
    overhead_us = (jit_s - base_s) * 1e6
    print(f"model: {compute_nodes} computing nodes on {args.elements} float64 elements "
          f"({len(graph.nodes)} graph nodes)")
    print(f"numpy direct (Python scalars)     {numpy_s * 1e6:9.1f} us")
    print(f"numpy direct (constants hoisted)  {hoisted_s * 1e6:9.1f} us")
    print(f"isokernel jit, cached (reference) {jit_s * 1e6:9.1f} us   "
          f"ratio {jit_s / base_s:.3f}x the faster NumPy")
    print(f"overhead above the NumPy work     {overhead_us:9.1f} us per call "
          f"({overhead_us / compute_nodes * 1e3:.0f} ns per node); target <= 50 us")
    return {"numpy_us": numpy_s * 1e6, "numpy_hoisted_us": hoisted_s * 1e6,
            "jit_us": jit_s * 1e6, "overhead_us": overhead_us}


if __name__ == "__main__":
    main()
