"""Hypothesis-generated control-flow programs: nested ``cond``, ``switch``,
``fori_loop`` (static and traced bounds), ``scan`` (forward and reversed)
and ``while_loop`` (a counter that guarantees termination, sometimes with a
data-dependent part that holds throughout), ``checkpoint``; a carry of 1-3
arrays; bodies that capture an outer traced value (z) and an outer NumPy
array; elementwise steps from a small op set whose domains are safe by
construction (every step maps values of magnitude <= 2 to values of
magnitude <= 2, with derivatives of magnitude <= 1 or so).

Each program is interpreted twice: with isokernel's control flow, and
unrolled into Python loops and branches (a branch on a traced value there is
an ``inp.where`` of both sides: these programs compute no NaN or inf, so the
values agree bit for bit and the gradients to rounding).

- Every CPU strategy equals the reference under its contract: bit for bit
  in native numerics on programs of IEEE basic ops, and in portable numerics
  on programs with transcendentals (native's per-op ulp bound does not bound
  a composition, which can amplify it: test_native.py measures that bound op
  by op, test_control_flow.py checks it where nothing is fed back).
- ``jit(grad)``, ``jacfwd``, ``jacrev``, ``vmap(grad)`` and ``hessian`` of a
  scalar loss match central differences and the unrolled program's
  derivatives (tolerances below).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends.parity import bit_identical
from isokernel.ir import walk
from isokernel.ir.ops import TRANSCENDENTAL
from isokernel.record import Tracer

SEQ = np.linspace(-0.9, 0.8, 4 * 4).reshape(4, 4)  # a scan's steps: SEQ[:trips, :n]
OUTER = np.array([1.0, -0.5, 2.0, 0.25])  # an outer NumPy array the bodies close over
N_BOUND = np.int64(2)  # the bound of a fori_loop whose upper bound is an argument
MAX_DEPTH = 2
MARGIN = 1e-3  # a branch's predicate stays this far from flipping (central differences)

H = 1e-5
FD_TOL = 1e-6
UNROLLED_RTOL = 1e-11
# Central differences with step H: truncation H**2 |f'''| / 6 ~ 2e-11 |f'''|, rounding
# eps |f| / H ~ 2e-11 |f|; FD_TOL (relative to 1 + the largest derivative) leaves four
# orders of magnitude for the |f|, |f'''| < 100 of these bounded programs.
# Against the unrolled program: the same ops, but sums in another order (a captured
# value's cotangent over the steps, a transposed view of stacked ys, the zero of an
# untaken where side): a sum of m terms reordered moves by m eps sum|terms|; with
# m <= 64 terms of at most ~50 times the result: UNROLLED_RTOL.


class Env(NamedTuple):
    unrolled: bool
    z: Any  # an outer traced value (or array) the bodies capture
    outer: np.ndarray
    n: Any  # the upper bound of a "bounded" fori_loop
    margins: list | None = None
    counter: Any = None  # the innermost loop's step (int64)
    u: Any = None  # the innermost scan's step of SEQ


OPS = {
    "mix": lambda a, b, env: 0.5 * a + 0.25 * b,
    "mul": lambda a, b, env: a * b * 0.25,
    "div": lambda a, b, env: a / (1.0 + b * b),
    "sqrt": lambda a, b, env: inp.sqrt(a * a + 1.0) - 0.5,
    "capture": lambda a, b, env: a * 0.5 + env.z * 0.5,
    "outer": lambda a, b, env: a * 0.75 + env.outer * 0.1,
    "sin": lambda a, b, env: inp.sin(0.5 * (a + b)),
    "tanh": lambda a, b, env: inp.tanh(a),
    "exp": lambda a, b, env: inp.exp(-a * a),
    "log": lambda a, b, env: inp.log(1.0 + a * a),
}
STEP_OP = "step"  # a scan body's own step: a * 0.75 + u * 0.25
CONTROL_KINDS = ["fori", "scan", "while", "bounded", "cond", "checkpoint"]


# --- the generator ------------------------------------------------------------------------

@st.composite
def statements(draw, depth: int, in_loop: bool, in_scan: bool):
    names = sorted(OPS) + ([STEP_OP] if in_scan else [])
    kinds = ["op"] * 3 + (CONTROL_KINDS + (["switch"] if in_loop else [])
                          if depth < MAX_DEPTH else [])
    found = []
    for k in range(draw(st.integers(1, 3))):
        # a program starts with a control form; bodies mix ops and forms
        kind = draw(st.sampled_from(CONTROL_KINDS if depth == 0 and k == 0 else kinds))
        if kind == "op":
            found.append(("op", draw(st.sampled_from(names)), draw(st.integers(0, 2)),
                          draw(st.integers(0, 2))))
        else:
            found.append(draw(_control(kind, depth, in_loop, in_scan)))
    return found


@st.composite
def _control(draw, kind: str, depth: int, in_loop: bool, in_scan: bool):
    inner = depth + 1
    trips = draw(st.integers(0, 3))
    if kind == "fori":
        return ("fori", trips, draw(statements(inner, True, in_scan)))
    if kind == "scan":
        return ("scan", trips, draw(st.booleans()), draw(statements(inner, True, True)))
    if kind == "while":
        return ("while", trips, draw(st.booleans()), draw(statements(inner, True, in_scan)))
    if kind == "bounded":
        return ("bounded", draw(statements(inner, True, in_scan)))
    if kind == "checkpoint":
        return ("checkpoint", draw(statements(inner, in_loop, in_scan)))
    if kind == "switch":
        return ("switch", [draw(statements(inner, in_loop, in_scan)) for _ in range(3)])
    preds = [("state", draw(st.integers(0, 2)), draw(st.sampled_from([-0.5, 0.0, 0.7])))]
    pred = draw(st.sampled_from(preds + ([("count",)] if in_loop else [])))
    return ("cond", pred, draw(statements(inner, in_loop, in_scan)),
            draw(statements(inner, in_loop, in_scan)))


@st.composite
def programs(draw):
    n, carries = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x, w = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
    return carries, draw(statements(0, False, False)), x, w


# --- the interpreter ----------------------------------------------------------------------

def run(stmts, state, env: Env) -> list:
    for s in stmts:
        state = RUN[s[0]](s, list(state), env)
    return list(state)


def _op(s, state, env):
    _, name, i, j = s
    a, b = state[i % len(state)], state[j % len(state)]
    state[i % len(state)] = a * 0.75 + env.u * 0.25 if name == STEP_OP else OPS[name](a, b, env)
    return state


def _body(stmts, env, **at):
    """A loop body over the carry as a tuple, with the loop's step in ``env``."""
    return lambda carry: tuple(run(stmts, carry, env._replace(**at)))


