"""The node's public port: each client's commands checked (node_guard), then relayed to llama.cpp's server.

One client at a time, as llama.cpp serves them; the next waits in the listen backlog. A client
that does not say HELLO within STALL_S (or the idle timeout, if shorter), or holds no buffer and
stays silent for `idle_timeout_s`, is dropped, so one silent connection cannot lock the node.
A client holding buffers (a loaded model) may idle: llama.cpp's client cannot reconnect, and
keepalive (rpc.keepalive) still drops one whose host is gone. ALLOC_BUFFER beyond the
node's budget is answered as a failed allocation (remote_ptr 0) without reaching llama.cpp.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

from workbench.core.errors import WorkbenchError
from workbench.core.rpc.node_guard import (
    ALLOC_BUFFER, ANSWER_SIZES, BUFFER_GET_BASE, FREE_BUFFER, GET_TENSOR, HELLO, Buffer, Refused, check_request,
    check_size, command_name, head_bytes,
)
from workbench.core.rpc.wire import CONN_CAPS_SIZE
from workbench.core.units import MIB

STALL_S = 10.0  # the longest wait for a HELLO, and for llama.cpp's server to take the connection
DEFAULT_IDLE_TIMEOUT_S = 30.0
_HEADER = struct.Struct("<BQ")
_CHUNK = 1 << 20
_SMALL = 64 << 10  # data read whole before relaying; larger (weights) streams through in chunks


def open_listener(host: str, port: int) -> socket.socket:
    """The node's public socket (port 0: the kernel picks one); WorkbenchError in one line when it cannot bind."""
    if not 0 <= port <= 65535:
        raise WorkbenchError(f"--port {port} is not a port number", fix="Use 1-65535 (llama.cpp's default is 50052), "
                             "or 0 for any free port")
    try:
        return socket.create_server((host, port), backlog=16)
    except OSError as error:
        raise WorkbenchError(f"cannot listen on {host}:{port} ({error.strerror or error})",
                             fix="Pick another --port (or stop what uses it), or check that --host is an "
                                 "address of this machine") from None


