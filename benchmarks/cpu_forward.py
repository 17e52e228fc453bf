"""The tau-omega forward model on the CPU: isokernel's reference, threads and
native strategies against what users would pick instead.

Compared, in one run, interleaved (every candidate once per round, best of
``--repeats`` calls per round, best over ``--rounds``): NumPy eager, NumPy
with preallocated ``out=`` temporaries, numexpr, Numba ``prange``, JAX
``jit`` and Quabla ``jit`` (each skipped with a note when not installed),
at 1e6 and 1e7 pixels, float32 and float64, 1 and 2 workers. Every row
prints Mpixel/s, the ratio to NumPy eager and the bits against
``reference``; the memory-bandwidth floor (3 inputs read, 2 outputs
written, at the copy bandwidth measured in the same run) is printed beside
them. Outputs are fresh arrays for every candidate except "numpy out=",
whose scratch and outputs are preallocated (fresh allocations page-fault
heavily on small VMs: that cost is part of what the others pay).

    python benchmarks/cpu_forward.py [--pixels 1e6 1e7] [--rounds 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from _common import try_import

import isokernel as ik
from isokernel.backends.cpu.pool import run_tasks, split
from isokernel.backends.parity import bit_identical, max_ulp
from isokernel.models.tau_omega import OMEGA, THETA_DEG, B, H, synthetic_inputs, tau_omega

COS = math.cos(math.radians(THETA_DEG))
SIN2 = math.sin(math.radians(THETA_DEG)) ** 2
ROUGH = math.exp(-H * COS * COS)


# --- the alternatives, each written the way its users would write it ----------------------

def numpy_out(dtype, pixels):
    """Hand-preallocated NumPy: every ufunc writes into a reused buffer."""
    c = {k: dtype(v) for k, v in dict(a=3.1, b=17.36, d=63.12, s=SIN2, cos=COS, rough=ROUGH,
                                      g=-B, w=1.0 - OMEGA, one=1.0).items()}
    t = [np.empty(pixels, dtype) for _ in range(6)]
    out = [np.empty(pixels, dtype) for _ in range(2)]

    def run(mv, vwc, ts):
        eps, root, g, tmp, tmp2, r = t
        np.multiply(c["b"], mv, out=eps)
        np.add(c["a"], eps, out=eps)
        np.multiply(c["d"], mv, out=tmp)
        np.multiply(tmp, mv, out=tmp)
        np.add(eps, tmp, out=eps)
        np.sqrt(np.subtract(eps, c["s"], out=root), out=root)
        np.exp(np.divide(np.multiply(c["g"], vwc, out=g), c["cos"], out=g), out=g)
        for k, num in enumerate((c["cos"], None)):
            _fresnel(eps, root, c, num, r, tmp, tmp2)
            _brightness(ts, r, g, c, tmp, tmp2, out[k])
        return tuple(out)
    return run


def _fresnel(eps, root, c, num, r, tmp, tmp2):
    if num is None:
        num = np.multiply(eps, c["cos"], out=tmp2)
    np.subtract(num, root, out=r)
    np.divide(r, np.add(num, root, out=tmp), out=r)
    np.multiply(np.multiply(r, r, out=r), c["rough"], out=r)


def _brightness(ts, r, g, c, tmp, tmp2, out):
    np.multiply(np.multiply(ts, np.subtract(c["one"], r, out=tmp), out=out), g, out=out)
    np.multiply(np.multiply(ts, c["w"], out=tmp), np.subtract(c["one"], g, out=tmp2), out=tmp)
    np.multiply(tmp, np.add(c["one"], np.multiply(r, g, out=tmp2), out=tmp2), out=tmp)
    np.add(out, tmp, out=out)


def numexpr_fn(ne, dtype, workers):
    env = {k: dtype(v) for k, v in dict(a=3.1, b=17.36, d=63.12, s=SIN2, c=COS, h=ROUGH,
                                        gb=-B, w=1.0 - OMEGA).items()}
    brightness = "ts * (1 - r) * g + ts * w * (1 - g) * (1 + r * g)"

    def run(mv, vwc, ts):
        ne.set_num_threads(workers)
        local = dict(env, mv=mv, vwc=vwc, ts=ts)
        local["eps"] = ne.evaluate("a + b * mv + d * mv * mv", local)
        local["root"] = ne.evaluate("sqrt(eps - s)", local)
        local["g"] = ne.evaluate("exp(gb * vwc / c)", local)
        outs = []
        for num in ("c", "eps * c"):
            local["r"] = ne.evaluate(f"(({num} - root) / ({num} + root)) ** 2 * h", local)
            outs.append(ne.evaluate(brightness, local))
        return tuple(outs)
    return run


def numba_fn(numba, dtype, workers):
    a, b, d, s, c, h = (dtype(v) for v in (3.1, 17.36, 63.12, SIN2, COS, ROUGH))
    gb, w, one = dtype(-B), dtype(1.0 - OMEGA), dtype(1.0)

    @numba.njit(parallel=True)
    def kernel(mv, vwc, ts):
        oh, ov = np.empty_like(mv), np.empty_like(mv)
        for i in numba.prange(mv.shape[0]):
            eps = a + b * mv[i] + d * mv[i] * mv[i]
            root = np.sqrt(eps - s)
            rh = ((c - root) / (c + root)) ** 2 * h
            rv = ((eps * c - root) / (eps * c + root)) ** 2 * h
            g = np.exp(gb * vwc[i] / c)
            t = ts[i]
            oh[i] = t * (one - rh) * g + t * w * (one - g) * (one + rh * g)
            ov[i] = t * (one - rv) * g + t * w * (one - g) * (one + rv * g)
        return oh, ov

    def run(mv, vwc, ts):
        numba.set_num_threads(workers)
        return kernel(mv, vwc, ts)
    return run


def jax_fn(jax, jnp):
    jitted = jax.jit(lambda mv, vwc, ts: tau_omega_with(jnp, mv, vwc, ts))

    def run(mv, vwc, ts):
        return jax.block_until_ready(jitted(mv, vwc, ts))
    return run


def quabla_fn(quabla):
    jitted = quabla.jit(lambda mv, vwc, ts: tau_omega_with(quabla, mv, vwc, ts))

    def run(mv, vwc, ts):
        return tuple(np.asarray(o) for o in jitted(mv, vwc, ts))
    return run


def tau_omega_with(xp, mv, vwc, ts):
    """The model as written for a NumPy-like namespace ``xp``."""
    eps = 3.1 + 17.36 * mv + 63.12 * mv * mv
    root = xp.sqrt(eps - SIN2)
    gamma = xp.exp(-B * vwc / COS)
    outs = []
    for num in (COS, eps * COS):
        r = ((num - root) / (num + root)) ** 2 * ROUGH
        outs.append(ts * (1.0 - r) * gamma + ts * (1.0 - OMEGA) * (1.0 - gamma) * (1.0 + r * gamma))
    return tuple(outs)


# --- the candidates -----------------------------------------------------------------------

def candidates(dtype, pixels, workers_list, notes):
    """(name, workers, callable on the NumPy inputs, its own inputs or None)."""
    rows = [("isokernel reference", 1, ik.jit(tau_omega, strategy="reference"), None),
            ("numpy eager", 1, tau_omega, None),
            ("numpy out= (preallocated)", 1, numpy_out(dtype, pixels), None)]
    for w in workers_list:
        rows.append(("isokernel threads", w, ik.jit(tau_omega, strategy="threads", workers=w),
                     None))
        rows.append(("isokernel native", w, ik.jit(tau_omega, strategy="native", workers=w),
                     None))
    rows += _optional(dtype, workers_list, notes)
    return rows


def _optional(dtype, workers_list, notes):
    rows = []
    ne = try_import("numexpr", notes)
    numba = try_import("numba", notes)
    for w in workers_list:
        if ne is not None:
            rows.append(("numexpr", w, numexpr_fn(ne, dtype, w), None))
        if numba is not None:
            rows.append(("numba prange", w, numba_fn(numba, dtype, w), None))
    jax = try_import("jax", notes)
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        rows.append(("jax jit (own threads)", 0, jax_fn(jax, jnp), "jax"))
    quabla = try_import("quabla", notes)
    if quabla is not None:
        rows.append(("quabla jit (own threads)", 0, quabla_fn(quabla), None))
    return rows




# --- timing -------------------------------------------------------------------------------

def best_of(fn, args, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def copy_bandwidth(nbytes: int, workers: int, repeats: int) -> float:
    """Bytes per second (read + write) of a preallocated copy of ``nbytes``,
    split over ``workers`` tasks of isokernel's own pool."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    bounds = split(src.size, workers)

    def copy():
        run_tasks(lambda k: np.copyto(dst[slice(*bounds[k])], src[slice(*bounds[k])]),
                  len(bounds), workers)
    copy()
    seconds, _ = best_of(copy, (), repeats)
    return 2 * src.nbytes / seconds


