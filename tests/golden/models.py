"""Six representative graphs whose generated C is kept as golden files.
Their line numbers appear in the C provenance comments: edit with care."""

import isokernel.numpy as inp
from isokernel.models.tau_omega import tau_omega


def forward(mv, vwc, ts):
    """The tau-omega forward model (sqrt, exp, divisions, broadcast scalars)."""
    return tau_omega(mv, vwc, ts)


def guarded(x, y):
    """Comparisons, a select that evaluates both sides, casts, min/max."""
    safe = inp.where(x > 0.0, inp.sqrt(x), -x)
    return inp.maximum(safe, y).astype(inp.int32), inp.minimum(x, y) >= 1.5


def per_pixel_stats(samples, weights):
    """A small static reduction over a row of four, and a broadcast parameter."""
    weighted = samples * weights
    return inp.sum(weighted, axis=1) / inp.max(samples, axis=1)


def integer_bins(counts, width):
    """Integer floor division and remainder (NumPy's signs), wrapping arithmetic."""
    return counts // width, counts % width, -counts * 3


def layout(cube):
    """Row layout ops: transpose, flip and slice rename elements; no code."""
    flipped = inp.flip(inp.transpose(cube, (0, 2, 1)), 2)
    return inp.concatenate([flipped[:, :, :1], flipped * float("inf")], axis=2)


def spectra(bands, gains):
    """Rows of 100 elements, beyond the unrolling cap: loops over the row, a
    weight vector read whole, a flip as an affine index, a transpose as an
    index table, a concatenation filled by one loop per operand, a short
    slice read from a loop's array."""
    lit = bands * gains + 0.5
    shifted = inp.concatenate([lit[:, :40], bands[:, 40:]], axis=1)
    turned = inp.transpose(inp.reshape(lit, (-1, 10, 10)), (0, 2, 1))
    return inp.sqrt(lit) - inp.flip(lit, 1), shifted, lit[:, :2], turned


def kepler(mean_anomaly, eccentricity):
    """Kepler's equation E - e sin E = M by Newton, one while loop per pixel
    (vmap makes the loop lane-wise: each pixel stops on its own)."""
    from isokernel import vmap, while_loop

    def solve(m, e):
        def step(state):
            big_e, _ = state
            d = (big_e - e * inp.sin(big_e) - m) / (1.0 - e * inp.cos(big_e))
            return big_e - d, d
        start = (m + e * inp.sin(m), inp.ones_like(m))
        return while_loop(lambda state: inp.abs(state[1]) > 1e-12, step, start)[0]
    return vmap(solve)(mean_anomaly, eccentricity)


def fori(x):
    """A fori_loop of static bounds: a for loop of 10 steps with a counter."""
    from isokernel import fori_loop
    return fori_loop(0, 10, lambda i, v: v * 0.5 + i.astype(inp.float64), x)
