"""The tile driver: one small, fixed C function that runs a program of
strided-loop calls over the tiles of a slice, without the GIL.

A *program* is an array of steps (``STEP``, the C struct ``isk_step``). A
step is one call of a strided inner loop over ``count`` elements of a tile:
NumPy's own loop (the function pointer, context and auxdata that
``ufunc._get_strided_loop`` hands out: the very loops a ufunc call runs), or
one of the driver's exact built-in kinds: an element copy (``COPY``), a
select as a bit copy (``SELECT``), or a C conversion (``CAST``). Each
operand is ``bases[slot] + offset + begin * advance`` for a tile whose first
row is ``begin``, walked with a fixed byte ``stride``. Programs of different
tile lengths share one step array. A call runs tiles of one slice
(``SLICE``): the slice's bounds and its largest tile length; the driver
derives each tile's rows and program itself (nearly equal tiles, the first
ones a row longer), so no list of tiles exists anywhere, however many
pixels. Between tiles it reads a stop flag (``threads.Stop``): a call whose
caller failed or was interrupted returns after its current tile.

The driver also carries Ctrl-C into C code running on the calling thread
(``isk_watch_sigint``): while such a call runs, a SIGINT handler of its own
sets the call's stop flag, then runs the handler it replaced (Python's, which
raises ``KeyboardInterrupt`` once the call returns). Generated kernels read
that flag in their loops (``host.HEADER``), so a per-pixel loop that never
ends still returns (``backends.cpu.pool.interruptible``).

Around every step that NumPy would check (``check_fpe``) the driver clears
the floating-point flags before the loop and reads them after it, as the
ufunc call does, and ORs what it saw into ``fpe[index]`` in NumPy's
``NPY_FPE_*`` bits; the caller reports them through NumPy's error state.

The driver is compiled once per compiler and CPU through the on-disk cache
of ``compiler.build``, not per graph; ``threads`` calls it through ctypes,
which releases the GIL for the whole slice.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ..ir import dtypes
from .compiler import build

MAX_OPERANDS = 4

NUMPY_LOOP, COPY, SELECT, CAST = 0, 1, 2, 3
"""Step kinds: NumPy's strided loop, and the driver's own exact kinds."""

TYPE_CODE = {dtypes.bool_: 0, dtypes.int32: 1, dtypes.int64: 2, dtypes.float32: 3,
             dtypes.float64: 4}
"""The dtype numbers of ``isk_cast`` (source * 5 + destination)."""

FPE_DIVIDE, FPE_OVERFLOW, FPE_UNDERFLOW, FPE_INVALID = 1, 2, 4, 8
"""NumPy's ``NPY_FPE_*`` bits, as the driver reports them."""

STEP = np.dtype([
    ("loop", np.uintp), ("context", np.uintp), ("auxdata", np.uintp), ("count", np.int64),
    ("kind", np.int32), ("nargs", np.int32), ("check_fpe", np.int32), ("index", np.int32),
    ("itemsize", np.int32), ("cast", np.int32),
    ("slot", np.int32, MAX_OPERANDS), ("offset", np.int64, MAX_OPERANDS),
    ("advance", np.int64, MAX_OPERANDS), ("stride", np.int64, MAX_OPERANDS),
], align=True)
"""One step, laid out as the C struct ``isk_step`` (checked at load)."""

SLICE = np.dtype([("begin", np.int64), ("end", np.int64), ("rows", np.int64),
                  ("long_step", np.int64), ("short_step", np.int64), ("per_tile", np.int64)])
"""One slice, as the C struct ``isk_slice``: rows ``[begin, end)`` in tiles of
at most ``rows`` rows; the first step of the longer and of the shorter
tiles' program (``long_step`` -1 when all tiles have one length)."""

