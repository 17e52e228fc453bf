"""The ``threads`` strategy: the reference rules over contiguous pixel slices
and cache-sized tiles, on a thread pool. Contract: bit-identical to
``reference``.

Each row region of the graph (``pixel.partition``) is run over slices of
the pixel axis, one task per slice; a task walks its slice in tiles whose
working set fits in the L2 cache, and evaluates every node of the region on
the tile with the NumPy rule of the reference, written into preallocated
scratch, so no tile allocates an array. Ops that are not row-local run
whole, by the reference rules, between the regions.

A tile runs one of two ways. Where every node of the region is one call of
NumPy's strided inner loop (the loop the ufunc call itself makes, ``loops``)
or an exact select, cast or copy, a slice is one ctypes call of the tile
driver (``codegen.driver``), which makes those calls from C without the GIL,
so workers scale with the cores. Otherwise (reductions, pads, table
look-ups, layouts NumPy iterates differently, no C compiler, a NumPy
without ``ufunc._get_strided_loop``) the tile is generated straight-line
Python calling the same ufuncs with ``out=`` (``INTO``); NumPy releases the
GIL inside each loop, so tiles of different tasks still overlap.

The pool, the worker count and the slicing are shared with ``native``
(``pool``), and so is ``run_tasks``: a call that fails or is interrupted
(Ctrl-C) stops its tasks after their current tile and waits for them before
it raises, so no worker writes into a buffer the caller has let go. The
staged run of whole ops and regions is ``staged.StagedExecutable``, also
shared with ``native``. Tiles are never listed:
a slice's tiles are derived from its bounds (``loops.tiles``), so the
bookkeeping does not grow with the pixel count.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from ...codegen.pixel import ROWS, WHOLE, RowRegion, partition
from ...ir import EVAL, Graph, Node, Op
from ...ir.ops import CONTROL, INDEXING, LINALG, SORTING, SPECTRAL
from ..capsules import Capsule, register, registered
from ..liveness import VIEW_OPS
from ..planning import Profile
from ..strategies import MemoryModel, StrategySpec, register_strategy
from . import loops
from .numpy_rules import NUMPY_PROVIDER
from .pool import SLICE_ROWS, in_worker, resolve_workers, run_tasks, split, stop_flag
from .reference import ReferenceExecutable
from .staged import StagedExecutable, StagedPlan, stage_value, staged_plan

PROVIDER = "numpy-tiles"
PROVIDER_LOOPS = "numpy-loops"
PROVIDERS = (PROVIDER_LOOPS, PROVIDER)
DEFAULT_L2_BYTES = 1 << 20
MIN_TILE_ROWS = 16


# --- the reference rules, writing into a given buffer -------------------------------------

def _cast_into(x, *, out, dtype):
    np.copyto(out, x, casting="unsafe")
    return out


def _select_into(pred, x, y, *, out):
    np.copyto(out, y)
    np.copyto(out, x, where=pred)
    return out


def _reduce_into(ufunc, typed: bool):
    def rule(x, *, out, axes):
        if typed:
            return ufunc.reduce(x, axis=axes, dtype=x.dtype, out=out)
        return ufunc.reduce(x, axis=axes, out=out)
    return rule


def _via_eval(op: Op):
    """EVAL's own function, its result copied into ``out``: for the ops whose
    reference meaning is a short NumPy composition rather than one ufunc
    (ldexp, logb, table_lookup). A tile-sized temporary, in cache."""
    def rule(*xs, out, **attrs):
        np.copyto(out, EVAL[op](*xs, **attrs))
        return out
    return rule


def _pad_into(x, value, *, out, lo, hi, interior):
    out[...] = value
    spots = tuple(slice(a, a + (d - 1) * (i + 1) + 1, i + 1)
                  for a, d, i in zip(lo, np.shape(x), interior))
    out[spots] = x
    return out


INTO = {op: rule for op, rule in EVAL.items() if isinstance(rule, np.ufunc)}
INTO.update({
    Op.CAST: _cast_into,
    Op.SELECT: _select_into,
    Op.REDUCE_SUM: _reduce_into(np.add, typed=True),
    Op.REDUCE_PROD: _reduce_into(np.multiply, typed=True),
    Op.REDUCE_MAX: _reduce_into(np.maximum, typed=False),
    Op.REDUCE_MIN: _reduce_into(np.minimum, typed=False),
    Op.PAD: _pad_into,
    Op.CONCATENATE: lambda *xs, out, axis: np.concatenate(xs, axis=axis, out=out),
    **{op: _via_eval(op) for op in (Op.LDEXP, Op.LOGB, Op.TABLE_LOOKUP, Op.REAL, Op.IMAG,
                                     Op.COMPLEX)},
})
"""For every op a tile computes into scratch: the reference's NumPy rule with
an ``out`` buffer. The ufunc ops are EVAL's own ufuncs; the others restate
EVAL's meaning (``np.where`` as two ``copyto``; ``np.sum`` as ``add.reduce``)
or run EVAL's function and copy (ldexp, logb, table look-ups), and
``tests/test_threads.py`` checks each against EVAL bit for bit. View ops
(broadcast, reshape, transpose, slice, rev) use EVAL itself: they allocate
no data."""

INLINE_ROWS = 1 << 15
"""Calls of at most this many pixels run on the calling thread as one tile
(``ThreadsExecutable.call_flat``): below it, the pool's hand-over and the tile
bookkeeping cost more than the other cores gain. ``benchmarks/dispatch.py``
measures the crossover. On the 2-core test machine (tau-omega, float64) one
tile took 0.86 ms at 2^15 pixels against 1.5 ms on the pool, and the pool
first won (by 10 %) at 2^17; the threshold stays at 2^15 because with more
cores the pool pays at smaller sizes."""
INLINE_TEXT = ("calls of <= {rows} pixels (and at most one tile of an asked tile_rows) run on "
               "the calling thread as one tile, by the reference's NumPy calls (no pool)")

NOT_IN_TILES = frozenset({Op.INPUT, Op.CONST, Op.DOT_GENERAL, Op.FUSED, Op.GET}) | CONTROL \
    | LINALG | INDEXING | SORTING | SPECTRAL
"""The ops without a tile rule (``INTO``): leaves; the matrix product and the
dense factorizations and solves (``ops.LINALG``) and data-dependent
indexing (``ops.INDEXING``: an index may name any row), sorting and
Fourier transforms, which always run whole:
BLAS may block a row slice differently from the full matrix; fused forms,
which this strategy has no kernels for (it never fuses: its graph holds the
composition, which it tiles); and control flow with the gets that read its
results: row-local control flow runs in the tiles by its EVAL rule
(``IN_TILES_BY_EVAL``), other control flow (the reverse passes of a while
loop, a loop whose body reads across pixels) runs whole by its EVAL rule."""

IN_TILES_BY_EVAL = frozenset({Op.COND, Op.WHILE, Op.SCAN, Op.CHECKPOINT, Op.GET})
"""Row-local control flow (``pixel.region_rows``) and its gets: a tile calls
the EVAL rule itself on the tile's rows, the bodies resized to the tile
(``pixel.block_attrs``), and the results are fresh arrays (no ``out=``, no
scratch). A lane of a lane-wise ``while`` runs until its own predicate
fails whatever tile it is in, so a tile's rows get the reference's bits."""
NO_SCRATCH = VIEW_OPS | IN_TILES_BY_EVAL


# --- tile sizes -----------------------------------------------------------------------------

def default_tile_rows(row_bytes: int, workers: int, gil_free: bool | None = None) -> int:
    """Rows per tile for a tile whose scratch costs ``row_bytes`` per row;
    ``gil_free=None``: for a region on the path this process can run."""
    if gil_free is None:
        gil_free = loops.unavailable_reason() is None
    return max(MIN_TILE_ROWS, tile_budget(workers, gil_free) // max(1, row_bytes))


def tile_budget(workers: int, gil_free: bool = False) -> int:
    """Bytes of a tile's working set. On the GIL-free driver, or with one
    worker: half the L2 cache, so every op streams from L2 (1/8 to 1.5 L2s
    measured on tau-omega at 1e7 pixels: half is best or within noise).
    Python tiles with several workers: one and a half L2s. There each ufunc
    call is a point where a worker hands the GIL over, and on a busy 2-core
    machine a wake-up costs tens of microseconds; larger tiles make those
    hand-overs rarer, which gains more than L2 residency loses (2 workers:
    half an L2 scaled 1.35x over one worker, 1.5 L2s 1.75-1.9x)."""
    if gil_free or workers == 1:
        return l2_bytes() // 2
    return 3 * l2_bytes() // 2


def l2_bytes() -> int:
    path = "/sys/devices/system/cpu/cpu0/cache/index2/size"
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return DEFAULT_L2_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        return int(text.rstrip("KMG")) * scale
    except ValueError:
        return DEFAULT_L2_BYTES


# --- one region: tiles evaluated into scratch ---------------------------------------------

class _Slots:
    """Scratch buffers of a region, reused by liveness. A node's result takes
    the buffer of an operand that dies at this node when the op is an
    elementwise ufunc (exact in-place overlap is safe for ufuncs and halves
    the cache traffic), else a free buffer of its dtype and row shape; a
    buffer returns to the pool after its last use (views keep their base
    alive). Region outputs are written straight into the caller's arrays."""

    def __init__(self, region: RowRegion, hoisted: set):
        self.assignment: dict[Node, int] = {}
        self.kinds: list[tuple[np.dtype, tuple[int, ...]]] = []
        storage = _storage(region)
        dying = _last_use(region, storage)
        last = {owner: i for i, owners in dying.items() for owner in owners}
        free: dict[tuple, list[int]] = {}
        outputs = set(region.outputs)
        for i, node in enumerate(region.nodes):
            if node.op not in NO_SCRATCH and node not in outputs and node not in hoisted:
                self.assignment[node] = self._place(node, i, last, free)
            for dead in dying.get(i, ()):
                slot = self.assignment.get(dead)
                if slot is not None and slot != self.assignment.get(node):
                    free.setdefault(self.kinds[slot], []).append(slot)

    def _place(self, node: Node, i: int, last: dict, free: dict) -> int:
        kind = (node.dtype, node.shape[1:])
        if isinstance(INTO[node.op], np.ufunc):
            for x in node.inputs:
                slot = self.assignment.get(x)
                if slot is not None and last.get(x) == i and self.kinds[slot] == kind:
                    return slot
        pool = free.setdefault(kind, [])
        if pool:
            return pool.pop()
        self.kinds.append(kind)
        return len(self.kinds) - 1

    def row_bytes(self) -> int:
        return sum(d.itemsize * math.prod(s) for d, s in self.kinds)

    def allocate(self, rows: int, shared: SharedScratch) -> list[np.ndarray]:
        """The buffers for tiles of ``rows`` rows, carved out of this
        thread's buffer of ``shared``."""
        return shared.carve(self.kinds, rows)

    def nbytes(self, rows: int) -> int:
        """Bytes ``allocate(rows)`` carves, alignment included."""
        return _carved(self.kinds, rows)[1]


