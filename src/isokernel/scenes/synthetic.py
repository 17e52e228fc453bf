"""A synthetic scene (``soil_moisture.generate_scene``) as an xarray Dataset
with CF attributes."""

from __future__ import annotations

import numpy as np

# xarray (the optional io extra) is imported in the function that uses it


def scene_dataset(scene: dict, grid, names=None):
    """A synthetic scene (``soil_moisture.generate_scene``) as an xarray
    Dataset on (y, x) with CF attributes; the last row's padding is NaN
    (the land-cover class there is -1)."""
    import xarray as xr
    names = names or ("tbv", "tbh", "sigma0_hh", "ndvi", "ndvi_max", "ndvi_min", "ts", "clay",
                      "bulk_density", "landcover", "mv", "vwc")
    ds = xr.Dataset(coords={"y": np.arange(grid.height), "x": np.arange(grid.width)})
    for name in names:
        values = scene[name]
        fill = -1 if values.dtype.kind == "i" else np.nan
        padded = np.full(grid.height * grid.width, fill, values.dtype)
        padded[: values.size] = values
        ds[name] = (("y", "x"), padded.reshape(grid.height, grid.width), SCENE_ATTRS[name])
    ds.attrs = {"Conventions": "CF-1.8", "title": "isokernel synthetic SMAP-NISAR scene"}
    return ds


SCENE_ATTRS = {
    "tbv": {"units": "K", "long_name": "V-pol brightness temperature at 40 deg, 1 K noise",
            "standard_name": "brightness_temperature"},
    "tbh": {"units": "K", "long_name": "H-pol brightness temperature at 40 deg, 1 K noise",
            "standard_name": "brightness_temperature"},
    "sigma0_hh": {"units": "dB", "long_name": "HH backscatter coefficient, 0.5 dB noise"},
    "ndvi": {"units": "1", "long_name": "normalized difference vegetation index"},
    "ndvi_max": {"units": "1", "long_name": "annual maximum NDVI"},
    "ndvi_min": {"units": "1", "long_name": "annual minimum NDVI"},
    "ts": {"units": "K", "long_name": "effective soil (= canopy) temperature",
           "standard_name": "soil_temperature"},
    "clay": {"units": "1", "long_name": "clay mass fraction"},
    "bulk_density": {"units": "g cm-3", "long_name": "soil bulk density"},
    "landcover": {"units": "1", "long_name": "land-cover class index",
                  "flag_values": np.arange(6, dtype=np.int32),
                  "flag_meanings": "barren grassland cropland shrubland savanna forest"},
    "mv": {"units": "m3 m-3", "long_name": "true volumetric soil moisture",
           "standard_name": "volume_fraction_of_condensed_water_in_soil"},
    "vwc": {"units": "kg m-2", "long_name": "true vegetation water content"},
}
