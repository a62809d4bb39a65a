"""Web pages reaching the local API: forged Host (DNS rebinding), text/plain and cross-site POSTs, slowloris, idle connections."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import urllib.request
from pathlib import Path

import pytest

from workbench.cli.cmd_api import api_key_from
from workbench.cli.main import main
from workbench.core.config.web_boundary import WebBoundary, allowed_origins
from workbench.core.engine.sequence_events import SequenceAccepted, SequenceFinished
from workbench.core.errors import WorkbenchError
from workbench.core.serve.app import ServerConfig, create_app
from workbench.core.serve.listen import listen
from workbench.core.serve.server_thread import ApiServerThread
from workbench.core.telemetry.metrics import MetricsServer

REBOUND = "rebind.evil.example"
CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
CLOSE_BOUND_S = 30  # a socket the server should close: an upper bound on waiting, never a threshold
ALLOWED_PAGE = "http://localhost:3000"


class FakeEngine:
    """A ready engine that answers every request with "ok" at once, counting what reached it."""

    n_slots, state, pid, restarts, last_failure, status, opened = 2, "ready", None, 0, "", None, None

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, _request, on_event):
        self.submitted += 1
        on_event(SequenceAccepted(self.submitted, 3, 2, 0))
        on_event(SequenceFinished(self.submitted, 0, "ok", "stop", 3, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
        return self

    def cancel(self) -> None:
        pass

    def stuck(self) -> str:
        return ""  # never silent with requests open


def _serve(engine: FakeEngine, **limits):
    boundary = WebBoundary.serving("127.0.0.1", origins=(ALLOWED_PAGE,))
    server = ApiServerThread(create_app(engine, ServerConfig("m", None, 2, boundary)), listen("127.0.0.1", 0), **limits)
    server.start()
    return server


@pytest.fixture(scope="module")
def api():
    engine = FakeEngine()
    server = _serve(engine)
    port = int(server.address.rsplit(":", 1)[1].removesuffix("/v1"))
    yield engine, port
    server.stop()


def _request(port: int, method: str, path: str, headers: dict[str, str], body: bytes | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path, method", [("/v1/chat/completions", "POST"), ("/v1/models", "GET"),
                                          ("/metrics", "GET"), ("/health", "GET")])
def test_a_rebound_host_name_is_refused_on_every_endpoint(api, path, method):
    # DNS rebinding: the page's own name resolves to 127.0.0.1, so the browser lets it read
    # the answer; the request still says Host: rebind.evil.example:PORT.
    engine, port = api
    before = engine.submitted
    status, _headers, body = _request(port, method, path, {"Host": f"{REBOUND}:{port}", "Content-Type": "application/json"},
                                      CHAT if method == "POST" else None)
    assert status == 421 and REBOUND in json.loads(body)["error"]["message"]
    assert engine.submitted == before  # no generation ran


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST:{port}", "127.0.0.1"])
def test_the_servers_own_names_are_answered(api, host):
    _engine, port = api
    status, _headers, body = _request(port, "GET", "/health", {"Host": host.format(port=port)})
    assert status == 200 and json.loads(body)["status"] == "ok"


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_a_body_that_is_not_declared_json_is_415_and_runs_nothing(api, content_type):
    # A page's fetch() with a text/plain body is a "simple" request: the browser sends it without
    # asking first, and the JSON inside it ran a generation.
    engine, port = api
    before = engine.submitted
    headers = {"Content-Type": content_type} if content_type else {}
    status, _headers, body = _request(port, "POST", "/v1/chat/completions", headers, CHAT)
    assert status == 415 and "application/json" in json.loads(body)["error"]["message"]
    assert engine.submitted == before


def test_a_cross_site_page_is_refused_even_with_a_json_body(api):
    engine, port = api
    before = engine.submitted
    for content_type in ("text/plain", "application/json"):
        status, headers, body = _request(port, "POST", "/v1/chat/completions",
                                         {"Origin": "https://evil.example", "Content-Type": content_type}, CHAT)
        assert status == 403 and "evil.example" in json.loads(body)["error"]["message"]
        assert "access-control-allow-origin" not in {name.lower() for name in headers}
    assert _request(port, "GET", "/metrics", {"Origin": "null"})[0] == 403  # a sandboxed frame or a file:// page
    assert engine.submitted == before


def test_a_json_request_from_a_client_or_an_allowed_page_runs(api):
    engine, port = api
    before = engine.submitted
    status, _headers, body = _request(port, "POST", "/v1/chat/completions", {"Content-Type": "application/json"}, CHAT)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "ok"
    # an origin named with --allow-origin gets its CORS preflight answered and can read the answer
    preflight = {"Origin": ALLOWED_PAGE, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}
    status, headers, _body = _request(port, "OPTIONS", "/v1/chat/completions", preflight)
    assert status == 200 and headers["access-control-allow-origin"] == ALLOWED_PAGE
    status, headers, _body = _request(port, "POST", "/v1/chat/completions",
                                      {"Origin": ALLOWED_PAGE, "Content-Type": "application/json"}, CHAT)
    assert status == 200 and headers["access-control-allow-origin"] == ALLOWED_PAGE
    # the server's own origin is no foreign page (the rule `workbench serve` uses)
    assert _request(port, "GET", "/v1/models", {"Origin": f"http://localhost:{port}"})[0] == 200
    assert engine.submitted == before + 2


def _closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(CLOSE_BOUND_S)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def test_a_slowloris_head_and_a_dribbled_body_are_cut_off():
    # uvicorn waits for a request head for ever: 200 such connections stayed open.
    server = _serve(FakeEngine(), read_timeout_s=0.5)
    port = int(server.address.rsplit(":", 1)[1].removesuffix("/v1"))
    try:
        head = socket.create_connection(("127.0.0.1", port))
        head.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")
        body = socket.create_connection(("127.0.0.1", port))
        body.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"messages\"")
        idle = socket.create_connection(("127.0.0.1", port))
        assert _closed_by_server(head) and _closed_by_server(body) and _closed_by_server(idle)
        for sock in (head, body, idle):
            sock.close()
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=60).status == 200
    finally:
        server.stop()


def test_connections_past_the_limit_are_closed_at_once_and_the_held_ones_still_work():
    # 300 idle connections stayed open; each costs a descriptor and uvicorn bookkeeping.
    server = _serve(FakeEngine(), connection_limit=4, read_timeout_s=300)
    port = int(server.address.rsplit(":", 1)[1].removesuffix("/v1"))
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    extra = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]
    try:
        assert all(_closed_by_server(sock) for sock in extra)
        held[0].sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        held[0].settimeout(60)
        assert held[0].recv(100).startswith(b"HTTP/1.1 200")
    finally:
        for sock in held + extra:
            sock.close()
        server.stop()


def test_monitor_metrics_refuse_a_rebound_host_and_a_foreign_page():
    server = MetricsServer(0)
    try:
        assert _request(server.port, "GET", "/metrics", {"Host": f"{REBOUND}:{server.port}"})[0] == 421
        assert _request(server.port, "GET", "/metrics", {"Origin": "https://evil.example"})[0] == 403
        assert _request(server.port, "GET", "/metrics", {"Host": f"localhost:{server.port}"})[0] == 200
        assert _request(server.port, "GET", "/metrics", {"Host": f"127.0.0.1:{server.port}"})[0] == 200
    finally:
        server.close()


def test_one_origin_rule_for_serve_and_the_api():
    origins = allowed_origins("localhost", 8000)
    assert {"http://localhost:8000", "http://127.0.0.1:8000", "http://[::1]:8000"} <= origins
    assert "http://rebind.evil.example:8000" not in origins
    boundary = WebBoundary.serving("0.0.0.0", extra_names=("box.lan",))
    assert boundary.host_refusal("192.168.1.20:8080") is None  # bound to every address: an IP cannot be rebound
    assert boundary.host_refusal("box.lan:8080") is None and boundary.host_refusal("evil.example:8080") is not None
    assert WebBoundary().host_refusal("192.168.1.20:8080") is not None
    assert WebBoundary().host_refusal(None) is not None and WebBoundary().host_refusal("127.0.0.1:x") is not None


def _key_args(**given) -> argparse.Namespace:
    return argparse.Namespace(api_key=given.get("key"), api_key_file=given.get("file"))


def test_the_key_comes_from_a_file_or_the_environment_and_the_flag_warns(tmp_path: Path, monkeypatch, capsys):
    key_file = tmp_path / "key"
    key_file.write_text("s3cret-key\n")
    key_file.chmod(0o600)
    monkeypatch.setenv("WORKBENCH_API_KEY", "from-env")
    assert api_key_from(_key_args(file=str(key_file))) == "s3cret-key"
    assert api_key_from(_key_args()) == "from-env"
    assert capsys.readouterr().err == ""
    assert api_key_from(_key_args(key="on-the-line")) == "on-the-line"
    assert "process list" in capsys.readouterr().err
    with pytest.raises(WorkbenchError):
        api_key_from(_key_args(key="a", file=str(key_file)))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(WorkbenchError) as caught:  # a FIFO is refused, never waited on
        api_key_from(_key_args(file=str(tmp_path / "fifo")))
    assert "named pipe" in str(caught.value)
    (tmp_path / "spaces").write_text("two words\n")
    with pytest.raises(WorkbenchError):
        api_key_from(_key_args(file=str(tmp_path / "spaces")))


@pytest.mark.parametrize("flag", [["--allow-origin", "evil.example/path"], ["--allow-host", "a b"]])
def test_bad_boundary_flags_are_one_line_before_anything_loads(flag, capsys):
    assert main(["api", "bundled", "--port", "0", *flag]) != 0
    err = capsys.readouterr().err
    assert flag[0] in err and "Traceback" not in err