SOURCE = r"""/* isokernel tile driver -- fixed source, compiled once per compiler and CPU.
 * Runs programs of strided-loop calls over tiles without the GIL (see driver.py). */
#include <fenv.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#define ISK_MAX_OPERANDS 4
enum { ISK_NUMPY_LOOP = 0, ISK_COPY = 1, ISK_SELECT = 2, ISK_CAST = 3 };

/* PyArrayMethod_StridedLoop; npy_intp is int64_t on the platforms the caller accepts */
typedef int (*isk_loop)(void *context, char *const *data, const int64_t *dimensions,
                        const int64_t *strides, void *auxdata);

typedef struct {
    isk_loop loop;            /* NumPy's strided loop (ISK_NUMPY_LOOP) */
    void *context;            /* its PyArrayMethod_Context */
    void *auxdata;            /* its NpyAuxData */
    int64_t count;            /* elements of one call: tile rows x elements per row */
    int32_t kind, nargs;      /* operands: inputs, then the output */
    int32_t check_fpe, index; /* read the FP flags after the call, into fpe[index] */
    int32_t itemsize, cast;   /* element size (copy, select); source*5+destination (cast) */
    int32_t slot[ISK_MAX_OPERANDS];
    int64_t offset[ISK_MAX_OPERANDS], advance[ISK_MAX_OPERANDS], stride[ISK_MAX_OPERANDS];
} isk_step;

int64_t isk_step_size(void) { return (int64_t)sizeof(isk_step); }

/* NumPy's npy_get_floatstatus: the four flags as NPY_FPE_* bits */
static uint32_t isk_fpe(void)
{
    int s = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    return ((s & FE_DIVBYZERO) ? 1u : 0u) | ((s & FE_OVERFLOW) ? 2u : 0u)
         | ((s & FE_UNDERFLOW) ? 4u : 0u) | ((s & FE_INVALID) ? 8u : 0u);
}

/* element copies by size: bits move unchanged (no float loads, so NaN payloads stay) */
#define ISK_MOVE(T) do { \
    for (int64_t i = 0; i < n; i++) \
        *(T *)(out + i * so) = *(const T *)(pick(i) + i * sp(i)); } while (0)

static void isk_copy(char *const *d, const int64_t *s, int64_t n, int32_t size)
{
    const char *x = d[0];
    char *out = d[1];
    const int64_t sx = s[0], so = s[1];
#define pick(i) x
#define sp(i) sx
    switch (size) {
    case 1: ISK_MOVE(uint8_t); break;
    case 4: ISK_MOVE(uint32_t); break;
    case 8: ISK_MOVE(uint64_t); break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(out + i * so, x + i * sx, (size_t)size);
    }
#undef pick
#undef sp
}

/* np.where(pred, x, y): x's element where pred is nonzero, else y's, bit for bit */
static void isk_select(char *const *d, const int64_t *s, int64_t n, int32_t size)
{
    const char *p = d[0], *x = d[1], *y = d[2];
    char *out = d[3];
    const int64_t so = s[3];
#define pick(i) (p[(i) * s[0]] ? x : y)
#define sp(i) (p[(i) * s[0]] ? s[1] : s[2])
    switch (size) {
    case 1: ISK_MOVE(uint8_t); break;
    case 4: ISK_MOVE(uint32_t); break;
    case 8: ISK_MOVE(uint64_t); break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(out + i * so, pick(i) + i * sp(i), (size_t)size);
    }
#undef pick
#undef sp
}

/* the C conversion NumPy's own cast loop performs for the pair (float to int is not here:
 * it is undefined in C for NaN and out-of-range values, and such regions run in Python) */
#define ISK_CONVERT(S, D, EXPR) do { \
    for (int64_t i = 0; i < n; i++) { \
        const S x = *(const S *)(in + i * si); \
        *(D *)(out + i * so) = (EXPR); } } while (0)
#define ISK_TO_ALL(S) \
    case 5 * ISK_CODE_##S + 0: ISK_CONVERT(S, uint8_t, (uint8_t)(x != 0)); break; \
    case 5 * ISK_CODE_##S + 1: ISK_CONVERT(S, int32_t, (int32_t)x); break; \
    case 5 * ISK_CODE_##S + 2: ISK_CONVERT(S, int64_t, (int64_t)x); break; \
    case 5 * ISK_CODE_##S + 3: ISK_CONVERT(S, float, (float)x); break; \
    case 5 * ISK_CODE_##S + 4: ISK_CONVERT(S, double, (double)x); break;
#define ISK_CODE_uint8_t 0
#define ISK_CODE_int32_t 1
#define ISK_CODE_int64_t 2
#define ISK_CODE_float 3
#define ISK_CODE_double 4

__attribute__((noinline))
static int isk_cast(char *const *d, const int64_t *s, int64_t n, int32_t pair)
{
    const char *in = d[0];
    char *out = d[1];
    const int64_t si = s[0], so = s[1];
    switch (pair) {
    ISK_TO_ALL(uint8_t)
    ISK_TO_ALL(int32_t)
    ISK_TO_ALL(int64_t)
    case 5 * 3 + 0: ISK_CONVERT(float, uint8_t, (uint8_t)(x != 0)); break;
    case 5 * 3 + 3: ISK_CONVERT(float, float, x); break;
    case 5 * 3 + 4: ISK_CONVERT(float, double, (double)x); break;
    case 5 * 4 + 0: ISK_CONVERT(double, uint8_t, (uint8_t)(x != 0)); break;
    case 5 * 4 + 3: ISK_CONVERT(double, float, (float)x); break;
    case 5 * 4 + 4: ISK_CONVERT(double, double, x); break;
    default: return -1;
    }
    return 0;
}

static int isk_step_run(const isk_step *st, char *const *data, const int64_t *count)
{
    switch (st->kind) {
    case ISK_NUMPY_LOOP: return st->loop(st->context, data, count, st->stride, st->auxdata);
    case ISK_COPY: isk_copy(data, st->stride, *count, st->itemsize); return 0;
    case ISK_SELECT: isk_select(data, st->stride, *count, st->itemsize); return 0;
    case ISK_CAST: return isk_cast(data, st->stride, *count, st->cast);
    default: return -1;
    }
}

typedef struct {
    int64_t begin, end, rows;    /* the slice, and its largest tile length */
    int64_t long_step, short_step, per_tile;  /* the programs of its two tile lengths */
} isk_slice;

int64_t isk_slice_size(void) { return (int64_t)sizeof(isk_slice); }

/* Runs tiles [first, last) of a slice: `count` nearly equal tiles of at most `rows` rows,
 * the first `length % count` one row longer (as loops.tiling). Reads *stop between tiles
 * and returns 0 once it is set. Returns 0, or 1 + the index of the step that failed (the
 * tiles after it are not run). */
int64_t isk_run(const isk_step *steps, const isk_slice *slice, int64_t first, int64_t last,
                char *const *bases, uint32_t *fpe, const int32_t *stop)
{
    const int64_t length = slice->end - slice->begin;
    const int64_t count = (length + slice->rows - 1) / slice->rows;
    const int64_t shorter = length / count, longer = length % count;
    for (int64_t t = first; t < last && t < count; t++) {
        if (__atomic_load_n(stop, __ATOMIC_RELAXED))
            return 0;
        const int64_t begin = slice->begin + t * shorter + (t < longer ? t : longer);
        const int64_t from = t < longer ? slice->long_step : slice->short_step;
        for (int64_t k = from; k < from + slice->per_tile; k++) {
            const isk_step *st = &steps[k];
            char *data[ISK_MAX_OPERANDS];
            if (st->count == 0)
                continue;
            for (int32_t a = 0; a < st->nargs; a++)
                data[a] = bases[st->slot[a]] + st->offset[a] + begin * st->advance[a];
            if (st->check_fpe)
                feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
            if (isk_step_run(st, data, &st->count) < 0)
                return 1 + k;
            if (st->check_fpe)
                fpe[st->index] |= isk_fpe();
        }
    }
    return 0;
}

/* Ctrl-C for C code on the calling thread: isk_watch_sigint(flag) installs a SIGINT handler
 * that sets *flag and then runs the handler it replaced; isk_unwatch_sigint() puts that one
 * back. Only one call is watched at a time (the caller's main thread). A handler left in
 * place (the caller never unwatched) is kept by the next watch, with the one it replaced. */
static int32_t *volatile isk_watched;
static struct sigaction isk_replaced;

static void isk_on_sigint(int sig, siginfo_t *info, void *context)
{
    int32_t *flag = isk_watched;
    if (flag)
        __atomic_store_n(flag, 1, __ATOMIC_RELAXED);
    if (isk_replaced.sa_flags & SA_SIGINFO)
        isk_replaced.sa_sigaction(sig, info, context);
    else if (isk_replaced.sa_handler != SIG_DFL && isk_replaced.sa_handler != SIG_IGN)
        isk_replaced.sa_handler(sig);
}

static int isk_ours(const struct sigaction *action)
{
    return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == isk_on_sigint;
}

/* 1 when installed; 0 when SIGINT is ignored or has its default action (nothing changed) */
int32_t isk_watch_sigint(int32_t *flag)
{
    struct sigaction mine, before;
    if (sigaction(SIGINT, 0, &before) != 0)
        return 0;
    if (isk_ours(&before)) {
        isk_watched = flag;
        return 1;
    }
    if (!(before.sa_flags & SA_SIGINFO) && (before.sa_handler == SIG_DFL
                                            || before.sa_handler == SIG_IGN))
        return 0;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = isk_on_sigint;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    isk_replaced = before;
    isk_watched = flag;
    return sigaction(SIGINT, &mine, 0) == 0;
}

void isk_unwatch_sigint(void)
{
    struct sigaction now;
    if (sigaction(SIGINT, 0, &now) == 0 && isk_ours(&now))
        sigaction(SIGINT, &isk_replaced, 0);
    isk_watched = 0;
}
"""


