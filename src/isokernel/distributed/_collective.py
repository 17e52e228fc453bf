"""Data-parallel ``value_and_grad`` over a world of ranks: one process per
GPU talking through NCCL (CuPy's ``cupy.cuda.nccl``), or threads of one
process emulating such a world on the host for tests. The loss and every
gradient bit are those of ``reference_value_and_grad`` in one process, for
any world size and on every rank.

Every rank is called with the same parameters and knows the full batch's
row count N. The blocks are ``_blocks.block_bounds(N, block_rows)`` (B of
them, fixed by N and ``block_rows`` alone); rank r computes the contiguous
blocks ``[r·k, min(B, (r+1)·k))`` with ``k = ⌈B/W⌉`` for a world of W ranks
(a rank past the last block computes none). Each rank packs its blocks'
``(loss, gradient leaves)`` into one fixed-size buffer (k block slots and a
status word); one all-gather gives every rank all B partials in block order,
and every rank combines them in ``_blocks.pairwise``'s fixed tree over block
index, then divides by N for ``reduction="mean"``.

That is a gather of fixed blocks followed by a fixed-order sum, not NCCL's
own reduction order: ``allReduce`` sums in an order (ring or tree, split
into chunks per channel) that depends on the rank count, the topology and
the NCCL version, so its bits change with the world size. ``allGather``
moves bytes without adding them, and the sum happens afterwards in the same
tree on every rank. The price: each rank receives B·(1+G) values for G
gradient elements, where an all-reduce would move about 2·G.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import threading
from dataclasses import dataclass
from numbers import Integral
from typing import Protocol, runtime_checkable

import numpy as np

from .. import numpy as inp
from ..backends.devices import Device, unavailable_reason
from ..ir import BackendUnavailableError, DTypeError, IsokernelError
from ..ir.pytree import tree_flatten, tree_unflatten
from ..pipeline import jit
from . import _blocks

NAME = "collective_value_and_grad"
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
GATHER_DTYPES = (*FLOAT_DTYPES, np.dtype(np.int64))
HOST_TIMEOUT = 120.0  # seconds a host rank waits for the others in a collective
FAILED = -1.0  # the status word of a rank whose blocks raised
HEADER_FIELDS = ("rows", "dtype", "gradient size", "parameter shapes and structure",
                 "batch arguments' trailing shapes and dtypes", "options", "refused")

BAD_WORLD = ("{what}: world_size={size!r}; a world has at least one rank: give a whole number "
             ">= 1 (one rank per GPU for NCCL)")
BAD_RANK = ("{what}: rank={rank!r} in a world of {size} ranks; ranks are 0 … {last}")
NOT_A_COMM = (f"{NAME}: comm={{got!r}} is not a communicator; pass one rank's communicator: "
              f"isokernel.distributed.host_world(n)[rank] (threads on the host, for tests) or "
              f"isokernel.distributed.NcclCommunicator(world_size, unique_id, rank) (one "
              f"process per GPU)")
BAD_DTYPE = (f"{NAME}: rank {{rank}}: the differentiated parameters have dtype(s) {{got}}; the "
             f"loss and the gradients travel in one buffer of float32 or float64. Cast every "
             f"parameter to one of them, e.g. isokernel.tree_map(lambda p: "
             f"np.asarray(p, np.float32), params)")
BAD_OUTPUT = (f"{NAME}: rank {{rank}}, block {{index}} (rows {{lo}}:{{hi}}): the loss and "
              f"gradients have dtype(s) {{got}} but the parameters are {{dtype}}; the loss must "
              f"be of the parameters' dtype: cast the batch to it, or end the loss with "
              f".astype(...)")
BAD_ROWS_OPTION = (f"{NAME}: rows={{got!r}}; give the full batch's row count (a whole number >= "
                   f"1) when each rank passes only its own rows, or leave rows=None and pass "
                   f"the full batch on every rank")
BAD_SHARD = (f"{NAME}: rank {{rank}} of {{size}} holds rows {{lo}}:{{hi}} of {{rows}} "
             f"({{need}} rows, blocks {{blocks}}) but sharded argument {{arg}} has {{got}} "
             f"rows along axis 0; pass batch[{{lo}}:{{hi}}] (vg.local_rows({{rows}})), or the "
             f"full batch with rows=None")
DISAGREE = (f"{NAME}: the ranks disagree on {{fields}} ({{values}}); every rank must call with "
            f"parameters of the same structure, shapes and dtype, batch arguments of the same "
            f"trailing shapes and dtypes, the same full row count and the same options")
REFUSED = (f"{NAME}: rank(s) {{ranks}} refused their arguments (their own error says why); "
           f"this rank (rank {{rank}}) accepted its own, and nothing was computed")
RANK_FAILED = (f"{NAME}: rank(s) {{ranks}} raised while computing their blocks (their own "
               f"error says why); this rank (rank {{rank}}) has no total to return")
GATHER_BUFFERS = ("{what}.all_gather: {problem}; send is one rank's contiguous buffer and recv "
                  "a contiguous buffer of world_size × send.size elements of the same dtype")
GATHER_DTYPE = ("{what}.all_gather: dtype {dtype} is not gathered; use float32, float64 or int64")
HOST_BROKEN = ("HostCommunicator: rank {rank} of {size} stopped waiting in all_gather: {why}. "
               "Every rank must make the same collective calls in the same order")
NO_CUPY = ("NcclCommunicator needs CuPy with NCCL and one NVIDIA GPU per rank, but CuPy does "
           "not import here ({err}). Install it for the CUDA of the machine, e.g. pip install "
           "cupy-cuda12x (or 'isokernel[cuda]'; cupy-cuda13x for CUDA 13) and NCCL (pip "
           "install nvidia-nccl-cu12), then run one process per GPU on a machine with one GPU "
           "per rank (>= 2 GPUs for two ranks). Nothing falls back to the host: to run the "
           "same code on the CPU, use isokernel.distributed.host_world(n)")
NO_NCCL = ("NcclCommunicator: CuPy {version} imports but its NCCL binding is unavailable "
           "(cupy.cuda.nccl.available is False); install NCCL where CuPy finds it (pip "
           "install nvidia-nccl-cu12, or conda install -c conda-forge nccl) and start again. "
           "Nothing falls back to the host: to run the same code on the CPU, use "
           "isokernel.distributed.host_world(n)")
NO_GPU = ("NcclCommunicator: rank {rank} cannot use a GPU: {reason}. Run one process per GPU "
          "on a machine with one GPU per rank (>= 2 GPUs for two ranks), or pass device= to "
          "pick this rank's GPU. Nothing falls back to the host: to run the same code on the "
          "CPU, use isokernel.distributed.host_world(n)")


class CollectiveError(IsokernelError, RuntimeError):
    """This rank cannot finish a collective call because another rank
    refused its arguments, raised, or stopped taking part."""


@runtime_checkable
class Communicator(Protocol):
    """One rank of a world. ``device``: ``"cpu"`` (buffers are NumPy arrays)
    or ``"cuda:N"`` (CuPy arrays on GPU N). ``all_gather(send, recv)``: every
    rank's ``send`` (all of one size and dtype) lands in ``recv`` in rank
    order. ``synchronize()`` waits for this rank's pending device work."""

    rank: int
    world_size: int
    device: str

    def all_gather(self, send, recv) -> None: ...

    def synchronize(self) -> None: ...

    def close(self) -> None: ...


