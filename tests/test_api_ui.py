"""The app's Serve screen on the real engine: the switch serves the loaded model; the panel shows its slots."""

from __future__ import annotations

import asyncio
import socket

import openai
import pytest
from real_engine import loaded_client
from fakes import Held, rendered
from textual.app import App
from textual.widgets import Input, Static, Switch

from workbench.core.engine.events import Sampling
from workbench.core.config.preset import Preset
from workbench.ui.screens import serve_screen
from workbench.ui.screens.serve_screen import ServeScreen
from workbench.ui.widgets.kv_panel import SlotsKvPanel
from workbench.ui.widgets.serving_panel import ServingPanel

PRESET = Preset(name="test-serve-ui", ctx_size=1024, batch_size=256, ubatch_size=256, threads=1)


class ServeApp(App):
    def __init__(self, engine) -> None:
        super().__init__()
        self.engine = engine

    def on_mount(self) -> None:
        self.push_screen(ServeScreen(self.engine))


async def _until(pilot, condition, seconds=180.0):
    for _ in range(int(seconds / 0.1)):
        if condition():
            return
        await pilot.pause(0.1)
    raise AssertionError("condition not reached")


@pytest.fixture(scope="module")
def engine():
    yield from loaded_client(PRESET)


async def test_the_switch_serves_the_loaded_model_and_the_panel_shows_the_slots(engine):
    app = ServeApp(engine)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        screen.query_one("#serve-slots", Input).value = "2"
        screen.query_one("#serve-port", Input).value = "0"
        screen.query_one("#serve-switch", Switch).value = True
        panel = screen.query_one(ServingPanel)
        await _until(pilot, lambda: panel.state == "ready")
        client = openai.OpenAI(base_url=panel.address, api_key="-", max_retries=0, timeout=300)
        answer = await asyncio.to_thread(lambda: client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=6, temperature=0))
        assert answer.choices[0].message.content
        await _until(pilot, lambda: panel.status is not None and panel.status.tokens_out >= answer.usage.completion_tokens)
        assert len(panel.status.slots) == 2 and panel.status.slot_ctx == 1024 // 2
        # A request in flight: the KV panel draws each slot's share, its cells as the engine counts them
        kv = screen.query_one(SlotsKvPanel)
        stream = await asyncio.to_thread(lambda: client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Tell me a long story."}], max_tokens=400, stream=True))
        await _until(pilot, lambda: any(kv.slot_cells))
        busy = next(slot for slot in panel.status.slots if slot.request_id is not None)
        rows = [line for line in rendered(kv).splitlines() if line.startswith("slot ")]
        assert [row.split()[1] for row in rows] == ["0", "1"]
        assert rows[busy.slot].endswith(f"/{1024 // 2}") and not rows[busy.slot].endswith(f" 0/{1024 // 2}")
        assert "cells used" in rendered(kv) and kv.slot_ctx == 512
        await asyncio.to_thread(stream.close)  # the client hangs up: its slot's cells are freed
        await _until(pilot, lambda: not any(kv.slot_cells) and kv.cells_used == 0)
        screen.query_one("#serve-switch", Switch).value = False
        await _until(pilot, lambda: panel.state == "off")
        assert kv.slot_cells == () and rendered(kv).startswith("Not serving")
    # Serving ended: the engine is the chat's again.
    assert engine.sample_n("Hello", 1, Sampling(max_tokens=2)).samples


async def test_switching_on_without_a_loaded_model_says_so_and_stays_off():
    app = ServeApp(None)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        screen.query_one("#serve-port", Input).value = "0"
        screen.query_one("#serve-switch", Switch).value = True
        message = screen.query_one("#serve-message", Static)
        await _until(pilot, lambda: "no model is loaded" in str(message.render()))
        assert screen.query_one("#serve-switch", Switch).value is False


def _started_events(screen, monkeypatch) -> list:
    """Each address the screen's `controller.start` returned, once it returned; the port set to any free one."""
    screen.query_one("#serve-port", Input).value = "0"
    returned: list = []
    controller, real = screen.controller, screen.controller.start

    def start(*args):
        returned.append(real(*args))
        return returned[-1]

    monkeypatch.setattr(controller, "start", start)
    return returned


def _refused(address: str) -> bool:
    host, port = address.removeprefix("http://").split("/")[0].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return True
    return False


async def test_leaving_the_screen_while_serving_starts_stops_what_started(engine, monkeypatch):
    """The start is held in its thread until the screen is gone: once it ends, nothing serves."""
    opening = Held.patched(monkeypatch, serve_screen, "listen")
    app = ServeApp(engine)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        returned = _started_events(screen, monkeypatch)
        screen.query_one("#serve-switch", Switch).value = True
        await _until(pilot, opening.held.is_set, 30)
        app.pop_screen()
        await _until(pilot, lambda: screen not in app.screen_stack and not screen.is_attached, 30)
        opening.release.set()
        await _until(pilot, lambda: returned, 60)
        await _until(pilot, lambda: _refused(returned[0]), 60)  # stop() lets go of the server, then stops it
        assert not screen.controller.serving
    assert engine.sample_n("Hello", 1, Sampling(max_tokens=2)).samples


async def test_the_switch_turned_off_and_on_while_serving_starts_ends_as_last_set(engine, monkeypatch):
    """Off while the start is held: it stops once started. On again with 3 slots meanwhile: it serves 3."""
    opening = Held.patched(monkeypatch, serve_screen, "listen")
    app = ServeApp(engine)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        returned = _started_events(screen, monkeypatch)
        switch, panel = screen.query_one("#serve-switch", Switch), screen.query_one(ServingPanel)
        screen.query_one("#serve-slots", Input).value = "2"
        switch.value = True
        await _until(pilot, opening.held.is_set, 30)
        switch.value = False
        await pilot.pause()
        opening.release.set()
        await _until(pilot, lambda: returned, 60)
        await _until(pilot, lambda: panel.state == "off" and not screen.controller.serving, 60)
        assert _refused(returned[0]) and switch.value is False

        opening.release.clear()
        opening.held.clear()
        switch.value = True
        await _until(pilot, opening.held.is_set, 30)
        switch.value = False
        await pilot.pause()
        screen.query_one("#serve-slots", Input).value = "3"
        switch.value = True
        await pilot.pause()
        opening.release.set()
        await _until(pilot, lambda: len(returned) == 3 and panel.status is not None, 120)
        assert len(panel.status.slots) == 3 and panel.state == "ready" and switch.value is True
        assert not _refused(returned[2]) and panel.address == returned[2] == screen.controller.server.address
        switch.value = False
        await _until(pilot, lambda: panel.state == "off", 60)


def test_a_start_that_fails_after_the_slots_opened_gives_back_the_engine_and_the_port(engine):
    """The board's telemetry cannot be read as serving starts: the start fails in one line, and the chat has its engine."""
    def unreadable(pid):
        raise OSError(f"cannot read the telemetry of engine {pid}")

    controller = serve_screen.ServeController(engine, sampler_factory=unreadable)
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    free = port.getsockname()[1]
    port.close()
    with pytest.raises(OSError, match="cannot read the telemetry"):
        controller.start(2, free)
    assert not controller.serving and _refused(f"http://127.0.0.1:{free}/v1")
    assert engine.sample_n("Hello", 1, Sampling(max_tokens=2)).samples
