"""TCP keepalive and a user timeout on llama.cpp's RPC sockets: the engine's to its nodes, a node's to its client.

llama.cpp (ggml-rpc, transport.cpp) opens a plain blocking TCP socket per node and sets only
TCP_NODELAY, so a node that goes silent without resetting the connection (power loss, a pulled
cable) leaves its dispatcher thread in recv() for ever and the engine hangs. With keepalive and
TCP_USER_TIMEOUT the kernel declares such a peer dead: recv()/send() fail with ETIMEDOUT, ggml-rpc
logs "recv failed" and aborts the process ("Remote RPC server crashed or returned malformed
response"), and the client names the node that no longer answers (rpc.failure).

Why this cannot fail a slow-but-alive node: keepalive probes are answered by the node's kernel,
not by llama.cpp, so a node busy computing a long graph still answers them; TCP_USER_TIMEOUT only
counts how long sent data stays unacknowledged, and a live kernel acknowledges data on arrival
(even when the RPC server has not read it yet; a full receive window is kept open by answered
window probes, Linux >= 5.11). What it does declare dead is a link that carries nothing back for
SILENT_NODE_DEADLINE_S, e.g. a Wi-Fi link that drops out for that long.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.core.config.rpc_endpoints import parse_endpoint

# A node that answers nothing (not even keepalive probes or ACKs) for this long is declared dead.
SILENT_NODE_DEADLINE_S = 10
KEEPALIVE_IDLE_S = 4  # quiet time before the first probe
KEEPALIVE_INTERVAL_S = 2  # between unanswered probes
KEEPALIVE_PROBES = 3  # unanswered probes that end the connection: 4 + 3 * 2 = 10 s
USER_TIMEOUT_MS = SILENT_NODE_DEADLINE_S * 1000  # the same bound for sent data left unacknowledged

_TCP_TABLES = ("/proc/self/net/tcp", "/proc/self/net/tcp6")  # this process's network namespace
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column


@dataclass(frozen=True)
class NodeSocket:
    """One of this process's TCP connections whose remote end is an RPC node."""

    fd: int
    address: str  # the node as the preset names it, "host:port"
    local: str  # "ip:port" of our end, for the log


def watch_node_sockets(addresses: Sequence[str], note: Callable[[str], None]) -> list[str]:
    """Tune every connection to these nodes (see the module doc) and note it; warnings for the load.

    The one warning: this process's sockets cannot be read (no /proc), so nothing is watched.
    """
    try:
        found = node_sockets(addresses)
    except OSError as error:
        return [f"RPC nodes are not watched for silence: cannot read this process's sockets ({error})"]
    tuned: list[NodeSocket] = []
    for node_socket in found:
        try:
            tune_socket(node_socket.fd)
        except OSError as error:
            note(f"could not set keepalive on fd {node_socket.fd} to RPC node {node_socket.address}: {error}")
        else:
            tuned.append(node_socket)
    if tuned:
        note(f"RPC node sockets tuned to declare a silent node dead within {SILENT_NODE_DEADLINE_S} s "
             f"(keepalive {KEEPALIVE_IDLE_S}+{KEEPALIVE_PROBES}x{KEEPALIVE_INTERVAL_S} s, TCP_USER_TIMEOUT "
             f"{USER_TIMEOUT_MS} ms): " + ", ".join(f"fd {s.fd} {s.local} -> {s.address}" for s in tuned))
    watched = {s.address for s in tuned}
    for address in addresses:
        if address not in watched:  # llama.cpp drops a node's connection when nothing of the model is on it
            note(f"RPC node {address}: no open connection of llama.cpp's to watch (it holds nothing of this load?)")
    return []


def tune_socket(fd: int) -> None:
    """Keepalive and TCP_USER_TIMEOUT on `fd` through a duplicate (the options belong to the shared socket)."""
    sock = socket.socket(fileno=os.dup(fd))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, USER_TIMEOUT_MS)
    finally:
        sock.close()  # closes only the duplicate: llama.cpp's descriptor stays open


def node_sockets(addresses: Sequence[str]) -> list[NodeSocket]:
    """This process's open TCP connections (not listeners) whose remote ip:port is one of the nodes."""
    targets = _node_targets(addresses)
    return [NodeSocket(fd, targets[remote], f"{local[0]}:{local[1]}")
            for fd, _, local, remote in _tcp_sockets(lambda local, remote: remote in targets)]


def tune_node_sockets_while_loading(addresses: Sequence[str], interval_s: float = 0.05) -> Callable[[], None]:
    """Tune each connection to the nodes as llama.cpp opens it, until the returned stop() is called.

    llama.cpp connects to its nodes and streams the weights inside one blocking load call: a
    node that goes silent then would hang the load for ever, so the sockets are tuned while the
    load runs (ctypes releases the GIL, so this thread runs beside it), not only after it.
    """
    targets = _node_targets(addresses)
    stop = threading.Event()
    thread = _tune_new_connections(lambda local, remote: remote in targets, lambda _remote: None, interval_s,
                                   stop, "rpc load keepalive")

    def stopped() -> None:
        stop.set()
        thread.join()

    return stopped


