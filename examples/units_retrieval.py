"""Units on a retrieval: quantities whose dimensions are checked while jit
records and erased before anything runs.

A small tau-omega soil-moisture inversion is written once with
``isokernel.units.Quantity``; its inputs arrive in mixed units (surface
temperature in °C, bulk density in kg/m³). jit records the graph the same
model in bare floats records, node for node, and runs it with the same bits;
a unit slip (a temperature added to a soil moisture) is caught at record
time with the line; ``grad`` gives d mv/d Ts in 1/K.

    python examples/units_retrieval.py
"""

import math
import re

import numpy as np

import isokernel
import isokernel.numpy as inp
from isokernel.typing import Array
from isokernel.units import Quantity, UnitError, show

COS_THETA = math.cos(math.radians(40.0))
PARTICLE_DENSITY = Quantity(2.65, "g/cm^3")  # mineral soil
B_VEGETATION = Quantity(0.12, "m^2/kg")  # optical depth per VWC
OMEGA = 0.05  # single-scattering albedo


def soil_moisture(tb: Quantity, ts: Quantity, vwc: Quantity, rho_b: Quantity) -> Quantity:
    """Volumetric soil moisture (m³/m³) from TB and Ts (K), VWC (kg/m²) and
    bulk density: the tau-omega model inverted for the reflectivity, then a
    linear emissivity model scaled by the porosity."""
    gamma = inp.exp(-B_VEGETATION * vwc / COS_THETA)
    scatter = (1.0 - OMEGA) * (1.0 - gamma)
    r = (tb - ts * (gamma + scatter)) / (ts * gamma * (scatter - 1.0))
    porosity = 1.0 - rho_b / PARTICLE_DENSITY
    mv: Quantity = inp.clip(porosity * (1.0 - 2.0 * inp.clip(r, 0.0, 0.5)), 0.0, porosity)
    return mv


def soil_moisture_bare(tb: Array, ts: Array, vwc: Array, rho_b: Array) -> Array:
    """``soil_moisture`` in bare floats, each input in the unit it assumes
    (K, K, kg/m², kg/m³)."""
    gamma = inp.exp(-0.12 * vwc / COS_THETA)
    scatter = (1.0 - OMEGA) * (1.0 - gamma)
    r = (tb - ts * (gamma + scatter)) / (ts * gamma * (scatter - 1.0))
    porosity = 1.0 - rho_b / 2650.0
    return inp.clip(porosity * (1.0 - 2.0 * inp.clip(r, 0.0, 0.5)), 0.0, porosity)


def slipped(tb: Quantity, ts: Quantity, vwc: Quantity, rho_b: Quantity) -> Quantity:
    mv = soil_moisture(tb, ts, vwc, rho_b)
    out: Quantity = mv + ts  # a slip: a temperature added to a soil moisture
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    n = 100_000
    tb = Quantity(rng.uniform(230.0, 270.0, n), "K")
    ts_celsius = Quantity(rng.uniform(10.0, 35.0, n), "degC")  # as a file might hold it
    vwc = Quantity(rng.uniform(0.0, 3.0, n), "kg/m^2")
    rho_b = Quantity(rng.uniform(1100.0, 1600.0, n), "kg/m^3")
    ts = ts_celsius.to("K")  # an offset unit: x + 273.15

    jitted = isokernel.jit(soil_moisture, strategy="native")
    mv = jitted(tb, ts, vwc, rho_b)
    print(f"mean soil moisture: {float(np.mean(mv.magnitude)):.4f} ({show(mv.units)})")

    bare_args = (tb.magnitude, ts.magnitude, vwc.magnitude, rho_b.magnitude)
    graph = isokernel.jit(soil_moisture).lower(tb, ts, vwc, rho_b).graph
    bare = isokernel.jit(soil_moisture_bare).lower(*bare_args).graph

    def body(text: str) -> str:  # the graph's text without its name and source lines
        return re.sub(r"\s+# \S+:\d+", "", text.split("\n", 1)[1])
    print(f"graph with units: {len(graph.nodes)} nodes; in bare floats: {len(bare.nodes)}; "
          f"the same graph: {body(str(graph)) == body(str(bare))}")
    same = mv.magnitude.tobytes() == \
        isokernel.jit(soil_moisture_bare, strategy="native")(*bare_args).tobytes()
    print(f"the same bits as the bare model: {same}")

    try:
        isokernel.jit(slipped).lower(tb, ts, vwc, rho_b)
    except UnitError as err:
        print(f"caught while recording: {err}")

    pixel = isokernel.grad(lambda t: soil_moisture(tb[0], t, vwc[0], rho_b[0]))
    slope = pixel(ts[0])
    print(f"d mv / d Ts at the first pixel: {float(slope.magnitude):.3e} {show(slope.units)}")

    report = str(jitted.lower(tb, ts, vwc, rho_b).compile().report())
    print("\n".join(line for line in report.splitlines() if line.startswith("  units")))


if __name__ == "__main__":
    main()
