"""isokernel.units: quantities checked while recording and erased before
anything runs. Conversions (exact factors, offsets, dB), the UnitError
messages (op, units, line, fix), a stand-in retrieval written with
quantities recording the graph of the same model in bare floats (and the
same bits and C source on every CPU strategy), the report's units, the
transforms and solvers on quantities, and CF unit strings (the five seeded
unit slips are in test_units_flagship.py, in a copy of the flagship)."""

from __future__ import annotations

import inspect
import math
import re
import time

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.units import Quantity as Q
from isokernel.units import UnitError, parse_cf

CPU = ("reference", "threads", "native")
LN10_OVER_10 = math.log(10.0) / 10.0
COS_THETA = math.cos(math.radians(40.0))


def _line(fn, marker: str) -> str:
    """``test_units.py:N`` of the line of ``fn`` holding ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    n = next(i for i, text in enumerate(lines) if marker in text)
    return f"test_units.py:{first + n}"


# --- quantities and conversions -----------------------------------------------------------------

def test_quantity_reads_and_converts():
    q = Q(np.array([21.0, 24.0]), "degC")
    k = q.to("K")
    assert str(k.units) == "kelvin"
    np.testing.assert_array_equal(k.magnitude, np.array([21.0, 24.0]) + 273.15)
    assert q.m_as("K")[0] == 21.0 + 273.15
    assert Q(2.65, "g/cm^3").to("kg/m^3").magnitude == 2650.0
    assert Q(1.0, "g/cm**3").m_as("kg/m**3") == 1000.0  # exact: pint's float path is 999.999...
    assert Q(1.41, "GHz").m_as("Hz") == 1.41 * 1e9
    assert Q(1.0, "degree").m_as("radian") == math.pi / 180.0
    assert Q(50.0, "percent").m_as("1") == 0.5
    assert Q(np.float32(2.0), "km").to("m").magnitude.dtype == np.float32
    assert Q(3.0, "m").shape == () and Q(np.ones((2, 3)), "m").shape == (2, 3)
    assert Q(Q(1.0, "m"), "cm").magnitude == 100.0
    assert repr(Q(2.0, "kg/m**3")) == "Quantity(2.0, 'kg/m**3')"


def test_pint_quantities_are_accepted():
    import pint
    ureg = pint.UnitRegistry()
    q = Q(ureg.Quantity(np.array([1.0, 2.0]), "g/cm**3"))
    assert str(q.units) == "gram / centimeter ** 3"
    np.testing.assert_array_equal(Q(ureg.Quantity(1.5, "GHz"), "Hz").magnitude, 1.5e9)
    assert (Q(1.0, "m") + Q(ureg.Quantity(50.0, "cm"))).magnitude == 1.5


def test_operators_with_arrays_scalars_and_tracers():
    q = Q(np.array([1.0, 2.0]), "m")
    for left in (2.0, np.float64(2.0), np.array([2.0, 2.0])):
        out = left * q
        assert isinstance(out, Q) and str(out.units) == "meter"
    assert isinstance(np.array([1.0, 1.0]) / q, Q)
    assert str((1.0 / q).units) == "1 / meter"

    def f(x, y):  # a bare traced value meets a quantity: the quantity's operators take over
        return x * y, (x * 0.0) < y / Q(1.0, "s")
    product, less = ik.jit(f)(np.array([3.0, 4.0]), Q(np.array([1.0, 2.0]), "s"))
    assert isinstance(product, Q) and str(product.units) == "second"
    np.testing.assert_array_equal(product.magnitude, [3.0, 8.0])
    assert less.dtype == bool


def test_numpy_functions_carry_units():
    x = Q(np.array([1.0, 4.0, 9.0]), "m**2")
    assert str(inp.sqrt(x).units) == "meter"
    assert str(inp.sum(x).units) == "meter ** 2"
    assert str(inp.var(x).units) == "meter ** 4"
    assert str(inp.mean(x).units) == "meter ** 2"
    assert str(inp.concatenate([x, Q(np.ones(1), "cm**2")]).units) == "meter ** 2"
    np.testing.assert_array_equal(inp.concatenate([x, Q(np.ones(1), "cm**2")]).magnitude,
                                  [1.0, 4.0, 9.0, 1e-4])
    assert str(inp.where(x.magnitude > 2.0, x, Q(0.0, "m**2")).units) == "meter ** 2"
    assert inp.isnan(x).dtype == bool
    assert str(inp.arctan2(Q(1.0, "m"), Q(100.0, "cm")).units) == "radian"
    assert inp.sin(Q(30.0, "degree")).magnitude == np.sin(30.0 * (math.pi / 180.0))
    assert str(inp.maximum(Q(1.0, "K"), 0.0).units) == "kelvin"  # a bare 0 meets any unit
    assert str((Q(2.0, "m") ** 3).units) == "meter ** 3"
    assert str(inp.clip(Q(1.0, "m"), Q(50.0, "cm"), Q(2.0, "m")).units) == "meter"
    assert str(inp.einsum("i,i->", x, Q(np.ones(3), "s")).units) == "meter ** 2 * second"
    assert inp.interp(Q(1.5, "m"), Q(np.array([100.0, 200.0]), "cm"),
                      Q(np.array([0.0, 10.0]), "K")).magnitude == 5.0


def test_arrays_of_quantities_and_the_dispatching_functions():
    assert repr(inp.array([Q(1.0, "m"), Q(50.0, "cm")])) == "Quantity(array([1. , 0.5]), 'm')"
    import pickle  # the isokernel.numpy functions hand quantities over and still pickle
    assert pickle.loads(pickle.dumps(inp.exp)) is inp.exp
    assert inspect.signature(inp.where) == inspect.signature(inp.where.__wrapped__)


# --- UnitError messages ---------------------------------------------------------------------------

def test_adding_kelvin_to_a_volume_fraction_names_op_units_line_and_fix():
    def model(tb, mv):
        return tb + mv  # the slip
    with pytest.raises(UnitError) as err:
        ik.jit(model).lower(Q(np.ones(4), "K"), Q(np.ones(4), "m^3/m^3"))
    text = str(err.value)
    assert text.startswith(f"add at {_line(model, 'the slip')}:")
    assert "K ([temperature])" in text and "dimensionless" in text
    assert ".to(" in text


def test_transcendentals_need_dimensionless_arguments():
    def f(t):
        return inp.exp(t)  # here
    with pytest.raises(UnitError) as err:
        ik.jit(f).lower(Q(np.ones(3), "K"))
    text = str(err.value)
    assert text.startswith(f"exp at {_line(f, '# here')}: the argument is in K")
    assert "x / Quantity(1.0, 'K')" in text
    assert inp.exp(Q(np.ones(2), "m/km")).magnitude[0] == np.exp(1e-3)
    for name in ("log", "sin", "tanh", "log10"):
        with pytest.raises(UnitError, match=f"^{name} at "):
            getattr(inp, name)(Q(1.0, "m"))


def test_offset_units_convert_and_are_refused_in_arithmetic():
    c = Q(np.array([20.0, 25.0]), "degC")
    np.testing.assert_array_equal((c.to("K") * 2.0).magnitude, (np.array([20.0, 25.0]) +
                                                                 273.15) * 2.0)
    with pytest.raises(UnitError, match=r"°C is an offset unit.*x\.to\('K'\)"):
        c * 2.0
    with pytest.raises(UnitError, match="offset unit"):
        Q(300.0, "K") + Q(1.0, "degC")
    # order and position do not depend on the zero: comparisons, maximum, where
    assert bool(inp.all(c > Q(290.0, "K")))
    assert str(inp.maximum(c, Q(22.0, "degC")).units) == "degree_Celsius"
    np.testing.assert_array_equal(inp.maximum(Q(np.array([290.0, 300.0]), "K"), c).magnitude,
                                  [293.15, 300.0])


def test_decibels_convert_to_ratios_and_stay_apart_from_them():
    s = Q(np.array([-10.0, -3.0]), "dB")
    lin = s.to("1")
    np.testing.assert_array_equal(lin.magnitude, np.exp(s.magnitude * LN10_OVER_10))
    np.testing.assert_allclose(Q(lin.magnitude, "1").to("dB").magnitude, s.magnitude)
    assert str((s + Q(1.0, "dB")).units) == "decibel"  # dB + dB: gains
    assert str((Q(2.0, "dB") * Q(0.3, "m^3/m^3")).units) == "decibel"  # a dB slope times mv
    with pytest.raises(UnitError, match=r"dB is a logarithmic unit.*x\.to\('1'\)"):
        s - lin
    with pytest.raises(UnitError, match="logarithmic"):
        inp.exp(s)
    with pytest.raises(UnitError, match="logarithmic"):
        s * Q(1.0, "K")


def test_functions_without_a_rule_are_refused():
    with pytest.raises(UnitError, match=r"^bitwise_and at .*no unit rule for bitwise_and"):
        inp.bitwise_and(Q(np.array([1]), "m"), 1)
    with pytest.raises(UnitError, match="conversion to a NumPy array"):
        np.asarray(Q(1.0, "m"))
    with pytest.raises(UnitError, match="pint does not know"):
        Q(1.0, "furlongs_per_blorp")


# --- the stand-in retrieval: quantities against bare floats ---------------------------------------

PARTICLE_DENSITY = Q(2.65, "g/cm^3")
REFERENCE_FREQUENCY = Q(1.0, "GHz")
B_VEG = Q(0.12, "m^2/kg")


def retrieval_q(tb, ts, sigma0, ndvi, vwc, rho_b, freq):
    """mv (m³/m³) from TB, Ts (K), σ0 (dB), NDVI, VWC (kg/m²), bulk density
    (kg/m³) and frequency (Hz): a tau-omega inversion with a backscatter
    weight, written with quantities."""
    gamma = inp.exp(-B_VEG * vwc / COS_THETA)
    r = 1.0 - tb / ts
    smooth = inp.clip(r / gamma, 0.0, 0.9)
    sigma = sigma0.to("1")
    veg = 0.05 * ndvi * COS_THETA * (1.0 - gamma * gamma)
    soil = (sigma - veg) / (gamma * gamma)
    porosity = 1.0 - rho_b / PARTICLE_DENSITY
    loss = 1.0 + 0.1 * inp.log10(freq / REFERENCE_FREQUENCY)
    mv = porosity * inp.sqrt(smooth) * loss + 0.01 * soil
    return {"mv": inp.clip(mv, 0.0, porosity), "gamma": gamma}


def retrieval_bare(tb, ts, sigma0, ndvi, vwc, rho_b, freq):
    """``retrieval_q`` in bare floats in consistent units."""
    gamma = inp.exp(-0.12 * vwc / COS_THETA)
    r = 1.0 - tb / ts
    smooth = inp.clip(r / gamma, 0.0, 0.9)
    sigma = inp.exp(sigma0 * LN10_OVER_10)
    veg = 0.05 * ndvi * COS_THETA * (1.0 - gamma * gamma)
    soil = (sigma - veg) / (gamma * gamma)
    porosity = 1.0 - rho_b / 2650.0
    loss = 1.0 + 0.1 * inp.log10(freq / 1e9)
    mv = porosity * inp.sqrt(smooth) * loss + 0.01 * soil
    return {"mv": inp.clip(mv, 0.0, porosity), "gamma": gamma}


UNITS = ("K", "K", "dB", None, "kg/m^2", "kg/m^3", "Hz")


def _inputs(n: int = 2048, dtype=np.float64):
    rng = np.random.default_rng(7)
    bare = tuple(a.astype(dtype) for a in (
        rng.uniform(220.0, 280.0, n), rng.uniform(285.0, 310.0, n), rng.uniform(-20.0, -5.0, n),
        rng.uniform(0.1, 0.8, n), rng.uniform(0.0, 4.0, n), rng.uniform(1100.0, 1600.0, n),
        np.full(n, 1.41e9)))
    quantities = tuple(x if u is None else Q(x, u) for x, u in zip(bare, UNITS))
    return bare, quantities


def _ops(graph) -> list[tuple]:
    """Each node's op, attributes, shape and dtype, and the graph's inputs and
    outputs by position: everything but the names and source lines."""
    index = {node: i for i, node in enumerate(graph.nodes)}
    return [(n.op, repr(n.attrs), str(n.aval), tuple(index[x] for x in n.inputs))
            for n in graph.nodes] + [("out", index[x]) for x in graph.outputs]


def _code(source: str, name: str) -> str:
    """Generated code without the function's name and the source lines."""
    return re.sub(r"test_units\.py:\d+", "", source.replace(name, "F"))


