"""isokernel.optim against optax applied op by op (``jax.disable_jit``) in
float64: 100 random steps give the same bits, eagerly and under ``jit`` on
every CPU strategy; cosine schedules agree to 1e-12 relative to the
parameters' norm (XLA's cos is not the platform's).

optax runs with two elementary functions of XLA's CPU backend replaced by
the definitions isokernel computes (``_isokernel_elementary_functions``),
because on an AVX-512 host neither library's is the other's:

- ``lax.rsqrt`` in float64 is the AVX-512 estimate ``vrsqrt14pd`` refined by
  two Newton steps there (XLA's ``codegen/math/rsqrt.cc``), within 2 ulp of
  ``1 / sqrt`` but not equal to it in about 30% of arguments; XLA computes
  ``1 / sqrt`` on every other host, as isokernel does everywhere;
- float32 ``power`` (optax's ``exponential_decay`` raises ``decay_rate`` to
  an int32 count over an int, a float32 quotient even with float64 enabled)
  is the platform's ``powf`` in XLA, while NumPy 2 dispatches float32
  ``power`` to its own AVX-512 SIMD routine, one float32 ulp from ``powf`` in
  about 20% of arguments; isokernel's oracle is NumPy.

Everything else (dtypes, operation order, which values are rounded where)
is optax's own; ``test_the_substituted_functions_are_xlas_within_an_ulp``
bounds what the substitution changes. The update rules follow XLA from
jaxlib 0.10.1 on, whose simplifier divides an array by a 0-d array as
``t * (1 / s)`` (jaxlib 0.10.0 and earlier divide), hence the version floor
here and in the ``bench`` extra."""

from __future__ import annotations

import contextlib
import functools
from unittest import mock

import numpy as np
import pytest

import isokernel
from isokernel import optim
from isokernel.backends.numerics import NATIVE_ULP_BOUND
from isokernel.ir import Op

jax = pytest.importorskip("jax", minversion="0.10.1",
                          reason="optax comparisons need jax 0.10.1 or later, and optax")
optax = pytest.importorskip("optax", reason="optax comparisons need optax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

STEPS = 100
STRATEGIES = ["reference", "threads", "native"]


def _params():
    """Two leaves: an array and, in a nested list, a 0-d array (optax divides
    the two differently)."""
    rng = np.random.default_rng(7)
    return {"w": rng.standard_normal((3, 4)), "bias": [np.array(0.5)]}


def _grads(dyadic: bool = False):
    """Gradients per step from a seeded generator, every seventh step four
    times larger. ``dyadic``: multiples of 2**-6 below 2 in magnitude, whose
    squares and sums are exact in every summation order."""
    rng = np.random.default_rng(2026)
    out = []
    for k in range(STEPS):
        if dyadic:
            draw = lambda shape: rng.integers(-127, 128, shape) / 64.0  # noqa: E731
        else:
            factor = 1.0 + 3.0 * (k % 7 == 0)
            draw = lambda shape, f=factor: f * rng.standard_normal(shape)  # noqa: E731
        out.append({"w": draw((3, 4)), "bias": [np.asarray(draw(()))]})
    return out


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in isokernel.tree_flatten(tree)[0]]


_xla_power = jnp.power


def _numpys_power(x, y):
    """``jnp.power`` in the dtype JAX promotes ``x`` and ``y`` to (a Python
    float stays weak), with NumPy's function, as isokernel's oracle computes it."""
    dtype = jnp.result_type(x, y)
    return jnp.asarray(np.power(np.asarray(x, dtype), np.asarray(y, dtype)))


def _one_over_sqrt(x):
    """``lax.rsqrt`` as XLA computes it on a host without AVX-512: ``1 / sqrt``."""
    return 1.0 / jnp.sqrt(x)


@contextlib.contextmanager
def _isokernel_elementary_functions():
    """optax's code with ``jnp.power`` and ``lax.rsqrt`` as isokernel computes
    them (see the module's docstring for why)."""
    with mock.patch.object(jnp, "power", _numpys_power), \
            mock.patch.object(jax.lax, "rsqrt", _one_over_sqrt):
        yield


@functools.cache
def _optax_run(name: str, dyadic: bool = False):
    """The parameters after each step, by optax op by op."""
    opt = CASES[name][1]()
    params = jax.tree.map(jnp.asarray, _params())
    history = []
    with jax.disable_jit(), _isokernel_elementary_functions():
        state = opt.init(params)
        for g in _grads(dyadic):
            updates, state = opt.update(jax.tree.map(jnp.asarray, g), state, params)
            params = optax.apply_updates(params, updates)
            history.append([np.asarray(x) for x in jax.tree.leaves(params)])
    return history