def _fori(s, state, env):
    _, trips, body = s
    return _counted(trips, body, state, env)


def _bounded(s, state, env):
    return _counted(env.n, s[1], state, env)


def _counted(bound, body, state, env):
    if env.unrolled:
        for t in range(int(bound)):
            state = run(body, state, env._replace(counter=np.int64(t)))
        return state

    def step(i, c):
        return _body(body, env, counter=i)(c)
    return list(ik.fori_loop(0, bound, step, tuple(state)))


def _scan(s, state, env):
    _, trips, reverse, body = s
    seq, counts = SEQ[:trips, :len(env.outer)], np.arange(trips, dtype=np.int64)
    if env.unrolled:
        ys = [None] * trips
        for t in (reversed(range(trips)) if reverse else range(trips)):
            state = run(body, state, env._replace(counter=counts[t], u=seq[t]))
            ys[t] = state[0]
    else:
        def step(c, xs):
            c = _body(body, env, counter=xs[0], u=xs[1])(c)
            return c, c[0]
        carry, ys = ik.scan(step, tuple(state), (counts, seq), reverse=reverse)
        state = list(carry)
    if trips:
        state[0] = state[0] * 0.5 + ys[trips - 1] * 0.5
    return state


def _while(s, state, env):
    _, trips, data, body = s
    if env.unrolled:
        for t in range(trips):
            if data:
                _margin(env, 10.0 - inp.max(inp.abs(state[0])))
            state = run(body, state, env._replace(counter=np.int64(t)))
        return state

    def test(c):
        more = c[0] < trips
        return inp.logical_and(more, inp.max(inp.abs(c[1][0])) < 10.0) if data else more

    def step(c):
        return c[0] + 1, _body(body, env, counter=c[0])(c[1])
    return list(ik.while_loop(test, step, (np.int64(0), tuple(state)))[1])


