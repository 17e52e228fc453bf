"""Pytree round trips."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import isokernel as ik
from isokernel.ir.pytree import leaf_paths


class P(NamedTuple):
    x: float
    y: tuple


@dataclasses.dataclass
class D:
    a: np.ndarray
    b: dict


class Box:
    def __init__(self, value):
        self.value = value


ik.register_pytree_node(Box, lambda b: ((b.value,), None), lambda aux, ch: Box(ch[0]))

TREES = [
    1.0, (), [], {}, None, [1, (2, 3)], {"b": 1, "a": [2, {"c": 3}]},
    P(1.0, (2.0, None)), D(np.ones(2), {"k": (1, 2)}), [Box(3.0), Box([4.0])],
]


def test_round_trip():
    for tree in TREES:
        leaves, treedef = ik.tree_flatten(tree)
        again = ik.tree_unflatten(treedef, leaves)
        assert ik.tree_flatten(again) == (leaves, treedef) or _same(again, tree)
        hash(treedef)


def _same(a, b):
    la, ta = ik.tree_flatten(a)
    lb, tb = ik.tree_flatten(b)
    return ta == tb and all(np.array_equal(x, y) for x, y in zip(la, lb))


def test_tree_map_and_paths():
    tree = {"w": [1.0, 2.0], "s": P(3.0, (4.0,))}
    doubled = ik.tree_map(lambda v: v * 2, tree)
    assert doubled == {"w": [2.0, 4.0], "s": P(6.0, (8.0,))}
    assert leaf_paths(tree, "p") == ["p['s'].x", "p['s'].y[0]", "p['w'][0]", "p['w'][1]"]


@pytest.mark.parametrize("first,other,where", [
    ({"a": 1, "b": 2}, [10, 20], r"a dict .* a list"),          # used to return a dict
    ([1, 2], [1, 2, 3], r"list of 2 .* list of 3"),              # the extra leaf was dropped
    ([1, 2, 3], [1, 2], r"list of 3 .* list of 2"),              # a bare StopIteration
    ((1, 2), [1, 2], r"a tuple .* a list"),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}, r"keys \['a', 'b'\] .* keys \['a', 'c'\]"),
    ([1, (2, 3)], [1, 5], r"at \[1\]: a tuple of 2 in the first tree, a leaf in tree 2"),
    (P(1.0, (2.0,)), (1.0, (2.0,)), r"a P in the first tree, a tuple of 2 in tree 2"),
])
def test_tree_map_refuses_trees_of_another_structure(first, other, where):
    """As jax.tree_util.tree_map: every further tree must have the first tree's structure."""
    with pytest.raises(ValueError, match=r"tree_map: tree 2 .*structure.*" + where):
        ik.tree_map(lambda *xs: sum(xs), first, other)


def test_tree_map_over_several_trees_of_one_structure():
    a = {"w": [1.0, 2.0], "s": P(3.0, (4.0,))}
    b = {"w": [10.0, 20.0], "s": P(30.0, (40.0,))}
    assert ik.tree_map(lambda x, y, z: x + y + z, a, b, a) == \
        {"w": [12.0, 24.0], "s": P(36.0, (48.0,))}
    with pytest.raises(ValueError, match=r"tree_map: tree 3 "):
        ik.tree_map(lambda x, y, z: x, a, b, [1.0])


def test_optim_uses_the_public_tree_map():
    """One tree_map: optim's structure check is the public one."""
    from isokernel.optim import _base
    assert _base.tree_map is ik.tree_map
