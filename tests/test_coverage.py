"""Every op has a rule in every table that must cover it."""

from isokernel.backends.capsules import lookup
from isokernel.ir import EVAL, SHAPE, Op
from isokernel.ir.eval import NO_EVAL

TABLES = {
    "SHAPE": (SHAPE, frozenset()),
    "EVAL": (EVAL, NO_EVAL),
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


def test_numerical_contract_ops_are_in_the_tables():
    """The ops portable numerics, tables and fused forms added."""
    added = {Op.LDEXP, Op.LOGB, Op.COPYSIGN, Op.TABLE_LOOKUP, Op.FUSED}
    for name, (table, _) in TABLES.items():
        assert added <= set(table), name