class _Gone(Exception):
    """One side closed or went quiet; `reason` is one line for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NodeProxy:
    """Accepts on `listener` and relays each client to the port `upstream()` gives (0: none now)."""

    def __init__(self, listener: socket.socket, upstream: Callable[[], int], note: Callable[[str], None],
                 budget_bytes: int, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> None:
        self.listener = listener
        self.upstream = upstream
        self.note = note
        self.budget_bytes = budget_bytes
        self.idle_timeout_s = idle_timeout_s
        self._chunk = bytearray(_CHUNK)

    def serve_forever(self) -> None:
        while True:
            client, peer = self.listener.accept()
            with client:
                try:
                    self.serve_client(client, f"{peer[0]}:{peer[1]}")
                except Exception as error:  # noqa: BLE001 - no client may end the node, not even through a bug here
                    self.note(f"client {peer[0]}:{peer[1]}: dropped: {type(error).__name__}: {error}")

    def serve_client(self, client: socket.socket, peer: str) -> None:
        port = self.upstream()
        if not port:
            self.note(f"client {peer}: dropped: llama.cpp's RPC server is not running")
            return
        try:
            server = socket.create_connection(("127.0.0.1", port), timeout=STALL_S)
        except OSError as error:
            self.note(f"client {peer}: dropped: cannot reach llama.cpp's RPC server ({error.strerror or error})")
            return
        with server:
            server.settimeout(None)  # a long graph computes as long as it needs; a dead child resets the socket
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._relay(client, server)
            except Refused as refused:
                self.note(f"client {peer}: dropped: {refused.reason}")
            except _Gone as gone:
                if gone.reason:
                    self.note(f"client {peer}: dropped: {gone.reason}")

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        hello_wait_s = min(STALL_S, self.idle_timeout_s)
        client.settimeout(hello_wait_s)
        try:
            cmd, size = _header(_read(client, _HEADER.size, "HELLO", idle=False))
        except _Gone as gone:
            raise _Gone(f"no HELLO within {hello_wait_s:g} s" if "stalled" in gone.reason else gone.reason) from None
        client.settimeout(STALL_S)
        if cmd != HELLO or size != CONN_CAPS_SIZE:
            raise Refused(f"it opened with {command_name(cmd)} of {size} bytes, not HELLO")
        _send(server, _HEADER.pack(cmd, size) + _read(client, size, "HELLO", idle=False))
        self._answer(server, client)
        buffers: dict[int, Buffer] = {}
        while True:
            timeout = None if buffers else self.idle_timeout_s  # set only when it changes: a syscall per command
            if client.gettimeout() != timeout:
                client.settimeout(timeout)
            cmd, size = _header(_read(client, _HEADER.size, "a command header", idle=True))
            if cmd == ALLOC_BUFFER and size == 12:
                self._alloc(client, server, _read(client, size, "ALLOC_BUFFER", idle=False), buffers)
                continue
            check_size(cmd, size)  # before reading: a header may announce gigabytes
            head = _read(client, head_bytes(cmd, size), command_name(cmd), idle=False) if size else b""
            check_request(cmd, size, head, buffers)
            rest = size - len(head)  # a SET_TENSOR's data, checked to fit its buffer
            if rest <= _SMALL:  # a token's inputs: one send, not three
                _send(server, _HEADER.pack(cmd, size) + head + _read(client, rest, command_name(cmd), idle=False))
            else:
                _send(server, _HEADER.pack(cmd, size) + head)
                self._pipe(client, server, rest, command_name(cmd))
            if cmd == FREE_BUFFER:
                buffers.pop(struct.unpack("<Q", head)[0], None)
            elif cmd in ANSWER_SIZES or cmd == GET_TENSOR:
                self._answer(server, client)

    def _alloc(self, client: socket.socket, server: socket.socket, request: bytes, buffers: dict[int, Buffer]) -> None:
        _, wanted = struct.unpack("<IQ", request)
        held = sum(buffer.size for buffer in buffers.values())
        if wanted > self.budget_bytes - held:
            self.note(f"ALLOC_BUFFER of {wanted / MIB:,.0f} MiB refused: the client holds {held / MIB:,.0f} MiB "
                      f"of the node's {self.budget_bytes / MIB:,.0f} MiB")
            _send(client, struct.pack("<QQQ", 16, 0, 0))  # what llama.cpp answers when an allocation fails
            return
        _send(server, _HEADER.pack(ALLOC_BUFFER, len(request)) + request)
        answer = _read_answer(server, 16, "ALLOC_BUFFER")
        remote_ptr, remote_size = struct.unpack("<QQ", answer)
        if remote_ptr:  # its base address, asked here so every later tensor can be checked against it
            _send(server, _HEADER.pack(BUFFER_GET_BASE, 8) + struct.pack("<Q", remote_ptr))
            (base,) = struct.unpack("<Q", _read_answer(server, 8, "BUFFER_GET_BASE"))
            buffers[remote_ptr] = Buffer(base, remote_size)
        _send(client, struct.pack("<Q", 16) + answer)

    def _answer(self, server: socket.socket, client: socket.socket) -> None:
        (size,) = struct.unpack("<Q", _read(server, 8, "", idle=False, side="llama.cpp's server"))
        _send(client, struct.pack("<Q", size))
        self._pipe(server, client, size, "an answer", side="llama.cpp's server")

    def _pipe(self, source: socket.socket, sink: socket.socket, n_bytes: int, what: str,
              side: str = "the client") -> None:
        view = memoryview(self._chunk)
        while n_bytes:
            got = _recv_into(source, view[:min(n_bytes, _CHUNK)], what, side)
            _send(sink, view[:got])
            n_bytes -= got


def _header(raw: bytes) -> tuple[int, int]:
    return _HEADER.unpack(raw)


def _read(sock: socket.socket, n_bytes: int, what: str, *, idle: bool, side: str = "the client") -> bytes:
    """Exactly `n_bytes`; _Gone when the peer closes, breaks or stays quiet past its timeout.

    `idle`: the wait between commands, where a timeout is the idle limit and a close is a goodbye.
    """
    data = bytearray(n_bytes)
    view = memoryview(data)
    done = 0
    while done < n_bytes:
        done += _recv_into(sock, view[done:], what, side, idle=idle and done == 0)
    return bytes(data)


def _recv_into(sock: socket.socket, view: memoryview, what: str, side: str, idle: bool = False) -> int:
    try:
        got = sock.recv_into(view)
    except TimeoutError:
        timeout = sock.gettimeout()
        if timeout is None:  # ETIMEDOUT from the kernel: keepalive found the peer gone
            raise _Gone(f"{side} stopped answering (keepalive)") from None
        if idle:
            raise _Gone(f"no command for {timeout:g} s while holding no buffer") from None
        raise _Gone(f"{side} stalled for {timeout:g} s inside {what}") from None
    except OSError as error:
        raise _Gone(f"{side} broke the connection ({error.strerror or error})") from None
    if not got:
        raise _Gone("" if idle else f"{side} closed the connection inside {what}")
    return got


def _read_answer(server: socket.socket, expected: int, what: str) -> bytes:
    (size,) = struct.unpack("<Q", _read(server, 8, what, idle=False, side="llama.cpp's server"))
    if size != expected:
        raise _Gone(f"llama.cpp's server answered {what} with {size} bytes")
    return _read(server, size, what, idle=False, side="llama.cpp's server")


def _send(sock: socket.socket, data: bytes | memoryview) -> None:
    try:
        sock.sendall(data)
    except OSError as error:
        raise _Gone(f"the connection broke while relaying ({error.strerror or error})") from None
