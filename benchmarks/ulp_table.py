"""Max-ulp table of the portable decompositions, per function and dtype.

    python benchmarks/ulp_table.py                 # thorough: 20000 points each
    python benchmarks/ulp_table.py --points 2000   # quicker
    python benchmarks/ulp_table.py exp sin         # some functions only

Every function is evaluated through ``isokernel.numpy`` under
``numerics("portable")`` on points sampled over its documented domain: a
uniform or log-uniform spread, random bit patterns (so every binade,
subnormals included, is hit), the over/underflow edges, the breakpoints of
the decomposition, and for trigonometric functions arguments closest to
multiples of π/2 (found by continued fractions). The error is measured in
ulps of the exact value (a real number, so 0.5 is a correctly rounded result
and < 1 a faithful one):

- float64 against mpmath at 160 bits;
- float32 against NumPy's float64 functions: their error (at most a few
  float64 ulps) is below 2^-27 of a float32 ulp, far under the figures.

A result whose exact value overflows must be inf of the right sign. Special
values (±0, ±inf, NaN) are checked separately, for exact agreement with C99
(NumPy's native results), by tests/test_portable.py.

The tests import this module for its samplers and reference, with far fewer
points.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

import isokernel.numpy as inp
from isokernel.record.portable import _F32, _F64, numerics

try:
    import mpmath as mp
except ImportError:  # pragma: no cover - the test extra installs it
    mp = None

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
SPEC = {F32: _F32, F64: _F64}


# ------------------------------------------------------------------ samplers

def log_uniform(rng, n, lo, hi, dtype, signed=False):
    """Magnitudes spread evenly in log scale over [lo, hi]."""
    x = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    if signed:
        x *= rng.choice([-1.0, 1.0], n)
    return x.astype(dtype)


def random_bits(rng, n, dtype, lo, hi, signed=False):
    """Uniform over the bit patterns between positive ``lo`` and ``hi``:
    every binade (subnormals included) equally often."""
    itype = np.int32 if dtype == F32 else np.int64
    a, b = np.array([lo, hi], dtype=dtype).view(itype)
    x = rng.integers(int(a), int(b), n, dtype=itype, endpoint=True).view(dtype)
    if signed:
        x = x * rng.choice(np.array([-1, 1], dtype=dtype), n)
    return x


def around(values, dtype, steps=3):
    """Each value and its neighbours up to ``steps`` ulps away."""
    out = []
    for v in np.asarray(values, dtype=dtype):
        w = v
        for _ in range(steps):
            w = np.nextafter(w, dtype.type(np.inf))
            out.append(w)
        w = v
        for _ in range(steps):
            w = np.nextafter(w, dtype.type(-np.inf))
            out.append(w)
        out.append(v)
    return np.array(out, dtype=dtype)


def near_pio2_multiples(dtype, max_x):
    """Arguments in [1, max_x] closest to multiples of π/2: for each binade,
    multiples of the continued-fraction denominators of 2^(e-p+1) · 2/π."""
    if mp is None:
        return np.array([], dtype=dtype)
    p = 24 if dtype == F32 else 53
    out = []
    with mp.workprec(400):
        for e in range(0, int(math.log2(max_x))):
            alpha = mp.mpf(2) ** (e - p + 1) * 2 / mp.pi
            for q in _convergent_denominators(alpha, 2 ** p):
                for t in range(max(1, 2 ** (p - 1) // q), 2 ** p // q + 1)[:64]:
                    m = t * q
                    if 2 ** (p - 1) <= m < 2 ** p:
                        out.append(float(mp.mpf(m) * mp.mpf(2) ** (e - p + 1)))
    x = np.array(out, dtype=np.float64)
    return x[x <= max_x].astype(dtype)


def _convergent_denominators(alpha, limit):
    qs, (q0, q1) = [], (1, 0)
    x = alpha
    for _ in range(80):
        a = int(mp.floor(x))
        q0, q1 = q1, a * q1 + q0
        if q1 > limit:
            break
        qs.append(q1)
        frac = x - a
        if frac == 0:
            break
        x = 1 / frac
    return qs[-6:]


# --------------------------------------------------------------- functions

@dataclass(frozen=True)
class Function:
    """One decomposition: how to sample its domain and its exact value."""

    name: str
    domain: str
    bound: float
    sample: object  # (rng, n, dtype) -> tuple of argument arrays
    mp_ref: object  # mpf args -> mpf
    arity: int = 1

    def portable(self, *args):
        with numerics("portable"):
            return getattr(inp, self.name)(*args)


def _mix(*parts):
    return np.concatenate([np.asarray(p) for p in parts])


def _fmax(dtype):
    return float(np.finfo(dtype).max)


def _tiny(dtype):
    return float(np.finfo(dtype).smallest_subnormal)


def _exp_sample(log_max, log_min):
    def sample(rng, n, dtype):
        hi, lo = log_max(dtype), log_min(dtype)
        return (_mix(rng.uniform(lo - 5, hi + 5, n).astype(dtype),
                     log_uniform(rng, n // 4, _tiny(dtype), 1.0, dtype, signed=True),
                     around([hi, lo, 0.5 * np.log(2), -0.5 * np.log(2)], dtype, 40)),)
    return sample


def _ln_max(dtype):
    return float(np.log(np.float64(_fmax(dtype))))


def _ln_min(dtype):
    return float(np.log(np.float64(_tiny(dtype)))) - 0.7


def _log_sample(rng, n, dtype):
    return (_mix(random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype)),
                 1.0 + log_uniform(rng, n // 4, 1e-7, 0.5, dtype, signed=True),
                 around([1.0, np.sqrt(2), np.sqrt(0.5), 2.0, 0.5], dtype, 20)),)


def _log1p_sample(rng, n, dtype):
    return (_mix(log_uniform(rng, n, _tiny(dtype), 1.0, dtype, signed=True),
                 -1.0 + log_uniform(rng, n // 4, 1e-7, 1.0, dtype),
                 random_bits(rng, n // 2, dtype, 1.0, _fmax(dtype)),
                 around([np.sqrt(2) - 1, np.sqrt(0.5) - 1], dtype, 20)),)


def _trig_sample(rng, n, dtype):
    top = SPEC[dtype].TRIG_MAX
    return (_mix(rng.uniform(-4, 4, n).astype(dtype),
                 log_uniform(rng, n, _tiny(dtype), top, dtype, signed=True),
                 near_pio2_multiples(dtype, top),
                 around(np.pi / 4 * np.arange(1, 9), dtype, 5)),)


def _asin_sample(rng, n, dtype):
    return (_mix(rng.uniform(-1, 1, n).astype(dtype),
                 log_uniform(rng, n // 2, _tiny(dtype), 1.0, dtype, signed=True),
                 1.0 - log_uniform(rng, n // 2, 1e-12, 0.5, dtype),
                 around([0.5, -0.5, 1.0, -1.0], dtype, 20)),)


def _atan_sample(rng, n, dtype):
    breaks = [7 / 16, 11 / 16, 19 / 16, 39 / 16]
    return (_mix(random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype), signed=True),
                 rng.uniform(-4, 4, n).astype(dtype), around(breaks, dtype, 20)),)


def _atan2_sample(rng, n, dtype):
    y = random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype), signed=True)
    x = random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype), signed=True)
    u, v = rng.uniform(-4, 4, n).astype(dtype), rng.uniform(-4, 4, n).astype(dtype)
    return _mix(y, u, v * 1.01), _mix(x, v, v)


def _sinh_sample(rng, n, dtype):
    hi = _ln_max(dtype) + float(np.log(2.0))
    return (_mix(rng.uniform(-hi - 2, hi + 2, n).astype(dtype),
                 log_uniform(rng, n, _tiny(dtype), 2.0, dtype, signed=True),
                 around([1.0, -1.0, hi, -hi], dtype, 20)),)


def _tanh_sample(rng, n, dtype):
    return (_mix(rng.uniform(-25, 25, n).astype(dtype),
                 log_uniform(rng, n, _tiny(dtype), 2.0, dtype, signed=True),
                 around([0.625, -0.625], dtype, 20)),)


def _asinh_sample(rng, n, dtype):
    big = SPEC[dtype].BIG
    return (_mix(random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype), signed=True),
                 rng.uniform(-4, 4, n).astype(dtype), around([big, -big], dtype, 20)),)


def _acosh_sample(rng, n, dtype):
    big = SPEC[dtype].BIG
    return (_mix(1.0 + log_uniform(rng, n, 1e-12, 4.0, dtype),
                 random_bits(rng, n, dtype, 1.0, _fmax(dtype)),
                 around([1.0, big], dtype, 20)[1:]),)


def _atanh_sample(rng, n, dtype):
    return (_mix(rng.uniform(-1, 1, n).astype(dtype),
                 log_uniform(rng, n // 2, _tiny(dtype), 1.0, dtype, signed=True),
                 1.0 - log_uniform(rng, n // 2, 1e-12, 0.5, dtype)),)


def _cbrt_sample(rng, n, dtype):
    return (_mix(random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype), signed=True),
                 rng.uniform(-8, 8, n).astype(dtype)),)


def _power_sample(rng, n, dtype):
    """x over all binades, y so that y log2 x spans the finite range, plus
    integer exponents of negative bases and x near 1 with large y."""
    lg = 150.0 if dtype == F32 else 1075.0
    x = random_bits(rng, n, dtype, _tiny(dtype), _fmax(dtype))
    t = rng.uniform(-lg, lg * 0.96, n)
    y = (t / np.log2(x.astype(np.float64))).astype(dtype)
    xi = rng.uniform(-10, 10, n // 4).astype(dtype)
    yi = rng.integers(-30, 30, n // 4).astype(dtype)
    x1 = (1.0 + log_uniform(rng, n // 4, 1e-7, 1e-2, np.float64, signed=True)).astype(dtype)
    y1 = log_uniform(rng, n // 4, 1.0, 1e4 if dtype == F32 else 1e12, dtype, signed=True)
    return _mix(x, xi, x1), _mix(y, yi, y1)


def _mp(name):
    return lambda *a: getattr(mp, name)(*a)


FUNCTIONS = {f.name: f for f in [
    Function("exp", "all floats (overflow to inf, subnormal results)", 1.0,
             _exp_sample(_ln_max, _ln_min), _mp("exp")),
    Function("exp2", "all floats", 2.0,
             _exp_sample(lambda d: _ln_max(d) / np.log(2), lambda d: _ln_min(d) / np.log(2)),
             lambda x: mp.power(2, x)),
    Function("expm1", "all floats", 2.0,
             _exp_sample(_ln_max, lambda d: -40.0), _mp("expm1")),
    Function("log", "x >= 0, subnormals included", 1.0, _log_sample, _mp("log")),
    Function("log2", "x >= 0", 2.0, _log_sample, lambda x: mp.log(x, 2)),
    Function("log10", "x >= 0", 2.0, _log_sample, _mp("log10")),
    Function("log1p", "x >= -1", 2.0, _log1p_sample, _mp("log1p")),
    Function("sin", "|x| < 2^13 (float32), 2^26 (float64)", 1.0, _trig_sample, _mp("sin")),
    Function("cos", "|x| < 2^13 (float32), 2^26 (float64)", 1.0, _trig_sample, _mp("cos")),
    Function("tan", "|x| < 2^13 (float32), 2^26 (float64)", 2.0, _trig_sample, _mp("tan")),
    Function("arcsin", "[-1, 1]", 2.0, _asin_sample, _mp("asin")),
    Function("arccos", "[-1, 1]", 2.0, _asin_sample, _mp("acos")),
    Function("arctan", "all floats", 2.0, _atan_sample, _mp("atan")),
    Function("arctan2", "all pairs of floats", 2.0, _atan2_sample, _mp("atan2"), 2),
    Function("sinh", "all floats", 2.0, _sinh_sample, _mp("sinh")),
    Function("cosh", "all floats", 2.0, _sinh_sample, _mp("cosh")),
    Function("tanh", "all floats", 2.0, _tanh_sample, _mp("tanh")),
    Function("arcsinh", "all floats", 2.0, _asinh_sample, _mp("asinh")),
    Function("arccosh", "x >= 1", 2.0, _acosh_sample, _mp("acosh")),
    Function("arctanh", "(-1, 1)", 2.0, _atanh_sample, _mp("atanh")),
    Function("cbrt", "all floats", 2.0, _cbrt_sample, lambda x: mp.sign(x) * mp.cbrt(abs(x))),
    Function("power", "x > 0 all y; x < 0 integer y (finite, nonzero)", 2.0, _power_sample,
             _mp("power"), 2),
]}

NUMPY_REF = {"arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
             "arctan2": np.arctan2, "arcsinh": np.arcsinh, "arccosh": np.arccosh,
             "arctanh": np.arctanh}


# ------------------------------------------------------------------ errors

def errors_f32(fn: Function, args):
    """Errors in float32 ulps against the float64 NumPy value."""
    ref_fn = NUMPY_REF.get(fn.name) or getattr(np, fn.name)
    with np.errstate(all="ignore"):
        got = np.asarray(fn.portable(*args), dtype=np.float64)
        ref = ref_fn(*(a.astype(np.float64) for a in args))
    return _ulps(got, ref, F32)


def _ulps(got, ref, dtype):
    """|got - ref| / ulp(ref) with the target format's ulp; an exact value
    beyond the largest float must give inf; NaN must give NaN."""
    finfo = np.finfo(dtype)
    with np.errstate(all="ignore"):
        overflow = np.isinf(ref.astype(dtype)) & np.isfinite(ref)
        _, e = np.frexp(ref)
        ulp = np.ldexp(1.0, np.maximum(e - 1, finfo.minexp) - finfo.nmant)
        err = np.abs(got - ref) / ulp
        expected = ref.astype(dtype)
    err = np.where(overflow | np.isinf(ref), np.where(got == expected, 0.0, np.inf), err)
    err = np.where(np.isnan(got), np.inf, err)
    return np.where(np.isnan(ref), np.where(np.isnan(got), 0.0, np.inf), err)


def errors_f64(fn: Function, args):
    """Errors in float64 ulps against mpmath at 160 bits."""
    with np.errstate(all="ignore"):
        got = np.asarray(fn.portable(*args), dtype=np.float64)
    out = np.empty(len(got))
    with mp.workprec(160):
        for i in range(len(got)):
            exact = fn.mp_ref(*(mp.mpf(float(a[i])) for a in args))
            out[i] = _ulp64(got[i], exact)
    return out


def _ulp64(got: float, exact) -> float:
    if isinstance(exact, mp.mpc) or mp.isnan(exact):
        return 0.0 if math.isnan(got) else math.inf
    if mp.isinf(exact) or abs(exact) >= mp.mpf(_fmax(F64)) * (1 + mp.mpf(2) ** -53):
        return 0.0 if got == float(mp.sign(exact)) * math.inf else math.inf
    if math.isinf(got) or math.isnan(got):
        return math.inf
    if exact == 0:
        return abs(got) / _tiny(F64)
    _, e = mp.frexp(exact)
    ulp = mp.mpf(2) ** (max(int(e) - 1, -1022) - 52)
    return float(abs(mp.mpf(got) - exact) / ulp)


def measure(fn: Function, dtype, points: int, seed: int = 0):
    """(max error in ulps, the arguments where it occurs, number of points)."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, dtype=dtype) for a in fn.sample(rng, points, dtype)]
    keep = np.ones(len(args[0]), bool)
    for a in args:
        keep &= np.isfinite(a)
    args = [a[keep] for a in args]
    err = errors_f32(fn, args) if dtype == F32 else errors_f64(fn, args)
    worst = int(np.argmax(err))
    return float(err[worst]), tuple(float(a[worst]) for a in args), len(err)


