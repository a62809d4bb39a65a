"""One hostile client must not kill or lock an RPC node: real nodes on 127.0.0.1, raw protocol v7 messages.

Each attack is sent as bytes on a socket, the way a stranger on the node's network could. The
SET_TENSOR one is first shown to abort llama.cpp's bare server (SIGABRT), so the test proves the
node survives a message that really kills the server it fronts.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys

import psutil
import pytest

from fakes import wait_for
from workbench.cli.main import main
from workbench.core.config.rpc_endpoints import parse_endpoint
from workbench.core.rpc import node_guard as guard
from workbench.core.rpc.local_nodes import LocalNode
from workbench.core.rpc.node_child import READY_PREFIX
from workbench.core.rpc.node_supervisor import address_space_limit
from workbench.core.rpc.wire import probe_node

_TENSOR = struct.Struct("<QIQ4I4II16ii10QQQQ64si")
BUDGET_MIB = 256
IDLE_S = 1


def _tensor(buffer: int, data: int, ne0: int, type_id: int = 0, type_size: int = 4) -> bytes:
    """An rpc_tensor of `ne0` elements of one row (F32 unless told), its data at `data` in `buffer`."""
    row = ne0 * type_size
    return _TENSOR.pack(1, type_id, buffer, ne0, 1, 1, 1, type_size, row, row, row, 0, *([0] * 16), 0, *([0] * 10),
                        0, 0, data, b"attack", 0)


class Client:
    """A raw protocol client: HELLO on connect, then whatever the test sends."""

    def __init__(self, address: str, hello: bool = True) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        if hello:
            self.send(guard.HELLO, bytes(24))
            assert len(self.answer()) == 28

    def send(self, cmd: int, payload: bytes, announced: int | None = None) -> None:
        self.sock.sendall(struct.pack("<BQ", cmd, len(payload) if announced is None else announced) + payload)

    def answer(self) -> bytes:
        (size,) = struct.unpack("<Q", self._exact(8))
        return self._exact(size)

    def alloc(self, size: int) -> tuple[int, int, int]:
        """(remote_ptr, remote_size, base) of a fresh buffer on device 0."""
        self.send(guard.ALLOC_BUFFER, struct.pack("<IQ", 0, size))
        ptr, remote_size = struct.unpack("<QQ", self.answer())
        assert ptr, "the node refused a small allocation"
        self.send(guard.BUFFER_GET_BASE, struct.pack("<Q", ptr))
        (base,) = struct.unpack("<Q", self.answer())
        return ptr, remote_size, base

    def closed_by_peer(self) -> bool:
        """True once the other end closes (EOF or reset) within the socket's timeout."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        return True

    def _exact(self, n_bytes: int) -> bytes:
        data = b""
        while len(data) < n_bytes:
            chunk = self.sock.recv(n_bytes - len(data))
            assert chunk, "the node closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def node():
    started = LocalNode(extra_args=("--max-memory", str(BUDGET_MIB), "--idle-timeout", str(IDLE_S)))
    yield started
    started.stop()


def _server_child(node: LocalNode) -> psutil.Process:
    children = psutil.Process(node.pid).children()
    assert len(children) == 1, children
    return children[0]


def _still_serves(node: LocalNode) -> bool:
    report = probe_node(parse_endpoint(node.address), timeout_s=60, round_trips=1, transfer_bytes=4096)
    assert report.reachable, report.reason
    return report.upload_bytes_per_s is not None


def _out_of_buffer_set_tensor(ptr: int, base: int, remote_size: int) -> bytes:
    """A tensor of 4 MiB claimed to start inside a small buffer, with 16 bytes of data: ~400 bytes in all."""
    return _tensor(ptr, base, 1 << 20) + b"\x00" + struct.pack("<Q", 0) + bytes(16)


