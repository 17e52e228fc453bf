"""isokernel.save / load: pytrees of arrays in one .npz file, checked on load."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from typing import NamedTuple

import numpy as np
import pytest

from isokernel.train.saving import DIGEST, TREE, CheckpointError, load, save


class AdamState(NamedTuple):
    count: np.ndarray
    mu: dict


@dataclasses.dataclass
class Layer:
    w: np.ndarray
    b: np.ndarray


def _tree():
    rng = np.random.default_rng(0)
    return {
        "params": {"w": rng.standard_normal((3, 4)), "b": np.zeros(4, np.float32)},
        "layers": [np.arange(5, dtype=np.int32), (np.array(True), None, np.ones((0, 2)))],
        "step": 12,
        "lr": 1e-3,
        "done": False,
        "scale": np.float32(0.5),
        "big_endian": np.arange(3, dtype=">f8"),
        "raw": np.arange(4, dtype=np.uint8),
        3: np.array(2.5 + 1j),
    }


def _equal(a, b) -> None:
    """Same structure, types, dtypes and bytes."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b) or sorted(map(repr, a)) == sorted(map(repr, b))
        for k in a:
            _equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _equal(x, y)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    else:
        assert a == b


def _rewrite(path, changes: dict) -> None:
    """Rewrite the archive with members replaced (bytes) or removed (None), with valid
    zip checksums: a deliberate edit, not a corrupted byte."""
    with zipfile.ZipFile(path) as old:
        members = {name: old.read(name) for name in old.namelist()}
    for name, data in changes.items():
        if data is None:
            del members[name]
        else:
            members[name] = data
    with zipfile.ZipFile(path, "w") as new:
        for name, data in members.items():
            new.writestr(name, data)


def _npy(array: np.ndarray) -> bytes:
    import io
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _description(path) -> dict:
    with np.load(path, allow_pickle=False) as archive:
        return json.loads(archive[TREE].tobytes())


def _with_description(description: dict) -> dict:
    text = json.dumps(description, sort_keys=True).encode()
    return {f"{TREE}.npy": _npy(np.frombuffer(text, np.uint8)),
            f"{DIGEST}.npy": _npy(np.frombuffer(hashlib.sha256(text).hexdigest().encode(),
                                                np.uint8))}


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "state.npz"
    save(path, _tree())
    return path


def test_round_trip_of_a_nested_tree(saved):
    loaded = load(saved)
    _equal(loaded, _tree())
    assert type(loaded["step"]) is int and type(loaded["lr"]) is float
    assert type(loaded["done"]) is bool and type(loaded["scale"]) is np.float32
    assert loaded["big_endian"].dtype == np.dtype(">f8")


def test_file_is_a_plain_npz_readable_without_pickle(saved):
    with np.load(saved, allow_pickle=False) as archive:
        assert TREE in archive.files and DIGEST in archive.files
        description = json.loads(archive[TREE].tobytes())
        entry = next(e for e in description["leaves"] if e["shape"] == [3, 4])
        np.testing.assert_array_equal(archive[entry["member"]], _tree()["params"]["w"])


def test_classes_round_trip_with_a_template(tmp_path):
    path = tmp_path / "opt.npz"
    state = AdamState(np.array(3), {"w": Layer(np.ones(2), np.zeros(1))})
    save(path, state)
    with pytest.raises(CheckpointError, match=r"AdamState.*like="):
        load(path)
    loaded = load(path, like=state)
    assert isinstance(loaded, AdamState) and isinstance(loaded.mu["w"], Layer)
    _equal(loaded.mu["w"].w, state.mu["w"].w)
    with pytest.raises(CheckpointError, match="structure differs"):
        load(path, like=AdamState(np.array(3), {"v": Layer(np.ones(2), np.zeros(1))}))


def test_truncated_file(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"state\.npz.*truncated.*re-save"):
        load(saved)


def test_corrupted_byte_in_an_array(saved):
    data = bytearray(saved.read_bytes())
    pattern = _tree()["params"]["w"].tobytes()
    at = data.find(pattern)
    assert at > 0
    data[at + 5] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"state\.npz.*(corrupted|SHA-256)"):
        load(saved)


