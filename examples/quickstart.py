"""A model written once with isokernel.numpy, run eagerly as NumPy, then
compiled with jit; the report says what ran where under which rules.

    python examples/quickstart.py
"""

import numpy as np

import isokernel
import isokernel.numpy as inp
from isokernel.backends.parity import max_ulp
from isokernel.typing import Array, ArrayLike


def vegetation_attenuation(ndvi: ArrayLike, b: ArrayLike) -> Array:
    """Two-way vegetation transmissivity exp(-2 b ndvi), clipped NDVI."""
    return inp.exp(-2.0 * b * inp.clip(ndvi, 0.0, 1.0))


def main() -> None:
    ndvi = np.random.default_rng(0).uniform(-0.1, 0.9, 1_000_000)
    eager = vegetation_attenuation(ndvi, 0.12)  # plain NumPy values
    oracle = isokernel.jit(vegetation_attenuation, strategy="reference")
    print("reference == eager NumPy, bit for bit:",
          oracle(ndvi, 0.12).tobytes() == eager.tobytes())
    # auto picks native when a C compiler exists: exp is then the C library's,
    # within the ulp bound its capsule states
    compiled = isokernel.jit(vegetation_attenuation).lower(ndvi, 0.12).compile()
    print(f"native: max {max_ulp(compiled(ndvi, 0.12), eager):.0f} ulp from eager NumPy")
    portable = isokernel.jit(vegetation_attenuation, numerics="portable")
    reference_portable = isokernel.jit(vegetation_attenuation, strategy="reference",
                                       numerics="portable")
    print("portable numerics, native == reference bit for bit:",
          portable(ndvi, 0.12).tobytes() == reference_portable(ndvi, 0.12).tobytes())
    print(compiled.report())


if __name__ == "__main__":
    main()
