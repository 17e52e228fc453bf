"""SMAP granules as inputs of ``isokernel run``: the L1C_TB and L2_SM_P
HDF5 products read into the soil-moisture model's variable names, their
fill values and quality flags masked, their cells placed on EASE-Grid 2.0
(global, 36 km), and synthetic granules in the same layout for tests.

A granule holds one-dimensional arrays over the grid cells of a half orbit,
each cell addressed by its EASE-Grid 2.0 row and column. ``granule_cells``
keeps the cells that pass the mask, one per element of a ``cell`` dimension
(the cell's global index, row × 964 + column): ``isokernel run`` computes
those and no other. ``on_grid`` puts computed cells back onto the rows ×
columns window the granule covers, with NaN where a cell was masked or is
not in the granule, and a CF grid mapping (``crs``).

The layouts follow the products' specifications as NSIDC documents them
(the SMAP L1C_TB and L2_SM_P Product Specification Documents and the "Data
Fields" pages of SPL1CTB and SPL2SMP):

- L2_SM_P (ECS short name SPL2SMP): group ``Soil_Moisture_Retrieval_Data``;
  cells ``EASE_row_index``, ``EASE_column_index`` (uint16, fill 65534);
  ``tb_v_corrected``, ``tb_h_corrected``, ``surface_temperature`` (K),
  ``clay_fraction``, ``bulk_density`` (g/cm³), ``landcover_class`` (IGBP
  class, uint8, fill 254; one column per cell, or three with the dominant
  class first), ``retrieval_qual_flag`` (uint16; bit 0 set: not the
  recommended quality), ``latitude``, ``longitude``; floats fill −9999.
- L1C_TB (SPL1CTB): group ``Global_Projection``; cells ``cell_row``,
  ``cell_column``; ``cell_tb_v_aft``, ``cell_tb_h_aft`` (K),
  ``cell_tb_qual_flag_v_aft`` (bit 0 set: quality not recommended),
  ``cell_lat``, ``cell_lon``. The aft look is read.
- Which product a file is: the ``shortName`` attribute of
  ``Metadata/DatasetIdentification``, else the group it holds.
- EASE-Grid 2.0 (Brodzik et al. 2012, ISPRS Int. J. Geo-Inf. 1, 32-45;
  NSIDC's EASE2_M36km grid, EPSG:6933): Lambert cylindrical equal-area on
  WGS 84, standard parallel 30°, 406 rows × 964 columns of 36032.22 m
  (36032.220840584 m), the grid's upper-left corner at x = −964/2 cells,
  y = +406/2 cells.

Masking: a cell is masked where the product's quality flag (L2_SM_P
``retrieval_qual_flag``, L1C_TB ``cell_tb_qual_flag_v_aft``) has bit 0 set
or is its fill, where any variable read is its ``_FillValue``, −9999, not
finite or outside ``valid_min``..``valid_max``, where the land-cover class
has no class of the model (``IGBP_CLASS``), and where an ancillary variable
is missing (NaN). Units: each variable carries the CF units of what the
specification says it holds (the products' own unit strings, such as
"Kelvin", are no CF units).

h5py (the ``io`` extra) is imported in the functions that use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..models.soil_moisture.units import INPUT_UNITS
from .synthetic import SCENE_ATTRS

# xarray (the optional io extra) is imported in the functions that use it

ROWS, COLUMNS = 406, 964  # EASE-Grid 2.0 global, 36 km
CELL_M = 36032.220840584  # cell size, metres
X0, Y0 = -COLUMNS / 2 * CELL_M, ROWS / 2 * CELL_M  # the grid's upper-left corner, metres
FILL = -9999.0  # the products' fill of floats
WINDOW = "isokernel_ease2_window"  # attribute: (row0, rows, column0, columns) of a granule
CRS_ATTRS = {
    "grid_mapping_name": "lambert_cylindrical_equal_area",
    "standard_parallel": 30.0,
    "longitude_of_central_meridian": 0.0,
    "false_easting": 0.0,
    "false_northing": 0.0,
    "semi_major_axis": 6378137.0,
    "inverse_flattening": 298.257223563,
    "long_name": "EASE-Grid 2.0 global (EPSG:6933)",
}

# IGBP land-cover class of L2_SM_P -> the soil-moisture model's class (landcover.CLASSES:
# barren, grassland, cropland, shrubland, savanna, forest). Wetlands (11), urban (13), snow
# and ice (15) and water (0, 17) have no class there: such cells are masked.
IGBP_CLASS = {1: 5, 2: 5, 3: 5, 4: 5, 5: 5, 6: 3, 7: 3, 8: 4, 9: 4, 10: 1, 12: 2, 14: 2,
              16: 0}
CLASS_IGBP = (16, 10, 12, 7, 9, 1)  # a representative IGBP class of each model class


@dataclass(frozen=True)
class Product:
    """Where a product keeps what the model reads."""

    name: str
    short_name: str  # the ECS short name in Metadata/DatasetIdentification
    group: str
    row: str
    column: str
    variables: tuple[tuple[str, str], ...]  # (model input, product variable)
    flag: str  # bit 0 set: the cell is masked
    latitude: str
    longitude: str


PRODUCTS = (
    Product("L2_SM_P", "SPL2SMP", "Soil_Moisture_Retrieval_Data", "EASE_row_index",
            "EASE_column_index",
            (("tbv", "tb_v_corrected"), ("tbh", "tb_h_corrected"), ("ts", "surface_temperature"),
             ("clay", "clay_fraction"), ("bulk_density", "bulk_density"),
             ("landcover", "landcover_class")),
            "retrieval_qual_flag", "latitude", "longitude"),
    Product("L1C_TB", "SPL1CTB", "Global_Projection", "cell_row", "cell_column",
            (("tbv", "cell_tb_v_aft"), ("tbh", "cell_tb_h_aft")),
            "cell_tb_qual_flag_v_aft", "cell_lat", "cell_lon"),
)


# ------------------------------------------------------------------ identifying a granule

def product_of(path: str) -> Product | None:
    """The SMAP product ``path`` is (by its metadata, else its groups), or
    None for any other file (a NetCDF-4 file is HDF5 too)."""
    if os.path.isdir(path) or not os.path.isfile(path):
        return None
    try:
        import h5py
    except ImportError:
        return None
    if not h5py.is_hdf5(path):
        return None
    with h5py.File(path, "r") as f:
        return _identified(f, path)


def _identified(f, path: str) -> Product | None:
    ident = f.get("Metadata/DatasetIdentification")
    short = None if ident is None else _text(ident.attrs.get("shortName"))
    for product in PRODUCTS:
        if short == product.short_name or (short is None and product.group in f):
            return product
    if short is not None and short.startswith("SPL"):
        known = ", ".join(f"{p.short_name} ({p.name})" for p in PRODUCTS)
        raise ValueError(f"input {path} is a SMAP {short} granule; isokernel reads {known}")
    return None


def _text(value) -> str | None:
    if value is None:
        return None
    value = np.asarray(value).ravel()[0] if np.ndim(value) else value
    return value.decode() if isinstance(value, bytes) else str(value)


# ------------------------------------------------------------------ reading

@dataclass
class _Cells:
    """A granule's cells: rows, columns, the model's inputs (NaN, or -1
    for the class index, where masked) and the mask."""

    product: Product
    rows: np.ndarray
    columns: np.ndarray
    values: dict
    mask: np.ndarray
    latitude: np.ndarray
    longitude: np.ndarray


def _read(path: str, product: Product) -> _Cells:
    import h5py
    with h5py.File(path, "r") as f:
        group = f.get(product.group)
        if group is None:
            raise ValueError(f"SMAP {product.name} granule {path} has no group "
                             f"{product.group!r}; give a complete granule")
        rows, columns = (_dataset(group, name, path, product)[()].astype(np.int64)
                         for name in (product.row, product.column))
        keep = (rows < ROWS) & (columns < COLUMNS)  # a fill index (65534) is no cell
        values = {name: _values(_dataset(group, var, path, product, name))[keep]
                  for name, var in product.variables}
        flag = _dataset(group, product.flag, path, product)
        bad = _flagged(flag)[keep]
        lat, lon = (_values(group[v])[keep] if v in group else np.full(keep.sum(), np.nan)
                    for v in (product.latitude, product.longitude))
    cells = _Cells(product, rows[keep], columns[keep], values, bad, lat, lon)
    return _masked(cells)


def _dataset(group, name: str, path: str, product: Product, model_input: str | None = None):
    if name not in group:
        what = f" (model input {model_input!r})" if model_input else ""
        raise ValueError(f"SMAP {product.name} granule {path}: {product.group} has no variable "
                         f"{name!r}{what}; the product specification requires it: give a "
                         f"complete granule")
    return group[name]


def _values(dataset) -> np.ndarray:
    """A product variable with its fill and out-of-range values as NaN
    (floats), or its land-cover classes as the model's (int32, -1 where
    none)."""
    raw = dataset[()]
    if raw.dtype.kind in "iu":
        return _model_classes(raw[:, 0] if raw.ndim == 2 else raw)
    out = raw.astype(raw.dtype if raw.dtype.kind == "f" else np.float64)
    bad = ~np.isfinite(out) | (out == FILL)
    attrs = dataset.attrs
    if "_FillValue" in attrs:
        bad |= out == np.asarray(attrs["_FillValue"]).ravel()[0]
    if "valid_min" in attrs:
        bad |= out < np.asarray(attrs["valid_min"]).ravel()[0]
    if "valid_max" in attrs:
        bad |= out > np.asarray(attrs["valid_max"]).ravel()[0]
    out[bad] = np.nan
    return out


def _model_classes(igbp: np.ndarray) -> np.ndarray:
    table = np.full(256, -1, np.int32)
    for code, model_class in IGBP_CLASS.items():
        table[code] = model_class
    return table[igbp.astype(np.int64) & 0xFF]


def _flagged(dataset) -> np.ndarray:
    """Cells whose flag has bit 0 set or is the flag's fill."""
    flag = dataset[()].astype(np.int64)
    bad = (flag & 1) != 0
    if "_FillValue" in dataset.attrs:
        bad |= flag == int(np.asarray(dataset.attrs["_FillValue"]).ravel()[0])
    return bad


