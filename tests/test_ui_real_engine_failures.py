"""The app with the REAL engine when things go wrong: the engine killed mid-answer, a GGUF llama.cpp
refuses, and a long prompt's prefill progress; at 80x24 (tabs) and 160x48 (grid)."""

import dataclasses
import os
import signal

import pytest
from fakes import wait_until

from gguf_factory import copy_with_u32_field
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, PrefillProgressed, Sampling, TurnFinished
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset
from workbench.ui.app import WorkbenchApp
from workbench.ui.engine_session import IDLE, LOADED
from workbench.ui.selection import Selection
from workbench.ui.widgets.chat_view import AnswerBlock, Notice
from workbench.ui.widgets.prompt_input import PromptInput

SIZES = [(80, 24), (160, 48)]


def real_app() -> WorkbenchApp:
    selection = Selection(model_path=bundled_model_path(), preset_name="as-is", device_name="x86-mini-pc-16gb")
    return WorkbenchApp(selection, telemetry_interval_s=1.0)


@pytest.mark.parametrize("size", SIZES)
async def test_killing_the_real_engine_mid_answer_keeps_the_partial_answer_and_restarts(size, tmp_path):
    app = real_app()
    async with app.run_test(size=size) as pilot:
        screen = app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, max_tokens=400)
        prompt = screen.query_one(PromptInput)
        prompt.value = "Write a long story about a robot who learns to cook."
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query(AnswerBlock) and len(screen.query_one(AnswerBlock).text) > 20, 120)
        killed = screen.engine.pid
        os.kill(killed, signal.SIGKILL)
        await wait_until(pilot, lambda: screen.query("#crash-notice"), 60)
        notice = screen.query_one("#crash-notice", Notice)
        assert "Engine died (SIGKILL)" in notice.title
        assert screen.phase == IDLE
        assert prompt.value == "Write a long story about a robot who learns to cook."
        assert prompt.cursor_position == len(prompt.value)
        partial = screen.conversation.messages[-1]
        assert partial.role == "assistant" and len(partial.content) > 20
        assert screen.conversation.interrupted  # marked: in the transcript, not sent again
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not screen.query("#crash-notice"))
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        assert screen.engine.pid != killed and screen.engine.alive
        screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, max_tokens=8)
        prompt.value = "Name one colour."
        prompt.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 4 and screen.phase == LOADED, 120)
        assert screen.conversation.messages[-1].role == "assistant"
        engine = screen.engine
    assert not engine.alive


@pytest.mark.parametrize("size", SIZES)
async def test_a_real_load_llama_cpp_refuses_is_reported_and_the_app_goes_on(size, tmp_path):
    # A valid header whose feed-forward width contradicts the tensors: the reader predicts it,
    # llama.cpp refuses it (test_engine_lifecycle checks the engine's words for it).
    broken = copy_with_u32_field(bundled_model_path(), "llama.feed_forward_length", 1024, tmp_path / "wrong-shape.gguf")
    app = real_app()
    async with app.run_test(size=size) as pilot:
        screen = app.main_screen
        screen.select_model(broken)
        await wait_until(pilot, lambda: screen.ledger is not None and screen.selection.model_path == broken, 60)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.query("Notice.-error"), 120)
        notice = screen.query_one("Notice.-error", Notice)
        assert notice.title.startswith("Load failed:") and "wrong shape" in notice.title
        assert screen.phase == IDLE and str(screen.query_one("#load-button").label) == "Load"
        screen.select_model(bundled_model_path())  # the app goes on: the good model loads
        await wait_until(pilot, lambda: screen.selection.model_path == bundled_model_path())
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        engine = screen.engine
    assert not engine.alive


def test_the_real_engine_reports_prefill_progress_batch_by_batch():
    client = EngineClient()
    try:
        client.start()
        client.load_blocking(bundled_model_path(), Preset(name="small-batches", ctx_size=1024, batch_size=64,
                                                          ubatch_size=64), device=None)
        question = "Summarise this: " + "the ledger predicts the memory of a model before it loads. " * 30
        events = list(client.chat([ChatMessage("user", question)], Sampling(temperature=0.0, max_tokens=2)))
    finally:
        client.close()
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    progress = [(e.evaluated, e.total) for e in events if isinstance(e, PrefillProgressed)]
    new_tokens = finished.prompt_tokens - finished.reused_tokens  # llama.cpp's own count of what it read
    assert new_tokens > 64 * 4
    assert progress[0] == (0, new_tokens) and progress[-1] == (new_tokens, new_tokens)
    # one report per 64-token batch, in order: ceil(new / 64) after the first
    assert len(progress) == 1 + -(-new_tokens // 64)
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
