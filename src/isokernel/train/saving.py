"""``save(path, tree)`` / ``load(path)``: a pytree of arrays in one ``.npz`` file, never pickle.

The file is an ordinary NumPy ``.npz`` archive (``np.load(path, allow_pickle=False)`` reads
it) with one member per leaf (``leaf_0``, ``leaf_1``, ...) and two more:

- ``__tree__``: UTF-8 JSON (as a uint8 array) describing the tree (dicts, lists, tuples,
  None; namedtuples, dataclasses and registered pytree nodes by class name) and every leaf:
  its member, dtype, shape, whether it was a Python or NumPy scalar, and the SHA-256 of its
  bytes;
- ``__tree_sha256__``: the SHA-256 of that JSON, so an edited description is caught.

``load`` reads only a regular file (a FIFO or a device is refused before it is opened, and
the file opened is checked again), and trusts nothing in it before checking it: the zip
directory (no duplicate, encrypted or overlapping members, only stored or deflated ones,
at most ``max_bytes`` uncompressed in all), the description (its digest, then every field,
before any leaf is decompressed), every member's declared size against the description,
its npy header against the description, and every leaf's SHA-256. Members are read in
chunks into arrays of the described size, never with pickle. Any mismatch raises
``CheckpointError`` naming the file, what is wrong and the fix.

``save`` writes ``.NAME.partial-PID@HOST.XXXXXXXX.tmp`` in the destination folder and renames
it over ``path`` (``os.replace``), so a crash never leaves half a file under the name; it
replaces only a regular file (checked before writing and again just before the rename), and
removes the temporaries that writers killed on this host left in that folder.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import secrets
import socket
import stat
import struct
import zipfile
import zlib
from os import PathLike

import numpy as np

from ..backends.platform import process_gone
from ..ir import IsokernelError
from ..ir.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten
from ..typing import PyTree

FORMAT = "isokernel.save/1"
TREE = "__tree__"
DIGEST = "__tree_sha256__"
RESAVE = "re-save it with isokernel.save from the original values"
_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex
MAX_DESCRIPTION = 64 << 20  # bytes of JSON: about 300 000 leaves
MAX_DEPTH = 256  # nesting of the tree's containers
EXPANSION = 256 << 20  # what load accepts uncompressed from a smaller (compressed) file
_MAX_NPY_HEADER = 10_000  # NumPy's own limit on an npy header it reads
_CHUNK = 1 << 20  # members are read this many bytes at a time
# ``.state.npz.partial-PID@HOST.XXXXXXXX.tmp``: a temporary of save, in its folder
_TEMPORARY = re.compile(r"\..*\.partial-(?P<pid>[0-9]+)@(?P<host>[A-Za-z0-9-]*)"
                        r"\.[0-9a-f]{8}\.tmp")
_DTYPE = re.compile(r"[<>|][biufc][0-9]{1,2}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NODE_FIELDS = {"leaf": {"kind"}, "none": {"kind"}, "list": {"kind", "children"},
                "tuple": {"kind", "children"}, "dict": {"kind", "keys", "children"},
                "namedtuple": {"kind", "class", "fields", "children"},
                "dataclass": {"kind", "class", "fields", "children"},
                "custom": {"kind", "class", "aux", "children"}}
_LEAF_FIELDS = {"member", "dtype", "shape", "python", "sha256"}
_SCALAR_KINDS = {None: _KINDS, "numpy": _KINDS, "bool": "b", "int": "iu", "float": "f"}
# what a malformed zip archive raises inside zipfile, zlib and NumPy's npy reader
_READ_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error, struct.error,
                NotImplementedError, RuntimeError, OverflowError, KeyError, IndexError)

BIG_INT = ("save: {where} = {value} does not fit in int64 or uint64 (it would need pickle); "
           "store it as a float (float(x)) or as 64-bit words, e.g. "
           "np.array([x >> 64, x & (2**64 - 1)], dtype=np.uint64)")
MASKED = ("save: {where} is a masked array (numpy.ma), whose mask would be lost; save "
          "x.filled(fill_value) and np.ma.getmaskarray(x) as two leaves instead")
NOT_REGULAR = ("save {path}: it is {kind}, not a regular file; save replaces only regular "
               "files: remove it or choose another path")
TOO_BIG = ("its members hold {total} bytes uncompressed, more than the {cap} load accepts "
           "from a file of {size} bytes")
TOO_BIG_FIX = "if you trust the file, pass a larger max_bytes= to load"


class CheckpointError(IsokernelError, ValueError):
    """A file ``load`` cannot trust, or a tree or destination ``save`` refuses."""


# --- describing a tree ----------------------------------------------------------------------

def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _dict_key(key):
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise CheckpointError(f"save: dict key {key!r} is a {type(key).__name__}; only str "
                              f"and int keys can be written (JSON); rename the key")
    return ["str" if isinstance(key, str) else "int", key]


def _describe_node(td: TreeDef) -> dict:
    """The JSON form of one node's kind and static data (no children)."""
    if td.kind == "dict":
        return {"kind": "dict", "keys": [_dict_key(k) for k in td.aux]}
    if td.kind == "namedtuple":
        return {"kind": "namedtuple", "class": _class_name(td.aux),
                "fields": list(td.aux._fields)}
    if td.kind == "dataclass":
        return {"kind": "dataclass", "class": _class_name(td.aux[0]), "fields": list(td.aux[1])}
    if td.kind == "custom":
        return {"kind": "custom", "class": _class_name(td.aux[0]), "aux": repr(td.aux[1])}
    return {"kind": td.kind}