def _masked(cells: _Cells) -> _Cells:
    """Union of the flag and every variable's missing values, applied to
    every variable."""
    for value in cells.values.values():
        cells.mask |= np.isnan(value) if value.dtype.kind == "f" else value < 0
    for name, value in cells.values.items():
        cells.values[name] = np.where(cells.mask, -1 if value.dtype.kind == "i" else np.nan,
                                      value).astype(value.dtype)
    return cells


# ------------------------------------------------------------------ ancillary data

def _with_ancillary(cells: _Cells, ancillary, attrs: dict) -> None:
    """Model inputs from ``ancillary`` (a path or Dataset on EASE-Grid 2.0
    36 km) at the granule's cells; they replace the granule's own."""
    import xarray as xr
    if ancillary is None:
        return
    anc = xr.open_dataset(ancillary) if isinstance(ancillary, (str, os.PathLike)) else ancillary
    for name in anc.data_vars:
        if str(name) in INPUT_UNITS:
            grid = _global(anc[name], str(name))
            cells.values[str(name)] = grid[cells.rows, cells.columns]
            attrs[str(name)] = dict(anc[name].attrs)
    _masked(cells)


def _global(array, name: str) -> np.ndarray:
    """An ancillary variable on the whole 406 × 964 grid (NaN, or -1 for
    the class index, where it has no value)."""
    if set(array.dims) != {"y", "x"}:
        raise ValueError(f"ancillary variable {name!r} has dims {array.dims}; give it dims "
                         f"(y, x) on EASE-Grid 2.0 36 km")
    array = array.transpose("y", "x")
    integer = array.dtype.kind in "iu"
    out = np.full((ROWS, COLUMNS), -1 if integer else np.nan,
                  np.int32 if integer else np.float64)
    if "y" not in array.coords and array.shape == (ROWS, COLUMNS):
        out[:] = array.values
        return out
    rows = _indices(array, "y", name)
    columns = _indices(array, "x", name)
    out[np.ix_(rows, columns)] = array.values
    return out


