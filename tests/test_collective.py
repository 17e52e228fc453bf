"""isokernel.distributed.collective_value_and_grad: on every rank of a
host-emulated world of 1, 2, 3 and 8 ranks (more ranks than blocks), the
loss and gradients are the bits of ``reference_value_and_grad``, for
float32 and float64, mean and sum, given the full batch or only the rank's
rows; a data-parallel Adam loop gives the same parameters on every rank and
for every world size; refusals are raised on every rank (none is left
waiting); the NCCL communicator without CuPy says what to install, and its
all-gather passes NCCL the right pointers, counts and types (checked
against a stand-in ``cupy`` module that copies the bytes on the host)."""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import types

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import distributed as dist
from isokernel.distributed import _collective
from isokernel.ir import BackendUnavailableError, DTypeError

from .mlp_blocks import BLOCK, ROWS, mlp_loss, problem

pytest.importorskip("threadpoolctl")

WORLDS = (1, 2, 3, 8)  # 8 ranks for 6 blocks: ranks 6 and 7 send padding only


def leaves(result) -> list:
    return [np.asarray(v) for v in ik.tree_flatten(result)[0]]


def same_bits(a, b) -> bool:
    la, lb = leaves(a), leaves(b)
    return len(la) == len(lb) and all(p.dtype == q.dtype and p.shape == q.shape
                                      and p.tobytes() == q.tobytes() for p, q in zip(la, lb))


def reference(dtype, **options):
    params, x, y = problem(dtype)
    ref = dist.reference_value_and_grad(mlp_loss, shard_argnums=(1, 2), block_rows=BLOCK,
                                        **options)
    return ref(params, x, y)


def collective(comm, **options):
    options = {"block_rows": BLOCK, **options}
    return dist.collective_value_and_grad(mlp_loss, comm=comm, shard_argnums=(1, 2), **options)


def each_rank(world_size, fn, timeout=60.0) -> list:
    """``fn(comm)`` on every rank; per rank its result or the exception it raised."""
    def guarded(comm):
        try:
            return fn(comm)
        except Exception as err:
            return err
    return dist.run_host_world(world_size, guarded, timeout=timeout)


# ------------------------------------------------------------------ the blocks


