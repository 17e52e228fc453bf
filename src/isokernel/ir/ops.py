"""The closed set of primitive operations.

Everything a model computes is one of these ops. Convenience functions of the
frontend (``sigmoid``, ``mean``, ``hypot``, ``clip`` ...) are compositions of
them, so every interpretation (evaluation, shapes, derivatives, batching, code
generation, cost) needs exactly one rule per op here and no more.
"""

from __future__ import annotations

from enum import Enum


class Op(Enum):
    # leaves
    INPUT = "input"
    CONST = "const"
    # elementwise, one operand
    NEG = "neg"
    ABS = "abs"
    SIGN = "sign"
    NOT = "not"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    TRUNC = "trunc"
    SQRT = "sqrt"
    CBRT = "cbrt"
    EXP = "exp"
    EXP2 = "exp2"
    EXPM1 = "expm1"
    LOG = "log"
    LOG2 = "log2"
    LOG10 = "log10"
    LOG1P = "log1p"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "arcsin"
    ACOS = "arccos"
    ATAN = "arctan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ASINH = "arcsinh"
    ACOSH = "arccosh"
    ATANH = "arctanh"
    CAST = "cast"
    # complex numbers: the parts of a complex value, and its conjugate
    REAL = "real"
    IMAG = "imag"
    CONJ = "conj"
    # elementwise, two operands of one shape
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    MAX = "max"
    MIN = "min"
    ATAN2 = "arctan2"
    FLOORDIV = "floordiv"
    REM = "rem"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHIFT_LEFT = "shift_left"
    SHIFT_RIGHT = "shift_right"
    # a complex value from its real and imaginary parts
    COMPLEX = "complex"
    # elementwise, three operands
    SELECT = "select"
    # reductions over static axes
    REDUCE_SUM = "reduce_sum"
    REDUCE_PROD = "reduce_prod"
    REDUCE_MAX = "reduce_max"
    REDUCE_MIN = "reduce_min"
    # layout
    RESHAPE = "reshape"
    BROADCAST = "broadcast"
    TRANSPOSE = "transpose"
    SLICE = "slice"
    PAD = "pad"
    REV = "rev"
    CONCATENATE = "concatenate"
    # contraction
    DOT_GENERAL = "dot_general"
    # dense linear algebra over the last two axes, batched over the leading ones
    LU = "lu"
    TRIANGULAR_SOLVE = "triangular_solve"
    CHOLESKY = "cholesky"
    QR = "qr"
    EIGH = "eigh"
    SVD = "svd"
    # data-dependent indexing along axis 0 (see INDEXING)
    GATHER = "gather"
    SCATTER = "scatter"
    # a stable sort of several arrays along one axis by the first ``num_keys``
    SORT = "sort"
    # discrete Fourier transforms over the trailing axes (see SPECTRAL)
    FFT = "fft"
    # transform markers (see TRANSFORM_ONLY)
    STOP_GRADIENT = "stop_gradient"
    CUSTOM_JVP_CALL = "custom_jvp_call"
    CUSTOM_VJP_CALL = "custom_vjp_call"
    CUSTOM_LIN = "custom_lin"
    # exact exponent and sign manipulation (portable numerics build on these)
    LDEXP = "ldexp"
    LOGB = "logb"
    COPYSIGN = "copysign"
    # vocabulary extension: piecewise-linear look-up into a named table
    TABLE_LOOKUP = "table_lookup"
    # a named fused form: one node standing for the composition in its body
    FUSED = "fused"
    # result ``index`` of a node with several results (a region node)
    GET = "get"
    # structured control flow (``isokernel.control``): branches, loops and
    # rematerialization, each a region node carrying its bodies
    COND = "cond"
    WHILE = "while"
    WHILE_LIN = "while_lin"
    WHILE_VJP = "while_vjp"
    SCAN = "scan"
    CHECKPOINT = "checkpoint"


LEAF = frozenset({Op.INPUT, Op.CONST})

TRANSCENDENTAL = frozenset({
    Op.CBRT, Op.EXP, Op.EXP2, Op.EXPM1, Op.LOG, Op.LOG2, Op.LOG10, Op.LOG1P,
    Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.TANH,
    Op.ASINH, Op.ACOSH, Op.ATANH, Op.POW, Op.ATAN2,
})

UNARY = frozenset({
    Op.NEG, Op.ABS, Op.SIGN, Op.NOT, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC,
    Op.SQRT, Op.CBRT, Op.EXP, Op.EXP2, Op.EXPM1, Op.LOG, Op.LOG2, Op.LOG10,
    Op.LOG1P, Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH,
    Op.COSH, Op.TANH, Op.ASINH, Op.ACOSH, Op.ATANH, Op.CAST, Op.LOGB,
    Op.REAL, Op.IMAG, Op.CONJ,
})

COMPARE = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})

# NumPy's ``&``, ``|``, ``^``, ``~``, ``<<`` and ``>>``: bitwise on integers (two's
# complement; ``>>`` arithmetic), and ``and``/``or``/``xor``/``not`` on bools, where
# they are the logical ops (LOGICAL). A shift by a count outside [0, bits) gives 0
# (``<<``) or the sign fill (``>>``), as NumPy's loops define it.
BITWISE = frozenset({Op.AND, Op.OR, Op.XOR, Op.NOT, Op.SHIFT_LEFT, Op.SHIFT_RIGHT})

LOGICAL = frozenset({Op.AND, Op.OR, Op.XOR, Op.NOT})