def parity(out, ref) -> str:
    out = tuple(np.asarray(o) for o in out)
    if all(bit_identical(a, b) for a, b in zip(out, ref)):
        return "bit-identical"
    return f"max {max(max_ulp(a.astype(b.dtype), b) for a, b in zip(out, ref)):.0f} ulp"


def measure(dtype, pixels, workers_list, rounds, repeats, notes):
    args = synthetic_inputs(pixels, dtype)
    rows = candidates(dtype, pixels, workers_list, notes)
    ref = tuple(rows[0][2](*args))
    own = {}
    best = {}
    results = {}
    for name, w, fn, kind in rows:  # warm up: compile, trace, first-touch
        own[(name, w)] = _inputs_for(kind, args)
        results[(name, w)] = fn(*own[(name, w)])
    for _ in range(rounds):
        for name, w, fn, _kind in rows:
            seconds, _out = best_of(fn, own[(name, w)], repeats)
            best[(name, w)] = min(best.get((name, w), float("inf")), seconds)
    return rows, best, {k: parity(v, ref) for k, v in results.items()}


def _inputs_for(kind, args):
    if kind == "jax":
        import jax.numpy as jnp
        return tuple(jnp.asarray(a) for a in args)
    return args


def report(dtype, pixels, workers_list, rows, best, bits, rounds, repeats) -> dict:
    item = np.dtype(dtype).itemsize
    eager = best[("numpy eager", 1)]
    print(f"\ntau-omega forward, {pixels:,} pixels, {np.dtype(dtype).name} "
          f"(best of {repeats} x {rounds} interleaved rounds)")
    print(f"  {'candidate':<28}{'workers':>8}{'Mpixel/s':>10}{'vs eager':>10}  bits vs reference")
    for name, w, _fn, _kind in rows:
        seconds = best[(name, w)]
        print(f"  {name:<28}{w or '-':>8}{pixels / seconds / 1e6:>10.1f}"
              f"{eager / seconds:>9.2f}x  {bits[(name, w)]}")
    threads = ik.jit(tau_omega, strategy="threads", workers=max(workers_list))
    print(f"  threads tile path: {tile_paths(threads, synthetic_inputs(pixels, dtype))}")
    for w in workers_list:
        bw = copy_bandwidth(5 * pixels * item, w, 2 * repeats)
        floor = bw / (5 * item) / 1e6
        print(f"  memory-bandwidth floor, {w} worker(s): {floor:,.0f} Mpixel/s "
              f"(copy {bw / 1e9:.1f} GB/s; 3 inputs + 2 outputs = {5 * item} B/pixel)")
    return {k: pixels / v / 1e6 for k, v in best.items()}


