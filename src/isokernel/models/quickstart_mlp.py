"""The ``isokernel quickstart-mlp`` model: a small tanh MLP trained with Adam
on synthetic data drawn with ``isokernel.random``, one compiled
``isokernel.Trainer`` step per step."""

from __future__ import annotations

import numpy as np

from .. import numpy as inp
from .. import optim
from .. import random as rnd
from ..train import Trainer

QUICKSTART_SIZES = (4, 16, 16, 1)
QUICKSTART_SAMPLES = 256


def _quickstart_data(key):
    """Inputs uniform on [-1, 1) and targets sin(x @ v), both from ``key``."""
    k_x, k_v = rnd.split(key)
    x = rnd.uniform(k_x, (QUICKSTART_SAMPLES, QUICKSTART_SIZES[0]), minval=-1.0)
    v = rnd.uniform(k_v, (QUICKSTART_SIZES[0],), minval=-1.0)
    return x, np.sin(x @ v)


def _quickstart_params(key):
    sizes = QUICKSTART_SIZES
    keys = rnd.split(key, len(sizes) - 1)
    return [{"w": rnd.glorot_uniform(keys[i], (n_in, n_out)), "b": np.zeros(n_out)}
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))]


def _quickstart_loss(params, x, y):
    """Mean squared error of the tanh MLP."""
    h = x
    for layer in params[:-1]:
        h = inp.tanh(inp.dot(h, layer["w"]) + layer["b"])
    pred = inp.dot(h, params[-1]["w"])[:, 0] + params[-1]["b"][0]
    return inp.mean((pred - y) ** 2)


def quickstart_mlp(device: str, strategy: str, steps: int, seed: int, show_backend: bool):
    """Train the quick-start MLP for ``steps`` Adam steps, printing each loss."""
    if steps < 1:
        raise ValueError(f"--steps {steps}: train for at least one step, e.g. --steps 2")
    k_data, k_init = rnd.split(rnd.key(seed))
    x, y = _quickstart_data(k_data)
    trainer = Trainer(_quickstart_loss, _quickstart_params(k_init), optim.adam(1e-2),
                      strategy=strategy, device=device)
    print(f"quickstart-mlp: MLP {'-'.join(map(str, QUICKSTART_SIZES))}, tanh, "
          f"{QUICKSTART_SAMPLES} synthetic samples, Adam(1e-2), seed {seed}, device {device}")
    for i in range(steps):
        print(f"step {i + 1}: loss {float(trainer.step(x, y)):.6f}")
    if show_backend:
        print(trainer.compiled.report())
