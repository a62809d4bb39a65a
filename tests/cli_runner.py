"""`workbench ARGV...` run in this process through `main(argv)`, for tests of the CLI.

A subprocess costs a Python start and the workbench's imports; tests of what only a real
process shows (signals, a crash of the command's engine, a server's socket, a memory cap)
run `python -m workbench` themselves.
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import NamedTuple


class CliRun(NamedTuple):
    """What a command run in this process did, named as in subprocess.CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*argv: str, stdin: str = "") -> CliRun:
    """Runs the command with `stdin` as its input (empty: a pipe closed at once), capturing what it writes."""
    from workbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exit_:  # argparse's --help and its usage errors
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.stdin = saved_stdin
    return CliRun(code, out.getvalue(), err.getvalue())
