"""The CPU strategies' workers: the worker count, one persistent thread pool
per count, the split of the pixel axis into slices, and ``run_tasks``, which
runs a call's tasks on the pool under one stop flag.

``threads`` and ``native`` run every call through ``run_tasks``: a call that
fails or is interrupted (Ctrl-C) stops its tasks after their current tile (or
C call) and waits for them before it raises, so no worker writes into a
buffer the caller has let go. Generated C reads the same flag inside its
loops; ``interruptible`` makes Ctrl-C set it while C code runs on the
calling thread, where Python itself sees a signal only once the C call has
returned.
"""

from __future__ import annotations

import _signal
import contextvars
import ctypes
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...codegen.driver import load_driver
from ..platform import cpu_budget


def resolve_workers(workers: int | None) -> tuple[int, str]:
    """The worker count and where it came from: ``workers=`` wins, else the
    CPU budget (``platform.cpu_budget``: the scheduler affinity ∩ the cgroup
    quota), capped inside a Dask worker by that worker's ``nthreads`` (so
    the workers of one machine do not each take every core)."""
    if workers is not None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers={workers!r}: give a positive integer, e.g. workers=2")
        return workers, "workers= option"
    budget = cpu_budget()
    threads = dask_worker_threads()
    if threads is not None and threads < budget.value:
        return threads, (f"Dask worker nthreads={threads} (below {budget.value} from "
                         f"{budget.source})")
    return max(1, budget.value), budget.source


def dask_worker_threads() -> int | None:
    """The ``nthreads`` of the Dask worker this code runs in, or None
    outside one (never imports Dask: a worker has it loaded already)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        threads = distributed.get_worker().state.nthreads
    except (ValueError, AttributeError):  # not in a worker (or no such attribute)
        return None
    return threads if isinstance(threads, int) and threads >= 1 else None


class _WorkerMark(threading.local):
    active = False  # True on the pool's threads


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()
_IN_WORKER = _WorkerMark()
_STOP: contextvars.ContextVar[Stop | None] = contextvars.ContextVar("isokernel_stop",
                                                                    default=None)
SLICE_ROWS = 1 << 15
"""Rows per C call on the calling thread (native's kernel, the tile driver's
tiles): Python sees a Ctrl-C only between two calls, so they stay short
(under a millisecond for tau-omega); a kernel with loops also reads the
stop flag inside them (``interruptible``)."""


def shared_pool(workers: int) -> ThreadPoolExecutor:
    """One persistent pool per worker count, shared by threads and native."""
    with _POOL_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = ThreadPoolExecutor(workers, thread_name_prefix=f"isokernel-{workers}",
                                      initializer=_mark_worker)
            _POOLS[workers] = pool
        return pool


def _mark_worker() -> None:
    _IN_WORKER.active = True


def in_worker() -> bool:
    """True on a pool thread (where no Ctrl-C arrives: signals go to the main thread)."""
    return _IN_WORKER.active


def split(length: int, chunks: int, align: int = 1) -> list[tuple[int, int]]:
    """``[0, length)`` as at most ``chunks`` contiguous slices of nearly equal
    length, every boundary but the last a multiple of ``align``."""
    units = -(-length // align)
    chunks = max(1, min(chunks, units))
    bounds = [min(length, (units * k // chunks) * align) for k in range(chunks + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def sub_slices(begin: int, end: int, rows: int):
    """``[begin, end)`` in consecutive pieces of ``rows`` rows (the last shorter)."""
    for a in range(begin, end, rows):
        yield a, min(end, a + rows)


class Stop:
    """A call's stop flag, set when the call fails or is interrupted. Tasks
    read it between tiles and between C calls; C code reads it through
    ``address``: the tile driver between tiles, generated kernels between
    blocks of rows and every ``ISK_POLL`` iterations of their loops."""

    def __init__(self):
        self.flag = np.zeros(1, np.int32)
        self.address = self.flag.ctypes.data

    def set(self) -> None:
        self.flag[0] = 1

    def __bool__(self) -> bool:
        return bool(self.flag[0])


NEVER = Stop()
"""The flag of work that runs outside a task group: never set."""


def stop_flag() -> Stop:
    """The stop flag of the task group this runs in (``NEVER`` outside one).
    A call made inline from inside a task reads its caller's flag."""
    found = _STOP.get()
    return NEVER if found is None else found


