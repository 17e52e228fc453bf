"""The tau-omega forward model and the soil-moisture retrieval on an NVIDIA
GPU: isokernel's cuda-megakernel and cuda-eager against cupy.fuse, JAX
``jit`` and ``torch.compile``, with the device-to-device copy bandwidth
measured in the same run as the physical limit.

Every candidate runs the same model: the isokernel strategies compile the
recorded graph; cupy.fuse, JAX and torch run that op sequence replayed with
their own operations (scalar constants as scalars, as a hand port would
write them), traced once and compiled by their own compilers. Inputs are
device arrays made once per case (shared with JAX and torch through
DLPack, no copy); outputs stay on the device; each timing is the best of
``--repeats`` calls, each followed by a device synchronization.

For each case (model x dtype x pixels) and candidate: milliseconds,
Mpixel/s, achieved GB/s over the model's own input and output bytes, that
as a fraction of the copy bandwidth, the speed ratio of the megakernel to
the candidate, and the largest ulp distance of its outputs from the
megakernel's (on the first 10⁶ pixels). For the retrieval, the arithmetic
intensity of eager and megakernel from the recording (flop per byte moved)
and as achieved (flop/s).

Robust by construction: each candidate is time-boxed (``--candidate-timeout``,
SIGALRM), the whole run has a budget (``--budget`` seconds; what does not fit
is recorded as skipped), one failure is recorded and the rest go on, and
the JSON (``--out``, default benchmarks/results/) is rewritten after every
measurement, so a crash keeps everything measured before it.

    python benchmarks/gpu_forward.py [--pixels 1e7 1e8] [--dtypes float32 float64]
        [--models tau_omega retrieval] [--repeats 5] [--budget 170]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with CuPy
os.environ.setdefault("JAX_ENABLE_X64", "1")

import numpy as np  # noqa: E402

import isokernel as ik  # noqa: E402
from isokernel.backends.parity import max_ulp  # noqa: E402
from isokernel.deploy import flops  # noqa: E402
from isokernel.ir import Op  # noqa: E402
from isokernel.transforms import prepare_for_execution  # noqa: E402

ROOT = Path(__file__).resolve().parent
CANDIDATES = ("cuda-megakernel", "cuda-eager", "cupy.fuse", "jax.jit", "torch.compile")
SAMPLE = 1_000_000


# --- the models and their inputs ----------------------------------------------------------

def tau_omega_case(cp, pixels: int, dtype):
    """(function, device inputs) of the forward model, inputs drawn on the GPU
    over the ranges of ``tau_omega.synthetic_inputs``."""
    from isokernel.models.tau_omega import tau_omega
    rs = cp.random.RandomState(0)
    args = (rs.uniform(0.02, 0.5, pixels).astype(dtype), rs.uniform(0.0, 6.0, pixels).astype(dtype),
            rs.uniform(270.0, 320.0, pixels).astype(dtype))
    return tau_omega, args


def retrieval_case(cp, pixels: int, dtype):
    """(function, device inputs) of the retrieval: a 2^20-pixel noise-free
    scene made on the CPU, tiled on the GPU to ``pixels``."""
    from isokernel.models.soil_moisture import retrieve, scene_inputs
    from isokernel.models.soil_moisture.scene import generate_scene
    scene = generate_scene(1 << 20, seed=0, noise=False)
    tiles = -(-pixels // (1 << 20))
    args = tuple(cp.tile(cp.asarray(a), tiles)[:pixels]
                 for a in scene_inputs(scene, np.dtype(dtype).name))

    def retrieval(*xs):
        out = retrieve(*xs)
        return out["mv"], out["eps_re"], out["vwc"]
    return retrieval, args


MODELS = {"tau_omega": tau_omega_case, "retrieval": retrieval_case}


# --- replaying the recorded graph with another framework ----------------------------------

def replay_rules(xp, name: str) -> dict:
    """Op -> function for a NumPy-like namespace (CuPy, jax.numpy, torch)."""
    torch = name == "torch"
    names = {Op.NEG: "negative", Op.ABS: "abs", Op.SQRT: "sqrt", Op.EXP: "exp", Op.LOG: "log",
             Op.LOG1P: "log1p", Op.EXPM1: "expm1", Op.SIN: "sin", Op.COS: "cos",
             Op.TANH: "tanh", Op.FLOOR: "floor", Op.CEIL: "ceil", Op.ADD: "add",
             Op.SUB: "subtract", Op.MUL: "multiply", Op.DIV: "divide", Op.MAX: "maximum",
             Op.MIN: "minimum", Op.POW: "pow" if torch else "power",
             Op.EQ: "eq" if torch else "equal",
             Op.NE: "not_equal", Op.LT: "less", Op.LE: "less_equal", Op.GT: "greater",
             Op.GE: "greater_equal", Op.AND: "logical_and", Op.OR: "logical_or",
             Op.NOT: "logical_not", Op.ATAN2: "arctan2" if not torch else "atan2",
             Op.ROUND: "round" if torch else "rint", Op.TRUNC: "trunc", Op.SIGN: "sign"}
    rules = {op: getattr(xp, fn) for op, fn in names.items() if hasattr(xp, fn)}
    rules[Op.SELECT] = xp.where
    rules[Op.CAST] = _cast(xp, torch)
    rules[Op.BROADCAST] = _broadcast(xp)
    rules[Op.RESHAPE] = lambda x, *, shape: xp.reshape(x, shape)
    return rules


def _cast(xp, torch: bool):
    if torch:
        import torch as t
        kinds = {np.dtype(np.float32): t.float32, np.dtype(np.float64): t.float64,
                 np.dtype(np.int32): t.int32, np.dtype(np.int64): t.int64,
                 np.dtype(np.bool_): t.bool}
        return lambda x, *, dtype: x.to(kinds[np.dtype(dtype)])
    return lambda x, *, dtype: x.astype(dtype)


def _broadcast(xp):
    def rule(x, *, shape, dims):
        if not dims:  # a scalar: the elementwise ops broadcast it themselves
            return x
        expanded = [1] * len(shape)
        for size, d in zip(x.shape, dims):
            expanded[d] = size
        return xp.broadcast_to(xp.reshape(x, expanded), shape)
    return rule


def replay(graph, rules, constant):
    """A function of the graph's inputs that runs its nodes with ``rules``;
    ``constant(numpy value)`` makes a constant."""
    consts = {n: constant(n.attrs["value"].value) for n in graph.consts()}
    missing = {n.op.value for n in graph.nodes if n.op not in rules and n.op is not Op.INPUT
               and n.op is not Op.CONST}
    if missing:
        raise NotImplementedError(f"no replay rule for {sorted(missing)}")

    def run(*args):
        env = dict(zip(graph.inputs, args))
        env.update(consts)
        for node in graph.nodes:
            if node not in env:
                env[node] = rules[node.op](*(env[x] for x in node.inputs), **node.attrs)
        return tuple(env[x] for x in graph.outputs)
    return run


# --- candidates: (prepare -> run) ---------------------------------------------------------

def prepare(name: str, fn, graph, args, cp):
    """A callable running the candidate on ``args`` (device arrays) and
    returning device outputs, compiled and warmed up."""
    if name.startswith("cuda-"):
        jitted = ik.jit(fn, strategy=name)
        return lambda: jitted(*args)
    if name == "cupy.fuse":
        rules = replay_rules(cp, "cupy")
        fused = cp.fuse(replay(graph, rules, lambda v: v[()] if v.ndim == 0 else cp.asarray(v)))
        return lambda: fused(*args)
    if name == "jax.jit":
        import jax
        import jax.numpy as jnp
        jargs = tuple(jax.dlpack.from_dlpack(a) for a in args)
        jitted = jax.jit(replay(graph, replay_rules(jnp, "jax"), jnp.asarray))
        return lambda: jax.block_until_ready(jitted(*jargs))
    if name == "torch.compile":
        import torch
        targs = tuple(torch.from_dlpack(a) for a in args)
        key = (fn.__name__, str(args[0].dtype), _shape_free(graph))
        compiled = _TORCH.get(key)
        if compiled is None:  # one compile per model and dtype: dynamic sizes
            constant = lambda v: torch.as_tensor(v, device="cuda")  # noqa: E731
            compiled = torch.compile(replay(graph, replay_rules(torch, "torch"), constant),
                                     dynamic=True)
            if key[2]:
                _TORCH[key] = compiled
        return lambda: compiled(*targs)
    raise ValueError(name)


_TORCH: dict = {}


def _shape_free(graph) -> bool:
    """True when the replay uses no recorded shape (every broadcast is of a
    scalar, no reshape): one compiled function then serves every size."""
    return all(n.op is not Op.RESHAPE and (n.op is not Op.BROADCAST or not n.attrs["dims"])
               for n in graph.nodes)


def to_cupy(cp, value):
    if isinstance(value, cp.ndarray):
        return value
    return cp.from_dlpack(value)


def synchronize(cp) -> None:
    cp.cuda.Device().synchronize()
    with contextlib.suppress(Exception):
        if "torch" in sys.modules:
            sys.modules["torch"].cuda.synchronize()


def best_time(run, cp, repeats: int) -> tuple[float, tuple]:
    out = run()
    synchronize(cp)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        synchronize(cp)
        best = min(best, time.perf_counter() - start)
    return best, out


class Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def fire(signum, frame):
        raise Timeout(f"over {seconds:.0f} s")
    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def release_memory(cp) -> None:
    """Give back what the frameworks cache between cases."""
    import gc
    gc.collect()
    with contextlib.suppress(Exception):
        from isokernel.backends.cuda.runtime import device_allocators
        for cache in device_allocators():
            cache.clear()
    cp.get_default_memory_pool().free_all_blocks()
    with contextlib.suppress(Exception):
        if "torch" in sys.modules:
            sys.modules["torch"].cuda.empty_cache()


# --- one run ------------------------------------------------------------------------------

def copy_bandwidth(cp, nbytes: int, repeats: int) -> float:
    """Bytes per second (read + write) of a device-to-device copy."""
    src = cp.ones(nbytes // 8, dtype=cp.float64)
    dst = cp.empty_like(src)
    seconds, _ = best_time(lambda: cp.copyto(dst, src) or (dst,), cp, repeats)
    return 2 * nbytes / seconds


def io_bytes(args, outs) -> int:
    return sum(int(a.nbytes) for a in args) + sum(int(o.nbytes) for o in outs)


def distance(cp, outs, reference) -> float:
    worst = 0.0
    for got, want in zip(outs, reference):
        got = to_cupy(cp, got).reshape(-1)[:SAMPLE].get()
        want = want.reshape(-1)[:SAMPLE].get()
        worst = max(worst, max_ulp(got.astype(want.dtype), want))
    return worst


class Run:
    """The measurements so far, written out after each one."""

    def __init__(self, path: Path, meta: dict):
        self.path = path
        self.data = {**meta, "results": [], "intensity": {}, "notes": []}

    def add(self, row: dict) -> None:
        self.data["results"].append(row)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        os.replace(tmp, self.path)


def run_case(run: Run, cp, model: str, dtype, pixels: int, opts, deadline: float) -> None:
    dtype = np.dtype(dtype)
    fn, args = MODELS[model](cp, pixels, dtype)
    graph = prepare_for_execution(ik.trace(fn, *(ik.ShapeDtype(a.shape, a.dtype) for a in args)))
    reference = None
    base = {"model": model, "dtype": dtype.name, "pixels": pixels}
    for name in opts.candidates:
        remaining = deadline - time.monotonic()
        if remaining < 5:
            run.add({**base, "candidate": name, "status": "skipped: time budget spent"})
            continue
        row = {**base, "candidate": name}
        try:
            with time_limit(min(opts.candidate_timeout, remaining)):
                start = time.perf_counter()
                runner = prepare(name, fn, graph, args, cp)
                seconds, outs = best_time(runner, cp, opts.repeats)
                row["prepare_s"] = round(time.perf_counter() - start - seconds * opts.repeats, 2)
            outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
            nbytes = io_bytes(args, [to_cupy(cp, o) for o in outs])
            row.update(status="ok", ms=seconds * 1e3, mpixel_s=pixels / seconds / 1e6,
                       gb_s=nbytes / seconds / 1e9, bytes=nbytes,
                       copy_fraction=nbytes / seconds / run.data["copy_bytes_per_s"])
            if reference is None:
                reference = tuple(to_cupy(cp, o) for o in outs)
                row["ulp_vs_megakernel"] = 0.0
            else:
                row["ulp_vs_megakernel"] = distance(cp, outs, reference)
            if model == "retrieval" and name in ("cuda-eager", "cuda-megakernel"):
                row["achieved_gflop_s"] = flops(graph) / seconds / 1e9
            del outs, runner
        except Exception as err:  # one candidate failing must not stop the others
            row.update(status=f"error: {type(err).__name__}: {err}"[:500],
                       trace=traceback.format_exc()[-1500:])
        run.add(row)
        release_memory(cp)
    del reference, args
    release_memory(cp)


def intensities(run: Run) -> None:
    """Arithmetic intensity of the retrieval from its recording."""
    from isokernel.deploy import intensity, roofline_knee
    from isokernel.models.soil_moisture import retrieve, scene_inputs
    from isokernel.models.soil_moisture.scene import generate_scene
    for dtype in ("float32", "float64"):
        graph = ik.trace(retrieve, *scene_inputs(generate_scene(1000, noise=False), dtype))
        found = {s: intensity(graph, s) for s in ("cuda-eager", "cuda-megakernel")}
        knee = roofline_knee(run.data.get("device"), double=dtype == "float64")
        run.data["intensity"][dtype] = {
            s: {"flop_per_byte": i.value, "flops": i.flops, "bytes": i.bytes}
            for s, i in found.items()} | {"knee": str(knee) if knee else None}
    run.save()


# --- the table ----------------------------------------------------------------------------

def table(data: dict) -> str:
    lines = [f"device: {data.get('device')}; copy bandwidth {data['copy_bytes_per_s'] / 1e9:.0f} "
             f"GB/s (device-to-device, same run)", "",
             f"{'model':<10}{'dtype':<8}{'pixels':>7}  {'candidate':<16}{'ms':>9}{'Mpix/s':>9}"
             f"{'GB/s':>8}{'%copy':>7}{'mk speed-up':>12}  ulp vs mk / status"]
    rows = data["results"]
    for r in rows:
        head = f"{r['model']:<10}{r['dtype']:<8}{r['pixels']:>7.0e}  {r['candidate']:<16}"
        if r.get("status") != "ok":
            lines.append(f"{head}{'':>45}  {r.get('status')}")
            continue
        mk = next((x for x in rows if x.get("status") == "ok" and x["candidate"] ==
                   "cuda-megakernel" and all(x[k] == r[k] for k in ("model", "dtype", "pixels"))),
                  None)
        ratio = f"{r['ms'] / mk['ms']:.2f}x" if mk else "-"
        lines.append(f"{head}{r['ms']:>9.3f}{r['mpixel_s']:>9.0f}{r['gb_s']:>8.0f}"
                     f"{100 * r['copy_fraction']:>6.0f}%{ratio:>12}  "
                     f"{r.get('ulp_vs_megakernel', float('nan')):.0f}")
    for dtype, found in data.get("intensity", {}).items():
        eager, mega = found["cuda-eager"], found["cuda-megakernel"]
        lines.append(f"retrieval {dtype}: arithmetic intensity eager {eager['flop_per_byte']:.3g}"
                     f" vs megakernel {mega['flop_per_byte']:.3g} flop/B "
                     f"({mega['flop_per_byte'] / eager['flop_per_byte']:.0f}x); knee "
                     f"{found['knee']}")
    return "\n".join(lines)


def versions() -> dict:
    found = {"python": sys.version.split()[0], "numpy": np.__version__}
    for name in ("cupy", "jax", "torch", "triton"):
        try:
            found[name] = __import__(name).__version__
        except Exception as err:  # noqa: BLE001 - absent or broken: say which
            found[name] = f"unavailable ({type(err).__name__})"
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pixels", nargs="+", type=float, default=[1e7, 1e8])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES),
                        choices=list(CANDIDATES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=170.0, help="seconds for everything")
    parser.add_argument("--candidate-timeout", type=float, default=40.0)
    parser.add_argument("--out", default=str(ROOT / "results"))
    opts = parser.parse_args(argv)
    deadline = time.monotonic() + opts.budget
    import cupy as cp
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    meta = {"benchmark": "gpu_forward", "started": stamp, "versions": versions(),
            "device": name.decode() if isinstance(name, bytes) else str(name),
            "repeats": opts.repeats, "budget_s": opts.budget}
    run = Run(Path(opts.out) / f"gpu_forward-{stamp}.json", meta)
    print(f"writing {run.path}", flush=True)
    run.data["copy_bytes_per_s"] = copy_bandwidth(cp, 1 << 31, opts.repeats)
    run.save()
    with contextlib.suppress(Exception):
        intensities(run)
    for model in opts.models:
        for dtype in opts.dtypes:
            for pixels in sorted(int(p) for p in opts.pixels):
                run_case(run, cp, model, dtype, pixels, opts, deadline)
                print(f"done {model} {dtype} {pixels:.0e} ({deadline - time.monotonic():.0f} s "
                      f"left)", flush=True)
    text = table(run.data)
    print(text)
    run.path.with_suffix(".txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