def test_each_rank_gets_a_contiguous_run_of_blocks_and_every_block_once():
    for n_blocks in range(1, 20):
        for world in range(1, 11):
            runs = [dist.rank_blocks(n_blocks, world, r) for r in range(world)]
            assert [b for run in runs for b in run] == list(range(n_blocks))
            k = -(-n_blocks // world)
            assert all(len(run) <= k for run in runs)
    assert [list(dist.rank_blocks(6, 4, r)) for r in range(4)] == [[0, 1], [2, 3], [4, 5], []]
    assert [dist.rank_rows(ROWS, BLOCK, 4, r) for r in range(4)] == [
        (0, 256), (256, 512), (512, 700), (700, 700)]


# ------------------------------------------------------------------- the bits


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_rank_gets_the_single_process_bits(world, dtype):
    params, x, y = problem(dtype)
    expected = {r: reference(dtype, reduction=r) for r in ("mean", "sum")}

    def rank(comm):
        found = {}
        for reduction in ("mean", "sum"):
            vg = collective(comm, reduction=reduction)
            lo, hi = vg.local_rows(ROWS)
            found[reduction] = (vg(params, x, y), vg(params, x[lo:hi], y[lo:hi], rows=ROWS))
        return found

    for r, found in enumerate(dist.run_host_world(world, rank)):
        for reduction, (whole, own_rows) in found.items():
            assert whole[0].dtype == dtype and whole[0].shape == ()
            assert same_bits(whole, expected[reduction]), (world, r, reduction, "full batch")
            assert same_bits(own_rows, expected[reduction]), (world, r, reduction, "own rows")


def test_the_bit_comparison_sees_a_different_summation_order():
    """The tests above can fail: the block partials summed left to right, or
    per rank first as an all-reduce over 4 ranks would, are other bits."""
    params, x, y = problem(np.float32)
    block = ik.jit(ik.value_and_grad(mlp_loss), strategy="reference",
                   deterministic_reductions=True)
    parts = [leaves(block(params, x[lo:lo + BLOCK], y[lo:lo + BLOCK]))
             for lo in range(0, ROWS, BLOCK)]
    left = [functools.reduce(np.add, [p[j] for p in parts]) for j in range(4)]
    per_rank = [(parts[0][j] + parts[1][j]) + (parts[2][j] + parts[3][j]) + parts[4][j]
                + parts[5][j] for j in range(4)]
    tree = leaves(reference(np.float32, reduction="sum"))
    assert not same_bits(left, tree)
    assert not same_bits(per_rank, tree)
    assert all(np.allclose(a, b, rtol=1e-5) for a, b in zip(left, tree))


def test_a_data_parallel_adam_loop_gives_the_same_parameters_everywhere():
    """Five Adam steps, each rank updating its own copy of the parameters
    with the gathered gradient: the same parameters on every rank, for
    1, 2 and 3 ranks, and as one process with reference_value_and_grad."""
    params0, x, y = problem(np.float32)
    opt = ik.optim.adam(0.05)

    def train(value_and_grad, rows_of=lambda: {}):
        params, state = params0, opt.init(params0)
        losses = []
        for _ in range(5):
            loss, grads = value_and_grad(params)
            updates, state = opt.update(grads, state, params)
            params = ik.optim.apply_updates(params, updates)
            losses.append(float(loss))
        return params, losses

    ref = dist.reference_value_and_grad(mlp_loss, shard_argnums=(1, 2), block_rows=BLOCK)
    expected, losses = train(lambda p: ref(p, x, y))
    assert losses[-1] < losses[0]  # it trains
    for world in (1, 2, 3):
        def rank(comm):
            vg = collective(comm)
            lo, hi = vg.local_rows(ROWS)
            return train(lambda p: vg(p, x[lo:hi], y[lo:hi], rows=ROWS))

        for r, (params, found) in enumerate(dist.run_host_world(world, rank)):
            assert same_bits(params, expected) and found == losses, (world, r)


# ------------------------------------------------------------------- refusals


def test_bad_worlds_and_options_are_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"host_world: world_size=0; .* at least one rank"):
        dist.host_world(0)
    with pytest.raises(ValueError, match=r"NcclCommunicator: world_size=-1"):
        dist.NcclCommunicator(-1, None, 0)
    with pytest.raises(ValueError, match=r"rank=2 in a world of 2 ranks; ranks are 0 … 1"):
        dist.NcclCommunicator(2, None, 2)
    with pytest.raises(TypeError, match=r"comm='tcp://x' is not a communicator.*host_world"):
        collective("tcp://x")
    comm = dist.host_world(1)[0]
    with pytest.raises(ValueError, match=r"collective_value_and_grad: reduction='median'"):
        collective(comm, reduction="median")
    with pytest.raises(ValueError, match=r"collective_value_and_grad: block_rows=0"):
        collective(comm, block_rows=0)
    with pytest.raises(ValueError, match=r"collective_value_and_grad: deterministic_reductions"
                                         r"=False; blocks always run with deterministic"):
        collective(comm, deterministic_reductions=False)


def test_ranks_that_disagree_on_shapes_or_rows_raise_on_every_rank():
    params, x, y = problem(np.float64)
    wider = (params[0][:, :11], params[1][:11], params[2][:11])

    def rank(comm):
        mine = wider if comm.rank == 1 else params
        return collective(comm)(mine, x, y)

    for err in each_rank(3, rank):
        assert isinstance(err, ValueError)
        assert "disagree on gradient size, parameter shapes" in str(err)
        assert "(gradient size: rank 0 96, rank 1 88, rank 2 96; parameter shapes" in str(err)

    def rank_rows(comm):
        n = ROWS - 1 if comm.rank == 0 else ROWS
        return collective(comm)(params, x[:n], y[:n])

    for err in each_rank(2, rank_rows):
        assert isinstance(err, ValueError) and "disagree on rows (rows: rank 0 699" in str(err)


