"""What the GPU strategies share to run a graph: ``CUPY``, the rule table of
this interpretation (one device operation per node), the ``DeviceExecutor``
holding the runtime, uploaded constants and the kernels built so far, the
launch of one region kernel, ``OpByOpExecutable`` (the run of ``cuda-eager``
and ``cuda-fused``), the plan of a GPU strategy (``node_plan``) and the
device report lines.

Elementwise ops launch the kernel ``codegen.cuda.elementwise_kernel`` makes
from the shared C body, so a node computes on the GPU with exactly the
expression the megakernel inlines (NVRTC, ``--fmad=false``, IEEE division and
square root, subnormals kept). Reductions run isokernel's deterministic
kernels in NumPy's order (``codegen.reduce``). Layout ops, the matrix product
and control flow run the reference's own rules (``ir.eval.EVAL_XP``) over the
device's array namespace (``namespace``): views, copies through isokernel's
allocator, ``cupy.matmul`` (cuBLAS), bodies op by op on the device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import control  # noqa: F401 - its primitives' rules are in EVAL_XP before CUPY
from ...codegen import cuda as cg
from ...codegen.c_expr import C_EXPR, Ctx
from ...codegen.pixel import pixel_count
from ...codegen.reduce import layout_of, pairwise_tree
from ...ir import EVAL, Op, PlanningError, dtypes, subgraphs
from ...ir.eval import EVAL_XP
from ...ir.ops import CONTROL, ELEMENTWISE, REDUCE
from ..capsules import Capsule, NumericalPolicy, lookup, register
from ..executable import ExecutableBase
from ..liveness import release_schedule, static_liveness
from ..planning import NodePlan, Plan, Profile, plan_ops
from ..reductions import REDUCTION_BLOCK, check_mode, is_pixel_reduction
from .capsules import BLAS_PROVIDER, FORM_PROVIDER, PROVIDERS, TEXTURE_PROVIDER
from .namespace import DeviceNamespace
from .runtime import runtime as device_runtime

# --- the rules ----------------------------------------------------------------------------

def _is_scalar_view(x) -> bool:
    """A broadcast of one value: every stride 0 (a stride-0 view)."""
    return x.ndim > 0 and x.size > 1 and all(s == 0 for s in x.strides)


def _first(x):
    return x[(slice(0, 1),) * x.ndim]


def _elementwise(ex, node, *xs):
    rt = ex.rt
    out = rt.empty(node.shape, node.dtype)
    if out.size == 0:
        return out
    kinds = tuple(cg.SCALAR if _is_scalar_view(x) else cg.VECTOR for x in xs)
    spec, kernel = ex.elementwise(node, kinds)
    vectors = [rt.contiguous(xs[k]) for k in spec.vectors]
    scalars = [_first(xs[k]) for k in spec.scalars]
    kernel(out.size, *vectors, *scalars, out, out.size)
    return out


def _identity(op: Op, dtype):
    return {Op.REDUCE_SUM: 0, Op.REDUCE_PROD: 1}[op]


def _reduce(ex, node, x):
    """A pixel-axis reduction in ``tree`` mode follows the deterministic
    tree; every other reduction NumPy's order."""
    axes = tuple(a % x.ndim for a in node.attrs["axes"]) if x.ndim else ()
    if ex.reductions == "tree" and is_pixel_reduction(node, ex.pixels):
        return _tree(ex, node.op, node.dtype, x, axes, node.shape)
    return _numpy_order(ex, node.op, node.dtype, x, axes, node.shape)