def _eager_run(opt, dyadic=False):
    params, history = _params(), []
    state = opt.init(params)
    for g in _grads(dyadic):
        updates, state = opt.update(g, state, params)
        params = optim.apply_updates(params, updates)
        history.append(_leaves(params))
    return history


def _jit_runs(strategy) -> dict:
    """Every case in one jitted step (one compilation per strategy)."""
    opts = {name: make() for name, (make, _) in CASES.items()}

    def step(params, states, grads):
        out = {}
        for name, opt in opts.items():
            updates, state = opt.update(grads[name], states[name], params[name])
            out[name] = (optim.apply_updates(params[name], updates), state)
        return {k: v[0] for k, v in out.items()}, {k: v[1] for k, v in out.items()}
    jstep = isokernel.jit(step, strategy=strategy)
    params = {name: _params() for name in opts}
    states = {name: opt.init(params[name]) for name, opt in opts.items()}
    history = {name: [] for name in opts}
    for plain, dyadic in zip(_grads(), _grads(dyadic=True)):
        grads = {name: dyadic if name in DYADIC else plain for name in opts}
        params, states = jstep(params, states, grads)
        for name in opts:
            history[name].append(_leaves(params[name]))
    assert jstep.retraces == 0
    return history


def _sched(name):
    return SCHEDULES[name]


SCHEDULES = {
    "constant": lambda m: m.constant_schedule(0.05),
    "exponential": lambda m: m.exponential_decay(0.1, 7, 0.9),
    "exponential_staircase_end": lambda m: m.exponential_decay(
        0.1, 7, 0.8, transition_begin=5, staircase=True, end_value=0.02),
    "exponential_growth_end": lambda m: m.exponential_decay(0.01, 9, 1.05, end_value=0.05),
    "piecewise_constant": lambda m: m.piecewise_constant_schedule(0.1, {10: 0.5, 30: 0.1,
                                                                         60: 2.0}),
    "cosine": lambda m: m.cosine_decay_schedule(0.1, 70, alpha=0.1),
    "cosine_exponent": lambda m: m.cosine_decay_schedule(0.1, 70, exponent=2.0),
    "warmup_cosine": lambda m: m.warmup_cosine_decay_schedule(0.0, 0.1, 10, 80, end_value=0.01),
}

# name -> (isokernel optimizer, optax optimizer)
CASES = {
    "sgd": (lambda: optim.sgd(0.05), lambda: optax.sgd(0.05)),
    "sgd_momentum": (lambda: optim.sgd(0.05, momentum=0.9),
                     lambda: optax.sgd(0.05, momentum=0.9)),
    "sgd_nesterov": (lambda: optim.sgd(0.05, momentum=0.9, nesterov=True),
                     lambda: optax.sgd(0.05, momentum=0.9, nesterov=True)),
    "adam": (lambda: optim.adam(1e-2), lambda: optax.adam(1e-2)),
    "adam_eps_root": (lambda: optim.adam(1e-2, b1=0.8, eps=1e-6, eps_root=1e-10),
                      lambda: optax.adam(1e-2, b1=0.8, eps=1e-6, eps_root=1e-10)),
    "adam_nesterov": (lambda: optim.adam(1e-2, nesterov=True),
                      lambda: optax.adam(1e-2, nesterov=True)),
    "adamw": (lambda: optim.adamw(1e-2, weight_decay=0.05),
              lambda: optax.adamw(1e-2, weight_decay=0.05)),
    "adamw_mask": (lambda: optim.adamw(1e-2, weight_decay=0.05, mask=_mask),
                   lambda: optax.adamw(1e-2, weight_decay=0.05, mask=_mask)),
    "adamw_decay_schedule": (
        lambda: optim.adamw(1e-2, weight_decay=optim.exponential_decay(0.05, 5, 0.7)),
        lambda: optax.adamw(1e-2, weight_decay=optax.exponential_decay(0.05, 5, 0.7))),
    "rmsprop": (lambda: optim.rmsprop(1e-2), lambda: optax.rmsprop(1e-2)),
    "rmsprop_centered": (lambda: optim.rmsprop(1e-2, centered=True, initial_scale=1.0),
                         lambda: optax.rmsprop(1e-2, centered=True, initial_scale=1.0)),
    "rmsprop_momentum": (lambda: optim.rmsprop(1e-2, momentum=0.9, nesterov=True,
                                               eps_in_sqrt=False, bias_correction=True),
                         lambda: optax.rmsprop(1e-2, momentum=0.9, nesterov=True,
                                               eps_in_sqrt=False, bias_correction=True)),
    "clip_adam": (lambda: optim.chain(optim.clip_by_global_norm(3.0), optim.adam(1e-2)),
                  lambda: optax.chain(optax.clip_by_global_norm(3.0), optax.adam(1e-2))),
    "adam_exponential": (lambda: optim.adam(SCHEDULES["exponential"](optim)),
                         lambda: optax.adam(SCHEDULES["exponential"](optax))),
    **{f"sgd_{k}": (lambda k=k: optim.sgd(_sched(k)(optim), momentum=0.5),
                    lambda k=k: optax.sgd(_sched(k)(optax), momentum=0.5)) for k in SCHEDULES},
}


