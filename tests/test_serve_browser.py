"""`workbench serve -- APP ARGS` in a real browser: headless Chromium (/usr/bin/chromium, driven by playwright) opens
the served page on 127.0.0.1 and gets the app with the preselected model, preset, device and theme; an app that
cannot start shows its error in the page instead of the splash screen.

What the page draws is read from the WebSocket frames the page receives (the terminal is a canvas: its text is in
no DOM node), with a screenshot of each page beside it."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from test_cli_serve import _free_port, _stop  # one way to start and stop a server process

from workbench.core.paths import bundled_model_path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
playwright = pytest.importorskip("playwright.sync_api", reason="the test extras install playwright")
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07]*\x07")
THEMES = Path(__file__).resolve().parent.parent / "themes"


def _serve(tmp_path: Path, *app_args: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    env = {**os.environ, "WORKBENCH_CONFIG_DIR": str(tmp_path / "config"), "WORKBENCH_CACHE_DIR": str(tmp_path / "cache")}
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen([sys.executable, "-m", "workbench", "serve", "--host", "127.0.0.1", "--port", str(port),
                               "--max-sessions", "1", *app_args], stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60  # a liveness bound: a loaded machine takes a while to start Python
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return server, port
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError(f"workbench serve did not listen: {(tmp_path / 'serve.log').read_text()}")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install.py installs Debian's chromium with the test extras")
    with playwright.sync_playwright() as driver:
        # playwright gives the browser a fresh profile in a temporary folder of its own
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=list(FLAGS))
        yield launched
        launched.close()


def _visit(browser, port: int, shot: Path, until: bytes, timeout_s: float = 90) -> tuple[bytes, bytes, bool]:
    """Opens the page, collects the frames it receives until `until` is among them; (their text, the frames
    as received, whether the terminal is shown, i.e. the splash screen is gone)."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    received: list[bytes] = []
    page.on("websocket", lambda socket_: socket_.on(
        "framereceived", lambda frame: received.append(frame if isinstance(frame, bytes) else frame.encode())))
    try:
        page.goto(f"http://127.0.0.1:{port}/", wait_until="load")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and until not in ESCAPES.sub(b"", b"".join(received)):
            page.wait_for_timeout(250)
        page.wait_for_timeout(500)  # the terminal fades in over 0.3 s
        page.screenshot(path=str(shot))
        shown = page.evaluate("document.body.classList.contains('-first-byte')")
        raw = b"".join(received)
        return ESCAPES.sub(b"", raw), raw, shown
    finally:
        page.close()


def _rgb(color: str) -> bytes:
    red, green, blue = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"{red};{green};{blue}".encode()


def test_the_page_shows_the_app_with_the_preselected_model_preset_device_and_theme(browser, tmp_path):
    model = tmp_path / "demo-model.gguf"
    shutil.copyfile(bundled_model_path(), model)
    server, port = _serve(tmp_path, "--", "--model", str(model), "--preset", "edge-int4-kv8",
                          "--device", "jetson-orin-nano-8gb", "--theme", "projector-light")
    try:
        text, raw, shown = _visit(browser, port, tmp_path / "app.png", until=b"MiB predicted")
    finally:
        _stop(server)
    assert shown, "the page still shows the splash screen"
    # the selectors hold what was preselected, and the verdict line is the ledger of that choice
    assert b"FITS \xe2\x80\x94 " in text and b"left for the LLM on jetson-orin-nano-8gb" in text
    for expected in (b"demo-model", b"edge-int4-kv8", b"jetson-orin-nano-8gb"):
        assert expected in text, (expected, text[-2000:])
    # The theme's own background colour (from its file), drawn as 24-bit colour by the terminal.
    background = tomllib.loads((THEMES / "projector-light.toml").read_text())["background"]
    assert b"48;2;" + _rgb(background) + b"m" in raw


def test_an_app_that_cannot_start_shows_its_error_in_the_page(browser, tmp_path):
    model = tmp_path / "moved.gguf"
    shutil.copyfile(bundled_model_path(), model)
    server, port = _serve(tmp_path, "--model", str(model))
    try:
        model.unlink()  # the file goes away after serve checked it: each session's app now fails to start
        text, _, shown = _visit(browser, port, tmp_path / "error.png", until=b"could not start")
    finally:
        _stop(server)
    assert shown, "the page still shows the splash screen"
    assert b"The workbench could not start" in text
    assert b"no such model file" in text and b"moved.gguf" in text
