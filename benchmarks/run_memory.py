"""Peak resident memory of ``isokernel run`` against the scene's size.

Writes a synthetic scene of ``--pixels`` pixels (the retrieval's inputs,
float64, ``soil_moisture.scene_model`` evaluated slab by slab of about
``CHUNK_PIXELS`` pixels, so the scene is never whole in memory) as a
chunked Zarr store, then runs ``isokernel run soil-moisture SCENE OUTPUT``
with the default options in a child process under ``/usr/bin/time -v`` and
prints its maximum resident set size and wall time.

    python benchmarks/run_memory.py --pixels 100000000 --folder /tmp/rss
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np


def write_scene(path: str, pixels: int, seed: int = 1) -> None:
    """The retrieval's inputs of a ``pixels``-pixel scene on its square grid
    (NaN padding in the last row, land cover -1), one slab of rows at a time."""
    import dask.array as da
    import xarray as xr

    from isokernel import jit
    from isokernel.models.soil_moisture import RETRIEVAL_INPUTS, Grid
    from isokernel.models.soil_moisture.scene import scene_model
    from isokernel.scenes import CHUNK_PIXELS, SCENE_ATTRS

    grid = Grid.square(pixels)
    rows = max(1, CHUNK_PIXELS // grid.width)
    shape = (grid.height, grid.width)
    ds = xr.Dataset(coords={"y": np.arange(grid.height), "x": np.arange(grid.width)})
    for name in RETRIEVAL_INPUTS:
        dtype = np.int32 if name == "landcover" else np.float64
        ds[name] = (("y", "x"), da.zeros(shape, dtype, chunks=(rows, grid.width)),
                    SCENE_ATTRS[name])
    ds.to_zarr(path, compute=False, mode="w", consolidated=False)
    model = jit(lambda index: scene_model(index, grid, seed, True), strategy="native")
    for row in range(0, grid.height, rows):
        stop = min(grid.height, row + rows)
        index = np.arange(row * grid.width, min(stop * grid.width, pixels), dtype=np.int64)
        fields = model(index)
        slab = xr.Dataset()
        for name in RETRIEVAL_INPUTS:
            values = np.asarray(fields[name])
            padded = np.full((stop - row) * grid.width, -1 if name == "landcover" else np.nan,
                             values.dtype)
            padded[: values.size] = values
            slab[name] = (("y", "x"), padded.reshape(stop - row, grid.width))
        slab.to_zarr(path, region={"y": slice(row, stop), "x": slice(0, grid.width)},
                     consolidated=False)


def measure(scene: str, output: str, extra: list[str]) -> tuple[float, float]:
    """Peak RSS (MiB) and wall seconds of ``isokernel run`` in a child."""
    argv = ["/usr/bin/time", "-v", sys.executable, "-m", "isokernel.cli", "run",
            "soil-moisture", scene, output, "--no-progress", "--overwrite", *extra]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    return kib / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=10**6)
    parser.add_argument("--folder", default="/tmp/isokernel-rss")
    parser.add_argument("--suffix", default=".nc", choices=[".nc", ".zarr"])
    parser.add_argument("extra", nargs="*", help="more options of isokernel run")
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    scene = os.path.join(args.folder, f"scene-{args.pixels}.zarr")
    if not os.path.exists(scene):
        started = time.perf_counter()
        write_scene(scene, args.pixels)
        print(f"wrote {scene} in {time.perf_counter() - started:.0f} s", flush=True)
    output = os.path.join(args.folder, f"out-{args.pixels}{args.suffix}")
    mib, seconds = measure(scene, output, args.extra)
    print(f"isokernel run soil-moisture, {args.pixels} pixels -> {args.suffix}: "
          f"peak RSS {mib:.0f} MiB, {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