def test_parameters_that_are_not_float32_or_float64_are_refused_on_every_rank():
    params, x, y = problem(np.float64)
    half = tuple(p.astype(np.float16) for p in params)
    for err in each_rank(2, lambda comm: collective(comm)(half, x, y)):
        assert isinstance(err, ValueError)
        assert "dtype(s) float16" in str(err) and "float32 or float64" in str(err)
    mixed = (params[0].astype(np.float32), params[1], params[2])
    for err in each_rank(2, lambda comm: collective(comm)(mixed, x, y)):
        assert isinstance(err, ValueError) and "float32, float64" in str(err)


def test_a_loss_of_another_dtype_than_the_parameters_is_refused_without_a_hang():
    params, x, y = problem(np.float32)

    def loss64(params, x, y):
        return mlp_loss(params, x, y).astype(inp.float64)

    def rank(comm):
        return dist.collective_value_and_grad(loss64, comm=comm, shard_argnums=(1, 2),
                                              block_rows=BLOCK)(params, x, y)

    found = each_rank(8, rank)
    for r, err in enumerate(found):
        if r < 6:  # ranks with a block: the dtype error; ranks 6 and 7 send padding only
            assert isinstance(err, DTypeError) and "the loss must be of the parameters' dtype" \
                in str(err), r
        else:
            assert isinstance(err, dist.CollectiveError) and "rank(s) 0–5 raised" in str(err)


def test_a_rank_failing_in_its_block_fails_every_rank_with_its_own_error_first():
    params, x, y = problem(np.float64)

    def ragged_fails(params, x, y):
        if x.shape[0] != BLOCK:
            raise RuntimeError("no ragged blocks here")
        return mlp_loss(params, x, y)

    def rank(comm):
        vg = dist.collective_value_and_grad(ragged_fails, comm=comm, shard_argnums=(1, 2),
                                            block_rows=BLOCK)
        return vg(params, x, y)

    found = each_rank(3, rank)  # the ragged block 5 is rank 2's
    assert [type(e).__name__ for e in found] == ["CollectiveError"] * 2 + ["RuntimeError"]
    assert "rank(s) 2 raised while computing their blocks" in str(found[0])
    with pytest.raises(RuntimeError, match="no ragged blocks here"):
        dist.run_host_world(3, rank)  # the failing rank's own error, not the others'


def test_a_rank_given_the_wrong_rows_refuses_and_the_others_say_which():
    params, x, y = problem(np.float64)

    def rank(comm):
        vg = collective(comm)
        lo, hi = vg.local_rows(ROWS)
        if comm.rank == 1:
            lo, hi = lo, hi + 1
        return vg(params, x[lo:hi], y[lo:hi], rows=ROWS)

    found = each_rank(4, rank)  # rank 3 has no block: it passes x[700:700]
    assert isinstance(found[1], ValueError)
    assert "rank 1 of 4 holds rows 256:512 of 700 (256 rows, blocks 2, 3)" in str(found[1])
    assert "pass batch[256:512]" in str(found[1])
    assert all(isinstance(found[r], dist.CollectiveError) and "rank(s) 1 refused" in str(found[r])
               for r in (0, 2, 3))

    def extra_rows(comm):
        vg = collective(comm)
        lo, hi = vg.local_rows(ROWS) if comm.rank < 3 else (0, 5)
        return vg(params, x[lo:hi], y[lo:hi], rows=ROWS)

    assert "holds rows 700:700 of 700 (0 rows, blocks none)" in str(each_rank(4, extra_rows)[3])

    def missing_argument(comm):
        batch = (x,) if comm.rank == 0 else (x, y)
        return collective(comm)(params, *batch)

    found = each_rank(2, missing_argument)
    assert isinstance(found[0], IndexError)  # the user's own error, on the rank that made it
    assert isinstance(found[1], dist.CollectiveError) and "rank(s) 0 refused" in str(found[1])


