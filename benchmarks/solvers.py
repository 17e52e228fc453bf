"""Solvers on the CPU against what users would pick instead.

(a) 10^6 per-pixel 3x3 symmetric positive definite solves (float64) by
    ``inp.linalg.solve`` under ``vmap`` — unrolled Gaussian elimination with
    getrf's partial pivoting, compiled into the per-pixel C body by
    ``native`` (``workers`` threads, and one) — against NumPy's batched
    ``np.linalg.solve`` (one LAPACK gesv per matrix) and JAX
    ``jit(vmap(jnp.linalg.solve))``. Interleaved rounds, best call of each;
    every row prints Mpixel/s, its ratio to NumPy and to JAX, and the largest
    relative difference from NumPy's solution (per pixel, ``|x - x_np| /
    |x_np|``). The physical floor (the 96 input and 24 output bytes per pixel
    at the machine's copy bandwidth, measured) is printed beside them.

JAX is skipped with a note when missing (``pip install 'isokernel[bench]'``).

    python benchmarks/solvers.py [--pixels 1e6] [--workers 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

import isokernel as ik
import isokernel.numpy as inp


def _try_import(name, notes):
    try:
        return __import__(name)
    except Exception as err:  # noqa: BLE001 - any broken install is a skip with its reason
        notes.append(f"{name}: skipped ({type(err).__name__}: {err}); "
                     "pip install 'isokernel[bench]'")
        return None


def spd_systems(pixels: int, n: int = 3, seed: int = 0):
    """Well-conditioned SPD matrices M Mᵀ + n I and right-hand sides."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(pixels, n, n))
    a = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    return a, rng.normal(size=(pixels, n))


def dense_candidates(workers: int, notes: list) -> dict:
    solve = ik.vmap(inp.linalg.solve)
    rows = {f"isokernel native ({workers} workers)": ik.jit(solve, strategy="native",
                                                            workers=workers),
            "isokernel native (1 worker)": ik.jit(solve, strategy="native", workers=1),
            f"isokernel threads ({workers} workers)": ik.jit(solve, strategy="threads",
                                                             workers=workers),
            "numpy np.linalg.solve (batched)": lambda a, b: np.linalg.solve(a, b[..., None])[
                ..., 0]}
    jax = _try_import("jax", notes)
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        f = jax.jit(jax.vmap(jnp.linalg.solve))
        rows["jax jit(vmap(jnp.linalg.solve))"] = lambda a, b: np.asarray(
            f(a, b).block_until_ready())
    return rows


def _copy_floor(a, b, rounds: int) -> float:
    """Seconds to read the inputs and write an output of the solution's size
    once (NumPy copies): the memory-traffic floor of any solver."""
    out = np.empty_like(b)
    best = math.inf
    for _ in range(rounds):
        t = time.perf_counter()
        np.copyto(out, b)
        a.copy()
        best = min(best, time.perf_counter() - t)
    return best


def _relative(x, ref) -> float:
    return float(np.max(np.linalg.norm(x - ref, axis=-1) / np.linalg.norm(ref, axis=-1)))


def bench_dense(pixels: int = 10 ** 6, workers: int = 2, rounds: int = 5,
                notes: list | None = None) -> dict:
    """Part (a): per-pixel 3x3 SPD solves. Returns Mpixel/s per candidate."""
    notes = [] if notes is None else notes
    a, b = spd_systems(pixels)
    rows = dense_candidates(workers, notes)
    first = {name: fn(a, b) for name, fn in rows.items()}  # compile and warm
    best = dict.fromkeys(rows, math.inf)
    for _ in range(rounds):
        for name, fn in rows.items():
            t = time.perf_counter()
            fn(a, b)
            best[name] = min(best[name], time.perf_counter() - t)
    floor = _copy_floor(a, b, rounds)
    ref = first["numpy np.linalg.solve (batched)"]
    numpy_t = best["numpy np.linalg.solve (batched)"]
    jax_t = next((t for k, t in best.items() if k.startswith("jax")), None)
    print(f"(a) {pixels:.0e} per-pixel 3x3 SPD solves, float64, best of {rounds} interleaved "
          f"rounds; CPUs {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    print(f"{'candidate':36s} {'Mpixel/s':>9s} {'vs NumPy':>8s} {'vs JAX':>7s}  "
          f"max relative difference from NumPy")
    speeds = {}
    for name, t in best.items():
        speeds[name] = pixels / t / 1e6
        vs_jax = f"{jax_t / t:6.2f}x" if jax_t else "      -"
        print(f"{name:36s} {speeds[name]:9.2f} {numpy_t / t:7.2f}x {vs_jax}  "
              f"{_relative(first[name], ref):.1e}")
    print(f"{'memory floor (copy in + out)':36s} {pixels / floor / 1e6:9.2f}")
    native = best[next(k for k in best if k.startswith("isokernel native"))]
    print(f"acceptance: native {numpy_t / native:.2f}x NumPy (>= 5)"
          + (f", {jax_t / native:.2f}x JAX (>= 2)" if jax_t else ""))
    return speeds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pixels", type=float, default=1e6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    notes: list[str] = []
    bench_dense(int(args.pixels), args.workers, args.rounds, notes)
    for note in notes:
        print("note:", note)


if __name__ == "__main__":
    main()
