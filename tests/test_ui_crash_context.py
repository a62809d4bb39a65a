"""After an engine crash the notice says what became of the interrupted turn: kept in the transcript, left out of
the model's context (the fake engine dies after its first chunk: there is always a partial answer)."""

from fakes import make_app, wait_until
from textual.widgets import Static

from workbench.ui.engine_session import IDLE, LOADED
from workbench.ui.widgets.prompt_input import PromptInput


async def crash(pilot, engines, answer):
    """Load, then send a prompt the fake engine dies on after its first chunk; the screen and the notice's text."""
    screen = pilot.app.main_screen
    await wait_until(pilot, lambda: screen.ledger is not None)
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: screen.phase == LOADED)
    engines[0].crash_next_chat = True
    engines[0].answer = answer
    screen.query_one(PromptInput).value = "Crash please"
    await pilot.press("enter")
    await wait_until(pilot, lambda: screen.query("Notice.-error") and screen.phase == IDLE)
    notice = screen.query_one("Notice.-error")
    return screen, notice.details + " ".join(str(s.render()) for s in notice.query(Static))


async def test_the_crash_notice_says_the_interrupted_turn_is_left_out_of_the_context():
    engines = []
    async with make_app(engines).run_test(size=(160, 48)) as pilot:
        screen, text = await crash(pilot, engines, ("The ", "rest"))
        # the partial answer is in the conversation, marked, and not sent to the model again
        assert screen.conversation.messages[-1].content == "The " and screen.conversation.ends_interrupted
        assert "left out of the model's context" in text and "it will not see them" in text
