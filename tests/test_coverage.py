"""Every op has a rule in every table that must cover it."""

from isokernel.backends.capsules import lookup
from isokernel.backends.cpu.threads import INTO
from isokernel.backends.cuda.executor import CUPY
from isokernel.codegen import C_EXPR
from isokernel.deploy import COST
from isokernel.ir import EVAL, SHAPE, Op
from isokernel.ir.eval import NO_EVAL
from isokernel.ir.ops import LAYOUT, REGION, TRANSFORM_ONLY
from isokernel.transforms.jvp import JVP, NO_JVP, ZERO_TANGENT
from isokernel.transforms.transpose import TRANSPOSABLE, TRANSPOSE
from isokernel.transforms.vmap import BATCH, NO_BATCH

# leaves have no rule; the matrix product always runs whole by the reference;
# transform-only ops are stripped by jit before any strategy sees them
NOT_ELEMENTWISE = frozenset({Op.INPUT, Op.CONST, Op.DOT_GENERAL}) | TRANSFORM_ONLY

TABLES = {
    "SHAPE": (SHAPE, frozenset()),
    "EVAL": (EVAL, NO_EVAL),
    "COST": (COST, TRANSFORM_ONLY),  # stripped by jit before costing
    # every differentiable op; zero-tangent ops and leaves are exempt
    "JVP": (JVP, ZERO_TANGENT | NO_JVP),
    # linear ops only: everything that is not (linear in some operand) is exempt
    "TRANSPOSE": (TRANSPOSE, frozenset(Op) - TRANSPOSABLE),
    "BATCH": (BATCH, NO_BATCH),
    # threads: views run by EVAL itself, everything else into scratch; fused
    # forms are unfused before tiling (threads has no kernels for them)
    "INTO": (INTO, NOT_ELEMENTWISE | REGION | (LAYOUT - {Op.PAD, Op.CONCATENATE})),
    # C: layout ops only rename elements (the emitter applies EVAL to names);
    # fused forms are unfused, their bodies inlined, before emission
    # the GPU strategies' rules outside fused kernels: every computing op
    "CUPY": (CUPY, frozenset({Op.INPUT, Op.CONST}) | TRANSFORM_ONLY),
    "C_EXPR": (C_EXPR, NOT_ELEMENTWISE | REGION | LAYOUT),
}


def test_every_table_covers_every_op():
    missing = {
        name: sorted(op.value for op in Op if op not in table and op not in exempt)
        for name, (table, exempt) in TABLES.items()
    }
    assert missing == {name: [] for name in TABLES}


def test_reference_has_a_capsule_per_computing_op():
    leaves = {Op.INPUT, Op.CONST} | TRANSFORM_ONLY
    assert [op.value for op in Op if op not in leaves and lookup(op, "numpy") is None] == []


def test_exemptions_are_real():
    for name, (table, exempt) in TABLES.items():
        assert not (exempt & set(table)), f"{name} exempts ops it covers"


def test_only_linear_ops_have_transpose_rules():
    assert set(TRANSPOSE) == set(TRANSPOSABLE)


def test_numerical_contract_ops_are_in_the_tables():
    """The ops portable numerics, tables and fused forms added: in every
    table, except that the CPU strategies unfuse a fused form before tiling
    or emitting C; logb is piecewise constant (a zero tangent); of the five
    only ldexp is linear (in x), so only it transposes."""
    added = {Op.LDEXP, Op.LOGB, Op.COPYSIGN, Op.TABLE_LOOKUP, Op.FUSED}
    allowed = {"INTO": {Op.FUSED}, "C_EXPR": {Op.FUSED}, "JVP": {Op.LOGB},
               "TRANSPOSE": added - {Op.LDEXP}}
    for name, (table, _) in TABLES.items():
        assert added - set(table) == allowed.get(name, set()), name