def _margin(env, value) -> None:
    if env.margins is not None and not isinstance(value, Tracer):
        env.margins.append(abs(float(value)))


def _cond(s, state, env):
    _, pred, if_true, if_false = s
    if pred[0] == "count":
        p = env.counter % 2 == 0
    else:
        value = inp.sum(state[pred[1] % len(state)]) - pred[2]
        _margin(env, value)
        p = value > 0.0
    if not env.unrolled:
        return list(ik.cond(p, lambda *c: _body(if_true, env)(c),
                            lambda *c: _body(if_false, env)(c), *state))
    if not isinstance(p, Tracer):
        return run(if_true if bool(p) else if_false, state, env)
    both = run(if_true, state, env), run(if_false, state, env)
    return [inp.where(p, a, b) for a, b in zip(*both)]


def _switch(s, state, env):
    index = env.counter - 1  # -1 clamps to the first branch, 2 picks the last
    if env.unrolled:
        return run(s[1][int(np.clip(index, 0, 2))], state, env)
    branches = [lambda *c, b=b: _body(b, env)(c) for b in s[1]]
    return list(ik.switch(index, branches, *state))


def _checkpoint(s, state, env):
    if env.unrolled:
        return run(s[1], state, env)
    return list(ik.checkpoint(lambda *c: _body(s[1], env)(c))(*state))


RUN = {"op": _op, "fori": _fori, "bounded": _bounded, "scan": _scan, "while": _while,
       "cond": _cond, "switch": _switch, "checkpoint": _checkpoint}


def final_state(program, x, w, n, unrolled: bool = False, margins: list | None = None):
    carries, stmts = program
    env = Env(unrolled, x * 0.5 + w * 0.25, OUTER[:x.shape[0]], n, margins)
    init = [x, x * 0.5 + w, w - x * 0.25][:carries]
    return tuple(run(stmts, init, env))


def loss(state):
    total = inp.sum(state[0])
    for j, s in enumerate(state[1:], 2):
        total = total + inp.sum(s) * float(j)
    return total


# --- checks -------------------------------------------------------------------------------

def assert_same_bits(got, want, what: str) -> None:
    got_leaves, want_leaves = ik.tree_flatten(got)[0], ik.tree_flatten(want)[0]
    assert len(got_leaves) == len(want_leaves), what
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        assert bit_identical(g, w), f"{what}: leaf {k}: {np.asarray(g)!r} != {np.asarray(w)!r}"


