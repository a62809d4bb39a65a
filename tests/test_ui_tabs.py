"""Below 120x34 the chat and the panels are tabs: they have keys, and typed input is never lost."""

import pytest
from fakes import make_app, wait_until

from workbench.ui.engine_session import LOADED
from workbench.ui.widgets.prompt_input import PromptInput


async def test_after_clicking_through_the_tabs_typed_input_is_sent_at_80x24():
    async with make_app().run_test(size=(80, 24)) as pilot:
        screen = pilot.app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        await pilot.click("#tab-ledger")
        await wait_until(pilot, lambda: screen.shown_tab == "ledger")
        await pilot.click("#tab-chat")
        await wait_until(pilot, lambda: screen.shown_tab == "chat")
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 2)
        assert screen.conversation.messages[0].content == "hello"
        assert screen.query_one(PromptInput).history == ["hello"]
        assert screen.focused is screen.query_one(PromptInput)


@pytest.mark.parametrize("key, tab", [("alt+2", "ledger"), ("alt+3", "kv"), ("alt+4", "speed"), ("alt+5", "thermal")])
async def test_each_tab_has_a_key_and_typing_on_a_panel_goes_to_the_prompt(key, tab):
    async with make_app().run_test(size=(80, 24)) as pilot:
        screen = pilot.app.main_screen
        await pilot.press(key)
        await wait_until(pilot, lambda: screen.shown_tab == tab)
        assert screen.query_one(f"#{tab}-panel").region.width > 0
        assert screen.query_one("#chat-pane").region.width == 0  # hidden
        await pilot.click(f"#tab-{tab}")  # the tab bar has the focus now
        await pilot.press("h", "i")
        await wait_until(pilot, lambda: screen.shown_tab == "chat")
        assert screen.query_one(PromptInput).value == "hi"
        await pilot.press("alt+1")
        assert screen.shown_tab == "chat" and screen.focused is screen.query_one(PromptInput)


async def test_ctrl_page_down_and_up_step_through_the_tabs():
    async with make_app().run_test(size=(80, 24)) as pilot:
        screen = pilot.app.main_screen
        seen = []
        for _ in range(5):
            await pilot.press("ctrl+pagedown")
            seen.append(screen.shown_tab)
        assert seen == ["ledger", "kv", "speed", "thermal", "chat"]
        await pilot.press("ctrl+pageup")
        assert screen.shown_tab == "thermal"
        await pilot.press("ctrl+pagedown")
        assert screen.shown_tab == "chat" and screen.focused is screen.query_one(PromptInput)
