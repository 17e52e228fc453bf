"""SciML workloads on the CPU under the default strategy, against JAX ``jit``.

Each workload is written the way a new user writes it with isokernel's public
API and no strategy named (``ik.jit(f)``, ``ik.Trainer`` with its defaults),
and once more in JAX (``jax.jit``, optax for the optimizer), float64, CPU:

1. PINN Trainer step: 1-D Poisson, u'' = -pi^2 sin(pi x) on [0, 1] with
   u(0) = u(1) = 0, a tanh MLP 1-32-32-1, 128 collocation points, the
   residual by ``vmap(grad(grad(u)))``, Adam (``isokernel.optim.adam``), one
   ``Trainer.step`` (JAX: one jitted ``value_and_grad`` + optax Adam step).
2. MLP regression Trainer step: tanh MLP 1-16-16-1, mean squared error on
   256 rows.
3. Heat equation: 500 explicit steps of ``u[1:-1] + r (u[2:] - 2 u[1:-1] +
   u[:-2])`` (r = 0.25, fixed ends) on 65,536 points in ``ik.fori_loop``.
4. The same, ``ik.grad`` of the final state's sum of squares with respect to
   the initial state.
5. ``isokernel.linalg.cg`` on a matrix-free 2-D Poisson operator (the
   5-point Laplacian, zero outside the grid), 128 x 128, tol 1e-8 (JAX:
   ``jax.scipy.sparse.linalg.cg``).
6. ``isokernel.random.normal(key, (10**7,))`` (JAX: ``jax.random.normal``);
   its peak memory is printed against the output's 80 MB.
7. tau-omega (``isokernel.models.tau_omega``, 10^6 pixels), Kepler's
   equation by per-pixel Newton in a ``while_loop`` under ``vmap`` (10^6
   pixels, as ``benchmarks/control_flow.py`` writes it; Numba ``prange``
   beside JAX where Numba is installed, tau-omega too) and the flagship
   retrieval (``isokernel.models.soil_moisture.retrieve`` on a synthetic
   noisy scene of 2 x 10^5 pixels; no JAX version) under the default
   strategy, ``threads`` and ``reference``: its rows print their speed
   relative to ``reference`` (reference time / row time) instead of JAX's.

Every workload's candidates are timed in interleaved rounds (every candidate
called once per round, after one warm-up call that compiles; the best call
counts), so a shared, noisy machine slows them alike. Each row prints the
isokernel time, JAX's, the ratio isokernel / JAX (below 1 is faster),
Numba's where it applies, and the peak memory of one more isokernel call,
measured in this process after the warm-up two ways: ``tracemalloc``'s peak
(every NumPy array allocated during the call, the output included) and the
growth of the resident set's high-water mark (``VmHWM`` after resetting it
through ``/proc/self/clear_refs``, minus ``VmRSS`` before the call: memory
allocated in C too, but memory the allocator kept from earlier calls is
reused unseen). Outputs are fresh arrays for every candidate, and fresh
arrays page-fault on first touch: that cost is part of every row. The last
column checks the default strategy's result against the ``reference``
strategy's within the default strategy's contract (relative to each output's
largest magnitude: 1e-9, as the compiled strategies' transcendentals are
ulp-bounded; 1e-6 for ``cg``, whose iterates may take another path within its
tolerance; 1e-8 for the flagship's fixed points; the loss and the parameters
after one Adam step for the Trainers) and, on the flagship, ``threads``' bits
against ``reference``'s. A workload that isokernel refuses prints ``refused: <message>``
in its row.

NumPy's BLAS gets one thread (``OPENBLAS_NUM_THREADS=1`` unless set), as in
``benchmarks/training.py``. JAX, optax and Numba are skipped with a printed
note when missing (``pip install 'isokernel[bench]'``). ``--quick`` runs
every workload at tiny sizes with one round (a smoke run; its figures mean
nothing).

``--cold`` adds the PINN step's first call, each side in fresh interpreters
(isokernel with an empty compile cache), best of two.

    python benchmarks/sciml.py [--rounds 5] [--only heat] [--quick] [--no-others] [--cold]
"""

