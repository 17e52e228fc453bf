"""A region's tile program as calls of NumPy's own strided loops, run by the
GIL-free tile driver (``codegen.driver``).

``threads`` evaluates a tile by calling, for every node, the NumPy ufunc of
the reference with ``out=`` into scratch. For a ufunc whose operands are
all 1-D, or all C- (or all F-) contiguous and of one shape, NumPy's call
takes its *trivial* path: one call of the op's strided inner loop over the
whole tile, with fixed byte strides. NumPy (>= 1.24) hands out exactly that
loop: ``ufunc._resolve_dtypes_and_context`` and ``ufunc._get_strided_loop``
fill a ``numpy_1.24_ufunc_call_info`` capsule with the loop, its context
and auxdata. This module records, for each node of a region, the loop and
the tile pointers and strides NumPy's call would use, so the driver can make
the same calls from C, one slice per worker, with no Python (and no GIL)
between ops: the same loops on the same data with the same strides give the
reference's bits.

A region takes this path only if every step is such a call, or one of the
driver's exact kinds: ``where`` (a bit copy per element), ``cast`` between
the pairs whose C conversion is NumPy's own cast (never float to integer,
undefined in C for NaN and out-of-range values), and the copy of a view
output. Anything else (reductions, pads, concatenations, table look-ups,
ldexp, logb, integer ``power``, a loop that needs the Python API, an
operand NumPy would iterate non-trivially) leaves the whole region on the
Python tile path, with the reason recorded.

Floating-point errors: around every call NumPy would check, the driver
clears and reads the FP flags in the worker (as the ufunc call does); after
the region, the flags seen by each op are given to NumPy's error state of
the caller (``np.errstate``), op by op in tape order, with NumPy's texts:
``RuntimeWarning: divide by zero encountered in divide``,
``FloatingPointError`` under ``raise``, the ``call``/``print``/``log``
modes. Where NumPy would warn once per op call, this warns once per op per
region call.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from ...codegen import driver as drv
from ...codegen import unavailable_reason as compiler_reason
from ...codegen.pixel import ROWS, WHOLE, RowRegion, block_attrs
from ...ir import EVAL, BackendUnavailableError, Node, Op, dtypes
from ...ir.ops import CONTROL, LAYOUT
from ..liveness import VIEW_OPS

CALL_INFO = b"numpy_1.24_ufunc_call_info"
PATH = "NumPy's strided loops, GIL-free C driver"
PYTHON_PATH = "NumPy ufunc calls from Python (out=)"
FPE_POLICY = ("flags read around each loop in the workers, as the ufunc call does; given to "
              "the caller's np.errstate after the region, once per op, in tape order")

NO_LOOP_DTYPES = {Op.POW: dtypes.INTS}
"""Loops that report errors through the Python API although NumPy does not
flag them so: integer ``power`` raises ValueError for negative exponents."""


class _CallInfo(ctypes.Structure):
    """NumPy 1.24+'s ``ufunc_call_info`` (see ``help(np.add._get_strided_loop)``)."""

    _fields_ = [("strided_loop", ctypes.c_void_p), ("context", ctypes.c_void_p),
                ("auxdata", ctypes.c_void_p), ("requires_pyapi", ctypes.c_ubyte),
                ("no_floatingpoint_errors", ctypes.c_ubyte)]


_CAPSULE_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_POINTER.restype = ctypes.c_void_p
_CAPSULE_POINTER.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Ineligible(Exception):
    """This region (for this input layout) cannot run on the driver."""


# --- is the path available? ---------------------------------------------------------------

@functools.cache
def unavailable_reason() -> str | None:
    """Why the GIL-free path cannot run in this process, or None."""
    return numpy_reason() or _driver_reason()


def numpy_reason() -> str | None:
    """None when NumPy exposes its strided loops as this module reads them."""
    version = f"NumPy {np.__version__}"
    if np.dtype(np.intp).itemsize != 8:
        return f"{version}: npy_intp is not 64-bit on this platform"
    if not all(hasattr(np.add, a) for a in ("_resolve_dtypes_and_context", "_get_strided_loop")):
        return f"{version} has no ufunc._get_strided_loop (private API of NumPy >= 1.24)"
    try:
        f8 = np.dtype(np.float64)
        _, capsule = np.add._resolve_dtypes_and_context((f8, f8, f8))
        np.add._get_strided_loop(capsule, fixed_strides=(8, 8, 8))
        _call_info(capsule)
    except (TypeError, ValueError, AttributeError) as err:
        return f"{version}: ufunc._get_strided_loop changed ({err})"
    return None


def _driver_reason() -> str | None:
    try:
        drv.load_driver()
    except (BackendUnavailableError, RuntimeError, OSError) as err:
        return f"tile driver unavailable: {compiler_reason() or err}"
    return None


