"""SVG snapshots of the main screen after one answer, at 160x48 (grid) and 80x24 (tabs)."""

from fakes import make_app, wait_until

from workbench.ui.screens.main_screen import LOADED
from workbench.ui.widgets.prompt_input import PromptInput

# A shipped device profile (the detected host differs between machines), one telemetry sample
# (the interval outlasts the test) and one message per token chunk (the fake's engine clock then
# fixes every point of the speed chart): the same pixels on every run.
DEVICE = "jetson-orin-nano-8gb"


def snapshot_app():
    return make_app(device=DEVICE, telemetry_interval_s=3600, token_batch_interval_s=0)


async def one_answer(pilot, tab: str = "chat") -> None:
    screen = pilot.app.main_screen
    await wait_until(pilot, lambda: screen.ledger is not None)
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: screen.phase == LOADED)
    prompt = screen.query_one(PromptInput)
    prompt.value = "Will it fit on the Jetson?"
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(screen.conversation.messages) == 2 and screen.phase == LOADED)
    screen.show_tab(tab)
    prompt.cursor_blink = False
    pilot.app.clear_notifications()
    await pilot.pause(0.6)  # one redraw tick of the speed chart
    await wait_until(pilot, lambda: screen.ledger is not None)


def test_main_screen_wide(snap_compare):
    assert snap_compare(snapshot_app(), terminal_size=(160, 48), run_before=one_answer)


def test_main_screen_small_chat_tab(snap_compare):
    assert snap_compare(snapshot_app(), terminal_size=(80, 24), run_before=one_answer)


def test_main_screen_small_ledger_tab(snap_compare):
    async def ledger_tab(pilot):
        await one_answer(pilot, "ledger")

    assert snap_compare(snapshot_app(), terminal_size=(80, 24), run_before=ledger_tab)
