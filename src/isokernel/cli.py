"""The ``isokernel`` command. Argument parsing only; the work is in
``isokernel.reports``, ``isokernel.scenes`` and ``isokernel.models``."""

from __future__ import annotations

import argparse
import decimal
import signal
import sys
import threading
import traceback

from .ir import IsokernelError
from .models.demo import FIGURE, run_demo
from .models.quickstart_mlp import quickstart_mlp
from .reports import devices_table, report_function
from .scenes import ChunkError, parse_chunks, stage5_model
from .scenes import run as run_model


class UsageError(Exception):
    """A command line the parser refuses, as one line naming the command."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (the usage is one ``--help`` away);
    the sub-commands' parsers are of this class too."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _whole(text: str) -> int:
    """An integer option, also in float notation when that is a whole number:
    ``1e6`` as the help writes it, ``1_000``; ``1.5e0`` is refused."""
    try:
        value = decimal.Decimal(text)
    except decimal.InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value != value.to_integral_value() \
            or abs(value) >= 2**63:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; write e.g. 1000 "
                                         f"or 1e3")
    return int(value)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="isokernel",
        description="Write a numerical model once; run it on every strategy, with an audit "
                    "record of what ran where.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("devices", help="each strategy: available, or the exact reason not",
                   description="List every execution strategy, whether it can run on this "
                               "machine (or exactly why not), and its contract.")
    report = sub.add_parser(
        "report", help="graph, capsules, memory shape and sizing of a model function",
        description="Record MODULE:FUNCTION for the given input shapes and print its graph, "
                    "the capsules that run it, its live-buffer peak, memory shape, "
                    "arithmetic intensity and sizing decision, and (unless --no-run) the "
                    "measured peak of a real run beside the static shape.")
    report.add_argument("target", metavar="MODULE:FUNCTION",
                        help="e.g. isokernel.models.tau_omega:tau_omega or model.py:forward")
    report.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS:DTYPE",
                        help="an input, e.g. mv=1000000:float32 (repeat per input)")
    report.add_argument("--strategy", default="auto", help="strategy to plan for (default auto)")
    report.add_argument("--no-run", action="store_true",
                        help="skip the measured run (static figures only)")
    _demo_parser(sub)
    _run_parser(sub)
    _quickstart_parser(sub)
    return parser


def _demo_parser(sub) -> None:
    demo = sub.add_parser(
        "demo", help="the soil-moisture retrieval on every available strategy",
        description="Regenerate a synthetic SMAP-NISAR scene, run the soil-moisture retrieval "
                    "on every available strategy with a progress bar, and print a parity "
                    "table against reference, Mpixel/s with ratios, accuracy against the "
                    "truth (ubRMSE) and the capsule report; write a figure when matplotlib "
                    "is installed.")
    demo.add_argument("--pixels", type=_whole, default=1_000_000, help="pixels (default 1e6)")
    demo.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    demo.add_argument("--repeats", type=_whole, default=2,
                      help="timed passes per strategy, interleaved; the best counts (default 2)")
    demo.add_argument("--seed", type=_whole, default=0, help="scene seed (default 0)")
    demo.add_argument("--chunks", type=_whole, default=16, help="chunks per pass (default 16)")
    demo.add_argument("--figure", default=FIGURE, metavar="PNG",
                      help=f"figure path (default {FIGURE}); a folder gets {FIGURE} inside "
                           f"it, a name without a suffix gets .png")
    demo.add_argument("--no-figure", action="store_true", help="do not write the figure")
    demo.add_argument("--stage4", choices=["table", "closed-form"], default="table",
                      help="Stage 4 (and kappa) through the inverse and Mironov tables "
                           "(default), or the exact closed-form inverse")
    demo.add_argument("--stage5", action="store_true",
                      help="add Stage 5: per-pixel Levenberg-Marquardt refinement of (mv, VWC) "
                           "against TB_V and sigma0_HH, Jacobian by jacfwd")
    demo.add_argument("--save-scene", metavar="PATH",
                      help="also write the scene's inputs and truth as NetCDF (.nc) or Zarr "
                           "(.zarr), ready for isokernel run (needs the io extra); replaces "
                           "only a scene isokernel wrote")


def _run_parser(sub) -> None:
    run = sub.add_parser(
        "run", help="a pointwise model over a NetCDF or Zarr data set, chunk by chunk",
        description="Run MODEL over INPUT (NetCDF or Zarr, through xarray) chunk by chunk, "
                    "each chunk on the best strategy of the process that runs it, and write "
                    "OUTPUT with CF attributes and, beside it, its run manifest "
                    "OUTPUT.manifest.json (input checksums, kernel digests, numerics, "
                    "strategy per worker, versions, command line). The output appears only "
                    "when every chunk succeeded. An existing OUTPUT is refused unless "
                    "--overwrite is given and isokernel wrote it (its run manifest is "
                    "replaced with it); OUTPUT is never the input. Models: soil-moisture "
                    "(the retrieval), soil-moisture-forward (TB and sigma0 from soil "
                    "moisture), or MODULE:FUNCTION.")
    run.add_argument("model", metavar="MODEL", help="soil-moisture, soil-moisture-forward or "
                                                    "MODULE:FUNCTION")
    run.add_argument("input", metavar="INPUT", help="input data set (.nc or .zarr)")
    run.add_argument("output", metavar="OUTPUT", help="output data set (.nc or .zarr)")
    run.add_argument("--var", action="append", default=[], metavar="NAME=VARIABLE",
                     help="read model input NAME from VARIABLE (repeat per input)")
    run.add_argument("--chunks", metavar="DIM=SIZE,...",
                     help="chunk sizes, e.g. y=512,x=512 (default: as stored, else about "
                          "1 Mpixel along the first dimension)")
    run.add_argument("--dask", metavar="ADDRESS",
                     help="run on a Dask cluster: a scheduler address, or 'local' for a "
                          "LocalCluster of worker processes (default: this process)")
    run.add_argument("--workers", type=_whole, help="workers of --dask local (default: CPUs)")
    run.add_argument("--dtype", default="float64", choices=["float32", "float64"],
                     help="float precision of the inputs (default float64)")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                     help="progress on stderr (default on): a line about every second and "
                          "a final one with chunks done of the total and, per process (this "
                          "one, or each --dask worker), its chunks and pixels/s; "
                          "--no-progress turns it off")
    run.add_argument("--stage5", action="store_true",
                     help="soil-moisture with Stage 5 (needs sigma0_hh): the same as MODEL "
                          "soil-moisture-stage5")
    run.add_argument("--strategy", default="auto",
                     help="CPU strategy for every chunk (default auto: each process's fastest)")
    run.add_argument("--overwrite", action="store_true",
                     help="replace an existing OUTPUT, but only a NetCDF file or Zarr store "
                          "that isokernel wrote (its isokernel_manifest attribute says so); "
                          "anything else is refused even then")
    run.add_argument("--ancillary", default=None, metavar="PATH",
                     help="for a SMAP granule input: a NetCDF or Zarr data set on its "
                          "EASE-Grid 2.0 grid with the model inputs the granule lacks "
                          "(NDVI, ...; docs/smap.md)")
    run.add_argument("--resume", action="store_true",
                     help="continue the run of this OUTPUT that was killed outright (kill -9, "
                          "out of memory, a lost node) from the chunks it wrote, with the same "
                          "bits as a run that was never stopped; refused when the model, "
                          "input, options or isokernel's code differ; a note when OUTPUT is "
                          "already this run's finished result. Without it, such a run's "
                          "chunks are removed and the run starts over")
    run.add_argument("--checksum", default="xxh3-128", choices=["xxh3-128", "sha256"],
                     help="the input's digest in the run manifest, which --resume compares "
                          "(default xxh3-128, as xxhsum -H2 prints it; sha256, as sha256sum "
                          "prints it, takes about four times as long)")


def _quickstart_parser(sub) -> None:
    quick = sub.add_parser(
        "quickstart-mlp", help="train a small MLP on synthetic data; show what ran",
        description="Train a 4-16-16-1 tanh MLP on synthetic regression data (y = sin of a "
                    "random projection of x, drawn with isokernel.random) with Adam, one "
                    "compiled isokernel.Trainer step per step, and print the loss of each "
                    "step; with --show-backend, the compiled step's report: the strategy and "
                    "the capsules that ran.")
    quick.add_argument("--device", default="cpu",
                       help="cpu, cuda or cuda:N (default cpu); an unavailable device is "
                            "refused with the reason and the fix, never replaced by another")
    quick.add_argument("--strategy", default="auto",
                       help="strategy for the step (default auto: the device's fastest)")
    quick.add_argument("--steps", type=_whole, default=10, help="training steps (default 10)")
    quick.add_argument("--seed", type=_whole, default=0, help="data and initialization seed")
    quick.add_argument("--show-backend", action="store_true",
                       help="print the compiled step's report (strategy, capsules that ran)")


def _terminated(signum, frame) -> None:
    """SIGTERM (a batch scheduler's time limit, ``kill``) unwinds like Ctrl-C,
    so a run removes its temporaries before the process ends."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit status: 0; 2 for input refused; 1 for any other
    error; 130 when interrupted (Ctrl-C, SIGTERM). Every error is one line on
    stderr, never a traceback, from parsing the arguments on (the installed
    ``isokernel`` command also covers the import of isokernel before this)."""
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if on_main else None
    command = _command(sys.argv[1:] if argv is None else argv)
    try:
        _dispatch(_parser().parse_args(argv))
    except UsageError as err:
        print(err, file=sys.stderr)
        return 2
    except (IsokernelError, ValueError, TypeError, OSError, AttributeError, ImportError,
            ChunkError) as err:  # OSError: missing, existing or unwritable paths, clusters
        print(f"{command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a model's own error or a bug: still one line, saying where
        print(f"{command}: {type(err).__name__}: {' '.join(str(err).split())} (raised at "
              f"{_raised_at(err)})", file=sys.stderr)
        return 1
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _command(argv: list[str]) -> str:
    """``isokernel run`` for ``run ...``: the name every message starts with."""
    return " ".join(["isokernel", *(w for w in argv[:1] if not w.startswith("-"))])


def _raised_at(err: Exception) -> str:
    """``file:line`` of the error: the line a SyntaxError names, else the
    innermost frame (a model's line, or isokernel's for a bug to report)."""
    if isinstance(err, SyntaxError):
        return f"{err.filename}:{err.lineno}"
    frames = traceback.extract_tb(err.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown"


def _dispatch(args) -> None:
    if args.command == "devices":
        print(devices_table())
    elif args.command == "report":
        print(report_function(args.target, args.shape, args.strategy, not args.no_run))
    elif args.command == "demo":
        run_demo(args.pixels, args.dtype, args.repeats, args.seed, args.chunks,
                 None if args.no_figure else args.figure, save_scene=args.save_scene,
                 stage4=args.stage4, stage5=args.stage5)
    elif args.command == "run":
        run_model(stage5_model(args.model, args.stage5), args.input, args.output, args.var,
                  parse_chunks(args.chunks), args.dask, args.workers, args.dtype,
                  progress=args.progress, strategy=args.strategy,
                  overwrite=args.overwrite, resume=args.resume, ancillary=args.ancillary,
                  checksum=args.checksum)
    elif args.command == "quickstart-mlp":
        quickstart_mlp(args.device, args.strategy, args.steps, args.seed, args.show_backend)


if __name__ == "__main__":
    sys.exit(main())
