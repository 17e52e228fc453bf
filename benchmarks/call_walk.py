"""The walk of one call: which isokernel files a first ``jit(f, strategy=
"native")`` call runs code in, and every call between packages, traced with
``sys.setprofile``. A call into a higher layer is marked when the function
was handed down as an argument (a callback); ``tests/test_pipeline.py``
checks that no other kind exists.

    python benchmarks/call_walk.py [--files]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

import isokernel as ik
import isokernel.numpy as inp

ROOT = os.path.dirname(ik.__file__)


def _package(filename: str) -> str | None:
    if not filename.startswith(ROOT):
        return None
    return os.path.relpath(filename, ROOT).split(os.sep)[0].removesuffix(".py")


def _handed_over(frame, caller) -> bool:
    code = caller.f_code
    for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
        value = caller.f_locals.get(name)
        if getattr(getattr(value, "__func__", value), "__code__", None) is frame.f_code:
            return True
    return False


def walk(call) -> tuple[set[str], collections.Counter]:
    """The files ``call()`` runs isokernel code in, and the calls between
    packages as (caller package, callee package) counts."""
    files, hops = set(), collections.Counter()

    def profile(frame, event, arg):
        if event != "call" or _package(frame.f_code.co_filename) is None:
            return
        callee = _package(frame.f_code.co_filename)
        files.add(os.path.relpath(frame.f_code.co_filename, ROOT))
        caller = frame.f_back
        while caller is not None and _package(caller.f_code.co_filename) is None:
            caller = caller.f_back
        if caller is not None and _package(caller.f_code.co_filename) != callee:
            how = " (a callback argument)" if _handed_over(frame, caller) else ""
            hops[_package(caller.f_code.co_filename), callee + how] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return files, hops


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", action="store_true", help="list the files")
    args = parser.parse_args(argv)

    def model(x, y):
        return inp.sin(x) * y + x
    x = np.linspace(0.0, 1.0, 1000)
    files, hops = walk(lambda: ik.jit(model, strategy="native")(x, x * 2.0))
    packages = {f.split(os.sep)[0].removesuffix(".py") for f in files}
    print(f"first jit(f, strategy='native') call: {len(files)} files in {len(packages)} "
          f"packages, {sum(hops.values())} calls between packages")
    for (a, b), n in sorted(hops.items()):
        print(f"  {a} -> {b}: {n}")
    if args.files:
        print("\n".join(f"  {f}" for f in sorted(files)))


if __name__ == "__main__":
    main()