def exhaustive_f32(fn: Function, lo: float, hi: float, chunk: int = 1 << 22):
    """Max error over *every* float32 in [lo, hi) and (-hi, -lo] (unary)."""
    a, b = np.array([lo, hi], dtype=F32).view(np.int32)
    worst, at, count = 0.0, None, 0
    for start in range(int(a), int(b), chunk):
        bits = np.arange(start, min(int(b), start + chunk), dtype=np.int32)
        x = bits.view(np.float32)
        for arg in (x, -x):
            err = errors_f32(fn, [arg])
            i = int(np.argmax(err))
            count += len(err)
            if err[i] > worst:
                worst, at = float(err[i]), float(arg[i])
    return worst, at, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="functions (default: all)")
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exhaustive-f32", nargs=2, type=float, metavar=("LO", "HI"),
                        help="also check every float32 with LO <= |x| < HI (unary functions)")
    args = parser.parse_args()
    names = args.names or list(FUNCTIONS)
    if args.exhaustive_f32:
        _exhaustive_table(names, *args.exhaustive_f32)
        return
    print(f"max error in ulps of the exact value, portable numerics "
          f"({args.points} sampled points per function and dtype, plus edge cases)\n")
    print(f"| {'function':<8} | {'float32':>7} | {'float64':>7} | bound | domain |")
    print("|---|---:|---:|---:|---|")
    for name in names:
        fn = FUNCTIONS[name]
        start = time.perf_counter()
        e32, at32, n32 = measure(fn, F32, args.points, args.seed)
        e64, at64, n64 = measure(fn, F64, args.points, args.seed)
        flag = "" if max(e32, e64) <= fn.bound else "  EXCEEDS BOUND"
        print(f"| {name:<8} | {e32:7.3f} | {e64:7.3f} | {fn.bound:g} | {fn.domain} |{flag}"
              f"  <!-- worst f32 at {at32}, f64 at {at64}; {n32}+{n64} points, "
              f"{time.perf_counter() - start:.0f} s -->", flush=True)


def _exhaustive_table(names, lo: float, hi: float) -> None:
    print(f"every float32 x with {lo:g} <= |x| < {hi:g}: max error in ulps\n")
    for name in names:
        fn = FUNCTIONS[name]
        if fn.arity != 1:
            continue
        start = time.perf_counter()
        worst, at, count = exhaustive_f32(fn, lo, hi)
        flag = "" if worst <= fn.bound else "  EXCEEDS BOUND"
        print(f"{name:<8} {worst:7.3f} (bound {fn.bound:g}) at {at!r}; {count} points, "
              f"{time.perf_counter() - start:.0f} s{flag}", flush=True)


if __name__ == "__main__":
    main()
