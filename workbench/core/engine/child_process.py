"""Workbench child processes (the engine, the quantizer) started as fresh interpreters, with a pipe.

Not multiprocessing's "spawn": it re-runs the parent's main script in the child, so a
script that starts an engine at module level (no `if __name__ == "__main__":` guard) made
the child start an engine of its own while bootstrapping, which multiprocessing refuses:
the engine died with exit code 1 and nothing in its log. A child here runs only
`<module>.child_main(argv)`, whatever the parent's main is.
"""

from __future__ import annotations

import mmap
import os
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

# The folder that holds the `workbench` package, put first on the child's sys.path: the
# parent may have found the package through a path the child's default sys.path lacks.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); import importlib; "
    "importlib.import_module(sys.argv[2]).child_main(sys.argv[3:])"
)


class SharedFlag:
    """A byte of shared memory (an unlinked temp file, mapped): one side sets it, the other polls it.

    Reading it is a memory read, cheap enough for the engine to poll per graph node.
    """

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, 1)

    @classmethod
    def create(cls) -> tuple["SharedFlag", int]:
        """A new flag (False) and the file descriptor a child needs to map it (the caller closes it)."""
        fd, path = tempfile.mkstemp(prefix="workbench-flag-")
        os.unlink(path)  # only the descriptors keep it: nothing is left behind, whatever dies
        os.write(fd, b"\0")
        return cls(fd), fd

    @property
    def value(self) -> bool:
        return self._map[0] != 0

    @value.setter
    def value(self, on: bool) -> None:
        self._map[0] = 1 if on else 0


class ChildProcess:
    """A running child: pid, is_alive(), exitcode (negative signal number when killed), join(), kill().

    `sentinel` is a pidfd that becomes readable when the child ends, for
    `multiprocessing.connection.wait`; None where the kernel has no pidfds (the pipe's EOF
    then tells the same, as only the child holds its end).
    """

    def __init__(self, popen: subprocess.Popen) -> None:
        self._popen = popen
        self.pid = popen.pid
        try:
            self.sentinel: int | None = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):
            self.sentinel = None

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def join(self, timeout: float | None = None) -> None:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        if self.is_alive():
            self._popen.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Release the pidfd (the caller has joined or killed the child)."""
        if self.sentinel is not None:
            os.close(self.sentinel)
            self.sentinel = None


def start_child(
    module: str, args: tuple[str, ...], log_path: str, *, pass_fds: tuple[int, ...] = ()
) -> tuple[ChildProcess, Connection]:
    """Run `module.child_main([pipe fd, *args])` in a new interpreter; (the child, our end of its pipe).

    The child's stdout and stderr go to `log_path` from its first instruction, so even an
    import error is in the log tail. It runs in a process group of its own: Ctrl-C in a
    terminal is the parent's to interpret (an engine that got it could die of it while still
    starting up).
    """
    ours, theirs = socket.socketpair()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        popen = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, _PACKAGE_ROOT, module, str(theirs.fileno()), *args],
            stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
            pass_fds=(theirs.fileno(), *pass_fds), process_group=0,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()  # only the child holds its end now: its death is our end's EOF
        os.close(log_fd)
    return ChildProcess(popen), Connection(ours.detach())


def child_connection(argv: list[str]) -> tuple[Connection, list[str]]:
    """In a child: its end of the pipe and the rest of its arguments."""
    return Connection(int(argv[0])), argv[1:]
