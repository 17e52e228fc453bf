"""Scaled dot-product attention with hard boolean masks."""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as inp
from ..ir import DTypeError, ShapeError
from ..ir.source import user_where
from ..transforms import stop_gradient
from ..typing import Array, ArrayLike
from ._activations import softmax

MASK_DTYPE = ("mask must be bool (True where a query may attend to a key); build it with a "
              "comparison, e.g. inp.arange(T)[:, None] >= inp.arange(S)[None, :]")


def dot_product_attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: ArrayLike = None, *,
                          scale: float | None = None, is_causal: bool = False) -> Array:
    """softmax(q kᵀ · scale) v over the last two axes; leading axes (batch,
    heads) broadcast. Shapes: q (..., T, D), k (..., S, D), v (..., S, Dv)
    -> (..., T, Dv); ``scale`` defaults to 1/sqrt(D). ``mask`` (bool,
    broadcast to (..., T, S)) keeps the keys where it is True; a query whose
    keys are all masked gets a zero output and zero gradients, never NaN.
    ``is_causal``: query i also ignores keys j > i (``tril``, as jax.nn).
    The products run through ``dot_general`` (NumPy's BLAS matmul on the CPU).
    """
    depth = inp.shape(q)[-1]
    if inp.shape(k)[-1] != depth or inp.shape(k)[-2] != inp.shape(v)[-2]:
        raise ShapeError(f"dot_product_attention at {user_where()}: q {inp.shape(q)}, k "
                         f"{inp.shape(k)} and v {inp.shape(v)} do not fit (..., T, D), "
                         f"(..., S, D), (..., S, Dv)")
    scale = 1.0 / math.sqrt(depth) if scale is None else scale
    logits = inp.matmul(q, inp.swapaxes(k, -1, -2)) * scale
    if is_causal:
        causal = np.tril(np.ones(inp.shape(logits)[-2:], dtype=bool))
        mask = causal if mask is None else inp.logical_and(_bool_mask(mask, logits), causal)
    weights = softmax(logits) if mask is None else _masked_softmax(logits, mask)
    return inp.matmul(weights, v)


def _bool_mask(mask, logits):
    if inp.asarray(mask).dtype != inp.bool_:
        raise DTypeError(f"dot_product_attention at {user_where()}: {MASK_DTYPE}")
    shape, wanted = inp.shape(mask), inp.shape(logits)
    if not _broadcasts(shape, wanted):
        raise ShapeError(f"dot_product_attention at {user_where()}: mask {shape} does not "
                         f"broadcast to the logits' (..., T, S) = {wanted}; give one entry per "
                         f"query and key (size-1 axes broadcast)")
    return mask


def _broadcasts(shape, wanted) -> bool:
    try:
        return np.broadcast_shapes(shape, wanted) == tuple(wanted)
    except ValueError:
        return False


def _masked_softmax(logits, mask):
    """softmax over the kept keys. Masked entries never reach ``exp`` (it
    sees 0 there) and a row with no kept key divides 0 by 1."""
    mask = _bool_mask(mask, logits)
    peak = inp.max(inp.where(mask, logits, -inp.inf), -1, keepdims=True)
    shift = stop_gradient(inp.where(inp.isfinite(peak), peak, 0.0))
    kept = inp.where(mask, inp.exp(inp.where(mask, logits - shift, 0.0)), 0.0)
    total = inp.sum(kept, -1, keepdims=True)
    return kept / inp.where(total > 0, total, 1.0)
