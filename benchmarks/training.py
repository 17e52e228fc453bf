"""Training step time on the CPU: isokernel.Trainer against JAX and PyTorch.

Problems (float64, Adam 1e-3, the same initial parameters for everyone):

1. PINN: the 1-D Poisson residual of examples/pinn_poisson.py, a tanh MLP
   1-W-W-1 for W = 16 and 64, u'' at 256 collocation points by
   ``hessian(u, argnums=1)`` under ``vmap`` (PyTorch: two ``autograd.grad``
   calls with ``create_graph``), loss ``mean((u'' + pi^2 sin(pi x))^2) +
   u(0)^2 + u(1)^2``.
2. Digits: examples/mlp_digits.py's MLP 64-64-64-10 (ReLU, softmax
   cross-entropy) on one batch of 128 images (scikit-learn's digits when
   installed, else random pixels and labels of the same shapes).

Contenders: isokernel ``Trainer`` on ``reference``, ``threads`` and
``native`` (``workers=1``: on a small step the pool costs more than it
gives) and ``native-whole`` (the whole step as one C function), JAX
``jit`` of ``value_and_grad`` and the optax update together, and PyTorch
eager (``torch.optim.Adam``, one thread); NumPy's BLAS gets one thread too
(``OPENBLAS_NUM_THREADS=1`` unless set). Each contender runs ``--steps``
steps per round; rounds are interleaved and the best round counts. Every
row prints ms per step, its ratio to JAX (time / JAX's time: below 1 is
faster) and its first loss against isokernel reference's.
JAX, optax and PyTorch are skipped with a note when missing
(``pip install 'isokernel[bench]'``; PyTorch: ``pip install torch``).

    python benchmarks/training.py [--rounds 7] [--steps 20] [--points 256]
"""

from __future__ import annotations

import argparse
import math
import os
import time

# One BLAS thread unless the caller says otherwise, set before NumPy loads OpenBLAS: on a
# loaded 2-core machine a 128x64 @ 64x64 product took 16 ms with OpenBLAS's 2 threads (each
# call waits for a busy core) against 0.2-0.4 ms with 1, which would time the scheduler.
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402 - after the BLAS thread count
from _common import jax_adam_step, mlp_params, try_import  # noqa: E402
from _common import pinn_loss as common_pinn_loss  # noqa: E402

import isokernel as ik  # noqa: E402
import isokernel.nn as nn  # noqa: E402
import isokernel.numpy as inp  # noqa: E402
from isokernel import optim  # noqa: E402

STRATEGIES = ("reference", "threads", "native", "native-whole")
LEARNING_RATE = 1e-3


# --- models, written once per framework ----------------------------------------------------

def pinn_loss(ns, hessian, vmap, params, xs):
    """The Poisson loss (``_common.pinn_loss``) with u'' as the ``hessian``."""
    return common_pinn_loss(ns, lambda u: hessian(u, argnums=1), vmap, params, xs)


def digits_loss(ns, relu, log_softmax, one_hot, params, x, labels):
    """Mean softmax cross-entropy of the ReLU MLP in the namespace ``ns``."""
    h = x
    for layer in params[:-1]:
        h = relu(ns.dot(h, layer["w"]) + layer["b"])
    log_p = log_softmax(ns.dot(h, params[-1]["w"]) + params[-1]["b"])
    return -ns.mean(ns.sum(one_hot(labels, 10) * log_p, axis=-1))


def problems(points, batch, notes):
    """name -> (layer sizes, batch arrays, isokernel loss, JAX loss maker, torch loss)."""
    xs = np.linspace(0.0, 1.0, points)
    found = {}
    for width in (16, 64):
        found[f"PINN width {width}, {points} points"] = (
            [1, width, width, 1], (xs,),
            lambda p, x: pinn_loss(inp, ik.hessian, ik.vmap, p, x), _pinn_jax, _pinn_torch)
    found[f"digits MLP 64-64-64-10, batch {batch}"] = (
        [64, 64, 64, 10], _digits_batch(batch, notes),
        lambda p, x, y: digits_loss(inp, nn.relu, nn.log_softmax, nn.one_hot, p, x, y),
        _digits_jax, _digits_torch)
    return found


def _digits_batch(batch, notes):
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        notes.append("scikit-learn missing: digits replaced by random pixels of the same "
                     "shapes (pip install 'isokernel[examples]')")
        rng = np.random.default_rng(0)
        return rng.uniform(0.0, 1.0, (batch, 64)), rng.integers(0, 10, batch)
    digits = load_digits()
    return digits.data[:batch] / 16.0, digits.target[:batch].astype(np.int64)


# --- JAX ------------------------------------------------------------------------------------

def _pinn_jax(jax, jnp):
    return lambda p, x: pinn_loss(jnp, jax.hessian, jax.vmap, p, x)


def _digits_jax(jax, jnp):
    return lambda p, x, y: digits_loss(jnp, jax.nn.relu, jax.nn.log_softmax, jax.nn.one_hot,
                                       p, x, y)