def watch_client_connections(port: int, note: Callable[[str], None], interval_s: float = 1.0) -> threading.Thread:
    """On a node: tune each client connection accepted on `port` (a daemon thread looks once per interval).

    llama.cpp's server serves one client at a time and waits in recv() for its next command;
    an engine host that went silent (cable pulled) would keep the node busy for ever, refusing
    every later client. Tuned, the node drops that client after SILENT_NODE_DEADLINE_S and
    accepts the next. The engine's kernel answers the probes while it is only idle.
    """
    def tuned(remote: tuple[str, int]) -> None:
        note(f"client {remote[0]}:{remote[1]}: declared gone if silent for {SILENT_NODE_DEADLINE_S} s (keepalive)")

    return _tune_new_connections(lambda local, remote: local[1] == port, tuned, interval_s, threading.Event(),
                                 "rpc client keepalive", note)


def _tune_new_connections(match: Callable[[tuple[str, int], tuple[str, int]], bool],
                          on_tuned: Callable[[tuple[str, int]], None], interval_s: float, stop: threading.Event,
                          name: str, note: Callable[[str], None] | None = None) -> threading.Thread:
    """A daemon thread tuning every connection `match` accepts once, looking again each interval until `stop`."""
    tuned: set[int] = set()

    def watch() -> None:
        while not stop.is_set():
            try:
                found = _tcp_sockets(match)
            except OSError as error:
                if note is not None:
                    note(f"connections are not watched for silence: cannot read this process's sockets ({error})")
                return
            for fd, inode, _, remote in found:
                if inode in tuned:
                    continue
                tuned.add(inode)
                try:
                    tune_socket(fd)
                except OSError:  # closed (or the number reused) since the scan: nothing to tune
                    continue
                on_tuned(remote)
            stop.wait(interval_s)

    thread = threading.Thread(target=watch, name=name, daemon=True)
    thread.start()
    return thread


def _node_targets(addresses: Sequence[str]) -> dict[tuple[str, int], str]:
    """(ip, port) -> the node as the preset names it, for every IPv4 address of each node's host."""
    targets: dict[tuple[str, int], str] = {}
    for address in addresses:
        endpoint = parse_endpoint(address)
        for ip in _ipv4_addresses(endpoint.host):
            targets[(ip, endpoint.port)] = address
    return targets


def _tcp_sockets(match: Callable[[tuple[str, int], tuple[str, int]], bool]) -> list[tuple[int, int, tuple, tuple]]:
    """(fd, inode, local, remote) of this process's TCP connections (not listeners) that `match` accepts."""
    by_inode: dict[int, tuple[tuple[str, int], tuple[str, int]]] = {}
    for table in _TCP_TABLES:
        try:
            text = Path(table).read_text()
        except FileNotFoundError:  # no IPv6 in this kernel
            continue
        for local, remote, state, inode in _connections(text):
            if state != _LISTEN and inode and match(local, remote):
                by_inode[inode] = (local, remote)
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed since the listing
            continue
        if link.startswith("socket:[") and link.endswith("]"):
            inode = int(link[len("socket:["):-1])
            if inode in by_inode:
                found.append((int(name), inode, *by_inode[inode]))
    return sorted(found)


def _ipv4_addresses(host: str) -> set[str]:
    # llama.cpp connects over IPv4 with gethostbyname(); any of the host's IPv4 addresses may be the one.
    try:
        return set(socket.gethostbyname_ex(host)[2])
    except OSError:
        return set()


def _connections(text: str) -> Iterable[tuple[tuple[str, int], tuple[str, int], str, int]]:
    """(local, remote, state, inode) per row of /proc/net/tcp or tcp6 (fields as the kernel prints them)."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            yield _endpoint(fields[1]), _endpoint(fields[2]), fields[3], int(fields[9])
        except ValueError:
            continue


def _endpoint(field: str) -> tuple[str, int]:
    """"0100007F:1F90" -> ("127.0.0.1", 8080); IPv6 rows too, v4-mapped ones as IPv4."""
    hex_ip, hex_port = field.split(":")
    # The kernel prints each 32-bit word of the address as a native-endian number.
    raw = b"".join(struct.pack("=I", int(hex_ip[i:i + 8], 16)) for i in range(0, len(hex_ip), 8))
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw)
    elif len(raw) == 16:
        ip = socket.inet_ntop(socket.AF_INET6, raw)
        if raw[:12] == b"\0" * 10 + b"\xff\xff":
            ip = socket.inet_ntop(socket.AF_INET, raw[12:])
    else:
        raise ValueError(f"not an address: {field}")
    return ip, int(hex_port, 16)
