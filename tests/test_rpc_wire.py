"""The pure-Python RPC probe against hostile or absent nodes (real sockets on 127.0.0.1).

Each fake node below is a real TCP server that answers the way a broken or malicious
node could; the probe must turn each into one line and never size anything by it.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from workbench.core.config.rpc_endpoints import RpcEndpoint
from workbench.core.rpc.wire import probe_node


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeNode:
    """Accepts one connection and runs `script(conn)` on it."""

    def __init__(self, script):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.script = script
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        conn, _ = self.server.accept()
        with conn:
            try:
                self.script(conn)
            except OSError:
                pass

    def close(self):
        self.server.close()
        self.thread.join(timeout=10)


def _read_request(conn) -> tuple[int, bytes]:
    head = b""
    while len(head) < 9:
        head += conn.recv(9 - len(head))
    cmd, size = struct.unpack("<BQ", head)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    return cmd, body


def _hello_ok(conn):
    cmd, body = _read_request(conn)
    assert cmd == 14 and len(body) == 24  # HELLO with 24 bytes of transport caps
    conn.sendall(struct.pack("<Q", 28) + bytes([7, 0, 0, 0]) + bytes(24))


@pytest.fixture
def fake_node():
    nodes = []

    def start(script):
        node = FakeNode(script)
        nodes.append(node)
        return RpcEndpoint("127.0.0.1", node.port)

    yield start
    for node in nodes:
        node.close()


def test_a_dead_port_is_unreachable_in_one_line():
    report = probe_node(RpcEndpoint("127.0.0.1", _free_port()), timeout_s=5)
    assert not report.reachable
    assert "connection refused" in report.reason
    assert report.free_bytes is None and report.latency_s is None  # unknown, not zero


def test_a_node_that_never_says_hello_is_reported_busy(fake_node):
    gate = threading.Event()
    endpoint = fake_node(lambda conn: gate.wait(30))
    report = probe_node(endpoint, timeout_s=1.0)
    gate.set()
    assert not report.reachable
    assert "gave no HELLO" in report.reason and "one at a time" in report.reason


def test_a_wrong_protocol_version_is_named(fake_node):
    def old_node(conn):
        _read_request(conn)
        conn.sendall(struct.pack("<Q", 28) + bytes([3, 0, 0, 0]) + bytes(24))

    report = probe_node(fake_node(old_node), timeout_s=5)
    assert not report.reachable
    assert "v3.0.0" in report.reason and "same llama-cpp-python" in report.reason


def test_an_answer_of_the_wrong_size_is_refused_before_it_is_read(fake_node):
    def liar(conn):
        _read_request(conn)
        conn.sendall(struct.pack("<Q", 1 << 40))  # "a terabyte of HELLO follows"

    report = probe_node(fake_node(liar), timeout_s=5)
    assert not report.reachable
    assert "malformed answer to HELLO" in report.reason


def test_an_absurd_device_count_is_refused(fake_node):
    def many_devices(conn):
        _hello_ok(conn)
        _read_request(conn)
        conn.sendall(struct.pack("<QI", 4, 0xFFFFFFFF))

    report = probe_node(fake_node(many_devices), timeout_s=5)
    assert not report.reachable
    assert "4294967295 devices" in report.reason


def test_impossible_memory_figures_are_refused(fake_node):
    def bad_memory(conn):
        _hello_ok(conn)
        _read_request(conn)
        conn.sendall(struct.pack("<QI", 4, 1))
        _read_request(conn)
        conn.sendall(struct.pack("<QQQ", 16, 10 << 30, 1 << 30))  # more free than total

    report = probe_node(fake_node(bad_memory), timeout_s=5)
    assert not report.reachable
    assert "impossible memory" in report.reason


def test_a_node_closing_mid_answer_is_one_line(fake_node):
    def hang_up(conn):
        _hello_ok(conn)
        _read_request(conn)
        conn.sendall(struct.pack("<Q", 4) + b"\x01")  # two bytes of four, then gone

    report = probe_node(fake_node(hang_up), timeout_s=5)
    assert not report.reachable
    assert "closed the connection during DEVICE_COUNT" in report.reason
