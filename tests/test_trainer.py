"""isokernel.Trainer: one compiled step per batch signature whose N steps
are the bits of the same N steps written by hand with jit, value_and_grad
and optim, on every CPU strategy; parameters and state kept between steps;
save / load resumes the same trajectory."""

from __future__ import annotations

import linecache
import os
import sys
import threading
import time

import numpy as np
import pytest

import isokernel
import isokernel.numpy as inp
from isokernel import optim
from isokernel.train import Trainer

STRATEGIES = ["reference", "threads", "native", "native-whole"]
WIDTH = 8


def _init(seed=0):
    rng = np.random.default_rng(seed)
    return {"w1": rng.standard_normal(WIDTH), "b1": np.zeros(WIDTH),
            "w2": rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH), "b2": np.zeros(WIDTH),
            "w3": rng.standard_normal(WIDTH) / np.sqrt(WIDTH), "b3": np.zeros(())}


def _u(p, x):
    h = inp.tanh(p["w1"] * x + p["b1"])
    h = inp.tanh(inp.dot(p["w2"], h) + p["b2"])
    return inp.dot(p["w3"], h) + p["b3"]


def pinn_loss(p, xs):
    """1-D Poisson: mean((u'' + pi^2 sin(pi x))^2) + u(0)^2 + u(1)^2."""
    uxx = isokernel.vmap(isokernel.grad(isokernel.grad(_u, argnums=1), argnums=1),
                         in_axes=(None, 0))(p, xs)
    r = uxx + inp.pi ** 2 * inp.sin(inp.pi * xs)
    return inp.mean(r * r) + _u(p, 0.0) ** 2 + _u(p, 1.0) ** 2


def _optimizer():
    return optim.chain(optim.clip_by_global_norm(10.0),
                       optim.adam(optim.exponential_decay(1e-2, 5, 0.9)))


def _by_hand(strategy, steps, xs):
    opt = _optimizer()

    def step(params, state, x):
        loss, grads = isokernel.value_and_grad(pinn_loss)(params, x)
        updates, state = opt.update(grads, state, params)
        return loss, optim.apply_updates(params, updates), state
    jstep = isokernel.jit(step, strategy=strategy)
    params = _init()
    state = opt.init(params)
    losses = []
    for _ in range(steps):
        loss, params, state = jstep(params, state, xs)
        losses.append(loss)
    return losses, params, state


def _bits(tree) -> list[bytes]:
    return [np.asarray(x).tobytes() for x in isokernel.tree_flatten(tree)[0]]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_steps_are_the_hand_written_bits(strategy):
    xs = np.linspace(0.0, 1.0, 32)
    losses, params, state = _by_hand(strategy, 12, xs)
    trainer = Trainer(pinn_loss, _init(), _optimizer(), strategy=strategy)
    ours = [trainer.step(xs) for _ in range(12)]
    assert _bits(ours) == _bits(losses)
    assert _bits(trainer.params) == _bits(params)
    assert _bits(trainer.opt_state) == _bits(state)
    assert losses[-1] < losses[0]
    assert trainer.compiled.lowered.strategy.name == strategy


def test_one_compilation_per_batch_signature():
    trainer = Trainer(pinn_loss, _init(), optim.adam(1e-3), strategy="reference")
    for _ in range(3):
        trainer.step(np.linspace(0.0, 1.0, 16))
    first = trainer.compiled
    trainer.step(np.linspace(0.0, 1.0, 16))
    assert trainer.compiled is first and len(trainer._calls) == 1
    trainer.step(np.linspace(0.0, 1.0, 24))
    assert len(trainer._calls) == 2 and trainer.steps == 5


def test_params_are_copies_and_the_callers_arrays_are_untouched():
    params = _init()
    before = _bits(params)
    trainer = Trainer(pinn_loss, params, optim.sgd(1e-3), strategy="reference")
    trainer.step(np.linspace(0.0, 1.0, 8))
    assert _bits(params) == before
    got = trainer.params
    got["w1"][:] = 0.0
    assert np.any(trainer.params["w1"] != 0.0)


def test_has_aux_returns_the_aux_tree():
    def loss(p, xs):
        value = pinn_loss(p, xs)
        return value, {"twice": 2.0 * value}
    trainer = Trainer(loss, _init(), optim.adam(1e-3), strategy="reference", has_aux=True)
    value, aux = trainer.step(np.linspace(0.0, 1.0, 8))
    assert np.asarray(aux["twice"]).tobytes() == np.asarray(2.0 * value).tobytes()