def _call_info(capsule) -> _CallInfo:
    address = _CAPSULE_POINTER(capsule, CALL_INFO)  # raises ValueError on another name
    return _CallInfo.from_address(address)


# --- steps --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """An array of a tile, as the driver finds it: ``bases[slot] + offset +
    begin * advance`` for the tile whose first row is ``begin``."""

    array: np.ndarray  # its view in the tile that starts at row 0 (the probe)
    slot: int
    offset: int = 0
    advance: int = 0

    def view(self, array: np.ndarray) -> Operand:
        """A view of this operand's data (same slot, its own offset)."""
        moved = _address(array) - _address(self.array)
        return Operand(array, self.slot, self.offset + moved, self.advance)


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def fixed_strides(arrays: list[np.ndarray]) -> tuple[int, ...]:
    """The strides of the one loop call NumPy makes for these operands
    (inputs, then the output) of one shape. Its trivial path
    (``try_trivial_single_output_loop``) takes 1-D arrays with their own
    stride, and N-D ones all C- or all F-contiguous, stepping by itemsize.
    Otherwise its iterator runs; when every operand is C-contiguous or a
    broadcast scalar (all strides 0), it coalesces them into one dimension
    and, needing no buffer, calls the loop once with strides itemsize or 0.
    Any other layout is iterated row by row or buffered: not one call."""
    shape = arrays[-1].shape
    if any(a.shape != shape for a in arrays):
        raise Ineligible("operands of different shapes")
    if len(shape) <= 1:
        return tuple(a.strides[0] if shape else 0 for a in arrays)
    orders = {(a.flags.c_contiguous, a.flags.f_contiguous) for a in arrays}
    if len(orders) == 1 and orders != {(False, False)}:
        return tuple(a.itemsize for a in arrays)
    scalar = [not a.flags.c_contiguous and not any(a.strides) for a in arrays]
    if arrays[-1].flags.c_contiguous and all(a.flags.c_contiguous or s
                                             for a, s in zip(arrays, scalar)):
        return tuple(0 if s else a.itemsize for a, s in zip(arrays, scalar))
    raise Ineligible("an operand NumPy would iterate row by row or buffer")


def _check_overlap(inputs: list[np.ndarray], out: np.ndarray) -> None:
    """NumPy's trivial path allows an input to overlap the output only when
    both are the same view (an exact in-place op)."""
    for x in inputs:
        same = _address(x) == _address(out) and x.strides == out.strides
        if np.may_share_memory(x, out) and not same:
            raise Ineligible("an operand overlaps the output")


@dataclass
class Step:
    """One row of the program (``driver.STEP``) and what it keeps alive."""

    fields: dict
    name: str  # the name NumPy gives its floating-point errors
    strides: tuple[int, ...]
    keep: object = None  # the call-info capsule owning context and auxdata
    label: str = ""  # what the source listing shows


def _step(kind: int, operands: list[Operand], fields: dict, name: str) -> Step:
    arrays = [o.array for o in operands]
    _check_overlap(arrays[:-1], arrays[-1])
    strides = fixed_strides(arrays)
    pad = [0] * (drv.MAX_OPERANDS - len(operands))
    row = dict(kind=kind, nargs=len(operands), count=arrays[-1].size,
               slot=[o.slot for o in operands] + pad,
               offset=[o.offset for o in operands] + pad,
               advance=[o.advance for o in operands] + pad,
               stride=list(strides) + pad, itemsize=arrays[-1].itemsize)
    row.update(fields)
    return Step(row, name, strides)


def numpy_step(op: Op, ufunc: np.ufunc, operands: list[Operand]) -> Step:
    """The call NumPy's ufunc makes: its loop for these dtypes and strides."""
    types = tuple(o.array.dtype for o in operands)
    if types[-1] in NO_LOOP_DTYPES.get(op, ()):
        raise Ineligible(f"{op.value} on {types[-1]} reports errors through Python")
    step = _step(drv.NUMPY_LOOP, operands, {}, ufunc.__name__)
    resolved, capsule = ufunc._resolve_dtypes_and_context(types)
    if tuple(resolved) != types:
        raise Ineligible(f"{op.value}: NumPy would cast {types} to {tuple(resolved)}")
    ufunc._get_strided_loop(capsule, fixed_strides=step.strides)
    info = _call_info(capsule)
    if info.requires_pyapi:
        raise Ineligible(f"{op.value}: NumPy's loop needs the Python API")
    step.fields.update(loop=info.strided_loop, context=info.context, auxdata=info.auxdata or 0,
                       check_fpe=int(not info.no_floatingpoint_errors))
    step.keep = capsule
    return step


def select_step(operands: list[Operand]) -> Step:
    return _step(drv.SELECT, operands, {}, "where")


def copy_step(operands: list[Operand]) -> Step:
    return _step(drv.COPY, operands, {}, "copyto")