def _mask(params):
    return {"w": True, "bias": [False]}


COSINE = {f"sgd_{k}" for k in SCHEDULES if "cosine" in k}
POW = {"adamw_decay_schedule", "adam_exponential"} | {f"sgd_{k}" for k in SCHEDULES
                                                     if "exponential" in k}
"""Schedules calling ``pow``: ``native`` calls the C library's (ulp-bounded) where it
compiles the step as one C program, NumPy's where it runs the op by the reference rules."""
DYADIC = {"clip_adam"}  # the global norm's sum order is XLA's own: see test_clip_random


def _assert_same(ours, theirs, name, cosine=False, rtol=1e-12):
    """Bit for bit, or (``cosine``) within ``rtol`` of the norm."""
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for x, y in zip(a, b):
            if cosine:
                scale = max(np.linalg.norm(y), 1.0)
                assert np.max(np.abs(x - y)) <= rtol * scale, (name, step)
            else:
                assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (
                    f"{name}: step {step + 1} differs from optax by "
                    f"{np.max(np.abs(x - y))}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_matches_optax(name):
    dyadic = name in DYADIC
    _assert_same(_eager_run(CASES[name][0](), dyadic), _optax_run(name, dyadic), name,
                 cosine=name in COSINE)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_jit_matches_optax(strategy):
    for name, ours in _jit_runs(strategy).items():
        dyadic = name in DYADIC
        powf = strategy == "native" and name in POW
        # the float32 schedule within native's pow bound (NATIVE_ULP_BOUND ulp of 2**-23
        # relative) moves a step by that fraction of lr * |g| (lr <= 0.1, |g| <= 10 here)
        bound = NATIVE_ULP_BOUND[Op.POW] * 2.0 ** -23 * 0.1 * 10
        _assert_same(ours, _optax_run(name, dyadic), f"{name} on {strategy}",
                     cosine=name in COSINE or powf, rtol=bound if powf else 1e-12)


def test_clip_random_gradients_within_sum_order():
    """With random gradients the global norm's sum runs in isokernel's order
    (NumPy's pairwise order) where XLA's CPU reduction reassociates its own
    way; the norm differs by at most an ulp or two, and 100 clipped Adam
    steps agree to 1e-13 relative."""
    ours = _eager_run(CASES["clip_adam"][0]())
    theirs = _optax_run("clip_adam")
    for a, b in zip(ours[-1], theirs[-1]):
        assert np.max(np.abs(a - b)) <= 1e-13 * max(np.linalg.norm(b), 1.0)


def test_clip_triggers_both_ways():
    """The dyadic gradients cross the clipping threshold in both directions,
    so the bit comparison covers the select and the rescaling."""
    norms = [float(np.sqrt(sum(np.sum(x * x) for x in jax.tree.leaves(g))))
             for g in _grads(dyadic=True)]
    assert min(norms) < 3.0 < max(norms)


def test_schedule_values_match_optax():
    counts = np.r_[0:12, 12:120:5].astype(np.int32)
    for name, make in SCHEDULES.items():
        ours = np.array([np.asarray(make(optim)(np.asarray(c))) for c in counts])
        with jax.disable_jit(), _isokernel_elementary_functions():
            theirs = np.array([np.asarray(make(optax)(jnp.asarray(c))) for c in counts])
        assert ours.dtype == theirs.dtype, name
        if "cosine" in name:
            np.testing.assert_allclose(ours, theirs, rtol=1e-15, atol=0)
        else:
            assert ours.tobytes() == theirs.tobytes(), name


def test_the_substituted_functions_are_xlas_within_an_ulp():
    """What ``_isokernel_elementary_functions`` changes in optax: float32
    ``power`` on every exponent the exponential schedules use moves by at most
    a float32 ulp and keeps its dtype, and float64 ``rsqrt`` by at most 2 ulp
    (XLA's within 1 of the true value, ``1 / sqrt`` rounded twice)."""
    counts = np.arange(120, dtype=np.int32)
    exponents = np.concatenate([(counts - begin).astype(np.float32) / np.float32(steps)
                                for begin, steps in [(0, 7), (5, 7), (0, 9), (0, 5)]])
    scales = 10.0 ** np.arange(-8, 2).repeat(1000)
    roots = np.random.default_rng(3).uniform(0.0, 2.0, scales.size) ** 2 * scales
    with jax.disable_jit():
        for rate in (0.9, 0.8, 1.05, 0.7):
            theirs = _xla_power(rate, jnp.asarray(exponents))
            ours = _numpys_power(rate, jnp.asarray(exponents))
            assert ours.dtype == theirs.dtype == np.float32
            assert np.all(np.abs(np.asarray(ours) - np.asarray(theirs))
                          <= np.spacing(np.asarray(theirs)))
        theirs = np.asarray(jax.lax.rsqrt(jnp.asarray(roots)))
        ours = np.asarray(_one_over_sqrt(jnp.asarray(roots)))
    assert np.all(np.abs(ours - theirs) <= 2 * np.spacing(theirs))


def test_state_is_a_pytree_of_arrays_with_int32_counts():
    state = optim.chain(optim.clip_by_global_norm(1.0),
                        optim.adam(optim.exponential_decay(0.1, 5, 0.5))).init(_params())
    leaves = isokernel.tree_flatten(state)[0]
    assert all(isinstance(x, np.ndarray) for x in leaves)
    counts = [x for x in leaves if x.dtype == np.int32]
    assert len(counts) == 2 and all(x.shape == () for x in counts)


def test_update_records_into_one_graph():
    opt = optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 0.1, 5, 50), weight_decay=1e-3)

    def step(params, state, g):
        updates, state = opt.update(g, state, params)
        return optim.apply_updates(params, updates), state
    params = _params()
    graph = isokernel.jit(step, strategy="reference").lower(params, opt.init(params),
                                                            _grads()[0]).graph
    assert len(graph.outputs) == 3 * len(_leaves(params)) + 2  # params, mu, nu, 2 counts


