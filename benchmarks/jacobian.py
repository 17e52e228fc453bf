"""Dense Jacobians and Hessians: which direction, and what it costs.

1. A scalar function of P = 2048 inputs. Its dense Jacobian (a gradient) by
   ``isokernel.jacobian`` (which picks reverse mode: 1 output < P inputs),
   against P forward passes: ``jacfwd`` (P tangent directions batched into
   one vmapped pass, the best forward mode can do) and a loop of P jitted
   ``jvp`` calls with basis tangents (literally P passes). The floor is one
   evaluation of the function (a gradient costs a small constant times that,
   the cheap-gradient principle); the memory-bandwidth time for the input
   and output bytes is printed beside it.
2. The Hessian of a PINN residual loss with respect to the 49 parameters of
   a 16-unit tanh MLP: forward over reverse through a vmapped second
   derivative (fourth-order derivatives of the network in all).

Everything runs jitted and cached; timings are best of N, the contenders
interleaved so they see the same machine state. JAX (``jax.jit``, x64) and
Quabla (``quabla.jit``) run the same models when installed
(``pip install -e .[bench]``); otherwise they are skipped with a note.
Outputs are allocated by each framework per call (forward mode's P x P
intermediates page-fault on every call: that is part of its cost here).

    python benchmarks/jacobian.py [--size 2048] [--repeats 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import isokernel as ik
import isokernel.numpy as inp

BANDWIDTH_GBS = 10.0  # a conservative single-core streaming figure for the floor line


def scalar_model(ns, x):
    """Elementwise work and three reductions: about a dozen ops on P values."""
    return ns.sum(ns.tanh(x) * ns.sin(x)) + 0.5 * ns.sum(x * x) * ns.mean(ns.cos(x))


def pinn_loss(ns, grad, vmap, theta, xs, source):
    """Mean squared residual of u'' + source at the collocation points, plus
    the boundary terms, for u(x) = w2 . tanh(w1 x + b1) + b2 (theta has 49)."""
    def u(theta, x):
        hidden = ns.tanh(theta[0:16] * x + theta[16:32])
        return ns.sum(theta[32:48] * hidden) + theta[48]
    u_xx = grad(grad(u, argnums=1), argnums=1)
    residual = vmap(u_xx, in_axes=(None, 0))(theta, xs) + source
    return ns.mean(residual * residual) + u(theta, 0.0) ** 2 + u(theta, 1.0) ** 2


def best_of(fn, args, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def interleaved(contenders: dict, repeats: int) -> dict:
    """Best time of each contender over ``repeats`` calls, five rounds."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(5):
        for name, (fn, args) in contenders.items():
            best[name] = min(best[name], best_of(fn, args, max(1, repeats // 5)))
    return best


def isokernel_jacobian(size: int):
    x = np.linspace(-1.0, 1.0, size)
    f = lambda x: scalar_model(inp, x)  # noqa: E731
    jac = ik.jit(ik.jacobian(f))
    fwd = ik.jit(ik.jacfwd(f))
    value = ik.jit(f)
    push = ik.jit(lambda x, t: ik.jvp(f, (x,), (t,))[1])
    basis = np.eye(size)

    def p_forward_passes(x):
        out = np.empty(size)
        for i in range(size):
            out[i] = push(x, basis[i])
        return out
    reference = jac(x)
    np.testing.assert_allclose(fwd(x), reference, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(p_forward_passes(x), reference, rtol=1e-12, atol=1e-14)
    mode = ik.transforms.jacobian_mode(size, 1)
    nodes = len(jac.lower(x).graph.nodes)
    return x, reference, {"f (one evaluation)": (value, (x,)), "jacobian": (jac, (x,)),
                          "jacfwd (P batched)": (fwd, (x,))}, p_forward_passes, mode, nodes


def jax_contenders(x, reference) -> dict:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("  JAX not installed: skipped (pip install -e .[bench])")
        return {}
    jax.config.update("jax_enable_x64", True)
    f = lambda x: scalar_model(jnp, x)  # noqa: E731
    rev = jax.jit(jax.jacrev(f))
    fwd = jax.jit(jax.jacfwd(f))
    xj = jnp.asarray(x)
    np.testing.assert_allclose(np.asarray(rev(xj)), reference, rtol=1e-12, atol=1e-14)
    block = lambda g: (lambda a: g(a).block_until_ready())  # noqa: E731
    return {"JAX jit(jacrev)": (block(rev), (xj,)), "JAX jit(jacfwd)": (block(fwd), (xj,))}


def quabla_contenders(x, reference) -> dict:
    try:
        import quabla as q
    except ImportError:
        print("  Quabla not installed: skipped (pip install -e .[bench])")
        return {}
    jac = q.jit(q.jacobian(lambda x: scalar_model(q, x)))
    np.testing.assert_allclose(np.asarray(jac(x)), reference, rtol=1e-12, atol=1e-14)
    return {"Quabla jit(jacobian)": (lambda a: np.asarray(jac(a)), (x,))}


def report(best: dict, base: str, note: dict) -> None:
    for name, seconds in best.items():
        ratio = seconds / best[base]
        print(f"  {name:26s} {seconds * 1e3:10.3f} ms   {ratio:9.2f}x {base}"
              f"{note.get(name, '')}")


def jacobian_section(size: int, repeats: int) -> dict:
    x, reference, contenders, p_passes, mode, nodes = isokernel_jacobian(size)
    print(f"[1] dense Jacobian of a scalar function of P = {size} float64 inputs")
    print(f"  isokernel.jacobian takes {mode} mode; its jitted graph has {nodes} nodes")
    contenders.update(jax_contenders(x, reference))
    contenders.update(quabla_contenders(x, reference))
    best = interleaved(contenders, repeats)
    best["P jitted jvp passes"] = best_of(p_passes, (x,), 2)
    report(best, "jacobian", {})
    floor_s = 2 * size * 8 / (BANDWIDTH_GBS * 1e9)
    print(f"  bandwidth floor for {2 * size * 8} bytes in and out at {BANDWIDTH_GBS:.0f} GB/s: "
          f"{floor_s * 1e6:.1f} us (the call overheads dominate at this size)")
    speedup = {"vs P jvp passes": best["P jitted jvp passes"] / best["jacobian"],
               "vs jacfwd": best["jacfwd (P batched)"] / best["jacobian"],
               "gradient / f": best["jacobian"] / best["f (one evaluation)"]}
    print(f"  jacobian is {speedup['vs P jvp passes']:.0f}x faster than P forward passes "
          f"(loop) and {speedup['vs jacfwd']:.0f}x faster than batched forward mode; "
          f"a gradient costs {speedup['gradient / f']:.1f}x one evaluation")
    return speedup


def hessian_section(repeats: int) -> dict:
    rng = np.random.default_rng(0)
    theta = np.concatenate([rng.normal(0, 1, 32), rng.normal(0, 0.25, 16), [0.0]])
    xs = np.linspace(0.0, 1.0, 24)
    source = np.pi ** 2 * np.sin(np.pi * xs)
    loss = lambda t: pinn_loss(inp, ik.grad, ik.vmap, t, xs, source)  # noqa: E731
    hess = ik.jit(ik.hessian(loss))
    value = ik.jit(loss)
    reference = hess(theta)
    print("[2] Hessian (49 x 49) of a PINN residual loss: 16-unit tanh MLP, u'' at 24 points")
    print(f"  isokernel jitted Hessian graph: {len(hess.lower(theta).graph.nodes)} nodes")
    contenders = {"loss (one evaluation)": (value, (theta,)), "hessian": (hess, (theta,))}
    contenders.update(_jax_hessian(theta, xs, source, reference))
    contenders.update(_quabla_hessian(theta, xs, source, reference))
    best = interleaved(contenders, repeats)
    report(best, "hessian", {})
    return {"hessian / loss": best["hessian"] / best["loss (one evaluation)"]}


def _jax_hessian(theta, xs, source, reference) -> dict:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    loss = lambda t: pinn_loss(jnp, jax.grad, jax.vmap, t, xs, source)  # noqa: E731
    hess = jax.jit(jax.hessian(loss))
    tj = jnp.asarray(theta)
    np.testing.assert_allclose(np.asarray(hess(tj)), reference, rtol=1e-10, atol=1e-10)
    return {"JAX jit(hessian)": (lambda t: hess(t).block_until_ready(), (tj,))}


def _quabla_hessian(theta, xs, source, reference) -> dict:
    try:
        import quabla as q
    except ImportError:
        return {}
    qxs, qsource = q.asarray(xs), q.asarray(source)  # Quabla wants its own arrays here
    loss = lambda t: pinn_loss(q, q.grad, q.vmap, t, qxs, qsource)  # noqa: E731
    try:
        hess = q.jit(q.hessian(loss))
        np.testing.assert_allclose(np.asarray(hess(theta)), reference, rtol=1e-10, atol=1e-10)
    except Exception as err:  # noqa: BLE001 - report what the other runtime refused
        print(f"  Quabla hessian of this model failed: {type(err).__name__}: {err}")
        return {}
    return {"Quabla jit(hessian)": (lambda t: np.asarray(hess(t)), (theta,))}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    result = jacobian_section(args.size, args.repeats)
    print()
    result.update(hessian_section(args.repeats))
    return result


if __name__ == "__main__":
    main()
