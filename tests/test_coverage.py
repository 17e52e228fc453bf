"""Every op-keyed table of the code base covers the ops it must, and no such
table escapes this test: a module-level dict keyed by ``Op`` anywhere in
isokernel must be listed in ``TABLES`` with the ops it covers."""

import importlib
import pkgutil
import warnings

import isokernel
from isokernel.backends.capsules import lookup
from isokernel.backends.cpu.threads import NOT_IN_TILES, VIEW_OPS
from isokernel.ir import Op
from isokernel.ir.eval import NO_EVAL
from isokernel.ir.ops import (
    BINARY,
    COMPLEX_OPS,
    CONTROL,
    ELEMENTWISE,
    LAYOUT,
    LEAF,
    LINALG,
    PROJECTION,
    REDUCE,
    REGION,
    TABLE,
    TRANSCENDENTAL,
    TRANSFORM_ONLY,
    UNARY,
)
from isokernel.transforms.jvp import NO_JVP, ZERO_TANGENT
from isokernel.transforms.transpose import TRANSPOSABLE
from isokernel.transforms.vmap import NO_BATCH

ALL = frozenset(Op)
EXACT_OPS = frozenset({Op.LDEXP, Op.LOGB, Op.COPYSIGN, Op.TABLE_LOOKUP})
# what reaches no strategy on its own: leaves, transform-only ops (jit lowers
# them first), region nodes and the gets that read their results (strategies
# run a fused form's body; a node with several results runs whole)
NOT_COMPUTED = LEAF | TRANSFORM_ONLY | REGION | PROJECTION
# the control flow that runs inside row regions (the loops' reverse passes run whole)
IN_REGIONS = frozenset({Op.COND, Op.WHILE, Op.SCAN, Op.CHECKPOINT})

TABLES = {
    # (module, name): (how, ops). "covers": every op of ``ops`` has an entry;
    # "exactly": the keys are ``ops``; "within": a partial table whose keys
    # stay inside ``ops`` (rules or texts for a few named ops).
    ("isokernel.ir.shapes", "SHAPE"): ("covers", ALL),
    ("isokernel.ir.eval", "EVAL"): ("covers", ALL - NO_EVAL),
    ("isokernel.ir.eval", "EVAL_XP"): ("exactly", LAYOUT | CONTROL | {Op.DOT_GENERAL}),
    ("isokernel.transforms.jvp", "JVP"): ("covers", ALL - ZERO_TANGENT - NO_JVP),
    ("isokernel.transforms.transpose", "TRANSPOSE"): ("exactly", frozenset(TRANSPOSABLE)),
    ("isokernel.transforms.vmap", "BATCH"): ("covers", ALL - NO_BATCH),
    ("isokernel.transforms.simplify", "LOWER"): ("exactly", TRANSFORM_ONLY | {Op.CUSTOM_LIN}),
    ("isokernel.transforms.regions", "REGION_RULES"): ("exactly", REGION),
    ("isokernel.transforms.linearize", "PARTIAL_EVAL"): ("within", REGION),
    ("isokernel.record.portable", "LOWERINGS"): ("exactly", TRANSCENDENTAL),
    ("isokernel.record.complex_parts", "UNARY"): ("within", COMPLEX_OPS & UNARY),
    ("isokernel.record.complex_parts", "BINARY"): ("within", COMPLEX_OPS & BINARY),
    ("isokernel.codegen.c_expr", "C_EXPR"): ("exactly", ELEMENTWISE | TABLE | REDUCE),
    ("isokernel.codegen.c_expr", "MATH"): ("exactly", TRANSCENDENTAL | {Op.SQRT, Op.ROUND}),
    ("isokernel.codegen.c_expr", "REDUCE_IDENTITY"): ("exactly",
                                                      {Op.REDUCE_SUM, Op.REDUCE_PROD}),
    ("isokernel.codegen.pixel", "ROW_RULES"): ("covers", ALL - NOT_COMPUTED - {Op.DOT_GENERAL}
                                              - LINALG | IN_REGIONS | PROJECTION),
    ("isokernel.codegen.pixel", "_REGION_ROWS"): ("exactly", IN_REGIONS),
    ("isokernel.codegen.emit", "_LOWERINGS"): ("exactly", IN_REGIONS),
    ("isokernel.backends.cpu.native", "CONTROL_KINDS"): ("exactly", IN_REGIONS | PROJECTION),
    ("isokernel.backends.cuda.megakernel", "IN_REGION"): ("exactly", IN_REGIONS | PROJECTION),
    ("isokernel.backends.cuda.capsules", "CONTROL_NAMES"): ("exactly", CONTROL | PROJECTION),
    ("isokernel.deploy.cost", "COST"): ("covers", ALL - TRANSFORM_ONLY - REGION),
    ("isokernel.deploy.cost", "_WEIGHT"): ("covers", TRANSCENDENTAL),
    ("isokernel.backends.numerics", "NATIVE_ULP_BOUND"): ("exactly", TRANSCENDENTAL),
    ("isokernel.backends.numerics", "CUDA_DOC_ULP"): ("exactly", TRANSCENDENTAL),
    ("isokernel.backends.cuda.capsules", "CUDA_ULP_BOUND"): ("exactly", TRANSCENDENTAL),
    ("isokernel.backends.cpu.native", "EXACT"): ("exactly", EXACT_OPS),
    ("isokernel.backends.cuda.capsules", "EXACT"): ("exactly", EXACT_OPS),
    ("isokernel.backends.reductions", "_COMBINE"): ("exactly", REDUCE),
    # threads: views run by EVAL itself, ops that run whole are named in NOT_IN_TILES
    ("isokernel.backends.cpu.threads", "INTO"): (
        "covers", ALL - NOT_COMPUTED - VIEW_OPS - NOT_IN_TILES),
    ("isokernel.backends.cpu.threads", "LOOP_CAPSULE_NAMES"): ("within", ELEMENTWISE | VIEW_OPS),
    ("isokernel.backends.cuda.executor", "_LINALG_NAMES"): ("exactly", LINALG),
    ("isokernel.backends.cuda.executor", "CUPY"): ("covers", ALL - NOT_COMPUTED | {Op.FUSED}
                                                   | CONTROL | PROJECTION),
    ("isokernel.backends.cpu.numpy_rules", "_NAMES"): ("within", ALL - LEAF),
    ("isokernel.backends.cpu.loops", "NO_LOOP_DTYPES"): ("within", ELEMENTWISE),
    ("isokernel.pipeline.blocks", "_WHY"): ("within", ALL - LEAF),
    ("isokernel.pipeline.blocks", "_RESIZE"): ("within", ALL),
    ("isokernel.control.report", "_TEXT"): ("within", CONTROL),
}