def _indices(array, dim: str, name: str) -> np.ndarray:
    """Rows (``y``) or columns (``x``) of an ancillary variable's cell
    centres, in metres on EASE-Grid 2.0 36 km."""
    if dim not in array.coords:
        raise ValueError(f"ancillary variable {name!r} has no {dim} coordinate; give x and y "
                         f"in metres of EASE-Grid 2.0 36 km cell centres, or the whole "
                         f"{ROWS} x {COLUMNS} grid")
    metres = array[dim].values.astype(np.float64)
    index = (Y0 - metres) / CELL_M - 0.5 if dim == "y" else (metres - X0) / CELL_M - 0.5
    nearest = np.rint(index)
    size = ROWS if dim == "y" else COLUMNS
    if np.any(np.abs(index - nearest) > 1e-3) or np.any((nearest < 0) | (nearest >= size)):
        raise ValueError(f"ancillary variable {name!r}: its {dim} values are not cell centres "
                         f"of EASE-Grid 2.0 36 km (x = {X0} + (column + 0.5) * {CELL_M}, "
                         f"y = {Y0} - (row + 0.5) * {CELL_M})")
    return nearest.astype(np.int64)


# ------------------------------------------------------------------ data sets

def _read_with(path: str, ancillary) -> tuple[_Cells, dict]:
    product = product_of(path)
    if product is None:
        raise ValueError(f"{path} is no SMAP granule isokernel reads (an HDF5 file with the "
                         f"groups of {', '.join(p.name for p in PRODUCTS)})")
    cells = _read(path, product)
    attrs = {name: _attrs(name, product, var) for name, var in product.variables}
    _with_ancillary(cells, ancillary, attrs)
    return cells, attrs