SCRATCH_ALIGN = 64  # bytes: every carved buffer starts on a cache line


def _carved(kinds: list, rows: int) -> tuple[list[int], int]:
    """The offset of each buffer of ``kinds`` for ``rows`` rows, and the end."""
    offsets, end = [], 0
    for dtype, shape in kinds:
        end = -(-end // SCRATCH_ALIGN) * SCRATCH_ALIGN
        offsets.append(end)
        end += rows * math.prod(shape) * np.dtype(dtype).itemsize
    return offsets, end


class SharedScratch(threading.local):
    """One scratch buffer per thread, shared by every region of a plan: the
    regions run one after another and a thread runs one tile at a time, so
    each region's buffers are views of the same bytes, and a worker holds
    the largest region's scratch, not the sum over the regions (20 regions
    held 20 L2-sized buffers per worker before). ``size``: the largest
    region's need, known when the plan is made."""

    def __init__(self, size: int = 0):  # run again in each thread: its own buffer
        self.size = size
        self.buffer: np.ndarray | None = None

    def carve(self, kinds: list, rows: int) -> list[np.ndarray]:
        offsets, end = _carved(kinds, rows)
        need = max(end, self.size) + SCRATCH_ALIGN
        if self.buffer is None or self.buffer.size < need:
            self.buffer = np.empty(need, np.uint8)
        base = -self.buffer.ctypes.data % SCRATCH_ALIGN  # the first aligned byte
        out = []
        for (dtype, shape), offset in zip(kinds, offsets):
            count = rows * math.prod(shape)
            start = base + offset
            view = self.buffer[start:start + count * np.dtype(dtype).itemsize]
            out.append(view.view(dtype).reshape((rows, *shape)))
        return out


def _storage(region: RowRegion) -> dict[Node, Node]:
    owner: dict[Node, Node] = {}
    for node in region.nodes:
        base = node.inputs[0] if node.op in VIEW_OPS else node
        owner[node] = owner.get(base, base)
    return owner


def _last_use(region: RowRegion, storage: dict) -> dict[int, list[Node]]:
    """For each node index, the storages whose last reader it is. A result of
    a control-flow node may be one of its operands' arrays (a branch that
    returns its input), so a reader of its gets also reads those."""
    last: dict[Node, int] = {}
    aliases = {g: [storage[x] for x in g.inputs[0].inputs if x in storage]
               for g in region.nodes if g.op is Op.GET}
    for i, node in enumerate(region.nodes):
        for x in node.inputs:
            if x in storage:
                last[storage[x]] = i
            for owner in aliases.get(x, ()):
                last[owner] = i
    for i, node in enumerate(region.nodes):
        last.setdefault(storage[node], i)
    dying: dict[int, list[Node]] = {}
    for owner, i in last.items():
        dying.setdefault(i, []).append(owner)
    return dying


def _hoisted(region: RowRegion) -> list[Node]:
    """View nodes of whole values only (a broadcast scalar): the same for
    every tile of a given length, so computed once per call and length."""
    whole = set(region.whole_inputs)
    found: list[Node] = []
    for node in region.nodes:
        operands = zip(node.inputs, region.modes[node])
        if node.op in VIEW_OPS and all(x in found or (x in whole and mode == WHOLE)
                                       for x, mode in operands):
            found.append(node)
    return found


def _signature(region: RowRegion, hoisted: list[Node], slots: _Slots):
    """Parameter names, and the name of every value from outside the region
    by how it is read (a value may be read both by rows and whole)."""
    names: dict[tuple, str] = {}
    params = []
    groups = (("r", ROWS, region.row_inputs), ("w", WHOLE, region.whole_inputs),
              ("h", None, hoisted), ("o", None, region.outputs))
    for prefix, mode, group in groups:
        for k, node in enumerate(group):
            if mode is not None:
                names[(node, mode)] = f"{prefix}{k}"
            params.append(f"{prefix}{k}")
    params += [f"s{k}" for k in range(len(slots.kinds))]
    return names, params


def _operands(node: Node, region: RowRegion, names: dict) -> str:
    return ", ".join(names.get(x) or names[(x, mode)]
                     for x, mode in zip(node.inputs, region.modes[node]))


def generate_tile(region: RowRegion, hoisted: list[Node], slots: _Slots,
                  rows: int) -> tuple[str, dict]:
    """Source of ``tile(<row inputs>, <whole inputs>, <hoisted views>,
    <outputs>, <scratch>)`` for a tile of ``rows`` rows: one line per node,
    in tape order."""
    names, params = _signature(region, hoisted, slots)
    names.update({n: f"h{k}" for k, n in enumerate(hoisted)})
    outputs = {n: f"o{k}" for k, n in enumerate(region.outputs)}
    env: dict = {"_copyto": np.copyto}
    lines = [f"def tile({', '.join(params)}):"]
    for i, node in enumerate(region.nodes):
        where = f"  # {node.op.value}{' @ ' + node.where if node.where else ''}"
        args = _operands(node, region, names)
        if node in hoisted:
            pass
        elif node.op in VIEW_OPS or node.op in IN_TILES_BY_EVAL:
            env[f"_f{i}"] = functools.partial(EVAL[node.op], **loops.tile_attrs(node, rows))
            names[node] = f"t{i}"
            lines.append(f"    t{i} = _f{i}({args}){where}")
        else:
            env[f"_f{i}"] = functools.partial(INTO[node.op], **loops.tile_attrs(node, rows))
            target = outputs.get(node) or f"s{slots.assignment[node]}"
            names[node] = f"t{i}"
            lines.append(f"    t{i} = _f{i}({args}{', ' if args else ''}out={target}){where}")
        if node in outputs and node.op in NO_SCRATCH:
            lines.append(f"    _copyto({outputs[node]}, {names[node]})")
    return "\n".join(lines) + "\n", env


def generate_hoist(region: RowRegion, hoisted: list[Node], rows: int) -> tuple[str, dict]:
    """Source of ``hoist(<whole inputs>) -> <hoisted views>``."""
    names = {n: f"w{k}" for k, n in enumerate(region.whole_inputs)}
    params = list(names.values())
    env: dict = {}
    lines = [f"def hoist({', '.join(params)}):"]
    for k, node in enumerate(hoisted):
        env[f"_f{k}"] = functools.partial(EVAL[node.op], **loops.tile_attrs(node, rows))
        lines.append(f"    h{k} = _f{k}({', '.join(names[x] for x in node.inputs)})")
        names[node] = f"h{k}"
    lines.append(f"    return ({''.join(f'h{k}, ' for k in range(len(hoisted)))})")
    return "\n".join(lines) + "\n", env


def _exec(source: str, env: dict, name: str, label: str):
    exec(compile(source, f"<isokernel threads {label}>", "exec"), env)  # noqa: S102
    return env[name]


class _Scratch(threading.local):
    """A worker's scratch buffers: views per tile length, and their addresses."""

    views: dict | None = None
    pointers: np.ndarray | None = None


CONTROL_TILE_ROWS = 4096
"""The fewest rows of a tile of a region with control flow (``RegionRunner._tile``)."""


class RegionRunner:
    """Runs one region over the pixel axis: slices on the pool, tiles within.
    A region whose every step is a call of NumPy's strided loop (or an exact
    select, cast or copy) runs each slice through the GIL-free tile driver
    (``loops``); any other region, or a call whose inputs NumPy would
    iterate differently, runs the generated Python tile program."""

    def __init__(self, region: RowRegion, pixels: int, workers: int, tile_rows: int | None):
        self.region = region
        self.shared = SharedScratch()  # plan_threads gives its regions one between them
        self.pixels = pixels
        self.workers = workers
        self.hoisted = _hoisted(region)
        self.slots = _Slots(region, set(self.hoisted))
        self._scratch = _Scratch()
        self._loops: dict[tuple, loops.Program | str] = {}
        self.unavailable = loops.unavailable_reason()
        self._tile(tile_rows, gil_free=self.unavailable is None)
        planned = self.unavailable or self._planned()
        self.planned_gil_free = not isinstance(planned, str)
        if not self.planned_gil_free and self.unavailable is None:
            self._tile(tile_rows, gil_free=False)  # Python tiles: the larger tiles
        self._note(planned)

    def _tile(self, tile_rows: int | None, gil_free: bool) -> None:
        """Tile length, slices (chunks of tiles) and one Python program per length."""
        per_row = max(1, self.slots.row_bytes())
        if tile_rows is None and any(n.op in CONTROL for n in self.region.nodes):
            # a loop's EVAL rule makes a NumPy call per op and step: tiles of at least
            # CONTROL_TILE_ROWS rows keep the per-call costs small; four per worker keep
            # the loop's arrays nearer the cache and let a tile whose lanes all stopped
            # early free its worker (the flagship, 2e5 pixels on 2 workers: 2.6x
            # reference with 25,000-row tiles, 2.0x with one 100,000-row tile per worker)
            tile_rows = max(CONTROL_TILE_ROWS, -(-self.pixels // (4 * self.workers)))
        elif tile_rows is None:
            tile_rows = default_tile_rows(per_row, self.workers, gil_free)
        self.tile_rows = min(self.pixels, tile_rows)
        chunks = min(4 * self.workers, max(1, self.pixels // self.tile_rows))
        self.chunks = split(self.pixels, chunks)  # tiles are derived: loops.tiles
        self.lengths = loops.tile_lengths(self.chunks, self.tile_rows)
        self._programs = {n: self._program(n) for n in self.lengths}

    def _program(self, rows: int):
        tile = _exec(*generate_tile(self.region, self.hoisted, self.slots, rows), "tile",
                     f"tile {rows}")
        hoist = _exec(*generate_hoist(self.region, self.hoisted, rows), "hoist",
                      f"hoist {rows}")
        return tile, hoist

    def scratch(self) -> dict[int, list[np.ndarray]]:
        views = self._scratch.views
        if views is None:
            buffers = self.slots.allocate(self.tile_rows, self.shared)
            views = {n: [b[:n] for b in buffers] for n in self.lengths}
            self._scratch.views = views
            self._scratch.pointers = np.array([b.ctypes.data for b in buffers], np.uintp)
        return views

    def scratch_pointers(self) -> np.ndarray:
        self.scratch()
        return self._scratch.pointers

    def run(self, rows_in: list, wholes: list, outs: list) -> None:
        hoisted = {n: self._programs[n][1](*wholes) for n in self.lengths}
        program = self.loop_program(rows_in, wholes, hoisted)
        if program is not None:
            self._run_loops(program, rows_in, wholes, hoisted, outs)
            return

        def work(chunk: int) -> None:
            stop, scratch = stop_flag(), self.scratch()
            for a, b in loops.tiles(*self.chunks[chunk], self.tile_rows):
                if stop:
                    return
                n = b - a
                self._programs[n][0](*(x[a:b] for x in rows_in), *wholes, *hoisted[n],
                                     *(o[a:b] for o in outs), *scratch[n])
        run_tasks(work, len(self.chunks), self.workers)

    def source(self) -> str:
        """The program the last call ran (before any call: the planned one)."""
        rows = self.lengths[-1]
        program = self._last if self.path == loops.PATH else None
        if program is None:
            return (generate_hoist(self.region, self.hoisted, rows)[0]
                    + generate_tile(self.region, self.hoisted, self.slots, rows)[0])
        return program.listing(self._slot_names())

    def _slot_names(self) -> list[str]:
        """Names of the bases table, as in the Python tile program."""
        region, lengths = self.region, self.lengths
        return ([f"r{k}" for k in range(len(region.row_inputs))]
                + [f"o{k}" for k in range(len(region.outputs))]
                + [f"w{k}" for k in range(len(region.whole_inputs))]
                + [f"h{k}" for _ in lengths for k in range(len(self.hoisted))]
                + [f"s{k}" for k in range(len(self.slots.kinds))])

    # --- the GIL-free path ---

    def loop_program(self, rows_in: list, wholes: list, hoisted: dict):
        """The driver program for these inputs' layout (built once per
        layout), or None when this call runs the Python tiles."""
        if self.unavailable is not None:
            return None
        key = _layout_key(rows_in, wholes)
        found = self._loops.get(key)
        if found is None:
            found = self._loops[key] = self._build(rows_in, wholes, hoisted)
        self._note(found)
        return None if isinstance(found, str) else found

    def _note(self, found) -> None:
        """The path the last call took (before any call: the planned one)."""
        if isinstance(found, str):
            self.path = f"{loops.PYTHON_PATH}; not GIL-free: {found}"
        else:
            self.path, self._last = loops.PATH, found

    def _planned(self):
        """The program for C-contiguous inputs, built before any call."""
        rows = [np.zeros((self.tile_rows, *x.shape[1:]), x.dtype)
                for x in self.region.row_inputs]
        wholes = [_probe_whole(x) for x in self.region.whole_inputs]
        hoisted = {n: self._programs[n][1](*wholes) for n in self.lengths}
        found = self._loops[_layout_key(rows, wholes)] = self._build(rows, wholes, hoisted)
        return found

    def _build(self, rows_in: list, wholes: list, hoisted: dict):
        """A Program, or the reason this layout cannot run on the driver."""
        per_length = {}
        try:
            for li, n in enumerate(self.lengths):
                tile = self._tile_operands(li, n, rows_in, wholes, hoisted[n])
                per_length[n] = loops.tile_steps(self.region, self.hoisted,
                                                 self.slots.assignment, tile, n)
        except loops.Ineligible as why:
            return str(why)
        return loops.Program.build(per_length, self.chunks, self.tile_rows)

    def _tile_operands(self, li: int, n: int, rows_in, wholes, hoisted) -> loops.TileOperands:
        """The operands of a tile of ``n`` rows at row 0, numbered as the bases
        table of a call: row inputs, outputs, wholes, hoisted views of each
        tile length, then the worker's scratch."""
        r, o, w, h = (len(rows_in), len(self.region.outputs), len(wholes), len(self.hoisted))
        outs = [np.empty((n, *x.shape[1:]), x.dtype) for x in self.region.outputs]
        scratch = self.slots.allocate(n, SharedScratch())  # for their layout only
        first_scratch = r + o + w + h * len(self.lengths)
        return loops.TileOperands(
            rows=[loops.Operand(x[:n], k, 0, x.strides[0]) for k, x in enumerate(rows_in)],
            outs=[loops.Operand(x, r + k, 0, x.strides[0]) for k, x in enumerate(outs)],
            wholes=[loops.Operand(np.asarray(x), r + o + k) for k, x in enumerate(wholes)],
            hoisted=[loops.Operand(x, r + o + w + h * li + k) for k, x in enumerate(hoisted)],
            scratch=[loops.Operand(x, first_scratch + k) for k, x in enumerate(scratch)])

    def _run_loops(self, program, rows_in, wholes, hoisted, outs) -> None:
        wholes = [np.asarray(x) for x in wholes]  # alive until the driver returns
        arrays = [*rows_in, *outs, *wholes, *(h for n in self.lengths for h in hoisted[n])]
        common = np.array([_address(a) for a in arrays], np.uintp)
        fpe = np.zeros((len(self.chunks), len(program.names)), np.uint32)

        def work(chunk: int) -> None:
            stop = stop_flag()
            bases = np.concatenate((common, self.scratch_pointers()))
            count = program.tile_count(chunk)
            # a worker's slice is one call (the driver reads the stop flag between tiles);
            # on the calling thread, short calls so that a Ctrl-C is seen between them
            step = count if in_worker() else max(1, SLICE_ROWS // self.tile_rows)
            for first in range(0, count, step):
                if stop:
                    return
                program.run_tiles(chunk, first, first + step, bases, fpe[chunk], stop)
        run_tasks(work, len(self.chunks), self.workers)
        loops.give_fpe(program.names, np.bitwise_or.reduce(fpe, axis=0))


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _layout_key(rows_in: list, wholes: list) -> tuple:
    """What a driver program depends on besides the addresses."""
    arrays = [*rows_in, *(np.asarray(w) for w in wholes)]
    return tuple((a.dtype.str, a.shape[1:], a.strides, a.flags.aligned) for a in arrays)


def _probe_whole(node: Node):
    if node.op is Op.CONST:
        return node.attrs["value"].value
    return np.zeros(node.shape, node.dtype)


# --- NumPy's diagnostics for rows a compiled kernel ran -----------------------------------

def plan_threads(graph: Graph, profile: Profile, options: dict) -> StagedPlan:
    """``threads``' plan: every row-local op in a region; a region whose
    program runs on the GIL-free driver binds the strided loops' capsules,
    the others the tiles'. Choosing needs the region's tiles and program, so
    the plan carries the region runners it built."""
    tile_rows = options.get("tile_rows")
    if tile_rows is not None and (not isinstance(tile_rows, int) or tile_rows < 1):
        raise ValueError(f"tile_rows={tile_rows!r}: give a positive integer, e.g. "
                         f"tile_rows=4096, or leave it to the L2 cache size")
    workers, _ = resolve_workers(options.get("workers"))
    part = partition(graph)
    runners = {k: RegionRunner(s, part.pixels, workers, tile_rows)
               for k, s in enumerate(part.stages) if isinstance(s, RowRegion)}
    # each thread's buffer made at once the largest region's size: never grown, so the
    # views a region keeps stay in it
    shared = SharedScratch(max((r.slots.nbytes(r.tile_rows) for r in runners.values()),
                               default=0))
    for runner in runners.values():
        runner.shared = shared
    gil_free = {k: PROVIDER_LOOPS for k, r in runners.items() if r.planned_gil_free}
    return staged_plan(graph, profile, part, PROVIDER, gil_free, runners)


class ThreadsExecutable(StagedExecutable):
    def __init__(self, plan: StagedPlan, workers: int | None = None,
                 tile_rows: int | None = None, reductions: str = "reference"):
        count, self.workers_source = resolve_workers(workers)
        super().__init__(plan, count, reductions)
        self._runners = plan.regions
        self._inline = (ReferenceExecutable(plan, reductions) if self._is_small(tile_rows)
                        else None)

    def _is_small(self, tile_rows: int | None) -> bool:
        """At most ``INLINE_ROWS`` pixels, and no more than one tile of the
        asked ``tile_rows`` (a call split into asked tiles runs its tiles)."""
        pixels = self.partition.pixels
        return pixels <= INLINE_ROWS and (tile_rows is None or pixels <= tile_rows)

    def call_flat(self, arrays) -> tuple:
        """A small call runs on the calling thread as one tile: the
        reference's NumPy calls over the whole call, which are the tiles'
        calls (bit-identical by this strategy's contract) without the pool,
        the tile bookkeeping or the driver."""
        if self._inline is not None:
            return self._inline.call_flat(arrays)
        return super().call_flat(arrays)

    def run_region(self, k: int, region: RowRegion, env: dict) -> None:
        runner = self._runners[k]
        outs = self.allocate_outputs(region)
        runner.run([stage_value(env, x) for x in region.row_inputs],
                   [stage_value(env, x) for x in region.whole_inputs], outs)
        env.update(zip(region.outputs, outs))

    def source(self) -> str:
        """Per region: the driver program (GIL-free) or the Python tile program."""
        parts = [f"# region {k}: tiles of {runner.lengths[-1]} rows; {runner.path}\n"
                 + runner.source() for k, runner in self._runners.items()]
        return "\n".join(parts) or "# no row region: every op runs whole by the reference rules\n"

    def report_lines(self) -> list[tuple[str, str]]:
        tiles = ", ".join(f"{r.tile_rows} rows ({len(r.slots.kinds)} scratch buffers)"
                          for r in self._runners.values()) or "none"
        paths = "; ".join(f"region {k}: {r.path}" for k, r in self._runners.items()) or "none"
        lines = [("workers", f"{self.workers} ({self.workers_source})"),
                 ("pixels", self.partition.describe()),
                 ("tiles", tiles),
                 ("tile path", paths),
                 ("small calls", INLINE_TEXT.format(rows=INLINE_ROWS) + (
                     "; this one is" if self._inline is not None else ""))]
        if any(r.path == loops.PATH for r in self._runners.values()):
            lines.append(("fp errors", loops.FPE_POLICY))
        return lines + self.contraction_lines()


# --- capsules -----------------------------------------------------------------------------

LOOP_CAPSULE_NAMES = {
    **{op: "{} strided loop on row tiles (GIL-free C driver)"
       for op, rule in EVAL.items() if isinstance(rule, np.ufunc)},
    Op.SELECT: "{} as a bit copy per element on row tiles (GIL-free C driver)",
    Op.CAST: "{} as NumPy's C conversion on row tiles (GIL-free C driver)",
    **{op: "{} as pointer and strides on row tiles (GIL-free C driver)" for op in VIEW_OPS},
}
"""The ops a region on the GIL-free path runs, and how (``loops``)."""


def _register_capsules() -> None:
    reference = {c.op: c for c in registered() if c.provider == NUMPY_PROVIDER}
    for op, capsule in reference.items():
        if op in NOT_IN_TILES - IN_TILES_BY_EVAL:
            continue
        how = "its EVAL rule per tile" if op in IN_TILES_BY_EVAL else "out="
        kinds = [(PROVIDER, f"{capsule.name} on row tiles ({how})")]
        if op in LOOP_CAPSULE_NAMES:
            kinds.append((PROVIDER_LOOPS, LOOP_CAPSULE_NAMES[op].format(capsule.name)))
        for provider, name in kinds:
            register(Capsule(name=name, op=op, provider=provider, device="cpu",
                             trust="checked", vjp_mode=capsule.vjp_mode,
                             numerical_policy=capsule.numerical_policy))


_register_capsules()


CONTRACT = "bit-identical to reference"

SPEC = register_strategy(StrategySpec(
    name="threads", device="cpu", contract=CONTRACT,
    profile=Profile("threads-cpu", "cpu", (*PROVIDERS, NUMPY_PROVIDER),
                    frozenset({"checked", "reference"})),
    memory=MemoryModel("tiled", "fused", marshal=True, tile_rows=default_tile_rows),
    compiler=ThreadsExecutable, auto_priority=20,
    options=frozenset({"workers", "tile_rows", "reductions"}), planner=plan_threads))
