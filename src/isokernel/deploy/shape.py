"""The memory shape of a model per strategy: bytes(P) = fixed + per_element·P.

Memory is affine in the pixel count P for every strategy, and both terms
fall out of the recorded graph and the strategy's memory model (the
``memory`` of its ``StrategySpec``; the built-in strategies' are below):

- *eager* (``reference``, ``cuda-eager``, ``cuda-fused``): the peak of
  simultaneously live buffers when the graph runs in tape order, each buffer
  freed after its last consumer — the walk ``backends.liveness`` already
  does (maxLiveNodes × bytes). The walk is taken at P and again with every
  pixel-axis buffer weighed at 2P; the difference is the per-element term.
  This is a **lower bound**: it assumes a buffer is gone the moment its last
  consumer ran and that NumPy makes no temporaries of its own, and a driver
  that loops a step holds its carry across iterations. ``cuda-fused`` only
  removes intermediates, so the eager shape bounds it from above.
- *fused* (``native``, ``cuda-megakernel``): every intermediate lives in a
  register, so only the inputs and outputs scale with P; constants (tables)
  are charged once.
- *tiled* (``threads``): the caller's inputs and preallocated outputs, plus
  per worker the eager working set of one cache-sized tile, sized by the
  memory model's ``tile_rows`` (the strategy's own rule; a fixed term).

``threads`` and ``native`` add their *marshaling columns*: one contiguous
copy of each pixel input, which they make when the caller's array is strided
or of another byte order; it is charged always, so a strided caller cannot
overrun a budget sized on the static shape.

A buffer scales with P when its leading dimension is P (``pixel_count``: the
largest leading dimension of the inputs); everything else is fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backends import get_strategy, static_liveness
from ..backends.liveness import format_bytes
from ..codegen.pixel import pixel_count
from ..ir import Graph, Node


@dataclass(frozen=True)
class MemoryShape:
    """bytes(P) = fixed + per_element·P for one strategy, with its basis."""

    strategy: str
    fixed: int
    per_element: int
    pixels: int | None  # the P the graph was recorded at (None: no pixel axis)
    max_live: int | None  # maxLiveNodes of the eager walk, where one was taken
    basis: str
    scratch: int = 0  # the part of ``fixed`` that is the workers' tile scratch (tiled)

    def bytes(self, pixels: int | None = None) -> int:
        p = self.pixels if pixels is None else pixels
        return self.fixed + self.per_element * (p or 0)

    def formula(self) -> str:
        return f"{format_bytes(self.fixed)} + {self.per_element} B·P"

    def __str__(self) -> str:
        at = f" = {format_bytes(self.bytes())} at P={self.pixels}" if self.pixels else ""
        return f"bytes(P) = {self.formula()}{at}; {self.basis}"


class _Rows:
    """Per-buffer split into the part that scales with P and the rest."""

    def __init__(self, graph: Graph):
        self.pixels = pixel_count(graph) or None

    def per_row(self, node: Node) -> int:
        """Bytes per pixel of the node's results that have the pixel axis."""
        if not self.pixels:
            return 0
        return sum(a.nbytes // self.pixels for a in node.avals
                   if a.shape[:1] == (self.pixels,))

    def fixed(self, node: Node) -> int:
        return node.nbytes - self.per_row(node) * (self.pixels or 0)

    def split(self, nodes) -> tuple[int, int]:
        return sum(self.fixed(n) for n in nodes), sum(self.per_row(n) for n in nodes)


def _eager(graph: Graph, rows: _Rows) -> tuple[int, int, int]:
    """(fixed, per_element, maxLiveNodes) of the tape-order live-buffer peak."""
    at_p = static_liveness(graph)
    if not rows.pixels:
        return at_p.peak_bytes + at_p.const_bytes, 0, at_p.peak_buffers
    at_2p = static_liveness(graph, nbytes=lambda n: n.nbytes + rows.per_row(n) * rows.pixels)
    per = (at_2p.peak_bytes - at_p.peak_bytes) // rows.pixels
    fixed = at_p.peak_bytes - per * rows.pixels + at_p.const_bytes
    return fixed, per, at_p.peak_buffers


def _io(graph: Graph, rows: _Rows) -> tuple[int, int]:
    ends = {*graph.inputs, *graph.outputs}
    fixed, per = rows.split(ends)
    return fixed + sum(n.nbytes for n in graph.consts()), per


def _marshal(graph: Graph, rows: _Rows) -> int:
    return sum(rows.per_row(x) for x in graph.inputs)


def memory_shape(graph: Graph, strategy: str, workers: int = 1) -> MemoryShape:
    """The memory shape of ``graph`` under ``strategy`` by its memory model
    (``workers``: threads running tiles at once, for the tiled model)."""
    model = get_strategy(strategy).memory
    rows = _Rows(graph)
    eager_fixed, eager_per, live = _eager(graph, rows)
    scratch = 0
    if model.kind == "eager":
        fixed, per = eager_fixed, eager_per
        basis = f"eager peak of {live} live buffers in tape order (a lower bound)"
    else:
        fixed, per = _io(graph, rows)
        basis = "fused: inputs + outputs, constants once"
        if model.kind == "tiled":
            per_row = max(eager_per - _marshal(graph, rows), 0)
            tile = model.tile_rows(per_row, workers)
            scratch = workers * tile * per_row
            fixed += scratch
            basis = (f"tiled: inputs + outputs + {workers} worker(s) × {tile}-row tile "
                     f"scratch {format_bytes(scratch)}")
    if model.marshal:
        per += _marshal(graph, rows)
        basis += " + marshaling columns (a copy of each pixel input)"
    return MemoryShape(strategy, fixed, per, rows.pixels, live, basis, scratch)


def pixel_io_bytes(graph: Graph) -> tuple[int, int]:
    """Bytes per pixel row of the pixel inputs and of the pixel outputs."""
    rows = _Rows(graph)
    return (sum(rows.per_row(x) for x in graph.inputs),
            sum(rows.per_row(x) for x in set(graph.outputs)))