def _attrs(name: str, product: Product, variable: str) -> dict:
    return {**SCENE_ATTRS[name], "source": f"SMAP {product.short_name} "
                                           f"{product.group}/{variable}"}


def _window(cells: _Cells) -> np.ndarray:
    if cells.rows.size == 0:
        raise ValueError(f"SMAP {cells.product.name} granule lists no cell of EASE-Grid 2.0 "
                         f"36 km; there is nothing to compute")
    row0, column0 = int(cells.rows.min()), int(cells.columns.min())
    return np.array([row0, int(cells.rows.max()) - row0 + 1,
                     column0, int(cells.columns.max()) - column0 + 1], np.int64)


def granule_cells(path: str, ancillary=None, inputs: tuple[str, ...] | None = None):
    """The cells of a SMAP granule that pass the mask, as an xarray Dataset
    over ``cell`` (the global index row × 964 + column, in that order),
    each variable under the name of the model input it is, with CF units.
    ``ancillary`` (a path or Dataset with dims (y, x) on EASE-Grid 2.0
    36 km: x, y the cell centres in metres, or the whole 406 × 964 grid)
    supplies model inputs the granule lacks, and replaces those it has.
    ``inputs``: the model inputs needed; one the granule and the ancillary
    data set lack is refused, by name."""
    import xarray as xr
    cells, attrs = _read_with(path, ancillary)
    _check_inputs(cells, inputs, path)
    index = cells.rows * COLUMNS + cells.columns
    order = np.argsort(index, kind="stable")
    keep = order[~cells.mask[order]]
    ds = xr.Dataset({name: ("cell", value[keep], attrs[name])
                     for name, value in cells.values.items()},
                    coords={"cell": ("cell", index[keep], {
                        "long_name": "EASE-Grid 2.0 36 km cell: row * 964 + column"})})
    ds.attrs = {"title": f"SMAP {cells.product.name} granule {os.path.basename(path)}: cells "
                         f"passing the quality mask",
                "source": os.path.basename(path), WINDOW: _window(cells)}
    return ds