def test_the_host_world_refuses_mismatched_buffers_and_wakes_waiting_ranks():
    def gather(comm):
        send = np.full(2 + comm.rank, comm.rank, np.float64)
        comm.all_gather(send, np.empty(2 * send.size))

    for err in each_rank(2, gather):
        assert isinstance(err, ValueError) and "different sizes" in str(err)
    comm = dist.host_world(2, timeout=0.2)[0]  # rank 1 never comes
    with pytest.raises(dist.CollectiveError, match="rank 0 of 2 stopped waiting in all_gather"):
        comm.all_gather(np.zeros(2), np.zeros(4))
    with pytest.raises(ValueError, match="recv has 3 elements, not 1 × 2"):
        dist.host_world(1)[0].all_gather(np.zeros(2), np.zeros(3))
    with pytest.raises(TypeError, match="dtype float16 is not gathered"):
        dist.host_world(1)[0].all_gather(np.zeros(2, np.float16), np.zeros(2, np.float16))


# ------------------------------------------------------------------------ NCCL


def test_the_nccl_path_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    for make in (lambda: dist.NcclCommunicator(2, None, 0), dist.nccl_unique_id):
        with pytest.raises(BackendUnavailableError) as info:
            make()
        text = str(info.value)
        assert "pip install cupy-cuda12x" in text and "one NVIDIA GPU per rank" in text
        assert ">= 2 GPUs" in text and "Nothing falls back to the host" in text
        assert "host_world(n)" in text


class FakeDeviceArray(np.ndarray):
    """Host memory posing as a CuPy array: ``.data.ptr`` is its address."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def _device(fn):
    @functools.wraps(fn)
    def made(*args, **kwargs):
        return np.asarray(fn(*args, **kwargs)).view(FakeDeviceArray)
    return made


class FakeNccl:
    """NCCL's all-gather on host memory: every rank's ``count`` elements of
    ``datatype`` are read at its send pointer and written in rank order at
    every rank's receive pointer."""

    ITEMSIZE = {7: 4, 8: 8, 4: 8}  # ncclFloat32, ncclFloat64, ncclInt64
    worlds: dict = {}

    def __init__(self, world_size, unique_id, rank):
        self.world = self.worlds.setdefault(unique_id, types.SimpleNamespace(
            barrier=threading.Barrier(world_size, timeout=30), slots=[None] * world_size))
        self.rank, self.calls = rank, []

    def allGather(self, send_ptr, recv_ptr, count, datatype, stream_ptr):  # noqa: N802
        self.calls.append((count, datatype, stream_ptr))
        nbytes = count * self.ITEMSIZE[datatype]
        self.world.slots[self.rank] = ctypes.string_at(send_ptr, nbytes)
        self.world.barrier.wait()
        for r, data in enumerate(self.world.slots):
            ctypes.memmove(recv_ptr + r * nbytes, data, nbytes)
        self.world.barrier.wait()

    def destroy(self):
        self.calls.append("destroy")