def check_world(what: str, world_size, rank=0) -> None:
    if isinstance(world_size, bool) or not isinstance(world_size, Integral) or world_size < 1:
        raise ValueError(BAD_WORLD.format(what=what, size=world_size))
    if isinstance(rank, bool) or not isinstance(rank, Integral) or not 0 <= rank < world_size:
        raise ValueError(BAD_RANK.format(what=what, rank=rank, size=world_size,
                                         last=world_size - 1))


def check_gather(what: str, send, recv, world_size: int, array_type) -> None:
    """The buffers ``all_gather`` accepts: of this world's array type,
    contiguous, one dtype, ``recv`` holding ``world_size`` copies of ``send``."""
    if not (isinstance(send, array_type) and isinstance(recv, array_type)):
        raise TypeError(GATHER_BUFFERS.format(what=what, problem=(
            f"send and recv must be {array_type.__module__}.{array_type.__name__}s, got "
            f"{type(send).__name__} and {type(recv).__name__}")))
    problems = [
        (send.flags.c_contiguous and recv.flags.c_contiguous, "a buffer is not contiguous"),
        (send.dtype == recv.dtype, f"send is {send.dtype} but recv is {recv.dtype}"),
        (recv.size == world_size * send.size,
         f"recv has {recv.size} elements, not {world_size} × {send.size}"),
    ]
    for ok, problem in problems:
        if not ok:
            raise ValueError(GATHER_BUFFERS.format(what=what, problem=problem))
    if send.dtype not in GATHER_DTYPES:
        raise TypeError(GATHER_DTYPE.format(what=what, dtype=send.dtype))


