"""Dense linear algebra with NumPy's and SciPy's names, batched over the
leading axes, composed from three primitives (``lu``, ``triangular_solve``,
``cholesky``) and, for matrices of static size <= 4x4, from elementwise ops
(``_small``): those compile into the per-pixel C body of ``native`` and the
CUDA megakernel.

A solve by LU runs the factorization once and two triangular solves; its
derivative is d x = a⁻¹ (d b - d a x), solved with the same factors (a
custom rule, so the factorization is never differentiated), and reverse
mode transposes those solves. Exactly singular matrices give inf or
NaN (no strategy can raise from inside a kernel); a matrix that is not
positive definite gives a Cholesky factor of NaN.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...ir import DTypeError, Op, ShapeError
from ...ir import dtypes as _dt
from ...ir.source import user_where
from ...record import Tracer, bind, current_builder
from ...record import frontend as F
from ...transforms import custom_jvp
from ...typing import Array, ArrayLike
from . import _small

NOT_FLOAT = ("{name} at {where}: {what} has dtype {dtype}; linear algebra computes in float32 "
             "or float64: cast first, e.g. {what}.astype(inp.float64)")
NOT_SQUARE = ("{name} at {where}: {what} must hold square matrices in its last two axes, got "
              "shape {shape}; pass an array of shape (..., n, n)")
NO_FIT = ("{name} at {where}: {what} of shape {shape} does not fit matrices of shape "
          "{matrix}; pass {vector} or (..., {n}, k)")


def as_float(x, name: str, what: str):
    """``x`` as an array of float32 or float64, else a ``DTypeError`` naming
    the function ``name`` and the argument ``what``."""
    x = F.asarray(x)
    if x.dtype not in _dt.FLOATS:
        raise DTypeError(NOT_FLOAT.format(name=name, where=user_where(), what=what,
                                          dtype=x.dtype.name))
    return x


def as_square(x, name: str, what: str = "a"):
    """``x`` as float square matrices in its last two axes (``as_float``),
    else a ``ShapeError``."""
    x = as_float(x, name, what)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(NOT_SQUARE.format(name=name, where=user_where(), what=what,
                                           shape=tuple(x.shape)))
    return x


def check_same_dtype(a, b, name: str) -> None:
    """A ``DTypeError`` unless ``a`` and ``b`` share a dtype (no silent casts)."""
    if a.dtype != b.dtype:
        raise DTypeError(f"{name} at {user_where()}: a is {a.dtype.name} and b is "
                         f"{b.dtype.name}; isokernel never casts silently: cast one, e.g. "
                         f"b.astype(inp.{a.dtype.name})")


def _rhs(a, b, name: str, vector: bool):
    """``b`` as (..., n, k) with a's batch axes broadcast against it, and
    ``a`` broadcast likewise. A vector is 1-D for NumPy's ``solve``, one
    axis short of ``a`` for SciPy's (and JAX's) batched solvers."""
    b = as_float(b, name, "b")
    check_same_dtype(a, b, name)
    n = a.shape[-1]
    if vector:
        b = F.reshape(b, (*b.shape, 1))
    if b.ndim < 2 or b.shape[-2] != n:
        form = f"({n},)" if name == "solve" else f"(..., {n})"
        raise ShapeError(NO_FIT.format(name=name, where=user_where(), what="b",
                                       shape=tuple(b.shape[:-1] if vector else b.shape),
                                       matrix=tuple(a.shape), n=n, vector=form))
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ShapeError(f"{name} at {user_where()}: batch axes {tuple(a.shape[:-2])} of a "
                         f"and {tuple(b.shape[:-2])} of b do not broadcast") from None
    return F.broadcast_to(a, batch + a.shape[-2:]), F.broadcast_to(b, batch + b.shape[-2:])


def _unrolled(n: int, k: int = 1) -> bool:
    return n <= _small.SMALL and k <= _small.SMALL


def _tri(a, b, lower: bool, transpose_a: bool = False, unit: bool = False):
    return bind(Op.TRIANGULAR_SOLVE, a, b, lower=lower, transpose_a=transpose_a,
                unit_diagonal=unit)


def _one_hot(perm, dtype):
    """The permutation matrix P of ``perm`` (P b = b[perm])."""
    n = perm.shape[-1]
    rows = F.equal(F.reshape(perm, (*perm.shape, 1)), np.arange(n, dtype=perm.dtype))
    return F.astype(rows, dtype)


def _diagonal(a):
    """The diagonal of (..., n, n) matrices, by a strided slice."""
    n = a.shape[-1]
    return F.reshape(a, (*a.shape[:-2], n * n))[..., ::n + 1]


# --- solve, inv, det ------------------------------------------------------------------------

def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """``x`` with ``a @ x = b``: NumPy's ``linalg.solve`` (``b`` a vector
    when it is 1-D, else (..., n, k); batch axes broadcast)."""
    a = as_square(a, "solve")
    vector = F.ndim(b) == 1
    a, b = _rhs(a, b, "solve", vector)
    if a.shape[-1] == 0:
        x = F.zeros_like(b)
    elif _unrolled(a.shape[-1], b.shape[-1]):
        x = _small.solve(a, b)
    else:
        x = _solve_by_lu(a, b)
    return F.reshape(x, x.shape[:-1]) if vector else x


@custom_jvp
def _solve_by_lu(a, b):
    """``a`` \\ ``b`` (..., n, k) by one LU and two triangular solves."""
    lu, _, perm = bind(Op.LU, a)
    return _lu_solve_perm(lu, perm, b, 0)


@_solve_by_lu.defjvp
def _solve_by_lu_jvp(primals, tangents):
    """d x = a⁻¹ (d b - d a x), solved with the same factors: forward mode
    costs two triangular solves per tangent, and reverse mode transposes
    them (the cotangent of b is solved with aᵀ's factors, a's is minus its
    outer product with x), instead of differentiating the factorization."""
    (a, b), (da, db) = primals, tangents
    lu, _, perm = bind(Op.LU, a)
    x = _lu_solve_perm(lu, perm, b, 0)
    return x, _lu_solve_perm(lu, perm, db - F.matmul(da, x), 0)


def _lu_solve_perm(lu, perm, b, trans: int):
    """Solve with packed LU factors and their permutation (a[perm] = L U)."""
    p = _one_hot(perm, b.dtype)
    if trans == 0:
        return _tri(lu, _tri(lu, F.matmul(p, b), lower=True, unit=True), lower=False)
    y = _tri(lu, _tri(lu, b, lower=False, transpose_a=True), lower=True, transpose_a=True,
             unit=True)
    return F.matmul(F.swapaxes(p, -1, -2), y)


def inv(a: ArrayLike) -> Array:
    """NumPy's ``linalg.inv``, batched (a 0x0 matrix's inverse is 0x0)."""
    a = as_square(a, "inv")
    n = a.shape[-1]
    if n == 0:
        return F.zeros_like(a)
    if _unrolled(n, n):
        return _small.inv(a)
    return _solve_by_lu(a, F.broadcast_to(np.eye(n, dtype=a.dtype), a.shape))


def _lu_sign_diagonal(a):
    """(sign of the row permutation, U's diagonal) by the LU primitive."""
    lu, pivots, _ = bind(Op.LU, a)
    n = a.shape[-1]
    swaps = F.sum(F.astype(F.not_equal(pivots, np.arange(n, dtype=pivots.dtype)), _dt.int32),
                  axis=-1)
    sign = 1.0 - 2.0 * F.astype(F.remainder(swaps, 2), a.dtype)
    return sign, _diagonal(lu)


def det(a: ArrayLike) -> Array:
    """NumPy's ``linalg.det``: the product of U's diagonal, signed by the
    row interchanges (1 for a 0x0 matrix)."""
    a = as_square(a, "det")
    if a.shape[-1] == 0:
        return F.ones(a.shape[:-2], a.dtype)
    if _unrolled(a.shape[-1]):
        return _small.det(a)
    return _det_by_lu(a)


@custom_jvp
def _det_by_lu(a):
    sign, diagonal = _lu_sign_diagonal(a)
    return sign * F.prod(diagonal, axis=-1)


@_det_by_lu.defjvp
def _det_by_lu_jvp(primals, tangents):
    """d det = trace(adj(a) d a) with the adjugate read from a's LU factors,
    so a singular ``a`` gets its derivative instead of NaN. With P a = L U,
    adj(a) = sign adj(U) L⁻¹ P, and with X = L⁻¹ P d a, U' U with one
    diagonal entry u_rr replaced (``_adjugate_trace``):

    - no zero pivot (r the last): JAX's cofactor solve, u_rr = 1/(sign ·
      the other pivots' product): U'⁻¹ [det X_top; X_r] has the trace wanted;
    - one zero pivot, at r (rank n - 1, wherever the zero falls): u_rr = 1,
      and adj(U) = Q v wᵀ, Q the other pivots' product, v = U'⁻¹ e_r and
      w = U'⁻ᵀ e_r the null vectors, so the trace is Q e_rᵀ U'⁻¹ X v;
    - two or more: 0, the derivative when the rank is below n - 1."""
    (a,), (da,) = primals, tangents
    lu, _, perm = bind(Op.LU, a)
    sign, diagonal = _lu_sign_diagonal(a)
    out = sign * F.prod(diagonal, axis=-1)
    x = _tri(lu, F.matmul(_one_hot(perm, a.dtype), da), lower=True, unit=True)
    return out, _adjugate_trace(lu, sign, diagonal, out, x)


def _adjugate_trace(lu, sign, diagonal, det, x):
    """sign · trace(adj(U) x) for U the upper factor in ``lu`` (see
    ``_det_by_lu_jvp``); linear in ``x``."""
    n = lu.shape[-1]
    zero = F.equal(diagonal, 0.0)
    zeros = F.sum(F.astype(zero, _dt.int32), axis=-1)
    none, one = F.equal(zeros, 0), F.equal(zeros, 1)
    replaced = F.where(one[..., None], zero, np.arange(n) == n - 1)
    others = sign * F.prod(F.where(replaced, 1.0, diagonal), axis=-1)
    vanishes = F.equal(others, 0.0)
    scale = F.where(vanishes, np.inf, 1.0 / F.where(vanishes, 1.0, others))
    safe = F.where(zero, 1.0, diagonal)  # two zeros or more: finite, and not used
    corner = F.where(replaced, F.where(one, 1.0, scale)[..., None], safe)
    adjusted = F.where(np.eye(n, dtype=bool), F.expand_dims(corner, -2), lu)
    scaled = F.concatenate([x[..., :-1, :] * det[..., None, None], x[..., -1:, :]], axis=-2)
    solved = _tri(adjusted, F.where(none[..., None, None], scaled, x), lower=False)
    e = F.expand_dims(F.astype(replaced, lu.dtype), -1)
    null = _tri(adjusted, e, lower=False)
    rank_one = others * F.sum(e * F.matmul(solved, null), axis=(-2, -1))
    full = F.sum(_diagonal(solved), axis=-1)
    return F.where(none, full, F.where(one, rank_one, 0.0))


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


def slogdet(a: ArrayLike) -> SlogdetResult:
    """NumPy's ``linalg.slogdet``: (sign, log|det|) without overflow; a
    singular matrix gives (0, -inf), a 0x0 one (1, 0)."""
    a = as_square(a, "slogdet")
    if a.shape[-1] == 0:
        return SlogdetResult(F.ones(a.shape[:-2], a.dtype), F.zeros(a.shape[:-2], a.dtype))
    if _unrolled(a.shape[-1]):
        return SlogdetResult(*_small.slogdet(a))
    sign, diagonal = _lu_sign_diagonal(a)
    sign = sign * F.prod(F.sign(diagonal), axis=-1)
    return SlogdetResult(sign, F.sum(F.log(F.abs(diagonal)), axis=-1))


# --- Cholesky --------------------------------------------------------------------------------

def cholesky(a: ArrayLike, upper: bool = False) -> Array:
    """NumPy's ``linalg.cholesky``: the lower factor L (``upper``: Lᵀ) of a
    symmetric positive definite ``a``, from its lower triangle."""
    a = as_square(a, "cholesky")
    if a.shape[-1] == 0:
        return F.zeros_like(a)
    low = _small.cholesky(a) if _unrolled(a.shape[-1]) else bind(Op.CHOLESKY, a)
    return F.swapaxes(low, -1, -2) if upper else low


# --- SciPy's names ---------------------------------------------------------------------------

_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def _trans(trans, name: str) -> bool:
    if trans not in _TRANS:
        raise ValueError(f"{name} at {user_where()}: trans={trans!r} is not one of 0, 1, 2, "
                         f"'N', 'T', 'C'")
    return _TRANS[trans]


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     check_finite: bool = True) -> Array:
    """SciPy's ``linalg.solve_triangular``, batched over leading axes as
    JAX's: ``b`` a vector when it has one axis fewer than ``a``. Reads only
    the triangle named (and not the diagonal with ``unit_diagonal``)."""
    a = as_square(a, "solve_triangular")
    transpose = _trans(trans, "solve_triangular")
    vector = F.ndim(b) == F.ndim(a) - 1
    a, b = _rhs(a, b, "solve_triangular", vector)
    if _unrolled(a.shape[-1], b.shape[-1]):
        x = _small.solve_triangular(a, b, lower, transpose, unit_diagonal)
    else:
        x = _tri(a, b, lower, transpose, unit_diagonal)
    return F.reshape(x, x.shape[:-1]) if vector else x


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Array, bool]:
    """SciPy's ``linalg.cho_factor``: ``(c, lower)``, c the factor in the
    triangle named (zeros in the other one, which SciPy leaves arbitrary)."""
    return cholesky(a, upper=not lower), lower


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False,
              check_finite: bool = True) -> Array:
    """SciPy's ``linalg.cho_solve``: ``a x = b`` from ``cho_factor``'s result
    (two triangular solves with the one factor)."""
    c, lower = c_and_lower
    c = as_square(c, "cho_solve", "c")
    y = solve_triangular(c, b, trans=0 if lower else 1, lower=lower)
    return solve_triangular(c, y, trans=1 if lower else 0, lower=lower)


