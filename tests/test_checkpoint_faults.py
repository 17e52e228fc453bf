"""Faults of checkpoint I/O (``isokernel.save`` / ``load``, ``Trainer.save`` / ``load``):
only regular files are read or replaced, nothing is ever pickled, sizes are checked before
anything is decompressed, every malformed file raises ``CheckpointError``, and temporaries
of killed writers are swept. One test per fault."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

import isokernel.numpy as inp
from isokernel import optim
from isokernel.train import Trainer
from isokernel.train.saving import DIGEST, TREE, CheckpointError, load, save

GIB = 1 << 30


# --- helpers --------------------------------------------------------------------------------

def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _description(path) -> dict:
    with np.load(path, allow_pickle=False) as archive:
        return json.loads(archive[TREE].tobytes())


def _description_members(text: bytes) -> dict[str, bytes]:
    """The description and its digest, recomputed: a deliberate edit."""
    digest = hashlib.sha256(text).hexdigest().encode()
    return {f"{TREE}.npy": _npy(np.frombuffer(text, np.uint8)),
            f"{DIGEST}.npy": _npy(np.frombuffer(digest, np.uint8))}


def _write_zip(path, members: list[tuple]) -> None:
    """A zip archive written byte by byte, so that its headers can lie: ``members`` are
    ``(name, method, data, declared_size)`` with ``data`` already compressed (raw deflate
    for method 8). A stored member gets its CRC-32; a deflated one 0 (those archives must
    be refused before it matters)."""
    out, directory = bytearray(), bytearray()
    for name, method, data, declared in members:
        encoded = name.encode()
        offset = len(out)
        crc = zlib.crc32(data) if method == 0 else 0
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc,
                           len(data), declared, len(encoded), 0) + encoded + data
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0,
                                 0x21, crc, len(data), declared, len(encoded), 0, 0, 0, 0,
                                 0, offset) + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                      len(directory), len(out), 0)
    with open(path, "wb") as handle:
        handle.write(bytes(out + directory + end))


def _deflated_zeros(header: bytes, n_mib: int) -> bytes:
    """Raw deflate of ``header`` then ``n_mib`` MiB of zeros, built from one repeated
    block (a full flush resets the history, so every 1 MiB block compresses alike)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return head + block * n_mib + compressor.flush()


def _npy_header(dtype: str, shape: tuple) -> bytes:
    """The header ``np.save`` writes for an array of this dtype and shape."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def _isolated(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python whose address space is capped at 4 GiB (a load that
    reads without bound fails there, not on this machine)."""
    prelude = ("import resource\n"
               f"resource.setrlimit(resource.RLIMIT_AS, ({4 * GIB}, {4 * GIB}))\n")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "state.npz"
    save(path, {"w": np.arange(12.0).reshape(3, 4), "b": np.zeros(4, np.float32),
                "step": 7})
    return path


def _leaf_member(path, shape) -> str:
    return next(e["member"] for e in _description(path)["leaves"] if e["shape"] == shape)


# --- save: only regular files are replaced --------------------------------------------------

def _make_fifo(path):
    os.mkfifo(path)
    return stat.S_ISFIFO


def _make_device(path):
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    return stat.S_ISCHR


def _make_socket(path):
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(os.fspath(path))
    except OSError:  # a socket path is limited to about 100 bytes
        pytest.skip("the temporary folder's path is too long for a Unix socket")
    finally:
        server.close()
    return stat.S_ISSOCK


def _make_link(path):
    (path.parent / "target.npz").write_bytes(b"the link's target")
    os.symlink("target.npz", path)
    return stat.S_ISLNK


@pytest.mark.parametrize("make", [_make_fifo, _make_device, _make_socket, _make_link],
                         ids=["fifo", "device", "socket", "symlink"])
def test_save_replaces_only_a_regular_file(tmp_path, make):
    path = tmp_path / "state.npz"
    is_kind = make(path)
    with pytest.raises(CheckpointError, match=rf"save {path}: .*not a regular file"):
        save(path, {"a": np.zeros(2)})
    assert is_kind(os.lstat(path).st_mode)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    if os.path.islink(path):
        assert (tmp_path / "target.npz").read_bytes() == b"the link's target"


# --- save: nothing is ever pickled ----------------------------------------------------------

@pytest.mark.parametrize("value", [2**70, -(2**70), 2**64])
def test_save_refuses_a_python_int_that_would_need_pickle(tmp_path, value):
    path = tmp_path / "state.npz"
    with pytest.raises(CheckpointError, match=rf"tree\['step'\] = {value} .*int64.*float"):
        save(path, {"step": value})
    assert os.listdir(tmp_path) == []