def jax_contender(loss_maker, params, notes):
    """A closure running one jitted value_and_grad + optax Adam step, or None."""
    jax, optax = try_import("jax", notes), try_import("optax", notes)
    if jax is None or optax is None:
        return None
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    return jax_adam_step(jax, optax, loss_maker(jax, jnp), params, LEARNING_RATE)


# --- PyTorch --------------------------------------------------------------------------------

def _pinn_torch(torch, p, x):
    x = x.clone().requires_grad_(True)

    def u(z):
        h = torch.tanh(z[:, None] * p[0]["w"][0] + p[0]["b"])
        for layer in p[1:-1]:
            h = torch.tanh(h @ layer["w"] + layer["b"])
        return h @ p[-1]["w"][:, 0] + p[-1]["b"][0]
    ux = torch.autograd.grad(u(x).sum(), x, create_graph=True)[0]
    uxx = torch.autograd.grad(ux.sum(), x, create_graph=True)[0]
    r = uxx + math.pi ** 2 * torch.sin(math.pi * x)
    ends = u(torch.tensor([0.0, 1.0], dtype=x.dtype))
    return torch.mean(r * r) + (ends * ends).sum()


def _digits_torch(torch, p, x, y):
    h = x
    for layer in p[:-1]:
        h = torch.relu(h @ layer["w"] + layer["b"])
    return torch.nn.functional.cross_entropy(h @ p[-1]["w"] + p[-1]["b"], y)


def torch_contender(loss, params, notes):
    """A closure running one eager PyTorch Adam step (one thread), or None."""
    torch = try_import("torch", notes, "pip install torch")
    if torch is None:
        return None
    torch.set_num_threads(1)
    tp = [{k: torch.tensor(v, requires_grad=True) for k, v in layer.items()} for layer in params]
    opt = torch.optim.Adam([t for layer in tp for t in layer.values()], lr=LEARNING_RATE)

    def run(*batch):
        opt.zero_grad()
        value = loss(torch, tp, *(torch.from_numpy(np.asarray(b)) for b in batch))
        value.backward()
        opt.step()
        return value.detach().numpy()
    return run




# --- timing ---------------------------------------------------------------------------------

def contenders(problem, seed, notes):
    """name -> a closure running one training step on the batch."""
    sizes, batch, loss, jax_loss, torch_loss = problem
    params = mlp_params(sizes, seed)
    rows = {}
    for strategy in STRATEGIES:
        options = {"workers": 1} if strategy in ("threads", "native") else {}
        rows[f"isokernel Trainer {strategy}"] = ik.Trainer(
            loss, params, optim.adam(LEARNING_RATE), strategy=strategy, **options).step
    jax_step = jax_contender(jax_loss, params, notes)
    if jax_step is not None:
        rows["jax jit(value_and_grad) + optax"] = jax_step
    torch_step = torch_contender(torch_loss, params, notes)
    if torch_step is not None:
        rows["pytorch eager, 1 thread"] = torch_step
    return rows, batch


def bench(name, problem, rounds, steps, notes):
    """Best-of-``rounds`` ms per step of every contender, interleaved."""
    rows, batch = contenders(problem, 0, notes)
    first = {label: float(step(*batch)) for label, step in rows.items()}  # compile and warm
    best = dict.fromkeys(rows, math.inf)
    for _ in range(rounds):
        for label, step in rows.items():
            t = time.perf_counter()
            for _ in range(steps):
                step(*batch)
            best[label] = min(best[label], (time.perf_counter() - t) / steps)
    report(name, best, first)
    return best


def report(name, best, first):
    jax_t = next((t for label, t in best.items() if label.startswith("jax")), None)
    ref = first["isokernel Trainer reference"]
    print(f"\n{name}")
    print(f"{'contender':34s} {'ms/step':>8s} {'/ JAX':>7s}  first loss vs reference")
    for label, t in best.items():
        ratio = f"{t / jax_t:6.2f}x" if jax_t else "      -"
        diff = abs(first[label] - ref) / abs(ref)
        print(f"{label:34s} {t * 1e3:8.3f} {ratio}  relative {diff:.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (best counts)")
    parser.add_argument("--steps", type=int, default=20, help="steps per round")
    parser.add_argument("--points", type=int, default=256, help="PINN collocation points")
    parser.add_argument("--batch", type=int, default=128, help="digits batch")
    parser.add_argument("--only", help="run only the problems whose name contains this")
    args = parser.parse_args(argv)
    notes: list[str] = []
    print(f"Training step time, float64, Adam; best of {args.rounds} interleaved rounds of "
          f"{args.steps} steps; CPUs {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    results = {}
    for name, problem in problems(args.points, args.batch, notes).items():
        if args.only is None or args.only in name:
            results[name] = bench(name, problem, args.rounds, args.steps, notes)
    for note in dict.fromkeys(notes):
        print(note)
    return results


if __name__ == "__main__":
    main()