def cast_step(operands: list[Operand]) -> Step:
    source, target = (o.array.dtype for o in operands)
    if source in dtypes.FLOATS and target in dtypes.INTS:
        raise Ineligible(f"cast {source} to {target} (undefined in C for NaN and out-of-range)")
    pair = 5 * drv.TYPE_CODE[source] + drv.TYPE_CODE[target]
    return _step(drv.CAST, operands, {"cast": pair, "check_fpe": 1}, "cast")


# --- a region's program -------------------------------------------------------------------

@dataclass
class TileOperands:
    """The operands of a tile of ``rows`` rows, by how the tile program
    names them: row inputs, whole inputs, hoisted views, outputs, scratch."""

    rows: list[Operand]
    wholes: list[Operand]
    hoisted: list[Operand]
    outs: list[Operand]
    scratch: list[Operand]


def tile_attrs(node: Node, rows: int) -> dict:
    """The node's attributes for a tile of ``rows`` rows (the shape
    attributes that carry the pixel count; a control-flow node's bodies
    resized likewise: ``pixel.block_attrs``)."""
    return dict(block_attrs(node, rows))


def tile_steps(region: RowRegion, hoisted: list[Node], assignment: dict, tile: TileOperands,
               rows: int) -> list[Step]:
    """The steps of one tile, in tape order: the same walk as the Python
    tile program (``threads.generate_tile``), views applied by EVAL to the
    tile's arrays and every other node one step into its scratch or output."""
    names: dict = {(x, ROWS): o for x, o in zip(region.row_inputs, tile.rows)}
    names.update({(x, WHOLE): o for x, o in zip(region.whole_inputs, tile.wholes)})
    names.update(zip(hoisted, tile.hoisted))
    outputs = dict(zip(region.outputs, tile.outs))
    steps = []
    for node in region.nodes:
        if node.op in CONTROL:
            raise Ineligible(f"{node.op.value} (control flow runs by its EVAL rule on the tile)")
        if node not in names:  # hoisted views are named already
            args = [names.get(x) or names[(x, mode)]
                    for x, mode in zip(node.inputs, region.modes[node])]
            if node.op in VIEW_OPS:
                view = EVAL[node.op](*(a.array for a in args), **tile_attrs(node, rows))
                names[node] = args[0].view(view)
            else:
                names[node] = outputs.get(node) or tile.scratch[assignment[node]]
                steps.append(_labelled(_node_step(node, [*args, names[node]]), node))
        if node in outputs and node.op in VIEW_OPS:
            steps.append(_labelled(copy_step([names[node], outputs[node]]), node))
    return steps


def _labelled(step: Step, node: Node) -> Step:
    step.label = f"{node.op.value}{' @ ' + node.where if node.where else ''}"
    return step


def _node_step(node: Node, operands: list[Operand]) -> Step:
    rule = EVAL[node.op]
    if isinstance(rule, np.ufunc):
        return numpy_step(node.op, rule, operands)
    if node.op is Op.SELECT:
        return select_step(operands)
    if node.op is Op.CAST:
        if any(o.array.dtype in dtypes.COMPLEX for o in operands):
            raise Ineligible("cast of complex values (no C cast step)")
        return cast_step(operands)
    kind = "layout op" if node.op in LAYOUT else "op"
    raise Ineligible(f"{node.op.value} ({kind} without a NumPy strided loop)")


# --- tiles of a slice ---------------------------------------------------------------------

