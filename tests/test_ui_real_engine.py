"""The app driving the real llama.cpp engine and the real telemetry sampler on the bundled model."""

import dataclasses

from fakes import wait_until

from workbench.core.paths import bundled_model_path
from workbench.ui.app import WorkbenchApp
from workbench.ui.engine_session import IDLE, LOADED
from workbench.ui.selection import Selection
from workbench.ui.widgets.chat_view import AnswerBlock
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import SpeedPanel


def stats_of(screen) -> str:
    return str(list(screen.query(AnswerBlock))[-1].query_one(".answer-stats").content)


async def send(pilot, text: str) -> None:
    screen = pilot.app.main_screen
    prompt = screen.query_one(PromptInput)
    asked_before = len(screen.conversation.messages)
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")
    # the turn has started once the question is in the conversation; a short answer on a
    # quiet machine can be over before a check for the generating phase ever runs
    await wait_until(pilot, lambda: len(screen.conversation.messages) > asked_before)


async def test_select_load_chat_cancel_unload_reload_with_the_real_engine():
    model = bundled_model_path()
    app = WorkbenchApp(Selection(model_path=model, preset_name="as-is", device_name="x86-mini-pc-16gb"),
                       telemetry_interval_s=0.25)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None, 60)
        screen.query_one("#device-select").value = "jetson-orin-nano-8gb"  # select: the verdict follows
        await wait_until(pilot, lambda: screen.ledger.device == "jetson-orin-nano-8gb", 60)
        predicted = screen.ledger

        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        loaded = screen.query_one(LedgerPanel).view.loaded
        assert loaded.model_buffer_bytes > 0 and loaded.kv_buffer_bytes > 0 and loaded.pid == screen.engine.pid
        assert screen.query_one(KvPanel).n_ctx == loaded.n_ctx >= predicted.ctx_size
        # the real sampler follows the engine process: the ledger's measured column fills in
        await wait_until(pilot, lambda: (screen.latest_sample is not None
                                         and screen.latest_sample.engine_rss_bytes), 60)

        screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, temperature=0.0, seed=1,
                                                           max_tokens=48)
        await send(pilot, "Name three colours.")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        finished = screen.conversation.stats[1]
        assert finished.generated_tokens > 0 and finished.prompt_tokens > 0
        assert screen.conversation.messages[1].content == finished.text and finished.text.strip()
        assert f"generated {finished.generated_tokens}" in stats_of(screen)
        assert screen.query_one(KvPanel).cells_used == finished.kv_cells_used > 0
        speed = screen.query_one(SpeedPanel)
        assert len(speed.turns) == 1 and speed.series[-1], "the decode chart got points while tokens streamed"

        # greedy: the same long story every run (a sampled one could end before Esc arrives)
        screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, max_tokens=400,
                                                           temperature=0.0, seed=7)
        await send(pilot, "Write a long story about a robot who learns to cook.")
        await wait_until(pilot, lambda: len(list(screen.query(AnswerBlock))[-1].text) > 10, 120)
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.phase == LOADED, 60)
        assert "stop: cancelled" in stats_of(screen)
        assert screen.conversation.stats[3].generated_tokens < 400

        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == IDLE, 60)
        assert screen.engine.loaded is None and screen.query_one(LedgerPanel).view.loaded is None

        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        # what is checked is the prompt the fresh model gets, not the answer: a few tokens of it
        screen.conversation.sampling = dataclasses.replace(screen.conversation.sampling, max_tokens=16)
        await send(pilot, "Thanks!")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        assert [m.role for m in screen.conversation.messages] == ["user", "assistant"] * 3
        # the whole kept conversation was sent again to the fresh model: nothing was in its cache
        assert screen.conversation.stats[5].prompt_tokens > finished.prompt_tokens
        engine = screen.engine
    assert not engine.alive  # closing the app stops the engine process
