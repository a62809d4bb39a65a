"""Every modal at 80x24 (the smallest supported terminal): its buttons are on screen, and Tab never focuses
a field that cannot be seen (the dialog scrolls it into view)."""

import pytest
from fakes import make_app, wait_until

from workbench.core.engine.events import Sampling
from workbench.ui.conversation import Conversation
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.overbudget_modal import OverbudgetModal
from workbench.ui.screens.save_modal import SaveTranscriptModal
from workbench.ui.screens.settings_modal import SettingsModal

SMALL = (80, 24)


def visible_in(widget, dialog) -> bool:
    """The whole of `widget` lies inside the dialog's visible content, above its docked buttons, on the screen."""
    region, view = widget.region, dialog.content_region
    buttons_top = dialog.query_one(".dialog-buttons").region.y
    return (region.height > 0 and view.contains_region(region) and region.bottom <= buttons_top
            and widget.screen.region.contains_region(region))


async def check_modal(pilot, modal, buttons: tuple[str, ...]) -> None:
    await wait_until(pilot, lambda: pilot.app.screen is modal and modal.query(".dialog-buttons Button"))
    await pilot.pause()
    dialog = modal.query_one(".dialog")
    for button_id in buttons:
        button = modal.query_one(f"#{button_id}")
        # docked below the scrolling content: inside the dialog's border, inside the 24 rows
        assert button.region.height == 3 and pilot.app.screen.region.contains_region(button.region), button_id
        assert dialog.region.contains_region(button.region), button_id
    seen = set()
    for _ in range(len(modal.focus_chain) + 1):
        await pilot.press("tab")
        await pilot.pause()
        focused = modal.focused
        assert focused is not None
        seen.add(focused.id)
        if focused is dialog:
            continue  # the dialog itself takes focus so that the arrow keys scroll it
        if focused in modal.query(".dialog-buttons Button"):
            assert pilot.app.screen.region.contains_region(focused.region), focused.id
        else:
            assert visible_in(focused, dialog), f"{focused.id} focused at {focused.region}, view {dialog.content_region}"
    assert set(buttons) <= seen


async def test_the_settings_dialog_shows_max_tokens_problems_and_buttons_at_80x24():
    async with make_app().run_test(size=SMALL) as pilot:
        await pilot.pause()
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsModal))
        modal = pilot.app.screen
        await check_modal(pilot, modal, ("cancel", "apply"))
        # the last field, reached by Tab, is in view; a bad value there names itself and disables Apply
        field = modal.query_one("#sampling-max_tokens")
        modal.query_one("#system-prompt").focus()
        await pilot.pause()
        field.focus()
        await wait_until(pilot, lambda: visible_in(field, modal.query_one(".dialog")), what="max tokens in view")
        field.value = "0"
        await pilot.pause()
        assert modal.query_one("#apply").disabled
        assert "max_tokens" in str(modal.query_one("#settings-problems").content)


async def test_the_overbudget_dialog_shows_every_fix_and_both_buttons_at_80x24(tmp_path):
    device = tmp_path / "tiny-board.toml"
    device.write_text('name = "tiny-board"\nram_total_mb = 256\nmem_bandwidth_gbs = 10\ncores = 4\n\n'
                      '[reserves_mb]\nos = 200\n')
    async with make_app(device=str(device)).run_test(size=SMALL) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        assert screen.ledger.verdict == "does not fit" and len(screen.ledger.fixes) >= 2
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, OverbudgetModal))
        modal = pilot.app.screen
        await check_modal(pilot, modal, ("back", "load-anyway"))
        dialog = modal.query_one(".dialog")
        fixes = modal.query_one("#fixes")
        dialog.scroll_to_widget(fixes, animate=False)  # the reader scrolls down to the last fix
        await pilot.pause()
        assert dialog.max_scroll_y > 0  # it does not fit 24 rows: it scrolls rather than cutting
        last = len(screen.ledger.fixes[:4])
        assert f"[{last}]" in str(fixes.content)
        assert fixes.region.bottom <= dialog.content_region.bottom
        # the buttons stayed where they were while the content scrolled
        assert pilot.app.screen.region.contains_region(modal.query_one("#load-anyway").region)


@pytest.mark.parametrize("which", ["confirm", "save"])
async def test_the_confirm_and_save_dialogs_keep_their_buttons_at_80x24(which):
    async with make_app().run_test(size=SMALL) as pilot:
        await pilot.pause()
        if which == "confirm":
            body = "\n".join(f"line {n} of a long explanation" for n in range(30))
            modal, buttons = ConfirmModal("Discard?", body, "Discard"), ("back", "confirm")
        else:
            modal, buttons = SaveTranscriptModal(Conversation(system_prompt="s")), ("cancel", "save")
        pilot.app.push_screen(modal)
        await check_modal(pilot, modal, buttons)


async def test_the_settings_dialog_fits_without_scrolling_at_160x48():
    async with make_app().run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        pilot.app.push_screen(SettingsModal("be brief", Sampling()))
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsModal))
        await pilot.pause()
        assert pilot.app.screen.query_one(".dialog").max_scroll_y == 0
