"""SVG snapshots of the main, presets, models and bench screens at 80x24, 120x34 and 160x48."""

import pytest
from fakes import make_app, wait_until

from workbench.ui.engine_session import LOADED
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import ChartView

# A shipped device profile (the detected host differs between machines), one telemetry sample
# (the interval outlasts the test) and one message per token chunk (the fake's engine clock then
# fixes every point of the speed chart): the same pixels on every run.
DEVICE = "jetson-orin-nano-8gb"
SIZES = {"80x24": (80, 24), "120x34": (120, 34), "160x48": (160, 48)}


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No user presets, remembered folders or cached models: the same screens on every machine's run."""
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))


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
    await wait_until(pilot, lambda: screen.ledger is not None)
    await pilot.pause()  # the tab's layout first: the chart's room is then final
    await wait_until(pilot, lambda: chart_settled(screen))
    await pilot.pause()


def chart_settled(screen) -> bool:
    """The speed chart (when shown) is drawn for the room it has now: no redraw is still to come."""
    chart = screen.query_one(ChartView)
    region = chart.content_region
    if region.width < 10 or region.height < 4:
        return True  # hidden behind another tab: nothing drawn
    return chart.drawn_size == (region.width, region.height) and not chart.parent._dirty


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare, size):
    assert snap_compare(snapshot_app(), terminal_size=SIZES[size], run_before=one_answer)


def test_main_screen_small_ledger_tab(snap_compare):
    async def ledger_tab(pilot):
        await one_answer(pilot, "ledger")

    assert snap_compare(snapshot_app(), terminal_size=(80, 24), run_before=ledger_tab)


@pytest.mark.parametrize("size", SIZES)
def test_presets_screen(snap_compare, size):
    async def open_presets(pilot):
        await wait_until(pilot, lambda: pilot.app.main_screen.ledger is not None)
        await pilot.press("f3")
        await wait_until(pilot, lambda: pilot.app.screen.query("#preset-verdict"))
        screen = pilot.app.screen
        await wait_until(pilot, lambda: "FITS" in str(screen.query_one("#preset-verdict").content))
        pilot.app.clear_notifications()
        await pilot.pause(0.3)

    assert snap_compare(snapshot_app(), terminal_size=SIZES[size], run_before=open_presets)


@pytest.mark.parametrize("size", SIZES)
def test_models_screen(snap_compare, size):
    async def open_models(pilot):
        await pilot.press("f2")
        await wait_until(pilot, lambda: pilot.app.screen.query("#model-list"))
        screen = pilot.app.screen
        await wait_until(pilot, lambda: screen.entries and not screen.query_one("#use-model").disabled)
        pilot.app.clear_notifications()
        await pilot.pause(0.3)

    assert snap_compare(snapshot_app(), terminal_size=SIZES[size], run_before=open_models)


@pytest.mark.parametrize("size", SIZES)
def test_bench_screen(snap_compare, size):
    async def open_bench(pilot):
        from workbench.ui.screens.bench_screen import BenchScreen

        await pilot.press("f4")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, BenchScreen))
        pilot.app.clear_notifications()
        await pilot.pause(0.5)

    assert snap_compare(snapshot_app(), terminal_size=SIZES[size], run_before=open_bench)