from __future__ import annotations

import argparse
import math
import os
import tracemalloc
from dataclasses import dataclass, field

# One BLAS thread unless the caller says otherwise, set before NumPy loads OpenBLAS (see
# benchmarks/training.py: a loaded 2-core machine otherwise times the scheduler).
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402 - after the BLAS thread count
from _common import interleaved, jax_adam_step, mlp_params, try_import  # noqa: E402
from _common import pinn_loss as common_pinn_loss  # noqa: E402
from control_flow import kepler, kepler_jax, kepler_numba  # noqa: E402
from cpu_forward import numba_fn, tau_omega_with  # noqa: E402

import isokernel as ik  # noqa: E402
import isokernel.numpy as inp  # noqa: E402
import isokernel.random as rnd  # noqa: E402
from isokernel import optim  # noqa: E402
from isokernel.linalg import cg  # noqa: E402
from isokernel.models.soil_moisture import generate_scene, retrieve, scene_inputs  # noqa: E402
from isokernel.models.tau_omega import synthetic_inputs, tau_omega  # noqa: E402

LEARNING_RATE = 1e-3
HEAT_R = 0.25
CG_TOL = 1e-8
RTOL = 1e-9  # default strategy vs reference: ulp-bounded transcendentals, a few roundings apart

FULL = dict(pinn_points=128, pinn_width=32, mlp_rows=256, mlp_width=16, heat_points=65_536,
            heat_steps=500, cg_n=128, normal=10 ** 7, pixels=10 ** 6, flagship=200_000)
QUICK = dict(pinn_points=16, pinn_width=8, mlp_rows=32, mlp_width=8, heat_points=256,
             heat_steps=20, cg_n=16, normal=10 ** 4, pixels=2_000, flagship=500)


@dataclass
class Workload:
    """One table group: isokernel candidates (label -> callable; the first is the default
    strategy's), the others' (JAX, Numba), the arguments, and the default's check."""
    name: str
    isokernel: dict
    args: tuple
    check: object = None  # () -> str: the default strategy's result against the reference's
    others: dict = field(default_factory=dict)
    baseline: str = "jax"  # "jax", or "reference": rows show reference time / row time
    output_bytes: int = 0  # printed beside the peak where the output's size matters


# --- the models, each written the way a user writes it -------------------------------------

def mlp(ns, p, x):
    """The tanh MLP on rows ``x`` (n, inputs) -> (n,) in the namespace ``ns``."""
    h = x
    for layer in p[:-1]:
        h = ns.tanh(ns.dot(h, layer["w"]) + layer["b"])
    return ns.dot(h, p[-1]["w"])[:, 0] + p[-1]["b"][0]


def pinn_loss(ns, grad, vmap, params, xs):
    """The Poisson loss (``_common.pinn_loss``) with u'' as ``grad`` of ``grad``."""
    return common_pinn_loss(ns, lambda u: grad(grad(u, argnums=1), argnums=1), vmap, params,
                            xs)


def mse_loss(ns, params, x, y):
    return ns.mean((mlp(ns, params, x) - y) ** 2)


def heat(ns, fori_loop, u0, steps):
    """``steps`` explicit steps of the 1-D heat equation, both ends held fixed."""
    def step(_, u):
        interior = u[1:-1] + HEAT_R * (u[2:] - 2.0 * u[1:-1] + u[:-2])
        return ns.concatenate([u[:1], interior, u[-1:]])
    return fori_loop(0, steps, step, u0)


def laplacian(ns, u):
    """The 5-point Laplacian (4 u minus the four neighbours), zero outside the grid."""
    p = ns.pad(u, ((1, 1), (1, 1)))
    return 4.0 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]


# --- the workloads --------------------------------------------------------------------------

def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [np.asarray(tree)]