class Driver:
    """The loaded driver: ``run(steps, slice, first, last, bases, fpe, stop)``
    on NumPy arrays, releasing the GIL for the call (ctypes does)."""

    def __init__(self, library: ctypes.CDLL, built):
        self.built = built
        for name, layout in (("isk_step_size", STEP), ("isk_slice_size", SLICE)):
            size = getattr(library, name)
            size.restype = ctypes.c_int64
            if size() != layout.itemsize:
                raise RuntimeError(f"tile driver: {name}() is {size()} bytes, Python's "
                                   f"{layout.itemsize}")
        self._run = library.isk_run
        self._run.restype = ctypes.c_int64
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p]
        # watch_sigint(address): until unwatch_sigint(), SIGINT sets the int32 at address and
        # then runs the handler it replaced; 1 when installed, 0 when SIGINT is ignored or has
        # its default action (nothing installed)
        self.watch_sigint = library.isk_watch_sigint
        self.watch_sigint.restype = ctypes.c_int32
        self.watch_sigint.argtypes = [ctypes.c_void_p]
        self.unwatch_sigint = library.isk_unwatch_sigint
        self.unwatch_sigint.restype = None
        self.unwatch_sigint.argtypes = []

    def run(self, steps: np.ndarray, slice_: np.ndarray, first: int, last: int,
            bases: np.ndarray, fpe: np.ndarray, stop: int) -> int:
        """Tiles ``[first, last)`` of ``slice_`` (one ``SLICE``); ``stop`` is the
        address of an int32 the driver reads between tiles. 0, or 1 + the
        index of the step whose loop failed."""
        return self._run(steps.ctypes.data, slice_.ctypes.data, first, last,
                         bases.ctypes.data, fpe.ctypes.data, stop)


@functools.cache
def load_driver() -> Driver:
    """The driver, compiled now or loaded from the on-disk cache. Raises
    ``BackendUnavailableError`` without a C compiler."""
    library, built = build(SOURCE)
    return Driver(library, built)