def _check_inputs(cells: _Cells, inputs, path: str) -> None:
    missing = [name for name in inputs or () if name not in cells.values]
    if missing:
        raise ValueError(f"SMAP {cells.product.name} granule {path} has no "
                         f"{', '.join(missing)}; supply them in an ancillary data set on "
                         f"EASE-Grid 2.0 36 km (variables named {', '.join(missing)}, dims "
                         f"(y, x))")


def open_granule(path: str, ancillary=None):
    """A SMAP granule on its rows × columns window of EASE-Grid 2.0 36 km:
    dims (y, x) in metres, the model's inputs (NaN, or -1 for
    ``landcover``, where masked or absent), ``latitude``/``longitude`` and
    the ``crs`` grid mapping; ``ancillary`` as in :func:`granule_cells`."""
    import xarray as xr
    cells, attrs = _read_with(path, ancillary)
    window = _window(cells)
    index = xr.DataArray(cells.rows * COLUMNS + cells.columns, dims="cell")
    ds = xr.Dataset(coords={"cell": index})
    for name, value in cells.values.items():
        ds[name] = ("cell", value, attrs[name])
    ds = ds.drop_duplicates("cell")
    gridded = xr.Dataset({name: on_grid(ds[name], window) for name in ds.data_vars})
    for name, value, standard in (("latitude", cells.latitude, "latitude"),
                                  ("longitude", cells.longitude, "longitude")):
        geo = xr.DataArray(value, dims="cell", coords={"cell": index}).drop_duplicates("cell")
        units = "degrees_north" if name == "latitude" else "degrees_east"
        gridded.coords[name] = on_grid(geo, window).assign_attrs(standard_name=standard,
                                                                 units=units)
    gridded.attrs = {"title": f"SMAP {cells.product.name} granule {os.path.basename(path)}"}
    return gridded


# ------------------------------------------------------------------ the grid

def grid_coords(window) -> dict:
    """x and y (metres) of the window's cell centres, and the ``crs``
    grid mapping."""
    import xarray as xr
    row0, rows, column0, columns = (int(v) for v in window)
    y = Y0 - (np.arange(row0, row0 + rows) + 0.5) * CELL_M
    x = X0 + (np.arange(column0, column0 + columns) + 0.5) * CELL_M
    return {"y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "m",
                           "axis": "Y", "long_name": "y of EASE-Grid 2.0 cell centre"}),
            "x": ("x", x, {"standard_name": "projection_x_coordinate", "units": "m",
                           "axis": "X", "long_name": "x of EASE-Grid 2.0 cell centre"}),
            "crs": xr.DataArray(np.int32(0), attrs=CRS_ATTRS)}


def on_grid(array, window):
    """A variable over ``cell`` put onto the window's (y, x) grid, lazily
    for a Dask array: NaN (or -1 for integers) where it has no cell."""
    import xarray as xr
    row0, rows, column0, columns = (int(v) for v in window)
    wanted = (np.arange(row0, row0 + rows)[:, None] * COLUMNS
              + np.arange(column0, column0 + columns)[None, :]).ravel()
    fill = -1 if array.dtype.kind in "iu" else np.nan
    flat = array.reindex(cell=wanted, fill_value=fill)
    out = xr.DataArray(flat.data.reshape(rows, columns), dims=("y", "x"),
                       coords=grid_coords(window), attrs=array.attrs)
    out.encoding["grid_mapping"] = "crs"
    return out


