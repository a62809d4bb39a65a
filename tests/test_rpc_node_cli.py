"""`workbench node serve|probe` and the RPC backend check: real nodes on 127.0.0.1, one-line errors."""

from __future__ import annotations

import json
import socket

import pytest

from workbench.cli.main import main
from workbench.core.errors import WorkbenchError
from workbench.core.rpc import library
from workbench.core.rpc.local_nodes import LocalNode
from workbench.core.rpc.node_server import check_listen_host


@pytest.fixture(scope="module")
def node():
    started = LocalNode()
    yield started
    started.stop()


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_this_build_has_the_rpc_backend_bound_on_the_libraries_libllama_links():
    support = library.rpc_support()
    assert support.available, support.reason  # CI builds with -DGGML_RPC=on: this proves it
    assert support.libggml_rpc.endswith(".so") or ".so." in support.libggml_rpc
    # the path libllama resolves is the copy the process has loaded, not a second one
    maps = open("/proc/self/maps", encoding="utf-8").read()
    assert support.libggml_rpc in maps and support.libggml in maps


def test_serve_prints_listening_and_probe_reads_the_node(node, capsys):
    assert f"listening on {node.address}" in node.output
    code = main(["node", "probe", node.address, "--json", "--timeout", "30"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["reachable"] is True
    assert data["endpoint"] == node.address
    assert data["devices"] and 0 < data["devices"][0]["free_bytes"] <= data["devices"][0]["total_bytes"]
    assert data["latency_s"] > 0 and data["upload_bytes_per_s"] > 0 and data["download_bytes_per_s"] > 0


def test_probe_text(node, capsys):
    code = main(["node", "probe", node.address, "--timeout", "30", "--bytes", "65536"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"{node.address}: reachable" in out and "MiB free of" in out and "round trip:" in out
    assert "Mbit/s to the node" in out


def test_probe_of_a_dead_port_is_one_line(capsys):
    port = _dead_port()
    code = main(["node", "probe", f"127.0.0.1:{port}"])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert captured.err.count("\n") == 1
    assert f"127.0.0.1:{port}: unreachable: connection refused" in captured.err


def test_serve_on_a_busy_port_is_one_line(node, capsys):
    code = main(["node", "serve", "--port", str(node.port), "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"cannot listen on 127.0.0.1:{node.port}" in err and err.strip().count("\n") == 0


def test_a_non_loopback_address_needs_the_explicit_flag(capsys):
    code = main(["node", "serve", "--host", "192.168.7.2"])
    err = capsys.readouterr().err
    assert code == 2 and "--allow-remote" in err and "no authentication" in err
    assert check_listen_host("192.168.7.2", allow_remote=True) == "192.168.7.2"
    with pytest.raises(WorkbenchError, match="IPv4"):
        check_listen_host("localhost", allow_remote=False)


def test_a_build_without_rpc_gets_the_reinstall_command(monkeypatch, capsys):
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "llama_supports_rpc", lambda: False)
    library.rpc_support.cache_clear()
    library.ggml_rpc.cache_clear()
    try:
        code = main(["node", "serve", "--port", "0"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1
        assert "built without llama.cpp's RPC backend" in err
        assert library.REINSTALL_COMMAND in err
    finally:
        library.rpc_support.cache_clear()
        library.ggml_rpc.cache_clear()