def tile_paths(jitted, args) -> str:
    """How ``threads`` ran each region (the report's ``tile path`` line)."""
    lines = dict(jitted.lower(*args).compile().executable.report_lines())
    return lines["tile path"]


def acceptance(speeds: dict) -> None:
    print("\nacceptance at 1e7 pixels (2 workers):")
    for dtype in ("float32", "float64"):
        got = speeds.get((10_000_000, dtype))
        if got is None:
            continue
        eager = got[("numpy eager", 1)]
        threads, native = got[("isokernel threads", 2)], got[("isokernel native", 2)]
        line = f"  {dtype}: threads {threads / eager:.1f}x eager (>= 6)"
        if ("numba prange", 2) in got:
            line += f"; native {native / got[('numba prange', 2)]:.2f}x numba prange (>= 1.0)"
        if ("jax jit (own threads)", 0) in got:
            line += f"; native {native / got[('jax jit (own threads)', 0)]:.2f}x jax jit (>= 1.5)"
        print(line)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    notes: list[str] = []
    speeds = {}
    print(f"cpus: {os.cpu_count()} online; isokernel workers default "
          f"{ik.backends.cpu.pool.resolve_workers(None)}")
    for pixels in (int(p) for p in args.pixels):
        for name in args.dtypes:
            dtype = np.dtype(name).type
            rows, best, bits = measure(dtype, pixels, args.workers, args.rounds, args.repeats,
                                       notes)
            speeds[(pixels, name)] = report(dtype, pixels, args.workers, rows, best, bits,
                                            args.rounds, args.repeats)
    for note in dict.fromkeys(notes):
        print(f"note: {note}")
    acceptance(speeds)
    return speeds


if __name__ == "__main__":
    main()