def test_chain_rejects_a_wrong_state():
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.1))
    with pytest.raises(ValueError, match="init"):
        opt.update(_grads()[0], (), _params())


def test_mask_must_match_the_parameters():
    opt = optim.adamw(0.1, mask={"w": True, "bias": True})
    with pytest.raises(ValueError, match="structure"):
        opt.init(_params())


def _rosenbrock(np_):
    def f(x):
        return np_.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    return f


ROSEN_X0 = np.array([-1.2, 1.0, -0.5, 0.8])
LBFGS_STEPS = 50


def _lbfgs_run(lib, opt, jit, f, steps=LBFGS_STEPS):
    vg = lib.value_and_grad_from_state(f)

    def step(p, s):
        v, g = vg(p, state=s)
        u, s = opt.update(g, s, p, value=v, grad=g, value_fn=f)
        return lib.apply_updates(p, u), s
    step = jit(step) if jit is not None else step
    p = ROSEN_X0.copy() if lib is optim else jnp.asarray(ROSEN_X0)
    s, out = opt.init(p), []
    for _ in range(steps):
        p, s = step(p, s)
        out.append(np.asarray(p))
    return out


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.filterwarnings("ignore:divide by zero encountered")
def test_lbfgs_reaches_rosenbrocks_minimum_with_optax_iterates():
    """optax's lbfgs (zoom line search) and isokernel's on the 4-D Rosenbrock
    function from (-1.2, 1, -0.5, 0.8): both reach (1, 1, 1, 1) exactly within
    50 steps and every iterate agrees to 1e-9 (measured 1.8e-10: inner
    products sum in each library's own order, and the valley amplifies the
    last bits); under jit on native the iterates are the eager ones."""
    ours = _lbfgs_run(optim, optim.lbfgs(), functools.partial(isokernel.jit, strategy="native"),
                      _rosenbrock(isokernel.numpy))
    theirs = _lbfgs_run(optax, optax.lbfgs(), jax.jit, _rosenbrock(jnp))
    assert np.array_equal(ours[-1], np.ones(4))
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert np.max(np.abs(a - b)) <= 1e-9, k
    eager = _lbfgs_run(optim, optim.lbfgs(), None, _rosenbrock(isokernel.numpy), steps=6)
    assert [x.tobytes() for x in eager] == [x.tobytes() for x in ours[:6]]


def test_lbfgs_line_search_needs_the_loss():
    opt = optim.lbfgs()
    state = opt.init(ROSEN_X0)
    with pytest.raises(TypeError, match="value_fn"):
        opt.update(ROSEN_X0, state, ROSEN_X0)
