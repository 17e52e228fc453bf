"""A recording lowered for one strategy, and its compilation.

``Lowered``: the recorded graph, prepared by the strategy (``spec.prepare``:
the graph it runs), with the strategy, device and options. ``compile()``
plans that graph once (``spec.plan``), builds the executable from that plan
(``spec.build``), and wraps it as ``Compiled``: the call path (blocks and
admission from ``deploy``), the report, ``measure`` and ``source``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from .. import deploy
from ..backends import reductions
from ..backends.devices import Device
from ..backends.executable import Executable
from ..backends.liveness import shared_outputs
from ..backends.strategies import passed_over
from ..codegen.pixel import pixel_count
from ..control import report_lines as control_lines
from ..ir import BackendUnavailableError
from ..ir.pytree import LEAF, annotations, has_annotations, tree_flatten, tree_unflatten
from ..record.tables import refuse_hardware_modes
from ..transforms.fusion import report_lines as fused_lines
from .blocks import BlockRunner
from .report import Report


class Lowered:
    """A recorded graph with the strategy it will compile for: ``recorded``
    as the transforms left it, ``graph`` as the strategy runs it
    (``strategy.prepare(recorded)``)."""

    def __init__(self, jitted, recorded, key, out_tree, strategy, device: Device,
                 polymorphic: bool | str = False):
        self.jitted = jitted
        self.recorded = recorded
        self.graph = strategy.prepare(recorded)
        self.key = key
        self.out_tree = out_tree
        self.strategy = strategy
        self.device = device
        self.numerics = key.numerics
        self.reductions = key.reductions
        mode, source = jitted.reductions_mode()
        self.reductions_source = source if mode == self.reductions else "default"
        self.options = _strategy_options(strategy, jitted.options, self.reductions)
        if "device" in strategy.options:  # the device the request named
            self.options["device"] = device.index or 0
        self.polymorphic = polymorphic
        if polymorphic and "polymorphic" in strategy.options:
            # "asked": jit(polymorphic=True) or a ShapeDtype with a None axis (every graph
            # shares its compiled code); True: the automatic rule (row-local graphs)
            self.options["polymorphic"] = polymorphic

    def compile(self) -> Compiled:
        refuse_hardware_modes(self.graph, self.strategy.device)
        plan = self.strategy.plan(self.graph, self.options)
        executable = self.strategy.build(plan, self.options)
        if not isinstance(executable, Executable):
            raise TypeError(f"strategy '{self.strategy.name}': its compiler returned a "
                            f"{type(executable).__name__}, which is not an isokernel.Executable "
                            f"(call_flat, measure, source, report_lines, plan, static_liveness, "
                            f"measured_liveness, forms_run); subclass isokernel.ExecutableBase")
        return Compiled(self, plan, executable, self.jitted.block)

    def as_text(self) -> str:
        return str(self.graph)


class Compiled:
    """An executable for one input signature."""

    def __init__(self, lowered: Lowered, plan, executable: Executable, block=None):
        self.lowered = lowered
        self.graph = lowered.graph
        self.plan = plan
        self.executable = executable
        self._in_dtypes = [x.aval.dtype for x in self.graph.inputs]
        self.block_choice = None if block is None else deploy.plan_block(self, block)
        chosen = self.block_choice.block if self.block_choice is not None else None
        self.blocks = None if chosen is None else BlockRunner(self, chosen)
        self._run = self.blocks or executable
        self._shared = shared_outputs(self.graph)
        # calls run whole need room for their buffers; blocks were sized by the planner
        self._admit = deploy.admission(self) if self.blocks is None else None
        self._unflatten = _unflattener(lowered.out_tree)
        # the fast path hands host arrays straight over; device strategies convert
        self.plain_ok = lowered.device.kind == "cpu"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self.lowered.jitted
        names, dynamic, statics = jitted.split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        key = jitted.key(names, treedef, leaves, statics)
        if key != self.lowered.key:
            names = list(self.graph.input_names)
            raise TypeError(f"this compiled {jitted.__name__} was built for other argument "
                            f"shapes, dtypes or static values: "
                            f"{key.changed_from(self.lowered.key, names)}")
        return self.call_flat(leaves)

    def call_flat(self, leaves):
        arrays = _arrays(leaves, self._in_dtypes)
        if self._admit is not None:
            self._admit()
        outs = self._run.call_flat(arrays)
        return tree_unflatten(self.lowered.out_tree, _results(outs, arrays, self._shared))

    def call_plain(self, arrays: tuple):
        """``call_flat`` for positional NumPy arrays of exactly the recorded
        shapes and dtypes, on a CPU strategy (``Jitted``'s fast path): no
        conversion, no pytree walk."""
        if self._admit is not None:
            self._admit()
        outs = list(self._run.call_flat(arrays))
        for k in self._shared:
            outs[k] = outs[k].copy()
        return self._unflatten(outs)

    def measure(self, *args: Any, **kwargs: Any) -> Any:
        """Run once with live-buffer tracking (strategies that support it)."""
        names, dynamic, _ = self.lowered.jitted.split(args, kwargs)
        leaves, _ = tree_flatten(dynamic)
        arrays = _arrays(leaves, self._in_dtypes)
        outs = self.executable.measure(arrays)
        deploy.probe(self, arrays)
        return tree_unflatten(self.lowered.out_tree, _results(outs, arrays, self._shared))

    def source(self) -> str:
        """The code this strategy generated for the graph."""
        return self.executable.source()

    def report(self) -> Report:
        strategy, profile = self.lowered.strategy, self.plan.profile
        providers = ", ".join(profile.providers)
        trust = ", ".join(sorted(profile.accepted_trust))
        requested = self.lowered.jitted.strategy
        return Report(
            function=self.graph.name, strategy=strategy.name, requested=requested,
            passed_over=passed_over(strategy, self.lowered.device) if requested == "auto"
            else [],
            device=str(self.lowered.device),
            contract=strategy.contract,
            profile=f"{profile.name} (providers {providers}; accepts trust: {trust})",
            nodes=len(self.graph.nodes), inputs=len(self.graph.inputs),
            outputs=len(self.graph.outputs), capsules=self.plan.capsule_counts(),
            static_liveness=self.executable.static_liveness,
            measured_liveness=self.executable.measured_liveness,
            extra=[("numerics", NUMERICS_TEXT[self.lowered.numerics]),
                   self._reductions_line(),
                   *fused_lines(self.graph, self.executable.forms_run),
                   *control_lines(self.graph),
                   *_unit_lines(self.lowered),
                   *self.executable.report_lines(),
                   *deploy.report_lines(self)])

    def _reductions_line(self) -> tuple[str, str]:
        pixels = pixel_count(self.graph)
        count = sum(reductions.is_pixel_reduction(n, pixels) for n in self.graph.nodes)
        return reductions.report_line(self.lowered.reductions, self.lowered.reductions_source,
                                      count)


NUMERICS_TEXT = {
    "native": "native: transcendentals call each platform's math library",
    "portable": "portable: every transcendental recorded as its shared branchless "
                "decomposition into IEEE basic ops (identical bits on every strategy)",
}


def _unit_lines(lowered: Lowered) -> list[tuple[str, str]]:
    """The units of the inputs and outputs, when any is a quantity
    (``isokernel.units``: an annotated leaf); a bare one says ``bare``."""
    ins, outs = lowered.key.tree, lowered.out_tree
    if not (has_annotations(ins) or has_annotations(outs)):
        return []
    named = [item for name, child in zip(lowered.key.names, ins.children)
             for item in annotations(child, name)]
    return [("units in", _units_text(named)),
            ("units out", _units_text(annotations(outs, "out")))]


def _units_text(items) -> str:
    return ", ".join(f"{path or 'out'} {note or 'bare'}" for path, note in items) or "none"


def _unflattener(out_tree):
    """Outputs into the function's output structure; the two common ones
    (one array, a flat tuple) without a tree walk."""
    if out_tree == LEAF:
        return lambda outs: outs[0]
    if out_tree.kind == "tuple" and all(c == LEAF for c in out_tree.children):
        return tuple
    return functools.partial(tree_unflatten, out_tree)


def on_device(x) -> bool:
    """Whether ``x`` is a device (CUDA) array."""
    return hasattr(x, "__cuda_array_interface__")


def _arrays(leaves, dtypes_) -> list:
    """NumPy arrays of the declared dtypes in native byte order (a big-endian
    array is converted, a copy); device arrays pass untouched."""
    return [x if (type(x) is np.ndarray and x.dtype.isnative) or on_device(x)
            else np.asarray(x, dtype=d) for x, d in zip(leaves, dtypes_)]


def _results(outs, arrays, shared=()) -> list:
    """Outputs where the inputs were: device results stay on the device when
    any input was a device array, and come back to the host when every input
    was a host array (a GPU strategy called with NumPy arrays). The outputs
    at ``shared`` positions (``liveness.shared_outputs``) are copied."""
    keep = any(on_device(a) for a in arrays)
    results = [o if keep and on_device(o) else (o.get() if on_device(o) else np.asarray(o))
               for o in outs]
    for k in shared:
        results[k] = results[k].copy()
    return results


def _strategy_options(strategy, options: dict, mode: str) -> dict:
    """The options a strategy is built with: the user's (``contract=``, the
    old name of ``fma=``, still accepted with a warning), and the reduction
    mode for strategies that implement it."""
    if "reductions" in options:
        raise TypeError("jit: choose the reduction order with deterministic_reductions=True "
                        "(or ISOKERNEL_DETERMINISTIC_REDUCTIONS=1), not reductions=")
    options = dict(options)
    if "contract" in options:
        if "fma" in options:
            raise TypeError("jit: pass fma= alone (contract= is its old name)")
        warnings.warn("jit(contract=...) is now jit(fma=...); contract= will stop working in "
                      "the next release", DeprecationWarning, stacklevel=6)
        options["fma"] = options.pop("contract")
    if "reductions" in strategy.options:
        return {**options, "reductions": mode}
    if mode == "tree":
        raise BackendUnavailableError(f"strategy '{strategy.name}' does not implement "
                                      f"deterministic reductions; pick a CPU strategy or "
                                      f"turn them off")
    return options
