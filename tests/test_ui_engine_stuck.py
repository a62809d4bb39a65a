"""The app with the real engine on a model whose chat template loops: one refusal line, the app stays
usable, and Esc during an answer the engine never gives (a stopped engine process) ends it within the grace
and the app restarts the engine itself, the conversation kept."""

from __future__ import annotations

import os
import signal

from fakes import wait_until

from arch_models import arch_model, write_arch_gguf
from test_template_bombs import CHATML, NESTED_LOOP
from workbench.core.engine.events import ChatMessage
from workbench.ui.app import WorkbenchApp
from workbench.ui.engine_session import GENERATING, IDLE, LOADED
from workbench.ui.selection import Selection
from workbench.ui.widgets.chat_view import Notice
from workbench.ui.widgets.prompt_input import PromptInput


async def _send(pilot, text: str) -> None:
    prompt = pilot.app.main_screen.query_one(PromptInput)
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")


async def test_a_looping_template_is_one_line_and_esc_ends_an_answer_the_engine_never_gives(tmp_path):
    hostile = "{% if messages[-1].content == 'loop' %}" + NESTED_LOOP + "{% endif %}" + CHATML
    path = write_arch_gguf(tmp_path / "trap.gguf", arch_model("qwen2", chat_template=hostile))
    app = WorkbenchApp(Selection(model_path=path, preset_name="as-is", device_name="x86-mini-pc-16gb"),
                       telemetry_interval_s=1.0)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)

        await _send(pilot, "loop")  # mid-chat: the template refuses, the engine lives on
        await wait_until(pilot, lambda: screen.session.last_failure is not None, 120)
        await wait_until(pilot, lambda: screen.phase == LOADED, 60)
        refusals = [n for n in screen.query(Notice) if "chat template of trap.gguf refused" in n.title + n.details]
        assert len(refusals) == 1, [n.title for n in screen.query(Notice)]

        earlier = [ChatMessage("user", "Hi."), ChatMessage("assistant", "Hello.")]
        screen.conversation.messages.extend(earlier)  # a conversation the restart must keep
        stuck_pid = screen.engine.pid
        screen.engine.cancel_grace_s = 0.5
        os.kill(stuck_pid, signal.SIGSTOP)  # from here on the engine never answers
        await _send(pilot, "hello")
        await wait_until(pilot, lambda: screen.phase == GENERATING, 60)
        await pilot.press("escape")
        # ended within the grace (the engine killed), then restarted by the app itself: no Ctrl+R
        await wait_until(pilot, lambda: screen.engine is not None and screen.engine.pid not in (None, stuck_pid)
                         and screen.phase == LOADED, 120)
        assert screen.engine.alive and not screen.query("#crash-notice")
        restarted = [n for n in screen.query(Notice) if n.title.startswith("Engine restarted")]
        assert len(restarted) == 1, [n.title for n in screen.query(Notice)]
        assert "did not answer a cancel within 0.5 s" in restarted[0].title
        assert "conversation is kept" in restarted[0].details
        assert screen.conversation.messages == earlier
        assert screen.chat_pane.query_one(PromptInput).value == "hello"  # the unanswered prompt, ready to send again

        restarted_pid = screen.engine.pid
        screen.engine.cancel_grace_s = 0.5
        os.kill(restarted_pid, signal.SIGSTOP)  # stuck again, and this time Ctrl+L unloads during the answer
        await _send(pilot, "hello")
        await wait_until(pilot, lambda: screen.phase == GENERATING, 60)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.query("#crash-notice"), 60)  # the kill, as asked: not restarted
        assert screen.phase == IDLE and screen.engine.pid in (None, restarted_pid) and not screen.engine.alive
        assert len([n for n in screen.query(Notice) if n.title.startswith("Engine restarted")]) == 1
        await pilot.press("ctrl+r")  # a fresh engine loads the same model
        await wait_until(pilot, lambda: screen.phase == LOADED, 120)
        await pilot.press("ctrl+l")  # and unloads
        await wait_until(pilot, lambda: screen.phase == IDLE, 60)
