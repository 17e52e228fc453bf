"""``jit``: record once per input signature, plan, compile with a strategy,
and call the cached executable.

The cache key is the argument tree, each leaf's shape and dtype (Python
scalars are weakly typed: keyed by their Python type), and the values of
static arguments. A changed key retraces; after ``RETRACE_WARN_AFTER``
retraces a warning names the argument that keeps changing.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings

import numpy as np

from ..codegen.pixel import pixel_count
from ..control import report_lines as control_lines
from ..ir import BackendUnavailableError, DTypeError, dtypes
from ..ir.pytree import LEAF, leaf_paths, tree_flatten, tree_unflatten
from ..record import current_builder, portable, trace_flat
from ..record.tables import refuse_hardware_modes
from ..transforms import prepare_for_execution
from ..transforms.api import copy_identity
from ..transforms.fusion import fuse
from ..transforms.fusion import report_lines as fused_lines
from . import reductions
from .blocks import BlockRunner
from .devices import Device, device_of, parse_device, require
from .executable import Executable
from .hooks import admission, check_block, choose_block, report_lines, run_probes
from .liveness import shared_outputs
from .planning import plan
from .report import Report
from .strategies import choose, get_strategy, passed_over

RETRACE_WARN_AFTER = 3
_WEAK = (bool, int, float)


class RetraceWarning(UserWarning):
    """A jitted function keeps being recorded again for new arguments."""


def jit(fun=None, *, strategy: str = "auto", device=None, static_argnames=(),
        static_argnums=(), block=None, numerics: str | None = None,
        deterministic_reductions: bool | None = None, **options):
    """Compile ``fun`` for the shapes and dtypes it is called with.

    ``strategy``: ``auto`` or the name of a registered strategy (``isokernel
    devices`` lists them; ``auto`` takes the available one of the inputs'
    device with the highest priority). ``device``: ``cpu``,
    ``cuda``, ``cuda:N`` (``metal``, ``rocm``, ``tpu`` are recognised and
    refused). Inputs, outputs and static arguments may be pytrees. Usable as
    ``@jit`` or ``@jit(strategy=...)``. ``block``: None (run each call
    whole), a number of pixel rows (run axis 0 block by block, same bits), or
    ``"auto"`` (the installed planner sizes blocks to the memory budget).
    ``numerics``: ``native`` (each platform's math library) or ``portable``
    (every transcendental recorded as one shared decomposition into basic
    operations: the same bits on every strategy); by default the model's own
    ``@isokernel.numerics(...)`` default, else the enclosing ``with
    isokernel.numerics(...)``, else ``native``. ``deterministic_reductions``:
    reductions over the pixel axis combine partial results in a fixed tree
    of fixed blocks (``backends.reductions``), the same bits for every worker
    count and device; by default ``ISOKERNEL_DETERMINISTIC_REDUCTIONS``,
    else off (the reference's NumPy order, run whole). Other keyword options
    go to the strategy (``workers=``, ``contract=``, ``tile_rows=``).
    """
    if fun is None:
        return functools.partial(jit, strategy=strategy, device=device,
                                 static_argnames=static_argnames,
                                 static_argnums=static_argnums, block=block,
                                 numerics=numerics,
                                 deterministic_reductions=deterministic_reductions, **options)
    return Jitted(fun, strategy, device, static_argnames, static_argnums, options, block,
                  numerics, deterministic_reductions)


class Jitted:
    def __init__(self, fun, strategy, device, static_argnames, static_argnums, options,
                 block=None, numerics=None, deterministic_reductions=None):
        check_block(block)
        self.block = block
        reductions.resolve(deterministic_reductions)  # checks the value now
        self.deterministic_reductions = deterministic_reductions
        if strategy != "auto":
            get_strategy(strategy)  # raises naming the registered strategies
        self.fun = fun
        self.strategy = strategy
        self.device = require(parse_device(device)) if device is not None else None
        if self.device is not None and strategy != "auto":
            choose(strategy, self.device)
        self.options = dict(options)
        self.numerics = portable.check_mode(numerics) if numerics is not None else None
        self._default_numerics = portable.default_of(fun)
        self._sig = _signature(fun)
        self._kinds = _parameter_kinds(self._sig)
        self._static = _static_names(self._sig, static_argnames, static_argnums, fun)
        self._cache: dict = {}
        self._plain: dict = {}  # the small-call fast path: see ``__call__``
        self._lock = threading.Lock()  # one recording per key, however many threads call
        self._last_key = None
        self.retraces = 0
        copy_identity(self, fun)
        if not hasattr(self, "__name__"):  # a functools.partial, a callable object
            self.__name__ = _function_name(fun)

    def __call__(self, *args, **kwargs):
        if current_builder() is not None:  # inside a recording: inline
            if self.numerics is None:
                return self.fun(*args, **kwargs)
            with portable.numerics(self.numerics):
                return self.fun(*args, **kwargs)
        if not kwargs:  # the fast path: positional NumPy arrays, a call seen before
            plain = self._plain_key(args)
            compiled = self._plain.get(plain) if plain is not None else None
            if compiled is not None:
                return compiled.call_plain(args)
        names, dynamic, statics = self._split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        key = self._key(names, treedef, leaves, statics)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile(key, names, dynamic, statics)
        if not kwargs and plain is not None and compiled.plain_ok:
            self._plain[plain] = compiled
        return compiled.call_flat(leaves)

    def _plain_key(self, args) -> tuple | None:
        """The fast path's key: each argument's shape and dtype when every one
        is a plain NumPy array in native byte order (and no argument is
        static), with the reduction and numerics modes; else None."""
        if self._static:
            return None
        key = []
        for a in args:
            if type(a) is not np.ndarray or not a.dtype.isnative:
                return None
            key.append((a.shape, a.dtype))
        return (*key, self.reductions_mode()[0], self.numerics_mode())

    def _compile(self, key, names, dynamic, statics) -> Compiled:
        """Record and compile for ``key`` once: concurrent first calls wait
        for the one recording instead of each making their own."""
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is None:
                compiled = self._lower(key, names, dynamic, statics).compile()
                self._cache[key] = compiled
            return compiled

    def lower(self, *args, **kwargs) -> Lowered:
        """Record for these arguments without compiling; ``.graph`` is the
        recording, ``.compile()`` the next step."""
        names, dynamic, statics = self._split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        key = self._key(names, treedef, leaves, statics)
        return self._lower(key, names, dynamic, statics)

    def numerics_mode(self) -> str:
        """The numerics a call made now records with: this jit's own, else
        the enclosing ``numerics(...)``, else the model's default, else
        ``native``."""
        return self.numerics or portable.explicit() or self._default_numerics or "native"

    def reductions_mode(self) -> tuple[str, str]:
        """(mode, source) of pixel-axis reductions for a call made now."""
        return reductions.resolve(self.deterministic_reductions)

    def _key(self, names, treedef, leaves, statics):
        try:
            leaf_keys = tuple(map(_leaf_key, leaves))
        except _MaskedArgument:
            raise DTypeError(self._masked_message(names, treedef, leaves)) from None
        return (names, treedef, leaf_keys, tuple((n, _Static(v)) for n, v in statics),
                self.reductions_mode()[0], self.numerics_mode())

    def _masked_message(self, names, treedef, leaves) -> str:
        dynamic = tree_unflatten(treedef, leaves)
        paths = [p for n, a in zip(names, dynamic) for p in leaf_paths(a, n)]
        name = next(p for p, x in zip(paths, leaves) if isinstance(x, np.ma.MaskedArray))
        return (f"jit({self.__name__}): argument '{name}' is a NumPy masked array; isokernel "
                f"computes on plain arrays and would drop its mask (masked values would be "
                f"computed as data). Pass {name}.filled(np.nan) to carry masked values as "
                f"NaN, or pass {name}.data and the mask separately and combine them with "
                f"inp.where")

    def _lower(self, key, names, dynamic, statics) -> Lowered:
        arg_names = [p for n, a in zip(names, dynamic) for p in leaf_paths(a, n)]
        self._note_trace(key, arg_names)
        leaves, _ = tree_flatten(dynamic)
        device = self.device or _request_device(self.strategy, leaves)
        strategy = choose(self.strategy, device)
        with portable.numerics(key[-1]):
            graph, out_tree, captures = trace_flat(self._bind_statics(names, statics), dynamic,
                                                   names=arg_names, name=self.__name__)
        if captures:
            raise TypeError(f"jit({self.__name__}) closed over a value traced elsewhere; pass "
                            f"it as an argument")
        graph = fuse(prepare_for_execution(graph))
        return Lowered(self, graph, key, out_tree, strategy, device)

    def _split(self, args, kwargs):
        """(dynamic parameter names, dynamic values, static items)."""
        if not kwargs and not self._static:
            return _positional_names(self._kinds, len(args)), args, ()
        if self._sig is None:
            raise TypeError(f"jit({self.__name__}): keyword or static arguments need a "
                            f"function with an inspectable signature")
        bound = self._sig.bind(*args, **kwargs)
        statics = tuple((n, v) for n, v in bound.arguments.items() if n in self._static)
        dynamic = [(n, v) for n, v in bound.arguments.items() if n not in self._static]
        for name, value in statics:
            _check_hashable(self.__name__, name, value)
        return tuple(n for n, _ in dynamic), tuple(v for _, v in dynamic), statics

    def _bind_statics(self, names, statics):
        """``fun`` as a function of the dynamic arguments alone."""
        if self._sig is None or (not statics and names == _positional_names(self._kinds,
                                                                             len(names))):
            return self.fun

        def call(*dynamic):
            arguments = dict(zip(names, dynamic)) | dict(statics)
            ordered = {p: arguments[p] for p in self._sig.parameters if p in arguments}
            bound = inspect.BoundArguments(self._sig, ordered)
            return self.fun(*bound.args, **bound.kwargs)
        return call

    def _note_trace(self, key, leaf_names) -> None:
        previous, self._last_key = self._last_key, key
        if previous is None:
            return
        self.retraces += 1
        if self.retraces >= RETRACE_WARN_AFTER:
            change = _what_changed(previous, key, leaf_names)
            warnings.warn(f"jit({self.__name__}) recorded again ({self.retraces} retraces): "
                          f"{change}. Keep shapes and dtypes fixed, or mark the argument "
                          f"static with static_argnames",
                          RetraceWarning, stacklevel=4)


class Lowered:
    """A recorded graph with the strategy it will compile for."""

    def __init__(self, jitted: Jitted, graph, key, out_tree, strategy, device: Device):
        self.jitted = jitted
        self.graph = graph
        self.key = key
        self.out_tree = out_tree
        self.strategy = strategy
        self.device = device
        self.numerics = key[-1]
        self.reductions = key[-2]
        mode, source = jitted.reductions_mode()
        self.reductions_source = source if mode == self.reductions else "default"
        self.options = _strategy_options(strategy, jitted.options, self.reductions)

    def compile(self) -> Compiled:
        refuse_hardware_modes(self.graph, self.strategy.device)
        accepted = plan(self.graph, self.strategy.profile)
        options = self.options
        if "device" in self.strategy.options:  # the device the request named
            options = {**options, "device": self.device.index or 0}
        executable = self.strategy.build(accepted, options)
        if not isinstance(executable, Executable):
            raise TypeError(f"strategy '{self.strategy.name}': its compiler returned a "
                            f"{type(executable).__name__}, which is not an isokernel.Executable "
                            f"(call_flat, measure, source, report_lines, plan, static_liveness, "
                            f"measured_liveness, forms_run); subclass isokernel.ExecutableBase")
        return Compiled(self, executable, self.jitted.block)

    def as_text(self) -> str:
        return str(self.graph)


class Compiled:
    """An executable for one input signature."""

    def __init__(self, lowered: Lowered, executable: Executable, block=None):
        self.lowered = lowered
        self.graph = lowered.graph
        # a strategy that splits a graph binds capsules per node; its plan is the one that ran
        self.plan = executable.plan
        self.executable = executable
        self._in_dtypes = [x.aval.dtype for x in self.graph.inputs]
        self.block_choice = choose_block(self, block)
        chosen = self.block_choice.block if self.block_choice is not None else None
        self.blocks = None if chosen is None else BlockRunner(self, chosen)
        self._run = self.blocks or executable
        self._shared = shared_outputs(self.graph)
        # calls run whole need room for their buffers; blocks were sized by the planner
        self._admit = admission(self) if self.blocks is None else None
        self._unflatten = _unflattener(lowered.out_tree)
        # the fast path hands host arrays straight over; device strategies convert
        self.plain_ok = lowered.device.kind == "cpu"

    def __call__(self, *args, **kwargs):
        jitted = self.lowered.jitted
        names, dynamic, statics = jitted._split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        key = jitted._key(names, treedef, leaves, statics)
        if key != self.lowered.key:
            names = list(self.graph.input_names)
            raise TypeError(f"this compiled {jitted.__name__} was built for other argument "
                            f"shapes, dtypes or static values: "
                            f"{_what_changed(self.lowered.key, key, names)}")
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

    def measure(self, *args, **kwargs):
        """Run once with live-buffer tracking (strategies that support it)."""
        names, dynamic, _ = self.lowered.jitted._split(args, kwargs)
        leaves, _ = tree_flatten(dynamic)
        arrays = _arrays(leaves, self._in_dtypes)
        outs = self.executable.measure(arrays)
        run_probes(self, arrays)
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
                   *self.executable.report_lines(),
                   *report_lines(self)])

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


def _unflattener(out_tree):
    """Outputs into the function's output structure; the two common ones
    (one array, a flat tuple) without a tree walk."""
    if out_tree == LEAF:
        return lambda outs: outs[0]
    if out_tree.kind == "tuple" and all(c == LEAF for c in out_tree.children):
        return tuple
    return functools.partial(tree_unflatten, out_tree)


def _on_device(x) -> bool:
    return hasattr(x, "__cuda_array_interface__")


def _request_device(strategy: str, leaves) -> Device:
    """The inputs' device; a GPU strategy named explicitly for host inputs
    runs on its device (the inputs are uploaded, the report says so)."""
    device = device_of(leaves)
    if device.kind == "cpu" and strategy != "auto" and get_strategy(strategy).device != "cpu":
        return Device(get_strategy(strategy).device)
    return device


def _arrays(leaves, dtypes_) -> list:
    """NumPy arrays of the declared dtypes in native byte order (a big-endian
    array is converted, a copy); device arrays pass untouched."""
    return [x if (type(x) is np.ndarray and x.dtype.isnative) or _on_device(x)
            else np.asarray(x, dtype=d) for x, d in zip(leaves, dtypes_)]


def _results(outs, arrays, shared=()) -> list:
    """Outputs where the inputs were: device results stay on the device when
    any input was a device array, and come back to the host when every input
    was a host array (a GPU strategy called with NumPy arrays). The outputs
    at ``shared`` positions (``liveness.shared_outputs``) are copied."""
    keep = any(_on_device(a) for a in arrays)
    results = [o if keep and _on_device(o) else (o.get() if _on_device(o) else np.asarray(o))
               for o in outs]
    for k in shared:
        results[k] = results[k].copy()
    return results


class _MaskedArgument(TypeError):
    """A masked array among the arguments (``Jitted._key`` names it)."""


class _Static:
    """A static argument as a cache key. Equal to another when both are the
    same value of the same type: NaN equals NaN (a static ``float('nan')``
    does not record again on every call), and ``1``, ``1.0`` and ``True``
    stay three keys (they record different graphs)."""

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value = value
        self.key = _static_identity(value)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Static) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return repr(self.value)


def _static_identity(value):
    if isinstance(value, tuple):
        return tuple, tuple(_static_identity(v) for v in value)
    if isinstance(value, (float, complex, np.inexact)) and value != value:
        return type(value), "nan"
    return type(value), value


def _leaf_key(x):
    if type(x) is np.ndarray:
        return x.shape, (x.dtype if x.dtype.isnative else x.dtype.newbyteorder("="))
    if isinstance(x, _WEAK) and not isinstance(x, np.generic):
        return (type(x),)
    if isinstance(x, np.ma.MaskedArray):
        raise _MaskedArgument
    if _on_device(x):  # the same shape on another device is another compilation
        return tuple(x.shape), np.dtype(x.dtype), "cuda"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return tuple(x.shape), np.dtype(x.dtype)
    array = np.asarray(x)
    return array.shape, array.dtype


def _signature(fun):
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None


def _parameter_kinds(sig) -> tuple | None:
    """Each parameter's (name, kind), all that naming positional arguments
    needs: hashable whatever the defaults are (an array default makes the
    ``Signature`` itself unhashable)."""
    if sig is None:
        return None
    return tuple((p.name, p.kind) for p in sig.parameters.values())


@functools.lru_cache(maxsize=256)
def _cached_positional_names(kinds, n: int) -> tuple[str, ...]:
    names = []
    for name, kind in kinds:
        if kind is inspect.Parameter.VAR_POSITIONAL:
            names += [f"{name}[{i}]" for i in range(n - len(names))]
            break
        if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(name)
    names += [f"arg{i}" for i in range(len(names), n)]
    return tuple(names[:n])


def _positional_names(kinds, n: int) -> tuple[str, ...]:
    """The names of ``n`` positional arguments; ``kinds`` from ``_parameter_kinds``."""
    if kinds is None:
        return tuple(f"arg{i}" for i in range(n))
    return _cached_positional_names(kinds, n)


def _static_names(sig, static_argnames, static_argnums, fun) -> frozenset[str]:
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if (names or nums) and sig is None:
        raise TypeError(f"jit({_function_name(fun)}): static arguments need a "
                        f"function with an inspectable signature")
    params = list(sig.parameters) if sig is not None else []
    for i in nums:
        if not -len(params) <= i < len(params):
            raise ValueError(f"static_argnums {i} is out of range for {len(params)} parameters")
        names.add(params[i])
    unknown = names - set(params)
    if unknown:
        raise ValueError(f"static_argnames {sorted(unknown)} are not parameters of "
                         f"{_function_name(fun)}{sig}")
    return frozenset(names)


def _function_name(fun) -> str:
    """The name of a user's callable for a message (a partial or another
    callable object has none: its repr)."""
    try:
        return fun.__name__
    except AttributeError:
        return repr(fun)


def _check_hashable(fname: str, name: str, value) -> None:
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"jit({fname}): static argument '{name}' is a {type(value).__name__}, "
                        f"which is not hashable; pass a tuple or another hashable value"
                        ) from None


def _strategy_options(strategy, options: dict, mode: str) -> dict:
    """The options a strategy is built with: the user's, and the reduction
    mode for strategies that implement it."""
    if "reductions" in options:
        raise TypeError("jit: choose the reduction order with deterministic_reductions=True "
                        "(or ISOKERNEL_DETERMINISTIC_REDUCTIONS=1), not reductions=")
    if "reductions" in strategy.options:
        return {**options, "reductions": mode}
    if mode == "tree":
        raise BackendUnavailableError(f"strategy '{strategy.name}' does not implement "
                                      f"deterministic reductions; pick a CPU strategy or "
                                      f"turn them off")
    return dict(options)


def _what_changed(old_key, new_key, leaf_names) -> str:
    old_names, old_tree, old_leaves, old_static, old_red, old_numerics = old_key
    new_names, new_tree, new_leaves, new_static, new_red, new_numerics = new_key
    if old_numerics != new_numerics:
        return f"numerics changed from {old_numerics} to {new_numerics}"
    if old_red != new_red:
        return f"reductions changed from {old_red} to {new_red} ({reductions.ENV} or the " \
               f"deterministic_reductions option)"
    if old_static != new_static:
        before, after = dict(old_static), dict(new_static)
        for name in after:
            if before.get(name) != after[name]:
                return f"static argument '{name}' changed from {before.get(name)!r} to " \
                       f"{after[name]!r}"
    if old_names != new_names or old_tree != new_tree:
        return f"the argument structure changed from {old_names} to {new_names}"
    for name, a, b in zip(leaf_names, old_leaves, new_leaves):
        if a != b:
            return f"argument '{name}' changed from {_describe(a)} to {_describe(b)}"
    return "nothing visible changed"


def _describe(leaf_key) -> str:
    if len(leaf_key) == 1:
        return f"a Python {leaf_key[0].__name__}"
    shape, dtype = leaf_key[:2]
    try:
        short = dtypes.SHORT[dtypes.canonical(dtype)]
    except TypeError:
        short = str(dtype)
    return f"{short}{list(shape)}"