def on_a_grid(source_attrs) -> bool:
    """Whether a data set's attributes say it holds a granule's cells
    (``granule_cells``), whose outputs go back onto its grid."""
    return WINDOW in source_attrs


def on_ease_grid(results: dict, source_attrs: dict) -> dict:
    """Outputs over the cells of a SMAP granule (``granule_cells``) put back
    onto its window with the ``crs`` grid mapping; other outputs as they
    are."""
    if not on_a_grid(source_attrs):
        return results
    return {name: on_grid(array, source_attrs[WINDOW]) for name, array in results.items()}


# ------------------------------------------------------------------ synthetic granules

def _synthetic_window(rows: int, columns: int, seed: int) -> dict:
    """The scene's fields on a rows × columns window, as a granule stores
    them (float32; the class index as the model's)."""
    from ..models.soil_moisture import Grid, scene_model
    n = rows * columns
    scene = scene_model(np.arange(n, dtype=np.int64), Grid(n, columns), seed)
    return {name: np.asarray(v).reshape(rows, columns).astype(
                np.int32 if name == "landcover" else np.float32) for name, v in scene.items()}


def _latitude_longitude(rows: np.ndarray, columns: np.ndarray) -> tuple:
    """Geodetic latitude and longitude (degrees) of cell centres: the
    inverse of the cylindrical equal-area projection on WGS 84 (authalic
    latitude, Snyder 1987, eqs. 3-18 and 10-28)."""
    a, e2 = CRS_ATTRS["semi_major_axis"], 0.0066943799901413165
    e = np.sqrt(e2)
    phi_ts = np.radians(CRS_ATTRS["standard_parallel"])
    k0 = np.cos(phi_ts) / np.sqrt(1.0 - e2 * np.sin(phi_ts) ** 2)
    qp = 1.0 - (1.0 - e2) / (2 * e) * np.log((1 - e) / (1 + e))
    x = X0 + (columns + 0.5) * CELL_M
    y = Y0 - (rows + 0.5) * CELL_M
    beta = np.arcsin(np.clip(2.0 * y * k0 / (a * qp), -1.0, 1.0))
    phi = (beta + (e2 / 3 + 31 * e2**2 / 180 + 517 * e2**3 / 5040) * np.sin(2 * beta)
           + (23 * e2**2 / 360 + 251 * e2**3 / 3780) * np.sin(4 * beta)
           + 761 * e2**3 / 45360 * np.sin(6 * beta))
    return np.degrees(phi), np.degrees(x / (a * k0))


def _write_group(path: str, product: Product, arrays: dict, attrs: dict) -> None:
    import h5py
    with h5py.File(path, "w") as f:
        ident = f.create_group("Metadata/DatasetIdentification")
        ident.attrs["shortName"] = product.short_name
        group = f.create_group(product.group)
        for name, values in arrays.items():
            fill = attrs[name].get("_FillValue")
            dataset = group.create_dataset(name, data=values, fillvalue=fill)
            for key, value in attrs[name].items():
                dataset.attrs[key] = value


def _float_attrs(units: str, low: float, high: float, long_name: str) -> dict:
    return {"long_name": long_name, "units": units, "valid_min": np.float32(low),
            "valid_max": np.float32(high), "_FillValue": np.float32(FILL)}


def _index_attrs(long_name: str, high: int) -> dict:
    return {"long_name": long_name, "valid_min": np.uint16(0), "valid_max": np.uint16(high),
            "_FillValue": np.uint16(65534)}


def _flag_attrs(long_name: str) -> dict:
    return {"long_name": long_name, "_FillValue": np.uint16(65534)}


def _listed(rows: int, columns: int) -> np.ndarray:
    """The window's cells a synthetic granule lists: a slanted swath edge
    leaves out the lower-right corner."""
    r, c = np.meshgrid(np.arange(rows), np.arange(columns), indexing="ij")
    return c < columns - r // 4


