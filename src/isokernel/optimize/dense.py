"""A small dense solve for Newton steps: Gaussian elimination with partial
pivoting, unrolled over the static size with ``isokernel.numpy`` ops.

Rows are vectors, so a system of size n records O(n^2) vector ops; the
pivot search and the row swaps are selects on comparisons of the matrix,
so the solution is linear in the right-hand side op by op (its reverse mode
transposes) and every op batches under ``vmap`` (each element pivots on its
own matrix). Meant for the few unknowns of a root per element (a pixel),
not for large systems.
"""

from __future__ import annotations

from .. import numpy as inp


def solve(a, b):
    """``x`` with ``a @ x = b``; ``a`` of static shape (n, n), ``b`` of
    shape (n,). A singular ``a`` gives inf or NaN."""
    n = a.shape[0]
    rows = [a[i] for i in range(n)]
    rhs = [b[i] for i in range(n)]
    for k in range(n):
        _pivot(rows, rhs, k)
        for r in range(k + 1, n):
            factor = rows[r][k] / rows[k][k]
            rows[r] = rows[r] - factor * rows[k]
            rhs[r] = rhs[r] - factor * rhs[k]
    return inp.stack(_back_substitute(rows, rhs))


def _pivot(rows: list, rhs: list, k: int) -> None:
    """Bring the row (from k on) with the largest |entry| in column k to
    row k, swapping by selects (the first of equal magnitudes wins)."""
    for r in range(k + 1, len(rows)):
        larger = inp.abs(rows[r][k]) > inp.abs(rows[k][k])
        rows[k], rows[r] = (inp.where(larger, rows[r], rows[k]),
                            inp.where(larger, rows[k], rows[r]))
        rhs[k], rhs[r] = inp.where(larger, rhs[r], rhs[k]), inp.where(larger, rhs[k], rhs[r])


def _back_substitute(rows: list, rhs: list) -> list:
    n = len(rows)
    x = [None] * n
    for i in range(n - 1, -1, -1):
        total = rhs[i]
        for j in range(i + 1, n):
            total = total - rows[i][j] * x[j]
        x[i] = total / rows[i][i]
    return x
