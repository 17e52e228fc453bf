"""Python overhead of a cached jitted call, three ways, timed in one run.

1. A 100-node pointwise model on 1,000 float64 elements through
   ``isokernel.jit`` (the reference strategy, cache hit) against the same
   NumPy ufunc calls made directly: the difference is isokernel's overhead.
2. The tiny call: ``sin(x) * 2 + x`` on 8 float64 elements, cached, on
   ``native``, ``threads`` and ``reference``, beside a cached JAX ``jit``
   call when JAX is installed (NumPy array in; JAX's result blocked on at the
   end of each batch, so its asynchronous dispatch is timed whole). Training
   loops and solvers make millions of such calls.
3. The inline threshold: ``native`` and ``threads`` at growing pixel
   counts, each call on the calling thread (inline) against the pool of
   every core; the first size where the pool wins is where the strategies'
   ``INLINE_ROWS`` belongs on this machine.

Every figure is the best of interleaved repeats (the machine is shared).

    python benchmarks/dispatch.py [--elements 1000] [--repeats 2000] [--quick]
"""

from __future__ import annotations

import argparse
import functools
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
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args(argv)
    figures = overhead(args)
    figures.update(tiny_call(200 if args.quick else 2000))
    figures.update(inline_threshold(3 if args.quick else 15))
    return figures


def overhead(args) -> dict:
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


TINY = 8


def tiny_model(x):
    return inp.sin(x) * 2.0 + x


def _jax_tiny():
    """A cached JAX jit of the tiny model, or None when JAX is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    fn = jax.jit(lambda x: jnp.sin(x) * 2.0 + x)

    def call(x, n):
        for _ in range(n):
            out = fn(x)
        out.block_until_ready()
    return call


def _per_call(fn, x, n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn(x)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def tiny_call(n: int) -> dict:
    """Seconds per cached call of the tiny model on each CPU strategy and
    JAX, interleaved."""
    x = np.linspace(0.0, 1.0, TINY)
    want = tiny_model(x)
    calls = {}
    for strategy in ("native", "threads", "reference"):
        fn = ik.jit(tiny_model, strategy=strategy)
        assert np.array_equal(fn(x), want) or strategy == "native"
        calls[strategy] = fn
    jax_call = _jax_tiny()
    if jax_call is not None:
        jax_call(x, 10)
    best = dict.fromkeys([*calls, *(["jax"] if jax_call else [])], float("inf"))
    for _ in range(5):
        for name, fn in calls.items():
            best[name] = min(best[name], _per_call(fn, x, n // 5, 3))
        if jax_call is not None:
            start = time.perf_counter()
            jax_call(x, n)
            best["jax"] = min(best["jax"], (time.perf_counter() - start) / n)
    print(f"\ntiny call: sin(x) * 2 + x on {TINY} float64, cached")
    for name, seconds in best.items():
        ratio = f"   {seconds / best['jax']:.2f}x JAX jit" if "jax" in best else ""
        print(f"  {name:<10} {seconds * 1e6:7.2f} us{ratio}")
    if "jax" not in best:
        print("  jax        not installed (pip install 'isokernel[bench]')")
    return {f"tiny_{name}_us": s * 1e6 for name, s in best.items()}


def inline_threshold(rounds: int) -> dict:
    """Per size: the small-call path (on the calling thread) against the
    pool, for native and threads; each executable is built with the
    strategy's threshold set so that it takes the path being timed."""
    print("\ninline threshold: tau-omega, float64, us per call (calling thread | pool of "
          f"{_workers()} workers)")
    found = {s: _crossover(s, rounds) for s in ("native", "threads")}
    for strategy, size in found.items():
        print(f"  {strategy}: the pool first wins (by 10 %) at {size} pixels"
              if size else f"  {strategy}: the pool never won by 10 % up to 2^18 pixels")
    return {f"pool_wins_{k}": v for k, v in found.items()}


def _workers() -> int:
    from isokernel.backends.platform import cpu_budget
    return cpu_budget().value


def _built(strategy: str, rows: int, args):
    """A jitted tau-omega compiled with the strategy's ``INLINE_ROWS`` at ``rows``."""
    from isokernel.backends.cpu import native, threads
    from isokernel.models.tau_omega import tau_omega
    module = native if strategy == "native" else threads
    saved, module.INLINE_ROWS = module.INLINE_ROWS, rows
    try:
        fn = ik.jit(tau_omega, strategy=strategy)
        fn(*args)
    finally:
        module.INLINE_ROWS = saved
    return fn


def _star(fn, args):
    return fn(*args)


def _crossover(strategy: str, rounds: int) -> int | None:
    first = None
    for exponent in range(8, 19):
        size = 1 << exponent
        args = [np.linspace(0.05, 0.4, size), np.linspace(0.0, 3.0, size),
                np.linspace(280.0, 300.0, size)]
        inline, pool = _built(strategy, size, args), _built(strategy, 0, args)
        n = max(1, 2 ** 16 // size)
        t_inline = t_pool = float("inf")
        for _ in range(rounds):
            t_inline = min(t_inline, _per_call(functools.partial(_star, inline), args, n, 1))
            t_pool = min(t_pool, _per_call(functools.partial(_star, pool), args, n, 1))
        print(f"  {strategy:<8} 2^{exponent:<2} {t_inline * 1e6:9.1f} | {t_pool * 1e6:9.1f}")
        if first is None and t_pool < 0.9 * t_inline:
            first = size
    return first


if __name__ == "__main__":
    main()