def _text(graph) -> str:
    """The graph's text without its name and source lines."""
    body = str(graph).split("\n", 1)[1]
    return re.sub(r"\s+# \S+:\d+", "", body)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_quantities_record_the_bare_models_graph_node_for_node(dtype):
    bare, quantities = _inputs(dtype=dtype)
    g_q = ik.jit(retrieval_q).lower(*quantities).graph
    g_b = ik.jit(retrieval_bare).lower(*bare).graph
    assert len(g_q.nodes) == len(g_b.nodes)
    assert _ops(g_q) == _ops(g_b)
    assert _text(g_q) == _text(g_b).replace("retrieval_bare", "retrieval_q")
    assert g_q.input_names == g_b.input_names


@pytest.mark.parametrize("strategy", CPU)
def test_quantities_run_with_the_bare_models_bits_and_code(strategy):
    bare, quantities = _inputs()
    out_q = ik.jit(retrieval_q, strategy=strategy)(*quantities)
    out_b = ik.jit(retrieval_bare, strategy=strategy)(*bare)
    assert str(out_q["mv"].units) == "dimensionless" and isinstance(out_q["gamma"], Q)
    for name in ("mv", "gamma"):
        assert out_q[name].magnitude.tobytes() == out_b[name].tobytes()
    c_q = ik.jit(retrieval_q, strategy=strategy).lower(*quantities).compile()
    c_b = ik.jit(retrieval_bare, strategy=strategy).lower(*bare).compile()
    assert _code(c_q.source(), "retrieval_q") == _code(c_b.source(), "retrieval_bare")


