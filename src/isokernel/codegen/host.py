"""The CPU host wrapper around a C body (``emit.CBody``): a C function over a slice
``[begin, end)`` of the pixel axis.

Rows are processed in blocks of ``ISK_BLOCK`` by one non-inlined block
function whose loop has a constant trip count, so the compiler vectorizes
it without a scalar remainder. A slice's last partial block is copied into
padded buffers and run through the same block function. Every row
therefore goes through the same instructions wherever it falls in a slice:
results do not depend on the worker count or the slicing, even where a
vector math library is used. A body with row loops (rows beyond the
emitter's unrolling cap) is vectorized along those loops instead, whose
elements take the vector or the scalar code by their index alone.

Rows of several values a pixel that GCC does not vectorize interleaved (a
3x3 matrix: ``emit.column_pointers``) are copied into one array per element
before the block's loop (``isk_c_in1``), and the outputs back after it; the
body's host copy reads and writes those columns (``CBody.columns``).

With ``vector_math``, the libm functions the body calls are declared with
``__attribute__((simd))`` so GCC calls the vector variants of glibc's
libmvec; that is the only difference from scalar libm and it is recorded in
the capsules.

A kernel takes the call's stop flag (``pool.Stop``; NULL: never set), set
when the caller was interrupted (Ctrl-C) or another of its tasks failed. It
reads the flag between blocks of rows, and its loops read it every
``ISK_POLL`` iterations (a relaxed load behind a branch predicted not
taken): the ``while`` and ``for`` loops of control flow in a body
(``emit.While``, ``emit.For``) and a staged block's lane-wise loops. Once it
is set the loops end and the kernel returns, its outputs unfinished (the
caller discards them), so a per-pixel loop that never ends still returns.

A kernel clears the floating-point flags on entry and returns those its
rows raised, as NumPy's ``NPY_FPE_*`` bits, so that the caller can give
them to NumPy's error state (``backends.native``). It runs the body's host
copy (``CBody.host_function``): quiet float comparisons, and the flags
NumPy's loops raise where C raises none (integer division by zero, casts
of NaN and out-of-range values to integers).
"""

from __future__ import annotations

import math
import re

from .c_expr import CTYPE, TRANSCENDENTAL_NAMES
from .emit import BLOCK_ROWS, CBody, LaneBlock, prelude

ISK_BLOCK = BLOCK_ROWS
HEADER = """\
/* isokernel native kernel {kernel} -- generated, do not edit.
 * Graph {graph}; compile without fast-math. */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define ISK_INLINE static inline __attribute__((always_inline))
#define ISK_BLOCK {block}

/* the floating-point flags raised since they were cleared, as NumPy's NPY_FPE_* bits */
static uint32_t isk_fpe(void)
{{
    const int s = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
    return ((s & FE_DIVBYZERO) ? 1u : 0u) | ((s & FE_OVERFLOW) ? 2u : 0u)
         | ((s & FE_UNDERFLOW) ? 4u : 0u) | ((s & FE_INVALID) ? 8u : 0u);
}}

/* the call's stop flag (Ctrl-C, or a failure in another task): this thread's kernel sets it
 * on entry; loops read it every ISK_POLL iterations and end once it is set (once seen, the
 * counter stays one short of the next read, so every enclosing loop reads it at its next
 * iteration: nested loops end at once, not after up to ISK_POLL more inner steps each) */
static const int32_t isk_never_stopped;
static __thread const int32_t *isk_stop_flag = &isk_never_stopped;
#define ISK_POLL 1024
#define ISK_STOPPED(flag) __builtin_expect(__atomic_load_n((flag), __ATOMIC_RELAXED) != 0, 0)
#define ISK_POLLED(n) \\
    __builtin_expect(((++(n)) & (ISK_POLL - 1)) == 0 && ISK_STOPPED(isk_stop_flag) \\
                     && ((n) = ISK_POLL - 1, 1), 0)
"""

TWO_ARGUMENTS = frozenset({"pow", "atan2"})


SINCOS = frozenset({"sin", "cos", "sinf", "cosf"})
"""GCC merges ``sin(x)`` and ``cos(x)`` of one argument into one ``sincos``
call, which has no vector variant, and the loop stays scalar (GCC 12:
"no vectype"). A staged block's functions (``emit.LaneBlock``) call them
under names of their own bound to the same symbols (``isk_vsin``, declared
``__asm__("sin")``): two ordinary functions with vector variants, so the
block's step vectorizes. Elsewhere the calls keep their names and GCC's
merge (scalar code, the bits of libm's scalar ``sin`` and ``cos``)."""