def assert_near(got, want, rtol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    allowed = rtol * (1.0 + float(np.max(np.abs(want))))
    err = float(np.max(np.abs(got - want)))
    assert got.shape == want.shape and err <= allowed, \
        f"{what}: {got} vs {want}: {err:.3g} > {allowed:.3g}"


def central_differences(f, x) -> np.ndarray:
    out = np.empty(x.shape)
    for j in range(x.shape[0]):
        step = np.zeros_like(x)
        step[j] = H
        out[j] = (f(x + step) - f(x - step)) / (2 * H)
    return out


def _transcendental(graph) -> bool:
    return any(node.op in TRANSCENDENTAL for node in walk(graph))


@settings(max_examples=15, report_multiple_bugs=False)
@given(programs())
def test_every_cpu_strategy_equals_the_reference(drawn):
    carries, stmts, x, w = drawn
    program = (carries, stmts)

    def f(x, w, n):
        return final_state(program, x, w, n)

    def g(x, w, n):
        return loss(f(x, w, n))
    eager = f(x, w, N_BOUND)
    assert_same_bits(ik.jit(f, strategy="reference")(x, w, N_BOUND), eager, "jit vs eager")
    mode = "portable" if _transcendental(ik.trace(f, x, w, N_BOUND)) else "native"
    gradient = ik.grad(g, argnums=(0, 1))
    for fn, what in ((f, "values"), (gradient, "gradient")):
        want = ik.jit(fn, strategy="reference", numerics=mode)(x, w, N_BOUND)
        for strategy in ("threads", "native"):
            got = ik.jit(fn, strategy=strategy, numerics=mode)(x, w, N_BOUND)
            assert_same_bits(got, want, f"{strategy} {what} ({mode} numerics)")


@settings(max_examples=40, report_multiple_bugs=False)
@given(programs())
def test_derivatives_match_differences_and_the_unrolled_program(drawn):
    carries, stmts, x, w = drawn
    program = (carries, stmts)
    rows = np.stack([x, x * 0.8 - 0.1])
    margins: list = []
    for row in rows:
        unrolled = final_state(program, row, w, N_BOUND, unrolled=True, margins=margins)
        assert_same_bits(final_state(program, row, w, N_BOUND), unrolled, "loops vs unrolled")
    assume(min(margins, default=np.inf) > MARGIN)

    def loop_loss(x, n):  # w: an outer array the program closes over
        return loss(final_state(program, x, w, n))

    def unrolled_loss(x):
        return loss(final_state(program, x, w, N_BOUND, unrolled=True))
    results = {
        "jit(grad)": [ik.jit(ik.grad(loop_loss), strategy="reference")(x, N_BOUND)],
        "jacfwd": [ik.jacfwd(loop_loss)(x, N_BOUND)],
        "jacrev": [ik.jacrev(loop_loss)(x, N_BOUND)],
        "vmap(grad)": list(ik.vmap(ik.grad(loop_loss), in_axes=(0, None))(rows, N_BOUND)),
    }
    for r, row in enumerate(rows):
        fd = central_differences(lambda v: loop_loss(v, N_BOUND), row)
        want = ik.grad(unrolled_loss)(row)
        for what, found in results.items():
            if r < len(found):
                assert_near(found[r], fd, FD_TOL, f"{what} row {r} vs central differences")
                assert_near(found[r], want, UNROLLED_RTOL, f"{what} row {r} vs unrolled")
    hessian = ik.hessian(loop_loss)(x, N_BOUND)
    unrolled_grad = ik.grad(unrolled_loss)
    fd = np.stack([central_differences(lambda v, i=i: unrolled_grad(v)[i], x)
                   for i in range(x.shape[0])])
    assert_near(hessian, fd, FD_TOL, "hessian vs central differences of the gradient")
    assert_near(hessian, ik.hessian(unrolled_loss)(x), UNROLLED_RTOL, "hessian vs unrolled")


def _bodies(s) -> list:
    if s[0] == "op":
        return []
    if s[0] == "switch":
        return s[1]
    return [s[2], s[3]] if s[0] == "cond" else [s[-1]]


def forms(stmts, nested: bool = False) -> set:
    """(kind, inside another control form) of every statement."""
    found = set()
    for s in stmts:
        found.add((s[0], nested))
        for body in _bodies(s):
            found |= forms(body, True)
    return found


def test_the_generator_reaches_every_control_form_nested():
    seen: set = set()

    @settings(max_examples=150, derandomize=True, database=None, phases=[Phase.generate])
    @given(programs())
    def draw(drawn):
        seen.update(forms(drawn[1]))
    draw()
    wanted = {(kind, True) for kind in CONTROL_KINDS + ["switch"]}
    assert wanted <= seen, f"never drawn inside another form: {sorted(wanted - seen)}"
