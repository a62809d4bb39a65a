"""Run llama.cpp's RPC server in this process, through the RPC library llama-cpp-python built."""

from __future__ import annotations

import ctypes
import ipaddress
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from workbench.core.errors import WorkbenchError
from workbench.core.rpc.library import DEVICE_TYPE_ACCEL, DEVICE_TYPE_CPU, ggml_rpc

SECURITY_WARNING = (
    "WARNING: llama.cpp's RPC protocol has no authentication and no encryption: anyone who can reach "
    "{address} can use this machine's memory and compute and send it data. Open it only on a network you "
    "trust (a direct cable or an isolated LAN), never to the internet."
)
_LISTEN_WAIT_S = 60.0  # the server binds within milliseconds; a loaded 2-core box may take longer


@dataclass(frozen=True)
class RunningNode:
    host: str
    port: int
    devices: tuple[str, ...]  # "CPU (AMD Ryzen ...)"
    thread: threading.Thread

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def check_listen_host(host: str, *, allow_remote: bool) -> str:
    """An IPv4 address to bind (ggml's server takes only those); non-loopback needs `allow_remote`."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise WorkbenchError(f'--host "{host}" is not an IPv4 address', fix="llama.cpp's RPC server binds an IPv4 "
                             "address: 127.0.0.1 (this machine only), the board's LAN address, or 0.0.0.0") from None
    if address.version != 4:
        raise WorkbenchError(f'--host "{host}" is IPv6; llama.cpp\'s RPC server binds IPv4 only',
                             fix="Give the board's IPv4 address, e.g. --host 192.168.1.20")
    if not address.is_loopback and not allow_remote:
        raise WorkbenchError(f"--host {host} opens the node beyond this machine, and RPC has no authentication",
                             fix="Add --allow-remote if the network is yours (a direct cable or an isolated LAN)")
    return host


def _serving_devices() -> list[tuple[int, str]]:
    """As llama.cpp's rpc-server chooses: every accelerator, else the CPU (never another RPC device)."""
    lib = ggml_rpc()
    found = [(handle, f"{name} ({description})", kind) for handle, name, description, kind in lib.devices()
             if not name.startswith("RPC")]
    chosen = [(handle, label) for handle, label, kind in found if kind not in (DEVICE_TYPE_CPU, DEVICE_TYPE_ACCEL)]
    return chosen or [(handle, label) for handle, label, kind in found if kind == DEVICE_TYPE_CPU]


def _listening_ports(host: str) -> set[int]:
    ports = set()
    for connection in psutil.Process().net_connections(kind="tcp4"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.ip == host:
            ports.add(connection.laddr.port)
    return ports


def start_node(host: str, port: int, threads: int, cache_dir: Path | None) -> RunningNode:
    """Start the server on a daemon thread and return once it listens (port 0: the kernel picks one).

    `ggml_backend_rpc_start_server` blocks for the life of the server and prints its own
    banner on stdout; it returns only when it could not bind, which is reported here.
    """
    import llama_cpp  # noqa: F401 - deferred: importing llama_cpp loads libllama, and with it the backends into the registry

    if not 0 <= port <= 65535:
        raise WorkbenchError(f"--port {port} is not a port number", fix="Use 1-65535 (llama.cpp's default is 50052), "
                             "or 0 for any free port")
    if cache_dir is not None:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise WorkbenchError(f"cannot create the tensor cache folder ({error.strerror})", where=str(cache_dir),
                                 fix="Give a folder you can write to with --cache") from None
    lib = ggml_rpc()
    devices = _serving_devices()
    if not devices:
        raise WorkbenchError("llama.cpp found no device to serve", fix="This llama-cpp-python has no CPU backend?")
    handles = (ctypes.c_void_p * len(devices))(*(handle for handle, _ in devices))
    before = _listening_ports(host)
    endpoint = f"{host}:{port}".encode()
    cache = str(cache_dir).encode() if cache_dir is not None else None
    thread = threading.Thread(target=lib.start_server, args=(endpoint, cache, threads, len(devices), handles),
                              name="llama.cpp rpc server", daemon=True)
    thread.handles = handles  # type: ignore[attr-defined] - the array must outlive the C call
    thread.start()
    deadline = time.monotonic() + _LISTEN_WAIT_S
    while time.monotonic() < deadline:
        new = _listening_ports(host) - before
        if (port in new) if port else new:
            return RunningNode(host, port or min(new), tuple(label for _, label in devices), thread)
        if not thread.is_alive():
            raise WorkbenchError(f"cannot listen on {host}:{port}: llama.cpp's server could not bind it (in use?)",
                                 fix="Pick another --port (or stop what uses it), or check that --host is an "
                                     "address of this machine")
        thread.join(0.05)
    raise WorkbenchError(f"llama.cpp's server did not start listening on {host}:{port} within {_LISTEN_WAIT_S:g}s",
                         fix="See its output above; check --host and --port")


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