def describe(td: TreeDef) -> dict:
    """The JSON form of a tree's structure (leaves are ``{"kind": "leaf"}``)."""
    node = _describe_node(td)
    if td.kind not in ("leaf", "none"):
        node["children"] = [describe(c) for c in td.children]
    return node


def _depth(td: TreeDef) -> int:
    return 1 + max((_depth(c) for c in td.children), default=0)


# --- leaves ---------------------------------------------------------------------------------

def _leaf_array(leaf, where: str) -> tuple[np.ndarray, str | None]:
    """The array written for a leaf and the scalar type it came from (``int``,
    ``float``, ``bool``, ``numpy`` for a NumPy scalar, None for an array)."""
    if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, np.generic):
        try:
            array = np.asarray(leaf)
        except OverflowError:
            array = None
        if array is None or array.dtype.kind not in _KINDS:  # an object array: pickle
            raise CheckpointError(BIG_INT.format(where=where, value=leaf))
        return array, type(leaf).__name__
    if isinstance(leaf, np.ma.MaskedArray):
        raise CheckpointError(MASKED.format(where=where))
    if not isinstance(leaf, (np.ndarray, np.generic)):
        raise CheckpointError(f"save: {where} is a {type(leaf).__name__}, not an array; "
                              f"leaves must be NumPy arrays or Python scalars: convert it "
                              f"with np.asarray(...) (outside jit) before saving")
    array = np.asarray(leaf)
    scalar = "numpy" if isinstance(leaf, np.generic) else None
    if array.dtype.kind not in _KINDS:
        raise CheckpointError(f"save: {where} has dtype {array.dtype}; only bool, integer, "
                              f"float and complex arrays are written (an object array would "
                              f"need pickle): convert it, e.g. x.astype(np.float64)")
    return array, scalar


def _sha256(array: np.ndarray) -> str:
    """The SHA-256 of the array's bytes in C order (hashed in place, not copied)."""
    return hashlib.sha256(np.ascontiguousarray(array).reshape(-1).view(np.uint8)).hexdigest()


def _leaf_entry(index: int, array: np.ndarray, scalar: str | None) -> dict:
    return {"member": f"leaf_{index}", "dtype": array.dtype.str, "shape": list(array.shape),
            "python": scalar, "sha256": _sha256(array)}


# --- save -----------------------------------------------------------------------------------