def simd_declarations(names, aliases=()) -> str:
    """Vector-variant declarations for the libm functions in ``names``, and
    for the ``isk_v`` aliases of those in ``aliases`` (``SINCOS``)."""
    lines = []
    for name in sorted(names):
        base = name[:-1] if name.endswith("f") and name[:-1] in TRANSCENDENTAL_NAMES else name
        if base not in TRANSCENDENTAL_NAMES:
            continue
        ctype = "float" if base != name else "double"
        args = ", ".join([ctype] * (2 if base in TWO_ARGUMENTS else 1))
        lines.append(f'__attribute__((simd("notinbranch"))) {ctype} {name}({args});')
        if name in aliases:
            lines.append(f'__attribute__((simd("notinbranch"), const)) {ctype} isk_v{name}'
                         f'({args}) __asm__("{name}");')
    return "\n".join(lines) + ("\n" if lines else "")


def _aliased(text: str) -> str:
    """``sin(`` and ``cos(`` calls of a staged block as their ``isk_v`` aliases."""
    return re.sub(r"\b(sinf?|cosf?)\(", r"isk_v\1(", text)


def _params(body: CBody, prefix: str = "") -> tuple[list[str], list[str]]:
    """(declarations, argument names) of the kernel's pointer parameters."""
    decls, names = [], []
    groups = (("in", body.row_inputs, True), ("w", body.whole_inputs, True),
              ("out", body.outputs, False))
    for tag, nodes, const in groups:
        for k, node in enumerate(nodes):
            qualifier = "const " if const else ""
            decls.append(f"{qualifier}{CTYPE[node.dtype]} *restrict {prefix}{tag}{k}")
            names.append(f"{prefix}{tag}{k}")
    return decls, names


def host_source(kernels: list[tuple[CBody, str]], graph_name: str, vector_math: bool) -> str:
    """One translation unit for the ``(body, kernel name)`` pairs: header,
    helpers once, then each body with its block function and kernel."""
    parts = [HEADER.format(kernel=", ".join(k for _, k in kernels), graph=graph_name,
                           block=ISK_BLOCK)]
    if vector_math:
        aliases = set().union(*(b.lanes.math for b, _ in kernels if b.lanes)) & SINCOS
        parts.append(simd_declarations(set().union(*(_host_math(b) for b, _ in kernels)),
                                       aliases))
    parts.append(prelude([h for b, _ in kernels for h in _host_helpers(b)], host=True))
    data = "".join(dict.fromkeys(d for b, _ in kernels for d in _data(b)))
    if data:
        parts.append(data)
    for body, kernel in kernels:
        decls, names = _params(body)
        lanes = body.lanes and (_aliased(body.lanes.functions) if vector_math
                                else body.lanes.functions)
        parts += [lanes or body.host_function,
                  _block_function(body, kernel, decls, names),
                  _tail_function(body, kernel, decls, names),
                  _kernel_function(body, kernel, decls, names)]
    return "\n".join(parts)


def _host_helpers(body: CBody) -> tuple[str, ...]:
    return body.lanes.helpers if body.lanes else body.host_helpers


def _data(body: CBody) -> tuple[str, ...]:
    return body.lanes.data if body.lanes else body.data


def _host_math(body: CBody) -> frozenset[str]:
    """The libm functions the host build of ``body`` calls."""
    return body.lanes.math if body.lanes else body.math


def _block_function(body: CBody, kernel: str, decls, names) -> str:
    head = f"static __attribute__((noinline)) void {kernel}_block({', '.join(decls)})\n{{\n"
    columns = body.lanes.columns if body.lanes is not None else body.columns
    copy_in, copy_out = _columns(body, columns)
    if body.lanes is not None:
        return head + copy_in + _stages(body.lanes) + copy_out + "}\n"
    args = [f"isk_c_{n}" if n in columns else n for n in names]
    return (head + copy_in + f"    for (int64_t j = 0; j < ISK_BLOCK; j++)\n"
            f"        {body.name}(j, {', '.join(args)});\n" + copy_out + "}\n")


def _columns(body: CBody, columns) -> tuple[str, str]:
    """The block's column arrays (``emit.column_pointers``): the copies of
    its row inputs into them before the rows run and of the outputs out of
    them after, one column at a time (a strided walk over the rows that GCC
    vectorizes; row by row it does not for 9 elements). Copies move values
    unchanged, so the bits are the same."""
    copy_in, copy_out = [], []
    groups = (("in", body.row_inputs, copy_in), ("out", body.outputs, copy_out))
    for tag, nodes, lines in groups:
        for k, node in enumerate(nodes):
            pointer, n = f"{tag}{k}", math.prod(node.shape[1:])
            if pointer not in columns:
                continue
            rows, cols = f"{pointer}[j * {n} + k]", f"isk_c_{pointer}[k * ISK_BLOCK + j]"
            copy = f"{cols} = {rows};" if tag == "in" else f"{rows} = {cols};"
            copy_in.append(f"    {CTYPE[node.dtype]} isk_c_{pointer}[ISK_BLOCK * {n}];  "
                           f"/* {pointer} by columns: element k of row j at k * ISK_BLOCK + j */")
            lines += [f"    for (int64_t k = 0; k < {n}; k++)  /* {pointer}: rows "
                      f"{'to columns' if tag == 'in' else 'from columns'} */",
                      "        for (int64_t j = 0; j < ISK_BLOCK; j++)", f"            {copy}"]
    return "".join(f"{line}\n" for line in copy_in), "".join(f"{line}\n" for line in copy_out)


