"""The footer shows every key of the main screen at every size, and Ctrl+L's word is the Load button's."""

import pytest
from fakes import make_app, wait_until
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from workbench.ui.engine_session import IDLE, LOADED

KEYS = {"ctrl+l", "escape", "ctrl+s", "f2", "f3", "f4", "f5", "f6", "ctrl+r", "ctrl+n", "ctrl+q", "ctrl+p"}


def footer_keys(screen) -> dict[str, str]:
    """key -> description of every footer key drawn wholly on the screen."""
    footer = screen.query_one(Footer)
    shown = {}
    for key in footer.query(FooterKey):
        region = key.region
        whole = region.width >= key.render().cell_len  # "^q Qu" is not "^q Quit"
        palette = footer.query_one(".-command-palette").region
        hidden = key.key != "ctrl+p" and region.overlaps(palette)
        if whole and not hidden and screen.region.contains_region(region) and footer.region.contains_region(region):
            shown[key.key] = key.description
    return shown


@pytest.mark.parametrize("size", [(80, 24), (120, 34), (160, 48)])
async def test_every_key_is_on_screen_in_the_footer(size):
    async with make_app().run_test(size=size) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        await pilot.press("ctrl+l")  # loaded, the key's longest word: Unload
        await wait_until(pilot, lambda: screen.phase == LOADED)
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Unload")
        shown = footer_keys(pilot.app.screen)
        assert KEYS <= set(shown), f"missing at {size}: {sorted(KEYS - set(shown))}"
        # no two keys drawn over each other
        regions = sorted(key.region for key in pilot.app.screen.query(FooterKey))
        for one, other in zip(regions, regions[1:]):
            assert not one.overlaps(other), (one, other)


async def test_the_load_key_says_what_the_button_says():
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(120, 34)) as pilot:
        screen = pilot.app.main_screen
        button = screen.query_one("#load-button")
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Load")
        assert str(button.label) == "Load"
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Unload")
        assert str(button.label) == "Unload"
        screen.query_one("#preset-select").value = "long-context-kv4"
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Reload")
        assert str(button.label) == "Reload"
        screen.query_one("#preset-select").value = "as-is"
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Unload")
        await pilot.press("ctrl+l")  # the key does what it says: unloads
        await wait_until(pilot, lambda: screen.phase == IDLE)
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Load")


async def test_the_footer_rebuilds_its_keys_only_when_what_they_show_changed():
    async with make_app().run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        footer = screen.query_one(Footer)
        first = footer.query(FooterKey).first()
        # focus moves and binding refreshes that change no key: the same key widgets stay
        for _ in range(5):
            screen.refresh_bindings()
            screen.focus_next()
            await pilot.pause()
        assert footer.query(FooterKey).first() is first
        # a load changes Ctrl+L's word: rebuilt once, with the new word
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        await wait_until(pilot, lambda: footer_keys(screen).get("ctrl+l") == "Unload")
        assert footer.query(FooterKey).first() is not first
