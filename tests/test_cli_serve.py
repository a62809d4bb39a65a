"""`workbench serve` starts a real textual-serve server that hands out the app's page."""

import socket
import subprocess
import sys
import time
import urllib.request

from workbench.cli.cmd_serve import app_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_hands_out_the_app_page():
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "workbench", "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        page = ""
        while time.monotonic() < deadline and not page:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    page = response.read().decode()
            except OSError:
                time.sleep(0.2)
        assert "textual.js" in page
        assert f"ws://127.0.0.1:{port}/ws" in page
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_served_command_runs_this_interpreter_with_the_app_arguments():
    command = app_command(["--model", "my model.gguf"])
    assert command.startswith(sys.executable)
    assert command.endswith("-m workbench --model 'my model.gguf'")