BINARY = frozenset({
    Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAX, Op.MIN, Op.ATAN2,
    Op.FLOORDIV, Op.REM, Op.AND, Op.OR, Op.XOR, Op.SHIFT_LEFT, Op.SHIFT_RIGHT,
    Op.LDEXP, Op.COPYSIGN, Op.COMPLEX,
}) | COMPARE

# What complex values may flow through (``dtypes.COMPLEX``): the ops NumPy
# defines on them. ``abs``, ``real`` and ``imag`` of a complex value are
# real; ``complex`` makes one from two reals. Every other op refuses complex
# operands with the fix (take a part, or ``abs``, first).
COMPLEX_OPS = frozenset({
    Op.NEG, Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.SQRT, Op.EXP, Op.EXPM1, Op.LOG,
    Op.LOG1P, Op.LOG10, Op.LOG2, Op.SIN, Op.COS, Op.TAN, Op.SINH, Op.COSH, Op.TANH,
    Op.EQ, Op.NE, Op.SELECT, Op.CAST, Op.ABS, Op.REAL, Op.IMAG, Op.CONJ,
})

ELEMENTWISE = UNARY | BINARY | frozenset({Op.SELECT})

REDUCE = frozenset({Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX, Op.REDUCE_MIN})

LAYOUT = frozenset({
    Op.RESHAPE, Op.BROADCAST, Op.TRANSPOSE, Op.SLICE, Op.PAD, Op.REV, Op.CONCATENATE,
})

# Dense factorizations and solves over the last two axes (``isokernel.linalg``
# composes the rest): LAPACK's meaning, computed whole by NumPy on the CPU, by
# cuSOLVER/cuBLAS through CuPy on a GPU. ``lu`` has three results (the packed
# factors, getrf's row interchanges and the permutation they make), ``qr``
# two (q, r), ``eigh`` two (eigenvalues ascending, eigenvectors), ``svd``
# three (u, s descending, vh).
LINALG = frozenset({Op.LU, Op.TRIANGULAR_SOLVE, Op.CHOLESKY, Op.QR, Op.EIGH, Op.SVD})

# Data-dependent indexing along axis 0 of the operand (``isokernel.numpy``
# moves any other axis there, and flattens several indexed axes into one):
# ``gather(x, idx)`` is ``x[idx]``, of shape idx.shape + x.shape[1:];
# ``scatter(x, idx, u, combine=)`` is x with each row ``u[p]`` combined into
# row ``idx[p]`` (combine one of SCATTER_COMBINE), the updates applied in the
# row-major order of ``idx``: a repeated index ``set`` keeps the last, ``add``
# sums in that order (the same bits everywhere). The indices are integers in
# [0, n): the frontend applies the user's out-of-bounds mode (clip, fill,
# drop, wrap) first; the rules clamp anything else.
INDEXING = frozenset({Op.GATHER, Op.SCATTER})

# ``sort(*xs, axis=, num_keys=)``: the operands (one shape) reordered along
# ``axis`` by a stable sort on the first ``num_keys`` of them, the first key
# primary, in NumPy's order (NaN last; -0.0 and 0.0 equal, kept in order);
# one result per operand. ``argsort`` sorts an iota along with the keys.
SORTING = frozenset({Op.SORT})

# ``fft(x, kind=, lengths=)``: NumPy's transforms over the last
# ``len(lengths)`` axes, with NumPy's default normalization ("backward": the
# inverse transforms divide by the number of points): ``kind`` "fft" and
# "ifft" (complex to complex), "rfft" (real to complex, the last axis n to
# n // 2 + 1) and "irfft" (back, ``lengths`` the real result's sizes).
SPECTRAL = frozenset({Op.FFT})
FFT_KINDS = ("fft", "ifft", "rfft", "irfft")
SCATTER_COMBINE = ("set", "add", "mul", "min", "max")

# Pointwise like ELEMENTWISE, but each reads a named table (kept apart: a
# strategy needs the table's data, not just an expression, to run one).
TABLE = frozenset({Op.TABLE_LOOKUP})

# Region primitives: nodes that carry sub-graphs (``graph.subgraphs``). Each
# keeps all of its rules in one module that registers them into the tables
# (``transforms.regions``): fused forms in transforms/fusion.py, the
# custom-derivative calls and the linear map of a custom_vjp rule in
# transforms/custom.py, control flow in control/.
REGION = frozenset({Op.FUSED, Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL, Op.CUSTOM_LIN,
                    Op.COND, Op.WHILE, Op.WHILE_LIN, Op.WHILE_VJP, Op.SCAN, Op.CHECKPOINT})

# The control-flow regions (``isokernel.control``).
CONTROL = frozenset({Op.COND, Op.WHILE, Op.WHILE_LIN, Op.WHILE_VJP, Op.SCAN, Op.CHECKPOINT})

# Reads one result of a node with several results (no computation of its own).
PROJECTION = frozenset({Op.GET})

# Ops that are linear in (all of) their floating-point operands; SELECT and
# MUL/DIV are linear in some operands only and say so in their rules.
LINEAR = LAYOUT | frozenset({Op.NEG, Op.ADD, Op.SUB, Op.REDUCE_SUM, Op.CAST, Op.REAL,
                             Op.IMAG, Op.CONJ, Op.COMPLEX, Op.FFT})

# Ops that only the transforms interpret: a stop-gradient marker (identity),
# calls of functions with user-defined derivatives (their sub-graphs ride in
# the attributes) and the linear map of a custom_vjp rule. jit removes them
# with ``transforms.prepare_for_execution`` before planning, so strategies,
# code generators and cost tables never see them.
TRANSFORM_ONLY = frozenset({Op.STOP_GRADIENT, Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL,
                            Op.CUSTOM_LIN})
