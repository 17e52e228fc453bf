"""Viscous Burgers' equation, u_t + u u_x = nu u_xx on the periodic interval
[0, 2 pi), solved pseudo-spectrally: the derivatives in Fourier space
(``inp.fft.rfft``, times i k or -k^2, ``irfft``), the time stepping by
``odeint`` (dopri5), the whole solve one jitted function. For u(x, 0) =
sin(x) the exact solution is known (the Cole-Hopf transform turns the
equation into the heat equation, whose solution is a Fourier series of
modified Bessel functions); the script prints the largest error against it.

    python examples/spectral_burgers.py
"""

from __future__ import annotations

import numpy as np

import isokernel as ik
import isokernel.numpy as inp
from isokernel.ode import odeint
from isokernel.typing import Array

N, NU = 128, 0.1
TIMES = np.array([0.0, 0.5, 1.0, 2.0])
X = 2 * np.pi * np.arange(N) / N
K = np.fft.rfftfreq(N, 1.0 / N)  # wavenumbers 0 .. N/2
IK = (1j * np.where(K == N // 2, 0.0, K)).astype(np.complex128)  # d/dx (the Nyquist mode: 0)
MINUS_K2 = (-(K ** 2)).astype(np.complex128)  # d2/dx2


def burgers(u: Array, t: Array) -> Array:
    """du/dt at the grid points: the derivatives spectral, the product pointwise."""
    u_hat = inp.fft.rfft(u)
    ux = inp.fft.irfft(IK * u_hat, n=N)
    uxx = inp.fft.irfft(MINUS_K2 * u_hat, n=N)
    return NU * uxx - u * ux


def solve(u0: Array) -> Array:
    return odeint(burgers, u0, TIMES, rtol=1e-10, atol=1e-12)


def cole_hopf(x: np.ndarray, t: float, nu: float = NU, terms: int = 80) -> Array:
    """The exact solution for u(x, 0) = sin(x): u = -2 nu phi_x / phi with
    phi = I0(a) + 2 sum_n I_n(a) exp(-nu n^2 t) cos(n x), a = 1 / (2 nu)
    (SciPy's exponentially scaled Bessel functions; the scale cancels)."""
    from scipy.special import ive
    a = 1.0 / (2.0 * nu)
    n = np.arange(1, terms + 1)[:, None]
    weights = ive(n, a) * np.exp(-nu * n ** 2 * t)
    phi = ive(0, a) + 2.0 * np.sum(weights * np.cos(n * x), axis=0)
    phi_x = -2.0 * np.sum(weights * n * np.sin(n * x), axis=0)
    return -2.0 * nu * phi_x / phi


def main() -> None:
    u0 = np.sin(X)
    states = ik.jit(solve)(u0)
    print(f"viscous Burgers, nu = {NU}, {N} Fourier modes, dopri5 to t = {TIMES[-1]:g}")
    try:
        exact = [cole_hopf(X, t) for t in TIMES]
    except ImportError:
        print("(SciPy is not installed: no exact solution to compare with)")
        return
    for t, u, e in zip(TIMES, states, exact):
        print(f"t = {t:4.1f}: max |u| = {np.max(np.abs(u)):.6f}, error {np.max(np.abs(u - e)):.1e}")
    error = max(np.max(np.abs(u - e)) for u, e in zip(states, exact))
    print(f"max error against the Cole-Hopf solution: {error:.2e}")


if __name__ == "__main__":
    main()
