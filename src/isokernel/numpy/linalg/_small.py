"""Matrices of static size <= ``SMALL`` unrolled into elementwise ops.

A matrix is held as a list of rows of *entries*: each entry a value of the
batch shape (the leading axes) or a Python float standing for a constant
(the zeros and ones of an identity right-hand side, which the arithmetic
below skips). The programs are straight-line selects and basic operations,
so ``native`` and the CUDA megakernel compile them into the per-pixel C body
with no vendor call; under ``vmap`` every entry is one value per pixel.

Gaussian elimination pivots as LAPACK's getrf does (the first row of largest
magnitude in the column, found by strict ``>`` comparisons), by selects,
and scales the column below a pivot by the pivot's reciprocal as getrf does
(getrf divides instead for pivots below the smallest normal number; a zero
pivot leaves its column as it is, so a singular matrix has an exactly zero
U diagonal entry and a determinant of 0); the back substitution subtracts
from the last column to the first, as getrs's triangular solves do. Exactly
singular matrices give inf or NaN from a solve (a compiled kernel cannot
raise); a Cholesky factor of a matrix that is not positive definite has NaN
entries.
"""

from __future__ import annotations

from ...record import frontend as F

SMALL = 4
"""The largest matrix (and right-hand-side column count) unrolled."""


def _constant(x) -> bool:
    """A Python float of the program (not a NumPy scalar, which subclasses
    float: an eagerly computed entry)."""
    return type(x) is float


def _is(x, value: float) -> bool:
    return _constant(x) and x == value


def mul(x, y):
    if _is(x, 0.0) or _is(y, 0.0):
        return 0.0
    if _is(x, 1.0):
        return y
    return x if _is(y, 1.0) else x * y


def sub(x, y):
    return x if _is(y, 0.0) else x - y


def div(x, y):
    return 0.0 if _is(x, 0.0) else x / y


def select(pred, x, y, like):
    """``where(pred, x, y)`` on entries; a constant meets ``like``'s dtype
    and batch shape."""
    if _constant(x) and _constant(y) and x == y:
        return x
    return F.where(pred, lift(x, like), lift(y, like))


def lift(x, like):
    return F.full_like(like, x) if _constant(x) else x


def entries(a) -> list[list]:
    """The rows of entries of ``a`` (..., n, m)."""
    n, m = a.shape[-2:]
    return [[a[..., i, j] for j in range(m)] for i in range(n)]


def assemble(rows: list[list], like):
    """The matrix (..., n, m) of rows of entries."""
    cols = [F.stack([lift(x, like) for x in row], axis=-1) for row in rows]
    return F.stack(cols, axis=-2)


def identity(n: int) -> list[list]:
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


# --- LU with partial pivoting --------------------------------------------------------------

def _pivot(rows: list[list], k: int):
    """Rows after getrf's pivot at column ``k`` (the first row i >= k of
    largest |a_ik| swapped into row k), and whether a swap happened."""
    like = rows[k][k]
    best, pivot, takes = F.abs(rows[k][k]), rows[k], []
    for i in range(k + 1, len(rows)):
        size = F.abs(rows[i][k])
        take = size > best
        if i + 1 < len(rows):
            best = F.where(take, size, best)
        pivot = [select(take, x, y, like) for x, y in zip(rows[i], pivot)]
        takes.append(take)
    out, later = list(rows), None
    out[k] = pivot
    for i in range(len(rows) - 1, k, -1):  # row i gets row k if it is the last take
        take = takes[i - k - 1]
        chosen = take if later is None else F.logical_and(take, F.logical_not(later))
        out[i] = [select(chosen, x, y, like) for x, y in zip(rows[k], rows[i])]
        later = take if later is None else F.logical_or(later, take)
    return out, later


