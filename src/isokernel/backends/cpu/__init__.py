"""The CPU strategies: ``reference`` (the oracle), ``threads`` (the reference
rules over row tiles on a thread pool), ``native`` (generated C over slices
on the same pool) and ``native-whole`` (the whole graph as one C function,
``whole``). Importing this package registers their specs.

Shared by them, with public names: ``numpy_rules`` (the reference's rules
and capsules), ``pool`` (workers, the pool, slices, ``run_tasks`` and the stop
flag), ``staged`` (the staged plan and executor: whole stages, row regions),
``loops`` (NumPy's strided loops for the GIL-free tile driver) and ``fpe``
(NumPy's floating-point diagnostics for rows a kernel ran)."""

from . import native, reference, threads, whole  # noqa: F401  (each registers its strategy)
