"""llama.cpp's RPC protocol spoken from Python: HELLO, device memory, round trips and a transfer test.

A probe never goes through ggml's own client: `ggml_backend_rpc_add_server` aborts the
whole process when a node is unreachable, and a node answers one client at a time.
The wire format is protocol v7 of the llama.cpp vendored by llama-cpp-python 0.3.36
(ggml/src/ggml-rpc/ggml-rpc.cpp): a request is `| cmd (1 byte) | size (u64) | data |`,
an answer `| size (u64) | data |`, little-endian, structures packed. Everything the
node sends back is checked against the size the command defines before it is used.
"""

from __future__ import annotations

import socket
import statistics
import struct
import time
from dataclasses import dataclass

from workbench.core.config.rpc_endpoints import RpcEndpoint
from workbench.core.units import MIB

PROTOCOL_MAJOR = 7  # RPC_PROTO_MAJOR_VERSION in ggml-rpc.h
PROTOCOL_MINOR = 0
CONN_CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE (transport.h): all zero = plain TCP

# enum rpc_cmd
CMD_ALLOC_BUFFER = 0
CMD_GET_ALIGNMENT = 1
CMD_BUFFER_GET_BASE = 3
CMD_FREE_BUFFER = 4
CMD_SET_TENSOR = 6
CMD_GET_TENSOR = 8
CMD_GET_DEVICE_MEMORY = 11
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15

MAX_DEVICES_PER_NODE = 16  # more than any board has; a larger count is a broken or hostile answer
# struct rpc_tensor (packed): id, type, buffer, ne[4] (u32), nb[4] (u32), op, op_params[16],
# flags, src[10], view_src, view_offs, data, name[64], use_count
_RPC_TENSOR = struct.Struct("<QIQ4I4II16ii10QQQQ64si")
assert _RPC_TENSOR.size == 296
_GGML_TYPE_F32 = 0

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_ROUND_TRIPS = 20
DEFAULT_TRANSFER_BYTES = 4 * MIB


class NodeUnreachable(Exception):
    """The node could not be reached or did not speak the protocol; `reason` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class DeviceMemory:
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class NodeReport:
    """What one probe of a node found. Figures not measured are None, never 0."""

    address: str
    reachable: bool
    reason: str = ""  # why not reachable, or what could not be measured
    protocol: str = ""  # "7.0.0"
    devices: tuple[DeviceMemory, ...] = ()
    latency_s: float | None = None  # median round trip of a small command
    latency_spread_s: float | None = None  # max - min over the round trips
    upload_bytes_per_s: float | None = None  # to the node (SET_TENSOR)
    download_bytes_per_s: float | None = None  # from the node (GET_TENSOR)
    transfer_bytes: int = 0

    @property
    def free_bytes(self) -> int | None:
        return sum(d.free_bytes for d in self.devices) if self.devices else None

    @property
    def total_bytes(self) -> int | None:
        return sum(d.total_bytes for d in self.devices) if self.devices else None

    @property
    def link_bytes_per_s(self) -> float | None:
        """The slower direction: what a token's activations see on the way there and back."""
        rates = [r for r in (self.upload_bytes_per_s, self.download_bytes_per_s) if r]
        return min(rates) if rates else None


