"""`workbench serve` starts a real textual-serve server that hands out the app's page."""

import asyncio
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
        deadline = time.monotonic() + 60  # a liveness bound: a loaded machine takes a while to start Python
        page = ""
        while time.monotonic() < deadline and not page:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
                    page = response.read().decode()
            except OSError:
                time.sleep(0.2)
        assert "textual.js" in page
        assert f"ws://127.0.0.1:{port}/ws" in page
    finally:
        _stop(server)


def test_served_command_runs_this_interpreter_with_the_app_arguments():
    command = app_command(["--model", "my model.gguf"])
    assert command.startswith(sys.executable)
    assert command.endswith("-m workbench.cli.web_app --model 'my model.gguf'")


def test_app_arguments_after_the_double_dash_or_as_serve_options_reach_the_app():
    from workbench.cli.cmd_serve import app_argv
    from workbench.cli.main import build_parser

    parser = build_parser()
    after_dash = parser.parse_args(["serve", "--port", "8001", "--", "--model", "m.gguf", "--theme", "nord"])
    assert app_argv(after_dash) == ["--model", "m.gguf", "--theme", "nord"]
    as_options = parser.parse_args(["serve", "--model", "m.gguf", "--preset", "as-is", "--device", "pi5"])
    assert app_argv(as_options) == ["--model", "m.gguf", "--preset", "as-is", "--device", "pi5"]


def test_an_app_argument_that_would_not_start_the_app_is_refused_before_serving(cli):
    for argv, said in ((["--", "--model", "missing.gguf"], "missing.gguf: no such model file"),
                       (["--theme", "no-such-theme"], "unknown theme 'no-such-theme'"),
                       (["--", "--bogus"], "unrecognized arguments: --bogus")):
        result = cli("serve", "--host", "127.0.0.1", "--port", str(_free_port()), *argv)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "the app would not start" in result.stderr and said in result.stderr


def test_busy_port_is_one_line_not_a_traceback(cli):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("serve", "--host", "127.0.0.1", "--port", str(port))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"workbench: cannot listen on 127.0.0.1:{port}: already in use. Stop what uses it or pick another port, "
        f"e.g. --port {port + 1}"]


def test_port_out_of_range_is_refused(cli):
    result = cli("serve", "--port", "99999")
    assert result.returncode == 2
    assert result.stderr.strip() == "workbench: --port 99999 is not a TCP port. Give a port from 1 to 65535, e.g. --port 8000"


def _start_serve(*extra: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "workbench", "serve", "--host", "127.0.0.1", "--port", str(port), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return server, port
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError("workbench serve did not start listening")


def _app_children(server: subprocess.Popen) -> list:
    """The app processes the server started (textual-serve runs each through a shell: not counted)."""
    import psutil

    return [child for child in psutil.Process(server.pid).children(recursive=True)
            if child.name().startswith("python") and "-m workbench" in " ".join(child.cmdline())]


def _stop(server: subprocess.Popen) -> None:
    import psutil

    children = psutil.Process(server.pid).children(recursive=True)
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    for child in children:
        if child.is_running():
            child.kill()


async def _websocket_status(port: int, origin: str | None) -> int:
    """The HTTP status the WebSocket handshake got (101 when accepted); the socket stays open."""
    import aiohttp

    headers = {"Origin": origin} if origin else {}
    session = aiohttp.ClientSession()
    try:
        socket_ = await session.ws_connect(f"http://127.0.0.1:{port}/ws?width=100000&height=-5", headers=headers)
    except aiohttp.WSServerHandshakeError as refused:
        await session.close()
        return refused.status
    _OPEN.append((session, socket_))
    return 101


_OPEN: list = []


async def _close_open_sockets() -> None:
    while _OPEN:
        session, socket_ = _OPEN.pop()
        await socket_.close()
        await session.close()


async def test_a_page_from_another_site_cannot_open_a_session():
    """Issue 10 item 5: a WebSocket from Origin http://evil.example was accepted and started an app."""
    import aiohttp

    server, port = _start_serve()
    try:
        assert await _websocket_status(port, "http://evil.example") == 403
        assert await _websocket_status(port, f"http://evil.example:{port}") == 403
        # DNS rebinding: the page's own name resolves to this server; the index is not handed out
        async with aiohttp.ClientSession() as session, session.get(
                f"http://127.0.0.1:{port}/", headers={"Host": f"rebind.evil.example:{port}"}) as page:
            assert page.status == 421 and "rebind.evil.example" in await page.text()
        assert _app_children(server) == []
        assert await _websocket_status(port, f"http://localhost:{port}") == 101  # the served page itself may
    finally:
        await _close_open_sockets()
        _stop(server)


async def test_sessions_beyond_the_limit_get_a_clear_page_not_another_app():
    """Issue 10 item 5: each connection started its own app and engine, without limit."""
    import aiohttp

    server, port = _start_serve("--max-sessions", "1")
    try:
        assert await _websocket_status(port, f"http://127.0.0.1:{port}") == 101
        assert await _websocket_status(port, f"http://127.0.0.1:{port}") == 503
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/") as page:
            assert page.status == 503
            assert "All 1 session(s) of this workbench are in use" in await page.text()
        deadline = time.monotonic() + 60
        while len(_app_children(server)) != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # not time.sleep: the open WebSocket must keep answering heartbeats
        assert len(_app_children(server)) == 1
        await _close_open_sockets()  # the one session ends: room for the next visitor
        deadline = time.monotonic() + 60
        status = 503
        while status != 101 and time.monotonic() < deadline:
            status = await _websocket_status(port, f"http://127.0.0.1:{port}")
        assert status == 101
    finally:
        await _close_open_sockets()
        _stop(server)


def test_a_non_loopback_address_needs_allow_remote_and_warns(cli):
    from workbench.cli.cmd_serve import check_host

    refused = cli("serve", "--host", "0.0.0.0", "--port", "8000")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "workbench: --host 0.0.0.0 is not a loopback address: anyone who can reach it could drive the app "
        "(download models, write presets, run the engine). Serve on localhost, or add --allow-remote if you mean it")
    assert check_host("localhost", allow_remote=False) is None
    assert check_host("::1", allow_remote=False) is None
    assert "anyone who reaches this address can drive the workbench" in check_host("0.0.0.0", allow_remote=True)


def test_browser_sizes_are_clamped_before_they_size_the_terminal():
    from workbench.cli.serve_guard import MAX_COLUMNS, MIN_ROWS, clamp_size

    assert clamp_size("100000", 80, 20, MAX_COLUMNS) == 500
    assert clamp_size("-5", 24, MIN_ROWS, 200) == 8
    assert clamp_size("1e9", 80, 20, 500) == 80  # not an int: the default
    assert clamp_size(None, 24, 8, 200) == 24