def tiling(begin: int, end: int, tile_rows: int) -> tuple[int, int, int]:
    """How the slice ``[begin, end)`` is tiled: nearly equal tiles of at most
    ``tile_rows`` rows. Returns the tile count, the shorter tile length and
    how many tiles (the first ones) are one row longer. The driver computes
    the same (``isk_run``): tiles are never listed, so bookkeeping does not
    grow with the pixel count."""
    count = -(-(end - begin) // tile_rows)
    shorter, longer = divmod(end - begin, count)
    return count, shorter, longer


def tiles(begin: int, end: int, tile_rows: int):
    """The tiles of a slice as ``(first row, end row)``, one at a time."""
    count, shorter, longer = tiling(begin, end, tile_rows)
    for k in range(count):
        first = begin + k * shorter + min(k, longer)
        yield first, first + shorter + (k < longer)


def tile_lengths(chunks: list[tuple[int, int]], tile_rows: int) -> list[int]:
    """The distinct tile lengths of these slices (at most two per distinct
    slice length), each of which gets its own program."""
    found = set()
    for begin, end in chunks:
        _, shorter, longer = tiling(begin, end, tile_rows)
        found.update((shorter, shorter + 1) if longer else (shorter,))
    return sorted(found)


@dataclass
class Program:
    """Steps for every tile length of a region, how each slice is tiled, and
    the names under which the steps' floating-point errors are given."""

    steps: np.ndarray  # driver.STEP, one block of ``per_tile`` steps per tile length
    slices: np.ndarray  # driver.SLICE per slice: bounds, tile rows, step blocks
    names: list[str]  # per step of a tile
    keep: list = field(default_factory=list)  # capsules owning the loops' context, auxdata
    longest: list[Step] = field(default_factory=list)  # the steps of the longest tile

    @classmethod
    def build(cls, per_length: dict[int, list[Step]], chunks: list[tuple[int, int]],
              tile_rows: int):
        lengths = list(per_length)
        per_tile = len(per_length[lengths[0]])
        table = np.zeros(per_tile * len(lengths), drv.STEP)
        for li, n in enumerate(lengths):
            for k, step in enumerate(per_length[n]):
                for key, value in step.fields.items():
                    table[li * per_tile + k][key] = value
                table[li * per_tile + k]["index"] = k
        first = {n: li * per_tile for li, n in enumerate(lengths)}
        slices = np.zeros(len(chunks), drv.SLICE)
        for c, (begin, end) in enumerate(chunks):
            _, shorter, longer = tiling(begin, end, tile_rows)
            slices[c] = (begin, end, tile_rows, first[shorter + 1] if longer else -1,
                         first[shorter], per_tile)
        names = [s.name for s in per_length[lengths[0]]]
        keep = [s.keep for steps in per_length.values() for s in steps]
        return cls(table, slices, names, keep, per_length[max(lengths)])

    def listing(self, slots: list[str]) -> str:
        """The longest tile's steps as comments: the call, and each operand as
        slot+offset/stride in bytes (row operands advance with the tile)."""
        lines = ["# one call per step and tile, from C without the GIL; operands are "
                 "slot+byte offset/byte stride"]
        for k, step in enumerate(self.longest):
            f = step.fields
            args = [f"{slots[f['slot'][a]]}+{f['offset'][a]}/{f['stride'][a]}"
                    for a in range(f["nargs"])]
            call = f"{_KIND_NAMES[f['kind']]}{' ' + step.name if f['kind'] == 0 else ''}"
            lines.append(f"# {k:3d} {call:<22} {', '.join(args[:-1])} -> {args[-1]}"
                         f" x{f['count']}  # {step.label}")
        return "\n".join(lines) + "\n"

    def tile_count(self, chunk: int) -> int:
        row = self.slices[chunk]
        return tiling(int(row["begin"]), int(row["end"]), int(row["rows"]))[0]

    def run_tiles(self, chunk: int, first: int, last: int, bases: np.ndarray,
                  fpe: np.ndarray, stop) -> None:
        """Tiles ``[first, last)`` of slice ``chunk``; the driver returns early
        once ``stop`` (``pool.Stop``) is set."""
        failed = drv.load_driver().run(self.steps, self.slices[chunk:chunk + 1], first, last,
                                       bases, fpe, stop.address)
        if failed:
            name = self.names[(failed - 1) % len(self.names)]
            raise RuntimeError(f"{name}: NumPy's strided loop reported a failure in the "
                               f"tile driver; run with strategy='reference' to see it")


_KIND_NAMES = {drv.NUMPY_LOOP: "loop", drv.COPY: "copy", drv.SELECT: "select", drv.CAST: "cast"}


# --- floating-point errors, as NumPy gives them -------------------------------------------

FPE_KINDS = ((drv.FPE_DIVIDE, "divide", "divide by zero"),
             (drv.FPE_OVERFLOW, "over", "overflow"),
             (drv.FPE_UNDERFLOW, "under", "underflow"),
             (drv.FPE_INVALID, "invalid", "invalid value"))
"""NumPy's order, errstate keys and texts (``PyUFunc_handlefperr``)."""


def give_fpe(names: list[str], flags: np.ndarray) -> None:
    """The flags each step saw, given to the caller's ``np.errstate`` in tape
    order as NumPy's ``PyUFunc_GiveFloatingpointErrors`` does after a call."""
    if not flags.any():
        return
    modes = np.geterr()
    for name, status in zip(names, flags.tolist()):
        for bit, key, text in FPE_KINDS:
            if status & bit:
                _handle(modes[key], name, text, status)


def _handle(mode: str, name: str, text: str, status: int) -> None:
    message = f"{text} encountered in {name}"
    if mode == "warn":
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    elif mode == "raise":
        raise FloatingPointError(message)
    elif mode == "print":
        print(f"Warning: {message}", file=sys.stderr)
    elif mode in ("call", "log"):
        target = np.geterrcall()
        if target is None:
            raise NameError(f"python callback specified for {text} (in  {name}) but no "
                            f"function found.")
        if mode == "call":
            target(text, status)
        else:
            target.write(f"Warning: {message}\n")
