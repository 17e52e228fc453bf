"""``isokernel demo``: the SMAP–NISAR soil-moisture retrieval on every
available strategy.

A synthetic scene is regenerated from (seed, pixel index); the retrieval
(Stages 1–4, ``soil_moisture.retrieval``) runs over it in chunks on plain
NumPy and on every available strategy, with a progress bar. The demo prints
a parity table against ``reference`` (bit-identical, or the max ulp), speed
in Mpixel/s with ratios measured in the same run (interleaved, best of N)
beside the memory-bandwidth limit, accuracy against the truth (ubRMSE in
m³/m³), the iterations each pixel's loops ran (Stage 3's sweeps, Stage 5's
LM iterations), the capsule report, and writes a figure when matplotlib is
installed. Output buffers are preallocated once per candidate, so the timed
passes do not page-fault fresh scene-sized allocations.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..backends import all_strategies
from ..backends.parity import bit_identical, max_ulp
from ..ir.errors import BackendUnavailableError, PlanningError
from ..pipeline import jit
from ..scenes import write_scene
from .demo_figure import soil_moisture_figure  # matplotlib is imported inside, when called
from .soil_moisture import (
    REFINED_INPUTS,
    RETRIEVAL_INPUTS,
    SWEEPS,
    generate_scene,
    retrieve,
    retrieve_iterations,
    retrieve_refined,
    retrieve_refined_iterations,
    scene_inputs,
    stage3_tolerance,
)
from .soil_moisture.lookups import mironov_lookups
from .soil_moisture.scene import Grid
from .soil_moisture.stage5 import ITERATIONS, XTOL

OUTPUTS = ("mv", "eps_re", "vwc")
FIGURE = "soil-moisture-demo.png"  # the figure's default path
DENSE_VWC = 5.0  # kg/m²: SMAP's recommended-quality limit


class ProgressBar:
    """A one-line text bar on stderr, redrawn in place on a terminal and
    printed once, when finished, elsewhere."""

    def __init__(self, label: str, total: int, stream=None, width: int = 24):
        self.label, self.total, self.width = label, total, width
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()

    def update(self, done: int) -> None:
        if self.live or done == self.total:
            filled = self.width * done // self.total
            bar = "█" * filled + "·" * (self.width - filled)
            seconds = time.perf_counter() - self.start
            end = "\n" if done == self.total else ""
            self.stream.write(f"\r  {self.label:<28} [{bar}] {done}/{self.total} chunks "
                              f"{seconds:6.2f} s{end}")
            self.stream.flush()


@dataclass
class Candidate:
    name: str
    fn: object
    out: dict
    best: float = math.inf
    prepare: float = 0.0
    compiled: object = None
    passes: list = field(default_factory=list)


def _chunks(pixels: int, count: int) -> list[slice]:
    size = -(-pixels // max(1, count))
    return [slice(a, min(a + size, pixels)) for a in range(0, pixels, size)]


def _run_pass(cand: Candidate, args, chunks, label: str) -> float:
    bar = ProgressBar(label, len(chunks))
    start = time.perf_counter()
    for i, part in enumerate(chunks):
        result = cand.fn(*(a[part] for a in args))
        for name in OUTPUTS:
            cand.out[name][part] = result[name]
        bar.update(i + 1)
    return time.perf_counter() - start


def _candidates(args, chunks, pixels: int, echo, model=retrieve) -> tuple[list[Candidate],
                                                                          list]:
    """NumPy eager plus every available strategy, each prepared (recorded
    and compiled) on the first chunk; unavailable strategies with reasons."""
    dtype = args[0].dtype
    cands = [Candidate("numpy eager", model, {})]
    unavailable = []
    for strategy in all_strategies():
        reason = strategy.unavailable_reason()
        if reason is None:
            cands.append(Candidate(strategy.name, jit(model, strategy=strategy.name), {}))
        else:
            unavailable.append((strategy.name, reason))
    ready = []
    for cand in cands:
        cand.out = {name: np.empty(pixels, dtype) for name in OUTPUTS}
        start = time.perf_counter()
        try:
            cand.fn(*(a[chunks[0]] for a in args))
        except (PlanningError, BackendUnavailableError) as err:  # a strategy not for this model
            unavailable.append((cand.name, f"cannot run this model: {str(err).split('. ')[0]}"))
            continue
        cand.prepare = time.perf_counter() - start
        ready.append(cand)
    return ready, unavailable


def _parity(out: dict, ref: dict) -> str:
    if all(bit_identical(out[k], ref[k]) for k in OUTPUTS):
        return "bit-identical"
    worst = max((max_ulp(out[k], ref[k]), k) for k in OUTPUTS)
    name = worst[1]
    with np.errstate(invalid="ignore"):
        gap = np.nanmax(np.abs(np.asarray(out[name], np.float64) - ref[name]))
    # a retrieval amplifies the last-bit differences of transcendentals; near mv = 0 an
    # absolute gap of 1e-12 is many ulps, so both figures are shown
    return f"max {worst[0]:.0f} ulp, |Δ| ≤ {gap:.1e} ({name})"


def memory_bandwidth(megabytes: int = 64, repeats: int = 3) -> float:
    """Copy bandwidth in bytes/s (read + write), best of ``repeats``."""
    src = np.ones(megabytes << 17)
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def accuracy(mv, truth, vwc) -> list[tuple[str, int, float, float, float]]:
    """(subset, pixels, bias, RMSE, ubRMSE) in m³/m³ for all pixels and by VWC."""
    err = np.asarray(mv, np.float64) - truth
    rows = []
    for label, mask in (("all pixels", np.ones(err.shape, bool)),
                        (f"VWC ≤ {DENSE_VWC:g} kg/m²", vwc <= DENSE_VWC),
                        (f"VWC > {DENSE_VWC:g} kg/m²", vwc > DENSE_VWC)):
        e = err[mask]
        if e.size:
            rows.append((label, e.size, float(e.mean()), float(np.sqrt(np.mean(e * e))),
                         float(e.std())))
    return rows


def _table(cands, unavailable, pixels, bytes_per_pixel, bandwidth, echo) -> None:
    ref = next(c for c in cands if c.name == "reference")
    limit = bandwidth / bytes_per_pixel / 1e6
    echo(f"{'strategy':<16}{'Mpixel/s':>10}{'vs reference':>14}{'prepare s':>11}  "
         f"parity vs reference")
    for c in cands:
        echo(f"{c.name:<16}{pixels / c.best / 1e6:>10.2f}{ref.best / c.best:>13.2f}x"
             f"{c.prepare:>11.2f}  {_parity(c.out, ref.out)}")
    for name, reason in unavailable:
        echo(f"{name:<16}{'—':>10}{'—':>14}{'—':>11}  unavailable: {reason}")
    echo(f"{'memory limit':<16}{limit:>10.0f}{'':>14}{'':>11}  {bytes_per_pixel} B/pixel of "
         f"inputs and outputs at {bandwidth / 1e9:.1f} GB/s (copy bandwidth, this run)")


def run_demo(pixels: int = 1_000_000, dtype="float64", repeats: int = 2, seed: int = 0,
             chunks: int = 16, figure: str | None = FIGURE,
             echo=print, save_scene: str | None = None, stage5: bool = False,
             stage4: str = "table") -> dict:
    """Run the demo; returns the figures it printed (for tests and notes).
    ``stage5`` adds the Levenberg–Marquardt refinement against TB_V and
    σ0_HH (Jacobian by jacfwd) to every candidate. ``stage4``: ``table``
    (κ and the ε'→mv inverse through ``inp.Table``, as the retrieval is
    specified) or ``closed-form`` (the exact inverse of the Mironov real
    part, the yardstick the table is measured by)."""
    _check_counts(pixels=pixels, repeats=repeats, chunks=chunks)
    started = time.perf_counter()
    grid = Grid.square(pixels)
    model, counter, names = ((retrieve_refined, retrieve_refined_iterations, REFINED_INPUTS)
                             if stage5 else (retrieve, retrieve_iterations, RETRIEVAL_INPUTS))
    model, stage4_text = _with_stage4(model, stage4)
    counter, _ = _with_stage4(counter, stage4)
    echo(f"SMAP–NISAR soil-moisture retrieval (Stages 1–{5 if stage5 else 4}), {pixels:,} "
         f"pixels ({grid.height}×{grid.width}), {np.dtype(dtype).name}, seed {seed}")
    echo(_stages_text(stage4_text, stage5, np.dtype(dtype)))
    t0 = time.perf_counter()
    scene = generate_scene(pixels, seed)
    echo(f"scene: regenerated from (seed, pixel index) in {time.perf_counter() - t0:.2f} s "
         f"(TB noise 1 K, σ0 noise 0.5 dB)")
    if save_scene:
        write_scene(save_scene, scene, grid)
        echo(f"scene written to {save_scene} (try: isokernel run soil-moisture {save_scene} "
             f"retrieved.nc)")
    args = scene_inputs(scene, dtype, names)
    parts = _chunks(pixels, chunks)
    cands, unavailable = _candidates(args, parts, pixels, echo, model)
    for rep in range(repeats):
        for c in cands:
            c.best = min(c.best, _run_pass(c, args, parts, f"{c.name} (pass {rep + 1}/"
                                                           f"{repeats})"))
    in_bytes = sum(np.dtype(a.dtype).itemsize for a in args)
    bytes_per_pixel = in_bytes + len(OUTPUTS) * np.dtype(dtype).itemsize
    bandwidth = memory_bandwidth()
    echo("")
    _table(cands, unavailable, pixels, bytes_per_pixel, bandwidth, echo)
    ref = next(c for c in cands if c.name == "reference")
    rows = accuracy(ref.out["mv"], scene["mv"], scene["vwc"])
    _print_accuracy(rows, echo)
    loops = loop_counts(counter, args, parts)
    _print_loops(loops, echo)
    echo("")
    first = [a[parts[0]].copy() for a in args]  # own storage: measured as the static walk
    compiled = jit(model).lower(*first).compile()
    compiled.measure(*first)
    echo(f"inputs: {', '.join(names)}; chunks of {parts[0].stop:,} pixels")
    echo(str(compiled.report()))
    written = report_figure(figure, scene, ref.out["mv"], grid, rows, echo)
    echo(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return {"mpixel_s": {c.name: pixels / c.best / 1e6 for c in cands},
            "parity": {c.name: _parity(c.out, ref.out) for c in cands},
            "accuracy": rows, "loops": loops, "figure": written}


def _stages_text(stage4_text: str, stage5: bool, dtype) -> str:
    """The line naming what Stages 3–5 run."""
    text = (f"Stage 3: loss-coupling fixed point, a per-pixel while_loop (a pixel stops at a "
            f"relative step of {stage3_tolerance(dtype):.0e}, at most {SWEEPS} sweeps); "
            f"Stage 4: {stage4_text}")
    if stage5:
        text += (f"; Stage 5: Levenberg–Marquardt on (mv, VWC) against TB_V and σ0_HH, "
                 f"Jacobian by jacfwd, a per-pixel while_loop (a pixel stops at a step of "
                 f"{XTOL:.0e} prior SDs, at most {ITERATIONS} iterations)")
    return text


def loop_counts(counter, args, chunks) -> dict[str, tuple[float, int, float]]:
    """Per loop of the retrieval: (mean, max, fraction at the cap) of the
    iterations each pixel ran, from ``counter`` (``retrieve_iterations`` or
    ``retrieve_refined_iterations`` with the model's arguments) on
    ``reference``, chunk by chunk."""
    run = jit(counter, strategy="reference")
    counts: dict = {}
    for part in chunks:
        for name, taken in run(*(a[part] for a in args)).items():
            counts.setdefault(name, []).append(np.asarray(taken))
    caps = {"stage3_sweeps": SWEEPS, "stage5_iterations": ITERATIONS}
    found = {}
    for name, parts in counts.items():
        taken = np.concatenate(parts)
        found[name] = (float(taken.mean()), int(taken.max()), float(np.mean(taken >= caps[name])))
    return found


def _print_loops(loops: dict, echo) -> None:
    echo("iterations per pixel (reference):")
    for name, (mean, most, capped) in loops.items():
        label = name.replace("_", " ").replace("stage", "Stage ")
        echo(f"  {label:<22} mean {mean:5.2f}, max {most:3d}, {100 * capped:.2f} % at the cap")


def _check_counts(**counts: int) -> None:
    """``--pixels``, ``--repeats`` and ``--chunks`` are counts: at least 1
    (zero timed passes would print a table of uninitialised buffers)."""
    for option, value in counts.items():
        if value < 1:
            raise ValueError(f"--{option} must be at least 1, got {value}")


def _with_stage4(model, stage4: str):
    """The retrieval with its Stage-4 choice bound, and a line describing it."""
    if stage4 == "closed-form":
        return model, "exact closed-form inverse of the Mironov real part"
    if stage4 != "table":
        raise ValueError(f"stage4={stage4!r}: use 'table' or 'closed-form'")
    tables = mironov_lookups()
    bound = functools.partial(model, lookups=tables.lookups)
    bound.__name__ = model.__name__
    nodes = np.shape(tables.inverse.values.value)[-1]
    return bound, (f"inverse table ε'→mv ({nodes} nodes per clay layer, a node at the "
                   f"Mironov kink; max inversion error {tables.inverse_error:.1e} m³/m³) and "
                   f"κ = ε''(ε') through the Mironov table")


def _print_accuracy(rows, echo) -> None:
    echo("\naccuracy of the reference retrieval against the truth (m³/m³):")
    echo(f"  {'subset':<22}{'pixels':>10}{'bias':>10}{'RMSE':>10}{'ubRMSE':>10}")
    for label, n, bias, rmse, ub in rows:
        echo(f"  {label:<22}{n:>10,}{bias:>+10.4f}{rmse:>10.4f}{ub:>10.4f}")


def figure_file(path: str) -> str:
    """The file a figure asked for at ``path`` goes to: ``path`` itself;
    ``FIGURE`` inside it when it is a folder; with ``.png`` added when it has
    no suffix (matplotlib adds it, and the file is then not ``path``)."""
    if os.path.isdir(path):
        return os.path.join(path, FIGURE)
    return path if os.path.splitext(path)[1] else path + ".png"


def report_figure(path, scene, mv, grid, rows, echo) -> str | None:
    """Write the figure when matplotlib is installed and echo the path written."""
    if path is None:
        return None
    if importlib.util.find_spec("matplotlib") is None:
        echo("figure: skipped (matplotlib is not installed; pip install 'isokernel[plot]')")
        return None
    written = figure_file(path)
    soil_moisture_figure(written, scene, mv, grid, rows)
    echo(f"figure: {written}")
    return written
