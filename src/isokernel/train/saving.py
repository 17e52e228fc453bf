"""``save(path, tree)`` / ``load(path)``: a pytree of arrays in one ``.npz`` file, never pickle.

The file is an ordinary NumPy ``.npz`` archive (``np.load(path, allow_pickle=False)`` reads
it) with one member per leaf (``leaf_0``, ``leaf_1``, ...) and two more:

- ``__tree__``: UTF-8 JSON (as a uint8 array) describing the tree (dicts, lists, tuples,
  None; namedtuples, dataclasses and registered pytree nodes by class name) and every leaf:
  its member, dtype, shape, whether it was a Python or NumPy scalar, and the SHA-256 of its
  bytes;
- ``__tree_sha256__``: the SHA-256 of that JSON, so an edited description is caught.

``load`` checks the members, the description's digest, and every leaf's dtype, shape and
hash before it returns anything; any mismatch raises ``CheckpointError`` naming the file,
what is wrong and the fix. ``save`` writes a temporary file in the destination folder and
renames it over ``path`` (``os.replace``), so a crash never leaves half a file under the name.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile

import numpy as np

from ..ir import IsokernelError
from ..ir.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten

FORMAT = "isokernel.save/1"
TREE = "__tree__"
DIGEST = "__tree_sha256__"
RESAVE = "re-save it with isokernel.save from the original values"
_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex


class CheckpointError(IsokernelError, ValueError):
    """A file ``load`` cannot trust, or a tree ``save`` cannot write."""


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


# --- leaves ---------------------------------------------------------------------------------

def _leaf_array(leaf, where: str) -> tuple[np.ndarray, str | None]:
    """The array written for a leaf and the scalar type it came from (``int``,
    ``float``, ``bool``, ``numpy`` for a NumPy scalar, None for an array)."""
    if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, np.generic):
        kind = type(leaf).__name__
        try:
            return np.asarray(leaf), kind
        except OverflowError:
            raise CheckpointError(f"save: {where} = {leaf} does not fit in int64; store it "
                                  f"as a float or a string of digits elsewhere") from None
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
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _leaf_entry(index: int, array: np.ndarray, scalar: str | None) -> dict:
    return {"member": f"leaf_{index}", "dtype": array.dtype.str, "shape": list(array.shape),
            "python": scalar, "sha256": _sha256(array)}


# --- save -----------------------------------------------------------------------------------

def _members(tree) -> tuple[dict, dict]:
    leaves, td = tree_flatten(tree)
    paths = leaf_paths(tree, "tree")
    arrays, entries = {}, []
    for i, (leaf, where) in enumerate(zip(leaves, paths)):
        array, scalar = _leaf_array(leaf, where)
        arrays[f"leaf_{i}"] = array
        entries.append(_leaf_entry(i, array, scalar))
    description = {"format": FORMAT, "tree": describe(td), "leaves": entries}
    return arrays, description


def save(path, tree) -> None:
    """Write ``tree`` (a pytree of NumPy arrays and Python scalars) to ``path`` as one
    ``.npz`` file, atomically (a temporary file in the same folder, then a rename)."""
    arrays, description = _members(tree)
    text = json.dumps(description, sort_keys=True).encode()
    arrays[TREE] = np.frombuffer(text, dtype=np.uint8)
    arrays[DIGEST] = np.frombuffer(hashlib.sha256(text).hexdigest().encode(), dtype=np.uint8)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


# --- load -----------------------------------------------------------------------------------

def _fail(path, problem: str, fix: str = RESAVE):
    raise CheckpointError(f"load {path!s}: {problem}; {fix}")


def _read_members(path) -> dict[str, np.ndarray]:
    """Every member of the archive, read without pickle; any failure names the file."""
    if not os.path.exists(path):
        _fail(path, "no such file", "check the path")
    if not zipfile.is_zipfile(path):
        _fail(path, "not an .npz archive (no zip directory: truncated, or another format)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as error:
        _fail(path, f"a member cannot be read ({type(error).__name__}: {error}); the file "
                    f"is truncated or corrupted")


def _description(path, members: dict) -> dict:
    for name in (TREE, DIGEST):
        if name not in members:
            _fail(path, f"member {name!r} is missing: not a file written by isokernel.save")
    text = members[TREE].tobytes()
    if hashlib.sha256(text).hexdigest().encode() != members[DIGEST].tobytes():
        _fail(path, f"the tree description ({TREE}) does not match its SHA-256 "
                    f"({DIGEST}): it was edited or corrupted")
    description = json.loads(text)
    if description.get("format") != FORMAT:
        _fail(path, f"format {description.get('format')!r} is not {FORMAT!r}",
              "load it with the isokernel version that wrote it, or re-save it")
    return description


def _check_leaf(path, entry: dict, members: dict) -> np.ndarray:
    name = entry["member"]
    if name not in members:
        _fail(path, f"member {name!r} is missing")
    array = members[name]
    if array.dtype.str != entry["dtype"] or list(array.shape) != entry["shape"]:
        _fail(path, f"member {name!r} is {array.dtype.str}{list(array.shape)} but the "
                    f"description says {entry['dtype']}{entry['shape']}")
    if _sha256(array) != entry["sha256"]:
        _fail(path, f"member {name!r}: SHA-256 of its bytes does not match the description "
                    f"(the data was modified or corrupted)")
    if entry["python"] == "numpy":
        return array[()]
    if entry["python"] is not None:
        return {"bool": bool, "int": int, "float": float}[entry["python"]](array.item())
    return array


def _leaves(path, description: dict, members: dict) -> list:
    entries = description["leaves"]
    expected = {e["member"] for e in entries} | {TREE, DIGEST}
    extra = sorted(set(members) - expected)
    if extra:
        _fail(path, f"unexpected member(s) {extra} not in the description")
    return [_check_leaf(path, entry, members) for entry in entries]


def _build(node: dict, leaves, path):
    """The tree of built-in containers described by ``node``."""
    kind = node["kind"]
    if kind == "leaf":
        return next(leaves)
    if kind == "none":
        return None
    if kind not in ("dict", "list", "tuple"):
        _fail(path, f"the tree holds a {kind} node of class {node['class']}, which load "
                    f"rebuilds only from a template",
              "pass like=<a tree of the same structure>, e.g. load(path, like=params)")
    children = [_build(c, leaves, path) for c in node["children"]]
    if kind == "dict":
        return {k: child for (_, k), child in zip(node["keys"], children)}
    return children if kind == "list" else tuple(children)


def load(path, like=None):
    """The tree ``save`` wrote to ``path``, every leaf checked against its dtype, shape and
    SHA-256. Dicts, lists, tuples and None are rebuilt as such; a tree holding namedtuples,
    dataclasses or registered pytree nodes needs ``like``, a tree of the same structure
    whose classes are used (its leaves are ignored)."""
    path = os.fspath(path)
    members = _read_members(path)
    description = _description(path, members)
    leaves = _leaves(path, description, members)
    if like is None:
        return _build(description["tree"], iter(leaves), path)
    _, td = tree_flatten(like)
    if describe(td) != description["tree"]:
        _fail(path, "its tree structure differs from like's",
              "pass a template with the structure that was saved, or load without like")
    return tree_unflatten(td, leaves)
