"""The ``isokernel`` command's entry point (pyproject's ``[project.scripts]``).

It lives outside the ``isokernel`` package on purpose: importing ``isokernel``
(NumPy, the code generators' tables) takes about half a second, and a Ctrl-C
during an import that ran before any handler printed Python's traceback. Here
every import runs inside the handler (this module imports only ``sys``, which
is built in), so a Ctrl-C at any moment after Python's own start-up ends the
command with exit status 130 and the one line ``isokernel COMMAND:
interrupted``, as it does later in a run.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from isokernel.cli import main as command_line
        code = command_line()
    except KeyboardInterrupt:
        code = _interrupted()
    except Exception as err:
        if not _after_ctrl_c(err):
            raise
        code = _interrupted()
    _quiet_exit()
    return code


def _interrupted() -> int:
    print(f"{_command()}: interrupted", file=sys.stderr)
    return 130


def _after_ctrl_c(err: BaseException) -> bool:
    """Whether ``err`` was raised while a Ctrl-C unwound (a KeyboardInterrupt in
    its chain of causes and contexts): an import cut short by Ctrl-C can fail
    again as an ImportError of the module it left half made."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _command() -> str:
    """``isokernel run`` for ``isokernel run ...``: the name the command's messages use."""
    return " ".join(["isokernel", *(w for w in sys.argv[1:2] if not w.startswith("-"))])


def _quiet_exit() -> None:
    """Once the command is over, a Ctrl-C while Python shuts down ends the process at
    once (status 130 in a shell), without a traceback and without losing printed output."""
    import signal
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return  # SIGINT ignored (a background job) or handled elsewhere: left so
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python reports it at exit as usual
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