def test_eager_quantities_give_the_bare_models_bits():
    bare, quantities = _inputs(256)
    out_q, out_b = retrieval_q(*quantities), retrieval_bare(*bare)
    assert out_q["mv"].magnitude.tobytes() == out_b["mv"].tobytes()


def test_inputs_in_other_units_convert_into_the_graph_as_constants():
    """Inputs in g/cm³, GHz and °C: the constants they meet are converted to
    their units (2.65 g/cm³ stays 2.65), °C becomes K with one add of 273.15,
    what a bare model would write; the results agree."""
    bare, quantities = _inputs(64)
    other = list(quantities)
    other[1] = Q(bare[1] - 273.15, "degC").to("K")
    other[5] = Q(bare[5] / 1000.0, "g/cm^3")
    other[6] = Q(bare[6] / 1e9, "GHz")
    g = ik.jit(retrieval_q).lower(*other).graph
    g_b = ik.jit(retrieval_bare).lower(*bare).graph
    assert len(g.nodes) <= len(g_b.nodes)
    constants = {float(n.attrs["value"].value) for n in g.nodes if n.op.value == "const"}
    assert {2.65, 1.0} <= constants and not {2650.0, 1e9} & constants

    def in_celsius(ts_c, *rest):
        return retrieval_q(rest[0], ts_c.to("K"), *rest[1:])
    g_c = ik.jit(in_celsius).lower(Q(bare[1] - 273.15, "degC"), *other[:1], *other[2:]).graph
    assert len(g_c.nodes) == len(g.nodes) + 3  # 273.15, its broadcast and the add
    np.testing.assert_allclose(ik.jit(retrieval_q)(*other)["mv"].magnitude,
                               retrieval_bare(*bare)["mv"], rtol=1e-12)