def _members(tree) -> dict[str, np.ndarray]:
    """The archive's members: one per leaf, the description and its digest."""
    leaves, td = tree_flatten(tree)
    if _depth(td) > MAX_DEPTH:
        raise CheckpointError(f"save: the tree nests {_depth(td)} containers deep, more than "
                              f"the {MAX_DEPTH} load reads; flatten its structure")
    paths = leaf_paths(tree, "tree")
    arrays, entries = {}, []
    for i, (leaf, where) in enumerate(zip(leaves, paths)):
        array, scalar = _leaf_array(leaf, where)
        arrays[f"leaf_{i}"] = array
        entries.append(_leaf_entry(i, array, scalar))
    description = {"format": FORMAT, "tree": describe(td), "leaves": entries}
    text = json.dumps(description, sort_keys=True).encode()
    if len(text) > MAX_DESCRIPTION:
        raise CheckpointError(f"save: the tree's description is {len(text)} bytes, more than "
                              f"the {MAX_DESCRIPTION} load reads; save fewer, larger arrays "
                              f"(stack the leaves of the same shape)")
    arrays[TREE] = np.frombuffer(text, dtype=np.uint8)
    arrays[DIGEST] = np.frombuffer(hashlib.sha256(text).hexdigest().encode(), dtype=np.uint8)
    return arrays


