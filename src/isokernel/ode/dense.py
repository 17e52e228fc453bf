"""A small dense linear solve for the Rosenbrock step, written with
``isokernel.numpy`` ops only: Gaussian elimination with partial pivoting,
unrolled over the static size ``n`` of the system.

A matrix is a list of rows, each a list of entries; an entry is any value the
elementwise ops take (a NumPy scalar, a tracer, or, under ``vmap``, one entry
per pixel). Pivoting selects rows with ``where`` instead of indexing, so the
whole factorization is elementwise: it records O(n^3) nodes, runs row-locally
(one per pixel inside ``native``'s loop) and differentiates like any other
model. Meant for the few states of a per-pixel ODE, not for large systems.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import numpy as inp


@dataclass(frozen=True)
class LU:
    """The factors of Gaussian elimination with partial pivoting: ``rows``
    holds U on and above the diagonal and, below it, the multiplier used at
    each step for the row in that position then; ``swaps[k][r]`` says whether
    row ``k + 1 + r`` was exchanged with row ``k`` at step ``k``."""

    rows: list
    swaps: list


def _swap(flag, first, second):
    """``(second, first)`` where ``flag`` holds, ``(first, second)`` elsewhere."""
    return inp.where(flag, second, first), inp.where(flag, first, second)


def _pivot(rows: list, k: int) -> list:
    """Move the largest |entry| of column k (rows k..n-1) to row k by a chain of
    compare-and-swap steps; return each step's flag. Only columns k.. move: the
    multipliers left of them stay with the position they were computed for,
    as ``lu_solve`` applies each step's exchanges just before its elimination."""
    flags = []
    for r in range(k + 1, len(rows)):
        flag = inp.abs(rows[r][k]) > inp.abs(rows[k][k])
        pairs = [_swap(flag, a, b) for a, b in zip(rows[k][k:], rows[r][k:])]
        rows[k] = rows[k][:k] + [p[0] for p in pairs]
        rows[r] = rows[r][:k] + [p[1] for p in pairs]
        flags.append(flag)
    return flags


def lu_factor(matrix: list) -> LU:
    """Factor the n x n ``matrix`` (a list of n rows of n entries)."""
    rows = [list(row) for row in matrix]
    swaps = []
    for k in range(len(rows)):
        swaps.append(_pivot(rows, k))
        for r in range(k + 1, len(rows)):
            m = rows[r][k] / rows[k][k]
            rows[r] = rows[r][:k] + [m] + [rows[r][j] - m * rows[k][j]
                                           for j in range(k + 1, len(rows))]
    return LU(rows, swaps)


def lu_solve(lu: LU, rhs: list) -> list:
    """Solve A x = rhs (a list of n entries) from A's factors."""
    x = list(rhs)
    n = len(x)
    for k in range(n):
        for r, flag in zip(range(k + 1, n), lu.swaps[k]):
            x[k], x[r] = _swap(flag, x[k], x[r])
        for r in range(k + 1, n):
            x[r] = x[r] - lu.rows[r][k] * x[k]
    for k in reversed(range(n)):
        for j in range(k + 1, n):
            x[k] = x[k] - lu.rows[k][j] * x[j]
        x[k] = x[k] / lu.rows[k][k]
    return x