def test_the_report_lists_input_and_output_units():
    _, quantities = _inputs(64)
    report = str(ik.jit(retrieval_q, strategy="reference").lower(*quantities).compile().report())
    assert "units in   tb K, ts K, sigma0 dB, ndvi bare, vwc kg/m², rho_b kg/m³, freq Hz" in report
    assert "units out  out['gamma'] dimensionless, out['mv'] dimensionless" in report
    bare, _ = _inputs(64)
    assert "units in" not in str(ik.jit(retrieval_bare).lower(*bare).compile().report())


def test_tracing_with_units_costs_at_most_twice_the_bare_recording():
    bare, quantities = _inputs(64)

    def best(fn, args) -> float:
        times = []
        for _ in range(15):
            start = time.perf_counter()
            ik.trace(fn, *args)
            times.append(time.perf_counter() - start)
        return min(times)
    best(retrieval_q, quantities)  # units parsed and conversions cached once
    ratio = best(retrieval_q, quantities) / best(retrieval_bare, bare)
    assert ratio <= 2.0, ratio


# --- transforms and solvers -----------------------------------------------------------------------

def kinetic(v, m):
    return 0.5 * m * v * v


def test_grad_is_in_output_units_per_input_unit():
    v, m = Q(3.0, "m/s"), Q(2.0, "kg")
    dv = ik.grad(kinetic)(v, m)
    assert dv.magnitude == 6.0 and dv.units == ik.units.parse("kg*m/s")
    value, (dv, dm) = ik.value_and_grad(kinetic, argnums=(0, 1))(v, m)
    assert value.units == ik.units.parse("kg*m**2/s**2") and value.magnitude == 9.0
    assert dm.units == ik.units.parse("m**2/s**2") and dm.magnitude == 4.5
    assert ik.jit(ik.grad(kinetic))(v, m).units == dv.units
    # a bare input under a quantity output: the derivative is in the output's unit
    assert ik.grad(lambda k: k * Q(2.0, "K"))(3.0).units == ik.units.parse("K")
    # a quantity input under a bare output: per the input's unit
    assert ik.grad(lambda x: inp.exp(x / Q(1.0, "m")))(Q(0.0, "m")).units == \
        ik.units.parse("1/m")


