"""The app's memory stays bounded over a long session: idle telemetry and many answers (tracemalloc)."""

import gc
import tracemalloc

from fakes import FakeSampler, make_app, wait_until
from textual._styles_cache import StylesCache
from textual.widget import Widget

from workbench.ui.engine_session import LOADED
from workbench.ui.widgets import chat_view
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import PLOTTED_ANSWERS, SpeedPanel
from workbench.ui.widgets.thermal_panel import ThermalPanel

MIB = 2**20


async def test_telemetry_and_answers_do_not_grow_the_heap_without_bound(monkeypatch):
    monkeypatch.setattr(chat_view, "SHOWN_EXCHANGES", 5)  # a long session's cap, reached after five answers
    samplers: list[FakeSampler] = []

    def sampler_factory(pid):
        samplers.append(FakeSampler(pid))
        return samplers[-1]

    app = make_app(telemetry_interval_s=0.01)
    app.sampler_factory = sampler_factory
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED and samplers)

        async def ask(number: int) -> None:
            screen.query_one(PromptInput).value = f"question {number}"
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.phase == LOADED and len(screen.conversation.messages) == 2 * number)

        for number in range(1, 6):
            await ask(number)
        await wait_until(pilot, lambda: samplers[-1].count >= 200)
        gc.collect()
        tracemalloc.start()
        start_count, before = samplers[-1].count, tracemalloc.get_traced_memory()[0]
        # idle: two thousand samples (a quarter of an hour at the app's 2 Hz) must leave nothing behind
        await wait_until(pilot, lambda: samplers[-1].count >= start_count + 2000, timeout_s=120)
        gc.collect()
        idle_growth = tracemalloc.get_traced_memory()[0] - before
        # chatting: twenty more answers; what may grow is the conversation and its widgets
        before = tracemalloc.get_traced_memory()[0]
        for number in range(6, 26):
            await ask(number)
        gc.collect()
        per_answer = (tracemalloc.get_traced_memory()[0] - before) / 20
        tracemalloc.stop()
        # every widget draws through a StylesCache of its own: one alive without its widget is a
        # removed bubble's rendered lines kept (Textual's lru_cache on get_inner_outer, ~120 KiB an answer)
        alive = gc.get_objects()
        widgets = sum(1 for thing in alive if isinstance(thing, Widget))
        styles_caches = sum(1 for thing in alive if isinstance(thing, StylesCache))
        del alive
        print(f"idle growth {idle_growth / 1024:.0f} KiB over 2000 samples; {per_answer / 1024:.0f} KiB per answer")
        speed, thermal = screen.query_one(SpeedPanel), screen.query_one(ThermalPanel)
        assert len(speed.series) <= PLOTTED_ANSWERS and len(speed.turns) <= PLOTTED_ANSWERS
        assert all(len(history) <= history.maxlen for history in thermal.history.values())
        assert idle_growth < MIB, f"idle telemetry grew the heap by {idle_growth / MIB:.1f} MiB"
        assert styles_caches <= widgets, f"{styles_caches} StylesCaches for {widgets} widgets"
        # measured here: ~200 KiB an answer over answers 6-25 while Textual's bounded caches fill, falling
        # to ~10 KiB (the conversation itself) by answer 90; the StylesCache leak added ~120 KiB to each
        assert per_answer < 512 * 1024, f"{per_answer / 1024:.0f} KiB per answer"
        chat = screen.query_one(chat_view.ChatView)
        assert len(chat.query(chat_view.UserBubble)) == 5 and len(chat.query(chat_view.AnswerBlock)) == 5
        assert str(chat.query_one("#earlier .notice-title").content).startswith("20 earlier exchanges are in")
        assert len(screen.conversation.messages) == 50  # nothing left the conversation itself
