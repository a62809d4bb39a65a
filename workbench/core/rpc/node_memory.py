"""The measured memory of an RPC node running on this machine: the resident size of its process."""

from __future__ import annotations

import psutil

from workbench.core.config.loopback import is_loopback_host


class LocalNodeMemory:
    """RSS of the process listening on a loopback node's port and its children; None for a remote node or when not found.

    The listening process is looked up once per endpoint (a scan of the system's sockets)
    and its PID kept; reading one process's RSS afterwards costs a single /proc read.
    """

    def __init__(self) -> None:
        self._pids: dict[str, int] = {}

    def rss_bytes(self, endpoint: str) -> int | None:
        host, _, port = endpoint.rpartition(":")
        if not is_loopback_host(host) or not port.isdigit():
            return None  # a node on another board: its memory is not measurable from here
        pid = self._pids.get(endpoint) or self._find(int(port))
        if pid is None:
            return None
        try:
            process = psutil.Process(pid)
            # `workbench node serve` fronts llama.cpp's server, which runs (and holds the buffers) in its child.
            rss = process.memory_info().rss + sum(_child_rss(child) for child in process.children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self._pids.pop(endpoint, None)
            return None
        self._pids[endpoint] = pid
        return rss

    @staticmethod
    def _find(port: int) -> int | None:
        try:
            connections = psutil.net_connections(kind="tcp4")
        except (psutil.AccessDenied, OSError):
            return None
        for connection in connections:
            if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port:
                return connection.pid
        return None


def _child_rss(child: psutil.Process) -> int:
    try:
        return child.memory_info().rss
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # a child restarting between the listing and the read
        return 0