def test_the_largest_python_ints_that_fit_round_trip(tmp_path):
    tree = {"low": -(2**63), "high": 2**64 - 1}
    save(tmp_path / "s.npz", tree)
    assert load(tmp_path / "s.npz") == tree


def test_save_refuses_a_masked_array(tmp_path):
    masked = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
    with pytest.raises(CheckpointError, match=r"tree\['x'\] is a masked array.*filled"):
        save(tmp_path / "state.npz", {"x": masked})
    assert os.listdir(tmp_path) == []


# --- save: errors name the user's path, not the temporary -----------------------------------

def test_save_over_a_folder_names_the_path_not_the_temporary(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(CheckpointError) as error:
        save(folder, {"a": np.zeros(2)})
    message = str(error.value)
    assert f"save {folder}: " in message and "folder" in message and ".tmp" not in message
    assert os.listdir(folder) == ["keep.txt"]
    assert [n for n in os.listdir(tmp_path)] == ["run"]


def test_save_into_a_missing_folder_names_the_folder_not_the_temporary(tmp_path):
    path = tmp_path / "missing" / "state.npz"
    with pytest.raises(FileNotFoundError) as error:
        save(path, {"a": np.zeros(2)})
    message = str(error.value)
    assert f"save {path}: " in message and f"{tmp_path / 'missing'} does not exist" in message
    assert ".tmp" not in message and "partial" not in message


# --- save: temporaries of killed writers are swept ------------------------------------------

_KILLED_WRITER = """
    import os, signal, sys
    import numpy as np
    from isokernel.train import saving

    def killed(handle, **arrays):
        handle.write(b"PK partial")
        handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    np.savez = killed
    saving.save(sys.argv[1], {"a": np.ones(3)})
"""


def _killed_writer(path) -> str:
    """The temporary a ``save`` killed with SIGKILL mid-write left behind."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED_WRITER),
                           str(path)], timeout=120, env=env)
    assert done.returncode == -signal.SIGKILL
    left = [n for n in os.listdir(path.parent) if n.startswith(f".{path.name}.")]
    assert len(left) == 1, left
    return left[0]


def test_a_save_killed_with_sigkill_leaves_a_temporary_the_next_save_sweeps(tmp_path):
    path = tmp_path / "state.npz"
    save(path, {"a": np.zeros(3)})
    before = path.read_bytes()
    _killed_writer(path)
    assert path.read_bytes() == before
    save(tmp_path / "other.npz", {"b": np.zeros(1)})
    assert sorted(os.listdir(tmp_path)) == ["other.npz", "state.npz"]
    np.testing.assert_array_equal(load(path)["a"], np.zeros(3))


def test_temporaries_of_live_writers_and_other_hosts_are_kept(tmp_path):
    path = tmp_path / "state.npz"
    stale = _killed_writer(path)
    dead_pid = stale.split(".partial-")[1].split("@")[0]
    host = stale.split("@")[1].split(".")[0]
    live = stale.replace(f"-{dead_pid}@", f"-{os.getpid()}@")
    elsewhere = stale.replace(f"@{host}.", "@another-host.")
    for name in (live, elsewhere):
        (tmp_path / name).write_bytes(b"PK partial")
    save(tmp_path / "other.npz", {"b": np.zeros(1)})
    assert sorted(os.listdir(tmp_path)) == sorted([live, elsewhere, "other.npz"])


# --- load: only regular files are read, and never block -------------------------------------

def test_load_of_dev_zero_is_refused_at_once():
    done = _isolated("""
        import time
        from isokernel.train.saving import CheckpointError, load
        start = time.perf_counter()
        try:
            load("/dev/zero")
        except CheckpointError as error:
            print("refused", round(time.perf_counter() - start, 3), error)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused" in done.stdout and "/dev/zero" in done.stdout
    assert "not a regular file" in done.stdout


def test_load_of_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "state.npz"
    os.mkfifo(fifo)
    done = _isolated(f"""
        from isokernel.train.saving import CheckpointError, load
        try:
            load({str(fifo)!r})
        except CheckpointError as error:
            print("refused", error)
    """, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused" in done.stdout and "not a regular file" in done.stdout


def test_load_of_a_folder_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match=rf"load {tmp_path}: .*folder"):
        load(tmp_path)


# --- load: sizes are checked before anything is decompressed --------------------------------

def _bomb_described_as_small(path) -> None:
    """The leaf's member replaced by 512 MiB of deflated zeros: the description
    (unchanged) says 96 bytes."""
    members = _members(path)
    member = _leaf_member(path, [3, 4]) + ".npy"
    header = _npy_header("<f8", (3, 4))
    _write_zip(path, [(name, 0, data, len(data)) for name, data in members.items()
                      if name != member]
               + [(member, 8, _deflated_zeros(header, 512), len(header) + 512 * (1 << 20))])


def _bomb_described_as_large(path) -> None:
    """The description (digest recomputed), the npy header and the zip agree on a 512 MiB
    leaf of zeros: over the total-size cap of a file of half a megabyte."""
    n = 512 * (1 << 20) // 8
    description = _description(path)
    entry = next(e for e in description["leaves"] if e["shape"] == [3, 4])
    entry["shape"] = [n]
    entry["sha256"] = "0" * 64
    text = json.dumps(description, sort_keys=True).encode()
    members = {**_members(path), **_description_members(text)}
    member = entry["member"] + ".npy"
    header = _npy_header("<f8", (n,))
    _write_zip(path, [(name, 0, data, len(data)) for name, data in members.items()
                      if name != member]
               + [(member, 8, _deflated_zeros(header, 512), len(header) + 8 * n)])


def _bomb_as_the_description(path) -> None:
    """The description member itself: 512 MiB of zeros."""
    members = _members(path)
    name = f"{TREE}.npy"
    n = 512 * (1 << 20)
    header = _npy_header("|u1", (n,))
    _write_zip(path, [(m, 0, data, len(data)) for m, data in members.items() if m != name]
               + [(name, 8, _deflated_zeros(header, 512), len(header) + n)])


def _bomb_with_a_lying_size(path) -> None:
    """The zip says 96 bytes (as the description does), the deflate stream holds
    512 MiB: reading stops at the declared size."""
    members = _members(path)
    member = _leaf_member(path, [3, 4]) + ".npy"
    header = _npy_header("<f8", (3, 4))
    _write_zip(path, [(name, 0, data, len(data)) for name, data in members.items()
                      if name != member]
               + [(member, 8, _deflated_zeros(header, 512), len(header) + 96)])


@pytest.mark.parametrize("craft", [_bomb_described_as_small, _bomb_described_as_large,
                                   _bomb_as_the_description, _bomb_with_a_lying_size],
                         ids=["member", "described", "description", "lying-size"])
def test_load_of_a_zip_bomb_is_refused_before_decompressing(saved, craft):
    craft(saved)
    assert saved.stat().st_size < 2 << 20
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(CheckpointError, match=r"state\.npz"):
            load(saved)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"zip bomb ({craft.__name__}) refused in {seconds * 1e3:.1f} ms, "
          f"peak traced memory {peak / 1e6:.2f} MB")
    assert peak < 32 << 20  # 512 MiB would be decompressed without the checks
    assert seconds < 5.0  # measured well under 0.1 s; generous for a loaded machine