def test_save_and_load_resume_the_same_trajectory(tmp_path):
    xs = np.linspace(0.0, 1.0, 16)
    straight = Trainer(pinn_loss, _init(), _optimizer(), strategy="reference")
    for _ in range(6):
        straight.step(xs)
    first = Trainer(pinn_loss, _init(), _optimizer(), strategy="reference")
    for _ in range(3):
        first.step(xs)
    first.save(tmp_path / "run.npz")
    resumed = Trainer.load(tmp_path / "run.npz", pinn_loss, _optimizer(), strategy="reference")
    assert resumed.steps == 3
    for _ in range(3):
        resumed.step(xs)
    assert _bits(resumed.params) == _bits(straight.params)
    assert _bits(resumed.opt_state) == _bits(straight.opt_state)


def test_load_refuses_another_optimizer(tmp_path):
    trainer = Trainer(pinn_loss, _init(), optim.adam(1e-3), strategy="reference")
    trainer.save(tmp_path / "run.npz")
    with pytest.raises(ValueError, match="optimizer"):
        Trainer.load(tmp_path / "run.npz", pinn_loss, optim.sgd(1e-3, momentum=0.9))


def test_rejects_a_non_optimizer():
    with pytest.raises(TypeError, match="optim"):
        Trainer(pinn_loss, _init(), object())


def _rosenbrock(p):
    x = p["x"]
    return inp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.filterwarnings("ignore:divide by zero encountered")
def test_lbfgs_steps_get_the_loss_for_the_line_search():
    """L-BFGS's update needs value, grad and value_fn: the Trainer passes
    them, and its steps are those of the hand-written optax-style loop."""
    params = {"x": np.array([-1.2, 1.0, -0.5, 0.8])}
    opt = optim.lbfgs()

    def step(p, state):
        value, grads = isokernel.value_and_grad(_rosenbrock)(p)
        updates, state = opt.update(grads, state, p, value=value, grad=grads,
                                    value_fn=_rosenbrock)
        return value, optim.apply_updates(p, updates), state
    jstep = isokernel.jit(step, strategy="reference")
    p, state = params, opt.init(params)
    trainer = Trainer(_rosenbrock, params, optim.lbfgs(), strategy="reference")
    for _ in range(8):
        loss, p, state = jstep(p, state)
        assert np.asarray(trainer.step()).tobytes() == np.asarray(loss).tobytes()
    assert _bits(trainer.params) == _bits(p)
    assert float(_rosenbrock(trainer.params)) < 0.05 * float(_rosenbrock(params))


def _tanh_net_loss(p, x, y):
    h = inp.tanh(x[:, None] * p["w1"] + p["b1"])
    r = h @ p["w2"] - y
    return inp.mean(r * r)


def test_a_portable_training_run_is_the_same_bits_on_every_cpu_strategy():
    """Portable numerics and deterministic reductions: five Adam steps of a
    small tanh network give the same losses and parameters on reference,
    threads and native (width 2: the C of the portable tanh and its
    gradient, written out per row element, then compiles in seconds)."""
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=2), "b1": np.zeros(2), "w2": rng.normal(size=2) / 3}
    x = np.linspace(-1.0, 1.0, 64)
    y = np.sin(3.0 * x)
    runs = {}
    for strategy in ("reference", "threads", "native"):
        trainer = Trainer(_tanh_net_loss, params, optim.adam(1e-2), strategy=strategy,
                          numerics="portable", deterministic_reductions=True)
        runs[strategy] = ([trainer.step(x, y) for _ in range(5)], trainer.params)
    want = _bits(runs["reference"])
    assert _bits(runs["threads"]) == want and _bits(runs["native"]) == want
    assert runs["reference"][0][-1] < runs["reference"][0][0]


def _steps_from_threads(trainer, n_threads, n_steps, *batch):
    """``n_threads`` threads, started together, each calling ``trainer.step(*batch)``
    ``n_steps`` times; the first error any of them raised is raised here."""
    start = threading.Barrier(n_threads)
    errors = []

    def work():
        try:
            start.wait()
            for _ in range(n_steps):
                trainer.step(*batch)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)
    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("strategy", ["reference", "threads", "native"])