# ------------------------------------------------------------------ host world


class _HostWorld:
    """What the ranks of one host world share: one slot per rank and a
    rendezvous. Unlike ``threading.Barrier``, a rank already released from a
    rendezvous returns even if the world is aborted before it wakes up."""

    def __init__(self, size: int, timeout: float):
        self.size, self.timeout = size, timeout
        self.slots: list = [None] * size
        self._cond = threading.Condition()
        self._arrived, self._generation, self._broken = 0, 0, False

    def rendezvous(self) -> bool:
        """Wait for every rank; False when the world is (or becomes) broken:
        aborted, or a rank waited past the timeout."""
        with self._cond:
            if self._broken:
                return False
            generation = self._generation
            self._arrived += 1
            if self._arrived == self.size:
                self._arrived, self._generation = 0, generation + 1
                self._cond.notify_all()
                return True
            self._cond.wait_for(lambda: self._generation != generation or self._broken,
                                self.timeout)
            if self._generation != generation:
                return True
            self.abort()
            return False

    def abort(self) -> None:
        with self._cond:
            self._broken = True
            self._cond.notify_all()


class HostCommunicator:
    """One rank of a world emulated by threads of this process, with the
    NCCL communicator's methods on NumPy buffers. A rank that waits in a
    collective longer than the world's ``timeout`` (another rank never came)
    raises ``CollectiveError``; ``abort()`` wakes every waiting rank with it,
    and the world is then unusable."""

    device = "cpu"

    def __init__(self, world: _HostWorld, rank: int):
        check_world("HostCommunicator", world.size, rank)
        self._world = world
        self.rank = rank
        self.world_size = world.size

    def all_gather(self, send, recv) -> None:
        check_gather("HostCommunicator", send, recv, self.world_size, np.ndarray)
        world = self._world
        world.slots[self.rank] = send.copy()  # the caller may reuse send at once
        self._wait()
        sizes = {(slot.size, slot.dtype.str) for slot in world.slots}
        if len(sizes) != 1:
            raise ValueError(GATHER_BUFFERS.format(
                what="HostCommunicator", problem=f"the ranks sent buffers of different sizes "
                                                 f"or dtypes {sorted(sizes)}"))
        recv.reshape(self.world_size, send.size)[...] = np.stack(world.slots)
        self._wait()  # nobody overwrites a slot before every rank has read it

    def synchronize(self) -> None:
        """Nothing is pending on the host."""

    def close(self) -> None:
        """A host rank holds nothing to release."""

    def abort(self) -> None:
        """Wake every rank waiting in a collective of this world with an error."""
        self._world.abort()

    def _wait(self) -> None:
        if not self._world.rendezvous():
            why = (f"the world was aborted (a rank raised), or a rank waited more than "
                   f"{self._world.timeout:g} s for the others")
            raise CollectiveError(HOST_BROKEN.format(rank=self.rank, size=self.world_size,
                                                     why=why))


def host_world(world_size: int, *, timeout: float = HOST_TIMEOUT) -> list[HostCommunicator]:
    """One ``HostCommunicator`` per rank of a new host-emulated world; run
    each rank in its own thread (``run_host_world`` does)."""
    check_world("host_world", world_size)
    world = _HostWorld(int(world_size), timeout)
    return [HostCommunicator(world, rank) for rank in range(world.size)]