def test_tampered_array_with_valid_zip_checksums(saved):
    member = next(e["member"] for e in _description(saved)["leaves"] if e["shape"] == [3, 4])
    tampered = _tree()["params"]["w"].copy()
    tampered[1, 2] += 1e-12
    _rewrite(saved, {f"{member}.npy": _npy(tampered)})
    with pytest.raises(CheckpointError, match=rf"state\.npz.*{member}.*SHA-256.*re-save"):
        load(saved)


def test_edited_description(saved):
    description = _description(saved)
    description["leaves"][0]["shape"] = [99]
    text = json.dumps(description, sort_keys=True).encode()
    _rewrite(saved, {f"{TREE}.npy": _npy(np.frombuffer(text, np.uint8))})
    with pytest.raises(CheckpointError, match=r"state\.npz.*description.*edited"):
        load(saved)


def test_edited_description_with_its_digest_recomputed(saved):
    description = _description(saved)
    entry = description["leaves"][0]
    entry["shape"] = [99]
    _rewrite(saved, _with_description(description))
    with pytest.raises(CheckpointError, match=rf"{entry['member']}.*description says"):
        load(saved)


def test_missing_member(saved):
    member = _description(saved)["leaves"][1]["member"]
    _rewrite(saved, {f"{member}.npy": None})
    with pytest.raises(CheckpointError, match=rf"state\.npz.*{member}.*missing"):
        load(saved)


def test_missing_description(saved):
    _rewrite(saved, {f"{TREE}.npy": None})
    with pytest.raises(CheckpointError, match="__tree__.*missing.*isokernel.save"):
        load(saved)


def test_extra_member(saved):
    _rewrite(saved, {"intruder.npy": _npy(np.zeros(2))})
    with pytest.raises(CheckpointError, match="unexpected member.*intruder"):
        load(saved)


def test_object_arrays_and_other_leaves_are_refused(tmp_path):
    path = tmp_path / "obj.npz"
    with pytest.raises(CheckpointError, match=r"tree\['x'\].*object.*pickle"):
        save(path, {"x": np.array([1, "a"], dtype=object)})
    with pytest.raises(CheckpointError, match=r"tree\[0\].*str.*np.asarray"):
        save(path, ["text"])
    with pytest.raises(CheckpointError, match="dict key"):
        save(path, {(1, 2): np.zeros(1)})
    assert not path.exists() and os.listdir(tmp_path) == []


def test_not_an_npz_file(tmp_path):
    text = tmp_path / "notes.npz"
    text.write_text("not an archive")
    with pytest.raises(CheckpointError, match=r"notes\.npz.*not an \.npz"):
        load(text)
    npy = tmp_path / "array.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(CheckpointError, match=r"array\.npy.*not an \.npz"):
        load(npy)
    plain = tmp_path / "plain.npz"
    np.savez(plain, a=np.zeros(2))
    with pytest.raises(CheckpointError, match="__tree__.*missing"):
        load(plain)
    with pytest.raises(CheckpointError, match="no such file"):
        load(tmp_path / "absent.npz")


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "state.npz"
    save(path, {"a": np.zeros(2)})
    before = path.read_bytes()

    def broken_savez(handle, **arrays):
        handle.write(b"PK partial")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        save(path, {"a": np.ones(2)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["state.npz"]


def test_numpy_scalars_that_subclass_python_ones_round_trip(tmp_path):
    tree = {"lr": np.float64(0.5), "step": np.int64(3), "flag": np.bool_(True)}
    save(tmp_path / "s.npz", tree)
    back = load(tmp_path / "s.npz")
    assert back == tree and type(back["lr"]) is np.float64


def test_a_fortran_ordered_array_round_trips(tmp_path):
    tree = {"f": np.asfortranarray(np.arange(12.0).reshape(3, 4)), "c": np.arange(3)}
    save(tmp_path / "s.npz", tree)
    back = load(tmp_path / "s.npz")
    np.testing.assert_array_equal(back["f"], tree["f"])
    assert back["f"].flags.f_contiguous


def test_load_follows_a_symbolic_link_to_a_regular_file(saved, tmp_path):
    link = tmp_path / "latest.npz"
    os.symlink(saved.name, link)
    _equal(load(link), _tree())


def test_max_bytes_limits_what_load_reads(saved):
    size = saved.stat().st_size
    with pytest.raises(CheckpointError, match=r"more than the 100 load accepts.*max_bytes"):
        load(saved, max_bytes=100)
    _equal(load(saved, max_bytes=size), _tree())
    with pytest.raises(TypeError, match="max_bytes"):
        load(saved, max_bytes="1GB")
