"""``jit``: record once per input signature, lower for a strategy, compile,
and call the cached compilation.

The compile-cache key (``CallKey``) is the argument tree, each leaf's shape
and dtype (Python scalars are weakly typed: keyed by their Python type), the
values of static arguments, and the reduction and numerics modes of the call.
A changed key records again; after ``RETRACE_WARN_AFTER`` retraces a warning
names the argument that keeps changing.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

import numpy as np

from ..backends import reductions
from ..backends.devices import Device, device_of, parse_device, require
from ..backends.strategies import choose, get_strategy
from ..ir import DTypeError, dtypes
from ..ir.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten
from ..record import ShapeDtype, current_builder, portable, trace_flat
from ..transforms import prepare_for_execution
from ..transforms.api import copy_identity
from .compile import Compiled, Lowered, on_device

_P = ParamSpec("_P")
_R = TypeVar("_R")

RETRACE_WARN_AFTER = 3
NOMINAL_ROWS = 1024
"""The batch size a polymorphic ``ShapeDtype`` (axis 0 None) records at."""


class RetraceWarning(UserWarning):
    """A jitted function keeps being recorded again for new arguments."""


@overload
def jit(fun: Callable[_P, _R], *, strategy: str = "auto", device: str | Device | None = None,
        static_argnames: str | Iterable[str] = (), static_argnums: int | Iterable[int] = (),
        block: int | str | None = None, numerics: str | None = None,
        deterministic_reductions: bool | None = None, polymorphic: bool | None = None,
        **options: Any) -> Jitted[_P, _R]: ...


@overload
def jit(fun: None = None, *, strategy: str = "auto", device: str | Device | None = None,
        static_argnames: str | Iterable[str] = (), static_argnums: int | Iterable[int] = (),
        block: int | str | None = None, numerics: str | None = None,
        deterministic_reductions: bool | None = None, polymorphic: bool | None = None,
        **options: Any) -> Callable[[Callable[_P, _R]], Jitted[_P, _R]]: ...


def jit(fun: Callable[_P, _R] | None = None, *, strategy: str = "auto",
        device: str | Device | None = None, static_argnames: str | Iterable[str] = (),
        static_argnums: int | Iterable[int] = (), block: int | str | None = None,
        numerics: str | None = None, deterministic_reductions: bool | None = None,
        polymorphic: bool | None = None,
        **options: Any) -> Jitted[_P, _R] | Callable[[Callable[_P, _R]], Jitted[_P, _R]]:
    """Compile ``fun`` for the shapes and dtypes it is called with.

    ``strategy``: ``auto`` or the name of a registered strategy (``isokernel
    devices`` lists them; ``auto`` takes the available one of the inputs'
    device with the highest priority). ``device``: ``cpu``,
    ``cuda``, ``cuda:N`` (``metal``, ``rocm``, ``tpu``, ``trainium`` are recognised and
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
    else off (the reference's NumPy order, run whole). ``polymorphic``: the
    batch (pixel) axis, axis 0, is a run-time size of the compiled code, so a
    new batch size records again (milliseconds) but compiles no new C where
    the graph is row-local (``native`` then runs its row-region kernels,
    which take the row range at run time; the report's ``program`` line says
    so, or why not); None (the default) turns it on for a signature the
    second time only axis 0 of the arguments changes (row-local graphs;
    others compile per size, fastest, and warn from the fourth size on),
    True from the first call and for every graph (a graph that works across
    rows then runs its row regions compiled, the rest by the reference
    rules: one compile for every batch size), False never. Other keyword options go to the strategy
    (``workers=``, ``fma=``, ``tile_rows=``).
    """
    if fun is None:
        return functools.partial(jit, strategy=strategy, device=device,
                                 static_argnames=static_argnames,
                                 static_argnums=static_argnums, block=block,
                                 numerics=numerics,
                                 deterministic_reductions=deterministic_reductions,
                                 polymorphic=polymorphic, **options)
    return Jitted(fun, strategy, device, static_argnames, static_argnums, options, block,
                  numerics, deterministic_reductions, polymorphic)


class Jitted(Generic[_P, _R]):
    """``jit(fun)``: call it as ``fun``; ``lower(*args)`` records without
    compiling (``.compile()`` the next step)."""

    def __init__(self, fun: Callable[_P, _R], strategy: str, device: str | Device | None,
                 static_argnames: str | Iterable[str], static_argnums: int | Iterable[int],
                 options: dict[str, Any], block: int | str | None = None,
                 numerics: str | None = None, deterministic_reductions: bool | None = None,
                 polymorphic: bool | None = None) -> None:
        check_block(block)
        if polymorphic not in (None, True, False):
            raise ValueError(f"polymorphic must be None (automatic), True or False, got "
                             f"{polymorphic!r}")
        self.polymorphic = polymorphic
        self._families: dict = {}  # CallKey.family() -> the keys compiled in it
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

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
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
        names, dynamic, statics = self.split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        key = self.key(names, treedef, leaves, statics)
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
                self._note_batch_compile(compiled)
            return compiled

    def _note_batch_compile(self, compiled) -> None:
        """A polymorphic batch size that still compiled its own code: say why
        (the report's ``program`` line says it too), from the
        ``RETRACE_WARN_AFTER``-th size of a family on (a last, smaller batch
        is no reason to warn)."""
        obstacle = getattr(compiled.executable, "batch_obstacle", None)
        key = compiled.lowered.key
        if compiled.lowered.polymorphic and obstacle and \
                len(self._families[key.family()]) > RETRACE_WARN_AFTER:
            warnings.warn(f"jit({self.__name__}): a new batch size compiled its own C code: "
                          f"{obstacle}. The automatic rule shares compiled code across batch "
                          f"sizes for graphs whose every batch-axis value is computed row by "
                          f"row; jit(..., polymorphic=True) shares it for this graph too (its "
                          f"row regions compiled once, what works across rows by the "
                          f"reference rules)",
                          RetraceWarning, stacklevel=4)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Record for these arguments without compiling; ``.graph`` is the
        recording, ``.compile()`` the next step. A ``ShapeDtype`` whose axis
        0 is None stands for any batch size: the call records at
        ``NOMINAL_ROWS`` rows with the batch axis polymorphic, so compiling
        it builds the kernels every batch size then runs."""
        names, dynamic, statics = self.split(args, kwargs)
        leaves, treedef = tree_flatten(dynamic)
        nominal = any(isinstance(x, ShapeDtype) and x.polymorphic for x in leaves)
        if nominal:
            if self.polymorphic is False:
                raise ValueError(f"jit({self.__name__}).lower: a ShapeDtype with a None batch "
                                 f"axis needs a polymorphic batch axis; this jit has "
                                 f"polymorphic=False (give the size, or drop polymorphic=)")
            leaves = [x.sized(NOMINAL_ROWS) if isinstance(x, ShapeDtype) else x for x in leaves]
            dynamic = tree_unflatten(treedef, leaves)
        key = self.key(names, treedef, leaves, statics)
        return self._lower(key, names, dynamic, statics, polymorphic="asked" if nominal else None)

    def numerics_mode(self) -> str:
        """The numerics a call made now records with: this jit's own, else
        the enclosing ``numerics(...)``, else the model's default, else
        ``native``."""
        return self.numerics or portable.explicit() or self._default_numerics or "native"

    def reductions_mode(self) -> tuple[str, str]:
        """(mode, source) of pixel-axis reductions for a call made now."""
        return reductions.resolve(self.deterministic_reductions)

    def key(self, names, treedef, leaves, statics) -> CallKey:
        """The compile-cache key of a call (``split``'s parts, the leaves flat)."""
        try:
            leaf_keys = tuple(map(leaf_key, leaves))
        except MaskedArgument:
            raise DTypeError(self._masked_message(names, treedef, leaves)) from None
        return CallKey(names, treedef, leaf_keys, tuple((n, Static(v)) for n, v in statics),
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

    def is_polymorphic(self, key) -> bool | str:
        """Whether ``key`` compiles with a polymorphic batch axis: this jit's
        choice (``"asked"``: every graph shares its compiled code), else
        (automatic, True: row-local graphs share it) whether another key of
        its family (the same but for axis 0 of the arguments) was compiled
        before."""
        if self.polymorphic is not None:
            return "asked" if self.polymorphic else False
        seen = self._families.get(key.family(), ())
        return any(k != key for k in seen)

    def _lower(self, key, names, dynamic, statics, polymorphic: bool | str | None = None
               ) -> Lowered:
        arg_names = [p for n, a in zip(names, dynamic) for p in leaf_paths(a, n)]
        polymorphic = self.is_polymorphic(key) if polymorphic is None else polymorphic
        self._note_trace(key, arg_names, polymorphic)
        self._families.setdefault(key.family(), set()).add(key)
        leaves, _ = tree_flatten(dynamic)
        device = self.device or _request_device(self.strategy, leaves)
        strategy = choose(self.strategy, device)
        with portable.numerics(key.numerics):
            graph, out_tree, captures = trace_flat(self._bind_statics(names, statics), dynamic,
                                                   names=arg_names, name=self.__name__)
        if captures:
            raise TypeError(f"jit({self.__name__}) closed over a value traced elsewhere; pass "
                            f"it as an argument")
        return Lowered(self, prepare_for_execution(graph), key, out_tree, strategy, device,
                       polymorphic)

    def split(self, args, kwargs):
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

    def _note_trace(self, key, leaf_names, polymorphic: bool) -> None:
        previous, self._last_key = self._last_key, key
        if previous is None:
            return
        self.retraces += 1
        if polymorphic and previous.family() == key.family():
            return  # a new batch size: recorded again, its compiled kernels shared
        if self.retraces >= RETRACE_WARN_AFTER:
            change = key.changed_from(previous, leaf_names)
            warnings.warn(f"jit({self.__name__}) recorded again ({self.retraces} retraces): "
                          f"{change}. Keep shapes and dtypes fixed, or mark the argument "
                          f"static with static_argnames",
                          RetraceWarning, stacklevel=4)


def _request_device(strategy: str, leaves) -> Device:
    """The inputs' device; a GPU strategy named explicitly for host inputs
    runs on its device (the inputs are uploaded, the report says so)."""
    device = device_of(leaves)
    if device.kind == "cpu" and strategy != "auto" and get_strategy(strategy).device != "cpu":
        return Device(get_strategy(strategy).device)
    return device


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

def check_block(block) -> None:
    """``block`` is None, ``"auto"`` or a positive number of pixel rows."""
    if block is None or block == "auto":
        return
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ValueError(f"block must be None, 'auto' or a positive number of pixel rows, "
                         f"got {block!r}")


# --- the compile-cache key ------------------------------------------------------------------

_WEAK = (bool, int, float)


@dataclass(frozen=True, slots=True)
class CallKey:
    """One compilation's key: the dynamic arguments' names and tree, each
    leaf's key (``leaf_key``), the static arguments as ``(name, Static)``
    pairs, and the reduction and numerics modes."""

    names: tuple[str, ...]
    tree: TreeDef
    leaves: tuple
    statics: tuple
    reductions: str
    numerics: str

    def family(self) -> CallKey:
        """This key with axis 0 of every array argument erased: the keys of
        one family differ only in batch sizes."""
        leaves = tuple(((None, *leaf[0][1:]), *leaf[1:]) if len(leaf) > 1 and leaf[0] else leaf
                       for leaf in self.leaves)
        return CallKey(self.names, self.tree, leaves, self.statics, self.reductions,
                       self.numerics)

    def changed_from(self, old: CallKey, leaf_names) -> str:
        """What differs from ``old``, in the user's words (the first difference)."""
        if old.numerics != self.numerics:
            return f"numerics changed from {old.numerics} to {self.numerics}"
        if old.reductions != self.reductions:
            return (f"reductions changed from {old.reductions} to {self.reductions} "
                    f"({reductions.ENV} or the deterministic_reductions option)")
        if old.statics != self.statics:
            before, after = dict(old.statics), dict(self.statics)
            for name in after:
                if before.get(name) != after[name]:
                    return (f"static argument '{name}' changed from {before.get(name)!r} to "
                            f"{after[name]!r}")
        if old.names != self.names or old.tree != self.tree:
            return f"the argument structure changed from {old.names} to {self.names}"
        for name, a, b in zip(leaf_names, old.leaves, self.leaves):
            if a != b:
                return f"argument '{name}' changed from {_describe(a)} to {_describe(b)}"
        return "nothing visible changed"


class MaskedArgument(TypeError):
    """A masked array among the arguments (``Jitted.key`` names it)."""


class Static:
    """A static argument as a cache key. Equal to another when both are the
    same value of the same type: NaN equals NaN (a static ``float('nan')``
    does not record again on every call), and ``1``, ``1.0`` and ``True``
    stay three keys (they record different graphs)."""

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value = value
        self.key = _static_identity(value)

    def __eq__(self, other) -> bool:
        return isinstance(other, Static) and self.key == other.key

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


def leaf_key(x):
    """A leaf's part of the key: shape and dtype (native byte order), the
    Python type of a weakly typed scalar, or shape, dtype and ``cuda`` for a
    device array. A masked array raises ``MaskedArgument``."""
    if type(x) is np.ndarray:
        return x.shape, (x.dtype if x.dtype.isnative else x.dtype.newbyteorder("="))
    if isinstance(x, _WEAK) and not isinstance(x, np.generic):
        return (type(x),)
    if isinstance(x, np.ma.MaskedArray):
        raise MaskedArgument
    if on_device(x):  # the same shape on another device is another compilation
        return tuple(x.shape), np.dtype(x.dtype), "cuda"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return tuple(x.shape), np.dtype(x.dtype)
    array = np.asarray(x)
    return array.shape, array.dtype


def _describe(leaf: tuple) -> str:
    if len(leaf) == 1:
        return f"a Python {leaf[0].__name__}"
    shape, dtype = leaf[:2]
    try:
        short = dtypes.SHORT[dtypes.canonical(dtype)]
    except TypeError:
        short = str(dtype)
    return f"{short}{list(shape)}"
