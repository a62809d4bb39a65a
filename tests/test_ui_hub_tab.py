"""The model screen's Hub tab: a download from the (local test) hub becomes the chosen model."""

from fakes import make_app, wait_until
from hubserver import hub  # noqa: F401 - the fixture

from workbench.core.hub.cache import cached_models
from workbench.core.paths import bundled_model_path

REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"  # the first curated repository: listed when the tab opens
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"


async def open_hub_files(pilot, rows: int = 1):
    """Open the model screen's Hub tab and put the cursor on the first of the curated repository's files."""
    await pilot.press("f2")
    await wait_until(pilot, lambda: pilot.app.screen.query("#model-tabs"))
    models = pilot.app.screen
    models.query_one("#model-tabs").active = "hub-tab"
    files = models.query_one("#hub-files")
    await wait_until(pilot, lambda: files.row_count == rows, 30)
    files.focus()
    files.move_cursor(row=0)
    return models


async def test_a_model_downloaded_in_the_hub_tab_is_selected_on_the_main_screen(hub):  # noqa: F811
    hub.add_repo(REPO, {FILE: bundled_model_path()}, downloads=4_000)
    async with make_app(device="rk3588s-4gb").run_test(size=(180, 50)) as pilot:
        main = pilot.app.main_screen
        models = await open_hub_files(pilot)
        await wait_until(pilot, lambda: not models.query_one("#hub-download").disabled, 30)
        models.query_one("#hub-download").press()  # not a click: the preview above it is still growing
        await wait_until(pilot, lambda: pilot.app.screen is main, 60)
        (cached,) = cached_models()
        # the screen's result reaches the main screen in a message after the pop: wait for it, not for a moment
        await wait_until(pilot, lambda: main.selection.model_path == cached.path, 60)
        assert cached.repo == REPO
        assert main.query_one("#model-select").value == str(cached.path)
        await wait_until(pilot, lambda: main.ledger is not None and main.ledger.device == "rk3588s-4gb")


async def test_the_fit_preview_follows_the_device_chosen_after_the_model_screen_was_first_opened(hub):  # noqa: F811
    hub.add_repo(REPO, {FILE: bundled_model_path()}, downloads=4_000)
    async with make_app(device="rk3588s-4gb").run_test(size=(180, 50)) as pilot:
        main = pilot.app.main_screen

        async def preview_of_first_file() -> str:
            preview = (await open_hub_files(pilot)).query_one("#hub-preview")
            await wait_until(pilot, lambda: " on " in str(preview.render()), 30)
            return str(preview.render())

        assert "on rk3588s-4gb" in await preview_of_first_file()
        await pilot.press("escape")
        await wait_until(pilot, lambda: pilot.app.screen is main)
        main.query_one("#device-select").value = "raspberry-pi-5-8gb"
        await wait_until(pilot, lambda: main.ledger is not None and main.ledger.device == "raspberry-pi-5-8gb")
        text = await preview_of_first_file()
        assert "on raspberry-pi-5-8gb" in text and "rk3588s-4gb" not in text
