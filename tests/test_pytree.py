"""Pytree round trips."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

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
