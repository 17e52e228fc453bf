"""Portable numerics at speed: the tau-omega forward model, float32, as
``native`` with ``numerics="portable"`` against JAX ``jit`` in the same run.

The acceptance of the numerical-contracts issue: at 1e7 pixels, float32, 2
workers, native-portable must be at least as fast as JAX ``jit`` and give
the bits of ``reference``-portable. Every portable transcendental is a
branch-free decomposition into basic operations, so the generated C loop
vectorizes whole (checked by tests/test_numerics_strategies.py with GCC's
vectorizer notes).

Candidates run interleaved (one call of each per round; best of
``--repeats`` calls per round, best over ``--rounds``). Every candidate
allocates its outputs per call (JAX's arrays, isokernel's results), and the
inputs are allocated and touched once before timing. The memory-bandwidth
floor (3 inputs read, 2 outputs written at the copy bandwidth measured in
the same run) is printed beside them.

    python benchmarks/portable_forward.py [--pixels 1e7] [--workers 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from cpu_forward import copy_bandwidth, jax_fn  # noqa: I001 - a sibling script

import isokernel as ik
from isokernel.backends.parity import bit_identical, max_ulp
from isokernel.models.tau_omega import synthetic_inputs, tau_omega


def candidates(workers: int, notes: list) -> list:
    rows = [
        ("isokernel native, portable", ik.jit(tau_omega, strategy="native", workers=workers,
                                              numerics="portable"), None),
        ("isokernel native, native numerics", ik.jit(tau_omega, strategy="native",
                                                     workers=workers), None),
        ("isokernel threads, portable", ik.jit(tau_omega, strategy="threads",
                                               workers=workers, numerics="portable"), None),
        ("numpy eager (NumPy's libm)", tau_omega, None),
    ]
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as err:
        notes.append(f"jax: skipped ({err}); pip install 'isokernel[bench]'")
        return rows
    jax.config.update("jax_enable_x64", True)  # float32 inputs stay float32
    rows.append(("jax jit (XLA's own threads)", jax_fn(jax, jnp), jnp))
    return rows


def best_of(fn, args, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def bits(out, ref) -> str:
    out = tuple(np.asarray(o) for o in out)
    if all(bit_identical(a, b) for a, b in zip(out, ref)):
        return "bit-identical"
    return f"max {max(max_ulp(a.astype(b.dtype), b) for a, b in zip(out, ref)):.0f} ulp"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=float, default=1e7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    pixels, notes = int(args.pixels), []
    inputs = synthetic_inputs(pixels, np.float32)
    reference = ik.jit(tau_omega, strategy="reference", numerics="portable")(*inputs)
    rows = candidates(args.workers, notes)
    own = {name: inputs if xp is None else tuple(xp.asarray(a) for a in inputs)
           for name, _, xp in rows}
    parity = {name: bits(fn(*own[name]), reference) for name, fn, _ in rows}  # warm up
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, fn, _ in rows:
            best[name] = min(best.get(name, float("inf")), best_of(fn, own[name], args.repeats))
    return report(pixels, args, rows, best, parity, notes)


def report(pixels, args, rows, best, parity, notes) -> dict:
    speed = {name: pixels / seconds / 1e6 for name, seconds in best.items()}
    jax = speed.get("jax jit (XLA's own threads)")
    print(f"tau-omega forward, {pixels:,} pixels, float32, {args.workers} worker(s) "
          f"(best of {args.repeats} x {args.rounds} interleaved rounds)")
    print(f"  {'candidate':<36}{'Mpixel/s':>10}{'vs jax':>9}  bits vs reference-portable")
    for name, _, _ in rows:
        ratio = f"{speed[name] / jax:>8.2f}x" if jax else f"{'-':>9}"
        print(f"  {name:<36}{speed[name]:>10.1f}{ratio}  {parity[name]}")
    bandwidth = copy_bandwidth(5 * pixels * 4, args.workers, 2 * args.repeats)
    print(f"  memory-bandwidth floor: {bandwidth / 20 / 1e6:,.0f} Mpixel/s "
          f"(copy {bandwidth / 1e9:.1f} GB/s; 3 inputs + 2 outputs = 20 B/pixel)")
    for note in notes:
        print(f"note: {note}")
    native = speed["isokernel native, portable"]
    if jax:
        verdict = "met" if native >= jax and parity["isokernel native, portable"] == \
            "bit-identical" else "NOT met"
        print(f"acceptance: native-portable {native / jax:.2f}x jax jit (>= 1.0) and "
              f"{parity['isokernel native, portable']} to reference-portable: {verdict}")
    return speed


if __name__ == "__main__":
    main()
