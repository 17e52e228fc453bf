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
- *fused* (``native``, ``cuda-megakernel``): the graph runs as a partition
  (``codegen.pixel``) of row regions the C emitter accepts and whole ops
  between them. A region keeps its intermediates in registers and writes only
  its outputs; the whole ops run one by one as the eager ones do, each value
  freed after its last reader (``backends.liveness.staged_liveness``). A
  graph that is one region costs its inputs and outputs; one with no row
  region (its pixels built from a small input) costs what ``reference``
  does. ``native`` also copies each strided view a region reads.
- *tiled* (``threads``): the same staged walk over its own partition (every
  row-local op in a region), plus per worker the eager working set of one
  cache-sized tile, sized by the memory model's ``tile_rows`` (the
  strategy's own rule; a fixed term).
- *arena* (``native-whole``, and ``native`` on a graph it compiles as one C
  program): every value in an arena laid out by liveness (the eager walk),
  and the outputs copied out of it into the caller's arrays.

``threads`` and ``native`` add their *marshaling columns*: one contiguous
copy of each pixel input, which they make when the caller's array is strided
or of another byte order; it is charged always, so a strided caller cannot
overrun a budget sized on the static shape.

A buffer scales with P when its leading dimension is P (``pixel_count``: the
largest leading dimension of the inputs); everything else is fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import codegen
from ..backends import get_strategy, static_liveness
from ..backends.liveness import Liveness, format_bytes, staged_liveness
from ..codegen.pixel import partition, pixel_count
from ..codegen.whole import arena_bytes
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


def _affine(walk, rows: _Rows) -> tuple[int, int, int]:
    """(fixed, per_element, maxLiveNodes) of a live-buffer walk: ``walk(nbytes)``
    taken at P and again with every pixel-axis buffer weighed at 2P."""
    at_p: Liveness = walk(None)
    if not rows.pixels:
        return at_p.peak_bytes + at_p.const_bytes, 0, at_p.peak_buffers
    at_2p = walk(lambda n: n.nbytes + rows.per_row(n) * rows.pixels)
    per = (at_2p.peak_bytes - at_p.peak_bytes) // rows.pixels
    fixed = at_p.peak_bytes - per * rows.pixels + at_p.const_bytes
    return fixed, per, at_p.peak_buffers


def _eager(graph: Graph, rows: _Rows) -> tuple[int, int, int]:
    """The tape-order live-buffer peak."""
    return _affine(lambda nbytes: static_liveness(graph, nbytes), rows)


def _staged(graph: Graph, rows: _Rows, kind: str, copies: bool) -> tuple[int, int, int]:
    """The peak of a staged run: ``fused`` partitions by the C emitter's
    acceptance, ``tiled`` takes every row-local op into its regions."""
    accept = codegen.supports if kind == "fused" else (lambda node, modes: True)
    part = partition(graph, accept=accept)
    return _affine(lambda nbytes: staged_liveness(part, nbytes, copies), rows)


def _arena(graph: Graph, rows: _Rows, fixed: int, per: int, basis: str) -> tuple:
    """The arena model: the whole emitter's own layout (``codegen.whole``:
    values by liveness, fused elementwise runs without buffers, outputs
    written in place) where it can write the graph, split between the fixed
    and per-pixel terms in the eager walk's proportion, and the graph's
    constants; else the eager walk. Plus the outputs."""
    out_fixed, out_per = _outputs(graph, rows)
    laid_out = arena_bytes(graph)
    if laid_out is not None:
        total = fixed + per * (rows.pixels or 0)
        per = laid_out * per // total if total and rows.pixels else 0
        fixed = laid_out - per * (rows.pixels or 0) + sum(c.nbytes for c in graph.consts())
        basis = (f"arena: the whole-program emitter's layout, {format_bytes(laid_out)} "
                 f"(values by liveness, fused elementwise runs without buffers), + the "
                 f"outputs")
    return fixed + out_fixed, per + out_per, basis


def _outputs(graph: Graph, rows: _Rows) -> tuple[int, int]:
    return rows.split(dict.fromkeys(graph.outputs))


def _marshal(graph: Graph, rows: _Rows) -> int:
    return sum(rows.per_row(x) for x in graph.inputs)


BASIS = {
    "eager": "eager peak of {live} live buffers in tape order (a lower bound)",
    "fused": ("staged: row regions fused (intermediates in registers), whole ops' values "
              "freed after their last reader; peak {live} live buffers"),
    "tiled": ("staged: row regions in tiles, whole ops' values freed after their last "
              "reader; peak {live} live buffers"),
    "arena": ("arena: every value laid out by liveness, peak {live} live buffers, "
              "+ the outputs copied out"),
}


def memory_shape(graph: Graph, strategy: str, workers: int = 1) -> MemoryShape:
    """The memory shape of ``graph`` under ``strategy`` by its memory model
    (``workers``: threads running tiles at once, for the tiled model).
    ``graph`` as recorded: the shape is that of the graph the strategy runs,
    ``prepare(graph)`` (``cuda-fused`` fuses; the others run it as it is)."""
    spec = get_strategy(strategy)
    model = spec.memory
    graph = spec.prepare(graph)
    rows = _Rows(graph)
    kind = model.kind_for(graph)
    if kind in ("fused", "tiled"):
        copies = kind == "fused" and model.marshal
        fixed, per, live = _staged(graph, rows, kind, copies)
    else:  # eager, or an arena holding the eager walk's values
        fixed, per, live = _eager(graph, rows)
    basis = BASIS[kind].format(live=live)
    scratch = 0
    if kind == "arena":
        fixed, per, basis = _arena(graph, rows, fixed, per, basis)
    if kind == "tiled":
        per_row = max(_eager(graph, rows)[1] - _marshal(graph, rows), 0)
        tile = model.tile_rows(per_row, workers)
        scratch = workers * tile * per_row
        fixed += scratch
        basis += f" + {workers} worker(s) × {tile}-row tile scratch {format_bytes(scratch)}"
    if model.marshal:
        per += _marshal(graph, rows)
        basis += " + marshaling columns (a copy of each pixel input)"
    return MemoryShape(strategy, fixed, per, rows.pixels, live, basis, scratch)


def pixel_io_bytes(graph: Graph) -> tuple[int, int]:
    """Bytes per pixel row of the pixel inputs and of the pixel outputs."""
    rows = _Rows(graph)
    return (sum(rows.per_row(x) for x in graph.inputs),
            sum(rows.per_row(x) for x in set(graph.outputs)))
