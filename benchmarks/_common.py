"""What the benchmarks share: optional contenders skipped with their reason,
and interleaved timing (every candidate once per round, the best call of
each), so a shared, noisy machine slows every candidate alike."""

from __future__ import annotations

import math
import time

import numpy as np


def try_import(name: str, notes: list, fix: str = "pip install 'isokernel[bench]'"):
    """The module, or None with a note saying why it is skipped and how to install it."""
    try:
        return __import__(name)
    except Exception as err:  # noqa: BLE001 - any broken install is a skip with its reason
        notes.append(f"{name}: skipped ({type(err).__name__}: {err}); {fix}")
        return None


def interleaved(rows: dict, args: tuple, rounds: int) -> dict:
    """Best seconds of every callable of ``rows`` on ``args`` (each warmed up
    already): ``rounds`` rounds, calling each once per round."""
    best = dict.fromkeys(rows, math.inf)
    for _ in range(rounds):
        for name, fn in rows.items():
            t = time.perf_counter()
            fn(*args)
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def interleaved_best(rows: dict, args: tuple, rounds: int) -> tuple[dict, dict]:
    """(first result, best seconds) of every callable of ``rows`` on ``args``:
    one warm-up call each (compiles), then ``rounds`` rounds calling each once."""
    first = {name: fn(*args) for name, fn in rows.items()}
    return first, interleaved(rows, args, rounds)


def jax_adam_step(jax, optax, loss_fn, params, learning_rate: float):
    """A closure running one jitted ``value_and_grad`` + optax Adam step on a
    batch, the parameters and optimizer state held between calls; it returns
    the loss, blocked on (JAX dispatches asynchronously)."""
    jnp = jax.numpy
    opt = optax.adam(learning_rate)

    @jax.jit
    def step(p, state, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(p, *batch)
        updates, state = opt.update(grads, state, p)
        return loss, optax.apply_updates(p, updates), state
    held = {"p": jax.tree_util.tree_map(jnp.asarray, params)}
    held["state"] = opt.init(held["p"])

    def run(*batch):
        loss, held["p"], held["state"] = step(held["p"], held["state"], *batch)
        return loss.block_until_ready()
    return run


def pinn_loss(ns, second_derivative, vmap, params, xs):
    """The 1-D Poisson residual u'' + pi^2 sin(pi x) of the tanh MLP ``u`` and
    its boundary terms, in the array namespace ``ns``; ``second_derivative(u)``
    is u'' with respect to x (a Hessian, or grad of grad)."""
    def u(p, x):
        h = ns.tanh(x * p[0]["w"][0] + p[0]["b"])
        for layer in p[1:-1]:
            h = ns.tanh(ns.dot(h, layer["w"]) + layer["b"])
        return ns.dot(h, p[-1]["w"][:, 0]) + p[-1]["b"][0]
    uxx = vmap(second_derivative(u), in_axes=(None, 0))(params, xs)
    r = uxx + np.pi ** 2 * ns.sin(np.pi * xs)
    return ns.mean(r * r) + u(params, 0.0) ** 2 + u(params, 1.0) ** 2


def mlp_params(sizes, seed=0):
    """Glorot-uniform weights and small biases as NumPy float64 arrays."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = math.sqrt(6.0 / (n_in + n_out))
        params.append({"w": rng.uniform(-bound, bound, (n_in, n_out)),
                       "b": rng.uniform(-0.1, 0.1, n_out)})
    return params