def _stages(lanes: LaneBlock) -> str:
    """A staged block: its arrays, then each stage over every row of the
    block; a lane-wise loop's step runs over the whole block while more than
    ``ISK_BLOCK / 8`` rows run (masked, vectorized), then (an IEEE-only
    step, whose bits are the same in scalar code) row by row."""
    by = {name: ", by columns" for name in lanes.column_arrays}
    lines = [f"    {c} {name}[ISK_BLOCK * {n}];  /* between the stages{by.get(name, '')} */"
             for c, name, n in lanes.arrays]
    lines.append("    const int32_t *const isk_flag = isk_stop_flag;  /* read once per step */")
    for stage in lanes.stages:
        args = [f"isk_c_{a}" if a in lanes.columns else a for a in stage.args]
        call = f"{stage.name}(j, {', '.join(args)});"
        every = ["for (int64_t j = 0; j < ISK_BLOCK; j++)", f"    {call}"]
        if stage.flags is None:
            lines += [f"    {line}" for line in every]
            continue
        limit = "ISK_BLOCK / 8" if stage.finish else "0"
        lines += [f"    while (isk_running({stage.flags}) > {limit}) {{  /* every row steps; "
                  f"those that stopped keep their carry */",
                  "        if (ISK_STOPPED(isk_flag))  /* the call was stopped */",
                  "            break;",
                  *(f"        {line}" for line in every), "    }"]
        if stage.finish:
            lines += ["    for (int64_t j = 0; j < ISK_BLOCK; j++) {  /* the last rows, one by "
                      "one */", "        uint32_t isk_polls = 0;",
                      f"        while ({stage.flags}[j]) {{",
                      "            if (ISK_POLLED(isk_polls))  /* the call was stopped */",
                      "                break;", f"            {call}", "        }", "    }"]
    return "\n".join(lines) + "\n"


def _row(node) -> str:
    return f"{math.prod(node.shape[1:])} * sizeof({CTYPE[node.dtype]})"


def _tail_function(body: CBody, kernel: str, decls, names) -> str:
    """Rows ``[i, end)`` (fewer than a block), padded with copies of row i."""
    lines = [f"static void {kernel}_tail({', '.join(decls)}, int64_t i, int64_t end)", "{",
             "    int64_t n = end - i;"]
    padded = []
    for k, node in enumerate(body.row_inputs):
        lines += [f"    char *t_in{k} = malloc(ISK_BLOCK * {_row(node)});",
                  "    for (int64_t r = 0; r < ISK_BLOCK; r++)",
                  f"        memcpy(t_in{k} + r * {_row(node)}, "
                  f"(const char *)in{k} + (i + (r < n ? r : 0)) * {_row(node)}, {_row(node)});"]
        padded.append(f"(const {CTYPE[node.dtype]} *)t_in{k}")
    padded += [f"w{k}" for k in range(len(body.whole_inputs))]
    for k, node in enumerate(body.outputs):
        lines.append(f"    char *t_out{k} = malloc(ISK_BLOCK * {_row(node)});")
        padded.append(f"({CTYPE[node.dtype]} *)t_out{k}")
    lines.append(f"    {kernel}_block({', '.join(padded)});")
    for k, node in enumerate(body.outputs):
        lines += [f"    memcpy((char *)out{k} + i * {_row(node)}, t_out{k}, n * {_row(node)});",
                  f"    free(t_out{k});"]
    lines += [f"    free(t_in{k});" for k in range(len(body.row_inputs))]
    return "\n".join(lines + ["}", ""])


def _kernel_function(body: CBody, kernel: str, decls, names) -> str:
    """Rows ``[begin, end)``: whole blocks, then the tail; the stop flag is
    read before each (a stopped call returns, its outputs unfinished)."""
    offsets = []
    for k, node in enumerate(body.row_inputs):
        offsets.append(f"in{k} + i * {math.prod(node.shape[1:])}")
    offsets += [f"w{k}" for k in range(len(body.whole_inputs))]
    offsets += [f"out{k} + i * {math.prod(n.shape[1:])}" for k, n in enumerate(body.outputs)]
    return (f"uint32_t {kernel}({', '.join(decls)}, int64_t begin, int64_t end, "
            f"const int32_t *stop)\n{{\n"
            f"    feclearexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);\n"
            f"    const int32_t *const flag = stop ? stop : &isk_never_stopped;\n"
            f"    isk_stop_flag = flag;\n"
            f"    int64_t i = begin;\n"
            f"    for (; i + ISK_BLOCK <= end && !ISK_STOPPED(flag); i += ISK_BLOCK)\n"
            f"        {kernel}_block({', '.join(offsets)});\n"
            f"    if (i < end && !ISK_STOPPED(flag))\n"
            f"        {kernel}_tail({', '.join(names)}, i, end);\n"
            f"    return isk_fpe();\n}}\n")
