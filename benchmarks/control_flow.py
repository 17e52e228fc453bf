"""Control flow on the CPU: a per-pixel ``while_loop`` and reverse mode
through a ``fori_loop``, against what users would pick instead.

1. Kepler's equation E - e sin E = M solved per pixel by Newton in a
   ``while_loop`` under ``vmap`` (tolerance 1e-12, M uniform in [0, 2 pi),
   e uniform in [0, 0.9), E0 = M + e sin M, float64): isokernel ``native``,
   ``threads`` and ``reference`` against JAX ``jit(vmap(while_loop))``, Numba
   ``prange`` with a while per element and NumPy (Newton on the whole array
   until every pixel has converged). Interleaved rounds, best call of each;
   every row prints Mpixel/s, its ratio to JAX and to Numba, and whether its
   bits are the reference's (portable numerics: the same bits everywhere).
2. Reverse mode of a 1000-step ``fori_loop`` (a damped oscillator per pixel,
   the gradient of the final energy with respect to the stiffness): time and
   peak memory against JAX's ``grad`` of ``lax.fori_loop``. isokernel's peak
   is what ``tracemalloc`` sees NumPy allocate during the call; JAX's is
   XLA's own estimate for the compiled gradient (arguments, outputs and
   temporaries, ``memory_analysis()``). The same loop as a ``while_loop``
   (checkpointed reverse sweep, O(sqrt(T)) carries) is printed beside it.

JAX and Numba are skipped with a note when missing (``pip install
'isokernel[bench]'``). Outputs are fresh arrays for every candidate.

    python benchmarks/control_flow.py [--pixels 1e6] [--workers 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import os
import tracemalloc

import numpy as np
from _common import interleaved_best, try_import

import isokernel as ik
import isokernel.numpy as inp

TOL = 1e-12


# --- Kepler -------------------------------------------------------------------------------

def kepler(M, e):
    """Eccentric anomaly by Newton, and the steps each pixel took."""
    E0 = M + e * inp.sin(M)

    def newton(state):
        E, _, n = state
        d = (E - e * inp.sin(E) - M) / (1.0 - e * inp.cos(E))
        return E - d, d, n + 1
    E, _, n = ik.while_loop(lambda s: inp.abs(s[1]) > TOL, newton, (E0, inp.ones_like(M), 0))
    return E, n


def kepler_numpy(M, e):
    """What a NumPy user writes: Newton on every pixel until all have converged
    (pixels that have converged are updated by a step of about 0)."""
    E = M + e * np.sin(M)
    d = np.ones_like(M)
    while np.any(np.abs(d) > TOL):
        d = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - d
    return E


def kepler_jax(jax, jnp):
    def one(M, e):
        def newton(s):
            E, _ = s
            d = (E - e * jnp.sin(E) - M) / (1.0 - e * jnp.cos(E))
            return E - d, d
        E0 = M + e * jnp.sin(M)
        return jax.lax.while_loop(lambda s: jnp.abs(s[1]) > TOL, newton, (E0, jnp.ones_like(M)))[0]
    f = jax.jit(jax.vmap(one))
    return lambda M, e: f(M, e).block_until_ready()


def kepler_numba(numba, workers):
    @numba.njit(parallel=True)
    def kernel(M, e, out):
        for i in numba.prange(M.shape[0]):
            m, ee = M[i], e[i]
            E = m + ee * math.sin(m)
            d = 1.0
            while abs(d) > TOL:
                d = (E - ee * math.sin(E) - m) / (1.0 - ee * math.cos(E))
                E = E - d
            out[i] = E

    def run(M, e):
        numba.set_num_threads(workers)
        out = np.empty_like(M)
        kernel(M, e, out)
        return out
    return run




def kepler_candidates(workers, notes):
    f = ik.vmap(kepler)
    rows = {}
    for numerics in ("portable", "native"):
        rows[f"isokernel native ({numerics})"] = ik.jit(
            f, strategy="native", workers=workers, numerics=numerics)
    rows["isokernel threads (portable)"] = ik.jit(f, strategy="threads", workers=workers,
                                                  numerics="portable")
    rows["isokernel reference (portable)"] = ik.jit(f, strategy="reference",
                                                    numerics="portable")
    rows["numpy (vectorized Newton)"] = kepler_numpy
    jax = try_import("jax", notes)
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        rows["jax jit(vmap(while_loop))"] = kepler_jax(jax, jnp)
    numba = try_import("numba", notes)
    if numba is not None:
        rows[f"numba prange ({workers} threads)"] = kepler_numba(numba, workers)
    return rows


def bench_kepler(pixels, workers, rounds, notes):
    rng = np.random.default_rng(0)
    M = rng.uniform(0.0, 2 * np.pi, pixels)
    e = rng.uniform(0.0, 0.9, pixels)
    rows = kepler_candidates(workers, notes)
    first, best = interleaved_best(rows, (M, e), rounds)
    ref_E, ref_n = first["isokernel reference (portable)"]
    print(f"Kepler, {pixels:.0e} pixels float64, tolerance {TOL:g}, {workers} workers, "
          f"best of {rounds} interleaved rounds; CPUs {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"Newton steps per pixel: mean {ref_n.mean():.2f}, max {ref_n.max()}")
    jax_t = next((best[k] for k in best if k.startswith("jax")), None)
    numba_t = next((best[k] for k in best if k.startswith("numba")), None)
    print(f"{'candidate':34s} {'Mpixel/s':>9s} {'vs JAX':>7s} {'vs Numba':>8s}  bits")
    speeds = {}
    for name, t in best.items():
        out = first[name]
        E = out[0] if isinstance(out, tuple) else out
        if "portable" in name:
            same = E.tobytes() == ref_E.tobytes() and np.array_equal(out[1], ref_n)
            bits = "the reference's" if same else "DIFFERENT from the reference"
        else:
            ulp = np.max(np.abs(E - ref_E) / np.spacing(np.abs(ref_E)))
            bits = f"max {ulp:.0f} ulp from the reference"
        speeds[name] = pixels / t / 1e6
        vs_jax = f"{jax_t / t:6.2f}x" if jax_t else "      -"
        vs_numba = f"{numba_t / t:7.2f}x" if numba_t else "       -"
        print(f"{name:34s} {speeds[name]:9.2f} {vs_jax} {vs_numba}  {bits}")
    native = best["isokernel native (portable)"]
    if jax_t:
        print(f"acceptance: native (portable) {jax_t / native:.2f}x JAX (>= 2)")
    if numba_t:
        print(f"acceptance: native (portable) {numba_t / native:.2f}x Numba prange (>= 1.0)")
    return speeds


# --- reverse mode through a fori_loop -----------------------------------------------------

STEPS, H = 1000, 0.01


def oscillator_energy(k, x0, loop):
    """Semi-implicit Euler of x'' = -k x - 0.1 x' + 0.2 sin x for STEPS steps."""
    def step(_, s):
        x, v = s
        v = v + H * (-k * x - 0.1 * v + 0.2 * inp.sin(x))
        return x + H * v, v
    if loop == "fori":
        x, v = ik.fori_loop(0, STEPS, step, (x0, inp.zeros_like(x0)))
    else:
        x, v, _ = ik.while_loop(lambda s: s[2] < STEPS,
                                lambda s: (*step(None, s[:2]), s[2] + 1),
                                (x0, inp.zeros_like(x0), 0))
    return inp.sum(0.5 * v * v + 0.5 * k * x * x)


