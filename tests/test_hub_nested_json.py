"""A mirror answering the hub API with JSON nested 100,000 deep: one line naming the server, not a traceback."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workbench.cli.main import main

DEEP = b"[" * 100_000  # 100 kB, far under the 8 MB answer bound; Python's decoder recursed until RecursionError


class _Deep(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(DEEP)))
        self.end_headers()
        self.wfile.write(DEEP)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet
        pass


@pytest.fixture
def deep_mirror(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Deep)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "wb-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield url
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("argv", [["search", "qwen"], ["files", "evil/Deep-GGUF"], ["files", "evil/Deep-GGUF", "--preview"],
                                  ["download", "evil/Deep-GGUF", "m-Q4_K_M.gguf"]])
def test_nested_json_from_the_hub_api_is_one_line(deep_mirror, capsys, argv):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert "Traceback" not in captured.err and len(lines) == 1
    assert deep_mirror in lines[0] and "not JSON" in lines[0]