def _numpy_order(ex, op: Op, dtype, x, axes, shape):
    """NumPy's order (``codegen.reduce``): the operand as (outputs, chunks,
    length); pairwise trees over each chunk, then a fold per output; or one
    left fold per output."""
    rt = ex.rt
    layout = layout_of(x.shape, axes, op)
    out = rt.empty(shape, dtype)
    if out.size == 0:
        return out
    flat = out.reshape(-1)
    if layout.reduced == 0:
        flat.fill(_identity(op, dtype))
        return out
    y = rt.contiguous(x.transpose(layout.perm)).reshape(layout.outputs, layout.reduced)
    kernels = ex.reduction(op, dtype)
    if layout.sequential:
        nan_first = int(op in (Op.REDUCE_MAX, Op.REDUCE_MIN) and np.dtype(dtype) in dtypes.FLOATS
                        and x.ndim - 1 in axes)
        kernels["sequential"](layout.outputs, y, flat, layout.outputs, layout.reduced, nan_first)
        return out
    tree, arrays = ex.tree(layout.length)
    rows = layout.outputs * layout.chunks
    vals = rt.empty((rows, tree.nodes), dtype)
    offset, length, leaf_node, levels = arrays
    kernels["leaf"](rows * tree.leaves, y, vals, offset, length, leaf_node, tree.leaves,
                    layout.length, tree.nodes, rows)
    for (parent, left, right), count in reversed(levels):
        kernels["combine"](rows * count, vals, parent, left, right, count, tree.nodes, rows)
    kernels["fold"](layout.outputs, vals, flat, layout.outputs, layout.chunks, tree.nodes)
    return out


