"""Local llama.cpp RPC nodes for tests and benchmarks: `workbench node serve` subprocesses on 127.0.0.1."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

from workbench.core.rpc.node_supervisor import SERVER_LINE

_LISTENING = re.compile(r"^listening on (127\.0\.0\.1:\d+)$")


class LocalNode:
    """One `workbench node serve --port 0` process; `address` once it listens. Stop it with stop()."""

    def __init__(self, threads: int = 1, start_timeout_s: float = 180.0, extra_args: tuple[str, ...] = ()) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "workbench", "node", "serve", "--port", "0", "--threads", str(threads), *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.output: list[str] = []
        found = threading.Event()
        self.address = ""

        def read() -> None:
            for line in self.process.stdout:
                self.output.append(line.rstrip("\n"))
                match = _LISTENING.match(line.strip())
                if match and not self.address:
                    self.address = match.group(1)
                    found.set()
            found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        # Generous: the node imports llama_cpp on a machine other tests keep busy.
        found.wait(start_timeout_s)
        if not self.address:
            self.stop()
            raise RuntimeError("the RPC node did not start:\n" + "\n".join(self.output[-20:]))

    @property
    def server_address(self) -> str:
        """llama.cpp's own port behind the node's checks (its private loopback address), "" if not logged."""
        lines = [line for line in self.output if line.startswith(SERVER_LINE)]
        return lines[-1][len(SERVER_LINE):].split()[0] if lines else ""

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL, as a board losing power: no goodbye on the socket beyond the kernel's reset."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._reader.join(timeout=10)
