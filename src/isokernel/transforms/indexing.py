"""The derivative and batching rules of data-dependent indexing (``gather``
and ``scatter``, ``ops.INDEXING``), of ``sort`` and of ``fft``, registered
into the transforms' tables.

- ``fft`` is linear: its tangent is the transform of the tangent; its
  transposes are JAX's: a complex transform's is itself, ``rfft``'s the real
  part of the full transform of the cotangent padded with zeros, ``irfft``'s
  the scaled, masked and conjugated ``rfft`` of the cotangent (the
  Hermitian half counted twice).

- ``sort`` carries the positions along (an iota sorted with the keys) and
  moves each tangent by that permutation: a gather along the axis.

- ``gather(x, idx)`` is linear in ``x``: its tangent is the gather of the
  tangent, its transpose a scatter-add of the cotangent into zeros (each
  row's cotangents summed in the indices' order).
- ``scatter`` with ``set`` or ``add`` is linear in ``(x, u)`` jointly. The
  transpose of ``add`` gives ``x`` the cotangent and ``u`` its gather; that
  of ``set`` gives ``x`` the cotangent with the written rows zeroed and each
  update the cotangent of its row only if it was the last write there
  (``_last_writes``).
- ``mul`` is linear in ``x`` (the tangent: the same products of the
  updates); its derivative in the updates is refused, as JAX refuses it
  without unique indices.
- ``min``/``max``: JAX's rule: the result's tangent is shared equally among
  the values that reach it (the operand's row, where kept, and every update
  equal to it).

Batching moves the batch to axis 0 and, where both the operand and the
indices carry it, flattens (batch, row) into one axis with the indices
offset by ``b * n``: one gather or scatter for the whole batch.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import DifferentiationError, Op
from ..ir.source import user_where
from ..record import bind
from ..record import frontend as F
from ..record.indexing import take_along_axis
from .graphs import zeros
from .jvp import JVP
from .transpose import TRANSPOSABLE, TRANSPOSE, Lin
from .vmap import BATCH, batch_size, batched


def _gather(x, idx):
    return bind(Op.GATHER, x, idx)


def _scatter(x, idx, u, combine: str):
    return bind(Op.SCATTER, x, idx, u, combine=combine)


def _rows_like(mask, u):
    """A mask over the indices, broadcast over the rows of ``u``."""
    extra = u.ndim - mask.ndim
    return F.broadcast_to(F.reshape(mask, mask.shape + (1,) * extra), u.shape)


def _last_writes(idx, n: int):
    """Whether each index position is the last write to its row (bool, the
    indices' shape)."""
    flat = F.reshape(idx, (-1,))
    positions = F.arange(flat.shape[0], dtype=np.int64)
    last = _scatter(F.full((n,), -1, np.int64), F.astype(flat, np.int64), positions, "max")
    return F.reshape(F.equal(_gather(last, flat), positions), idx.shape)


# --- forward mode -------------------------------------------------------------------------

def _scatter_jvp(operands, tangents, *, combine):
    x, idx, u = operands
    tx, _, tu = tangents
    out = _scatter(x, idx, u, combine)
    if tx is None and tu is None:
        return out, None
    if combine in ("set", "add"):
        tx = zeros(x.aval) if tx is None else tx
        tu = zeros(u.aval) if tu is None else tu
        return out, _scatter(tx, idx, tu, combine)
    if combine == "mul":
        if tu is not None:
            raise DifferentiationError(
                f"scatter multiply at {user_where()}: its derivative with respect to the "
                f"updates is not implemented (repeated indices multiply updates together); "
                f"take the logarithm and scatter-add, or differentiate the operand only")
        return out, _scatter(tx, idx, u, "mul")
    # min and max: the values that reach the result share its tangent equally
    reached = F.equal(u, _gather(out, idx))
    kept = F.equal(x, out)
    one, zero = F.ones((), x.dtype), F.zeros((), x.dtype)
    count = _scatter(zeros(x.aval), idx, F.where(reached, one, zero), "add")
    share = count + F.where(kept, one, zero)
    share = F.where(F.equal(share, zero), one, share)
    total = zeros(x.aval) if tx is None else F.where(kept, tx, zero)
    if tu is not None:
        total = total + _scatter(zeros(x.aval), idx, F.where(reached, tu, zero), "add")
    return out, total / share


JVP[Op.GATHER] = (lambda t, x, idx, *, out: _gather(t, idx), None)
JVP[Op.SCATTER] = _scatter_jvp


# --- transposes ---------------------------------------------------------------------------

def _gather_transpose(ct, x, idx):
    return (_scatter(zeros(x.aval), idx, ct, "add"), None)


def _scatter_transpose(ct, x, idx, u, *, combine):
    lin_x, lin_u = isinstance(x, Lin), isinstance(u, Lin)
    if combine == "add":
        return (ct if lin_x else None, None, _gather(ct, idx) if lin_u else None)
    if combine == "set":
        ct_x = _scatter(ct, idx, zeros(u.aval), "set") if lin_x else None
        ct_u = None
        if lin_u:
            last = _rows_like(_last_writes(idx, x.shape[0]), u)
            ct_u = F.where(last, _gather(ct, idx), F.zeros((), ct.dtype))
        return (ct_x, None, ct_u)
    if combine == "mul" and not lin_u:
        return (_scatter(ct, idx, u, "mul"), None, None)
    raise DifferentiationError(f"scatter {combine} is not linear in its updates and cannot "
                               f"be transposed")


TRANSPOSE[Op.GATHER] = _gather_transpose
TRANSPOSE[Op.SCATTER] = _scatter_transpose
TRANSPOSABLE.update({Op.GATHER, Op.SCATTER})


# --- batching -----------------------------------------------------------------------------

def _flat_batch(x, idx):
    """(x as (B*n, ...), idx offset by b*n): a batched operand and batched
    indices as one gather or scatter."""
    size, n = x.shape[0], x.shape[1]
    offsets = F.reshape(F.arange(size, dtype=idx.dtype) * n, (size,) + (1,) * (idx.ndim - 1))
    return F.reshape(x, (size * n,) + x.shape[2:]), idx + offsets


def _gather_batch(args, bdims):
    x, idx = args
    dx, di = bdims
    if di is None:  # the rows carry the batch: gather from (n, B, ...), batch to the front
        out = _gather(F.moveaxis(x, 0, 1), idx)
        return F.moveaxis(out, idx.ndim, 0), 0
    if dx is None:  # the indices carry it: the result's axis 0
        return _gather(x, idx), 0
    flat, offset = _flat_batch(x, idx)
    return _gather(flat, offset), 0


def _scatter_batch(args, bdims, *, combine):
    x, idx, u = args
    size = batch_size(args, bdims)
    x, idx, u = (batched(v, d, size) for v, d in zip(args, bdims))
    flat, offset = _flat_batch(x, idx)
    return F.reshape(_scatter(flat, offset, u, combine), x.shape), 0


BATCH[Op.GATHER] = _gather_batch
BATCH[Op.SCATTER] = _scatter_batch


# --- sort ---------------------------------------------------------------------------------

def _iota_along(shape: tuple, axis: int):
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return F.broadcast_to(np.arange(shape[axis], dtype=np.int64).reshape(view), shape)


def _sort_jvp(operands, tangents, *, axis, num_keys):
    if all(t is None for t in tangents):
        return bind(Op.SORT, *operands, axis=axis, num_keys=num_keys), (None,) * len(operands)
    shape = operands[0].shape
    *outs, order = bind(Op.SORT, *operands, _iota_along(shape, axis), axis=axis,
                        num_keys=num_keys)
    moved = tuple(None if t is None else take_along_axis(t, order, axis, mode="clip")
                  for t in tangents)
    return tuple(outs), moved


def _sort_batch(args, bdims, *, axis, num_keys):
    size = batch_size(args, bdims)
    out = bind(Op.SORT, *(batched(x, d, size) for x, d in zip(args, bdims)), axis=axis + 1,
               num_keys=num_keys)
    return out, (0,) * len(out)


JVP[Op.SORT] = _sort_jvp
BATCH[Op.SORT] = _sort_batch


# --- fft ----------------------------------------------------------------------------------

def _fft(x, kind: str, lengths: tuple):
    return bind(Op.FFT, x, kind=kind, lengths=tuple(lengths))


def _fft_transpose(ct, x, *, kind, lengths):
    if kind in ("fft", "ifft"):
        return (_fft(ct, kind, lengths),)
    n = lengths[-1]
    if kind == "rfft":  # slice of the full transform of a real value: pad, fft, real part
        widths = [(0, 0)] * (ct.ndim - 1) + [(0, n - (n // 2 + 1))]
        full = F.pad(ct, widths)
        return (bind(Op.REAL, _fft(full, "fft", lengths)),)
    spectrum = _fft(ct, "rfft", lengths)  # irfft: JAX's scaled, masked, conjugated rfft
    m = spectrum.shape[-1]
    odd = n % 2
    mask = np.concatenate([[1.0], np.full(m - 2 + odd, 2.0), np.full(1 - odd, 1.0)])
    scale = np.asarray(mask / math.prod(lengths), spectrum.dtype)
    return (bind(Op.CONJ, F.multiply(spectrum, scale)),)


JVP[Op.FFT] = (lambda t, x, *, out, kind, lengths: _fft(t, kind, lengths),)
TRANSPOSE[Op.FFT] = _fft_transpose
TRANSPOSABLE.add(Op.FFT)
BATCH[Op.FFT] = lambda args, bdims, **attrs: (bind(Op.FFT, args[0], **attrs), 0)