def close(got, want, rtol=RTOL) -> str:
    """'ok' or what differs: every float leaf of ``got`` within ``rtol`` of ``want``'s,
    relative to that leaf's largest magnitude; integer leaves equal."""
    worst = 0.0
    for a, b in zip(_leaves(got), _leaves(want), strict=True):
        if a.shape != b.shape:
            return f"shape {a.shape} != {b.shape}"
        if not np.issubdtype(b.dtype, np.floating):
            if not np.array_equal(a, b):
                return f"{b.dtype} outputs differ"
            continue
        scale = max(float(np.max(np.abs(b), initial=0.0)), np.finfo(b.dtype).tiny)
        worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)) / scale)
    return (f"ok ({worst:.0e})" if worst else "ok (0)") if worst <= rtol else \
        f"DIFFERS: {worst:.1e} > {rtol:g}"


def jit_check(fn, args, rtol=RTOL):
    """The check of ``ik.jit(fn)``: its result against ``jit(fn, strategy="reference")``'s."""
    return lambda: close(ik.jit(fn)(*args), ik.jit(fn, strategy="reference")(*args), rtol)


def trainer_check(loss, params, batch):
    """One step of a default Trainer against one step of a reference Trainer: the loss
    and the new parameters."""
    def check():
        got, want = (ik.Trainer(loss, params, optim.adam(LEARNING_RATE), **options)
                     for options in ({}, {"strategy": "reference"}))
        return close((got.step(*batch), got.params), (want.step(*batch), want.params))
    return check




def jax_jit(jax, fn):
    jitted = jax.jit(fn)
    return lambda *args: jax.block_until_ready(jitted(*args))


def pinn(size, jax, optax):
    width, points = size["pinn_width"], size["pinn_points"]
    params, xs = mlp_params([1, width, width, 1]), np.linspace(0.0, 1.0, points)
    loss = lambda p, x: pinn_loss(inp, ik.grad, ik.vmap, p, x)  # noqa: E731
    others = {}
    if jax is not None and optax is not None:
        others["jax"] = jax_adam_step(
            jax, optax, lambda p, x: pinn_loss(jax.numpy, jax.grad, jax.vmap, p, x), params,
            LEARNING_RATE)
    return Workload(f"PINN Trainer step (1-{width}-{width}-1, {points} points)",
                    {"default": ik.Trainer(loss, params, optim.adam(LEARNING_RATE)).step},
                    (xs,), trainer_check(loss, params, (xs,)), others)


def mlp_regression(size, jax, optax):
    width, rows = size["mlp_width"], size["mlp_rows"]
    rng = np.random.default_rng(1)
    x = rng.uniform(-1.0, 1.0, (rows, 1))
    y = np.sin(3.0 * x[:, 0])
    params = mlp_params([1, width, width, 1], seed=2)
    loss = lambda p, x, y: mse_loss(inp, p, x, y)  # noqa: E731
    others = {}
    if jax is not None and optax is not None:
        others["jax"] = jax_adam_step(jax, optax,
                                      lambda p, x, y: mse_loss(jax.numpy, p, x, y), params,
                                      LEARNING_RATE)
    return Workload(f"MLP Trainer step (1-{width}-{width}-1, {rows} rows)",
                    {"default": ik.Trainer(loss, params, optim.adam(LEARNING_RATE)).step},
                    (x, y), trainer_check(loss, params, (x, y)), others)


def _heat_start(points):
    x = np.linspace(0.0, 1.0, points)
    return np.sin(np.pi * x) + 0.5 * np.sin(7 * np.pi * x)


def heat_forward(size, jax, optax):
    points, steps = size["heat_points"], size["heat_steps"]
    f = lambda u0: heat(inp, ik.fori_loop, u0, steps)  # noqa: E731
    others = {}
    if jax is not None:
        others["jax"] = jax_jit(jax, lambda u0: heat(jax.numpy, jax.lax.fori_loop, u0, steps))
    u0 = _heat_start(points)
    return Workload(f"heat, {steps} steps on {points:,} points", {"default": ik.jit(f)},
                    (u0,), jit_check(f, (u0,)), others)