class RpcConnection:
    """One TCP connection to a node, after HELLO. Use as a context manager; close() frees the node."""

    def __init__(self, endpoint: RpcEndpoint, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.protocol = ""
        try:
            self._sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s)
        except socket.gaierror as error:
            raise NodeUnreachable(f"cannot resolve {endpoint.host} ({error.strerror or error})") from None
        except ConnectionRefusedError:
            raise NodeUnreachable("connection refused: nothing listens on that port "
                                  "(is `workbench node serve` running there?)") from None
        except TimeoutError:
            raise NodeUnreachable(f"no answer to the connection within {timeout_s:g}s "
                                  "(host down, or a firewall drops the port)") from None
        except OSError as error:
            raise NodeUnreachable(f"cannot connect ({error.strerror or error})") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._hello()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "RpcConnection":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    # -- framing -----------------------------------------------------------------------------
    def _send(self, cmd: int, payload: bytes = b"") -> None:
        try:
            self._sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
        except OSError as error:
            raise NodeUnreachable(f"the connection broke while sending ({error.strerror or error})") from None

    def _recv_exact(self, n_bytes: int, what: str) -> bytes:
        chunks = bytearray()
        while len(chunks) < n_bytes:
            try:
                chunk = self._sock.recv(min(n_bytes - len(chunks), 1 << 20))
            except TimeoutError:
                raise NodeUnreachable(f"no answer to {what} within {self.timeout_s:g}s") from None
            except OSError as error:
                raise NodeUnreachable(f"the connection broke during {what} ({error.strerror or error})") from None
            if not chunk:
                raise NodeUnreachable(f"the node closed the connection during {what}")
            chunks += chunk
        return bytes(chunks)

    def _answer(self, expected_size: int, what: str) -> bytes:
        (size,) = struct.unpack("<Q", self._recv_exact(8, what))
        if size != expected_size:
            raise NodeUnreachable(f"malformed answer to {what}: {size} bytes where the protocol has {expected_size} "
                                  "(not a llama.cpp RPC server of this protocol version?)")
        return self._recv_exact(size, what)

    def _hello(self) -> None:
        self._send(CMD_HELLO, bytes(CONN_CAPS_SIZE))
        try:
            answer = self._answer(4 + CONN_CAPS_SIZE, "HELLO")
        except NodeUnreachable as failed:
            if "no answer" in failed.reason:
                raise NodeUnreachable(
                    f"the port accepted the connection but gave no HELLO within {self.timeout_s:g}s: the node is "
                    "serving another client (llama.cpp's RPC server takes one at a time), or it is not an RPC node"
                ) from None
            raise
        major, minor, patch = answer[0], answer[1], answer[2]
        self.protocol = f"{major}.{minor}.{patch}"
        if major != PROTOCOL_MAJOR or minor > PROTOCOL_MINOR:
            raise NodeUnreachable(f"the node speaks RPC protocol v{self.protocol}; this llama.cpp speaks "
                                  f"v{PROTOCOL_MAJOR}.{PROTOCOL_MINOR}: install the same llama-cpp-python on both")

    # -- commands ----------------------------------------------------------------------------
    def device_count(self) -> int:
        self._send(CMD_DEVICE_COUNT)
        (count,) = struct.unpack("<I", self._answer(4, "DEVICE_COUNT"))
        if not 1 <= count <= MAX_DEVICES_PER_NODE:
            raise NodeUnreachable(f"the node reports {count} devices (expected 1 to {MAX_DEVICES_PER_NODE})")
        return count

    def device_memory(self, device: int) -> DeviceMemory:
        self._send(CMD_GET_DEVICE_MEMORY, struct.pack("<I", device))
        free, total = struct.unpack("<QQ", self._answer(16, "GET_DEVICE_MEMORY"))
        if free > total or total > 1 << 50:  # a petabyte of device memory is not a board
            raise NodeUnreachable(f"the node reports impossible memory (free {free}, total {total} bytes)")
        return DeviceMemory(free, total)

    def alignment(self, device: int = 0) -> int:
        self._send(CMD_GET_ALIGNMENT, struct.pack("<I", device))
        (value,) = struct.unpack("<Q", self._answer(8, "GET_ALIGNMENT"))
        return value

    def round_trips(self, count: int) -> list[float]:
        """Seconds per GET_ALIGNMENT round trip: the smallest command with an answer."""
        times = []
        for _ in range(count):
            started = time.perf_counter()
            self.alignment()
            times.append(time.perf_counter() - started)
        return times

    def transfer_rates(self, n_bytes: int) -> tuple[float, float]:
        """(upload, download) bytes per second moving `n_bytes` into a scratch buffer on the node and back."""
        n_bytes = max(4, n_bytes // 4 * 4)
        self._send(CMD_ALLOC_BUFFER, struct.pack("<IQ", 0, n_bytes))
        remote_ptr, remote_size = struct.unpack("<QQ", self._answer(16, "ALLOC_BUFFER"))
        if remote_ptr == 0 or remote_size < n_bytes:
            raise NodeUnreachable(f"the node could not allocate {n_bytes} bytes for the transfer test")
        try:
            self._send(CMD_BUFFER_GET_BASE, struct.pack("<Q", remote_ptr))
            (base,) = struct.unpack("<Q", self._answer(8, "BUFFER_GET_BASE"))
            tensor = _RPC_TENSOR.pack(1, _GGML_TYPE_F32, remote_ptr, n_bytes // 4, 1, 1, 1, 4, n_bytes, n_bytes,
                                      n_bytes, 0, *([0] * 16), 0, *([0] * 10), 0, 0, base, b"workbench-probe", 0)
            data = bytes(n_bytes)
            rtt = min(self.round_trips(3))
            started = time.perf_counter()
            # SET_TENSOR has no answer: the GET_ALIGNMENT after it is answered once it is stored.
            self._send(CMD_SET_TENSOR, tensor + b"\x00" + struct.pack("<Q", 0) + data)
            self.alignment()
            upload_s = max(time.perf_counter() - started - rtt, 1e-9)
            started = time.perf_counter()
            self._send(CMD_GET_TENSOR, tensor + struct.pack("<QQ", 0, n_bytes))
            self._answer(n_bytes, "GET_TENSOR")
            download_s = max(time.perf_counter() - started - rtt, 1e-9)
        finally:
            self._send(CMD_FREE_BUFFER, struct.pack("<Q", remote_ptr))
        return n_bytes / upload_s, n_bytes / download_s


def probe_node(endpoint: RpcEndpoint, *, timeout_s: float = DEFAULT_TIMEOUT_S, round_trips: int = DEFAULT_ROUND_TRIPS,
               transfer_bytes: int = DEFAULT_TRANSFER_BYTES) -> NodeReport:
    """Connect, HELLO, read each device's memory, time round trips and a transfer; never raises for the node."""
    try:
        with RpcConnection(endpoint, timeout_s) as connection:
            devices = tuple(connection.device_memory(i) for i in range(connection.device_count()))
            report = NodeReport(endpoint.address, True, protocol=connection.protocol, devices=devices)
            if round_trips <= 0:
                return report
            times = connection.round_trips(round_trips)
            latency = statistics.median(times)
            spread = max(times) - min(times)
            reason = ""
            upload = download = None
            if transfer_bytes > 0:
                try:
                    upload, download = connection.transfer_rates(transfer_bytes)
                except NodeUnreachable as failed:
                    reason = f"throughput not measured: {failed.reason}"
            return NodeReport(endpoint.address, True, reason, connection.protocol, devices, latency, spread,
                              upload, download, transfer_bytes if upload else 0)
    except NodeUnreachable as failed:
        return NodeReport(endpoint.address, False, failed.reason)


def check_reachable(endpoint: RpcEndpoint, timeout_s: float = DEFAULT_TIMEOUT_S) -> NodeReport:
    """Only HELLO and device memory: what a load needs to know before llama.cpp connects."""
    return probe_node(endpoint, timeout_s=timeout_s, round_trips=0, transfer_bytes=0)
