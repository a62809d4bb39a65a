"""Reading what a dead engine left behind: its log file's last lines, and how it exited."""

from __future__ import annotations

import os
import signal

_TAIL_BYTES = 64 * 1024


def read_log_tail(path: str | os.PathLike[str], n_lines: int = 30) -> tuple[str, ...]:
    """The last `n_lines` non-empty lines of a log file; () when it is missing."""
    try:
        with open(path, "rb") as stream:
            stream.seek(0, os.SEEK_END)
            size = stream.tell()
            stream.seek(max(0, size - _TAIL_BYTES))
            data = stream.read()
    except OSError:
        return ()
    lines = [line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip(" .")]
    return tuple(lines[-n_lines:])


def exit_signal_name(exitcode: int | None) -> str:
    """"SIGKILL" for a process killed by signal 9 (multiprocessing's exitcode -9); "" otherwise."""
    if exitcode is None or exitcode >= 0:
        return ""
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words: "killed by SIGKILL", "exit code 1"."""
    name = exit_signal_name(exitcode)
    if name:
        hint = " - often the kernel's OOM killer" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    if exitcode is None:
        return "still running"
    return f"exit code {exitcode}"