def test_steps_from_several_threads_are_those_of_as_many_sequential_steps(strategy):
    """4 threads x 25 steps on one Trainer: the step counter says 100 and the
    parameters and optimizer state are the bits of 100 sequential steps (every step
    gets the same batch, so the order the threads take turns in does not matter)."""
    n_threads, n_steps = 4, 25
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=2), "b1": np.zeros(2), "w2": rng.normal(size=2) / 3}
    x = np.linspace(-1.0, 1.0, 64)
    y = np.sin(3.0 * x)
    alone = Trainer(_tanh_net_loss, params, optim.adam(1e-2), strategy=strategy)
    for _ in range(n_threads * n_steps):
        alone.step(x, y)
    shared = Trainer(_tanh_net_loss, params, optim.adam(1e-2), strategy=strategy)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as Python can
    try:
        _steps_from_threads(shared, n_threads, n_steps, x, y)
    finally:
        sys.setswitchinterval(switch)
    assert shared.steps == n_threads * n_steps
    assert _bits(shared.params) == _bits(alone.params)
    assert _bits(shared.opt_state) == _bits(alone.opt_state)
    assert len(shared._calls) == 1  # compiled once, not once per thread


def _pause_before_the_state_update(frame, event, arg):
    """A trace function (for the stepping thread): in trainer.py, sleep 2 ms before
    each line that assigns the optimizer state, after the parameters were assigned, so
    that a reader not held off by a lock sees the new parameters with the old state."""
    if not frame.f_code.co_filename.endswith(os.path.join("train", "trainer.py")):
        return None

    def local(frame, event, arg):
        if event == "line" and linecache.getline(
                frame.f_code.co_filename, frame.f_lineno).strip().startswith("self._state ="):
            time.sleep(0.002)
        return local
    return local


def test_a_checkpoint_saved_during_threaded_steps_is_one_step_s_state(tmp_path):
    """Saves from this thread while another steps: each file holds the parameters,
    optimizer state and count of one step of the sequential trajectory."""
    rng = np.random.default_rng(1)
    params = {"w1": rng.normal(size=2), "b1": np.zeros(2), "w2": rng.normal(size=2) / 3}
    x = np.linspace(-1.0, 1.0, 64)
    y = np.sin(3.0 * x)
    alone = Trainer(_tanh_net_loss, params, optim.adam(1e-2), strategy="reference")
    trajectory = [_bits([alone.params, alone.opt_state])]
    for _ in range(30):
        alone.step(x, y)
        trajectory.append(_bits([alone.params, alone.opt_state]))
    shared = Trainer(_tanh_net_loss, params, optim.adam(1e-2), strategy="reference")
    shared.step(x, y)  # compiled here, traced below only while stepping

    def steps():
        sys.settrace(_pause_before_the_state_update)
        for _ in range(29):
            shared.step(x, y)
    stepper = threading.Thread(target=steps)
    stepper.start()
    saved = []
    while stepper.is_alive() or not saved:
        saved.append(tmp_path / f"run{len(saved)}.npz")
        shared.save(saved[-1])
    stepper.join()
    for path in saved:
        resumed = Trainer.load(path, _tanh_net_loss, optim.adam(1e-2), strategy="reference")
        assert _bits([resumed.params, resumed.opt_state]) == trajectory[resumed.steps]


@pytest.mark.parametrize("strategy", ["reference", "native"])
def test_evaluate_is_the_forward_loss_without_a_step(strategy):
    """``evaluate`` gives the loss the next step starts from (its bits), changes
    neither the parameters nor the state, and compiles once per signature."""
    trainer = Trainer(pinn_loss, _init(), _optimizer(), strategy=strategy)
    xs, other = np.linspace(0.0, 1.0, 16), np.linspace(0.0, 1.0, 24)
    trainer.step(xs)
    before = _bits(trainer.params)
    value = trainer.evaluate(other)
    assert _bits(trainer.params) == before and trainer.steps == 1
    assert np.asarray(value).tobytes() == np.asarray(trainer.step(other)).tobytes()
    trainer.evaluate(other)
    trainer.evaluate(xs)
    assert len(trainer._evaluations) == 2


def test_evaluate_returns_the_aux_tree():
    def loss(p, xs):
        value = pinn_loss(p, xs)
        return value, {"twice": 2.0 * value}
    trainer = Trainer(loss, _init(), optim.adam(1e-3), strategy="reference", has_aux=True)
    value, aux = trainer.evaluate(np.linspace(0.0, 1.0, 8))
    assert np.asarray(aux["twice"]).tobytes() == np.asarray(2.0 * value).tobytes()