def save(path: str | PathLike[str], tree: PyTree) -> None:
    """Write ``tree`` (a pytree of NumPy arrays and Python scalars) to ``path`` as one
    ``.npz`` file, atomically (a temporary file in the same folder, then a rename). Only
    a regular file (or nothing) at ``path`` is replaced; a folder, FIFO, device, socket or
    symbolic link there raises ``CheckpointError``."""
    arrays = _members(tree)
    path = os.fspath(path)
    folder, status = _destination_folder(path)
    _sweep(folder)
    fd, temporary = _create_temporary(path, folder, status)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, allow_pickle=False, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        _check_replaceable(path)  # again: something else may have appeared meanwhile
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def _kind(mode: int) -> str | None:
    """What a file that is not a regular one is, in words (None for a regular file)."""
    for test, kind in ((stat.S_ISREG, None), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR,
                       "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return kind
    return "not a file"


def _check_replaceable(path: str) -> os.stat_result | None:
    """The status of the regular file at ``path`` (None if nothing is there); anything
    else there is refused."""
    try:
        status = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    kind = _kind(status.st_mode)
    if kind == "a folder":
        raise CheckpointError(f"save {path}: it is a folder, not a file; give a file name, "
                              f"e.g. {os.path.join(path, 'state.npz')}")
    if kind == "a symbolic link":
        raise CheckpointError(NOT_REGULAR.format(path=path, kind=kind).replace(
            "remove it", f"save to its target ({os.path.realpath(path)}) or remove the link"))
    if kind is not None:
        raise CheckpointError(NOT_REGULAR.format(path=path, kind=kind))
    return status


def _destination_folder(path: str) -> tuple[str, os.stat_result | None]:
    """The folder ``path`` goes into, checked (it exists), and the status of the regular
    file ``path`` replaces (None if the name is free; anything else there is refused)."""
    if not path or path.endswith(("/", os.sep)):
        raise CheckpointError(f"save {path!r}: it names a folder; give a file name, e.g. "
                              f"{os.path.join(path, 'state.npz')}")
    status = _check_replaceable(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        if os.path.lexists(folder):
            raise NotADirectoryError(errno.ENOTDIR, f"save {path}: {folder} is not a folder; "
                                                    f"choose another path")
        raise FileNotFoundError(errno.ENOENT, f"save {path}: folder {folder} does not exist; "
                                              f"create it (mkdir -p {folder}) or choose "
                                              f"another path")
    return folder, status


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())


def _create_temporary(path: str, folder: str,
                      replaced: os.stat_result | None) -> tuple[int, str]:
    """A new file ``.NAME.partial-PID@HOST.XXXXXXXX.tmp`` in ``folder``, opened for
    writing, with the mode of the file it replaces (else the umask's)."""
    stem = os.path.basename(path)[:64]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        name = f".{stem}.partial-{os.getpid()}@{_host()}.{secrets.token_hex(4)}.tmp"
        temporary = os.path.join(folder, name)
        try:
            fd = os.open(temporary, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        except OSError as error:
            raise type(error)(error.errno, f"save {path}: cannot create a file in {folder}: "
                                           f"{error.strerror}") from None
        if replaced is not None:
            os.fchmod(fd, stat.S_IMODE(replaced.st_mode))
        return fd, temporary
    raise FileExistsError(errno.EEXIST, f"save {path}: no free temporary name in {folder}")


def _sweep(folder: str) -> None:
    """Remove the temporaries in ``folder`` that save left when its process was killed:
    named by ``_TEMPORARY``, of this host and this user, regular files, their process
    gone."""
    host = _host()
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            found = _TEMPORARY.fullmatch(entry.name)
            if found and found["host"] == host and _orphaned(entry, int(found["pid"])):
                with contextlib.suppress(OSError):
                    os.remove(entry.path)


def _orphaned(entry: os.DirEntry, pid: int) -> bool:
    try:
        status = entry.stat(follow_symlinks=False)
    except OSError:  # gone meanwhile, or not ours to judge
        return False
    if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
        return False
    return pid != os.getpid() and process_gone(pid)


# --- load: the file and its zip directory ---------------------------------------------------

def _fail(path, problem: str, fix: str = RESAVE):
    raise CheckpointError(f"load {path!s}: {problem}; {fix}")


@contextlib.contextmanager
def _reading(path, what: str):
    """Any error of zipfile, zlib or NumPy's npy reader while reading ``what``, as a
    ``CheckpointError`` naming the file."""
    try:
        yield
    except CheckpointError:
        raise
    except _READ_ERRORS as error:
        _fail(path, f"{what} cannot be read ({type(error).__name__}: {error}); the file is "
                    f"truncated or corrupted")


def _check_regular(path, mode: int) -> None:
    kind = _kind(mode)
    if kind == "a folder":
        _fail(path, "it is a folder, not a file", "give the path of a file save wrote")
    if kind is not None:
        _fail(path, f"it is {kind}, not a regular file; load reads only regular files",
              "give the path of a file save wrote")


@contextlib.contextmanager
def _open_regular(path):
    """``path`` opened for reading, and its size: a regular file (checked before it is
    opened, so a FIFO or a device is never opened, and again on the open file)."""
    try:
        _check_regular(path, os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        _fail(path, "no such file", "check the path")
    except OSError as error:
        _fail(path, f"cannot be read ({error.strerror})", "check the path and its permissions")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        _fail(path, f"cannot be opened ({error.strerror})", "check its permissions")
    with open(fd, "rb") as handle:
        status = os.fstat(fd)
        _check_regular(path, status.st_mode)
        yield handle, status.st_size


def _directory(path, archive: zipfile.ZipFile, size: int, max_bytes) -> dict:
    """The archive's members by name, checked before any is decompressed."""
    infos = {}
    for info in archive.infolist():
        name = info.filename
        if name in infos:
            _fail(path, f"member {name!r} appears twice")
        if info.flag_bits & 0x1:
            _fail(path, f"member {name!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            _fail(path, f"member {name!r} uses compression method {info.compress_type}; only "
                        f"stored and deflated members are read")
        infos[name] = info
    if sum(info.compress_size for info in infos.values()) > size:
        _fail(path, "its members' compressed sizes add up to more than the file: the "
                    "archive is crafted or corrupted")
    cap = max(size, EXPANSION) if max_bytes is None else max_bytes
    total = sum(info.file_size for info in infos.values())
    if total > cap:
        _fail(path, TOO_BIG.format(total=total, cap=cap, size=size), TOO_BIG_FIX)
    return infos


# --- load: npy members ----------------------------------------------------------------------

def _npy_header(path, name: str, stream) -> tuple[tuple, bool, np.dtype, int]:
    """Shape, Fortran order, dtype and length of the npy header at the start of
    ``stream`` (NumPy's reader: a literal, at most ``_MAX_NPY_HEADER`` bytes)."""
    with _reading(path, f"the npy header of member {name!r}"):
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            read = np.lib.format.read_array_header_1_0
        elif version == (2, 0):
            read = np.lib.format.read_array_header_2_0
        else:
            _fail(path, f"member {name!r} is npy version {version}, which save never writes")
        shape, fortran, dtype = read(stream, max_header_size=_MAX_NPY_HEADER)
        return shape, fortran, dtype, stream.tell()


def _read_npy(path, archive, info, dtype: np.dtype, shape: tuple | None) -> np.ndarray:
    """The array in member ``info``, which must be ``dtype`` and ``shape`` (any 1-D
    shape if None), read in chunks into an array of that size and no more."""
    name = info.filename[:-len(".npy")]
    with _reading(path, f"member {name!r}"), archive.open(info) as stream:
        got_shape, fortran, got_dtype, header = _npy_header(path, name, stream)
        if shape is None and len(got_shape) == 1:
            shape = got_shape
        if got_dtype.str != dtype.str or got_shape != shape:
            _fail(path, f"member {name!r} is {got_dtype.str}{list(got_shape)} but the "
                        f"description says {dtype.str}{list(shape or ['n'])}")
        nbytes = math.prod(shape) * dtype.itemsize
        if header + nbytes != info.file_size:
            _fail(path, f"member {name!r} holds {info.file_size - header} bytes of data but "
                        f"its header and the description say {nbytes}")
        data = np.empty(nbytes, np.uint8)
        view = memoryview(data)
        for start in range(0, nbytes, _CHUNK):
            part = view[start:start + _CHUNK]
            if stream.readinto(part) != len(part):
                _fail(path, f"member {name!r} ends early; the file is truncated or corrupted")
        stream.read(1)  # at the end: zipfile checks the CRC-32
    flat = data.view(dtype)
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)


def _expected_size(entry: dict) -> int:
    return math.prod(entry["shape"]) * np.dtype(entry["dtype"]).itemsize


def _check_sizes(path, entries: list, infos: dict) -> None:
    """Every member the description names is there, with the size it describes (plus
    an npy header), and no other: checked before any leaf is decompressed."""
    expected = {f"{e['member']}.npy" for e in entries} | {f"{TREE}.npy", f"{DIGEST}.npy"}
    extra = sorted(name[:-4] if name.endswith(".npy") else name for name in set(infos) - expected)
    if extra:
        _fail(path, f"unexpected member(s) {extra} not in the description")
    for entry in entries:
        info = infos.get(f"{entry['member']}.npy")
        if info is None:
            _fail(path, f"member {entry['member']!r} is missing")
        nbytes = _expected_size(entry)
        if not nbytes + 10 <= info.file_size <= nbytes + 12 + _MAX_NPY_HEADER:
            _fail(path, f"member {entry['member']!r} holds {info.file_size} bytes but the "
                        f"description says {entry['dtype']}{entry['shape']} ({nbytes} bytes "
                        f"of data and an npy header)")


# --- load: the description ------------------------------------------------------------------

def _read_description(path, archive, infos: dict) -> dict:
    """The description, its digest checked, parsed, and every field of it checked."""
    for name in (TREE, DIGEST):
        if f"{name}.npy" not in infos:
            _fail(path, f"member {name!r} is missing: not a file written by isokernel.save")
    if infos[f"{TREE}.npy"].file_size > MAX_DESCRIPTION + 12 + _MAX_NPY_HEADER:
        _fail(path, f"its description ({TREE}) is over {MAX_DESCRIPTION} bytes, more than "
                    f"save writes")
    if infos[f"{DIGEST}.npy"].file_size > 64 + 12 + _MAX_NPY_HEADER:
        _fail(path, f"its digest ({DIGEST}) is longer than a SHA-256")
    u1 = np.dtype(np.uint8)
    text = _read_npy(path, archive, infos[f"{TREE}.npy"], u1, None).tobytes()
    digest = _read_npy(path, archive, infos[f"{DIGEST}.npy"], u1, None).tobytes()
    if hashlib.sha256(text).hexdigest().encode() != digest:
        _fail(path, f"the tree description ({TREE}) does not match its SHA-256 "
                    f"({DIGEST}): it was edited or corrupted")
    try:
        description = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        _fail(path, f"the tree description ({TREE}) is not UTF-8 JSON "
                    f"({type(error).__name__}: {error})")
    if not isinstance(description, dict):
        _fail(path, f"the tree description ({TREE}) is a {type(description).__name__}, not "
                    f"an object")
    if description.get("format") != FORMAT:
        _fail(path, f"format {description.get('format')!r} is not {FORMAT!r}",
              "load it with the isokernel version that wrote it, or re-save it")
    if set(description) != {"format", "tree", "leaves"}:
        _fail(path, f"the tree description has fields {sorted(description)}, not format, "
                    f"tree and leaves")
    _check_entries(path, description["leaves"])
    return description


def _check_entries(path, entries) -> None:
    if not isinstance(entries, list):
        _fail(path, "the description's leaves are not a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != _LEAF_FIELDS:
            _fail(path, f"the description of leaf {i} is not an object with the fields "
                        f"{sorted(_LEAF_FIELDS)}")
        _check_entry(path, i, entry)


def _check_entry(path, i: int, entry: dict) -> None:
    """One leaf's description: its member's name, a bool/int/float/complex dtype in
    NumPy's canonical spelling, a shape of naturals, its scalar type and SHA-256."""
    bad = None
    dtype, shape, python = entry["dtype"], entry["shape"], entry["python"]
    if entry["member"] != f"leaf_{i}":
        bad = f"member {entry['member']!r} (leaf {i} is in 'leaf_{i}')"
    elif not isinstance(dtype, str) or not _DTYPE.fullmatch(dtype) or not _canonical(dtype):
        bad = f"dtype {dtype!r} (save writes bool, integer, float and complex dtypes only)"
    elif (not isinstance(shape, list) or len(shape) > 64
          or not all(type(n) is int and n >= 0 for n in shape)):
        bad = f"shape {shape!r}"
    elif (not isinstance(python, (str, type(None))) or python not in _SCALAR_KINDS
          or (python is not None and shape != [])
          or np.dtype(dtype).kind not in _SCALAR_KINDS[python]):
        bad = f"scalar type {python!r} of a {dtype}{shape} array"
    elif not isinstance(entry["sha256"], str) or not _SHA256.fullmatch(entry["sha256"]):
        bad = f"SHA-256 {entry['sha256']!r}"
    if bad is not None:
        _fail(path, f"the description of leaf {i} has an impossible {bad}")


def _canonical(dtype: str) -> bool:
    try:
        return np.dtype(dtype).str == dtype
    except TypeError:  # e.g. '<f3': no such type
        return False


def _tree(path, node, depth: int = 0) -> TreeDef:
    """The structure ``node`` describes, every field checked. Classes (namedtuples,
    dataclasses, registered nodes) come back as ``"class"`` nodes whose ``aux`` is the
    class's name: they are rebuilt only from a template (``like``)."""
    kind = node.get("kind") if isinstance(node, dict) else None
    if not isinstance(kind, str) or kind not in _NODE_FIELDS or set(node) != _NODE_FIELDS[kind]:
        _fail(path, f"the tree description holds an impossible node {str(node)[:80]}")
    if depth > MAX_DEPTH:
        _fail(path, f"the tree description nests more than {MAX_DEPTH} containers deep")
    if kind in ("leaf", "none"):
        return TreeDef(kind, None, ())
    children = node["children"]
    if not isinstance(children, list):
        _fail(path, f"the children of a {kind} node are not a list")
    aux = None
    if kind == "dict":
        aux = _keys(path, node["keys"], len(children))
    elif kind in ("namedtuple", "dataclass", "custom"):
        aux = ("class", str(node["class"]))
    return TreeDef(kind, aux, tuple(_tree(path, c, depth + 1) for c in children))


def _keys(path, keys, n: int) -> tuple:
    """A dict node's keys: ``["str", "a"]`` or ``["int", 3]`` pairs, one per child, no
    two alike (a repeated key would drop a leaf)."""
    if not isinstance(keys, list) or len(keys) != n:
        _fail(path, "a dict node of the tree description has not one key per child")
    types = {"str": str, "int": int}
    out = []
    for pair in keys:
        if (not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str)
                or pair[0] not in types or type(pair[1]) is not types[pair[0]]):
            _fail(path, f"a dict node of the tree description has the impossible key {pair!r}")
        out.append(pair[1])
    if len(set(out)) != len(out):
        _fail(path, "a dict node of the tree description repeats a key")
    return tuple(out)


def _classes(td: TreeDef) -> list[str]:
    own = [td.aux[1]] if td.aux and td.aux[0] == "class" else []
    return own + [name for child in td.children for name in _classes(child)]


# --- load -----------------------------------------------------------------------------------

def _read_leaf(path, archive, infos: dict, entry: dict):
    array = _read_npy(path, archive, infos[f"{entry['member']}.npy"],
                      np.dtype(entry["dtype"]), tuple(entry["shape"]))
    if _sha256(array) != entry["sha256"]:
        _fail(path, f"member {entry['member']!r}: SHA-256 of its bytes does not match the "
                    f"description (the data was modified or corrupted)")
    if entry["python"] == "numpy":
        return array[()]
    if entry["python"] is not None:
        return {"bool": bool, "int": int, "float": float}[entry["python"]](array.item())
    return array


def _structure(path, description: dict, like) -> TreeDef:
    """The TreeDef the leaves go into: the described one (built-in containers only),
    or ``like``'s when it has the described structure; its leaves number the entries."""
    described = _tree(path, description["tree"])
    if like is None:
        classes = _classes(described)
        if classes:
            _fail(path, f"the tree holds an object of class {classes[0]}, which load "
                        f"rebuilds only from a template",
                  "pass like=<a tree of the same structure>, e.g. load(path, like=params)")
        td = described
    else:
        _, td = tree_flatten(like)
        if describe(td) != description["tree"]:
            _fail(path, "its tree structure differs from like's",
                  "pass a template with the structure that was saved, or load without like")
    if td.num_leaves != len(description["leaves"]):
        _fail(path, f"the tree has {td.num_leaves} leaves but the description lists "
                    f"{len(description['leaves'])}")
    return td


def load(path: str | PathLike[str], like: PyTree = None, *,
         max_bytes: int | None = None) -> PyTree:
    """The tree ``save`` wrote to ``path``, every leaf checked against its dtype, shape and
    SHA-256. Dicts, lists, tuples and None are rebuilt as such; a tree holding namedtuples,
    dataclasses or registered pytree nodes needs ``like``, a tree of the same structure
    whose classes are used (its leaves are ignored). ``max_bytes``: the most the archive's
    members may hold uncompressed (default: the file's size or 256 MiB, whichever is more:
    a file save wrote is not compressed, so it always loads). A malformed file raises
    ``CheckpointError`` before more than its described size is read."""
    path = os.fspath(path)
    if max_bytes is not None and (isinstance(max_bytes, bool)
                                  or not isinstance(max_bytes, (int, np.integer))
                                  or max_bytes < 0):
        raise TypeError(f"load: max_bytes={max_bytes!r}; give a number of bytes (an int "
                        f"at least 0), or None for the default")
    with _open_regular(path) as (handle, size):
        with _reading(path, "the zip directory"):
            try:
                archive = zipfile.ZipFile(handle)
            except zipfile.BadZipFile:
                _fail(path, "not an .npz archive (no zip directory: truncated, or another "
                            "format)")
        with archive:
            infos = _directory(path, archive, size, max_bytes)
            description = _read_description(path, archive, infos)
            td = _structure(path, description, like)
            _check_sizes(path, description["leaves"], infos)
            leaves = [_read_leaf(path, archive, infos, e) for e in description["leaves"]]
    return tree_unflatten(td, leaves)