def oscillator_jax(jax, jnp):
    def energy(k, x0):
        def step(_, s):
            x, v = s
            v = v + H * (-k * x - 0.1 * v + 0.2 * jnp.sin(x))
            return x + H * v, v
        x, v = jax.lax.fori_loop(0, STEPS, step, (x0, jnp.zeros_like(x0)))
        return jnp.sum(0.5 * v * v + 0.5 * k * x * x)
    return jax.jit(jax.grad(energy))


def _peak(fn, *args):
    tracemalloc.start()
    try:
        out = fn(*args)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_reverse(pixels, rounds, notes):
    rng = np.random.default_rng(1)
    k = rng.uniform(0.5, 2.0, pixels)
    x0 = rng.uniform(-1.0, 1.0, pixels)
    carry = 2 * k.nbytes
    names = {"fori": "isokernel jit(grad) fori_loop", "while": "isokernel jit(grad) while_loop"}
    rows = {name: ik.jit(ik.grad(lambda k, x0, loop=loop: oscillator_energy(k, x0, loop)),
                         strategy="reference") for loop, name in names.items()}
    memory = {}
    jax = try_import("jax", notes)
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        jg = oscillator_jax(jax, jnp)
        analysis = jg.lower(k, x0).compile().memory_analysis()
        memory["jax grad(fori_loop)"] = (analysis.argument_size_in_bytes
                                         + analysis.output_size_in_bytes
                                         + analysis.temp_size_in_bytes)
        rows["jax grad(fori_loop)"] = lambda k, x0: np.asarray(jg(k, x0).block_until_ready())
    grads = {}
    for name, fn in rows.items():
        grads[name], peak = _peak(fn, k, x0)
        memory.setdefault(name, peak)
    best = interleaved_best(rows, (k, x0), rounds)[1]
    print(f"\nReverse mode through {STEPS} steps, {pixels:.0e} pixels float64: carry "
          f"{carry / 2**20:.2f} MiB, every step's carry {STEPS * carry / 2**20:.0f} MiB")
    ref = grads["isokernel jit(grad) fori_loop"]
    print(f"{'candidate':36s} {'ms':>8s} {'peak MiB':>9s}  gradient vs isokernel fori_loop")
    for name in rows:
        diff = np.max(np.abs(grads[name] - ref) / np.maximum(np.abs(ref), 1e-300))
        print(f"{name:36s} {best[name] * 1e3:8.1f} {memory[name] / 2**20:9.1f}  "
              f"max relative {diff:.1e}")
    return best, memory


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pixels", type=float, default=1e6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reverse-pixels", type=float, default=1e4)
    args = parser.parse_args(argv)
    notes: list[str] = []
    speeds = bench_kepler(int(args.pixels), args.workers, args.rounds, notes)
    reverse = bench_reverse(int(args.reverse_pixels), args.rounds, notes)
    for note in dict.fromkeys(notes):
        print(note)
    return speeds, reverse


if __name__ == "__main__":
    main()