def test_jacobians_and_hessians_are_in_output_units_per_input_unit():
    def f(x):
        return x * x * Q(2.0, "s")
    x = Q(np.array([1.0, 2.0]), "m")
    for transform in (ik.jacfwd, ik.jacrev, ik.jacobian):
        jac = transform(f)(x)
        assert jac.units == ik.units.parse("m*s")
        np.testing.assert_array_equal(jac.magnitude, np.diag([4.0, 8.0]))
    hess = ik.hessian(lambda x: inp.sum(f(x)))(x)
    assert hess.units == ik.units.parse("s")
    np.testing.assert_array_equal(hess.magnitude, np.diag([4.0, 4.0]))
    assert ik.jacrev(lambda x: inp.sum(f(x)))(x).units == ik.units.parse("m*s")


def test_jvp_vmap_and_loops_carry_units():
    m = Q(2.0, "kg")
    out, tangent = ik.jvp(lambda v: kinetic(v, m), (Q(3.0, "m/s"),), (Q(1.0, "m/s"),))
    assert tangent.units == out.units and tangent.magnitude == 6.0
    speeds = Q(np.linspace(1.0, 3.0, 4), "m/s")
    energies = ik.vmap(lambda v: kinetic(v, m))(speeds)
    np.testing.assert_array_equal(energies.magnitude, kinetic(speeds, m).magnitude)
    slopes = ik.vmap(ik.grad(lambda v: kinetic(v, m)))(speeds)
    assert slopes.units == ik.units.parse("kg*m/s")

    def step(distance, speed):
        distance = distance + speed * Q(30.0, "min")
        return distance, distance
    total, path = ik.jit(lambda s: ik.scan(step, Q(0.0, "km"), s))(Q(np.ones(3), "km/h"))
    assert total.units == ik.units.parse("km") and total.magnitude == 1.5
    assert ik.while_loop(lambda c: c < Q(10.0, "m"), lambda c: c + Q(300.0, "cm"),
                         Q(0.0, "m")).magnitude == 12.0
    with pytest.raises(ik.ShapeError, match="kelvin \\*\\* 2"):  # a branch changes the unit
        ik.jit(lambda p, x: ik.cond(p, lambda x: x * 2.0, lambda x: x * x, x))(
            True, Q(1.0, "K"))


