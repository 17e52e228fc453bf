"""NumPy's floating-point diagnostics for rows a compiled kernel ran.

``native``'s kernels return the floating-point flags their rows raised; where
one that the caller's ``np.errstate`` does not ignore was raised, those rows
run again here by the reference rules, so the caller gets NumPy's own
warnings, callbacks or ``FloatingPointError``. Only the diagnostics come from
here: the kernel's outputs stand.
"""

from __future__ import annotations

import numpy as np

from ...codegen.pixel import ROWS, WHOLE, RowRegion
from ...ir import EVAL
from . import loops


def watched_flags() -> int:
    """The ``NPY_FPE_*`` bits the caller's ``np.errstate`` does not ignore."""
    modes = np.geterr()
    return sum(bit for bit, key, _ in loops.FPE_KINDS if modes[key] != "ignore")


class _Log:
    """A target for NumPy's ``log`` error mode: each message, in order."""

    def __init__(self):
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.append(text)


_FPE_BITS = {text: bit for bit, _, text in loops.FPE_KINDS}


def replay_errors(region: RowRegion, rows_in: list, wholes: list,
                  ranges: list[tuple[int, int]]) -> None:
    """The floating-point diagnostics the reference gives for a region, from
    the rows ``ranges`` only (those where a compiled kernel raised a flag):
    the region's nodes run again there by the reference rules (EVAL, as on a
    tile), every op's errors are collected, and then given to the caller's
    ``np.errstate`` once per op in tape order, with NumPy's texts
    (``loops.give_fpe``). Only the diagnostics come from here: the kernel's
    outputs stand."""
    seen: dict[tuple[int, str], int] = {}
    log = _Log()
    with np.errstate(all="log", call=log):
        for a, b in ranges:
            _replay_rows(region, [x[a:b] for x in rows_in], wholes, b - a, log, seen)
    keys = sorted(seen, key=lambda key: key[0])  # tape order; a node's ops as met
    loops.give_fpe([name for _, name in keys], np.array([seen[k] for k in keys], np.uint32))


def _replay_rows(region: RowRegion, rows_in: list, wholes: list, rows: int, log: _Log,
                 seen: dict) -> None:
    values = {(x, ROWS): v for x, v in zip(region.row_inputs, rows_in)}
    values.update({(x, WHOLE): v for x, v in zip(region.whole_inputs, wholes)})
    last = {x: i for i, node in enumerate(region.nodes) for x in node.inputs}
    for i, node in enumerate(region.nodes):
        args = [values[x] if x in values else values[(x, mode)]
                for x, mode in zip(node.inputs, region.modes[node])]
        before = len(log.lines)
        values[node] = EVAL[node.op](*args, **loops.tile_attrs(node, rows))
        for line in log.lines[before:]:  # "Warning: <text> encountered in <name>"
            text, name = line.removeprefix("Warning: ").rstrip("\n").split(" encountered in ")
            seen[(i, name)] = seen.get((i, name), 0) | _FPE_BITS[text]
        for x in node.inputs:
            if last.get(x) == i:
                values.pop(x, None)