def heat_gradient(size, jax, optax):
    points, steps = size["heat_points"], size["heat_steps"]

    def energy(ns, loop, u0):
        u = heat(ns, loop, u0, steps)
        return ns.sum(u * u)
    f = ik.grad(lambda u0: energy(inp, ik.fori_loop, u0))
    others = {}
    if jax is not None:
        others["jax"] = jax_jit(jax, jax.grad(lambda u0: energy(jax.numpy, jax.lax.fori_loop,
                                                                u0)))
    u0 = _heat_start(points)
    return Workload(f"heat grad wrt u0, {steps} steps on {points:,} points",
                    {"default": ik.jit(f)}, (u0,), jit_check(f, (u0,)), others)


def cg_poisson(size, jax, optax):
    n = size["cg_n"]
    y, x = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    b = np.sin(3 * np.pi * x) * np.cos(2 * np.pi * y)
    f = lambda b: cg(lambda u: laplacian(inp, u), b, tol=CG_TOL)[0]  # noqa: E731
    others = {}
    if jax is not None:
        others["jax"] = jax_jit(jax, lambda b: jax.scipy.sparse.linalg.cg(
            lambda u: laplacian(jax.numpy, u), b, tol=CG_TOL)[0])
    # the iterates differ from the reference's by roundings that the Krylov steps amplify
    # within the tolerance: the check's bound is the solve's
    return Workload(f"cg 2-D Poisson {n}x{n}, tol {CG_TOL:g}", {"default": ik.jit(f)}, (b,),
                    jit_check(f, (b,), rtol=1e2 * CG_TOL), others)


def normal(size, jax, optax):
    count = size["normal"]
    f = lambda key: rnd.normal(key, (count,))  # noqa: E731
    others = {}
    if jax is not None:
        draw, jax_key = jax_jit(jax, lambda k: jax.random.normal(k, (count,))), \
            jax.random.PRNGKey(0)
        others["jax"] = lambda _key: draw(jax_key)  # JAX's own key for the same seed
    key = rnd.key(0)
    return Workload(f"random.normal, {count:.0e} draws", {"default": ik.jit(f)}, (key,),
                    jit_check(f, (key,)), others, output_bytes=8 * count)


def tau_omega_workload(size, jax, optax, numba, workers):
    pixels = size["pixels"]
    args = synthetic_inputs(pixels, np.float64)
    others = {}
    if jax is not None:
        others["jax"] = jax_jit(jax, lambda mv, vwc, ts: tau_omega_with(jax.numpy, mv, vwc, ts))
    if numba is not None:
        others["numba"] = numba_fn(numba, np.float64, workers)
    return Workload(f"tau-omega, {pixels:.0e} pixels", {"default": ik.jit(tau_omega)},
                    tuple(args), jit_check(tau_omega, tuple(args)), others)


def kepler_workload(size, jax, optax, numba, workers):
    pixels = size["pixels"]
    rng = np.random.default_rng(0)
    args = (rng.uniform(0.0, 2 * np.pi, pixels), rng.uniform(0.0, 0.9, pixels))
    f = ik.vmap(kepler)
    others = {}
    if jax is not None:
        others["jax"] = kepler_jax(jax, jax.numpy)
    if numba is not None:
        others["numba"] = kepler_numba(numba, workers)
    def check():  # E against the reference's; the step counts may differ by one near TOL
        return close(ik.jit(f)(*args)[0], ik.jit(f, strategy="reference")(*args)[0])
    return Workload(f"Kepler Newton, {pixels:.0e} pixels", {"default": ik.jit(f)}, args,
                    check, others)


def flagship(size, jax, optax, numba, workers):
    pixels = size["flagship"]
    args = tuple(scene_inputs(generate_scene(pixels, seed=5, noise=True)))
    candidates = {"default": ik.jit(retrieve),
                  f"threads ({workers} workers)": ik.jit(retrieve, strategy="threads",
                                                         workers=workers),
                  "reference": ik.jit(retrieve, strategy="reference")}

    def check():
        want = candidates["reference"](*args)
        threads = candidates[f"threads ({workers} workers)"](*args)
        same = all(a.tobytes() == b.tobytes() for a, b in zip(_leaves(threads), _leaves(want)))
        return (f"{close(candidates['default'](*args), want, rtol=1e-8)}; threads "
                + ("bit-identical" if same else "DIFFERS from reference"))
    return Workload(f"flagship retrieval, {pixels:.0e} pixels", candidates, args, check,
                    baseline="reference")


