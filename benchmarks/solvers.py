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

(b) a damped oscillator per pixel (2 states, per-pixel stiffness, damping and
    start) over 10^5 pixels by ``isokernel.ode.odeint`` (dopri5, rtol = atol
    = 1e-8, 5 report times) under ``vmap``, compiled per pixel by ``native``,
    against JAX ``jit(vmap(odeint))`` (``jax.experimental.ode``, the same
    Dormand–Prince pair) and diffrax's Dopri5 when installed.
(c) ``cg`` on a 2-D Poisson operator, matrix-free (the 5-point stencil on a
    512 x 512 grid, a mass term sigma = 1e-3), and the gradient of a weighted
    sum of the solution with respect to b and sigma (one more implicit
    solve), against JAX's ``jax.scipy.sparse.linalg.cg`` under ``jit``.

JAX and diffrax are skipped with a note when missing (``pip install
'isokernel[bench]'``).

    python benchmarks/solvers.py [--part dense ode cg] [--pixels 1e6] [--ode-pixels 1e5]
                                 [--n 512] [--workers 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from _common import interleaved_best, try_import

import isokernel as ik
import isokernel.numpy as inp
from isokernel.linalg.krylov import cg_loop
from isokernel.ode import odeint
from isokernel.scipy.sparse.linalg import cg


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
    jax = try_import("jax", notes)
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
    first, best = interleaved_best(rows, (a, b), rounds)
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


# --- (b) an ODE per pixel ------------------------------------------------------------

ODE_TOL = 1e-8
TIMES = np.linspace(0.0, 10.0, 5)


def oscillator(y, t, k, c):
    return inp.stack([y[1], -k * y[0] - c * y[1]])


def pixel(x0, k, c):
    ys, info = odeint(oscillator, inp.stack([x0, inp.zeros_like(x0)]), TIMES, k, c,
                      rtol=ODE_TOL, atol=ODE_TOL, full_output=True)
    return ys, info["steps"] + info["rejected"]




def jax_candidate(notes):
    jax = try_import("jax", notes)
    if jax is None:
        return None
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.experimental.ode import odeint as jodeint

    def rhs(y, t, k, c):
        return jnp.stack([y[1], -k * y[0] - c * y[1]])

    def one(x0, k, c):
        return jodeint(rhs, jnp.stack([x0, 0.0 * x0]), jnp.asarray(TIMES), k, c,
                       rtol=ODE_TOL, atol=ODE_TOL)
    f = jax.jit(jax.vmap(one))
    return lambda x0, k, c: (np.asarray(f(x0, k, c).block_until_ready()), None)


def diffrax_candidate(notes):
    diffrax = try_import("diffrax", notes)
    if diffrax is None:
        return None
    import jax
    import jax.numpy as jnp

    def rhs(t, y, args):
        k, c = args
        return jnp.stack([y[1], -k * y[0] - c * y[1]])

    def one(x0, k, c):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs), diffrax.Dopri5(), TIMES[0], TIMES[-1], None,
            jnp.stack([x0, 0.0 * x0]), (k, c), saveat=diffrax.SaveAt(ts=jnp.asarray(TIMES)),
            stepsize_controller=diffrax.PIDController(rtol=ODE_TOL, atol=ODE_TOL),
            max_steps=100_000)
        return sol.ys, sol.stats["num_steps"]
    f = jax.jit(jax.vmap(one))
    return lambda x0, k, c: tuple(np.asarray(a) for a in f(x0, k, c))


def ode_reference(args):
    return ik.jit(ik.vmap(pixel), strategy="reference", numerics="portable")(*args)


def ode_candidates(workers, notes, slow):
    f = ik.vmap(pixel)
    rows = {}
    for numerics in ("portable", "native"):
        rows[f"isokernel native ({numerics})"] = ik.jit(f, strategy="native", workers=workers,
                                                       numerics=numerics)
    if slow:
        rows["isokernel threads (portable)"] = ik.jit(f, strategy="threads", workers=workers,
                                                      numerics="portable")
        rows["isokernel reference (portable)"] = ik.jit(f, strategy="reference",
                                                        numerics="portable")
    for name, make in (("jax jit(vmap(odeint))", jax_candidate),
                       ("diffrax jit(vmap(Dopri5))", diffrax_candidate)):
        fn = make(notes)
        if fn is not None:
            rows[name] = fn
    return rows


