"""Per-pixel functions mapped over a scene: the retrieval's iterative stages
are written for one pixel and mapped over the pixels by ``isokernel.vmap``.

A ``while_loop`` inside the mapped function becomes lane-wise: every pixel
runs until its own convergence test fails and then keeps its values, bit
for bit, while the others go on (``docs/control_flow.md``).
"""

from __future__ import annotations

import numpy as np

from ... import numpy as inp
from ...ir.pytree import tree_flatten, tree_map, tree_unflatten
from ...transforms import vmap


def per_pixel(fn, *args):
    """``fn`` of one pixel applied to every pixel. Each leaf of ``args`` (a
    pytree) with a shape holds one value per pixel; the pixels may form any
    shape, and leaves with fewer axes broadcast against it. Scalars are
    shared by every pixel. With no leaf that has a shape, ``fn`` runs on the
    one pixel given. Results take the pixels' shape."""
    leaves, tree = tree_flatten(args)
    shapes = [np.shape(x) for x in leaves if np.ndim(x) > 0]
    if not shapes:
        return fn(*args)
    shape = np.broadcast_shapes(*shapes)
    flat = [x if np.ndim(x) == 0 else _as_rows(x, shape) for x in leaves]
    axes = tuple(None if np.ndim(x) == 0 else 0 for x in leaves)

    def one_pixel(*values):
        return fn(*tree_unflatten(tree, values))
    one_pixel.__name__ = fn.__name__
    out = vmap(one_pixel, in_axes=axes)(*flat)
    if len(shape) == 1:
        return out
    return tree_map(lambda y: inp.reshape(y, shape), out)


def _as_rows(x, shape: tuple):
    """``x`` broadcast to the pixels' shape, as one axis of pixels."""
    if np.shape(x) != shape:
        x = inp.broadcast_to(x, shape)
    return x if len(shape) == 1 else inp.reshape(x, (-1,))
