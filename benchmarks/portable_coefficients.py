"""Regenerate the polynomial coefficients of ``isokernel.record.portable``.

Every polynomial of the portable decompositions is a weighted minimax fit made
here by the Remez exchange algorithm in 60-digit arithmetic (mpmath), with the
coefficients rounded to the target format one at a time from the lowest degree
up and the remaining ones refitted after each rounding, so the rounded
polynomial is as good as a rounded polynomial of its degree gets.

    python benchmarks/portable_coefficients.py            # print every table
    python benchmarks/portable_coefficients.py exp log    # only these

The printed tables are pasted into ``src/isokernel/record/portable.py``; the
fitted relative error of each is printed beside it (as a power of two) and is
what the error analysis in docs/numerics.md starts from.
"""

from __future__ import annotations

import sys

import mpmath as mp

mp.mp.dps = 60
BITS = {"f32": 24, "f64": 53}


def _round(c, fmt: str):
    """``c`` rounded to nearest in the target format (exponent range aside)."""
    with mp.workprec(BITS[fmt]):
        return +c


def _cheb(a, b, n: int, k: int):
    return (a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * k / n)


def _solve(f, w, powers, ref, fixed):
    """Coefficients and levelled error through the reference points."""
    n = len(powers)
    matrix, rhs = mp.matrix(n + 1, n + 1), mp.matrix(n + 1, 1)
    for i, x in enumerate(ref):
        for j, p in enumerate(powers):
            matrix[i, j] = x ** p
        matrix[i, n] = (-1) ** i / w(x)
        rhs[i] = f(x) - _poly(fixed, x)
    sol = mp.lu_solve(matrix, rhs)
    return [(p, sol[j]) for j, p in enumerate(powers)], sol[n]


def _poly(terms, x):
    return mp.fsum(c * x ** p for p, c in terms)


def _extrema(xs, err, count: int):
    """``count`` alternating extrema of ``err`` over the grid (exchange step)."""
    idx = [0] + [i for i in range(1, len(xs) - 1)
                 if abs(err[i]) >= abs(err[i - 1]) and abs(err[i]) >= abs(err[i + 1])]
    idx.append(len(xs) - 1)
    merged = []
    for i in idx:
        if merged and mp.sign(err[merged[-1]]) == mp.sign(err[i]):
            if abs(err[i]) > abs(err[merged[-1]]):
                merged[-1] = i
        else:
            merged.append(i)
    while len(merged) > count:
        merged.pop(0 if abs(err[merged[0]]) < abs(err[merged[-1]]) else -1)
    return [xs[i] for i in merged]


def remez(f, w, powers, a, b, fixed=(), grid: int = 2500, iters: int = 40):
    """Minimise max |w(x) (f(x) - fixed(x) - sum c_p x^p)| over [a, b]."""
    a, b = mp.mpf(a), mp.mpf(b)
    n = len(powers)
    ref = [_cheb(a, b, n, k) for k in range(n + 1)]
    xs = [_cheb(a, b, grid - 1, k) for k in range(grid)]
    fx, wx = [f(x) for x in xs], [w(x) for x in xs]
    fixed_x = [_poly(fixed, x) for x in xs]
    best = None
    for _ in range(iters):
        terms, level = _solve(f, w, powers, ref, fixed)
        err = [wi * (fi - fxi - _poly(terms, x))
               for x, fi, wi, fxi in zip(xs, fx, wx, fixed_x)]
        worst = max(abs(e) for e in err)
        if best is None or worst < best[1]:
            best = (terms, worst)
        if len(_extrema(xs, err, n + 1)) < n + 1 or worst <= abs(level) * (1 + mp.mpf(1e-6)):
            break
        ref = _extrema(xs, err, n + 1)
    return best


def fit(f, w, powers, a, b, fmt: str, fixed=()):
    """Rounded coefficients for ``powers`` (lowest first) and the max
    weighted error of the rounded polynomial."""
    done = list(fixed)
    for k, p in enumerate(powers):
        terms, _ = remez(f, w, powers[k:], a, b, fixed=done)
        done.append((p, _round(terms[0][1], fmt)))
    worst = _max_error(f, w, done, a, b)
    return [c for p, c in done[len(fixed):]], worst


def _max_error(f, w, terms, a, b, grid: int = 6000):
    a, b = mp.mpf(a), mp.mpf(b)
    return max(abs(w(x) * (f(x) - _poly(terms, x)))
               for x in (_cheb(a, b, grid - 1, k) for k in range(grid)))


# --------------------------------------------------------------- the fits
# Each entry: name -> (f, w, powers, a, b, {fmt: number of terms}).
# The weight turns an error in the fitted part into a relative error of the
# function the decomposition returns.

def _tiny(b):
    return mp.mpf(b) * mp.mpf(10) ** -7


LN2 = mp.log(2)
PIO4 = mp.pi / 4


def _exp_rat(r):  # exp(r) = 1 + 2r / (R(r) - r),  R(r) = r coth(r/2) = 2 + r^2 P(r^2)
    return (r * mp.coth(r / 2) - 2) / r ** 2


def _log_r(s):  # 2 atanh(s) = 2 s + s R(s^2),  R(z) = z (c1 + c2 z + ...)
    return (2 * mp.atanh(s) - 2 * s) / s


def _log_tail(s):  # 2 atanh(s) = 2 s + 2/3 s^3 + s^5 Q(s^2)
    return (2 * mp.atanh(s) - 2 * s - 2 * s ** 3 / 3) / s ** 5