def _synthetic(path: str, product: Product, rows: int, columns: int, row0: int,
               column0: int, seed: int, spoil) -> object:
    """Write a synthetic granule of ``product`` over the window and return
    the window's scene with ``valid``, the cells that pass the mask."""
    import xarray as xr
    if not (0 <= row0 and row0 + rows <= ROWS and 0 <= column0 and column0 + columns <= COLUMNS):
        raise ValueError(f"window rows {row0}:{row0 + rows}, columns {column0}:"
                         f"{column0 + columns} is not inside EASE-Grid 2.0 36 km "
                         f"({ROWS} x {COLUMNS})")
    fields = _synthetic_window(rows, columns, seed)
    listed = _listed(rows, columns)
    r, c = np.nonzero(listed)
    arrays, attrs, bad = spoil(fields, r, c, r + row0, c + column0)
    _write_group(path, product, arrays, attrs)
    valid = np.zeros((rows, columns), bool)
    valid[r[~bad], c[~bad]] = True
    window = np.array([row0, rows, column0, columns])
    names = ("tbv", "tbh", "ts", "clay", "bulk_density", "landcover", "ndvi", "ndvi_max",
             "ndvi_min", "mv")
    ds = xr.Dataset({name: (("y", "x"), fields[name], SCENE_ATTRS[name]) for name in names},
                    coords=grid_coords(window))
    ds["valid"] = (("y", "x"), valid, {"long_name": "cell listed and passing the mask"})
    return ds


def _l2_spoil(fields: dict, r, c, rows, columns):
    """L2_SM_P arrays of the listed cells with fills, flags and classes the
    model lacks in some; returns them, their attributes and the masked."""
    k = np.arange(r.size)
    tbv = fields["tbv"][r, c].copy()
    ts = fields["ts"][r, c].copy()
    tbv[k % 29 == 3] = FILL
    ts[k % 37 == 13] = FILL
    flag = np.where(k % 23 == 5, 1, np.where(k % 23 == 7, 4, 0)).astype(np.uint16)
    igbp = np.asarray(CLASS_IGBP, np.uint8)[fields["landcover"][r, c]]
    igbp[k % 31 == 11] = 17  # water: no class of the model
    landcover = np.stack([igbp, np.full_like(igbp, 10), np.full_like(igbp, 254)], axis=1)
    lat, lon = _latitude_longitude(rows, columns)
    arrays = {"EASE_row_index": rows.astype(np.uint16),
              "EASE_column_index": columns.astype(np.uint16),
              "tb_v_corrected": tbv, "tb_h_corrected": fields["tbh"][r, c],
              "surface_temperature": ts, "clay_fraction": fields["clay"][r, c],
              "bulk_density": fields["bulk_density"][r, c], "landcover_class": landcover,
              "retrieval_qual_flag": flag, "soil_moisture": fields["mv"][r, c],
              "latitude": lat.astype(np.float32), "longitude": lon.astype(np.float32)}
    bad = (k % 29 == 3) | (k % 37 == 13) | (k % 23 == 5) | (k % 31 == 11)
    return arrays, _L2_ATTRS, bad


_L2_ATTRS = {
    "EASE_row_index": _index_attrs("The row index of the 36 km EASE grid cell", 405),
    "EASE_column_index": _index_attrs("The column index of the 36 km EASE grid cell", 963),
    "tb_v_corrected": _float_attrs("Kelvin", 0.0, 330.0, "Weighted average of L1B V-pol TB"),
    "tb_h_corrected": _float_attrs("Kelvin", 0.0, 330.0, "Weighted average of L1B H-pol TB"),
    "surface_temperature": _float_attrs("Kelvin", 0.0, 350.0, "Effective temperature"),
    "clay_fraction": _float_attrs("Fraction", 0.0, 1.0, "Clay fraction of the soil"),
    "bulk_density": _float_attrs("g/cm3", 0.0, 2.65, "Bulk density of the soil"),
    "landcover_class": {"long_name": "IGBP land-cover classes, the dominant first",
                        "_FillValue": np.uint8(254)},
    "retrieval_qual_flag": _flag_attrs("Bit flags of the soil moisture retrieval quality; "
                                       "bit 0 set: not the recommended quality"),
    "soil_moisture": _float_attrs("cm**3/cm**3", 0.02, 0.5, "Retrieved soil moisture"),
    "latitude": _float_attrs("degrees_north", -90.0, 90.0, "Latitude of the cell centre"),
    "longitude": _float_attrs("degrees_east", -180.0, 180.0, "Longitude of the cell centre"),
}


