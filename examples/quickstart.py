"""A model written once with isokernel.numpy, run eagerly as NumPy, then
compiled with jit; the report says what ran where under which rules.

    python examples/quickstart.py
"""

import numpy as np

import isokernel
import isokernel.numpy as inp
from isokernel.backends.parity import max_ulp


def vegetation_attenuation(ndvi, b):
    """Two-way vegetation transmissivity exp(-2 b ndvi), clipped NDVI."""
    return inp.exp(-2.0 * b * inp.clip(ndvi, 0.0, 1.0))


def main():
    ndvi = np.random.default_rng(0).uniform(-0.1, 0.9, 1_000_000)
    eager = vegetation_attenuation(ndvi, 0.12)  # plain NumPy values
    fast = isokernel.jit(vegetation_attenuation)
    compiled = fast.lower(ndvi, 0.12).compile()
    result = compiled(ndvi, 0.12)
    # auto picks native when a C compiler exists: exp is then libm's, within the
    # ulp bound its capsule states; strategy="threads" would give NumPy's bits
    print("bit-identical to eager NumPy:", result.tobytes() == eager.tobytes(),
          f"(max {max_ulp(result, eager):.0f} ulp)")
    print(compiled.report())


if __name__ == "__main__":
    main()
