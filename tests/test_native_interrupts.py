"""Ctrl-C inside compiled loops: a per-pixel ``while`` that never ends, a
long finite ``while``, a long ``scan`` and native-whole's loop nests all
return promptly when the caller presses Ctrl-C, on the calling thread and on
the pool, and the next call is exact.

Generated loops read the call's stop flag every ``ISK_POLL`` iterations
(``codegen.host``); on the calling thread a SIGINT handler of the tile
driver's sets that flag while C code runs (``pool.interruptible``); on the
pool the caller sets it when its wait is interrupted.

Every case runs in a subprocess that installs Python's own SIGINT handler
(a background job's children inherit SIGINT ignored, and Python then
installs none; ``tests/test_faults.py``), sends itself SIGINT half a second
into the call, and exits 2 if the call is still running 20 s later (then
the loops did not read the flag). The bound on the latency, 1 s, is ten
times the 100 ms the design asks for: the test holds on a loaded machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from isokernel import codegen

pytestmark = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                                reason=f"native: {codegen.unavailable_reason()}")

LATENCY_BOUND = 1.0  # seconds from SIGINT to KeyboardInterrupt in the caller

PRELUDE = r'''
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
import os, sys, threading, time
import numpy as np
import isokernel as ik
import isokernel.numpy as inp


def interrupted(call, delay=0.5, patience=20.0):
    """Seconds from a SIGINT sent ``delay`` s into ``call()`` to the
    KeyboardInterrupt it raises; exits 2 when ``call()`` still runs
    ``patience`` s after the signal, 3 when it returned before it."""
    main = threading.main_thread().ident
    sent, done = [], threading.Event()

    def fire():
        time.sleep(delay)
        sent.append(time.perf_counter())
        signal.pthread_kill(main, signal.SIGINT)
        if not done.wait(patience):
            print(f"STUCK: still running {patience:.0f} s after Ctrl-C", flush=True)
            os._exit(2)
    threading.Thread(target=fire, daemon=True).start()
    try:
        call()
    except KeyboardInterrupt:
        done.set()
        return time.perf_counter() - sent[0]
    done.set()
    print("RETURNED before Ctrl-C", flush=True)
    os._exit(3)


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def report(f, endless, finite, reference):
    """Interrupt ``f(*endless)``; then ``f(*finite)`` must give the
    reference's bits."""
    want = reference(*finite)
    assert same_bits(f(*finite), want), "wrong before the interrupt"
    latency = interrupted(lambda: f(*endless))
    print(f"latency={latency:.4f} exact={same_bits(f(*finite), want)}", flush=True)


def counted(x, n):
    """A loop whose condition is the same for every pixel (a counter): one C
    while in each pixel's function, 10^13 steps: finite, but hours long."""
    def one(xi):
        return ik.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 0.5 + 1.0),
                             (0, xi))[1]
    return ik.vmap(one)(x)
'''

HALVING = PRELUDE + r'''
def halve(x):
    return ik.while_loop(lambda s: s > 1.0, lambda s: s * 0.5, x)


