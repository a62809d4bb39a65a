"""`workbench api` refuses what it must before loading anything: one line on stderr, exit code 2."""

from __future__ import annotations

import socket


def test_a_network_address_needs_the_explicit_flag(cli):
    result = cli("api", "bundled", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--allow-remote" in result.stderr and "Traceback" not in result.stderr


def test_a_taken_port_is_one_line(cli):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        port = holder.getsockname()[1]
        result = cli("api", "bundled", "--port", str(port))
    finally:
        holder.close()
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and result.stderr.count("\n") == 1


def test_out_of_range_slots_and_queue_are_refused(cli):
    for flag in (("--parallel", "0"), ("--queue", "-1")):
        refused = cli("api", "bundled", *flag)
        assert refused.returncode == 2 and " ".join(flag) in refused.stderr and refused.stderr.count("\n") == 1


def test_bench_serve_names_an_unreachable_server_in_one_line(cli):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    holder.close()  # nothing listens there now
    result = cli("bench", "serve", "--url", f"http://127.0.0.1:{port}/v1", "--clients", "1")
    assert result.returncode == 2
    assert f"cannot reach http://127.0.0.1:{port}/v1" in result.stderr and "Traceback" not in result.stderr
    bad = cli("bench", "serve", "--url", "ftp://x", "--clients", "1")
    assert bad.returncode == 2 and "not an http(s) URL" in bad.stderr
