"""A streaming answer: its status line sits right under the text (no blank lines piling up between),
and a long prompt shows the engine's prefill progress before the first token."""

import threading

from fakes import make_app, wait_until
from textual.widgets import Static

from workbench.ui.engine_session import GENERATING, LOADED
from workbench.ui.widgets.chat_view import AnswerBlock
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.streaming_text import StreamingText

LONG_ANSWER = tuple(f"word{n} " for n in range(400))


def shown_lines(widget: StreamingText) -> list[str]:
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


async def test_the_status_line_follows_the_text_with_no_blank_lines_between():
    engines = []
    # 400 tokens 12.5 ms apart: five seconds of streaming, room for three checks (0.1 s apart) on a loaded machine
    async with make_app(engines, engine_kwargs={"answer": LONG_ANSWER, "token_delay_s": 0.0125}).run_test(
            size=(100, 30)) as pilot:
        screen = pilot.app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        screen.query_one(PromptInput).value = "Talk at length"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.phase == GENERATING and screen.query(StreamingText))
        block = screen.query_one(AnswerBlock)
        checked = 0
        while screen.phase == GENERATING and checked < 3:
            await pilot.pause(0.1)
            lives = block.query(StreamingText)
            if not lives or not lives.first().line_count or lives.first().size.height == 0:
                continue
            live = lives.first()
            lines = shown_lines(live)
            row = live.status_row
            if row >= len(lines):
                continue  # the text just outgrew its reserve: the next layout gives it room
            assert lines[row] == "generating…", lines
            assert lines[row - 1] != "", f"a blank line between the answer and its status: {lines}"
            assert not block.query_one(".answer-stats", Static).display  # one status, not two
            checked += 1
        assert checked >= 3
        await wait_until(pilot, lambda: screen.phase == LOADED)
        stats = block.query_one(".answer-stats", Static)
        assert stats.display and "generated 400" in str(stats.content)


async def test_a_long_prompt_shows_prefill_progress_before_the_first_token():
    gate = threading.Event()
    engines = []
    async with make_app(engines, engine_kwargs={"prefill_tokens": 3000, "prefill_gate": gate}).run_test(
            size=(80, 24)) as pilot:
        screen = pilot.app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        screen.query_one(PromptInput).value = "A question after a reload"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query(StreamingText))
        live = screen.query_one(StreamingText)
        # the fake halts its prefill at 1,500 of 3,000 tokens until the gate opens
        await wait_until(pilot, lambda: live.status == "reading the prompt: 1,500 of 3,000 tokens (50%)")
        assert shown_lines(live)[0] == "reading the prompt: 1,500 of 3,000 tokens (50%)"
        gate.set()
        await wait_until(pilot, lambda: screen.phase == LOADED)
        assert "fits" in screen.conversation.messages[-1].content