def _l1c_spoil(fields: dict, r, c, rows, columns):
    """L1C_TB arrays of the listed cells with fills and flags in some."""
    k = np.arange(r.size)
    tbv = fields["tbv"][r, c].copy()
    tbh = fields["tbh"][r, c].copy()
    tbv[k % 29 == 3] = FILL
    tbh[k % 19 == 2] = FILL
    flag = np.where(k % 23 == 5, 1, np.where(k % 23 == 7, 8, 0)).astype(np.uint16)
    lat, lon = _latitude_longitude(rows, columns)
    arrays = {"cell_row": rows.astype(np.uint16), "cell_column": columns.astype(np.uint16),
              "cell_tb_v_aft": tbv, "cell_tb_h_aft": tbh, "cell_tb_qual_flag_v_aft": flag,
              "cell_tb_qual_flag_h_aft": np.zeros_like(flag),
              "cell_lat": lat.astype(np.float32), "cell_lon": lon.astype(np.float32)}
    bad = (k % 29 == 3) | (k % 19 == 2) | (k % 23 == 5)
    return arrays, _L1C_ATTRS, bad


_L1C_ATTRS = {
    "cell_row": _index_attrs("Row of the EASE-Grid 2.0 cell", 405),
    "cell_column": _index_attrs("Column of the EASE-Grid 2.0 cell", 963),
    "cell_tb_v_aft": _float_attrs("Kelvin", 0.0, 340.0, "V-pol TB of the aft look"),
    "cell_tb_h_aft": _float_attrs("Kelvin", 0.0, 340.0, "H-pol TB of the aft look"),
    "cell_tb_qual_flag_v_aft": _flag_attrs("Quality of the aft V-pol TB; bit 0 set: not "
                                           "recommended"),
    "cell_tb_qual_flag_h_aft": _flag_attrs("Quality of the aft H-pol TB; bit 0 set: not "
                                           "recommended"),
    "cell_lat": _float_attrs("degrees_north", -90.0, 90.0, "Latitude of the cell centre"),
    "cell_lon": _float_attrs("degrees_east", -180.0, 180.0, "Longitude of the cell centre"),
}


def write_synthetic_l2_sm_p(path: str, rows: int = 40, columns: int = 60, row0: int = 120,
                            column0: int = 480, seed: int = 0):
    """Write an L2_SM_P granule in the product's layout over a rows ×
    columns window of EASE-Grid 2.0 36 km, its values a synthetic scene
    (``soil_moisture.scene_model``): a swath edge leaves cells out, and
    some listed cells carry fill TB or temperature, a not-recommended
    retrieval flag, or water as their land cover. Returns the window's
    scene (every model input, float32 as stored, and ``valid``: listed and
    passing the mask) on (y, x); its ``ndvi``, ``ndvi_max`` and
    ``ndvi_min`` are the ancillary data the granule lacks."""
    return _synthetic(path, PRODUCTS[0], rows, columns, row0, column0, seed, _l2_spoil)


def write_synthetic_l1c_tb(path: str, rows: int = 40, columns: int = 60, row0: int = 120,
                           column0: int = 480, seed: int = 0):
    """Write an L1C_TB granule (aft TBs) as :func:`write_synthetic_l2_sm_p`
    does an L2_SM_P one; some cells carry fill TB or a flagged V-pol TB."""
    return _synthetic(path, PRODUCTS[1], rows, columns, row0, column0, seed, _l1c_spoil)
