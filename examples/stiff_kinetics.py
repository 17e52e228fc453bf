"""Robertson's chemical kinetics, a classic stiff problem, by rosenbrock23.

    A -> B           rate 0.04
    B + B -> C + B   rate 3e7
    B + C -> A + C   rate 1e4

from [A, B, C] = [1, 0, 0] to t = 1e5: the rates span eleven orders of
magnitude, so an explicit method is held to tiny steps by stability long
after the fast transient, while the L-stable Rosenbrock method steps with
the accuracy the slow part needs. The solve is mapped over a few pixels
(each its own rate of the first reaction) and compiled into one loop per
pixel; the steps are printed, and the concentrations at t = 1e5 against
SciPy's Radau at rtol 1e-10 when SciPy is installed.

    python examples/stiff_kinetics.py
"""

from __future__ import annotations

import numpy as np

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.ode import odeint
from isokernel.typing import Array

TIMES = np.array([0.0, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4, 1e5])
RTOL, ATOL = 1e-6, 1e-10


def robertson(y: Array, t: Array, k1: Array) -> Array:
    a, b, c = y[0], y[1], y[2]
    return inp.stack([-k1 * a + 1e4 * b * c,
                      k1 * a - 1e4 * b * c - 3e7 * b * b,
                      3e7 * b * b])


def pixel(k1: Array) -> tuple[Array, dict[str, Array]]:
    y0 = inp.stack([inp.ones_like(k1), inp.zeros_like(k1), inp.zeros_like(k1)])
    return odeint(robertson, y0, TIMES, k1, method="rosenbrock23", rtol=RTOL, atol=ATOL,
                  full_output=True)


def scipy_reference(k1: float) -> Array | None:
    try:
        from scipy.integrate import solve_ivp
    except ImportError:
        return None

    def rhs(t: float, y: np.ndarray) -> list[float]:
        return [-k1 * y[0] + 1e4 * y[1] * y[2],
                k1 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2]
    sol = solve_ivp(rhs, (0.0, TIMES[-1]), [1.0, 0.0, 0.0], method="Radau", rtol=1e-10,
                    atol=1e-14, t_eval=TIMES[-1:])
    return sol.y[:, -1]


def main() -> None:
    k1 = np.array([0.04, 0.03, 0.05, 0.02])
    strategy = "native" if codegen.unavailable_reason() is None else "reference"
    ys, info = ik.jit(ik.vmap(pixel), strategy=strategy)(k1)
    print(f"Robertson kinetics to t = {TIMES[-1]:g}, rosenbrock23, rtol {RTOL:g}, "
          f"atol {ATOL:g}, {strategy} strategy")
    for i, rate in enumerate(k1):
        final = ys[i, -1]
        print(f"k1 = {rate:.2f}: {info['steps'][i]} steps ({info['rejected'][i]} rejected); "
              f"A, B, C at t = 1e5: {final[0]:.6e} {final[1]:.6e} {final[2]:.6e}; "
              f"A + B + C - 1 = {final.sum() - 1.0:.1e}")
        ref = scipy_reference(rate)
        if ref is None:
            print("  (SciPy is not installed: no reference; pip install scipy)")
            continue
        err = np.abs(final - ref) / (RTOL * np.abs(ref) + ATOL)
        print(f"  SciPy Radau (rtol 1e-10):   {ref[0]:.6e} {ref[1]:.6e} {ref[2]:.6e}; "
              f"error {err.max():.0f} local tolerances (rtol |y| + atol)")


if __name__ == "__main__":
    main()
