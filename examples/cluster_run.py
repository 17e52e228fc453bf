"""A scene on an HPC cluster: ``isokernel run`` on Dask workers started as
SLURM (or PBS) batch jobs through dask-jobqueue.

Each batch job runs ``--processes`` Dask worker processes of one thread each
(``--cores`` cores per job): a worker's native thread pool is sized to its
Dask ``nthreads``, so the workers of a node do not oversubscribe its cores.
The output folder must be on a file system the compute nodes see (the
workers write their chunks into the output's chunk store). The run manifest
beside the output records the workers that computed it.

    pip install 'isokernel[io,hpc]'
    # on the login node of a SLURM cluster: 4 jobs of 8 single-thread workers
    python examples/cluster_run.py scene.zarr out.nc --jobs 4 --cores 8 \\
        --memory 32GB --walltime 02:00:00 --queue normal --account myproject
    # PBS instead of SLURM
    python examples/cluster_run.py scene.zarr out.nc --batch pbs --jobs 4 --cores 8 ...
    # see the batch script each job runs, without submitting anything
    python examples/cluster_run.py --job-script --cores 8 --memory 32GB
    # the same run on this machine (no batch system): a LocalCluster
    python examples/cluster_run.py scene.zarr out.nc --local 2

The command-line equivalent with a scheduler already running (``dask
scheduler`` on one host, ``dask worker tcp://HOST:8786 --nthreads 1`` on the
others) is ``isokernel run soil-moisture scene.zarr out.nc --dask
tcp://HOST:8786``.
"""

from __future__ import annotations

import argparse
from typing import Any

from isokernel.scenes import run


def batch_cluster(kind: str, cores: int, processes: int, memory: str, walltime: str,
                  queue: str | None, account: str | None, host: str | None) -> Any:
    """A dask-jobqueue cluster whose jobs each run ``processes`` worker
    processes of ``cores // processes`` threads (no job is submitted until
    the cluster is scaled)."""
    from dask_jobqueue.pbs import PBSCluster
    from dask_jobqueue.slurm import SLURMCluster

    cls = {"slurm": SLURMCluster, "pbs": PBSCluster}[kind]
    return cls(cores=cores, processes=processes, memory=memory, walltime=walltime,
               queue=queue, account=account,
               scheduler_options={"host": host} if host else None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", help="the scene (NetCDF or Zarr)")
    parser.add_argument("output", nargs="?", help="the output (NetCDF or Zarr)")
    parser.add_argument("--model", default="soil-moisture")
    parser.add_argument("--batch", choices=("slurm", "pbs"), default="slurm")
    parser.add_argument("--jobs", type=int, default=1, help="batch jobs to submit")
    parser.add_argument("--cores", type=int, default=8, help="cores of one job")
    parser.add_argument("--processes", type=int, default=None,
                        help="worker processes per job (default: --cores, one thread each)")
    parser.add_argument("--memory", default="16GB", help="memory of one job")
    parser.add_argument("--walltime", default="01:00:00")
    parser.add_argument("--queue", default=None)
    parser.add_argument("--account", default=None)
    parser.add_argument("--host", default=None,
                        help="the scheduler's interface address as the nodes see it")
    parser.add_argument("--local", type=int, default=None, metavar="N",
                        help="run on a LocalCluster of N single-thread workers instead")
    parser.add_argument("--job-script", action="store_true",
                        help="print the batch script of one job and exit")
    args = parser.parse_args(argv)

    if args.local is not None:
        if not (args.input and args.output):
            parser.error("--local needs INPUT and OUTPUT")
        summary = run(args.model, args.input, args.output, dask_address="local",
                      workers=args.local, progress=False, overwrite=True)
        print(f"wrote {args.output} on {args.local} local worker(s): "
              f"{summary['chunks']} chunks in {summary['seconds']:.1f} s")
        return

    processes = args.processes or args.cores
    cluster = batch_cluster(args.batch, args.cores, processes, args.memory, args.walltime,
                            args.queue, args.account, args.host)
    try:
        if args.job_script:
            print(cluster.job_script())
            return
        if not (args.input and args.output):
            parser.error("INPUT and OUTPUT are needed (or --job-script)")
        cluster.scale(jobs=args.jobs)
        cluster.wait_for_workers(1)  # jobs wait in the queue: start once one runs
        summary = run(args.model, args.input, args.output,
                      dask_address=cluster.scheduler_address, overwrite=True)
        print(f"wrote {args.output}: {summary['chunks']} chunks in {summary['seconds']:.1f} s "
              f"on {args.jobs} {args.batch.upper()} job(s) of {processes} worker(s)")
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
