"""An MLP classifier for scikit-learn's bundled 8x8 handwritten digits
(1797 images, no download), trained with isokernel alone: weights from
isokernel.random, ReLU and a softmax cross-entropy from isokernel.nn, Adam
from isokernel.optim, each minibatch step one compiled executable
(isokernel.Trainer). Prints the accuracy on a held-out quarter of the data.

    pip install 'isokernel[examples]'          # scikit-learn
    python examples/mlp_digits.py              # full run: test accuracy >= 0.96
    python examples/mlp_digits.py --quick      # seconds: test accuracy >= 0.90
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

import isokernel as ik
import isokernel.nn as nn
import isokernel.numpy as inp
import isokernel.random as rnd
from isokernel import optim
from isokernel.typing import Array, ArrayLike

Params = list[dict[str, Array]]  # one dict of weights "w" and biases "b" per layer

FULL: dict[str, Any] = {"hidden": 64, "epochs": 30, "target": 0.96}
QUICK: dict[str, Any] = {"hidden": 32, "epochs": 10, "target": 0.90}
BATCH = 128
NO_SKLEARN = ("mlp_digits: the digits data set comes with scikit-learn, which is not "
              "installed; pip install 'isokernel[examples]' (or scikit-learn)")


def load_split(seed: int) -> list[np.ndarray]:
    """Pixels scaled to [0, 1]; a stratified 75 / 25 train / test split."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit(NO_SKLEARN)
    digits = load_digits()
    x = digits.data.astype(np.float64) / 16.0
    parts: list[np.ndarray] = train_test_split(x, digits.target.astype(np.int64),
                                               test_size=0.25, random_state=seed,
                                               stratify=digits.target)
    return parts


def init_mlp(key: Array, sizes: list[int]) -> Params:
    """He-normal weights (for ReLU) and zero biases, one dict per layer."""
    keys = rnd.split(key, len(sizes) - 1)
    return [{"w": rnd.he_normal(keys[i], (n_in, n_out)), "b": np.zeros(n_out)}
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))]


def logits(params: Params, x: ArrayLike) -> Array:
    h = x
    for layer in params[:-1]:
        h = nn.relu(inp.dot(h, layer["w"]) + layer["b"])
    return inp.dot(h, params[-1]["w"]) + params[-1]["b"]


def loss(params: Params, x: ArrayLike, labels: ArrayLike) -> Array:
    """Mean softmax cross-entropy."""
    log_p = nn.log_softmax(logits(params, x))
    return -inp.mean(inp.sum(nn.one_hot(labels, 10) * log_p, axis=-1))


def accuracy(params: Params, x: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits(params, x), axis=-1) == labels))


def train(cfg: dict[str, Any], x: np.ndarray, y: np.ndarray, seed: int = 2026,
          strategy: str = "reference") -> ik.Trainer:
    """Adam on shuffled minibatches of BATCH (the last partial batch of an
    epoch is dropped, so the step compiles once); the trainer."""
    params = init_mlp(rnd.key(seed), [64, cfg["hidden"], cfg["hidden"], 10])
    trainer = ik.Trainer(loss, params, optim.adam(3e-3), strategy=strategy)
    order = np.random.default_rng(seed)
    for _ in range(cfg["epochs"]):
        perm = order.permutation(len(x))
        for start in range(0, len(x) - BATCH + 1, BATCH):
            idx = perm[start:start + BATCH]
            trainer.step(x[idx], y[idx])
    return trainer


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 epochs, 32 hidden units")
    parser.add_argument("--strategy", default="reference", help="CPU strategy (default reference)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    x_train, x_test, y_train, y_test = load_split(0)
    start = time.perf_counter()
    trainer = train(cfg, x_train, y_train, args.seed, args.strategy)
    acc = accuracy(trainer.params, x_test, y_test)
    print(f"digits MLP 64-{cfg['hidden']}-{cfg['hidden']}-10, {len(x_train)} train / "
          f"{len(x_test)} test images, strategy {args.strategy}")
    print(f"{trainer.steps} Adam steps of batch {BATCH} in {cfg['epochs']} epochs "
          f"({time.perf_counter() - start:.1f} s); train accuracy "
          f"{accuracy(trainer.params, x_train, y_train):.4f}")
    print(f"test accuracy: {acc:.4f} (target >= {cfg['target']:g})")
    return acc


if __name__ == "__main__":
    main()