def in_native_region(workers, args) -> str:
    """The report's line on the loops of the native executable."""
    report = str(ik.jit(ik.vmap(pixel), strategy="native", workers=workers,
                        numerics="portable").lower(*args).compile().report())
    lines = [x.strip() for x in report.splitlines()
             if x.strip().startswith(("pixels", "scan:", "while:"))]
    return "\n  ".join(lines)




def bench_ode(pixels, rounds, notes, workers=2, slow=False, checked=2000):
    """Mpixel/s of each candidate; the values are compared with the
    reference strategy's on the first ``checked`` pixels (a pixel's solve
    does not depend on the others). ``slow``: time threads and reference too."""
    rng = np.random.default_rng(0)
    args = (rng.uniform(-1.0, 1.0, pixels), rng.uniform(1.0, 4.0, pixels),
            rng.uniform(0.05, 0.5, pixels))
    rows = ode_candidates(workers, notes, slow)
    first, best = interleaved_best(rows, args, rounds)
    checked = min(checked, pixels)
    ref_y, ref_n = ode_reference(tuple(a[:checked] for a in args))
    print(f"Damped oscillator per pixel, dopri5 rtol=atol={ODE_TOL:g}, {len(TIMES)} report times, "
          f"{pixels:.0e} pixels float64, {workers} workers, best of {rounds} interleaved "
          f"rounds; CPUs {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    steps = first["isokernel native (portable)"][1]
    print(f"isokernel steps per pixel (accepted + rejected): mean {steps.mean():.1f}, "
          f"min {steps.min()}, max {steps.max()}; values compared with the reference "
          f"strategy's on the first {checked} pixels")
    print("native report:\n  " + in_native_region(workers, args))
    jax_t = next((best[k] for k in best if k.startswith("jax")), None)
    print(f"{'candidate':34s} {'Mpixel/s':>9s} {'vs JAX':>7s}  {'max |y - reference|':>20s}"
          f"  steps/pixel")
    speeds = {}
    for name, t in best.items():
        y, n = first[name]
        y = y[:checked]
        same = y.tobytes() == ref_y.tobytes() and (n is None or np.array_equal(n[:checked],
                                                                              ref_n))
        diff = "bit-identical" if same else f"{np.max(np.abs(y - ref_y)):.1e}"
        steps = "-" if n is None else f"{np.mean(n):.1f}"
        speeds[name] = pixels / t / 1e6
        vs_jax = f"{jax_t / t:6.2f}x" if jax_t else "      -"
        print(f"{name:34s} {speeds[name]:9.3f} {vs_jax}  {diff:>20s}  {steps}")
    if jax_t:
        native = best["isokernel native (portable)"]
        print(f"acceptance: native (portable) {jax_t / native:.2f}x JAX jit(vmap(odeint)) "
              f"(target >= 2)")
    return speeds


# --- (c) cg on a Poisson operator ----------------------------------------------------

SIGMA, CG_TOL = 1e-3, 1e-5


def poisson(u, sigma):
    """(4 + sigma) u minus the four neighbours, zero outside the grid."""
    p = inp.pad(u, ((1, 1), (1, 1)))
    return (4.0 + sigma) * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]


def problem(n: int):
    rng = np.random.default_rng(0)
    y, x = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    b = np.sin(3 * np.pi * x) * np.cos(2 * np.pi * y) + 0.1 * rng.normal(size=(n, n))
    w = np.exp(-((x - 0.3) ** 2 + (y - 0.6) ** 2) / 0.02)
    return b, w


def isokernel_candidates(w, strategy: str):
    def solve(b, sigma):
        return cg(lambda u: poisson(u, sigma), b, tol=CG_TOL)[0]

    def loss(b, sigma):
        return inp.sum(w * solve(b, sigma))
    return (ik.jit(solve, strategy=strategy),
            ik.jit(ik.value_and_grad(loss, argnums=(0, 1)), strategy=strategy))