def eliminate(rows: list[list], n: int):
    """Forward elimination of the augmented ``rows`` (n of them, the first n
    columns the matrix): the rows of U (and the transformed right-hand
    sides) and the swap flag of each pivot step."""
    swaps = []
    for k in range(n):
        if k + 1 < n:
            rows, swapped = _pivot(rows, k)
            swaps.append(swapped)
        if k + 1 < n:  # getrf scales the column by the reciprocal; a zero pivot, not at all
            pivot = rows[k][k]
            reciprocal = 1.0 / F.where(F.equal(pivot, 0.0), F.ones_like(pivot), pivot)
        for i in range(k + 1, n):
            factor = mul(rows[i][k], reciprocal)
            rows[i] = [x if j <= k else sub(x, mul(factor, rows[k][j]))
                       for j, x in enumerate(rows[i])]
    return rows, swaps


def back_substitute(rows: list[list], n: int, upper=True, unit=False) -> list[list]:
    """Solve the triangular system whose matrix is the first ``n`` columns of
    ``rows`` for the right-hand sides in the columns after them (column by
    column of the matrix, last first for an upper one, as trsm)."""
    order = range(n - 1, -1, -1) if upper else range(n)
    rhs = [list(row[n:]) for row in rows]
    for j in order:
        if not unit:
            rhs[j] = [div(x, rows[j][j]) for x in rhs[j]]
        later = range(j) if upper else range(j + 1, n)
        for i in later:
            rhs[i] = [sub(y, mul(rows[i][j], x)) for y, x in zip(rhs[i], rhs[j])]
    return rhs


def solve(a, b):
    """``a`` (..., n, n) \\ ``b`` (..., n, k), the batch shapes equal."""
    n = a.shape[-1]
    rows = [ra + rb for ra, rb in zip(entries(a), entries(b))]
    rows, _ = eliminate(rows, n)
    return assemble(back_substitute(rows, n), a[..., 0, 0])


def inv(a):
    n = a.shape[-1]
    rows = [ra + rb for ra, rb in zip(entries(a), identity(n))]
    rows, _ = eliminate(rows, n)
    return assemble(back_substitute(rows, n), a[..., 0, 0])


def det_parts(a):
    """(sign of the permutation as +-1.0 entries' product, the diagonal of U)."""
    n = a.shape[-1]
    rows, swaps = eliminate(entries(a), n)
    one = F.ones_like(a[..., 0, 0])
    sign = one
    for swapped in swaps:
        sign = F.where(swapped, -sign, sign)
    return sign, [rows[k][k] for k in range(n)]


def det(a):
    sign, diagonal = det_parts(a)
    out = sign
    for u in diagonal:
        out = out * u
    return out


def slogdet(a):
    """(sign, log|det|) from U's diagonal: sign 0 and -inf for a singular
    matrix, as NumPy."""
    sign, diagonal = det_parts(a)
    logabs = F.log(F.abs(diagonal[0]))
    for u in diagonal:
        sign = sign * F.sign(u)
    for u in diagonal[1:]:
        logabs = logabs + F.log(F.abs(u))
    return sign, logabs


# --- Cholesky and triangular solves --------------------------------------------------------

def cholesky(a):
    """The lower factor L of ``a`` = L Lᵀ, reading a's lower triangle only
    (NumPy's and LAPACK's potrf 'L')."""
    n = a.shape[-1]
    rows = entries(a)
    low = [[0.0] * n for _ in range(n)]
    for j in range(n):
        diag = rows[j][j]
        for k in range(j):
            diag = diag - low[j][k] * low[j][k]
        low[j][j] = F.sqrt(diag)
        for i in range(j + 1, n):
            x = rows[i][j]
            for k in range(j):
                x = x - low[i][k] * low[j][k]
            low[i][j] = x / low[j][j]
    return assemble(low, a[..., 0, 0])


def solve_triangular(a, b, lower: bool, trans: bool, unit: bool):
    """``op(a) x = b`` for triangular ``a`` (op: transpose when ``trans``),
    reading only the triangle named (and not the diagonal when ``unit``)."""
    n = a.shape[-1]
    rows = entries(a)
    if trans:
        rows = [list(col) for col in zip(*rows)]
        lower = not lower
    rows = [[x if (j <= i if lower else j >= i) else 0.0 for j, x in enumerate(row)]
            for i, row in enumerate(rows)]
    rows = [ra + rb for ra, rb in zip(rows, entries(b))]
    return assemble(back_substitute(rows, n, upper=not lower, unit=unit), a[..., 0, 0])