pixels, workers = int(sys.argv[1]), int(sys.argv[2])
f = ik.jit(ik.vmap(halve), strategy="native", workers=workers)
reference = ik.jit(ik.vmap(halve), strategy="reference")
finite = np.array([4.0, 3.0]) if pixels == 2 else np.linspace(0.5, 1e6, pixels)
endless = finite.copy()
endless[pixels // 2] = np.inf  # inf * 0.5 is inf: this pixel's loop never ends
report(f, (endless,), (finite,), reference)
'''

COUNTED = PRELUDE + r'''
f = ik.jit(counted, strategy="native")
x = np.linspace(0.0, 1.0, 300)
report(f, (x, 10**13), (x, 40), ik.jit(counted, strategy="reference"))
'''

SCANNED = PRELUDE + r'''
def scanned(steps):
    """A fori_loop of static bounds: a C for loop of ``steps`` steps per pixel."""
    return ik.vmap(lambda xi: ik.fori_loop(0, steps, lambda i, s: s * 0.5 + 1.0, xi))


x = np.linspace(0.0, 1.0, 300)
long_loop = ik.jit(scanned(10**13), strategy="native").lower(x).compile()  # compiled first
latency = interrupted(lambda: long_loop(x))
short = ik.jit(scanned(40), strategy="native")(x)
want = ik.jit(scanned(40), strategy="reference")(x)
print(f"latency={latency:.4f} exact={same_bits(short, want)}", flush=True)
'''

PROGRAM = PRELUDE + r'''
def stencil(u, steps):
    """A time-stepping loop over slices (not row-local): native compiles it as
    one C program whose loop reads the stop flag every step."""
    def step(i, v):
        return inp.concatenate([v[:1], v[1:-1] + 0.25 * (v[2:] - 2.0 * v[1:-1] + v[:-2]),
                                v[-1:]])
    return ik.fori_loop(0, steps, step, u)


x = np.sin(np.linspace(0.0, 3.0, 1000))
long_loop = ik.jit(lambda u: stencil(u, 10**13)).lower(x).compile()  # compiled first
assert "one C function" in dict(long_loop.report().extra)["program"]
latency = interrupted(lambda: long_loop(x))
short = ik.jit(lambda u: stencil(u, 40))(x)
want = ik.jit(lambda u: stencil(u, 40), strategy="reference")(x)
print(f"latency={latency:.4f} exact={same_bits(short, want)}", flush=True)
'''

PRODUCT = PRELUDE + r'''
CHAIN = 16


def product(a, b):
    """Sixteen matrix products in a row: seconds of work in a few buffers."""
    for _ in range(CHAIN):
        a = a @ b
    return a


f = ik.jit(product, strategy="native-whole")
rng = np.random.default_rng(0)


def operands(n):
    return rng.standard_normal((n, n)), rng.standard_normal((n, n)) / np.sqrt(n)


small = operands(300)
f(*small)  # compiled
start = time.perf_counter()
f(*small)
f(*small)
rate = CHAIN * 300**3 / max((time.perf_counter() - start) / 2, 1e-9)  # products a second
n = int(min(2200, max(800, (8.0 * rate / CHAIN) ** (1 / 3))))  # about 8 s of work
big = operands(n)
compiled = f.lower(*big).compile()  # the signal is to find the C code running
latency = interrupted(lambda: compiled(*big))
got = f(*small)
want = ik.jit(product, strategy="reference")(*small)
exact = bool(np.allclose(got, want, rtol=1e-10, atol=1e-10))
print(f"latency={latency:.4f} exact={exact} n={n} full={CHAIN * n**3 / rate:.1f}", flush=True)
'''


FLAG = r"""
import ctypes, os, sys, threading, time
import numpy as np
import isokernel as ik
from isokernel import codegen
from isokernel.codegen.pixel import partition


def halve(x):
    return ik.while_loop(lambda s: s > 1.0, lambda s: s * 0.5, x)


def counted(x):
    def one(xi):
        return ik.while_loop(lambda s: s[0] < 10**13, lambda s: (s[0] + 1, s[1] * 0.5), (0, xi))[1]
    return ik.vmap(one)(x)


def kernel(fn, x, lanes):
    graph = ik.trace(fn, x)
    (region,) = partition(graph, accept=codegen.supports).regions
    body = codegen.emit_body("isk_k_point", region, graph.index, region.modes, lanes=lanes)
    assert body.polls
    library, _ = codegen.build(codegen.host_source([(body, "isk_k")], "k", vector_math=False))
    call = library.isk_k
    call.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return call


x = np.full(1000, np.inf)  # every pixel's loop is endless (or 10^13 steps)
out = np.empty_like(x)
for name, fn, lanes in (("lanes", ik.vmap(halve), True), ("pixel", ik.vmap(halve), False),
                        ("counted", counted, True)):
    call = kernel(fn, x, lanes)
    flag = np.ones(1, np.int32)  # set before the call: it returns at once
    call(x.ctypes.data, out.ctypes.data, 0, x.size, flag.ctypes.data)
    flag[0] = 0  # set by another thread while the call runs (a task that failed)
    setter = threading.Timer(0.3, lambda: flag.__setitem__(0, 1))
    setter.start()
    watchdog = threading.Timer(20.0, lambda: os._exit(2))
    watchdog.daemon = True
    watchdog.start()
    start = time.perf_counter()
    call(x.ctypes.data, out.ctypes.data, 0, x.size, flag.ctypes.data)
    watchdog.cancel()
    print(f"{name}={time.perf_counter() - start - 0.3:.4f}", flush=True)
"""


OWN_HANDLER = PRELUDE + r"""
f = ik.jit(counted, strategy="native")
x = np.linspace(0.0, 1.0, 8)
want = f(x, 10**6)  # uninterrupted: a block of 256 rows, 10^6 steps each (about a second)
hits = []
signal.signal(signal.SIGINT, lambda *_: hits.append(1))  # a handler of the user's own
threading.Timer(0.2, lambda: signal.pthread_kill(threading.main_thread().ident,
                                                 signal.SIGINT)).start()
got = f(x, 10**6)
time.sleep(0.3)
print(f"same={same_bits(got, want)} hits={len(hits)}", flush=True)
"""

LEFT_IN_PLACE = PRELUDE + r"""
from isokernel.backends.cpu import pool

driver = pool._signal_driver()
flag = np.zeros(1, np.int32)
first = driver.watch_sigint(flag.ctypes.data)
again = driver.watch_sigint(flag.ctypes.data)  # never unwatched in between
driver.unwatch_sigint()
try:
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    time.sleep(1.0)
    raised = False
except KeyboardInterrupt:
    raised = True
print(f"first={first} again={again} flag={flag[0]} raised={raised}", flush=True)
"""


def _run(script: str, *args: str) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=240, env=env)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    fields = dict(item.split("=") for item in done.stdout.split())
    return fields


def _assert_prompt_and_exact(fields: dict[str, str]) -> None:
    assert fields["exact"] == "True", fields
    assert float(fields["latency"]) < LATENCY_BOUND, fields


def test_a_kernel_returns_once_its_stop_flag_is_set():
    """Without signals: kernels whose every pixel loops for ever (a
    lane-wise block, one C while per pixel, a counter loop) return when
    their stop flag is set, before the call or by another thread during it
    (as when another task of the call failed)."""
    fields = _run(FLAG)
    assert set(fields) == {"lanes", "pixel", "counted"}
    assert all(float(v) < LATENCY_BOUND for v in fields.values()), fields


def test_ctrl_c_ends_a_per_pixel_while_that_never_ends_and_the_next_call_is_exact():
    """The reproducer: ``vmap(while_loop)`` over ``[4.0, inf]`` (inf * 0.5
    is inf, so one pixel never stops) on native: a small call, one kernel
    call on the calling thread."""
    _assert_prompt_and_exact(_run(HALVING, "2", "2"))


@pytest.mark.parametrize("workers", [2, 1])
def test_ctrl_c_ends_an_endless_pixel_of_a_large_call(workers):
    """2^17 pixels, one of them endless: slices on the pool (two workers:
    the caller's interrupted wait sets the call's flag) or on the calling
    thread (one worker)."""
    _assert_prompt_and_exact(_run(HALVING, str(2**17), str(workers)))


def test_ctrl_c_ends_a_long_finite_while():
    """A counter loop of 10^13 steps in every pixel's function."""
    _assert_prompt_and_exact(_run(COUNTED))


def test_ctrl_c_ends_a_long_scan():
    """A static fori_loop of 10^13 steps: a C for loop per pixel."""
    _assert_prompt_and_exact(_run(SCANNED))


def test_ctrl_c_ends_a_loop_of_a_whole_program():
    """A fori_loop of 10^13 steps over slices, which native (the default)
    compiles as one C program: the loop reads the stop flag every step."""
    _assert_prompt_and_exact(_run(PROGRAM))


def test_ctrl_c_ends_native_whole_inside_its_loop_nests():
    """Matrix products of several seconds in one generated function
    (``native-whole``) return within the bound, and the process stays
    usable: the next call is right."""
    fields = _run(PRODUCT)
    _assert_prompt_and_exact(fields)
    assert float(fields["full"]) > 2 * LATENCY_BOUND, fields  # it would have run that long


def test_a_sigint_handler_of_the_users_own_runs_and_the_call_completes():
    """With a handler that does not raise, Ctrl-C does not cut the call
    short: the handler runs once and the call gives its full result."""
    fields = _run(OWN_HANDLER)
    assert fields == {"same": "True", "hits": "1"}, fields


def test_a_handler_left_in_place_keeps_the_one_it_replaced():
    """If a watch is never undone (Python raised KeyboardInterrupt on
    entering the block's ``__exit__``), the next watch keeps the handler
    that was there before it, and undoing it restores Python's own: Ctrl-C
    then raises KeyboardInterrupt and no longer sets the flag."""
    fields = _run(LEFT_IN_PLACE)
    assert fields == {"first": "1", "again": "1", "flag": "0", "raised": "True"}, fields
