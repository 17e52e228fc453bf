"""The public API used the way user code writes it, type-checked by
``mypy --strict`` (``make lint``) and run by tests/test_typing.py: a model
written with isokernel.numpy, jit with options, the transforms, the
control-flow primitives, random keys and a training loop."""

from __future__ import annotations

from typing import Any

import numpy as np

import isokernel as ik
import isokernel.nn as nn
import isokernel.numpy as inp
import isokernel.random as rnd
from isokernel import optim
from isokernel.typing import Array, ArrayLike, PyTree

Params = dict[str, Array]


def attenuation(ndvi: ArrayLike, b: ArrayLike) -> Array:
    """A model: plain NumPy values in, plain NumPy values out when run eagerly."""
    return inp.exp(-2.0 * b * inp.clip(ndvi, 0.0, 1.0))


@ik.jit(strategy="reference", static_argnames="order")
def smooth(x: Array, order: int) -> Array:
    """A jitted function with a static argument (``order`` changes the graph)."""
    return inp.sum(inp.stack([inp.roll(x, k) for k in range(-order, order + 1)]), axis=0)


def predict(params: Params, x: ArrayLike) -> Array:
    return nn.relu(inp.dot(x, params["w"]) + params["b"])


def loss(params: Params, x: ArrayLike, y: ArrayLike) -> Array:
    return inp.mean((predict(params, x) - y) ** 2)


def running_sum(xs: Array) -> tuple[Array, Array]:
    """``scan``: the final carry and the carry after every step."""
    def step(carry: Array, x: Array) -> tuple[Array, Array]:
        total = carry + x
        return total, total
    return ik.scan(step, inp.zeros_like(xs[0]), xs)


def power_iteration(a: Array, steps: int) -> Array:
    """``fori_loop`` over a carried vector."""
    def body(i: Array, v: Array) -> Array:
        w = inp.dot(a, v)
        return w / inp.linalg.norm(w)
    return ik.fori_loop(0, steps, body, inp.ones(a.shape[0]))


def halvings(x: Array) -> Array:
    """``while_loop`` and ``cond``."""
    def big(state: tuple[Array, Array]) -> Array:
        return state[0] > 1.0

    def halve(state: tuple[Array, Array]) -> tuple[Array, Array]:
        value, count = state
        return value / 2.0, count + 1
    _, count = ik.while_loop(big, halve, (x, inp.zeros((), inp.int64)))
    return ik.cond(count > 2, lambda c: c * 10, lambda c: c, count)


@ik.custom_jvp
def softclip(x: Array) -> Array:
    return inp.tanh(x)


@softclip.defjvp
def _softclip_jvp(primals: tuple[Array], tangents: tuple[Array]) -> tuple[Array, Array]:
    (x,), (t,) = primals, tangents
    return softclip(x), t / inp.cosh(x) ** 2


def fit(key: Array, x: np.ndarray, y: np.ndarray, steps: int) -> tuple[PyTree, float]:
    """A Trainer (one compiled step) and the same step written by hand."""
    k_w, k_b = rnd.split(key)
    params: Params = {"w": rnd.normal(k_w, (x.shape[1],)), "b": rnd.uniform(k_b, ())}
    trainer = ik.Trainer(loss, params, optim.adam(1e-2), strategy="reference")
    losses = [float(trainer.step(x, y)) for _ in range(steps)]

    opt = optim.sgd(optim.exponential_decay(0.1, 10, 0.5))
    state = opt.init(params)
    value, grads = ik.value_and_grad(loss)(params, x, y)
    updates, state = opt.update(grads, state, params)
    params = optim.apply_updates(params, updates)
    assert float(loss(params, x, y)) <= float(value)
    return trainer.params, losses[-1]


def main() -> dict[str, Any]:
    ndvi = np.linspace(-0.1, 0.9, 64)
    eager = attenuation(ndvi, 0.12)
    compiled = ik.jit(attenuation, strategy="reference").lower(ndvi, 0.12).compile()
    with ik.numerics("portable"):
        portable = ik.jit(attenuation, strategy="reference")(ndvi, 0.12)

    x = np.sin(np.arange(6.0))
    slopes = ik.vmap(ik.grad(lambda v: inp.sum(softclip(v) ** 2)))(np.stack([x, -x]))
    hess = ik.hessian(lambda v: inp.sum(v ** 3))(x)
    total, partial = running_sum(x)
    key = rnd.key(2026)
    data = rnd.normal(rnd.fold_in(key, 1), (32, 6))
    labels = nn.relu(data @ np.linspace(-1.0, 1.0, 6))
    params, last = fit(key, np.asarray(data), np.asarray(labels), 5)
    return {
        "eager": eager, "compiled": compiled(ndvi, 0.12), "portable": portable,
        "report": compiled.report(), "smooth": smooth(x, 1), "slopes": slopes, "hess": hess,
        "total": total, "partial": partial,
        "power": power_iteration(np.diag([3.0, 1.0, 0.5]), 20),
        "halvings": halvings(np.float64(20.0)), "params": params, "loss": last,
        "solve": inp.linalg.solve(np.eye(3) * 2.0, np.ones(3)),
        "spectrum": inp.fft.rfft(x), "tree": ik.tree_map(lambda a: a * 2, {"x": x}),
    }


if __name__ == "__main__":
    for name, value in main().items():
        print(name, value)