def fake_cupy(nccl_available=True):
    """A stand-in for ``cupy`` with the few calls isokernel makes, on host memory."""
    stream = types.SimpleNamespace(ptr=1234, synchronize=lambda: None)
    used = []
    nccl = types.ModuleType("cupy.cuda.nccl")
    nccl.__dict__.update(available=nccl_available, NCCL_FLOAT32=7, NCCL_FLOAT64=8,
                         NCCL_INT64=4, NcclCommunicator=FakeNccl,
                         get_unique_id=lambda: tuple(range(128)))
    cuda = types.ModuleType("cupy.cuda")
    cuda.__dict__.update(nccl=nccl, get_current_stream=lambda: stream,
                         runtime=types.SimpleNamespace(getDeviceCount=lambda: 2),
                         Device=lambda i: types.SimpleNamespace(use=lambda: used.append(i)))
    cupy = types.ModuleType("cupy")
    cupy.__dict__.update(
        __version__="0.0-fake", cuda=cuda, ndarray=FakeDeviceArray, used=used,
        asarray=_device(np.asarray), ascontiguousarray=_device(np.ascontiguousarray),
        zeros=_device(np.zeros), empty=_device(np.empty), concatenate=_device(np.concatenate),
        asnumpy=lambda a: np.array(a))
    return cupy


@pytest.fixture
def cupy(monkeypatch):
    fake = fake_cupy()
    for name, module in (("cupy", fake), ("cupy.cuda", fake.cuda),
                         ("cupy.cuda.nccl", fake.cuda.nccl)):
        monkeypatch.setitem(sys.modules, name, module)
    FakeNccl.worlds.clear()
    return fake


def test_without_nccl_in_cupy_the_error_says_to_install_it(monkeypatch):
    fake = fake_cupy(nccl_available=False)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupy.cuda", fake.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", fake.cuda.nccl)
    with pytest.raises(BackendUnavailableError, match=r"CuPy 0.0-fake imports but its NCCL "
                                                      r"binding is unavailable.*nvidia-nccl"):
        dist.NcclCommunicator(2, None, 0)


def test_the_nccl_all_gather_passes_pointers_element_counts_and_types(cupy):
    uid = dist.nccl_unique_id()

    def rank(_host_comm):
        comm = dist.NcclCommunicator(2, uid, _host_comm.rank)
        out = {}
        for dtype in (np.float32, np.float64, np.int64):
            send = cupy.asarray(np.arange(3, dtype=dtype) + 10 * comm.rank)
            recv = cupy.empty(6, dtype)
            comm.all_gather(send, recv)
            out[np.dtype(dtype).name] = np.array(recv)
        with pytest.raises(TypeError, match="dtype float16 is not gathered"):
            comm.all_gather(cupy.zeros(2, np.float16), cupy.zeros(4, np.float16))
        with pytest.raises(TypeError, match="send and recv must be .*FakeDeviceArrays"):
            comm.all_gather(np.zeros(2), np.zeros(4))
        comm.close()
        return comm.device, out, comm._comm, comm

    found = dist.run_host_world(2, rank)
    assert sorted(cupy.used) == [0, 1] and [f[0] for f in found] == ["cuda:0", "cuda:1"]
    for _, out, _, _ in found:
        for name, got in out.items():
            assert got.dtype == np.dtype(name)
            assert got.tolist() == [0, 1, 2, 10, 11, 12]
    assert found[0][3]._comm is None  # closed


def test_the_device_path_gives_the_reference_bits_through_the_nccl_wrapper(cupy, monkeypatch):
    """The CuPy code path of collective_value_and_grad (parameters moved
    once, rows taken per block, partials packed and gathered, statuses
    read back) on the stand-in; its combine runs the reference strategy
    here, as cuda-eager cannot run without a GPU."""
    monkeypatch.setattr(_collective._CudaArrays, "combine_strategy", "reference")
    params, x, y = problem(np.float32)
    expected = reference(np.float32)
    uid = dist.nccl_unique_id()

    def rank(host_comm):
        comm = dist.NcclCommunicator(3, uid, host_comm.rank)
        vg = collective(comm)
        lo, hi = vg.local_rows(ROWS)
        return vg(params, x, y), vg(params, x[lo:hi], y[lo:hi], rows=ROWS)

    for whole, own_rows in dist.run_host_world(3, rank):
        assert same_bits(whole, expected) and same_bits(own_rows, expected)
