"""llama.cpp's RPC server in a child process under a memory limit, restarted with a log line when it dies.

A GGML_ASSERT in the server (a client's malformed graph, a bug) aborts the process that runs it;
in a child, it costs that client's connection and a restart of a second or two, never the node.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from workbench.core.errors import WorkbenchError
from workbench.core.rpc.node_child import READY_PREFIX
from workbench.core.units import MIB

SERVER_LINE = "llama.cpp's RPC server runs on "  # then its private address: benchmarks read it
START_WAIT_S = 120.0  # the child imports llama.cpp; a loaded 2-core box may take long
RESTART_PAUSE_S = 0.5  # between a death and the restart, so a crash loop cannot spin
# Address space the child maps beyond the buffers clients allocate: Python, llama.cpp's libraries and
# its threads' stacks (a fresh node maps about 240 MiB), with room for the compute graphs' workspace.
ADDRESS_SPACE_OVERHEAD = 1024 * MIB
ADDRESS_SPACE_PER_THREAD = 80 * MIB  # an 8 MiB stack and a malloc arena (MALLOC_ARENA_MAX=2 keeps those few)


def node_budget_bytes(max_memory_mib: int | None) -> int:
    """What clients may allocate: `--max-memory`, else the memory available now (psutil), so lending it
    pushes nothing else on this board into swap."""
    total = psutil.virtual_memory().total
    if max_memory_mib is None:
        return psutil.virtual_memory().available
    if not 0 < max_memory_mib * MIB <= total:
        raise WorkbenchError(f"--max-memory {max_memory_mib} MiB is out of range",
                             fix=f"Give 1 to {total // MIB} MiB (this machine's RAM)")
    return max_memory_mib * MIB


def address_space_limit(budget_bytes: int, threads: int) -> int:
    """RLIMIT_AS for a child that may hold `budget_bytes` of client buffers."""
    return budget_bytes + ADDRESS_SPACE_OVERHEAD + threads * ADDRESS_SPACE_PER_THREAD


class SupervisedServer:
    """The child serving llama.cpp's RPC protocol on 127.0.0.1:`port()`; a monitor thread restarts it."""

    def __init__(self, threads: int, cache_dir: Path | None, budget_bytes: int, note: Callable[[str], None]) -> None:
        self.threads = threads
        self.cache_dir = cache_dir
        self.limit_bytes = address_space_limit(budget_bytes, threads)
        self.note = note
        self.devices: tuple[str, ...] = ()
        self.restarts = 0
        self._process: subprocess.Popen | None = None
        self._port = 0
        self._ready = threading.Condition()
        self._stopping = False
        self._monitor: threading.Thread | None = None

    def start(self) -> None:
        """Start the child and return once it listens (WorkbenchError with its last words if it cannot)."""
        self._spawn()
        self._monitor = threading.Thread(target=self._watch, name="rpc child monitor", daemon=True)
        self._monitor.start()

    def port(self, wait_s: float = START_WAIT_S) -> int:
        """The child's private port, waiting while it restarts; 0 when it did not come back within `wait_s`."""
        with self._ready:
            self._ready.wait_for(lambda: self._port or self._stopping, wait_s)
            return self._port

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=30)

    def _spawn(self) -> None:
        argv = [sys.executable, "-m", "workbench.core.rpc.node_child", str(self.threads), str(self.limit_bytes)]
        if self.cache_dir is not None:
            argv.append(str(self.cache_dir))
        # No gdb backtrace on an abort (it would stall the restart), and few malloc arenas under RLIMIT_AS.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GGML_NO_BACKTRACE": "1", "MALLOC_ARENA_MAX": "2"}
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, errors="replace", env=env)
        self._process = process
        self._last_words: collections.deque[str] = collections.deque(maxlen=6)
        too_slow = threading.Timer(START_WAIT_S, process.kill)  # a child that hangs silently ends the read below
        too_slow.daemon = True
        too_slow.start()
        for line in process.stdout:  # the banner, then the ready line
            line = line.rstrip("\n")
            if line.startswith(READY_PREFIX):
                too_slow.cancel()
                address, _, devices = line[len(READY_PREFIX):].partition(" serving ")
                self.devices = tuple(devices.split("|"))
                threading.Thread(target=self._relay, args=(process,), name="rpc child output", daemon=True).start()
                with self._ready:
                    self._port = int(address.rsplit(":", 1)[1])
                    self._ready.notify_all()
                self.note(f"{SERVER_LINE}{address} (pid {process.pid}), behind this node's checks")
                return
            self._last_words.append(line)
            self.note(line)
        too_slow.cancel()
        process.kill()
        process.wait(timeout=30)
        raise WorkbenchError("llama.cpp's RPC server did not start: " + (" / ".join(self._last_words) or "no output"),
                             fix="See its output above")

    def _relay(self, process: subprocess.Popen) -> None:
        for line in process.stdout:  # llama.cpp's own lines ("Accepted client connection", an assert)
            line = line.rstrip("\n")
            self._last_words.append(line)
            self.note(line)

    def _watch(self) -> None:
        while True:
            process = self._process
            code = process.wait()
            with self._ready:
                self._port = 0
                if self._stopping:
                    return
            cause = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            words = next((w for w in reversed(self._last_words) if w.strip()), "")
            self.note(f"llama.cpp's RPC server (pid {process.pid}) died ({cause}"
                      + (f'; its last output: "{words.strip()}"' if words else "") + "); restarting it")
            time.sleep(RESTART_PAUSE_S)
            try:
                self._spawn()
            except WorkbenchError as failed:
                self.note(f"could not restart llama.cpp's RPC server: {failed}")
                with self._ready:
                    self._stopping = True
                    self._ready.notify_all()
                return
            self.restarts += 1
            self.note(f"llama.cpp's RPC server restarted (pid {self._process.pid}, restart {self.restarts})")
