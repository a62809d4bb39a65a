"""The child process `workbench node serve` supervises: llama.cpp's RPC server on a private loopback port.

Run as `python -m workbench.core.rpc.node_child THREADS LIMIT_BYTES [CACHE_DIR]`. It limits its own
address space first (RLIMIT_AS; start_node loads llama.cpp only after it), asks the kernel to kill it when
its parent dies, then serves on 127.0.0.1 at a port the kernel picks and prints one line the
supervisor reads: `rpc child on 127.0.0.1:PORT serving DEVICE|DEVICE`.
"""

from __future__ import annotations

import ctypes
import resource
import signal
import sys
from pathlib import Path

from workbench.core.rpc.node_server import start_node

READY_PREFIX = "rpc child on "
_PR_SET_PDEATHSIG = 1  # prctl.h


def main(argv: list[str]) -> int:
    threads, limit = int(argv[0]), int(argv[1])
    cache = Path(argv[2]) if len(argv) > 2 else None
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the supervisor's stop() still ends it
        pass
    node = start_node("127.0.0.1", 0, threads, cache)
    print(f"{READY_PREFIX}{node.address} serving {'|'.join(node.devices)}", flush=True)
    node.thread.join()
    return 1  # the server thread returns only when it cannot accept any more


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