# --- timing and memory ----------------------------------------------------------------------

def _status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_memory(fn, args) -> tuple[int, int | None]:
    """(tracemalloc's peak bytes, the growth of VmHWM over VmRSS in bytes or None) of one
    call of ``fn``."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # reset VmHWM to the current VmRSS
        before = _status_kib("VmRSS")
    except OSError:
        before = None
    tracemalloc.start()
    try:
        fn(*args)
        traced = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    hwm = _status_kib("VmHWM") if before is not None else None
    return traced, None if hwm is None else max(0, hwm - before) * 1024




def _first_line(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"


def picked(fn, args) -> str:
    """The strategy that ``auto`` chose for a jitted function or a Trainer's step (after
    its first call)."""
    trainer = getattr(fn, "__self__", None)
    if isinstance(trainer, ik.Trainer):
        return trainer.compiled.lowered.strategy.name
    return fn.lower(*args).strategy.name


def measure(workload: Workload, rounds: int) -> list[dict]:
    """The table rows of one workload: one per isokernel candidate."""
    rows, refused = {}, {}
    for label, fn in workload.isokernel.items():
        try:
            fn(*workload.args)  # compile and warm up
            rows["isokernel " + label] = fn
        except Exception as err:  # noqa: BLE001 - a refusal is the row's finding
            refused[label] = _first_line(err)
    for label, fn in workload.others.items():
        fn(*workload.args)
        rows[label] = fn
    best = interleaved(rows, workload.args, rounds)
    check = workload.check() if workload.check and "default" not in refused else "-"
    table = []
    for label in workload.isokernel:
        row = {"workload": workload.name, "strategy": label, "check": check}
        if label == "default" and label not in refused:
            row["strategy"] = f"default: {picked(workload.isokernel[label], workload.args)}"
        if label in refused:
            row["refused"] = refused[label]
        else:
            row["seconds"] = best["isokernel " + label]
            row["peak"] = peak_memory(workload.isokernel[label], workload.args)
            row["output_bytes"] = workload.output_bytes
            for other in ("jax", "numba"):
                row[other] = best.get(other)
            if workload.baseline == "reference":
                row["vs reference"] = best.get("isokernel reference")
        table.append(row)
        check = "" if label == "default" else check
    return table


def _ms(t):
    return f"{t * 1e3:10.2f}" if t else f"{'-':>10s}"


def _ratio(t, base):
    return f"{t / base:7.2f}x" if t and base else f"{'-':>8s}"


def print_row(row: dict) -> None:
    name = f"{row['workload']} [{row['strategy']}]"
    if "refused" in row:
        print(f"{name:64s} refused: {row['refused']}")
        return
    traced, hwm = row["peak"]
    peak = f"{traced / 2**20:9.1f} {hwm / 2**20 if hwm is not None else math.nan:9.1f}"
    t = row["seconds"]
    if "vs reference" in row:
        versus = f"{_ms(None)} {'':>8s} {row['vs reference'] / t:7.2f}x vs reference"
    else:
        versus = f"{_ms(row['jax'])} {_ratio(t, row['jax'])} {_ms(row['numba'])} " \
                 f"{_ratio(t, row['numba'])}"
    note = row["check"]
    if row["output_bytes"]:
        note = f"{note}; peak {traced / row['output_bytes']:.1f}x the output"
    print(f"{name:64s} {_ms(t)} {versus} {peak}  {note}")


COLD = """
import os, sys, time
sys.path.insert(0, {here!r})
import numpy as np
from _common import mlp_params
import sciml
params, xs = mlp_params([1, {width}, {width}, 1]), np.linspace(0.0, 1.0, {points})
start = time.perf_counter()
if sys.argv[1] == "isokernel":
    import isokernel as ik
    import isokernel.numpy as inp
    loss = lambda p, x: sciml.pinn_loss(inp, ik.grad, ik.vmap, p, x)
    step = ik.Trainer(loss, params, sciml.optim.adam(sciml.LEARNING_RATE)).step