def test_the_set_tensor_attack_aborts_llama_cpps_bare_server():
    child = subprocess.Popen([sys.executable, "-m", "workbench.core.rpc.node_child", "1", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env={**os.environ, "GGML_NO_BACKTRACE": "1"})
    try:
        address = next(line for line in child.stdout if line.startswith(READY_PREFIX))[len(READY_PREFIX):].split()[0]
        client = Client(address)
        ptr, remote_size, base = client.alloc(4096)
        message = _out_of_buffer_set_tensor(ptr, base, remote_size)
        assert len(message) < 400
        client.send(guard.SET_TENSOR, message)
        assert child.wait(timeout=60) == -signal.SIGABRT
        assert "GGML_ASSERT" in child.stdout.read()
        client.close()
    finally:
        child.kill()
        child.wait(timeout=30)


def test_the_node_refuses_a_set_tensor_outside_its_buffer_and_keeps_serving(node):
    server = _server_child(node)
    client = Client(node.address)
    ptr, remote_size, base = client.alloc(4096)
    client.send(guard.SET_TENSOR, _out_of_buffer_set_tensor(ptr, base, remote_size))
    assert client.closed_by_peer()
    client.close()
    wait_for(lambda: any("dropped: SET_TENSOR" in line for line in node.output), 60)
    assert any("lies outside its buffer" in line for line in node.output), node.output[-5:]
    assert _still_serves(node)
    assert _server_child(node).pid == server.pid  # refused before llama.cpp saw it: no restart was needed


def test_copy_tensor_and_set_tensor_hash_outside_their_buffers_are_refused():
    buffers = {0x1000: guard.Buffer(base=0x10000, size=4096)}
    inside, outside = _tensor(0x1000, 0x10000, 1024), _tensor(0x1000, 0x10000, 1025)
    guard.check_request(guard.COPY_TENSOR, 2 * guard.TENSOR_SIZE, inside + inside, buffers)
    with pytest.raises(guard.Refused, match="COPY_TENSOR destination: tensor data"):
        guard.check_request(guard.COPY_TENSOR, 2 * guard.TENSOR_SIZE, inside + outside, buffers)
    with pytest.raises(guard.Refused, match="SET_TENSOR_HASH: tensor data"):
        guard.check_request(guard.SET_TENSOR_HASH, guard.TENSOR_SIZE + 16, outside + bytes(16), buffers)
    below = _tensor(0x1000, 0x10000 - 4, 4)
    with pytest.raises(guard.Refused, match="outside its buffer"):
        guard.check_request(guard.GET_TENSOR, guard.TENSOR_SIZE + 16, below + bytes(16), buffers)
    # a data address near 2**64 whose end wraps around, as the server's own overflow assert fears
    with pytest.raises(guard.Refused, match="outside its buffer"):
        guard.check_request(guard.INIT_TENSOR, guard.TENSOR_SIZE, _tensor(0x1000, (1 << 64) - 8, 4), buffers)
    # Q4_0 stores 32 elements in 18 bytes: a row of 33 makes ggml_row_size assert
    with pytest.raises(guard.Refused, match="whole number of blocks"):
        guard.check_request(guard.INIT_TENSOR, guard.TENSOR_SIZE, _tensor(0, 0, 33, type_id=2, type_size=18), {})


def test_ggml_nbytes_as_the_server_computes_it():
    # F32 4x3: 4 bytes + 3 more elements along ne0 (nb0 = 4) + 2 more rows (nb1 = 16) = 48
    assert guard.tensor_nbytes(0, (4, 3, 1, 1), (4, 16, 48, 48)) == 48
    # Q4_0 64x2: two blocks of 18 bytes per row = 36, plus one more row at nb1 = 36: 72
    assert guard.tensor_nbytes(2, (64, 2, 1, 1), (18, 36, 72, 72)) == 72


def test_a_header_announcing_4_gib_is_refused_before_anything_is_allocated(node):
    server = _server_child(node)
    client = Client(node.address)
    ptr, _, base = client.alloc(4096)
    head = _tensor(ptr, base, 16) + b"\x00" + struct.pack("<Q", 0)
    client.send(guard.SET_TENSOR, head, announced=4 << 30)  # llama.cpp would resize a vector to 4 GiB first
    assert client.closed_by_peer()
    client.close()
    client = Client(node.address)
    client.send(guard.GRAPH_COMPUTE, struct.pack("<II", 0, 1), announced=4 << 30)
    assert client.closed_by_peer()
    client.close()
    wait_for(lambda: any("GRAPH_COMPUTE of 4294967296 bytes" in line for line in node.output), 60)
    announced_data = (4 << 30) - guard.SET_TENSOR_HEAD
    assert any(f"dropped: SET_TENSOR of {announced_data} bytes" in line for line in node.output), node.output[-5:]
    assert _server_child(node).pid == server.pid
    assert server.memory_info().rss < 1 << 30
    assert _still_serves(node)


def test_an_allocation_beyond_the_budget_fails_as_llama_cpp_fails_one_and_the_client_goes_on(node):
    client = Client(node.address)
    client.send(guard.ALLOC_BUFFER, struct.pack("<IQ", 0, 4 << 30))
    assert struct.unpack("<QQ", client.answer()) == (0, 0)  # remote_ptr 0: the client's load fails cleanly
    client.send(guard.GET_ALIGNMENT, struct.pack("<I", 0))
    assert struct.unpack("<Q", client.answer())[0] > 0  # the same connection still works
    client.close()
    # the node logs the refusal after it answers: wait for the line, not for a scheduling order
    wait_for(lambda: any(f"of the node's {BUDGET_MIB} MiB" in line for line in node.output), 60)


def test_a_silent_connection_is_dropped_and_the_next_client_is_served(node):
    silent = Client(node.address, hello=False)  # connects and says nothing: llama.cpp would wait for ever
    quiet = None
    try:
        assert _still_serves(node)  # queued behind the silent one until it is dropped
        assert silent.closed_by_peer()
        quiet = Client(node.address)  # says HELLO, allocates nothing, then goes quiet
        assert quiet.closed_by_peer()
    finally:
        silent.close()
        if quiet is not None:
            quiet.close()
    wait_for(lambda: any(f"no command for {IDLE_S} s" in line for line in node.output), 60)
    assert any(f"no HELLO within {IDLE_S} s" in line for line in node.output), node.output[-8:]


def test_a_crashed_server_is_restarted_within_seconds_and_the_node_says_so(node):
    server = _server_child(node)
    os.kill(server.pid, signal.SIGABRT)  # what a GGML_ASSERT does to it
    wait_for(lambda: any("restarted" in line for line in node.output), 120)
    assert any(f"(pid {server.pid}) died (signal SIGABRT" in line for line in node.output), node.output[-8:]
    assert _server_child(node).pid != server.pid
    assert _still_serves(node)


def _graph(tensors: list[bytes]) -> bytes:
    return struct.pack("<II", 0, 1) + struct.pack("<Q", 1) + struct.pack("<I", len(tensors)) + b"".join(tensors)


def test_a_graph_is_refused_naming_its_first_tensor_outside_a_buffer():
    buffers = {0x1000: guard.Buffer(base=0x10000, size=4096), 0x2000: guard.Buffer(base=0x90000, size=64)}
    good = [_tensor(0x1000, 0x10000, 1024), _tensor(0x2000, 0x90000, 16), _tensor(0, 0, 64, type_id=2, type_size=18),
            _tensor(0x7777, 0x5, 1 << 20)]  # a handle this client does not hold: the server ignores its data
    guard.check_request(guard.GRAPH_COMPUTE, len(_graph(good)), _graph(good), buffers)
    bad = good + [_tensor(0x2000, 0x90000, 17), _tensor(0x1000, 0x10000 - 4, 1)]
    with pytest.raises(guard.Refused, match="GRAPH_COMPUTE tensor 4: tensor data"):
        guard.check_request(guard.GRAPH_COMPUTE, len(_graph(bad)), _graph(bad), buffers)
    with pytest.raises(guard.Refused, match="GRAPH_COMPUTE tensor 1: tensor type 99"):
        graph = _graph([good[0], _tensor(0, 0, 4, type_id=99)])
        guard.check_request(guard.GRAPH_COMPUTE, len(graph), graph, buffers)


def test_the_graph_check_agrees_with_the_tensor_check_on_random_tensors():
    import random

    rng = random.Random(21)
    buffers = {0x1000: guard.Buffer(base=0x10000, size=1 << 16)}
    for _ in range(300):
        type_id = rng.choice((0, 1, 2, 8, 12, 99))
        ne = [rng.choice((0, 1, 2, 31, 32, 64, 256, 1 << 20)) for _ in range(4)]
        nb = [rng.choice((0, 2, 4, 18, 144, 4096, 1 << 31)) for _ in range(4)]
        data = rng.choice((0x10000, 0x10000 + 4096, 0x10000 - 8, (1 << 64) - 16, 0x20000))
        raw = _TENSOR.pack(1, type_id, rng.choice((0x1000, 0, 0x3000)), *ne, *nb, 0, *([0] * 16), 0, *([0] * 10),
                           0, 0, data, b"fuzz", 0)
        try:
            guard.check_tensor(raw, 0, buffers, "t")
            one_by_one = None
        except guard.Refused:
            one_by_one = 0
        assert guard.first_bad_tensor(raw, 0, 1, buffers) == one_by_one, (type_id, ne, nb, data)


def test_the_server_child_runs_under_the_address_space_limit_of_the_budget(node):
    limits = open(f"/proc/{_server_child(node).pid}/limits", encoding="utf-8").read()
    row = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    soft = int(row.split()[3])
    assert soft == address_space_limit(BUDGET_MIB << 20, 1)  # the fixture's node: --max-memory 256, one thread
    assert soft < 2 << 30  # far below the 4 GiB a hostile header announces


@pytest.mark.parametrize("flags, words", [(["--max-memory", "0"], "--max-memory 0 MiB is out of range"),
                                          (["--max-memory", str(1 << 40)], "is out of range"),
                                          (["--idle-timeout", "0"], "--idle-timeout 0 is out of range")])
def test_serve_refuses_a_budget_or_idle_timeout_out_of_range_in_one_line(flags, words, capsys):
    code = main(["node", "serve", "--port", "0", *flags])
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.strip().count("\n") == 0, err
