"""Every op has a rule in every table that must cover it."""

from isokernel.backends.capsules import lookup
from isokernel.deploy import COST
from isokernel.ir import EVAL, SHAPE, Op
from isokernel.ir.eval import NO_EVAL

TABLES = {
    "SHAPE": (SHAPE, frozenset()),
    "EVAL": (EVAL, NO_EVAL),
    "COST": (COST, frozenset()),
}


def test_every_table_covers_every_op():
    missing = {
        name: sorted(op.value for op in Op if op not in table and op not in exempt)
        for name, (table, exempt) in TABLES.items()
    }
    assert missing == {name: [] for name in TABLES}


def test_reference_has_a_capsule_per_computing_op():
    leaves = {Op.INPUT, Op.CONST}
    assert [op.value for op in Op if op not in leaves and lookup(op, "numpy") is None] == []


def test_exemptions_are_real():
    for name, (table, exempt) in TABLES.items():
        assert not (exempt & set(table)), f"{name} exempts ops it covers"