def _tree(ex, op: Op, dtype, x, axes, shape):
    """``backends.reductions``' deterministic order: the other axes first
    (NumPy's order), then blocks of ``REDUCTION_BLOCK`` rows by the halving
    tree, then the blocks' partials by the same tree."""
    rest = tuple(a for a in axes if a != 0)
    if rest:
        kept = tuple(n for a, n in enumerate(x.shape) if a not in rest)
        x = _numpy_order(ex, op, dtype, x, rest, kept)
    rows = x.shape[0]
    work = ex.rt.empty(x.shape, dtype)  # the tree runs in place
    work[...] = x
    work = work.reshape(rows, -1)
    level = ex.halving(op, dtype)
    blocks = -(-rows // REDUCTION_BLOCK)
    _halve(level, work, blocks, REDUCTION_BLOCK, rows)
    partials = ex.rt.contiguous(work[::REDUCTION_BLOCK])
    _halve(level, partials, 1, blocks, blocks)
    out = ex.rt.empty(shape, dtype)
    out.reshape(-1)[...] = partials[0]
    return out


def _halve(level, r, blocks: int, block: int, rows: int) -> None:
    """Every level of the halving tree over blocks of ``block`` rows."""
    n_full = min(block, rows)
    n_last = rows - (blocks - 1) * block
    cols = r.shape[1]
    while max(n_full, n_last) > 1:
        level(blocks * ((n_full + 1) // 2) * cols, r, blocks, block, n_full, n_last, cols)
        n_full, n_last = (n_full + 1) // 2, (n_last + 1) // 2


def _by_meaning(op: Op):
    """The op's one meaning (``ir.eval.EVAL_XP``) in the executor's array
    namespace (``namespace.DeviceNamespace``): layout ops as views or copies
    through isokernel's allocator, the matrix product through cuBLAS, control
    flow with its bodies run on the device (the host reads a ``while``'s
    predicate and a ``cond``'s index, one value per step)."""
    rule = EVAL_XP[op]
    return lambda ex, node, *xs: rule(ex.xp, *xs, **node.attrs)


def _table(ex, node, x, layer):
    """``exact``: the reference's clamp-floor-lerp as an elementwise kernel
    (the table in device memory); ``hardware``: the texture unit's linear
    filtering (tolerance-bounded)."""
    if node.attrs["mode"] == "exact":
        return _elementwise(ex, node, x, layer)
    rt = ex.rt
    out = rt.empty(node.shape, node.dtype)
    if out.size == 0:
        return out
    texture, kernel = ex.texture(node)
    layers, nodes = node.attrs["values"].value.shape
    scalar = np.dtype(node.dtype).type
    kernel(out.size, rt.contiguous(x), rt.contiguous(layer), out, texture,
           scalar(node.attrs["x0"]), scalar(node.attrs["step"]), scalar(nodes - 1),
           scalar(layers - 1), out.size)
    return out


def _fused(ex, node, *xs):
    """A fused form: one kernel where this strategy has one for it
    (``cuda-fused``), else its body op by op (the composition)."""
    found = ex.fused(node) if ex.fused_kernels else None
    if found is None:
        ex.forms_as_composition += 1
        return ex.run_graph(node.attrs["body"].graph, xs)[0]
    module, kernels = found
    ex.forms_as_kernels += 1
    body = node.attrs["body"].graph
    operand = dict(zip(body.inputs, xs))
    (out,) = run_region(ex, module.kernels[0], kernels, lambda n: operand[n],
                        module.partition.pixels)
    return out


def run_region(ex, region_kernel, loaded: dict, value_of, rows: int) -> list:
    """Launch one region kernel: contiguous row and whole inputs, fresh
    outputs of ``rows`` rows; returns the outputs in the body's order."""
    rt, body = ex.rt, region_kernel.body
    row_in = [rt.contiguous(value_of(x)) for x in body.row_inputs]
    whole = [rt.contiguous(value_of(x)) for x in body.whole_inputs]
    outs = [rt.empty((rows, *n.shape[1:]), n.dtype) for n in body.outputs]
    loaded[region_kernel.name](rows, *row_in, *whole, *outs, rows)
    return outs


# --- dense linear algebra: cuSOLVER and cuBLAS through CuPy, one matrix at a time ---------

def _matrices(x):
    return x.reshape(-1, *x.shape[-2:])


def _interchanges_to_permutation(pivots: np.ndarray) -> np.ndarray:
    """The permutation getrf's row interchanges make (host arrays)."""
    perm = np.tile(np.arange(pivots.shape[-1], dtype=np.int32), (pivots.shape[0], 1))
    which = np.arange(pivots.shape[0])
    for k in range(pivots.shape[-1]):
        p = pivots[:, k]
        perm[which, k], perm[which, p] = perm[which, p], perm[which, k].copy()
    return perm


def _lu(ex, node, a):
    """getrf by cuSOLVER (``cupyx.scipy.linalg.lu_factor``) per matrix."""
    from cupyx.scipy.linalg import lu_factor
    flat = _matrices(a)
    lu = ex.rt.empty(flat.shape, a.dtype)
    pivots = np.empty(flat.shape[:-1], np.int32)
    for i in range(flat.shape[0]):
        factors, piv = lu_factor(flat[i], check_finite=False)
        lu[i] = factors
        pivots[i] = ex.rt.to_host(piv)
    perm = _interchanges_to_permutation(pivots)
    rows = a.shape[:-1]
    return [lu.reshape(a.shape), ex.rt.upload(pivots.reshape(rows)),
            ex.rt.upload(perm.reshape(rows))]


def _triangular_solve(ex, node, a, b):
    """trsm by cuBLAS (``cupyx.scipy.linalg.solve_triangular``) per matrix."""
    from cupyx.scipy.linalg import solve_triangular
    attrs = node.attrs
    fa, fb = _matrices(a), _matrices(b)
    out = ex.rt.empty(fb.shape, b.dtype)
    for i in range(fa.shape[0]):
        out[i] = solve_triangular(fa[i], fb[i], trans=int(attrs["transpose_a"]),
                                  lower=attrs["lower"], unit_diagonal=attrs["unit_diagonal"],
                                  check_finite=False)
    return out.reshape(b.shape)


def _cholesky(ex, node, a):
    """potrf by cuSOLVER (``cupy.linalg.cholesky``, batched), from the lower
    triangle."""
    xp = ex.rt.xp
    lower = xp.tril(a)
    return xp.linalg.cholesky(lower + xp.swapaxes(xp.tril(a, -1), -1, -2))


def _eigh(ex, node, a):
    xp = ex.rt.xp
    w, v = xp.linalg.eigh(a, UPLO="L" if node.attrs["lower"] else "U")
    return [w, v]


def _svd(ex, node, a):
    u, s, vh = ex.rt.xp.linalg.svd(a, full_matrices=node.attrs["full_matrices"])
    return [u, s, vh]


def _device_complex(ex, node, re, im):
    out = ex.rt.empty(node.shape, node.dtype)
    out.real, out.imag = re, im
    return out


COMPLEX_ON_DEVICE = frozenset({Op.INPUT, Op.CONST, Op.REAL, Op.IMAG, Op.COMPLEX, Op.FFT, Op.GATHER,
                               Op.GET}) \
    | frozenset(EVAL_XP) - {Op.DOT_GENERAL} - CONTROL
"""The ops a GPU strategy runs on complex values, after ``prepare`` has
written every op with a pair form on real parts (``transforms.complex_pairs``):
inputs and constants, the parts and the value made of them (CuPy), layout
ops, gathers and cuFFT."""

CUPY = {
    **{op: _elementwise for op in ELEMENTWISE},
    Op.REAL: lambda ex, node, x: ex.rt.contiguous(ex.rt.xp.real(x)),
    Op.IMAG: lambda ex, node, x: ex.rt.contiguous(ex.rt.xp.imag(x)),
    Op.COMPLEX: _device_complex,
    **{op: _reduce for op in REDUCE},
    **{op: _by_meaning(op) for op in EVAL_XP},
    Op.LU: _lu,
    Op.TRIANGULAR_SOLVE: _triangular_solve,
    Op.CHOLESKY: _cholesky,
    Op.QR: lambda ex, node, a: list(ex.rt.xp.linalg.qr(a, mode=node.attrs["mode"])),
    Op.EIGH: _eigh,
    Op.SVD: _svd,
    Op.TABLE_LOOKUP: _table,
    Op.FUSED: _fused,
    Op.GET: lambda ex, node, results: EVAL[Op.GET](results, **node.attrs),
    Op.GATHER: lambda ex, node, x, idx: _device_gather(ex, x, idx),
    Op.SCATTER: lambda ex, node, *operands: _no_device_scatter(node),
    Op.SORT: lambda ex, node, *xs: _device_sort(ex, *xs, **node.attrs),
    Op.FFT: lambda ex, node, x: _device_fft(ex, x, **node.attrs),
}
"""Every op the GPU strategies run outside a fused kernel: ``rule(executor,
node, *operands) -> device array`` (control flow: a list of them, which its
gets read). Layout ops, the matrix product and control flow run their one
meaning (``ir.eval.EVAL_XP``) in the executor's namespace."""

_VENDOR = NumericalPolicy(subnormals="implementation-defined",
                          contraction="implementation-defined (cuSOLVER/cuBLAS use FMA)",
                          reduction_order="implementation-defined (vendor blocking)",
                          math_library="cuSOLVER/cuBLAS via CuPy, one matrix per call")
_LINALG_NAMES = {
    Op.LU: "cupyx.scipy.linalg.lu_factor (cuSOLVER getrf)",
    Op.TRIANGULAR_SOLVE: "cupyx.scipy.linalg.solve_triangular (cuBLAS trsm)",
    Op.CHOLESKY: "cupy.linalg.cholesky (cuSOLVER potrf)",
    Op.QR: "cupy.linalg.qr (cuSOLVER geqrf + orgqr)",
    Op.EIGH: "cupy.linalg.eigh (cuSOLVER syevd 'L')",
    Op.SVD: "cupy.linalg.svd (cuSOLVER gesvd)",
}


def _register_linalg_capsules() -> None:
    """The vendor calls the dense linear algebra rules make, under the
    provider of the one vendor library the GPU profiles trust."""
    for op, name in _LINALG_NAMES.items():
        register(Capsule(name, op, BLAS_PROVIDER, "cuda", "trusted", "isokernel-graph", _VENDOR))


_register_linalg_capsules()



# --- the executor -----------------------------------------------------------------------

NO_KERNEL = ("{op} of {dtype}{where}: no CUDA kernel reproduces NumPy's result here (integer "
             "power raises for negative exponents in NumPy, which a kernel cannot). Nothing was "
             "run; cast to a float dtype first, or use strategy='reference'")


NO_SCATTER = ("scatter{where}: the GPU strategies have no scatter kernel that applies "
              "repeated indices in isokernel's fixed order yet (CUDA atomics do not). Nothing "
              "was run; use a CPU strategy (native) for this graph")


def _device_gather(ex, x, idx):
    """Rows of ``x`` by index, the indices clamped as the reference's rule
    clamps them (CuPy's ``take`` has no ``mode``)."""
    xp = ex.rt.xp
    if x.shape[0] == 0:
        return xp.zeros(idx.shape + x.shape[1:], x.dtype)
    return xp.take(x, xp.clip(idx, 0, x.shape[0] - 1), axis=0)


def _device_sort(ex, *xs, axis, num_keys):
    """CuPy's stable argsort (NaN last, as NumPy's), the keys least
    significant first (a stable sort by each key of the order so far: the
    lexicographic order, along any axis), every operand reordered by it."""
    xp = ex.rt.xp
    order = xp.argsort(xs[num_keys - 1], axis=axis, kind="stable")
    for key in reversed(xs[:num_keys - 1]):
        ranked = xp.argsort(xp.take_along_axis(key, order, axis=axis), axis=axis,
                            kind="stable")
        order = xp.take_along_axis(order, ranked, axis=axis)
    return [xp.take_along_axis(x, order, axis=axis) for x in xs]


def _device_fft(ex, x, *, kind, lengths):
    """cuFFT through CuPy, NumPy's normalization."""
    fn = {"fft": "fftn", "ifft": "ifftn", "rfft": "rfftn", "irfft": "irfftn"}[kind]
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    return getattr(ex.rt.xp.fft, fn)(x, s=lengths, axes=axes)


def _no_device_scatter(node):
    where = f" at {node.where}" if node.where else ""
    raise PlanningError(NO_SCATTER.format(where=where))


def refuse_unsupported(graph) -> None:
    """Planning-time refusal of an elementwise node without an exact C form,
    and of a scatter (fused forms and control flow are checked through their
    bodies)."""
    for node in graph.nodes:
        if node.op is Op.SCATTER:
            _no_device_scatter(node)
        complex_ = any(a.dtype in dtypes.COMPLEX
                       for a in (*node.avals, *(a for x in node.inputs for a in x.avals)))
        if complex_ and node.op not in COMPLEX_ON_DEVICE:
            where = f" at {node.where}" if node.where else ""
            raise PlanningError(f"{node.op.value}{where}: complex {node.op.value} has no CUDA "
                                f"form (complex values run on the GPU as real parts where "
                                f"their op has a pair form, isokernel.record.complex_parts; "
                                f"complex FFTs run through cuFFT). Nothing was run; compute "
                                f"it from inp.real and inp.imag, or use a CPU strategy")
        if node.op is Op.FUSED or node.op in CONTROL:
            for _, body in subgraphs(node):
                refuse_unsupported(body.graph)
        elif node.op in ELEMENTWISE and not complex_ and not _has_expression(node):
            where = f" at {node.where}" if node.where else ""
            raise PlanningError(NO_KERNEL.format(op=node.op.value, where=where,
                                                 dtype=dtypes.SHORT[node.inputs[0].dtype]))


def _has_expression(node) -> bool:
    operand = node.inputs[-1] if node.op is Op.SELECT else node.inputs[0]
    attrs = {"dtype": node.attrs["dtype"]} if node.op is Op.CAST else {}
    ctx = Ctx(operand.dtype, node.dtype, dict(node.attrs))
    return C_EXPR[node.op](ctx, *["x"] * len(node.inputs), **attrs) is not None


class DeviceExecutor:
    """What the GPU executables share: the runtime, uploaded constants, the
    reduction mode, and the kernels, tree layouts and textures built so far."""

    def __init__(self, graph, runtime=None, device: int | None = None,
                 reductions: str = "reference", fused_kernels: bool = False):
        refuse_unsupported(graph)
        if runtime is None:
            runtime = device_runtime(_current_device() if device is None else device)
        self.rt = runtime
        self.xp = DeviceNamespace(runtime, self.run_graph)
        self.graph = graph
        self.reductions = check_mode(reductions)
        self.pixels = pixel_count(graph)
        self.fused_kernels = fused_kernels
        with runtime.activate():
            self.consts = {n: runtime.upload(n.attrs["value"].value) for n in graph.consts()}
        self._elementwise: dict = {}
        self._reductions: dict = {}
        self._trees: dict = {}
        self._cache: dict = {}  # halving kernels, textures, fused-form kernels
        self.uploads = self.forms_as_kernels = self.forms_as_composition = 0
        self.bodies: dict = {}  # id(body graph) -> run(args), for the bodies compiled whole

    def elementwise(self, node, kinds):
        operands = tuple(x.dtype for x in node.inputs)
        key = (node.op, node.attrs, operands, node.dtype, kinds)
        found = self._elementwise.get(key)
        if found is None:
            spec = cg.elementwise_kernel(node.op, dict(node.attrs), operands, node.dtype, kinds)
            found = self._elementwise[key] = (spec, self.rt.elementwise_kernel(spec))
        return found

    def elementwise_sources(self) -> list[str]:
        """The CUDA source of every elementwise kernel built so far."""
        return [spec.source for spec, _ in self._elementwise.values()]

    def reduction(self, op: Op, dtype):
        key = (op, np.dtype(dtype))
        found = self._reductions.get(key)
        if found is None:
            spec = cg.reduction_kernels(op, dtype)
            loaded = self.rt.reduction_kernels(spec)
            found = self._reductions[key] = {
                part: loaded[getattr(spec, part)]
                for part in ("leaf", "combine", "fold", "sequential")}
        return found

    def tree(self, length: int):
        found = self._trees.get(length)
        if found is None:
            tree = pairwise_tree(length)
            up = self.rt.upload
            levels = tuple(((up(p), up(left), up(right)), len(p))
                           for p, left, right in tree.levels)
            arrays = (up(tree.leaf_offset), up(tree.leaf_length), up(tree.leaf_node), levels)
            found = self._trees[length] = (tree, arrays)
        return found

    def _cached(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def halving(self, op: Op, dtype):
        return self._cached(("halving", op, np.dtype(dtype)),
                            lambda: self.rt.halving_kernel(cg.halving_kernels(op, dtype)))

    def texture(self, node):
        """(texture object, kernel) of a hardware-mode look-up."""
        values = node.attrs["values"]
        return (self._cached(("texture", values), lambda: self.rt.texture(values.value)),
                self._cached(("texture kernel", node.dtype),
                             lambda: self.rt.texture_kernel(cg.texture_kernel(node.dtype))))

    def fused(self, node):
        """(module, loaded kernels) of a fused form, or None without one."""
        def make():
            module = cg.fused_module(node)
            return None if module is None else (module, self.rt.region_kernels(module))
        return self._cached(("fused", node), make)

    def const(self, node):
        """A constant on the device (those of fused bodies uploaded on first use)."""
        if node not in self.consts:
            self.consts[node] = self.rt.upload(node.attrs["value"].value)
        return self.consts[node]

    def bring(self, arrays) -> list:
        """The inputs on the device: host arrays are uploaded (counted)."""
        out = []
        for a in arrays:
            if self.rt.is_device(a):
                out.append(a)
            else:
                self.uploads += 1
                out.append(self.rt.upload(np.asarray(a)))
        return out

    def value(self, node, env: dict):
        return self.const(node) if node.op is Op.CONST else env[node]

    def run_node(self, node, env: dict):
        if node.op is Op.CONST:
            return self.const(node)
        return CUPY[node.op](self, node, *(self.value(x, env) for x in node.inputs))

    def run_graph(self, graph, args) -> list:
        """A closed sub-graph (a loop's or branch's body, a fused form's) on
        the device: by its program where the executable compiled one
        (``bodies``: ``cuda-megakernel``'s kernels), else every node by its
        ``CUPY`` rule."""
        program = self.bodies.get(id(graph))
        if program is not None:
            return program(args)
        env = dict(zip(graph.inputs, args))
        for node in graph.nodes:
            if node not in env:
                env[node] = self.run_node(node, env)
        return [self.value(x, env) for x in graph.outputs]


def _current_device() -> int:
    import cupy  # the optional cuda extra: imported when a GPU strategy is built

    return int(cupy.cuda.Device().id)


class OpByOpExecutable(ExecutableBase):
    """Runs the plan's graph one device operation per node (``CUPY``), in
    tape order, every buffer released after its last use; keeps the plan it
    is given (its strategy's planner's, ``node_plan``). ``fused_kernels``:
    fused forms run as one kernel each where the form allows
    (``cuda-fused``), else as their body, op by op."""

    fused_kernels = False

    def __init__(self, plan: Plan, runtime=None, device: int | None = None,
                 reductions: str = "reference"):
        self.graph = plan.graph
        self.ex = DeviceExecutor(self.graph, runtime, device, reductions, self.fused_kernels)
        super().__init__(plan)
        self._frees = release_schedule(self.graph)
        self.static_liveness = static_liveness(self.graph)

    def call_flat(self, arrays: Sequence) -> tuple:
        ex = self.ex
        with ex.rt.activate():
            env = dict(zip(self.graph.inputs, ex.bring(arrays)))
            for i, node in enumerate(self.graph.nodes):
                if node.op is not Op.INPUT:
                    env[node] = ex.run_node(node, env)
                for dead in self._frees[i]:
                    env.pop(dead, None)
            return tuple(ex.value(x, env) for x in self.graph.outputs)

    def source(self) -> str:
        kernels = self.ex.elementwise_sources()
        if not kernels:
            return "// no elementwise kernel has run yet: call the function first\n"
        return "\n".join(kernels)

    def report_lines(self) -> list[tuple[str, str]]:
        return device_report_lines(self.ex, len(self.ex.elementwise_sources()), "elementwise")


def node_plan(graph, profile: Profile, *, fused_kernels: bool = False,
              inside: frozenset = frozenset(), region_provider: str | None = None) -> NodePlan:
    """A GPU strategy's plan (its ``planner``): ``planning.plan``'s accepted
    capsule per op (or its refusal), and the capsule each node runs under:
    region nodes (``inside``) under ``region_provider``; a hardware-mode
    look-up under the texture capsule; a fused form under the form-kernel
    capsule where the strategy has form kernels; every other node under the
    eager strategy's capsule of its op."""
    accepted = plan_ops(graph, profile)
    capsules = {}
    for node in graph.nodes:
        if node.op in (Op.INPUT, Op.CONST):
            continue
        if node in inside:
            capsules[node] = lookup(node.op, region_provider)
        elif node.op is Op.TABLE_LOOKUP and node.attrs["mode"] != "exact":
            capsules[node] = lookup(node.op, TEXTURE_PROVIDER)
        elif node.op is Op.FUSED and fused_kernels:
            capsules[node] = lookup(node.op, FORM_PROVIDER)
        else:
            capsules[node] = next(c for c in (lookup(node.op, p) for p in PROVIDERS) if c)
    return NodePlan(graph, profile, accepted.capsules, capsules)


def device_report_lines(ex: DeviceExecutor, kernels: int, what: str) -> list:
    rt = ex.rt
    lines = [("device", rt.describe()),
             ("kernels", f"{kernels} {what} kernel(s) compiled by NVRTC with "
                         f"{' '.join(cg.nvrtc_options(False))}; reductions: "
                         f"{len(ex._reductions)} kernel set(s)"),
             ("transfers", f"{ex.uploads} host input(s) uploaded so far; inputs given as "
                           f"NumPy arrays are uploaded once per call and the outputs "
                           f"copied back; pass CuPy arrays to keep everything on the device")]
    stats = rt.memory_stats()
    lines.append(("allocator", f"isokernel buffers: {stats.live_bytes} B live, "
                            f"{stats.cache_bytes} B cached for reuse (cap "
                            f"{stats.cap_bytes or 'unbounded'}; {stats.cap_source})"))
    return lines