class interruptible:
    """``with interruptible() as stop:`` the flag that C code run in the
    block reads (``stop.address``), set when the caller presses Ctrl-C.
    ``interruptible(False)``: the current ``stop_flag()``, nothing watched
    (C code without loops: Python sees a Ctrl-C between its short calls).

    On the main thread outside a task group, with Python's own SIGINT
    handler in place (``signal.default_int_handler``, as in a terminal or a
    notebook cell): the main thread's flag, cleared, which SIGINT sets while
    the block runs (the tile driver's ``isk_watch_sigint``; Python's handler
    still runs). A block that a Ctrl-C cut short raises
    ``KeyboardInterrupt`` as it ends: its results are unfinished. Anywhere
    else it is the current ``stop_flag()``: a worker's group flag, which its
    caller sets on Ctrl-C; on another thread no Ctrl-C arrives; a handler of
    the user's own runs once the C call returns, as it always did. A
    watched block costs two ctypes calls and four ``sigaction`` calls
    (about 1.5 us on a 64-pixel Kepler call of 10 us), so callers watch
    only C code with loops.

    Python may raise the ``KeyboardInterrupt`` on entering ``__exit__``,
    before its body runs; then the handler stays installed, which is
    harmless: it still runs Python's after setting the main thread's flag,
    which only a block reads, and clears first; the next block finds it in
    place and keeps the handler it replaced."""

    __slots__ = ("stop", "_watch", "_driver")

    def __init__(self, watch: bool = True):
        self._watch = watch

    def __enter__(self) -> Stop:
        self._driver = None
        found = _STOP.get()
        # _signal.getsignal: signal.getsignal's C function, without its enum conversion (8 us)
        if not self._watch or found is not None or \
                threading.get_ident() != threading.main_thread().ident or \
                _signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            self.stop = NEVER if found is None else found
            return self.stop
        self.stop = _MAIN_STOP
        _MAIN_STOP.flag[0] = 0
        driver = _signal_driver()
        if driver is not None and driver.watch_sigint(_MAIN_STOP.address):
            self._driver = driver
        return self.stop

    def __exit__(self, kind, value, traceback) -> bool:
        if self._driver is None:
            return False
        self._driver.unwatch_sigint()
        if kind is None and _MAIN_STOP:  # cut short by a Ctrl-C Python has not raised yet
            _check_signals()
            raise KeyboardInterrupt
        return False


_MAIN_STOP = Stop()
"""The flag ``interruptible`` hands out on the main thread, one block at a time."""
_DRIVER: list = []  # the tile driver, once loaded: it installs the SIGINT handler


def _signal_driver():
    """The tile driver, or None where it cannot be built (no C compiler: no
    C code runs either)."""
    if not _DRIVER:
        try:
            _DRIVER.append(load_driver())
        except (RuntimeError, OSError):  # BackendUnavailableError, CompileError
            return None
    return _DRIVER[0]


def _check_signals() -> None:
    """Run Python's pending signal handlers now (``PyErr_CheckSignals``):
    the default SIGINT handler raises ``KeyboardInterrupt`` here."""
    ctypes.pythonapi.PyErr_CheckSignals()


def run_tasks(work, count: int, workers: int) -> None:
    """Run ``work(k)`` for ``k < count`` on the pool, each task in a copy of
    the caller's context (so ``np.errstate`` applies and ``stop_flag()`` is
    this group's). When a task fails, or the caller is interrupted (Ctrl-C)
    while it waits, the others are stopped and waited for; then the failure
    is raised. With one task or one worker, or on a worker, ``work`` runs
    inline, where a Ctrl-C interrupts it between its C calls."""
    if count == 1 or workers == 1 or in_worker():
        for k in range(count):
            work(k)
        return
    _Tasks(work).run(shared_pool(workers), count)


class _Tasks:
    """The tasks of one ``run_tasks`` call. No task outlives the call: a
    caller that leaves early (a failure, Ctrl-C) first sets the stop flag, so
    no task starts any more and running ones return after their current tile,
    and then waits, uninterruptibly, for the running ones. Until then every
    buffer a task writes through a raw pointer stays alive."""

    def __init__(self, work):
        self.work = work
        self.stop = Stop()
        self.error: BaseException | None = None
        self._changed = threading.Condition()
        self._running = 0  # tasks inside ``work``
        self._left = 0  # tasks submitted and not finished

    def run(self, pool: ThreadPoolExecutor, count: int) -> None:
        try:
            for k in range(count):
                with self._changed:
                    self._left += 1
                context = contextvars.copy_context()
                context.run(_STOP.set, self.stop)
                pool.submit(context.run, self._task, k)
            with self._changed:
                while self._left and self.error is None:
                    self._changed.wait()
        except BaseException:
            self._halt()
            raise
        if self.error is not None:
            self._halt()
            raise self.error

    def _task(self, k: int) -> None:
        with self._changed:
            if self.stop:
                self._finished(running=False)
                return
            self._running += 1
        try:
            self.work(k)
        except BaseException as error:
            with self._changed:
                self.error = self.error or error
                self.stop.set()
        finally:
            with self._changed:
                self._finished(running=True)

    def _finished(self, running: bool) -> None:
        self._running -= running
        self._left -= 1
        self._changed.notify_all()

    def _halt(self) -> None:
        """Stop the tasks and wait for the running ones. A second Ctrl-C
        while waiting does not end the wait: leaving now would free buffers
        the workers still write into."""
        self.stop.set()
        while True:
            try:
                with self._changed:
                    while self._running:
                        self._changed.wait()
                return
            except BaseException:  # noqa: S112 - keep waiting, then raise the first
                continue