def _table(module: str, name: str) -> dict:
    return getattr(importlib.import_module(module), name)


def _op_tables() -> dict[int, str]:
    """Every module-level dict keyed by ops in isokernel, by identity, with
    the first module that holds it (re-exports are the same object)."""
    found: dict[int, str] = {}
    for info in sorted(pkgutil.walk_packages(isokernel.__path__, "isokernel."),
                       key=lambda i: i.name):
        with warnings.catch_warnings():  # the moved modules' deprecated aliases warn
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, dict) and value and all(isinstance(k, Op) for k in value):
                found.setdefault(id(value), f"{info.name}.{name}")
    return found


def test_every_op_keyed_table_is_listed_here():
    listed = {id(_table(*key)) for key in TABLES}
    unlisted = sorted(name for key, name in _op_tables().items() if key not in listed)
    assert unlisted == [], "add these tables to TABLES with the ops they must cover"


def test_every_table_covers_what_it_must():
    problems = {}
    for (module, name), (how, ops) in TABLES.items():
        keys = set(_table(module, name))
        missing = set(ops) - keys if how in ("covers", "exactly") else set()
        extra = keys - set(ops) if how in ("exactly", "within") else set()
        if missing or extra:
            problems[f"{module}.{name}"] = {"missing": sorted(o.value for o in missing),
                                            "extra": sorted(o.value for o in extra)}
    assert problems == {}


def test_reference_has_a_capsule_per_computing_op():
    leaves = LEAF | TRANSFORM_ONLY
    assert [op.value for op in Op if op not in leaves and lookup(op, "numpy") is None] == []


def test_only_linear_ops_and_gets_have_transpose_rules():
    transpose = _table("isokernel.transforms.transpose", "TRANSPOSE")
    assert set(transpose) == set(TRANSPOSABLE)
    assert PROJECTION <= TRANSPOSABLE and Op.CUSTOM_LIN in TRANSPOSABLE


def test_numerical_contract_ops_are_in_the_tables():
    """The ops portable numerics, tables and fused forms added are in every
    table that covers computing ops, except that the CPU strategies unfuse a
    fused form before tiling or emitting C; logb is piecewise constant (a
    zero tangent); of the five only ldexp is linear (in x), so only it
    transposes."""
    added = {Op.LDEXP, Op.LOGB, Op.COPYSIGN, Op.TABLE_LOOKUP, Op.FUSED}
    allowed = {"INTO": {Op.FUSED}, "C_EXPR": {Op.FUSED}, "JVP": {Op.LOGB},
               "TRANSPOSE": added - {Op.LDEXP}, "ROW_RULES": {Op.FUSED},
               "COST": {Op.FUSED}}
    for name, module in (("SHAPE", "ir.shapes"), ("EVAL", "ir.eval"), ("JVP", "transforms.jvp"),
                         ("TRANSPOSE", "transforms.transpose"), ("BATCH", "transforms.vmap"),
                         ("INTO", "backends.cpu.threads"), ("C_EXPR", "codegen.c_expr"),
                         ("CUPY", "backends.cuda.executor"), ("ROW_RULES", "codegen.pixel"),
                         ("COST", "deploy.cost")):
        table = _table(f"isokernel.{module}", name)
        assert added - set(table) == allowed.get(name, set()), name