def test_odeint_checks_that_func_returns_y_per_t():
    def cooling(y, t, k):
        return -k * (y - Q(280.0, "K"))
    t = Q(np.linspace(0.0, 2.0, 5), "h")
    ys = ik.ode.odeint(cooling, Q(300.0, "K"), t, Q(0.5, "1/h"))
    assert ys.units == ik.units.parse("K")
    np.testing.assert_allclose(ys.magnitude, 280.0 + 20.0 * np.exp(-0.5 * t.magnitude),
                               rtol=1e-7)
    # a rate in another unit of the same dimension converts (K/s for t in h)
    seconds = ik.ode.odeint(lambda y, t, k: cooling(y, t, k).to("K/s"), Q(300.0, "K"), t,
                            Q(0.5, "1/h"))
    np.testing.assert_allclose(seconds.magnitude, ys.magnitude, rtol=1e-9)

    def wrong(y, t):
        return -y
    with pytest.raises(UnitError) as err:
        ik.ode.odeint(wrong, Q(300.0, "K"), t)
    text = str(err.value)
    assert text.startswith(f"odeint at test_units.py:{inspect.currentframe().f_lineno - 2}: ")
    assert "returns dy/dt in K ([temperature]) for leaf 0 of y" in text
    assert "y is in K and t in h, so dy/dt must be in K/h" in text
    jitted = ik.jit(lambda y0, t: ik.ode.odeint(cooling, y0, t, Q(0.5, "1/h")))(Q(300.0, "K"), t)
    np.testing.assert_allclose(jitted.magnitude, ys.magnitude, rtol=1e-12)


# --- CF unit strings -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, pint_text", [
    ("K", "kelvin"), ("degC", "degree_Celsius"), ("degrees_Celsius", "degree_Celsius"),
    ("kg m-3", "kilogram / meter ** 3"), ("g cm-3", "gram / centimeter ** 3"),
    ("m3 m-3", "dimensionless"), ("m3/m3", "dimensionless"), ("1", "dimensionless"),
    ("GHz", "gigahertz"), ("dB", "decibel"), ("W m-2 sr-1", "watt / meter ** 2 / steradian"),
    ("kg.m-3", "kilogram / meter ** 3"), ("%", "percent"),
])
def test_cf_units_parse(text, pint_text):
    assert str(parse_cf(text)) == pint_text


def test_unknown_cf_units_say_so():
    with pytest.raises(UnitError, match="CF units 'parsecs per fortnight'"):
        parse_cf("parsecs per fortnight")


def test_the_units_example_runs_and_says_so():
    import pathlib
    import subprocess
    import sys
    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "units_retrieval.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                         check=True, timeout=300)
    lines = run.stdout.splitlines()
    assert lines[0].startswith("mean soil moisture: ") and lines[0].endswith("(dimensionless)")
    assert lines[1].endswith("the same graph: True")
    assert lines[2] == "the same bits as the bare model: True"
    assert lines[3].startswith("caught while recording: add at units_retrieval.py:")
    assert lines[4].endswith(" 1/K")
    assert lines[5] == "  units in   tb K, ts K, vwc kg/m², rho_b kg/m³"