else:
    import jax, optax
    jax.config.update("jax_enable_x64", True)
    from _common import jax_adam_step
    step = jax_adam_step(jax, optax, lambda p, x: sciml.pinn_loss(jax.numpy, jax.grad, jax.vmap,
                                                                   p, x), params,
                         sciml.LEARNING_RATE)
step(xs)
print(time.perf_counter() - start)
"""


def cold_first_calls(size, runs: int = 2) -> None:
    """The PINN step's first call in a fresh interpreter (imports excluded,
    recording, planning and compiling included), isokernel with an empty
    compile cache, against JAX's first ``jit`` call: best of ``runs``."""
    import subprocess
    import sys
    import tempfile
    script = COLD.format(here=os.path.dirname(os.path.abspath(__file__)),
                         width=size["pinn_width"], points=size["pinn_points"])
    best = {}
    for who in ("isokernel", "jax"):
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, ISOKERNEL_CACHE_DIR=cache)
                done = subprocess.run([sys.executable, "-c", script, who], env=env,
                                      capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                print(f"cold first call, {who}: failed: {done.stderr.strip()[-300:]}")
                break
            best[who] = min(best.get(who, float("inf")), float(done.stdout.split()[-1]))
    if len(best) == 2:
        print(f"{'PINN Trainer step, first call (empty cache), s':64s} "
              f"{best['isokernel']:10.2f} {best['jax']:10.2f} "
              f"{best['isokernel'] / best['jax']:7.2f}x")


WORKLOADS = (pinn, mlp_regression, heat_forward, heat_gradient, cg_poisson, normal)
ROW_LOCAL = (tau_omega_workload, kepler_workload, flagship)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (best counts)")
    parser.add_argument("--workers", type=int, default=2, help="threads' and Numba's workers")
    parser.add_argument("--only", help="run only the workloads whose name contains this")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round (smoke run)")
    parser.add_argument("--no-others", action="store_true", help="isokernel only: no JAX, Numba")
    parser.add_argument("--cold", action="store_true",
                        help="also time the PINN step's first call in fresh processes")
    args = parser.parse_args(argv)
    size, rounds = (QUICK, 1) if args.quick else (FULL, args.rounds)
    notes: list[str] = []
    jax = optax = numba = None
    if not args.no_others:
        jax, optax = try_import("jax", notes), try_import("optax", notes)
        numba = try_import("numba", notes)
        if jax is not None:
            jax.config.update("jax_enable_x64", True)
            import jax.scipy.sparse.linalg  # noqa: F401 - the cg workload's JAX twin
    print(f"SciML workloads, float64, CPU, default strategy; best of {rounds} interleaved "
          f"rounds; CPUs {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"{'workload [isokernel strategy]':64s} {'ms':>10s} {'JAX ms':>10s} {'/ JAX':>8s} "
          f"{'Numba ms':>10s} {'/ Numba':>8s} {'peak MiB':>9s} {'HWM MiB':>9s}  "
          "check against reference")
    table = []
    builders = [(b, ()) for b in WORKLOADS] + [(b, (numba, args.workers)) for b in ROW_LOCAL]
    for build, extra in builders:
        try:
            workload = build(size, jax, optax, *extra)
        except Exception as err:  # noqa: BLE001 - a refusal is the row's finding
            print(f"{build.__name__:64s} refused: {_first_line(err)}")
            table.append({"workload": build.__name__, "strategy": "default",
                          "refused": _first_line(err)})
            continue
        if args.only and args.only not in workload.name:
            continue
        for row in measure(workload, rounds):
            print_row(row)
            table.append(row)
    if args.cold and jax is not None and optax is not None:
        cold_first_calls(size)
    for note in dict.fromkeys(notes):
        print("note:", note)
    return table


if __name__ == "__main__":
    main()
