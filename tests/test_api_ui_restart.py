"""The app's Serve switch is `workbench api`'s server on the app's engine: an engine crash restarts it with the same
model and preset (requests get 503 meanwhile) and /metrics carries the board's telemetry."""

from __future__ import annotations

import os
import signal

import httpx
import pytest
from fakes import wait_for
from real_engine import loaded_client

from workbench.core.config.preset import Preset
from workbench.core.telemetry.sampler import Sampler
from workbench.ui.screens.serve_screen import ServeController

PRESET = Preset(name="test-serve-restart", ctx_size=512, batch_size=128, ubatch_size=128, threads=1)


@pytest.fixture(scope="module")
def engine():
    yield from loaded_client(PRESET)


def test_a_crash_while_serving_restarts_the_apps_engine_and_metrics_have_telemetry(engine):
    controller = ServeController(engine, PRESET, sampler_factory=lambda pid: Sampler(engine_pid=pid))
    address = controller.start(2, 0)
    base = address.removesuffix("/v1")
    try:
        metrics = httpx.get(f"{base}/metrics", timeout=30).text
        assert "workbench_memory_available_bytes" in metrics  # the board's telemetry, as `workbench api` has it
        first_pid = engine.pid
        os.kill(first_pid, signal.SIGKILL)
        wait_for(lambda: controller.host.state == "restarting", 60, what="the host noticing the crash")
        during = httpx.post(f"{address}/chat/completions", timeout=30, json={
            "model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
        assert during.status_code == 503  # the restart waits 0.5 s before it loads: this asks in between
        wait_for(lambda: controller.host.state == "ready", 120, what="the engine restarted")
        assert controller.host.restarts == 1 and engine.pid != first_pid and engine.loaded is not None
        after = httpx.post(f"{address}/chat/completions", timeout=120, json={
            "model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0})
        assert after.status_code == 200 and after.json()["choices"][0]["message"]["content"] is not None
        assert "workbench_api_engine_restarts 1.0" in httpx.get(f"{base}/metrics", timeout=30).text
    finally:
        controller.stop()
    assert engine.loaded is not None  # serving stopped; the app's engine and its model stay the app's


async def test_f6_serves_with_the_loaded_preset_and_the_apps_telemetry():
    from fakes import make_app, wait_until

    from workbench.ui.engine_session import LOADED
    from workbench.ui.screens.serve_screen import ServeScreen

    async with make_app(preset="long-context-kv4", device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        await pilot.press("f6")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ServeScreen))
        controller = pilot.app.screen.controller
        assert controller.restart_preset is not None and controller.restart_preset.name == "long-context-kv4"
        assert controller._sampler_factory is screen.sampler_factory  # the app's sampler: /metrics has telemetry