def run_host_world(world_size: int, fn, *, timeout: float = HOST_TIMEOUT) -> list:
    """``fn(comm)`` on every rank of a new host world, one thread each; the
    results in rank order. A rank that raises aborts the world, and its
    error (not the other ranks' ``CollectiveError``) is raised here."""
    comms = host_world(world_size, timeout=timeout)
    results, errors = [None] * len(comms), [None] * len(comms)

    def rank_main(comm):
        try:
            results[comm.rank] = fn(comm)
        except BaseException as err:  # re-raised below, in the caller's thread
            errors[comm.rank] = err
            comm.abort()

    threads = [threading.Thread(target=rank_main, args=(c,), name=f"isokernel-rank-{c.rank}")
               for c in comms]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    raised = [e for e in errors if e is not None]
    if raised:
        own = [e for e in raised if not isinstance(e, CollectiveError)]
        raise (own or raised)[0]
    return results


# ------------------------------------------------------------------------ NCCL


def _cupy_nccl():
    """CuPy and its NCCL module, or ``BackendUnavailableError`` saying what to install."""
    try:
        import cupy
        from cupy.cuda import nccl
    except Exception as err:  # a missing or broken CuPy raises many kinds of errors
        raise BackendUnavailableError(NO_CUPY.format(err=f"{type(err).__name__}: {err}")) \
            from None
    if not nccl.available:
        raise BackendUnavailableError(NO_NCCL.format(version=cupy.__version__))
    return cupy, nccl


def nccl_unique_id():
    """A new NCCL unique id, made on one rank (rank 0) and sent to every
    other rank before each builds its ``NcclCommunicator`` with it."""
    return _cupy_nccl()[1].get_unique_id()


class NcclCommunicator:
    """One rank of an NCCL world, in a process of its own: makes GPU
    ``device`` (default ``rank % GPU count``) this process's current device
    and joins the world of ``world_size`` ranks named by ``unique_id`` (this
    blocks until every rank has joined). Collectives run on CuPy's current
    stream, on CuPy arrays."""

    def __init__(self, world_size: int, unique_id, rank: int, *, device: int | None = None):
        check_world("NcclCommunicator", world_size, rank)
        self._cupy, self._nccl = _cupy_nccl()
        index = self._gpu(rank, device)
        self._cupy.cuda.Device(index).use()
        self._types = {np.dtype(np.float32): self._nccl.NCCL_FLOAT32,
                       np.dtype(np.float64): self._nccl.NCCL_FLOAT64,
                       np.dtype(np.int64): self._nccl.NCCL_INT64}
        self.rank, self.world_size, self.device = int(rank), int(world_size), f"cuda:{index}"
        self._comm = self._nccl.NcclCommunicator(self.world_size, unique_id, self.rank)

    def _gpu(self, rank: int, device: int | None) -> int:
        reason = unavailable_reason(Device("cuda", 0 if device is None else device))
        if reason is not None:
            raise BackendUnavailableError(NO_GPU.format(rank=rank, reason=reason))
        return rank % self._cupy.cuda.runtime.getDeviceCount() if device is None else device

    def all_gather(self, send, recv) -> None:
        check_gather("NcclCommunicator", send, recv, self.world_size, self._cupy.ndarray)
        stream = self._cupy.cuda.get_current_stream()
        self._comm.allGather(send.data.ptr, recv.data.ptr, send.size, self._types[send.dtype],
                             stream.ptr)

    def synchronize(self) -> None:
        self._cupy.cuda.get_current_stream().synchronize()

    def close(self) -> None:
        """Release the NCCL communicator (every rank closes its own)."""
        if self._comm is not None:
            self._comm.destroy()
            self._comm = None


# ---------------------------------------------------------------- array spaces