def lu_factor(a: ArrayLike, overwrite_a: bool = False,
              check_finite: bool = True) -> tuple[Array, Array]:
    """SciPy's ``linalg.lu_factor``: ``(lu, piv)``, the packed factors and
    the 0-based row interchanges (row k was swapped with ``piv[k]``)."""
    lu, pivots, _ = bind(Op.LU, as_square(a, "lu_factor"))
    return lu, pivots


def _permutation(pivots):
    """The permutation the row interchanges make, one select step per row
    (integers only: no derivative)."""
    n = pivots.shape[-1]
    index = np.arange(n, dtype=pivots.dtype)
    perm = F.broadcast_to(index, pivots.shape)
    for k in range(n):
        at_p = F.equal(index, pivots[..., k:k + 1])
        at_k = index == k
        old_k = F.broadcast_to(perm[..., k:k + 1], perm.shape)
        old_p = F.sum(F.where(at_p, perm, 0), axis=-1, keepdims=True)
        perm = F.where(at_p, old_k, F.where(at_k, F.broadcast_to(old_p, perm.shape), perm))
    return perm


def _permutation_of(pivots):
    """The permutation of ``lu_factor``'s interchanges: read from the ``lu``
    node that made them when they were recorded in this recording (binding
    ``lu`` again on its operand is that node: the recorder hash-conses), else
    rebuilt (``_permutation``)."""
    node = pivots.node if isinstance(pivots, Tracer) else None
    made_here = node is not None and pivots.builder is current_builder()
    if made_here and node.op is Op.GET and node.inputs[0].op is Op.LU:
        return bind(Op.LU, Tracer(node.inputs[0].inputs[0], pivots.builder))[2]
    return _permutation(pivots)


def lu_solve(lu_and_piv: tuple[ArrayLike, ArrayLike], b: ArrayLike, trans: int | str = 0,
             overwrite_b: bool = False, check_finite: bool = True) -> Array:
    """SciPy's ``linalg.lu_solve``: ``a x = b`` (``trans``: ``aᵀ x = b``)
    from ``lu_factor``'s result."""
    lu, pivots = lu_and_piv
    lu = as_square(lu, "lu_solve", "lu")
    transpose = _trans(trans, "lu_solve")
    vector = F.ndim(b) == F.ndim(lu) - 1
    lu_b, b = _rhs(lu, b, "lu_solve", vector)
    perm = F.broadcast_to(_permutation_of(pivots), lu_b.shape[:-1])
    x = _lu_solve_perm(lu_b, perm, b, int(transpose))
    return F.reshape(x, x.shape[:-1]) if vector else x
