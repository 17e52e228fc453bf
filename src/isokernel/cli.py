"""The ``isokernel`` command. Argument parsing only; the work is in
``isokernel.reports`` and ``isokernel.models``."""

from __future__ import annotations

import argparse
import sys

from .ir import IsokernelError
from .models.demo import run_demo
from .reports import devices_table, report_function


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    demo = sub.add_parser("demo", help="a model on every available strategy, with parity",
                          description="Run a small pointwise model on every available "
                                      "strategy and print a parity and speed table.")
    demo.add_argument("--pixels", type=int, default=1_000_000, help="pixels (default 1e6)")
    demo.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "devices":
            print(devices_table())
        elif args.command == "report":
            print(report_function(args.target, args.shape, args.strategy, not args.no_run))
        elif args.command == "demo":
            run_demo(args.pixels, args.dtype)
    except (IsokernelError, ValueError, TypeError, FileNotFoundError, AttributeError,
            ImportError) as err:
        print(f"isokernel {args.command}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