def jax_candidates(w, notes):
    try:
        import jax
    except Exception as err:  # noqa: BLE001 - any broken install is a skip with its reason
        notes.append(f"jax: skipped ({type(err).__name__}: {err}); pip install jax")
        return None
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jpoisson(u, sigma):
        p = jnp.pad(u, 1)
        return (4.0 + sigma) * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]

    def solve(b, sigma):
        return jax.scipy.sparse.linalg.cg(lambda u: jpoisson(u, sigma), b, tol=CG_TOL)[0]

    def loss(b, sigma):
        return jnp.sum(jnp.asarray(w) * solve(b, sigma))
    s, g = jax.jit(solve), jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    return (lambda b, sigma: np.asarray(s(b, sigma).block_until_ready()),
            lambda b, sigma: jax.tree_util.tree_map(np.asarray,
                                                    jax.block_until_ready(g(b, sigma))))


def iterations(b, sigma) -> int:
    """cg's step count on this system: its loop run alone (the public cg
    reports 0 for a converged solve, as SciPy's info does)."""
    def steps(b):
        op = lambda u: poisson(u, sigma)  # noqa: E731
        return cg_loop(op, lambda r: r, b, inp.zeros_like(b), CG_TOL, 0.0, 10 * b.size)[2]
    return int(ik.jit(steps, strategy="reference")(b))




def _rel(x, ref) -> float:
    return float(np.linalg.norm(np.asarray(x) - np.asarray(ref)) / np.linalg.norm(ref))


def bench_cg(rounds: int = 3, notes: list | None = None, n: int = 512,
             strategy: str = "reference") -> dict:
    """Time and agreement of cg and its gradient against JAX; returns the
    figures printed."""
    notes = [] if notes is None else notes
    b, w = problem(n)
    sigma = np.float64(SIGMA)
    solve, grad = isokernel_candidates(w, strategy)
    rows = {"isokernel cg": solve, "isokernel value_and_grad": grad}
    jax_rows = jax_candidates(w, notes)
    if jax_rows is not None:
        rows["jax cg"], rows["jax value_and_grad"] = jax_rows
    first = {name: fn(b, sigma) for name, fn in rows.items()}  # compile and warm
    best = interleaved_best(rows, (b, sigma), rounds)[1]
    u = first["isokernel cg"]
    residual = np.linalg.norm(b - poisson(u, sigma)) / np.linalg.norm(b)
    steps = iterations(b, sigma)
    print(f"cg on the 2-D Poisson operator, {n}x{n} float64, tol {CG_TOL:g}, strategy {strategy}, "
          f"best of {rounds} interleaved rounds; CPUs {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"isokernel: {steps} iterations, relative residual {residual:.2e}")
    figures = {"iterations": steps, "residual": residual}
    print(f"{'candidate':28s} {'ms':>9s} {'vs JAX':>7s}")
    for name, t in best.items():
        twin = "jax " + name.split(" ", 1)[1]
        ratio = f"{best[twin] / t:6.2f}x" if twin in best else "      -"
        print(f"{name:28s} {t * 1e3:9.1f} {ratio}")
        figures[name] = t
    if jax_rows is not None:
        (value, (gb, gs)), (jvalue, (jgb, jgs)) = (first["isokernel value_and_grad"],
                                                   first["jax value_and_grad"])
        figures["agreement"] = {"u": _rel(u, first["jax cg"]), "value": _rel(value, jvalue),
                                "grad b": _rel(gb, jgb), "grad sigma": _rel(gs, jgs)}
        print("relative difference from JAX: "
              + ", ".join(f"{k} {v:.1e}" for k, v in figures["agreement"].items()))
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", nargs="+", choices=("dense", "ode", "cg"),
                        default=["dense", "ode", "cg"])
    parser.add_argument("--pixels", type=float, default=1e6, help="(a) pixels")
    parser.add_argument("--ode-pixels", type=float, default=1e5, help="(b) pixels")
    parser.add_argument("--n", type=int, default=512, help="(c) grid size")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    notes: list[str] = []
    if "dense" in args.part:
        bench_dense(int(args.pixels), args.workers, args.rounds, notes)
    if "ode" in args.part:
        print()
        bench_ode(int(args.ode_pixels), args.rounds, notes, args.workers)
    if "cg" in args.part:
        print()
        bench_cg(args.rounds, notes, args.n)
    for note in dict.fromkeys(notes):
        print("note:", note)


if __name__ == "__main__":
    main()