FITS = {
    "exp": (_exp_rat, lambda r: r ** 3 / 2, lambda n: [2 * i for i in range(n)],
            _tiny(0.35), LN2 / 2 * mp.mpf(1.0005), {"f32": 2, "f64": 5}),
    "log": (_log_r, lambda s: s / (2 * mp.atanh(s)), lambda n: [2 * i + 2 for i in range(n)],
            _tiny(0.18), mp.mpf(0.17158), {"f32": 3, "f64": 7}),
    "log_tail": (_log_tail, lambda s: s ** 5 / (2 * mp.atanh(s)),
                 lambda n: [2 * i for i in range(n)], _tiny(0.18), mp.mpf(0.17158),
                 {"f32": 4, "f64": 8}),
    "sin": (lambda x: (mp.sin(x) - x) / x ** 3, lambda x: x ** 3 / mp.sin(x),
            lambda n: [2 * i for i in range(n)], _tiny(0.8), PIO4 * mp.mpf(1.0001),
            {"f32": 4, "f64": 7}),
    "cos": (lambda x: (mp.cos(x) - 1 + x ** 2 / 2) / x ** 4, lambda x: x ** 4 / mp.cos(x),
            lambda n: [2 * i for i in range(n)], _tiny(0.8), PIO4 * mp.mpf(1.0001),
            {"f32": 3, "f64": 6}),
    "atan": (lambda t: (mp.atan(t) - t) / t ** 3, lambda t: t ** 3 / mp.atan(t),
             lambda n: [2 * i for i in range(n)], _tiny(0.44), mp.mpf(7) / 16 * mp.mpf(1.0001),
             {"f32": 6, "f64": 12}),
    "asin": (lambda s: (mp.asin(s) - s) / s ** 3, lambda s: s ** 3 / mp.asin(s),
             lambda n: [2 * i for i in range(n)], _tiny(0.5), mp.mpf(0.5),
             {"f32": 6, "f64": 14}),
    "sinh": (lambda x: (mp.sinh(x) - x) / x ** 3, lambda x: x ** 3 / mp.sinh(x),
             lambda n: [2 * i for i in range(n)], _tiny(1), mp.mpf(1), {"f32": 4, "f64": 8}),
    "tanh": (lambda x: (mp.tanh(x) - x) / x ** 3, lambda x: x ** 3 / mp.tanh(x),
             lambda n: [2 * i for i in range(n)], _tiny(0.625), mp.mpf(0.625),
             {"f32": 6, "f64": 12}),
    "cbrt": (lambda m: mp.cbrt(m), lambda m: 1 / mp.cbrt(m), lambda n: list(range(n)),
             mp.mpf(1), mp.mpf(8), {"f32": 5, "f64": 5}),
}


def _show(name: str, fmt: str, coeffs, worst) -> str:
    values = ", ".join(repr(float(c)) for c in coeffs)
    return f"    # {name} {fmt}: max weighted error 2^{float(mp.log(worst, 2)):.1f}\n" \
           f"    ({values}),"


def main(names) -> None:
    for name in names or FITS:
        f, w, powers, a, b, terms = FITS[name]
        for fmt, n in terms.items():
            coeffs, worst = fit(f, w, powers(n), a, b, fmt)
            print(_show(name, fmt, coeffs, worst), flush=True)




# ----------------------------------------------------------- the constants

def split(value, widths):
    """``value`` as a sum of parts of the given significant widths (bits),
    each rounded to nearest, the last one carrying the remainder."""
    parts, rest = [], mp.mpf(value)
    for width in widths:
        e = int(mp.floor(mp.log(abs(rest), 2)))
        quantum = mp.mpf(2) ** (e - width + 1)
        part = mp.nint(rest / quantum) * quantum
        parts.append(part)
        rest -= part
    return parts


CONSTANTS = {
    # name: (value, {fmt: widths})
    "LN2": (LN2, {"f32": (16, 24, 24), "f64": (32, 53, 53)}),
    "LN2_FULL": (LN2, {"f32": (24, 24), "f64": (53, 53)}),
    "INVLN2": (1 / LN2, {"f32": (24,), "f64": (53,)}),
    "INVLN2_SPLIT": (1 / LN2, {"f32": (12, 24), "f64": (27, 53)}),
    "INVLN10_SPLIT": (1 / mp.log(10), {"f32": (12, 24), "f64": (27, 53)}),
    "LOG10_2": (mp.log10(2), {"f32": (16, 24), "f64": (32, 53)}),
    "TWO_OVER_PI": (2 / mp.pi, {"f32": (24,), "f64": (53,)}),
    "PIO2_REDUCE": (mp.pi / 2, {"f32": (11, 11, 11, 11, 24), "f64": (27, 27, 27, 27, 53)}),
    "PIO2": (mp.pi / 2, {"f32": (24, 24), "f64": (53, 53)}),
    "PI": (mp.pi, {"f32": (24, 24), "f64": (53, 53)}),
    "ATAN_HALF": (mp.atan(0.5), {"f32": (24, 24), "f64": (53, 53)}),
    "PIO4": (mp.pi / 4, {"f32": (24, 24), "f64": (53, 53)}),
    "ATAN_3HALF": (mp.atan(1.5), {"f32": (24, 24), "f64": (53, 53)}),
    "TWO_THIRDS": (mp.mpf(2) / 3, {"f32": (24, 24), "f64": (53, 53)}),
    "SQRT2": (mp.sqrt(2), {"f32": (24,), "f64": (53,)}),
}


def constants() -> None:
    for name, (value, widths) in CONSTANTS.items():
        for fmt, w in widths.items():
            parts = ", ".join(f"{float(p).hex()}" for p in split(value, w))
            print(f"    {name} {fmt}: ({parts})")


if __name__ == "__main__":
    if sys.argv[1:] == ["constants"]:
        constants()
    else:
        main(sys.argv[1:])