class _SharedBlasLimit:
    """BLAS on one thread while any rank of this process computes: the first
    rank in sets the limit, the last one out restores it (a per-rank
    ``_blocks.one_blas_thread()`` would restore it under a rank still running)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._inside = 0
        self._limit = None

    def __enter__(self):
        with self._lock:
            if self._inside == 0:
                self._limit = _blocks.one_blas_thread()
            self._inside += 1

    def __exit__(self, *exc):
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                self._limit.restore_original_limits()
                self._limit = None


_BLAS_LIMIT = _SharedBlasLimit()


class _HostArrays:
    """Blocks, partials and the combine on the host, in NumPy, with BLAS on
    one thread: what ``reference_value_and_grad`` does."""

    xp = np
    combine_strategy = "reference"
    array_types = (np.ndarray, np.generic)

    def rows(self, array, lo: int, hi: int):
        return np.ascontiguousarray(np.asarray(array)[lo:hi])

    def onto(self, tree):
        return tree

    def host(self, array) -> np.ndarray:
        return np.asarray(array)

    def scope(self):
        return _BLAS_LIMIT


class _CudaArrays:
    """Blocks, partials and the combine on this process's GPU, as CuPy
    arrays; the combine runs isokernel's own kernels (``cuda-eager``), which
    keep float32 subnormals as NumPy does (CuPy's own ufuncs flush them)."""

    combine_strategy = "cuda-eager"

    def __init__(self, cupy):
        self.xp = cupy
        self.array_types = (np.ndarray, np.generic, cupy.ndarray)

    def rows(self, array, lo: int, hi: int):
        return self.xp.ascontiguousarray(self.xp.asarray(array[lo:hi]))  # only these rows move

    def onto(self, tree):
        leaves, treedef = tree_flatten(tree)
        return tree_unflatten(treedef, [self.xp.asarray(x) if isinstance(x, (np.ndarray,
                                        np.generic)) else x for x in leaves])

    def host(self, array) -> np.ndarray:
        return self.xp.asnumpy(array)

    def scope(self):
        return contextlib.nullcontext()


def _arrays_of(comm):
    if comm.device == "cpu":
        return _HostArrays()
    return _CudaArrays(_cupy_nccl()[0])


# ---------------------------------------------------------------------- layout


def rank_blocks(n_blocks: int, world_size: int, rank: int) -> range:
    """The blocks rank ``rank`` computes: ``[r·k, min(B, (r+1)·k))`` with
    ``k = ⌈B/W⌉``; empty for a rank past the last block."""
    k = math.ceil(n_blocks / world_size)
    return range(min(n_blocks, rank * k), min(n_blocks, (rank + 1) * k))


def rank_rows(rows: int, block_rows: int, world_size: int, rank: int) -> tuple[int, int]:
    """``(lo, hi)``: the rows of the full batch that rank ``rank``'s blocks
    cover (``lo == hi == rows`` for a rank with no block)."""
    bounds = _blocks.block_bounds(rows, block_rows)
    mine = rank_blocks(len(bounds), world_size, rank)
    if not mine:
        return rows, rows
    return bounds[mine[0]][0], bounds[mine[-1]][1]


@dataclass(frozen=True)
class _Layout:
    """One call's plan, the same on every rank once they agree: ``width`` =
    1 + G values per block, ``slots`` = k blocks per rank, and per rank one
    status word (its block count, or ``FAILED``) ahead of its slots."""

    rows: int
    n_blocks: int
    world_size: int
    width: int
    dtype: np.dtype
    reduction: str

    @property
    def slots(self) -> int:
        return math.ceil(self.n_blocks / self.world_size)

    @property
    def segment(self) -> int:
        return 1 + self.slots * self.width

    def block_places(self) -> list[tuple[int, int]]:
        """(rank, first element in that rank's segment) of every block, in block order."""
        return [(rank, 1 + j * self.width) for rank in range(self.world_size)
                for j in range(len(rank_blocks(self.n_blocks, self.world_size, rank)))]


def _combiner(layout: _Layout):
    """``gathered (W, segment) -> total (1+G,)``: the blocks' partials summed
    in ``_blocks.pairwise``'s tree over block index, then the loss divided by
    the row count for ``mean`` (the gradients carry it already), as
    ``_blocks.combine`` does leaf by leaf (every step is elementwise, so the
    loss and all leaves can travel as one vector)."""
    places = layout.block_places()

    def combine(gathered):
        total = _blocks.pairwise([gathered[r, at:at + layout.width] for r, at in places])
        if layout.reduction == "mean":
            total = inp.concatenate([total[:1] / np.asarray(layout.rows, layout.dtype),
                                     total[1:]])
        return total

    return combine


# ------------------------------------------------------------------- the call


def collective_value_and_grad(fun, *, comm, shard_argnums=(1,), argnums=0, reduction="mean",
                              block_rows=_blocks.DEFAULT_BLOCK_ROWS, strategy="reference",
                              **jit_options):
    """``(params, *batch, rows=None) -> (loss, grads)`` on rank ``comm.rank``
    of ``comm``'s world; every rank calls it with the same parameters and
    gets the same result, the bits of ``reference_value_and_grad`` with the
    same options. ``fun(params, *block)`` returns the SUM of the block's
    per-example losses, as for ``value_and_grad``. Each rank computes only
    its own blocks (``rank_blocks``): with ``rows=None`` it is given the full
    batch and takes its rows; with ``rows=N`` (the full row count) it is
    given only its own rows, ``vg.local_rows(N)``. See the module docstring
    for the reduction order, and why NCCL's all-reduce is not used."""
    if not isinstance(comm, Communicator):
        raise TypeError(NOT_A_COMM.format(got=comm))
    shard_argnums = tuple(shard_argnums)
    try:
        _blocks.check_options(reduction, block_rows, argnums, shard_argnums)
        _blocks.check_jit_options(jit_options)
    except ValueError as err:
        raise ValueError(str(err).replace("distributed.value_and_grad", NAME)) from None
    spec = _blocks.Spec(fun, argnums, strategy, tuple(sorted(jit_options.items())), reduction)
    return CollectiveValueAndGrad(spec, comm, shard_argnums, reduction, block_rows)


class CollectiveValueAndGrad:
    """The function ``collective_value_and_grad`` returns, for one rank.
    Results are NumPy arrays on a host world and CuPy arrays on this rank's
    GPU on an NCCL world."""

    def __init__(self, spec, comm, shard_argnums, reduction, block_rows):
        self.comm, self.shard_argnums = comm, shard_argnums
        self.reduction, self.block_rows, self.argnums = reduction, block_rows, spec.argnums
        self._arrays = _arrays_of(comm)
        self._compiled = _blocks.build(spec)
        self._options = repr((spec.argnums, spec.strategy, spec.jit_options, shard_argnums,
                              reduction, block_rows))
        self._combiners: dict = {}

    def local_rows(self, rows: int) -> tuple[int, int]:
        """The rows ``(lo, hi)`` of a batch of ``rows`` rows this rank needs."""
        return rank_rows(rows, self.block_rows, self.comm.world_size, self.comm.rank)

    def local_blocks(self, rows: int) -> range:
        """The indices of the blocks this rank computes for ``rows`` rows."""
        n_blocks = len(_blocks.block_bounds(rows, self.block_rows))
        return rank_blocks(n_blocks, self.comm.world_size, self.comm.rank)

    def __call__(self, params, *batch, rows=None):
        args = (params, *batch)
        layout = self._agree(args, rows)
        tree = _blocks.grad_structure(args, self.argnums)
        send, error = self._compute(args, layout, whole=rows is None)
        gathered = self._arrays.xp.empty(layout.world_size * layout.segment, layout.dtype)
        self.comm.all_gather(send, gathered)
        gathered = gathered.reshape(layout.world_size, layout.segment)
        self._check_status(gathered, error)
        total = self._combine(layout, gathered)
        return self._unpack(total, args, tree)

    # -------------------------------------------------------------- agreement

    def _agree(self, args, rows) -> _Layout:
        """Gather every rank's header; raise on every rank alike when they
        disagree or one refused its arguments (no rank is left waiting)."""
        header, problem = self._header(args, rows)
        xp = self._arrays.xp
        gathered = xp.empty(self.comm.world_size * len(header), np.int64)
        self.comm.all_gather(xp.asarray(header), gathered)
        table = self._arrays.host(gathered).reshape(self.comm.world_size, len(header))
        self._check_headers(table, problem)
        total, code, size = (int(v) for v in table[0, :3])
        n_blocks = len(_blocks.block_bounds(total, self.block_rows))
        return _Layout(total, n_blocks, self.comm.world_size, 1 + size, FLOAT_DTYPES[code],
                       self.reduction)

    def _header(self, args, rows) -> tuple[np.ndarray, Exception | None]:
        """This rank's view of the call as int64 words (``HEADER_FIELDS``),
        and its own refusal, if any: an error in its arguments is kept for
        after the gather, so that no other rank is left waiting for this one."""
        try:
            total = self._total_rows(args, rows)
            code, size = self._gradient_words(args)
            words = [total, code, size, _digest(self._target_signature(args)),
                     _digest(self._batch_signature(args)), _digest(self._options), 0]
        except Exception as err:  # raised on this rank once every rank has its header
            return np.asarray([0, -1, 0, 0, 0, _digest(self._options), 1], np.int64), err
        return np.asarray(words, np.int64), None

    def _total_rows(self, args, rows) -> int:
        if rows is None:
            return _blocks.row_count(args, self.shard_argnums)
        if isinstance(rows, bool) or not isinstance(rows, Integral) or rows < 1:
            raise ValueError(BAD_ROWS_OPTION.format(got=rows))
        lo, hi = self.local_rows(int(rows))
        for i in self.shard_argnums:
            got = np.shape(args[i])[0] if np.ndim(args[i]) else 0
            if got != hi - lo:
                raise ValueError(BAD_SHARD.format(
                    rank=self.comm.rank, size=self.comm.world_size, lo=lo, hi=hi, rows=rows,
                    need=hi - lo, blocks=_span(self.local_blocks(int(rows))), arg=i, got=got))
        return int(rows)

    def _gradient_words(self, args) -> tuple[int, int]:
        """(dtype code, gradient element count) of the differentiated leaves."""
        leaves = tree_flatten(_target(args, self.argnums))[0]
        dtypes = {self._dtype(x) for x in leaves}
        if len(dtypes) != 1 or next(iter(dtypes)) not in FLOAT_DTYPES:
            names = ", ".join(sorted("a Python scalar" if d is None else str(d) for d in dtypes))
            raise ValueError(BAD_DTYPE.format(rank=self.comm.rank,
                                              got=names or "none (no parameter leaves)"))
        size = sum(math.prod(np.shape(x)) for x in leaves)
        return FLOAT_DTYPES.index(next(iter(dtypes))), size

    def _target_signature(self, args) -> str:
        leaves, treedef = tree_flatten(_target(args, self.argnums))
        return repr((treedef, [(np.shape(x), str(self._dtype(x))) for x in leaves]))

    def _batch_signature(self, args) -> str:
        """Trailing shapes of the sharded arguments, whole shapes of the others."""
        shapes = []
        for i, arg in enumerate(args[1:], start=1):
            for leaf in tree_flatten(arg)[0]:
                shape = np.shape(leaf)
                shapes.append((i, shape[1:] if i in self.shard_argnums else shape,
                               str(self._dtype(leaf))))
        return repr(shapes)

    def _dtype(self, leaf) -> np.dtype | None:
        """The dtype of an array leaf; None for a Python scalar or another object."""
        return np.dtype(leaf.dtype) if isinstance(leaf, self._arrays.array_types) else None

    def _check_headers(self, table: np.ndarray, problem: Exception | None) -> None:
        refused = [r for r in range(len(table)) if table[r, -1]]
        if problem is not None:
            raise problem
        if refused:
            raise CollectiveError(REFUSED.format(ranks=_span(refused), rank=self.comm.rank))
        differ = [k for k in range(table.shape[1] - 1) if len(set(table[:, k].tolist())) > 1]
        if differ:
            values = "; ".join(f"{HEADER_FIELDS[k]}: " + ", ".join(
                f"rank {r} {table[r, k]}" for r in range(len(table))) for k in differ)
            raise ValueError(DISAGREE.format(fields=", ".join(HEADER_FIELDS[k] for k in differ),
                                             values=values))

    # --------------------------------------------------------------- compute

    def _compute(self, args, layout: _Layout, whole: bool):
        """This rank's segment: status word, then its blocks' ``(loss,
        gradient)`` vectors, zero padding after them. An error in a block is
        kept and reported through the status word, so that every rank still
        reaches the gather and raises (none is left waiting for this one)."""
        send = self._arrays.xp.zeros(layout.segment, layout.dtype)
        bounds = _blocks.block_bounds(layout.rows, self.block_rows)
        mine = self.local_blocks(layout.rows)
        base = 0 if whole or not mine else bounds[mine[0]][0]  # where the given rows start
        try:
            args = self._onto_device(args)
            for j, index in enumerate(mine):
                at = 1 + j * layout.width
                send[at:at + layout.width] = self._block(args, layout, index, bounds, base)
            send[0] = len(mine)
        except Exception as err:  # re-raised after the gather, on this rank
            send[0] = FAILED
            return send, err
        return send, None

    def _onto_device(self, args) -> tuple:
        """Parameters and unsharded arguments on this rank's device, once per call."""
        return tuple(a if i in self.shard_argnums else self._arrays.onto(a)
                     for i, a in enumerate(args))

    def _block(self, args, layout: _Layout, index: int, bounds: list, base: int):
        """One block's ``[loss, gradient leaves…]`` as one vector of ``1 + G``."""
        lo, hi = bounds[index]
        full = list(args)
        for i in self.shard_argnums:
            full[i] = self._arrays.rows(args[i], lo - base, hi - base)
        with self._arrays.scope():
            loss, grads = self._compiled(*_blocks.with_rows(full, layout.rows, self.reduction))
        xp = self._arrays.xp
        parts = [xp.asarray(loss), *(xp.asarray(g) for g in tree_flatten(grads)[0])]
        got = {np.dtype(p.dtype) for p in parts}
        if got != {layout.dtype}:
            raise DTypeError(BAD_OUTPUT.format(rank=self.comm.rank, index=index, lo=lo, hi=hi,
                                               got=", ".join(sorted(map(str, got))),
                                               dtype=layout.dtype))
        return xp.concatenate([p.reshape(-1) for p in parts])

    def _check_status(self, gathered, error) -> None:
        status = self._arrays.host(gathered[:, 0])
        if error is not None:
            raise error
        failed = [r for r, s in enumerate(status.tolist()) if s == FAILED]
        if failed:
            raise CollectiveError(RANK_FAILED.format(ranks=_span(failed), rank=self.comm.rank))

    # --------------------------------------------------------------- combine

    def _combine(self, layout: _Layout, gathered):
        combine = self._combiners.get(layout)
        if combine is None:
            combine = self._combiners[layout] = jit(
                _combiner(layout), strategy=self._arrays.combine_strategy)
        return combine(gathered)

    def _unpack(self, total, args, tree):
        """``(loss, grads)``: slices of the combined vector in the
        parameters' shapes and structure."""
        shapes = [np.shape(x) for x in tree_flatten(_target(args, self.argnums))[0]]
        leaves, at = [], 1
        for shape in shapes:
            n = math.prod(shape)
            leaves.append(total[at:at + n].reshape(shape))
            at += n
        return total[0:1].reshape(()), tree_unflatten(tree, leaves)


# ---------------------------------------------------------------------- helpers


def _target(args: tuple, argnums):
    return tuple(args[i] for i in argnums) if isinstance(argnums, tuple) else args[argnums]


def _digest(text: str) -> int:
    """A signed 63-bit digest of ``text`` (one int64 word of the header)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little",
                          signed=True)


def _span(indices) -> str:
    indices = list(indices)
    if not indices:
        return "none"
    if indices == list(range(indices[0], indices[-1] + 1)) and len(indices) > 2:
        return f"{indices[0]}–{indices[-1]}"
    return ", ".join(map(str, indices))
