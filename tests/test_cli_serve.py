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


def test_busy_port_is_one_line_not_a_traceback():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "workbench", "serve", "--host", "127.0.0.1", "--port", str(port)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"workbench: cannot listen on 127.0.0.1:{port}: already in use. Stop what uses it or pick another port, "
        f"e.g. --port {port + 1}"]


def test_port_out_of_range_is_refused():
    result = subprocess.run([sys.executable, "-m", "workbench", "serve", "--port", "99999"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "workbench: --port 99999 is not a TCP port. Give a port from 1 to 65535, e.g. --port 8000"
