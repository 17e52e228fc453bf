"""Hypothesis-generated float64 programs of smooth ops on safe domains:
forward mode against central finite differences, and reverse mode by the
inner-product identity <c, J t> = <Jᵀ c, t>. The generator follows
test_random_programs.py, restricted to ops that are smooth where they are
evaluated (domains kept safe by construction, e.g. log(1 + x²))."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp

UNARY = {
    "sin": inp.sin, "cos": inp.cos, "tanh": inp.tanh, "arctan": inp.arctan,
    "arcsinh": inp.arcsinh, "negative": inp.negative, "square": inp.square,
    "abs": inp.abs,
    "exp": lambda x: inp.exp(inp.tanh(x)),
    "exp2": lambda x: inp.exp2(inp.sin(x)),
    "expm1": lambda x: inp.expm1(inp.cos(x)),
    "log": lambda x: inp.log(x * x + 1.0),
    "log2": lambda x: inp.log2(x * x + 0.5),
    "log10": lambda x: inp.log10(x * x + 2.0),
    "log1p": lambda x: inp.log1p(x * x),
    "sqrt": lambda x: inp.sqrt(x * x + 0.5),
    "cbrt": lambda x: inp.cbrt(x * x + 1.0),
    "tan": lambda x: inp.tan(inp.tanh(x)),
    "arcsin": lambda x: inp.arcsin(0.5 * inp.tanh(x)),
    "arccos": lambda x: inp.arccos(0.5 * inp.sin(x)),
    "arccosh": lambda x: inp.arccosh(x * x + 1.5),
    "arctanh": lambda x: inp.arctanh(0.5 * inp.tanh(x)),
    "sinh": lambda x: inp.sinh(inp.tanh(x)),
    "cosh": lambda x: inp.cosh(inp.sin(x)),
    "reciprocal": lambda x: 1.0 / (x * x + 1.0),
    "pow_scalar": lambda x: (x * x + 1.0) ** 1.5,
}
BINARY = {
    "add": inp.add, "subtract": inp.subtract, "multiply": lambda x, y: x * inp.tanh(y),
    "divide": lambda x, y: x / (y * y + 1.0),
    "power": lambda x, y: inp.power(x * x + 1.0, inp.sin(y)),
    "arctan2": lambda x, y: inp.arctan2(x, y * y + 0.5),
    "hypot": lambda x, y: inp.hypot(x, y + 3.0),
    "maximum": inp.maximum, "minimum": inp.minimum,
    "where": lambda x, y: inp.where(x > y, x * y, inp.sin(y)),
}
REDUCE = {"sum": inp.sum, "mean": inp.mean, "prod": inp.prod, "max": inp.max, "min": inp.min}
LAYOUT = ["flip", "transpose2", "concat_slice", "matmul", "stride", "pad"]
KINDS = sorted(UNARY) + sorted(BINARY) + sorted(REDUCE) + LAYOUT


@st.composite
def programs(draw):
    n, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    shapes = [(n, m), (m,), (1, m), (n, 1), ()]
    n_inputs = draw(st.integers(1, 3))
    in_shapes = [(n, m)] + [draw(st.sampled_from(shapes)) for _ in range(n_inputs - 1)]
    steps = [(draw(st.sampled_from(KINDS)), draw(st.integers(0, 99)), draw(st.integers(0, 99)))
             for _ in range(draw(st.integers(1, 8)))]
    return in_shapes, steps, draw(st.integers(0, 2**32 - 1))


def run(steps, xs):
    """The last value, and a scalar every step reaches (so no rule goes
    unchecked because its result was dead)."""
    pool = list(xs)
    for kind, a, b in steps:
        pool.append(step(kind, pool[a % len(pool)], pool[b % len(pool)]))
    total = pool[len(xs)] if len(pool) > len(xs) else pool[0]
    total = inp.sum(total)
    for v in pool[len(xs) + 1:]:
        total = total + inp.sum(v)
    return pool[-1], total


def step(kind, x, y):
    if kind in UNARY:
        return UNARY[kind](x)
    if kind in BINARY:
        return BINARY[kind](x, y)
    if kind in REDUCE:
        return REDUCE[kind](x, axis=-1, keepdims=True) if np.ndim(x) else x
    return layout(kind, x)


def layout(kind, x):
    if np.ndim(x) == 0:
        return x * 1.5
    if kind == "flip":
        return x[::-1]
    if kind == "transpose2":
        return inp.transpose(inp.transpose(x) * 2.0)
    if kind == "concat_slice":
        return inp.concatenate([x, inp.sin(x)], axis=-1)[..., 1:np.shape(x)[-1] + 1]
    if kind == "stride":
        return inp.concatenate([x[..., ::2], x[..., 1::2]], axis=-1)
    if kind == "pad":
        widths = [(0, 0)] * (np.ndim(x) - 1) + [(1, 2)]
        return inp.pad(x, widths, constant_values=0.25)[..., 1:-2]
    if np.ndim(x) == 1:
        return x * inp.dot(x, x)
    return inp.tanh(inp.matmul(inp.matmul(x, inp.transpose(x)), x))


def make(in_shapes, seed):
    rng = np.random.default_rng(seed)
    primals = [rng.uniform(-2, 2, s) for s in in_shapes]
    tangents = [rng.normal(size=s) for s in in_shapes]
    return primals, tangents, rng


@settings(max_examples=150)
@given(programs())
def test_jvp_matches_central_differences(program):
    in_shapes, steps, seed = program
    primals, tangents, _ = make(in_shapes, seed)

    def f(*xs):
        return run(steps, xs)
    out, tangent = ik.jvp(f, primals, tangents)
    h = 1e-6
    plus = f(*(p + h * t for p, t in zip(primals, tangents)))
    minus = f(*(p - h * t for p, t in zip(primals, tangents)))
    for o, t, a, b in zip(out, tangent, plus, minus):
        assume(np.all(np.isfinite(o)) and np.max(np.abs(o), initial=0) < 1e6)
        fd = (np.asarray(a) - np.asarray(b)) / (2 * h)
        scale = 1.0 + np.max(np.abs(fd), initial=0) + 1e-3 * np.max(np.abs(o), initial=0)
        np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-6 * scale)


@settings(max_examples=150)
@given(programs())
def test_vjp_inner_product_identity(program):
    in_shapes, steps, seed = program
    primals, tangents, rng = make(in_shapes, seed)

    def f(*xs):
        return run(steps, xs)
    _, tangent = ik.jvp(f, primals, tangents)
    out, pull = ik.vjp(f, *primals)
    assume(all(np.all(np.isfinite(o)) for o in out))
    cts = tuple(rng.normal(size=np.shape(o)) for o in out)
    back = pull(cts)
    lhs = sum(np.sum(c * t) for c, t in zip(cts, tangent))
    rhs = sum(np.sum(b * t) for b, t in zip(back, tangents))
    scale = sum(np.sum(np.abs(c * t)) for c, t in zip(cts, tangent)) + \
        sum(np.sum(np.abs(b * t)) for b, t in zip(back, tangents))
    assert abs(lhs - rhs) <= 1e-12 * scale + 1e-300


def test_generator_covers_every_smooth_kind():
    assert len(KINDS) >= 40