def test_an_npy_header_declaring_1e11_elements_is_refused(saved):
    member = _leaf_member(saved, [3, 4]) + ".npy"
    header = _npy_header("<f8", (10**11,))
    members = _members(saved)
    members[member] = header + np.arange(12.0).tobytes()
    _write_zip(saved, [(name, 0, data, len(data)) for name, data in members.items()])
    with pytest.raises(CheckpointError, match=rf"state\.npz.*{member[:-4]}"):
        load(saved)


def test_a_member_whose_zip_size_differs_from_the_description_is_refused(saved):
    member = _leaf_member(saved, [3, 4]) + ".npy"
    members = _members(saved)
    members[member] = _npy(np.arange(13.0))  # one element more than described
    _write_zip(saved, [(name, 0, data, len(data)) for name, data in members.items()])
    with pytest.raises(CheckpointError, match=rf"{member[:-4]}.*description"):
        load(saved)


# --- load: every malformed file is a CheckpointError ----------------------------------------

def _drop(key):
    def edit(description, members):
        del description[key]
    return edit


def _more_tree_leaves_than_entries(description, members):
    description["tree"]["children"].append({"kind": "leaf"})
    description["tree"]["keys"].append(["str", "z"])


def _more_entries_than_tree_leaves(description, members):
    entry = dict(description["leaves"][0], member=f"leaf_{len(description['leaves'])}")
    members[entry["member"] + ".npy"] = members[description["leaves"][0]["member"] + ".npy"]
    description["leaves"].append(entry)


def _duplicate_dict_keys(description, members):
    keys = description["tree"]["keys"]
    keys[1] = list(keys[0])


def _two_entries_one_member(description, members):
    description["leaves"][1] = dict(description["leaves"][0])
    del members["leaf_1.npy"]


