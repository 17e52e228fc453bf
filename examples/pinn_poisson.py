"""A physics-informed network for the 1-D Poisson problem

    -u''(x) = pi^2 sin(pi x) on [0, 1],  u(0) = u(1) = 0   (solution sin(pi x)),

trained with isokernel alone: a tanh MLP initialized by isokernel.random,
u'' at each collocation point by ``hessian`` under ``vmap``, Adam and then
L-BFGS (isokernel.optim), each step one compiled executable
(isokernel.Trainer). Prints the relative L2 error against sin(pi x) on a
fine grid.

    python examples/pinn_poisson.py            # full run: error <= 1e-3
    python examples/pinn_poisson.py --quick    # seconds: error <= 1e-2
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np

import isokernel as ik
import isokernel.numpy as inp
import isokernel.random as rnd
from isokernel import optim
from isokernel.typing import Array, ArrayLike

Params = list[dict[str, Array]]  # one dict of weights "w" and biases "b" per layer

FULL: dict[str, Any] = {"width": 16, "points": 256, "adam": 1500, "lbfgs": 600, "target": 1e-3}
QUICK: dict[str, Any] = {"width": 16, "points": 32, "adam": 300, "lbfgs": 60, "target": 1e-2}


def init_mlp(key: Array, sizes: list[int]) -> Params:
    """Glorot-uniform weights and zero biases, one dict per layer."""
    keys = rnd.split(key, len(sizes) - 1)
    return [{"w": rnd.glorot_uniform(keys[i], (n_in, n_out)), "b": np.zeros(n_out)}
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))]


def u(params: Params, x: ArrayLike) -> Array:
    """The network at one point x (a scalar)."""
    h = inp.tanh(x * params[0]["w"][0] + params[0]["b"])
    for layer in params[1:-1]:
        h = inp.tanh(inp.dot(h, layer["w"]) + layer["b"])
    return inp.dot(h, params[-1]["w"][:, 0]) + params[-1]["b"][0]


def loss(params: Params, xs: Array) -> Array:
    """Mean squared residual of u'' + pi^2 sin(pi x) plus the boundary terms."""
    uxx = ik.vmap(ik.hessian(u, argnums=1), in_axes=(None, 0))(params, xs)
    r = uxx + inp.pi ** 2 * inp.sin(inp.pi * xs)
    return inp.mean(r * r) + u(params, 0.0) ** 2 + u(params, 1.0) ** 2


def relative_error(params: Params, n: int = 2001) -> float:
    """||u - sin(pi x)|| / ||sin(pi x)|| on n evenly spaced points."""
    x = np.linspace(0.0, 1.0, n)
    pred = ik.vmap(u, in_axes=(None, 0))(params, x)
    exact = np.sin(np.pi * x)
    return float(np.linalg.norm(pred - exact) / np.linalg.norm(exact))


def train(cfg: dict[str, Any], seed: int = 2026,
          strategy: str = "reference") -> tuple[Params, float, float]:
    """Adam, then L-BFGS from Adam's parameters; the final parameters and losses."""
    xs = np.linspace(0.0, 1.0, cfg["points"])
    params = init_mlp(rnd.key(seed), [1, cfg["width"], cfg["width"], 1])
    schedule = optim.exponential_decay(1e-2, cfg["adam"] // 4, 0.5)
    adam = ik.Trainer(loss, params, optim.adam(schedule), strategy=strategy)
    adam_loss = [adam.step(xs) for _ in range(cfg["adam"])][-1]
    lbfgs = ik.Trainer(loss, adam.params, optim.lbfgs(), strategy=strategy)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        # the line search divides by a zero step at the first iteration and discards it
        warnings.simplefilter("ignore", RuntimeWarning)
        lbfgs_loss = [lbfgs.step(xs) for _ in range(cfg["lbfgs"])][-1]
    return lbfgs.params, float(adam_loss), float(lbfgs_loss)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="32 points, 300 Adam and 60 L-BFGS steps (seconds)")
    parser.add_argument("--strategy", default="reference", help="CPU strategy (default reference)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    start = time.perf_counter()
    params, adam_loss, lbfgs_loss = train(cfg, args.seed, args.strategy)
    error = relative_error(params)
    print(f"PINN 1-D Poisson, tanh MLP 1-{cfg['width']}-{cfg['width']}-1, {cfg['points']} "
          f"collocation points, strategy {args.strategy}")
    print(f"loss after {cfg['adam']} Adam steps: {adam_loss:.3e}; after {cfg['lbfgs']} "
          f"L-BFGS steps: {lbfgs_loss:.3e} ({time.perf_counter() - start:.1f} s)")
    print(f"relative L2 error against sin(pi x): {error:.3e} (target <= {cfg['target']:g})")
    return error


if __name__ == "__main__":
    main()
