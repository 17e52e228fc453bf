"""The demo's figure: truth, retrieval, error map and error histogram
(matplotlib, the ``plot`` extra; imported only when a figure is asked for)."""

from __future__ import annotations

import numpy as np

MV_RANGE = (0.0, 0.5)  # m³/m³, colour scale of the moisture maps
ERR_RANGE = 0.1  # m³/m³, ± colour scale of the error map
DENSE_VWC = 5.0


def _as_map(values, grid) -> np.ndarray:
    """Pixels on their row-major grid; the padding of the last row is NaN."""
    out = np.full(grid.height * grid.width, np.nan)
    out[: values.size] = values
    return out.reshape(grid.height, grid.width)


def _panel_map(fig, ax, image, title, cmap, vmin, vmax, label):
    shown = ax.imshow(image, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_title(title, fontsize=12)
    ax.set_xlabel("column (pixel)")
    ax.set_ylabel("row (pixel)")
    fig.colorbar(shown, ax=ax, shrink=0.92).set_label(label)


def _histogram(ax, err, vwc, rows):
    bins = np.linspace(-ERR_RANGE, ERR_RANGE, 81)
    light = vwc <= DENSE_VWC
    ax.hist(err[light], bins=bins, histtype="stepfilled", alpha=0.6, color="tab:blue",
            label=f"VWC ≤ {DENSE_VWC:g} kg/m²")
    ax.hist(err[~light], bins=bins, histtype="step", linewidth=1.8, color="tab:red",
            label=f"VWC > {DENSE_VWC:g} kg/m²")
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_title(f"Retrieval error distribution (within ±{ERR_RANGE:g} m³/m³)", fontsize=12)
    ax.set_xlabel("retrieved − true soil moisture (m³/m³)")
    ax.set_ylabel("pixels per bin (log scale)")
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 40)  # headroom for the legend and the statistics
    ax.legend(loc="upper left", fontsize=9)
    text = "\n".join(f"{label}: ubRMSE {ub:.3f}, bias {round(bias, 3) + 0.0:+.3f}"
                     for label, _, bias, _, ub in rows)
    ax.text(0.98, 0.98, text, transform=ax.transAxes, ha="right", va="top", fontsize=8.5,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})


def soil_moisture_figure(path, scene, mv, grid, rows) -> None:
    """Write the four-panel figure to ``path`` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    truth = scene["mv"]
    err = np.asarray(mv, np.float64) - truth
    fig, axes = plt.subplots(2, 2, figsize=(13, 11), constrained_layout=True)
    unit = "soil moisture (m³/m³)"
    _panel_map(fig, axes[0, 0], _as_map(truth, grid), "True soil moisture", "YlGnBu",
               *MV_RANGE, unit)
    _panel_map(fig, axes[0, 1], _as_map(mv, grid), "Retrieved soil moisture (Stages 1–4)",
               "YlGnBu", *MV_RANGE, unit)
    _panel_map(fig, axes[1, 0], _as_map(err, grid), "Error: retrieved − true", "RdBu",
               -ERR_RANGE, ERR_RANGE, "error (m³/m³)")
    _histogram(axes[1, 1], err, scene["vwc"], rows)
    fig.suptitle(f"SMAP–NISAR per-pixel soil-moisture retrieval — synthetic scene, "
                 f"{truth.size:,} pixels\nTB noise 1 K, zero-order tau-omega, Mironov "
                 f"dielectric, θ = 40°", fontsize=14)
    fig.savefig(path, dpi=110)
    plt.close(fig)