def _int_scalar_of_complex_dtype(description, members):
    entry = next(e for e in description["leaves"] if e["python"] == "int")
    array = np.array(7 + 0j)
    entry.update(dtype=array.dtype.str, sha256=hashlib.sha256(array.tobytes()).hexdigest())
    members[entry["member"] + ".npy"] = _npy(array)


def _negative_shape(description, members):
    description["leaves"][0]["shape"] = [-1, 4]


def _shape_of_strings(description, members):
    description["leaves"][0]["shape"] = ["3", "4"]


def _object_dtype(description, members):
    description["leaves"][0]["dtype"] = "|O"


def _not_a_dict(description, members):
    description.clear()
    description["__list__"] = True


def _unknown_node_kind(description, members):
    description["tree"]["children"][0] = {"kind": "set", "children": []}


def _nested(depth):
    """A tree of ``depth`` lists around one leaf (JSON text: too deep for json.dumps)."""
    def edit(description, members):
        description["tree"] = "__nested__"
        return (b'{"children": [' * depth + b'{"kind": "leaf"}' + b'], "kind": "list"}' * depth)
    return edit


CRAFTED = [_drop("leaves"), _drop("tree"), _drop("format"), _more_tree_leaves_than_entries,
           _more_entries_than_tree_leaves, _duplicate_dict_keys, _two_entries_one_member,
           _int_scalar_of_complex_dtype, _negative_shape, _shape_of_strings, _object_dtype,
           _not_a_dict, _unknown_node_kind, _nested(300), _nested(100_000)]


@pytest.mark.parametrize("edit", CRAFTED, ids=[
    "no-leaves", "no-tree", "no-format", "tree-leaf-without-entry", "entry-without-tree-leaf",
    "duplicate-dict-key", "two-entries-one-member", "int-of-complex", "negative-shape",
    "shape-of-strings", "object-dtype", "not-an-object", "unknown-kind", "nested-300",
    "nested-100000"])
def test_a_crafted_description_with_a_recomputed_digest_is_a_checkpoint_error(saved, edit):
    description, members = _description(saved), _members(saved)
    nested = edit(description, members)
    if "__list__" in description:
        text = b"[1, 2, 3]"
    else:
        text = json.dumps(description, sort_keys=True).encode()
    if nested is not None:
        text = text.replace(b'"__nested__"', nested)
    members.update(_description_members(text))
    _write_zip(saved, [(name, 0, data, len(data)) for name, data in members.items()])
    with pytest.raises(CheckpointError, match=r"load .*state\.npz: "):
        load(saved)


def test_a_description_that_is_not_utf8_is_a_checkpoint_error(saved):
    members = _members(saved)
    members.update(_description_members(b'{"format": "\xff\xfe"}'))
    _write_zip(saved, [(name, 0, data, len(data)) for name, data in members.items()])
    with pytest.raises(CheckpointError, match=r"state\.npz.*description"):
        load(saved)


@pytest.mark.parametrize("change", ["duplicate", "encrypted", "method", "overlap"])
def test_a_crafted_archive_is_a_checkpoint_error(saved, change):
    members = [(name, 0, data, len(data)) for name, data in _members(saved).items()]
    if change == "duplicate":
        members.append(members[0])
    elif change == "method":
        name, _, data, size = members[0]
        members[0] = (name, 99, data, size)
    _write_zip(saved, members)
    data = bytearray(saved.read_bytes())
    if change == "encrypted":  # the flag bit in the first central directory entry
        at = data.find(struct.pack("<I", 0x02014B50))
        data[at + 8] |= 1
    elif change == "overlap":  # every directory entry points at the first member
        at = data.find(struct.pack("<I", 0x02014B50))
        while at >= 0:
            data[at + 42:at + 46] = struct.pack("<I", 0)
            at = data.find(struct.pack("<I", 0x02014B50), at + 1)
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"load .*state\.npz: "):
        load(saved)


# --- Trainer.load ---------------------------------------------------------------------------

def _quadratic(p, x):
    return inp.sum((p["w"] - x) ** 2)


def test_trainer_load_of_a_file_trainer_save_did_not_write(tmp_path):
    path = tmp_path / "weights.npz"
    save(path, {"w": np.zeros(3)})
    with pytest.raises(CheckpointError, match=r"Trainer\.load.*weights\.npz.*Trainer\.save"):
        Trainer.load(path, _quadratic, optim.sgd(0.1), strategy="reference")
    save(path, {"params": {"w": np.zeros(3)}, "opt_state": {"x": np.zeros(1)}, "steps": 2})
    with pytest.raises(CheckpointError, match=r"Trainer\.load.*opt_state"):
        Trainer.load(path, _quadratic, optim.sgd(0.1), strategy="reference")
